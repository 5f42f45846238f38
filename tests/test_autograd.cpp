// Autograd: every differentiable op's gradient against central finite differences of a double
// precision forward pass (seeded random shapes and values, broadcasting included), composition
// and accumulation, the recording scopes, errors, and that backward frees the graph.
#include <asyncnd/asyncnd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gradient_cases.h"
#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace ref = asyncnd_ref;

TEST_CASE("elementwise gradients with broadcasting match finite differences", "[autograd]") {
  Rng rng(test_seed("autograd elementwise"));
  for (const BinaryGrad& op : binary_gradient_ops()) {
    for (int rep = 0; rep < 6; ++rep) {
      const auto shapes = random_broadcast_pair(rng);  // no structured binding: the lambda
      const Shape sa = shapes.first, sb = shapes.second;  // captures them (C++17)
      leak_checked([&] { check_case(binary_case(op, sa, sb), rng); });
    }
  }
}

TEST_CASE("unary and scalar-form gradients match finite differences", "[autograd]") {
  Rng rng(test_seed("autograd unary"));
  for (const UnaryGrad& op : unary_gradient_ops()) {
    for (int rep = 0; rep < 3; ++rep) {
      const Case c = unary_case(op, random_shape(rng));
      leak_checked([&] { check_case(c, rng); });
    }
  }
}

TEST_CASE("dot, transpose, reshape and broadcast_to gradients match finite differences",
          "[autograd]") {
  Rng rng(test_seed("autograd linalg"));
  for (int rep = 0; rep < 3; ++rep)
    for (const Case& c : linalg_gradient_cases(rng)) leak_checked([&] { check_case(c, rng); });
}

TEST_CASE("reduction gradients match finite differences", "[autograd]") {
  Rng rng(test_seed("autograd reductions"));
  for (int rep = 0; rep < 4; ++rep)
    for (const Case& c : reduction_gradient_cases(rng, rep)) leak_checked([&] { check_case(c, rng); });
}

// Where the textbook formulas give 0 * inf (NaN), the gradients take PyTorch's values: pow's
// d/da is 0 where the exponent is 0, its d/db is 0 where the base is 0 and the exponent >= 0; a NaN
// maximum's gradient goes to the NaNs. Elsewhere the formulas' infinities stay.
TEST_CASE("pow and max gradients where the formulas give zero times infinity", "[autograd]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  leak_checked([&] {
    auto grad_of = [](NDArray x, const std::function<NDArray(const NDArray&)>& f) {
      x.attach_grad();
      NDArray y;
      {
        autograd::Record rec;
        y = f(x).sum();
      }
      y.backward();
      return x.grad().to_vector();
    };
    // x^0 is constant: 0 everywhere, at x == 0 too (was NaN there); x^0.5 has an infinite slope at 0.
    check_exact(grad_of(nd::from_vector({0, 1, -2}, {3}), [](const NDArray& x) { return nd::pow(x, 0.0f); }),
                {0, 0, 0}, "d(x^0)/dx");
    check_exact(grad_of(nd::from_vector({0, 4}, {2}), [](const NDArray& x) { return nd::pow(x, 0.5f); }),
                {inf, 0.25f}, "d(x^0.5)/dx");
    // 0^x: 0 for x > 0, 1 at x == 0, so d/dx is 0 there (was NaN); inf for x < 0, whose slope stays.
    check_exact(grad_of(nd::from_vector({2, 1, 0, -1}, {4}), [](const NDArray& x) { return nd::pow(0.0f, x); }),
                {0, 0, 0, -inf}, "d(0^x)/dx");
    check_close(grad_of(nd::from_vector({3}, {1}), [](const NDArray& x) { return nd::pow(2.0f, x); }),
                {8 * std::log(2.0f)}, 1e-6, 0, "d(2^x)/dx");
    // Both operands arrays: a = [0, 0, 2, 0], b = [2, 0, 3, -1].
    const NDArray a = nd::from_vector({0, 0, 2, 0}, {4}), b = nd::from_vector({2, 0, 3, -1}, {4});
    check_exact(grad_of(a, [&](const NDArray& x) { return nd::pow(x, b); }), {0, 0, 12, -inf},
                "d(a^b)/da");
    check_close(grad_of(b, [&](const NDArray& x) { return nd::pow(a, x); }),
                {0, 0, 8 * std::log(2.0f), -inf}, 1e-6, 0, "d(a^b)/db");
    // max: the gradient goes to the NaN that made the maximum NaN (was lost: NaN != NaN).
    check_exact(grad_of(nd::from_vector({1, nan, 2}, {3}), [](const NDArray& x) { return x.max(); }),
                {0, 1, 0}, "d max / dx with a NaN");
    check_exact(grad_of(nd::from_vector({1, nan, 3, 2}, {2, 2}), [](const NDArray& x) { return x.max(1); }),
                {0, 1, 1, 0}, "d max(axis 1) / dx with a NaN in one row");
  });
}

