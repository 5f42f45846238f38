// KernelCall: one op's kernel described as plain data, for backends whose memory the CPU cannot
// address (the CUDA backend). core/ fills one per op and hands it to Backend::launch; the backend
// runs it with its own kernels over the same host-device functors as the CPU kernels
// (core/src/kernels/device_map.h). For backend implementers; not part of <asyncnd/asyncnd.h>.
#pragma once

#include <cstdint>

#include "asyncnd/device.h"

namespace asyncnd {
namespace detail {

// The elementwise functions (core/src/kernels/functors.h): binary ones first, then unary ones.
enum class MapFn : std::uint8_t {
  kAdd, kSub, kMul, kDiv, kPow,
  kCopy, kNeg, kExp, kLog, kSqrt, kSquare, kRelu, kSigmoid, kTanh,
  // autograd and nn helpers (binary form only): relu's gradient, max's mask, broadcast_to,
  // in-place assignment, and the SGD step w - scalar * g (Map::scalar holds the rate).
  kReluGrad, kEqMask, kFirst, kSecond, kSgd,
};
// How a map reads its operands: f(a), f(a, b), f(a, scalar) or f(scalar, a).
enum class MapForm : std::uint8_t { kUnary, kBinary, kScalarRight, kScalarLeft };
enum class ReduceFn : std::uint8_t { kSum, kMean, kMax, kNorm };
enum class RandomDist : std::uint8_t { kUniform, kNormal };

// Dims of a broadcast or permutation plan (equals kernels::kMaxPlanDims; checked in core/).
constexpr int kMaxKernelDims = 32;

struct KernelCall {
  enum class Kind : std::uint8_t {
    kFill,         // out[i] = map.scalar
    kArange,       // out[i] = float(arange.start + i * arange.step)
    kMap,          // out[i] = f(a[i]) / f(a[i], b[i]) / f(a[i], s) / f(s, a[i]); out may be a
    kMapStrided,   // the same through strided.{dims, sa, sb}: broadcasting or an N-D transpose
    kReduce,       // a viewed as [outer, len, inner], reduced over len into out [outer, inner]
    kRandom,       // Philox4x32-10 (kernels/philox.h): the CPU's numbers for (key, stream, i)
    kTranspose2d,  // a [rows, cols] -> out [cols, rows]
    kGemm,         // row-major out = alpha * op(a) * op(b) + beta * out
    kCopy,         // n floats from a (on copy.src) to out (on copy.dst); one side may be the CPU
  };
  Kind kind = Kind::kFill;
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  std::int64_t n = 0;  // output elements

  struct Map {
    MapFn fn = MapFn::kCopy;
    MapForm form = MapForm::kUnary;
    float scalar = 0.0f;  // also kFill's value
  } map;
  struct Strided {  // output dims and input strides in elements (0 along broadcast dims)
    int ndim = 0;
    std::int64_t dims[kMaxKernelDims], sa[kMaxKernelDims], sb[kMaxKernelDims];
  } strided;
  struct Reduce {
    ReduceFn fn = ReduceFn::kSum;
    std::int64_t outer = 1, len = 0, inner = 1;
  } reduce;
  struct Random {
    RandomDist dist = RandomDist::kUniform;
    std::uint64_t key = 0, stream = 0;
    float a = 0.0f, b = 1.0f;  // uniform: a + b*u in [a, a+b); normal: a + b*z
  } random;
  struct Arange {
    double start = 0.0, step = 1.0;
  } arange;
  struct Gemm {
    bool trans_a = false, trans_b = false;
    std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    float alpha = 1.0f, beta = 0.0f;
  } gemm;
  struct Transpose {
    std::int64_t rows = 0, cols = 0;
  } transpose;
  struct Copy {
    Device src, dst;
  } copy;
};

}  // namespace detail
}  // namespace asyncnd
