// The native CUDA backend (see cuda_backend.h). How an op runs on a GPU:
//   - core/ queues it with Engine::push_async on the device's one engine worker, which calls
//     launch(): the worker makes the op's stream wait for the inputs' events (only for events
//     recorded on another stream: work on one stream already runs in order), launches, records
//     the output's event, and completes the op at once. Later GPU ops of the device are launched
//     behind it without the CPU waiting for the GPU; no worker blocks per op.
//   - The CPU waits for a GPU array only where it needs the values: a device-to-host copy (the copy
//     stream waits for the source's event; the op completes when a poller thread sees the copy's
//     own event fire), NDArray::wait_to_read (the array's event) and waitall (the device).
//   - Ops whose completion lets the engine reuse an input on another stream complete only when
//     the device is done with it: device-to-host and GPU-to-GPU copies, through the poller.
// Profiling: while the engine profiles, each launch records a pair of timing events around its
// work on the stream it used; Engine::stop_profiling collects them as device-side spans
// (Backend::take_device_spans), anchored to the profiler's clock by one event recorded on an idle
// stream at collection: the trace shows when kernels and copies ran, not only when they launched.
// Memory: a block freed by an array is cached by size; its event then marks the free on the compute
// stream (after waiting for a copy-stream write; recorded at once for a large block, when first
// needed for a small one: see Block), so a later op on the compute stream may reuse it at once,
// and an op on another stream waits for that event first (stream-aware).
#include "cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "asyncnd/error.h"
#include "cuda/cuda_kernels.h"
#include "cuda/poisoned_blocks.h"

namespace asyncnd {
namespace detail {
namespace {

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// Tier-2 errors: the message becomes the op's error ("<op> failed on gpu(0): cuda: ...").
void check(cudaError_t e, const char* what, int device) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clears a non-sticky error so that the device stays usable
  throw Error("cuda: " + std::string(what) + " on gpu(" + std::to_string(device) +
              "): " + cuda_text(e));
}

void check_blas(cublasStatus_t s, const char* what, int device) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error("cublas: " + std::string(what) + " on gpu(" + std::to_string(device) +
              "): " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

// One device allocation.
// Its event marks the last queued write (or the free) on `stream`. A large block's event is
// recorded at once, so that a copy on the other stream waits for exactly that write and no later
// kernel (host-to-device copies overlap kernels). A small block's (up to kEagerEventBytes) is
// recorded only when another stream or the host must wait for it (`pending` until then): its
// waiter may then wait for later work on that stream too, which costs little for small arrays,
// and a tiny op costs one CUDA call (its launch) instead of three (launch, event at the write,
// event at the free). A build may set ASYNCND_CUDA_EAGER_EVENT_BYTES (0: every event at once, as
// before this was measured; bench/notes/gpu.md has both).
#ifndef ASYNCND_CUDA_EAGER_EVENT_BYTES
#define ASYNCND_CUDA_EAGER_EVENT_BYTES (std::size_t{1} << 20)
#endif
constexpr std::size_t kEagerEventBytes = ASYNCND_CUDA_EAGER_EVENT_BYTES;
// Held calls (CudaBackend::launch) need their arrays' events pending until the batch starts, so a
// build that records every event at once (ASYNCND_CUDA_EAGER_EVENT_BYTES below a held call's
// largest array) never holds one.
constexpr bool kCanHold = static_cast<std::size_t>(kTinyElems) * sizeof(float) <= kEagerEventBytes;
// A block's event is made when first recorded (ensure_event): a small block only ever written
// and read on the compute stream, like most of a tiny op's, never has one.
// Blocks of up to kCarveMaxBytes come kCarveCount at a time from one cudaMalloc (carved), the
// rest waiting in the cache: a frontend that runs ahead of the device (E5's loop) takes a fresh
// block per op, and each block it missed in the cache cost its thread two driver calls, a
// cudaMalloc and a cudaEventCreate. (Whether that is what made E5's loop push only one op per
// 4.5 us on an H200 is not yet measured: bench_gpu's gpu_e5_driver_allocs_per_step says.)
// Carved blocks are never given back to the driver (release_cache keeps them): they are at most
// kCarveMaxBytes each, and their count is the program's peak of small arrays. When the driver
// has no room for 64, one block is asked for before the cache is given back.
constexpr std::size_t kCarveMaxBytes = std::size_t{16} << 10;
constexpr int kCarveCount = 64;
struct Block;
using LiveMap = std::unordered_map<const void*, Block*>;
struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;           // rounded, as cached
  bool carved = false;            // one of kCarveCount blocks of one cudaMalloc
  cudaEvent_t ready = nullptr;    // recorded after the last queued write (or at the free)
  cudaStream_t stream = nullptr;  // where the last write (or the free) was queued; nullptr: none
  bool pending = false;           // small block: `ready` not recorded yet for that point
  LiveMap::node_type node;        // while cached: its node of the live map, for the next use
};

// Sizes round up to 512 bytes up to 1 MiB, then to whole MiB, so that arrays of nearly the same
// size share cached blocks.
std::size_t round_size(std::size_t bytes) {
  constexpr std::size_t kSmall = 512, kLarge = std::size_t{1} << 20;
  if (bytes == 0) bytes = 1;
  const std::size_t unit = bytes <= kLarge ? kSmall : kLarge;
  return (bytes + unit - 1) / unit * unit;
}

// A mutex that counts how often a thread found it taken (and so may have slept in the kernel):
// the allocator's lock is taken by the frontend (alloc, free) and by the device's worker (four
// times per launch), and bench_gpu reports how often they met (gpu_e5_lock_waits_per_step).
class CountedMutex {
 public:
  void lock() {
    if (m_.try_lock()) return;
    waits_.fetch_add(1, std::memory_order_relaxed);
    m_.lock();
  }
  void unlock() { m_.unlock(); }
  std::uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }

