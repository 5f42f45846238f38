// Our own GEMMs against detail::reference_sgemm: detail::portable_sgemm (the packed SIMD GEMM,
// 4x8 tile), on a CPU with AVX-512 detail::avx512_sgemm (12x32 tile), and on a CPU with AVX2 and
// FMA detail::avx2_sgemm (6x16 tile): every transpose
// combination, edge sizes around the tiles and the KC/MC blocks, padded strides, alpha/beta
// variants (beta = 0 over a NaN-filled C), run serially, on 1, 2 and 4 workers and from inside ops,
// and with each matrix ending where an unmapped page begins.
#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "asyncnd/detail/backend.h"
#include "cpu/avx2_gemm.h"
#include "cpu/avx512_gemm.h"
#include "cpu/gemm_select.h"
#include "cpu/gemm_threads.h"
#include "ops_test_util.h"
#include "test_util.h"

using namespace asyncnd;
using asyncnd_test::EngineConfigGuard;

namespace {

using GemmFn = void (*)(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                        std::int64_t, const float*, std::int64_t, float, float*, std::int64_t);
struct Gemm {
  const char* name;
  GemmFn fn;
};

#if ASYNCND_HAVE_AVX512_GEMM || ASYNCND_HAVE_AVX2_GEMM
// Our native GEMMs (avx512_sgemm, avx2_sgemm) as a GemmFn: on their threads, or on the calling
// thread alone as the backend's self-test runs them.
template <void (*Fn)(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                     std::int64_t, const float*, std::int64_t, float, float*, std::int64_t, bool),
          bool Serial>
void native(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
            const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
            std::int64_t ldc) {
  Fn(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, Serial);
}
#endif

// The GEMMs this CPU can run: the portable one always; the AVX-512 one (parallel, and serial as
// the backend's self-test runs it) where the CPU has AVX-512, the AVX2 one where it has AVX2 and
// FMA (else a SKIPPED warning for each).
std::vector<Gemm> our_gemms() {
  std::vector<Gemm> out = {{"portable", detail::portable_sgemm}};
  const detail::CpuFeatures cpu = detail::cpu_features();
#if ASYNCND_HAVE_AVX512_GEMM
  if (cpu.avx512) {
    out.push_back({"avx512", native<detail::avx512_sgemm, false>});
    out.push_back({"avx512 serial", native<detail::avx512_sgemm, true>});
  }
#endif
#if ASYNCND_HAVE_AVX2_GEMM
  if (cpu.avx2 && cpu.fma) {
    out.push_back({"avx2", native<detail::avx2_sgemm, false>});
    out.push_back({"avx2 serial", native<detail::avx2_sgemm, true>});
  }
#endif
  if (!ASYNCND_HAVE_AVX512_GEMM || !cpu.avx512) {
    WARN("SKIPPED for avx512_sgemm: this CPU (or build) has no AVX-512 (F, BW, VL and DQ)");
  }
  if (!ASYNCND_HAVE_AVX2_GEMM || !cpu.avx2 || !cpu.fma) {
    WARN("SKIPPED for avx2_sgemm: this CPU (or build) has no AVX2 with FMA");
  }
  return out;
}

struct Case {
  bool ta, tb;
  std::int64_t m, n, k, pad;  // pad: extra columns in lda, ldb and ldc
  float alpha, beta;
};

std::string describe(const Case& g) {
  std::ostringstream s;
  s << "ta=" << g.ta << " tb=" << g.tb << " m=" << g.m << " n=" << g.n << " k=" << g.k
    << " pad=" << g.pad << " alpha=" << g.alpha << " beta=" << g.beta;
  return s.str();
}

// How far our GEMMs may land from reference_sgemm on inputs in [-1, 1]: each element sums k
// products of magnitude <= |alpha|; both results round differently (blocking order), by at most a
// few ulps of k per element.
double gemm_tolerance(std::int64_t k, float alpha, float beta) {
  return 1e-6 * static_cast<double>(k + 2) * (std::fabs(alpha) + std::fabs(beta) + 1);
}

// Runs both GEMMs on the same random inputs and compares C; the padding columns of C must keep
// their values (bit for bit), and beta == 0 must ignore the NaNs C starts with.
void check_case(const Gemm& gemm, const Case& g, std::mt19937_64& rng) {
  INFO(gemm.name << ": " << describe(g));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::int64_t a_cols = g.ta ? g.m : g.k, a_rows = g.ta ? g.k : g.m;
  const std::int64_t b_cols = g.tb ? g.k : g.n, b_rows = g.tb ? g.n : g.k;
  const std::int64_t lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
  std::vector<float> a(static_cast<std::size_t>(std::max<std::int64_t>(1, a_rows * lda)));
  std::vector<float> b(static_cast<std::size_t>(std::max<std::int64_t>(1, b_rows * ldb)));
  std::vector<float> c(static_cast<std::size_t>(g.m * ldc));
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (std::int64_t i = 0; i < g.m; ++i)
    for (std::int64_t j = 0; j < ldc; ++j)
      c[i * ldc + j] = (g.beta == 0.0f && j < g.n) ? std::numeric_limits<float>::quiet_NaN()
                                                   : dist(rng);
  std::vector<float> want = c;
  detail::reference_sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a.data(), lda, b.data(), ldb,
                          g.beta, want.data(), ldc);
  gemm.fn(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a.data(), lda, b.data(), ldb, g.beta, c.data(), ldc);
  const double tol = gemm_tolerance(g.k, g.alpha, g.beta);
  int bad = 0;
  for (std::int64_t i = 0; i < g.m && bad < 5; ++i) {
    for (std::int64_t j = 0; j < ldc && bad < 5; ++j) {
      const float got = c[i * ldc + j], exp = want[i * ldc + j];
      if (j >= g.n) {
        if (std::memcmp(&got, &exp, sizeof got) != 0) {
          ++bad;
          FAIL_CHECK("padding C[" << i << "," << j << "] changed to " << got);
        }
      } else if (!(std::fabs(got - exp) <= tol)) {  // also fails on NaN
        ++bad;
        FAIL_CHECK("C[" << i << "," << j << "] = " << got << ", reference " << exp
                        << ", tolerance " << tol);
      }
    }
  }
}

