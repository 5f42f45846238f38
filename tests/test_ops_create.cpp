// [ops] creation (zeros, ones, full, empty, arange, from_vector), copies, the blocking reads
// (to_vector, item, printing), and that the naive and threaded engines compute the same bits.
#include <limits>
#include <sstream>
#include <string>

#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;
namespace ref = asyncnd_ref;

TEST_CASE("zeros, ones, full, empty", "[ops][create]") {
  leak_checked([] {
    for (const Shape& s :
         {Shape{}, Shape{3}, Shape{2, 3}, Shape{0, 4}, Shape{scaled(1000, 10), 1000}}) {
      const auto n = static_cast<std::size_t>(ref::size_of(s));
      const NDArray z = nd::zeros(s), o = nd::ones(s), f = nd::full(s, -2.5f), e = nd::empty(s);
      CHECK(z.shape() == s);
      CHECK(e.shape() == s);
      CHECK(z.size() == static_cast<std::int64_t>(n));
      CHECK(z.nbytes() == n * sizeof(float));
      CHECK(z.device() == Device::cpu());
      check_exact(z.to_vector(), std::vector<float>(n, 0.0f), "zeros " + str(s));
      check_exact(o.to_vector(), std::vector<float>(n, 1.0f), "ones " + str(s));
      check_exact(f.to_vector(), std::vector<float>(n, -2.5f), "full " + str(s));
    }
    CHECK(NDArray().size() == 0);
    CHECK_FALSE(NDArray().defined());
  });
}

TEST_CASE("arange follows NumPy", "[ops][create]") {
  leak_checked([] {
    check_exact(nd::arange(5.0f).to_vector(), {0, 1, 2, 3, 4}, "arange(5)");
    check_exact(nd::arange(1, 2, 0.25f).to_vector(), {1, 1.25f, 1.5f, 1.75f}, "arange(1, 2, .25)");
    check_exact(nd::arange(5, 0, -1.5f).to_vector(), {5, 3.5f, 2, 0.5f}, "negative step");
    CHECK(nd::arange(0, 1, 0.1f).size() == 10);
    CHECK(nd::arange(0, 0).shape() == Shape{0});
    CHECK(nd::arange(3, 1).shape() == Shape{0});
    CHECK(nd::arange(-2.5f).shape() == Shape{0});
    const std::int64_t n = scaled(1000000, 100);
    const auto big = nd::arange(static_cast<float>(n)).to_vector();
    std::vector<float> want(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) want[i] = static_cast<float>(i);
    check_exact(big, want, "arange(n)");
    // Counted from the arguments as given: rounded to float first, these counted 16777216, 8
    // and 0 (and the last step was "zero").
    CHECK(nd::arange(0, 16777217).size() == 16777217);
    CHECK(nd::arange(1e8, 1e8 + 10).size() == 10);
    expect_error([] { nd::arange(0, 1, 1e-46); }, {"arange", "too many elements", "step=1e-46"});
    expect_error([] { nd::arange(0, 1, 0); }, {"arange: step must be non-zero"});
    expect_error([] { nd::arange(0, std::numeric_limits<float>::infinity()); },
                 {"arange: start, stop and step must be finite", "stop=inf"});
  });
}

TEST_CASE("from_vector, copy and copy_to", "[ops][create]") {
  leak_checked([] {
    const NDArray a = nd::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(a.shape() == Shape{2, 3});
    check_exact(a.to_vector(), {1, 2, 3, 4, 5, 6}, "from_vector");
    CHECK(nd::from_vector({7}, {}).item() == 7.0f);
    CHECK(nd::from_vector({}, {0, 5}).shape() == Shape{0, 5});
    NDArray c = a.copy();
    CHECK(c.var() != a.var());
    c += 10.0f;
    check_exact(a.to_vector(), {1, 2, 3, 4, 5, 6}, "the original after writing the copy");
    check_exact(c.to_vector(), {11, 12, 13, 14, 15, 16}, "the copy");
    check_exact(nd::copy_to(a, Device::cpu()).to_vector(), a.to_vector(), "copy_to(cpu)");
    check_exact(a.copy_to(Device{}).to_vector(), a.to_vector(), "member copy_to");
    expect_error(
        [] {
          nd::from_vector({1, 2, 3, 4, 5}, {2, 3});
        },
        {"from_vector: 5 values do not fill shape [2,3] (6 elements)"});
    expect_error(
        [] {
          nd::from_vector({}, {2, -1});
        },
        {"from_vector: shape [2,-1] has a negative dimension"});
    expect_error([] { nd::zeros({-1}); }, {"zeros: shape [-1] has a negative dimension"});
    expect_error([] { nd::full({3, -2}, 1.0f); }, {"full: shape [3,-2]"});
    expect_error([] { nd::ones({2}, Device::gpu(kAbsentGpu)); }, {"ones: no device gpu(4000)"});
    expect_error([] { nd::zeros({2}, Device::gpu(kAbsentGpu + 1)); },
                 {"zeros: no device gpu(4001)"});
    expect_error([&] { nd::copy_to(a, Device::gpu(kAbsentGpu)); },
                 {"copy_to: no device gpu(4000)"});
    expect_error([] { nd::copy_to(NDArray(), Device::cpu()); }, {"copy_to: array is empty"});
    expect_error([] { NDArray().copy(); }, {"copy: array is empty"});
    check_exact(a.to_vector(), {1, 2, 3, 4, 5, 6}, "a keeps its values");
  });
}