 private:
  std::mutex m_;
  std::atomic<std::uint64_t> waits_{0};
};

// Page-locked host buffers for host<->device copies (cudaMemcpyAsync is only asynchronous from
// pinned memory), cached by size (powers of two, then whole MiB); at most kPinnedCacheBytes are
// kept. A copy is staged whole, so a large one pins as much host memory as it moves.
class PinnedPool {
 public:
  struct Buffer {
    void* ptr = nullptr;
    std::size_t size = 0;
  };
  Buffer get(std::size_t bytes, int device) {
    // Powers of two up to 64 MiB, then whole MiB: a 4.3 GB copy pinned 8 GiB of host memory.
    std::size_t size = 4096;
    while (size < bytes && size < kPow2MaxBytes) size *= 2;
    if (size < bytes) size = (bytes + kMiB - 1) / kMiB * kMiB;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return {p, size};
      }
    }
    void* p = nullptr;
    check(cudaHostAlloc(&p, size, cudaHostAllocPortable), "cudaHostAlloc (staging buffer)",
          device);
    return {p, size};
  }
  void put(Buffer b) noexcept {
    if (!b.ptr) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + b.size <= kPinnedCacheBytes) {
        free_[b.size].push_back(b.ptr);
        cached_ += b.size;
        return;
      }
    }
    cudaFreeHost(b.ptr);
  }

 private:
  static constexpr std::size_t kPinnedCacheBytes = std::size_t{256} << 20;
  static constexpr std::size_t kMiB = std::size_t{1} << 20;
  static constexpr std::size_t kPow2MaxBytes = std::size_t{64} << 20;
  std::mutex mu_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
};

// What the poller does when a copy's event fires: copy a staging buffer to its host destination
// (device-to-host), give the buffer back, complete the op (an empty Completion when the op
// already completed at launch).
struct Pending {
  cudaEvent_t event = nullptr;
  Completion done;
  PinnedPool::Buffer staging;
  float* host_dst = nullptr;
  std::size_t bytes = 0;
};

// A launch timed while profiling: start and end events recorded around it on its stream.
struct TimedSpan {
  std::string name;
  const char* lane;  // "compute stream" or "copy stream"
  cudaEvent_t start, end;
};

class DeviceState {
 public:
  // Leaves the calling thread's current device as it was. A constructor that throws keeps
  // nothing (the backend makes the state again at the device's next use): the streams and the
  // cuBLAS handle made so far are destroyed, and the poller, which uses `this`, starts last.
  DeviceState(int id, PinnedPool* pinned) : id_(id), pinned_(pinned) {
    int previous = 0;
    check(cudaGetDevice(&previous), "cudaGetDevice", id);
    check(cudaSetDevice(id), "cudaSetDevice", id);
    try {
      check(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), "cudaStreamCreate", id);
      check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate", id);
      check_blas(cublasCreate(&blas_), "cublasCreate", id);
      check_blas(cublasSetStream(blas_, compute_), "cublasSetStream", id);
      // Plain FP32 (no TF32): the results are compared with the CPU's.
      check_blas(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", id);
      check(cudaSetDevice(previous), "cudaSetDevice", previous);
      poller_ = std::thread([this] { poll(); });
    } catch (...) {
      if (blas_) cublasDestroy(blas_);
      if (copy_) cudaStreamDestroy(copy_);
      if (compute_) cudaStreamDestroy(compute_);
      cudaGetLastError();
      cudaSetDevice(previous);
      throw;
    }
    poller_.detach();  // the state lives as long as the process (the backend is never destroyed)
  }

  int id() const { return id_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t copy() const { return copy_; }

  // ---- allocator ------------------------------------------------------------------------------
  void* alloc(std::size_t bytes) {
    const std::size_t size = round_size(bytes);
    {
      std::lock_guard<CountedMutex> lock(mu_);
      ++allocs_;
      auto it = cache_.find(size);
      if (it != cache_.end() && !it->second.empty()) {
        Block* b = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        if (b->node) live_.insert(std::move(b->node));  // the map's node it had: no allocation
        else live_[b->ptr] = b;                          // a carved block's first use
        poisoned_.clear(b->ptr);  // a new array: no failed batch was to write it
        return b->ptr;
      }
      ++driver_allocs_;
    }
    check(cudaSetDevice(id_), "cudaSetDevice", id_);
    int count = size <= kCarveMaxBytes ? kCarveCount : 1;
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, size * static_cast<std::size_t>(count));
    if (e == cudaErrorMemoryAllocation && count > 1) {  // no room for 64: one block
      cudaGetLastError();
      count = 1;
      e = cudaMalloc(&p, size);
    }
    if (e == cudaErrorMemoryAllocation) {  // give the cache back to the driver, then retry once
      cudaGetLastError();
      release_cache();
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error("cuda: cannot allocate " + std::to_string(bytes) + " bytes on gpu(" +
                  std::to_string(id_) + "): " + cuda_text(e));
    }
    std::vector<Block*> blocks(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      Block* b = new Block;
      b->ptr = static_cast<char*>(p) + static_cast<std::size_t>(i) * size;
      b->size = size;
      b->carved = count > 1;
      blocks[static_cast<std::size_t>(i)] = b;
    }
    std::lock_guard<CountedMutex> lock(mu_);
    live_[p] = blocks[0];
    if (count > 1) {  // the rest wait in the cache, the lowest address taken first
      std::vector<Block*>& list = cache_[size];
      list.insert(list.end(), blocks.rbegin(), blocks.rend() - 1);
      cached_ += size * static_cast<std::size_t>(count - 1);
    }
    return p;
  }

