// The device path of the ops (see device_ops.h): KernelCalls queued through Engine::push_async.
#include "device_ops.h"

#include <string>
#include <utility>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "asyncnd/engine.h"
#include "chunk.h"
#include "ops_common.h"

namespace asyncnd {
namespace detail {

static_assert(kMaxKernelDims == static_cast<int>(kernels::kMaxPlanDims),
              "a plan that core/ accepts fits a KernelCall");

void push_device(const char* op, const KernelCall& call, Device run_on, const NDArray& out,
                 std::initializer_list<const NDArray*> ins, bool new_output) {
  Backend* backend = &backend_for(run_on, op);
  std::vector<Var> reads;
  for (const NDArray* a : ins) {
    const Var& v = a->var();
    bool seen = v == out.var();  // read and written: listed as written only
    for (const Var& r : reads) seen = seen || r == v;
    if (!seen) reads.push_back(v);
  }
  PushOptions opts;
  opts.device = run_on;
  opts.name = op;
  opts.bytes = new_output ? out.nbytes() : 0;
  const int id = run_on.id;
  engine().push_async(
      [backend, id, call](Completion done) { backend->launch(id, call, std::move(done)); },
      std::move(reads), {out.var()}, opts);
}

void push_map(const char* op, const kernels::MapDesc& map, const NDArray& a, const NDArray* b,
              const NDArray& out, const kernels::StridedPlan* plan, bool new_output) {
  const std::int64_t n = out.size();
  if (n == 0) return;
  KernelCall c;
  c.map = map;
  c.a = data_of(a);
  c.b = b ? data_of(*b) : nullptr;
  c.out = data_of(out);
  c.n = n;
  c.kind = KernelCall::Kind::kMap;
  if (plan) {
    c.kind = KernelCall::Kind::kMapStrided;
    c.strided.ndim = static_cast<int>(plan->dims.size());  // invariant: <= kMaxKernelDims
    for (int d = 0; d < c.strided.ndim; ++d) {
      c.strided.dims[d] = plan->dims[d];
      c.strided.sa[d] = plan->sa[d];
      c.strided.sb[d] = plan->sb.empty() ? 0 : plan->sb[d];
    }
  } else if (b && (a.size() != n || b->size() != n)) {
    // One operand is a single element: a 1-D plan that reads it with stride 0.
    c.kind = KernelCall::Kind::kMapStrided;
    c.strided.ndim = 1;
    c.strided.dims[0] = n;
    c.strided.sa[0] = a.size() == n ? 1 : 0;
    c.strided.sb[0] = b->size() == n ? 1 : 0;
  }
  if (b) {
    push_device(op, c, out.device(), out, {&a, b}, new_output);
  } else {
    push_device(op, c, out.device(), out, {&a}, new_output);
  }
}

}  // namespace detail
}  // namespace asyncnd