TEST_CASE("gradients compose, and an input used twice gets the sum", "[autograd]") {
  Rng rng(test_seed("autograd composition"));
  for (int rep = 0; rep < 4; ++rep) {
    const std::int64_t m = 1 + rng() % 5, k = 1 + rng() % 5;
    const Shape sw{k, 3}, sx{m, k}, sb{3};
    // A small network: mean(sigmoid(x W + b) * x W) + sum(x * x) / m: x is used three times.
    Case c{"composition",
           {sx, sw, sb},
           [=](const std::vector<NDArray>& x) {
             NDArray h = nd::dot(x[0], x[1]);
             return (nd::sigmoid(h + x[2]) * h).mean() + (x[0] * x[0]).sum() / float(m);
           },
           [=](const std::vector<D>& x) {
             const D h = mm(x[0], sx, x[1], sw, false, false);
             const D s = bin(h, {m, 3}, x[2], sb,
                             [](double a, double b) { return 1 / (1 + std::exp(-(a + b))); });
             double acc = 0;
             for (std::size_t i = 0; i < h.size(); ++i) acc += s[i] * h[i];
             double sq = 0;
             for (double v : x[0]) sq += v * v;
             return D{acc / static_cast<double>(h.size()) + sq / static_cast<double>(m)};
           }};
    leak_checked([&] { check_case(c, rng); });
  }
}

TEST_CASE("a head gradient that is a parameter's own grad buffer is read as it was", "[autograd]") {
  // Backward writes a parameter's gradient into grad() while other gradient ops still read the
  // head gradient: y.backward(w.grad()) read w.grad() after it was overwritten.
  const std::vector<float> xs{1.0f, 2.0f}, ws{3.0f, 4.0f};
  NDArray x = nd::from_vector(xs, {2}), w = nd::from_vector(ws, {2});
  x.attach_grad();
  w.attach_grad();
  NDArray y;
  {
    autograd::Record rec;
    y = nd::exp(x) * w;
  }
  y.backward(nd::ones({2}), /*retain_graph=*/true);  // w.grad() = e^x
  y.backward(w.grad());                               // head G = e^x: x.grad = G w e^x
  std::vector<float> gx, gw;
  for (std::size_t i = 0; i < 2; ++i) {
    const float e = std::exp(xs[i]);
    gx.push_back(e * ws[i] * e);
    gw.push_back(e * e);
  }
  check_close(x.grad().to_vector(), gx, 1e-6, 0.0, "x.grad");
  check_close(w.grad().to_vector(), gw, 1e-6, 0.0, "w.grad");

  // A product, whose GEMM wrote the buffer it read: W.grad = x^T G with G = W.grad itself.
  NDArray a = nd::from_vector({1, 2, 3, 4}, {2, 2}), W = nd::from_vector({1, 0, 0, 1}, {2, 2});
  W.attach_grad();
  {
    autograd::Record rec;
    y = nd::dot(a, W);
  }
  y.backward(nd::ones({2, 2}), /*retain_graph=*/true);  // W.grad = a^T 1 = [[4,4],[6,6]]
  y.backward(W.grad());  // a^T [[4,4],[6,6]] = [[22,22],[32,32]]
  check_exact(W.grad().to_vector(), {22, 22, 32, 32}, "W.grad");
}

