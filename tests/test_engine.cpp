// The engine's contract, case by case: overlap, ordering, errors, bad calls, deletion,
// backpressure, priorities, the profiler, stats and parallel_for.
#include <catch2/catch.hpp>

#include <asyncnd/detail/backend.h>  // detail::memory_limit_from
#include <asyncnd/engine.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_impl.h"  // detail::EngineAccess (core/src: internal)
#include "test_util.h"

using namespace asyncnd;
using asyncnd_test::ms_since;
using clk = std::chrono::steady_clock;

namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// An op that blocks a worker until the test opens the gate.
struct Gate {
  std::atomic<bool> open{false};
  void wait() const {
    while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
};

}  // namespace

TEST_CASE("independent ops overlap, dependent ones never do", "[engine]") {
  // The process's first waitall starts the backends (synchronize_devices): the CPU's GEMM
  // self-test took 60-110 ms under ThreadSanitizer, and CUDA's start (cudaGetDeviceCount) is
  // slow where a GPU exists (on an H200 machine the first measure below took 362 ms, not about
  // 150): both started here, before any clock.
  asyncnd::cpu_gemm();
  asyncnd::detail::synchronize_devices();
  for (int workers : {2, 4, 8}) {
    Engine eng(EngineOptions{EngineKind::kThreaded, workers});
    Var a = eng.new_var(), b = eng.new_var();
    auto t0 = clk::now();
    eng.push([] { sleep_ms(150); }, {}, {a});
    eng.push([] { sleep_ms(150); }, {}, {b});
    eng.waitall();
    const double independent = ms_since(t0);
    INFO(workers << " workers: two independent 150 ms ops took " << independent << " ms");
    CHECK(independent < 260);

    // Two readers of the same variable may also run together.
    t0 = clk::now();
    eng.push([] { sleep_ms(150); }, {a}, {});
    eng.push([] { sleep_ms(150); }, {a}, {});
    eng.waitall();
    CHECK(ms_since(t0) < 260);

    // Write-after-write and read-after-write are ordered: the intervals never intersect.
    std::atomic<int> running{0}, max_running{0};
    auto body = [&] {
      int now = ++running;
      int m = max_running.load();
      while (now > m && !max_running.compare_exchange_weak(m, now)) {
      }
      sleep_ms(40);
      --running;
    };
    t0 = clk::now();
    eng.push(body, {}, {a});
    eng.push(body, {}, {a});
    eng.push(body, {a}, {b});
    eng.push(body, {}, {a});  // write-after-read
    eng.waitall();
    CHECK(max_running.load() == 1);
    CHECK(ms_since(t0) >= 159);
  }
}

TEST_CASE("push returns at once, the naive engine runs ops inline", "[engine]") {
  Engine threaded(EngineOptions{EngineKind::kThreaded, 2});
  Var v = threaded.new_var();
  std::atomic<bool> ran{false};
  auto t0 = clk::now();
  threaded.push([&] { sleep_ms(100); ran = true; }, {}, {v});
  CHECK(ms_since(t0) < 50);
  CHECK_FALSE(ran.load());
  threaded.wait_to_read(v);
  CHECK(ran.load());

  Engine naive(EngineOptions{EngineKind::kNaive});
  Var w = naive.new_var();
  bool ran2 = false;
  naive.push([&] { ran2 = true; }, {}, {w});
  CHECK(ran2);
  CHECK(naive.kind() == EngineKind::kNaive);
}

TEST_CASE("an op's error surfaces at the wait and at waitall, dependents are skipped",
          "[engine][errors]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    Engine eng(EngineOptions{kind, 2});
    Var bad = eng.new_var(), dep = eng.new_var(), dep2 = eng.new_var(), other = eng.new_var();
    std::atomic<int> dependents_ran{0}, independent_ran{0};
    eng.push([] { throw std::runtime_error("kernel exploded"); }, {}, {bad},
             PushOptions{Device{}, 0, "exploding_op"});
    eng.push([&] { ++dependents_ran; }, {bad}, {dep}, PushOptions{Device{}, 0, "dependent"});
    eng.push([&] { ++dependents_ran; }, {dep}, {dep2});
    eng.push([&] { ++independent_ran; }, {}, {other});

    // The error, named after the failing op, reaches a wait on anything downstream.
    CHECK_THROWS_WITH(eng.wait_to_read(dep2),
                      Catch::Contains("exploding_op") && Catch::Contains("kernel exploded") &&
                          Catch::Contains("cpu(0)"));
    eng.wait_to_read(other);
    CHECK(independent_ran == 1);
    CHECK(dependents_ran == 0);
    // Rethrown once per variable.
    CHECK_NOTHROW(eng.wait_to_read(dep2));
    CHECK_THROWS_WITH(eng.wait_to_read(bad), Catch::Contains("kernel exploded"));
    CHECK_NOTHROW(eng.wait_to_read(bad));

    // waitall reports a failure nobody waited for, once.
    Var bad2 = eng.new_var();
    eng.push([] { throw 42; }, {}, {bad2}, PushOptions{Device{}, 0, "throws_int"});
    CHECK_THROWS_WITH(eng.waitall(),
                      Catch::Contains("throws_int") && Catch::Contains("unknown exception"));
    CHECK_NOTHROW(eng.waitall());

    // dep was poisoned too and nobody has waited on it yet: its error is still there.
    CHECK_THROWS_WITH(eng.wait_to_read(dep), Catch::Contains("kernel exploded"));

    // The engine keeps working, also on the variables that failed once their error was taken.
    int x = 0;
    eng.push([&] { x = 7; }, {}, {bad});
    eng.push([&] { x += 1; }, {bad}, {dep});
    eng.wait_to_read(dep);
    CHECK(x == 8);
    const EngineStats s = eng.stats();
    CHECK(s.pending == 0);
    CHECK(s.pushed == s.finished);
  }
}

TEST_CASE("a failed op does not deadlock waiters or deletions queued behind it", "[engine][errors]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  Var v = eng.new_var();
  bool deleted = false;
  eng.push([] { sleep_ms(20); throw std::runtime_error("late failure"); }, {}, {v});
  std::thread waiter([&] { CHECK_THROWS(eng.wait_to_read(v)); });
  waiter.join();
  eng.push([] { throw std::runtime_error("again"); }, {}, {v});
  eng.delete_var(v, [&] { deleted = true; });
  CHECK_THROWS_WITH(eng.waitall(), Catch::Contains("again"));
  CHECK(deleted);
}

