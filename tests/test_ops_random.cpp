// [ops][random] Philox4x32-10: known-answer vectors, the vectorised batch against the scalar
// definition (bit for bit), streams per call, independence from scheduling and worker count,
// moments, ranges, errors, and the speed E1 needs.
//
// Contraction off, as in random.cpp: the scalar reference below must round like the library.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "kernels/philox.h"
#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace k = asyncnd::kernels;

namespace {

// Element i of a stream, straight from the definition: word i % 4 of block i / 4.
float scalar_element(std::uint64_t key, std::uint64_t stream, std::int64_t i, k::Dist dist, float a,
                     float b) {
  const std::uint64_t blk = static_cast<std::uint64_t>(i / 4);
  const std::uint32_t ctr[4] = {
      static_cast<std::uint32_t>(blk), static_cast<std::uint32_t>(blk >> 32),
      static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
  std::uint32_t w[4];
  k::philox4x32_10(ctr, static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32), w);
  const int j = static_cast<int>(i % 4);
  if (dist == k::Dist::kUniform) {
    const float v = a + b * k::uniform01(w[j]);
    return v >= a + b && b > 0 ? std::nextafter(a + b, -std::numeric_limits<float>::infinity()) : v;
  }
  float z[4];
  k::box_muller(w[0], w[1], &z[0], &z[1]);
  k::box_muller(w[2], w[3], &z[2], &z[3]);
  return a + b * z[j];
}

std::vector<float> scalar_stream(std::uint64_t key, std::uint64_t stream, std::int64_t n,
                                 k::Dist dist, float a, float b) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = scalar_element(key, stream, i, dist, a, b);
  return v;
}

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0, kurt = 0;
};

Moments moments(const std::vector<float>& v) {
  Moments m;
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  for (float x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  double m4 = 0;
  for (float x : v) {
    const double d = x - m.mean;
    m.var += d * d;
    m4 += d * d * d * d;
  }
  m.var /= static_cast<double>(v.size());
  m.kurt = m4 / static_cast<double>(v.size()) / (m.var * m.var);
  return m;
}

}  // namespace