TEST_CASE("backward writes grad in place, frees the graph, and runs without blocking",
          "[autograd]") {
  leak_checked([] {
    NDArray x = nd::from_vector({1, 2, 3}, {3});
    x.attach_grad();
    NDArray g0 = x.grad();  // a handle taken before backward sees the result
    NDArray y;
    {
      autograd::Record rec;
      CHECK(autograd::is_recording());
      y = (x * x).sum();
    }
    CHECK_FALSE(autograd::is_recording());
    const auto bytes_with_graph = engine().stats().bytes_in_use;
    y.backward();
    check_exact(g0.to_vector(), {2, 4, 6}, "grad of sum(x*x)");
    engine().waitall();
    // The x*x intermediate was held by the graph only: backward let it go.
    CHECK(engine().stats().bytes_in_use < bytes_with_graph);
    // A second backward on a freed graph is an error, queuing nothing.
    expect_error([&] { y.backward(); }, {"backward", "freed", "retain_graph"});

    // retain_graph: twice, same result (written, not accumulated).
    NDArray z;
    {
      autograd::Record rec;
      z = (x * 3.0f).sum();
    }
    z.backward(nd::ones({}), true);
    z.backward();
    check_exact(x.grad().to_vector(), {3, 3, 3}, "after two backward with retain_graph");

    // Ops outside a Record are not recorded; autograd::record and Pause.
    NDArray w = autograd::record([&] {
      NDArray kept = x * 2.0f;
      NDArray constant;
      {
        autograd::Pause pause;
        constant = x * 100.0f;  // not recorded: a constant
      }
      return (kept + constant).sum();
    });
    w.backward();
    check_exact(x.grad().to_vector(), {2, 2, 2}, "Pause makes a constant");
  });
}

TEST_CASE("backward queues a parameter's gradient ahead of the layers below", "[autograd]") {
  // Dense-like layers: h = relu(x W1 + b1), y = h W2 + b2. Backward through the second layer
  // computes W2's and b2's gradients and the gradient flowing on to h. Nothing in backward waits
  // for the parameters', but a DistributedTrainer's allreduce does: they go first (priority), so
  // that it runs beside the rest. Everything is queued behind a gate first, so that the order is
  // the engine's choice among ready ops, not the order of the pushes.
  if (engine().kind() == EngineKind::kNaive) {
    SUCCEED("the naive engine runs every op at its push: no two are ever ready at once");
    return;
  }
  leak_checked([&] {
    NDArray x = nd::random_normal({64, 32});
    NDArray w1 = nd::random_normal({32, 48}), b1 = nd::random_normal({48});
    NDArray w2 = nd::random_normal({48, 40}), b2 = nd::random_normal({40});
    for (NDArray* p : {&w1, &b1, &w2, &b2}) p->attach_grad();
    nd::waitall();
    std::atomic<bool> open{false};
    engine().start_profiling();
    engine().push(
        [&open] {
          while (!open.load()) std::this_thread::yield();
        },
        {}, {x.var()});
    NDArray l;
    {
      autograd::Record rec;
      NDArray h = nd::relu(nd::dot(x, w1) + b1);
      l = (nd::dot(h, w2) + b2).sum();
    }
    l.backward();
    open = true;
    nd::waitall();
    engine().stop_profiling();
    const std::vector<ProfileEvent> events = engine().profile_events();
    const auto writer_of = [&](const NDArray& a) -> const ProfileEvent* {
      for (const ProfileEvent& e : events)
        for (std::uint64_t v : e.writes)
          if (v == a.grad().var().id()) return &e;
      return nullptr;
    };
    const ProfileEvent* dw2 = writer_of(w2);  // h^T g, straight into w2.grad()
    const ProfileEvent* db2 = writer_of(b2);  // the sum's copy into b2.grad()
    const ProfileEvent* dh = nullptr;         // g w2^T: reads w2, writes a new array
    for (const ProfileEvent& e : events)
      if (e.name == "dot" && e.writes.size() == 1 && e.writes[0] != w2.grad().var().id())
        for (std::uint64_t v : e.reads)
          if (v == w2.var().id()) dh = &e;
    REQUIRE(dw2 != nullptr);
    REQUIRE(db2 != nullptr);
    REQUIRE(dh != nullptr);
    CHECK(dw2->name == "dot");  // no copy after the product
    // With one worker they run in that order; with more, side by side at least.
    CHECK(dw2->start_us <= dh->end_us);
    CHECK(db2->start_us <= dh->end_us);
    if (engine().num_workers() == 1) {
      CHECK(dw2->end_us <= dh->start_us);
      CHECK(db2->end_us <= dh->start_us);
    }
  });
}

