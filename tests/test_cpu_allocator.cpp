// The CPU backend's caching allocator: alignment, reuse, the bound, cross-thread frees with no
// leak, turning caching off, zero-byte blocks and the ASYNCND_CPU_CACHE_MB rule.
#include <catch2/catch.hpp>

#include <asyncnd/asyncnd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "cpu/caching_allocator.h"
#include "cpu/cpu_backend.h"
#include "test_util.h"

using asyncnd::detail::Backend;
using asyncnd::detail::CachingAllocator;

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

Backend& cpu() { return asyncnd::detail::cpu_backend(); }
CachingAllocator::Stats stats() { return CachingAllocator::instance().stats(); }

// Bytes taken from the OS and neither cached nor released: what callers hold. With no other
// thread allocating, a test that frees everything it allocated leaves it unchanged.
std::size_t held_bytes() {
  const CachingAllocator::Stats s = stats();
  return s.os_bytes - s.shared_bytes - s.thread_bytes;
}

// Sets the bound for one test and restores the previous one, emptying the shared cache first so
// the test sees only its own blocks there. The engine is idle, so nothing else allocates.
class LimitScope {
 public:
  explicit LimitScope(std::size_t bytes) : saved_(asyncnd::detail::cpu_cache_limit()) {
    asyncnd::engine().waitall();
    asyncnd::detail::set_cpu_cache_limit(0);
    asyncnd::detail::set_cpu_cache_limit(bytes);
  }
  ~LimitScope() { asyncnd::detail::set_cpu_cache_limit(saved_); }
  LimitScope(const LimitScope&) = delete;
  LimitScope& operator=(const LimitScope&) = delete;

 private:
  std::size_t saved_;
};

bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

// Fills a block with a byte derived from `tag`, checks it later: a block handed out twice while
// live would show up as the other owner's pattern.
void fill(void* p, std::size_t bytes, std::uint32_t tag) {
  std::memset(p, static_cast<int>(tag & 0xff), bytes < 256 ? bytes : 256);
  if (bytes >= 4) std::memcpy(static_cast<char*>(p) + bytes - 4, &tag, 4);
}
bool check(const void* p, std::size_t bytes, std::uint32_t tag) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < (bytes < 256 ? bytes : 256) && i + 4 < bytes; ++i)
    if (c[i] != (tag & 0xff)) return false;
  std::uint32_t end = 0;
  if (bytes >= 4) std::memcpy(&end, c + bytes - 4, 4);
  return bytes < 4 || end == tag;
}

}  // namespace

TEST_CASE("cpu allocator: every size class is 64-byte aligned, writable and distinct", "[alloc]") {
  LimitScope limit(CachingAllocator::default_limit());
  const std::size_t before = held_bytes();
  for (int round = 0; round < 2; ++round) {  // the second round gets cached blocks back
    std::vector<std::pair<void*, std::size_t>> live;
    for (std::size_t bytes : {0, 1, 8, 63, 64, 65, 127, 1000, 4095, 4096, 4097, 8191, 8192,
                              65537, 1 << 20, 4000000}) {
      for (int k = 0; k < 3; ++k) {
        void* p = cpu().alloc(0, bytes);
        INFO("bytes=" << bytes);
        REQUIRE(p != nullptr);
        CHECK(aligned64(p));
        std::memset(p, 0xab, bytes);  // the whole request is ours (ASan checks it)
        live.emplace_back(p, bytes);
      }
    }
    for (std::size_t i = 0; i < live.size(); ++i)
      for (std::size_t j = i + 1; j < live.size(); ++j) CHECK(live[i].first != live[j].first);
    for (auto& [p, bytes] : live) cpu().free(0, p, bytes);
  }
  if (CachingAllocator::caching_built()) CHECK(held_bytes() == before);
}

