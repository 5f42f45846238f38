// Autograd: every differentiable op's gradient against central finite differences of a double
// precision forward pass (seeded random shapes and values, broadcasting included), composition
// and accumulation, the recording scopes, errors, and that backward frees the graph.
#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace ref = asyncnd_ref;

namespace {

using D = std::vector<double>;

// ---- the double-precision forward pass the finite differences use ----------------------------

D bin(const D& a, const Shape& as, const D& b, const Shape& bs,
      const std::function<double(double, double)>& f) {
  const Shape os = ref::broadcast(as, bs);
  D out(static_cast<std::size_t>(ref::size_of(os)));
  for (std::int64_t i = 0; i < ref::size_of(os); ++i) {
    const auto idx = ref::unravel(i, os);
    out[i] = f(a[ref::broadcast_index(idx, as)], b[ref::broadcast_index(idx, bs)]);
  }
  return out;
}

D un(const D& a, const std::function<double(double)>& f) {
  D out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
  return out;
}

enum class Red { kSum, kMean, kMax, kNorm };

// Over `axis` (>= 0) or everything (axis < 0).
D red(const D& x, const Shape& s, int axis, Red kind) {
  Shape os;
  if (axis >= 0) {
    os = s;
    os[static_cast<std::size_t>(axis)] = 1;
  }
  const std::int64_t n_out = axis >= 0 ? ref::size_of(os) : 1;
  D acc(static_cast<std::size_t>(n_out), kind == Red::kMax ? -INFINITY : 0.0);
  for (std::int64_t i = 0; i < ref::size_of(s); ++i) {
    std::int64_t o = 0;
    if (axis >= 0) {
      auto idx = ref::unravel(i, s);
      idx[static_cast<std::size_t>(axis)] = 0;
      for (std::size_t d = 0; d < s.size(); ++d) o = o * os[d] + idx[d];
    }
    const double v = x[static_cast<std::size_t>(i)];
    if (kind == Red::kMax) {
      acc[o] = std::max(acc[o], v);
    } else {
      acc[o] += kind == Red::kNorm ? v * v : v;
    }
  }
  const double n = axis >= 0 ? static_cast<double>(s[static_cast<std::size_t>(axis)])
                             : static_cast<double>(ref::size_of(s));
  for (double& v : acc) {
    if (kind == Red::kMean) v /= n;
    if (kind == Red::kNorm) v = std::sqrt(v);
  }
  return acc;
}

// op(a) op(b) for row-major a [ra,ca], b [rb,cb].
D mm(const D& a, const Shape& as, const D& b, const Shape& bs, bool ta, bool tb) {
  const std::int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1], n = tb ? bs[0] : bs[1];
  D c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * as[1] + i] : a[i * as[1] + p];
        const double y = tb ? b[j * bs[1] + p] : b[p * bs[1] + j];
        acc += x * y;
      }
      c[i * n + j] = acc;
    }
  return c;
}

D transpose_nd(const D& x, const Shape& s) {
  const Shape os(s.rbegin(), s.rend());
  D out(x.size());
  for (std::int64_t i = 0; i < ref::size_of(os); ++i) {
    const auto idx = ref::unravel(i, os);
    std::int64_t src = 0;
    for (std::size_t d = 0; d < s.size(); ++d) src = src * s[d] + idx[s.size() - 1 - d];
    out[i] = x[src];
  }
  return out;
}

// ---- the check --------------------------------------------------------------------------------

struct Case {
  std::string name;
  std::vector<Shape> shapes;
  std::function<NDArray(const std::vector<NDArray>&)> f;  // the engine's forward
  std::function<D(const std::vector<D>&)> ref;             // the same in double, flattened
  std::vector<std::pair<float, float>> ranges = {};        // per input; default [-2, 2]
};

D to_d(const std::vector<float>& v) { return D(v.begin(), v.end()); }

