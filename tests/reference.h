// The serial reference for the ops tests: plain loops over NumPy's broadcast index math, computed
// in double. Deliberately naive (no collapsing, no blocking, no threads), so that it is obviously
// right; the ops are compared against it.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

namespace asyncnd_ref {

using Shape = std::vector<std::int64_t>;
using Values = std::vector<float>;

inline std::int64_t size_of(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  return n;
}

// Multi-index of flat position i in row-major `s`.
inline std::vector<std::int64_t> unravel(std::int64_t i, const Shape& s) {
  std::vector<std::int64_t> idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

// Flat position in `s` of the output index `out_idx` (of a shape with as many or more dims),
// following NumPy: dims aligned from the right, size-1 dims of s always read index 0.
inline std::int64_t broadcast_index(const std::vector<std::int64_t>& out_idx, const Shape& s) {
  std::int64_t flat = 0;
  const std::size_t off = out_idx.size() - s.size();
  for (std::size_t d = 0; d < s.size(); ++d)
    flat = flat * s[d] + (s[d] == 1 ? 0 : out_idx[off + d]);
  return flat;
}

// NumPy's broadcast result; throws std::invalid_argument where NumPy would raise.
inline Shape broadcast(const Shape& a, const Shape& b) {
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) throw std::invalid_argument("shapes do not broadcast");
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

inline Values binary(const Values& a, const Shape& as, const Values& b, const Shape& bs,
                     const std::function<double(double, double)>& f) {
  const Shape os = broadcast(as, bs);
  Values out(static_cast<std::size_t>(size_of(os)));
  for (std::int64_t i = 0; i < size_of(os); ++i) {
    const auto idx = unravel(i, os);
    out[i] = static_cast<float>(f(a[broadcast_index(idx, as)], b[broadcast_index(idx, bs)]));
  }
  return out;
}

inline Values unary(const Values& a, const std::function<double(double)>& f) {
  Values out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = static_cast<float>(f(a[i]));
  return out;
}

enum class Reduce { kSum, kMean, kMax, kNorm };

// Reduction over one axis (axis >= 0) or everything (axis < 0); keepdims does not change the
// values, only the shape, which the tests check separately.
inline Values reduce(const Values& x, const Shape& s, int axis, Reduce kind) {
  Shape os;
  if (axis >= 0) {
    os = s;
    os[static_cast<std::size_t>(axis)] = 1;
  }
  const std::int64_t n_out = axis >= 0 ? size_of(os) : 1;
  std::vector<double> acc(static_cast<std::size_t>(n_out),
                          kind == Reduce::kMax ? -std::numeric_limits<double>::infinity() : 0.0);
  std::vector<bool> nan(static_cast<std::size_t>(n_out), false);
  for (std::int64_t i = 0; i < size_of(s); ++i) {
    std::int64_t o = 0;
    if (axis >= 0) {
      auto idx = unravel(i, s);
      idx[static_cast<std::size_t>(axis)] = 0;
      for (std::size_t d = 0; d < s.size(); ++d) o = o * os[d] + idx[d];
    }
    const double v = x[static_cast<std::size_t>(i)];
    if (kind == Reduce::kMax) {
      if (std::isnan(v)) nan[o] = true;
      if (v > acc[o]) acc[o] = v;
    } else {
      acc[o] += kind == Reduce::kNorm ? v * v : v;
    }
  }
  const double count = axis >= 0 ? static_cast<double>(s[static_cast<std::size_t>(axis)])
                                 : static_cast<double>(size_of(s));
  Values out(static_cast<std::size_t>(n_out));
  for (std::int64_t o = 0; o < n_out; ++o) {
    double r = acc[o];
    if (kind == Reduce::kMean) r /= count;
    if (kind == Reduce::kNorm) r = std::sqrt(r);
    if (nan[o]) r = std::numeric_limits<double>::quiet_NaN();
    out[o] = static_cast<float>(r);
  }
  return out;
}

// [m,k] x [k,n], double accumulation; with `magnitude`, the sum of |a||b| per element instead:
// the bound on |c - ref| a float GEMM may reach is a few ulps of it.
inline Values matmul(const Values& a, const Values& b, std::int64_t m, std::int64_t k,
                     std::int64_t n, bool magnitude = false) {
  Values c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double t = double(a[i * k + p]) * double(b[p * n + j]);
        acc += magnitude ? std::fabs(t) : t;
      }
      c[i * n + j] = static_cast<float>(acc);
    }
  return c;
}

inline Values matmul_abs(const Values& a, const Values& b, std::int64_t m, std::int64_t k,
                         std::int64_t n) {
  return matmul(a, b, m, k, n, true);
}

// NumPy's transpose: axes reversed.
inline Values transpose(const Values& x, const Shape& s) {
  const Shape os(s.rbegin(), s.rend());
  Values out(x.size());
  for (std::int64_t i = 0; i < size_of(os); ++i) {
    const auto idx = unravel(i, os);
    std::int64_t src = 0;
    for (std::size_t d = 0; d < s.size(); ++d) src = src * s[d] + idx[s.size() - 1 - d];
    out[i] = x[src];
  }
  return out;
}

}  // namespace asyncnd_ref
