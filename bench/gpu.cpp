// bench_gpu: the CUDA backend's figures, on a machine with an NVIDIA GPU.
//
// Usage: build/bench_gpu [out.json]   (default bench/results/gpu.json, found as bench_native finds
// its output; the profiler's trace of the copy/compute overlap goes beside it, as gpu_trace.json).
// Without a GPU (or without the CUDA backend in the build) it prints "SKIPPED: <reason>", writes
// nothing and exits 0: no figure is ever made up. Figures, each the median of 5 runs unless said:
//   sgemm4096_gpu_direct_gflops   4096x4096 SGEMM through cuBLAS directly (no engine): its own
//                                 stream, one warm-up, 10 calls between two CUDA events
//   sgemm4096_gpu_engine_gflops   the same product as nd::dot on gpu(0) through the engine: 10
//                                 pushes, then nd::waitall, wall time (so the engine's push and
//                                 completion costs are included); goal >= 0.95 x direct
//   e1_gpu_returned_s, e1_gpu_s   the chapter's E1 on gpu(0): 10 x (random_normal 1000x1000, dot):
//                                 time for the loop to return, and until waitall returns
//   gpu_e5_sync_step_us, gpu_e5_async_step_us   E5 on gpu(0): 10 000 x `y = x + 1` on a [1,2]
//                                 array, wait_to_read after each step or waitall once; per step
//                                 (gpu_e5_push_step_us: the asynchronous loop before its waitall)
//   gpu_e5_worker_op_us, gpu_e5_op_interval_us   2000 asynchronous steps profiled: the GPU
//                                 worker's time in one op, and from one op's start to the next's
//   gpu_batching                  1 when small calls may be held in the figures above and below
//                                 (ASYNCND_CUDA_BATCH unset or 1, the default), else 0
//   gpu_e5_driver_allocs_per_step cudaMalloc calls per E5 step in those loops (the allocator's
//                                 cache missed); gpu_e5_lock_waits_per_step: times per step the
//                                 frontend or the worker found the allocator's lock taken
//   gpu_e5_unheld_*               the E5 loops again in the other mode: each call launched
//                                 (gpu_e5_held_* instead where ASYNCND_CUDA_BATCH=0 made that the
//                                 default); gpu_e5_held_calls_per_launch: calls per batch launched
//                                 in the loops that may hold
//   gpu_e5_push_worker_held_us    the asynchronous loop alone while a host op holds the GPU's
//                                 engine worker (no kernel launched meanwhile): the frontend's own
//                                 cost per step
//   cpu_e5_sync_step_us, cpu_e5_async_step_us   the same E5 loops on the CPU device, same run
//   gpu_launch_sync_floor_us, gpu_launch_floor_us   the floor of the same loops on this machine:
//                                 10 000 bare launches of a tiny kernel from one thread, no
//                                 engine, with a stream sync after each or once
//   gpu_batch1_launch_*, gpu_batch48_launch_*       the same floors for a batch of one call in
//                                 the held calls' batch kernel, its parameter with room for 1 call
//                                 and for 48 (cuda_kernels.h, run_tiny_batch)
//   torch_cuda_e5_*, torch_cuda_e6_sync_s       the same in PyTorch's CUDA eager
//                                 (`python3 bench/torch_peer.py --cuda`; ASYNCND_PYTHON names
//                                 another Python); omitted, saying why, where it does not run
//   gpu_copy_overlap_share        a host-to-device copy of the next batch (16 MB) queued behind
//                                 four 4096^3 GEMMs, 5 times: the share of the copy's device time
//                                 (the copy stream's spans in the profiler's trace) during which
//                                 the compute stream ran a GEMM; gpu_copy_ms, gpu_copy_gbps: the
//                                 copy's device time, median
//   gpu_e6_<mode>_s, gpu_e6_<mode>_peak_mb       E6 (the chapter's MLP, 100 batches) on gpu(0) in
//                                 three modes (sync: reading the loss each batch; nosync: never
//                                 reading, no byte bound; default: never reading, the engine's
//                                 default bound): total time, once each, and the engine's peak
//                                 bytes on gpu(0)
#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if ASYNCND_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#endif

#include "bench_util.h"
#include "e5_loops.h"
#include "experiments/chapter.h"

using namespace asyncnd;
using namespace asyncnd_bench;

