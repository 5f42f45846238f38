// Device: where an array lives and where an op runs.
#pragma once

#include <cstdint>
#include <string>

namespace asyncnd {

// The kinds of device. One backend serves each kind (asyncnd/detail/backend.h); a new kind of
// accelerator is a new enumerator here, its name in device_kind_name, and a backend that says
// it is of that kind (docs/architecture.md, "Adding a backend").
enum class DeviceKind : std::uint8_t { kCPU = 0, kGPU = 1 };
constexpr int kDeviceKindCount = 2;

// "cpu", "gpu".
inline const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCPU: return "cpu";
    case DeviceKind::kGPU: return "gpu";
  }
  return "device";
}

// A plain value type, cheap to copy. Device{} is the default device: the CPU.
struct Device {
  DeviceKind kind = DeviceKind::kCPU;
  int id = 0;

  static Device cpu() { return Device{DeviceKind::kCPU, 0}; }
  static Device gpu(int id = 0) { return Device{DeviceKind::kGPU, id}; }

  bool is_cpu() const { return kind == DeviceKind::kCPU; }
  bool is_gpu() const { return kind == DeviceKind::kGPU; }
  // "cpu(0)", "gpu(1)".
  std::string str() const { return std::string(device_kind_name(kind)) + "(" + std::to_string(id) + ")"; }

  friend bool operator==(const Device& a, const Device& b) { return a.kind == b.kind && a.id == b.id; }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

}  // namespace asyncnd
