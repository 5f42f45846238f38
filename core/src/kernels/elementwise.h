// Portable CPU loops for elementwise ops: contiguous and strided with NumPy broadcasting. Every
// function handles the flat output range [begin, end), so callers split work across workers
// without changing any element's arithmetic. Contiguous runs of the functors that have a SIMD form
// (kernels/simd_ops.h: add, sub, mul, div, their scalar forms, neg, relu, square, copy) run 4-wide
// explicitly (SSE natively, SIMD128 in wasm); the others are left to the compiler's vectoriser.
#pragma once

#include <cstdint>
#include <vector>

#include "asyncnd/detail/kernel_call.h"
#include "kernels/functors.h"
#if !defined(__CUDACC__)
#include "kernels/simd_ops.h"
#endif

ASYNCND_KERNELS_BEGIN

namespace asyncnd {
namespace kernels {

// How inputs map onto a contiguous output: collapsed output dims and, per input, its stride (in
// elements) along each dim; 0 along a broadcast dim. Built once at the call (see make_plan).
struct StridedPlan {
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> sa, sb;  // sb is empty for unary plans
  // The plan as a KernelCall carries it; valid while the plan lives.
  ::asyncnd::detail::StridedView view() const {
    return {static_cast<int>(dims.size()), dims.data(), sa.data(), sb.empty() ? nullptr : sb.data()};
  }
};
using StridedView = ::asyncnd::detail::StridedView;

// Max dims of a collapsed plan (NumPy's historical limit); for_each_run keeps an index per dim on
// the stack. Callers check it at the op's call.
constexpr std::size_t kMaxPlanDims = 32;

// A plan for a contiguous output of `dims` whose inputs have strides sa (and sb if given; pass an
// empty vector for a unary plan). Drops size-1 dims and merges neighbours that are contiguous
// in every input, so [2,3,4] + [4] becomes one run of 4 per row of a [6,4] output.
inline StridedPlan make_plan(const std::vector<std::int64_t>& dims,
                             const std::vector<std::int64_t>& sa,
                             const std::vector<std::int64_t>& sb) {
  StridedPlan p;
  const bool two = !sb.empty();
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!p.dims.empty() && p.sa.back() == sa[d] * dims[d] &&
        (!two || p.sb.back() == sb[d] * dims[d])) {
      p.dims.back() *= dims[d];
      p.sa.back() = sa[d];
      if (two) p.sb.back() = sb[d];
    } else {
      p.dims.push_back(dims[d]);
      p.sa.push_back(sa[d]);
      if (two) p.sb.push_back(sb[d]);
    }
  }
  if (p.dims.empty()) {  // every dim is 1: a single element
    p.dims.push_back(1);
    p.sa.push_back(0);
    if (two) p.sb.push_back(0);
  }
  return p;
}

// out[i] = f(a[i]) for i in [begin, end); out may equal a (each vector is read before it is
// written), but may not overlap it otherwise.
template <class F>
inline void unary_contig(const float* a, float* out, std::int64_t begin, std::int64_t end, F f) {
  std::int64_t i = begin;
#if !defined(__CUDACC__)
  if constexpr (vec::VecOp<F>::kHas) {
    using V = vec::VecOp<F>;
    for (; i + 8 <= end; i += 8) {
      const simd::f32x4 x0 = simd::load(a + i), x1 = simd::load(a + i + 4);
      simd::store(out + i, V::apply(f, x0));
      simd::store(out + i + 4, V::apply(f, x1));
    }
    for (; i + 4 <= end; i += 4) simd::store(out + i, V::apply(f, simd::load(a + i)));
  }
#endif
  for (; i < end; ++i) out[i] = f(a[i]);
}

// out[i] = f(a[i], b[i]); out may equal a or b (but not overlap them otherwise).
template <class F>
inline void binary_contig(const float* a, const float* b, float* out, std::int64_t begin,
                          std::int64_t end, F f) {
  std::int64_t i = begin;
#if !defined(__CUDACC__)
  if constexpr (vec::VecOp<F>::kHas) {
    using V = vec::VecOp<F>;
    for (; i + 8 <= end; i += 8) {
      const simd::f32x4 x0 = simd::load(a + i), x1 = simd::load(a + i + 4);
      const simd::f32x4 y0 = simd::load(b + i), y1 = simd::load(b + i + 4);
      simd::store(out + i, V::apply(f, x0, y0));
      simd::store(out + i + 4, V::apply(f, x1, y1));
    }
    for (; i + 4 <= end; i += 4)
      simd::store(out + i, V::apply(f, simd::load(a + i), simd::load(b + i)));
  }
#endif
  for (; i < end; ++i) out[i] = f(a[i], b[i]);
}

inline void fill(float* out, std::int64_t begin, std::int64_t end, float v) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = v;
}

