// The outputs of held calls whose batch failed to start (cuda_backend.cpp, "Held calls"). A held
// call's op has already completed when its batch starts, so the engine cannot poison its outputs:
// the backend marks their blocks instead, and a later read of such a block (a kernel's input, a
// copy's source, a host wait) throws the batch's error, which the engine then puts on that op's
// outputs as it does for any failed op. A write to the block, or its reuse for a new array,
// clears the mark. No CUDA in here, so the CPU tests check it (tests/test_cuda_poison.cpp).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "asyncnd/error.h"

namespace asyncnd {
namespace detail {

// Thread safe. Its lock is taken last, under the device state's locks, and takes no other, so
// the failure (under the held calls' lock) and the reads and writes (under the blocks' lock) can
// all use it. Nothing is locked while no block is marked: one relaxed load per check.
class PoisonedBlocks {
 public:
  // A batch failed: each of `outs` (n device addresses, nulls skipped) carries `message` until it
  // is written again or allocated anew.
  void mark(const void* const* outs, int n, const std::string& message) {
    auto shared = std::make_shared<const std::string>(message);
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i)
      if (outs[i]) marks_[outs[i]] = shared;
    any_.store(!marks_.empty(), std::memory_order_release);
  }
  // Before a read of the block at p: throws asyncnd::Error with the failed batch's message if a
  // failed batch was to write it.
  void check_read(const void* p) const {
    if (!any_.load(std::memory_order_acquire)) return;
    std::shared_ptr<const std::string> m;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = marks_.find(p);
      if (it == marks_.end()) return;
      m = it->second;
    }
    throw Error(*m + " (the values of this array were to come from one of them)");
  }
  // At a write of the block at p that does not depend on its old values, or its reuse.
  void clear(const void* p) {
    if (!any_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(mu_);
    marks_.erase(p);
    any_.store(!marks_.empty(), std::memory_order_release);
  }
  bool empty() const { return !any_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const void*, std::shared_ptr<const std::string>> marks_;
  std::atomic<bool> any_{false};
};

}  // namespace detail
}  // namespace asyncnd