TEST_CASE("bad calls throw at the call, naming the op, and queue nothing", "[engine][errors]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  Engine other(EngineOptions{EngineKind::kThreaded, 1});
  Var a = eng.new_var(), b = eng.new_var(), foreign = other.new_var(), gone = eng.new_var();
  eng.delete_var(gone);
  eng.waitall();
  const std::uint64_t pushed = eng.stats().pushed;
  bool ran = false;
  auto fn = [&] { ran = true; };

  CHECK_THROWS_WITH(eng.push(fn, {a}, {a}, PushOptions{Device{}, 0, "inplace"}),
                    Catch::Contains("inplace") && Catch::Contains("both read and written"));
  CHECK_THROWS_WITH(eng.push(fn, {Var()}, {b}, PushOptions{Device{}, 0, "nullop"}),
                    Catch::Contains("nullop") && Catch::Contains("null"));
  CHECK_THROWS_WITH(eng.push(fn, {gone}, {b}, PushOptions{Device{}, 0, "afterdelete"}),
                    Catch::Contains("afterdelete") && Catch::Contains("deleted"));
  CHECK_THROWS_WITH(eng.push(fn, {foreign}, {b}), Catch::Contains("another engine"));
  const Device absent = Device::gpu(asyncnd_test::kAbsentGpu);
  CHECK_THROWS_WITH(eng.push(fn, {a}, {b}, PushOptions{absent, 0, "on_gpu"}),
                    Catch::Contains("on_gpu") && Catch::Contains("gpu(4000)"));
  CHECK_THROWS_WITH(eng.push(fn, {a}, {b}, PushOptions{Device{DeviceKind::kCPU, 3}, 0, "cpu3"}),
                    Catch::Contains("cpu3") && Catch::Contains("cpu(3)"));
  CHECK_THROWS_WITH(eng.wait_to_read(gone), Catch::Contains("wait_to_read") &&
                                                Catch::Contains("deleted"));
  CHECK_THROWS_WITH(eng.delete_var(gone), Catch::Contains("delete_var"));
  CHECK_THROWS(eng.wait_to_read(Var()));
  CHECK_THROWS_WITH(eng.num_workers(absent), Catch::Contains("gpu(4000)"));
  CHECK(eng.num_workers() == 2);

  eng.waitall();
  CHECK_FALSE(ran);
  CHECK(eng.stats().pushed == pushed);
  // The variables named in the failed calls still work.
  eng.push(fn, {a}, {b});
  eng.wait_to_read(b);
  CHECK(ran);
}

TEST_CASE("waits from inside an op are refused, not deadlocked", "[engine][errors]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  Var v = eng.new_var(), w = eng.new_var();
  eng.push([&] { eng.waitall(); }, {}, {v}, PushOptions{Device{}, 0, "nested_wait"});
  CHECK_THROWS_WITH(eng.wait_to_read(v),
                    Catch::Contains("nested_wait") && Catch::Contains("inside an op"));
  // Pushing from inside an op is fine.
  std::atomic<int> x{0};
  eng.push([&] { eng.push([&] { x = 5; }, {}, {w}); }, {}, {v});
  eng.waitall();
  CHECK(x == 5);
}

TEST_CASE("wait_to_read sees the write and its error whether the waiter spins, parks, or its spin "
          "ends as the write does", "[engine]") {
  // The waiter watches the variable's count of completed accesses for about 50 us (kWaitSpin in
  // engine_impl.cpp), then queues a wait and parks at once: writes shorter, longer and about as
  // long as that exercise both paths and the moment between them.
  const std::vector<int> durations_us = {0, 5, 30, 40, 45, 50, 55, 60, 80, 2000};
  const int rounds = static_cast<int>(asyncnd_test::scaled(60, 6));
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  Var v = eng.new_var();
  int value = -1;  // written by the op, read after the wait: TSan checks the hand-off
  int step = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int us : durations_us) {
      ++step;
      const bool fail = step % 3 == 0;
      eng.push(
          [&value, step, us, fail] {
            const auto until = clk::now() + std::chrono::microseconds(us);
            while (clk::now() < until) {
            }
            value = step;
            if (fail) throw std::runtime_error("write " + std::to_string(step) + " failed");
          },
          {}, {v});
      INFO("step " << step << ", a write of " << us << " us");
      if (fail) {
        CHECK_THROWS_WITH(eng.wait_to_read(v), Catch::Contains("write " + std::to_string(step) + " failed"));
      } else {
        CHECK_NOTHROW(eng.wait_to_read(v));
      }
      CHECK(value == step);
    }
  }
  eng.delete_var(v);
  try {
    eng.waitall();
  } catch (const Error&) {  // the failures may be listed for waitall too: not this test's point
  }
}

TEST_CASE("deletion is deferred until every earlier use has finished", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  Var v = eng.new_var(), r = eng.new_var();
  std::atomic<bool> deleted{false}, used{false};
  Gate gate;
  eng.push([&] { gate.wait(); used = true; }, {v}, {r});
  const std::uint64_t live_before = eng.stats().live_vars;
  eng.delete_var(v, [&] { deleted = used.load(); });
  CHECK(v.deleted());
  sleep_ms(20);
  CHECK_FALSE(deleted.load());
  gate.open = true;
  eng.waitall();
  CHECK(deleted.load());
  v = Var();
  CHECK(eng.stats().live_vars == live_before - 1);
}

// A variable's completed reads are counted apart from the rest of its state (engine_impl.h,
// VarBlock): whatever waits for the reads to end (a write, a deletion, the freeing of a variable
// whose last handle went) must wait for every one of them, however they end.
TEST_CASE("a write, a deletion or a dropped handle waits for every running read of a variable",
          "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 4});
  const char* what = GENERATE("write", "delete", "drop");
  CAPTURE(what);
  const std::uint64_t live_before = eng.stats().live_vars;
  Var v = eng.new_var(), sink = eng.new_var();
  constexpr int kReaders = 3;
  Gate gates[kReaders];
  std::atomic<int> reads_done{0}, seen_at_end{-1};
  for (int i = 0; i < kReaders; ++i) {
    Gate* g = &gates[i];
    eng.push([g, &reads_done] { g->wait(); reads_done.fetch_add(1); }, {v}, {});
  }
  if (std::string(what) == "write") {
    eng.push([&] { seen_at_end = reads_done.load(); }, {}, {v});
  } else if (std::string(what) == "delete") {
    eng.delete_var(v, [&] { seen_at_end = reads_done.load(); });
  }
  v = Var();  // "drop": the last handle goes while the reads run
  // The readers end out of push order, one at a time.
  for (int i : {1, 2, 0}) {
    sleep_ms(5);
    CHECK(seen_at_end.load() == -1);
    CHECK(eng.stats().live_vars == live_before + 2);  // freed only after the last read
    gates[i].open = true;
  }
  eng.waitall();
  if (std::string(what) != "drop") CHECK(seen_at_end.load() == kReaders);
  CHECK(reads_done.load() == kReaders);
  CHECK(eng.stats().live_vars == live_before + 1);  // sink
  (void)sink;
}

