// The elementwise functors (functors.h) as data: MapFn names a functor, `describe` turns a functor
// value into a KernelCall::Map, and `apply_*` run the named functor. A device backend's kernels
// call apply_* (one kernel per form, a uniform switch inside instead of one kernel per functor);
// the CPU tests check that apply_*(describe(f)) is f, so the device math is tested on the CPU.
// Also the per-element Philox value, as a device thread computes it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "asyncnd/detail/kernel_call.h"
#include "kernels/functors.h"
#include "kernels/philox.h"

namespace asyncnd {
namespace kernels {

using detail::MapFn;
using detail::MapForm;

// `p` is the functor's own parameter (kSgd's rate), unused by the others.
ASYNCND_HD inline float apply_binary(MapFn fn, float a, float b, float p = 0.0f) {
  switch (fn) {
    case MapFn::kAdd: return AddOp{}(a, b);
    case MapFn::kSub: return SubOp{}(a, b);
    case MapFn::kMul: return MulOp{}(a, b);
    case MapFn::kDiv: return DivOp{}(a, b);
    case MapFn::kPow: return PowOp{}(a, b);
    case MapFn::kReluGrad: return ReluGradOp{}(a, b);
    case MapFn::kEqMask: return EqMaskOp{}(a, b);
    case MapFn::kFirst: return FirstOp{}(a, b);
    case MapFn::kSecond: return SecondOp{}(a, b);
    case MapFn::kSgd: return SgdOp{p}(a, b);
    default: return a;  // invariant: describe() gives binary forms binary functions only
  }
}

ASYNCND_HD inline float apply_unary(MapFn fn, float a) {
  switch (fn) {
    case MapFn::kCopy: return CopyOp{}(a);
    case MapFn::kNeg: return NegOp{}(a);
    case MapFn::kExp: return ExpOp{}(a);
    case MapFn::kLog: return LogOp{}(a);
    case MapFn::kSqrt: return SqrtOp{}(a);
    case MapFn::kSquare: return SquareOp{}(a);
    case MapFn::kRelu: return ReluOp{}(a);
    case MapFn::kSigmoid: return SigmoidOp{}(a);
    case MapFn::kTanh: return TanhOp{}(a);
    default: return a;  // invariant: describe() gives the unary form unary functions only
  }
}

// One output element of a map whose operands are already loaded (b unused by unary forms).
ASYNCND_HD inline float apply_map(const detail::KernelCall::Map& m, float a, float b) {
  switch (m.form) {
    case MapForm::kUnary: return apply_unary(m.fn, a);
    case MapForm::kBinary: return apply_binary(m.fn, a, b, m.scalar);
    case MapForm::kScalarRight: return apply_binary(m.fn, a, m.scalar);
    case MapForm::kScalarLeft: return apply_binary(m.fn, m.scalar, a);
  }
  return a;
}

// Offsets into a and b of output element i of a strided map (KernelCall::Strided): i unravelled
// over the output dims, innermost last, times each input's strides.
ASYNCND_HD inline void strided_offsets(const detail::KernelCall::Strided& p, std::int64_t i,
                                       std::int64_t* oa, std::int64_t* ob) {
  std::int64_t rem = i, a = 0, b = 0;
  for (int d = p.ndim - 1; d >= 0; --d) {
    const std::int64_t idx = rem % p.dims[d];
    rem /= p.dims[d];
    a += idx * p.sa[d];
    b += idx * p.sb[d];
  }
  *oa = a;
  *ob = b;
}

// The value a reduction stores from its accumulator over `len` elements (cf. ops_reduce.cpp).
template <class T>
ASYNCND_HD inline float reduce_finish(detail::ReduceFn fn, T v, std::int64_t len) {
  switch (fn) {
    case detail::ReduceFn::kMean:
      return static_cast<float>(static_cast<double>(v) / static_cast<double>(len));
    case detail::ReduceFn::kNorm: return static_cast<float>(std::sqrt(static_cast<double>(v)));
    default: return static_cast<float>(v);
  }
}

// describe(f): the Map that apply_map runs as f. Binary functors describe the binary form.
using MapDesc = detail::KernelCall::Map;
inline MapDesc describe(AddOp) { return {MapFn::kAdd, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(SubOp) { return {MapFn::kSub, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(MulOp) { return {MapFn::kMul, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(DivOp) { return {MapFn::kDiv, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(PowOp) { return {MapFn::kPow, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(CopyOp) { return {MapFn::kCopy, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(NegOp) { return {MapFn::kNeg, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(ExpOp) { return {MapFn::kExp, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(LogOp) { return {MapFn::kLog, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(SqrtOp) { return {MapFn::kSqrt, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(SquareOp) { return {MapFn::kSquare, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(ReluOp) { return {MapFn::kRelu, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(SigmoidOp) { return {MapFn::kSigmoid, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(TanhOp) { return {MapFn::kTanh, MapForm::kUnary, 0.0f}; }
inline MapDesc describe(ReluGradOp) { return {MapFn::kReluGrad, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(EqMaskOp) { return {MapFn::kEqMask, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(FirstOp) { return {MapFn::kFirst, MapForm::kBinary, 0.0f}; }
inline MapDesc describe(SecondOp) { return {MapFn::kSecond, MapForm::kBinary, 0.0f}; }
// The binary form with the rate in Map::scalar (never bound to a scalar operand).
inline MapDesc describe(SgdOp f) { return {MapFn::kSgd, MapForm::kBinary, f.alpha}; }
// PowScalarOp{e}(a) is pow(a, e), which is PowOp bound on the right.
inline MapDesc describe(PowScalarOp f) { return {MapFn::kPow, MapForm::kScalarRight, f.e}; }
inline MapDesc bind(MapDesc m, MapForm form, float s) {
  m.form = form;
  m.scalar = s;
  return m;
}
template <class Op>
MapDesc describe(BindRight<Op> f) {
  return bind(describe(f.op), MapForm::kScalarRight, f.s);
}
template <class Op>
MapDesc describe(BindLeft<Op> f) {
  return bind(describe(f.op), MapForm::kScalarLeft, f.s);
}

// The four values of Philox block `block` of `stream` under `key`, as philox_fill writes them
// (elements 4*block .. 4*block+3): the scalar philox4x32_10 plus philox_batch's transforms, so a
// device thread per block gives the CPU's numbers bit for bit. Compile without fused
// multiply-add (nvcc -fmad=false), as random.cpp is compiled with fp-contract=off.
ASYNCND_HD inline void philox_block_values(std::uint64_t key, std::uint64_t stream,
                                           std::uint64_t block, detail::RandomDist dist, float a,
                                           float b, float out[4]) {
  const std::uint32_t ctr[4] = {static_cast<std::uint32_t>(block),
                                static_cast<std::uint32_t>(block >> 32),
                                static_cast<std::uint32_t>(stream),
                                static_cast<std::uint32_t>(stream >> 32)};
  std::uint32_t x[4];
  philox4x32_10(ctr, static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32), x);
  if (dist == detail::RandomDist::kUniform) {
    const float hi = a + b;
    const float below = float_below(hi);
    for (int j = 0; j < 4; ++j) {
      const float u = a + b * uniform01(x[j]);
      out[j] = (u >= hi && b > 0.0f) ? below : u;
    }
  } else {
    float z[4];
    box_muller(x[0], x[1], &z[0], &z[1]);
    box_muller(x[2], x[3], &z[2], &z[3]);
    for (int j = 0; j < 4; ++j) out[j] = a + b * z[j];
  }
}

}  // namespace kernels
}  // namespace asyncnd
