// The pieces of the portable GEMM (portable_gemm.cpp): packing op(A) into MR-row panels and op(B)
// into NR-column panels, and the micro-kernel that keeps an MR x 8 block of C in f32x4 registers:
// 4x8 (eight accumulators) with mul + add natively; 5x8 with mul + add in the SIMD128 WebAssembly
// module (the widest tile that fits V8's 16 xmm registers with a product register: 6x8 spilled and
// ran at half speed); 6x8 with f32x4.relaxed_madd in the relaxed-SIMD module (-mrelaxed-simd),
// where no product register is needed
// (bench/notes/constants.md, "Portable GEMM" and "Relaxed SIMD").
#pragma once

#include <cstdint>

#include "kernels/simd.h"

namespace asyncnd {
namespace kernels {
namespace gemm {

using simd::f32x4;

#if defined(__wasm_relaxed_simd__)
constexpr std::int64_t kMr = 6;  // rows of a micro-tile (a panel of packed A)
#elif defined(__wasm_simd128__)
constexpr std::int64_t kMr = 5;
#else
constexpr std::int64_t kMr = 4;
#endif
constexpr std::int64_t kNr = 8;  // columns of a micro-tile (a panel of packed B): two f32x4

// Packs rows [i0, i0 + mc) and columns [p0, p0 + kc) of alpha * op(A) into ceil(mc / kMr)
// panels, each kc x kMr (element (i, p) of a panel at p * kMr + i); rows past mc are zero. op(A) is A, or
// A^T when trans_a. alpha is folded in here, as the reference does (alpha * a) * b.
inline void pack_a(bool trans_a, const float* a, std::int64_t lda, std::int64_t i0,
                   std::int64_t mc, std::int64_t p0, std::int64_t kc, float alpha, float* out) {
  for (std::int64_t r = 0; r < mc; r += kMr) {
    const std::int64_t rows = mc - r < kMr ? mc - r : kMr;
    float* dst = out + r * kc;
    if (trans_a) {  // op(A)(i, p) = a[p * lda + i]: the rows of a panel are contiguous in a
      const float* src = a + p0 * lda + i0 + r;
      if (rows == kMr) {
        for (std::int64_t p = 0; p < kc; ++p) {
          simd::store(dst + p * kMr, simd::load(src + p * lda) * simd::splat(alpha));
          for (std::int64_t i = 4; i < kMr; ++i) dst[p * kMr + i] = alpha * src[p * lda + i];
        }
      } else {
        for (std::int64_t p = 0; p < kc; ++p)
          for (std::int64_t i = 0; i < kMr; ++i)
            dst[p * kMr + i] = i < rows ? alpha * src[p * lda + i] : 0.0f;
      }
    } else {  // op(A)(i, p) = a[i * lda + p]: read the panel's rows side by side
      const float* src = a + (i0 + r) * lda + p0;
      if (rows == kMr) {
        // Four columns of the first four rows at a time, transposed in registers (the scalar loop
        // below took 3-4% of a 1000x1000 GEMM's time in wasm); rows 4 and 5 of a 6-row panel
        // interleaved in pairs.
        const f32x4 va = simd::splat(alpha);
        std::int64_t p = 0;
        for (; p + 4 <= kc; p += 4) {
          const f32x4 r0 = simd::load(src + p), r1 = simd::load(src + lda + p);
          const f32x4 r2 = simd::load(src + 2 * lda + p), r3 = simd::load(src + 3 * lda + p);
          const f32x4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
          const f32x4 t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
          const f32x4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
          const f32x4 t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
          simd::store(dst + p * kMr, va * __builtin_shufflevector(t0, t2, 0, 1, 4, 5));
          simd::store(dst + (p + 1) * kMr, va * __builtin_shufflevector(t0, t2, 2, 3, 6, 7));
          simd::store(dst + (p + 2) * kMr, va * __builtin_shufflevector(t1, t3, 0, 1, 4, 5));
          simd::store(dst + (p + 3) * kMr, va * __builtin_shufflevector(t1, t3, 2, 3, 6, 7));
          if (kMr == 5) {
            for (std::int64_t q = 0; q < 4; ++q) dst[(p + q) * kMr + 4] = alpha * src[4 * lda + p + q];
          }
          if (kMr == 6) {
            const f32x4 r4 = va * simd::load(src + 4 * lda + p), r5 = va * simd::load(src + 5 * lda + p);
            const f32x4 lo = __builtin_shufflevector(r4, r5, 0, 4, 1, 5);
            const f32x4 hi = __builtin_shufflevector(r4, r5, 2, 6, 3, 7);
            simd::store_lo2(dst + p * kMr + 4, lo);
            simd::store_lo2(dst + (p + 1) * kMr + 4, __builtin_shufflevector(lo, lo, 2, 3, 2, 3));
            simd::store_lo2(dst + (p + 2) * kMr + 4, hi);
            simd::store_lo2(dst + (p + 3) * kMr + 4, __builtin_shufflevector(hi, hi, 2, 3, 2, 3));
          }
        }
        for (; p < kc; ++p)
          for (std::int64_t i = 0; i < kMr; ++i) dst[p * kMr + i] = alpha * src[i * lda + p];
        continue;
      }
      for (std::int64_t i = 0; i < kMr; ++i) {
        if (i < rows) {
          const float* row = src + i * lda;
          for (std::int64_t p = 0; p < kc; ++p) dst[p * kMr + i] = alpha * row[p];
        } else {
          for (std::int64_t p = 0; p < kc; ++p) dst[p * kMr + i] = 0.0f;
        }
      }
    }
  }
}

// One kc x Nr panel of op(B) = B^T (element (p, j) at p * Nr + j): column j < cols of the panel is
// row j of b from src (kc contiguous floats, rows ldb apart); columns past cols are zero.
template <std::int64_t Nr>
inline void pack_b_transposed(const float* src, std::int64_t ldb, std::int64_t kc,
                              std::int64_t cols, float* out) {
  for (std::int64_t j = 0; j < Nr; ++j) {
    if (j < cols) {
      const float* row = src + j * ldb;
      for (std::int64_t p = 0; p < kc; ++p) out[p * Nr + j] = row[p];
    } else {
      for (std::int64_t p = 0; p < kc; ++p) out[p * Nr + j] = 0.0f;
    }
  }
}

// Packs rows [p0, p0 + kc) and columns [j0, j0 + 8) of op(B) into one kc x 8 panel (element
// (p, j) at p * 8 + j); columns past n are zero. op(B) is B, or B^T when trans_b.
inline void pack_b_panel(bool trans_b, const float* b, std::int64_t ldb, std::int64_t p0,
                         std::int64_t kc, std::int64_t j0, std::int64_t n, float* out) {
  const std::int64_t cols = n - j0 < kNr ? n - j0 : kNr;
  if (!trans_b) {
    const float* src = b + p0 * ldb + j0;
    if (cols == kNr) {
      for (std::int64_t p = 0; p < kc; ++p) {
        simd::store(out + p * kNr, simd::load(src + p * ldb));
        simd::store(out + p * kNr + 4, simd::load(src + p * ldb + 4));
      }
    } else {
      for (std::int64_t p = 0; p < kc; ++p)
        for (std::int64_t j = 0; j < kNr; ++j) out[p * kNr + j] = j < cols ? src[p * ldb + j] : 0.0f;
    }
  } else {
    pack_b_transposed<kNr>(b + j0 * ldb + p0, ldb, kc, cols, out);
  }
}

// How the micro-kernel combines its sum with C: on the first k-block C is scaled by beta (beta ==
// 0 overwrites without reading C, so NaNs there do not survive, as in BLAS); later k-blocks add.
enum class Update { kOverwrite, kAdd, kScale };

// c[i, j] <- acc[i, j] (+ c or + beta * c) for the rows < mr and columns < nr of one kMr x 8 tile.
// acc[i] holds row i: columns 0-3 in acc[2 * i], 4-7 in acc[2 * i + 1].
inline void store_tile(const f32x4* acc, float* c, std::int64_t ldc, std::int64_t mr,
                       std::int64_t nr, Update mode, float beta) {
  if (mr == kMr && nr == kNr) {
    const f32x4 vb = simd::splat(beta);
    for (int i = 0; i < kMr; ++i) {
      float* ci = c + i * ldc;
      f32x4 lo = acc[2 * i], hi = acc[2 * i + 1];
      if (mode == Update::kAdd) {
        lo += simd::load(ci);
        hi += simd::load(ci + 4);
      } else if (mode == Update::kScale) {
        lo += vb * simd::load(ci);
        hi += vb * simd::load(ci + 4);
      }
      simd::store(ci, lo);
      simd::store(ci + 4, hi);
    }
    return;
  }
  float tile[kMr * kNr];
  for (int i = 0; i < kMr; ++i) {
    simd::store(tile + i * kNr, acc[2 * i]);
    simd::store(tile + i * kNr + 4, acc[2 * i + 1]);
  }
  for (std::int64_t i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    for (std::int64_t j = 0; j < nr; ++j) {
      const float v = tile[i * kNr + j];
      if (mode == Update::kOverwrite) {
        ci[j] = v;
      } else if (mode == Update::kAdd) {
        ci[j] += v;
      } else {
        ci[j] = v + beta * ci[j];
      }
    }
  }
}

#if defined(__wasm_simd128__)
// One kMr x 8 tile of C in the WebAssembly modules, each k step a simd::madd per accumulator:
// 6x8 with f32x4.relaxed_madd in the relaxed module (twelve accumulators, two of B and one
// broadcast of A: 15 of the 16 xmm registers V8 has on x86-64); 5x8 with a multiply and an add in
// the SIMD128 one (ten accumulators and a product register: 14). Not inlined into the block loop
// (whose own live values then made V8 spill: 23 GFLOP/s instead of 51 for the relaxed tile) and
// not unrolled (by 2: 36); the SIMD128 4x8 tile that was inlined and unrolled by 2 ran 21 GFLOP/s
// in Chromium 156 on AMD EPYC Zen 5, this one 30 (bench/notes/constants.md, "Relaxed SIMD" and
// "Portable GEMM"). Row 5 exists only in the 6-row tile (the compiler drops it from the 5-row one).
__attribute__((noinline)) inline void micro_kernel(std::int64_t kc, const float* pa, const float* pb, float* c,
                                                   std::int64_t ldc, std::int64_t mr, std::int64_t nr,
                                                   Update mode, float beta) {
  static_assert(kMr == 5 || kMr == 6, "the wasm micro-kernel has 5 or 6 rows");
  f32x4 c00 = simd::zero(), c01 = simd::zero(), c10 = simd::zero(), c11 = simd::zero();
  f32x4 c20 = simd::zero(), c21 = simd::zero(), c30 = simd::zero(), c31 = simd::zero();
  f32x4 c40 = simd::zero(), c41 = simd::zero(), c50 = simd::zero(), c51 = simd::zero();
#pragma clang loop unroll(disable)
  for (std::int64_t p = 0; p < kc; ++p) {
    const f32x4 b0 = simd::load(pb), b1 = simd::load(pb + 4);
    f32x4 a = simd::splat(pa[0]);
    c00 = simd::madd(a, b0, c00);
    c01 = simd::madd(a, b1, c01);
    a = simd::splat(pa[1]);
    c10 = simd::madd(a, b0, c10);
    c11 = simd::madd(a, b1, c11);
    a = simd::splat(pa[2]);
    c20 = simd::madd(a, b0, c20);
    c21 = simd::madd(a, b1, c21);
    a = simd::splat(pa[3]);
    c30 = simd::madd(a, b0, c30);
    c31 = simd::madd(a, b1, c31);
    a = simd::splat(pa[4]);
    c40 = simd::madd(a, b0, c40);
    c41 = simd::madd(a, b1, c41);
    if constexpr (kMr == 6) {
      a = simd::splat(pa[5]);
      c50 = simd::madd(a, b0, c50);
      c51 = simd::madd(a, b1, c51);
    }
    pa += kMr;
    pb += kNr;
  }
  f32x4 acc[2 * kMr] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41};
  if constexpr (kMr == 6) {
    acc[10] = c50;
    acc[11] = c51;
  }
  store_tile(acc, c, ldc, mr, nr, mode, beta);
}
#else
// One 4x8 tile of C: the sum over p < kc of a panel of packed A (kc x 4) times a panel of packed
// B (kc x 8), combined with C by store_tile. The eight accumulators are named variables, not an
// array, so that no compiler (V8's in particular) is tempted to keep them in memory.
inline void micro_kernel(std::int64_t kc, const float* pa, const float* pb, float* c,
                         std::int64_t ldc, std::int64_t mr, std::int64_t nr, Update mode,
                         float beta) {
  f32x4 c00 = simd::zero(), c01 = simd::zero(), c10 = simd::zero(), c11 = simd::zero();
  f32x4 c20 = simd::zero(), c21 = simd::zero(), c30 = simd::zero(), c31 = simd::zero();
  // Unrolled by 2 under clang (measured in V8 when this was also the wasm kernel; by 4, V8 spilled
  // registers: bench/notes/constants.md, "Portable GEMM"); gcc, the usual native compiler,
  // does not unroll.
#if defined(__clang__)
#pragma clang loop unroll_count(2)
#endif
  for (std::int64_t p = 0; p < kc; ++p) {
    const f32x4 b0 = simd::load(pb), b1 = simd::load(pb + 4);
    // SSE: one load of the four A values and a shuffle each (pshufd) beats four movss + shufps.
    const f32x4 av = simd::load(pa);
    f32x4 a = __builtin_shufflevector(av, av, 0, 0, 0, 0);
    c00 += a * b0;
    c01 += a * b1;
    a = __builtin_shufflevector(av, av, 1, 1, 1, 1);
    c10 += a * b0;
    c11 += a * b1;
    a = __builtin_shufflevector(av, av, 2, 2, 2, 2);
    c20 += a * b0;
    c21 += a * b1;
    a = __builtin_shufflevector(av, av, 3, 3, 3, 3);
    c30 += a * b0;
    c31 += a * b1;
    pa += kMr;
    pb += kNr;
  }
  const f32x4 acc[8] = {c00, c01, c10, c11, c20, c21, c30, c31};
  store_tile(acc, c, ldc, mr, nr, mode, beta);
}
#endif

}  // namespace gemm
}  // namespace kernels
}  // namespace asyncnd
