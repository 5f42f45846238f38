// Autograd: every differentiable op's gradient against central finite differences of a double
// precision forward pass (seeded random shapes and values, broadcasting included), composition
// and accumulation, the recording scopes, errors, and that backward frees the graph.
#include <asyncnd/asyncnd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "autograd/autograd_internal.h"  // detail::want_grad_parts, take_grad_parts
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

TEST_CASE("a parameter's gradient in row slices equals the whole product's", "[autograd]") {
  leak_checked([&] {
    // What nn::DistributedTrainer asks for (detail::want_grad_parts): backward writes a matrix
    // parameter's gradient as row slices, each its own array, then copies them into grad().
    Rng rng(test_seed("autograd row parts"));
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        INFO("trans_a " << ta << " trans_b " << tb);
        const std::int64_t m = 5 + rng() % 7, k = 3 + rng() % 6, n = 4 + rng() % 7;
        const Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
        const NDArray va = nd::random_normal(sa), vb = nd::random_normal(sb);
        const NDArray c = nd::random_normal({m, n});  // a weighting, so every element matters
        const auto run = [&](int parts_a, int parts_b, NDArray& a, NDArray& b) {
          a = va.copy();
          b = vb.copy();
          a.attach_grad();
          b.attach_grad();
          detail::want_grad_parts(a, parts_a);
          detail::want_grad_parts(b, parts_b);
          NDArray l;
          {
            autograd::Record rec;
            l = (nd::dot(a, b, ta != 0, tb != 0) * c).sum();
          }
          l.backward();
        };
        NDArray a0, b0, a, b;
        run(0, 0, a0, b0);
        run(3, 2, a, b);
        // Slices of a GEMM may block the sums differently from the whole: float tolerance.
        check_close(a.grad().to_vector(), a0.grad().to_vector(), 1e-5, 1e-6, "a's gradient");
        check_close(b.grad().to_vector(), b0.grad().to_vector(), 1e-5, 1e-6, "b's gradient");
        // grad() handed the buffers out (the caller may write them): the slices are gone.
        CHECK(detail::take_grad_parts(a).empty());

        run(3, 2, a, b);
        const std::vector<NDArray> pa = detail::take_grad_parts(a), pb = detail::take_grad_parts(b);
        REQUIRE(pa.size() == 3);
        REQUIRE(pb.size() == 2);
        CHECK(detail::take_grad_parts(a).empty());  // taken once
        // In row order, about equal, and together the gradient itself.
        for (const auto& [parts, whole] :
             {std::make_pair(pa, a.grad()), std::make_pair(pb, b.grad())}) {
          std::vector<float> joined;
          std::int64_t rows = 0;
          for (const NDArray& p : parts) {
            REQUIRE(p.ndim() == 2);
            CHECK(p.shape()[1] == whole.shape()[1]);
            CHECK(p.shape()[0] >= whole.shape()[0] / static_cast<std::int64_t>(parts.size()));
            rows += p.shape()[0];
            const std::vector<float> v = p.to_vector();
            joined.insert(joined.end(), v.begin(), v.end());
          }
          CHECK(rows == whole.shape()[0]);
          check_exact(joined, whole.to_vector(), "the slices, row after row");
        }

        // A handle kept from before backward could write the buffer after it, unseen (and be
        // gone before the slices are taken): backward makes no slices while one exists.
        {
          NDArray held = a.grad();
          NDArray l;
          {
            autograd::Record rec;
            l = (nd::dot(a, b, ta != 0, tb != 0) * c).sum();
          }
          l.backward();
          held *= 2.0f;  // as a user scaling the gradient
        }
        CHECK(detail::take_grad_parts(a).empty());
        // A parameter used twice gets the sum, computed whole.
        NDArray l;
        {
          autograd::Record rec;
          l = (nd::dot(a, b, ta != 0, tb != 0) * c).sum() + (a * a).sum();
        }
        l.backward();
        CHECK(detail::take_grad_parts(a).empty());
        const std::vector<float> g = a.grad().to_vector(), g0 = a0.grad().to_vector(),
                                 av = va.to_vector();
        std::vector<float> want(g0.size());
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = g0[i] + 2 * av[i];
        check_close(g, want, 1e-5, 1e-5, "a used twice");
      }
    }
  });
}

TEST_CASE("backward queues a parameter's gradient ahead of the layers below", "[autograd]") {
  leak_checked([&] {
    // Dense-like layers: h = relu(x W1 + b1), y = h W2 + b2. Backward through the second layer
    // computes W2's and b2's gradients and the gradient flowing on to h. Nothing in backward waits
    // for the parameters', but a DistributedTrainer's allreduce does: they go first (priority), so
    // that it runs beside the rest. Everything is queued behind a gate first, so that the order is
    // the engine's choice among ready ops, not the order of the pushes.
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

TEST_CASE("a long recorded graph that is never backpropagated is freed without recursion",
          "[autograd]") {
  const auto before = engine().stats();
  {
    NDArray x = nd::ones({4});
    x.attach_grad();
    NDArray y = x;
    autograd::Record rec;
    const std::int64_t n = scaled(200000, 50000);
    for (std::int64_t i = 0; i < n; ++i) y = y + 1.0f;  // an 8 MB stack overflowed here
  }
  engine().waitall();
  const auto after = engine().stats();
  CHECK(after.bytes_in_use == before.bytes_in_use);
  CHECK(after.live_vars == before.live_vars);
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

TEST_CASE("recording is per thread", "[autograd]") {
  autograd::Record rec;
  bool other = true;
  std::thread t([&] { other = autograd::is_recording(); });
  t.join();
  CHECK(autograd::is_recording());
  CHECK_FALSE(other);
}
