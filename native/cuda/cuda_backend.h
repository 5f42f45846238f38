// The native CUDA backend: per device a compute stream and a copy stream, per-allocation CUDA
// events for dependencies, a stream-aware caching device allocator, pinned staging buffers for
// host<->device copies, cuBLAS GEMM and the kernels of cuda_kernels.cu. Built when
// ASYNCND_WITH_CUDA finds nvcc (see CMakeLists.txt). Not installed: for native/, tests and bench/.
#pragma once

#include <cstddef>
#include <string>

#include "asyncnd/detail/backend.h"

namespace asyncnd {
namespace detail {

// The process-wide CUDA backend, made on first use and never destroyed (engine threads may free
// device memory during exit). device_count() is 0 when cudaGetDeviceCount fails (no GPU, no
// driver); unavailable_reason() then gives CUDA's message. Thread safe.
Backend& cuda_backend();

// "NVIDIA A100-SXM4-40GB (sm_80)"; throws asyncnd::Error for a device that does not exist.
std::string cuda_device_name(int device);

// The floor of a tiny op on `device`, with no engine: microseconds per launch of the fill kernel
// on 2 floats, `n` launches from the calling thread on a stream of its own, after 1000 untimed
// (sync_each: cudaStreamSynchronize after each launch, as a loop that reads each result; else
// once at the end). For bench_gpu. Throws asyncnd::Error with CUDA's message.
double cuda_tiny_launch_us(int device, int n, bool sync_each);

// Bytes the allocator of `device` holds for reuse (freed by arrays, not in use, so not counted
// in the engine's bytes_in_use). 0 for a device never used.
std::size_t cuda_cached_bytes(int device);

}  // namespace detail
}  // namespace asyncnd
