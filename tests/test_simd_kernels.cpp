// The SIMD paths of the elementwise and reduction kernels (kernels/elementwise.h, reduce.h) against
// plain scalar loops over the same functors: lengths 0 to 70 and large, unaligned offsets, in
// place, NaN / -0 / inf inputs. Elementwise results and reductions must match bit for bit (the
// vector paths keep the scalar lanes); sums are also checked against a plain double sum.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "test_util.h"

namespace k = asyncnd::kernels;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Equal bits, or both NaN (the payload of a NaN result is not specified).
bool same(float x, float y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  std::uint32_t a, b;
  std::memcpy(&a, &x, 4);
  std::memcpy(&b, &y, 4);
  return a == b;
}
bool same(double x, double y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  return std::memcmp(&x, &y, sizeof x) == 0;
}

// Random values with, now and then, a special one (NaN, +-inf, +-0, tiny, huge).
std::vector<float> values(std::mt19937_64& rng, std::size_t n, bool specials) {
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  const float special[] = {kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-40f, -1e30f, 1e30f};
  std::vector<float> v(n);
  for (auto& x : v) x = (specials && rng() % 16 == 0) ? special[rng() % 8] : d(rng);
  return v;
}

std::vector<std::size_t> lengths() {
  std::vector<std::size_t> ls;
  for (std::size_t n = 0; n <= 70; ++n) ls.push_back(n);
  ls.push_back(1000);
  ls.push_back(static_cast<std::size_t>(asyncnd_test::scaled(100003, 1001)));
  return ls;
}

// f over [begin, end) of inputs shifted by `off` floats (so vectors start unaligned), against the
// scalar loop; also the in-place form (out == a).
template <class F>
void check_unary(const char* name, F f, std::mt19937_64& rng) {
  for (std::size_t n : lengths()) {
    for (std::size_t off = 0; off < 4; ++off) {
      INFO(name << " n=" << n << " offset=" << off);
      const std::vector<float> a = values(rng, n + off + 4, true);
      std::vector<float> got(n + off + 4, 7.0f), want = got, inplace = a;
      const std::int64_t b = static_cast<std::int64_t>(off), e = b + static_cast<std::int64_t>(n);
      k::unary_contig(a.data(), got.data(), b, e, f);
      k::unary_contig(inplace.data(), inplace.data(), b, e, f);
      for (std::int64_t i = b; i < e; ++i) want[i] = f(a[i]);
      for (std::size_t i = 0; i < got.size(); ++i) {
        const bool in = static_cast<std::int64_t>(i) >= b && static_cast<std::int64_t>(i) < e;
        if (!same(got[i], want[i]) || !same(inplace[i], in ? want[i] : a[i])) {
          FAIL("element " << i << ": got " << got[i] << " (in place " << inplace[i] << "), want "
                          << (in ? want[i] : a[i]) << " from " << a[i]);
        }
      }
    }
  }
}

template <class F>
void check_binary(const char* name, F f, std::mt19937_64& rng) {
  for (std::size_t n : lengths()) {
    for (std::size_t off = 0; off < 4; ++off) {
      INFO(name << " n=" << n << " offset=" << off);
      const std::vector<float> a = values(rng, n + off + 4, true);
      const std::vector<float> bv = values(rng, n + 8, true);
      const float* pb = bv.data() + (3 - off);  // a different misalignment than a
      std::vector<float> got(n + off + 4, 7.0f), want = got;
      const std::int64_t b = static_cast<std::int64_t>(off), e = b + static_cast<std::int64_t>(n);
      k::binary_contig(a.data(), pb, got.data(), b, e, f);
      for (std::int64_t i = b; i < e; ++i) want[i] = f(a[i], pb[i]);
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (!same(got[i], want[i]))
          FAIL("element " << i << ": got " << got[i] << ", want " << want[i]);
      }
    }
  }
}

// The scalar reduce_row: element i to lane i % 8, the tail to lane 0, merged as a tree.
template <class A>
typename A::T scalar_row(const float* x, std::int64_t n) {
  typename A::T acc[8];
  for (auto& v : acc) v = A::init();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] = A::step(acc[j], x[i + j]);
  for (; i < n; ++i) acc[0] = A::step(acc[0], x[i]);
  return A::merge(A::merge(A::merge(acc[0], acc[1]), A::merge(acc[2], acc[3])),
                  A::merge(A::merge(acc[4], acc[5]), A::merge(acc[6], acc[7])));
}

}  // namespace

