// asyncnd's own AVX-512 SGEMM for x86-64 CPUs with AVX-512 (F, BW, VL, DQ): the blocked loop of
// core/src/kernels/gemm_driver.h on a 12 x 32 micro-kernel of 512-bit fused multiply-adds, split
// across threads of its own (gemm_threads.h). The CPU backend runs it by default on a CPU with
// AVX-512, except on one BLAS thread where OpenBLAS's kernel uses AVX-512 too (gemm_select.h).
// Not installed.
#pragma once

#include <cstdint>

#if (defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)))
#define ASYNCND_HAVE_AVX512_GEMM 1
#else
#define ASYNCND_HAVE_AVX512_GEMM 0
#endif

namespace asyncnd {
namespace detail {

#if ASYNCND_HAVE_AVX512_GEMM
// C = alpha op(A) op(B) + beta C, the contract of reference_sgemm (backend.h), split across
// GemmThreads, or on the calling thread alone when `serial`. Only on a CPU where
// cpu_features().avx512 is true: elsewhere it faults with an illegal instruction.
void avx512_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                  float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                  float beta, float* c, std::int64_t ldc, bool serial = false);
#endif

}  // namespace detail
}  // namespace asyncnd
