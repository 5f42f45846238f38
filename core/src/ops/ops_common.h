// Helpers shared by the op families (ops_*.cpp, random.cpp, ndarray.cpp): argument checks that
// throw tier-1 errors, output allocation, and the one path that pushes an op's KernelCall to the
// engine.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "asyncnd/engine.h"
#include "asyncnd/error.h"
#include "asyncnd/ndarray.h"
#include "asyncnd/detail/backend.h"
#include "asyncnd/detail/kernel_call.h"
#include "engine/engine_impl.h"
#include "ops/chunk.h"

namespace asyncnd {
namespace detail {

// The shortest text that reads back as v, for error messages ("2.5", "-0.1", "1e-46").
std::string num_text(double v);
std::string num_text(float v);

// What is wrong with random_uniform's bounds or random_normal's parameters ("" if nothing), for
// callers that draw later and name themselves (nn's initialisers).
std::string random_uniform_problem(float lo, float hi);
std::string random_normal_problem(float mean, float stddev);

// "<op>: array is empty (default-constructed)" for a handle that holds no array.
void check_defined(const char* op, const NDArray& a);
// "<op>: arrays on different devices: cpu(0) and gpu(0)".
void check_same_device(const char* op, const NDArray& a, const NDArray& b);
// Validates a shape given by the user (no negative dimension) and returns its size.
std::int64_t checked_size(const char* op, const Shape& shape);

// A new array of `shape` on `device`, its storage allocated, its values not yet written.
NDArray new_array(const char* op, Shape shape, Device device);
// The same with the shape and device of `a`, an array already checked (check_defined): its shape
// needs no validation, and no temporary is made at the call, so that in WebAssembly the call
// and the size's computation pass through no exception trampoline (docs/architecture.md).
NDArray new_array_like(const char* op, const NDArray& a);

// An array's storage, variable and device, for an array already checked (check_defined): no
// check, so no call that may throw (in WebAssembly such a call, where locals must be destroyed,
// goes through a JavaScript trampoline: bench/notes/wasm.md, "WebAssembly: calls that may throw").
inline float* data_of(const NDArray& a) { return a.chunk()->data; }
inline const Var& var_of(const NDArray& a) { return a.chunk()->var; }
inline Device device_of(const NDArray& a) { return a.chunk()->device; }

// The engine priority (PushOptions::priority) of the ops this thread queues: 0 but inside an
// OpPriority scope. Autograd's backward queues parameters' gradients at kParameterGradPriority.
inline thread_local int t_op_priority = 0;
class OpPriority {
 public:
  explicit OpPriority(int priority) : prev_(t_op_priority) { t_op_priority = priority; }
  ~OpPriority() { t_op_priority = prev_; }
  OpPriority(const OpPriority&) = delete;
  OpPriority& operator=(const OpPriority&) = delete;

 private:
  int prev_;
};

// engine().push(fn) writing w and reading r[0..nr) (nr <= 2), straight to the engine's own push
// with pointers to the arrays' handles: no handle is copied, nothing allocated.
template <class F>
void push_with_reads(F&& fn, const Var& w, const Var* const* r, std::size_t nr,
                     const PushOptions& opts) {
  const Var* const ws[1] = {&w};
  EngineAccess::impl(engine()).push(std::forward<F>(fn), VarPtrs{r, nr}, VarPtrs{ws, 1}, opts);
}

// The variables of `ins` (at most two) other than w, into r; returns their count. An input sharing
// the output's variable is not listed as read: the engine forbids a variable in both lists, and
// listing it as written already orders the read.
inline std::size_t reads_of(const Var& w, std::initializer_list<const NDArray*> ins,
                            const Var* r[2]) {
  std::size_t nr = 0;
  for (const NDArray* a : ins) {
    const Var& v = var_of(*a);
    if (v != w && nr < 2) r[nr++] = &v;  // invariant: callers pass at most two
  }
  return nr;
}

// The one push path of every op, on every device: queues `call` on the backend of `run_on`
// (default: out's device), an op that reads the arrays `ins` (at most two) and writes `out`. An
// input sharing out's variable is not listed as read (the engine forbids a variable in both lists,
// and listing it as written already orders the read). `op` must be a string literal: the engine
// keeps the pointer. `new_output`: whether out was allocated for this op (its bytes count toward
// the engine's in-flight byte bound). `keep`: what the call points to beyond the arrays (a strided
// plan, from_vector's values), held until the op is done.
//
// A host-addressable backend (the CPU) runs the call inside an Engine::push op, on the worker, and
// the op finishes when launch returns; any other backend gets an Engine::push_async op whose
// Completion it completes when later ops of the device may use the output.
inline void push_kernel(const char* op, const KernelCall& call, const NDArray& out,
                        std::initializer_list<const NDArray*> ins, bool new_output = true,
                        std::shared_ptr<const void> keep = nullptr, const Device* run_on = nullptr) {
  const Chunk& chunk = *out.chunk();
  Backend* backend = run_on ? &backend_for(*run_on, op) : chunk.backend;
  const int id = run_on ? run_on->id : chunk.device.id;
  const Var& w = chunk.var;
  const Var* r[2];
  const std::size_t nr = reads_of(w, ins, r);
  PushOptions opts;
  opts.device = run_on ? *run_on : chunk.device;
  opts.name = op;
  opts.bytes = new_output ? out.nbytes() : 0;
  opts.priority = t_op_priority;
  if (!backend->host_addressable()) {
    const Var* const ws[1] = {&w};
    EngineAccess::impl(engine()).push_device(
        [backend, id, call, keep](Completion done) { backend->launch(id, call, std::move(done)); },
        VarPtrs{r, nr}, VarPtrs{ws, 1}, opts);
    return;
  }
  // Without anything to keep alive, the op's function is trivially copyable: the engine moves it
  // as plain bytes.
  if (keep) {
    push_with_reads(
        [backend, id, call, keep = std::move(keep)] { backend->launch(id, call, Completion()); }, w,
        r, nr, opts);
  } else {
    push_with_reads([backend, id, call] { backend->launch(id, call, Completion()); }, w, r, nr,
                    opts);
  }
}

// A KernelCall of `kind` writing the n elements of `out`, reading a and b (may be null).
inline KernelCall kernel_call(KernelCall::Kind kind, const NDArray& out, const NDArray* a = nullptr,
                              const NDArray* b = nullptr) {
  KernelCall c;
  c.kind = kind;
  c.out = data_of(out);
  c.a = a ? data_of(*a) : nullptr;
  c.b = b ? data_of(*b) : nullptr;
  c.n = out.size();
  return c;
}

// An op whose output is empty has nothing to compute, but it still queues a no-op that reads its
// inputs and writes `out`: that is how a failure of an op that an input depends on reaches out
// (a wait on out rethrows it), as it does for every other dependent. It touches no memory.
inline void push_empty_output(const char* op, const NDArray& out,
                              std::initializer_list<const NDArray*> ins) {
  const Var& w = var_of(out);
  const Var* r[2];
  const std::size_t nr = reads_of(w, ins, r);
  PushOptions opts;
  opts.device = device_of(out);
  opts.name = op;
  opts.priority = t_op_priority;
  push_with_reads([] {}, w, r, nr, opts);
}

}  // namespace detail
}  // namespace asyncnd
