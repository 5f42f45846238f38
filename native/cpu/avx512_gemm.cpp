// avx512_sgemm (avx512_gemm.h): the shared blocked loop of kernels/gemm_driver.h on a 12 x 32
// micro-kernel of AVX-512 fused multiply-adds: 24 accumulators in zmm registers (12 rows, two
// 16-float vectors each), two loads of packed B and twelve broadcasts of packed A per k step;
// split across GemmThreads (gemm_threads.h), the GEMM's own threads.
// Every function that touches a 512-bit register carries the target attribute, not the file a
// compiler flag: an inline function of a header compiled with -mavx512f here could be the copy the
// linker keeps for the whole program, and fault on a CPU without AVX-512. Callers check the CPU
// first (cpu_features().avx512); the backend then runs gemm_self_test before trusting it.
#include "cpu/avx512_gemm.h"

#if ASYNCND_HAVE_AVX512_GEMM

#include <immintrin.h>

#include <cstring>

#include "cpu/gemm_threads.h"
#include "kernels/gemm_driver.h"
#include "kernels/simd.h"

namespace asyncnd {
namespace detail {
namespace {

namespace g = kernels::gemm;

#define ASYNCND_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

// Tile and block sizes, from a sweep at 1000x1000 on AMD EPYC Zen 5 (bench/notes/gemm.md, "Our own
// AVX-512 GEMM"): 12x32, 8x48 and 6x64 tiles came within 2% of each other on one core; KC = 384
// keeps a 384 x 32 panel of B (48 KiB) about L1's size, and 144 x 384 of A (216 KiB) in L2.
struct Avx512Tile {
  static constexpr std::int64_t kMr = 12, kNr = 32, kKc = 384, kMc = 144;
  static constexpr int kVecs = kNr / 16;
  // How far ahead in its panel the micro-kernel asks for B (k steps; 32 x 128 bytes = 4 KiB). The
  // panel does not fit L1 beside the panel of A streaming past it, so each call reads it from L2,
  // where the hardware's prefetch alone left the kernel waiting: on an Intel Xeon (model 207),
  // paired with OpenBLAS's SkylakeX kernel in one process, this prefetch and the one of C below
  // took one thread from 0.85-0.88 of OpenBLAS to 0.93-1.00 at 1000^3, and from 0.70-0.77 to
  // 0.84-0.91 at 2048^3 (distances 8, 16 and 32 all helped, 32 most; bench/notes/gemm.md, "Prefetch
  // in our AVX-512 GEMM").
  static constexpr std::int64_t kPrefetchB = 32;

  // Panel layout of gemm_kernel.h: element (i, p) of a panel at p * kMr + i, alpha folded in.
  ASYNCND_AVX512 static void pack_a(bool trans_a, const float* a, std::int64_t lda,
                                    std::int64_t i0, std::int64_t mc, std::int64_t p0,
                                    std::int64_t kc, float alpha, float* out) {
    for (std::int64_t r = 0; r < mc; r += kMr) {
      const std::int64_t rows = mc - r < kMr ? mc - r : kMr;
      float* dst = out + r * kc;
      if (trans_a) {  // op(A)(i, p) = a[p * lda + i]: each k step's rows are contiguous
        const float* src = a + p0 * lda + i0 + r;
        const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
        const __m512 va = _mm512_set1_ps(alpha);
        for (std::int64_t p = 0; p < kc; ++p) {  // rows past the edge load as zeros
          const __m512 v = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(mask, src + p * lda));
          _mm512_mask_storeu_ps(dst + p * kMr, (1u << kMr) - 1, v);
        }
      } else {  // op(A)(i, p) = a[i * lda + p]: read the panel's rows side by side
        const float* src = a + (i0 + r) * lda + p0;
        std::int64_t p = 0;
        if (rows == kMr) {
          // Four columns of four rows at a time, transposed in registers: three 4x4 blocks per
          // k step group (a scalar loop over rows, then columns, took ~10% of a 1000^3 GEMM).
          const simd::f32x4 va = simd::splat(alpha);
          for (; p + 4 <= kc; p += 4) {
#pragma GCC unroll 3
            for (std::int64_t q = 0; q < kMr; q += 4) {
              const float* s0 = src + q * lda + p;
              const simd::f32x4 r0 = simd::load(s0), r1 = simd::load(s0 + lda);
              const simd::f32x4 r2 = simd::load(s0 + 2 * lda), r3 = simd::load(s0 + 3 * lda);
              const simd::f32x4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5);
              const simd::f32x4 t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
              const simd::f32x4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
              const simd::f32x4 t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
              float* d = dst + p * kMr + q;
              simd::store(d, va * __builtin_shufflevector(t0, t2, 0, 1, 4, 5));
              simd::store(d + kMr, va * __builtin_shufflevector(t0, t2, 2, 3, 6, 7));
              simd::store(d + 2 * kMr, va * __builtin_shufflevector(t1, t3, 0, 1, 4, 5));
              simd::store(d + 3 * kMr, va * __builtin_shufflevector(t1, t3, 2, 3, 6, 7));
            }
          }
        }
        for (; p < kc; ++p) {
          for (std::int64_t i = 0; i < kMr; ++i) dst[p * kMr + i] = i < rows ? alpha * src[i * lda + p] : 0.0f;
        }
      }
    }
  }

