// Reductions: sum, mean, max over all elements or one axis (keepdims, negative axes), and the
// Frobenius norm. The split into parallel pieces is fixed by the shape alone (blocks of kBlock
// elements merged in order), so every worker count gives bit-identical results.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "asyncnd/ops.h"
#include "device_ops.h"
#include "autograd_internal.h"
#include "kernels/reduce.h"
#include "ops_common.h"

namespace asyncnd {
namespace nd {

namespace {

namespace k = kernels;

enum class Kind { kSum, kMean, kMax, kNorm };

// Elements per partial result of a long row; fixed, so the summation order never depends on
// the number of workers.
constexpr std::int64_t kBlock = 32768;
// Output columns reduced together when the reduced axis is not the last one.
constexpr std::int64_t kTile = 1024;

// The [outer, n, inner] view of a reduction and what to do with each accumulated value.
struct Geometry {
  std::int64_t outer, n, inner;
};

template <class A, class Finish>
void run_reduce(const float* x, float* out, Geometry g, Finish finish) {
  using T = typename A::T;
  const std::int64_t outer = g.outer, n = g.n, inner = g.inner;
  if (inner == 1) {
    const std::int64_t nb = n > kBlock ? (n + kBlock - 1) / kBlock : 1;
    if (nb == 1) {
      const std::int64_t grain = n >= detail::kGrain ? 1 : detail::kGrain / (n > 0 ? n : 1);
      detail::parallel(outer, grain, [=](std::int64_t o0, std::int64_t o1) {
        for (std::int64_t o = o0; o < o1; ++o) out[o] = finish(k::reduce_row<A>(x + o * n, n));
      });
      return;
    }
    // Long rows: one partial per block, computed in parallel, merged in block order.
    std::vector<T> partial(static_cast<std::size_t>(outer * nb));
    T* pp = partial.data();
    detail::parallel(outer * nb, 1, [=](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t o = t / nb, b = t % nb;
        const std::int64_t len = (b + 1 == nb) ? n - b * kBlock : kBlock;
        pp[t] = k::reduce_row<A>(x + o * n + b * kBlock, len);
      }
    });
    for (std::int64_t o = 0; o < outer; ++o) {
      T acc = pp[o * nb];
      for (std::int64_t b = 1; b < nb; ++b) acc = A::merge(acc, pp[o * nb + b]);
      out[o] = finish(acc);
    }
    return;
  }
  // Reduced axis in the middle: each task owns a tile of output columns of one outer index.
  const std::int64_t tiles = (inner + kTile - 1) / kTile;
  const std::int64_t work = n * (inner < kTile ? inner : kTile);  // elements per task
  const std::int64_t grain = work >= detail::kGrain ? 1 : detail::kGrain / (work > 0 ? work : 1);
  detail::parallel(outer * tiles, grain, [=](std::int64_t t0, std::int64_t t1) {
    T acc[kTile];
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t o = t / tiles, i0 = (t % tiles) * kTile;
      const std::int64_t i1 = i0 + kTile < inner ? i0 + kTile : inner;
      k::reduce_cols<A>(x + o * n * inner, n, inner, i0, i1, acc);
      float* dst = out + o * inner;
      for (std::int64_t i = i0; i < i1; ++i) dst[i] = finish(acc[i - i0]);
    }
  });
}

void dispatch(Kind kind, const float* x, float* out, Geometry g) {
  const double n = static_cast<double>(g.n);
  switch (kind) {
    case Kind::kSum:
      run_reduce<k::SumAcc>(x, out, g, [](double v) { return static_cast<float>(v); });
      break;
    case Kind::kMean:  // 0/0 gives NaN for an empty axis, as NumPy does
      run_reduce<k::SumAcc>(x, out, g, [n](double v) { return static_cast<float>(v / n); });
      break;
    case Kind::kMax:
      run_reduce<k::MaxAcc>(x, out, g, [](float v) { return v; });
      break;
    case Kind::kNorm:
      run_reduce<k::SumSqAcc>(x, out, g, [](double v) { return static_cast<float>(std::sqrt(v)); });
      break;
  }
}

NDArray reduce(const char* op, Kind kind, const NDArray& a, bool all, int axis, bool keepdims) {
  detail::check_defined(op, a);
  const Shape& in = a.shape();
  const std::int64_t nd = a.ndim();
  Geometry g{1, a.size(), 1};
  Shape shape;
  if (!all) {
    if (axis < -nd || axis >= nd)
      throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " +
                  shape_str(in) + (nd == 0 ? " (a 0-D array has no axes)" : ""));
    const std::size_t ax = static_cast<std::size_t>(axis < 0 ? axis + nd : axis);
    g.n = in[ax];
    for (std::size_t d = 0; d < in.size(); ++d) {
      if (d < ax) g.outer *= in[d];
      if (d > ax) g.inner *= in[d];
      if (d != ax) {
        shape.push_back(in[d]);
      } else if (keepdims) {
        shape.push_back(1);
      }
    }
    if (kind == Kind::kMax && g.n == 0)
      throw Error(std::string(op) + ": cannot reduce over the empty axis " + std::to_string(axis) +
                  " of " + shape_str(in) + " (no identity for max)");
  } else if (kind == Kind::kMax && g.n == 0) {
    throw Error(std::string(op) + ": cannot reduce the empty array " + shape_str(in) +
                " (no identity for max)");
  }
  NDArray out = detail::new_array(op, std::move(shape), a.device());
  if (out.size() > 0) {
    if (!out.device().is_cpu()) {
      detail::KernelCall c;
      c.kind = detail::KernelCall::Kind::kReduce;
      c.a = detail::data_of(a);
      c.out = detail::data_of(out);
      c.n = out.size();
      static constexpr detail::ReduceFn kFns[] = {detail::ReduceFn::kSum, detail::ReduceFn::kMean,
                                                  detail::ReduceFn::kMax, detail::ReduceFn::kNorm};
      c.reduce = {kFns[static_cast<int>(kind)], g.outer, g.n, g.inner};
      detail::push_device(op, c, out.device(), out, {&a});
    } else {
      const float* px = detail::data_of(a);
      float* po = detail::data_of(out);
      detail::push_op(op, [=] { dispatch(kind, px, po, g); }, out, {&a});
    }
  } else {
    detail::push_empty_output(op, out, {&a});
  }
  detail::GradAttrs at;
  at.all = all;
  at.axis = all ? 0 : (axis < 0 ? axis + static_cast<int>(nd) : axis);
  static constexpr detail::GradOp kGrad[] = {detail::GradOp::kSum, detail::GradOp::kMean,
                                             detail::GradOp::kMax, detail::GradOp::kNorm};
  return detail::recorded(kGrad[static_cast<int>(kind)], std::move(out), {&a}, at);
}

}  // namespace

NDArray sum(const NDArray& a) { return reduce("sum", Kind::kSum, a, true, 0, false); }
NDArray sum(const NDArray& a, int axis, bool keepdims) {
  return reduce("sum", Kind::kSum, a, false, axis, keepdims);
}
NDArray mean(const NDArray& a) { return reduce("mean", Kind::kMean, a, true, 0, false); }
NDArray mean(const NDArray& a, int axis, bool keepdims) {
  return reduce("mean", Kind::kMean, a, false, axis, keepdims);
}
NDArray max(const NDArray& a) { return reduce("max", Kind::kMax, a, true, 0, false); }
NDArray max(const NDArray& a, int axis, bool keepdims) {
  return reduce("max", Kind::kMax, a, false, axis, keepdims);
}
NDArray norm(const NDArray& a) { return reduce("norm", Kind::kNorm, a, true, 0, false); }

}  // namespace nd
}  // namespace asyncnd