TEST_CASE("to_vector, item and printing block and format", "[ops][print]") {
  leak_checked([] {
    const auto text = [](const NDArray& a) {
      std::ostringstream s;
      s << a;
      return s.str();
    };
    CHECK(text(nd::ones({1, 2}) * 3) == "[[3, 3]] <NDArray 1x2 cpu(0)>");
    CHECK(text(nd::arange(6.0f).reshape({2, 3})) ==
          "[[0, 1, 2],\n [3, 4, 5]] <NDArray 2x3 cpu(0)>");
    CHECK(text(nd::arange(8.0f).reshape({2, 2, 2})) ==
          "[[[0, 1],\n  [2, 3]],\n\n [[4, 5],\n  [6, 7]]] <NDArray 2x2x2 cpu(0)>");
    CHECK(text(nd::full({}, 2.5f)) == "2.5 <NDArray scalar cpu(0)>");
    CHECK(text(nd::zeros({0, 3})) == "[] <NDArray 0x3 cpu(0)>");
    CHECK(text(nd::from_vector({0.5f, -1e-7f, 1234567.0f}, {3})) ==
          "[0.5, -1e-07, 1.23457e+06] <NDArray 3 cpu(0)>");
    CHECK(text(nd::arange(2000.0f)) == "[0, 1, 2, ..., 1997, 1998, 1999] <NDArray 2000 cpu(0)>");
    CHECK(text(nd::arange(4000.0f).reshape({1000, 4})) ==
          "[[0, 1, 2, 3],\n [4, 5, 6, 7],\n [8, 9, 10, 11],\n ...,\n [3988, 3989, 3990, 3991],\n"
          " [3992, 3993, 3994, 3995],\n [3996, 3997, 3998, 3999]] <NDArray 1000x4 cpu(0)>");
    // Summarised blocks: a blank line on both sides of the "...", as NumPy (it had one before).
    CHECK(text(nd::arange(1600.0f).reshape({8, 1, 200})).find("]],\n\n ...,\n\n [[") !=
          std::string::npos);
    // NaN as NumPy writes it (printf wrote the sign of x86's default NaN: "-nan").
    CHECK(text(nd::zeros({2}) / nd::zeros({2})) == "[nan, nan] <NDArray 2 cpu(0)>");
    CHECK(text(nd::from_vector({INFINITY, -INFINITY, NAN}, {3})) ==
          "[inf, -inf, nan] <NDArray 3 cpu(0)>");
    CHECK(nd::ones({1, 1}).item() == 1.0f);
    CHECK(nd::full({}, 4.0f).item() == 4.0f);
    const NDArray empty, two = nd::ones({2});
    expect_error([&] { two.item(); }, {"item: expected an array of size 1, got [2]"});
    expect_error([&] { empty.item(); }, {"item: array is empty (default-constructed)"});
    expect_error([&] { empty.to_vector(); }, {"to_vector: array is empty"});
    expect_error([&] { empty.wait_to_read(); }, {"wait_to_read: array is empty"});
    expect_error([&] { text(empty); }, {"print: array is empty"});
    expect_error([&] { empty.unsafe_data(); }, {"unsafe_data: array is empty"});
    expect_error([&] { empty.device(); }, {"device: array is empty"});
  });
}

namespace {

// A workload touching every op family, returned as host vectors.
std::vector<std::vector<float>> op_sequence() {
  const std::int64_t n = scaled(400, 8);
  nd::seed(11);
  std::vector<std::vector<float>> out;
  const NDArray a = nd::random_normal({n, 256});
  const NDArray b = nd::random_uniform({256, 128}, -1.0f, 1.0f);
  const NDArray bias = nd::arange(-1.0f, 1.0f, 1.0f / 64);
  const NDArray c = nd::relu(nd::dot(a, b) + bias);
  const NDArray g = nd::exp(-c) / (1.0f + c * c);
  NDArray k = a.copy();
  k += 1.0f;
  k *= a;
  k -= a.mean(0);
  for (const NDArray& r :
       {a, b, c, g, c.sum(0), c.max(1, true), nd::transpose(g).mean(-1), g.norm(), k,
        nd::sigmoid(k) - nd::tanh(k), nd::sqrt(nd::relu(c)) + nd::log(g + 1.0f), nd::pow(g, 1.5f),
        nd::pow(g + 1.0f, c), a.reshape({-1}).sum(), a.sum()}) {
    out.push_back(r.to_vector());
  }
  NDArray y = nd::zeros({scaled(1000, 10)});
  for (int i = 0; i < 200; ++i) y = y + 1;  // E5's pattern: a long dependent chain
  out.push_back(y.to_vector());
  return out;
}

}  // namespace

TEST_CASE("naive and threaded engines give identical results", "[ops][engine]") {
  EngineConfigGuard restore;
  leak_checked([] {
    configure_engine({EngineKind::kNaive});
    const auto want = op_sequence();
    for (int workers : {1, 2, 4, 8}) {
      configure_engine({EngineKind::kThreaded, workers});
      REQUIRE(engine().num_workers() == workers);
      const auto got = op_sequence();
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("workers " << workers << ", result " << i);
        CHECK(same_bits(got[i], want[i]));
      }
    }
  });
}
