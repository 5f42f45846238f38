// The gradient of every differentiable op: given dL/dout, the dL/dinput of each input, built from
// ordinary (queued, non-blocking) ops. Broadcast inputs get the gradient summed back to their
// shape.
#include <cmath>
#include <string>
#include <vector>

#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "ops/chunk.h"

namespace asyncnd {
namespace detail {

namespace {

// g (of a broadcast result) summed back to `shape`: over the leading axes `shape` lacks, and over
// the axes where `shape` has 1 and g does not.
NDArray reduce_to(const NDArray& g, const Shape& shape) {
  const Shape& gs = g.shape();
  if (gs == shape) return g;
  NDArray r = g;
  const std::size_t lead = gs.size() - shape.size();
  if (lead > 0) {  // fold the leading axes into one and sum it away: one op
    std::int64_t outer = 1;
    for (std::size_t d = 0; d < lead; ++d) outer *= gs[d];
    Shape folded{outer};
    folded.insert(folded.end(), gs.begin() + static_cast<std::ptrdiff_t>(lead), gs.end());
    r = nd::sum(r.reshape(folded), 0);
  }
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 1 && r.shape()[d] != 1) r = nd::sum(r, static_cast<int>(d), true);
  return r.shape() == shape ? r : r.reshape(shape);
}

// The gradient of a reduction's output, given the shape it has with the reduced axes kept as 1.
Shape kept_shape(const Shape& in, const GradAttrs& at) {
  Shape k = in;
  if (at.all) {
    for (auto& d : k) d = 1;
  } else {
    k[static_cast<std::size_t>(at.axis)] = 1;
  }
  return k;
}

// The gradient of a kDot node's input i as a product op(p) op(q). C = op(A) op(B): dop(A) =
// G op(B)^T, dop(B) = op(A)^T G, each written as one GEMM on the stored operands (no transposed
// copies).
struct DotGrad {
  const NDArray& p;
  const NDArray& q;
  bool tp, tq;
};
DotGrad dot_grad(const Node& node, std::size_t i, const NDArray& g) {
  const NDArray &a = node.inputs[0], &b = node.inputs[1];
  const bool ta = node.attrs.trans_a, tb = node.attrs.trans_b;
  if (i == 0) return ta ? DotGrad{b, g, tb, true} : DotGrad{g, b, false, !tb};
  return tb ? DotGrad{g, a, true, ta} : DotGrad{a, g, !ta, false};
}

}  // namespace

std::vector<NDArray> node_backward(const Node& node, const NDArray& g,
                                   const std::vector<char>* want) {
  const std::vector<NDArray>& in = node.inputs;
  const GradAttrs& at = node.attrs;
  const NDArray& a = in[0];
  const auto out = [&] { return NDArray(node.out_chunk.lock(), node.out_shape); };
  const std::vector<char>& wanted = want ? *want : node.needs;
  const auto need = [&](std::size_t i) { return wanted[i] != 0; };
  std::vector<NDArray> r(in.size());
  switch (node.op) {
    case GradOp::kAdd:
      if (need(0)) r[0] = reduce_to(g, a.shape());
      if (need(1)) r[1] = reduce_to(g, in[1].shape());
      break;
    case GradOp::kSub:
      if (need(0)) r[0] = reduce_to(g, a.shape());
      if (need(1)) r[1] = reduce_to(-g, in[1].shape());
      break;
    case GradOp::kMul:
      if (need(0)) r[0] = reduce_to(g * in[1], a.shape());
      if (need(1)) r[1] = reduce_to(g * a, in[1].shape());
      break;
    case GradOp::kDiv:  // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b
      if (need(0)) r[0] = reduce_to(g / in[1], a.shape());
      if (need(1)) r[1] = reduce_to(-(g * out()) / in[1], in[1].shape());
      break;
    case GradOp::kPow:  // d(a^b)/da = b a^(b-1), d(a^b)/db = a^b log a, 0 where those give 0 * inf
      if (need(0)) r[0] = reduce_to(g * pow_grad_base(a, in[1]), a.shape());
      if (need(1)) r[1] = reduce_to(g * pow_grad_exp(a, in[1]), in[1].shape());
      break;
    case GradOp::kAddScalar:
    case GradOp::kRAddScalar:
    case GradOp::kSubScalar:
      r[0] = g;
      break;
    case GradOp::kRSubScalar:
    case GradOp::kNeg:
      r[0] = -g;
      break;
    case GradOp::kMulScalar:
    case GradOp::kRMulScalar:
      r[0] = g * at.scalar;
      break;
    case GradOp::kDivScalar:
      r[0] = g / at.scalar;
      break;
    case GradOp::kRDivScalar:  // d(s/a)/da = -(s/a)/a
      r[0] = -(g * out()) / a;
      break;
    case GradOp::kPowScalar:
      if (at.scalar == 0.0f) {  // a^0 is constant: 0, where the formula gives 0 * inf at a == 0
        r[0] = g * pow_grad_base(a, nd::zeros({}, a.device()));
      } else if (at.scalar == 1.0f) {
        r[0] = g;
      } else if (at.scalar == 2.0f) {
        r[0] = g * a * 2.0f;
      } else {
        r[0] = g * nd::pow(a, at.scalar - 1.0f) * at.scalar;
      }
      break;
    case GradOp::kRPowScalar:  // d(s^a)/da = s^a log s; for s == 0, 0 where a >= 0 (not 0 * inf)
      r[0] = at.scalar == 0.0f ? g * pow_grad_exp(nd::zeros({}, a.device()), a)
                               : g * out() * std::log(at.scalar);
      break;
    case GradOp::kExp:
      r[0] = g * out();
      break;
    case GradOp::kLog:
      r[0] = g / a;
      break;
    case GradOp::kSqrt:  // 1 / (2 sqrt a)
      r[0] = g / (out() * 2.0f);
      break;
    case GradOp::kRelu:
      r[0] = relu_grad(g, a);
      break;
    case GradOp::kSigmoid: {  // s (1 - s)
      NDArray s = out();
      r[0] = g * (s * (1.0f - s));
      break;
    }
    case GradOp::kAbs:  // sign(a): g where a > 0, -g where a < 0, 0 at 0 (as PyTorch)
      r[0] = relu_grad(g, a) - relu_grad(g, -a);
      break;
    case GradOp::kTanh: {  // 1 - t^2
      NDArray t = out();
      r[0] = g * (1.0f - t * t);
      break;
    }
    case GradOp::kDot:
      for (std::size_t i = 0; i < 2; ++i) {
        if (!need(i)) continue;
        const DotGrad d = dot_grad(node, i, g);
        r[i] = nd::dot(d.p, d.q, d.tp, d.tq);
      }
      break;
    case GradOp::kTranspose:  // all axes reversed: its own inverse
      r[0] = nd::transpose(g);
      break;
    case GradOp::kReshape:
      r[0] = g.reshape(a.shape());
      break;
    case GradOp::kBroadcastTo:
      r[0] = reduce_to(g, a.shape());
      break;
    case GradOp::kSum:
      r[0] = nd::broadcast_to(g.reshape(kept_shape(a.shape(), at)), a.shape());
      break;
    case GradOp::kMean: {
      const std::int64_t n = at.all ? a.size() : a.shape()[static_cast<std::size_t>(at.axis)];
      NDArray gs = g * (1.0f / static_cast<float>(n));
      r[0] = nd::broadcast_to(gs.reshape(kept_shape(a.shape(), at)), a.shape());
      break;
    }
    case GradOp::kMax: {  // to every element equal to the maximum
      const Shape k = kept_shape(a.shape(), at);
      r[0] = eq_mask(a, out().reshape(k)) * g.reshape(k);
      break;
    }
    case GradOp::kNorm:  // x / |x|
      r[0] = a * (g / out());
      break;
    case GradOp::kCopyTo:
      r[0] = g.copy_to(a.device());
      break;
  }
  return r;
}

const char* grad_op_name(GradOp op) {
  static constexpr const char* kNames[] = {
#define ASYNCND_GRAD_ONE(name, Name) #name,
#define ASYNCND_GRAD_BINARY(name, Name) #name, #name, #name,
      ASYNCND_UNARY_OPS(ASYNCND_GRAD_ONE) ASYNCND_BINARY_OPS(ASYNCND_GRAD_BINARY)
          ASYNCND_REDUCE_OPS(ASYNCND_GRAD_ONE) ASYNCND_OTHER_OPS(ASYNCND_GRAD_ONE)
#undef ASYNCND_GRAD_ONE
#undef ASYNCND_GRAD_BINARY
  };
  return kNames[static_cast<std::size_t>(op)];
}

// What node_backward above reads of each case's arrays, beyond shapes: keep the two in step.
unsigned grad_reads(const Node& node) {
  constexpr unsigned kA = 1u, kB = 2u, kOut = kReadsOutput;
  const bool n0 = node.needs[0] != 0, n1 = node.needs.size() > 1 && node.needs[1] != 0;
  switch (node.op) {
    case GradOp::kAdd:
    case GradOp::kSub:
    case GradOp::kAddScalar:
    case GradOp::kRAddScalar:
    case GradOp::kSubScalar:
    case GradOp::kRSubScalar:
    case GradOp::kNeg:
    case GradOp::kMulScalar:
    case GradOp::kRMulScalar:
    case GradOp::kDivScalar:
    case GradOp::kTranspose:
    case GradOp::kReshape:
    case GradOp::kBroadcastTo:
    case GradOp::kSum:
    case GradOp::kMean:
    case GradOp::kCopyTo:
      return 0;
    case GradOp::kMul:
    case GradOp::kDot:  // each input's gradient is a product with the other input
      return (n0 ? kB : 0) | (n1 ? kA : 0);
    case GradOp::kDiv:
      return (n0 ? kB : 0) | (n1 ? kB | kOut : 0);
    case GradOp::kPow:  // both parts are computed from a and b (pow_grad_base, pow_grad_exp)
      return (n0 || n1) ? kA | kB : 0;
    case GradOp::kPowScalar:
      return node.attrs.scalar == 1.0f ? 0 : kA;
    case GradOp::kRDivScalar:
    case GradOp::kNorm:
    case GradOp::kMax:
      return kA | kOut;
    case GradOp::kLog:
    case GradOp::kRelu:
    case GradOp::kAbs:
      return kA;
    case GradOp::kRPowScalar:  // s^a log s from the output; for s == 0 from a (pow_grad_exp)
      return node.attrs.scalar == 0.0f ? kA : kOut;
    case GradOp::kExp:
    case GradOp::kSqrt:
    case GradOp::kSigmoid:
    case GradOp::kTanh:
      return kOut;
  }
  return kA | kB | kOut;  // unreachable: -Wswitch names a missing case
}

void dot_grad_into(const Node& node, std::size_t i, const NDArray& g, NDArray& into) {
  const DotGrad d = dot_grad(node, i, g);
  dot_into(into, d.p, d.q, d.tp, d.tq);
}

}  // namespace detail
}  // namespace asyncnd
