// Reductions: sum, mean, max over all elements or one axis (keepdims, negative axes), and the
// Frobenius norm, each one KernelCall over the [outer, len, inner] view of its input. The CPU's
// kernel (kernels/host_kernels.cpp) splits the work in pieces fixed by the shape alone, so every
// worker count gives bit-identical results.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "asyncnd/detail/op_table.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "ops/ops_common.h"

namespace asyncnd {
namespace nd {

namespace {

using detail::ReduceFn;

// The gradient op of a reduction: the op table names both alike.
detail::GradOp grad_op(ReduceFn fn) {
  switch (fn) {
#define ASYNCND_REDUCE_GRAD(name, Name) \
  case ReduceFn::k##Name:               \
    return detail::GradOp::k##Name;
    ASYNCND_REDUCE_OPS(ASYNCND_REDUCE_GRAD)
#undef ASYNCND_REDUCE_GRAD
  }
  return detail::GradOp::kSum;  // unreachable: the switch covers every ReduceFn
}

NDArray reduce(const char* op, ReduceFn kind, const NDArray& a, bool all, int axis, bool keepdims) {
  detail::check_defined(op, a);
  const Shape& in = a.shape();
  const std::int64_t nd = a.ndim();
  std::int64_t outer = 1, len = a.size(), inner = 1;
  Shape shape;
  if (!all) {
    if (axis < -nd || axis >= nd)
      throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " +
                  shape_str(in) + (nd == 0 ? " (a 0-D array has no axes)" : ""));
    const std::size_t ax = static_cast<std::size_t>(axis < 0 ? axis + nd : axis);
    len = in[ax];
    for (std::size_t d = 0; d < in.size(); ++d) {
      if (d < ax) outer *= in[d];
      if (d > ax) inner *= in[d];
      if (d != ax) {
        shape.push_back(in[d]);
      } else if (keepdims) {
        shape.push_back(1);
      }
    }
    if (kind == ReduceFn::kMax && len == 0)
      throw Error(std::string(op) + ": cannot reduce over the empty axis " + std::to_string(axis) +
                  " of " + shape_str(in) + " (no identity for max)");
  } else if (kind == ReduceFn::kMax && len == 0) {
    throw Error(std::string(op) + ": cannot reduce the empty array " + shape_str(in) +
                " (no identity for max)");
  }
  NDArray out = detail::new_array(op, std::move(shape), a.device());
  if (out.size() > 0) {
    detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kReduce, out, &a);
    c.reduce = {kind, outer, len, inner};
    detail::push_kernel(op, c, out, {&a});
  } else {
    detail::push_empty_output(op, out, {&a});
  }
  detail::GradAttrs at;
  at.all = all;
  at.axis = all ? 0 : (axis < 0 ? axis + static_cast<int>(nd) : axis);
  return detail::recorded(grad_op(kind), std::move(out), {&a}, at);
}

}  // namespace

// The reductions of the op table; norm has no axis form.
#define ASYNCND_DEFINE_REDUCE(name, Name) \
  NDArray name(const NDArray& a) { return reduce(#name, ReduceFn::k##Name, a, true, 0, false); }
ASYNCND_REDUCE_OPS(ASYNCND_DEFINE_REDUCE)
#undef ASYNCND_DEFINE_REDUCE
NDArray sum(const NDArray& a, int axis, bool keepdims) {
  return reduce("sum", ReduceFn::kSum, a, false, axis, keepdims);
}
NDArray mean(const NDArray& a, int axis, bool keepdims) {
  return reduce("mean", ReduceFn::kMean, a, false, axis, keepdims);
}
NDArray max(const NDArray& a, int axis, bool keepdims) {
  return reduce("max", ReduceFn::kMax, a, false, axis, keepdims);
}

}  // namespace nd
}  // namespace asyncnd