// Backpropagates a random head gradient w through c.f and compares every input's gradient with
// central differences of sum(ref(x) * w) in double.
void check_case(const Case& c, Rng& rng) {
  INFO("case " << c.name);
  std::vector<NDArray> xs;
  std::vector<D> xd;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    const auto r = i < c.ranges.size() ? c.ranges[i] : std::make_pair(-2.0f, 2.0f);
    auto v = random_values(rng, shape_size(c.shapes[i]), r.first, r.second);
    INFO("input " << i << " " << str(c.shapes[i]));
    xs.push_back(array_of(v, c.shapes[i]));
    xs.back().attach_grad();
    xd.push_back(to_d(v));
  }
  NDArray y;
  {
    autograd::Record rec;
    y = c.f(xs);
  }
  const D y_ref = c.ref(xd);
  REQUIRE(static_cast<std::size_t>(y.size()) == y_ref.size());
  const auto wv = random_values(rng, y.size(), -1.0f, 1.0f);
  const D w = to_d(wv);
  y.backward(array_of(wv, y.shape()));

  const auto loss = [&](const std::vector<D>& x) {
    const D out = c.ref(x);
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
    return s;
  };
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::vector<float> got = xs[i].grad().to_vector();
    std::vector<double> want(xd[i].size());
    std::vector<D> xp = xd;
    for (std::size_t e = 0; e < xd[i].size(); ++e) {
      const double h = 1e-6 * std::max(1.0, std::fabs(xd[i][e]));
      xp[i][e] = xd[i][e] + h;
      const double up = loss(xp);
      xp[i][e] = xd[i][e] - h;
      const double down = loss(xp);
      xp[i][e] = xd[i][e];
      want[e] = (up - down) / (2 * h);
    }
    // The analytical gradient is float32 arithmetic on float32 values (a few ulps per op, sums
    // of up to a few hundred terms); the reference is double. A wrong formula is off by O(1).
    std::size_t bad = 0, first = 0;
    for (std::size_t e = 0; e < want.size(); ++e) {
      if (!(std::fabs(got[e] - want[e]) <= 1e-3 + 1e-3 * std::fabs(want[e])) && bad++ == 0)
        first = e;
    }
    INFO("input " << i << " " << str(c.shapes[i]) << ": " << bad << " of " << want.size()
                  << " differ; first at " << first << ": got "
                  << (got.empty() ? 0.0f : got[first]) << " want "
                  << (want.empty() ? 0.0 : want[first]));
    CHECK(bad == 0);
  }
}

const std::pair<float, float> kPositive{0.5f, 2.5f};

}  // namespace

