// Asynchronous ops (Engine::push_async): the op finishes when its Completion says so, without
// holding a worker; failures, throws and dropped completions travel like any op's error.
#include <catch2/catch.hpp>

#include <asyncnd/asyncnd.h>

#include <atomic>
#include <mutex>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace asyncnd;

using asyncnd_test::sleep_ms;

TEST_CASE("an async op finishes when its completion is used, not when fn returns",
          "[engine][async]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  Var data = eng.new_var(), out = eng.new_var(), other = eng.new_var();
  int value = 0, result = 0;
  std::atomic<bool> fn_returned{false}, other_ran{false};
  std::thread finisher;
  eng.push_async(
      [&](Completion c) {
        // Hand the completion to another thread, as a device callback would, and return.
        finisher = std::thread([&value, c = std::move(c)]() mutable {
          sleep_ms(100);
          value = 42;
          c.done();
        });
        fn_returned = true;
      },
      {}, {data}, PushOptions{Device{}, 0, "load"});
  eng.push([&] { result = value + 1; }, {data}, {out});
  // The only worker is free while the load is in flight: an independent op runs meanwhile.
  eng.push([&] { other_ran = true; }, {}, {other});
  eng.wait_to_read(other);
  CHECK(other_ran.load());
  CHECK(fn_returned.load());
  CHECK(eng.stats().pending >= 2);  // the load and its dependent
  eng.wait_to_read(out);
  CHECK(result == 43);
  finisher.join();
  eng.waitall();
  CHECK(eng.stats().pending == 0);
}

TEST_CASE("async ops: fail, throw and a dropped completion become op errors", "[engine][async]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    Engine eng(EngineOptions{kind, 2});
    Var a = eng.new_var(), b = eng.new_var(), c = eng.new_var(), dep = eng.new_var();
    std::atomic<int> dependents{0};

    eng.push_async([](Completion done) { done.fail("device lost"); }, {}, {a},
                   PushOptions{Device{}, 0, "gpu_kernel"});
    eng.push([&] { ++dependents; }, {a}, {dep});
    CHECK_THROWS_WITH(eng.wait_to_read(dep),
                      Catch::Contains("gpu_kernel") && Catch::Contains("device lost"));
    CHECK(dependents == 0);
    CHECK_THROWS_WITH(eng.wait_to_read(a), Catch::Contains("device lost"));

    eng.push_async([](Completion) { throw std::runtime_error("launch failed"); }, {}, {b},
                   PushOptions{Device{}, 0, "launch"});
    CHECK_THROWS_WITH(eng.wait_to_read(b),
                      Catch::Contains("launch") && Catch::Contains("launch failed") &&
                          !Catch::Contains("dropped"));

    eng.push_async([](Completion) {}, {}, {c}, PushOptions{Device{}, 0, "forgetful"});
    CHECK_THROWS_WITH(eng.wait_to_read(c),
                      Catch::Contains("forgetful") && Catch::Contains("dropped"));

    // done() twice: the second is ignored.
    int x = 0;
    eng.push_async(
        [&](Completion done) {
          x = 5;
          done.done();
          done.done();
        },
        {}, {a}, PushOptions{Device{}, 0, "twice"});
    CHECK_NOTHROW(eng.wait_to_read(a));
    CHECK(x == 5);
    // A throw after done(): the op is not finished until fn returns, and fails with it.
    eng.push_async(
        [&](Completion done) {
          done.done();
          throw std::runtime_error("after done");
        },
        {}, {a}, PushOptions{Device{}, 0, "late_throw"});
    CHECK_THROWS_WITH(eng.wait_to_read(a),
                      Catch::Contains("late_throw") && Catch::Contains("after done"));
    CHECK_NOTHROW(eng.waitall());
    CHECK(eng.stats().pending == 0);
  }
}

// ~Completion, while an exception passes through fn, leaves the op to the exception; if fn caught
// it itself and returned, nothing completed the op and its waiter hung for ever.
TEST_CASE("a Completion dropped while fn catches its own exception fails the op as dropped",
          "[engine][async]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    Engine eng(EngineOptions{kind, 2});
    Var v = eng.new_var();
    eng.push_async(
        [](Completion c) {
          try {
            Completion mine = std::move(c);
            throw std::runtime_error("handled here");
          } catch (const std::exception&) {
          }
        },
        {}, {v}, PushOptions{Device{}, 0, "catches"});
    CHECK_THROWS_WITH(eng.wait_to_read(v),
                      Catch::Contains("catches failed") &&
                          Catch::Contains("completion dropped without done() or fail()"));
  }
  // A Completion moved over another drops the one it replaces, as its destructor would. One
  // worker, so that the two fns run one after the other, in push order, and `kept` is never
  // assigned by two threads at once. (Not the naive engine, whose push_async returns once the op
  // has finished: `kept` would hold the first op's Completion on this very thread.)
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  Var a = eng.new_var(), b = eng.new_var();
  Completion kept;
  eng.push_async([&](Completion c) { kept = std::move(c); }, {}, {a},
                 PushOptions{Device{}, 0, "first"});
  eng.push_async([&](Completion c) { kept = std::move(c); }, {}, {b},
                 PushOptions{Device{}, 0, "second"});
  // `a` failed when the second fn's assignment dropped its Completion, after `kept` took the
  // second one (the dropped handle goes at the end of operator=): done() here finishes `b`.
  CHECK_THROWS_WITH(eng.wait_to_read(a), Catch::Contains("first failed") &&
                                             Catch::Contains("completion dropped"));
  kept.done();
  CHECK_NOTHROW(eng.wait_to_read(b));
  CHECK_NOTHROW(eng.waitall());
}

