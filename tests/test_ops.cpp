// [ops] elementwise: every binary, scalar, unary and in-place op against tests/reference.h, on
// fixed and seeded random shapes with NumPy broadcasting, plus their errors.
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace ref = asyncnd_ref;

namespace {

struct BinaryCase {
  const char* name;
  NDArray (*op)(const NDArray&, const NDArray&);
  NDArray (*oper)(const NDArray&, const NDArray&);  // the operator form, or null
  std::function<double(double, double)> ref;
  double rel;               // 0: exact (a float op computed in double then rounded is exact)
  bool positive_a = false;  // pow: real results only
};

const std::vector<BinaryCase>& binary_cases() {
  static const std::vector<BinaryCase> cases = {
      {"add", nd::add, [](const NDArray& a, const NDArray& b) { return a + b; },
       [](double a, double b) { return a + b; }, 0.0},
      {"sub", nd::sub, [](const NDArray& a, const NDArray& b) { return a - b; },
       [](double a, double b) { return a - b; }, 0.0},
      {"mul", nd::mul, [](const NDArray& a, const NDArray& b) { return a * b; },
       [](double a, double b) { return a * b; }, 0.0},
      {"div", nd::div, [](const NDArray& a, const NDArray& b) { return a / b; },
       [](double a, double b) { return a / b; }, 0.0},
      {"pow", nd::pow, nullptr, [](double a, double b) { return std::pow(a, b); }, 2e-6, true},
  };
  return cases;
}

void check_binary_shapes(Rng& rng, const Shape& as, const Shape& bs) {
  const auto a = random_values(rng, ref::size_of(as));
  auto b = random_values(rng, ref::size_of(bs));
  for (const auto& c : binary_cases()) {
    auto av = a;
    if (c.positive_a)
      for (auto& x : av) x = std::fabs(x) + 0.1f;
    const NDArray x = array_of(av, as), y = array_of(b, bs);
    const NDArray z = c.op(x, y);
    const std::string what = std::string(c.name) + " " + str(as) + " " + str(bs);
    CHECK(z.shape() == ref::broadcast(as, bs));
    const auto want = ref::binary(av, as, b, bs, c.ref);
    check_close(z.to_vector(), want, c.rel, 0.0, what);
    if (c.oper) check_exact(c.oper(x, y).to_vector(), z.to_vector(), what + " (operator)");
  }
}

}  // namespace

TEST_CASE("binary ops broadcast like NumPy: fixed shapes", "[ops][elementwise]") {
  leak_checked([] {
    Rng rng(test_seed("binary fixed shapes"));
    const std::int64_t big = scaled(1000, 10);
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{3, 1}, {1, 4}},
        {{2, 3, 4}, {4}},
        {{4}, {2, 3, 4}},
        {{}, {2, 3}},
        {{2, 3}, {}},
        {{}, {}},
        {{2, 1, 3}, {4, 1}},
        {{1}, {5}},
        {{1, 1}, {1}},
        {{5, 1, 1, 3}, {1, 4, 2, 1}},
        {{0, 3}, {3}},
        {{2, 0}, {2, 1}},
        {{0}, {1}},
        {{3, 4}, {3, 4}},
        {{1, 3, 1}, {2, 1, 4}},
        {{300, big}, {big}},
        {{big, 1}, {1, 300}},
        {{300 * big}, {1}},
        {{1}, {300 * big}},
        {{512, big}, {512, big}},
        {{7, big, 3}, {7, 1, 3}},
    };
    for (const auto& [as, bs] : cases) check_binary_shapes(rng, as, bs);
  });
}

TEST_CASE("binary ops broadcast like NumPy: seeded random shapes", "[ops][elementwise]") {
  leak_checked([] {
    Rng rng(test_seed("binary random shapes"));
    for (int i = 0; i < 150; ++i) {
      const auto [as, bs] = random_broadcast_pair(rng, /*allow_zero=*/true);
      check_binary_shapes(rng, as, bs);
    }
  });
}