TEST_CASE("reads ending while two threads write, delete and drop variables: each waits for all",
          "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 3});
  const std::uint64_t live_before = eng.stats().live_vars;
  const int rounds = asyncnd_test::scaled(3000, 300);
  std::atomic<int> wrong{0}, deleters{0}, expected_deleters{0};
  auto pusher = [&](unsigned seed) {
    std::uint32_t r = seed;
    for (int i = 0; i < rounds; ++i) {
      r = r * 1664525u + 1013904223u;
      auto reads = std::make_shared<std::atomic<int>>(0);
      const int nreads = 1 + static_cast<int>(r >> 28) % 4;
      Var v = eng.new_var();
      for (int k = 0; k < nreads; ++k) eng.push([reads] { reads->fetch_add(1); }, {v}, {});
      auto check = [reads, nreads, &wrong] {
        if (reads->load() != nreads) wrong.fetch_add(1);
      };
      switch ((r >> 8) % 3) {
        case 0:
          eng.push(check, {}, {v});
          break;
        case 1:
          expected_deleters.fetch_add(1);
          eng.delete_var(v, [check, &deleters] { check(); deleters.fetch_add(1); });
          break;
        default:
          break;  // the handle goes below, perhaps while the reads run
      }
    }
  };
  std::thread other(pusher, 7u);
  pusher(11u);
  other.join();
  eng.waitall();
  CHECK(wrong.load() == 0);
  CHECK(deleters.load() == expected_deleters.load());
  CHECK(eng.stats().live_vars == live_before);
}

TEST_CASE("an array's small variable, deleted while its op runs, is freed after 16 more such "
          "deletions or at waitall, and a large one, or any through Engine::delete_var, when its "
          "op ends", "[engine]") {
  using detail::EngineImpl;
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  const std::uint64_t live_before = eng.stats().live_vars;
  Gate gate;
  std::atomic<int> freed_first{0};
  {
    Var v = eng.new_var(), gated = eng.new_var();
    eng.push([&] { gate.wait(); }, {v}, {gated});
    // The path an array's storage takes (Chunk): a small one waits on this side.
    EngineImpl& impl = detail::EngineAccess::impl(eng);
    impl.delete_var(std::move(v), [&] { freed_first = 1; }, 64, /*may_defer=*/true);
    gate.open = true;
    eng.wait_to_read(gated);  // the op that read v is done
    CHECK(freed_first.load() == 0);  // not yet: nothing came after it
    // kDeferred more deletions of variables that queued ops use: the first one goes.
    std::vector<Var> keep;
    Gate gate2;
    Var blocker = eng.new_var();
    for (int i = 0; i < EngineImpl::kDeferred; ++i) {
      Var w = eng.new_var();
      eng.push([&] { gate2.wait(); }, {w}, {blocker});
      impl.delete_var(w, {}, 64, true);
    }
    CHECK(freed_first.load() == 1);
    CHECK(eng.stats().live_vars == live_before + 2 + EngineImpl::kDeferred);  // gated, blocker
    gate2.open = true;
    eng.waitall();  // frees the rest
    CHECK(eng.stats().live_vars == live_before + 2);
  }
  CHECK(eng.stats().live_vars == live_before);

  // A large one is freed by the worker that ends its last op, with no later call here.
  Gate gate3;
  std::atomic<bool> freed_large{false};
  Var big = eng.new_var(), out = eng.new_var();
  eng.push([&] { gate3.wait(); }, {big}, {out});
  detail::EngineAccess::impl(eng).delete_var(big, [&] { freed_large = true; },
                                            EngineImpl::kDeferMaxBytes + 1, true);
  big = Var();
  gate3.open = true;
  const auto t0 = clk::now();
  while (!freed_large.load() && ms_since(t0) < 10000) sleep_ms(1);
  CHECK(freed_large.load());

  // Engine::delete_var never defers, whatever the size: callers use on_delete as the signal that
  // the ops are done (the WebAssembly package's data() does).
  Gate gate4;
  std::atomic<bool> signalled{false};
  Var small = eng.new_var(), out2 = eng.new_var();
  eng.push([&] { gate4.wait(); }, {small}, {out2});
  eng.delete_var(std::move(small), [&] { signalled = true; }, 0);
  gate4.open = true;
  const auto t1 = clk::now();
  while (!signalled.load() && ms_since(t1) < 10000) sleep_ms(1);
  CHECK(signalled.load());
  eng.waitall();
}

TEST_CASE("a handle may outlive its engine after reads of it completed", "[engine]") {
  Var v;
  {
    Engine eng(EngineOptions{EngineKind::kThreaded, 2});
    v = eng.new_var();
    for (int i = 0; i < 100; ++i) eng.push([] {}, {v}, {});
  }  // waits for the reads; the handle stays
  CHECK(v.valid());
  v = Var();  // frees the variable without touching the engine (AddressSanitizer checks)
}