TEST_CASE("SIMD elementwise kernels match scalar loops", "[kernels][simd]") {
  std::mt19937_64 rng(asyncnd_test::test_seed("SIMD elementwise"));
  check_binary("add", k::AddOp{}, rng);
  check_binary("sub", k::SubOp{}, rng);
  check_binary("mul", k::MulOp{}, rng);
  check_binary("div", k::DivOp{}, rng);
  check_unary("neg", k::NegOp{}, rng);
  check_unary("relu", k::ReluOp{}, rng);
  check_unary("square", k::SquareOp{}, rng);
  check_unary("copy", k::CopyOp{}, rng);
  check_unary("add scalar", k::BindRight<k::AddOp>{{}, 1.5f}, rng);
  check_unary("scalar sub", k::BindLeft<k::SubOp>{{}, -2.0f}, rng);
  check_unary("mul scalar", k::BindRight<k::MulOp>{{}, 0.25f}, rng);
  check_unary("scalar div", k::BindLeft<k::DivOp>{{}, 3.0f}, rng);
  check_unary("div scalar", k::BindRight<k::DivOp>{{}, 0.0f}, rng);  // inf and NaN results
  check_unary("exp (scalar path)", k::ExpOp{}, rng);
}

// relu(-0) is +0, as NumPy's maximum(-0, 0) and as a max instruction gives it: with `a < 0 ? 0 :
// a` GCC kept -0 and clang (WebAssembly, AArch64) gave +0.
TEST_CASE("relu keeps NaN and gives +0 for -0 as the scalar functor does", "[kernels][simd]") {
  const std::vector<float> a = {kNaN, -0.0f, 0.0f, -1.0f, 2.0f, -kInf, kInf, 1e-40f};
  std::vector<float> out(a.size());
  k::unary_contig(a.data(), out.data(), 0, static_cast<std::int64_t>(a.size()), k::ReluOp{});
  CHECK(std::isnan(out[0]));
  CHECK(out[1] == 0.0f);
  CHECK_FALSE(std::signbit(out[1]));
  CHECK_FALSE(std::signbit(k::ReluOp{}(-0.0f)));
  CHECK(out[3] == 0.0f);
  CHECK_FALSE(std::signbit(out[3]));
  CHECK(out[4] == 2.0f);
  CHECK(out[5] == 0.0f);
  CHECK(out[6] == kInf);
  CHECK(out[7] == 1e-40f);
}

TEST_CASE("broadcast runs use the SIMD loops with the same results", "[kernels][simd]") {
  std::mt19937_64 rng(asyncnd_test::test_seed("SIMD broadcast runs"));
  // [5, 37] op [37] and [5, 1] op [5, 37]: runs with b advancing, a fixed, and both advancing.
  for (auto dims : {std::vector<std::int64_t>{5, 37}, std::vector<std::int64_t>{3, 64}}) {
    const std::int64_t rows = dims[0], cols = dims[1], n = rows * cols;
    const std::vector<float> full = values(rng, static_cast<std::size_t>(n), true);
    const std::vector<float> row = values(rng, static_cast<std::size_t>(cols), true);
    const std::vector<float> col = values(rng, static_cast<std::size_t>(rows), true);
    const auto p1 = k::make_plan(dims, {cols, 1}, {0, 1});  // full op row
    const auto p2 = k::make_plan(dims, {1, 0}, {cols, 1});  // col op full
    std::vector<float> got(n), want(n);
    for (std::int64_t b : {std::int64_t{0}, std::int64_t{3}}) {
      k::binary_strided(p1.view(), full.data(), row.data(), got.data(), b, n, k::SubOp{});
      for (std::int64_t i = b; i < n; ++i) want[i] = full[i] - row[i % cols];
      for (std::int64_t i = b; i < n; ++i) REQUIRE(same(got[i], want[i]));
      k::binary_strided(p2.view(), col.data(), full.data(), got.data(), b, n, k::DivOp{});
      for (std::int64_t i = b; i < n; ++i) want[i] = col[i / cols] / full[i];
      for (std::int64_t i = b; i < n; ++i) REQUIRE(same(got[i], want[i]));
    }
  }
}

