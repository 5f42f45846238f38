// Seeded fuzz: random sequences of documented API calls, good and bad, on the process-wide engine.
// Every value read is checked against a reference computed independently in double precision,
// carrying a sound bound on the float32 error of each element; every bad call must throw
// asyncnd::Error naming the op and queue nothing; at the end no array, variable or byte is left.
//   ASYNCND_FUZZ_SEED=N   reproduce a run (the seed is printed)
//   ASYNCND_FUZZ_STEPS=N  steps per engine configuration (default 4000, times ASYNCND_TEST_SCALE)
// `make fuzz` runs long sequences for several seeds, engine kinds and worker counts.
#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"

using namespace asyncnd;

namespace {

// Unit roundoff of float32, doubled: covers one rounding per element with margin for FMA
// contraction and reassociation in the SIMD kernels.
constexpr double kU = 1.0 / (1 << 23);
// exp, tanh, sigmoid: the kernels' accuracy (tests/conformance_cases.h allows 2e-6 relative,
// 1e-7 absolute), doubled.
constexpr double kTransRel = 4e-6, kTransAbs = 2e-7;
// Values stay small so that bounds stay meaningful; larger results are dropped.
constexpr double kMaxMagnitude = 1e4;

using Rng = std::mt19937_64;

std::int64_t size_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Values and, per element, a bound on |computed - exact|.
struct Ref {
  Shape shape;
  std::vector<double> v, e;
};

struct Entry {
  NDArray a;
  Ref r;
  int group = 0;           // arrays sharing storage (reshape views) share a group
  std::string poisoned;    // non-empty: an op it depends on failed with this message
};

std::int64_t unravel_at(std::int64_t i, const Shape& out, const Shape& in) {
  // Flat position in `in` (broadcast to `out`) of output element i.
  std::int64_t flat = 0, stride = 1;
  const std::size_t off = out.size() - in.size();
  for (std::size_t d = out.size(); d-- > 0;) {
    const std::int64_t idx = i % out[d];
    i /= out[d];
    if (d >= off) {
      const std::int64_t dim = in[d - off];
      if (dim != 1) flat += idx * stride;
      stride *= dim;
    }
  }
  return flat;
}

bool broadcastable(const Shape& a, const Shape& b, Shape* out) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape s(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i + a.size() >= n ? a[i + a.size() - n] : 1;
    const std::int64_t y = i + b.size() >= n ? b[i + b.size() - n] : 1;
    if (x != y && x != 1 && y != 1) return false;
    s[i] = x == 1 ? y : x;
  }
  if (out) *out = s;
  return true;
}

// f(a, ea, b, eb) -> {value, bound}
Ref ref_binary(const Ref& a, const Ref& b, const std::function<std::pair<double, double>(double, double, double, double)>& f) {
  Ref r;
  broadcastable(a.shape, b.shape, &r.shape);
  const std::int64_t n = size_of(r.shape);
  r.v.resize(n);
  r.e.resize(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t ia = unravel_at(i, r.shape, a.shape), ib = unravel_at(i, r.shape, b.shape);
    auto [v, e] = f(a.v[ia], a.e[ia], b.v[ib], b.e[ib]);
    r.v[i] = v;
    r.e[i] = e;
  }
  return r;
}

std::pair<double, double> add_b(double a, double ea, double b, double eb) {
  const double v = a + b;
  return {v, (ea + eb) * (1 + kU) + kU * std::abs(v)};
}
std::pair<double, double> sub_b(double a, double ea, double b, double eb) { return add_b(a, ea, -b, eb); }
std::pair<double, double> mul_b(double a, double ea, double b, double eb) {
  const double v = a * b, prop = std::abs(a) * eb + std::abs(b) * ea + ea * eb;
  return {v, prop * (1 + kU) + kU * std::abs(v)};
}

Ref ref_unary(const Ref& a, const std::function<std::pair<double, double>(double, double)>& f) {
  Ref r{a.shape, a.v, a.e};
  for (std::size_t i = 0; i < r.v.size(); ++i) std::tie(r.v[i], r.e[i]) = f(a.v[i], a.e[i]);
  return r;
}