TEST_CASE("cpu allocator: a freed block comes back for the same size", "[alloc]") {
  if (!CachingAllocator::caching_built()) {
    WARN("this build bypasses the cache (AddressSanitizer): nothing to reuse");
    return;
  }
  LimitScope limit(CachingAllocator::default_limit());

  SECTION("small: from this thread's list") {
    void* p = cpu().alloc(0, 8);
    const auto s0 = stats();
    cpu().free(0, p, 8);
    CHECK(stats().thread_bytes == s0.thread_bytes + 64);
    void* q = cpu().alloc(0, 40);  // same 64-byte class
    CHECK(q == p);
    CHECK(stats().thread_bytes == s0.thread_bytes);
    CHECK(stats().os_bytes == s0.os_bytes);  // no new block from the OS
    cpu().free(0, q, 40);
  }

  SECTION("large: from the shared cache, by rounded size") {
    const std::size_t bytes = 4000000, rounded = 4001792;  // 977 pages of 4 KiB
    void* p = cpu().alloc(0, bytes);
    const auto s0 = stats();
    cpu().free(0, p, bytes);
    CHECK(stats().shared_bytes == s0.shared_bytes + rounded);
    CHECK(asyncnd::detail::cpu_cached_bytes() >= rounded);
    void* other = cpu().alloc(0, 2 * bytes);  // another size does not take it
    CHECK(other != p);
    void* q = cpu().alloc(0, rounded - 100);  // same page count
    CHECK(q == p);
    CHECK(stats().shared_bytes == s0.shared_bytes);
    CHECK(stats().os_bytes == s0.os_bytes + 8003584);  // only `other` (1954 pages) is new
    cpu().free(0, q, rounded - 100);
    cpu().free(0, other, 2 * bytes);
  }
}

TEST_CASE("cpu allocator: the shared cache stays within its bound, evicting the oldest",
          "[alloc]") {
  if (!CachingAllocator::caching_built()) {
    WARN("this build bypasses the cache (AddressSanitizer): no bound to check");
    return;
  }
  LimitScope limit(10 * kMiB);
  const std::size_t held = held_bytes();

  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(cpu().alloc(0, 3 * kMiB));
  for (void* p : blocks) cpu().free(0, p, 3 * kMiB);
  CHECK(stats().shared_bytes == 9 * kMiB);  // three fit; the other five went back to the OS
  CHECK(held_bytes() == held);

  // Two 4 MiB blocks: each evicts the oldest 3 MiB blocks until it fits.
  void* a = cpu().alloc(0, 4 * kMiB);
  void* b = cpu().alloc(0, 4 * kMiB);
  cpu().free(0, a, 4 * kMiB);
  CHECK(stats().shared_bytes == 10 * kMiB);  // 3 + 3 + 4
  cpu().free(0, b, 4 * kMiB);
  CHECK(stats().shared_bytes == 8 * kMiB);  // 4 + 4
  const std::size_t os = stats().os_bytes;
  void* c = cpu().alloc(0, 4 * kMiB);
  void* d = cpu().alloc(0, 4 * kMiB);
  CHECK(stats().os_bytes == os);  // both came from the cache
  CHECK(((c == a && d == b) || (c == b && d == a)));
  cpu().free(0, c, 4 * kMiB);
  cpu().free(0, d, 4 * kMiB);

  // A block larger than the whole bound is never cached.
  void* huge = cpu().alloc(0, 16 * kMiB);
  cpu().free(0, huge, 16 * kMiB);
  CHECK(stats().shared_bytes == 8 * kMiB);

  // Lowering the bound releases at once.
  asyncnd::detail::set_cpu_cache_limit(5 * kMiB);
  CHECK(stats().shared_bytes <= 5 * kMiB);

  // Small blocks: this thread keeps two chains per class, the rest spill to the shared lists
  // until the bound, then go back to the OS.
  asyncnd::detail::set_cpu_cache_limit(64 * 1024);
  std::vector<void*> small;
  for (int i = 0; i < 5000; ++i) small.push_back(cpu().alloc(0, 100));
  for (void* p : small) cpu().free(0, p, 100);
  CHECK(stats().shared_bytes <= 64 * 1024);
  CHECK(held_bytes() == held);
}

