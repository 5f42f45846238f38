// Random numbers: nd::seed, random_uniform, random_normal over Philox4x32-10 (kernels/philox.h).
// Each call takes the next stream of the global seed at the call, on the frontend thread, so the
// values depend only on the seed and the call order, never on when or where the op runs. The CPU's
// fill is kernels/host_random.cpp.
#include <cfloat>
#include <cmath>
#include <mutex>
#include <string>

#include "asyncnd/ops.h"
#include "kernels/philox.h"
#include "ops/ops_common.h"

namespace asyncnd {
namespace {

// The default seed, so that a program that never calls nd::seed is still reproducible.
constexpr std::uint64_t kDefaultSeed = 0;
// The seed and the next stream change together: a call on another thread while nd::seed runs
// gets the old seed with its next stream or the new seed with stream 0, never the old seed with
// stream 0 again (an earlier array's values repeated).
std::mutex g_seed_mutex;
std::uint64_t g_seed = kDefaultSeed;
std::uint64_t g_next_stream = 0;

NDArray make_random(const char* op, detail::RandomDist dist, Shape shape, float a, float b,
                    Device device) {
  NDArray out = detail::new_array(op, std::move(shape), device);
  // Taken only once the call is valid: a failed call does not shift later streams.
  std::uint64_t key, stream;
  {
    std::lock_guard<std::mutex> lock(g_seed_mutex);
    key = g_seed;
    stream = g_next_stream++;
  }
  const std::int64_t n = out.size();
  if (n == 0) return out;
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kRandom, out);
  c.random = {dist, key, stream, a, b};
  detail::push_kernel(op, c, out, {});
  return out;
}

}  // namespace

namespace detail {

std::string random_uniform_problem(float lo, float hi) {
  if (std::isfinite(lo) && std::isfinite(hi) && std::isfinite(hi - lo) && lo <= hi) return "";
  return "expects finite lo <= hi with hi - lo finite in float, got lo=" + num_text(lo) +
         " hi=" + num_text(hi);
}

std::string random_normal_problem(float mean, float stddev) {
  // No draw is further than kNormalMaxZ stddevs from the mean (philox.h): the values stay
  // finite where |mean| + kNormalMaxZ * stddev, in double, is within float's range.
  const double furthest = std::fabs(static_cast<double>(mean)) +
                          kernels::kNormalMaxZ * static_cast<double>(stddev);
  if (std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0.0f && furthest <= FLT_MAX)
    return "";
  return "expects a finite mean and stddev >= 0 with |mean| + " +
         num_text(kernels::kNormalMaxZ) +
         " stddev within float's range (no draw is further from the mean), got mean=" +
         num_text(mean) + " stddev=" + num_text(stddev);
}

}  // namespace detail

namespace nd {

void seed(std::uint64_t s) {
  std::lock_guard<std::mutex> lock(g_seed_mutex);
  g_seed = s;
  g_next_stream = 0;
}

NDArray random_uniform(Shape shape, float lo, float hi, Device device) {
  const std::string problem = detail::random_uniform_problem(lo, hi);
  if (!problem.empty()) throw Error("random_uniform: " + problem);
  return make_random("random_uniform", detail::RandomDist::kUniform, std::move(shape), lo,
                     hi - lo, device);
}

NDArray random_normal(Shape shape, float mean, float stddev, Device device) {
  const std::string problem = detail::random_normal_problem(mean, stddev);
  if (!problem.empty()) throw Error("random_normal: " + problem);
  return make_random("random_normal", detail::RandomDist::kNormal, std::move(shape), mean, stddev,
                     device);
}

}  // namespace nd
}  // namespace asyncnd