// Reduction over `axis` (-1: all) with keepdims; kind 0 sum, 1 mean, 2 max.
Ref ref_reduce(const Ref& a, int axis, bool keepdims, int kind) {
  Ref r;
  Shape outer_shape;
  std::int64_t outer = 1, len = 1, inner = 1;
  if (axis < 0) {
    len = size_of(a.shape);
    if (keepdims) r.shape.assign(a.shape.size(), 1);
  } else {
    for (int d = 0; d < static_cast<int>(a.shape.size()); ++d) {
      if (d < axis) outer *= a.shape[d];
      if (d > axis) inner *= a.shape[d];
      if (d == axis) {
        len = a.shape[d];
        if (keepdims) r.shape.push_back(1);
      } else {
        r.shape.push_back(a.shape[d]);
      }
    }
  }
  const std::int64_t n = outer * inner;
  r.v.assign(n, 0.0);
  r.e.assign(n, 0.0);
  const double gamma = (len + 2) * kU;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t in = 0; in < inner; ++in) {
      double s = 0, sabs = 0, err = 0, mx = -INFINITY, emx = 0;
      for (std::int64_t k = 0; k < len; ++k) {
        const std::int64_t i = (o * len + k) * inner + in;
        s += a.v[i];
        sabs += std::abs(a.v[i]);
        err += a.e[i];
        if (a.v[i] > mx) mx = a.v[i];
        emx = std::max(emx, a.e[i]);
      }
      double v, e;
      if (kind == 2) {
        v = mx;
        e = emx;  // max is 1-Lipschitz in the largest element error
      } else {
        // Any summation order: |error| <= sum of input errors + (len+1)u * sum |x| (+ slack).
        v = s;
        e = err * (1 + gamma) + gamma * (sabs + err);
        if (kind == 1) {
          v /= static_cast<double>(len);
          e = e / static_cast<double>(len) + kU * std::abs(v);
        }
      }
      r.v[o * inner + in] = v;
      r.e[o * inner + in] = e;
    }
  }
  return r;
}

Ref ref_dot(const Ref& a, const Ref& b) {
  const std::int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  Ref r{{m, n}, std::vector<double>(m * n), std::vector<double>(m * n)};
  const double gamma = (k + 2) * kU;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0, sabs = 0, prop = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = a.v[i * k + p], y = b.v[p * n + j], ex = a.e[i * k + p], ey = b.e[p * n + j];
        s += x * y;
        sabs += std::abs(x * y);
        prop += std::abs(x) * ey + std::abs(y) * ex + ex * ey;
      }
      r.v[i * n + j] = s;
      r.e[i * n + j] = prop * (1 + gamma) + gamma * (sabs + prop);
    }
  }
  return r;
}

Ref ref_transpose(const Ref& a) {
  // Reverses the axes (NumPy's default).
  Ref r;
  r.shape.assign(a.shape.rbegin(), a.shape.rend());
  const std::int64_t n = size_of(a.shape);
  r.v.resize(n);
  r.e.resize(n);
  const std::size_t nd = a.shape.size();
  for (std::int64_t i = 0; i < n; ++i) {
    // multi-index of i in a, reversed, flattened in r
    std::int64_t rem = i, flat = 0;
    std::vector<std::int64_t> idx(nd);
    for (std::size_t d = nd; d-- > 0;) {
      idx[d] = rem % a.shape[d];
      rem /= a.shape[d];
    }
    for (std::size_t d = 0; d < nd; ++d) flat = flat * r.shape[d] + idx[nd - 1 - d];
    r.v[flat] = a.v[i];
    r.e[flat] = a.e[i];
  }
  return r;
}

class Fuzzer {
 public:
  Fuzzer(std::uint64_t seed, std::int64_t steps) : rng_(seed), steps_(steps) {}