TEST_CASE("backpressure: pending work never exceeds the bound", "[engine][backpressure]") {
  for (int workers : {1, 2, 4}) {
    Engine eng(EngineOptions{EngineKind::kThreaded, workers});
    const std::size_t kOps = 8, kBytes = 4000;
    eng.set_max_inflight(kOps, 0);
    CHECK(eng.max_inflight_ops() == kOps);
    std::vector<Var> vars;
    for (int i = 0; i < 32; ++i) vars.push_back(eng.new_var());
    std::atomic<std::uint64_t> max_seen{0};
    auto observe = [&](std::uint64_t x) {
      std::uint64_t m = max_seen.load();
      while (x > m && !max_seen.compare_exchange_weak(m, x)) {
      }
    };
    const int n = static_cast<int>(asyncnd_test::scaled(2000, 200));
    for (int i = 0; i < n; ++i) {
      eng.push([] { std::this_thread::sleep_for(std::chrono::microseconds(20)); }, {},
               {vars[static_cast<std::size_t>(i % 32)]});
      observe(eng.stats().pending);
    }
    eng.waitall();
    INFO(workers << " workers, op bound " << kOps);
    CHECK(max_seen.load() <= kOps);
    CHECK(max_seen.load() >= 2);  // the bound let work queue up, it did not serialise

    // The byte bound: PushOptions::bytes of pending ops.
    eng.set_max_inflight(0, kBytes);
    max_seen = 0;
    for (int i = 0; i < n; ++i) {
      eng.push([] { std::this_thread::sleep_for(std::chrono::microseconds(20)); }, {},
               {vars[static_cast<std::size_t>(i % 32)]}, PushOptions{Device{}, 0, "alloc", 1000});
      observe(eng.stats().inflight_bytes);
    }
    eng.waitall();
    CHECK(max_seen.load() <= kBytes);
    CHECK(max_seen.load() >= 2000);
    // An op larger than the bound still runs when nothing else is in flight.
    Var big = eng.new_var();
    eng.push([] {}, {}, {big}, PushOptions{Device{}, 0, "huge", 10 * kBytes});
    eng.wait_to_read(big);

    // Without a bound, the frontend runs far ahead.
    eng.set_max_inflight(0, 0);
    Gate gate;
    Var g = eng.new_var();
    eng.push([&] { gate.wait(); }, {}, {g});
    for (int i = 0; i < 500; ++i) eng.push([] {}, {g}, {vars[static_cast<std::size_t>(i % 32)]});
    CHECK(eng.stats().pending == 501);
    gate.open = true;
    eng.waitall();
  }
}

TEST_CASE("among ready ops, higher priority runs first", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  Var block = eng.new_var();
  Gate gate;
  eng.push([&] { gate.wait(); }, {}, {block});
  sleep_ms(10);  // the only worker is now inside the gate
  std::vector<int> order;
  std::mutex mu;
  std::vector<Var> vars;
  for (int i = 0; i < 4; ++i) vars.push_back(eng.new_var());
  auto rec = [&](int id) {
    return [&, id] {
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(id);
    };
  };
  eng.push(rec(0), {}, {vars[0]});
  eng.push(rec(1), {}, {vars[1]});
  eng.push(rec(2), {}, {vars[2]}, PushOptions{Device{}, 5, "urgent"});
  eng.push(rec(3), {}, {vars[3]}, PushOptions{Device{}, 1, "soon"});
  gate.open = true;
  eng.waitall();
  REQUIRE(order == std::vector<int>{2, 3, 0, 1});
}

TEST_CASE("one worker takes queued ops in runs: a priority op pushed during a run still goes next",
          "[engine]") {
  // A pool of one worker takes a short FIFO whole (worker_pool.cpp, DevicePool::paced_): op 0
  // runs as the first of a run of five, and op 9, pushed meanwhile with a priority, must still
  // run before ops 1-4.
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  Var block = eng.new_var();
  Gate gate, first_runs, release_first;
  eng.push([&] { gate.wait(); }, {}, {block});
  sleep_ms(10);  // the only worker is now inside the gate
  std::vector<int> order;
  std::mutex mu;
  auto note = [&](int id) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back(id);
  };
  std::vector<Var> vars;
  for (int i = 0; i < 6; ++i) vars.push_back(eng.new_var());
  eng.push(
      [&] {
        note(0);
        first_runs.open = true;
        release_first.wait();
      },
      {}, {vars[0]});
  for (int i = 1; i <= 4; ++i) eng.push([&, i] { note(i); }, {}, {vars[static_cast<std::size_t>(i)]});
  gate.open = true;
  first_runs.wait();
  eng.push([&] { note(9); }, {}, {vars[5]}, PushOptions{Device{}, 5, "urgent"});
  release_first.open = true;
  eng.waitall();
  REQUIRE(order == std::vector<int>{0, 9, 1, 2, 3, 4});
}

TEST_CASE("a run stalled on a long op: another worker takes over the rest", "[engine]") {
  // Worker 1 takes A, B and C as one run (the FIFO whole, while worker 2 is held in a gate); A
  // waits for B. Only worker 2, once free, can run B: by taking over the rest of worker 1's run
  // (worker_pool.cpp, spin_paced). Taking ops one by one, worker 1 takes A alone and worker 2 B.
  for (Pacing pacing : {Pacing::kRuns, Pacing::kOps}) {
    INFO("pacing " << pacing_name(pacing));
    EngineOptions o{EngineKind::kThreaded, 2};
    o.cpu_pacing = pacing;
    Engine eng(o);
    Gate gate1, gate2;
    Var g1 = eng.new_var(), g2 = eng.new_var();
    eng.push([&] { gate1.wait(); }, {}, {g1});
    eng.push([&] { gate2.wait(); }, {}, {g2});
    sleep_ms(20);  // each worker is inside a gate (one took the other's over)
    std::atomic<bool> b_ran{false}, a_saw_b{false};
    Var a = eng.new_var(), b = eng.new_var(), c = eng.new_var();
    eng.push(
        [&] {
          const auto t0 = clk::now();
          while (!b_ran.load() && ms_since(t0) < 5000) std::this_thread::yield();
          a_saw_b = b_ran.load();
        },
        {}, {a});
    eng.push([&] { b_ran = true; }, {}, {b});
    eng.push([] {}, {}, {c});
    gate1.open = true;
    sleep_ms(5);  // worker 1 is in A
    gate2.open = true;
    eng.waitall();
    CHECK(a_saw_b.load());
  }
}

