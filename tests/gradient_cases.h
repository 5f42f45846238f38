// The gradient checks of autograd, as data: each differentiable op of the op table with a double
// precision reference of its forward pass, and check_case, which compares the engine's gradients
// with central finite differences of that reference. Used by test_autograd.cpp (which runs them)
// and test_op_table.cpp (which checks that every gradient op of the table has one).
#pragma once

#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ops_test_util.h"

namespace asyncnd_test {

namespace ref = asyncnd_ref;
using asyncnd::Device;
using asyncnd::shape_size;
namespace autograd = asyncnd::autograd;
using asyncnd::NDArray;
using asyncnd::Shape;
namespace nd = asyncnd::nd;

using D = std::vector<double>;

// ---- the double-precision forward pass the finite differences use ----------------------------

inline D bin(const D& a, const Shape& as, const D& b, const Shape& bs,
      const std::function<double(double, double)>& f) {
  const Shape os = ref::broadcast(as, bs);
  D out(static_cast<std::size_t>(ref::size_of(os)));
  for (std::int64_t i = 0; i < ref::size_of(os); ++i) {
    const auto idx = ref::unravel(i, os);
    out[i] = f(a[ref::broadcast_index(idx, as)], b[ref::broadcast_index(idx, bs)]);
  }
  return out;
}

inline D un(const D& a, const std::function<double(double)>& f) {
  D out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
  return out;
}

enum class Red { kSum, kMean, kMax, kNorm };

// Over `axis` (>= 0) or everything (axis < 0).
inline D red(const D& x, const Shape& s, int axis, Red kind) {
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
inline D mm(const D& a, const Shape& as, const D& b, const Shape& bs, bool ta, bool tb) {
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

inline D transpose_nd(const D& x, const Shape& s) {
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

inline D to_d(const std::vector<float>& v) { return D(v.begin(), v.end()); }

// Backpropagates a random head gradient w through c.f and compares every input's gradient with
// central differences of sum(ref(x) * w) in double.
inline void check_case(const Case& c, Rng& rng) {
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

inline const std::pair<float, float> kPositive{0.5f, 2.5f};


// A binary op's gradient check: the engine's op and its double reference, with input ranges.
struct BinaryGrad {
  const char* name;
  std::function<NDArray(const NDArray&, const NDArray&)> f;
  std::function<double(double, double)> g;
  std::pair<float, float> ra, rb;
};
inline const std::vector<BinaryGrad>& binary_gradient_ops() {
  const std::pair<float, float> any{-2.0f, 2.0f};
  static const std::vector<BinaryGrad> ops = {
      {"add", [](auto& a, auto& b) { return a + b; }, [](double a, double b) { return a + b; }, any, any},
      {"sub", [](auto& a, auto& b) { return a - b; }, [](double a, double b) { return a - b; }, any, any},
      {"mul", [](auto& a, auto& b) { return a * b; }, [](double a, double b) { return a * b; }, any, any},
      {"div", [](auto& a, auto& b) { return a / b; }, [](double a, double b) { return a / b; }, any, kPositive},
      {"pow", [](auto& a, auto& b) { return nd::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, kPositive, {-1.5f, 1.5f}},
  };
  return ops;
}
inline Case binary_case(const BinaryGrad& op, const Shape& sa, const Shape& sb) {
  return Case{op.name,
              {sa, sb},
              [f = op.f](const std::vector<NDArray>& x) { return f(x[0], x[1]); },
              [g = op.g, sa, sb](const std::vector<D>& x) { return bin(x[0], sa, x[1], sb, g); },
              {op.ra, op.rb}};
}

// A unary op's (or a scalar form's) gradient check.
struct UnaryGrad {
  const char* name;
  std::function<NDArray(const NDArray&)> f;
  std::function<double(double)> g;
  std::pair<float, float> range;
};
inline const std::vector<UnaryGrad>& unary_gradient_ops() {
  const std::pair<float, float> any{-2.0f, 2.0f};
  static const std::vector<UnaryGrad> ops = {
      {"neg", [](auto& a) { return -a; }, [](double a) { return -a; }, any},
      {"exp", [](auto& a) { return nd::exp(a); }, [](double a) { return std::exp(a); }, any},
      {"log", [](auto& a) { return nd::log(a); }, [](double a) { return std::log(a); }, kPositive},
      {"sqrt", [](auto& a) { return nd::sqrt(a); }, [](double a) { return std::sqrt(a); }, kPositive},
      {"relu", [](auto& a) { return nd::relu(a); }, [](double a) { return a > 0 ? a : 0.0; }, any},
      {"sigmoid", [](auto& a) { return nd::sigmoid(a); },
       [](double a) { return 1 / (1 + std::exp(-a)); }, any},
      {"tanh", [](auto& a) { return nd::tanh(a); }, [](double a) { return std::tanh(a); }, any},
      {"abs", [](auto& a) { return nd::abs(a); }, [](double a) { return std::fabs(a); }, any},
      {"x+s", [](auto& a) { return a + 1.5f; }, [](double a) { return a + 1.5; }, any},
      {"s+x", [](auto& a) { return 1.5f + a; }, [](double a) { return 1.5 + a; }, any},
      {"x-s", [](auto& a) { return a - 1.5f; }, [](double a) { return a - 1.5; }, any},
      {"s-x", [](auto& a) { return 1.5f - a; }, [](double a) { return 1.5 - a; }, any},
      {"x*s", [](auto& a) { return a * -3.0f; }, [](double a) { return a * -3.0; }, any},
      {"s*x", [](auto& a) { return -3.0f * a; }, [](double a) { return -3.0 * a; }, any},
      {"x/s", [](auto& a) { return a / 4.0f; }, [](double a) { return a / 4.0; }, any},
      {"s/x", [](auto& a) { return 2.0f / a; }, [](double a) { return 2.0 / a; }, kPositive},
      {"pow(s,x)", [](auto& a) { return nd::pow(1.5f, a); }, [](double a) { return std::pow(1.5, a); }, any},
      {"pow(x,2)", [](auto& a) { return a.pow(2.0f); }, [](double a) { return a * a; }, any},
      {"pow(x,1)", [](auto& a) { return a.pow(1.0f); }, [](double a) { return a; }, any},
      {"pow(x,3)", [](auto& a) { return a.pow(3.0f); }, [](double a) { return a * a * a; }, any},
      {"pow(x,-0.5)", [](auto& a) { return a.pow(-0.5f); },
       [](double a) { return std::pow(a, -0.5); }, kPositive},
      {"copy_to(cpu)", [](auto& a) { return a.copy_to(Device::cpu()); }, [](double a) { return a; }, any},
      {"copy", [](auto& a) { return a.copy(); }, [](double a) { return a; }, any},
  };
  return ops;
}
inline Case unary_case(const UnaryGrad& op, const Shape& s) {
  return Case{op.name,
              {s},
              [f = op.f](const std::vector<NDArray>& x) { return f(x[0]); },
              [g = op.g](const std::vector<D>& x) { return un(x[0], g); },
              {op.range}};
}

// One round of the linear algebra and shape checks (dot in every transpose, matmul, transpose,
// reshape, broadcast_to), on shapes drawn from rng.
inline std::vector<Case> linalg_gradient_cases(Rng& rng) {
  std::vector<Case> cases;
  const auto dim = [&] { return 1 + static_cast<std::int64_t>(rng() % 6); };
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const std::int64_t m = dim(), k = dim(), n = dim();
    const Shape sa = ta ? Shape{k, m} : Shape{m, k}, sb = tb ? Shape{n, k} : Shape{k, n};
    Case c{std::string("dot ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0"),
           {sa, sb},
           [=](const std::vector<NDArray>& x) { return nd::dot(x[0], x[1], ta, tb); },
           [=](const std::vector<D>& x) { return mm(x[0], sa, x[1], sb, ta, tb); }};
    cases.push_back(c);
  }
  const std::int64_t m = dim(), k = dim(), n = dim();
  Case mat{"matmul",
           {{m, k}, {k, n}},
           [](const std::vector<NDArray>& x) { return nd::matmul(x[0], x[1]); },
           [=](const std::vector<D>& x) { return mm(x[0], {m, k}, x[1], {k, n}, false, false); }};
  cases.push_back(mat);

  const Shape s = random_shape(rng);
  Case tr{"transpose " + str(s),
          {s},
          [](const std::vector<NDArray>& x) { return x[0].T(); },
          [=](const std::vector<D>& x) { return transpose_nd(x[0], s); }};
  cases.push_back(tr);

  // reshape to the flat shape, then something that depends on the position (a transpose).
  const std::int64_t size = shape_size(s);
  Case rs{"reshape " + str(s),
          {s},
          [=](const std::vector<NDArray>& x) { return x[0].reshape({1, size}).T() * 2.0f; },
          [=](const std::vector<D>& x) { return un(x[0], [](double v) { return 2 * v; }); }};
  cases.push_back(rs);

  // Named copies, not a structured binding: C++17 lets no lambda capture one (GCC accepts it;
  // clang does not).
  const auto shapes = random_broadcast_pair(rng);
  const Shape sa = shapes.first, sb = shapes.second;
  const Shape target = ref::broadcast(sa, sb);
  Case bt{"broadcast_to " + str(sa) + " -> " + str(target),
          {sa},
          [=](const std::vector<NDArray>& x) { return nd::broadcast_to(x[0], target); },
          [=](const std::vector<D>& x) {
            return bin(x[0], sa, D(static_cast<std::size_t>(ref::size_of(target)), 0.0), target,
                       [](double a, double) { return a; });
          }};
  cases.push_back(bt);
  return cases;
}

// The reductions' checks for round `rep` (0..3: over everything, then over an axis, negative,
// with keepdims), on shapes drawn from rng.
inline std::vector<Case> reduction_gradient_cases(Rng& rng, int rep) {
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
  std::vector<Case> cases;
  for (const R& r : kinds) {
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
    cases.push_back(c);
  }
  return cases;
}

}  // namespace asyncnd_test
