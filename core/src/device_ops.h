// The device path of the ops: arrays on a device whose backend is not host addressable (a GPU) get
// their kernels from Backend::launch as a KernelCall, queued as an Engine::push_async op on that
// device's worker. The CPU path never comes here (each op tests Device::is_cpu() first), so it
// pays nothing for it.
#pragma once

#include <initializer_list>

#include "asyncnd/detail/kernel_call.h"
#include "asyncnd/ndarray.h"
#include "kernels/device_map.h"
#include "kernels/elementwise.h"

namespace asyncnd {
namespace detail {

// Queues `call` on device `run_on`'s backend: it reads `ins` and writes `out`. `op` must be a
// string literal. new_output: out was allocated for this op (counted by the byte bound).
void push_device(const char* op, const KernelCall& call, Device run_on, const NDArray& out,
                 std::initializer_list<const NDArray*> ins, bool new_output = true);

// Queues out = map(a[, b]) on out's device. b is null for unary and scalar maps; `plan` (may be
// null) is the broadcast plan of a binary map; without one, a binary map's operands either have
// out's size or a single element.
void push_map(const char* op, const kernels::MapDesc& map, const NDArray& a, const NDArray* b,
              const NDArray& out, const kernels::StridedPlan* plan, bool new_output = true);

}  // namespace detail
}  // namespace asyncnd
