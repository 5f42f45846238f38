// Portable CPU loops for reductions. An input is viewed as [outer, n, inner] and reduced over n.
// Sums accumulate in double: float32 sums of a million elements would lose ~3 digits. Every
// function has a fixed order of accumulation, so results do not depend on how work is split.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/functors.h"
#if !defined(__CUDACC__)
#include "kernels/simd.h"
#endif

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

#if !defined(__CUDACC__)
namespace vec {

using simd::f32x4;
using simd::f64x2;

// VecAcc<A>: four lanes of accumulator A; step folds in the four floats at p. Lane j of a vector
// accumulator does exactly what the scalar A::step does to acc[j].
template <class A>
struct VecAcc {
  static constexpr bool kHas = false;
};

// Sums in double, as SumAcc: each float is widened, then added.
struct VecSumBase {
  static constexpr bool kHas = true;
  struct V {
    f64x2 lo, hi;
  };
  static V init() { return {f64x2{0.0, 0.0}, f64x2{0.0, 0.0}}; }
  static V load(const double* p) {
    V v;
    __builtin_memcpy(&v.lo, p, sizeof v.lo);
    __builtin_memcpy(&v.hi, p + 2, sizeof v.hi);
    return v;
  }
  static void store(double* p, V v) {
    __builtin_memcpy(p, &v.lo, sizeof v.lo);
    __builtin_memcpy(p + 2, &v.hi, sizeof v.hi);
  }
};
template <>
struct VecAcc<SumAcc> : VecSumBase {
  static V step(V acc, const float* x) {
    return {acc.lo + simd::load_widen2(x), acc.hi + simd::load_widen2(x + 2)};
  }
};
template <>
struct VecAcc<SumSqAcc> : VecSumBase {
  static V step(V acc, const float* x) {
    const f64x2 lo = simd::load_widen2(x), hi = simd::load_widen2(x + 2);
    return {acc.lo + lo * lo, acc.hi + hi * hi};
  }
};
// As MaxAcc::step: x replaces acc when x > acc or x is NaN, so NaN wins.
template <>
struct VecAcc<MaxAcc> {
  static constexpr bool kHas = true;
  using V = f32x4;
  static V init() { return simd::splat(MaxAcc::init()); }
  static V load(const float* p) { return simd::load(p); }
  static void store(float* p, V v) { simd::store(p, v); }
  static V step(V acc, const float* p) {
    const f32x4 x = simd::load(p);
    return simd::select((x > acc) | (x != x), x, acc);
  }
};

}  // namespace vec
#endif

// Reduces the contiguous x[0..n). Eight independent lanes (element i goes to lane i % 8, the tail
// to lane 0): they break the dependency chain; they are merged in a fixed tree order. The SIMD
// path (VecAcc) keeps the same eight lanes, so its result is bit-identical to the scalar one.
template <class A>
inline typename A::T reduce_row(const float* x, std::int64_t n) {
  using T = typename A::T;
  T acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = A::init();
  std::int64_t i = 0;
#if !defined(__CUDACC__)
  if constexpr (vec::VecAcc<A>::kHas) {
    using V = vec::VecAcc<A>;
    auto v0 = V::init(), v1 = V::init();
    for (; i + 8 <= n; i += 8) {
      v0 = V::step(v0, x + i);
      v1 = V::step(v1, x + i + 4);
    }
    V::store(acc, v0);
    V::store(acc + 4, v1);
  }
#endif
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
    std::int64_t i = 0;
#if !defined(__CUDACC__)
    if constexpr (vec::VecAcc<A>::kHas) {
      using V = vec::VecAcc<A>;
      for (; i + 4 <= w; i += 4) V::store(acc + i, V::step(V::load(acc + i), row + i));
    }
#endif
    for (; i < w; ++i) acc[i] = A::step(acc[i], row[i]);
  }
}

}  // namespace kernels
}  // namespace asyncnd

ASYNCND_KERNELS_END