TEST_CASE("a deep chain frees everything after backward", "[autograd]") {
  const auto before = engine().stats();
  {
    NDArray x = nd::ones({64});
    x.attach_grad();
    NDArray y = x, l;
    {
      autograd::Record rec;
      for (int i = 0; i < 500; ++i) y = y * 0.99f + 0.01f;
      l = y.sum();
    }
    l.backward();
    std::vector<float> g = x.grad().to_vector();
    CHECK(g[0] == Approx(std::pow(0.99, 500)).epsilon(1e-4));
  }
  engine().waitall();
  const auto after = engine().stats();
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.live_vars == before.live_vars);
  CHECK(after.pending == 0);
}

namespace {
// Records a chain of `scaled(200000, 50000)` steps y = step(y) from a leaf of `shape`, drops it
// without backward, and checks that its memory and variables are all back.
template <class Step>
void check_chain_freed(const Shape& shape, Step step) {
  const auto before = engine().stats();
  {
    NDArray x = nd::ones(shape);
    x.attach_grad();
    NDArray y = x;
    autograd::Record rec;
    const std::int64_t n = scaled(200000, 50000);
    for (std::int64_t i = 0; i < n; ++i) y = step(y);
  }
  engine().waitall();
  const auto after = engine().stats();
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.live_vars == before.live_vars);
}
}  // namespace

TEST_CASE("a long recorded graph that is never backpropagated is freed without recursion",
          "[autograd]") {
  check_chain_freed({4}, [](const NDArray& y) { return y + 1.0f; });  // an 8 MB stack overflowed
}

// An op that used an array twice (y * y) holds two handles to it: the release took neither node
// (neither was the sole owner while the other was there), and the chain was freed recursively.
TEST_CASE("a long recorded chain using each array twice is freed without recursion",
          "[autograd]") {
  check_chain_freed({1}, [](const NDArray& y) { return y * y; });  // overflowed at ~50 000
}

// Backward writes the leaves' grad() buffers as it goes; a recorded op that read one (as a
// constant) had its gradient computed from the new gradient, or from the old, as the order of
// the expression fell. Both orders, and a parameter whose product gradient goes straight into
// its buffer, now read the values the ops recorded.
TEST_CASE("a graph that reads a grad buffer sees the values it recorded", "[autograd]") {
  for (bool c_first : {true, false}) {
    INFO("c * x.grad() " << (c_first ? "first" : "second"));
    NDArray x = nd::from_vector({1, 2, 3}, {3}), c = nd::from_vector({5, 5, 5}, {3});
    x.attach_grad();
    c.attach_grad();
    {
      NDArray y;
      {
        autograd::Record rec;
        y = (x * 10.0f).sum();
      }
      y.backward();  // x.grad() = [10, 10, 10]
    }
    NDArray xg = x.grad(), l;
    {
      autograd::Record rec;
      l = c_first ? (c * xg).sum() + (x * x).sum() : (x * x).sum() + (c * xg).sum();
    }
    l.backward();
    check_exact(c.grad().to_vector(), {10, 10, 10}, "c.grad: x.grad() as recorded");
    check_exact(x.grad().to_vector(), {2, 4, 6}, "x.grad");
  }
  NDArray w = nd::from_vector({1, 2, 3, 4}, {2, 2}), z = nd::ones({2, 2});
  w.attach_grad();
  z.attach_grad();
  {
    NDArray y;
    {
      autograd::Record rec;
      y = (w * 3.0f).sum();
    }
    y.backward();  // w.grad() = 3s
  }
  NDArray wg = w.grad(), l;
  {
    autograd::Record rec;
    l = nd::dot(z * wg, w).sum();
  }
  l.backward();
  check_exact(w.grad().to_vector(), {6, 6, 6, 6}, "w.grad");
  check_exact(z.grad().to_vector(), {9, 21, 9, 21}, "z.grad: 3 * [3, 7, 3, 7]");
}