  void free(void* p) noexcept {
    if (!p) return;
    std::lock_guard<CountedMutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours: ignore rather than corrupt the cache
    Block* b = it->second;
    b->node = live_.extract(it);  // kept for the block's next use (alloc re-inserts it)
    // Ops that used the block are all queued (the engine frees after the last one); mark the
    // point on the compute stream after which it is free, covering a copy-stream write too.
    // (A small block's free that follows a compute-stream write makes no CUDA call.)
    // Each CUDA call's status is looked at: one that failed is handled here by waiting on the
    // host, and its error cleared, so that it is not reported by a later, unrelated launch.
    const bool other_stream = b->stream && b->stream != compute_;
    const bool small = b->size <= kEagerEventBytes;
    if (other_stream || !small) cudaSetDevice(id_);
    if (other_stream) {
      cudaError_t e = b->pending ? ensure_event(b) : cudaSuccess;
      if (e == cudaSuccess && b->pending) e = cudaEventRecord(b->ready, b->stream);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(compute_, b->ready, 0);
      if (e != cudaSuccess) {  // no event to wait for: the write is done after this
        cudaGetLastError();
        cudaStreamSynchronize(b->stream);
        cudaGetLastError();
      }
    }
    b->stream = compute_;
    b->pending = small;
    if (!small) {
      cudaError_t e = ensure_event(b);
      if (e == cudaSuccess) e = cudaEventRecord(b->ready, compute_);
      if (e != cudaSuccess) {  // no event: a later user on another stream would not wait
        cudaGetLastError();    // for it, so wait here
        cudaStreamSynchronize(compute_);
        cudaGetLastError();
        b->stream = nullptr;
      }
    }
    cache_[b->size].push_back(b);
    cached_ += b->size;
  }

  struct AllocCounts {
    std::uint64_t allocs, driver_allocs, lock_waits;
  };
  AllocCounts alloc_counts() {
    std::lock_guard<CountedMutex> lock(mu_);
    return {allocs_, driver_allocs_, mu_.waits() + bmu_.waits()};
  }

  std::size_t cached_bytes() {
    std::lock_guard<CountedMutex> lock(mu_);
    return cached_;
  }

  // ---- per-block events ----------------------------------------------------------------------
  // Makes `stream` wait for the last queued write of the block at p (if on another stream),
  // before work queued on it reads the block (throws if a failed held batch was to write it:
  // PoisonedBlocks) or writes it (wait_to_write).
  void wait_to_read(cudaStream_t stream, const void* p) {
    std::lock_guard<CountedMutex> lock(mu_);
    wait_read_locked(stream, p);
  }
  void wait_to_write(cudaStream_t stream, const void* p) {
    std::lock_guard<CountedMutex> lock(mu_);
    wait_locked(stream, find(p));
  }
  // Records that the block at p was last written by work queued on `stream` so far.
  void written(cudaStream_t stream, const void* p) {
    std::lock_guard<CountedMutex> lock(mu_);
    Block* b = find(p);
    poisoned_.clear(p);
    if (b->size <= kEagerEventBytes) {  // its event is recorded when first needed
      b->stream = stream;
      b->pending = true;
      return;
    }
    // The block says a write is marked only once its event marks this one: after a failed record,
    // the event of an earlier write would stand for this one, and free() would trust it and hand
    // the block to the compute stream while this write still runs. So wait for the write here.
    const char* what = "cudaEventCreateWithFlags";
    cudaError_t e = ensure_event(b);
    if (e == cudaSuccess) {
      what = "cudaEventRecord";
      e = cudaEventRecord(b->ready, stream);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      cudaStreamSynchronize(stream);
      b->stream = nullptr;  // nothing left to wait for
      b->pending = false;
      check(e, what, id_);
    }
    b->stream = stream;
    b->pending = false;
  }
  // For a held call, whose arrays are all small blocks (kCanHold): wait_to_read for its inputs,
  // wait_to_write and written for its output, under one lock. The output's event stays pending:
  // the write it marks is in the held batch, not yet on the stream.
  void prepare_held(cudaStream_t stream, const KernelCall& c) {
    std::lock_guard<CountedMutex> lock(mu_);
    for (const void* p : {static_cast<const void*>(c.a), static_cast<const void*>(c.b)}) {
      if (p) wait_read_locked(stream, p);
    }
    Block* out = find(c.out);
    wait_locked(stream, out);
    out->stream = stream;
    out->pending = true;
    // The output's mark is cleared in hold(), not here: a batch started and failed by another
    // thread in between would mark the block again, for a write that is not in it.
  }
  // Blocks until the last queued write of the block at p has finished.
  // Throws, as wait_to_read, if a failed held batch was to write it.
  void wait_host(const void* p) {
    cudaEvent_t ev = nullptr;
    {
      std::lock_guard<CountedMutex> lock(mu_);
      Block* b = find(p);
      if (b->stream) record_pending(b);
      poisoned_.check_read(p);
      if (!b->stream) return;
      ev = b->ready;
    }
    check(cudaSetDevice(id_), "cudaSetDevice", id_);
    check(cudaEventSynchronize(ev), "cudaEventSynchronize", id_);
  }

