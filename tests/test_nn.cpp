// nn (Dense, Sequential, L2Loss, SGD, DataIter): values by hand, deferred initialisation, errors,
// an MLP that learns a small regression; and the engine's in-flight byte bound, which E6 uses to
// bound the memory of a training loop that never synchronises.
#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "ops_test_util.h"
#include "test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;

namespace {

// Restores the process-wide engine's in-flight bounds when it goes out of scope.
struct BoundGuard {
  std::size_t ops = engine().max_inflight_ops(), bytes = engine().max_inflight_bytes();
  ~BoundGuard() { engine().set_max_inflight(ops, bytes); }
};

}  // namespace

TEST_CASE("Dense defers its input size, with parameters, names and shapes", "[nn]") {
  leak_checked([] {
    nd::seed(7);
    nn::Dense d(3, "relu");
    REQUIRE(d.parameters().size() == 2);
    nn::Parameter w = d.weight(), b = d.bias();
    CHECK_FALSE(w.initialized());
    CHECK(w.shape() == Shape{3, 0});
    CHECK(w.name().find("weight") != std::string::npos);
    NDArray y = d(nd::ones({4, 2, 5}));  // flattened to [4,10]
    CHECK(y.shape() == Shape{4, 3});
    CHECK(w.initialized());
    CHECK(w.shape() == Shape{3, 10});
    CHECK(b.data().shape() == Shape{3});
    // Gluon's default initialisation: U(-0.07, 0.07) weights, zero biases.
    for (float v : w.data().to_vector()) CHECK(std::fabs(v) <= 0.07f);
    check_exact(b.data().to_vector(), {0, 0, 0}, "bias starts at zero");
    // The same layer, by value: copies share it.
    nn::Dense copy = d;
    CHECK(copy.weight().data().var() == w.data().var());
    // y = relu(x W^T + b), checked by hand on known values.
    nn::Dense e(2, "", true, 3);
    e.weight().set_data(nd::from_vector({1, 2, 3, -1, -2, -3}, {2, 3}));
    e.bias().set_data(nd::from_vector({0.5f, 0.25f}, {2}));
    check_exact(e(nd::from_vector({1, 1, 1}, {1, 3})).to_vector(), {6.5f, -5.75f}, "dense");
    nn::Dense r(2, "relu", true, 3);
    r.weight().set_data(nd::from_vector({1, 2, 3, -1, -2, -3}, {2, 3}));
    check_exact(r(nd::from_vector({1, 1, 1}, {1, 3})).to_vector(), {6, 0}, "dense relu");
  });
}