TEST_CASE("elementwise gradients with broadcasting match finite differences", "[autograd]") {
  Rng rng(test_seed("autograd elementwise"));
  struct Bin {
    const char* name;
    std::function<NDArray(const NDArray&, const NDArray&)> f;
    std::function<double(double, double)> g;
    std::pair<float, float> ra, rb;
  };
  const std::pair<float, float> any{-2.0f, 2.0f};
  const std::vector<Bin> ops = {
      {"add", [](auto& a, auto& b) { return a + b; }, [](double a, double b) { return a + b; }, any, any},
      {"sub", [](auto& a, auto& b) { return a - b; }, [](double a, double b) { return a - b; }, any, any},
      {"mul", [](auto& a, auto& b) { return a * b; }, [](double a, double b) { return a * b; }, any, any},
      {"div", [](auto& a, auto& b) { return a / b; }, [](double a, double b) { return a / b; }, any, kPositive},
      {"pow", [](auto& a, auto& b) { return nd::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, kPositive, {-1.5f, 1.5f}},
  };
  for (const Bin& op : ops) {
    for (int rep = 0; rep < 6; ++rep) {
      auto [sa, sb] = random_broadcast_pair(rng);
      Case c{op.name,
             {sa, sb},
             [&](const std::vector<NDArray>& x) { return op.f(x[0], x[1]); },
             [&, sa = sa, sb = sb](const std::vector<D>& x) { return bin(x[0], sa, x[1], sb, op.g); },
             {op.ra, op.rb}};
      leak_checked([&] { check_case(c, rng); });
    }
  }
}

TEST_CASE("unary and scalar-form gradients match finite differences", "[autograd]") {
  Rng rng(test_seed("autograd unary"));
  struct Un {
    const char* name;
    std::function<NDArray(const NDArray&)> f;
    std::function<double(double)> g;
    std::pair<float, float> range;
  };
  const std::pair<float, float> any{-2.0f, 2.0f};
  const std::vector<Un> ops = {
      {"neg", [](auto& a) { return -a; }, [](double a) { return -a; }, any},
      {"exp", [](auto& a) { return nd::exp(a); }, [](double a) { return std::exp(a); }, any},
      {"log", [](auto& a) { return nd::log(a); }, [](double a) { return std::log(a); }, kPositive},
      {"sqrt", [](auto& a) { return nd::sqrt(a); }, [](double a) { return std::sqrt(a); }, kPositive},
      {"relu", [](auto& a) { return nd::relu(a); }, [](double a) { return a > 0 ? a : 0.0; }, any},
      {"sigmoid", [](auto& a) { return nd::sigmoid(a); },
       [](double a) { return 1 / (1 + std::exp(-a)); }, any},
      {"tanh", [](auto& a) { return nd::tanh(a); }, [](double a) { return std::tanh(a); }, any},
      {"x+s", [](auto& a) { return a + 1.5f; }, [](double a) { return a + 1.5; }, any},
      {"s+x", [](auto& a) { return 1.5f + a; }, [](double a) { return 1.5 + a; }, any},
      {"x-s", [](auto& a) { return a - 1.5f; }, [](double a) { return a - 1.5; }, any},
      {"s-x", [](auto& a) { return 1.5f - a; }, [](double a) { return 1.5 - a; }, any},
      {"x*s", [](auto& a) { return a * -3.0f; }, [](double a) { return a * -3.0; }, any},
      {"s*x", [](auto& a) { return -3.0f * a; }, [](double a) { return -3.0 * a; }, any},
      {"x/s", [](auto& a) { return a / 4.0f; }, [](double a) { return a / 4.0; }, any},
      {"s/x", [](auto& a) { return 2.0f / a; }, [](double a) { return 2.0 / a; }, kPositive},
      {"pow(x,2)", [](auto& a) { return a.pow(2.0f); }, [](double a) { return a * a; }, any},
      {"pow(x,1)", [](auto& a) { return a.pow(1.0f); }, [](double a) { return a; }, any},
      {"pow(x,3)", [](auto& a) { return a.pow(3.0f); }, [](double a) { return a * a * a; }, any},
      {"pow(x,-0.5)", [](auto& a) { return a.pow(-0.5f); },
       [](double a) { return std::pow(a, -0.5); }, kPositive},
      {"copy_to(cpu)", [](auto& a) { return a.copy_to(Device::cpu()); }, [](double a) { return a; }, any},
      {"copy", [](auto& a) { return a.copy(); }, [](double a) { return a; }, any},
  };
  for (const Un& op : ops) {
    for (int rep = 0; rep < 3; ++rep) {
      const Shape s = random_shape(rng);
      Case c{op.name,
             {s},
             [&](const std::vector<NDArray>& x) { return op.f(x[0]); },
             [&](const std::vector<D>& x) { return un(x[0], op.g); },
             {op.range}};
      leak_checked([&] { check_case(c, rng); });
    }
  }
}

TEST_CASE("dot, transpose, reshape and broadcast_to gradients match finite differences",
          "[autograd]") {
  Rng rng(test_seed("autograd linalg"));
  const auto dim = [&] { return 1 + static_cast<std::int64_t>(rng() % 6); };
  for (int rep = 0; rep < 3; ++rep) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const std::int64_t m = dim(), k = dim(), n = dim();
      const Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
      Case c{std::string("dot ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0"),
             {sa, sb},
             [=](const std::vector<NDArray>& x) { return nd::dot(x[0], x[1], ta, tb); },
             [=](const std::vector<D>& x) { return mm(x[0], sa, x[1], sb, ta, tb); }};
      leak_checked([&] { check_case(c, rng); });
    }
    const std::int64_t m = dim(), k = dim(), n = dim();
    Case mat{"matmul",
             {{m, k}, {k, n}},
             [](const std::vector<NDArray>& x) { return nd::matmul(x[0], x[1]); },
             [=](const std::vector<D>& x) { return mm(x[0], {m, k}, x[1], {k, n}, false, false); }};
    leak_checked([&] { check_case(mat, rng); });

    const Shape s = random_shape(rng);
    Case tr{"transpose " + str(s),
            {s},
            [](const std::vector<NDArray>& x) { return x[0].T(); },
            [=](const std::vector<D>& x) { return transpose_nd(x[0], s); }};
    leak_checked([&] { check_case(tr, rng); });

    // reshape to the flat shape, then something that depends on the position (a transpose).
    const std::int64_t size = shape_size(s);
    Case rs{"reshape " + str(s),
            {s},
            [=](const std::vector<NDArray>& x) { return x[0].reshape({1, size}).T() * 2.0f; },
            [=](const std::vector<D>& x) { return un(x[0], [](double v) { return 2 * v; }); }};
    leak_checked([&] { check_case(rs, rng); });

    auto [sa, sb] = random_broadcast_pair(rng);
    const Shape target = ref::broadcast(sa, sb);
    Case bt{"broadcast_to " + str(sa) + " -> " + str(target),
            {sa},
            [=](const std::vector<NDArray>& x) { return nd::broadcast_to(x[0], target); },
            [=](const std::vector<D>& x) {
              return bin(x[0], sa, D(static_cast<std::size_t>(ref::size_of(target)), 0.0), target,
                         [](double a, double) { return a; });
            }};
    leak_checked([&] { check_case(bt, rng); });
  }
}

