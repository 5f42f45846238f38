// E5's loops (the chapter's tiny op, `y = x + 1` on a [1,2] array) on any device, for bench_gpu
// and bench_launch_model.
#pragma once

#include <asyncnd/asyncnd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace asyncnd_bench {

// E5's two loops on `device`, n steps of y = x + 1 on a [1,2] array after 1000 untimed: microseconds
// per step, the median of 5 runs, waiting after each step (sync) or once (async), and the
// asynchronous loop alone before its waitall (push). Throws asyncnd::Error for wrong values.
struct E5Steps {
  double sync_us, async_us, push_us;
};
inline E5Steps e5_steps(const asyncnd::Device device, int n) {
  using namespace asyncnd;
  const NDArray x = nd::ones({1, 2}, device);
  NDArray y;
  for (int i = 0; i < 1000; ++i) y = x + 1.0f;  // warm-up
  nd::waitall();
  std::vector<double> sync, async, push;
  for (int run = 0; run < 5; ++run) {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      y = x + 1.0f;
      y.wait_to_read();
    }
    sync.push_back(since(t0) / n * 1e6);
    t0 = Clock::now();
    for (int i = 0; i < n; ++i) y = x + 1.0f;
    push.push_back(since(t0) / n * 1e6);
    nd::waitall();
    async.push_back(since(t0) / n * 1e6);
  }
  if (y.to_vector() != std::vector<float>{2.0f, 2.0f})
    throw Error("E5 on " + device.str() + " gave wrong values");
  return {median(sync), median(async), median(push)};
}

// E5's asynchronous loop alone (push), n steps, while a host op holds gpu's engine worker, so
// that no kernel is launched while the loop runs: the frontend's own cost per step, allocation
// from the CUDA backend's cache included. Against gpu_e5_push_step_us (launches running beside
// the loop), it tells the frontend's cost from interference with the worker. Median of 5.
// The device's engine worker must be free to take the host op (nothing else queued on it).
inline double e5_push_worker_held(const asyncnd::Device gpu, int n) {
  using namespace asyncnd;
  const NDArray x = nd::ones({1, 2}, gpu);
  NDArray y;
  std::vector<double> push;
  for (int run = 0; run < 5; ++run) {
    nd::waitall();
    std::atomic<bool> release{false};
    Var blocker = engine().new_var();
    PushOptions on_gpu;
    on_gpu.device = gpu;
    on_gpu.name = "holds the GPU worker";
    engine().push([&release] { while (!release.load()) std::this_thread::yield(); }, {}, {blocker},
                  on_gpu);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) y = x + 1.0f;
    push.push_back(since(t0) / n * 1e6);
    release = true;
    nd::waitall();
    engine().delete_var(blocker);
  }
  if (y.to_vector() != std::vector<float>{2.0f, 2.0f})
    throw Error("E5 on " + gpu.str() + " with its worker held gave wrong values");
  return median(push);
}

}  // namespace asyncnd_bench