TEST_CASE("nn errors name the layer and the shapes, queuing nothing", "[nn][errors]") {
  expect_error([] { nn::Dense(0); }, {"Dense", "units", "0"});
  expect_error([] { nn::Dense(4, "softplus"); }, {"Dense", "softplus"});
  // Named where it is made, not at the first forward pass by random_uniform / random_normal.
  expect_error([] { nn::Dense(4, "", true, 0, nn::Init::uniform(-0.1f)); }, {"Dense", "scale", "-0.1"});
  expect_error([] { nn::Dense(4, "", true, 0, nn::Init::normal(NAN)); }, {"Dense", "scale", "nan"});
  expect_error([] { nn::L2Loss(NAN); }, {"L2Loss: weight must be finite, got nan"});  // NaN losses
  // A small negative scale is not shown as -0.000000.
  expect_error([] { nn::Dense(4, "", true, 0, nn::Init::uniform(-1e-7f)); },
               {"Dense: the initialiser's scale must be finite and >= 0, got -1e-07"});
  // Finite scales whose values would not be: U(-3e38, 3e38) spans more than float's range, and
  // N(0, 1e38) draws up to 5.77 stddevs out. Refused at construction, deferred or not.
  for (std::int64_t in_units : {0, 4}) {
    expect_error([&] { nn::Dense(4, "", true, in_units, nn::Init::uniform(3e38f)); },
                 {"Dense: the initialiser's scale 3e+38 is too large to draw in float "
                  "(random_uniform expects finite lo <= hi with hi - lo finite in float, got "
                  "lo=-3e+38 hi=3e+38)"});
    expect_error([&] { nn::Dense(4, "", true, in_units, nn::Init::normal(1e38f)); },
                 {"Dense: the initialiser's scale 1e+38 is too large", "random_normal"});
  }
  {
    nn::Parameter w("w", {2, 0});
    expect_error([&] { w.initialize({2, 3}, nn::Init::uniform(-1.0f)); },
                 {"Parameter::initialize: parameter 'w': the initialiser's scale must be finite "
                  "and >= 0, got -1"});
    CHECK_FALSE(w.initialized());
    nn::Parameter b("b", {2});  // a bias is zeros, whatever the initialiser
    b.initialize({2}, nn::Init::uniform(-1.0f));
    CHECK(b.data().to_vector() == std::vector<float>{0, 0});
  }
  expect_error([] { nn::Dense(3)(nd::ones({2, 0})); }, {"Dense", "no features", "[2,0]"});
  nn::Dense d(2, "", true, 3);
  NDArray bad = nd::ones({4, 5});
  nn::Sequential net;
  net.add(nn::Dense(2));
  nn::SGD early(net.parameters(), 0.1f);
  NDArray p = nd::ones({4, 1}), l3 = nd::ones({3});
  nd::waitall();
  expect_error([&] { d(bad); }, {"Dense", "3 inputs", "[4,5]"});
  expect_error([&] { early.step(4); }, {"SGD::step", "not initialised", "weight"});
  expect_error([&] { net.parameters()[0].data(); }, {"Parameter::data", "not initialised"});
  expect_error([&] { nn::L2Loss()(p, l3); }, {"L2Loss", "[4,1]", "[3]"});
  expect_error([&] { nn::SGD(d.parameters(), 0.1f).step(0); }, {"SGD::step", "batch_size", "0"});
  expect_error([&] { net.add(nn::Block()); }, {"Sequential::add", "empty"});
  // Moved-from layers and networks: each call throws (they dereferenced nothing: a crash).
  nn::Dense moved_dense(2, "", true, 3);
  nn::Dense taker = std::move(moved_dense);
  expect_error([&] { moved_dense.weight(); }, {"Dense::weight", "empty block handle"});
  expect_error([&] { moved_dense.bias(); }, {"Dense::bias", "empty block handle"});
  nn::Sequential moved_net;
  nn::Sequential net_taker = std::move(moved_net);
  expect_error([&] { moved_net.add(nn::Dense(2)); }, {"Sequential::add", "empty block handle"});
  expect_error([&] { moved_net.size(); }, {"Sequential::size", "empty block handle"});
  CHECK(taker.weight().shape() == Shape{2, 3});
  // A network inside itself, directly or through another, recursed until the stack overflowed.
  expect_error([&] { net.add(net); }, {"Sequential::add", "cannot contain itself"});
  nn::Sequential outer;
  outer.add(net).add(net);  // one block twice is no cycle
  expect_error([&] { net.add(outer); }, {"Sequential::add", "cannot contain itself"});
  CHECK(net.size() == 1);
  CHECK(outer.parameters().size() == 2);  // the shared block's weight and bias, each once
  // A learning rate that is NaN or infinite made every weight NaN at the first step.
  expect_error([&] { nn::SGD(d.parameters(), std::nanf("")); }, {"SGD", "finite", "nan"});
  nn::SGD trainer(d.parameters(), 0.1f);
  expect_error([&] { trainer.set_learning_rate(INFINITY); },
               {"SGD::set_learning_rate", "finite", "inf"});
  CHECK(trainer.learning_rate() == 0.1f);
}

TEST_CASE("networks nested 200 000 deep run and list their parameters and are freed", "[nn]") {
  // forward, parameters() and the destructor recursed once per level: the stack overflowed
  // (natively a crash; in WebAssembly a RangeError at about 2 000 levels, which leaked).
  const int depth = static_cast<int>(asyncnd_test::scaled(200000, 20000));
  nn::Dense first(2, "", true, 3), last(1, "", true, 2);
  first.weight().set_data(nd::from_vector({1, 0, 0, 0, 1, 0}, {2, 3}));
  last.weight().set_data(nd::from_vector({1, 1}, {1, 2}));
  {
    nn::Sequential top;
    top.add(first);
    nn::Sequential s = top;
    for (int i = 0; i < depth; ++i) {
      nn::Sequential inner;
      s.add(inner);
      s = inner;
    }
    s.add(last);
    s = nn::Sequential();  // only top holds the chain now
    CHECK(top.parameters().size() == 4);
    check_exact(top(nd::from_vector({1, 2, 3}, {1, 3})).to_vector(), {3}, "(1 + 2) through the chain");
  }  // the chain dies here, level by level
  CHECK(first.weight().data().shape() == Shape{2, 3});  // the layers held elsewhere live on
  nd::waitall();
}