namespace {

#if ASYNCND_HAVE_CUDA
std::vector<std::pair<std::string, double>> g_figures;
void record(const std::string& key, double v, const char* what) {
  g_figures.emplace_back(key, v);
  std::printf("  %-26s %12.4f   %s\n", key.c_str(), v, what);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
  }
}
void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cublas: ") + what + ": " + cublasGetStatusName(s) + ": " +
                cublasGetStatusString(s));
  }
}

// Seconds per cuBLAS SGEMM of two n x n matrices on `device`, called directly on a stream of its
// own (no engine): one warm-up call, then `reps` calls and one synchronisation. Blocking. Throws
// asyncnd::Error (CUDA or cuBLAS error).
double direct_sgemm_seconds(int device, std::int64_t n, int reps) {
  check(cudaSetDevice(device), "cudaSetDevice");
  const std::size_t bytes = static_cast<std::size_t>(n * n) * sizeof(float);
  float *a = nullptr, *b = nullptr, *c = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t h = nullptr;
  cudaEvent_t t0 = nullptr, t1 = nullptr;
  auto cleanup = [&] {
    if (h) cublasDestroy(h);
    if (stream) cudaStreamDestroy(stream);
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
  };
  try {
    check(cudaMalloc(&a, bytes), "cudaMalloc");
    check(cudaMalloc(&b, bytes), "cudaMalloc");
    check(cudaMalloc(&c, bytes), "cudaMalloc");
    // N(0, 1) like the engine's operands (a GEMM's power draw, and so its clock, depends on the
    // data; zeros ran cooler), copied and synchronised before the GEMMs' non-blocking stream,
    // which nothing else orders against these copies.
    {
      std::mt19937 gen(42);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> host(static_cast<std::size_t>(n) * static_cast<std::size_t>(n));
      for (float& v : host) v = normal(gen);
      check(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      for (float& v : host) v = normal(gen);
      check(cudaMemcpy(b, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&t0), "cudaEventCreate");
    check(cudaEventCreate(&t1), "cudaEventCreate");
    check_blas(cublasCreate(&h), "cublasCreate");
    check_blas(cublasSetStream(h, stream), "cublasSetStream");
    check_blas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    const int ni = static_cast<int>(n);
    const float one = 1.0f, zero = 0.0f;
    for (int r = -1; r < reps; ++r) {  // r == -1: warm-up
      if (r == 0) check(cudaEventRecord(t0, stream), "cudaEventRecord");
      check_blas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, b, ni, a, ni, &zero,
                             c, ni),
                 "cublasSgemm");
    }
    check(cudaEventRecord(t1, stream), "cudaEventRecord");
    check(cudaEventSynchronize(t1), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
    cleanup();
    return static_cast<double>(ms) / 1000.0 / (reps > 0 ? reps : 1);
  } catch (...) {
    cleanup();
    throw;
  }
}

void bench_sgemm(const Device gpu) {
  const std::int64_t n = 4096;
  const int reps = 10;
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  std::vector<double> direct, eng;
  const NDArray a = nd::random_normal({n, n}, 0, 1, gpu), b = nd::random_normal({n, n}, 0, 1, gpu);
  nd::dot(a, b).wait_to_read();  // warm-up
  for (int run = 0; run < 5; ++run) {
    direct.push_back(flops / direct_sgemm_seconds(gpu.id, n, reps) / 1e9);
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) nd::dot(a, b);
    nd::waitall();
    eng.push_back(flops * reps / since(t0) / 1e9);
  }
  record("sgemm4096_gpu_direct_gflops", median(direct), "cuBLAS directly, n=4096");
  record("sgemm4096_gpu_engine_gflops", median(eng), "nd::dot through the engine, n=4096");
  record("sgemm4096_gpu_engine_over_direct", median(eng) / median(direct), "goal >= 0.95");
}

// The chapter's E1 loop (experiments/chapter.h) on the GPU, once to warm up, then 5 times.
void bench_e1(const Device gpu) {
  chapter::e1_loop(10, 1000, gpu, false);
  nd::waitall();
  std::vector<double> ret, fin;
  for (int run = 0; run < 5; ++run) {
    const chapter::QueueTiming t = chapter::e1_async(10, 1000, gpu);
    ret.push_back(t.returned_s);
    fin.push_back(t.finished_s);
  }
  record("e1_gpu_returned_s", median(ret), "E1 on the GPU: the loop returned (only queued)");
  record("e1_gpu_s", median(fin), "E1 on the GPU: waitall returned");
}