TEST_CASE("Philox4x32-10 known-answer vectors (Random123)", "[ops][random]") {
  struct Kat {
    std::uint32_t ctr[4], key[2], out[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& t : kats) {
    std::uint32_t out[4];
    k::philox4x32_10(t.ctr, t.key[0], t.key[1], out);
    for (int i = 0; i < 4; ++i) CHECK(out[i] == t.out[i]);
  }
}

TEST_CASE("the batch kernel equals the scalar definition on any range", "[ops][random]") {
  Rng rng(test_seed("philox ranges"));
  const std::int64_t n = 4 * k::kPhiloxBatch * 3 + 7;
  for (auto dist : {k::Dist::kUniform, k::Dist::kNormal}) {
    const std::uint64_t key = rng(), stream = rng();
    const auto want = scalar_stream(key, stream, n, dist, -1.5f, 3.0f);
    for (int t = 0; t < 50; ++t) {
      std::int64_t b = static_cast<std::int64_t>(rng() % n),
                   e = static_cast<std::int64_t>(rng() % n);
      if (b > e) std::swap(b, e);
      std::vector<float> got(static_cast<std::size_t>(n), 12345.0f);
      k::philox_fill(key, stream, dist, -1.5f, 3.0f, got.data(), b, e);
      std::vector<float> expect(static_cast<std::size_t>(n), 12345.0f);
      std::copy(want.begin() + b, want.begin() + e, expect.begin() + b);
      INFO("range [" << b << ", " << e << ")");
      CHECK(same_bits(got, expect));
    }
  }
  // Box-Muller's pieces are accurate: the polynomials against libm in double.
  double worst_log = 0, worst_trig = 0;
  for (std::uint32_t x = 0; x < (1u << 24); x += 997) {
    const float u = static_cast<float>(x + 1) * (1.0f / 16777216.0f);
    if (u != 1.0f)
      worst_log = std::max(worst_log, std::fabs(k::log_unit(u) / std::log(double(u)) - 1.0));
    float c, s;
    k::sincos_turns24(x, &c, &s);
    const double th = 6.283185307179586 * x / 16777216.0;
    worst_trig = std::max({worst_trig, std::fabs(c - std::cos(th)), std::fabs(s - std::sin(th))});
  }
  CHECK(worst_log < 1e-6);
  CHECK(worst_trig < 1e-6);
  // kNormalMaxZ bounds every draw (random_normal's parameter check relies on it), and tightly:
  // the radius is largest at the smallest u1 (x0 = 0), at any angle.
  float furthest = 0;
  for (std::uint32_t x1 = 0; x1 < (1u << 24); x1 += 4093) {
    float z0, z1;
    k::box_muller(0u, x1 << 8, &z0, &z1);
    furthest = std::max({furthest, std::fabs(z0), std::fabs(z1)});
  }
  CHECK(furthest <= k::kNormalMaxZ);
  CHECK(furthest > 5.76f);
}

TEST_CASE("each call takes the next stream of the seed", "[ops][random]") {
  leak_checked([] {
    const std::uint64_t s = test_seed("random streams", 1234);
    const Shape shape{37, 11};
    nd::seed(s);
    const auto x = nd::random_uniform(shape, -2.0f, 3.0f).to_vector();
    const auto y = nd::random_normal(shape, 1.0f, 0.5f).to_vector();
    CHECK(same_bits(x, scalar_stream(s, 0, 37 * 11, k::Dist::kUniform, -2.0f, 5.0f)));
    CHECK(same_bits(y, scalar_stream(s, 1, 37 * 11, k::Dist::kNormal, 1.0f, 0.5f)));
    nd::seed(s);
    // A failed call takes no stream: the next call still gets stream 0.
    expect_error([] { nd::random_uniform({2}, 3.0f, 1.0f); },
                 {"random_uniform: expects finite lo <= hi with hi - lo finite in float, got "
                  "lo=3 hi=1"});
    expect_error([] { nd::random_normal({2}, 0.0f, -1.0f); },
                 {"random_normal: expects a finite mean and stddev >= 0 with |mean| + 5.77 stddev "
                  "within float's range (no draw is further from the mean), got mean=0 stddev=-1"});
    // The refused values print apart, though they are one float step from each other.
    expect_error([] { nd::random_uniform({2}, 1.0000001f, 1.0f); },
                 {"got lo=1.0000001 hi=1"});
    // Finite parameters whose draws would not be: refused like random_uniform's too-wide bounds.
    expect_error([] { nd::random_normal({2}, 0.0f, 1e38f); }, {"random_normal", "stddev=1e+38"});
    expect_error([] { nd::random_normal({2}, 3e38f, 1e37f); }, {"random_normal", "mean=3e+38"});
    expect_error([] { nd::random_normal({-2}); }, {"random_normal: shape [-2] has a negative"});
    expect_error([] { nd::random_uniform({2}, 0, 1, Device::gpu(kAbsentGpu)); },
                 {"random_uniform: no device gpu(4000)"});
    CHECK(same_bits(nd::random_uniform(shape, -2.0f, 3.0f).to_vector(), x));
    CHECK(same_bits(nd::random_normal(shape, 1.0f, 0.5f).to_vector(), y));
    nd::seed(s + 1);
    CHECK_FALSE(same_bits(nd::random_uniform(shape, -2.0f, 3.0f).to_vector(), x));
  });
}

TEST_CASE("random values do not depend on the engine or its worker count", "[ops][random]") {
  EngineConfigGuard restore;
  leak_checked([] {
    const std::int64_t n = scaled(1000, 10);
    const auto run = [&] {
      nd::seed(99);
      const NDArray u = nd::random_uniform({n, 1000});
      const NDArray g = nd::random_normal({n, 1000}, 0.0f, 2.0f);
      return std::make_pair(u.to_vector(), g.to_vector());
    };
    configure_engine({EngineKind::kNaive});
    const auto want = run();
    CHECK(same_bits(want.second, scalar_stream(99, 1, n * 1000, k::Dist::kNormal, 0.0f, 2.0f)));
    for (int workers : {1, 2, 4, 8}) {
      configure_engine({EngineKind::kThreaded, workers});
      const auto got = run();
      INFO("workers " << workers);
      CHECK(same_bits(got.first, want.first));
      CHECK(same_bits(got.second, want.second));
    }
  });
}

// The float transforms (Box-Muller's log, sincos and sqrt are our own polynomials, philox.h) give
// the same bits on every machine: x86-64, AArch64 (make test-arm64) and WebAssembly, whose test
// (wasm/test/api.test.js) checks the same two digests. A compiler that fuses a * b + c into one
// rounding (G++ does on AArch64 unless -ffp-contract=off) changes them.
static std::uint64_t fnv1a_bits(const std::vector<float>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (float f : v) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    h = (h ^ u) * 1099511628211ull;
  }
  return h;
}

