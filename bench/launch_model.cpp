// bench_launch_model: the engine's side of a tiny GPU op, on a machine without a GPU. A backend
// registered for gpu(0) (detail::register_backend) stands in for the CUDA backend: each kernel
// launch spins a set time on the calling thread, as cudaLaunchKernel costs the engine's GPU worker
// (3.38 us on the H200 of bench/notes/gpu.md: the default), then runs the call there. In hold mode
// it holds calls as the CUDA backend does by default: a call only while the worker knows of more
// ops or already holds some, up to 48, one launch for all of them, started when full, at
// Backend::flush (the GPU worker found no more ops), before a copy and at synchronize; a free
// while calls are held or running waits for them (stream order).
//
// Usage: build/bench_launch_model [launch_us]
// Prints bench_gpu's E5 figures (bench/e5_loops.h: 10 000 x `y = x + 1` on a [1,2] array, waiting
// each step or once, the loop alone, and the loop alone while a host op holds the worker; medians
// of 5) launching each call and holding them, with launches per step. A model: its figures are
// not GPU figures, and no file is written.
#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "e5_loops.h"
#include "kernels/device_map.h"

using namespace asyncnd;
using namespace asyncnd_bench;

namespace {

class LaunchModel final : public detail::Backend {
 public:
  using KernelCall = detail::KernelCall;
  explicit LaunchModel(double launch_us) : launch_us_(launch_us) {}

  DeviceKind kind() const override { return DeviceKind::kGPU; }
  std::string name() const override { return "a launch-cost model of a GPU (on the CPU)"; }
  int device_count() const override { return 1; }
  bool host_addressable() const noexcept override { return false; }

  void* alloc(int, std::size_t bytes) override { return ::operator new(bytes ? bytes : 1); }
  void free(int, void* p, std::size_t) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (held_.empty() && !running_) ::operator delete(p);
    else frees_.push_back(p);  // after the calls that may use it
  }

  void launch(int, const KernelCall& c, Completion done) override {
    if (hold_ && c.kind != KernelCall::Kind::kCopy) {
      Batch full;
      bool held = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (detail::worker_has_more_ops() || !held_.empty()) {  // the CUDA backend's rule
          held = true;
          held_.push_back(c);
          if (held_.size() == kMaxHeld) full = take();
        }
      }
      if (held) {
        run(std::move(full));
        done.done();
        return;
      }
    }
    flush(0);
    run(Batch{{c}, {}});
    done.done();
  }
  void flush(int) noexcept override {
    Batch b;
    {
      std::lock_guard<std::mutex> lock(mu_);
      b = take();
    }
    run(std::move(b));
  }
  void synchronize(int, const void*) override { flush(0); }

  void set_hold(bool on) {
    flush(0);
    hold_ = on;
  }
  long launches() const { return launches_; }

 private:
  static constexpr std::size_t kMaxHeld = 48;
  struct Batch {
    std::vector<KernelCall> calls;
    std::vector<void*> frees;
  };
  Batch take() {  // caller holds mu_
    Batch b;
    if (held_.empty()) return b;
    b.calls.swap(held_);
    b.frees.swap(frees_);
    running_ = true;
    return b;
  }
  // One launch: the spin, then the calls in order, then the frees that waited for them.
  void run(Batch b) {
    if (b.calls.empty()) return;
    {
      std::lock_guard<std::mutex> lock(run_mu_);
      const auto t0 = Clock::now();
      while (std::chrono::duration<double, std::micro>(Clock::now() - t0).count() < launch_us_) {
      }
      ++launches_;
      for (const KernelCall& c : b.calls) execute(c);
      for (void* p : b.frees) ::operator delete(p);
    }
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
  }
  static void execute(const KernelCall& c) {
    using Kind = KernelCall::Kind;
    switch (c.kind) {
      case Kind::kFill:
        for (std::int64_t i = 0; i < c.n; ++i) c.out[i] = c.fill.value;
        break;
      case Kind::kMap:
        for (std::int64_t i = 0; i < c.n; ++i) c.out[i] = kernels::map_element(c.map, c.a, c.b, i);
        break;
      case Kind::kCopy:
        std::memcpy(c.out, c.a, static_cast<std::size_t>(c.n) * sizeof(float));
        break;
      default:
        std::fprintf(stderr, "bench_launch_model: a call this model does not run\n");
        std::abort();
    }
  }

  const double launch_us_;
  bool hold_ = false;  // changed between loops only, after a flush
  std::mutex mu_;      // held_, frees_, running_
  std::vector<KernelCall> held_;
  std::vector<void*> frees_;
  bool running_ = false;
  std::mutex run_mu_;  // one launch at a time, in order, like one stream
  long launches_ = 0;  // under run_mu_
};

}  // namespace

int main(int argc, char** argv) {
  const asyncnd_bench::BenchArgs args = asyncnd_bench::parse_bench_args(
      argc, argv, "bench_launch_model [LAUNCH_US >= 0]  (default 3.38)");
  const double launch_us = args.number(0, 3.38, 0);
  static LaunchModel model(launch_us);
  detail::register_backend(&model);
  const Device gpu = Device::gpu(0);
  const int n = 10000;
  std::printf("bench_launch_model: a launch costs %.2f us on the calling thread (a model, not a "
              "GPU)\n", launch_us);
  for (const bool hold : {false, true}) {
    model.set_hold(hold);
    const long l0 = model.launches();
    const E5Steps e = e5_steps(gpu, n);  // 1000 + 5 x 2 x n steps
    const double launches = static_cast<double>(model.launches() - l0) / (1000.0 + 10.0 * n);
    const double held_push = e5_push_worker_held(gpu, n);
    std::printf("  %-22s E5 step: waiting each %6.2f us, async %6.2f us (push %5.2f us; with the "
                "worker held %5.2f us); launches per step (both loops) %.3f\n",
                hold ? "calls held (batched):" : "each call launched:", e.sync_us, e.async_us,
                e.push_us, held_push, launches);
  }
  detail::register_backend(nullptr);
  return 0;
}
