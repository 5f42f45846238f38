// A thin 4-wide float SIMD layer on GCC/Clang vector extensions: the same source compiles to SSE
// natively and to WebAssembly SIMD128 under Emscripten (-msimd128), with no intrinsics. Loads and
// stores are unaligned (memcpy, which compiles to one movups / v128.load). There is no fused
// multiply-add: SIMD128 in clang 14 has none, and mul + add keeps native and wasm results equal.
// Host-only: CUDA code includes functors.h, never this header.
#pragma once

#if defined(__CUDACC__)
#error "kernels/simd.h is for host compilers (GCC/Clang vector extensions)"
#endif

#include <cstdint>

namespace asyncnd {
namespace simd {

typedef float f32x4 __attribute__((vector_size(16)));
typedef std::int32_t i32x4 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));

constexpr int kLanes = 4;

inline f32x4 load(const float* p) {
  f32x4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, f32x4 v) { __builtin_memcpy(p, &v, sizeof v); }
inline f32x4 splat(float x) { return f32x4{x, x, x, x}; }
inline f32x4 zero() { return f32x4{0.0f, 0.0f, 0.0f, 0.0f}; }

// Lane-wise select: mask lanes are all ones (take a) or all zeros (take b), as comparisons give.
inline f32x4 select(i32x4 mask, f32x4 a, f32x4 b) {
  return reinterpret_cast<f32x4>((mask & reinterpret_cast<i32x4>(a)) |
                                 (~mask & reinterpret_cast<i32x4>(b)));
}

// p[0], p[1] widened to double: one 8-byte load and cvtps2pd natively; v128.load64_zero and
// f64x2.promote_low_f32x4 in wasm (a 16-byte load and a shuffle for the high half was slower).
inline f64x2 load_widen2(const float* p) {
  typedef float f32x2 __attribute__((vector_size(8)));
  f32x2 v;
  __builtin_memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, f64x2);
}

}  // namespace simd
}  // namespace asyncnd
