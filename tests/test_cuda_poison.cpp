// The CUDA backend's marks on the outputs of held calls whose batch failed to start
// (native/cuda/poisoned_blocks.h). The class has no CUDA in it, so it is checked here on every
// machine; the backend calls it at each read, write and reuse of a block (cuda_backend.cpp).
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "asyncnd/error.h"
#include "cuda/poisoned_blocks.h"

using asyncnd::Error;
using asyncnd::detail::PoisonedBlocks;

TEST_CASE("held calls: a failed batch's outputs fail their next read, until written again",
          "[device][cuda]") {
  PoisonedBlocks marks;
  float a = 0, b = 0, c = 0;
  CHECK(marks.empty());
  CHECK_NOTHROW(marks.check_read(&a));

  const void* outs[] = {&a, nullptr, &b};
  marks.mark(outs, 3, "cuda: 3 small kernels held on gpu(0) failed to start: an error");
  CHECK_FALSE(marks.empty());
  CHECK_THROWS_AS(marks.check_read(&a), Error);
  CHECK_THROWS_WITH(marks.check_read(&b),
                    Catch::Contains("3 small kernels held on gpu(0) failed to start: an error") &&
                        Catch::Contains("this array"));
  CHECK_NOTHROW(marks.check_read(&c));  // not in the batch
  CHECK_NOTHROW(marks.check_read(nullptr));

  marks.clear(&a);  // a new write (or a new array in the block)
  CHECK_NOTHROW(marks.check_read(&a));
  CHECK_THROWS(marks.check_read(&b));
  CHECK_FALSE(marks.empty());

  // A second failure keeps its own message; the first's marks stay.
  const void* more[] = {&c};
  marks.mark(more, 1, "cuda: 1 small kernels held on gpu(0) failed to start: another");
  CHECK_THROWS_WITH(marks.check_read(&c), Catch::Contains("another"));
  CHECK_THROWS_WITH(marks.check_read(&b), Catch::Contains("an error"));
  marks.clear(&b);
  marks.clear(&c);
  marks.clear(&c);  // clearing what is not marked changes nothing
  CHECK(marks.empty());
  CHECK_NOTHROW(marks.check_read(&b));
}

TEST_CASE("held calls: marks set, read and cleared from several threads at once",
          "[device][cuda]") {
  // The backend marks under its held calls' lock (the worker, or a thread that starts them) while
  // other threads read and clear under the blocks' lock: the marks' own lock orders them.
  PoisonedBlocks marks;
  std::vector<float> blocks(64);
  std::atomic<bool> stop{false};
  std::atomic<long> thrown{0}, wrong{0};  // (Catch's assertions are for the test's own thread)
  std::thread marker([&] {
    for (int round = 0; round < 2000; ++round) {
      const void* outs[8];
      for (int i = 0; i < 8; ++i) outs[i] = &blocks[static_cast<std::size_t>((round * 8 + i) % 64)];
      marks.mark(outs, 8, "failed round " + std::to_string(round));
    }
    stop = true;
  });
  std::thread reader([&] {
    while (!stop) {
      for (float& f : blocks) {
        try {
          marks.check_read(&f);
        } catch (const Error& e) {
          if (std::string(e.what()).find("failed round") == std::string::npos) ++wrong;
          ++thrown;
        }
      }
    }
  });
  std::thread clearer([&] {
    while (!stop)
      for (float& f : blocks) marks.clear(&f);
  });
  marker.join();
  reader.join();
  clearer.join();
  CHECK(wrong == 0);
  INFO("reads that found a mark: " << thrown.load());
  for (float& f : blocks) marks.clear(&f);
  CHECK(marks.empty());
  for (float& f : blocks) CHECK_NOTHROW(marks.check_read(&f));
}
