// The op table: every elementwise function, reduction and public op of asyncnd, listed once.
// Every other list is derived from these X-macros by the compiler: the kernel enums of
// KernelCall (kernel_call.h), the device switches and describe() (core/src/kernels/device_map.h),
// the CPU's kernel dispatch (core/src/kernels/host_kernels.cpp), the gradient ops
// (core/src/autograd/autograd_internal.h), the op names below, and the op codes JavaScript uses
// (wasm/glue.cpp exports them; wasm/index.cjs reads them at load). tests/test_op_table.cpp walks
// the public lists and fails for an op without a conformance row, a gradient check or a
// JavaScript method. docs/architecture.md, "Adding an op", says which files a new op touches.
//
// For backend implementers and core/; not part of <asyncnd/asyncnd.h>.
#pragma once

#include <cstddef>

// ---- Kernel functions ---------------------------------------------------------------------
// X(Name, Functor, Cost): MapFn::k<Name> runs kernels::<Functor> (core/src/kernels/functors.h).
// Cost: Cheap, or Heavy for transcendental functions (about 10x an add): the CPU splits heavy
// maps into smaller pieces across its workers.
//
// Binary functions: f(a, b). A functor with a parameter (SgdOp's rate) takes KernelCall::Map's
// scalar in the binary forms.
#define ASYNCND_BINARY_FNS(X)   \
  X(Add, AddOp, Cheap)          \
  X(Sub, SubOp, Cheap)          \
  X(Mul, MulOp, Cheap)          \
  X(Div, DivOp, Cheap)          \
  X(Pow, PowOp, Heavy)          \
  /* autograd and nn helpers: relu's gradient, max's mask, pow's two partial derivatives, */    \
  /* broadcast_to, assignment in place, and the SGD step w - rate * g */                        \
  X(ReluGrad, ReluGradOp, Cheap) \
  X(EqMask, EqMaskOp, Cheap)    \
  X(PowGradBase, PowGradBaseOp, Heavy) \
  X(PowGradExp, PowGradExpOp, Heavy)   \
  X(First, FirstOp, Cheap)      \
  X(Second, SecondOp, Cheap)    \
  X(Sgd, SgdOp, Cheap)

// Unary functions: f(a).
#define ASYNCND_UNARY_FNS(X) \
  X(Copy, CopyOp, Cheap)     \
  X(Neg, NegOp, Cheap)       \
  X(Exp, ExpOp, Heavy)       \
  X(Log, LogOp, Heavy)       \
  X(Sqrt, SqrtOp, Cheap)     \
  X(Square, SquareOp, Cheap) \
  X(Relu, ReluOp, Cheap)     \
  X(Sigmoid, SigmoidOp, Heavy) \
  X(Tanh, TanhOp, Heavy)        \
  X(Abs, AbsOp, Cheap)

// Reductions: X(Name, Accumulator) (core/src/kernels/reduce.h); the value stored from the
// accumulator is kernels::reduce_finish's.
#define ASYNCND_REDUCE_FNS(X) \
  X(Sum, SumAcc)              \
  X(Mean, SumAcc)             \
  X(Max, MaxAcc)              \
  X(Norm, SumSqAcc)

// ---- Public ops ------------------------------------------------------------------------------
// X(name, Name): nd::<name> and NDArray::<name> in C++, a.<name>() and nd.<name>() in JavaScript;
// Name is the kernel function (MapFn / ReduceFn) it runs and its gradient op's name.
//
// Unary ops: nd::neg(a).
#define ASYNCND_UNARY_OPS(X) \
  X(neg, Neg)                \
  X(exp, Exp)                \
  X(log, Log)                \
  X(sqrt, Sqrt)              \
  X(relu, Relu)              \
  X(sigmoid, Sigmoid)        \
  X(tanh, Tanh)              \
  X(abs, Abs)

// Binary ops, with NumPy broadcasting, in three forms each: nd::add(a, b), nd::add(a, s) and
// nd::add(s, a) for a float s (gradient ops k<Name>, k<Name>Scalar, kR<Name>Scalar).
#define ASYNCND_BINARY_OPS(X) \
  X(add, Add)                 \
  X(sub, Sub)                 \
  X(mul, Mul)                 \
  X(div, Div)                 \
  X(pow, Pow)

// Reductions: over all elements, or (all but norm) over one axis: nd::sum(a), nd::sum(a, axis).
#define ASYNCND_REDUCE_OPS(X) \
  X(sum, Sum)                 \
  X(mean, Mean)               \
  X(max, Max)                 \
  X(norm, Norm)

// The other differentiable ops, each with a kernel or a view of its own: X(name, Name).
#define ASYNCND_OTHER_OPS(X)   \
  X(dot, Dot)                  \
  X(transpose, Transpose)      \
  X(reshape, Reshape)          \
  X(broadcast_to, BroadcastTo) \
  X(copy_to, CopyTo)

namespace asyncnd {
namespace detail {

// The public ops' names, in table order: unary, binary, reduce, other.
constexpr const char* kOpNames[] = {
#define ASYNCND_OP_NAME(name, Name) #name,
    ASYNCND_UNARY_OPS(ASYNCND_OP_NAME) ASYNCND_BINARY_OPS(ASYNCND_OP_NAME)
        ASYNCND_REDUCE_OPS(ASYNCND_OP_NAME) ASYNCND_OTHER_OPS(ASYNCND_OP_NAME)
#undef ASYNCND_OP_NAME
};

#define ASYNCND_OP_COUNT(...) +1
constexpr std::size_t kUnaryOpCount = 0 ASYNCND_UNARY_OPS(ASYNCND_OP_COUNT);
constexpr std::size_t kBinaryOpCount = 0 ASYNCND_BINARY_OPS(ASYNCND_OP_COUNT);
constexpr std::size_t kReduceOpCount = 0 ASYNCND_REDUCE_OPS(ASYNCND_OP_COUNT);
constexpr std::size_t kOtherOpCount = 0 ASYNCND_OTHER_OPS(ASYNCND_OP_COUNT);
#undef ASYNCND_OP_COUNT
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) ==
                  kUnaryOpCount + kBinaryOpCount + kReduceOpCount + kOtherOpCount,
              "one name per public op");

}  // namespace detail
}  // namespace asyncnd
