// Elementwise ops with NumPy broadcasting: the unary and binary ops of the op table (each binary
// op with a scalar on either side), broadcast_to, the arithmetic operators and the compound
// assignments, and the elementwise helpers of autograd and nn (detail::). Each validates at the
// call, allocates its output and pushes one KernelCall (a map, or a strided map when an operand
// is broadcast); the differentiable ones are recorded for autograd.
#include <memory>
#include <string>
#include <utility>

#include "asyncnd/detail/op_table.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "kernels/elementwise.h"
#include "ops/ops_common.h"

namespace asyncnd {
namespace nd {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  for (const Shape* s : {&a, &b})  // (arrays' shapes never are; a caller's may be)
    for (const std::int64_t d : *s)
      if (d < 0) throw Error(std::string(op) + ": negative dimension in " + shape_str(*s));
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

using detail::KernelCall;
using detail::MapFn;
using detail::MapForm;
using Map = KernelCall::Map;
namespace k = kernels;

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

// Queues out = m(a, b) (m in the binary form) for inputs already checked to broadcast to out's
// shape. out may be a itself (the compound assignments): every kernel reads element i before
// writing element i, and a is never broadcast then.
void queue_binary(const char* op, const NDArray& a, const NDArray& b, const NDArray& out,
                  PlanPtr plan, Map m, bool inplace) {
  const std::int64_t n = out.size();
  if (n == 0) return detail::push_empty_output(op, out, {&a, &b});
  KernelCall c = detail::kernel_call(KernelCall::Kind::kMap, out, &a, &b);
  if (plan) {
    c.kind = KernelCall::Kind::kMapStrided;
    c.strided = {m, plan->view()};
    return detail::push_kernel(op, c, out, {&a, &b}, !inplace, std::move(plan));
  }
  // Same shape up to leading 1s: a flat loop; else one operand is a single element.
  m.form = b.size() != n ? MapForm::kOneRight : a.size() != n ? MapForm::kOneLeft : MapForm::kBinary;
  c.map = m;
  detail::push_kernel(op, c, out, {&a, &b}, !inplace);
}

Map binary_fn(MapFn fn, float param = 0.0f) { return {fn, MapForm::kBinary, param}; }

NDArray binary(const char* op, const NDArray& a, const NDArray& b, MapFn fn) {
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_same_device(op, a, b);
  Shape shape = nd::broadcast_shapes(a.shape(), b.shape(), op);
  PlanPtr plan = plan_for(op, a.shape(), b.shape(), shape);
  NDArray out = detail::new_array(op, std::move(shape), detail::device_of(a));
  queue_binary(op, a, b, out, std::move(plan), binary_fn(fn), false);
  return out;
}

// out = m(a) elementwise, m a unary function or a binary one bound to a scalar.
NDArray unary(const char* op, const NDArray& a, Map m) {
  detail::check_defined(op, a);
  NDArray out = detail::new_array_like(op, a);
  if (out.size() == 0) {
    detail::push_empty_output(op, out, {&a});
    return out;
  }
  KernelCall c = detail::kernel_call(KernelCall::Kind::kMap, out, &a);
  c.map = m;
  detail::push_kernel(op, c, out, {&a});
  return out;
}
NDArray unary(const char* op, const NDArray& a, MapFn fn) {
  return unary(op, a, Map{fn, MapForm::kUnary, 0.0f});
}
NDArray bind_right(const char* op, const NDArray& a, float v, MapFn fn) {
  return unary(op, a, Map{fn, MapForm::kScalarRight, v});
}
NDArray bind_left(const char* op, float v, const NDArray& b, MapFn fn) {
  return unary(op, b, Map{fn, MapForm::kScalarLeft, v});
}
// a op v; pow's common exponents become cheaper maps: x^1 is x, exactly as powf gives it; x^2 is
// x * x, correctly rounded, where powf is 1 ulp off for some x (so pow(x, 2) may differ by 1 ulp
// from pow(x, an array of 2s), which runs powf).
NDArray scalar_right(const char* op, const NDArray& a, float v, MapFn fn) {
  if (fn == MapFn::kPow && v == 2.0f) return unary(op, a, MapFn::kSquare);
  if (fn == MapFn::kPow && v == 1.0f) return unary(op, a, MapFn::kCopy);
  return bind_right(op, a, v, fn);
}

detail::GradAttrs scalar_attr(float v) {
  detail::GradAttrs at;
  at.scalar = v;
  return at;
}

// target = m(target, b), b broadcast to target's shape.
void inplace(const char* op, NDArray& target, const NDArray& b, Map m) {
  detail::check_defined(op, target);
  detail::check_defined(op, b);
  detail::check_same_device(op, target, b);
  detail::check_inplace_allowed(op, target, &b);
  if (nd::broadcast_shapes(target.shape(), b.shape(), op) != target.shape())
    throw Error(std::string(op) + ": cannot broadcast " + shape_str(b.shape()) +
                " into the target's shape " + shape_str(target.shape()));
  PlanPtr plan = plan_for(op, target.shape(), b.shape(), target.shape());
  detail::bump_version(target);
  queue_binary(op, target, b, target, std::move(plan), m, true);
}

void inplace_scalar(const char* op, NDArray& target, float v, MapFn fn) {
  detail::check_defined(op, target);
  detail::check_inplace_allowed(op, target, nullptr);
  if (target.size() == 0) return;
  detail::bump_version(target);
  KernelCall c = detail::kernel_call(KernelCall::Kind::kMap, target, &target);
  c.map = {fn, MapForm::kScalarRight, v};
  detail::push_kernel(op, c, target, {}, false);
}

}  // namespace

namespace nd {

using detail::GradAttrs;
using detail::GradOp;
using detail::recorded;

// The binary ops of the op table, in their three forms: array-array, array-scalar, scalar-array.
#define ASYNCND_DEFINE_BINARY(name, Name)                                                   \
  NDArray name(const NDArray& a, const NDArray& b) {                                        \
    return recorded(GradOp::k##Name, binary(#name, a, b, MapFn::k##Name), {&a, &b});         \
  }                                                                                         \
  NDArray name(const NDArray& a, float b) {                                                 \
    return recorded(GradOp::k##Name##Scalar, scalar_right(#name, a, b, MapFn::k##Name), {&a}, \
                    scalar_attr(b));                                                        \
  }                                                                                         \
  NDArray name(float a, const NDArray& b) {                                                 \
    return recorded(GradOp::kR##Name##Scalar, bind_left(#name, a, b, MapFn::k##Name), {&b},   \
                    scalar_attr(a));                                                        \
  }
ASYNCND_BINARY_OPS(ASYNCND_DEFINE_BINARY)
#undef ASYNCND_DEFINE_BINARY

#define ASYNCND_DEFINE_UNARY(name, Name) \
  NDArray name(const NDArray& a) { return recorded(GradOp::k##Name, unary(#name, a, MapFn::k##Name), {&a}); }
ASYNCND_UNARY_OPS(ASYNCND_DEFINE_UNARY)
#undef ASYNCND_DEFINE_UNARY

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
  queue_binary(kOp, a, a, out, std::move(plan), binary_fn(MapFn::kFirst), false);
  return recorded(GradOp::kBroadcastTo, std::move(out), {&a});
}

}  // namespace nd

namespace detail {

NDArray relu_grad(const NDArray& g, const NDArray& x) {
  return binary("relu_grad", g, x, MapFn::kReluGrad);
}
NDArray eq_mask(const NDArray& a, const NDArray& b) {
  return binary("eq_mask", a, b, MapFn::kEqMask);
}
NDArray pow_grad_base(const NDArray& a, const NDArray& b) {
  return binary("pow_grad_base", a, b, MapFn::kPowGradBase);
}
NDArray pow_grad_exp(const NDArray& a, const NDArray& b) {
  return binary("pow_grad_exp", a, b, MapFn::kPowGradExp);
}
void assign(NDArray& target, const NDArray& src) { inplace("assign", target, src, binary_fn(MapFn::kSecond)); }
void sgd_update(NDArray& w, const NDArray& g, float alpha) {
  inplace("sgd_update", w, g, binary_fn(MapFn::kSgd, alpha));
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
NDArray operator+(float a, const NDArray& b) { return nd::add(a, b); }
NDArray operator-(float a, const NDArray& b) { return nd::sub(a, b); }
NDArray operator*(float a, const NDArray& b) { return nd::mul(a, b); }
NDArray operator/(float a, const NDArray& b) { return nd::div(a, b); }
NDArray operator-(const NDArray& a) { return nd::neg(a); }

NDArray& NDArray::operator+=(const NDArray& o) {
  inplace("+=", *this, o, binary_fn(MapFn::kAdd));
  return *this;
}
NDArray& NDArray::operator-=(const NDArray& o) {
  inplace("-=", *this, o, binary_fn(MapFn::kSub));
  return *this;
}
NDArray& NDArray::operator*=(const NDArray& o) {
  inplace("*=", *this, o, binary_fn(MapFn::kMul));
  return *this;
}
NDArray& NDArray::operator/=(const NDArray& o) {
  inplace("/=", *this, o, binary_fn(MapFn::kDiv));
  return *this;
}
NDArray& NDArray::operator+=(float v) {
  inplace_scalar("+=", *this, v, MapFn::kAdd);
  return *this;
}
NDArray& NDArray::operator-=(float v) {
  inplace_scalar("-=", *this, v, MapFn::kSub);
  return *this;
}
NDArray& NDArray::operator*=(float v) {
  inplace_scalar("*=", *this, v, MapFn::kMul);
  return *this;
}
NDArray& NDArray::operator/=(float v) {
  inplace_scalar("/=", *this, v, MapFn::kDiv);
  return *this;
}

}  // namespace asyncnd
