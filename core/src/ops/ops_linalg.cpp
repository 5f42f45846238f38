// Linear algebra: dot/matmul (one GEMM kernel call, operands optionally transposed: the backend
// runs it with its BLAS), transpose, reshape.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "asyncnd/ops.h"
#include "kernels/device_map.h"
#include "autograd/autograd_internal.h"
#include "kernels/elementwise.h"
#include "kernels/functors.h"
#include "ops/ops_common.h"

namespace asyncnd {
namespace nd {

namespace {

// out = op(a) op(b), out [m,n] already allocated: one GEMM kernel call. new_output: whether out
// was allocated for this op (push_kernel).
void push_gemm(const char* op, const NDArray& out, const NDArray& a, const NDArray& b, bool ta,
               bool tb, bool new_output) {
  const std::int64_t m = a.shape()[ta ? 1 : 0], k = a.shape()[ta ? 0 : 1];
  const std::int64_t n = b.shape()[tb ? 0 : 1];
  if (m == 0 || n == 0) {
    detail::push_empty_output(op, out, {&a, &b});
    return;
  }
  // k == 0 is an [m,n] of zeros: beta = 0 makes the backend write them.
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kGemm, out, &a, &b);
  c.gemm = {ta, tb, m, n, k, a.shape()[1], b.shape()[1], n, 1.0f, 0.0f};
  detail::push_kernel(op, c, out, {&a, &b}, new_output);
}

NDArray matrix_product(const char* op, const NDArray& a, const NDArray& b, bool ta, bool tb) {
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_same_device(op, a, b);
  const auto shapes = [&] {
    return std::string(" a=") + shape_str(a.shape()) + (ta ? "^T" : "") +
           " b=" + shape_str(b.shape()) + (tb ? "^T" : "");
  };
  if (a.ndim() != 2 || b.ndim() != 2)
    throw Error(std::string(op) + ": expects 2-D arrays, got" + shapes());
  // op(a) is [m,k], op(b) is [k,n].
  const std::int64_t m = a.shape()[ta ? 1 : 0], k = a.shape()[ta ? 0 : 1];
  const std::int64_t n = b.shape()[tb ? 0 : 1];
  if (b.shape()[tb ? 1 : 0] != k)
    throw Error(std::string(op) + ": inner dimensions differ:" + shapes());
  NDArray out = detail::new_array(op, {m, n}, a.device());
  push_gemm(op, out, a, b, ta, tb, true);
  detail::GradAttrs at;
  at.trans_a = ta;
  at.trans_b = tb;
  return detail::recorded(detail::GradOp::kDot, std::move(out), {&a, &b}, at);
}

}  // namespace
}  // namespace nd

namespace detail {

void dot_into(NDArray& out, const NDArray& a, const NDArray& b, bool ta, bool tb) {
  bump_version(out);
  nd::push_gemm("dot", out, a, b, ta, tb, false);
}

}  // namespace detail

namespace nd {

NDArray dot(const NDArray& a, const NDArray& b) { return matrix_product("dot", a, b, false, false); }
NDArray matmul(const NDArray& a, const NDArray& b) {
  return matrix_product("matmul", a, b, false, false);
}
NDArray dot(const NDArray& a, const NDArray& b, bool transpose_a, bool transpose_b) {
  return matrix_product("dot", a, b, transpose_a, transpose_b);
}

// NumPy's transpose: axes reversed. 2-D gets a cache-blocked kernel; 0-D and 1-D are a copy; N-D
// walks the input with permuted strides.
NDArray transpose(const NDArray& a) {
  static const char* kOp = "transpose";
  detail::check_defined(kOp, a);
  const Shape& in = a.shape();
  const std::size_t nd = in.size();
  Shape shape(in.rbegin(), in.rend());
  std::shared_ptr<const kernels::StridedPlan> plan;
  // An empty array needs no plan (nothing moves): 64 dimensions, as any array, not the plan's 32.
  const bool empty = std::find(in.begin(), in.end(), std::int64_t{0}) != in.end();
  if (nd > 2 && !empty) {
    std::vector<std::int64_t> strides(nd), permuted(nd);
    std::int64_t s = 1;
    for (std::size_t d = nd; d-- > 0;) {
      strides[d] = s;
      s *= in[d];
    }
    for (std::size_t d = 0; d < nd; ++d) permuted[d] = strides[nd - 1 - d];
    plan = std::make_shared<const kernels::StridedPlan>(kernels::make_plan(shape, permuted, {}));
    if (plan->dims.size() > kernels::kMaxPlanDims)
      throw Error(std::string(kOp) + ": too many dimensions in " + shape_str(in));
  }
  NDArray out = detail::new_array(kOp, std::move(shape), a.device());
  out = detail::recorded(detail::GradOp::kTranspose, std::move(out), {&a});
  const std::int64_t n = out.size();
  if (n == 0) {
    detail::push_empty_output(kOp, out, {&a});
    return out;
  }
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kTranspose2d, out, &a);
  if (nd == 2) {
    c.transpose = {in[0], in[1]};
    detail::push_kernel(kOp, c, out, {&a});
  } else if (nd < 2) {  // a copy
    c.kind = detail::KernelCall::Kind::kMap;
    c.map = kernels::describe(kernels::CopyOp{});
    detail::push_kernel(kOp, c, out, {&a});
  } else {  // a permuted walk
    c.kind = detail::KernelCall::Kind::kMapStrided;
    c.strided = {kernels::describe(kernels::CopyOp{}), plan->view()};
    detail::push_kernel(kOp, c, out, {&a}, true, std::move(plan));
  }
  return out;
}

NDArray reshape(const NDArray& a, Shape shape) {
  detail::check_defined("reshape", a);
  return a.reshape(std::move(shape));
}

}  // namespace nd
}  // namespace asyncnd
