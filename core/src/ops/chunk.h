// Chunk: the storage of an array plus the engine variable that orders its reads and writes.
// Shared (through shared_ptr) by an NDArray and its reshaped views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <memory>

#include "asyncnd/detail/backend.h"
#include "asyncnd/device.h"
#include "asyncnd/engine.h"
#include "autograd/autograd_internal.h"

namespace asyncnd {
namespace detail {

struct Chunk {
  Var var;
  float* data = nullptr;  // nullptr when bytes == 0
  std::size_t bytes = 0;
  Device device;
  Backend* backend = nullptr;
  // Autograd state of the array that owns this chunk (a reshaped view has its own), made on first
  // use: arrays that autograd never sees (most of them) pay one null pointer.
  std::atomic<AutogradInfo*> ag{nullptr};
  AutogradInfo& autograd();
  // In-place writes queued on this storage (through the array or any of its views), counted when
  // they are pushed: a recorded node keeps the count of each array its gradient reads, and
  // backward refuses an array written since (bump_version; autograd.cpp).
  std::atomic<std::uint32_t> version{0};

  // Allocates `bytes` on `device` through its backend and counts them in the engine's stats.
  // Throws asyncnd::Error naming `op` if the device does not exist or the allocation fails.
  Chunk(Device device, std::size_t bytes, const char* op);
  // Never blocks: hands the variable to Engine::delete_var, which frees the storage once every
  // op queued on it has finished. Ops therefore capture raw data pointers, never the Chunk.
  ~Chunk();

  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;
};

// An in-place write of `target`'s storage is being queued (Chunk::version).
inline void bump_version(const NDArray& target) {
  target.chunk()->version.fetch_add(1, std::memory_order_relaxed);
}

// A chunk for `elements` floats.
std::shared_ptr<Chunk> new_chunk(Device device, std::int64_t elements, const char* op);

}  // namespace detail
}  // namespace asyncnd