// [serial]: ctest runs it alone (CMakeLists.txt), as it needs two cores free.
TEST_CASE("a long run of short ops: the idle worker has it split, and both run it",
          "[engine][serial]") {
  // 10000 ops of 1 us each, queued while both workers are held: worker 2, let out first, takes
  // them all as one run. Worker 1, let out next and idle, sees that run move on too slowly for
  // its length and asks for its later half (worker_pool.cpp, spin_paced and split), and so on:
  // the two run side by side. Without the split, each op being shorter than a look (4 us), one
  // worker runs the run while the other watches; a worker that loses its core for a look (on
  // our VMs, at every timer tick) has its run taken over whole, which moves the run but does not
  // overlap it.
  constexpr int kOps = 10000;
  // One attempt on a fresh engine. Each op takes a ticket as it starts and notes its thread
  // there; what counts is how often consecutive tickets went to different threads. Two workers
  // that run the ops side by side alternate thousands of times. A worker that took the rest of
  // a run over (without a split) switches once, however long it runs: so a first version, which
  // counted the ops that started while another was running, was fooled when the VM took a
  // worker's core in the middle of an op for milliseconds, and the other ran thousands of ops
  // "beside" it.
  auto switches = [] {
    // What the ops use is made before the engine, so that it outlives them even where a failed
    // REQUIRE leaves ops queued for the engine's destructor.
    // Gates that spin (a sleeping one may wake a millisecond late on a busy machine).
    std::atomic<bool> open1{false}, open2{false}, out2{false};
    std::atomic<int> ticket{0}, ran{0};
    std::vector<std::thread::id> who(kOps);  // each element written by one op only
    std::promise<void> all_ran;
    EngineOptions o{EngineKind::kThreaded, 2};
    o.cpu_pacing = Pacing::kRuns;
    Engine eng(o);
    Var g1 = eng.new_var(), g2 = eng.new_var();
    eng.push([&] { while (!open1.load()) std::this_thread::yield(); }, {}, {g1});
    eng.push(
        [&] {
          while (!open2.load()) std::this_thread::yield();
          out2 = true;
        },
        {}, {g2});
    sleep_ms(20);  // each worker is inside a gate
    std::vector<Var> vars;
    for (int i = 0; i < kOps; ++i) vars.push_back(eng.new_var());
    for (int i = 0; i < kOps; ++i) {
      eng.push(
          [&] {
            who[static_cast<std::size_t>(ticket.fetch_add(1))] = std::this_thread::get_id();
            const auto t0 = clk::now();
            while (clk::now() - t0 < std::chrono::microseconds(1)) {
            }
            if (++ran == kOps) all_ran.set_value();
          },
          {}, {vars[static_cast<std::size_t>(i)]});
    }
    open2 = true;
    while (!out2.load()) std::this_thread::yield();
    open1 = true;
    // Asleep until the last op, not in waitall (which spins first) nor polling: on 2 cores, this
    // thread would take a worker's core now and then.
    REQUIRE(all_ran.get_future().wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    eng.waitall();
    int n = 0;
    for (std::size_t i = 1; i < who.size(); ++i) n += who[i] != who[i - 1] ? 1 : 0;
    return n;
  };
  // On our 2 vCPUs, in 2026-11: with the split, 1629-9660 changes per attempt (34 attempts);
  // without it (kSplitLooks made huge), 1-14 in 30 attempts. But a process's first attempt
  // had 1-4 in 8 of 38 processes: timed, the worker in gate 1 saw its gate open 1.4-4 ms late,
  // and then the two ran by turns, each taking the other's run over whole: both workers had
  // been left on one vCPU while the other was idle, until the kernel moved one. So up to three
  // attempts, and the best counts: without the split every attempt stays far below the bar.
  std::string attempts;
  int best = 0;
  for (int attempt = 0; attempt < 3 && best < kOps / 10; ++attempt) {
    const int n = switches();
    best = std::max(best, n);
    attempts += (attempts.empty() ? "" : ", ") + std::to_string(n);
  }
  INFO("of " << kOps << " ops in start order, a change of thread from one to the next, per "
       "attempt: " << attempts);
  CHECK(best >= kOps / 10);
}

TEST_CASE("runs under load: splits, takeovers and priority ops keep every dependency",
          "[engine]") {
  // In each quarter, half the ops queue while the 4 workers are held in gates and half come as
  // they run, so runs grow long and are split; now and then a long op, so that a run stalls and
  // is taken over; now and then a priority op, so that the runs go back to the queue. (Counted
  // once with probes, natively with runs: 11-14 splits, 93-110 takeovers, about 145 runs given
  // back. Under ThreadSanitizer, slower, runs were taken over but not split.) Each op checks and
  // raises the plain counter of the variable it writes, and reads another's: two ops that write
  // one variable, or one that writes it and one that reads it, must never overlap, and
  // ThreadSanitizer checks their order (CI runs this test under it).
  constexpr int kVars = 256;
  const int ops = static_cast<int>(asyncnd_test::scaled(40000, 8000));
  for (Pacing pacing : {Pacing::kRuns, Pacing::kOps}) {
    INFO("pacing " << pacing_name(pacing));
    EngineOptions o{EngineKind::kThreaded, 4};
    o.cpu_pacing = pacing;
    Engine eng(o);
    std::vector<Var> vars;
    for (int i = 0; i < kVars; ++i) vars.push_back(eng.new_var());
    std::vector<long> counter(kVars, 0), expected(kVars, 0);
    std::atomic<int> bad{0};
    std::atomic<bool> open{false};
    std::vector<Var> gates;
    for (int i = 0; i < 4; ++i) gates.push_back(eng.new_var());
    std::uint64_t rng = asyncnd_test::test_seed("runs under load");
    auto next = [&rng](int n) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<int>((rng >> 33) % static_cast<std::uint64_t>(n));
    };
    for (int i = 0; i < ops; ++i) {
      if (i % (ops / 4) == 0) {
        // Every quarter, the workers wait in gates while the next ops queue: long runs.
        eng.waitall();
        open = false;
        for (Var g : gates) {
          eng.push([&open] { while (!open.load()) std::this_thread::yield(); }, {}, {g});
        }
        sleep_ms(5);  // each worker is inside a gate (one took another's over)
      }
      if (i % (ops / 4) == ops / 8) open = true;
      const int w = next(kVars);
      int r = next(kVars);
      if (r == w) r = (r + 1) % kVars;
      const long want = expected[static_cast<std::size_t>(w)]++;
      const int spin_ns = next(500) == 0 ? 200000 : next(3000);
      PushOptions po;
      po.priority = next(500) == 0 ? 1 : 0;
      eng.push(
          [&, w, r, want, spin_ns] {
            long& mine = counter[static_cast<std::size_t>(w)];
            if (mine != want) ++bad;  // an earlier write to w has not run, or ran twice
            const long seen = counter[static_cast<std::size_t>(r)];
            const auto t0 = clk::now();
            while (clk::now() - t0 < std::chrono::nanoseconds(spin_ns)) {
            }
            if (counter[static_cast<std::size_t>(r)] != seen) ++bad;  // r written meanwhile
            mine = want + 1;
          },
          {vars[static_cast<std::size_t>(r)]}, {vars[static_cast<std::size_t>(w)]}, po);
    }
    open = true;
    eng.waitall();
    CHECK(bad.load() == 0);
    CHECK(counter == expected);
  }
}