TEST_CASE("cpu allocator: blocks allocated on one thread and freed on another do not leak",
          "[alloc]") {
  const bool cached = CachingAllocator::caching_built();
  // A small bound makes the spill-and-release path run as often as the reuse path.
  for (std::size_t bound : {std::size_t(256) * 1024, CachingAllocator::default_limit()}) {
    LimitScope limit(bound);
    const std::size_t held = held_bytes();
    const std::size_t threads_before = stats().thread_bytes;
    const std::uint64_t seed = asyncnd_test::test_seed("cpu allocator cross-thread");
    const int n = static_cast<int>(asyncnd_test::scaled(40000, 2000));

    // Two producer -> consumer pairs at once: producers allocate and fill, consumers check the
    // fill and free. The classes overlap, so chains cross between all four threads.
    auto pair = [&](std::uint64_t pair_seed, int* bad) {
      std::mutex mu;
      std::condition_variable cv;
      std::deque<std::pair<void*, std::size_t>> queue;
      bool done = false;
      std::thread consumer([&] {
        std::uint32_t tag = 0;
        for (;;) {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return !queue.empty() || done; });
          if (queue.empty()) return;
          auto [p, bytes] = queue.front();
          queue.pop_front();
          lock.unlock();
          if (!check(p, bytes, tag++)) ++*bad;
          cpu().free(0, p, bytes);
        }
      });
      std::thread producer([&] {
        std::mt19937_64 rng(pair_seed);
        for (int i = 0; i < n; ++i) {
          // Mostly small (E5's arrays), one in 64 large, now and then zero bytes.
          const std::uint64_t r = rng();
          std::size_t bytes = r % 64 == 0 ? 4096 + (r >> 8) % (256 * 1024)
                              : r % 97 == 0 ? 0
                                            : 1 + (r >> 8) % 4096;
          void* p = cpu().alloc(0, bytes);
          if (!aligned64(p)) ++*bad;
          fill(p, bytes, static_cast<std::uint32_t>(i));
          {
            std::lock_guard<std::mutex> lock(mu);
            queue.emplace_back(p, bytes);
          }
          cv.notify_one();
        }
        std::lock_guard<std::mutex> lock(mu);
        done = true;
        cv.notify_one();
      });
      producer.join();
      consumer.join();
    };
    int bad1 = 0, bad2 = 0;
    std::thread t1(pair, seed, &bad1);
    std::thread t2(pair, seed + 1, &bad2);
    t1.join();
    t2.join();

    INFO("bound=" << bound << " n=" << n);
    CHECK(bad1 == 0);
    CHECK(bad2 == 0);
    if (cached) {
      const auto s = stats();
      CHECK(s.shared_bytes <= bound);
      CHECK(s.thread_bytes == threads_before);  // exited threads handed their blocks back
      CHECK(held_bytes() == held);              // every block is cached or back with the OS
    }
  }
}

TEST_CASE("cpu allocator: a limit of 0 turns all caching off", "[alloc]") {
  LimitScope limit(0);
  CHECK(asyncnd::detail::cpu_cache_limit() == 0);
  const auto s0 = stats();
  CHECK(s0.shared_bytes == 0);
  for (std::size_t bytes : {std::size_t(0), std::size_t(8), std::size_t(4096), 3 * kMiB}) {
    for (int i = 0; i < 200; ++i) {
      void* p = cpu().alloc(0, bytes);
      CHECK(aligned64(p));
      cpu().free(0, p, bytes);
    }
  }
  const auto s1 = stats();
  CHECK(s1.shared_bytes == 0);
  CHECK(s1.thread_bytes <= s0.thread_bytes);  // this thread dropped its own list
  CHECK(s1.os_bytes == s0.os_bytes);          // every free went back to the OS

  // Engine arrays made and dropped with caching off leave nothing behind either.
  asyncnd::engine().waitall();
  const auto s2 = stats();
  {
    asyncnd::NDArray x = asyncnd::nd::ones({1, 2});
    asyncnd::NDArray y = x + 1;
    asyncnd::NDArray big = asyncnd::nd::zeros({512, 1024});
    CHECK(y.to_vector() == std::vector<float>{2, 2});
  }
  asyncnd::engine().waitall();
  CHECK(stats().shared_bytes == 0);
  CHECK(stats().os_bytes <= s2.os_bytes);
}

