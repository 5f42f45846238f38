// Creation ops (empty, zeros, ones, full, arange, from_vector) and copies between devices.
// Each allocates its output at the call and queues the fill; nothing is written at the call.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "asyncnd/detail/backend.h"
#include "asyncnd/ops.h"
#include "autograd/autograd_internal.h"
#include "ops/ops_common.h"

namespace asyncnd {

namespace detail {

// The shortest text that reads back as v ("2.5", "3", "1e-46"; to_string wrote 1e-46 as "0").
std::string num_text(double v) {
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::isnan(v) || std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// The same for a float: -0.1f is "-0.1"; two floats never print alike (9 digits tell them apart).
std::string num_text(float v) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
    if (std::isnan(v) || std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace detail
namespace nd {

namespace {

// Queues out[:] = value.
NDArray filled(const char* op, Shape shape, float value, Device device) {
  NDArray out = detail::new_array(op, std::move(shape), device);
  const std::int64_t n = out.size();
  if (n == 0) return out;
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kFill, out);
  c.fill.value = value;
  detail::push_kernel(op, c, out, {});
  return out;
}

}  // namespace

NDArray empty(Shape shape, Device device) {
  return detail::new_array("empty", std::move(shape), device);
}

NDArray zeros(Shape shape, Device device) {
  return filled("zeros", std::move(shape), 0.0f, device);
}

NDArray ones(Shape shape, Device device) { return filled("ones", std::move(shape), 1.0f, device); }

NDArray full(Shape shape, float value, Device device) {
  return filled("full", std::move(shape), value, device);
}

NDArray arange(double start, double stop, double step, Device device) {
  static const char* kOp = "arange";
  using detail::num_text;
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw Error(std::string(kOp) + ": start, stop and step must be finite, got start=" +
                num_text(start) + " stop=" + num_text(stop) + " step=" + num_text(step));
  if (step == 0.0) throw Error(std::string(kOp) + ": step must be non-zero");
  // Like NumPy: the count and the values are computed in double, then rounded to float.
  const double count = std::ceil((stop - start) / step);
  if (count > 4e18) {
    throw Error(std::string(kOp) + ": too many elements: start=" + num_text(start) + " stop=" +
                num_text(stop) + " step=" + num_text(step) + " give " + num_text(count));
  }
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  NDArray out = detail::new_array(kOp, {n}, device);
  if (n == 0) return out;
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kArange, out);
  c.arange = {start, step};
  detail::push_kernel(kOp, c, out, {});
  return out;
}

NDArray arange(double stop) { return arange(0.0, stop, 1.0); }

NDArray from_vector(std::vector<float> values, Shape shape, Device device) {
  static const char* kOp = "from_vector";
  const std::int64_t n = detail::checked_size(kOp, shape);
  if (static_cast<std::int64_t>(values.size()) != n)
    throw Error(std::string(kOp) + ": " + std::to_string(values.size()) +
                " values do not fill shape " + shape_str(shape) + " (" + std::to_string(n) +
                " elements)");
  if (!detail::backend_for(device, kOp).host_addressable()) {  // through host memory and a copy
    return copy_to(from_vector(std::move(values), std::move(shape)), device);
  }
  NDArray out = detail::new_array(kOp, std::move(shape), device);
  if (n == 0) return out;
  // A host-to-host copy; the op owns the values until it has copied them.
  auto src = std::make_shared<const std::vector<float>>(std::move(values));
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kCopy, out);
  c.a = src->data();
  c.copy = {DeviceKind::kCPU, DeviceKind::kCPU, 0, 0};
  detail::push_kernel(kOp, c, out, {}, true, std::move(src));
  return out;
}

NDArray copy_to(const NDArray& a, Device device) {
  static const char* kOp = "copy_to";
  detail::check_defined(kOp, a);
  detail::backend_for(device, kOp);  // "copy_to: no device gpu(0): ..." before anything else
  NDArray out = detail::new_array(kOp, a.shape(), device);
  out = detail::recorded(detail::GradOp::kCopyTo, std::move(out), {&a});
  const std::int64_t n = out.size();
  if (n == 0) {
    detail::push_empty_output(kOp, out, {&a});
    return out;
  }
  // Host<->device and device<->device: the device side's backend copies, on its worker.
  detail::KernelCall c = detail::kernel_call(detail::KernelCall::Kind::kCopy, out, &a);
  c.copy = {a.device().kind, device.kind, a.device().id, device.id};
  const Device run_on = detail::backend_for(device, kOp).host_addressable() ? a.device() : device;
  detail::push_kernel(kOp, c, out, {&a}, true, nullptr, &run_on);
  return out;
}

void waitall() { engine().waitall(); }

}  // namespace nd
}  // namespace asyncnd