// E5's three figures on the GPU under `prefix` (gpu_e5_ or gpu_e5_held_), `how` in their comments.
void record_e5(const std::string& prefix, const E5Steps& e, const std::string& how) {
  const std::string sync = "E5 on the GPU" + how + ", wait_to_read each step, per step";
  const std::string async = "E5 on the GPU" + how + ", waitall once, per step";
  record(prefix + "sync_step_us", e.sync_us, sync.c_str());
  record(prefix + "async_step_us", e.async_us, async.c_str());
  record(prefix + "push_step_us", e.push_us, "  of which the loop itself (before waitall)");
}

// E5 on the GPU: the chapter's tiny op, waiting for the GPU after each step or once.
void bench_e5(const Device gpu) {
  const int n = 10000;
  const double steps = 1000.0 + 5 * 2 * n;  // e5_steps: warm-up, then 5 x (sync, async)
  const bool held_default = detail::cuda_batching();
  record("gpu_batching", held_default ? 1 : 0,
         "ASYNCND_CUDA_BATCH: small calls may be held (1, the default) or not");
  const detail::CudaAllocCounts a0 = detail::cuda_alloc_counts(gpu.id);
  const detail::CudaHeldCounts h0 = detail::cuda_held_counts(gpu.id);
  const E5Steps g = e5_steps(gpu, n);
  const detail::CudaHeldCounts h1 = detail::cuda_held_counts(gpu.id);
  const detail::CudaAllocCounts a1 = detail::cuda_alloc_counts(gpu.id);
  record_e5("gpu_e5_", g, "");
  record("gpu_e5_driver_allocs_per_step",
         static_cast<double>(a1.driver_allocs - a0.driver_allocs) / steps,
         "  cudaMalloc calls per step (allocations the cache could not serve)");
  record("gpu_e5_lock_waits_per_step", static_cast<double>(a1.lock_waits - a0.lock_waits) / steps,
         "  times per step a thread found the CUDA allocator's lock taken");
  // The same in the other mode (cuda_backend.cpp, "Held calls").
  auto held_per_launch = [](const detail::CudaHeldCounts& b, const detail::CudaHeldCounts& e) {
    record("gpu_e5_held_calls_per_launch",
           static_cast<double>(e.calls - b.calls) /
               static_cast<double>(e.batches > b.batches ? e.batches - b.batches : 1),
           "  calls started per batch launch, in the loops that may hold");
  };
  if (held_default) held_per_launch(h0, h1);
  detail::cuda_set_batching(!held_default);
  try {
    const detail::CudaHeldCounts o0 = detail::cuda_held_counts(gpu.id);
    const E5Steps o = e5_steps(gpu, n);
    const detail::CudaHeldCounts o1 = detail::cuda_held_counts(gpu.id);
    if (held_default) {
      record_e5("gpu_e5_unheld_", o, ", each call launched (ASYNCND_CUDA_BATCH=0)");
    } else {
      record_e5("gpu_e5_held_", o, ", small calls may be held");
      held_per_launch(o0, o1);
    }
  } catch (...) {
    detail::cuda_set_batching(held_default);
    throw;
  }
  detail::cuda_set_batching(held_default);
  record("gpu_e5_push_worker_held_us", e5_push_worker_held(gpu, n),
         "  the loop alone while a host op holds the GPU worker (no launch meanwhile)");
  // This machine's floor for the same loops: one kernel launch per step, no engine.
  // Then the same with the launch a batch of one held call gets, in the batch kernel whose
  // parameter has room for 1 call (what run_tiny_batch picks) and for 48 (a whole batch's room).
  for (const int room : {0, 1, 48}) {  // 48: kTinyBatchMax (native/cuda/cuda_kernels.h)
    std::vector<double> floor_sync, floor_async;
    for (int run = 0; run < 5; ++run) {
      floor_sync.push_back(detail::cuda_tiny_launch_us(gpu.id, n, true, room));
      floor_async.push_back(detail::cuda_tiny_launch_us(gpu.id, n, false, room));
    }
    const std::string r = std::to_string(room);
    const std::string key = room == 0 ? "gpu_launch" : "gpu_batch" + r + "_launch";
    const std::string what = room == 0 ? "a bare kernel launch"
                                       : "a batch kernel launch (room for " + r + " call" +
                                             (room == 1 ? ")" : "s)");
    record(key + "_sync_floor_us", median(floor_sync),
           ("floor: " + what + " + stream sync per step, no engine").c_str());
    record(key + "_floor_us", median(floor_async),
           ("floor: " + what + " per step, no engine").c_str());
  }

  // Where an asynchronous step goes: 2000 steps with the profiler on (its device-side timing off,
  // which would add events): the GPU worker's time in each op (dispatch, launch, completion) and
  // the time from one op's start to the next's.
  const NDArray x = nd::ones({1, 2}, gpu);
  NDArray y;
  Engine& eng = engine();
  eng.start_profiling();
  detail::cuda_backend().set_device_timing(false);
  for (int i = 0; i < 2000; ++i) y = x + 1.0f;
  nd::waitall();
  eng.stop_profiling();
  std::vector<double> in_op, starts;
  for (const ProfileEvent& e : eng.profile_events()) {
    if (!e.lane.empty() || e.device != gpu || e.writes.empty()) continue;
    in_op.push_back(e.end_us - e.start_us);
    starts.push_back(e.start_us);
  }
  std::sort(starts.begin(), starts.end());
  std::vector<double> gaps;
  for (std::size_t i = 1; i < starts.size(); ++i) gaps.push_back(starts[i] - starts[i - 1]);
  record("gpu_e5_worker_op_us", median(in_op), "  the GPU worker's time in one op (profiled)");
  record("gpu_e5_op_interval_us", median(gaps), "  from one op's start to the next's (profiled)");

  // The same loops on the CPU device, in the same run: the engine's own cost on this machine.
  const E5Steps c = e5_steps(Device::cpu(), n);
  record("cpu_e5_sync_step_us", c.sync_us, "E5 on the CPU, same run: wait_to_read each step");
  record("cpu_e5_async_step_us", c.async_us, "E5 on the CPU, same run: waitall once");
}