  // ---- held calls ----------------------------------------------------------------------------
  // Small elementwise calls held back and started together (cuda_kernels.h, TinyBatch): see
  // "Held calls" at CudaBackend::launch. Guarded by bmu_, which may be taken under mu_ (a pending
  // event's record starts the held calls first), never the other way round.
  void hold(const KernelCall& c) {
    std::lock_guard<CountedMutex> lock(bmu_);
    poisoned_.clear(c.out);  // a new write, joining the batch that will mark it if it fails
    batch_.calls[batch_.count++] = tiny_call(c);
    ++held_calls_;
    if (batch_.count == kTinyBatchMax) start_held_locked();
  }
  // Starts the held calls, if any, on the compute stream, with this device current (the caller
  // may be another device's worker; its device is restored). Never throws for a batch that
  // fails to start: its ops have completed, so the failure goes on their outputs' blocks
  // (PoisonedBlocks: their next reader fails with it) and to the next synchronize
  // (take_held_error), which reports it once.
  void start_held() {
    std::lock_guard<CountedMutex> lock(bmu_);
    start_held_locked();
  }
  std::string take_held_error() {
    std::lock_guard<CountedMutex> lock(bmu_);
    return std::exchange(held_error_, std::string());
  }
  struct HeldCounts {
    std::uint64_t calls, batches;
  };
  bool holding() {
    std::lock_guard<CountedMutex> lock(bmu_);
    return batch_.count > 0;
  }
  HeldCounts held_counts() {
    std::lock_guard<CountedMutex> lock(bmu_);
    return {held_calls_, batches_};
  }

  // ---- completions ---------------------------------------------------------------------------
  // Records an event on `stream` and hands `p` to the poller, which acts once it fires.
  // Throws if no event can be recorded. The copy is queued then and may still use the staging
  // buffer: the buffer goes back to the pool once the stream has finished, or, if the stream
  // cannot be synchronised, is never reused (leaked rather than written under a later copy).
  void complete_after(cudaStream_t stream, Pending p) {
    const char* what = "cudaEventCreate";
    cudaError_t e = new_event(&p.event);
    if (e == cudaSuccess) {
      what = "cudaEventRecord";
      e = cudaEventRecord(p.event, stream);
      if (e != cudaSuccess) give_event(p.event);
    }
    if (e != cudaSuccess) {
      cudaGetLastError();
      put_staging_after(p.staging, stream);
      check(e, what, id_);
    }
    {
      std::lock_guard<std::mutex> lock(pmu_);
      pending_.push_back(std::move(p));
    }
    pcv_.notify_one();
  }

  PinnedPool& pinned() { return *pinned_; }

  // Gives a staging buffer back to the pool once `stream` has passed the copy queued on it (null:
  // none was queued); if the stream cannot be waited for, never: a buffer the DMA may still use
  // must not go to another copy. Clears the error of a wait that failed.
  void put_staging_after(const PinnedPool::Buffer& b, cudaStream_t stream) noexcept {
    if (stream == nullptr) return pinned_->put(b);
    if (b.ptr && cudaStreamSynchronize(stream) == cudaSuccess) pinned_->put(b);
    cudaGetLastError();
  }