TEST_CASE("worker_has_more_ops: inside an op, whether more ops wait for its device", "[engine]") {
  CHECK_FALSE(detail::worker_has_more_ops());  // not on a worker
  for (const int workers : {1, 3}) {  // 1: takes queued ops in runs (paced); 3: one by one
    INFO(workers << " workers");
    Engine eng(EngineOptions{EngineKind::kThreaded, workers});
    // Alone: no other op is known, not even the one that waits for this op's output.
    std::atomic<int> alone{-1};
    Var v = eng.new_var();
    eng.push([&] { alone = detail::worker_has_more_ops() ? 1 : 0; }, {}, {v});
    eng.push([] {}, {v}, {});
    eng.waitall();
    CHECK(alone.load() == 0);
    if (workers > 1) continue;  // several workers pop at once: what each sees is a race
    // Three ops queued while the worker is blocked, then taken as one run: each but the last
    // knows of more.
    Gate gate;
    Var blocker = eng.new_var();
    eng.push([&] { gate.wait(); }, {}, {blocker});
    sleep_ms(10);  // the worker is inside the gate
    std::vector<int> seen;
    std::vector<Var> vars;
    for (int i = 0; i < 3; ++i) vars.push_back(eng.new_var());
    for (int i = 0; i < 3; ++i) {
      eng.push([&] { seen.push_back(detail::worker_has_more_ops() ? 1 : 0); }, {},
               {vars[static_cast<std::size_t>(i)]});
    }
    gate.open = true;
    eng.waitall();
    CHECK(seen == std::vector<int>{1, 1, 0});
  }
}

TEST_CASE("parked workers all wake for a burst of independent ops, with nobody waiting",
          "[engine]") {
  // One wake is in flight at a time (worker_pool.cpp, wake_one): the pusher wakes one parked
  // worker, and each woken worker that finds more ops wakes the next. Each op here blocks until
  // all four run at once, so one worker too few never finishes.
  constexpr int kWorkers = 4;
  Engine eng(EngineOptions{EngineKind::kThreaded, kWorkers});
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    sleep_ms(2);  // every worker has parked (they spin for 100 us at most)
    std::atomic<int> running{0}, done{0};
    std::vector<Var> vars;
    for (int i = 0; i < kWorkers; ++i) vars.push_back(eng.new_var());
    for (int i = 0; i < kWorkers; ++i) {
      eng.push(
          [&] {
            running.fetch_add(1);
            const auto t0 = clk::now();
            while (running.load() < kWorkers && ms_since(t0) < 5000) std::this_thread::yield();
            if (running.load() >= kWorkers) done.fetch_add(1);
          },
          {}, {vars[static_cast<std::size_t>(i)]});
    }
    const auto t0 = clk::now();
    while (done.load() < kWorkers && ms_since(t0) < 10000) sleep_ms(1);
    REQUIRE(done.load() == kWorkers);
    eng.waitall();
    for (Var& v : vars) eng.delete_var(v);
  }
}

TEST_CASE("an op pushed to an idle worker runs with nobody waiting for it", "[engine]") {
  // A paced worker looks at its queue every few microseconds, and a parked one is woken: either
  // way the op runs although no wait asks for it.
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  for (int idle_ms : {0, 20}) {  // 20 ms: the worker has parked
    sleep_ms(idle_ms);
    std::atomic<bool> ran{false};
    Var v = eng.new_var();
    eng.push([&] { ran = true; }, {}, {v});
    const auto t0 = clk::now();
    while (!ran.load() && ms_since(t0) < 10000) sleep_ms(1);
    CHECK(ran.load());
    eng.waitall();
  }
}

TEST_CASE("profiler records every op as Chrome trace JSON", "[engine][profiler]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    Engine eng(EngineOptions{kind, 2});
    Var x = eng.new_var(), y = eng.new_var(), z = eng.new_var();
    eng.push([] {}, {}, {x});  // not recorded: before start
    eng.start_profiling();
    CHECK(eng.profiling());
    eng.push([] { sleep_ms(2); }, {x}, {y}, PushOptions{Device{}, 0, "mul"});
    eng.push([] {}, {y}, {z}, PushOptions{Device{}, 0, "add \"2\""});
    eng.waitall();
    const std::string json = eng.stop_profiling();
    CHECK_FALSE(eng.profiling());
    const auto events = eng.profile_events();
    REQUIRE(events.size() == 2);
    CHECK(events[0].name == "mul");
    CHECK(events[0].reads == std::vector<std::uint64_t>{x.id()});
    CHECK(events[0].writes == std::vector<std::uint64_t>{y.id()});
    CHECK(events[0].end_us - events[0].start_us >= 1500);
    CHECK(events[1].start_us >= events[0].end_us);
    CHECK(json.find("\"traceEvents\"") != std::string::npos);
    CHECK(json.find("\"ph\":\"X\"") != std::string::npos);
    CHECK(json.find("add \\\"2\\\"") != std::string::npos);
    if (kind == EngineKind::kThreaded) {
      CHECK(events[0].worker >= 0);
      CHECK(json.find("worker ") != std::string::npos);
    }
  }
}

TEST_CASE("stats count ops and bytes per device", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  const EngineStats s0 = eng.stats();
  // What array storage reports (Chunk), through the internal access: not a user call.
  detail::EngineImpl& impl = detail::EngineAccess::impl(eng);
  impl.note_alloc(Device::cpu(), 1000);
  impl.note_alloc(Device::cpu(), 500);
  impl.note_free(Device::cpu(), 1000);
  Var v = eng.new_var();
  for (int i = 0; i < 10; ++i) eng.push([] {}, {}, {v});
  eng.waitall();
  const EngineStats s = eng.stats();
  CHECK(s.pushed == s0.pushed + 10);
  CHECK(s.finished == s0.finished + 10);
  CHECK(s.pending == 0);
  REQUIRE_FALSE(s.devices.empty());
  CHECK(s.devices[0].device == Device::cpu());
  CHECK(s.devices[0].bytes_in_use == 500);
  CHECK(s.devices[0].bytes_peak == 1500);
  eng.reset_peak_bytes();
  CHECK(eng.stats().bytes_peak == 500);
  impl.note_free(Device::cpu(), 500);
}

