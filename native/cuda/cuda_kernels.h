// The CUDA backend's device kernels (cuda_kernels.cu), behind one host function so that the rest
// of the backend is plain C++ compiled by the host compiler.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "asyncnd/detail/kernel_call.h"

namespace asyncnd {
namespace detail {

// Launches the kernel for `call` on `stream` (the current device's): kFill, kArange, kMap,
// kMapStrided, kReduce, kRandom and kTranspose2d. Returns the launch status (cudaGetLastError);
// cudaErrorInvalidValue for a kind it does not run (GEMM and copies are not kernels here).
cudaError_t run_cuda_kernel(const KernelCall& call, cudaStream_t stream);

// Small elementwise calls started together: one launch runs up to kTinyBatchMax of them in order,
// in one thread block, with a barrier between calls (so a call may read what an earlier one
// wrote). A launch costs a few microseconds of the host thread's time whatever the kernel does,
// and a tiny op's kernel runs for less, so a batch pays it once for many ops (cuda_backend.cpp,
// "Held calls"). The batch travels by value as the kernel's parameter (under CUDA's 4 KB).
constexpr int kTinyBatchMax = 48;
constexpr std::int64_t kTinyElems = 2048;  // the largest call batched, in output elements
struct TinyCall {
  const float* a;
  const float* b;
  float* out;
  std::int32_t n;
  KernelCall::Kind kind;  // kFill, kArange or kMap
  KernelCall::Map map;
  float fill;
  double start, step;  // kArange
};
struct TinyBatch {
  std::int32_t count;
  TinyCall calls[kTinyBatchMax];
};
static_assert(sizeof(TinyBatch) <= 4096, "a kernel parameter must fit CUDA's 4 KB");

// Whether `call` may go in a batch: a fill, an arange or a contiguous map of at most kTinyElems
// elements (its arrays are then small blocks of the allocator: cuda_backend.cpp relies on it).
bool tiny_batchable(const KernelCall& call);
// The call's fields for a batch (tiny_batchable must be true).
TinyCall tiny_call(const KernelCall& call);
// Launches the batch's calls, in order, on `stream` (the current device's), as a kernel whose
// parameter has room for at least `room` calls (1, 8 or kTinyBatchMax: the smallest that holds
// them, as a launch copies the whole parameter; a larger room is for bench_gpu's floors).
cudaError_t run_tiny_batch(const TinyBatch& batch, cudaStream_t stream, int room = 1);

}  // namespace detail
}  // namespace asyncnd