TEST_CASE("an empty batch flows through Dense and L2Loss", "[nn]") {
  // Flattening [0,3,1] with reshape's -1 was ambiguous: the error named reshape, not the layer.
  nn::Dense d(2, "relu", true, 3);
  CHECK(d(nd::zeros({0, 3, 1})).shape() == Shape{0, 2});
  CHECK(nn::L2Loss()(nd::zeros({0, 3}), nd::zeros({0, 3})).shape() == Shape{0});
  nd::waitall();
}

TEST_CASE("set_data on a deferred parameter checks the dimensions already known", "[nn][errors]") {
  nn::Dense d(3);  // weight [3,0] and bias [3], deferred
  NDArray w57 = nd::ones({5, 7}), w3 = nd::ones({3}), w38 = nd::ones({3, 8});
  nd::waitall();
  // Before: a [5,7] weight was taken, the layer gave [2,5] and never made its bias.
  expect_error([&] { d.weight().set_data(w57); },
               {"set_data", "dense", "[3,0]", "not known until the first forward pass", "[5,7]"});
  expect_error([&] { d.weight().set_data(w3); }, {"set_data", "[3,0]", "[3]"});
  d.weight().set_data(nd::ones({3, 7}));
  NDArray y = d(nd::ones({2, 7}));
  CHECK(y.shape() == Shape{2, 3});
  REQUIRE(d.bias().initialized());  // made at the first forward pass, apart from the weight
  check_exact(d.bias().data().to_vector(), {0, 0, 0}, "the bias, initialised to zeros");
  check_exact(y.to_vector(), std::vector<float>(6, 7.0f), "ones [2,7] . ones [3,7]^T");
  nd::waitall();
  expect_error([&] { d.weight().set_data(w38); }, {"set_data", "[3,7]", "[3,8]"});
  // A bias given while the weight is deferred is kept by the first forward pass.
  nn::Dense e(2);
  e.bias().set_data(nd::from_vector({5, 6}, {2}));
  check_exact(e(nd::zeros({1, 4})).to_vector(), {5, 6}, "zero inputs: the bias given");
}

TEST_CASE("L2Loss is Gluon's, and SGD steps by lr * grad / batch_size", "[nn]") {
  leak_checked([] {
    nn::L2Loss loss;
    NDArray pred = nd::from_vector({1, 2, 3}, {3, 1});
    NDArray label = nd::from_vector({0, 4, 3}, {3});  // [N] label against [N,1] predictions
    check_exact(loss(pred, label).to_vector(), {0.5f, 2.0f, 0.0f}, "0.5 (pred - label)^2");
    NDArray wide = nd::from_vector({1, 2, 3, 4}, {2, 2});
    check_exact(loss(wide, nd::zeros({2, 2})).to_vector(), {1.25f, 6.25f}, "mean over axis 1");

    nn::Dense d(1, "", false, 2);
    d.weight().set_data(nd::from_vector({1, -1}, {1, 2}));
    nn::SGD trainer(d.parameters(), 0.5f);
    NDArray x = nd::from_vector({1, 2, 3, 4}, {2, 2});
    NDArray l;
    {
      autograd::Record rec;
      l = loss(d(x), nd::zeros({2}));  // pred = x W^T = [-1, -1]
    }
    l.backward(nd::ones({2}));
    // dl/dW = sum_i pred_i x_i = -[1,2] - [3,4] = [-4,-6]; W -= 0.5 * grad / 2.
    check_exact(d.weight().grad().to_vector(), {-4, -6}, "gradient");
    trainer.step(2);
    check_exact(d.weight().data().to_vector(), {2.0f, 0.5f}, "after one step");
  });
}

