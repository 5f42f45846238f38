// The CUDA backend's device kernels (cuda_kernels.cu), behind one host function so that the rest
// of the backend is plain C++ compiled by the host compiler.
#pragma once

#include <cuda_runtime.h>

#include "asyncnd/detail/kernel_call.h"

namespace asyncnd {
namespace detail {

// Launches the kernel for `call` on `stream` (the current device's): kFill, kArange, kMap,
// kMapStrided, kReduce, kRandom and kTranspose2d. Returns the launch status (cudaGetLastError);
// cudaErrorInvalidValue for a kind it does not run (GEMM and copies are not kernels here).
cudaError_t run_cuda_kernel(const KernelCall& call, cudaStream_t stream);

}  // namespace detail
}  // namespace asyncnd
