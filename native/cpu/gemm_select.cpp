// The choice of the CPU GEMM (gemm_select.h). Why OpenBLAS's own entry points: Debian 12's
// OpenBLAS 0.3.21 is a DYNAMIC_ARCH build that picks its kernel table once, when it loads, from a
// list of CPU models; on a model it does not know (Intel family 6 model 207, say) it falls back to
// Prescott's SSE3 kernels, 4.6x slower than its SkylakeX ones on the same machine
// (bench/notes/gemm.md, "The GEMM on every CPU"). The same library re-reads OPENBLAS_CORETYPE when
// its exported gotoblas_dynamic_quit/gotoblas_dynamic_init pair runs, so the backend can move it to
// the right table in the process, before its first GEMM, keeping every other property of the
// library (its threads, its tuned kernels for every shape). Loading OpenBLAS at run time after
// setting the variable would do the same but needs dlopen and breaks static consumers. Where that
// cannot help (the user set OPENBLAS_CORETYPE to a pre-AVX-512 core, which we never override; an
// AVX-512 CPU that OpenBLAS maps to an AVX2 kernel), our own AVX-512 GEMM (avx512_gemm.h) runs
// instead: 12x32 tiles on the shared blocked loop reached OpenBLAS's SkylakeX speed at 1000^3
// (bench/notes/gemm.md, "Our own AVX-512 GEMM"). Our AVX2 GEMM (avx2_gemm.h, 6x16 tiles) is level
// with OpenBLAS's Haswell kernel, so it replaces only what runs at a fraction of that speed: a
// pre-AVX2 kernel that OpenBLAS stays on (a core the user set, or every better one refused) on a
// CPU with AVX2, and the portable GEMM in a build without OpenBLAS (bench/notes/gemm.md, "Our own
// AVX2 GEMM"). A kernel we switch to (an OpenBLAS core other than the one it loaded, or our AVX-512
// or AVX2 GEMM) is used only after gemm_self_test passes on this machine, since some older
// OpenBLAS kernels compute wrong results on some processors. What needs no switch is not tested:
// the core OpenBLAS loaded by itself or the user set, and the portable GEMM.
#include "cpu/gemm_select.h"

#include <strings.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>

#include "asyncnd/error.h"
#include "cpu/avx2_gemm.h"
#include "cpu/avx512_gemm.h"

#if defined(ASYNCND_HAVE_OPENBLAS) && ASYNCND_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace asyncnd {
namespace detail {

CpuFeatures cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the operating system's support (XGETBV) for the wider registers.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  f.avx = __builtin_cpu_supports("avx");
  f.fma4 = __builtin_cpu_supports("fma4");
#endif
  return f;
}

std::string core_needs_missing(const std::string& corename, const CpuFeatures& cpu) {
  auto is = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (::strcasecmp(corename.c_str(), n) == 0) return true;
    }
    return false;
  };
  if (is_avx512_core(corename)) return cpu.avx512 ? "" : "AVX-512 (F, BW, VL and DQ)";
  if (is({"Haswell", "Zen"})) return cpu.avx2 && cpu.fma ? "" : "AVX2 and FMA";
  if (is({"Sandybridge"})) return cpu.avx ? "" : "AVX";
  if (is({"Bulldozer"})) return cpu.avx && cpu.fma4 ? "" : "AVX and FMA4";
  if (is({"Piledriver", "Steamroller", "Excavator"})) {
    return cpu.avx && cpu.fma && cpu.fma4 ? "" : "AVX, FMA and FMA4";
  }
  return "";
}

bool is_fallback_core(const std::string& corename) {
  static const char* const kPreAvx2[] = {
      "Katmai",  "Coppermine", "Northwood", "Prescott", "Banias",   "Atom",
      "Core2",   "Penryn",     "Dunnington", "Nehalem", "Sandybridge", "Opteron",
      "Opteron_SSE3", "Barcelona", "Nano", "Bobcat",  "Bulldozer", "Piledriver",
      "Steamroller", "Excavator", "Unknown"};
  for (const char* name : kPreAvx2) {
    if (::strcasecmp(corename.c_str(), name) == 0) return true;
  }
  return false;
}