// The header promises each thread drops its private blocks on its next call once caching is off;
// only small calls did, so a thread making large arrays kept its small blocks.
TEST_CASE("cpu allocator: with caching off, a thread's next large call drops its small blocks",
          "[alloc]") {
  if (!CachingAllocator::caching_built()) {
    SUCCEED("SKIPPED: the cache is compiled out in this build (AddressSanitizer)");
    return;
  }
  asyncnd::engine().waitall();
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;  // 1: the thread holds private blocks; 2: caching is off; 3: it made a large call
  auto go = [&](int s) {
    std::lock_guard<std::mutex> l(mu);
    step = s;
    cv.notify_all();
  };
  auto await = [&](int s) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return step >= s; });
  };
  std::size_t kept = 0;
  std::thread t([&] {
    const std::size_t before = stats().thread_bytes;
    std::vector<void*> ps;
    for (int i = 0; i < 20; ++i) ps.push_back(cpu().alloc(0, 256));
    for (void* p : ps) cpu().free(0, p, 256);
    kept = stats().thread_bytes - before;
    go(1);
    await(2);
    void* big = cpu().alloc(0, 3 * kMiB);
    cpu().free(0, big, 3 * kMiB);
    go(3);
  });
  await(1);
  CHECK(kept > 0);
  {
    LimitScope limit(0);
    const std::size_t off = stats().thread_bytes;  // the thread's blocks are still its own
    go(2);
    await(3);
    CHECK(stats().thread_bytes == off - kept);
  }
  t.join();
}

// Run by the test below in a child process whose ASYNCND_MAX_INFLIGHT_BYTES is bad: the engine,
// made at the first array, throws for it. The array's block was allocated first, and leaked.
TEST_CASE("cpu allocator: arrays refused for a bad engine variable (child)", "[.][bad-env-child]") {
  if (std::getenv("ASYNCND_TEST_BAD_ENV_CHILD") == nullptr) {
    SUCCEED("SKIPPED: run by the test below, in a child process");
    return;
  }
  const std::size_t before = stats().os_bytes;
  for (int i = 0; i < 20; ++i) {
    CHECK_THROWS_WITH(asyncnd::nd::zeros({1 << 20}),
                      Catch::Contains("ASYNCND_MAX_INFLIGHT_BYTES") && Catch::Contains("'12MB'"));
  }
  CHECK(stats().os_bytes == before);
  std::printf("child done\n");
}

TEST_CASE("cpu allocator: an array refused for a bad engine variable keeps no memory",
          "[alloc][errors]") {
  int status = 0;
  const std::string out = asyncnd_test::run_child(
      "ASYNCND_TEST_BAD_ENV_CHILD=1 ASYNCND_MAX_INFLIGHT_BYTES=12MB",
      "cpu allocator: arrays refused for a bad engine variable (child)", &status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("child done") != std::string::npos);
}

TEST_CASE("cpu allocator: cached bytes are not counted as in use by the engine", "[alloc]") {
  LimitScope limit(CachingAllocator::default_limit());
  auto& eng = asyncnd::engine();
  eng.waitall();
  const auto in_use = eng.stats().bytes_in_use;
  const std::size_t cached = asyncnd::detail::cpu_cached_bytes();
  {
    asyncnd::NDArray a = asyncnd::nd::ones({1000, 1000});
    asyncnd::NDArray b = a + 1;
    b.wait_to_read();
    CHECK(eng.stats().bytes_in_use == in_use + 2 * 4000000);
  }
  eng.waitall();
  CHECK(eng.stats().bytes_in_use == in_use);
  if (CachingAllocator::caching_built())
    CHECK(asyncnd::detail::cpu_cached_bytes() == cached + 2 * 4001792);
}

TEST_CASE("cpu allocator: zero-byte blocks are unique and reusable", "[alloc]") {
  LimitScope limit(CachingAllocator::default_limit());
  void* a = cpu().alloc(0, 0);
  void* b = cpu().alloc(0, 0);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a != b);
  CHECK(aligned64(a));
  CHECK(aligned64(b));
  cpu().free(0, b, 0);
  void* c = cpu().alloc(0, 64);
  if (CachingAllocator::caching_built()) CHECK(c == b);  // 0 shares the 64-byte class
  cpu().free(0, c, 64);
  cpu().free(0, a, 0);
  cpu().free(0, nullptr, 0);
  cpu().free(0, nullptr, 4 * kMiB);
}

