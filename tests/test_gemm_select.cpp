// The choice of the CPU GEMM (native/cpu/gemm_select.h): the decision on any CPU, the self-test,
// ASYNCND_GEMM, and, where OpenBLAS is built in, the switch on the live library and what a fresh
// process with nothing set selects.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "asyncnd/asyncnd.h"
#include "asyncnd/detail/backend.h"
#include "cpu/avx2_gemm.h"
#include "cpu/avx512_gemm.h"
#include "cpu/cpu_backend.h"
#include "cpu/gemm_select.h"
#include "test_util.h"

#if ASYNCND_HAVE_OPENBLAS
#include <cblas.h>
#endif

using asyncnd::detail::better_cores;
using asyncnd::detail::CpuFeatures;
using asyncnd::detail::GemmChoice;
using asyncnd::detail::gemm_choice_from_env;
using asyncnd::detail::gemm_self_test;
using asyncnd::detail::is_fallback_core;

using asyncnd_test::line_after;
using asyncnd_test::run_child;

TEST_CASE("gemm selection: fallback cores and the better ones for each CPU", "[gemm][select]") {
  for (const char* core : {"Prescott", "prescott", "Core2", "Nehalem", "Katmai", "Sandybridge"}) {
    INFO(core);
    CHECK(is_fallback_core(core));
  }
  for (const char* core : {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    INFO(core);
    CHECK_FALSE(is_fallback_core(core));
  }
  // The Intel Xeon of our machines (family 6 model 207, AVX-512), where OpenBLAS 0.3.21 loads
  // Prescott: SkylakeX first, Haswell next.
  const CpuFeatures xeon{true, true, true}, zen3{true, true, false}, old{false, false, false};
  CHECK(better_cores("Prescott", xeon) == std::vector<std::string>{"SkylakeX", "Haswell"});
  CHECK(better_cores("Prescott", zen3) == std::vector<std::string>{"Haswell"});
  CHECK(better_cores("Prescott", old).empty());  // nothing better on an SSE-only CPU
  CHECK(better_cores("Haswell", xeon).empty());  // OpenBLAS knew the CPU: never second-guessed
  CHECK(better_cores("Zen", zen3).empty());
}

TEST_CASE("gemm selection: what each OpenBLAS core type needs that a CPU may lack",
          "[gemm][select]") {
  using asyncnd::detail::core_needs_missing;
  CpuFeatures nehalem;  // SSE only
  CpuFeatures sandy = nehalem;
  sandy.avx = true;
  CpuFeatures haswell = sandy;
  haswell.avx2 = haswell.fma = true;
  CpuFeatures skx = haswell;
  skx.avx512 = true;
  CpuFeatures piledriver = sandy;
  piledriver.fma = piledriver.fma4 = true;
  for (const char* core : {"SkylakeX", "cooperlake", "SapphireRapids"}) {
    INFO(core);
    CHECK(core_needs_missing(core, haswell) == "AVX-512 (F, BW, VL and DQ)");
    CHECK(core_needs_missing(core, skx).empty());
  }
  for (const char* core : {"Haswell", "ZEN"}) {
    INFO(core);
    CHECK(core_needs_missing(core, sandy) == "AVX2 and FMA");
    CHECK(core_needs_missing(core, haswell).empty());
  }
  CHECK(core_needs_missing("Sandybridge", nehalem) == "AVX");
  CHECK(core_needs_missing("Sandybridge", sandy).empty());
  CHECK(core_needs_missing("Bulldozer", haswell) == "AVX and FMA4");  // Intel has no FMA4
  CHECK(core_needs_missing("Bulldozer", piledriver).empty());
  CHECK(core_needs_missing("Excavator", haswell) == "AVX, FMA and FMA4");
  CHECK(core_needs_missing("Piledriver", piledriver).empty());
  for (const char* core : {"Prescott", "Nehalem", "Core2", "armv8", "NoSuchCore"}) {
    INFO(core);
    CHECK(core_needs_missing(core, nehalem).empty());  // SSE cores, and names it does not know
  }
}

TEST_CASE("gemm selection: ASYNCND_GEMM values, and a clear error for a bad one", "[gemm][select]") {
  CHECK(gemm_choice_from_env(nullptr, true) == GemmChoice::kAuto);
  CHECK(gemm_choice_from_env("", true) == GemmChoice::kAuto);
  CHECK(gemm_choice_from_env("auto", true) == GemmChoice::kAuto);
  CHECK(gemm_choice_from_env("openblas", true) == GemmChoice::kOpenblas);
  CHECK(gemm_choice_from_env("portable", false) == GemmChoice::kPortable);
  CHECK(gemm_choice_from_env("avx512", false) == GemmChoice::kAvx512);
  CHECK(gemm_choice_from_env("avx2", false) == GemmChoice::kAvx2);
  CHECK_THROWS_WITH(gemm_choice_from_env("fast", true),
                    "ASYNCND_GEMM: unknown GEMM 'fast' (expected auto, openblas, portable, avx512 or "
                    "avx2)");
  CHECK_THROWS_WITH(gemm_choice_from_env("OpenBLAS", true), Catch::Contains("'OpenBLAS'"));
  CHECK_THROWS_WITH(gemm_choice_from_env("openblas", false),
                    Catch::StartsWith("ASYNCND_GEMM=openblas: this build has no OpenBLAS"));
}

TEST_CASE("gemm selection: the self-test passes right kernels and catches wrong ones",
          "[gemm][select]") {
  CHECK(gemm_self_test(asyncnd::detail::reference_sgemm) == "");
  CHECK(gemm_self_test(asyncnd::detail::portable_sgemm) == "");
  // Off by 1% in one element of the large product only: caught (the bound is float rounding's
  // worst case, k products and sums, far below what a broken kernel gets wrong).
  auto slightly_wrong = [](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                           float alpha, const float* a, std::int64_t lda, const float* b,
                           std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
    asyncnd::detail::reference_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (m * n * k > 100000) c[(m / 2) * ldc + n / 2] *= 1.01f;
  };
  CHECK_THAT(gemm_self_test(slightly_wrong), Catch::Contains("m=131 n=97 k=257"));
  // A kernel that ignores the transpose of B.
  auto no_trans_b = [](bool ta, bool, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                       const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                       float beta, float* c, std::int64_t ldc) {
    asyncnd::detail::reference_sgemm(ta, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  };
  CHECK_THAT(gemm_self_test(no_trans_b), Catch::StartsWith("AB^T"));
  // One that writes past C's columns into the padding.
  auto pads = [](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                 const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
                 float* c, std::int64_t ldc) {
    asyncnd::detail::reference_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (ldc > n) c[n] = 0.0f;
  };
  CHECK_FALSE(gemm_self_test(pads).empty());
  // One that drops what it summed over all but the last k-block of 512 (a carry lost between
  // blocks): only a product with k past the block depth shows it.
  auto last_block_only = [](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                            float alpha, const float* a, std::int64_t lda, const float* b,
                            std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
    const std::int64_t skip = k > 512 ? (k - 1) / 512 * 512 : 0;
    const float* a_rest = ta ? a + skip * lda : a + skip;
    const float* b_rest = tb ? b + skip : b + skip * ldb;
    asyncnd::detail::reference_sgemm(ta, tb, m, n, k - skip, alpha, a_rest, lda, b_rest, ldb, beta,
                                     c, ldc);
  };
  CHECK_THAT(gemm_self_test(last_block_only), Catch::Contains("k=777"));
}

TEST_CASE("gemm selection: cpu_gemm() says what runs and why", "[gemm][select]") {
  const asyncnd::CpuGemm g = asyncnd::cpu_gemm();
  CHECK_FALSE(g.kernel.empty());
  CHECK_FALSE(g.reason.empty());
#if ASYNCND_HAVE_OPENBLAS
  if (std::getenv("ASYNCND_GEMM") == nullptr) {
    const std::string core = openblas_get_corename();
    // Ours exactly on a CPU with AVX-512, unless OpenBLAS's kernel uses it too and the GEMM has
    // one thread (the backend set OpenBLAS's thread count to the GEMM's).
    const bool ours = ASYNCND_HAVE_AVX512_GEMM && asyncnd::detail::cpu_features().avx512 &&
                      (!asyncnd::detail::is_avx512_core(core) || openblas_get_num_threads() > 1);
    CHECK(g.kernel == (ours ? std::string("avx512") : "openblas " + core));
  }
#endif
}

// Run by the test below in a child process: the selection as a fresh process makes it.
TEST_CASE("gemm selection: report (child)", "[.][gemm-child]") {
  try {
    const asyncnd::CpuGemm g = asyncnd::cpu_gemm();
    std::printf("kernel=%s\nreason=%s\n", g.kernel.c_str(), g.reason.c_str());
    std::printf("blas_threads=%d\n", asyncnd::detail::cpu_blas_threads());
    // And a GEMM through the engine with it: [[1,2],[3,4]]^2 summed = 7+10+15+22.
    asyncnd::NDArray a = asyncnd::nd::from_vector({1, 2, 3, 4}, {2, 2});
    std::printf("dotsum=%g\n", asyncnd::nd::dot(a, a).sum().item());
  } catch (const std::exception& e) {
    std::printf("error=%s\n", e.what());
  }
}

TEST_CASE("gemm selection: a fresh process with nothing set selects no fallback kernel on a CPU "
          "with AVX2, and a bad ASYNCND_GEMM is a clear error",
          "[gemm][select]") {
  int status = 0;
  std::string out = run_child("-u ASYNCND_GEMM", "gemm selection: report (child)", &status);
  INFO(out);
  REQUIRE(status == 0);
  const std::string kernel = line_after(out, "kernel=");
  CHECK(line_after(out, "dotsum=") == "54");
#if ASYNCND_HAVE_OPENBLAS
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  if (cpu.avx512 && ASYNCND_HAVE_AVX512_GEMM) {
    // OpenBLAS with an AVX-512 kernel, or ours.
    const bool wide = kernel == "avx512" || (kernel.rfind("openblas ", 0) == 0 &&
                                             asyncnd::detail::is_avx512_core(kernel.substr(9)));
    CHECK(wide);
  } else if (cpu.avx2 && cpu.fma) {
    REQUIRE(kernel.rfind("openblas ", 0) == 0);
    CHECK_FALSE(is_fallback_core(kernel.substr(9)));
  } else {
    WARN("SKIPPED: this CPU has no AVX2 with FMA, so OpenBLAS's fallback kernel is its best");
  }
#endif
  out = run_child("ASYNCND_GEMM=portable", "gemm selection: report (child)", &status);
  CHECK(line_after(out, "kernel=") == "portable");
  CHECK(line_after(out, "dotsum=") == "54");
  out = run_child("ASYNCND_GEMM=blis", "gemm selection: report (child)", &status);
  CHECK(line_after(out, "error=") ==
        "ASYNCND_GEMM: unknown GEMM 'blis' (expected auto, openblas, portable, avx512 or avx2)");
  // ASYNCND_GEMM=avx512: ours where the CPU has AVX-512, else a clear error.
  out = run_child("ASYNCND_GEMM=avx512", "gemm selection: report (child)", &status);
  if (asyncnd::detail::cpu_features().avx512 && ASYNCND_HAVE_AVX512_GEMM) {
    CHECK(line_after(out, "kernel=") == "avx512");
    CHECK(line_after(out, "dotsum=") == "54");
  } else {
    CHECK(line_after(out, "error=") ==
          "ASYNCND_GEMM=avx512: this CPU has no AVX-512 (F, BW, VL and DQ); use auto, openblas or "
          "portable");
  }
  // ASYNCND_GEMM=avx2: ours where the CPU has AVX2 with FMA, else a clear error.
  out = run_child("ASYNCND_GEMM=avx2", "gemm selection: report (child)", &status);
  const CpuFeatures here = asyncnd::detail::cpu_features();
  if (here.avx2 && here.fma && ASYNCND_HAVE_AVX2_GEMM) {
    CHECK(line_after(out, "kernel=") == "avx2");
    CHECK(line_after(out, "dotsum=") == "54");
    // Our GEMM gets the count asked for, past OpenBLAS's build maximum (64 in Debian's), which
    // capped it when OpenBLAS's clamped count was read back for ours.
    out = run_child("ASYNCND_GEMM=avx2 ASYNCND_BLAS_THREADS=100", "gemm selection: report (child)",
                    &status);
    CHECK(line_after(out, "blas_threads=") == "100");
    CHECK(line_after(out, "dotsum=") == "54");
  } else {
    CHECK(line_after(out, "error=") ==
          "ASYNCND_GEMM=avx2: this CPU has no AVX2 with FMA; use auto, openblas or portable");
  }
}

#if ASYNCND_HAVE_OPENBLAS
using asyncnd::detail::GemmKernel;
using asyncnd::detail::openblas_sgemm;
using asyncnd::detail::select_cpu_gemm;
using asyncnd::detail::switch_openblas_core;

TEST_CASE("gemm selection: on a simulated fallback load, auto moves OpenBLAS to a better kernel "
          "that passes its self-test, and a user's OPENBLAS_CORETYPE is left alone",
          "[gemm][select]") {
  using asyncnd::detail::select_openblas_gemm;
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  if (!cpu.avx2 || !cpu.fma) {
    WARN("SKIPPED: this CPU has no AVX2 with FMA: no kernel better than a fallback one applies");
    return;
  }
  asyncnd::nd::waitall();  // no GEMM may run while OpenBLAS switches
  const std::string original = openblas_get_corename();
  auto coretype_env = [] {
    const char* v = std::getenv("OPENBLAS_CORETYPE");
    return v ? std::string(v) : std::string("(unset)");
  };
  const std::string env_before = coretype_env();
  // As OpenBLAS 0.3.21 loads on a CPU model it does not know.
  REQUIRE(switch_openblas_core("Prescott"));
  CHECK(std::string(openblas_get_corename()) == "Prescott");
  CHECK(gemm_self_test(openblas_sgemm) == "");  // the fallback is right, only slow

  // The user's own choice: never overridden.
  asyncnd::detail::GemmSelection s = select_openblas_gemm(GemmChoice::kAuto, "Prescott", cpu);
  CHECK(s.kernel == "openblas Prescott");
  CHECK_THAT(s.reason, Catch::Contains("OPENBLAS_CORETYPE=Prescott set by the user"));
  s = select_openblas_gemm(GemmChoice::kOpenblas, nullptr, cpu);
  CHECK(s.kernel == "openblas Prescott");

  // An empty OPENBLAS_CORETYPE is no choice: OpenBLAS ignores it and detects the CPU, so the
  // fallback is switched as when unset (it was kept as "set by the user").
  s = select_openblas_gemm(GemmChoice::kAuto, "", cpu);
  const std::string want = cpu.avx512 ? "SkylakeX" : "Haswell";
  CHECK(s.kernel == "openblas " + want);
  CHECK_THAT(s.reason, !Catch::Contains("set by the user"));
  REQUIRE(switch_openblas_core("Prescott"));

  s = select_openblas_gemm(GemmChoice::kAuto, nullptr, cpu);
  CHECK(s.loaded_core == "Prescott");
  CHECK(s.kernel == "openblas " + want);
  CHECK(std::string(openblas_get_corename()) == want);
  CHECK_THAT(s.reason, Catch::Contains("fallback kernel Prescott") &&
                           Catch::Contains("switched to " + want));
  CHECK(coretype_env() == env_before);  // the environment is as it was
  CHECK(gemm_self_test(openblas_sgemm) == "");

  // Every kernel that applies to this CPU computes right (odd shapes, transposes, strides).
  for (const std::string& core : asyncnd::detail::better_cores("Prescott", cpu)) {
    INFO(core);
    REQUIRE(switch_openblas_core(core));
    CHECK(gemm_self_test(openblas_sgemm) == "");
  }
  REQUIRE(switch_openblas_core(original));
  CHECK(std::string(openblas_get_corename()) == original);
}

TEST_CASE("gemm selection: where OpenBLAS's kernel leaves AVX-512 unused (a core the user set), "
          "auto runs our AVX-512 GEMM and leaves OpenBLAS as it is",
          "[gemm][select]") {
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  if (!cpu.avx2 || !cpu.fma) {
    WARN("SKIPPED: this CPU has no AVX2 with FMA: OpenBLAS cannot load Haswell here");
    return;
  }
  asyncnd::nd::waitall();  // no GEMM may run while OpenBLAS switches
  const std::string original = openblas_get_corename();
  REQUIRE(switch_openblas_core("Haswell"));  // as OPENBLAS_CORETYPE=Haswell loads it
  CpuFeatures with512 = cpu, without512 = cpu;
  with512.avx512 = true;
  without512.avx512 = false;
  asyncnd::detail::GemmSelection s = select_cpu_gemm(GemmChoice::kAuto, "Haswell", without512, 2);
  CHECK(s.which == GemmKernel::kOpenblas);
  CHECK(s.kernel == "openblas Haswell");
  CHECK(select_cpu_gemm(GemmChoice::kOpenblas, "Haswell", cpu, 2).kernel == "openblas Haswell");
  CHECK(select_cpu_gemm(GemmChoice::kPortable, "Haswell", cpu, 2).which == GemmKernel::kPortable);
  if (cpu.avx512 && ASYNCND_HAVE_AVX512_GEMM) {
    for (int threads : {1, 2}) {  // one thread or several: OpenBLAS's Haswell is behind ours
      INFO(threads << " threads");
      s = select_cpu_gemm(GemmChoice::kAuto, "Haswell", with512, threads);
      CHECK(s.which == GemmKernel::kAvx512);
      CHECK(s.kernel == "avx512");
      CHECK_THAT(s.reason, Catch::Contains("OPENBLAS_CORETYPE=Haswell set by the user") &&
                               Catch::Contains("does not use AVX-512") &&
                               Catch::Contains("self-test passed"));
    }
    CHECK(select_cpu_gemm(GemmChoice::kAvx512, nullptr, with512, 1).which == GemmKernel::kAvx512);
  } else {
    WARN("SKIPPED for the AVX-512 choice: this CPU has no AVX-512 (F, BW, VL and DQ)");
  }
  CHECK(std::string(openblas_get_corename()) == "Haswell");  // OpenBLAS itself never moved
  CHECK_THROWS_WITH(select_cpu_gemm(GemmChoice::kAvx512, nullptr, without512, 2),
                    "ASYNCND_GEMM=avx512: this CPU has no AVX-512 (F, BW, VL and DQ); use auto, "
                    "openblas or portable");
  REQUIRE(switch_openblas_core(original));
}

TEST_CASE("gemm selection: where OpenBLAS's kernel uses AVX-512 too, auto runs ours on several "
          "threads and keeps OpenBLAS on one",
          "[gemm][select]") {
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  if (!cpu.avx512 || !ASYNCND_HAVE_AVX512_GEMM) {
    WARN("SKIPPED: this CPU (or build) has no AVX-512 (F, BW, VL and DQ): OpenBLAS cannot load "
         "SkylakeX here, and our AVX-512 GEMM does not apply");
    return;
  }
  asyncnd::nd::waitall();  // no GEMM may run while OpenBLAS switches
  const std::string original = openblas_get_corename();
  REQUIRE(switch_openblas_core("SkylakeX"));  // as OPENBLAS_CORETYPE=SkylakeX loads it
  asyncnd::detail::GemmSelection s = select_cpu_gemm(GemmChoice::kAuto, "SkylakeX", cpu, 1);
  CHECK(s.which == GemmKernel::kOpenblas);
  CHECK(s.kernel == "openblas SkylakeX");
  s = select_cpu_gemm(GemmChoice::kAuto, "SkylakeX", cpu, 4);
  CHECK(s.which == GemmKernel::kAvx512);
  CHECK_THAT(s.reason, Catch::Contains("SkylakeX") &&
                           Catch::Contains("uses AVX-512, but on 4 threads") &&
                           Catch::Contains("self-test passed"));
  CHECK(select_cpu_gemm(GemmChoice::kOpenblas, "SkylakeX", cpu, 4).which == GemmKernel::kOpenblas);
  CHECK(std::string(openblas_get_corename()) == "SkylakeX");  // OpenBLAS itself never moved
  REQUIRE(switch_openblas_core(original));
}

TEST_CASE("gemm selection: where OpenBLAS stays on a pre-AVX2 kernel (a core the user set) on a "
          "CPU with AVX2, auto runs our AVX2 GEMM and leaves OpenBLAS as it is",
          "[gemm][select]") {
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  if (!cpu.avx2 || !cpu.fma || !ASYNCND_HAVE_AVX2_GEMM) {
    WARN("SKIPPED: this CPU (or build) has no AVX2 with FMA: our AVX2 GEMM does not apply");
    return;
  }
  asyncnd::nd::waitall();  // no GEMM may run while OpenBLAS switches
  const std::string original = openblas_get_corename();
  REQUIRE(switch_openblas_core("Prescott"));  // as OPENBLAS_CORETYPE=Prescott loads it
  CpuFeatures avx2_only = cpu, with512 = cpu, sse_only = cpu;
  avx2_only.avx512 = false;
  with512.avx512 = true;
  sse_only.avx512 = sse_only.avx2 = sse_only.fma = false;
  for (int threads : {1, 2}) {  // ours replaces a pre-AVX2 kernel on any number of threads
    INFO(threads << " threads");
    asyncnd::detail::GemmSelection s =
        select_cpu_gemm(GemmChoice::kAuto, "Prescott", avx2_only, threads);
    CHECK(s.which == GemmKernel::kAvx2);
    CHECK(s.kernel == "avx2");
    CHECK(s.loaded_core == "Prescott");
    CHECK_THAT(s.reason, Catch::Contains("OPENBLAS_CORETYPE=Prescott set by the user") &&
                             Catch::Contains("does not use AVX2") &&
                             Catch::Contains("self-test passed"));
  }
  // A CPU with AVX-512 runs our AVX-512 GEMM instead; one without AVX2 keeps OpenBLAS's kernel.
  if (cpu.avx512 && ASYNCND_HAVE_AVX512_GEMM) {
    CHECK(select_cpu_gemm(GemmChoice::kAuto, "Prescott", with512, 2).which == GemmKernel::kAvx512);
  }
  asyncnd::detail::GemmSelection s = select_cpu_gemm(GemmChoice::kAuto, "Prescott", sse_only, 2);
  CHECK(s.which == GemmKernel::kOpenblas);
  CHECK(s.kernel == "openblas Prescott");
  // An AVX2 kernel of OpenBLAS's stays: ours is level with it (bench/notes/gemm.md).
  REQUIRE(switch_openblas_core("Haswell"));
  CHECK(select_cpu_gemm(GemmChoice::kAuto, "Haswell", avx2_only, 2).kernel == "openblas Haswell");
  REQUIRE(switch_openblas_core("Prescott"));
  // Forced: ours after its self-test, or a clear error on a CPU without AVX2 with FMA.
  s = select_cpu_gemm(GemmChoice::kAvx2, nullptr, avx2_only, 2);
  CHECK(s.which == GemmKernel::kAvx2);
  CHECK(s.reason == "ASYNCND_GEMM=avx2, after its self-test passed");
  CHECK_THROWS_WITH(select_cpu_gemm(GemmChoice::kAvx2, nullptr, sse_only, 2),
                    "ASYNCND_GEMM=avx2: this CPU has no AVX2 with FMA; use auto, openblas or "
                    "portable");
  CHECK(std::string(openblas_get_corename()) == "Prescott");  // OpenBLAS itself never moved
  REQUIRE(switch_openblas_core(original));
}
#else
TEST_CASE("gemm selection: a build without OpenBLAS runs our AVX-512 GEMM, else our AVX2 one, "
          "where the CPU has them, else the portable one",
          "[gemm][select]") {
  using asyncnd::detail::GemmKernel;
  using asyncnd::detail::select_cpu_gemm;
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  CpuFeatures sse_only = cpu;
  sse_only.avx512 = sse_only.avx2 = sse_only.fma = false;
  asyncnd::detail::GemmSelection s = select_cpu_gemm(GemmChoice::kAuto, nullptr, sse_only, 2);
  CHECK(s.which == GemmKernel::kPortable);
  CHECK_THAT(s.reason, Catch::Contains("this build has no OpenBLAS"));
  if (cpu.avx2 && cpu.fma && ASYNCND_HAVE_AVX2_GEMM) {
    CpuFeatures avx2_only = cpu;
    avx2_only.avx512 = false;
    s = select_cpu_gemm(GemmChoice::kAuto, nullptr, avx2_only, 2);
    CHECK(s.which == GemmKernel::kAvx2);
    CHECK_THAT(s.reason, Catch::Contains("this CPU has AVX2 and FMA: asyncnd's avx2 GEMM"));
  } else {
    WARN("SKIPPED for the AVX2 choice: this CPU (or build) has no AVX2 with FMA");
  }
  if (cpu.avx512 && ASYNCND_HAVE_AVX512_GEMM) {
    CHECK(select_cpu_gemm(GemmChoice::kAuto, nullptr, cpu, 2).which == GemmKernel::kAvx512);
  } else {
    WARN("SKIPPED for the AVX-512 choice: this CPU (or build) has no AVX-512 (F, BW, VL and DQ)");
  }
  CHECK(select_cpu_gemm(GemmChoice::kPortable, nullptr, cpu, 2).which == GemmKernel::kPortable);
}
#endif

#if ASYNCND_HAVE_OPENBLAS && (defined(__x86_64__) || defined(__i386__))
// Run by the test below in a child process with OPENBLAS_CORETYPE=Haswell: the choice on a CPU
// without AVX (all features false), as if the variable had been set for another machine.
TEST_CASE("gemm selection: a forced core the CPU cannot run (child)", "[.][gemm-child]") {
  using asyncnd::detail::select_cpu_gemm;
  const CpuFeatures sse_only;
  const asyncnd::detail::GemmSelection s =
      select_cpu_gemm(GemmChoice::kAuto, "Haswell", sse_only, 2);
  std::printf("kernel=%s\nreason=%s\n", s.kernel.c_str(), s.reason.c_str());
  try {
    select_cpu_gemm(GemmChoice::kOpenblas, "Haswell", sse_only, 2);
    std::printf("openblas=chosen\n");
  } catch (const asyncnd::Error& e) {
    std::printf("openblas_error=%s\n", e.what());
  }
}

TEST_CASE("gemm selection: an OPENBLAS_CORETYPE that this CPU cannot run is never called, and "
          "the process lives",
          "[gemm][select]") {
  // The decision, for a CPU without AVX: OpenBLAS loaded Haswell because the variable says so.
  int status = 0;
  std::string out = run_child("OPENBLAS_CORETYPE=Haswell",
                              "gemm selection: a forced core the CPU cannot run (child)", &status);
  INFO(out);
  REQUIRE(status == 0);
  CHECK(line_after(out, "kernel=") == "portable");
  CHECK(line_after(out, "reason=") ==
        "OpenBLAS loaded its kernel Haswell (OPENBLAS_CORETYPE=Haswell set by the user), but this "
        "CPU lacks what it needs (AVX2 and FMA): its first GEMM would stop the process with an "
        "illegal instruction; asyncnd's portable GEMM instead");
  CHECK_THAT(line_after(out, "openblas_error="),
             Catch::StartsWith("ASYNCND_GEMM=openblas: OpenBLAS loaded its kernel Haswell") &&
                 Catch::EndsWith("unset OPENBLAS_CORETYPE or set a core type this CPU runs, or "
                                 "use auto"));
  // And for real: a fresh process with OPENBLAS_CORETYPE=Haswell computes right on this CPU. On
  // one without AVX2 (make test-x86-cpus runs this under an emulated Nehalem) it runs the
  // portable GEMM and says why on stderr, where OpenBLAS's Haswell kernel would kill it.
  out = run_child("-u ASYNCND_GEMM OPENBLAS_CORETYPE=Haswell", "gemm selection: report (child)",
                  &status);
  REQUIRE(status == 0);
  CHECK(line_after(out, "dotsum=") == "54");
  const CpuFeatures cpu = asyncnd::detail::cpu_features();
  if (!(cpu.avx2 && cpu.fma)) {
    CHECK(line_after(out, "kernel=") == "portable");
    CHECK_THAT(out, Catch::Contains("asyncnd: CPU GEMM: OpenBLAS loaded its kernel Haswell"));
  }
}
#endif