// The peer: PyTorch's CUDA eager on the same GPU (bench/torch_peer.py --cuda).
void bench_torch_cuda() {
  const char* py = std::getenv("ASYNCND_PYTHON");
  const std::string cmd = std::string(py && *py ? py : "python3") + " '" + bench_dir() +
                          "/torch_peer.py' --cuda 2>&1";
  const PeerRun run = run_peer(cmd, "torch_cuda_");
  for (const std::string& c : run.comments) std::printf("  %s\n", c.c_str());
  for (const auto& [key, v] : run.figures)
    record(key, v, key == "torch_cuda_e6_sync_s" ? "PyTorch CUDA eager, the chapter's MLP, sync"
                                                 : "PyTorch CUDA eager, per step");
  if (run.status != 0 || run.figures.size() != 3)
    std::fprintf(stderr, "bench_gpu: the PyTorch CUDA peer did not run (%s); torch_cuda_* "
                         "omitted:\n%s\n", cmd.c_str(), run.output.c_str());
}

// Copy/compute overlap, from the profiler's device-side spans: four 4096^3 GEMMs queued, then the
// next batch copied in from the host, 5 times after a warm-up round. Writes the trace to `trace`.
void bench_overlap(const Device gpu, const std::filesystem::path& trace) {
  const std::int64_t n = 4096;
  const NDArray w = nd::random_normal({n, n}, 0, 1, gpu);
  const NDArray batch = nd::random_normal({1024, 4096});  // 16 MB on the host
  NDArray p, next;
  auto round = [&] {
    p = w;
    for (int i = 0; i < 4; ++i) p = nd::dot(p, w);
    next = batch.copy_to(gpu);
  };
  round();
  nd::waitall();
  Engine& eng = engine();
  eng.start_profiling();
  for (int r = 0; r < 5; ++r) round();
  nd::waitall();
  const std::string json = eng.stop_profiling();
  std::vector<std::pair<double, double>> gemms, copies;
  for (const ProfileEvent& e : eng.profile_events()) {
    if (e.lane == "compute stream" && e.name.rfind("gemm", 0) == 0)
      gemms.emplace_back(e.start_us, e.end_us);
    if (e.lane == "copy stream" && e.name.find("cpu(0)->gpu") != std::string::npos)
      copies.emplace_back(e.start_us, e.end_us);
  }
  if (copies.size() != 5 || gemms.size() != 20)
    throw Error("bench_gpu: overlap: expected 5 copy and 20 GEMM spans in the profile, got " +
                std::to_string(copies.size()) + " and " + std::to_string(gemms.size()));
  // GEMMs run in order on one stream, so their spans do not overlap each other.
  double copy_total = 0, overlapped = 0;
  std::vector<double> copy_ms;
  for (const auto& [c0, c1] : copies) {
    copy_total += c1 - c0;
    copy_ms.push_back((c1 - c0) / 1e3);
    for (const auto& [g0, g1] : gemms)
      overlapped += std::max(0.0, std::min(c1, g1) - std::max(c0, g0));
  }
  record("gpu_copy_overlap_share", copy_total > 0 ? overlapped / copy_total : 0.0,
         "share of the copies' device time under a GEMM");
  record("gpu_copy_ms", median(copy_ms), "host-to-device copy of 16 MB, device time");
  record("gpu_copy_gbps", 16.777216 / median(copy_ms), "its bandwidth, GB/s");
  std::ofstream f(trace);
  f << json;
  std::printf("  (trace: %s; open it in https://ui.perfetto.dev)\n", trace.string().c_str());
}

