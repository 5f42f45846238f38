// avx2_sgemm (avx2_gemm.h): the shared blocked loop of kernels/gemm_driver.h on a 6 x 16
// micro-kernel of AVX2 fused multiply-adds: 12 accumulators in ymm registers (6 rows, two
// 8-float vectors each), two loads of packed B and six broadcasts of packed A per k step, 15 of
// the 16 ymm registers; split across GemmThreads (gemm_threads.h), the GEMM's own threads.
// As in avx512_gemm.cpp, every function that touches a 256-bit register carries the target
// attribute, not the file a compiler flag, so that no inline function compiled for AVX2 can be
// the copy the linker keeps for a CPU without it. Callers check the CPU first
// (cpu_features().avx2 and .fma); the backend then runs gemm_self_test before trusting it.
#include "cpu/avx2_gemm.h"

#if ASYNCND_HAVE_AVX2_GEMM

#include <immintrin.h>

#include "cpu/gemm_threads.h"
#include "kernels/gemm_driver.h"
#include "kernels/simd.h"

namespace asyncnd {
namespace detail {
namespace {

namespace g = kernels::gemm;

#define ASYNCND_AVX2 __attribute__((target("avx2,fma")))

// Tile and block sizes: 6 x 16 is the widest tile whose accumulators, two loads of B and a
// broadcast fit AVX2's 16 registers (BLIS and OpenBLAS's Haswell kernels use the same shape).
// KC = 256 keeps a 256 x 16 panel of B (16 KiB) in L1 beside the A panel streaming past it;
// MC = 144 keeps 144 x 256 of A (144 KiB) in L2. A sweep at 1000^3 on one thread (KC 192-512, MC
// 72-192, prefetch distance 8-32, the k loop unrolled or not) put every setting within this VM's
// noise of the others, 0.86-1.07 of OpenBLAS's Haswell kernel (bench/notes/gemm.md, "Our own AVX2
// GEMM"); these are the best mean.
struct Avx2Tile {
  static constexpr std::int64_t kMr = 6, kNr = 16, kKc = 256, kMc = 144;
  // As the AVX-512 kernel, it asks for B a few k steps ahead in its panel (16 x 64 bytes = 1 KiB).
  static constexpr std::int64_t kPrefetchB = 16;

  // Panel layout of gemm_kernel.h: element (i, p) of a panel at p * kMr + i, alpha folded in.
  ASYNCND_AVX2 static void pack_a(bool trans_a, const float* a, std::int64_t lda, std::int64_t i0,
                                  std::int64_t mc, std::int64_t p0, std::int64_t kc, float alpha,
                                  float* out) {
    for (std::int64_t r = 0; r < mc; r += kMr) {
      const std::int64_t rows = mc - r < kMr ? mc - r : kMr;
      float* dst = out + r * kc;
      if (trans_a) {  // op(A)(i, p) = a[p * lda + i]: each k step's rows are contiguous
        const float* src = a + p0 * lda + i0 + r;
        for (std::int64_t p = 0; p < kc; ++p) {  // rows past the edge are zeros
          for (std::int64_t i = 0; i < kMr; ++i) {
            dst[p * kMr + i] = i < rows ? alpha * src[p * lda + i] : 0.0f;
          }
        }
      } else {  // op(A)(i, p) = a[i * lda + p]: rows side by side, 8 k steps at a time
        const float* src = a + (i0 + r) * lda + p0;
        std::int64_t p = 0;
        if (rows == kMr) {
          const __m256 va = _mm256_set1_ps(alpha);
          for (; p + 8 <= kc; p += 8) {
            __m256 v[kMr];
            for (int i = 0; i < kMr; ++i) v[i] = _mm256_mul_ps(va, _mm256_loadu_ps(src + i * lda + p));
            alignas(32) float t[kMr][8];
            for (int i = 0; i < kMr; ++i) _mm256_store_ps(t[i], v[i]);
            for (int q = 0; q < 8; ++q) {
              for (int i = 0; i < kMr; ++i) dst[(p + q) * kMr + i] = t[i][q];
            }
          }
        }
        for (; p < kc; ++p) {
          for (std::int64_t i = 0; i < kMr; ++i) dst[p * kMr + i] = i < rows ? alpha * src[i * lda + p] : 0.0f;
        }
      }
    }
  }

  // One kc x 16 panel of op(B), element (p, j) at p * 16 + j; columns past n are zero.
  ASYNCND_AVX2 static void pack_b_panel(bool trans_b, const float* b, std::int64_t ldb,
                                        std::int64_t p0, std::int64_t kc, std::int64_t j0,
                                        std::int64_t n, float* out) {
    const std::int64_t cols = n - j0 < kNr ? n - j0 : kNr;
    if (!trans_b) {
      const float* src = b + p0 * ldb + j0;
      if (cols == kNr) {
        for (std::int64_t p = 0; p < kc; ++p) {
          _mm256_store_ps(out + p * kNr, _mm256_loadu_ps(src + p * ldb));
          _mm256_store_ps(out + p * kNr + 8, _mm256_loadu_ps(src + p * ldb + 8));
        }
      } else {  // the last panel: nothing read past its last column (micro_kernel says why
                // not with masked loads)
        for (std::int64_t p = 0; p < kc; ++p) {
          for (std::int64_t j = 0; j < kNr; ++j) {
            out[p * kNr + j] = j < cols ? src[p * ldb + j] : 0.0f;
          }
        }
      }
    } else {
      g::pack_b_transposed<kNr>(b + j0 * ldb + p0, ldb, kc, cols, out);
    }
  }

