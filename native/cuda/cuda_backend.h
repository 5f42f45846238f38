// The native CUDA backend: per device a compute stream and a copy stream, per-allocation CUDA
// events for dependencies, a stream-aware caching device allocator, pinned staging buffers for
// host<->device copies, cuBLAS GEMM and the kernels of cuda_kernels.cu. Built when
// ASYNCND_WITH_CUDA finds nvcc (see CMakeLists.txt). Not installed: for native/, tests and bench/.
#pragma once

#include <cstddef>
#include <cstdint>
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
// once at the end). batch_room > 0: the fill goes as a batch of one held call would, in the batch
// kernel with room for batch_room calls (run_tiny_batch). For bench_gpu. Throws asyncnd::Error
// with CUDA's message.
double cuda_tiny_launch_us(int device, int n, bool sync_each, int batch_room = 0);

// Held calls (cuda_backend.cpp, "Held calls"): whether small elementwise calls may be held back
// and started many per launch. On unless ASYNCND_CUDA_BATCH=0 (any value but unset, empty, 0 or 1
// makes every GPU op fail, naming the variable); bench_gpu and the tests switch it in-process.
// Stays off in a build that records every event at once (ASYNCND_CUDA_EAGER_EVENT_BYTES under
// 8 KB).
void cuda_set_batching(bool on);
// For tests: the next `n` kernel launches on `device` fail with cudaErrorLaunchOutOfResources, as
// a launch asking for too many registers does, instead of starting (n = 0: none). Counts the
// kernels of cuda_kernels.cu launched one by one, not held calls, cuBLAS GEMMs or copies. Throws
// asyncnd::Error for a device that does not exist.
void cuda_fail_next_launches(int device, int n);
// ASYNCND_CUDA_BATCH's value (nullptr: unset, which is on) as on or off; throws asyncnd::Error
// naming the variable, the value and the choices for anything but unset, "", "0" and "1".
bool cuda_batching_from_env(const char* value);
bool cuda_batching();
// Calls held so far on `device`, and the batches that started them (zeros for a device never
// used).
struct CudaHeldCounts {
  std::uint64_t calls = 0, batches = 0;
};
CudaHeldCounts cuda_held_counts(int device);

// The allocator's calls on `device` so far, those its cache could not serve (each called
// cudaMalloc, once, or again after a failure; the rest came from the cache), and how often a
// thread found the device state's locks taken (the frontend's alloc and free meet the worker's
// launches there). For bench_gpu: what a loop's allocations cost.
struct CudaAllocCounts {
  std::uint64_t allocs = 0, driver_allocs = 0, lock_waits = 0;
};
CudaAllocCounts cuda_alloc_counts(int device);

// Bytes the allocator of `device` holds for reuse, not in use, so not counted in the engine's
// bytes_in_use: blocks freed by arrays, and the blocks of a small size's cudaMalloc (64 at a
// time) not used yet. 0 for a device never used.
std::size_t cuda_cached_bytes(int device);

}  // namespace detail
}  // namespace asyncnd