TEST_CASE("random floats: the same seed gives the same bits on every CPU and in WebAssembly",
          "[ops][random]") {
  leak_checked([] {
    nd::seed(7);
    const NDArray g = nd::random_normal({100003}, 0.5f, 2.0f);
    const NDArray u = nd::random_uniform({100003}, -1.0f, 3.0f);
    CHECK(fnv1a_bits(g.to_vector()) == 0x27ecb4249957aac0ull);
    CHECK(fnv1a_bits(u.to_vector()) == 0x9d9d0ccbd5f9ac4dull);
  });
}

TEST_CASE("uniform and normal have the right range and moments", "[ops][random]") {
  leak_checked([] {
    nd::seed(test_seed("random moments", 5));
    const std::int64_t n = scaled(2000000, 20000);
    const double tol = 5.0 / std::sqrt(static_cast<double>(n));  // ~5 standard errors
    const auto u = moments(nd::random_uniform({n}, -3.0f, 5.0f).to_vector());
    CHECK(u.min >= -3.0);
    CHECK(u.max < 5.0);
    CHECK(std::fabs(u.mean - 1.0) < tol * 8.0 / std::sqrt(12.0));  // sd of U(-3,5)
    CHECK(std::fabs(u.var / (64.0 / 12.0) - 1.0) < 2 * tol);
    const auto g = moments(nd::random_normal({n}, 2.0f, 3.0f).to_vector());
    CHECK(std::fabs(g.mean - 2.0) < 3 * tol);
    CHECK(std::fabs(std::sqrt(g.var) / 3.0 - 1.0) < tol);
    CHECK(std::fabs(g.kurt - 3.0) < 6 * tol);  // normal tails: kurtosis 3
    // Degenerate and rounding-prone ranges stay within [lo, hi).
    const auto same = nd::random_uniform({100}, 7.0f, 7.0f).to_vector();
    CHECK(std::all_of(same.begin(), same.end(), [](float v) { return v == 7.0f; }));
    const auto far = nd::random_uniform({10000}, 1e8f, 1e8f + 16.0f).to_vector();
    CHECK(*std::max_element(far.begin(), far.end()) < 1e8f + 16.0f);
    CHECK(*std::min_element(far.begin(), far.end()) >= 1e8f);
    const auto z = nd::random_normal({1000}, 4.0f, 0.0f).to_vector();
    CHECK(std::all_of(z.begin(), z.end(), [](float v) { return v == 4.0f; }));
  });
}

TEST_CASE("1M normals take a few milliseconds", "[ops][random][perf]") {
  EngineConfigGuard restore;
  leak_checked([] {
    // The naive engine runs the op inline on this thread: the one-core figure.
    const auto best_ms = [] {
      double best = 1e9;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        nd::random_normal({1000, 1000}).wait_to_read();
        best = std::min(best, ms_since(t0));
      }
      return best;
    };
    const int workers = engine().num_workers();
    const double threaded = best_ms();
    configure_engine({EngineKind::kNaive});
    const double one_core = best_ms();
    std::printf(
        "[perf] 1M random_normal: %.2f ms on one core (naive engine), %.2f ms through "
        "the threaded engine (%d workers)\n",
        one_core, threaded, workers);
    SUCCEED();
  });
}
