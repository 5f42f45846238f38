// Recycler<T>: per-thread caches of freed records, exchanged in batches through one shared list.
// Op records are made on the pushing thread and freed on a worker; a
// malloc/free pair per record costs more than the rest of a push.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "engine/asan.h"
#include "engine/sync.h"

namespace asyncnd {
namespace detail {

#if ASYNCND_ASAN
#define ASYNCND_RECYCLE 0  // let AddressSanitizer see every use after free
#else
#define ASYNCND_RECYCLE 1
#endif

template <class T>
class Recycler {
 public:
  // A fresh T or a recycled one; the caller resets recycled state (see put).
  static T* get() {
#if ASYNCND_RECYCLE
    if (cache_gone()) return new T;
    auto& c = cache().free;
    if (c.empty()) {
      std::vector<T*> batch;
      {
        std::lock_guard<SpinLock> lk(shared().lock);
        if (!shared().batches.empty()) {
          batch = std::move(shared().batches.back());
          shared().batches.pop_back();
        }
      }
      if (batch.empty()) return new T;
      if (c.capacity() < kCacheMax + 1) c.reserve(kCacheMax + 1);
      c.insert(c.end(), batch.begin(), batch.end());
    }
    T* p = c.back();
    c.pop_back();
    return p;
#else
    return new T;
#endif
  }

  // The T the next get() on this thread returns, if one is cached; nullptr otherwise.
  static T* peek() {
#if ASYNCND_RECYCLE
    if (cache_gone()) return nullptr;
    auto& c = cache().free;
    return c.empty() ? nullptr : c.back();
#else
    return nullptr;
#endif
  }

  // Takes back a T whose state the caller has reset to what get() promises its callers. Never
  // throws (it runs where a variable or op is destroyed): without memory for the lists, p is
  // freed instead, or the thread's list stays over its bound.
  static void put(T* p) noexcept {
#if ASYNCND_RECYCLE
    if (cache_gone()) {
      delete p;
      return;
    }
    auto& c = cache().free;
    try {
      c.push_back(p);
    } catch (...) {
      delete p;
      return;
    }
    if (c.size() > kCacheMax) {
      try {
        std::vector<T*> batch(c.end() - kBatch, c.end());
        {
          std::lock_guard<SpinLock> lk(shared().lock);
          if (shared().batches.size() < kSharedMax) {
            shared().batches.push_back(std::move(batch));
            batch.clear();
          }
        }
        for (T* q : batch) delete q;  // over the shared bound: freed (see kSharedMax)
        c.resize(c.size() - kBatch);
      } catch (...) {
      }
    }
#else
    delete p;
#endif
  }

 private:
  static constexpr std::size_t kCacheMax = 256, kBatch = 128;
  // The shared list keeps at most kSharedMax batches (32 768 records, about 15 MB of op records:
  // more than a loop such as E5's 10 000 steps queues, so that it reuses them); the rest are
  // freed. Without a bound it kept every record of the longest queue the program ever had: 500 000
  // ops queued behind a slow one left about 240 MB here for good.
  static constexpr std::size_t kSharedMax = 256;
  struct Shared {
    SpinLock lock;
    std::vector<std::vector<T*>> batches;  // of kBatch free records each
  };
  struct Cache {
    std::vector<T*> free;
    ~Cache() {
      cache_gone() = true;
      for (T* p : free) delete p;
    }
  };
  // Set when this thread's Cache is destroyed, at thread exit. Destructors of the user's
  // thread_local objects may run after it (those made before the Cache) and free an array: put()
  // then pushed into the destroyed vector (a double free). A bool has no destructor: it stays
  // readable until the thread is gone.
  static bool& cache_gone() {
    thread_local bool gone = false;
    return gone;
  }
  // Never destroyed: workers of the process-wide engine may still free records during exit.
  static Shared& shared() {
    static Shared* s = new Shared;
    return *s;
  }
  static Cache& cache() {
    thread_local Cache c;
    return c;
  }
};

}  // namespace detail
}  // namespace asyncnd