TEST_CASE("scalar operands on either side", "[ops][elementwise]") {
  leak_checked([] {
    Rng rng(test_seed("scalar operands"));
    const std::vector<Shape> shapes = {{}, {7}, {3, 4}, {0, 2}, {scaled(1000, 10), 300}};
    for (const auto& s : shapes) {
      const auto v = random_values(rng, ref::size_of(s));
      std::vector<float> pos(v);
      for (auto& x : pos) x = std::fabs(x) + 0.1f;
      const NDArray a = array_of(v, s), p = array_of(pos, s);
      const float k = 1.75f;
      const std::string at = " on " + str(s);
      auto u = [&](const std::vector<float>& in, std::function<double(double)> f) {
        return ref::unary(in, std::move(f));
      };
      check_exact(nd::add(a, k).to_vector(), u(v, [&](double x) { return x + k; }), "add" + at);
      check_exact(nd::sub(a, k).to_vector(), u(v, [&](double x) { return x - k; }), "sub" + at);
      check_exact(nd::mul(a, k).to_vector(), u(v, [&](double x) { return x * k; }), "mul" + at);
      check_exact(nd::div(a, k).to_vector(), u(v, [&](double x) { return x / k; }), "div" + at);
      check_exact((a + k).to_vector(), nd::add(a, k).to_vector(), "a + k" + at);
      check_exact((a - k).to_vector(), nd::sub(a, k).to_vector(), "a - k" + at);
      check_exact((a * k).to_vector(), nd::mul(a, k).to_vector(), "a * k" + at);
      check_exact((a / k).to_vector(), nd::div(a, k).to_vector(), "a / k" + at);
      check_exact((k + a).to_vector(), u(v, [&](double x) { return k + x; }), "k + a" + at);
      check_exact((k - a).to_vector(), u(v, [&](double x) { return k - x; }), "k - a" + at);
      check_exact((k * a).to_vector(), u(v, [&](double x) { return k * x; }), "k * a" + at);
      check_exact((k / a).to_vector(), u(v, [&](double x) { return k / x; }), "k / a" + at);
      for (float e : {2.0f, 1.0f, 0.5f, 3.0f, -1.5f, 0.0f}) {
        const std::string w = "pow " + std::to_string(e) + at;
        check_close(nd::pow(p, e).to_vector(), u(pos, [&](double x) { return std::pow(x, e); }),
                    2e-6, 0.0, w);
        check_exact(p.pow(e).to_vector(), nd::pow(p, e).to_vector(), w + " (member)");
      }
    }
  });
}