// Gluon's rule: a gradient no backward wrote since the last step is not applied again. A layer
// left out of a step's graph was updated with its previous gradient, every step.
TEST_CASE("SGD refuses a stale gradient, or skips it when asked", "[nn]") {
  leak_checked([] {
    nn::Dense d1(1, "", false, 2), d2(1, "", false, 2);
    d1.weight().set_data(nd::from_vector({1, 1}, {1, 2}));
    d2.weight().set_data(nd::from_vector({1, 1}, {1, 2}));
    nn::SGD trainer({d1.weight(), d2.weight()}, 0.5f);
    const NDArray x = nd::ones({1, 2});
    // Before any backward: nothing was ever written.
    const char* stale = "not written since this trainer was made or last stepped";
    expect_error([&] { trainer.step(1); },
                 {"SGD::step", "dense", "weight", "(and of 1 more)", stale, "ignore_stale_grad"});
    const auto backward_through = [&](std::vector<nn::Dense*> layers) {
      NDArray y;
      {
        autograd::Record rec;
        y = (*layers[0])(x);
        for (std::size_t i = 1; i < layers.size(); ++i) y = y + (*layers[i])(x);
        y = y.sum();
      }
      y.backward();
    };
    backward_through({&d1, &d2});
    trainer.step(1);  // both: w = 1 - 0.5 * 1
    check_exact(d2.weight().data().to_vector(), {0.5f, 0.5f}, "d2 after step 1");
    expect_error([&] { trainer.step(1); }, {"SGD::step", stale});
    backward_through({&d1});  // d2 is left out
    expect_error([&] { trainer.step(1); },
                 {"SGD::step", d2.weight().name(), "[1,2]", stale});
    check_exact(d1.weight().data().to_vector(), {0.5f, 0.5f}, "nothing queued by the refusal");
    trainer.step(1, /*ignore_stale_grad=*/true);
    check_exact(d1.weight().data().to_vector(), {0.0f, 0.0f}, "d1 stepped");
    check_exact(d2.weight().data().to_vector(), {0.5f, 0.5f}, "d2 skipped, not stepped again");
    // A fresh gradient from set_data counts as never written.
    d1.weight().set_data(nd::ones({1, 2}));
    backward_through({&d2});
    expect_error([&] { trainer.step(1); }, {"SGD::step", d1.weight().name()});
  });
}

// A layer added twice shares its weights: backward sums the gradient of both uses, and a step
// applies it once (it applied it once per listing: twice the learning rate).
TEST_CASE("a shared layer's parameters are listed and updated once", "[nn]") {
  leak_checked([] {
    nn::Dense d(2, "", false, 2);
    d.weight().set_data(nd::from_vector({1, 0, 0, 1}, {2, 2}));
    nn::Sequential net;
    net.add(d).add(d);
    REQUIRE(net.parameters().size() == 1);
    nn::SGD trainer(net.parameters(), 0.1f);
    NDArray y;
    {
      autograd::Record rec;
      y = net(nd::from_vector({1, 1}, {1, 2})).sum();
    }
    y.backward();
    check_exact(d.weight().grad().to_vector(), {2, 2, 2, 2}, "both uses summed");
    trainer.step(1);
    check_exact(d.weight().data().to_vector(), {0.8f, -0.2f, -0.2f, 0.8f}, "W - 0.1 * grad, once");
    // A list that names a parameter twice steps it once too.
    nn::SGD twice({d.weight(), d.weight()}, 0.1f);
    twice.step(1);
    check_exact(d.weight().data().to_vector(), {0.6f, -0.4f, -0.4f, 0.6f}, "one more step");
    CHECK(d.weight().same_as(net.parameters()[0]));
    CHECK_FALSE(d.weight().same_as(nn::Dense(2, "", false, 2).weight()));
  });
}

// An SGD step inside a Record changed the weights the recording read (backward then failed, or,
// with one layer, gave no error at all); w -= ... refused it. Both are refused now.
TEST_CASE("SGD::step inside a Record is refused and changes nothing", "[nn][errors]") {
  leak_checked([] {
    nn::Dense d(1, "", false, 2);
    d.weight().set_data(nd::from_vector({1, -1}, {1, 2}));
    nn::SGD trainer(d.parameters(), 0.5f);
    NDArray y;
    {
      autograd::Record rec;
      y = d(nd::from_vector({1, 2}, {1, 2})).sum();
      CHECK_THROWS_WITH(trainer.step(1), Catch::Contains("SGD::step") &&
                                             Catch::Contains("autograd is recording"));
    }
    check_exact(d.weight().data().to_vector(), {1, -1}, "the weights are untouched");
    y.backward();  // the graph is intact
    check_exact(d.weight().grad().to_vector(), {1, 2}, "gradient");
    trainer.step(1);  // outside the Record: applied
    check_exact(d.weight().data().to_vector(), {0.5f, -2}, "after the step");
  });
}

