// The backend conformance table: every op, one row per case (ggml's test-backend-ops). Each case
// makes its inputs on the CPU from seeded values, runs on a device, and is compared with the
// serial reference (tests/reference.h) and, on other devices, with the CPU's own result.
#pragma once

#include <asyncnd/asyncnd.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "reference.h"

namespace asyncnd_test {

namespace ref = asyncnd_ref;

struct InputSpec {
  asyncnd::Shape shape;
  float lo = -2.0f, hi = 2.0f;
};

struct OpCase {
  const char* name;
  std::vector<InputSpec> inputs;
  // Runs the op on `device` (inputs already there); creation ops use `device` directly.
  std::function<asyncnd::NDArray(const std::vector<asyncnd::NDArray>&, asyncnd::Device)> run;
  // The expected values from the inputs' values; null when there is no closed form (random: the
  // other devices must then match the CPU exactly).
  std::function<ref::Values(const std::vector<ref::Values>&)> reference;
  double rel = 0.0, abs = 0.0;  // tolerance against the reference and across devices
  bool same_bits = true;        // other devices must match the CPU bit for bit
};

using asyncnd::NDArray;
using Ins = std::vector<NDArray>;
using Vals = std::vector<ref::Values>;

inline ref::Values map1(const ref::Values& a, double (*f)(double)) { return ref::unary(a, f); }

inline const std::vector<OpCase>& conformance_cases() {
  namespace nd = asyncnd::nd;
  using asyncnd::Device;
  static const std::vector<OpCase> cases = {
      // ---- elementwise, NumPy broadcasting ----
      {"add broadcast [3,1,5]+[4,1]", {{{3, 1, 5}}, {{4, 1}}},
       [](const Ins& x, Device) { return x[0] + x[1]; },
       [](const Vals& v) { return ref::binary(v[0], {3, 1, 5}, v[1], {4, 1}, [](double a, double b) { return a + b; }); }},
      {"sub [6,7]-[7]", {{{6, 7}}, {{7}}}, [](const Ins& x, Device) { return x[0] - x[1]; },
       [](const Vals& v) { return ref::binary(v[0], {6, 7}, v[1], {7}, [](double a, double b) { return a - b; }); }},
      {"mul same shape [2,3,4]", {{{2, 3, 4}}, {{2, 3, 4}}},
       [](const Ins& x, Device) { return x[0] * x[1]; },
       [](const Vals& v) { return ref::binary(v[0], {2, 3, 4}, v[1], {2, 3, 4}, [](double a, double b) { return a * b; }); }},
      {"div by one element [5,6]/[1]", {{{5, 6}}, {{1}, 0.5f, 2.0f}},
       [](const Ins& x, Device) { return x[0] / x[1]; },
       [](const Vals& v) { return ref::binary(v[0], {5, 6}, v[1], {1}, [](double a, double b) { return a / b; }); }},
      {"div one element by [5,6]", {{{1}}, {{5, 6}, 0.5f, 2.0f}},
       [](const Ins& x, Device) { return x[0] / x[1]; },
       [](const Vals& v) { return ref::binary(v[0], {1}, v[1], {5, 6}, [](double a, double b) { return a / b; }); }},
      {"pow [4,5]^[5]", {{{4, 5}, 0.1f, 3.0f}, {{5}}},
       [](const Ins& x, Device) { return nd::pow(x[0], x[1]); },
       [](const Vals& v) { return ref::binary(v[0], {4, 5}, v[1], {5}, [](double a, double b) { return std::pow(a, b); }); },
       2e-6, 0.0, false},
      {"add 1-D over 20000 [20000]+[20000]", {{{20000}}, {{20000}}},
       [](const Ins& x, Device) { return x[0] + x[1]; },
       [](const Vals& v) { return ref::binary(v[0], {20000}, v[1], {20000}, [](double a, double b) { return a + b; }); }},
      {"add empty [0,3]+[3]", {{{0, 3}}, {{3}}}, [](const Ins& x, Device) { return x[0] + x[1]; },
       [](const Vals&) { return ref::Values{}; }},
      // ---- scalar forms ----
      {"x + 1.5", {{{7, 9}}}, [](const Ins& x, Device) { return x[0] + 1.5f; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return double(float(a) + 1.5f); }); }},
      {"2 - x", {{{7, 9}}}, [](const Ins& x, Device) { return 2.0f - x[0]; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return double(2.0f - float(a)); }); }},
      {"1 / x", {{{7, 9}, 0.5f, 2.0f}}, [](const Ins& x, Device) { return 1.0f / x[0]; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return double(1.0f / float(a)); }); }},
      {"x * 3", {{{7, 9}}}, [](const Ins& x, Device) { return x[0] * 3.0f; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return double(float(a) * 3.0f); }); }},
      {"pow(x, 2)", {{{7, 9}}}, [](const Ins& x, Device) { return nd::pow(x[0], 2.0f); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return double(float(a) * float(a)); }); }},
      {"pow(x, 0.5)", {{{7, 9}, 0.0f, 4.0f}}, [](const Ins& x, Device) { return nd::pow(x[0], 0.5f); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return std::sqrt(a); }); }, 2e-6, 0.0, false},
      // ---- unary ----
      {"neg", {{{11, 13}}}, [](const Ins& x, Device) { return -x[0]; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return -a; }); }},
      {"abs", {{{11, 13}}}, [](const Ins& x, Device) { return nd::abs(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return std::fabs(a); }); }},
      {"exp", {{{11, 13}}}, [](const Ins& x, Device) { return nd::exp(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return std::exp(a); }); }, 2e-6, 0.0, false},
      {"log", {{{11, 13}, 0.01f, 5.0f}}, [](const Ins& x, Device) { return nd::log(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return std::log(a); }); }, 2e-6, 1e-7, false},
      {"sqrt", {{{11, 13}, 0.0f, 5.0f}}, [](const Ins& x, Device) { return nd::sqrt(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return std::sqrt(a); }); }, 1e-7, 0.0},
      {"relu", {{{11, 13}}}, [](const Ins& x, Device) { return nd::relu(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return a < 0 ? 0.0 : a; }); }},
      {"sigmoid", {{{11, 13}}}, [](const Ins& x, Device) { return nd::sigmoid(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return 1.0 / (1.0 + std::exp(-a)); }); }, 2e-6, 0.0, false},
      {"tanh", {{{11, 13}}}, [](const Ins& x, Device) { return nd::tanh(x[0]); },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return std::tanh(a); }); }, 2e-6, 1e-7, false},
      // ---- in place ----
      {"x += y broadcast [4,6] += [6]", {{{4, 6}}, {{6}}},
       [](const Ins& x, Device) { NDArray t = x[0].copy(); t += x[1]; return t; },
       [](const Vals& v) { return ref::binary(v[0], {4, 6}, v[1], {6}, [](double a, double b) { return a + b; }); }},
      {"x *= 3", {{{4, 6}}}, [](const Ins& x, Device) { NDArray t = x[0].copy(); t *= 3.0f; return t; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return double(float(a) * 3.0f); }); }},
      // ---- creation ----
      {"zeros", {}, [](const Ins&, Device d) { return nd::zeros({3, 5}, d); },
       [](const Vals&) { return ref::Values(15, 0.0f); }},
      {"full", {}, [](const Ins&, Device d) { return nd::full({4, 4}, 2.5f, d); },
       [](const Vals&) { return ref::Values(16, 2.5f); }},
      {"arange(-3, 7, 0.25)", {}, [](const Ins&, Device d) { return nd::arange(-3.0f, 7.0f, 0.25f, d); },
       [](const Vals&) { ref::Values r; for (int i = 0; i < 40; ++i) r.push_back(float(-3.0 + i * 0.25)); return r; }},
      {"from_vector", {}, [](const Ins&, Device d) { return nd::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, d); },
       [](const Vals&) { return ref::Values{1, 2, 3, 4, 5, 6}; }},
      {"random_uniform(-1, 3) 10001 values", {},
       [](const Ins&, Device d) { nd::seed(42); return nd::random_uniform({10001}, -1.0f, 3.0f, d); }, nullptr},
      {"random_normal(1, 2) 10001 values", {},
       [](const Ins&, Device d) { nd::seed(43); return nd::random_normal({10001}, 1.0f, 2.0f, d); }, nullptr},
      // ---- reductions ----
      {"sum all of 100000", {{{100000}}}, [](const Ins& x, Device) { return nd::sum(x[0]); },
       [](const Vals& v) { return ref::reduce(v[0], {100000}, -1, ref::Reduce::kSum); }, 1e-5, 1e-3, false},
      {"sum axis 0 of [37,53]", {{{37, 53}}}, [](const Ins& x, Device) { return nd::sum(x[0], 0); },
       [](const Vals& v) { return ref::reduce(v[0], {37, 53}, 0, ref::Reduce::kSum); }, 1e-6, 1e-5, false},
      {"mean axis 1 of [3,300,5]", {{{3, 300, 5}}}, [](const Ins& x, Device) { return nd::mean(x[0], 1); },
       [](const Vals& v) { return ref::reduce(v[0], {3, 300, 5}, 1, ref::Reduce::kMean); }, 1e-6, 1e-6, false},
      {"max all of [61,17]", {{{61, 17}}}, [](const Ins& x, Device) { return nd::max(x[0]); },
       [](const Vals& v) { return ref::reduce(v[0], {61, 17}, -1, ref::Reduce::kMax); }},
      {"max axis -1 of [61,17]", {{{61, 17}}}, [](const Ins& x, Device) { return nd::max(x[0], -1); },
       [](const Vals& v) { return ref::reduce(v[0], {61, 17}, 1, ref::Reduce::kMax); }},
      {"norm of [129,33]", {{{129, 33}}}, [](const Ins& x, Device) { return nd::norm(x[0]); },
       [](const Vals& v) { return ref::reduce(v[0], {129, 33}, -1, ref::Reduce::kNorm); }, 1e-6, 0.0, false},
      // ---- linear algebra, layout ----
      {"dot [33,17]x[17,45]", {{{33, 17}}, {{17, 45}}}, [](const Ins& x, Device) { return nd::dot(x[0], x[1]); },
       [](const Vals& v) { return ref::matmul(v[0], v[1], 33, 17, 45); }, 1e-5, 1e-4, false},
      {"dot with k=0 [3,0]x[0,4]", {{{3, 0}}, {{0, 4}}}, [](const Ins& x, Device) { return nd::dot(x[0], x[1]); },
       [](const Vals&) { return ref::Values(12, 0.0f); }},
      {"transpose [37,53]", {{{37, 53}}}, [](const Ins& x, Device) { return nd::transpose(x[0]); },
       [](const Vals& v) { return ref::transpose(v[0], {37, 53}); }},
      {"transpose [3,4,5]", {{{3, 4, 5}}}, [](const Ins& x, Device) { return nd::transpose(x[0]); },
       [](const Vals& v) { return ref::transpose(v[0], {3, 4, 5}); }},
      {"transpose 1-D [9]", {{{9}}}, [](const Ins& x, Device) { return nd::transpose(x[0]); },
       [](const Vals& v) { return v[0]; }},
      {"reshape [4,6] to [2,-1] then *2", {{{4, 6}}},
       [](const Ins& x, Device) { return x[0].reshape({2, -1}) * 2.0f; },
       [](const Vals& v) { return ref::unary(v[0], [](double a) { return 2.0 * a; }); }},
      {"broadcast_to [3,1] to [2,3,4]", {{{3, 1}}},
       [](const Ins& x, Device) { return nd::broadcast_to(x[0], {2, 3, 4}); },
       [](const Vals& v) {
         return ref::binary(v[0], {3, 1}, ref::Values(24, 0.0), {2, 3, 4}, [](double a, double) { return a; });
       }},
      // copy_to the array's own device (the cross-device copies are test_device_path.cpp's).
      {"copy_to [6,5]", {{{6, 5}}}, [](const Ins& x, Device d) { return nd::copy_to(x[0], d); },
       [](const Vals& v) { return v[0]; }},
      {"copy", {{{5, 7}}}, [](const Ins& x, Device) { return x[0].copy(); },
       [](const Vals& v) { return v[0]; }},
  };
  return cases;
}

}  // namespace asyncnd_test
