// CachingAllocator: the CPU backend's 64-byte aligned host memory, with freed blocks kept for reuse
// (per-thread lists for small blocks, a size-keyed cache for large ones). Internal to native/cpu.
#pragma once

#include <cstddef>
#include <cstdint>

namespace asyncnd {
namespace detail {

// Why it exists: a tiny op (E5) spent a fifth of its time in glibc's aligned malloc/free, and a
// fresh 4 MB array pays its page faults (E1; bench/notes/constants.md, "The CPU allocator"). Both
// are paid again for every array; a cache pays them once per block.
//
// Blocks. Every block is one std::aligned_alloc(64, rounded) of its own, so any cached block can
// go back to the OS alone (std::free) at any time.
//   - Small, bytes <= kSmallMax: rounded up to a multiple of 64 (64 classes). Each thread keeps
//     up to two chains per class (a chain: up to 64 blocks, ~16 KiB for the larger classes) and
//     its four most recent frees (so at most about 2.4 MiB per thread over all 64 classes, a few
//     KiB in practice). Chains move between a
//     thread and the shared per-class lists whole, under that class's mutex: arrays are made on
//     the frontend thread and freed on an engine worker, and a chain crosses once per 64 blocks.
//   - Large, bytes > kSmallMax: rounded up to a multiple of 4 KiB and reused only by a request
//     with the same rounded size (no splitting, no best fit), newest first (warmest); the oldest
//     is evicted first when the bound needs room.
// Bound. The shared lists and the large cache together hold at most limit() bytes; a block that
// does not fit goes back to the OS. Threads' private small-block lists come on top (see above).
// limit() == 0 turns all caching off: each thread drops its private blocks on its next call.
// Engine statistics (bytes_in_use) are counted by Chunk, not here: cached bytes are not in use.
//
// Built with AddressSanitizer, the cache is compiled out (every call goes to aligned_alloc/free):
// pooled memory would hide use-after-free from ASan. ThreadSanitizer builds keep it, so its
// locking is checked.
class CachingAllocator {
 public:
  static constexpr std::size_t kAlignment = 64;  // a cache line, and the widest SIMD load (AVX-512)
  static constexpr std::size_t kSmallMax = 4096;
  static constexpr std::size_t kPage = 4096;

  // The bound when ASYNCND_CPU_CACHE_MB is unset, for a program that may use `memory_bytes`: the
  // engine's default byte bound for that memory (default_max_inflight_bytes, asyncnd/engine.h: a
  // quarter of it, at most 512 MiB), or that cap when the memory is unknown (0). What the default
  // engine lets a frontend queue ahead is what a drain hands back here: a cache as large takes it
  // all back, so the next run ahead reuses those blocks instead of faulting fresh pages in again.
  // (With a fixed 256 MiB, E6 without a read, about 323 MB in use, faulted 60 MB in again on
  // every run and took about 1.06 of the time reading each batch took on a Zen 5;
  // bench/notes/constants.md, "The CPU allocator".) The cache never holds more than the
  // program freed.
  static std::size_t default_limit_for(std::uint64_t memory_bytes);
  // default_limit_for(program_memory_limit().bytes): the cgroup's limit or physical memory.
  static std::size_t default_limit();

  // The process-wide instance, made on first use and never destroyed (engine threads may free
  // arrays while static destructors run). Reads ASYNCND_CPU_CACHE_MB (the bound in MiB; 0 turns
  // caching off) on that first use; throws asyncnd::Error naming the variable on a bad value.
  static CachingAllocator& instance();

  // A 64-byte aligned block of at least `bytes` bytes (0 gives a unique 64-byte block). Any
  // thread. Throws asyncnd::Error "cpu: out of memory allocating N bytes" when the OS refuses,
  // after releasing the shared cache and trying once more.
  void* alloc(std::size_t bytes);
  // Takes back a block from alloc; `bytes` must be the size it was asked for. nullptr is ignored.
  // Any thread, not only the one that allocated it. Never throws.
  void free(void* p, std::size_t bytes) noexcept;

  // Sets the bound and releases shared cached blocks over it at once (0: release all and stop
  // caching). Any thread.
  void set_limit(std::size_t bytes);
  std::size_t limit() const;

  struct Stats {
    std::size_t shared_bytes = 0;  // in the shared small lists and the large cache (<= limit)
    std::size_t thread_bytes = 0;  // in living threads' private small-block lists
    std::size_t os_bytes = 0;      // obtained from the OS and not yet returned: in use + cached
  };
  // A snapshot; exact when no other thread is allocating or freeing. All zero when the cache is
  // compiled out (caching_built() is false). Any thread.
  Stats stats() const;
  std::size_t cached_bytes() const {
    Stats s = stats();
    return s.shared_bytes + s.thread_bytes;
  }

  // The bound ASYNCND_CPU_CACHE_MB=`value` asks for (value in MiB; nullptr, the variable unset,
  // gives default_limit()). Throws asyncnd::Error naming the variable and the value unless it is a
  // whole number from 0 to 1048576. Public so tests can check the rule without the environment.
  static std::size_t limit_from_env_value(const char* value);

  // False when this build bypasses the cache (AddressSanitizer): tests of reuse skip then.
  static bool caching_built();

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  class Impl;

 private:
  explicit CachingAllocator(std::size_t limit);
  Impl* impl_;  // never freed, like the instance
};

}  // namespace detail
}  // namespace asyncnd
