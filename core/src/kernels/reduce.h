// Portable CPU loops for reductions. An input is viewed as [outer, n, inner] and reduced over n.
// Sums accumulate in double: float32 sums of a million elements would lose ~3 digits. Every
// function has a fixed order of accumulation, so results do not depend on how work is split.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/functors.h"

ASYNCND_KERNELS_BEGIN

namespace asyncnd {
namespace kernels {

// Accumulators: init / step (fold one element) / merge (combine two partials).
struct SumAcc {
  using T = double;
  static ASYNCND_HD T init() { return 0.0; }
  static ASYNCND_HD T step(T acc, float x) { return acc + static_cast<double>(x); }
  static ASYNCND_HD T merge(T a, T b) { return a + b; }
};
struct SumSqAcc {
  using T = double;
  static ASYNCND_HD T init() { return 0.0; }
  static ASYNCND_HD T step(T acc, float x) {
    const double d = x;
    return acc + d * d;
  }
  static ASYNCND_HD T merge(T a, T b) { return a + b; }
};
// NaN wins, as in NumPy: once acc is NaN neither condition replaces it.
struct MaxAcc {
  using T = float;
  // HUGE_VALF rather than numeric_limits: usable in CUDA device code without relaxed constexpr.
  static ASYNCND_HD T init() { return -HUGE_VALF; }
  static ASYNCND_HD T step(T acc, float x) { return (x > acc || x != x) ? x : acc; }
  static ASYNCND_HD T merge(T a, T b) { return step(a, b); }
};

// Reduces the contiguous x[0..n). Eight independent lanes: they break the dependency chain and
// let the compiler vectorise; they are merged in a fixed tree order.
template <class A>
inline typename A::T reduce_row(const float* x, std::int64_t n) {
  using T = typename A::T;
  T acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = A::init();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] = A::step(acc[j], x[i + j]);
  for (; i < n; ++i) acc[0] = A::step(acc[0], x[i]);
  const T a = A::merge(A::merge(acc[0], acc[1]), A::merge(acc[2], acc[3]));
  const T b = A::merge(A::merge(acc[4], acc[5]), A::merge(acc[6], acc[7]));
  return A::merge(a, b);
}

// acc[i - i0] = reduction over k < n of x[k * inner + i], for i in [i0, i1). The inner loop runs
// along contiguous memory, so it vectorises.
template <class A>
inline void reduce_cols(const float* x, std::int64_t n, std::int64_t inner, std::int64_t i0,
                        std::int64_t i1, typename A::T* acc) {
  const std::int64_t w = i1 - i0;
  for (std::int64_t i = 0; i < w; ++i) acc[i] = A::init();
  for (std::int64_t k = 0; k < n; ++k) {
    const float* row = x + k * inner + i0;
    for (std::int64_t i = 0; i < w; ++i) acc[i] = A::step(acc[i], row[i]);
  }
}

}  // namespace kernels
}  // namespace asyncnd

ASYNCND_KERNELS_END