bool is_avx512_core(const std::string& corename) {
  for (const char* name : {"SkylakeX", "Cooperlake", "SapphireRapids"}) {
    if (::strcasecmp(corename.c_str(), name) == 0) return true;
  }
  return false;
}

std::vector<std::string> better_cores(const std::string& loaded, const CpuFeatures& cpu) {
  if (!is_fallback_core(loaded)) return {};
  std::vector<std::string> out;
  if (cpu.avx512 && cpu.avx2 && cpu.fma) out.push_back("SkylakeX");
  if (cpu.avx2 && cpu.fma) out.push_back("Haswell");
  return out;
}

GemmChoice gemm_choice_from_env(const char* value, bool have_openblas) {
  if (value == nullptr || value[0] == '\0' || std::strcmp(value, "auto") == 0) {
    return GemmChoice::kAuto;
  }
  if (std::strcmp(value, "portable") == 0) return GemmChoice::kPortable;
  if (std::strcmp(value, "avx512") == 0) return GemmChoice::kAvx512;
  if (std::strcmp(value, "avx2") == 0) return GemmChoice::kAvx2;
  if (std::strcmp(value, "openblas") == 0) {
    if (!have_openblas) {
      throw Error("ASYNCND_GEMM=openblas: this build has no OpenBLAS (ASYNCND_WITH_OPENBLAS=OFF); "
                  "use auto, portable, avx512 or avx2");
    }
    return GemmChoice::kOpenblas;
  }
  throw Error(std::string("ASYNCND_GEMM: unknown GEMM '") + value +
              "' (expected auto, openblas, portable, avx512 or avx2)");
}

namespace {

struct Product {
  bool ta, tb;
  std::int64_t m, n, k, pad;
  float alpha, beta;
};

std::string check_product(const SgemmFn& gemm, const Product& p, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::int64_t a_cols = p.ta ? p.m : p.k, a_rows = p.ta ? p.k : p.m;
  const std::int64_t b_cols = p.tb ? p.k : p.n, b_rows = p.tb ? p.n : p.k;
  const std::int64_t lda = a_cols + p.pad, ldb = b_cols + p.pad, ldc = p.n + p.pad;
  std::vector<float> a(a_rows * lda), b(b_rows * ldb), c(p.m * ldc);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (float& v : c) v = dist(rng);
  const std::vector<float> c0 = c;
  gemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), lda, b.data(), ldb, p.beta, c.data(), ldc);
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < ldc; ++j) {
      double want = c0[i * ldc + j];  // the padding must stay as it was
      double bound = 0;
      if (j < p.n) {
        double acc = 0, mag = 0;
        for (std::int64_t q = 0; q < p.k; ++q) {
          const double x = p.ta ? a[q * lda + i] : a[i * lda + q];
          const double y = p.tb ? b[j * ldb + q] : b[q * ldb + j];
          acc += x * y;
          mag += std::abs(x * y);
        }
        const double old = want;
        want = p.alpha * acc + p.beta * old;
        // float rounding of k products and sums, each within 2^-24 relative, plus C's scaling.
        bound = 4.0 * (p.k + 2) * 6e-8 * (std::abs(p.alpha) * mag + std::abs(p.beta * old)) + 1e-30;
      }
      const double got = c[i * ldc + j];
      if (!(std::abs(got - want) <= bound)) {  // also catches NaN
        char msg[256];
        std::snprintf(msg, sizeof msg,
                      "%s%s m=%lld n=%lld k=%lld: C[%lld,%lld] = %.9g, expected %.9g", p.ta ? "A^T" : "A",
                      p.tb ? "B^T" : "B", static_cast<long long>(p.m), static_cast<long long>(p.n),
                      static_cast<long long>(p.k), static_cast<long long>(i),
                      static_cast<long long>(j), got, want);
        return msg;
      }
    }
  }
  return {};
}

}  // namespace