  // ---- failures made on purpose (cuda_fail_next_launches) ------------------------------------
  void fail_next_launches(int n) { fail_launches_.store(n, std::memory_order_relaxed); }
  bool take_failed_launch() {
    int n = fail_launches_.load(std::memory_order_relaxed);
    while (n > 0 && !fail_launches_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {
    }
    return n > 0;
  }

  // ---- device-side timing (profiling) ----------------------------------------------------------
  // Records a timing event on `stream` before a timed launch; span_end records the one after it
  // and keeps the pair, span_drop forgets a launch that failed.
  // Profiling never fails an op: an event that cannot be made loses its span (nullptr).
  cudaEvent_t span_begin(cudaStream_t stream) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) == cudaSuccess && cudaEventRecord(e, stream) == cudaSuccess) return e;
    cudaGetLastError();
    if (e) cudaEventDestroy(e);
    return nullptr;
  }
  void span_end(cudaStream_t stream, std::string name, cudaEvent_t start) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess || cudaEventRecord(e, stream) != cudaSuccess) {
      cudaGetLastError();  // a span lost to a failing event: the op itself has run
      if (e) cudaEventDestroy(e);
      cudaEventDestroy(start);
      return;
    }
    std::lock_guard<std::mutex> lock(smu_);
    spans_.push_back(
        {std::move(name), stream == copy_ ? "copy stream" : "compute stream", start, e});
  }
  static void span_drop(cudaEvent_t start) { cudaEventDestroy(start); }

  // Waits for every timed launch, converts the spans to the profiler's clock and forgets them.
  // The anchor: an event recorded on a stream with nothing queued completes at once, so its
  // device time is the host time between recording it and seeing it complete (their midpoint;
  // the error is half that window, a few microseconds).
  std::vector<Backend::DeviceSpan> take_spans() {
    std::vector<TimedSpan> spans;
    {
      std::lock_guard<std::mutex> lock(smu_);
      spans.swap(spans_);
    }
    std::vector<Backend::DeviceSpan> out;
    if (spans.empty()) return out;
    cudaSetDevice(id_);
    cudaStream_t idle = nullptr;
    cudaEvent_t anchor = nullptr;
    bool ok = cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking) == cudaSuccess &&
              cudaEventCreate(&anchor) == cudaSuccess;
    for (const TimedSpan& t : spans) ok = ok && cudaEventSynchronize(t.end) == cudaSuccess;
    std::int64_t host_ns = 0;
    if (ok) {
      const std::int64_t before = profiler_clock_ns();
      ok = cudaEventRecord(anchor, idle) == cudaSuccess &&
           cudaEventSynchronize(anchor) == cudaSuccess;
      host_ns = before + (profiler_clock_ns() - before) / 2;
    }
    for (const TimedSpan& t : spans) {
      // Where the span ends: ms back from the anchor, a float whose step grows with the distance
      // (1 us at 10 s, 62 us at 10 min); its length from its own two events, exact at any age.
      float to_end = 0, length = 0;
      if (ok && cudaEventElapsedTime(&to_end, t.end, anchor) == cudaSuccess &&
          cudaEventElapsedTime(&length, t.start, t.end) == cudaSuccess) {
        Backend::DeviceSpan d;
        d.name = t.name;
        d.device = Device::gpu(id_);
        d.lane = t.lane;
        d.end_ns = host_ns - static_cast<std::int64_t>(static_cast<double>(to_end) * 1e6);
        d.start_ns = d.end_ns - static_cast<std::int64_t>(static_cast<double>(length) * 1e6);
        out.push_back(std::move(d));
      }
      cudaEventDestroy(t.start);
      cudaEventDestroy(t.end);
    }
    cudaGetLastError();  // a failure above loses spans, never the device
    if (anchor) cudaEventDestroy(anchor);
    if (idle) cudaStreamDestroy(idle);
    return out;
  }

  // The device's cuBLAS handle, used by GEMMs (gemm, below) under its mutex: a handle serves one
  // thread at a time. (bench_gpu's GEMM timed without the engine, direct_sgemm_seconds in
  // bench/gpu.cpp, makes a handle of its own.)
  std::mutex& blas_mutex() { return blas_mu_; }
  cublasHandle_t blas() const { return blas_; }

 private:
  // A small block's event, recorded now on its stream if it is still pending (caller holds mu_),
  // after the held calls, which may have written it.
  // The caller may be another device's worker (a GPU-to-GPU copy): the record is made with this
  // device current, and the caller's device restored.
  void record_pending(Block* b) {
    if (!b->pending) return;
    if (b->stream == compute_) start_held();  // the write may be a held call
    int current = id_;
    cudaGetDevice(&current);
    if (current != id_) cudaSetDevice(id_);
    const char* what = "cudaEventCreateWithFlags";
    cudaError_t e = ensure_event(b);
    if (e == cudaSuccess) {
      what = "cudaEventRecord";
      e = cudaEventRecord(b->ready, b->stream);
    }
    if (current != id_) cudaSetDevice(current);
    check(e, what, id_);
    b->pending = false;
  }

  // Makes `stream` wait for the last queued write of b, if on another stream (caller holds mu_).
  void wait_locked(cudaStream_t stream, Block* b) {
    if (b->stream && b->stream != stream) {
      record_pending(b);
      check(cudaStreamWaitEvent(stream, b->ready, 0), "cudaStreamWaitEvent", id_);
    }
  }
  // wait_locked before a read of the block at p, then the check of its mark (after the wait,
  // which may start the held calls, and so fail a batch that was to write it).
  void wait_read_locked(cudaStream_t stream, const void* p) {
    wait_locked(stream, find(p));
    poisoned_.check_read(p);
  }

  // A block's event, made on first need (caller holds mu_, with this device current).
  static cudaError_t ensure_event(Block* b) {
    if (b->ready) return cudaSuccess;
    return cudaEventCreateWithFlags(&b->ready, cudaEventDisableTiming);
  }

  void start_held_locked() noexcept {  // caller holds bmu_
    if (batch_.count == 0) return;
    const int n = batch_.count;
    int current = id_;
    cudaGetDevice(&current);
    if (current != id_) cudaSetDevice(id_);
    const cudaError_t e = run_tiny_batch(batch_, compute_);
    if (current != id_) cudaSetDevice(current);
    batch_.count = 0;
    ++batches_;
    if (e == cudaSuccess) return;
    cudaGetLastError();
    // (noexcept: a host allocation failing here ends the process, as in the engine's own
    // bookkeeping; README.md, "Errors".)
    const std::string what = "cuda: " + std::to_string(n) + " small kernels held on gpu(" +
                             std::to_string(id_) + ") failed to start: " + cuda_text(e);
    const void* outs[kTinyBatchMax];
    for (int i = 0; i < n; ++i) outs[i] = batch_.calls[i].out;
    poisoned_.mark(outs, n, what);
    if (held_error_.empty()) held_error_ = what;
  }

  Block* find(const void* p) {  // caller holds mu_
    auto it = live_.find(p);
    if (it == live_.end())
      throw Error("cuda: gpu(" + std::to_string(id_) + ") has no allocation at this address");
    return it->second;
  }

  void release_cache() {  // carved blocks stay (Block)
    std::vector<Block*> blocks;
    {
      std::lock_guard<CountedMutex> lock(mu_);
      for (auto& kv : cache_) {
        std::vector<Block*>& list = kv.second;
        const auto own = std::stable_partition(list.begin(), list.end(),
                                               [](const Block* b) { return b->carved; });
        for (auto it = own; it != list.end(); ++it) {
          blocks.push_back(*it);
          cached_ -= (*it)->size;
        }
        list.erase(own, list.end());
      }
      // A held call may still use a block just taken out: its op has completed, so the engine
      // may have freed the block, but the call is not on the stream yet, and cudaFree waits only
      // for work already there. Every such call is held by now (it was held before its op
      // completed, and the free came after): start them, then cudaFree waits for them.
      start_held();
    }
    for (Block* b : blocks) {  // cudaFree waits for the device, so queued users are done
      poisoned_.clear(b->ptr);  // the driver may hand the address out again
      cudaFree(b->ptr);
      if (b->ready) cudaEventDestroy(b->ready);
      delete b;
    }
  }

  // Completion events sleep the poller instead of spinning on one of the machine's few cores.
  cudaError_t new_event(cudaEvent_t* e) {
    {
      std::lock_guard<CountedMutex> lock(mu_);
      if (!events_.empty()) {
        *e = events_.back();
        events_.pop_back();
        return cudaSuccess;
      }
    }
    return cudaEventCreateWithFlags(e, cudaEventDisableTiming | cudaEventBlockingSync);
  }
  void give_event(cudaEvent_t e) {
    std::lock_guard<CountedMutex> lock(mu_);
    events_.push_back(e);
  }

  // The poller: waits for each pending copy's event in order, then finishes it. Runs the
  // engine's completion (and whatever it triggers, such as a deferred free) on this thread.
  void poll() {
    cudaSetDevice(id_);
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> lock(pmu_);
        pcv_.wait(lock, [this] { return !pending_.empty(); });
        p = std::move(pending_.front());
        pending_.pop_front();
      }
      cudaError_t e = cudaEventSynchronize(p.event);
      if (e == cudaSuccess && p.host_dst) std::memcpy(p.host_dst, p.staging.ptr, p.bytes);
      // After a failed wait, the copy is known done only once the copy stream (every pending
      // copy's) is.
      put_staging_after(p.staging, e == cudaSuccess ? nullptr : copy_);
      give_event(p.event);
      if (e == cudaSuccess) {
        p.done.done();
      } else {
        cudaGetLastError();
        p.done.fail("cuda: copy on gpu(" + std::to_string(id_) + "): " + cuda_text(e));
      }
    }
  }

  const int id_;
  PinnedPool* const pinned_;
  cudaStream_t compute_ = nullptr, copy_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::mutex blas_mu_;

  CountedMutex mu_;  // blocks, cache, events
  LiveMap live_;
  std::unordered_map<std::size_t, std::vector<Block*>> cache_;
  std::size_t cached_ = 0;
  std::uint64_t allocs_ = 0, driver_allocs_ = 0;  // alloc calls, and those that called cudaMalloc
  std::vector<cudaEvent_t> events_;

  CountedMutex bmu_;  // the held calls
  TinyBatch batch_{};
  std::uint64_t held_calls_ = 0, batches_ = 0;
  std::atomic<int> fail_launches_{0};
  std::string held_error_;  // a batch that could not start, for the next synchronize
  PoisonedBlocks poisoned_;  // its outputs, for their next readers

  std::mutex smu_;  // spans_
  std::vector<TimedSpan> spans_;

  std::mutex pmu_;
  std::condition_variable pcv_;
  std::deque<Pending> pending_;
  std::thread poller_;
};

