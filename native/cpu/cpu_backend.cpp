// The native CPU backend: aligned host allocation (through the caching allocator) and SGEMM
// (OpenBLAS, asyncnd's AVX-512 GEMM, or the portable GEMM of core/: gemm_select.h).
//
// Thread policy for BLAS. OpenBLAS (pthread build) runs its own thread pool, separate from the
// engine's workers; two engine workers each running a multi-threaded GEMM would put 2 x N BLAS
// threads on N cores. So:
//   - OpenBLAS gets every core this process may use: openblas_set_num_threads(
//     program_cpu_limit().cpus: the online CPUs, narrowed by the affinity mask and a cgroup's CPU
//     quota); or the value of the environment variable ASYNCND_BLAS_THREADS when it is set, else
//     the count a user set in OpenBLAS's own OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or
//     OMP_NUM_THREADS (openblas_threads_in_env). Read once, on first use.
//   - With more than one BLAS thread, GEMMs that OpenBLAS would split across threads run one at a
//     time (gemm_mutex_); smaller ones (see kOpenblasSingleThreadMnk) skip the mutex and run
//     concurrently, each on one thread.
//   - With ASYNCND_BLAS_THREADS=1 the mutex is never taken: each worker's GEMM runs on that
//     worker alone, in parallel with the others.
// Giving BLAS the machine was never slower and halved the time of a lone GEMM (the chapter's E1);
// the figures are in bench/README.md, "The BLAS thread policy".
//
// The thread policy above is OpenBLAS's. Our AVX-512 and AVX2 GEMMs run on threads of their own
// (gemm_threads.h), as many as OpenBLAS would get, shared by concurrent GEMMs; the portable GEMM
// splits its row blocks across the engine's workers with parallel_for.
//
// Which GEMM: gemm_select.h. ASYNCND_GEMM=auto (default) moves OpenBLAS off a pre-AVX2 kernel it
// fell back to on a CPU with AVX2/AVX-512 (to the best kernel that passes a self-test); on a CPU
// with AVX-512 it then runs asyncnd's AVX-512 GEMM (after its own self-test), unless OpenBLAS's
// kernel uses AVX-512 too and the GEMM has one thread; on a CPU with AVX2 where OpenBLAS stays on
// a pre-AVX2 kernel (a core the user set, or no better one passed), asyncnd's AVX2 GEMM. openblas
// never moves OpenBLAS; portable, avx512 and avx2 run ours.
#include "cpu/cpu_backend.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "asyncnd/detail/env.h"
#include "asyncnd/error.h"
#include "cpu/avx2_gemm.h"
#include "cpu/avx512_gemm.h"
#include "cpu/caching_allocator.h"
#include "cpu/gemm_select.h"
#include "cpu/gemm_threads.h"
#include "kernels/host_kernels.h"