std::string gemm_self_test(const SgemmFn& gemm) {
  std::mt19937 rng(20261124);
  std::vector<Product> products;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      products.push_back({ta, tb, 7, 13, 5, 3, 1.0f, 0.0f});
      products.push_back({ta, tb, 37, 29, 67, 1, -0.5f, 1.0f});
    }
  }
  // m*n*k above OpenBLAS's single-thread threshold (262144): its threaded path and its blocking.
  products.push_back({false, false, 131, 97, 257, 5, 1.0f, 0.25f});
  // k past every k-block of ours (AVX-512 384, portable 512, AVX2 256), so that partial sums
  // carried from one block to the next are checked too; m and n end in partial tiles (12x32,
  // 6x16). Products with m*n*k <= 32^3 never reach our micro-kernels (small_gemm).
  products.push_back({true, false, 45, 70, 777, 2, 1.0f, 0.0f});
  for (const Product& p : products) {
    std::string err = check_product(gemm, p, rng);
    if (!err.empty()) return err;
  }
  return {};
}

#if defined(ASYNCND_HAVE_OPENBLAS) && ASYNCND_HAVE_OPENBLAS

// Exported by OpenBLAS's DYNAMIC_ARCH builds (driver/others/dynamic.c, blas_server.c), not part of
// its documented API: weak, so that another BLAS still links and nothing is switched.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
extern "C" void blas_thread_shutdown_(void) __attribute__((weak));

bool switch_openblas_core(const std::string& core) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || !blas_thread_shutdown_) return false;
  const char* prev = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = prev ? prev : "";
  blas_thread_shutdown_();  // no OpenBLAS thread may run a kernel of the old table
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  // Children of this process (and a later switch) see the user's environment, not ours.
  if (prev) {
    ::setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    ::unsetenv("OPENBLAS_CORETYPE");
  }
  return ::strcasecmp(openblas_get_corename(), core.c_str()) == 0;
}

void openblas_sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                    const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
                    float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

GemmSelection select_openblas_gemm(GemmChoice choice, const char* user_coretype,
                                   const CpuFeatures& cpu) {
  GemmSelection s;
  s.loaded_core = openblas_get_corename();
  s.kernel = "openblas " + s.loaded_core;
  if (choice == GemmChoice::kOpenblas) {
    s.reason = "ASYNCND_GEMM=openblas: the kernel OpenBLAS chose for this CPU";
    return s;
  }
  if (user_coretype != nullptr && *user_coretype != '\0') {  // empty: OpenBLAS ignores it
    s.reason = std::string("OPENBLAS_CORETYPE=") + user_coretype + " set by the user";
    return s;
  }
  const std::vector<std::string> candidates = better_cores(s.loaded_core, cpu);
  if (candidates.empty()) {
    s.reason = is_fallback_core(s.loaded_core)
                   ? "OpenBLAS's choice for this CPU (a pre-AVX2 kernel, and the CPU has no AVX2 "
                     "with FMA)"
                   : "OpenBLAS's choice for this CPU";
    return s;
  }
  const char* isa = cpu.avx512 ? "AVX-512" : "AVX2 and FMA";
  std::string refused;
  for (const std::string& core : candidates) {
    if (!switch_openblas_core(core)) {
      refused += (refused.empty() ? "" : "; ") + core + ": OpenBLAS did not switch to it";
      continue;
    }
    const std::string err = gemm_self_test(openblas_sgemm);
    if (err.empty()) {
      s.kernel = "openblas " + std::string(openblas_get_corename());
      s.reason = "OpenBLAS loaded its fallback kernel " + s.loaded_core + " on a CPU with " + isa +
                 ": switched to " + core + " after its self-test passed";
      if (!refused.empty()) {
        s.reason += " (refused: " + refused + ")";
        std::fprintf(stderr, "asyncnd: CPU GEMM: %s\n", s.reason.c_str());
      }
      return s;
    }
    refused += (refused.empty() ? "" : "; ") + core + ": self-test failed, " + err;
  }
  switch_openblas_core(s.loaded_core);  // back to the kernel OpenBLAS trusted
  s.kernel = "openblas " + std::string(openblas_get_corename());
  s.reason = "OpenBLAS loaded its fallback kernel " + s.loaded_core + " on a CPU with " + isa +
             ", and no better kernel was usable: " + refused;
  std::fprintf(stderr, "asyncnd: CPU GEMM: %s\n", s.reason.c_str());
  return s;
}

#endif

