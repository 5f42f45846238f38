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

}  // namespace detail
}  // namespace asyncnd
