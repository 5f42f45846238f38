// Helpers for the [ops] tests: leak checks, error checks that also prove nothing was queued,
// seeded random data and shapes, and comparisons against tests/reference.h.
#pragma once

#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/chunk.h"  // core/src: tests relabel a chunk's device
#include "reference.h"
#include "test_util.h"

namespace asyncnd_test {

using asyncnd::NDArray;
using asyncnd::Shape;
using Rng = std::mt19937_64;

// Runs body, then checks that once every array it made is gone and all work has finished, the
// engine holds no more bytes than before and nothing is pending.
template <class F>
void leak_checked(F&& body) {
  asyncnd::engine().waitall();
  const auto before = asyncnd::engine().stats().bytes_in_use;
  body();
  asyncnd::engine().waitall();
  const auto after = asyncnd::engine().stats();
  CHECK(after.bytes_in_use == before);
  CHECK(after.pending == 0);
}

// Expects call() to throw asyncnd::Error whose message contains every fragment, having queued
// nothing and allocated nothing.
template <class F>
void expect_error(F&& call, std::initializer_list<std::string> fragments) {
  auto& eng = asyncnd::engine();
  eng.waitall();
  const auto before = eng.stats();
  std::string what;
  try {
    call();
  } catch (const asyncnd::Error& e) {
    what = e.what();
  }
  INFO("message: " << what);
  REQUIRE_FALSE(what.empty());
  for (const auto& f : fragments) CHECK(what.find(f) != std::string::npos);
  eng.waitall();
  const auto after = eng.stats();
  CHECK(after.pushed == before.pushed);
  CHECK(after.bytes_in_use == before.bytes_in_use);
}

inline std::vector<float> random_values(Rng& rng, std::int64_t n, float lo = -2.0f,
                                        float hi = 2.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

inline NDArray array_of(const std::vector<float>& v, const Shape& s) {
  return asyncnd::nd::from_vector(v, s);
}

// Two shapes that broadcast: a random output shape (0 to 4 dims of 1 to 5, or 0 when
// allow_zero), each operand with some dims set to 1 and maybe fewer leading dims.
inline std::pair<Shape, Shape> random_broadcast_pair(Rng& rng, bool allow_zero = false) {
  const int nd = static_cast<int>(rng() % 5);
  Shape a, b;
  for (int d = 0; d < nd; ++d) {
    std::int64_t dim = 1 + static_cast<std::int64_t>(rng() % 5);
    if (allow_zero && rng() % 8 == 0) dim = 0;
    const int which = static_cast<int>(rng() % 3);
    a.push_back(which == 1 ? 1 : dim);
    b.push_back(which == 2 ? 1 : dim);
  }
  if (rng() % 3 == 0 && !a.empty()) a.erase(a.begin(), a.begin() + rng() % (a.size() + 1));
  if (rng() % 3 == 0 && !b.empty()) b.erase(b.begin(), b.begin() + rng() % (b.size() + 1));
  return {a, b};
}

inline Shape random_shape(Rng& rng, int max_nd = 4, std::int64_t max_dim = 6) {
  Shape s(rng() % static_cast<unsigned>(max_nd + 1));
  for (auto& d : s) d = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(max_dim));
  return s;
}

inline std::string str(const Shape& s) { return asyncnd::shape_str(s); }

// |got - want| <= abs + rel * |want| elementwise (NaN matches NaN, inf matches the same inf);
// one CHECK per call, describing the first mismatch.
inline void check_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                        double abs, const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= abs + rel * std::fabs(w);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad) {
    INFO(bad << " of " << got.size() << " differ; first at " << first << ": got " << got[first]
             << " want " << want[first]);
    CHECK(bad == 0);
  } else {
    CHECK(bad == 0);
  }
}

inline void check_exact(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  check_close(got, want, 0.0, 0.0, what);
}

// Bitwise equality (distinguishes -0 from 0 and NaN payloads): for determinism tests.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::uint32_t x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    if (x != y) return false;
  }
  return true;
}

// Restores the process-wide engine's configuration (from the environment) when it goes out of
// scope, so a test that reconfigures it cannot leak its choice into the next test.
struct EngineConfigGuard {
  EngineConfigGuard() = default;
  EngineConfigGuard(const EngineConfigGuard&) = delete;
  EngineConfigGuard& operator=(const EngineConfigGuard&) = delete;
  ~EngineConfigGuard() {
    try {
      asyncnd::configure_engine(asyncnd::EngineOptions::from_env());
    } catch (...) {
    }
  }
};

}  // namespace asyncnd_test