TEST_CASE("autograd errors name the call and the shapes, queuing nothing", "[autograd][errors]") {
  NDArray x = nd::ones({2, 3});
  NDArray s = x.sum(), wrong = nd::ones({3, 2}), right = nd::ones({2, 3});
  nd::waitall();
  expect_error([&] { x.grad(); }, {"grad", "[2,3]", "attach_grad"});
  expect_error([&] { s.backward(); }, {"backward", "not computed while recording"});
  x.attach_grad();
  NDArray y;
  {
    autograd::Record rec;
    y = x * 2.0f;
    expect_error([&] { y += 1.0f; }, {"+=", "in-place", "[2,3]"});
    expect_error([&] { y.attach_grad(); }, {"attach_grad", "computed while recording"});
  }
  expect_error([&] { y.backward(); }, {"backward", "[2,3]", "not a scalar", "head gradient"});
  expect_error([&] { y.backward(wrong); }, {"backward", "[3,2]", "[2,3]"});
  expect_error([&] { y.backward(NDArray()); }, {"backward", "empty"});
  y.backward(right);
  check_exact(x.grad().to_vector(), std::vector<float>(6, 2.0f), "head gradient of ones");
  // In place outside a Record is fine (this is how a trainer updates parameters).
  x -= x.grad();
  check_exact(x.to_vector(), std::vector<float>(6, -1.0f), "x -= grad");
  nd::waitall();
}

TEST_CASE("in place through a reshaped view of a recorded array throws while recording",
          "[autograd][errors]") {
  NDArray x = nd::from_vector({1, 2, 3, 4}, {4});
  x.attach_grad();
  NDArray v = x.reshape({2, 2});  // made before the recording: a view with state of its own
  NDArray y, z, w;
  {
    autograd::Record rec;
    y = (x * x).sum();
    z = x * 1.0f;
    {
      autograd::Pause pause;
      w = z.reshape({2, 2});  // a view of a recorded result, made while paused
    }
    // Before, both were taken, and backward read the changed values: dy/dx was 20x, not 2x.
    expect_error([&] { v *= 10.0f; }, {"*=", "in-place", "a view of an array", "[2,2]"});
    expect_error([&] { w += 1.0f; }, {"+=", "in-place", "a view of an array", "[2,2]"});
    NDArray other = nd::zeros({2, 2});
    expect_error([&] { other += v; }, {"+=", "in-place", "[2,2]"});
  }
  y.backward();
  check_exact(x.grad().to_vector(), {2, 4, 6, 8}, "dy/dx = 2x, x unchanged");
  v *= 10.0f;  // outside the recording: allowed, and it is x
  check_exact(x.to_vector(), {10, 20, 30, 40}, "x through its view");
}

TEST_CASE("recording is per thread", "[autograd]") {
  autograd::Record rec;
  bool other = true;
  std::thread t([&] { other = autograd::is_recording(); });
  t.join();
  CHECK(autograd::is_recording());
  CHECK_FALSE(other);
}

