// Random numbers: nd::seed, random_uniform, random_normal over Philox4x32-10 (kernels/philox.h).
// Each call takes the next stream of the global seed at the call, on the frontend thread, so the
// values depend only on the seed and the call order, never on when or where the op runs.
//
// Speed matters here: the chapter's E1 generates 10 x 1M normals next to 10 GEMMs. The kernels
// are plain loops that vectorise; this file asks GCC for -O3 whatever the build type, and on
// x86-64 compiles the fill for x86-64-v4 (AVX-512), v3 (AVX2) and baseline, picked once at first
// use. Not target_clones: its ifunc resolver runs before the sanitizer runtimes start, and TSan's
// instrumentation of it crashes the program at load.
// fp-contract=off keeps every variant (and other compilers, and WebAssembly) bit-identical:
// a fused multiply-add would round differently.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>

#include "asyncnd/ops.h"
#include "device_ops.h"
#include "kernels/philox.h"
#include "ops_common.h"

namespace asyncnd {

namespace {

// The default seed, so that a program that never calls nd::seed is still reproducible.
constexpr std::uint64_t kDefaultSeed = 0;

std::atomic<std::uint64_t> g_seed{kDefaultSeed};
std::atomic<std::uint64_t> g_next_stream{0};

using FillFn = void (*)(std::uint64_t, std::uint64_t, kernels::Dist, float, float, float*,
                        std::int64_t, std::int64_t);

void fill_baseline(std::uint64_t key, std::uint64_t stream, kernels::Dist dist, float a, float b,
                   float* out, std::int64_t begin, std::int64_t end) {
  kernels::philox_fill(key, stream, dist, a, b, out, begin, end);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) void fill_v4(std::uint64_t key, std::uint64_t stream,
                                                       kernels::Dist dist, float a, float b,
                                                       float* out, std::int64_t begin,
                                                       std::int64_t end) {
  kernels::philox_fill(key, stream, dist, a, b, out, begin, end);
}
__attribute__((target("arch=x86-64-v3"))) void fill_v3(std::uint64_t key, std::uint64_t stream,
                                                       kernels::Dist dist, float a, float b,
                                                       float* out, std::int64_t begin,
                                                       std::int64_t end) {
  kernels::philox_fill(key, stream, dist, a, b, out, begin, end);
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

void fill_range(std::uint64_t key, std::uint64_t stream, kernels::Dist dist, float a, float b,
                float* out, std::int64_t begin, std::int64_t end) {
  static const FillFn fill = pick_fill();
  fill(key, stream, dist, a, b, out, begin, end);
}

std::string num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

NDArray make_random(const char* op, kernels::Dist dist, Shape shape, float a, float b,
                    Device device) {
  const std::uint64_t key = g_seed.load(std::memory_order_relaxed);
  NDArray out = detail::new_array(op, std::move(shape), device);
  // Taken only once the call is valid: a failed call does not shift later streams.
  const std::uint64_t stream = g_next_stream.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t n = out.size();
  if (n == 0) return out;
  float* p = detail::data_of(out);
  if (!out.device().is_cpu()) {
    detail::KernelCall c;
    c.kind = detail::KernelCall::Kind::kRandom;
    c.out = p;
    c.n = n;
    c.random = {dist == kernels::Dist::kUniform ? detail::RandomDist::kUniform
                                                : detail::RandomDist::kNormal,
                key, stream, a, b};
    detail::push_device(op, c, out.device(), out, {});
    return out;
  }
  detail::push_op(op,
                  [=] {
                    detail::parallel(n, detail::kGrain, [=](std::int64_t s, std::int64_t e) {
                      fill_range(key, stream, dist, a, b, p, s, e);
                    });
                  },
                  out, {});
  return out;
}

}  // namespace

namespace nd {

void seed(std::uint64_t s) {
  g_seed.store(s, std::memory_order_relaxed);
  g_next_stream.store(0, std::memory_order_relaxed);
}

NDArray random_uniform(Shape shape, float lo, float hi, Device device) {
  static const char* kOp = "random_uniform";
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo) || hi < lo)
    throw Error(std::string(kOp) + ": expects finite lo <= hi, got lo=" + num(lo) +
                " hi=" + num(hi));
  return make_random(kOp, kernels::Dist::kUniform, std::move(shape), lo, hi - lo, device);
}

NDArray random_normal(Shape shape, float mean, float stddev, Device device) {
  static const char* kOp = "random_normal";
  if (!std::isfinite(mean) || !std::isfinite(stddev) || stddev < 0.0f)
    throw Error(std::string(kOp) + ": expects a finite mean and stddev >= 0, got mean=" +
                num(mean) + " stddev=" + num(stddev));
  return make_random(kOp, kernels::Dist::kNormal, std::move(shape), mean, stddev, device);
}

}  // namespace nd
}  // namespace asyncnd
