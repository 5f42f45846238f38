// SIMD forms (kernels/simd.h: SSE natively, SIMD128 in wasm) of the functors of functors.h that
// have an exact lane-wise equivalent. Each gives bit for bit the scalar functor's result, lane by
// lane, so the vector loops of elementwise.h change no value. Host only: elementwise.h includes it
// outside CUDA compilation, and functors.h stays free of it (its functors are also device code).
#pragma once

#include "kernels/functors.h"
#include "kernels/simd.h"

namespace asyncnd {
namespace kernels {
namespace vec {

using simd::f32x4;

// VecOp<F>::apply(f, x...) computes f lane-wise; kHas is false for functors without one
// (transcendentals, pow, sqrt), which keep their scalar loops.
template <class F>
struct VecOp {
  static constexpr bool kHas = false;
};

#define ASYNCND_VEC_BINARY(Op, expr)                                              \
  template <>                                                                     \
  struct VecOp<Op> {                                                              \
    static constexpr bool kHas = true;                                            \
    static f32x4 apply(const Op&, f32x4 a, f32x4 b) { return expr; }             \
  };
ASYNCND_VEC_BINARY(AddOp, a + b)
ASYNCND_VEC_BINARY(SubOp, a - b)
ASYNCND_VEC_BINARY(MulOp, a * b)
ASYNCND_VEC_BINARY(DivOp, a / b)
#undef ASYNCND_VEC_BINARY

#define ASYNCND_VEC_UNARY(Op, expr)                                               \
  template <>                                                                     \
  struct VecOp<Op> {                                                              \
    static constexpr bool kHas = true;                                            \
    static f32x4 apply(const Op&, f32x4 a) { return expr; }                       \
  };
ASYNCND_VEC_UNARY(CopyOp, a)
ASYNCND_VEC_UNARY(NegOp, -a)
ASYNCND_VEC_UNARY(SquareOp, a * a)
// As ReluOp: a <= 0 ? 0 : a, so NaN passes through and -0 gives +0.
ASYNCND_VEC_UNARY(ReluOp, simd::select(a <= simd::zero(), simd::zero(), a))
#undef ASYNCND_VEC_UNARY

// x op s and s op x, for the binary ops above.
template <class Op>
struct VecOp<BindRight<Op>> {
  static constexpr bool kHas = VecOp<Op>::kHas;
  static f32x4 apply(const BindRight<Op>& f, f32x4 a) {
    return VecOp<Op>::apply(f.op, a, simd::splat(f.s));
  }
};
template <class Op>
struct VecOp<BindLeft<Op>> {
  static constexpr bool kHas = VecOp<Op>::kHas;
  static f32x4 apply(const BindLeft<Op>& f, f32x4 a) {
    return VecOp<Op>::apply(f.op, simd::splat(f.s), a);
  }
};

}  // namespace vec
}  // namespace kernels
}  // namespace asyncnd