TEST_CASE("cpu allocator: a thread that exits hands its blocks back", "[alloc]") {
  if (!CachingAllocator::caching_built()) {
    WARN("this build bypasses the cache (AddressSanitizer): no per-thread lists");
    return;
  }
  LimitScope limit(CachingAllocator::default_limit());
  const auto s0 = stats();
  std::size_t inside = 0;
  std::thread([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 1000; ++i) blocks.push_back(cpu().alloc(0, 200));
    for (void* p : blocks) cpu().free(0, p, 200);
    inside = stats().thread_bytes;
  }).join();
  CHECK(inside > s0.thread_bytes);            // it kept some while it ran
  CHECK(stats().thread_bytes == s0.thread_bytes);  // and none after it exited
  CHECK(stats().shared_bytes + stats().thread_bytes + held_bytes() == stats().os_bytes);
  CHECK(held_bytes() == s0.os_bytes - s0.shared_bytes - s0.thread_bytes);
}

TEST_CASE("cpu allocator: impossible sizes and ASYNCND_CPU_CACHE_MB values are reported",
          "[alloc]") {
  CHECK_THROWS_WITH(cpu().alloc(0, SIZE_MAX - 8),
                    Catch::Equals("cpu: out of memory allocating " + std::to_string(SIZE_MAX - 8) +
                                  " bytes"));
  CHECK(CachingAllocator::limit_from_env_value(nullptr) == CachingAllocator::default_limit());
  CHECK(CachingAllocator::default_limit() ==
        CachingAllocator::default_limit_for(asyncnd::program_memory_limit().bytes));
  CHECK(CachingAllocator::limit_from_env_value("0") == 0);
  CHECK(CachingAllocator::limit_from_env_value("16") == 16 * kMiB);
  CHECK(CachingAllocator::limit_from_env_value("1048576") == (std::size_t(1) << 40));
  for (const char* bad : {"", "-1", " 5", "5MB", "1.5", "1048577", "99999999999999999999999"}) {
    INFO("value '" << bad << "'");
    CHECK_THROWS_WITH(CachingAllocator::limit_from_env_value(bad),
                      Catch::StartsWith("ASYNCND_CPU_CACHE_MB: expected a size in MiB") &&
                          Catch::EndsWith(std::string("got '") + bad + "'"));
  }
}

TEST_CASE("cpu allocator: by default the cache takes back what the default engine may queue",
          "[alloc]") {
  // The default follows the engine's default byte bound: a quarter of the memory, at most 512 MiB.
  constexpr std::uint64_t kGiB = std::uint64_t(1) << 30;
  CHECK(CachingAllocator::default_limit_for(24 * kGiB) == 512 * kMiB);
  CHECK(CachingAllocator::default_limit_for(kGiB) == 256 * kMiB);
  CHECK(CachingAllocator::default_limit_for(kGiB / 2) == 128 * kMiB);
  CHECK(CachingAllocator::default_limit_for(0) == 512 * kMiB);  // memory unknown: the cap
  for (std::uint64_t mem : {kGiB / 4, 2 * kGiB, 64 * kGiB})
    CHECK(CachingAllocator::default_limit_for(mem) == asyncnd::default_max_inflight_bytes(mem));
  if (!CachingAllocator::caching_built()) {
    WARN("this build bypasses the cache (AddressSanitizer): nothing to reuse");
    return;
  }
  // A drain as E6 without a read makes one on the default engine: it held 323 MB under its 512 MiB
  // bound (an array dropped early counts twice), so blocks worth 0.6 of this program's default
  // byte bound are handed back at once, then asked for again. Every one comes from the cache,
  // none from the OS. (With the fixed 256 MiB of before, on a machine with 2 GiB or more, the
  // 307 MB of blocks took 51 MB from the OS again.)
  LimitScope limit(CachingAllocator::default_limit());
  const std::uint64_t bound =
      asyncnd::default_max_inflight_bytes(asyncnd::program_memory_limit().bytes);
  const std::size_t block = 8 * kMiB, n = static_cast<std::size_t>(bound * 6 / 10 / block);
  INFO("default byte bound " << bound << ", cache bound " << CachingAllocator::default_limit());
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < n; ++i) blocks.push_back(cpu().alloc(0, block));
  for (void* p : blocks) cpu().free(0, p, block);
  const std::size_t os_before = stats().os_bytes;
  for (void*& p : blocks) p = cpu().alloc(0, block);
  CHECK(stats().os_bytes == os_before);
  for (void* p : blocks) cpu().free(0, p, block);
}