TEST_CASE("SIMD reductions match the scalar lanes bit for bit", "[kernels][simd]") {
  std::mt19937_64 rng(asyncnd_test::test_seed("SIMD reductions"));
  for (std::size_t n : lengths()) {
    for (std::size_t off = 0; off < 4; ++off) {
      for (bool specials : {false, true}) {
        INFO("n=" << n << " offset=" << off << " specials=" << specials);
        const std::vector<float> v = values(rng, n + off, specials);
        const float* x = v.data() + off;
        const auto len = static_cast<std::int64_t>(n);
        CHECK(same(k::reduce_row<k::SumAcc>(x, len), scalar_row<k::SumAcc>(x, len)));
        CHECK(same(k::reduce_row<k::SumSqAcc>(x, len), scalar_row<k::SumSqAcc>(x, len)));
        CHECK(same(k::reduce_row<k::MaxAcc>(x, len), scalar_row<k::MaxAcc>(x, len)));
        if (!specials) {
          // Against a plain sequential double sum: the lanes change the order, not the precision.
          // The bound of a recursive double sum: n * eps * sum |x|, for each of the two orders.
          double plain = 0, plain_sq = 0, abs_sum = 0;
          float mx = -kInf;
          for (std::int64_t i = 0; i < len; ++i) {
            plain += x[i];
            plain_sq += double(x[i]) * x[i];
            abs_sum += std::fabs(x[i]);
            mx = x[i] > mx ? x[i] : mx;
          }
          const double tol = 2 * 2.3e-16 * (static_cast<double>(n) + 1);
          CHECK(std::fabs(k::reduce_row<k::SumAcc>(x, len) - plain) <= tol * abs_sum);
          CHECK(std::fabs(k::reduce_row<k::SumSqAcc>(x, len) - plain_sq) <= tol * plain_sq);
          CHECK(k::reduce_row<k::MaxAcc>(x, len) == mx);
        }
      }
    }
  }
}

TEST_CASE("max reduction lets NaN win wherever it is", "[kernels][simd]") {
  for (std::int64_t n : {1, 5, 8, 9, 16, 33}) {
    for (std::int64_t at = 0; at < n; ++at) {
      std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
      v[at] = kNaN;
      INFO("n=" << n << " NaN at " << at);
      CHECK(std::isnan(k::reduce_row<k::MaxAcc>(v.data(), n)));
    }
  }
}

TEST_CASE("SIMD column reductions match scalar loops", "[kernels][simd]") {
  std::mt19937_64 rng(asyncnd_test::test_seed("SIMD column reductions"));
  for (std::int64_t inner : {1, 3, 4, 7, 8, 13, 64, 70}) {
    for (std::int64_t n : {0, 1, 5, 17}) {
      const std::vector<float> x = values(rng, static_cast<std::size_t>(n * inner + 1), true);
      for (std::int64_t i0 : {std::int64_t{0}, std::int64_t{1}}) {
        if (i0 >= inner) continue;
        INFO("inner=" << inner << " n=" << n << " i0=" << i0);
        std::vector<double> sum(static_cast<std::size_t>(inner)), sq(sum.size());
        std::vector<float> mx(sum.size());
        k::reduce_cols<k::SumAcc>(x.data(), n, inner, i0, inner, sum.data());
        k::reduce_cols<k::SumSqAcc>(x.data(), n, inner, i0, inner, sq.data());
        k::reduce_cols<k::MaxAcc>(x.data(), n, inner, i0, inner, mx.data());
        for (std::int64_t i = i0; i < inner; ++i) {
          double s = k::SumAcc::init(), q = k::SumSqAcc::init();
          float m = k::MaxAcc::init();
          for (std::int64_t r = 0; r < n; ++r) {
            s = k::SumAcc::step(s, x[r * inner + i]);
            q = k::SumSqAcc::step(q, x[r * inner + i]);
            m = k::MaxAcc::step(m, x[r * inner + i]);
          }
          CHECK(same(sum[i - i0], s));
          CHECK(same(sq[i - i0], q));
          CHECK(same(mx[i - i0], m));
        }
      }
    }
  }
}

// Below a = -88.7, e^-a overflows float: 1 / (1 + e^-a) gave 0 where the result is a subnormal.
TEST_CASE("sigmoid's negative tail keeps its subnormals", "[kernels]") {
  for (float a : {-88.0f, -88.73f, -95.0f, -100.0f, -103.9f, -5.0f, -1e-5f, 0.0f, 3.0f, 90.0f}) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(a)));
    const float got = k::SigmoidOp{}(a);
    INFO("sigmoid(" << a << ") = " << got << ", want " << want);
    CHECK(got > 0.0f);
    // Within 2 ulps of the float nearest the true value, or of its subnormal step.
    const float near = static_cast<float>(want);
    CHECK(std::fabs(got - near) <= 2.0f * (std::nextafter(near, 2.0f) - near));
  }
  CHECK(k::SigmoidOp{}(-kInf) == 0.0f);
  CHECK(k::SigmoidOp{}(kInf) == 1.0f);
  CHECK(std::isnan(k::SigmoidOp{}(kNaN)));
}
