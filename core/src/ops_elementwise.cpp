// Elementwise ops with NumPy broadcasting: add, sub, mul, div, pow (array or scalar operand),
// neg, exp, log, sqrt, relu, sigmoid, tanh, broadcast_to, the arithmetic operators and the
// compound assignments, and the elementwise helpers of autograd and nn (detail::). Each validates
// at the call, allocates its output and queues one kernel; the differentiable ones are recorded
// for autograd.
#include <memory>
#include <string>
#include <utility>

#include "asyncnd/ops.h"
#include "device_ops.h"
#include "autograd_internal.h"
#include "kernels/elementwise.h"
#include "kernels/functors.h"
#include "ops_common.h"

namespace asyncnd {
namespace nd {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {  // aligned from the right
    const std::int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const std::int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      throw Error(std::string(op) + ": cannot broadcast " + shape_str(a) + " with " + shape_str(b));
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace nd

namespace {

using detail::kGrain;
namespace k = kernels;

// Transcendental functions cost ~10x an add: split them into smaller pieces.
constexpr std::int64_t kGrainHeavy = kGrain / 4;

// Strides of contiguous `s` seen through the broadcast to `out` (0 along broadcast dims).
std::vector<std::int64_t> broadcast_strides(const Shape& s, const Shape& out) {
  std::vector<std::int64_t> st(out.size(), 0);
  std::int64_t stride = 1;
  for (std::size_t k = s.size(), d = out.size(); k-- > 0;) {
    --d;
    st[d] = s[k] == 1 ? 0 : stride;
    stride *= s[k];
  }
  return st;
}

using PlanPtr = std::shared_ptr<const k::StridedPlan>;

// The broadcast plan of a binary op, or null when a flat loop does (equal sizes, or one operand
// of size 1). Throws, before anything is allocated, for a plan the kernels cannot walk.
PlanPtr plan_for(const char* op, const Shape& a, const Shape& b, const Shape& out) {
  // checked_size: a broadcast output too large for the target is this op's error, by name.
  const std::int64_t n = detail::checked_size(op, out), na = shape_size(a), nb = shape_size(b);
  if (n == 0 || (na == n && nb == n) || (nb == 1 && na == n) || (na == 1 && nb == n))
    return nullptr;
  auto plan = std::make_shared<const k::StridedPlan>(
      k::make_plan(out, broadcast_strides(a, out), broadcast_strides(b, out)));
  if (plan->dims.size() > k::kMaxPlanDims)
    throw Error(std::string(op) + ": too many dimensions after broadcasting " + shape_str(a) +
                " with " + shape_str(b));
  return plan;
}

// Queues out = f(a, b) for inputs already checked to broadcast to out's shape. out may be a
// itself (the compound assignments): every kernel reads element i before writing element i, and
// a is never broadcast then.
template <class F>
void queue_binary(const char* op, const NDArray& a, const NDArray& b, const NDArray& out,
                  PlanPtr plan, F f, std::int64_t grain, bool inplace) {
  const std::int64_t n = out.size();
  if (n == 0) return detail::push_empty_output(op, out, {&a, &b});
  if (!out.device().is_cpu()) {
    detail::push_map(op, k::describe(f), a, &b, out, plan.get(), !inplace);
    return;
  }
  const float* pa = detail::data_of(a);
  const float* pb = detail::data_of(b);
  float* po = detail::data_of(out);
  if (plan) {
    detail::push_op(
        op,
        [=] {
          detail::parallel(n, grain, [&](std::int64_t s, std::int64_t e) {
            k::binary_strided(*plan, pa, pb, po, s, e, f);
          });
        },
        out, {&a, &b}, !inplace);
  } else if (a.size() == n && b.size() == n) {  // same shape up to leading 1s: flat loop
    detail::push_op(
        op,
        [=] {
          detail::parallel(n, grain, [=](std::int64_t s, std::int64_t e) {
            k::binary_contig(pa, pb, po, s, e, f);
          });
        },
        out, {&a, &b}, !inplace);
  } else if (a.size() == n) {  // b is a single element
    detail::push_op(
        op,
        [=] {
          const k::BindRight<F> g{f, pb[0]};
          detail::parallel(
              n, grain, [=](std::int64_t s, std::int64_t e) { k::unary_contig(pa, po, s, e, g); });
        },
        out, {&a, &b}, !inplace);
  } else {  // a is a single element
    detail::push_op(
        op,
        [=] {
          const k::BindLeft<F> g{f, pa[0]};
          detail::parallel(
              n, grain, [=](std::int64_t s, std::int64_t e) { k::unary_contig(pb, po, s, e, g); });
        },
        out, {&a, &b}, !inplace);
  }
}

template <class F>
NDArray binary(const char* op, const NDArray& a, const NDArray& b, F f,
               std::int64_t grain = kGrain) {
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_same_device(op, a, b);
  Shape shape = nd::broadcast_shapes(a.shape(), b.shape(), op);
  PlanPtr plan = plan_for(op, a.shape(), b.shape(), shape);
  NDArray out = detail::new_array(op, std::move(shape), a.device());
  queue_binary(op, a, b, out, std::move(plan), f, grain, false);
  return out;
}

// out = f(a) elementwise, f a unary functor (possibly a bound binary one).
template <class F>
NDArray unary(const char* op, const NDArray& a, F f, std::int64_t grain = kGrain) {
  detail::check_defined(op, a);
  NDArray out = detail::new_array(op, a.shape(), a.device());
  const std::int64_t n = out.size();
  if (n == 0) {
    detail::push_empty_output(op, out, {&a});
    return out;
  }
  if (!out.device().is_cpu()) {
    detail::push_map(op, k::describe(f), a, nullptr, out, nullptr);
    return out;
  }
  const float* pa = detail::data_of(a);
  float* po = detail::data_of(out);
  detail::push_op(op,
                  [=] {
                    detail::parallel(n, grain, [=](std::int64_t s, std::int64_t e) {
                      k::unary_contig(pa, po, s, e, f);
                    });
                  },
                  out, {&a});
  return out;
}

// target = f(target, b), b broadcast to target's shape.
template <class F>
void inplace(const char* op, NDArray& target, const NDArray& b, F f) {
  detail::check_defined(op, target);
  detail::check_defined(op, b);
  detail::check_same_device(op, target, b);
  detail::check_inplace_allowed(op, target, &b);
  if (nd::broadcast_shapes(target.shape(), b.shape(), op) != target.shape())
    throw Error(std::string(op) + ": cannot broadcast " + shape_str(b.shape()) +
                " into the target's shape " + shape_str(target.shape()));
  detail::check_kernels(op, target.device());
  PlanPtr plan = plan_for(op, target.shape(), b.shape(), target.shape());
  queue_binary(op, target, b, target, std::move(plan), f, kGrain, true);
}

template <class F>
void inplace_scalar(const char* op, NDArray& target, float v, F f) {
  detail::check_defined(op, target);
  detail::check_inplace_allowed(op, target, nullptr);
  detail::check_kernels(op, target.device());
  const std::int64_t n = target.size();
  if (n == 0) return;
  const k::BindRight<F> g{f, v};
  if (!target.device().is_cpu()) {
    detail::push_map(op, k::describe(g), target, nullptr, target, nullptr, false);
    return;
  }
  float* p = detail::data_of(target);
  detail::push_op(
      op,
      [=] {
        detail::parallel(n, kGrain,
                         [=](std::int64_t s, std::int64_t e) { k::unary_contig(p, p, s, e, g); });
      },
      target, {}, false);
}

template <class F>
NDArray bind_right(const char* op, const NDArray& a, float v, F f, std::int64_t grain = kGrain) {
  return unary(op, a, k::BindRight<F>{f, v}, grain);
}
template <class F>
NDArray bind_left(const char* op, float v, const NDArray& b, F f) {
  return unary(op, b, k::BindLeft<F>{f, v});
}

}  // namespace

namespace nd {

using detail::GradAttrs;
using detail::GradOp;
using detail::recorded;

NDArray add(const NDArray& a, const NDArray& b) {
  return recorded(GradOp::kAdd, binary("add", a, b, k::AddOp{}), {&a, &b});
}
NDArray sub(const NDArray& a, const NDArray& b) {
  return recorded(GradOp::kSub, binary("sub", a, b, k::SubOp{}), {&a, &b});
}
NDArray mul(const NDArray& a, const NDArray& b) {
  return recorded(GradOp::kMul, binary("mul", a, b, k::MulOp{}), {&a, &b});
}
NDArray div(const NDArray& a, const NDArray& b) {
  return recorded(GradOp::kDiv, binary("div", a, b, k::DivOp{}), {&a, &b});
}
NDArray pow(const NDArray& a, const NDArray& b) {
  return recorded(GradOp::kPow, binary("pow", a, b, k::PowOp{}, kGrainHeavy), {&a, &b});
}

namespace {
GradAttrs scalar_attr(float v) {
  GradAttrs at;
  at.scalar = v;
  return at;
}
}  // namespace

NDArray add(const NDArray& a, float b) {
  return recorded(GradOp::kAddScalar, bind_right("add", a, b, k::AddOp{}), {&a}, scalar_attr(b));
}
NDArray sub(const NDArray& a, float b) {
  return recorded(GradOp::kSubScalar, bind_right("sub", a, b, k::SubOp{}), {&a}, scalar_attr(b));
}
NDArray mul(const NDArray& a, float b) {
  return recorded(GradOp::kMulScalar, bind_right("mul", a, b, k::MulOp{}), {&a}, scalar_attr(b));
}
NDArray div(const NDArray& a, float b) {
  return recorded(GradOp::kDivScalar, bind_right("div", a, b, k::DivOp{}), {&a}, scalar_attr(b));
}
NDArray pow(const NDArray& a, float b) {
  NDArray out;
  // x*x and x are exactly what powf gives for these exponents, and much cheaper.
  if (b == 2.0f) {
    out = unary("pow", a, k::SquareOp{});
  } else if (b == 1.0f) {
    out = unary("pow", a, k::CopyOp{});
  } else {
    out = unary("pow", a, k::PowScalarOp{b}, kGrainHeavy);
  }
  return recorded(GradOp::kPowScalar, std::move(out), {&a}, scalar_attr(b));
}

NDArray neg(const NDArray& a) { return recorded(GradOp::kNeg, unary("neg", a, k::NegOp{}), {&a}); }
NDArray exp(const NDArray& a) {
  return recorded(GradOp::kExp, unary("exp", a, k::ExpOp{}, kGrainHeavy), {&a});
}
NDArray log(const NDArray& a) {
  return recorded(GradOp::kLog, unary("log", a, k::LogOp{}, kGrainHeavy), {&a});
}
NDArray sqrt(const NDArray& a) {
  return recorded(GradOp::kSqrt, unary("sqrt", a, k::SqrtOp{}), {&a});
}
NDArray relu(const NDArray& a) {
  return recorded(GradOp::kRelu, unary("relu", a, k::ReluOp{}), {&a});
}
NDArray sigmoid(const NDArray& a) {
  return recorded(GradOp::kSigmoid, unary("sigmoid", a, k::SigmoidOp{}, kGrainHeavy), {&a});
}
NDArray tanh(const NDArray& a) {
  return recorded(GradOp::kTanh, unary("tanh", a, k::TanhOp{}, kGrainHeavy), {&a});
}

NDArray broadcast_to(const NDArray& a, Shape shape) {
  static const char* kOp = "broadcast_to";
  detail::check_defined(kOp, a);
  detail::checked_size(kOp, shape);
  if (broadcast_shapes(a.shape(), shape, kOp) != shape)
    throw Error(std::string(kOp) + ": cannot broadcast " + shape_str(a.shape()) + " to " +
                shape_str(shape));
  PlanPtr plan = plan_for(kOp, a.shape(), a.shape(), shape);
  NDArray out = detail::new_array(kOp, std::move(shape), a.device());
  // Both operands are `a`; FirstOp keeps the first.
  queue_binary(kOp, a, a, out, std::move(plan), k::FirstOp{}, kGrain, false);
  return recorded(GradOp::kBroadcastTo, std::move(out), {&a});
}

}  // namespace nd

namespace detail {

NDArray relu_grad(const NDArray& g, const NDArray& x) {
  return binary("relu_grad", g, x, k::ReluGradOp{});
}
NDArray eq_mask(const NDArray& a, const NDArray& b) {
  return binary("eq_mask", a, b, k::EqMaskOp{});
}
void assign(NDArray& target, const NDArray& src) { inplace("assign", target, src, k::SecondOp{}); }
void sgd_update(NDArray& w, const NDArray& g, float alpha) {
  inplace("sgd_update", w, g, k::SgdOp{alpha});
}

}  // namespace detail

NDArray operator+(const NDArray& a, const NDArray& b) { return nd::add(a, b); }
NDArray operator-(const NDArray& a, const NDArray& b) { return nd::sub(a, b); }
NDArray operator*(const NDArray& a, const NDArray& b) { return nd::mul(a, b); }
NDArray operator/(const NDArray& a, const NDArray& b) { return nd::div(a, b); }
NDArray operator+(const NDArray& a, float b) { return nd::add(a, b); }
NDArray operator-(const NDArray& a, float b) { return nd::sub(a, b); }
NDArray operator*(const NDArray& a, float b) { return nd::mul(a, b); }
NDArray operator/(const NDArray& a, float b) { return nd::div(a, b); }
// The scalar on the left: BindLeft keeps the expression's operand order (s - x, s / x).
NDArray operator+(float a, const NDArray& b) { return nd::add(b, a); }
NDArray operator-(float a, const NDArray& b) {
  return detail::recorded(detail::GradOp::kRSubScalar, bind_left("sub", a, b, k::SubOp{}), {&b},
                          nd::scalar_attr(a));
}
NDArray operator*(float a, const NDArray& b) { return nd::mul(b, a); }
NDArray operator/(float a, const NDArray& b) {
  return detail::recorded(detail::GradOp::kRDivScalar, bind_left("div", a, b, k::DivOp{}), {&b},
                          nd::scalar_attr(a));
}
NDArray operator-(const NDArray& a) { return nd::neg(a); }

NDArray& NDArray::operator+=(const NDArray& o) {
  inplace("+=", *this, o, k::AddOp{});
  return *this;
}
NDArray& NDArray::operator-=(const NDArray& o) {
  inplace("-=", *this, o, k::SubOp{});
  return *this;
}
NDArray& NDArray::operator*=(const NDArray& o) {
  inplace("*=", *this, o, k::MulOp{});
  return *this;
}
NDArray& NDArray::operator/=(const NDArray& o) {
  inplace("/=", *this, o, k::DivOp{});
  return *this;
}
NDArray& NDArray::operator+=(float v) {
  inplace_scalar("+=", *this, v, k::AddOp{});
  return *this;
}
NDArray& NDArray::operator-=(float v) {
  inplace_scalar("-=", *this, v, k::SubOp{});
  return *this;
}
NDArray& NDArray::operator*=(float v) {
  inplace_scalar("*=", *this, v, k::MulOp{});
  return *this;
}
NDArray& NDArray::operator/=(float v) {
  inplace_scalar("/=", *this, v, k::DivOp{});
  return *this;
}

}  // namespace asyncnd