namespace {

// One of our own GEMMs (avx512_gemm.h, avx2_gemm.h), as the choice sees it.
struct OwnGemm {
  GemmKernel which;
  const char* name;  // as ASYNCND_GEMM spells it
  const char* isa;   // what this CPU must have, as the reasons say it
  bool applies;      // built for this architecture, and this CPU has isa
};

OwnGemm own_gemm(GemmKernel which, const CpuFeatures& cpu) {
  if (which == GemmKernel::kAvx512) {
    return {which, "avx512", "AVX-512", ASYNCND_HAVE_AVX512_GEMM && cpu.avx512};
  }
  return {which, "avx2", "AVX2 and FMA", ASYNCND_HAVE_AVX2_GEMM && cpu.avx2 && cpu.fma};
}

// Its self-test, on the calling thread; "" when it passes.
std::string own_self_test(const OwnGemm& g) {
#if ASYNCND_HAVE_AVX512_GEMM
  const bool wide = g.which == GemmKernel::kAvx512;
  return gemm_self_test([wide](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k,
                               float alpha, const float* a, std::int64_t lda, const float* b,
                               std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
    if (wide) {
      avx512_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, /*serial=*/true);
    } else {
      avx2_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, /*serial=*/true);
    }
  });
#else
  (void)g;
  return "not built for this architecture";
#endif
}

GemmSelection own_selection(const OwnGemm& g, std::string reason, std::string loaded_core) {
  return {g.name, std::move(reason), std::move(loaded_core), g.which};
}

// Where OpenBLAS is not to run (this build has none, or it loaded a kernel this CPU cannot run):
// our AVX-512 GEMM, else our AVX2 one, where it applies and passes its self-test, else the
// portable GEMM. `ours(g)` words the reason for one of ours, `portable` the portable GEMM's. A
// self-test that fails is said once on stderr; so is the choice when `say_choice` is set.
template <typename OursReason>
GemmSelection own_else_portable(std::initializer_list<OwnGemm> candidates, OursReason ours,
                                std::string portable, const std::string& loaded, bool say_choice) {
  GemmSelection s{"portable", std::move(portable), loaded, GemmKernel::kPortable};
  for (const OwnGemm& g : candidates) {
    if (!g.applies) continue;
    const std::string err = own_self_test(g);
    if (err.empty()) {
      s = own_selection(g, ours(g), loaded);
      break;
    }
    std::fprintf(stderr, "asyncnd: CPU GEMM: asyncnd's %s GEMM failed its self-test: %s\n", g.name,
                 err.c_str());
  }
  if (say_choice) std::fprintf(stderr, "asyncnd: CPU GEMM: %s\n", s.reason.c_str());
  return s;
}

}  // namespace