  // One kc x 32 panel of op(B), element (p, j) at p * 32 + j; columns past n are zero.
  ASYNCND_AVX512 static void pack_b_panel(bool trans_b, const float* b, std::int64_t ldb,
                                          std::int64_t p0, std::int64_t kc, std::int64_t j0,
                                          std::int64_t n, float* out) {
    const std::int64_t cols = n - j0 < kNr ? n - j0 : kNr;
    if (!trans_b) {
      const float* src = b + p0 * ldb + j0;
      const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
      const __mmask16 m1 =
          static_cast<__mmask16>(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
      for (std::int64_t p = 0; p < kc; ++p) {
        _mm512_store_ps(out + p * kNr, _mm512_maskz_loadu_ps(m0, src + p * ldb));
        _mm512_store_ps(out + p * kNr + 16, _mm512_maskz_loadu_ps(m1, src + p * ldb + 16));
      }
    } else {
      g::pack_b_transposed<kNr>(b + j0 * ldb + p0, ldb, kc, cols, out);
    }
  }

  // c[0..mr) x [0..nr) <- the tile's sum, combined with C as `mode` says (gemm_kernel.h).
  ASYNCND_AVX512 static void micro_kernel(std::int64_t kc, const float* pa, const float* pb,
                                          float* c, std::int64_t ldc, std::int64_t mr,
                                          std::int64_t nr, g::Update mode, float beta) {
    __m512 acc[kMr][kVecs];
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_setzero_ps();
    }
    // The tile of C is read or written only after the k loop: ask for its 24 lines now, so they
    // arrive while it runs (C rows lie ldc apart, a miss each, from L3 once C outgrows L2).
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      if (i >= mr) break;
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
    }
    for (std::int64_t p = 0; p < kc; ++p) {
      const __m512 b0 = _mm512_load_ps(pb), b1 = _mm512_load_ps(pb + 16);
      // Past the panel's end this reads ahead into the next panel (packed right after it) or
      // nowhere: a prefetch never faults.
      _mm_prefetch(reinterpret_cast<const char*>(pb + kPrefetchB * kNr), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(pb + kPrefetchB * kNr + 16), _MM_HINT_T0);
#pragma GCC unroll 12
      for (int i = 0; i < kMr; ++i) {
        const __m512 a = _mm512_set1_ps(pa[i]);
        acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
      }
      pa += kMr;
      pb += kNr;
    }
    const __m512 vbeta = _mm512_set1_ps(beta);
    const __mmask16 m0 = static_cast<__mmask16>(nr >= 16 ? 0xffff : (1u << nr) - 1);
    const __mmask16 m1 =
        static_cast<__mmask16>(nr >= 32 ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      if (i >= mr) break;
      float* ci = c + i * ldc;
      __m512 lo = acc[i][0], hi = acc[i][1];
      // Masked loads read nothing past the tile's columns (no fault at the end of C).
      if (mode == g::Update::kAdd) {
        lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(m0, ci));
        hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(m1, ci + 16));
      } else if (mode == g::Update::kScale) {
        lo = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m0, ci), lo);
        hi = _mm512_fmadd_ps(vbeta, _mm512_maskz_loadu_ps(m1, ci + 16), hi);
      }
      _mm512_mask_storeu_ps(ci, m0, lo);
      _mm512_mask_storeu_ps(ci + 16, m1, hi);
    }
  }
};

ASYNCND_AVX512 void run_avx512_block(const g::Problem& pr, std::int64_t i0, std::int64_t i1,
                                     std::int64_t j0, std::int64_t j1) {
  g::run_block_body<Avx512Tile>(pr, i0, i1, j0, j1);
}

}  // namespace

void avx512_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                  float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                  float beta, float* c, std::int64_t ldc, bool serial) {
  // Four or more rows take the 12-row tile: a third of it at 512 bits still beats the thin path's
  // 128-bit rows.
  static constexpr g::TileLoop kTile = g::tile_loop<Avx512Tile>(run_avx512_block, 4);
  g::packed_sgemm(kTile, gemm_threads_runner(serial), trans_a, trans_b, m, n, k, alpha, a, lda,
                  b, ldb, beta, c, ldc);
}

}  // namespace detail
}  // namespace asyncnd

#endif  // ASYNCND_HAVE_AVX512_GEMM