// Edge sizes: around the micro-tiles (4 x 8, 12 x 32), the packed blocks (KC = 512 and 384, MC =
// 96 and 144), the small-matrix path and the thin one (m < 4), each with all four transpose
// combinations.
std::vector<Case> fixed_cases() {
  const std::int64_t shapes[][3] = {
      {1, 1, 1},     {1, 1, 7},     {3, 5, 2},      {4, 8, 1},      {5, 9, 3},
      {32, 32, 32},  {33, 32, 32},  {1, 1000, 70},  {1000, 1, 70},  {1, 70, 1000},
      {4, 8, 512},   {4, 8, 1025},  {5, 7, 513},    {96, 8, 40},    {97, 9, 41},
      {95, 17, 255}, {191, 33, 9},  {13, 301, 31},  {200, 64, 300}, {63, 127, 129},
      {257, 100, 3}, {7, 500, 20},  {128, 128, 128}, {2, 300, 200}, {3, 77, 513},
      {1, 4099, 9},  {12, 32, 384}, {13, 33, 385}, {11, 31, 383}, {144, 64, 768},
      {145, 65, 400}, {6, 40, 50},  {289, 97, 45}};
  const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, 0.0f}, {1.5f, -1.0f}};
  std::vector<Case> cases;
  int v = 0;
  for (const auto& s : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const auto& [alpha, beta] = ab[v % 5];
        cases.push_back({ta, tb, s[0], s[1], s[2], (v % 3 == 0) ? 0 : v % 3 + 2, alpha, beta});
        ++v;
      }
    }
  }
  return cases;
}