TEST_CASE("DataIter hands out the chapter's batches and times them", "[nn]") {
  leak_checked([] {
    nn::DataIter it(3, 8, 5);
    nn::Batch b;
    int n = 0;
    while (it.next(b)) {
      CHECK(b.X.shape() == Shape{8, 5});
      CHECK(b.y.shape() == Shape{8});
      ++n;
    }
    CHECK(n == 3);
    REQUIRE(it.handout_s().size() == 3);
    CHECK(it.handout_s()[0] == 0.0);
    CHECK(it.handout_s()[2] >= it.handout_s()[1]);
    check_exact(b.y.to_vector(), std::vector<float>(8, 1.0f), "labels are ones");
  });
  expect_error([] { nn::DataIter(1, 0, 5); }, {"DataIter", "batch_size"});
}

TEST_CASE("an MLP learns a small synthetic regression", "[nn]") {
  leak_checked([] {
    const std::uint64_t seed = test_seed("nn regression", 5);
    nd::seed(seed);
    const std::int64_t n = 256, f = 8;
    NDArray X = nd::random_normal({n, f});
    NDArray w_true = nd::random_normal({f, 1});
    NDArray y = (nd::dot(X, w_true) + 0.5f).reshape({n});
    nn::Sequential net;
    net.add(nn::Dense(32, "relu")).add(nn::Dense(1));
    nn::L2Loss loss;
    nn::SGD trainer(net.parameters(), 0.1f);
    float first = -1, last = -1;
    for (int step = 0; step < 300; ++step) {
      NDArray l;
      {
        autograd::Record rec;
        l = loss(net(X), y);
      }
      l.backward(nd::ones({n}));
      trainer.step(n);
      if (step == 0) first = l.mean().item();
      if (step == 299) last = l.mean().item();
    }
    INFO("mean loss: first " << first << ", last " << last);
    CHECK(first > 1.0f);   // the labels have variance ~f: an untrained net is far off
    CHECK(last < 0.05f);   // a well-fit regression
    CHECK(net.parameters().size() == 4);
  });
}

TEST_CASE("with a byte bound, engine memory stays under the bound plus one op's output",
          "[nn][backpressure]") {
  BoundGuard guard;
  const std::int64_t elems = 1 << 18;  // 1 MiB outputs
  const std::size_t out_bytes = static_cast<std::size_t>(elems) * sizeof(float);
  const std::size_t bound = 4 * out_bytes;
  const int n = static_cast<int>(scaled(400, 40));
  NDArray x = nd::ones({elems});
  NDArray acc = nd::zeros({elems});
  nd::waitall();
  const auto base = engine().stats().bytes_in_use;
  engine().set_max_inflight(engine().max_inflight_ops(), bound);
  engine().reset_peak_bytes();
  for (int i = 0; i < n; ++i) {
    NDArray y = nd::exp(x) + 1.0f;  // two outputs per iteration, each dropped at once
    acc += y;
  }
  nd::waitall();
  const auto peak = engine().stats().bytes_peak;
  INFO("peak " << peak << " base " << base << " bound " << bound);
  CHECK(peak <= base + bound + out_bytes);
  const float want = static_cast<float>(n) * (std::exp(1.0f) + 1.0f);
  CHECK(acc.to_vector()[0] == Approx(want).epsilon(1e-5));
}

// Arrays of 64 KiB or less dropped while a queued op reads them wait in a short FIFO on the
// dropping thread (engine_impl.cpp, defer_delete); those that leave it still waiting on their
// readers counted nothing toward the byte bound, so such a loop grew past any bound.
TEST_CASE("small arrays dropped while their readers wait count toward the byte bound",
          "[nn][backpressure]") {
  BoundGuard guard;
  const std::int64_t elems = 4096;  // 16 KiB: small enough to be deferred
  const std::size_t bytes = static_cast<std::size_t>(elems) * sizeof(float);
  const int n = 100;
  NDArray g = nd::ones({1, elems});
  nd::waitall();
  // The bound is set but never reached: the pushes below must not wait on the held op.
  engine().set_max_inflight(0, std::size_t(1) << 30);
  auto held = std::make_shared<Completion>();
  std::atomic<bool> handed{false};
  engine().push_async([&, held](Completion c) {
    *held = std::move(c);
    handed = true;
  }, {}, {g.var()}, PushOptions{Device{}, 0, "hold g", 0});
  std::vector<NDArray> outs;
  for (int i = 0; i < n; ++i) {
    NDArray a = nd::ones({elems, 1});
    outs.push_back(nd::dot(g, a));  // waits for g; `a` is dropped while it does
  }
  while (!handed) std::this_thread::yield();
  const std::uint64_t inflight = engine().stats().inflight_bytes;
  INFO("inflight " << inflight << ", " << n << " arrays of " << bytes << " bytes dropped");
  CHECK(inflight >= (n - 16) * bytes);  // all but those still in the FIFO (kDeferred)
  CHECK(inflight <= n * bytes + n * sizeof(float) + (std::size_t(1) << 16));  // each byte once
  held->done();
  nd::waitall();
  CHECK(engine().stats().inflight_bytes == 0);
  CHECK(outs.back().to_vector()[0] == static_cast<float>(elems));
}