TEST_CASE("stats keep every device's bytes apart, however high its id", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  detail::EngineImpl& impl = detail::EngineAccess::impl(eng);
  // gpu(16) and gpu(64) once shared gpu(0)'s count (an index modulo 16): each has its own now.
  const Device ids[] = {Device::gpu(0), Device::gpu(16), Device::gpu(64), Device::gpu(1000)};
  std::uint64_t bytes = 100;
  for (Device d : ids) impl.note_alloc(d, bytes++);
  const EngineStats s = eng.stats();
  for (std::size_t i = 0; i < 4; ++i) {
    INFO(ids[i].str());
    int found = 0;
    for (const DeviceStats& d : s.devices) {
      if (d.device != ids[i]) continue;
      ++found;
      CHECK(d.bytes_in_use == 100 + i);
    }
    CHECK(found == 1);
  }
  bytes = 100;
  for (Device d : ids) impl.note_free(d, bytes++);
}

TEST_CASE("parallel_for covers the range once, from ops and from outside", "[engine]") {
  for (int workers : {1, 2, 4}) {
    Engine eng(EngineOptions{EngineKind::kThreaded, workers});
    for (std::int64_t n : {0, 1, 7, 1000, 100003}) {
      std::vector<int> hits(static_cast<std::size_t>(n), 0);
      auto body = [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
      };
      eng.parallel_for(n, 100, body);
      Var v = eng.new_var();
      eng.push([&] { eng.parallel_for(n, 64, body); }, {}, {v});
      eng.wait_to_read(v);
      for (int h : hits) REQUIRE(h == 2);
    }
  }
}