namespace impl {

// The innermost run of a broadcast binary op: a and b advance by 0 or 1 each (the only strides a
// contiguous input has along the last output dim). A fixed operand binds as a scalar, so each
// case is one contiguous loop.
template <class F>
inline void binary_run(const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* out,
                       std::int64_t n, F f) {
  if (sa == 1 && sb == 1) {
    binary_contig(a, b, out, 0, n, f);
  } else if (sa == 1) {
    unary_contig(a, out, 0, n, BindRight<F>{f, b[0]});
  } else if (sb == 1) {
    unary_contig(b, out, 0, n, BindLeft<F>{f, a[0]});
  } else {
    const float v = f(a[0], b[0]);
    for (std::int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

template <class F>
inline void unary_run(const float* a, std::int64_t sa, float* out, std::int64_t n, F f) {
  if (sa == 1) {
    unary_contig(a, out, 0, n, f);
  } else {
    for (std::int64_t i = 0; i < n; ++i) out[i] = f(a[i * sa]);
  }
}

// Walks the output range [begin, end) of `plan` run by run (a run = the rest of one innermost
// row), calling run(offset_a, offset_b, out_begin, length). Offsets are updated incrementally:
// one division per dim at the start only.
template <class Run>
inline void for_each_run(const StridedView& plan, std::int64_t begin, std::int64_t end, Run run) {
  const int nd = plan.ndim;
  const bool two = plan.sb != nullptr;
  std::int64_t idx[kMaxPlanDims];  // invariant: nd <= kMaxPlanDims (checked at the call)
  std::int64_t oa = 0, ob = 0, rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = rem % plan.dims[d];
    rem /= plan.dims[d];
    oa += idx[d] * plan.sa[d];
    if (two) ob += idx[d] * plan.sb[d];
  }
  const int last = nd - 1;
  const std::int64_t inner = plan.dims[last];
  const std::int64_t ia = plan.sa[last], ib = two ? plan.sb[last] : 0;
  std::int64_t pos = begin;
  while (pos < end) {
    const std::int64_t len = (inner - idx[last] < end - pos) ? inner - idx[last] : end - pos;
    run(oa, ob, pos, len);
    pos += len;
    idx[last] += len;
    oa += len * ia;
    ob += len * ib;
    if (idx[last] < inner) break;  // only possible when pos == end
    oa -= inner * ia;
    ob -= inner * ib;
    idx[last] = 0;
    for (int d = last - 1; d >= 0; --d) {
      ++idx[d];
      oa += plan.sa[d];
      if (two) ob += plan.sb[d];
      if (idx[d] < plan.dims[d]) break;
      oa -= plan.dims[d] * plan.sa[d];
      if (two) ob -= plan.dims[d] * plan.sb[d];
      idx[d] = 0;
    }
  }
}

}  // namespace impl

// out[i] = f(a[pa(i)], b[pb(i)]) over the output range [begin, end) of a broadcast plan.
template <class F>
inline void binary_strided(const StridedView& plan, const float* a, const float* b, float* out,
                           std::int64_t begin, std::int64_t end, F f) {
  const std::int64_t ia = plan.sa[plan.ndim - 1], ib = plan.sb[plan.ndim - 1];
  impl::for_each_run(plan, begin, end,
                       [&](std::int64_t oa, std::int64_t ob, std::int64_t o, std::int64_t n) {
                         impl::binary_run(a + oa, ia, b + ob, ib, out + o, n, f);
                       });
}

// out[i] = f(a[pa(i)]) for a strided (e.g. permuted or broadcast) input.
template <class F>
inline void unary_strided(const StridedView& plan, const float* a, float* out, std::int64_t begin,
                          std::int64_t end, F f) {
  const std::int64_t ia = plan.sa[plan.ndim - 1];
  impl::for_each_run(plan, begin, end,
                       [&](std::int64_t oa, std::int64_t, std::int64_t o, std::int64_t n) {
                         impl::unary_run(a + oa, ia, out + o, n, f);
                       });
}

// Contiguous 2-D transpose, output rows [c0, c1) (= input columns) of the [rows, cols] input:
// out is [cols, rows]. Splitting by output rows gives each worker whole output lines, so no two
// workers write the same cache line. 8x8 tiles: of 8, 16, 32 and 64 (and both loop orders), the
// only size without cache-set conflicts at power-of-two strides, and as fast as any elsewhere
// (bench/notes/constants.md, "Transpose tiles").
inline void transpose2d(const float* a, float* out, std::int64_t rows, std::int64_t cols,
                        std::int64_t c0, std::int64_t c1) {
  constexpr std::int64_t kTile = 8;
  for (std::int64_t j0 = c0; j0 < c1; j0 += kTile) {
    const std::int64_t j1 = (j0 + kTile < c1) ? j0 + kTile : c1;
    for (std::int64_t i0 = 0; i0 < rows; i0 += kTile) {
      const std::int64_t i1 = (i0 + kTile < rows) ? i0 + kTile : rows;
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = j0; j < j1; ++j) out[j * rows + i] = a[i * cols + j];
    }
  }
}

}  // namespace kernels
}  // namespace asyncnd

ASYNCND_KERNELS_END