  void run() {
    engine().waitall();
    base_ = engine().stats();
    for (step_ = 0; step_ < steps_; ++step_) {
      const int what = pick(100);
      try {
        if (what < 14 || pool_.size() < 3) create();
        else if (what < 30) binary();
        else if (what < 38) unary();
        else if (what < 46) reduce();
        else if (what < 50) dot();
        else if (what < 55) reshape_or_transpose();
        else if (what < 62) in_place();
        else if (what < 72) read();
        else if (what < 80) drop();
        else if (what < 90) bad_call();
        else if (what < 95) failing_op();
        else autograd();
      } catch (const Error& e) {
        FAIL("step " << step_ << " (kind " << what << "): unexpected asyncnd::Error: " << e.what());
      } catch (const std::exception& e) {  // not ours: the API let another exception through
        FAIL("step " << step_ << " (kind " << what << "): unexpected exception: " << e.what());
      }
      while (pool_.size() > 24) erase(pick(static_cast<int>(pool_.size())));
    }
    // Check everything still live, then let it all go.
    while (!pool_.empty()) {
      if (pool_.back().poisoned.empty()) check(pool_.back());
      erase(static_cast<int>(pool_.size()) - 1);
    }
    // Failures nobody waited for are reported by waitall (the first of them).
    std::string what;
    try {
      engine().waitall();
    } catch (const Error& e) {
      what = e.what();
    }
    if (unreported_.empty() ? !what.empty() : !names_unreported(what))
      FAIL("final waitall: got '" << what << "' with " << unreported_.size() << " failures unreported");
    const EngineStats s = engine().stats();
    CHECK(s.pending == 0);
    CHECK(s.bytes_in_use == base_.bytes_in_use);
    CHECK(s.live_vars == base_.live_vars);
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }

  Shape random_shape() {
    // Now and then an array large enough that the kernels split it across the workers.
    if (pick(40) == 0) return Shape{1 + pick(2), 150 + pick(100), 150 + pick(100)};
    Shape s(pick(4));
    for (auto& d : s) d = pick(9) == 0 ? (pick(4) == 0 ? 0 : 1) : 1 + pick(5);
    return s;
  }
  // A shape that broadcasts with s: a suffix of it, some dims set to 1, maybe extra leading dims.
  Shape broadcast_partner(const Shape& s) {
    Shape t(s.begin() + pick(static_cast<int>(s.size()) + 1), s.end());
    for (auto& d : t) if (pick(3) == 0) d = 1;
    if (pick(4) == 0 && t.size() == s.size() && t.size() < 4) t.insert(t.begin(), 1 + pick(3));
    return t;
  }

  Entry& add_entry(NDArray a, Ref r, int group = 0) {
    REQUIRE(static_cast<std::int64_t>(r.v.size()) == size_of(r.shape));  // the model itself
    REQUIRE(r.e.size() == r.v.size());
    pool_.push_back(Entry{std::move(a), std::move(r), group ? group : ++next_group_, ""});
    return pool_.back();
  }
  void erase(int i) { pool_.erase(pool_.begin() + i); }
  Entry& any() { return pool_[pick(static_cast<int>(pool_.size()))]; }
  // A healthy entry (not poisoned) or null.
  Entry* healthy() {
    for (int tries = 0; tries < 8; ++tries) {
      Entry& e = any();
      if (e.poisoned.empty()) return &e;
    }
    return nullptr;
  }

  Ref from_values(const std::vector<float>& v, const Shape& s) {
    Ref r{s, std::vector<double>(v.begin(), v.end()), std::vector<double>(v.size(), 0.0)};
    return r;
  }
  std::vector<float> random_values(std::int64_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(uniform(-2, 2));
    return v;
  }

