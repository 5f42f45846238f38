// CachingAllocator: per-thread small-block lists, shared per-class chains and a size-keyed large
// cache, all over std::aligned_alloc. The design and its bound are described in the header.
#include "cpu/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

#include "asyncnd/detail/env.h"
#include "asyncnd/engine.h"
#include "asyncnd/error.h"
#include "engine/asan.h"

// AddressSanitizer cannot see a use-after-free of a block that sits in a cache, so its builds
// bypass the cache.
#define ASYNCND_CPU_CACHE_BYPASS ASYNCND_ASAN

namespace asyncnd {
namespace detail {
namespace {

constexpr std::size_t kAlign = CachingAllocator::kAlignment;
constexpr std::size_t kSmallMax = CachingAllocator::kSmallMax;
constexpr int kClasses = static_cast<int>(kSmallMax / kAlign);  // 64, 128, ..., 4096 bytes
constexpr std::size_t kChainBytes = std::size_t(16) << 10;
constexpr std::uint32_t kMaxChain = 64;
constexpr std::size_t kMaxEnvMiB = std::size_t(1) << 20;  // 1 TiB

[[noreturn]] void throw_oom(std::size_t bytes) {
  throw Error("cpu: out of memory allocating " + std::to_string(bytes) + " bytes");
}

inline int class_of(std::size_t bytes) {  // bytes <= kSmallMax; 0 shares the 64-byte class
  return bytes == 0 ? 0 : static_cast<int>((bytes - 1) / kAlign);
}
inline std::size_t class_size(int c) { return static_cast<std::size_t>(c + 1) * kAlign; }

// Blocks per chain: enough that a chain crosses between threads rarely (once per 64 small
// blocks), few enough that a thread's two chains per class stay near 32 KiB.
inline std::uint32_t chain_len(int c) {
  return static_cast<std::uint32_t>(
      std::clamp<std::size_t>(kChainBytes / class_size(c), 2, kMaxChain));
}

// A cached small block, linked in place (every block is at least 64 bytes).
struct FreeBlock {
  FreeBlock* next;        // the next block of the same chain
  FreeBlock* next_chain;  // head block of a chain in a shared list: the next chain
  std::uint32_t count;    // head block of a full or shared chain: its length
};
static_assert(sizeof(FreeBlock) <= kAlign, "a free small block holds its own links");

// A cached large block, linked in place: in the LRU list of all large blocks and in the list of
// its size. Both lists run newest to oldest, so the oldest block overall is always the oldest of
// its size too, and eviction takes it from both ends in O(1).
struct LargeBlock {
  LargeBlock* older;
  LargeBlock* newer;
  LargeBlock* size_older;
  LargeBlock* size_newer;
  std::size_t size;  // rounded
};
static_assert(sizeof(LargeBlock) <= kSmallMax, "a free large block holds its own links");

class ThreadCache;

}  // namespace

class CachingAllocator::Impl {
 public:
  explicit Impl(std::size_t limit) : limit_(limit) {}

  void* alloc(std::size_t bytes);
  void free(void* p, std::size_t bytes) noexcept;
  void set_limit(std::size_t bytes) noexcept;
  std::size_t limit() const { return limit_.load(std::memory_order_relaxed); }
  Stats stats() const;

  // For ThreadCache.
  FreeBlock* take_chain(int c) noexcept;
  void put_chain(int c, FreeBlock* chain) noexcept;
  void release_chain(int c, FreeBlock* chain) noexcept;
  void add_thread(ThreadCache* tc) noexcept;
  void remove_thread(ThreadCache* tc) noexcept;

 private:
  void* os_alloc(std::size_t rounded, std::size_t asked);
  void os_free(void* p, std::size_t rounded) noexcept;
  bool reserve(std::size_t n) noexcept;
  void* take_large(std::size_t rounded) noexcept;
  void put_large(void* p, std::size_t rounded) noexcept;
  void unlink_large(LargeBlock* b) noexcept;  // large_mu_ held
  LargeBlock* evict_large_until(std::size_t target) noexcept;  // large_mu_ held
  void release_large(LargeBlock* list) noexcept;
  void trim(std::size_t target) noexcept;
  ThreadCache* thread_cache() noexcept;
  void drop_thread_cache() noexcept;

