// [device] The device math on the CPU: every elementwise functor run through the MapFn dispatch
// that the CUDA kernels use (kernels/device_map.h) gives the functor's own result bit for bit,
// and the per-block Philox values a device thread computes are the CPU backend's numbers.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/device_map.h"
#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace k = asyncnd::kernels;

namespace {

std::vector<float> probe_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -2.5f, 3.0f, 1e-30f, -1e-30f,
                          88.0f, -88.0f, 100.0f, -100.0f, 1e30f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  Rng rng(7);
  for (float x : random_values(rng, 200, -10.0f, 10.0f)) v.push_back(x);
  return v;
}

bool same(float a, float b) { return same_bits({a}, {b}) || (std::isnan(a) && std::isnan(b)); }

// Output element 0 of a contiguous map with operands a and b, as a device kernel computes it.
float element(const k::MapDesc& m, float a, float b) { return k::map_element(m, &a, &b, 0); }

template <class F>
void check_unary(F f, const char* name) {
  INFO(name);
  const auto m = k::describe(f);
  CHECK(m.form == detail::MapForm::kUnary);
  int bad = 0;
  for (float a : probe_values())
    if (!same(element(m, a, 0.0f), f(a))) ++bad;
  CHECK(bad == 0);
}

template <class F>
void check_binary(F f, const char* name) {
  INFO(name);
  const auto m = k::describe(f);
  CHECK(m.form == detail::MapForm::kBinary);
  auto one_right = m, one_left = m;
  one_right.form = detail::MapForm::kOneRight;
  one_left.form = detail::MapForm::kOneLeft;
  int bad = 0;
  const auto v = probe_values();
  for (float a : v)
    for (float b : v) {
      if (!same(element(m, a, b), f(a, b))) ++bad;
      // One operand of a single element, read by the kernel: f(a[i], b[0]) and f(a[0], b[i]).
      const float a4[4] = {a, a, a, a}, b4[4] = {b, b, b, b};
      if (!same(k::map_element(one_right, a4, &b, 3), f(a, b))) ++bad;
      if (!same(k::map_element(one_left, &a, b4, 3), f(a, b))) ++bad;
      // The scalar forms, x op s and s op x (for functors without a parameter of their own).
      if constexpr (sizeof(F) != sizeof(float)) {
        const k::BindRight<F> r{f, b};
        const k::BindLeft<F> l{f, b};
        if (!same(element(k::describe(r), a, 0.0f), r(a))) ++bad;
        if (!same(element(k::describe(l), a, 0.0f), l(a))) ++bad;
      }
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("device functors: the MapFn dispatch gives each functor's result bit for bit", "[device]") {
  // Every function of the op table, in every form it can take.
#define CHECK_BINARY_FN(Name, Functor, Cost) check_binary(k::make_fn<k::Functor>(0.005f), #Name);
  ASYNCND_BINARY_FNS(CHECK_BINARY_FN)
#undef CHECK_BINARY_FN
#define CHECK_UNARY_FN(Name, Functor, Cost) check_unary(k::Functor{}, #Name);
  ASYNCND_UNARY_FNS(CHECK_UNARY_FN)
#undef CHECK_UNARY_FN
}

TEST_CASE("device functors: strided offsets walk a broadcast like NumPy", "[device]") {
  // [2,3,4] output; a is [2,1,4] (stride 0 along dim 1), b is [3,1] (strides 0, 1, 0).
  const std::int64_t dims[3] = {2, 3, 4}, sa[3] = {4, 0, 1}, sb[3] = {0, 1, 0};
  const k::DeviceStrided p = k::device_strided({3, dims, sa, sb});
  for (std::int64_t i = 0; i < 24; ++i) {
    std::int64_t oa, ob;
    k::strided_offsets(p, i, &oa, &ob);
    const auto idx = asyncnd_ref::unravel(i, {2, 3, 4});
    CHECK(oa == asyncnd_ref::broadcast_index(idx, {2, 1, 4}));
    CHECK(ob == asyncnd_ref::broadcast_index(idx, {3, 1}));
  }
}

TEST_CASE("device functors: per-block Philox values are the CPU backend's numbers", "[device]") {
  leak_checked([] {
    const std::uint64_t seed = test_seed("philox blocks");
    for (int dist = 0; dist < 2; ++dist) {
      const std::int64_t n = 4099;  // not a multiple of 4 or of the CPU's batch
      const float a = dist == 0 ? -3.0f : 0.5f, b = dist == 0 ? 7.0f : 2.0f;
      nd::seed(seed);
      const NDArray cpu = dist == 0 ? nd::random_uniform({n}, a, a + b) : nd::random_normal({n}, a, b);
      const std::vector<float> want = cpu.to_vector();
      std::vector<float> got(static_cast<std::size_t>(n));
      for (std::int64_t blk = 0; blk * 4 < n; ++blk) {
        float v[4];
        k::philox_block_values(seed, /*stream=*/0, static_cast<std::uint64_t>(blk),
                               dist == 0 ? detail::RandomDist::kUniform : detail::RandomDist::kNormal,
                               a, b, v);
        for (int j = 0; j < 4 && blk * 4 + j < n; ++j) got[static_cast<std::size_t>(blk * 4 + j)] = v[j];
      }
      INFO((dist == 0 ? "uniform" : "normal"));
      CHECK(same_bits(got, want));
    }
  });
}

TEST_CASE("device functors: reduce_finish matches the CPU's sum, mean, max and norm", "[device]") {
  CHECK(k::reduce_finish(detail::ReduceFn::kSum, 10.0, 4) == 10.0f);
  CHECK(k::reduce_finish(detail::ReduceFn::kMean, 10.0, 4) == 2.5f);
  CHECK(k::reduce_finish(detail::ReduceFn::kMax, -1.5f, 4) == -1.5f);
  CHECK(k::reduce_finish(detail::ReduceFn::kNorm, 16.0, 4) == 4.0f);
  CHECK(std::isnan(k::reduce_finish(detail::ReduceFn::kMean, 0.0, 0)));  // NumPy: mean of nothing
}