  // Compares an array's values with its reference (a blocking read: one of the waits).
  void check(const Entry& e) {
    std::vector<float> got;
    // waitall would report pending failures: only when there are none.
    switch (pick(unreported_.empty() ? 4 : 3)) {
      case 0: got = e.a.to_vector(); break;
      case 1: e.a.wait_to_read(); got = e.a.to_vector(); break;
      case 2: {
        std::ostringstream printed;  // printing is an implicit wait too
        printed << e.a;
        REQUIRE(printed.str().find("<NDArray") != std::string::npos);
        got = e.a.to_vector();
        break;
      }
      default: engine().waitall(); got = e.a.to_vector(); break;
    }
    REQUIRE(static_cast<std::int64_t>(got.size()) == size_of(e.r.shape));
    REQUIRE(e.a.shape() == e.r.shape);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double bound = e.r.e[i] + 1e-30;
      if (!(std::abs(got[i] - e.r.v[i]) <= bound)) {
        FAIL("step " << step_ << ": element " << i << " of " << shape_str(e.r.shape) << " is " << got[i]
                     << ", reference " << e.r.v[i] << " +- " << bound);
      }
    }
  }

  // Keeps the pool to values whose bounds stay meaningful.
  void keep_or_drop(NDArray a, Ref r, int group = 0) {
    for (std::size_t i = 0; i < r.v.size(); ++i) {
      if (!(std::abs(r.v[i]) <= kMaxMagnitude) || !(r.e[i] <= 1e-2)) return;  // a dropped array
    }
    add_entry(std::move(a), std::move(r), group);
  }

  void create() {
    const Shape s = random_shape();
    const std::int64_t n = size_of(s);
    switch (pick(6)) {
      case 0: add_entry(nd::zeros(s), Ref{s, std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)}); break;
      case 1: add_entry(nd::ones(s), Ref{s, std::vector<double>(n, 1.0), std::vector<double>(n, 0.0)}); break;
      case 2: {
        const float v = static_cast<float>(uniform(-3, 3));
        add_entry(nd::full(s, v), Ref{s, std::vector<double>(n, v), std::vector<double>(n, 0.0)});
        break;
      }
      case 3: {
        const int len = pick(12);
        Ref r{{len}, {}, std::vector<double>(len, 0.0)};
        for (int i = 0; i < len; ++i) r.v.push_back(-3.0 + 0.5 * i);  // exact in float
        add_entry(nd::arange(-3.0f, -3.0f + 0.5f * len, 0.5f), std::move(r));
        break;
      }
      case 4: {
        // Random values: checked here against their distribution's range, then known exactly.
        NDArray a = nd::random_uniform(s, -1.0f, 1.0f);
        const std::vector<float> v = a.to_vector();
        for (float x : v) REQUIRE((x >= -1.0f && x <= 1.0f));
        add_entry(std::move(a), from_values(v, s));
        break;
      }
      default: {
        std::vector<float> v = random_values(n);
        add_entry(nd::from_vector(v, s), from_values(v, s));
      }
    }
  }

  void binary() {
    Entry* pa = healthy();
    if (!pa) return;
    Entry& a = *pa;
    // The partner: an existing array that broadcasts with a, to a result of at most 2^18
    // elements (twice the largest array random_shape makes), or a fresh one. Two large arrays,
    // one of them reshaped to [52539,1,1,1], once broadcast to 3.2e9 elements: the engine
    // computed them (13 GB), the reference's doubles did not fit (seed 2, step 52404).
    const Entry* pb = nullptr;
    for (int tries = 0; tries < 6 && !pb; ++tries) {
      const Entry& c = any();
      Shape out;
      if (c.poisoned.empty() && broadcastable(a.r.shape, c.r.shape, &out) &&
          size_of(out) <= (std::int64_t{1} << 18)) {
        pb = &c;
      }
    }
    NDArray b_arr;
    Ref b_ref;
    if (pb) {
      b_arr = pb->a;
      b_ref = pb->r;
    } else {
      const Shape s = broadcast_partner(a.r.shape);
      const std::vector<float> v = random_values(size_of(s));
      b_arr = nd::from_vector(v, s);
      b_ref = from_values(v, s);
    }
    const bool swap = pick(2) == 0;
    const NDArray& x = swap ? b_arr : a.a;
    const NDArray& y = swap ? a.a : b_arr;
    const Ref& rx = swap ? b_ref : a.r;
    const Ref& ry = swap ? a.r : b_ref;
    switch (pick(4)) {
      case 0: keep_or_drop(x + y, ref_binary(rx, ry, add_b)); break;
      case 1: keep_or_drop(nd::sub(x, y), ref_binary(rx, ry, sub_b)); break;
      case 2: keep_or_drop(x * y, ref_binary(rx, ry, mul_b)); break;
      default: {
        // Scalar forms: a power of two scales exactly; any other adds one rounding.
        const float s = pick(2) ? static_cast<float>(std::ldexp(1.0, pick(5) - 2)) : static_cast<float>(uniform(-2, 2));
        const Ref sr{{}, {s}, {0.0}};
        switch (pick(4)) {
          case 0: keep_or_drop(x * s, ref_binary(rx, sr, mul_b)); break;
          case 1: keep_or_drop(s + x, ref_binary(sr, rx, add_b)); break;
          case 2: keep_or_drop(x - s, ref_binary(rx, sr, sub_b)); break;
          default: {
            const float p2 = static_cast<float>(std::ldexp(1.0, pick(5) - 2));  // exact reciprocal
            keep_or_drop(x / p2, ref_binary(rx, Ref{{}, {1.0 / p2}, {0.0}}, mul_b));
          }
        }
      }
    }
  }

  void unary() {
    Entry* pa = healthy();
    if (!pa) return;
    const Entry& a = *pa;
    switch (pick(5)) {
      case 0: keep_or_drop(-a.a, ref_unary(a.r, [](double x, double e) { return std::make_pair(-x, e); })); break;
      case 1: keep_or_drop(nd::relu(a.a), ref_unary(a.r, [](double x, double e) { return std::make_pair(x < 0 ? 0.0 : x, e); })); break;
      case 2:
        keep_or_drop(nd::tanh(a.a), ref_unary(a.r, [](double x, double e) {
          const double v = std::tanh(x);
          return std::make_pair(v, e + kTransRel * std::abs(v) + kTransAbs);  // tanh is 1-Lipschitz
        }));
        break;
      case 3:
        keep_or_drop(nd::sigmoid(a.a), ref_unary(a.r, [](double x, double e) {
          const double v = 1.0 / (1.0 + std::exp(-x));
          return std::make_pair(v, 0.25 * e + kTransRel * std::abs(v) + kTransAbs);
        }));
        break;
      default: {
        for (double x : a.r.v) if (std::abs(x) > 8) return;
        keep_or_drop(nd::exp(a.a), ref_unary(a.r, [](double x, double e) {
          const double v = std::exp(x);
          // |exp(x + d) - exp(x)| <= exp(x) (exp(e) - 1) for |d| <= e
          return std::make_pair(v, v * std::expm1(e) * (1 + kTransRel) + kTransRel * v + kTransAbs);
        }));
      }
    }
  }

  void reduce() {
    Entry* pa = healthy();
    if (!pa) return;
    const Entry& a = *pa;
    const int nd = static_cast<int>(a.r.shape.size());
    const int kind = pick(3);
    const bool all = nd == 0 || pick(3) == 0;
    const int axis = all ? -1 : pick(nd);
    const bool keepdims = pick(2) == 0;
    const std::int64_t len = all ? size_of(a.r.shape) : a.r.shape[axis];
    if (kind == 2 && len == 0) {
      // max of nothing: a bad call, refused at the call
      expect_bad([&] { return all ? nd::max(a.a) : nd::max(a.a, axis, keepdims); }, "max");
      return;
    }
    if (kind == 1 && len == 0) return;  // mean of nothing is NaN, as NumPy
    const int given = (axis >= 0 && pick(2)) ? axis - nd : axis;  // negative axes count from the end
    NDArray out;
    if (all) {
      out = kind == 0 ? nd::sum(a.a) : kind == 1 ? nd::mean(a.a) : nd::max(a.a);
      if (keepdims) out = out.reshape(Shape(a.r.shape.size(), 1));
    } else {
      out = kind == 0 ? nd::sum(a.a, given, keepdims) : kind == 1 ? nd::mean(a.a, given, keepdims)
                                                           : nd::max(a.a, given, keepdims);
    }
    // Before keep_or_drop: it may grow the pool, and `a` refers into it.
    const Ref whole = ref_reduce(a.r, -1, false, kind);
    keep_or_drop(out, ref_reduce(a.r, axis, keepdims, kind));
    if (all && pick(2) == 0) {
      // item(): another implicit wait
      const float v = out.item();
      const Ref& r = whole;
      if (!(std::abs(v - r.v[0]) <= r.e[0] + 1e-30)) FAIL("step " << step_ << ": item " << v << " vs " << r.v[0]);
    }
  }

  void dot() {
    Entry* pa = healthy();
    if (!pa || pa->r.shape.size() != 2) return;
    const Entry& a = *pa;
    const std::int64_t k = a.r.shape[1];
    const Shape s{k, 1 + pick(5)};
    const std::vector<float> v = random_values(size_of(s));
    const NDArray b = nd::from_vector(v, s);
    keep_or_drop(nd::dot(a.a, b), ref_dot(a.r, from_values(v, s)));
  }

  void reshape_or_transpose() {
    Entry* pa = healthy();
    if (!pa) return;
    const Entry& a = *pa;
    if (pick(3) == 0) {
      keep_or_drop(nd::transpose(a.a), ref_transpose(a.r));
      return;
    }
    // A random factorisation of the size, maybe with one -1.
    std::int64_t n = size_of(a.r.shape);
    Shape s;
    if (n == 0) {
      s = {0, 1 + pick(3)};
    } else {
      while (n > 1 && s.size() < 3) {
        std::int64_t f = 1 + pick(static_cast<int>(std::min<std::int64_t>(n, 6)));
        while (n % f) --f;
        s.push_back(f);
        n /= f;
      }
      s.push_back(n);
    }
    Shape given = s;
    if (size_of(s) > 0 && pick(2) == 0) given[pick(static_cast<int>(s.size()))] = -1;
    Ref r = a.r;
    r.shape = s;
    NDArray view = a.a.reshape(given);
    add_entry(view, std::move(r), a.group);  // shares a's storage
  }

  void in_place() {
    Entry* pa = healthy();
    if (!pa) return;
    Entry& a = *pa;
    // Only on arrays that share their storage with no other array in the pool (a view's update
    // changes its base too; the model keeps to the simple case).
    if (std::count_if(pool_.begin(), pool_.end(), [&](const Entry& e) { return e.group == a.group; }) != 1) return;
    Ref r;
    if (pick(2) == 0) {
      Shape s = broadcast_partner(a.r.shape);
      Shape out;
      broadcastable(a.r.shape, s, &out);
      if (out != a.r.shape) return;
      const std::vector<float> v = random_values(size_of(s));
      const NDArray b = nd::from_vector(v, s);
      const Ref br = from_values(v, s);
      if (pick(2)) {
        a.a += b;
        r = ref_binary(a.r, br, add_b);
      } else {
        a.a *= b;
        r = ref_binary(a.r, br, mul_b);
      }
    } else {
      const float s = static_cast<float>(uniform(-2, 2));
      a.a -= s;
      r = ref_binary(a.r, Ref{{}, {s}, {0.0}}, sub_b);
    }
    a.r = std::move(r);
    for (std::size_t i = 0; i < a.r.v.size(); ++i) {
      if (!(std::abs(a.r.v[i]) <= kMaxMagnitude) || !(a.r.e[i] <= 1e-2)) {
        erase(static_cast<int>(&a - pool_.data()));
        return;
      }
    }
  }

  void read() {
    Entry& e = any();
    if (!e.poisoned.empty()) {
      // Every kind of wait reports the failure, naming the failed op; then it is gone.
      // waitall reports the first failure not yet reported (any of them, as ops finish in any
      // order), and forgets the others; a wait on the array reports its own.
      const bool pending = std::find(unreported_.begin(), unreported_.end(), e.poisoned) != unreported_.end();
      const int mode = pick(pending ? 3 : 2);
      std::string what;
      try {
        switch (mode) {
          case 0: e.a.wait_to_read(); break;
          case 1: e.a.to_vector(); break;
          default: engine().waitall(); break;
        }
      } catch (const Error& err) {
        what = err.what();
      }
      if (mode == 2) {
        if (!names_unreported(what)) FAIL("step " << step_ << ": waitall gave '" << what << "'");
        unreported_.clear();
      } else {
        if (what.find(e.poisoned) == std::string::npos)
          FAIL("step " << step_ << ": expected the failure '" << e.poisoned << "', got '" << what
                       << "' (mode " << mode << ", shape " << shape_str(e.r.shape) << ", "
                       << std::count_if(pool_.begin(), pool_.end(), [&](const Entry& x) { return x.poisoned == e.poisoned; })
                       << " arrays carry it)");
        unreported_.erase(std::remove(unreported_.begin(), unreported_.end(), e.poisoned), unreported_.end());
      }
      // The failure is reported once: drop every array that carries it.
      const std::string p = e.poisoned;
      pool_.erase(std::remove_if(pool_.begin(), pool_.end(), [&](const Entry& x) { return x.poisoned == p; }),
                  pool_.end());
      return;
    }
    check(e);
  }

  void drop() {
    if (!pool_.empty()) {
      const int i = pick(static_cast<int>(pool_.size()));
      if (pool_[i].poisoned.empty()) erase(i);  // poisoned ones go once their failure was read
    }
  }

  // Expects make() to throw asyncnd::Error naming `op`, with nothing queued or allocated.
  template <class F>
  void expect_bad(F&& make, const std::string& op) {
    const EngineStats before = engine().stats();
    std::string what;
    try {
      make();
    } catch (const Error& e) {
      what = e.what();
    }
    const EngineStats after = engine().stats();
    if (what.find(op) == std::string::npos)
      FAIL("step " << step_ << ": bad call to " << op << " gave '" << what << "'");
    CHECK(after.pushed == before.pushed);
    CHECK(after.bytes_in_use <= before.bytes_in_use);
  }

  void bad_call() {
    Entry* pa = healthy();
    if (!pa) return;
    const NDArray a = pa->a;
    const Shape s = pa->r.shape;
    const int nd = static_cast<int>(s.size());
    const std::int64_t n = size_of(s);
    // Made before the counts are taken: the partner of a bad binary call.
    const bool last_gt1 = nd > 0 && s.back() > 1;
    // Last dim d+k against d > 1: never broadcastable; 1-D: never a dot operand.
    const NDArray wrong = nd::ones({last_gt1 ? s.back() + 1 + pick(3) : 2});
    switch (pick(12)) {
      case 0:
        if (last_gt1) {
          const bool add = pick(2) == 0;
          expect_bad([&] { return add ? nd::add(a, wrong) : nd::mul(wrong, a); }, add ? "add" : "mul");
        }
        break;
      case 1: expect_bad([&] { return nd::sum(a, nd + pick(3)); }, "sum"); break;
      case 2: expect_bad([&] { return nd::mean(a, -nd - 1 - pick(3), true); }, "mean"); break;
      case 3: expect_bad([&] { return a.reshape({n + 1 + pick(3)}); }, "reshape"); break;
      case 4: expect_bad([&] { return nd::dot(a, wrong); }, "dot"); break;
      case 5: expect_bad([&] { return nd::zeros({std::int64_t{1} << (61 + pick(2)), 1 + pick(4)}); }, "zeros"); break;
      case 6: expect_bad([&] { return nd::ones({2, -1 - pick(5)}); }, "ones"); break;
      case 7:
        if (n != 1) expect_bad([&] { return a.item(); }, "item");
        break;
      case 8: expect_bad([&] { return nd::from_vector(std::vector<float>(n + 1), s); }, "from_vector"); break;
      case 9: expect_bad([&] { return nd::arange(0.0f, 1.0f, 0.0f); }, "arange"); break;
      case 10: expect_bad([&] { return NDArray().to_vector(); }, "to_vector"); break;
      default:
        if (last_gt1) {
          Shape t = s;
          t.back() += 1;
          expect_bad([&] { return nd::broadcast_to(a, t); }, "broadcast_to");
        }
        break;
    }
  }

  void failing_op() {
    Entry* pa = healthy();
    if (!pa) return;
    // A custom op on the engine, writing a copy of the array, that throws while it runs.
    NDArray out = pa->a.copy();
    const std::string msg = "fuzz failure <" + std::to_string(step_) + ">";
    PushOptions o;
    o.name = "fuzz_failing_op";
    engine().push([msg] { throw std::runtime_error(msg); }, {}, {out.var()}, o);
    unreported_.push_back(msg);
    Ref r = pa->r;
    Entry& e = add_entry(out, r);
    e.poisoned = msg;
    // Dependents are skipped and carry the same failure.
    if (pick(2)) {
      NDArray dep = nd::exp(nd::mul(out, 0.5f));
      Entry& d = add_entry(dep, r);
      d.poisoned = msg;
    }
  }

  // A random composition of elementwise ops and a reduction, recorded; the gradient of each
  // element is checked against the chain rule evaluated in double.
  void autograd() {
    Entry* pa = healthy();
    if (!pa || size_of(pa->r.shape) == 0) return;
    const Shape s = pa->r.shape;
    std::vector<float> xv = pa->a.to_vector();
    NDArray x = nd::from_vector(xv, s);
    x.attach_grad();
    std::vector<double> val(xv.begin(), xv.end()), der(xv.size(), 1.0);
    NDArray loss;
    {
      autograd::Record rec;
      NDArray y = x;
      const int depth = 1 + pick(4);
      for (int k = 0; k < depth; ++k) {
        switch (pick(4)) {
          case 0: {
            const float c = static_cast<float>(uniform(-1.5, 1.5));
            y = y * c;
            for (std::size_t i = 0; i < val.size(); ++i) val[i] *= c, der[i] *= c;
            break;
          }
          case 1:
            y = nd::tanh(y);
            for (std::size_t i = 0; i < val.size(); ++i) {
              val[i] = std::tanh(val[i]);
              der[i] *= 1 - val[i] * val[i];
            }
            break;
          case 2:
            y = nd::sigmoid(y);
            for (std::size_t i = 0; i < val.size(); ++i) {
              val[i] = 1 / (1 + std::exp(-val[i]));
              der[i] *= val[i] * (1 - val[i]);
            }
            break;
          default:
            y = y * y;
            for (std::size_t i = 0; i < val.size(); ++i) {
              der[i] *= 2 * val[i];
              val[i] *= val[i];
            }
        }
      }
      const bool mean = pick(2) == 0;
      loss = mean ? nd::mean(y) : nd::sum(y);
      if (mean) for (auto& d : der) d /= static_cast<double>(der.size());
    }
    loss.backward();
    const std::vector<float> g = x.grad().to_vector();
    double scale = 0;
    for (double d : der) scale = std::max(scale, std::abs(d));
    for (std::size_t i = 0; i < g.size(); ++i) {
      // A tolerance, not a proof: the gradient's float error is not propagated like the values'.
      if (!(std::abs(g[i] - der[i]) <= 1e-3 * std::abs(der[i]) + 1e-4 * scale + 1e-5))
        FAIL("step " << step_ << ": gradient " << i << " is " << g[i] << ", chain rule " << der[i]);
    }
  }

  bool names_unreported(const std::string& what) const {
    for (const auto& m : unreported_) {
      if (what.find(m) != std::string::npos && what.find("fuzz_failing_op") != std::string::npos) return true;
    }
    return false;
  }

  Rng rng_;
  std::vector<std::string> unreported_;  // failures no wait has reported yet
  std::int64_t steps_, step_ = 0;
  std::vector<Entry> pool_;
  int next_group_ = 0;
  EngineStats base_;
};