  std::atomic<std::size_t> limit_;
  // invariant: shared_bytes_ <= limit_ at the time each block was added (reserve() checks it).
  std::atomic<std::size_t> shared_bytes_{0};
  std::atomic<std::size_t> os_bytes_{0};

  struct alignas(64) SmallShared {  // one cache line each: threads freeing different sizes
    std::mutex mu;                  // do not contend
    FreeBlock* chains = nullptr;
  };
  SmallShared small_[kClasses];

  struct SizeList {
    LargeBlock* newest = nullptr;
    LargeBlock* oldest = nullptr;
  };
  std::mutex large_mu_;  // guards everything below
  std::unordered_map<std::size_t, SizeList> large_by_size_;
  LargeBlock* lru_newest_ = nullptr;
  LargeBlock* lru_oldest_ = nullptr;
  std::size_t large_bytes_ = 0;

  mutable std::mutex registry_mu_;  // the living threads' caches, for stats()
  ThreadCache* threads_ = nullptr;
};

namespace {

// One thread's small blocks: per class, a chain being filled or emptied (`cur`) and at most one
// full chain in reserve (`spare`). Only the owning thread touches the lists; bytes_ is read by
// stats() from other threads.
class ThreadCache {
 public:
  explicit ThreadCache(CachingAllocator::Impl& a) noexcept : a_(a) { a_.add_thread(this); }

  // Runs at thread exit: the blocks go to the shared lists (or to the OS when over the bound),
  // so an engine worker that exits leaks nothing.
  ~ThreadCache();

  void* alloc(int c) noexcept {  // nullptr: nothing cached for class c
    if (nrecent_[c] > 0) {
      add_bytes(-static_cast<std::ptrdiff_t>(class_size(c)));
      return recent_[c][--nrecent_[c]];
    }
    ClassList& l = lists_[c];
    if (l.cur == nullptr) {
      if (l.spare != nullptr) {
        l.cur = l.spare;
        l.count = l.spare->count;
        l.spare = nullptr;
      } else if (FreeBlock* chain = a_.take_chain(c)) {
        l.cur = chain;
        l.count = chain->count;
        add_bytes(static_cast<std::ptrdiff_t>(chain->count * class_size(c)));
      } else {
        return nullptr;
      }
    }
    FreeBlock* b = l.cur;
    l.cur = b->next;
    --l.count;
    add_bytes(-static_cast<std::ptrdiff_t>(class_size(c)));
    return b;
  }

  // The last few blocks freed per class wait in recent_, which links nothing into the block
  // itself: a block is usually freed by the thread that allocated it, after a worker wrote its
  // values, and writing a link into it would pull that cache line back from the worker's core
  // (one transfer per small array; E5 makes one per step:
  // bench/notes/per-op.md, "E5 on the Zen 4").
  void free(int c, void* p) noexcept {
    add_bytes(static_cast<std::ptrdiff_t>(class_size(c)));
    if (nrecent_[c] < kRecent) {
      recent_[c][nrecent_[c]++] = p;
      return;
    }
    link(c, p);
  }

  // Caching was turned off: give every block back to the OS.
  void release_all() noexcept {
    drain([this](int c, FreeBlock* chain) { a_.release_chain(c, chain); });
  }

  std::size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  ThreadCache* prev = nullptr;  // the registry's list, guarded by Impl::registry_mu_
  ThreadCache* next = nullptr;

 private:
  struct ClassList {
    FreeBlock* cur = nullptr;
    std::uint32_t count = 0;  // blocks in cur
    FreeBlock* spare = nullptr;
  };
  static constexpr int kRecent = 4;

