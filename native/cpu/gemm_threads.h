// The threads of asyncnd's own native GEMMs (avx512_gemm.h, avx2_gemm.h): the calling engine worker and
// threads - 1 helpers, as OpenBLAS keeps a pool of its own. The engine's default is one worker per
// core but one (the frontend keeps a core), so a GEMM split across the engine's workers would use
// one core of two; a GEMM, like OpenBLAS's, gets every core (ASYNCND_BLAS_THREADS sets how many
// for both). Not installed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace asyncnd {
namespace kernels {
namespace gemm {
struct Runner;  // kernels/gemm_driver.h
}  // namespace gemm
}  // namespace kernels
namespace detail {

class GemmThreads {
 public:
  // The process's pool, made on first use with `threads` threads (later values are ignored):
  // the CPU backend makes it with its BLAS thread count (cpu_backend.cpp's policy) before its
  // first GEMM; 0 means that policy's count (cpu_gemm_threads_wanted: ASYNCND_BLAS_THREADS, else
  // every CPU this process may use), so that a benchmark that calls our GEMM while the backend
  // runs OpenBLAS's times it on the same count.
  static GemmThreads& instance(int threads = 0);

  explicit GemmThreads(int threads);
  ~GemmThreads();  // stops and joins the helpers
  GemmThreads(const GemmThreads&) = delete;
  GemmThreads& operator=(const GemmThreads&) = delete;

  int threads() const { return static_cast<int>(helpers_.size()) + 1; }

  // Covers [0, n) with fn(begin, end) over at most 4 chunks per thread of at least `grain`, on
  // the calling thread and the helpers; returns when every chunk is done, rethrowing the first
  // exception a chunk threw. Concurrent calls (two engine workers each in a GEMM, as in the
  // backward pass of a layer) share the helpers: a helper takes chunks from the oldest job that
  // has some left, then from the next, so each GEMM's caller works on its own job and the
  // helpers go where chunks remain. (Until 2026-11-27 a call that found the helpers busy ran all
  // of its chunks alone: on 16 cores that made E6 with this GEMM 1.2x slower than with OpenBLAS,
  // though most of its products alone ran 1.4-1.8x as fast; bench/notes/gemm.md, "Our GEMM on 16
  // cores".)
  void parallel_for(std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& fn);

 private:
  struct Job;
  void helper_main();

  std::vector<std::thread> helpers_;
  std::mutex job_mu_;       // guards jobs_ (and the helpers' references to them)
  std::vector<Job*> jobs_;  // the jobs in progress, oldest first
  std::atomic<std::uint64_t> generation_{0};  // bumped with every job published
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

// The runner of our native GEMMs (avx512_gemm.h, avx2_gemm.h): the process's GemmThreads, or the
// calling thread alone when `serial` (their self-tests).
kernels::gemm::Runner gemm_threads_runner(bool serial);

}  // namespace detail
}  // namespace asyncnd
