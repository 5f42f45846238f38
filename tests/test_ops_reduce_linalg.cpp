// [ops] reductions (sum, mean, max, norm; all, axis, keepdims, negative axis), dot/matmul,
// transpose and reshape against tests/reference.h, plus their errors.
#include <cmath>
#include <limits>
#include <string>

#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace ref = asyncnd_ref;

namespace {

struct ReduceCase {
  const char* name;
  ref::Reduce kind;
  NDArray (*all)(const NDArray&);
  NDArray (*axis)(const NDArray&, int, bool);  // null: no axis form (norm)
  double rel;
};

const ReduceCase kReduceCases[] = {
    {"sum", ref::Reduce::kSum, nd::sum, nd::sum, 1e-6},
    {"mean", ref::Reduce::kMean, nd::mean, nd::mean, 1e-6},
    {"max", ref::Reduce::kMax, nd::max, nd::max, 0.0},
    {"norm", ref::Reduce::kNorm, nd::norm, nullptr, 1e-6},
};

// Every reduction of x (shape s) over everything and over each axis (given both ways, negative
// and positive), with and without keepdims.
void check_reductions(Rng& rng, const Shape& s) {
  const auto v = random_values(rng, ref::size_of(s));
  const NDArray x = array_of(v, s);
  const int nd = static_cast<int>(s.size());
  for (const auto& c : kReduceCases) {
    if (c.kind == ref::Reduce::kMax && ref::size_of(s) == 0) continue;  // an error; tested below
    const std::string what = std::string(c.name) + " of " + str(s);
    const NDArray r = c.all(x);
    CHECK(r.shape() == Shape{});
    check_close(r.to_vector(), ref::reduce(v, s, -1, c.kind), c.rel, 1e-6, what);
    if (!c.axis) continue;
    for (int axis = -nd; axis < nd; ++axis) {
      const int pos = axis < 0 ? axis + nd : axis;
      if (c.kind == ref::Reduce::kMax && s[pos] == 0) continue;
      const auto want = ref::reduce(v, s, pos, c.kind);
      for (bool keep : {false, true}) {
        Shape ws = s;
        if (keep) {
          ws[pos] = 1;
        } else {
          ws.erase(ws.begin() + pos);
        }
        const NDArray ra = c.axis(x, axis, keep);
        const std::string w = what + " axis " + std::to_string(axis) + (keep ? " keepdims" : "");
        CHECK(ra.shape() == ws);
        check_close(ra.to_vector(), want, c.rel, 1e-6, w);
      }
    }
  }
}

}  // namespace

TEST_CASE("reductions over everything and over each axis", "[ops][reduce]") {
  leak_checked([] {
    Rng rng(test_seed("reductions"));
    const std::int64_t n = scaled(100000, 100);
    const std::vector<Shape> fixed = {{},        {1},          {7},    {3, 4},
                                      {2, 3, 4}, {2, 1, 3, 1}, {0},    {2, 0, 3},
                                      {n},       {3, n},       {n, 3}, {4, 50, scaled(3000, 10)},
                                      {1, n, 1}};
    for (const auto& s : fixed) check_reductions(rng, s);
    for (int i = 0; i < 60; ++i) check_reductions(rng, random_shape(rng));
  });
}