GemmSelection select_cpu_gemm(GemmChoice choice, const char* user_coretype, const CpuFeatures& cpu,
                              int blas_threads) {
#if defined(ASYNCND_HAVE_OPENBLAS) && ASYNCND_HAVE_OPENBLAS
  const std::string loaded = openblas_get_corename();
#else
  const std::string loaded;
#endif
  if (choice == GemmChoice::kPortable) {
    return {"portable", "ASYNCND_GEMM=portable", loaded, GemmKernel::kPortable};
  }
  const OwnGemm avx512 = own_gemm(GemmKernel::kAvx512, cpu), avx2 = own_gemm(GemmKernel::kAvx2, cpu);
  if (choice == GemmChoice::kAvx512 || choice == GemmChoice::kAvx2) {
    const OwnGemm& g = choice == GemmChoice::kAvx512 ? avx512 : avx2;
    const std::string var = std::string("ASYNCND_GEMM=") + g.name;
    if (!g.applies) {
      throw Error(var + ": this CPU has no " +
                  (choice == GemmChoice::kAvx512 ? "AVX-512 (F, BW, VL and DQ)" : "AVX2 with FMA") +
                  "; use auto, openblas or portable");
    }
    const std::string err = own_self_test(g);
    if (!err.empty()) throw Error(var + ": its self-test failed on this CPU: " + err);
    return own_selection(g, var + ", after its self-test passed", loaded);
  }
#if defined(ASYNCND_HAVE_OPENBLAS) && ASYNCND_HAVE_OPENBLAS
  if (const std::string missing = core_needs_missing(loaded, cpu); !missing.empty()) {
    // Not even its self-test may run: it would stop the process.
    const std::string what =
        "OpenBLAS loaded its kernel " + loaded +
        (user_coretype && *user_coretype
             ? std::string(" (OPENBLAS_CORETYPE=") + user_coretype + " set by the user)"
             : std::string()) +
        ", but this CPU lacks what it needs (" + missing +
        "): its first GEMM would stop the process with an illegal instruction";
    if (choice == GemmChoice::kOpenblas) {
      throw Error("ASYNCND_GEMM=openblas: " + what +
                  "; unset OPENBLAS_CORETYPE or set a core type this CPU runs, or use auto");
    }
    return own_else_portable(
        {avx512, avx2},
        [&](const OwnGemm& g) {
          return what + "; asyncnd's " + g.name + " GEMM instead, after its self-test passed";
        },
        what + "; asyncnd's portable GEMM instead", loaded, /*say_choice=*/true);
  }
  GemmSelection s = select_openblas_gemm(choice, user_coretype, cpu);
  if (choice == GemmChoice::kOpenblas) return s;
  const std::string core = openblas_get_corename();
  std::string refused;  // ours that failed their self-test here
  if (avx512.applies) {
    // An AVX-512 kernel of OpenBLAS's is level with ours on one thread (ours 0.89-1.0 of it on a
    // Xeon, 1000^3 and 2048^3) and behind on several: ours hands out row blocks as its threads
    // finish them, and concurrent GEMMs share its threads. On 16 vCPUs of a Xeon, against
    // OpenBLAS 0.3.26's Cooperlake, ours ran 1000^3 2.2x as fast and the chapter's E6 in
    // 0.67-0.70 of the time; on 2 vCPUs, 0.97-1.45x (bench/notes/gemm.md, "Our GEMM on 16 cores").
    const bool openblas_avx512 = is_avx512_core(core);
    if (openblas_avx512 && blas_threads <= 1) return s;
    const std::string err = own_self_test(avx512);
    if (err.empty()) {
      const std::string why = openblas_avx512
                                  ? "uses AVX-512, but on " + std::to_string(blas_threads) +
                                        " threads asyncnd's AVX-512 GEMM is faster: ours"
                                  : "does not use AVX-512, which this CPU has: asyncnd's AVX-512 "
                                    "GEMM";
      return own_selection(avx512,
                           "OpenBLAS's kernel " + core + " (" + s.reason + ") " + why +
                               ", after its self-test passed (OpenBLAS left as it is)",
                           s.loaded_core);
    }
    refused = "asyncnd's AVX-512 GEMM failed its self-test: " + err;
  }
  // Our AVX2 GEMM replaces only a pre-AVX2 kernel (a core the user set, or a better one that
  // failed its self-test): against OpenBLAS's Haswell kernel it is level, 0.94-1.13 of it on one
  // and two threads of a Xeon, where Prescott's ran at a third (bench/notes/gemm.md, "Our own AVX2
  // GEMM").
  if (avx2.applies && is_fallback_core(core)) {
    const std::string err = own_self_test(avx2);
    if (err.empty()) {
      GemmSelection ours = own_selection(
          avx2,
          "OpenBLAS's kernel " + core + " (" + s.reason + (refused.empty() ? "" : "; " + refused) +
              ") does not use AVX2, which this CPU has: asyncnd's AVX2 GEMM, after its self-test "
              "passed (OpenBLAS left as it is)",
          s.loaded_core);
      // Our AVX-512 GEMM's refusal, said once as every refusal is.
      if (!refused.empty()) std::fprintf(stderr, "asyncnd: CPU GEMM: %s\n", ours.reason.c_str());
      return ours;
    }
    refused += (refused.empty() ? "" : "; ") + std::string("asyncnd's AVX2 GEMM failed its self-test: ") + err;
  }
  if (!refused.empty()) {
    s.reason += "; " + refused;
    std::fprintf(stderr, "asyncnd: CPU GEMM: %s\n", s.reason.c_str());
  }
  return s;
#else
  (void)user_coretype;
  (void)blas_threads;
  const std::string no_blas = "this build has no OpenBLAS (ASYNCND_WITH_OPENBLAS=OFF)";
  return own_else_portable(
      {avx512, avx2},
      [&](const OwnGemm& g) {
        return no_blas + ", and this CPU has " + g.isa + ": asyncnd's " + g.name +
               " GEMM, after its self-test passed";
      },
      no_blas, loaded, /*say_choice=*/false);
#endif
}

}  // namespace detail
}  // namespace asyncnd
