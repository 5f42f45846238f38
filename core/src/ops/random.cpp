// Random numbers: nd::seed, random_uniform, random_normal over Philox4x32-10 (kernels/philox.h).
// Each call takes the next stream of the global seed at the call, on the frontend thread, so the
// values depend only on the seed and the call order, never on when or where the op runs. The CPU's
// fill is kernels/host_random.cpp.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>

#include "asyncnd/ops.h"
#include "ops/ops_common.h"

namespace asyncnd {
namespace {

// The default seed, so that a program that never calls nd::seed is still reproducible.
constexpr std::uint64_t kDefaultSeed = 0;
std::atomic<std::uint64_t> g_seed{kDefaultSeed};
std::atomic<std::uint64_t> g_next_stream{0};

std::string num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

NDArray make_random(const char* op, detail::RandomDist dist, Shape shape, float a, float b,
                    Device device) {
  const std::uint64_t key = g_seed.load(std::memory_order_relaxed);
  NDArray out = detail::new_array(op, std::move(shape), device);
  // Taken only once the call is valid: a failed call does not shift later streams.
  const std::uint64_t stream = g_next_stream.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t n = out.size();
  if (n == 0) return out;
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kRandom, out);
  c.random = {dist, key, stream, a, b};
  detail::push_kernel(op, c, out, {});
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
    throw Error(std::string(kOp) + ": expects finite lo <= hi with hi - lo finite in float, " +
                "got lo=" + num(lo) + " hi=" + num(hi));
  return make_random(kOp, detail::RandomDist::kUniform, std::move(shape), lo, hi - lo, device);
}

NDArray random_normal(Shape shape, float mean, float stddev, Device device) {
  static const char* kOp = "random_normal";
  if (!std::isfinite(mean) || !std::isfinite(stddev) || stddev < 0.0f)
    throw Error(std::string(kOp) + ": expects a finite mean and stddev >= 0, got mean=" +
                num(mean) + " stddev=" + num(stddev));
  return make_random(kOp, detail::RandomDist::kNormal, std::move(shape), mean, stddev, device);
}

}  // namespace nd
}  // namespace asyncnd
