// Helpers for the tests that need a real GPU (tagged [gpu]): which GPUs exist, and an honest skip.
// Catch2 v2 has no skip: a [gpu] test with no GPU prints "SKIPPED: <reason>" and returns; ctest
// runs the [gpu] tests as entries of their own (CMakeLists.txt) whose SKIP_REGULAR_EXPRESSION
// turns that line into a "Skipped" result, never a pass.
#pragma once

#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include "asyncnd/detail/backend.h"
#include "experiments/chapter.h"

namespace asyncnd_test {

// GPUs served by a built-in backend (the registry's emulated device does not count); when there
// are none, `reason` says why.
inline int real_gpu_count(std::string* reason) {
  for (asyncnd::detail::Backend* b : asyncnd::detail::builtin_backends()) {
    if (b->kind() != asyncnd::DeviceKind::kGPU) continue;
    const int n = b->device_count();
    if (n == 0 && reason) *reason = b->name() + ": " + b->unavailable_reason();
    return n;
  }
  if (reason) *reason = "this build has no GPU backend (ASYNCND_WITH_CUDA=OFF, or no nvcc found)";
  return 0;
}

// Bytes the engine's stats count as in use on `device`.
inline std::uint64_t device_bytes_in_use(asyncnd::Device device) {
  for (const auto& d : asyncnd::engine().stats().devices)
    if (d.device == device) return d.bytes_in_use;
  return 0;
}

// Holds `device`'s engine worker with a host op until release() (or the end of the scope), so that
// ops pushed meanwhile queue up behind it. The destructor releases it and waits for the op.
class WorkerHold {
 public:
  explicit WorkerHold(asyncnd::Device device) : var_(asyncnd::engine().new_var()) {
    asyncnd::PushOptions on_device;
    on_device.device = device;
    on_device.name = "holds the worker";
    asyncnd::engine().push([this] { while (!released_.load()) std::this_thread::yield(); }, {},
                           {var_}, on_device);
  }
  ~WorkerHold() {
    release();
    try {
      asyncnd::engine().wait_to_read(var_);  // the op no longer reads released_
      asyncnd::engine().delete_var(var_);
    } catch (...) {
      // the op cannot fail; a test that broke the engine has failed its own checks
    }
  }
  WorkerHold(const WorkerHold&) = delete;
  WorkerHold& operator=(const WorkerHold&) = delete;
  void release() { released_ = true; }

 private:
  std::atomic<bool> released_{false};
  asyncnd::Var var_;
};

// The number of real GPUs, at least `needed`; or 0 after printing "SKIPPED: <reason>".
inline int gpus_or_skip(const char* test, int needed = 1) {
  std::string reason;
  const int n = real_gpu_count(&reason);
  if (n >= needed) return n;
  if (n > 0) reason = "needs " + std::to_string(needed) + " GPUs, found " + std::to_string(n);
  std::cout << "SKIPPED: " << test << ": " << reason << std::endl;
  WARN("SKIPPED: " << test << ": " << reason);
  return 0;
}

// The chapter's MLP (experiments/chapter.h, E6) trained for three small batches, reading the loss
// each batch (E6Mode::kSync), once on the CPU and once on `device`: the same seed gives the same parameters
// and batches there (Philox), so the losses agree up to the GEMMs' summation order. The network's
// parameters are made on `device` (Dense's deferred initialisation follows its input), and the
// device's peak bytes are counted there.
inline void check_mlp_on_device(asyncnd::Device device) {
  chapter::E6Config cfg;
  cfg.num_batches = 3;
  cfg.batch_size = 64;
  cfg.features = 32;
  const chapter::E6Result cpu = chapter::e6(chapter::E6Mode::kSync, cfg);
  cfg.device = device;
  const chapter::E6Result dev = chapter::e6(chapter::E6Mode::kSync, cfg);
  INFO("loss sum: cpu " << cpu.loss_sum << ", " << device.str() << " " << dev.loss_sum);
  CHECK(cpu.loss_sum > 0);
  CHECK(std::abs(dev.loss_sum - cpu.loss_sum) <= 1e-4 * std::abs(cpu.loss_sum));
  CHECK(std::abs(dev.final_loss - cpu.final_loss) <= 1e-4 * std::abs(cpu.final_loss) + 1e-7);
  CHECK(dev.device_peak_mb > 0);  // parameters, batches and activations lived on the device
  asyncnd::nn::DataIter it(1, 4, 3, device);
  asyncnd::nn::Batch b;
  REQUIRE(it.next(b));
  CHECK(b.X.device() == device);
  CHECK(b.y.device() == device);
}

}  // namespace asyncnd_test