TEST_CASE("the naive engine's push_async returns once the op has completed", "[engine][async]") {
  Engine eng(EngineOptions{EngineKind::kNaive});
  Var v = eng.new_var();
  std::atomic<bool> done{false};
  std::thread t;
  eng.push_async(
      [&](Completion c) {
        t = std::thread([&, c = std::move(c)]() mutable {
          sleep_ms(30);
          done = true;
          c.done();
        });
      },
      {}, {v});
  CHECK(done.load());
  t.join();
}

// Ops pushed from inside an op run after it, in push order, with either kind: the naive engine
// ran them at once, inside the op that pushed them, so a later write by that op won.
TEST_CASE("ops pushed from inside an op run after it, in push order, with either engine kind",
          "[engine]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    INFO((kind == EngineKind::kNaive ? "naive" : "threaded"));
    Engine eng(EngineOptions{kind, 1});
    Var a = eng.new_var();
    std::vector<int> order;
    eng.push(
        [&] {
          eng.push([&] { order.push_back(2); }, {}, {a});
          eng.push(
              [&] {
                order.push_back(3);
                eng.push([&] { order.push_back(5); }, {}, {a});
              },
              {}, {a});
          eng.push([&] { order.push_back(4); }, {}, {a});
          order.push_back(1);
        },
        {}, {a});
    // waitall: a wait_to_read(a) queued before the outer op ran comes before the ops it pushes.
    eng.waitall();
    CHECK(order == std::vector<int>{1, 2, 3, 4, 5});
    // An array dropped inside an op after an op on it was pushed there: freed after that op ran
    // (AddressSanitizer builds see a use after free otherwise).
    configure_engine({kind, 1});
    NDArray out = nd::zeros({1000});
    {
      NDArray in = nd::ones({1000});
      engine().push(
          [in, &out]() mutable {
            out += in * 2.0f;  // queued behind this op; so is the deletion of the temporary
            in = NDArray();    // the last handle: its deletion waits for the multiply
          },
          {}, {out.var()});
    }
    nd::waitall();  // the += is pushed when the op runs: a wait queued before it returns first
    CHECK(out.to_vector() == std::vector<float>(1000, 2.0f));
  }
  configure_engine({});
}

// A Completion finished by a thread that pushes first: the naive engine held its lock while it
// waited for the Completion, so that push waited for ever.
TEST_CASE("a thread that completes an async op may push first, with either engine kind",
          "[engine][async]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    INFO((kind == EngineKind::kNaive ? "naive" : "threaded"));
    Engine eng(EngineOptions{kind, 1});
    Var a = eng.new_var(), b = eng.new_var();
    int x = 0;
    std::thread t;
    eng.push_async(
        [&](Completion c) {
          t = std::thread([&, c = std::move(c)]() mutable {
            eng.push([&] { x = 7; }, {}, {b});
            c.done();
          });
        },
        {}, {a});
    eng.wait_to_read(a);
    t.join();
    eng.wait_to_read(b);
    CHECK(x == 7);
  }
}

TEST_CASE("many async ops completed from other threads keep push order", "[engine][async]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  Var v = eng.new_var();
  std::vector<int> order;
  std::vector<std::thread> threads;
  std::mutex mu;
  const int n = 200;
  for (int i = 0; i < n; ++i) {
    eng.push_async(
        [&, i](Completion c) {
          std::lock_guard<std::mutex> lk(mu);
          threads.emplace_back([&order, i, c = std::move(c)]() mutable {
            order.push_back(i);  // ordered by v: the next op starts only after done()
            c.done();
          });
        },
        {}, {v});
  }
  eng.wait_to_read(v);
  {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& t : threads) t.join();
  }
  REQUIRE(order.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) REQUIRE(order[static_cast<std::size_t>(i)] == i);
}

// Completion is documented thread safe: done() and fail() on one Completion from two threads
// both read and cleared a plain pointer, and both released the op record (ASan: heap use after
// free in EngineImpl::finish).
TEST_CASE("done and fail racing on one completion complete the op once", "[engine][async]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  const int rounds = static_cast<int>(asyncnd_test::scaled(2000, 200));
  int failed = 0;
  for (int r = 0; r < rounds; ++r) {
    Var v = eng.new_var();
    Completion shared = asyncnd_test::hold_async(eng, v);
    std::atomic<bool> go{false};
    std::thread a([&] { while (!go) {} shared.done(); });
    std::thread b([&] { while (!go) {} shared.fail("second"); });
    go = true;
    a.join();
    b.join();
    try {
      eng.wait_to_read(v);
    } catch (const Error&) {
      ++failed;  // fail() came first: fine, as long as it counted once
    }
    eng.delete_var(v);
  }
  eng.waitall();
  const EngineStats s = eng.stats();
  CHECK(s.pending == 0);
  CHECK(s.pushed == s.finished);
  INFO(failed << " of " << rounds << " rounds failed first");
  SUCCEED();
}