std::uint64_t fuzz_seed() {
  std::uint64_t seed = 20261124;
  if (const char* s = std::getenv("ASYNCND_FUZZ_SEED")) seed = std::strtoull(s, nullptr, 10);
  return seed;
}

std::int64_t fuzz_steps(std::int64_t fallback) {
  if (const char* s = std::getenv("ASYNCND_FUZZ_STEPS")) return std::max<std::int64_t>(1, std::atoll(s));
  return asyncnd_test::scaled(fallback, 50);
}

void run_fuzz(const char* config, std::int64_t steps) {
  const std::uint64_t seed = fuzz_seed();
  std::cout << "[seed] fuzz (" << config << ", " << steps << " steps): ASYNCND_FUZZ_SEED=" << seed << "\n";
  INFO("ASYNCND_FUZZ_SEED=" << seed << " ASYNCND_FUZZ_STEPS=" << steps << " engine " << config);
  Fuzzer(seed, steps).run();
}

}  // namespace

TEST_CASE("fuzz: random API sequences on the engine as configured", "[fuzz]") {
  // The process-wide engine as ASYNCND_ENGINE / ASYNCND_CPU_WORKERS made it (make fuzz varies them).
  run_fuzz(engine().kind() == EngineKind::kNaive ? "naive" : "threaded", fuzz_steps(4000));
}

TEST_CASE("fuzz: the naive engine and other worker counts", "[fuzz]") {
  const EngineOptions original = EngineOptions::from_env();
  struct Config {
    int workers;  // 0: the naive engine
    Pacing pacing;
    const char* name;
  };
  for (const Config& c : {Config{0, Pacing::kAuto, "naive"},
                          Config{1, Pacing::kAuto, "threaded, 1 worker"},
                          Config{4, Pacing::kRuns, "threaded, 4 workers taking runs"},
                          Config{4, Pacing::kOps, "threaded, 4 workers taking ops one by one"}}) {
    EngineOptions o = original;
    o.kind = c.workers == 0 ? EngineKind::kNaive : EngineKind::kThreaded;
    o.cpu_workers = c.workers;
    o.cpu_pacing = c.pacing;
    configure_engine(o);
    run_fuzz(c.name, fuzz_steps(4000) / 4);
  }
  configure_engine(original);
}
