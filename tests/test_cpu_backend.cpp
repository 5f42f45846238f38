// The CPU backend and the reference GEMM, each checked against a plain triple loop in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "asyncnd/error.h"
#include "cpu/cpu_backend.h"
#include "test_util.h"

using asyncnd::Device;
using asyncnd::detail::Backend;

namespace {

struct GemmCase {
  bool ta, tb;
  std::int64_t m, n, k, pad;  // pad: extra columns in every leading dimension
  float alpha, beta;
};

// C = alpha op(A) op(B) + beta C, in double.
std::vector<double> naive_gemm(const GemmCase& g, const std::vector<float>& a, std::int64_t lda,
                               const std::vector<float>& b, std::int64_t ldb,
                               const std::vector<float>& c, std::int64_t ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (std::int64_t i = 0; i < g.m; ++i) {
    for (std::int64_t j = 0; j < g.n; ++j) {
      double acc = 0;
      for (std::int64_t p = 0; p < g.k; ++p) {
        double x = g.ta ? a[p * lda + i] : a[i * lda + p];
        double y = g.tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
      }
      double prev = g.beta == 0.0f ? 0.0 : g.beta * double(c[i * ldc + j]);
      out[i * ldc + j] = g.alpha * acc + prev;
    }
  }
  return out;
}

template <class Gemm>
void check_gemm(Gemm gemm, const GemmCase& g, std::uint32_t seed) {
  INFO("seed=" << seed << " ta=" << g.ta << " tb=" << g.tb << " m=" << g.m << " n=" << g.n
                << " k=" << g.k << " pad=" << g.pad << " alpha=" << g.alpha << " beta=" << g.beta);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::int64_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const std::int64_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const std::int64_t lda = a_cols + g.pad, ldb = b_cols + g.pad, ldc = g.n + g.pad;
  std::vector<float> a(a_rows * lda), b(b_rows * ldb), c(g.m * ldc);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (float& v : c) v = dist(rng);
  if (g.beta == 0.0f && !c.empty()) c[0] = NAN;  // beta == 0 must overwrite, not scale
  std::vector<double> want = naive_gemm(g, a, lda, b, ldb, c, ldc);
  gemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, a.data(), lda, b.data(), ldb, g.beta, c.data(), ldc);
  const double tol = 1e-5 * (g.k + 1);
  for (std::int64_t i = 0; i < g.m; ++i) {
    for (std::int64_t j = 0; j < ldc; ++j) {
      double got = c[i * ldc + j], exp = want[i * ldc + j];
      if (!(std::abs(got - exp) <= tol)) {  // also fails on NaN
        FAIL("C[" << i << "," << j << "] = " << got << ", want " << exp);
      }
    }
  }
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back({ta, tb, 1, 1, 1, 0, 1.0f, 0.0f});
      cases.push_back({ta, tb, 7, 5, 3, 2, 1.0f, 0.0f});
      cases.push_back({ta, tb, 33, 17, 300, 0, 0.5f, 1.0f});   // k spans two reference panels
      cases.push_back({ta, tb, 70, 300, 65, 3, -2.0f, 0.25f});  // n spans two reference panels
      cases.push_back({ta, tb, 128, 96, 80, 0, 1.0f, 0.0f});    // large enough to use BLAS threads
      cases.push_back({ta, tb, 4, 6, 0, 1, 1.0f, 0.5f});        // k == 0 only scales C
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("reference_sgemm matches a triple loop for every transpose", "[backend][gemm]") {
  std::uint32_t seed = 1234;
  for (const GemmCase& g : gemm_cases()) check_gemm(asyncnd::detail::reference_sgemm, g, seed++);
}

TEST_CASE("cpu backend GEMM kernel calls match a triple loop for every transpose", "[backend][gemm]") {
  Backend& cpu = asyncnd::detail::backend_for(Device::cpu(), "test");
  // One KernelCall of kind kGemm, launched as core launches it (on this thread, done unused).
  auto gemm = [&cpu](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                     const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                     float beta, float* c, std::int64_t ldc) {
    asyncnd::detail::KernelCall call;
    call.kind = asyncnd::detail::KernelCall::Kind::kGemm;
    call.a = a;
    call.b = b;
    call.out = c;
    call.n = m * n;
    call.gemm = {ta, tb, m, n, k, lda, ldb, ldc, alpha, beta};
    cpu.launch(0, call, asyncnd::Completion());
  };
  std::uint32_t seed = 5678;
  for (const GemmCase& g : gemm_cases()) check_gemm(gemm, g, seed++);
}

TEST_CASE("cpu backend allocates 64-byte aligned blocks and names its BLAS", "[backend]") {
  Backend& cpu = asyncnd::detail::backend_for(Device::cpu(), "test");
  CHECK(cpu.kind() == asyncnd::DeviceKind::kCPU);
  CHECK(cpu.device_count() == 1);
  for (std::size_t bytes : {std::size_t(0), std::size_t(1), std::size_t(63), std::size_t(4096 + 4)}) {
    void* p = cpu.alloc(0, bytes);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    cpu.free(0, p, bytes);
  }
  cpu.free(0, nullptr, 0);
  CHECK(cpu.name().find(asyncnd::detail::cpu_blas_corename()) != std::string::npos);
  CHECK(asyncnd::detail::cpu_blas_threads() >= 1);
}

TEST_CASE("cpu backend reports an impossible allocation", "[backend]") {
  Backend& cpu = asyncnd::detail::backend_for(Device::cpu(), "test");
  // An impossible size, not a large one: sanitizers abort on huge requests by default.
  CHECK_THROWS_WITH(cpu.alloc(0, SIZE_MAX - 8), Catch::Contains("cpu: out of memory allocating"));
}

TEST_CASE("backend_for names the op and the missing device", "[backend]") {
  using asyncnd::detail::backend_for;
  const Device absent = Device::gpu(asyncnd_test::kAbsentGpu);
  CHECK_THROWS_AS(backend_for(absent, "dot"), asyncnd::Error);
  CHECK_THROWS_WITH(backend_for(absent, "dot"), Catch::StartsWith("dot: no device gpu(4000)"));
  CHECK_THROWS_WITH(backend_for(Device{asyncnd::DeviceKind::kCPU, 3}, "zeros"),
                    Catch::StartsWith("zeros: no device cpu(3)"));
}
