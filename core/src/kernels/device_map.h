// The elementwise functors (functors.h) as data, every list derived from the op table
// (asyncnd/detail/op_table.h): MapFn names a functor, `describe` turns a functor value into a
// KernelCall::Map, and map_element/strided_element run it on one element. A device backend's
// kernels call these (one kernel per form, a uniform switch inside instead of one kernel per
// functor); the CPU tests check that they compute f for describe(f), so the device math is tested
// on the CPU. Also the per-element Philox value, as a device thread computes it.
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

// A functor value from its parameter: SgdOp takes the rate, the others take nothing.
template <class F>
ASYNCND_HD inline F make_fn(float p) {
  if constexpr (sizeof(F) == sizeof(float)) {
    return F{p};
  } else {
    (void)p;
    return F{};
  }
}

// apply_binary/apply_unary: the function `fn` of the op table, by value. The switches cover every
// MapFn of their arity (no default: -Wswitch reports a missed one); a function of the other arity
// is a caller's bug that describe() never produces, and gives NaN.
ASYNCND_HD inline float apply_binary(MapFn fn, float a, float b, float p = 0.0f) {
  switch (fn) {
#define ASYNCND_APPLY_BINARY(Name, Functor, Cost) \
  case MapFn::k##Name: return make_fn<Functor>(p)(a, b);
    ASYNCND_BINARY_FNS(ASYNCND_APPLY_BINARY)
#undef ASYNCND_APPLY_BINARY
#define ASYNCND_NOT_BINARY(Name, Functor, Cost) case MapFn::k##Name:
    ASYNCND_UNARY_FNS(ASYNCND_NOT_BINARY)
#undef ASYNCND_NOT_BINARY
    break;
  }
  return NAN;
}

ASYNCND_HD inline float apply_unary(MapFn fn, float a) {
  switch (fn) {
#define ASYNCND_APPLY_UNARY(Name, Functor, Cost) \
  case MapFn::k##Name: return Functor{}(a);
    ASYNCND_UNARY_FNS(ASYNCND_APPLY_UNARY)
#undef ASYNCND_APPLY_UNARY
#define ASYNCND_NOT_UNARY(Name, Functor, Cost) case MapFn::k##Name:
    ASYNCND_BINARY_FNS(ASYNCND_NOT_UNARY)
#undef ASYNCND_NOT_UNARY
    break;
  }
  return NAN;
}

// Output element i of a contiguous map (KernelCall::Kind::kMap): loads the operands as m.form
// says and applies the function. Device kernels call this per element.
ASYNCND_HD inline float map_element(const detail::KernelCall::Map& m, const float* a,
                                    const float* b, std::int64_t i) {
  switch (m.form) {
    case MapForm::kUnary: return apply_unary(m.fn, a[i]);
    case MapForm::kBinary: return apply_binary(m.fn, a[i], b[i], m.scalar);
    case MapForm::kScalarRight: return apply_binary(m.fn, a[i], m.scalar);
    case MapForm::kScalarLeft: return apply_binary(m.fn, m.scalar, a[i]);
    case MapForm::kOneRight: return apply_binary(m.fn, a[i], b[0], m.scalar);
    case MapForm::kOneLeft: return apply_binary(m.fn, a[0], b[i], m.scalar);
  }
  return NAN;
}

// A strided plan by value, for a device kernel's parameters (KernelCall's StridedView points into
// host memory that lives only until launch returns).
struct DeviceStrided {
  int ndim = 0;
  std::int64_t dims[detail::kMaxKernelDims], sa[detail::kMaxKernelDims],
      sb[detail::kMaxKernelDims];
};
inline DeviceStrided device_strided(const detail::StridedView& v) {
  DeviceStrided p;
  p.ndim = v.ndim;  // invariant: <= kMaxKernelDims (checked at the op's call)
  for (int d = 0; d < v.ndim; ++d) {
    p.dims[d] = v.dims[d];
    p.sa[d] = v.sa[d];
    p.sb[d] = v.sb ? v.sb[d] : 0;
  }
  return p;
}

// Offsets into a and b of output element i of a strided map: i unravelled over the output dims,
// innermost last, times each input's strides.
ASYNCND_HD inline void strided_offsets(const DeviceStrided& p, std::int64_t i, std::int64_t* oa,
                                       std::int64_t* ob) {
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

// Output element i of a strided map (KernelCall::Kind::kMapStrided; its form is kUnary or
// kBinary).
ASYNCND_HD inline float strided_element(const detail::KernelCall::Map& m, const DeviceStrided& p,
                                        const float* a, const float* b, std::int64_t i) {
  std::int64_t oa, ob;
  strided_offsets(p, i, &oa, &ob);
  return m.form == MapForm::kUnary ? apply_unary(m.fn, a[oa])
                                   : apply_binary(m.fn, a[oa], b[ob], m.scalar);
}

// The value a reduction stores from its accumulator over `len` elements.
template <class T>
ASYNCND_HD inline float reduce_finish(detail::ReduceFn fn, T v, std::int64_t len) {
  switch (fn) {
    case detail::ReduceFn::kMean:
      return static_cast<float>(static_cast<double>(v) / static_cast<double>(len));
    case detail::ReduceFn::kNorm: return static_cast<float>(std::sqrt(static_cast<double>(v)));
    case detail::ReduceFn::kSum:
    case detail::ReduceFn::kMax: break;
  }
  return static_cast<float>(v);
}

// describe(f): the Map that map_element runs as f. Binary functors describe the binary form.
using MapDesc = detail::KernelCall::Map;
// The parameter of a functor that has one (make_fn's inverse), else 0.
template <class F>
float fn_param(const F& f) {
  if constexpr (sizeof(F) == sizeof(float)) {
    float p;
    std::memcpy(&p, &f, sizeof p);
    return p;
  } else {
    return 0.0f;
  }
}
#define ASYNCND_DESCRIBE_BINARY(Name, Functor, Cost) \
  inline MapDesc describe(Functor f) { return {MapFn::k##Name, MapForm::kBinary, fn_param(f)}; }
ASYNCND_BINARY_FNS(ASYNCND_DESCRIBE_BINARY)
#undef ASYNCND_DESCRIBE_BINARY
#define ASYNCND_DESCRIBE_UNARY(Name, Functor, Cost) \
  inline MapDesc describe(Functor) { return {MapFn::k##Name, MapForm::kUnary, 0.0f}; }
ASYNCND_UNARY_FNS(ASYNCND_DESCRIBE_UNARY)
#undef ASYNCND_DESCRIBE_UNARY
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
