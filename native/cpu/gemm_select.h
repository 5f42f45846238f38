// Which CPU GEMM the native CPU backend runs: OpenBLAS with the kernel it loaded, OpenBLAS moved to
// a better kernel for this CPU, asyncnd's own AVX-512 or AVX2 GEMM (avx512_gemm.h, avx2_gemm.h),
// or the portable GEMM of core/. Chosen once, when the backend starts (cpu_backend.cpp); the pieces are separate so
// that tests can feed them any CPU.
// Not installed: for native/, tests and bench/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace asyncnd {
namespace detail {

// What this CPU and its operating system support (AVX-512 counts only with F, BW, VL and DQ, the
// set OpenBLAS's SkylakeX kernels use).
struct CpuFeatures {
  bool avx2 = false, fma = false, avx512 = false;
  bool avx = false, fma4 = false;  // what the pre-AVX2 AVX cores need (Sandybridge, Bulldozer...)
};
CpuFeatures cpu_features();

// What an OpenBLAS core type's kernels need that `cpu` lacks, as a reason says it ("AVX2 and
// FMA"); "" when the CPU has it all, or for a core this list does not know (the SSE ones run on
// every x86-64 CPU). OpenBLAS takes a core type forced by OPENBLAS_CORETYPE without checking, and
// its first GEMM then dies of an illegal instruction: the choice below never calls it. Needs:
// SkylakeX, Cooperlake, SapphireRapids AVX-512 (F, BW, VL and DQ); Haswell, Zen AVX2 and FMA;
// Sandybridge AVX; Bulldozer AVX and FMA4; Piledriver, Steamroller, Excavator AVX, FMA and FMA4.
std::string core_needs_missing(const std::string& corename, const CpuFeatures& cpu);

// True for the OpenBLAS core types whose SGEMM kernels predate AVX2 (Katmai ... Prescott, Core2,
// Nehalem, Sandybridge, the older AMD ones): OpenBLAS 0.3.21 falls back to one of them on a CPU
// model it does not know, e.g. Prescott (SSE3) on recent Intel Xeons. Case-insensitive.
bool is_fallback_core(const std::string& corename);

// The OpenBLAS core types worth trying instead of `loaded`, best first: empty when `loaded` is not
// a fallback core or the CPU has nothing better (AVX-512: SkylakeX then Haswell; AVX2 with FMA:
// Haswell).
std::vector<std::string> better_cores(const std::string& loaded, const CpuFeatures& cpu);

// True for the OpenBLAS core types whose SGEMM kernels use AVX-512 (SkylakeX, Cooperlake,
// SapphireRapids). Case-insensitive.
bool is_avx512_core(const std::string& corename);

// ASYNCND_GEMM: auto (the default, also for an unset or empty variable), openblas (the kernel
// OpenBLAS loaded, never switched), portable (core's own GEMM), avx512 or avx2 (asyncnd's AVX-512
// or AVX2 GEMM).
// Throws asyncnd::Error naming the variable and the value for anything else, and for openblas in
// a build without OpenBLAS.
enum class GemmChoice { kAuto, kOpenblas, kPortable, kAvx512, kAvx2 };
GemmChoice gemm_choice_from_env(const char* value, bool have_openblas);

// C = alpha op(A) op(B) + beta C, row-major, as Backend::sgemm.
using SgemmFn = std::function<void(bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                                   const float*, std::int64_t, const float*, std::int64_t, float,
                                   float*, std::int64_t)>;

// The startup self-test of a GEMM kernel: odd-sized products, every transpose, padded leading
// dimensions, one product large enough for OpenBLAS to split across its threads, checked against
// a double-precision reference with a bound that grows with k. Returns "" when every product
// passes, else the first wrong one. A few milliseconds.
std::string gemm_self_test(const SgemmFn& gemm);

// The choice made when the backend started, for EngineStats-like reports: the kernel ("openblas
// Haswell", "portable", "avx512", "avx2") and why.
enum class GemmKernel { kOpenblas, kPortable, kAvx512, kAvx2 };
struct GemmSelection {
  std::string kernel;
  std::string reason;
  std::string loaded_core;  // the core OpenBLAS loaded by itself ("" without OpenBLAS)
  GemmKernel which = GemmKernel::kOpenblas;
};

// The whole choice, as the backend makes it when it starts: `choice` from ASYNCND_GEMM,
// `user_coretype` the user's OPENBLAS_CORETYPE (nullptr when unset; empty, which OpenBLAS
// ignores, counts as unset), `cpu` this CPU,
// `blas_threads` the GEMM's thread count (cpu_backend.cpp's BLAS thread policy:
// ASYNCND_BLAS_THREADS, else OpenBLAS's own variables, else program_cpu_limit().cpus).
// - portable: core's GEMM. avx512, avx2: ours, or an asyncnd::Error when the CPU lacks AVX-512
//   (AVX2 with FMA) or the GEMM fails its self-test here. openblas: OpenBLAS as it loaded, or an
//   asyncnd::Error when that core needs instructions this CPU lacks (core_needs_missing).
// - auto, where OpenBLAS loaded a core this CPU cannot run (OPENBLAS_CORETYPE set for another
//   machine): OpenBLAS is never called; our best GEMM that applies and passes its self-test
//   (AVX-512, AVX2, else portable), said once on stderr. The variable is left as the user set it.
// - auto, on a CPU with AVX-512: our AVX-512 GEMM once its self-test passes, unless OpenBLAS's
//   kernel uses AVX-512 too and the GEMM has one thread (then the two are level and OpenBLAS
//   stays). OpenBLAS itself is left as select_openblas_gemm left it (a fallback core switched, a
//   core the user set kept). Then, on a CPU with AVX2 and FMA where OpenBLAS is left on a
//   pre-AVX2 kernel (is_fallback_core: a core the user set, or every better one failed its
//   self-test), and our AVX-512 GEMM did not apply or failed its self-test: our AVX2 GEMM once
//   its self-test passes. Elsewhere: OpenBLAS as select_openblas_gemm leaves it. Without
//   OpenBLAS: our AVX-512 GEMM, else our AVX2 one, where they apply and pass; else portable.
// The self-tests of our GEMMs run on the calling thread (no engine needed).
GemmSelection select_cpu_gemm(GemmChoice choice, const char* user_coretype, const CpuFeatures& cpu,
                              int blas_threads);

#if defined(ASYNCND_HAVE_OPENBLAS) && ASYNCND_HAVE_OPENBLAS
// cblas_sgemm with Backend::sgemm's arguments (dimensions within int: the caller checks).
void openblas_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    float alpha, const float* a, std::int64_t lda, const float* b,
                    std::int64_t ldb, float beta, float* c, std::int64_t ldc);

// Restarts OpenBLAS with OPENBLAS_CORETYPE=core (through its exported gotoblas_dynamic_quit and
// gotoblas_dynamic_init; the variable is restored afterwards). Returns false, changing nothing,
// when this OpenBLAS lacks those entry points; otherwise whether the core it now reports is
// `core`. Only while no GEMM runs: the backend calls it before its first GEMM.
bool switch_openblas_core(const std::string& core);

// Makes the choice on the live OpenBLAS: `choice` from ASYNCND_GEMM, `user_coretype` the user's
// OPENBLAS_CORETYPE (nullptr or empty when unset: a set one is never overridden), `cpu` this CPU.
// Switches OpenBLAS's kernel when `auto` finds a fallback core and a better one passes
// gemm_self_test; says on stderr, once, why a candidate was refused. Returns what runs and why.
GemmSelection select_openblas_gemm(GemmChoice choice, const char* user_coretype,
                                   const CpuFeatures& cpu);
#endif

}  // namespace detail
}  // namespace asyncnd