TEST_CASE("unary ops match the reference, special values included", "[ops][elementwise]") {
  leak_checked([] {
    Rng rng(test_seed("unary ops"));
    struct Case {
      const char* name;
      NDArray (*op)(const NDArray&);
      NDArray (NDArray::*member)() const;
      double (*ref)(double);
      double rel, abs;
      float lo, hi;
    };
    const Case cases[] = {
        {"neg", nd::neg, nullptr, [](double x) { return -x; }, 0, 0, -5, 5},
        {"exp", nd::exp, &NDArray::exp, [](double x) { return std::exp(x); }, 1e-6, 0, -20, 20},
        {"log", nd::log, &NDArray::log, [](double x) { return std::log(x); }, 1e-6, 1e-7, 1e-3f,
         50},
        {"sqrt", nd::sqrt, &NDArray::sqrt, [](double x) { return std::sqrt(x); }, 0, 0, 0, 50},
        {"relu", nd::relu, &NDArray::relu, [](double x) { return x < 0 ? 0.0 : x; }, 0, 0, -5, 5},
        {"sigmoid", nd::sigmoid, &NDArray::sigmoid,
         [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 1e-6, 1e-30, -30, 30},
        {"tanh", nd::tanh, &NDArray::tanh, [](double x) { return std::tanh(x); }, 1e-6, 1e-7, -8,
         8},
    };
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> specials = {0.0f, -0.0f, 1.0f, -1.0f, 100.0f, -100.0f, inf, -inf, nan};
    for (const auto& c : cases) {
      for (const Shape& s :
           {Shape{}, Shape{5}, Shape{3, 0}, Shape{4, 33}, Shape{scaled(1000000, 100)}}) {
        const auto v = random_values(rng, ref::size_of(s), c.lo, c.hi);
        const NDArray a = array_of(v, s);
        const NDArray r = c.op(a);
        CHECK(r.shape() == s);
        check_close(r.to_vector(), ref::unary(v, c.ref), c.rel, c.abs,
                    std::string(c.name) + str(s));
        if (c.member) check_exact((a.*c.member)().to_vector(), r.to_vector(), c.name);
      }
      const NDArray sp = array_of(specials, {static_cast<std::int64_t>(specials.size())});
      check_close(c.op(sp).to_vector(), ref::unary(specials, c.ref), c.rel, c.abs,
                  std::string(c.name) + " on 0, -0, 1, -1, 100, -100, inf, -inf, nan");
    }
    check_exact((-array_of({1, -2}, {2})).to_vector(), {-1, 2}, "unary minus");
  });
}

TEST_CASE("compound assignments write in place", "[ops][elementwise]") {
  leak_checked([] {
    Rng rng(test_seed("compound assignments"));
    const auto av = random_values(rng, 12), bv = random_values(rng, 4), cv = random_values(rng, 3);
    using F = std::function<double(double, double)>;
    const F add = [](double x, double y) { return x + y; };
    const F sub = [](double x, double y) { return x - y; };
    const F mul = [](double x, double y) { return x * y; };
    const F div = [](double x, double y) { return x / y; };
    NDArray a = array_of(av, {3, 4});
    const Var var = a.var();
    NDArray& same = (a += array_of(bv, {4}));
    CHECK(&same == &a);
    CHECK(a.var() == var);  // the same storage, written in place
    auto want = ref::binary(av, {3, 4}, bv, {4}, add);
    check_exact(a.to_vector(), want, "+= [4]");
    a -= array_of(cv, {3, 1});
    want = ref::binary(want, {3, 4}, cv, {3, 1}, sub);
    check_exact(a.to_vector(), want, "-= [3,1]");
    a *= array_of(bv, {1, 4});
    want = ref::binary(want, {3, 4}, bv, {1, 4}, mul);
    check_exact(a.to_vector(), want, "*= [1,4]");
    a /= array_of({2.5f}, {});
    want = ref::binary(want, {3, 4}, {2.5f}, {}, div);
    check_exact(a.to_vector(), want, "/= []");
    a += 1.5f;
    a -= 0.25f;
    a *= 3.0f;
    a /= 7.0f;
    want =
        ref::unary(want, [](double x) { return float(float(float(x + 1.5) - 0.25) * 3.0) / 7.0; });
    check_exact(a.to_vector(), want, "scalar compound assignments");
    a += a;  // reads and writes the same variable
    want = ref::unary(want, [](double x) { return x + x; });
    check_exact(a.to_vector(), want, "a += a");
    NDArray view = a.reshape({2, 6});  // shares storage: writing the view changes a
    view *= 2.0f;
    want = ref::unary(want, [](double x) { return x * 2; });
    check_exact(a.to_vector(), want, "a view written in place");
    NDArray row = nd::ones({1, 5});
    row -= row.reshape({5});  // a view of itself, broadcast to its own shape
    check_exact(row.to_vector(), std::vector<float>(5, 0.0f), "row -= row.reshape({5})");
    const std::int64_t n = scaled(1000000, 100);
    const auto big = random_values(rng, n), col = random_values(rng, 1000);
    NDArray x = array_of(big, {n / 1000, 1000});
    x += array_of(col, {1000});
    check_exact(x.to_vector(), ref::binary(big, {n / 1000, 1000}, col, {1000}, add), "large +=");
  });
}

TEST_CASE("a chain of ops, and an op reading a failed array", "[ops][elementwise]") {
  leak_checked([] {
    // E2: z = x * y + 2.
    const NDArray x = nd::ones({1, 2}), y = nd::ones({1, 2});
    const NDArray z = x * y + 2;
    check_exact(z.to_vector(), {3, 3}, "x * y + 2");
    // An op whose input was poisoned is skipped, and its output carries the original error.
    NDArray a = nd::ones({4});
    engine().push([] { throw Error("boom: injected failure"); }, {}, {a.var()},
                  PushOptions{Device{}, 0, "inject"});
    NDArray b = a + 1;
    NDArray c = nd::exp(b);
    CHECK_THROWS_WITH(c.to_vector(), Catch::Contains("boom: injected failure"));
    CHECK_THROWS_WITH(a.wait_to_read(), Catch::Contains("boom: injected failure"));
    try {
      engine().waitall();
    } catch (const Error&) {
    }
    check_exact(z.to_vector(), {3, 3}, "an unrelated array keeps its values");
  });
}

TEST_CASE("elementwise errors name the op and the shapes, and queue nothing", "[ops][errors]") {
  leak_checked([] {
    const NDArray a = nd::full({3, 4}, 2.0f), b = nd::ones({5, 4}), c = nd::ones({2});
    NDArray target = nd::ones({3, 1});
    const NDArray empty;
    expect_error([&] { nd::add(a, b); }, {"add: cannot broadcast [3,4] with [5,4]"});
    expect_error([&] { (void)(a - b); }, {"sub: cannot broadcast [3,4] with [5,4]"});
    expect_error([&] { (void)(a * b); }, {"mul: cannot broadcast [3,4] with [5,4]"});
    expect_error([&] { (void)(b / a); }, {"div: cannot broadcast [5,4] with [3,4]"});
    expect_error([&] { nd::pow(a, c); }, {"pow: cannot broadcast [3,4] with [2]"});
    // The public shape rule refuses what no array has (it gave [-1] for [-1] with [1]).
    expect_error([] { nd::broadcast_shapes({-1}, {1}); }, {"broadcast: negative dimension in [-1]"});
    expect_error([] { nd::broadcast_shapes({2}, {-3, 2}, "mine"); },
                 {"mine: negative dimension in [-3,2]"});
    expect_error([&] { target += a; },
                 {"+=: cannot broadcast [3,4] into the target's shape [3,1]"});
    expect_error([&] { target *= b; }, {"*=: cannot broadcast [3,1] with [5,4]"});
    expect_error([&] { nd::add(empty, a); }, {"add: array is empty (default-constructed)"});
    expect_error([&] { (void)(a / empty); }, {"div: array is empty (default-constructed)"});
    expect_error([&] { (void)(empty + 1.0f); }, {"add: array is empty"});
    expect_error([&] { (void)(2.0f - empty); }, {"sub: array is empty"});
    expect_error([&] { nd::exp(empty); }, {"exp: array is empty"});
    expect_error([&] { (void)(-empty); }, {"neg: array is empty"});
    expect_error(
        [&] {
          NDArray e;
          e += 1.0f;
        },
        {"+=: array is empty"});
    // An array on another device, without one: relabel a chunk as on a GPU that does not exist.
    NDArray g = nd::ones({3, 4});
    g.wait_to_read();
    g.chunk()->device = Device::gpu(kAbsentGpu);
    expect_error([&] { nd::add(a, g); },
                 {"add: arrays on different devices: cpu(0) and gpu(4000)"});
    expect_error([&] { nd::pow(g, a); },
                 {"pow: arrays on different devices: gpu(4000) and cpu(0)"});
    expect_error([&] { target -= g; }, {"-=: arrays on different devices"});
    expect_error([&] { nd::exp(g); }, {"exp: no device gpu(4000)"});
    g.chunk()->device = Device::cpu();
    check_exact(a.to_vector(), std::vector<float>(12, 2.0f), "a keeps its values");
    check_exact(target.to_vector(), std::vector<float>(3, 1.0f), "the target keeps its values");
  });
}
