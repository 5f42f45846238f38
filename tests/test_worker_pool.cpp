// How the worker pools schedule ready ops: priorities, runs taken by one worker, a stalled run
// taken over, long runs split, and workers woken for bursts, with every dependency kept.
#include <catch2/catch.hpp>

#include <asyncnd/detail/backend.h>  // detail::worker_has_more_ops
#include <asyncnd/engine.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace asyncnd;
using asyncnd_test::Gate;
using asyncnd_test::ms_since;
using asyncnd_test::sleep_ms;
using clk = std::chrono::steady_clock;

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

TEST_CASE("an op queued while a worker is inside a long op runs on an idle worker meanwhile",
          "[engine]") {
  // The spinning worker leaves newly queued ops to a worker that is running ops (that one takes
  // them when its run ends: worker_pool.cpp, spin_paced), but only for a look: an op that sits
  // longer goes to the spinner. Here the running worker's op waits for every op pushed after it,
  // so an op left to it for good would never run. Each op is pushed as soon as the one before
  // has run, so the other worker is spinning when it comes (it parks after 100 us idle, and a
  // parked worker is woken and takes the op without looking at who runs).
  constexpr int kOps = 50;
  for (int workers : {2, 4}) {
    INFO(workers << " workers");
    // Made before the engine, so that they outlive the ops even where a failed REQUIRE leaves
    // ops queued for the engine's destructor.
    std::atomic<int> ran{0};
    std::atomic<bool> started{false}, saw_all{false};
    EngineOptions o{EngineKind::kThreaded, workers};
    o.cpu_pacing = Pacing::kRuns;
    Engine eng(o);
    std::vector<Var> vars;
    for (int i = 0; i < kOps; ++i) vars.push_back(eng.new_var());
    Var a = eng.new_var();
    eng.push(
        [&] {
          started = true;
          const auto t0 = clk::now();
          while (ran.load() < kOps && ms_since(t0) < 10000) std::this_thread::yield();
          saw_all = ran.load() == kOps;
        },
        {}, {a});
    while (!started.load()) std::this_thread::yield();
    // No engine wait on this thread meanwhile: a push after one is urgent, and pokes the spinner,
    // which then takes the op at once.
    for (int i = 0; i < kOps; ++i) {
      eng.push([&] { ran.fetch_add(1); }, {}, {vars[static_cast<std::size_t>(i)]});
      const auto t0 = clk::now();
      while (ran.load() <= i && ms_since(t0) < 5000) std::this_thread::yield();
      INFO("op " << i);
      REQUIRE(ran.load() == i + 1);
    }
    eng.waitall();
    CHECK(saw_all.load());
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