std::vector<Case> random_cases(std::mt19937_64& rng, int count) {
  std::vector<Case> cases;
  const float alphas[] = {1.0f, -1.0f, 0.5f, 3.0f};
  const float betas[] = {0.0f, 1.0f, -0.75f, 2.0f};
  for (int i = 0; i < count; ++i) {
    auto dim = [&](std::int64_t hi) { return 1 + static_cast<std::int64_t>(rng() % hi); };
    cases.push_back({rng() % 2 == 0, rng() % 2 == 0, dim(150), dim(150), dim(300),
                     static_cast<std::int64_t>(rng() % 4), alphas[rng() % 4], betas[rng() % 4]});
  }
  return cases;
}

}  // namespace

TEST_CASE("our GEMMs match reference_sgemm at edge sizes on 1 2 and 4 workers",
          "[gemm][portable]") {
  EngineConfigGuard restore;
  std::mt19937_64 rng(asyncnd_test::test_seed("portable_sgemm edge sizes"));
  const auto cases = fixed_cases();
  for (const Gemm& gemm : our_gemms()) {
    for (int workers : {1, 2, 4}) {
      configure_engine({EngineKind::kThreaded, workers});
      INFO("workers " << workers);
      for (const Case& g : cases) check_case(gemm, g, rng);
    }
    configure_engine({EngineKind::kNaive});
    INFO("naive engine");
    for (const Case& g : cases) check_case(gemm, g, rng);
  }
}

TEST_CASE("our GEMMs match reference_sgemm on random shapes", "[gemm][portable]") {
  EngineConfigGuard restore;
  std::mt19937_64 rng(asyncnd_test::test_seed("portable_sgemm random shapes"));
  const int count = static_cast<int>(asyncnd_test::scaled(60, 6));
  for (const Gemm& gemm : our_gemms()) {
    for (int workers : {1, 2}) {
      configure_engine({EngineKind::kThreaded, workers});
      INFO("workers " << workers);
      for (const Case& g : random_cases(rng, count)) check_case(gemm, g, rng);
    }
  }
}

TEST_CASE("our GEMMs: k = 0 and alpha = 0 only scale C", "[gemm][portable]") {
  std::mt19937_64 rng(asyncnd_test::test_seed("portable_sgemm k=0"));
  for (const Gemm& gemm : our_gemms()) {
    for (float beta : {0.0f, 1.0f, -2.0f}) {
      for (float alpha : {0.0f, 1.0f}) {
        for (std::int64_t k : {0, 300}) {
          if (alpha != 0.0f && k != 0) continue;
          check_case(gemm, {false, false, 40, 50, k, 1, alpha, beta}, rng);
          check_case(gemm, {true, true, 40, 50, k, 0, alpha, beta}, rng);
        }
      }
    }
  }
}

