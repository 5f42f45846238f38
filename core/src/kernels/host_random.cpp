// The CPU's Philox fill (host_kernels.h: random_fill). Speed matters here: the chapter's E1
// generates 10 x 1M normals next to 10 GEMMs. The kernels are plain loops that vectorise; this
// file asks GCC for -O3 whatever the build type, and on x86-64 compiles the fill for x86-64-v4
// (AVX-512), v3 (AVX2) and baseline, picked once at first use. Not target_clones: its ifunc
// resolver runs before the sanitizer runtimes start, and TSan's instrumentation of it crashes the
// program at load. fp-contract=off keeps every variant (and other compilers, and WebAssembly, and
// the CUDA kernel built with -fmad=false) bit-identical: a fused multiply-add would round
// differently.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include "kernels/host_kernels.h"
#include "kernels/philox.h"

namespace asyncnd {
namespace kernels {
namespace {

using FillFn = void (*)(std::uint64_t, std::uint64_t, Dist, float, float, float*, std::int64_t,
                        std::int64_t);

void fill_baseline(std::uint64_t key, std::uint64_t stream, Dist dist, float a, float b,
                   float* out, std::int64_t begin, std::int64_t end) {
  philox_fill(key, stream, dist, a, b, out, begin, end);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) void fill_v4(std::uint64_t key, std::uint64_t stream,
                                                       Dist dist, float a, float b, float* out,
                                                       std::int64_t begin, std::int64_t end) {
  philox_fill(key, stream, dist, a, b, out, begin, end);
}
__attribute__((target("arch=x86-64-v3"))) void fill_v3(std::uint64_t key, std::uint64_t stream,
                                                       Dist dist, float a, float b, float* out,
                                                       std::int64_t begin, std::int64_t end) {
  philox_fill(key, stream, dist, a, b, out, begin, end);
}
FillFn pick_fill() {
  __builtin_cpu_init();  // checks OS support (XSAVE state) too, not just the CPUID bits
  if (__builtin_cpu_supports("x86-64-v4")) return fill_v4;
  if (__builtin_cpu_supports("x86-64-v3")) return fill_v3;
  return fill_baseline;
}
#else
FillFn pick_fill() { return fill_baseline; }
#endif

}  // namespace

void random_fill(std::uint64_t key, std::uint64_t stream, detail::RandomDist dist, float a,
                 float b, float* out, std::int64_t begin, std::int64_t end) {
  static const FillFn fill = pick_fill();
  fill(key, stream, dist, a, b, out, begin, end);
}

}  // namespace kernels
}  // namespace asyncnd
