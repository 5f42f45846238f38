// A thin 4-wide float SIMD layer on GCC/Clang vector extensions: the same source compiles to SSE
// natively, to NEON on AArch64 and to WebAssembly SIMD128 under Emscripten (-msimd128), with no
// intrinsics but madd's. Loads and stores are unaligned (memcpy, which compiles to one movups /
// ldr q / v128.load). No fused multiply-add (the build says -ffp-contract=off), except madd() in
// the GEMM on AArch64 and in the relaxed-SIMD WebAssembly module: SIMD128 has none, and mul + add
// keeps native and SIMD128 results equal. Host-only: CUDA code includes functors.h, never this
// header.
#pragma once

#if defined(__CUDACC__)
#error "kernels/simd.h is for host compilers (GCC/Clang vector extensions)"
#endif

#include <cstdint>

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

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
// Stores lanes 0 and 1 (one movlps / v128.store64_lane).
inline void store_lo2(float* p, f32x4 v) { __builtin_memcpy(p, &v, 2 * sizeof(float)); }
inline f32x4 splat(float x) { return f32x4{x, x, x, x}; }
inline f32x4 zero() { return f32x4{0.0f, 0.0f, 0.0f, 0.0f}; }

// a * b + c, for the GEMM's micro-kernel only. Compiled with -mrelaxed-simd (only the GEMM of
// wasm/'s relaxed module, which wasm/tools/relaxed_opcodes.cjs finishes) it is one
// f32x4.relaxed_madd: fused (one rounding) or not (two), as the hardware has it, so its results
// may differ from mul + add in the last bits. On AArch64, where every core has it, one fused
// fmla (a GEMM's results differ between kernels in the last bits anyway). Elsewhere mul + add,
// as written.
inline f32x4 madd(f32x4 a, f32x4 b, f32x4 c) {
#if defined(__wasm_relaxed_simd__)
  // LLVM 14 names it f32x4.fma and emits the prototype's opcode; the build rewrites it.
  return __builtin_wasm_fma_f32x4(a, b, c);
#elif defined(__aarch64__)
  return reinterpret_cast<f32x4>(vfmaq_f32(reinterpret_cast<float32x4_t>(c),
                                           reinterpret_cast<float32x4_t>(a),
                                           reinterpret_cast<float32x4_t>(b)));
#else
  return a * b + c;
#endif
}

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
