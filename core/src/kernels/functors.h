// The per-element math of every elementwise op, as small functors usable on the host and in CUDA
// kernels: the CPU loops in elementwise.h and the device backends share these, so the math is
// tested once on the CPU. The op table (asyncnd/detail/op_table.h) lists them.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define ASYNCND_HD __host__ __device__
#else
#define ASYNCND_HD
#endif

// GCC 12 at -O2 (the Makefile's Release build) vectorises with its "very cheap" cost model, which
// skips every loop whose trip count is unknown at compile time: all of ours. The kernel headers
// wrap their loops in these to get -O3's cost model. Clang vectorises them at -O2 already.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define ASYNCND_KERNELS_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC optimize(\"vect-cost-model=dynamic\")")
#define ASYNCND_KERNELS_END _Pragma("GCC pop_options")
#else
#define ASYNCND_KERNELS_BEGIN
#define ASYNCND_KERNELS_END
#endif

namespace asyncnd {
namespace kernels {

struct AddOp {
  ASYNCND_HD float operator()(float a, float b) const { return a + b; }
};
struct SubOp {
  ASYNCND_HD float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  ASYNCND_HD float operator()(float a, float b) const { return a * b; }
};
struct DivOp {
  ASYNCND_HD float operator()(float a, float b) const { return a / b; }
};
struct PowOp {
  ASYNCND_HD float operator()(float a, float b) const { return std::pow(a, b); }
};

struct CopyOp {
  ASYNCND_HD float operator()(float a) const { return a; }
};
struct NegOp {
  ASYNCND_HD float operator()(float a) const { return -a; }
};
struct ExpOp {
  ASYNCND_HD float operator()(float a) const { return std::exp(a); }
};
struct LogOp {
  ASYNCND_HD float operator()(float a) const { return std::log(a); }
};
struct SqrtOp {
  ASYNCND_HD float operator()(float a) const { return std::sqrt(a); }
};
struct SquareOp {
  ASYNCND_HD float operator()(float a) const { return a * a; }
};
// NumPy's maximum(a, 0): NaN propagates (`a <= 0 ? 0 : a`, not `a > 0 ? a : 0`), and -0 gives +0.
// `a < 0 ? 0 : a` kept -0 where GCC compiled it, but clang folds the select into a max
// instruction (WebAssembly's f32.max, AArch64's fmax) that gives +0: builds disagreed.
struct ReluOp {
  ASYNCND_HD float operator()(float a) const { return a <= 0.0f ? 0.0f : a; }
};
// 1 / (1 + e^-a) for a >= 0, e^a / (1 + e^a) below: the one exponential never overflows, so the
// tail below a = -88.7 is the right subnormal rather than 1 / inf = 0.
struct SigmoidOp {
  ASYNCND_HD float operator()(float a) const {
    const float e = std::exp(-std::fabs(a));
    return (a >= 0.0f ? 1.0f : e) / (1.0f + e);
  }
};
struct TanhOp {
  ASYNCND_HD float operator()(float a) const { return std::tanh(a); }
};
struct AbsOp {
  ASYNCND_HD float operator()(float a) const { return std::fabs(a); }
};

// Gradient helpers (autograd_grads.cpp, nn.cpp).
// relu's gradient: g where x > 0, else 0 (0 at x == 0, as MXNet and PyTorch).
struct ReluGradOp {
  ASYNCND_HD float operator()(float g, float x) const { return x > 0.0f ? g : 0.0f; }
};
// 1 where a == b, or both are NaN: the positions of a maximum, for max's gradient (a maximum is
// NaN where its input holds a NaN, and the NaNs get the gradient, as in PyTorch).
struct EqMaskOp {
  ASYNCND_HD float operator()(float a, float b) const {
    return a == b || (a != a && b != b) ? 1.0f : 0.0f;
  }
};
// pow's partial derivatives, with PyTorch's values where the formula gives 0 * inf (NaN).
// d(a^b)/da = b a^(b-1), and 0 where b == 0 (a^0 is constant, also at a == 0).
struct PowGradBaseOp {
  ASYNCND_HD float operator()(float a, float b) const {
    return b == 0.0f ? 0.0f : b * std::pow(a, b - 1.0f);
  }
};
// d(a^b)/db = a^b log a, and 0 where a == 0 and b >= 0 (0^b is 0 there, or 1 at b == 0).
struct PowGradExpOp {
  ASYNCND_HD float operator()(float a, float b) const {
    return a == 0.0f && b >= 0.0f ? 0.0f : std::pow(a, b) * std::log(a);
  }
};
struct FirstOp {  // broadcast_to: the first operand, broadcast
  ASYNCND_HD float operator()(float a, float) const { return a; }
};
struct SecondOp {  // assignment in place: target = b
  ASYNCND_HD float operator()(float, float b) const { return b; }
};
// One SGD step in place: w - alpha * g.
struct SgdOp {
  float alpha;
  ASYNCND_HD float operator()(float w, float g) const { return w - alpha * g; }
};

// Binary op with one operand fixed: x op s, or s op x. The contiguous loops of elementwise.h
// vectorise these like the array-array forms.
template <class Op>
struct BindRight {
  Op op;
  float s;
  ASYNCND_HD float operator()(float a) const { return op(a, s); }
};
template <class Op>
struct BindLeft {
  Op op;
  float s;
  ASYNCND_HD float operator()(float a) const { return op(s, a); }
};

}  // namespace kernels
}  // namespace asyncnd