TEST_CASE("reduction gradients match finite differences", "[autograd]") {
  Rng rng(test_seed("autograd reductions"));
  struct R {
    const char* name;
    Red kind;
  };
  const std::vector<R> kinds = {{"sum", Red::kSum}, {"mean", Red::kMean}, {"max", Red::kMax},
                                {"norm", Red::kNorm}};
  const auto call = [](Red kind, const NDArray& a, bool all, int axis, bool keep) {
    switch (kind) {
      case Red::kSum: return all ? a.sum() : a.sum(axis, keep);
      case Red::kMean: return all ? a.mean() : a.mean(axis, keep);
      case Red::kMax: return all ? a.max() : a.max(axis, keep);
      case Red::kNorm: break;
    }
    return a.norm();
  };
  for (const R& r : kinds) {
    for (int rep = 0; rep < 4; ++rep) {
      Shape s = random_shape(rng, 4, 5);
      if (s.empty()) s = {3};
      const bool all = r.kind == Red::kNorm || rep == 0;
      const int nd = static_cast<int>(s.size());
      const int axis = static_cast<int>(rng() % static_cast<unsigned>(nd));
      const int given = rep % 2 ? axis - nd : axis;  // negative axes too
      const bool keep = rep == 2;
      Case c{std::string(r.name) + (all ? " all" : " axis " + std::to_string(given)) +
                 (keep ? " keepdims" : "") + " of " + str(s),
             {s},
             [=](const std::vector<NDArray>& x) { return call(r.kind, x[0], all, given, keep); },
             [=](const std::vector<D>& x) { return red(x[0], s, all ? -1 : axis, r.kind); }};
      leak_checked([&] { check_case(c, rng); });
    }
  }
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