TEST_CASE("reduction methods, empty axes and NaN", "[ops][reduce]") {
  leak_checked([] {
    const NDArray a = array_of({1, 2, 3, 4, 5, 6}, {2, 3});
    check_exact(a.sum().to_vector(), {21}, "sum()");
    check_exact(a.sum(0).to_vector(), {5, 7, 9}, "sum(0)");
    check_exact(a.sum(-1, true).to_vector(), {6, 15}, "sum(-1, true)");
    CHECK(a.sum(-1, true).shape() == Shape{2, 1});
    check_exact(a.mean().to_vector(), {3.5f}, "mean()");
    check_exact(a.mean(1).to_vector(), {2, 5}, "mean(1)");
    check_exact(a.max().to_vector(), {6}, "max()");
    check_exact(a.max(0, true).to_vector(), {4, 5, 6}, "max(0, true)");
    check_close(a.norm().to_vector(), {static_cast<float>(std::sqrt(91.0))}, 1e-7, 0, "norm()");
    CHECK(a.sum().item() == 21.0f);
    // Empty: sums are 0, means NaN (NumPy), max has no identity (an error, below).
    const NDArray e = nd::zeros({2, 0, 3});
    check_exact(e.sum(1).to_vector(), std::vector<float>(6, 0.0f), "sum over an empty axis");
    CHECK(std::isnan(e.mean().item()));
    CHECK(e.sum(0).shape() == Shape{0, 3});
    CHECK(e.norm().item() == 0.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const NDArray withnan = array_of({1, nan, 3, 4}, {2, 2});
    CHECK(std::isnan(withnan.max().item()));
    const auto cols = withnan.max(0).to_vector();  // max(1, 3), max(nan, 4)
    CHECK(cols[0] == 3.0f);
    CHECK(std::isnan(cols[1]));
  });
}

TEST_CASE("reduction errors name the op, the axis and the shape", "[ops][errors][reduce]") {
  leak_checked([] {
    const NDArray a = nd::ones({3, 4}), s = nd::full({}, 1.0f);
    const NDArray empty;
    expect_error([&] { nd::sum(a, 2); }, {"sum: axis 2 is out of range for [3,4]"});
    expect_error([&] { a.mean(-3); }, {"mean: axis -3 is out of range for [3,4]"});
    expect_error([&] { nd::max(s, 0); }, {"max: axis 0 is out of range for []"});
    expect_error(
        [&] {
          nd::max(nd::zeros({3, 0}), 1);
        },
        {"max: cannot reduce over the empty axis 1 of [3,0]"});
    expect_error([&] { nd::max(nd::zeros({0})); }, {"max: cannot reduce the empty array [0]"});
    expect_error([&] { nd::sum(empty); }, {"sum: array is empty (default-constructed)"});
    expect_error([&] { empty.norm(); }, {"norm: array is empty"});
    check_exact(a.to_vector(), std::vector<float>(12, 1.0f), "a keeps its values");
  });
}

TEST_CASE("dot matches the reference GEMM", "[ops][linalg]") {
  leak_checked([] {
    Rng rng(test_seed("dot"));
    const std::int64_t big = scaled(300, 8);
    struct Dims {
      std::int64_t m, k, n;
    };
    const Dims cases[] = {{1, 1, 1},   {1, 37, 1}, {37, 1, 37},         {1, 64, 50},
                          {50, 64, 1}, {2, 3, 4},  {70, 130, 90},       {3, 0, 4},
                          {0, 3, 4},   {3, 4, 0},  {big, 500, big / 2}, {17, 33, 65}};
    for (const auto& d : cases) {
      const auto av = random_values(rng, d.m * d.k), bv = random_values(rng, d.k * d.n);
      const NDArray a = array_of(av, {d.m, d.k}), b = array_of(bv, {d.k, d.n});
      const NDArray c = nd::dot(a, b);
      const std::string what = "dot " + str(a.shape()) + " @ " + str(b.shape());
      CHECK(c.shape() == Shape{d.m, d.n});
      const auto want = ref::matmul(av, bv, d.m, d.k, d.n);
      const auto mag = ref::matmul_abs(av, bv, d.m, d.k, d.n);
      const auto got = c.to_vector();
      // The classic bound for any summation order: |error| <= k u sum|a||b|, u = 2^-24, plus
      // the final rounding.
      const double u = std::ldexp(1.0, -24);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        if (std::fabs(double(got[i]) - want[i]) > (d.k + 2) * u * mag[i] + 1e-30) ++bad;
      INFO(what);
      CHECK(bad == 0);
      check_exact(nd::matmul(a, b).to_vector(), got, "matmul equals dot: " + what);
    }
    // The product of a matrix with itself (one array read twice) and of a view.
    const auto sv = random_values(rng, 36);
    const NDArray s = array_of(sv, {6, 6});
    check_close(nd::dot(s, s).to_vector(), ref::matmul(sv, sv, 6, 6, 6), 1e-5, 1e-5, "s @ s");
    check_close(nd::dot(s.reshape({4, 9}), s.reshape({9, 4})).to_vector(),
                ref::matmul(sv, sv, 4, 9, 4), 1e-5, 1e-5, "views");
  });
}

TEST_CASE("dot errors name the op and both shapes", "[ops][errors][linalg]") {
  leak_checked([] {
    const NDArray a = nd::ones({2, 3}), b = nd::ones({4, 5}), v = nd::ones({3});
    const NDArray c = nd::ones({3, 2, 1});
    const NDArray empty;
    expect_error([&] { nd::dot(a, b); }, {"dot: inner dimensions differ: a=[2,3] b=[4,5]"});
    expect_error([&] { nd::matmul(a, b); }, {"matmul: inner dimensions differ: a=[2,3] b=[4,5]"});
    expect_error([&] { nd::dot(v, a); }, {"dot: expects 2-D arrays, got a=[3] b=[2,3]"});
    expect_error([&] { nd::dot(a, c); }, {"dot: expects 2-D arrays", "b=[3,2,1]"});
    expect_error([&] { nd::dot(empty, a); }, {"dot: array is empty (default-constructed)"});
    NDArray g = nd::ones({3, 4});
    g.wait_to_read();
    g.chunk()->device = Device::gpu(0);
    expect_error([&] { nd::dot(a, g); }, {"dot: arrays on different devices: cpu(0) and gpu(0)"});
    g.chunk()->device = Device::cpu();
    check_exact(a.to_vector(), std::vector<float>(6, 1.0f), "a keeps its values");
  });
}

TEST_CASE("transpose reverses the axes", "[ops][linalg]") {
  leak_checked([] {
    Rng rng(test_seed("transpose"));
    const std::vector<Shape> shapes = {
        {2, 3},    {1, 7},       {7, 1}, {33, 65}, {scaled(300, 8), 500}, {5}, {},
        {2, 3, 4}, {2, 1, 3, 1}, {0, 3}, {3, 2, 0}};
    for (const auto& s : shapes) {
      const auto v = random_values(rng, ref::size_of(s));
      const NDArray a = array_of(v, s);
      const NDArray t = nd::transpose(a);
      CHECK(t.shape() == Shape(s.rbegin(), s.rend()));
      check_exact(t.to_vector(), ref::transpose(v, s), "transpose " + str(s));
      check_exact(a.T().to_vector(), t.to_vector(), "T() " + str(s));
      check_exact(a.transpose().transpose().to_vector(), v, "twice " + str(s));
    }
    expect_error([] { nd::transpose(NDArray()); }, {"transpose: array is empty"});
    // Empty with more dimensions than a strided plan holds: nothing moves, so no plan (it threw
    // "too many dimensions").
    Shape many(33, 2);
    many.insert(many.begin(), 0);
    CHECK(nd::transpose(nd::zeros(many)).shape() == Shape(many.rbegin(), many.rend()));
  });
}

TEST_CASE("reshape shares storage and infers -1", "[ops][linalg]") {
  leak_checked([] {
    const NDArray a = nd::arange(24.0f).reshape({2, 3, 4});
    auto& eng = engine();
    eng.waitall();
    const auto pushed = eng.stats().pushed;
    const NDArray b = a.reshape({6, -1});
    CHECK(eng.stats().pushed == pushed);  // a view: no op, no copy
    CHECK(b.shape() == Shape{6, 4});
    CHECK(b.var() == a.var());
    CHECK(a.reshape({-1}).shape() == Shape{24});
    CHECK(nd::reshape(a, {4, -1, 3}).shape() == Shape{4, 2, 3});
    CHECK(a.reshape({1, 24, 1}).shape() == Shape{1, 24, 1});
    check_exact(b.to_vector(), a.to_vector(), "same values");
    const NDArray z = nd::zeros({0, 3});
    CHECK(z.reshape({-1}).shape() == Shape{0});
    CHECK(z.reshape({3, -1}).shape() == Shape{3, 0});
    const NDArray s = nd::full({}, 5.0f);
    CHECK(s.reshape({1, 1}).shape() == Shape{1, 1});
    CHECK(s.reshape({-1}).shape() == Shape{1});
    expect_error([&] { a.reshape({5, 5}); }, {"reshape: cannot reshape [2,3,4] into [5,5]"});
    expect_error([&] { a.reshape({-1, 5}); }, {"reshape: cannot reshape [2,3,4] into [-1,5]"});
    expect_error([&] { a.reshape({-1, -1}); }, {"reshape: more than one -1 in [-1,-1]"});
    expect_error([&] { a.reshape({-2, 12}); }, {"reshape: invalid dimension -2 in [-2,12]"});
    expect_error([&] { z.reshape({-1, 0}); }, {"reshape: cannot reshape [0,3] into [-1,0]"});
    expect_error([] { NDArray().reshape({1}); }, {"reshape: array is empty"});
  });
}