  // Adds p (its bytes already counted) to the class's chain.
  void link(int c, void* p) noexcept {
    ClassList& l = lists_[c];
    if (l.count == chain_len(c)) {
      // cur is full: it becomes the spare, and an older spare moves to the shared list, where
      // the thread that allocates (often another one) picks it up.
      if (l.spare != nullptr) {
        FreeBlock* s = l.spare;
        l.spare = nullptr;
        add_bytes(-static_cast<std::ptrdiff_t>(s->count * class_size(c)));
        a_.put_chain(c, s);
      }
      l.cur->count = l.count;
      l.spare = l.cur;
      l.cur = nullptr;
      l.count = 0;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = l.cur;
    l.cur = b;
    ++l.count;
  }

  // Hands every chain this thread holds to give(class, chain) and empties the lists.
  template <class Give>
  void drain(Give give) noexcept {
    for (int c = 0; c < kClasses; ++c) {
      while (nrecent_[c] > 0) link(c, recent_[c][--nrecent_[c]]);
      ClassList& l = lists_[c];
      if (l.cur != nullptr) {
        l.cur->count = l.count;
        give(c, l.cur);
      }
      if (l.spare != nullptr) give(c, l.spare);
      l = ClassList{};
    }
    bytes_.store(0, std::memory_order_relaxed);
  }

  void add_bytes(std::ptrdiff_t d) noexcept {  // owner only, so no read-modify-write is needed
    bytes_.store(bytes_.load(std::memory_order_relaxed) + static_cast<std::size_t>(d),
                 std::memory_order_relaxed);
  }

  CachingAllocator::Impl& a_;
  ClassList lists_[kClasses];
  void* recent_[kClasses][kRecent];
  std::uint8_t nrecent_[kClasses] = {};
  std::atomic<std::size_t> bytes_{0};
};

// Trivially destructible, so it can still be read while the thread's thread_locals are destroyed
// (an array freed by another thread_local's destructor must not touch a destroyed cache).
thread_local bool t_cache_gone = false;

ThreadCache::~ThreadCache() {
  drain([this](int c, FreeBlock* chain) { a_.put_chain(c, chain); });
  a_.remove_thread(this);
  t_cache_gone = true;
}

}  // namespace

// ---- small blocks: the thread's cache, then the OS -------------------------------------------

ThreadCache* CachingAllocator::Impl::thread_cache() noexcept {
  if (t_cache_gone) return nullptr;
  // The process has one Impl (the instance is a leaked singleton), so one cache per thread.
  static thread_local ThreadCache cache(*this);
  return &cache;
}

void CachingAllocator::Impl::drop_thread_cache() noexcept {
  if (ThreadCache* tc = thread_cache()) {
    if (tc->bytes() != 0) tc->release_all();
  }
}

FreeBlock* CachingAllocator::Impl::take_chain(int c) noexcept {
  FreeBlock* chain;
  {
    std::lock_guard<std::mutex> lock(small_[c].mu);
    chain = small_[c].chains;
    if (chain != nullptr) small_[c].chains = chain->next_chain;
  }
  if (chain != nullptr) {
    shared_bytes_.fetch_sub(chain->count * class_size(c), std::memory_order_relaxed);
  }
  return chain;
}

void CachingAllocator::Impl::put_chain(int c, FreeBlock* chain) noexcept {
  if (!reserve(chain->count * class_size(c))) {
    release_chain(c, chain);
    return;
  }
  std::lock_guard<std::mutex> lock(small_[c].mu);
  chain->next_chain = small_[c].chains;
  small_[c].chains = chain;
}

void CachingAllocator::Impl::release_chain(int c, FreeBlock* chain) noexcept {
  for (std::uint32_t i = 0, n = chain->count; i < n; ++i) {
    FreeBlock* next = chain->next;
    os_free(chain, class_size(c));
    chain = next;
  }
}

void CachingAllocator::Impl::add_thread(ThreadCache* tc) noexcept {
  std::lock_guard<std::mutex> lock(registry_mu_);
  tc->next = threads_;
  if (threads_ != nullptr) threads_->prev = tc;
  threads_ = tc;
}

void CachingAllocator::Impl::remove_thread(ThreadCache* tc) noexcept {
  std::lock_guard<std::mutex> lock(registry_mu_);
  (tc->prev != nullptr ? tc->prev->next : threads_) = tc->next;
  if (tc->next != nullptr) tc->next->prev = tc->prev;
}

// ---- large blocks: one cache keyed by rounded size, evicted oldest first --------------------

void CachingAllocator::Impl::unlink_large(LargeBlock* b) noexcept {
  (b->newer != nullptr ? b->newer->older : lru_newest_) = b->older;
  (b->older != nullptr ? b->older->newer : lru_oldest_) = b->newer;
  auto it = large_by_size_.find(b->size);
  SizeList& sl = it->second;
  (b->size_newer != nullptr ? b->size_newer->size_older : sl.newest) = b->size_older;
  (b->size_older != nullptr ? b->size_older->size_newer : sl.oldest) = b->size_newer;
  if (sl.newest == nullptr) large_by_size_.erase(it);  // many one-off sizes must not pile up here
  large_bytes_ -= b->size;
}

void* CachingAllocator::Impl::take_large(std::size_t rounded) noexcept {
  LargeBlock* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(large_mu_);
    auto it = large_by_size_.find(rounded);
    if (it == large_by_size_.end()) return nullptr;
    b = it->second.newest;  // the most recently freed: likeliest still in cache
    unlink_large(b);
  }
  shared_bytes_.fetch_sub(rounded, std::memory_order_relaxed);
  return b;
}

LargeBlock* CachingAllocator::Impl::evict_large_until(std::size_t target) noexcept {
  LargeBlock* evicted = nullptr;  // linked through `older`, freed by the caller after unlocking
  while (lru_oldest_ != nullptr && shared_bytes_.load(std::memory_order_relaxed) > target) {
    LargeBlock* old = lru_oldest_;
    unlink_large(old);
    shared_bytes_.fetch_sub(old->size, std::memory_order_relaxed);
    old->older = evicted;
    evicted = old;
  }
  return evicted;
}

void CachingAllocator::Impl::release_large(LargeBlock* list) noexcept {
  while (list != nullptr) {
    LargeBlock* next = list->older;
    os_free(list, list->size);
    list = next;
  }
}

void CachingAllocator::Impl::put_large(void* p, std::size_t rounded) noexcept {
  LargeBlock* evicted = nullptr;
  bool kept = false;
  {
    std::lock_guard<std::mutex> lock(large_mu_);
    const std::size_t lim = limit_.load(std::memory_order_relaxed);
    const std::size_t shared = shared_bytes_.load(std::memory_order_relaxed);
    // Evict older large blocks only when that makes room; small chains are not evicted here.
    if (rounded <= lim && (shared <= lim - rounded || shared - large_bytes_ <= lim - rounded)) {
      if (shared > lim - rounded) evicted = evict_large_until(lim - rounded);
      if (reserve(rounded)) {
        try {
          SizeList& sl = large_by_size_[rounded];
          auto* b = static_cast<LargeBlock*>(p);
          *b = LargeBlock{lru_newest_, nullptr, sl.newest, nullptr, rounded};
          (lru_newest_ != nullptr ? lru_newest_->newer : lru_oldest_) = b;
          lru_newest_ = b;
          (sl.newest != nullptr ? sl.newest->size_newer : sl.oldest) = b;
          sl.newest = b;
          large_bytes_ += rounded;
          kept = true;
        } catch (...) {  // no memory for a map node: give the block back instead
          shared_bytes_.fetch_sub(rounded, std::memory_order_relaxed);
        }
      }
    }
  }
  // munmap of a big block takes tens of microseconds: never under the lock.
  release_large(evicted);
  if (!kept) os_free(p, rounded);
}

// ---- the bound and the OS ---------------------------------------------------------------------

bool CachingAllocator::Impl::reserve(std::size_t n) noexcept {
  std::size_t cur = shared_bytes_.load(std::memory_order_relaxed);
  do {
    const std::size_t lim = limit_.load(std::memory_order_relaxed);
    if (n > lim || cur > lim - n) return false;
  } while (!shared_bytes_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  return true;
}

void CachingAllocator::Impl::trim(std::size_t target) noexcept {
  // Large blocks first, oldest first: they hold nearly all the bytes.
  LargeBlock* evicted;
  {
    std::lock_guard<std::mutex> lock(large_mu_);
    evicted = evict_large_until(target);
  }
  release_large(evicted);
  auto over = [&] { return shared_bytes_.load(std::memory_order_relaxed) > target; };
  for (int c = kClasses - 1; c >= 0 && over(); --c) {
    while (over()) {
      FreeBlock* chain = take_chain(c);
      if (chain == nullptr) break;
      release_chain(c, chain);
    }
  }
}

void* CachingAllocator::Impl::os_alloc(std::size_t rounded, std::size_t asked) {
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr && shared_bytes_.load(std::memory_order_relaxed) != 0) {
    trim(0);  // the cache may be what the OS is short of
    p = std::aligned_alloc(kAlign, rounded);
  }
  if (p == nullptr) throw_oom(asked);
  os_bytes_.fetch_add(rounded, std::memory_order_relaxed);
  return p;
}

void CachingAllocator::Impl::os_free(void* p, std::size_t rounded) noexcept {
  std::free(p);
  os_bytes_.fetch_sub(rounded, std::memory_order_relaxed);
}

// ---- entry points -----------------------------------------------------------------------------

void* CachingAllocator::Impl::alloc(std::size_t bytes) {
#if ASYNCND_CPU_CACHE_BYPASS
  // aligned_alloc wants a multiple of the alignment; a zero-size array still gets a unique block.
  if (bytes > SIZE_MAX - (kAlign - 1)) throw_oom(bytes);
  const std::size_t rounded = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) throw_oom(bytes);
  return p;
#else
  const bool caching = limit() != 0;
  if (!caching) drop_thread_cache();  // any call, small or large, as the header says
  if (bytes <= kSmallMax) {
    const int c = class_of(bytes);
    if (caching) {
      if (ThreadCache* tc = thread_cache()) {
        if (void* p = tc->alloc(c)) return p;
      }
    }
    return os_alloc(class_size(c), bytes);
  }
  if (bytes > SIZE_MAX - (kPage - 1)) throw_oom(bytes);  // an impossible size; rounding overflows
  const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  if (void* p = take_large(rounded)) return p;
  return os_alloc(rounded, bytes);
#endif
}

void CachingAllocator::Impl::free(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
#if ASYNCND_CPU_CACHE_BYPASS
  (void)bytes;
  std::free(p);
#else
  const bool caching = limit() != 0;
  if (!caching) drop_thread_cache();
  if (bytes <= kSmallMax) {
    const int c = class_of(bytes);
    if (caching) {
      if (ThreadCache* tc = thread_cache()) {
        tc->free(c, p);
        return;
      }
    }
    os_free(p, class_size(c));
    return;
  }
  put_large(p, (bytes + kPage - 1) / kPage * kPage);
#endif
}

void CachingAllocator::Impl::set_limit(std::size_t bytes) noexcept {
  limit_.store(bytes, std::memory_order_relaxed);
  trim(bytes);
  // Other threads drop their private blocks on their next call; this one can do it now.
  if (bytes == 0) drop_thread_cache();
}

CachingAllocator::Stats CachingAllocator::Impl::stats() const {
  Stats s;
  {
    std::lock_guard<std::mutex> lock(registry_mu_);
    for (const ThreadCache* tc = threads_; tc != nullptr; tc = tc->next) {
      s.thread_bytes += tc->bytes();
    }
  }
  s.shared_bytes = shared_bytes_.load(std::memory_order_relaxed);
  s.os_bytes = os_bytes_.load(std::memory_order_relaxed);
  return s;
}

// ---- CachingAllocator -------------------------------------------------------------------------

std::size_t CachingAllocator::default_limit_for(std::uint64_t memory_bytes) {
  // At most the cap (512 MiB), so it fits a size_t anywhere.
  return static_cast<std::size_t>(
      memory_bytes == 0 ? kDefaultInflightBytesCap : default_max_inflight_bytes(memory_bytes));
}

std::size_t CachingAllocator::default_limit() {
  return default_limit_for(program_memory_limit().bytes);
}

std::size_t CachingAllocator::limit_from_env_value(const char* s) {
  if (s == nullptr) return default_limit();
  const std::uint64_t v =
      parse_env_uint("ASYNCND_CPU_CACHE_MB", s, 0, kMaxEnvMiB, "a size in MiB");
  return static_cast<std::size_t>(v) << 20;
}

CachingAllocator::CachingAllocator(std::size_t limit) : impl_(new Impl(limit)) {}

CachingAllocator& CachingAllocator::instance() {
  // Leaked on purpose, Impl included: engine workers may free arrays during static destruction,
  // and threads' caches return their blocks here when they exit.
  static CachingAllocator* a =
      new CachingAllocator(limit_from_env_value(std::getenv("ASYNCND_CPU_CACHE_MB")));
  return *a;
}

void* CachingAllocator::alloc(std::size_t bytes) { return impl_->alloc(bytes); }
void CachingAllocator::free(void* p, std::size_t bytes) noexcept { impl_->free(p, bytes); }
void CachingAllocator::set_limit(std::size_t bytes) { impl_->set_limit(bytes); }
std::size_t CachingAllocator::limit() const { return impl_->limit(); }
CachingAllocator::Stats CachingAllocator::stats() const { return impl_->stats(); }
bool CachingAllocator::caching_built() { return !ASYNCND_CPU_CACHE_BYPASS; }

}  // namespace detail
}  // namespace asyncnd
