// bench_gpu: the CUDA backend's figures, on a machine with an NVIDIA GPU.
//
// Usage: build/bench_gpu [out.json]   (default bench/results/gpu.json, found as bench_native finds
// its output). Without a GPU (or without the CUDA backend in the build) it prints
// "SKIPPED: <reason>", writes nothing and exits 0: no figure is ever made up.
//   sgemm_gpu_direct_gflops  4096x4096 SGEMM through cuBLAS directly (no engine): its own stream,
//                            one warm-up, 10 calls between two CUDA events
//   sgemm_gpu_engine_gflops  the same product as nd::dot on gpu(0) through the engine: 10 pushes,
//                            then nd::waitall, wall time (so the engine's push and completion
//                            costs are included)
//   e1_gpu_returned_s, e1_gpu_s   the chapter's E1 on gpu(0): 10 x (random_normal 1000x1000, dot):
//                            time for the loop to return, and until waitall returns
// Each figure is the median of 5 runs.
#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if ASYNCND_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda/cuda_backend.h"
#endif

#include "bench_util.h"
#include "experiments/chapter.h"

using namespace asyncnd;
using namespace asyncnd_bench;

namespace {

std::vector<std::pair<std::string, double>> g_figures;
void record(const std::string& key, double v, const char* what) {
  g_figures.emplace_back(key, v);
  std::printf("  %-26s %12.4f   %s\n", key.c_str(), v, what);
}

#if ASYNCND_HAVE_CUDA
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
    check(cudaMemset(a, 0, bytes), "cudaMemset");
    check(cudaMemset(b, 0, bytes), "cudaMemset");
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
  record("sgemm_gpu_direct_gflops", median(direct), "cuBLAS directly, n=4096");
  record("sgemm_gpu_engine_gflops", median(eng), "nd::dot through the engine, n=4096");
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
#endif

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path out = argc > 1 ? argv[1] : bench_dir() + "/results/gpu.json";
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
  try {
    bench_sgemm(gpu);
    bench_e1(gpu);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: stopped by an error: %s\n", e.what());
  }
  if (g_figures.empty()) return 1;
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
     << detail::cuda_backend().name() << "\", \"date\": \"" << date << "\"}\n}\n";
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  std::ofstream f(out);
  f << js.str();
  if (!f) {
    std::fprintf(stderr, "bench_gpu: cannot write %s\n", out.string().c_str());
    return 1;
  }
  std::printf("wrote %s\n", out.string().c_str());
  return 0;
#endif
}
