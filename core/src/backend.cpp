// backend_for: maps a Device to the built-in backend that serves it, or a clear error.
#include <string>

#include "asyncnd/detail/backend.h"
#include "asyncnd/error.h"

namespace asyncnd {
namespace detail {

Backend& backend_for(Device device, const char* op) {
  std::string reason = device.is_gpu() ? "this build has no GPU backend" : "no backend for it";
  for (Backend* backend : builtin_backends()) {
    if (backend->kind() != device.kind) continue;
    if (device.id >= 0 && device.id < backend->device_count()) return *backend;
    reason = backend->unavailable_reason();
    if (reason.empty() && backend->device_count() > 0) {
      reason = std::to_string(backend->device_count()) + " such device(s) present";  // a bad id
    }
    break;
  }
  throw Error(std::string(op) + ": no device " + device.str() + (reason.empty() ? "" : ": " + reason));
}

void Backend::launch(int device_id, const KernelCall&, Completion) {
  throw Error(name() + ": launch: no device kernels (device " + std::to_string(device_id) + ")");
}

void Backend::synchronize(int, const void*) {}

void synchronize_devices() {
  for (Backend* backend : builtin_backends()) {
    if (backend->host_addressable()) continue;
    const int count = backend->device_count();
    for (int id = 0; id < count; ++id) backend->synchronize(id, nullptr);
  }
}

}  // namespace detail
}  // namespace asyncnd