// An idle worker spins, or wakes, for a job only while it has chunks left to claim: a helper that
// kept spinning on a job whose last chunk another thread runs would take that thread's core (on
// 2 vCPUs with 2 workers, the synchronous E1 ran 13% slower: bench/notes/e1.md).
TEST_CASE("a parallel_for job stops drawing idle workers once its chunks are all claimed",
          "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  detail::EngineImpl& impl = detail::EngineAccess::impl(eng);
  for (std::int64_t n : {2, 100}) {  // 2 chunks (both claimed below), and 8 (some left)
    std::atomic<int> entered{0};
    std::atomic<bool> release{false};
    auto body = [&](std::int64_t, std::int64_t) {
      entered.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    };
    std::thread caller([&] { eng.parallel_for(n, 1, body); });
    // The caller and the workers each hold one chunk while they wait for `release`.
    const int holders = n == 2 ? 2 : 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (entered.load() < holders && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    REQUIRE(entered.load() >= holders);
    CHECK(impl.cpu_open_jobs() == (n == 2 ? 0 : 1));
    release = true;
    caller.join();
    CHECK(impl.cpu_open_jobs() == 0);
  }
}

TEST_CASE("an exception inside parallel_for reaches the caller, not the worker", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  std::atomic<std::int64_t> covered{0};
  auto body = [&](std::int64_t b, std::int64_t e) {
    covered += e - b;
    if (b == 0) throw std::runtime_error("chunk zero failed");
  };
  CHECK_THROWS_WITH(eng.parallel_for(100000, 1000, body), Catch::Contains("chunk zero failed"));
  CHECK(covered.load() == 100000);
  Var v = eng.new_var();
  eng.push([&] { eng.parallel_for(100000, 1000, body); }, {}, {v},
           PushOptions{Device{}, 0, "split_op"});
  CHECK_THROWS_WITH(eng.wait_to_read(v),
                    Catch::Contains("split_op") && Catch::Contains("chunk zero failed"));
}

TEST_CASE("EngineOptions::from_env reads ASYNCND_ENGINE, ASYNCND_CPU_WORKERS and "
          "ASYNCND_CPU_PACING", "[engine]") {
  ::setenv("ASYNCND_ENGINE", "naive", 1);
  ::setenv("ASYNCND_CPU_WORKERS", "3", 1);
  EngineOptions o = EngineOptions::from_env();
  CHECK(o.kind == EngineKind::kNaive);
  CHECK(o.cpu_workers == 3);
  CHECK(o.max_inflight_ops == kDefaultMaxInflightOps);
  CHECK(o.cpu_pacing == Pacing::kAuto);
  ::setenv("ASYNCND_ENGINE", "turbo", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(), Catch::Contains("turbo"));
  ::unsetenv("ASYNCND_ENGINE");
  ::setenv("ASYNCND_CPU_WORKERS", "many", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(), Catch::Contains("many"));
  ::unsetenv("ASYNCND_CPU_WORKERS");
  for (Pacing p : {Pacing::kAuto, Pacing::kRuns, Pacing::kOps}) {
    ::setenv("ASYNCND_CPU_PACING", pacing_name(p), 1);
    CHECK(EngineOptions::from_env().cpu_pacing == p);
  }
  ::setenv("ASYNCND_CPU_PACING", "", 1);
  CHECK(EngineOptions::from_env().cpu_pacing == Pacing::kAuto);
  ::setenv("ASYNCND_CPU_PACING", "Runs", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(),
                    Catch::Contains("ASYNCND_CPU_PACING") && Catch::Contains("'Runs'") &&
                        Catch::Contains("'auto', 'runs' or 'ops'"));
  ::unsetenv("ASYNCND_CPU_PACING");
}

TEST_CASE("pacing: natively every CPU pool takes runs unless told otherwise", "[engine]") {
  for (int workers : {1, 3}) {
    INFO(workers << " workers");
    CHECK(Engine(EngineOptions{EngineKind::kThreaded, workers}).pacing() == Pacing::kRuns);
    EngineOptions o{EngineKind::kThreaded, workers};
    o.cpu_pacing = Pacing::kOps;
    CHECK(Engine(o).pacing() == Pacing::kOps);
    o.cpu_pacing = Pacing::kRuns;
    CHECK(Engine(o).pacing() == Pacing::kRuns);
  }
  CHECK(Engine(EngineOptions{EngineKind::kNaive}).pacing() == Pacing::kOps);
  CHECK_THROWS_WITH(Engine(EngineOptions{}).pacing(Device{DeviceKind::kCPU, 3}),
                    Catch::Contains("pacing"));
}

TEST_CASE("memory_limit_from: the cgroup's limit when below physical memory, else physical",
          "[engine][backpressure]") {
  using detail::memory_limit_from;
  const std::uint64_t phys = 24ull << 30;
  auto check = [](MemoryLimit m, std::uint64_t bytes, BoundSource source) {
    CHECK(m.bytes == bytes);
    CHECK(m.source == source);
  };
  check(memory_limit_from(nullptr, nullptr, phys), phys, BoundSource::kPhysical);
  check(memory_limit_from("max\n", nullptr, phys), phys, BoundSource::kPhysical);
  check(memory_limit_from("max\n", "1073741824\n", phys), phys, BoundSource::kPhysical);
  check(memory_limit_from("1073741824\n", nullptr, phys), 1ull << 30, BoundSource::kCgroup);
  check(memory_limit_from(nullptr, "536870912\n", phys), 512ull << 20, BoundSource::kCgroup);
  // cgroup v1's "unlimited" is about 2^63: physical memory decides.
  check(memory_limit_from(nullptr, "9223372036854771712\n", phys), phys, BoundSource::kPhysical);
  check(memory_limit_from(nullptr, "99999999999999999999999\n", phys), phys,
        BoundSource::kPhysical);
  check(memory_limit_from("", "536870912", phys), 512ull << 20, BoundSource::kCgroup);
  check(memory_limit_from("1073741824", nullptr, 0), 1ull << 30, BoundSource::kCgroup);
  check(memory_limit_from(nullptr, nullptr, 0), 0, BoundSource::kNone);

  const MemoryLimit here = program_memory_limit();
  INFO("this machine: " << here.bytes << " bytes, " << bound_source_name(here.source));
  CHECK(here.bytes > 0);
  CHECK((here.source == BoundSource::kCgroup || here.source == BoundSource::kPhysical));
}

TEST_CASE("from_env: the default byte bound is a quarter of the memory limit (at most 512 MiB), "
          "the environment "
          "overrides both bounds", "[engine][backpressure]") {
  ::unsetenv("ASYNCND_MAX_INFLIGHT_BYTES");
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");
  const MemoryLimit small{64ull << 20, BoundSource::kCgroup};
  EngineOptions o = EngineOptions::from_env(small);
  CHECK(o.max_inflight_ops == kDefaultMaxInflightOps);
  CHECK(o.max_inflight_bytes == (64u << 20) / kDefaultInflightBytesDivisor);
  CHECK(o.max_inflight_bytes_source == BoundSource::kCgroup);
  o = EngineOptions::from_env(MemoryLimit{});
  CHECK(o.max_inflight_bytes == 0);
  CHECK(o.max_inflight_bytes_source == BoundSource::kNone);
  CHECK(EngineOptions::from_env().max_inflight_bytes ==
        default_max_inflight_bytes(program_memory_limit().bytes));
  // The cap: a quarter of 64 GiB would be 16 GiB.
  CHECK(EngineOptions::from_env(MemoryLimit{64ull << 30, BoundSource::kPhysical})
            .max_inflight_bytes == kDefaultInflightBytesCap);
  CHECK(default_max_inflight_bytes(2ull << 30) == 512ull << 20);

  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", "1000", 1);
  ::setenv("ASYNCND_MAX_INFLIGHT_OPS", "7", 1);
  o = EngineOptions::from_env(small);
  CHECK(o.max_inflight_bytes == 1000);
  CHECK(o.max_inflight_bytes_source == BoundSource::kEnv);
  CHECK(o.max_inflight_ops == 7);
  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", "0", 1);  // 0: no bound
  ::setenv("ASYNCND_MAX_INFLIGHT_OPS", "0", 1);
  o = EngineOptions::from_env(small);
  CHECK(o.max_inflight_bytes == 0);
  CHECK(o.max_inflight_bytes_source == BoundSource::kNone);
  CHECK(o.max_inflight_ops == 0);
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");

  for (const char* bad : {"-1", "12abc", "lots", "", " 5", "1e9", "99999999999999999999999"}) {
    ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", bad, 1);
    CHECK_THROWS_WITH(EngineOptions::from_env(small),
                      Catch::Contains("ASYNCND_MAX_INFLIGHT_BYTES") &&
                          Catch::Contains(std::string("'") + bad + "'"));
  }
  ::unsetenv("ASYNCND_MAX_INFLIGHT_BYTES");
  ::setenv("ASYNCND_MAX_INFLIGHT_OPS", "-3", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(small),
                    Catch::Contains("ASYNCND_MAX_INFLIGHT_OPS") && Catch::Contains("'-3'"));
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");
}

TEST_CASE("stats: the bounds in force, the byte bound's source, and the pushes that waited",
          "[engine][backpressure]") {
  Engine eng(EngineOptions::from_env(MemoryLimit{1ull << 30, BoundSource::kWasmHeap}));
  EngineStats s = eng.stats();
  CHECK(s.max_inflight_ops == kDefaultMaxInflightOps);
  CHECK(s.max_inflight_bytes == (1u << 30) / kDefaultInflightBytesDivisor);
  CHECK(s.max_inflight_bytes_source == BoundSource::kWasmHeap);
  CHECK(std::string(bound_source_name(s.max_inflight_bytes_source)) == "wasm heap");
  CHECK(s.push_waits == 0);

  eng.set_max_inflight(2, 100);
  s = eng.stats();
  CHECK(s.max_inflight_ops == 2);
  CHECK(s.max_inflight_bytes == 100);
  CHECK(s.max_inflight_bytes_source == BoundSource::kUser);
  // A gated op and a second one fill the op bound: the third push waits until the gate opens.
  Gate gate;
  Var a = eng.new_var(), b = eng.new_var(), c = eng.new_var();
  eng.push([&] { gate.wait(); }, {}, {a});
  eng.push([] {}, {a}, {b});
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open = true;
  });
  eng.push([] {}, {}, {c});
  opener.join();
  eng.waitall();
  CHECK(eng.stats().push_waits >= 1);

  eng.set_max_inflight(0, 0);
  s = eng.stats();
  CHECK(s.max_inflight_ops == 0);
  CHECK(s.max_inflight_bytes == 0);
  CHECK(s.max_inflight_bytes_source == BoundSource::kNone);
  eng.reset_max_inflight();
  s = eng.stats();
  CHECK(s.max_inflight_bytes == (1u << 30) / kDefaultInflightBytesDivisor);
  CHECK(s.max_inflight_bytes_source == BoundSource::kWasmHeap);

  Engine mine(EngineOptions{EngineKind::kThreaded, 1, 0, 5000});
  CHECK(mine.stats().max_inflight_bytes_source == BoundSource::kUser);
  CHECK(std::string(bound_source_name(BoundSource::kNone)) == "none");
}
