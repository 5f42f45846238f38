// Creation ops (empty, zeros, ones, full, arange, from_vector) and copies between devices.
// Each allocates its output at the call and queues the fill; nothing is written at the call.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "asyncnd/detail/backend.h"
#include "asyncnd/ops.h"
#include "device_ops.h"
#include "autograd_internal.h"
#include "kernels/elementwise.h"
#include "ops_common.h"

namespace asyncnd {
namespace nd {

namespace {

using detail::kGrain;

// Queues out[:] = value.
NDArray filled(const char* op, Shape shape, float value, Device device) {
  NDArray out = detail::new_array(op, std::move(shape), device);
  const std::int64_t n = out.size();
  if (n == 0) return out;
  float* p = detail::data_of(out);
  if (!device.is_cpu()) {
    detail::KernelCall c;
    c.kind = detail::KernelCall::Kind::kFill;
    c.out = p;
    c.n = n;
    c.map.scalar = value;
    detail::push_device(op, c, device, out, {});
    return out;
  }
  detail::push_op(op,
                  [p, n, value] {
                    detail::parallel(n, kGrain, [=](std::int64_t b, std::int64_t e) {
                      kernels::fill(p, b, e, value);
                    });
                  },
                  out, {});
  return out;
}

std::string num(double v) {
  std::string s = std::to_string(v);
  // to_string prints 6 decimals; trim "2.500000" to "2.5" and "3.000000" to "3".
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
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

NDArray arange(float start, float stop, float step, Device device) {
  static const char* kOp = "arange";
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw Error(std::string(kOp) + ": start, stop and step must be finite, got start=" +
                num(start) + " stop=" + num(stop) + " step=" + num(step));
  if (step == 0.0f) throw Error(std::string(kOp) + ": step must be non-zero");
  // Like NumPy: the count and the values are computed in double, then rounded to float.
  const double count = std::ceil((static_cast<double>(stop) - start) / step);
  if (count > 4e18) throw Error(std::string(kOp) + ": too many elements");
  const std::int64_t n = count > 0 ? static_cast<std::int64_t>(count) : 0;
  NDArray out = detail::new_array(kOp, {n}, device);
  if (n == 0) return out;
  float* p = detail::data_of(out);
  const double s0 = start, st = step;
  if (!device.is_cpu()) {
    detail::KernelCall c;
    c.kind = detail::KernelCall::Kind::kArange;
    c.out = p;
    c.n = n;
    c.arange = {s0, st};
    detail::push_device(kOp, c, device, out, {});
    return out;
  }
  detail::push_op(kOp,
                  [p, n, s0, st] {
                    detail::parallel(n, kGrain, [=](std::int64_t b, std::int64_t e) {
                      for (std::int64_t i = b; i < e; ++i)
                        p[i] = static_cast<float>(s0 + static_cast<double>(i) * st);
                    });
                  },
                  out, {});
  return out;
}

NDArray arange(float stop) { return arange(0.0f, stop, 1.0f); }

NDArray from_vector(std::vector<float> values, Shape shape, Device device) {
  static const char* kOp = "from_vector";
  const std::int64_t n = detail::checked_size(kOp, shape);
  if (static_cast<std::int64_t>(values.size()) != n)
    throw Error(std::string(kOp) + ": " + std::to_string(values.size()) +
                " values do not fill shape " + shape_str(shape) + " (" + std::to_string(n) +
                " elements)");
  if (!device.is_cpu()) {  // through host memory and a host-to-device copy
    detail::backend_for(device, kOp);
    return copy_to(from_vector(std::move(values), std::move(shape)), device);
  }
  NDArray out = detail::new_array(kOp, std::move(shape), device);
  if (n == 0) return out;
  float* p = detail::data_of(out);
  // The op owns the values until it has copied them; shared_ptr keeps the lambda cheap to copy
  // (std::function requires a copyable target).
  auto src = std::make_shared<std::vector<float>>(std::move(values));
  detail::push_op(kOp,
                  [p, n, src] {
                    const float* s = src->data();
                    detail::parallel(n, kGrain, [=](std::int64_t b, std::int64_t e) {
                      std::memcpy(p + b, s + b, static_cast<std::size_t>(e - b) * sizeof(float));
                    });
                  },
                  out, {});
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
  const float* src = detail::data_of(a);
  float* dst = detail::data_of(out);
  if (!a.device().is_cpu() || !device.is_cpu()) {
    // Host<->device and device<->device: the device side's backend copies, on its worker.
    detail::KernelCall c;
    c.kind = detail::KernelCall::Kind::kCopy;
    c.a = src;
    c.out = dst;
    c.n = n;
    c.copy = {a.device(), device};
    detail::push_device(kOp, c, device.is_cpu() ? a.device() : device, out, {&a});
    return out;
  }
  detail::push_op(kOp,
                  [src, dst, n] {
                    detail::parallel(n, kGrain, [=](std::int64_t b, std::int64_t e) {
                      std::memcpy(dst + b, src + b,
                                  static_cast<std::size_t>(e - b) * sizeof(float));
                    });
                  },
                  out, {&a});
  return out;
}

void waitall() { engine().waitall(); }

}  // namespace nd
}  // namespace asyncnd
