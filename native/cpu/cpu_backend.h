// The native CPU backend: 64-byte aligned host memory and SGEMM through OpenBLAS (or the portable
// reference GEMM when built with ASYNCND_WITH_OPENBLAS=OFF). Not installed: for native/ and bench/.
#pragma once

#include <string>

#include "asyncnd/detail/backend.h"

namespace asyncnd {
namespace detail {

// The process-wide CPU backend, made on first use (that is when the BLAS thread count is set) and
// never destroyed, so engine threads may still free memory during exit. Thread safe.
Backend& cpu_backend();

// The BLAS kernel in use: openblas_get_corename() (e.g. "Haswell"), or "reference" without
// OpenBLAS. Benchmarks print it next to every GEMM figure.
std::string cpu_blas_corename();

// Threads each BLAS call may use (the thread policy in cpu_backend.cpp); 1 without OpenBLAS.
int cpu_blas_threads();

}  // namespace detail
}  // namespace asyncnd