// Row-major C = alpha op(A) op(B) + beta C through column-major cuBLAS: row-major C is
// column-major C^T = op(B)^T op(A)^T, so the operands swap and keep their own transposes.
void gemm(DeviceState& d, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
          float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k == 0) {  // C = beta * C; cuBLAS rejects the zero leading dimensions of such a call
    if (beta != 0.0f || ldc != n)
      throw Error("cuda: sgemm with k=0 is supported with beta=0 and ldc=n only");
    check(cudaMemsetAsync(c, 0, static_cast<std::size_t>(m * n) * sizeof(float), d.compute()),
          "cudaMemsetAsync", d.id());
    return;
  }
  constexpr std::int64_t kMax = INT_MAX;
  if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax)
    throw Error("cuda: sgemm dimensions exceed cuBLAS's 32-bit interface: m=" +
                std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
  std::lock_guard<std::mutex> lock(d.blas_mutex());
  check_blas(cublasSgemm(d.blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                         static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                         static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c,
                         static_cast<int>(ldc)),
             "cublasSgemm", d.id());
}

// Times one launch on `stream` while the engine profiles: the start event at construction, the
// end at end(); a launch that throws before end() loses its span.
class SpanTimer {
 public:
  SpanTimer(DeviceState& d, cudaStream_t stream, bool on)
      : d_(d), stream_(stream), start_(on ? d.span_begin(stream) : nullptr) {}
  ~SpanTimer() {
    if (start_) DeviceState::span_drop(start_);
  }
  SpanTimer(const SpanTimer&) = delete;
  SpanTimer& operator=(const SpanTimer&) = delete;
  void end(const KernelCall& c) {
    if (!start_) return;
    d_.span_end(stream_, kernel_call_name(c), start_);
    start_ = nullptr;
  }

