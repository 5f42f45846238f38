// Small synchronisation primitives for the engine: a spin lock, a CPU pause, and bounded spinning.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace asyncnd {
namespace detail {

// The spin-wait hint: pause on x86, yield on AArch64 (as the Linux kernel's cpu_relax).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// A test-and-test-and-set lock for critical sections of a few dozen instructions (a variable's
// queue, a ready queue). Never held across a call that can block or run user code.
class SpinLock {
 public:
  void lock() {
    for (;;) {
      if (!flag_.exchange(true, std::memory_order_acquire)) return;
      int spins = 0;
      while (flag_.load(std::memory_order_relaxed)) {
        cpu_relax();
        // On an oversubscribed machine the holder may be descheduled: let it run.
        if (++spins > 256) {
          std::this_thread::yield();
          spins = 0;
        }
      }
    }
  }
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

// Spins until pred() holds or about `budget` has passed; true if pred() held. A sleeping hand-off
// costs two orders of magnitude more than a spinning one (bench/notes/constants.md, "Hand-offs and
// grain sizes"): callers spin for a bounded time before they park.
template <class Pred>
bool spin_until(Pred pred, std::chrono::microseconds budget) {
  if (pred()) return true;
  auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 1;; ++i) {
    cpu_relax();
    if (pred()) return true;
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      // Yield now and then: with more runnable threads than cores, the thread we wait for may
      // need our core.
      if ((i & 1023) == 0) std::this_thread::yield();
    }
  }
}

}  // namespace detail
}  // namespace asyncnd
