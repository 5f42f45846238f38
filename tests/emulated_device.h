// A GPU emulated on the CPU, for machines without one (all of ours): a Backend that is not host
// addressable, so core/ sends it every op as a KernelCall, exactly as it would the CUDA backend.
// It runs them in order on a "stream" thread of its own with the device path's math
// (kernels/device_map.h, the same functions the CUDA kernels call), completes an op when it is
// queued (its stream keeps later ops behind it) except a device-to-host copy, which completes
// once the values are in host memory, and stages host-to-device copies at launch: the CUDA
// backend's contract. Registered with register_backend for the duration of a test.
#pragma once

#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "kernels/device_map.h"
#include "kernels/reduce.h"

namespace asyncnd_test {

class EmulatedGpu final : public asyncnd::detail::Backend {
 public:
  using KernelCall = asyncnd::detail::KernelCall;

  // hold: kernels are held back, as the CUDA backend's batches hold them (backend.h, launch), and
  // reach the stream only at a flush, a copy or a synchronize.
  explicit EmulatedGpu(int devices = 2, bool hold = false)
      : devices_(devices), hold_(hold), stream_([this] { run(); }) {}
  ~EmulatedGpu() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    stream_.join();
  }

  asyncnd::DeviceKind kind() const override { return asyncnd::DeviceKind::kGPU; }
  std::string name() const override { return "gpu emulated on the CPU (tests/emulated_device.h)"; }
  int device_count() const override { return devices_; }
  bool host_addressable() const noexcept override { return false; }