// E6 on the GPU: the chapter's MLP, three modes, with the engine's peak bytes on gpu(0).
void bench_e6(const Device gpu) {
  chapter::E6Config cfg;
  cfg.device = gpu;
  for (const chapter::E6Mode mode :
       {chapter::E6Mode::kSync, chapter::E6Mode::kNoSync, chapter::E6Mode::kDefault}) {
    const chapter::E6Result r = chapter::e6(mode, cfg);
    const std::string key = std::string("gpu_e6_") + chapter::e6_mode_name(mode);
    record(key + "_s", r.total_s, "E6 on the GPU: first batch .. waitall");
    record(key + "_frontend_s", r.frontend_s, "E6 on the GPU: the loop returned");
    record(key + "_peak_mb", r.device_peak_mb, "engine peak bytes on gpu(0), MB");
    std::printf("  %-8s final loss %.6f, %llu pushes waited, bound %.0f MB (%s)\n",
                chapter::e6_mode_name(mode), r.final_loss,
                static_cast<unsigned long long>(r.push_waits), r.bound_mb, r.bound_source);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const BenchArgs args = parse_bench_args(
      argc, argv, "bench_gpu [OUT.json]  (default: bench/results/gpu.json)");
  const std::filesystem::path out =
      args.plain.empty() ? bench_dir() + "/results/gpu.json" : args.plain[0];
#if !ASYNCND_HAVE_CUDA
  (void)out;
  std::printf("bench_gpu: SKIPPED: this build has no CUDA backend (ASYNCND_WITH_CUDA=OFF, or no "
              "nvcc found at configure time); nothing written\n");
  return 0;
#else
  const Device gpu = Device::gpu(0);
  std::string device;
  try {
    device = detail::cuda_device_name(0);
  } catch (const Error& e) {
    std::printf("bench_gpu: SKIPPED: no GPU to measure (%s); nothing written\n", e.what());
    return 0;
  }
  std::printf("bench_gpu: gpu(0) = %s, %s\n", device.c_str(), detail::cuda_backend().name().c_str());
  // Each part on its own: one that fails says why, and the others still give their figures.
  const std::filesystem::path trace = out.parent_path() / "gpu_trace.json";
  const std::vector<std::pair<const char*, std::function<void()>>> parts = {
      {"sgemm", [&] { bench_sgemm(gpu); }},
      {"E1", [&] { bench_e1(gpu); }},
      {"E5", [&] { bench_e5(gpu); }},
      {"PyTorch CUDA", [&] { bench_torch_cuda(); }},
      {"overlap", [&] { bench_overlap(gpu, trace); }},
      {"E6", [&] { bench_e6(gpu); }},
  };
  int failed = 0;
  for (const auto& [name, run] : parts) {
    std::printf("%s\n", name);
    try {
      run();
      nd::waitall();
    } catch (const std::exception& e) {
      ++failed;
      std::fprintf(stderr, "bench_gpu: %s stopped by an error: %s\n", name, e.what());
    }
  }
  if (g_figures.empty()) return 1;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ostringstream js;
  js << "{\n";
  for (const auto& f : g_figures) {
    char num[64];
    std::snprintf(num, sizeof num, "%.6g", f.second);
    js << "  \"" << f.first << "\": " << num << ",\n";
  }
  js << "  \"machine\": {\"gpu\": \"" << device << "\", \"backend\": \""
     << detail::cuda_backend().name() << "\", \"cuda_driver\": \"" << driver / 1000 << "."
     << driver % 1000 / 10 << "\", \"cuda_runtime\": \"" << runtime / 1000 << "."
     << runtime % 1000 / 10 << "\", \"cpu\": \"" << cpu_model() << "\", \"cpu_threads\": "
     << std::thread::hardware_concurrency() << ", \"date\": \"" << date << "\"}\n}\n";
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  std::ofstream f(out);
  f << js.str();
  if (!f) {
    std::fprintf(stderr, "bench_gpu: cannot write %s\n", out.string().c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.string().c_str());
  return failed ? 1 : 0;
#endif
}