#ifndef ASYNCND_HAVE_OPENBLAS
#error "the build defines ASYNCND_HAVE_OPENBLAS (0 or 1) on this target"
#endif
#if ASYNCND_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace asyncnd {
namespace detail {
namespace {

#if ASYNCND_HAVE_OPENBLAS
// OpenBLAS 0.3.21 (interface/gemm.c) runs a GEMM on one thread when m*n*k <= 65536 * 4
// (SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD). Such calls cannot oversubscribe the cores.
constexpr double kOpenblasSingleThreadMnk = 65536.0 * 4.0;
#endif

int blas_threads_from_env() {
  if (const char* s = std::getenv("ASYNCND_BLAS_THREADS")) {
    return static_cast<int>(parse_env_uint("ASYNCND_BLAS_THREADS", s, 1, 1024, "a count"));
  }
  // A user who set OpenBLAS's own count (OMP_NUM_THREADS=1 from torchrun or a job script) gets it,
  // as OpenBLAS would have given it had we not set one.
  if (const int n = openblas_threads_in_env()) return n;
  return program_cpu_limit().cpus;
}

#if ASYNCND_HAVE_OPENBLAS
// Exported by OpenBLAS's pthread and OpenMP builds (driver/others), but not part of its documented
// API: declared weak, so that a BLAS without them still links and we skip the adjustment.
extern "C" void openblas_read_env(void) __attribute__((weak));
extern "C" void blas_thread_shutdown_(void) __attribute__((weak));

// After each multi-threaded call, OpenBLAS's threads keep polling for more work for
// 2^OPENBLAS_THREAD_TIMEOUT cycles, 2^28 by default: about 0.1 s during which they compete with
// the engine's workers and waiters for the cores: a wait_to_read loop right after a dot then had
// to sleep most of the time, and 2^20 cycles cured most of it without changing GEMM throughput
// (bench/notes/constants.md, "OpenBLAS's idle polling"). So unless the user set it, we set 20
// (about 0.3 ms of polling) before OpenBLAS's pool restarts.
void shorten_blas_spin() {
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") || !openblas_read_env || !blas_thread_shutdown_) {
    return;
  }
  ::setenv("OPENBLAS_THREAD_TIMEOUT", "20", 0);
  openblas_read_env();      // OpenBLAS read its environment when it was loaded: again
  blas_thread_shutdown_();  // the next multi-threaded call starts the pool with the new timeout
}
#endif

// The core OpenBLAS runs now: select_openblas_gemm may have switched it from the one it loaded
// (the backend's name said the loaded one, a fallback no longer in use).
std::string openblas_core_now() {
#if ASYNCND_HAVE_OPENBLAS
  return openblas_get_corename();
#else
  return "";
#endif
}

#if ASYNCND_HAVE_OPENBLAS
// OpenBLAS at exit. Its library destructor (run by exit after the atexit handlers) frees its
// buffers and joins its threads, while engine workers go on with the ops still queued (the
// engine is never torn down: README, "Exit"). A GEMM inside cblas_sgemm then crashed the exit,
// or left it waiting for ever on OpenBLAS's threads: 12 runs of 12 with one BLAS thread and 8
// products of 512 x 512 queued when main returned. So an atexit handler, registered when the
// backend is made (before OpenBLAS's destructor runs, whatever the order of static objects),
// closes OpenBLAS: it waits for the calls in progress to return, and a GEMM that starts later
// runs on the portable GEMM instead. The two counters are a Dekker pair: each side writes its
// own, then reads the other's (sequentially consistent), so one at least sees the other.
std::atomic<int> g_blas_calls{0};
std::atomic<bool> g_blas_closed{false};

void close_blas_at_exit() {
  g_blas_closed.store(true);
  while (g_blas_calls.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Holds OpenBLAS open for one call, if it is not closed yet.
class BlasCall {
 public:
  BlasCall() : open_(true) {
    g_blas_calls.fetch_add(1);
    if (g_blas_closed.load()) {
      g_blas_calls.fetch_sub(1);
      open_ = false;
    }
  }
  ~BlasCall() {
    if (open_) g_blas_calls.fetch_sub(1);
  }
  BlasCall(const BlasCall&) = delete;
  BlasCall& operator=(const BlasCall&) = delete;
  bool open() const { return open_; }

 private:
  bool open_;
};
#endif

class CpuBackend final : public Backend {
 public:
  // The allocator is made here so that a bad ASYNCND_CPU_CACHE_MB fails the first use of the
  // backend, not some later allocation.
  // A bad ASYNCND_GEMM likewise.
  CpuBackend() : cache_(CachingAllocator::instance()) {
    const GemmChoice choice =
        gemm_choice_from_env(std::getenv("ASYNCND_GEMM"), ASYNCND_HAVE_OPENBLAS != 0);
    // Our GEMMs get the count asked for; OpenBLAS clamps it to its build's maximum (64 in
    // Debian's), which capped ours too when it was read back for them.
    const int wanted = blas_threads_from_env();
#if ASYNCND_HAVE_OPENBLAS
    std::atexit(close_blas_at_exit);
    shorten_blas_spin();
    openblas_set_num_threads(wanted);
#endif
    gemm_ = select_cpu_gemm(choice, std::getenv("OPENBLAS_CORETYPE"), cpu_features(), wanted);
    blas_threads_ = wanted;
    switch (gemm_.which) {
      case GemmKernel::kPortable:
        corename_ = "portable";
        name_ = "cpu (portable GEMM, " + gemm_.reason + ")";
        break;
      case GemmKernel::kAvx512:
      case GemmKernel::kAvx2:
        corename_ = gemm_.kernel;  // "avx512" or "avx2"
        // Its threads, made here before the first GEMM.
        name_ = "cpu (asyncnd " + corename_ + " GEMM, " +
                std::to_string(GemmThreads::instance(wanted).threads()) + " threads" +
                (gemm_.loaded_core.empty() ? std::string()
                                           : "; OpenBLAS core " + openblas_core_now() + " unused") +
                ")";
        break;
      case GemmKernel::kOpenblas:
#if ASYNCND_HAVE_OPENBLAS
        blas_threads_ = openblas_get_num_threads();  // clamped to its build's maximum
        corename_ = openblas_get_corename();
        name_ = "cpu (" + std::string(openblas_get_config()) + ", core " + corename_ + ", " +
                std::to_string(blas_threads_) + " BLAS threads)";
#endif
        break;
    }
  }

  DeviceKind kind() const override { return DeviceKind::kCPU; }
  std::string name() const override { return name_; }
  int device_count() const override { return 1; }

  // 64-byte aligned; a zero-size request still gets a unique block (see caching_allocator.h).
  void* alloc(int /*device_id*/, std::size_t bytes) override { return cache_.alloc(bytes); }

  void free(int /*device_id*/, void* p, std::size_t bytes) noexcept override {
    cache_.free(p, bytes);
  }

  // Every op's kernel: core's templated and SIMD loops, or the GEMM below. Runs on the calling
  // engine worker; the op finishes when it returns (a host-addressable backend: see backend.h).
  void launch(int /*device_id*/, const KernelCall& call, Completion /*done*/) override {
    if (call.kind != KernelCall::Kind::kGemm) return kernels::run_host_kernel(call);
    const KernelCall::Gemm& g = call.gemm;
    sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, call.a, g.lda, call.b, g.ldb, g.beta,
          call.out, g.ldc);
  }

  const std::string& corename() const { return corename_; }
  const GemmSelection& gemm() const { return gemm_; }
  int blas_threads() const { return blas_threads_; }

 private:
  void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
             float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             float beta, float* c, std::int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (gemm_.which == GemmKernel::kPortable) {
      portable_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
#if ASYNCND_HAVE_AVX512_GEMM
    if (gemm_.which == GemmKernel::kAvx512) {
      avx512_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
#endif
#if ASYNCND_HAVE_AVX2_GEMM
    if (gemm_.which == GemmKernel::kAvx2) {
      avx2_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
#endif
#if ASYNCND_HAVE_OPENBLAS
    // k == 0 only scales C, and cblas rejects the lda/ldb such a call may carry.
    if (k <= 0) {
      reference_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    constexpr std::int64_t kMax = std::numeric_limits<int>::max();  // blasint is 32-bit here
    if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax) {
      // Past the 32-bit interface: the portable GEMM, whose indices are 64-bit and which needs
      // no self-test (an error here failed a valid dot at run time, not even at the call).
      portable_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    const BlasCall call;
    if (!call.open()) {  // the process is exiting: see close_blas_at_exit
      portable_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    const bool threaded = static_cast<double>(m) * static_cast<double>(n) *
                              static_cast<double>(k) > kOpenblasSingleThreadMnk;
    std::unique_lock<std::mutex> lock(gemm_mutex_, std::defer_lock);
    if (blas_threads_ > 1 && threaded) lock.lock();
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
#endif
  }

  CachingAllocator& cache_;
  std::string name_, corename_;
  int blas_threads_ = 1;
  GemmSelection gemm_;
  std::mutex gemm_mutex_;  // held by the one multi-threaded GEMM running (see the policy above)
};

CpuBackend& instance() {
  // Leaked on purpose: engine workers may free arrays while static destructors run at exit.
  static CpuBackend* backend = new CpuBackend();
  return *backend;
}

}  // namespace

Backend& cpu_backend() { return instance(); }
std::string cpu_blas_corename() { return instance().corename(); }
int cpu_blas_threads() { return instance().blas_threads(); }
int cpu_gemm_threads_wanted() { return blas_threads_from_env(); }
std::size_t cpu_cached_bytes() { return CachingAllocator::instance().cached_bytes(); }
void set_cpu_cache_limit(std::size_t bytes) { CachingAllocator::instance().set_limit(bytes); }
std::size_t cpu_cache_limit() { return CachingAllocator::instance().limit(); }

}  // namespace detail

CpuGemm cpu_gemm() {
  const detail::GemmSelection& g = detail::instance().gemm();
  return {g.kernel, g.reason};
}

}  // namespace asyncnd