// Autograd keeps the arrays a gradient reads, not copies of their values: an array changed in
// place after it was recorded (after the Record scope, or one that needs no gradient, or the
// base of a recorded view) would make backward compute with the new values. Backward refuses.
TEST_CASE("backward refuses values that were changed in place after they were recorded",
          "[autograd][errors]") {
  SECTION("a parameter changed after the recording, before backward") {
    NDArray x = nd::from_vector({1, 2, 3}, {3});
    x.attach_grad();
    NDArray y;
    {
      autograd::Record rec;
      y = (x * x).sum();
    }
    x += 1.0f;  // outside the recording: allowed, but y's gradient reads x
    expect_error([&] { y.backward(); },
                 {"backward", "mul", "[3]", "changed in place", "after it was recorded"});
    // A count of writes, not a comparison of values: writing the old values back does not help.
    x -= 1.0f;
    expect_error([&] { y.backward(); }, {"backward", "changed in place"});
    // Nothing was queued: a new recording from the same x works as before.
    {
      autograd::Record rec;
      y = (x * x).sum();
    }
    y.backward();
    check_exact(x.grad().to_vector(), {2, 4, 6}, "dy/dx = 2x");
  }
  SECTION("an input that needs no gradient, changed while recording") {
    NDArray x = nd::from_vector({1, 2, 3}, {3});
    NDArray a = nd::from_vector({2, 2, 2}, {3});
    x.attach_grad();
    NDArray product, sum;
    {
      autograd::Record rec;
      product = (x * a).sum();
      sum = (x + a).sum();
      a *= 5.0f;  // a needs no gradient: the write is allowed, but d(product)/dx is a's old values
    }
    expect_error([&] { product.backward(); }, {"backward", "mul", "[3]", "changed in place"});
    sum.backward();  // add's gradient reads no values: a change of a is fine there
    check_exact(x.grad().to_vector(), {1, 1, 1}, "d(x + a)/dx");
  }
  SECTION("the base of a view that alone was recorded") {
    NDArray x = nd::from_vector({1, 2, 3, 4}, {2, 2});
    NDArray base = nd::from_vector({1, 1, 1, 1}, {4});
    NDArray view = base.reshape({2, 2});
    x.attach_grad();
    NDArray y;
    {
      autograd::Record rec;
      y = (x * view).sum();
    }
    base += 3.0f;  // the base knows nothing of the recording; the storage does
    expect_error([&] { y.backward(); }, {"backward", "mul", "[2,2]", "changed in place"});
  }
  SECTION("an output whose value the gradient reads") {
    NDArray x = nd::from_vector({0, 1}, {2});
    x.attach_grad();
    NDArray e, y;
    {
      autograd::Record rec;
      e = nd::exp(x);
      y = e.sum();
    }
    NDArray alias = e.reshape({2});
    {
      autograd::Pause pause;
      alias *= 2.0f;
    }
    expect_error([&] { y.backward(); }, {"backward", "exp", "[2]", "changed in place"});
  }
  SECTION("pow's exponent, whose gradient reads both inputs") {
    // d(a^b)/db = a^b log a was computed from a and b, yet listed a and the output: a changed b
    // went unnoticed and gave the gradient at the new b.
    NDArray a = nd::from_vector({2, 3}, {2});
    NDArray b = nd::from_vector({1, 1}, {2});
    b.attach_grad();
    NDArray y;
    {
      autograd::Record rec;
      y = nd::pow(a, b).sum();
    }
    b += 1.0f;
    expect_error([&] { y.backward(); }, {"backward", "pow", "[2]", "changed in place"});
  }
  SECTION("0^x, whose gradient reads x") {
    NDArray x = nd::from_vector({-1, 2}, {2});
    x.attach_grad();
    NDArray y;
    {
      autograd::Record rec;
      y = nd::pow(0.0f, x).sum();
    }
    x += 2.0f;
    expect_error([&] { y.backward(); }, {"backward", "[2]", "changed in place"});
  }
  nd::waitall();
}
