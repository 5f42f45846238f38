// What the files of bench_native share: bench/native.cpp (its command line, the engine's costs,
// E1, E5, E6 and the JSON output) and bench/native/gemm.cpp (the GEMM's figures).
#pragma once

#include <string>

// The build defines ASYNCND_HAVE_OPENBLAS on this target; a build without OpenBLAS has no direct
// cblas_sgemm to compare with, and those figures are left out.
#ifndef ASYNCND_HAVE_OPENBLAS
#define ASYNCND_HAVE_OPENBLAS 1
#endif

namespace asyncnd_bench::native {

// Keeps a figure for the JSON output and prints it as a row of the table.
void record(const std::string& key, double value, const std::string& what);
// Prints the title of a block of rows.
void heading(const char* title);

// The GEMM (bench/native/gemm.cpp), in the order the bench runs it.
#if ASYNCND_HAVE_OPENBLAS
// In a child (bench_native --gemm-kernel): one 1000^3 product with OpenBLAS as it loaded, and its
// self-test. Prints "core=<name> gflops=<x> selftest=<ok|what failed>"; returns the exit status.
int gemm_kernel_child();
// Each OpenBLAS core type that applies to this CPU, in a child process: `self_exe`, this program.
void bench_gemm_sweep(const std::string& self_exe);
#endif
// Our own GEMMs (portable, avx512, avx2) on the same product, inside an engine op.
void bench_own_sgemm();
// The engine's nd::dot, cblas_sgemm directly and the fastest kernels of the two above, in rounds
// side by side; records sgemm1000_best_kernel_gflops.
void bench_sgemm_rounds();
// The fastest correct kernel's name, as bench_sgemm_rounds found it ("" before, or if none).
const std::string& best_kernel();

}  // namespace asyncnd_bench::native
