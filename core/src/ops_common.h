// Helpers shared by the op families (ops_*.cpp, random.cpp, ndarray.cpp): argument checks that
// throw tier-1 errors, output allocation, and pushing a kernel to the engine.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "asyncnd/engine.h"
#include "asyncnd/error.h"
#include "asyncnd/ndarray.h"
#include "chunk.h"

namespace asyncnd {
namespace detail {

// Elements per parallel_for chunk: large enough that a hand-off to another worker is small next
// to the work, small enough to split 1M-element ops (bench/README.md, "Hand-offs and grain sizes").
constexpr std::int64_t kGrain = 32768;

// "<op>: array is empty (default-constructed)" for a handle that holds no array.
void check_defined(const char* op, const NDArray& a);
// "<op>: arrays on different devices: cpu(0) and gpu(0)".
void check_same_device(const char* op, const NDArray& a, const NDArray& b);
// Validates a shape given by the user (no negative dimension) and returns its size.
std::int64_t checked_size(const char* op, const Shape& shape);
// The portable kernels run on the CPU only; a device backend brings its own (later).
void check_kernels(const char* op, Device device);

// A new array of `shape` on `device`, its storage allocated, its values not yet written.
NDArray new_array(const char* op, Shape shape, Device device);

inline float* data_of(const NDArray& a) { return a.chunk()->data; }

// Queues fn on out's device: it reads the arrays `ins` (at most two) and writes `out`. An input
// sharing out's variable is not listed as read (the engine forbids a variable in both lists, and
// listing it as written already orders the read). `op` must be a string literal: the engine keeps
// the pointer. Braced lists select the engine's allocation-free push. `new_output`: whether out
// was allocated for this op (its bytes count toward the engine's in-flight byte bound).
template <class F>
void push_op(const char* op, F&& fn, const NDArray& out, std::initializer_list<const NDArray*> ins,
             bool new_output = true) {
  const Var& w = out.var();
  const Var* r[2];
  std::size_t nr = 0;
  for (const NDArray* a : ins) {
    if (a->var() != w && nr < 2) r[nr++] = &a->var();  // invariant: callers pass at most two
  }
  PushOptions opts;
  opts.device = out.device();
  opts.name = op;
  opts.bytes = new_output ? out.nbytes() : 0;
  if (nr == 0) {
    engine().push(std::forward<F>(fn), {}, {w}, opts);
  } else if (nr == 1) {
    engine().push(std::forward<F>(fn), {*r[0]}, {w}, opts);
  } else {
    engine().push(std::forward<F>(fn), {*r[0], *r[1]}, {w}, opts);
  }
}

// An op whose output is empty has nothing to compute, but it still queues a no-op that reads its
// inputs and writes `out`: that is how a failure of an op that an input depends on reaches out
// (a wait on out rethrows it), as it does for every other dependent.
inline void push_empty_output(const char* op, const NDArray& out,
                              std::initializer_list<const NDArray*> ins) {
  push_op(op, [] {}, out, ins, false);
}

// fn(begin, end) over [0, n): inline when small (no std::function, no hand-off), else split
// across the CPU workers. fn must not throw.
template <class F>
void parallel(std::int64_t n, std::int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(std::int64_t{0}, n);
    return;
  }
  engine().parallel_for(n, grain, fn);
}

}  // namespace detail
}  // namespace asyncnd
