// KernelCall: one op's kernel described as plain data. Every op, on every device, is validated,
// allocated and described as one KernelCall at the call, then pushed to the engine; the device's
// backend runs it (Backend::launch): the CPU backends through core's templated and SIMD loops
// (core/src/kernels/host_kernels.h), a GPU backend with its own kernels over the same host-device
// functors (core/src/kernels/device_map.h). For backend implementers; not part of
// <asyncnd/asyncnd.h>. The enums come from the op table (op_table.h).
#pragma once

#include <cstdint>
#include <string>

#include "asyncnd/detail/op_table.h"
#include "asyncnd/device.h"

namespace asyncnd {
namespace detail {

// The elementwise functions (core/src/kernels/functors.h): binary ones first, then unary ones.
enum class MapFn : std::uint8_t {
#define ASYNCND_MAP_FN_ENUM(Name, Functor, Cost) k##Name,
  ASYNCND_BINARY_FNS(ASYNCND_MAP_FN_ENUM) ASYNCND_UNARY_FNS(ASYNCND_MAP_FN_ENUM)
#undef ASYNCND_MAP_FN_ENUM
};
enum class ReduceFn : std::uint8_t {
#define ASYNCND_REDUCE_FN_ENUM(Name, Acc) k##Name,
  ASYNCND_REDUCE_FNS(ASYNCND_REDUCE_FN_ENUM)
#undef ASYNCND_REDUCE_FN_ENUM
};

// How a map reads its operands, for output element i:
//   kUnary        f(a[i])
//   kBinary       f(a[i], b[i])          (with a strided plan: a and b through its strides)
//   kScalarRight  f(a[i], scalar)        kScalarLeft  f(scalar, a[i])
//   kOneRight     f(a[i], b[0])          kOneLeft     f(a[0], b[i])   (one operand has a single
//                                        element, read when the kernel runs)
// The binary forms pass Map::scalar to a functor that has a parameter (SgdOp's rate).
enum class MapForm : std::uint8_t { kUnary, kBinary, kScalarRight, kScalarLeft, kOneRight, kOneLeft };
enum class RandomDist : std::uint8_t { kUniform, kNormal };

// Dims of a broadcast or permutation plan (NumPy's historical limit; checked at the op's call).
constexpr int kMaxKernelDims = 32;

// A strided plan's arrays (core/src/kernels/elementwise.h: StridedPlan): output dims, innermost
// last, and each input's stride in elements along them (0 along a broadcast dim). sb is null for a
// unary plan. The arrays live until Backend::launch returns: a backend that runs the call later
// copies them (the CUDA backend passes them by value as a kernel parameter).
struct StridedView {
  int ndim;
  const std::int64_t* dims;
  const std::int64_t* sa;
  const std::int64_t* sb;
};

struct KernelCall {
  enum class Kind : std::uint8_t {
    kFill,       // out[i] = fill.value
    kArange,     // out[i] = float(arange.start + i * arange.step)
    kMap,        // out[i] = map (see MapForm); out may be a itself
    kMapStrided, // the same through strided.plan: broadcasting or an N-D transpose
    kReduce,     // a viewed as [outer, len, inner], reduced over len into out [outer, inner]
    kRandom,     // Philox4x32-10 (kernels/philox.h): the CPU's numbers for (key, stream, i)
    kTranspose2d,  // a [rows, cols] -> out [cols, rows]
    kGemm,       // row-major out = alpha * op(a) * op(b) + beta * out
    kCopy,       // n floats from a (on copy.src()) to out (on copy.dst()); one side may be the CPU
  };

  struct Fill {
    float value;
  };
  struct Map {
    MapFn fn;
    MapForm form;
    float scalar;  // the scalar operand, or the functor's parameter
  };
  struct Strided {
    Map map;
    StridedView plan;
  };
  struct Reduce {
    ReduceFn fn;
    std::int64_t outer, len, inner;
  };
  struct Random {
    RandomDist dist;
    std::uint64_t key, stream;
    float a, b;  // uniform: a + b*u in [a, a+b); normal: a + b*z
  };
  struct Arange {
    double start, step;
  };
  struct Gemm {  // op(a) is [m,k], op(b) is [k,n]; lda/ldb/ldc are row strides
    bool trans_a, trans_b;
    std::int64_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
  };
  struct Transpose {
    std::int64_t rows, cols;
  };
  struct Copy {  // plain fields (Device has member initializers, which a union member may not)
    DeviceKind src_kind, dst_kind;
    int src_id, dst_id;
    Device src() const { return Device{src_kind, src_id}; }
    Device dst() const { return Device{dst_kind, dst_id}; }
  };

  Kind kind = Kind::kFill;
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  std::int64_t n = 0;  // output elements
  // The fields of `kind`, and only those: a tagged union keeps a call small enough to ride inside
  // an engine op without an allocation.
  union {
    Fill fill{};
    Map map;
    Strided strided;
    Reduce reduce;
    Random random;
    Arange arange;
    Gemm gemm;
    Transpose transpose;
    Copy copy;
  };
};

// What a call is, in a few words, for a device-side span in the profile (Backend::DeviceSpan):
// "map", "gemm 1024x1024x512", "copy cpu(0)->gpu(0) (4000 B)".
inline std::string kernel_call_name(const KernelCall& c) {
  using Kind = KernelCall::Kind;
  switch (c.kind) {
    case Kind::kFill: return "fill";
    case Kind::kArange: return "arange";
    case Kind::kMap: return "map";
    case Kind::kMapStrided: return "map (strided)";
    case Kind::kReduce: return "reduce";
    case Kind::kRandom: return "random";
    case Kind::kTranspose2d: return "transpose";
    case Kind::kGemm:
      return "gemm " + std::to_string(c.gemm.m) + "x" + std::to_string(c.gemm.n) + "x" +
             std::to_string(c.gemm.k);
    case Kind::kCopy:
      return "copy " + c.copy.src().str() + "->" + c.copy.dst().str() + " (" +
             std::to_string(c.n * static_cast<std::int64_t>(sizeof(float))) + " B)";
  }
  return "call";
}

}  // namespace detail
}  // namespace asyncnd