TEST_CASE("our GEMMs with m = 0 or n = 0 touch nothing", "[gemm][portable]") {
  for (const Gemm& gemm : our_gemms()) {
    float c = 7.0f, a = 1.0f, b = 1.0f;
    gemm.fn(false, false, 0, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    gemm.fn(false, false, 1, 0, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    CHECK(c == 7.0f);
  }
}

namespace {

// `count` floats that end where an unmapped page begins: reading or writing one float past the
// end stops the process with SIGSEGV, as an allocation that ends at the end of its mapping does.
class GuardedFloats {
 public:
  explicit GuardedFloats(std::size_t count) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t bytes = (count * sizeof(float) + page - 1) / page * page;
    size_ = bytes + page;
    void* base = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) throw std::runtime_error("GuardedFloats: mmap failed");
    base_ = static_cast<char*>(base);
    if (::mprotect(base_ + bytes, page, PROT_NONE) != 0) {
      ::munmap(base_, size_);
      throw std::runtime_error("GuardedFloats: mprotect failed");
    }
    data_ = reinterpret_cast<float*>(base_ + bytes) - count;
  }
  ~GuardedFloats() { ::munmap(base_, size_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() const { return data_; }

 private:
  char* base_ = nullptr;
  std::size_t size_ = 0;
  float* data_ = nullptr;
};

}  // namespace

// A, B and C each end at an unmapped page, with no padding, so that the last row of each is the
// last thing mapped: the column edges of every tile width (n % 16 and n % 32 from 1 up), every
// transpose, and C read (beta != 0) and not, with k large enough that the packed path runs (m * n
// * k above the direct loop's 32^3), and m = 1 for the thin path. A kernel that touches a float
// past a row's end there, as a masked load or store does under qemu-user 7.2 (avx2_gemm.cpp,
// micro_kernel), stops the test process; on a CPU, masked lanes never fault, so this checks the
// emulated runs (`make test-x86-cpus`) hardest.
TEST_CASE("our GEMMs touch nothing past the last float of A B or C", "[gemm][portable]") {
  std::mt19937_64 rng(asyncnd_test::test_seed("portable_sgemm guard pages"));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Gemm& gemm : our_gemms()) {
    for (std::int64_t n : {1, 7, 8, 9, 15, 17, 31, 33, 47}) {
      for (std::int64_t m : {1, 7, 13}) {
        for (bool ta : {false, true}) {
          for (bool tb : {false, true}) {
            const std::int64_t k = 32 * 32 * 32 / (m * n) + 1 + n % 3;
            const float beta = (n + m) % 2 == 0 ? 0.0f : 0.5f;
            INFO(gemm.name << ": ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n
                           << " k=" << k << " beta=" << beta);
            GuardedFloats a(m * k), b(k * n), c(m * n);
            std::vector<float> want(m * n);
            for (std::int64_t i = 0; i < m * k; ++i) a.data()[i] = dist(rng);
            for (std::int64_t i = 0; i < k * n; ++i) b.data()[i] = dist(rng);
            for (std::int64_t i = 0; i < m * n; ++i) want[i] = c.data()[i] = dist(rng);
            const std::int64_t lda = ta ? m : k, ldb = tb ? k : n;
            detail::reference_sgemm(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, beta,
                                    want.data(), n);
            gemm.fn(ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, beta, c.data(), n);
            const double tol = gemm_tolerance(k, 1.0f, beta);
            for (std::int64_t i = 0; i < m * n; ++i) {
              REQUIRE(std::fabs(c.data()[i] - want[i]) <= tol);
            }
          }
        }
      }
    }
  }
}

// The real call site: inside ops on the engine's workers, two GEMMs at once (each splitting its
// work over the idle workers), on separate outputs. Also what the TSan build checks for races.
namespace {
void check_concurrent_in_ops(const Gemm& gemm) {
  std::mt19937_64 rng(asyncnd_test::test_seed("portable_sgemm in ops"));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::int64_t m = 150, n = 130, k = 270;
  std::vector<std::vector<float>> as(4), bs(4), cs(4), wants(4);
  for (int t = 0; t < 4; ++t) {
    as[t].resize(m * k);
    bs[t].resize(k * n);
    for (float& v : as[t]) v = dist(rng);
    for (float& v : bs[t]) v = dist(rng);
    cs[t].assign(m * n, std::numeric_limits<float>::quiet_NaN());
    wants[t].assign(m * n, 0.0f);
    detail::reference_sgemm(false, t % 2 == 1, m, n, k, 1.0f, as[t].data(), k, bs[t].data(),
                            t % 2 == 1 ? k : n, 0.0f, wants[t].data(), n);
  }
  Engine& eng = engine();
  std::vector<Var> vars;
  for (int t = 0; t < 4; ++t) {
    vars.push_back(eng.new_var());
    float* pc = cs[t].data();
    const float* pa = as[t].data();
    const float* pb = bs[t].data();
    const bool tb = t % 2 == 1;
    const GemmFn fn = gemm.fn;
    eng.push([=] { fn(false, tb, m, n, k, 1.0f, pa, k, pb, tb ? k : n, 0.0f, pc, n); },
             {}, {vars.back()});
  }
  eng.waitall();
  for (Var v : vars) eng.delete_var(v);
  eng.waitall();
  for (int t = 0; t < 4; ++t) {
    INFO(gemm.name << ", gemm " << t);
    int bad = 0;
    for (std::int64_t i = 0; i < m * n && bad < 5; ++i) {
      if (!(std::fabs(cs[t][i] - wants[t][i]) <= 1e-6 * (k + 2))) {
        ++bad;
        FAIL_CHECK("C[" << i << "] = " << cs[t][i] << ", reference " << wants[t][i]);
      }
    }
  }
  CHECK(eng.stats().pending == 0);
}
}  // namespace

TEST_CASE("our GEMMs run concurrently inside engine ops", "[gemm][portable][engine]") {
  EngineConfigGuard restore;
  configure_engine({EngineKind::kThreaded, 2});
  for (const Gemm& gemm : our_gemms()) check_concurrent_in_ops(gemm);
}

// GemmThreads (the AVX-512 GEMM's threads) on a pool of its own: concurrent calls each cover
// their range exactly once, a chunk's exception reaches its own caller, and a call made while
// another holds a caller busy gets the helper that is free (before 2026-11-27 it ran alone on its
// calling thread: the second GEMM of a backward pass on one core of 16).
TEST_CASE("GemmThreads: concurrent calls share the helpers, cover their range once, and keep "
          "their errors",
          "[gemm][threads]") {
  using Clock = std::chrono::steady_clock;
  detail::GemmThreads pool(4);
  REQUIRE(pool.threads() == 4);

  SECTION("three callers at once, every index once, errors to their caller") {
    constexpr int kCallers = 3, kRounds = 150;
    constexpr std::int64_t kN = 997;
    std::atomic<int> wrong{0}, errors_seen{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        for (int r = 0; r < kRounds; ++r) {
          std::vector<std::atomic<int>> hits(kN);
          const bool fail = r % 10 == c;  // now and then a chunk throws, naming its caller
          try {
            pool.parallel_for(kN, 7, [&](std::int64_t b, std::int64_t e) {
              for (std::int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
              if (fail && b <= 500 && 500 < e) {
                throw std::runtime_error("caller " + std::to_string(c));
              }
            });
            if (fail) wrong.fetch_add(1);  // the exception was lost
          } catch (const std::runtime_error& err) {
            if (!fail || std::string(err.what()) != "caller " + std::to_string(c)) {
              wrong.fetch_add(1);
            }
            errors_seen.fetch_add(1);
          }
          for (std::int64_t i = 0; i < kN; ++i)
            if (hits[i].load() != 1) wrong.fetch_add(1);
        }
      });
    }
    for (std::thread& t : callers) t.join();
    CHECK(wrong.load() == 0);
    CHECK(errors_seen.load() == kCallers * (kRounds / 10));
  }

  SECTION("a call made while another caller is busy gets a free helper") {
    // A's caller blocks inside A until B is done; A's other chunks finish on the helpers. B's
    // caller then blocks in B until one of B's chunks runs on another thread: only a helper can
    // run it. (With one job at a time, B ran alone on its caller and waited out the deadline.)
    std::atomic<bool> b_done{false}, a_blocked{false}, a_finished{false}, b_elsewhere{false};
    std::thread a_caller([&] {
      const std::thread::id self = std::this_thread::get_id();
      pool.parallel_for(8, 1, [&](std::int64_t, std::int64_t) {
        if (std::this_thread::get_id() != self) return;
        a_blocked.store(true);
        while (!b_done.load()) std::this_thread::yield();
      });
      a_finished.store(true);
    });
    while (!a_blocked.load() && !a_finished.load()) std::this_thread::yield();
    const std::thread::id self = std::this_thread::get_id();
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    pool.parallel_for(8, 1, [&](std::int64_t, std::int64_t) {
      if (std::this_thread::get_id() != self) {
        b_elsewhere.store(true);
        return;
      }
      while (!b_elsewhere.load() && Clock::now() < deadline) std::this_thread::yield();
    });
    b_done.store(true);
    a_caller.join();
    CHECK(b_elsewhere.load());
  }
}