 private:
  DeviceState& d_;
  cudaStream_t stream_;
  cudaEvent_t start_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      count_ = 0;
      reason_ = "no usable GPU: cudaGetDeviceCount: " + cuda_text(e);
    } else if (count == 0) {
      reason_ = "no GPU: cudaGetDeviceCount found 0 devices";
    } else {
      count_ = count;
      states_ = std::make_unique<std::atomic<DeviceState*>[]>(static_cast<std::size_t>(count));
      for (int i = 0; i < count; ++i) states_[static_cast<std::size_t>(i)].store(nullptr);
    }
    try {
      set_batching(cuda_batching_from_env(std::getenv("ASYNCND_CUDA_BATCH")));
    } catch (const Error& e) {  // every GPU op then fails, saying this
      count_ = 0;
      reason_ = e.what();
    }
  }

  DeviceKind kind() const override { return DeviceKind::kGPU; }
  std::string name() const override {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return "cuda (runtime " + std::to_string(runtime / 1000) + "." +
           std::to_string(runtime % 1000 / 10) + ", " + std::to_string(count_) + " device(s))";
  }
  int device_count() const override { return count_; }
  std::string unavailable_reason() const override { return reason_; }
  bool host_addressable() const noexcept override { return false; }

  void* alloc(int device_id, std::size_t bytes) override { return state(device_id).alloc(bytes); }
  void free(int device_id, void* p, std::size_t) noexcept override {
    if (DeviceState* d = started(device_id)) d->free(p);  // memory comes from a started device
  }

  // Held calls (on unless ASYNCND_CUDA_BATCH=0; cuda_set_batching in-tree). A launch costs the
  // worker a few microseconds whatever the kernel does (3.8 us on an H100 VM: bench/notes/gpu.md),
  // more than a tiny op's kernel runs, so a loop of tiny ops is bound by launches. With batching
  // on, a small elementwise call (tiny_batchable) is held, and its op completes at once, when the
  // worker knows of more ops to run on this device (worker_has_more_ops) or already holds calls:
  // a call whose result the program waits for right away goes out at once, since holding it only
  // added to that wait (E5 reading each step on an H100, per step: 17.5 us with every small call
  // held against 13.8 with none, in one run; 13.0 with this rule against 13.0 with none, in
  // another). The held calls start as one kernel (run_tiny_batch) when kTinyBatchMax are held,
  // when the engine's worker finds no more ops (flush), and before anything could observe them:
  // any other launch on the device, a copy or host wait that records a compute-stream block's
  // event (record_pending), synchronize, and the cache's release on a failed cudaMalloc. Their
  // arrays are small blocks, whose events are recorded only when waited for, so no event is
  // recorded for a held call's write. While the engine profiles, nothing is held (each call keeps
  // its own device-side span).
  // Not held: a chain of small ops alone, each waiting for the last, as its next op is queued
  // only once the running one completes (the worker then never knows of one more).
  void launch(int device_id, const KernelCall& c, Completion done) override {
    DeviceState& d = state(device_id);
    check(cudaSetDevice(device_id), "cudaSetDevice", device_id);
    using Kind = KernelCall::Kind;
    if (batching_.load(std::memory_order_relaxed) && !timing() && tiny_batchable(c) &&
        (worker_has_more_ops() || d.holding())) {
      d.prepare_held(d.compute(), c);  // a copy-stream write: the batch's launch waits for it
      d.hold(c);
      done.done();
      return;
    }
    d.start_held();  // the held calls go first
    if (c.kind == Kind::kCopy) {
      copy(d, c, std::move(done));
      return;
    }
    const cudaStream_t s = d.compute();
    if (c.a) d.wait_to_read(s, c.a);
    if (c.b) d.wait_to_read(s, c.b);
    d.wait_to_write(s, c.out);  // a write waits for the last write too (e.g. a host-to-device copy)
    SpanTimer timer(d, s, timing());
    if (c.kind == Kind::kGemm) {
      const auto& g = c.gemm;
      gemm(d, g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, c.a, g.lda, c.b, g.ldb, g.beta, c.out,
           g.ldc);
    } else {
      const cudaError_t e =
          d.take_failed_launch() ? cudaErrorLaunchOutOfResources : run_cuda_kernel(c, s);
      check(e, "kernel launch", device_id);
    }
    timer.end(c);
    d.written(s, c.out);
    done.done();  // later ops of this device queue behind it on the stream
  }

  void synchronize(int device_id, const void* p) override {
    DeviceState* started_state = started(device_id);
    if (!started_state) return;  // never used: nothing queued (and no need to start it)
    DeviceState& d = *started_state;
    if (p) {
      d.wait_host(p);  // throws if a failed held batch was to write it
      return;
    }
    d.start_held();
    check(cudaSetDevice(device_id), "cudaSetDevice", device_id);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device_id);
    // A held batch that failed to start, once (its outputs also fail their readers).
    const std::string held_error = d.take_held_error();
    if (!held_error.empty()) throw Error(held_error);
  }

  void flush(int device_id) noexcept override {
    if (DeviceState* d = started(device_id)) {
      d->start_held();  // a failure waits for the blocks' readers and the next synchronize
    }
  }

  void set_batching(bool on) { batching_.store(on && kCanHold, std::memory_order_relaxed); }
  bool batching() const { return batching_.load(std::memory_order_relaxed); }

  void set_device_timing(bool on) override { timing_.store(on, std::memory_order_relaxed); }
  std::vector<DeviceSpan> take_device_spans() override {
    std::vector<DeviceSpan> out;
    for (int i = 0; i < count_; ++i) {
      if (DeviceState* d = started(i)) {
        std::vector<DeviceSpan> spans = d->take_spans();
        out.insert(out.end(), std::make_move_iterator(spans.begin()),
                   std::make_move_iterator(spans.end()));
      }
    }
    return out;
  }

  DeviceState& state(int id) {
    if (id < 0 || id >= count_)
      throw Error("cuda: no device gpu(" + std::to_string(id) + ")" +
                  (reason_.empty() ? "" : ": " + reason_));
    std::atomic<DeviceState*>& slot = states_[static_cast<std::size_t>(id)];
    if (DeviceState* d = slot.load(std::memory_order_acquire)) return *d;
    std::lock_guard<std::mutex> lock(start_mu_);
    if (DeviceState* d = slot.load(std::memory_order_acquire)) return *d;
    auto* d = new DeviceState(id, &pinned_);  // leaked with the backend
    slot.store(d, std::memory_order_release);
    return *d;
  }
  // The state of a device already in use, or null.
  DeviceState* started(int id) const {
    if (id < 0 || id >= count_) return nullptr;
    return states_[static_cast<std::size_t>(id)].load(std::memory_order_acquire);
  }

 private:
  // Host<->device through pinned staging on the copy stream (so copies overlap kernels), GPU to
  // GPU on the destination's streams.
  void copy(DeviceState& d, const KernelCall& c, Completion done) {
    const std::size_t bytes = static_cast<std::size_t>(c.n) * sizeof(float);
    const Device src = c.copy.src(), dst = c.copy.dst();
    if (src.is_cpu()) {  // host -> device: completes now; consumers wait for out's event
      Pending p;
      p.staging = d.pinned().get(bytes, d.id());
      std::memcpy(p.staging.ptr, c.a, bytes);
      bool queued = false;  // the copy reads the staging buffer until the stream passes it
      try {
        d.wait_to_write(d.copy(), c.out);
        SpanTimer timer(d, d.copy(), timing());
        check(cudaMemcpyAsync(c.out, p.staging.ptr, bytes, cudaMemcpyHostToDevice, d.copy()),
              "cudaMemcpyAsync (host to device)", d.id());
        queued = true;
        timer.end(c);
        d.written(d.copy(), c.out);
      } catch (...) {
        d.put_staging_after(p.staging, queued ? d.copy() : nullptr);
        throw;
      }
      d.complete_after(d.copy(), std::move(p));  // gives the staging buffer back
      done.done();
      return;
    }
    if (dst.is_cpu()) {  // device -> host: completes once the values are in host memory
      Pending p;
      p.staging = d.pinned().get(bytes, d.id());
      bool queued = false;  // the copy writes the staging buffer until the stream passes it
      try {
        d.wait_to_read(d.copy(), c.a);
        SpanTimer timer(d, d.copy(), timing());
        check(cudaMemcpyAsync(p.staging.ptr, c.a, bytes, cudaMemcpyDeviceToHost, d.copy()),
              "cudaMemcpyAsync (device to host)", d.id());
        queued = true;
        timer.end(c);
      } catch (...) {
        d.put_staging_after(p.staging, queued ? d.copy() : nullptr);
        throw;
      }
      p.host_dst = c.out;
      p.bytes = bytes;
      p.done = std::move(done);
      d.complete_after(d.copy(), std::move(p));
      return;
    }
    if (src == dst) {  // on one device: in stream order, like a kernel
      d.wait_to_read(d.compute(), c.a);
      d.wait_to_write(d.compute(), c.out);
      SpanTimer timer(d, d.compute(), timing());
      check(cudaMemcpyAsync(c.out, c.a, bytes, cudaMemcpyDeviceToDevice, d.compute()),
            "cudaMemcpyAsync (device to device)", d.id());
      timer.end(c);
      d.written(d.compute(), c.out);
      done.done();
      return;
    }
    // GPU to GPU: on the destination's copy stream, after the source's event (an event of
    // another device is fine there). Completes when done, so that the source's next writer, on
    // the other device's streams, cannot overtake the copy.
    DeviceState& s = state(src.id);
    check(cudaSetDevice(d.id()), "cudaSetDevice", d.id());
    s.wait_to_read(d.copy(), c.a);
    d.wait_to_write(d.copy(), c.out);
    SpanTimer timer(d, d.copy(), timing());
    check(cudaMemcpyPeerAsync(c.out, dst.id, c.a, src.id, bytes, d.copy()), "cudaMemcpyPeerAsync",
          d.id());
    timer.end(c);
    d.written(d.copy(), c.out);
    Pending p;
    p.done = std::move(done);
    d.complete_after(d.copy(), std::move(p));
  }

  bool timing() const { return timing_.load(std::memory_order_relaxed); }

  int count_ = 0;
  std::string reason_;
  std::atomic<bool> timing_{false};  // the engine is profiling: time each launch on the device
  std::atomic<bool> batching_{false};  // hold small calls (launch, "Held calls")
  PinnedPool pinned_;
  std::unique_ptr<std::atomic<DeviceState*>[]> states_;
  std::mutex start_mu_;
};