  // c[0..mr) x [0..nr) <- the tile's sum, combined with C as `mode` says (gemm_kernel.h).
  ASYNCND_AVX2 static void micro_kernel(std::int64_t kc, const float* pa, const float* pb,
                                        float* c, std::int64_t ldc, std::int64_t mr,
                                        std::int64_t nr, g::Update mode, float beta) {
    __m256 acc[kMr][2];
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    // The tile of C is read or written only after the k loop: ask for its lines now.
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      if (i >= mr) break;
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 15), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (std::int64_t p = 0; p < kc; ++p) {
      const __m256 b0 = _mm256_load_ps(pb), b1 = _mm256_load_ps(pb + 8);
      // Past the panel's end this reads ahead into the next panel or nowhere: never a fault.
      _mm_prefetch(reinterpret_cast<const char*>(pb + kPrefetchB * kNr), _MM_HINT_T0);
#pragma GCC unroll 6
      for (int i = 0; i < kMr; ++i) {
        const __m256 a = _mm256_broadcast_ss(pa + i);
        acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
      }
      pa += kMr;
      pb += kNr;
    }
    const __m256 vbeta = _mm256_set1_ps(beta);
    if (nr == kNr) {
#pragma GCC unroll 6
      for (int i = 0; i < kMr; ++i) {
        if (i >= mr) break;
        float* ci = c + i * ldc;
        __m256 lo = acc[i][0], hi = acc[i][1];
        if (mode == g::Update::kAdd) {
          lo = _mm256_add_ps(lo, _mm256_loadu_ps(ci));
          hi = _mm256_add_ps(hi, _mm256_loadu_ps(ci + 8));
        } else if (mode == g::Update::kScale) {
          lo = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(ci), lo);
          hi = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(ci + 8), hi);
        }
        _mm256_storeu_ps(ci, lo);
        _mm256_storeu_ps(ci + 8, hi);
      }
      return;
    }
    // The last column panel: the tile goes to the stack, and store_edge combines its columns below
    // nr with C one float at a time, with the operations of the full panels above. Not with
    // _mm256_maskload_ps: a CPU touches no masked-off lane, but qemu-user 7.2 (Debian 12's; the
    // `test-x86-cpus` emulator, and one way amd64 containers run on ARM machines) reads all 32
    // bytes, and so stops the process with SIGSEGV where a row of the tile ends just before an
    // unmapped page (seen in CI; the edge costs 3-6% of a product made of edges, nothing at
    // 1000^3: bench/notes/gemm.md, "The AVX2 GEMM's last column panel under qemu").
    // Unrolled, as every loop over acc: an index known only at run time would keep acc in
    // memory, stored to at every k step (half the speed).
    alignas(32) float tile[kMr][kNr];
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      _mm256_store_ps(tile[i], acc[i][0]);
      _mm256_store_ps(tile[i] + 8, acc[i][1]);
    }
    store_edge(tile, c, ldc, mr, nr, mode, beta);
  }

  // c[i, j] <- tile[i][j] combined with C as `mode` says, for i < mr and j < nr: the last column
  // panel's store. Out of line, so that the k loop's registers are planned without it.
  ASYNCND_AVX2 __attribute__((noinline)) static void store_edge(
      const float (*tile)[kNr], float* c, std::int64_t ldc, std::int64_t mr, std::int64_t nr,
      g::Update mode, float beta) {
    for (std::int64_t i = 0; i < mr; ++i) {
      float* ci = c + i * ldc;
      for (std::int64_t j = 0; j < nr; ++j) {
        const float v = tile[i][j];
        if (mode == g::Update::kOverwrite) {
          ci[j] = v;
        } else if (mode == g::Update::kAdd) {
          ci[j] = v + ci[j];
        } else {
          ci[j] = __builtin_fmaf(beta, ci[j], v);  // as _mm256_fmadd_ps: one rounding
        }
      }
    }
  }
};

ASYNCND_AVX2 void run_avx2_block(const g::Problem& pr, std::int64_t i0, std::int64_t i1,
                                 std::int64_t j0, std::int64_t j1) {
  g::run_block_body<Avx2Tile>(pr, i0, i1, j0, j1);
}

}  // namespace

void avx2_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                float beta, float* c, std::int64_t ldc, bool serial) {
  static constexpr g::TileLoop kTile = g::tile_loop<Avx2Tile>(run_avx2_block);
  g::packed_sgemm(kTile, gemm_threads_runner(serial), trans_a, trans_b, m, n, k, alpha, a, lda,
                  b, ldb, beta, c, ldc);
}

}  // namespace detail
}  // namespace asyncnd

#endif  // ASYNCND_HAVE_AVX2_GEMM