TEST_CASE("bounded by default: with a small simulated memory limit, a loop that looks unbounded "
          "stays under the derived bound plus one op's output", "[nn][backpressure]") {
  // The process-wide engine as it would start on a machine with 32 MiB to spare (an injected
  // limit, not this machine's): its default byte bound is 8 MiB. Nothing is set by the loop.
  const MemoryLimit limit{32ull << 20, BoundSource::kCgroup};
  configure_engine(EngineOptions::from_env(limit));
  const std::size_t bound = engine().max_inflight_bytes();
  CHECK(bound == default_max_inflight_bytes(limit.bytes));
  const std::int64_t elems = 1 << 18;  // 1 MiB outputs
  const std::size_t out_bytes = static_cast<std::size_t>(elems) * sizeof(float);
  const int n = static_cast<int>(scaled(200, 40));  // unbounded, 2n MiB would be queued
  std::uint64_t peak = 0, base = 0, waits = 0;
  float got = 0;
  {
    NDArray x = nd::ones({elems});
    NDArray acc = nd::zeros({elems});
    nd::waitall();
    base = engine().stats().bytes_in_use;
    const std::uint64_t waits_before = engine().stats().push_waits;
    engine().reset_peak_bytes();
    for (int i = 0; i < n; ++i) {
      NDArray y = nd::exp(x) + 1.0f;
      acc += y;
    }
    nd::waitall();
    const EngineStats s = engine().stats();
    peak = s.bytes_peak;
    waits = s.push_waits - waits_before;
    CHECK(s.max_inflight_bytes_source == BoundSource::kCgroup);
    got = acc.to_vector()[0];
  }
  configure_engine(EngineOptions::from_env());  // the machine's own limit again
  INFO("peak " << peak << " base " << base << " bound " << bound << ", " << waits << " waits");
  CHECK(peak <= base + bound + out_bytes);
  CHECK(waits > 0);  // the bound, not the machine, held the loop back
  CHECK(got == Approx(static_cast<float>(n) * (std::exp(1.0f) + 1.0f)).epsilon(1e-5));
}

TEST_CASE("without a bound the frontend runs far ahead, and the results are right",
          "[nn][backpressure]") {
  BoundGuard guard;
  engine().set_max_inflight(engine().max_inflight_ops(), 0);
  const std::int64_t elems = 1 << 16;
  const std::size_t out_bytes = static_cast<std::size_t>(elems) * sizeof(float);
  const int n = static_cast<int>(scaled(200, 20));
  NDArray x = nd::ones({elems});
  nd::waitall();
  const auto base = engine().stats().bytes_in_use;
  engine().reset_peak_bytes();
  // A gate holds every op that reads x until the frontend has pushed them all: deterministic
  // proof that push did not wait, with all n outputs allocated at once.
  asyncnd_test::Gate gate;
  engine().push([&] { gate.wait(); }, {}, {x.var()});
  std::vector<NDArray> ys;
  for (int i = 0; i < n; ++i) ys.push_back(x * static_cast<float>(i));
  CHECK(engine().stats().pending >= static_cast<std::uint64_t>(n));
  CHECK(engine().stats().bytes_in_use >= base + n * out_bytes);
  gate.open = true;
  for (int i = 0; i < n; i += 17) CHECK(ys[i].to_vector()[elems - 1] == static_cast<float>(i));
  ys.clear();
  nd::waitall();
  CHECK(engine().stats().bytes_peak >= base + n * out_bytes);
  CHECK(engine().stats().bytes_in_use == base);
}