CudaBackend& instance() {
  // Leaked on purpose, like the CPU backend: engine threads may free arrays during exit.
  static CudaBackend* backend = new CudaBackend();
  return *backend;
}

}  // namespace

Backend& cuda_backend() { return instance(); }

std::string cuda_device_name(int device) {
  CudaBackend& be = instance();
  be.state(device);  // throws for a device that does not exist
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", device);
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ")";
}

double cuda_tiny_launch_us(int device, int n, bool sync_each, int batch_room) {
  CudaBackend& be = instance();
  be.state(device);  // throws for a device that does not exist
  check(cudaSetDevice(device), "cudaSetDevice", device);
  float* buf = nullptr;
  cudaStream_t s = nullptr;
  check(cudaMalloc(&buf, 2 * sizeof(float)), "cudaMalloc", device);
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  KernelCall c;
  c.kind = KernelCall::Kind::kFill;
  c.out = buf;
  c.n = 2;
  c.fill.value = 1.0f;
  TinyBatch batch;
  batch.count = 1;
  batch.calls[0] = tiny_call(c);
  auto launch = [&] {
    return batch_room > 0 ? run_tiny_batch(batch, s, batch_room) : run_cuda_kernel(c, s);
  };
  for (int i = 0; e == cudaSuccess && i < 1000; ++i) e = launch();  // warm-up
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; e == cudaSuccess && i < n; ++i) {
    e = launch();
    if (e == cudaSuccess && sync_each) e = cudaStreamSynchronize(s);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (s) cudaStreamDestroy(s);
  cudaFree(buf);
  check(e, "tiny launches", device);
  return us / (n > 0 ? n : 1);
}

bool cuda_batching_from_env(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "1") return true;
  if (v == "0") return false;
  throw Error("ASYNCND_CUDA_BATCH='" + v + "': expected 0 (launch each call) or 1 (hold small calls "
              "and start them together; the default)");
}

void cuda_set_batching(bool on) { instance().set_batching(on); }

void cuda_fail_next_launches(int device, int n) { instance().state(device).fail_next_launches(n); }
bool cuda_batching() { return instance().batching(); }

CudaHeldCounts cuda_held_counts(int device) {
  DeviceState* d = instance().started(device);
  if (!d) return {};
  const DeviceState::HeldCounts c = d->held_counts();
  return {c.calls, c.batches};
}

CudaAllocCounts cuda_alloc_counts(int device) {
  DeviceState* d = instance().started(device);
  if (!d) return {};
  const DeviceState::AllocCounts c = d->alloc_counts();
  return {c.allocs, c.driver_allocs, c.lock_waits};
}

std::size_t cuda_cached_bytes(int device) {
  DeviceState* d = instance().started(device);
  return d ? d->cached_bytes() : 0;
}

}  // namespace detail
}  // namespace asyncnd