  void* alloc(int, std::size_t bytes) override { return ::operator new(bytes ? bytes : 1); }
  // Stream-ordered, as the CUDA backend's cache makes it: ops queued before the free (which the
  // engine already counts as finished) may still use the memory.
  void free(int, void* p, std::size_t) noexcept override {
    Task t;
    t.free_ptr = p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!held_.empty()) {  // after the held kernels that may use it
        held_.push_back(std::move(t));
        return;
      }
      queue_.push_back(std::move(t));
      ++queued_;
    }
    cv_.notify_all();
  }
  // The next launch throws `message`, as a backend does when a kernel fails to launch.
  void fail_next_launch(std::string message) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = std::move(message);
  }
  std::size_t launches() {
    std::lock_guard<std::mutex> lock(mu_);
    return launches_;
  }
  // Hold mode: calls held now, and the most held at once so far.
  std::size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }
  std::size_t most_held() {
    std::lock_guard<std::mutex> lock(mu_);
    return most_held_;
  }

  void launch(int device, const KernelCall& c, asyncnd::Completion done) override {
    Task t;
    t.call = c;
    t.device = device;
    // The plan lives until launch returns (backend.h): copied, as CUDA passes it by value.
    if (c.kind == KernelCall::Kind::kMapStrided) t.plan = asyncnd::kernels::device_strided(c.strided.plan);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!fail_next_.empty()) {
        std::string m = std::move(fail_next_);
        fail_next_.clear();
        throw asyncnd::Error("emulated gpu: " + m);
      }
      ++launches_;
    }
    const bool to_host = c.kind == KernelCall::Kind::kCopy && c.copy.dst().is_cpu();
    if (c.kind == KernelCall::Kind::kCopy && c.copy.src().is_cpu()) {  // staged now, as with CUDA
      t.staging.assign(c.a, c.a + c.n);
    }
    if (to_host) t.done = std::move(done);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hold_ && c.kind != KernelCall::Kind::kCopy) {
        held_.push_back(std::move(t));
        most_held_ = std::max(most_held_, held_.size());
      } else {
        release_held();  // a copy goes after them
        queue_.push_back(std::move(t));
        ++queued_;
      }
    }
    cv_.notify_all();
    if (!to_host) done.done();
  }
  void flush(int) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      release_held();
    }
    cv_.notify_all();
  }

  // Device-side spans while the engine profiles: when each call ran on the stream thread.
  void set_device_timing(bool on) override { timing_.store(on, std::memory_order_relaxed); }
  std::vector<DeviceSpan> take_device_spans() override {
    synchronize(0, nullptr);  // the calls timed so far have run
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(spans_, {});
  }

  // Waits for everything queued so far (a stream synchronise; per-array events are not emulated).
  void synchronize(int, const void*) override {
    std::unique_lock<std::mutex> lock(mu_);
    release_held();
    cv_.notify_all();
    const std::uint64_t target = queued_;
    cv_.wait(lock, [&] { return finished_ >= target; });
  }

 private:
  struct Task {
    KernelCall call;
    asyncnd::kernels::DeviceStrided plan;
    std::vector<float> staging;
    asyncnd::Completion done;
    void* free_ptr = nullptr;  // a free, not a kernel
    int device = 0;
  };

  // Hands the held calls to the stream, in order (caller holds mu_).
  void release_held() {
    for (Task& t : held_) {
      queue_.push_back(std::move(t));
      ++queued_;
    }
    held_.clear();
  }

  void run() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        t = std::move(queue_.front());
        queue_.pop_front();
      }
      if (t.free_ptr) {
        ::operator delete(t.free_ptr);
      } else if (timing_.load(std::memory_order_relaxed)) {  // a device-side span, as CUDA's
        DeviceSpan s;
        s.name = asyncnd::detail::kernel_call_name(t.call);
        s.device = asyncnd::Device::gpu(t.device);
        s.lane = "emulated stream";
        s.start_ns = asyncnd::detail::profiler_clock_ns();
        execute(t);
        s.end_ns = asyncnd::detail::profiler_clock_ns();
        std::lock_guard<std::mutex> lock(mu_);
        spans_.push_back(std::move(s));
      } else {
        execute(t);
      }
      t.done.done();  // a no-op unless it is a device-to-host copy
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++finished_;
      }
      cv_.notify_all();
    }
  }

  template <class A>
  static void reduce(const KernelCall& c) {
    const auto& r = c.reduce;
    for (std::int64_t o = 0; o < r.outer; ++o)
      for (std::int64_t i = 0; i < r.inner; ++i) {
        typename A::T acc = A::init();
        for (std::int64_t j = 0; j < r.len; ++j) acc = A::step(acc, c.a[(o * r.len + j) * r.inner + i]);
        c.out[o * r.inner + i] = asyncnd::kernels::reduce_finish(r.fn, acc, r.len);
      }
  }

  static void execute(const Task& t) {
    namespace k = asyncnd::kernels;
    using Kind = KernelCall::Kind;
    const KernelCall& c = t.call;
    switch (c.kind) {
      case Kind::kFill:
        for (std::int64_t i = 0; i < c.n; ++i) c.out[i] = c.fill.value;
        break;
      case Kind::kArange:
        for (std::int64_t i = 0; i < c.n; ++i)
          c.out[i] = static_cast<float>(c.arange.start + static_cast<double>(i) * c.arange.step);
        break;
      case Kind::kMap:
        for (std::int64_t i = 0; i < c.n; ++i) c.out[i] = k::map_element(c.map, c.a, c.b, i);
        break;
      case Kind::kMapStrided:
        for (std::int64_t i = 0; i < c.n; ++i)
          c.out[i] = k::strided_element(c.strided.map, t.plan, c.a, c.b, i);
        break;
      case Kind::kReduce:
        switch (c.reduce.fn) {
#define ASYNCND_EMULATED_REDUCE(Name, Acc) \
  case asyncnd::detail::ReduceFn::k##Name: \
    reduce<k::Acc>(c);                     \
    break;
          ASYNCND_REDUCE_FNS(ASYNCND_EMULATED_REDUCE)
#undef ASYNCND_EMULATED_REDUCE
        }
        break;
      case Kind::kRandom:
        for (std::int64_t blk = 0; blk * 4 < c.n; ++blk) {
          float v[4];
          k::philox_block_values(c.random.key, c.random.stream, static_cast<std::uint64_t>(blk),
                                 c.random.dist, c.random.a, c.random.b, v);
          for (int j = 0; j < 4 && blk * 4 + j < c.n; ++j) c.out[blk * 4 + j] = v[j];
        }
        break;
      case Kind::kTranspose2d:
        for (std::int64_t r = 0; r < c.transpose.rows; ++r)
          for (std::int64_t col = 0; col < c.transpose.cols; ++col)
            c.out[col * c.transpose.rows + r] = c.a[r * c.transpose.cols + col];
        break;
      case Kind::kGemm: {
        const auto& g = c.gemm;
        asyncnd::detail::reference_sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, c.a, g.lda,
                                         c.b, g.ldb, g.beta, c.out, g.ldc);
        break;
      }
      case Kind::kCopy: {
        const float* src = t.staging.empty() ? c.a : t.staging.data();
        std::memcpy(c.out, src, static_cast<std::size_t>(c.n) * sizeof(float));
        break;
      }
    }
  }

  const int devices_;
  const bool hold_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::vector<Task> held_;  // hold mode: accepted, not yet on the stream
  std::size_t most_held_ = 0;
  std::uint64_t queued_ = 0, finished_ = 0;
  std::size_t launches_ = 0;
  std::string fail_next_;
  std::atomic<bool> timing_{false};
  std::vector<DeviceSpan> spans_;
  bool stop_ = false;
  std::thread stream_;  // last: starts once the members above exist
};

// Registers an EmulatedGpu for the scope (register_backend): gpu(0) and gpu(1) are emulated.
class ScopedEmulatedGpu {
 public:
  explicit ScopedEmulatedGpu(bool hold = false) : gpu_(2, hold) {
    asyncnd::detail::register_backend(&gpu_);
  }
  ~ScopedEmulatedGpu() {
    try {
      asyncnd::engine().waitall();  // nothing of the emulated devices may outlive the scope
    } catch (...) {
      // an op error nobody waited for: the test that left it has failed its own checks
    }
    asyncnd::detail::register_backend(nullptr);
  }
  ScopedEmulatedGpu(const ScopedEmulatedGpu&) = delete;
  ScopedEmulatedGpu& operator=(const ScopedEmulatedGpu&) = delete;
  EmulatedGpu& gpu() { return gpu_; }

 private:
  EmulatedGpu gpu_;
};

}  // namespace asyncnd_test
