// asyncnd's own AVX2 SGEMM for x86-64 CPUs with AVX2 and FMA: the blocked loop of
// core/src/kernels/gemm_driver.h on a 6 x 16 micro-kernel of 256-bit fused multiply-adds, split
// across threads of its own (gemm_threads.h). The CPU backend runs it where no better kernel does:
// a build without OpenBLAS, or an OpenBLAS left on a pre-AVX2 kernel on a CPU with AVX2 (a core
// the user set, or a better one that failed its self-test); see gemm_select.h. Not installed.
#pragma once

#include <cstdint>

#include "cpu/avx512_gemm.h"  // ASYNCND_HAVE_AVX512_GEMM: the same compilers and targets

#define ASYNCND_HAVE_AVX2_GEMM ASYNCND_HAVE_AVX512_GEMM

namespace asyncnd {
namespace detail {

#if ASYNCND_HAVE_AVX2_GEMM
// C = alpha op(A) op(B) + beta C, the contract of reference_sgemm (backend.h), split across
// GemmThreads, or on the calling thread alone when `serial`. Only on a CPU where
// cpu_features().avx2 and .fma are true: elsewhere it faults with an illegal instruction.
void avx2_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                float beta, float* c, std::int64_t ldc, bool serial = false);
#endif

}  // namespace detail
}  // namespace asyncnd
