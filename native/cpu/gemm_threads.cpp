// GemmThreads (gemm_threads.h). A job lives on the heap with a reference count, as the engine's
// parallel_for jobs do, so that a helper that wakes late holds a finished job, claims no chunk of
// it and never touches the caller's function. Helpers spin about 0.3 ms for the next job, then
// park: OpenBLAS's threads poll likewise, for the 2^20 cycles the CPU backend sets
// (OPENBLAS_THREAD_TIMEOUT), so consecutive GEMMs of a training step do not each pay a wake-up.
#include "cpu/gemm_threads.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "asyncnd/engine.h"
#include "cpu/cpu_backend.h"
#include "engine/sync.h"
#include "kernels/gemm_driver.h"

namespace asyncnd {
namespace detail {

struct GemmThreads::Job {
  const std::function<void(std::int64_t, std::int64_t)>* fn;
  std::int64_t n, chunk, nchunks;
  std::atomic<std::int64_t> next{0}, done{0};
  std::atomic<int> refs{1};
  std::mutex error_mu;
  std::exception_ptr error;

  void run_chunks() {
    for (;;) {
      const std::int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= nchunks) return;
      const std::int64_t b = c * chunk;
      try {
        (*fn)(b, std::min(n, b + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_mu);
        if (!error) error = std::current_exception();
      }
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  }
  void unref() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

GemmThreads& GemmThreads::instance(int threads) {
  // Leaked on purpose: GEMMs may run on engine workers while static destructors run at exit.
  static GemmThreads* pool = new GemmThreads(threads > 0 ? threads : cpu_gemm_threads_wanted());
  return *pool;
}

GemmThreads::GemmThreads(int threads) {
  for (int i = 1; i < threads; ++i) helpers_.emplace_back([this] { helper_main(); });
}

GemmThreads::~GemmThreads() {
  {
    std::lock_guard<std::mutex> lk(park_mu_);
    stop_.store(true, std::memory_order_seq_cst);
  }
  park_cv_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void GemmThreads::helper_main() {
  std::uint64_t seen = 0;
  for (;;) {
    auto fresh = [&] {
      return generation_.load(std::memory_order_seq_cst) != seen ||
             stop_.load(std::memory_order_seq_cst);
    };
    if (!spin_until(fresh, std::chrono::microseconds(300))) {
      std::unique_lock<std::mutex> lk(park_mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      park_cv_.wait(lk, fresh);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    }
    if (stop_.load(std::memory_order_seq_cst)) return;
    // Read before looking at the jobs: a job published after this bumps it again.
    seen = generation_.load(std::memory_order_seq_cst);
    for (;;) {  // chunks from the oldest job with some left, until none has any
      Job* job = nullptr;
      {
        std::lock_guard<std::mutex> lk(job_mu_);
        for (Job* j : jobs_) {
          if (j->next.load(std::memory_order_relaxed) < j->nchunks) {
            job = j;
            job->refs.fetch_add(1, std::memory_order_relaxed);
            break;
          }
        }
      }
      if (job == nullptr) break;
      job->run_chunks();
      job->unref();
    }
  }
}

void GemmThreads::parallel_for(std::int64_t n, std::int64_t grain,
                               const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(1, grain);
  const std::int64_t nchunks = std::min<std::int64_t>((n + grain - 1) / grain, 4 * threads());
  if (nchunks <= 1 || helpers_.empty()) {
    fn(0, n);
    return;
  }
  Job* job = new Job;
  job->fn = &fn;
  job->n = n;
  job->chunk = (n + nchunks - 1) / nchunks;
  job->nchunks = (n + job->chunk - 1) / job->chunk;
  {
    std::lock_guard<std::mutex> lk(job_mu_);
    jobs_.push_back(job);
  }
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lk(park_mu_);
    park_cv_.notify_all();
  }
  job->run_chunks();
  {
    std::lock_guard<std::mutex> lk(job_mu_);
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
  }
  // Chunks the helpers took may still run: fn lives on our caller's stack until they are done.
  while (job->done.load(std::memory_order_acquire) < job->nchunks) {
    cpu_relax();
    std::this_thread::yield();
  }
  std::exception_ptr error = std::move(job->error);
  job->unref();
  if (error) std::rethrow_exception(error);
}

kernels::gemm::Runner gemm_threads_runner(bool serial) {
  kernels::gemm::Runner runner;  // serial: the calling thread alone
  if (!serial) {
    runner.threads = GemmThreads::instance().threads();
    runner.parallel_for = [](std::int64_t count, std::int64_t grain,
                             const std::function<void(std::int64_t, std::int64_t)>& fn) {
      GemmThreads::instance().parallel_for(count, grain, fn);
    };
  }
  return runner;
}

}  // namespace detail
}  // namespace asyncnd
