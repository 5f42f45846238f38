// backend_for: maps a Device to the registered or built-in backend that serves it, or a clear
// error; the default device-backend entries; synchronize_devices.
#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "asyncnd/error.h"

namespace asyncnd {
namespace detail {

namespace {
std::atomic<Backend*> g_registered{nullptr};
// Held by flush_device while it calls a registered backend, and by register_backend to change it:
// a test's backend is destroyed after it is unregistered, while an engine worker that has just
// run its last op may still be flushing it.
std::shared_mutex g_registered_mu;

Backend* registered_for(Device device) {
  Backend* r = g_registered.load(std::memory_order_acquire);
  if (r && r->kind() == device.kind && device.id >= 0 && device.id < r->device_count()) return r;
  return nullptr;
}
}  // namespace

void register_backend(Backend* backend) {
  std::unique_lock<std::shared_mutex> lock(g_registered_mu);
  g_registered.store(backend, std::memory_order_release);
}

namespace {
// The built-in backends keyed by kind: at most one per kind, so that backends of two kinds of
// accelerator coexist and none shadows another.
struct BackendTable {
  Backend* by_kind[kDeviceKindCount] = {};
  BackendTable() {
    for (Backend* b : builtin_backends()) {
      const int k = static_cast<int>(b->kind());
      if (k < 0 || k >= kDeviceKindCount || by_kind[k]) {
        throw Error("backends: two built-in backends for device kind " +
                    std::string(device_kind_name(b->kind())) + " (" + b->name() + ")");
      }
      by_kind[k] = b;
    }
  }
};
Backend* builtin_for(DeviceKind kind) {
  static const BackendTable table;
  const int k = static_cast<int>(kind);
  return k >= 0 && k < kDeviceKindCount ? table.by_kind[k] : nullptr;
}
}  // namespace

Backend& backend_for(Device device, const char* op) {
  if (Backend* r = registered_for(device)) return *r;
  std::string reason = "this build has no " + std::string(device_kind_name(device.kind)) + " backend";
  if (Backend* backend = builtin_for(device.kind)) {
    if (device.id >= 0 && device.id < backend->device_count()) return *backend;
    reason = backend->unavailable_reason();
    if (reason.empty() && backend->device_count() > 0) {
      reason = std::to_string(backend->device_count()) + " such device(s) present";  // a bad id
    }
  }
  throw Error(std::string(op) + ": no device " + device.str() + (reason.empty() ? "" : ": " + reason));
}

void Backend::synchronize(int, const void*) {}

void flush_device(Device device) noexcept {
  {
    std::shared_lock<std::shared_mutex> lock(g_registered_mu);
    if (Backend* r = registered_for(device)) {
      r->flush(device.id);
      return;
    }
  }
  Backend* b = builtin_for(device.kind);
  if (b && device.id >= 0 && device.id < b->device_count()) b->flush(device.id);
}

std::vector<Backend*> active_backends() {
  std::vector<Backend*> out;
  if (Backend* r = g_registered.load(std::memory_order_acquire)) out.push_back(r);
  const std::vector<Backend*>& builtin = builtin_backends();
  out.insert(out.end(), builtin.begin(), builtin.end());
  return out;
}

void synchronize_devices() {
  if (Backend* r = g_registered.load(std::memory_order_acquire)) {
    if (!r->host_addressable())
      for (int id = 0; id < r->device_count(); ++id) r->synchronize(id, nullptr);
  }
  for (Backend* backend : builtin_backends()) {
    if (backend->host_addressable()) continue;
    const int count = backend->device_count();
    for (int id = 0; id < count; ++id) backend->synchronize(id, nullptr);
  }
}

std::atomic<ClockNs> g_profiler_clock{nullptr};

void set_profiler_clock(ClockNs clock) noexcept {
  g_profiler_clock.store(clock, std::memory_order_release);
}

std::int64_t profiler_clock_ns() noexcept {
  if (ClockNs c = g_profiler_clock.load(std::memory_order_acquire)) return c();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail
}  // namespace asyncnd
