// The native CPU backend: 64-byte aligned host memory and SGEMM through OpenBLAS, asyncnd's
// AVX-512 or AVX2 GEMM, or the portable GEMM (gemm_select.h chooses, with or without OpenBLAS).
// Not installed: for native/ and bench/.
#pragma once

#include <cstddef>
#include <string>

#include "asyncnd/detail/backend.h"

namespace asyncnd {
namespace detail {

// The process-wide CPU backend, made on first use (that is when the BLAS thread count is set) and
// never destroyed, so engine threads may still free memory during exit. Thread safe.
Backend& cpu_backend();

// The GEMM kernel in use: openblas_get_corename() (e.g. "Haswell") when OpenBLAS runs the GEMMs,
// else ours: "avx512", "avx2" or "portable" (gemm_select.h). Benchmarks print it next to every
// GEMM figure.
std::string cpu_blas_corename();

// Threads a GEMM may use (the thread policy in cpu_backend.cpp): OpenBLAS's count when it runs
// the GEMMs (clamped to its build's maximum, 64 in Debian's), else our GEMM's:
// ASYNCND_BLAS_THREADS, else OpenBLAS's own variables, else every CPU this process may use
// (cpu_gemm_threads_wanted).
int cpu_blas_threads();
// That count before OpenBLAS's clamp: what our own GEMMs' pool is made with (gemm_threads.h).
// Throws asyncnd::Error for a bad ASYNCND_BLAS_THREADS.
int cpu_gemm_threads_wanted();

// Bytes the CPU backend's allocator holds for reuse: blocks that arrays freed, kept so the next
// array of that size skips malloc and the page faults (native/cpu/caching_allocator.h). They are
// not in use, so the engine's bytes_in_use leaves them out. For benchmarks; any thread.
std::size_t cpu_cached_bytes();

// The bound on cached bytes: by default the engine's default byte bound (a quarter of the memory
// the program may use, at most 512 MiB: CachingAllocator::default_limit), or ASYNCND_CPU_CACHE_MB
// (in MiB) read on first use. Setting it releases cached blocks over the new bound at once; 0
// turns caching off, small blocks included (other threads drop their private blocks on their next
// allocation or free).
// For tests and benchmarks; any thread. The cache is compiled out in AddressSanitizer builds.
void set_cpu_cache_limit(std::size_t bytes);
std::size_t cpu_cache_limit();

}  // namespace detail
}  // namespace asyncnd
