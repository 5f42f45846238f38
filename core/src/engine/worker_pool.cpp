// Per-device worker pools: a ready queue (FIFO for priority 0, a heap otherwise), workers that
// spin briefly before they park (at most one spins at a time, so that on a small machine the
// frontend thread keeps a core; in wasm, workers fresh from a parallel_for spin longer: see
// kAfterJobSpin), runs (a paced pool's worker takes the FIFO whole; the spinning worker takes
// over the rest of a run that sits on one op, and leaves what is queued meanwhile to the running
// worker for a look: DevicePool::paced_), and parallel_for over idle workers and, for large
// loops, the chunk helpers (helper_main).
#include <algorithm>
#include <string>
#include <system_error>

#include "asyncnd/detail/backend.h"
#include "engine/engine_impl.h"

namespace asyncnd {
namespace detail {

namespace {

struct WorkerTls {
  EngineImpl* engine = nullptr;
  DevicePool* pool = nullptr;
  int index = -1;
  bool ran_chunks = false;  // ran chunks of a parallel_for since it last went idle
  std::atomic<OprBlock*>* run_rest = nullptr;  // its slot: the rest of its run (worker_has_more_ops)
};
thread_local WorkerTls tls_worker;

constexpr auto kIdleSpin = std::chrono::microseconds(100);
// A paced pool's idle worker looks at the queue this often (DevicePool::paced_). E5 on a Zen 4
// VM, per step, against watching the queue: bench/notes/per-op.md, "Paced polling".
constexpr auto kPollPace = std::chrono::microseconds(4);
// The spinner asks a run to split when the run's rest would take this many looks or more at the
// pace it moved since the last look (DevicePool::runs_): 32 µs, against the few µs that a split
// costs (a walk through half the rest's records, which the worker runs next anyway, a lock of
// the queue, and the look that takes the half). E5's runs (a look's worth of ops of a fraction
// of a µs each) are far below it. bench/notes/per-op.md, "Splitting long runs".
constexpr int kSplitLooks = 8;
#if defined(__EMSCRIPTEN__)
// In WebAssembly, every worker that took part in a parallel_for spins this long once idle (beside
// the one-spinner rule), so that the next large op finds all of them running: big ops come in
// runs (a training loop's GEMMs, a benchmark's products), with gaps of about 0.5 ms between them
// in the browser (the read-back, the next push). A parked worker that is woken waits for a core
// the frontend thread holds, and yield() cannot hand one over in wasm: in headless Chromium on
// 2 vCPUs, 1000^3 products with 2 workers went from 22.6-25.4 ms median (widely spread) to
// 21.4-21.6 (bench/notes/browser.md, "Results (browser)"). Not natively: there the GEMMs run on
// their own threads (OpenBLAS's, gemm_threads.cpp), whose cores an engine worker spinning on
// would take.
constexpr auto kAfterJobSpin = std::chrono::microseconds(2000);
#endif

bool heap_less(const OprBlock* a, const OprBlock* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->seq > b->seq;  // earlier push first among equal priorities
}

}  // namespace

bool on_engine_worker() { return tls_worker.engine != nullptr; }

bool worker_has_more_ops() noexcept {
  return (tls_worker.run_rest != nullptr &&
          tls_worker.run_rest->load(std::memory_order_relaxed) != nullptr) ||
         (tls_worker.pool != nullptr && tls_worker.pool->queued_hint() > 0);
}

bool paced_pool(Pacing pacing, int workers) {
  switch (pacing) {
    case Pacing::kRuns: return true;
    case Pacing::kOps: return false;
    case Pacing::kAuto: break;
  }
#if defined(__EMSCRIPTEN__)
  // In WebAssembly a pool of several workers (the browser's and Node's default: two) takes ops
  // one by one, as measured before a run could pass to another worker (bench/notes/per-op.md, "Runs
  // in a pool of several workers").
  return workers == 1;
#else
  (void)workers;
  return true;
#endif
}

DevicePool::DevicePool(EngineImpl* engine, Device device, int workers, bool paced,
                       int chunk_helpers)
    : engine_(engine),
      device_(device),
      max_spinners_(engine->cpus()),
      workers_(workers),
      chunk_helpers_(chunk_helpers),
      paced_(paced),
      runs_(new RunSlot[static_cast<std::size_t>(workers)]),
      seen_(new SeenRun[static_cast<std::size_t>(workers)]) {
  threads_.reserve(static_cast<std::size_t>(workers + chunk_helpers));
  try {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { worker_main(i); });
    for (int i = 0; i < chunk_helpers; ++i) threads_.emplace_back([this] { helper_main(); });
  } catch (const std::system_error& e) {
    // The process's limit on threads (or on memory, for their stacks): the threads already
    // started are stopped and joined, so that nothing waits on this pool's members as they go.
    const std::size_t started = threads_.size();
    join_all();
    const bool helper = started >= static_cast<std::size_t>(workers);
    throw Error(std::string("engine: could not start ") + device_.str() + "'s " +
                (helper ? "chunk helper " : "worker ") +
                std::to_string(helper ? started - static_cast<std::size_t>(workers) + 1
                                      : started + 1) +
                " of " + std::to_string(helper ? chunk_helpers : workers) + " (" + e.what() +
                "): ask for fewer (EngineOptions, ASYNCND_CPU_WORKERS, ASYNCND_CPU_HELPERS) or "
                "raise the process's limit on threads or memory");
  }
}

DevicePool::~DevicePool() { join_all(); }

void DevicePool::join_all() noexcept {
  {
    std::lock_guard<std::mutex> lk(park_mu_);
    stop_.store(true);
    park_cv_.notify_all();
    helper_cv_.notify_all();
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void DevicePool::enqueue(OprBlock* op, bool urgent) noexcept {
  bool wake, poke;
  {
    std::lock_guard<SpinLock> lk(qlock_);
    if (op->priority == 0) {
      op->next = nullptr;
      if (fifo_tail_) fifo_tail_->next = op;
      else fifo_head_ = op;
      fifo_tail_ = op;
      ++fifo_n_;
    } else {
      heap_.push_back(op);
      std::push_heap(heap_.begin(), heap_.end(), heap_less);
      // Ends the runs in progress (run_ops); modified under qlock_ only, as queued_.
      priority_pushes_.store(priority_pushes_.load(std::memory_order_relaxed) + 1,
                             std::memory_order_release);
    }
    // Modified under qlock_ only, so a plain store does; spinners read it without the lock.
    queued_.store(queued_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // A spinning worker will find it; wake a sleeper only when nobody spins (a wake-up costs the
    // pusher a system call, so the fast path avoids it). Read under qlock_: a worker about to
    // park counts itself a sleeper before it looks at the queue under qlock_ (queue_empty), so
    // either it sees this op or we see it.
    const int spinners = spinners_.load(std::memory_order_relaxed);
    wake = spinners == 0 && sleepers_.load(std::memory_order_relaxed) > 0;
    // An idle worker looks at once (a priority op's also ends the runs: priority_pushes_). Not
    // for an op that one of our workers made ready: that worker looks at the queue itself once
    // its op is done, and the op stays on its core (a chain of small ops in a pool of several
    // would otherwise move to another worker at every op).
    poke = paced_ && (op->priority != 0 ||
                      (urgent && spinners > 0 && tls_worker.pool != this));
  }
  if (poke) poke_worker();
  if (wake) wake_one();
}

void DevicePool::hurry() {
  // Only an idle (spinning) worker needs it. If it starts spinning just after this read, it looks
  // at the queue first (spin_paced); a poke missed otherwise costs at most kPollPace.
  if (paced_ && spinners_.load(std::memory_order_relaxed) > 0) poke_worker();
}

void DevicePool::poke_worker() noexcept {
  // An atomic increment: a plain store of the value read plus one (which the caller need not
  // wait for) measured slower in the wait round trip, 1.53 against 1.41 µs in the slow mode
  // (bench/notes/per-op.md, "Paced polling").
  hurry_.fetch_add(1, std::memory_order_acq_rel);
}

bool DevicePool::queue_empty() {
  std::lock_guard<SpinLock> lk(qlock_);
  return fifo_head_ == nullptr && heap_.empty();
}

void DevicePool::wake_one() noexcept {
  // One wake in flight at a time (waking_). With several workers, the one that spins takes each
  // op as it comes, and the next push found nobody spinning and woke a sleeper: a futex call on
  // the pusher for a third of the ops (4 workers on a Zen 4 of 2 vCPUs), and on a 16-vCPU Xeon
  // a push 6-10 times its cost with one worker (bench/notes/gpu.md, "Held small calls on an NVIDIA
  // H100"). Cleared by any worker returning from its wait, so a signal that finds the worker
  // already gone (its op taken by another) clears it too.
  // (A load first: most calls find it set, and a load leaves the line shared.)
  if (waking_.load(std::memory_order_relaxed) || waking_.exchange(true, std::memory_order_acq_rel))
    return;
  std::lock_guard<std::mutex> lk(park_mu_);
  // Under park_mu_, sleepers_ counts exactly the workers inside the wait: none, and nobody would
  // clear the flag.
  if (sleepers_.load(std::memory_order_relaxed) == 0) {
    waking_.store(false, std::memory_order_release);
    return;
  }
  park_cv_.notify_one();
}

OprBlock* DevicePool::try_pop(RunList& rest) {
  if (queued_.load(std::memory_order_acquire) == 0) return nullptr;
  OprBlock* op = nullptr;
  {
    std::lock_guard<SpinLock> lk(qlock_);
    if (paced_ && heap_.empty() && fifo_n_ > 1) {
      // The whole FIFO: one look at this line for all of them, run in push order (another worker
      // takes over the rest if this one sits on an op: run_ops, spin_paced).
      op = fifo_head_;
      EngineImpl::prefetch_for_write(op);  // see below
      rest = RunList{op->next, fifo_tail_, fifo_n_ - 1};  // the list ends in nullptr (enqueue)
      pops_.store(pops_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      queued_.store(queued_.load(std::memory_order_relaxed) - fifo_n_, std::memory_order_relaxed);
      fifo_head_ = fifo_tail_ = nullptr;
      fifo_n_ = 0;
      return op;
    }
    if (!heap_.empty() && (heap_.front()->priority > 0 || fifo_head_ == nullptr)) {
      std::pop_heap(heap_.begin(), heap_.end(), heap_less);
      op = heap_.back();
      heap_.pop_back();
    } else if (fifo_head_) {
      op = fifo_head_;
      // The pusher just wrote the record: ask for all its lines at once, before running it
      // reads and writes them one after another (from the end of its function to its
      // completion, 700 -> 260-370 cycles on a Xeon of 2 vCPUs: bench/notes/per-op.md, "The wait
      // round trip on the Xeon").
      EngineImpl::prefetch_for_write(op);
      fifo_head_ = op->next;
      if (!fifo_head_) fifo_tail_ = nullptr;
      --fifo_n_;
    } else if (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), heap_less);
      op = heap_.back();
      heap_.pop_back();
    }
    if (op) {
      pops_.store(pops_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      queued_.store(queued_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    }
  }
  return op;
}

void DevicePool::give_back(OprBlock* head, OprBlock* tail, int n) {
  if (!tail) {
    for (tail = head; tail->next;) tail = tail->next;
  }
  std::lock_guard<SpinLock> lk(qlock_);
  tail->next = fifo_head_;
  if (!fifo_head_) fifo_tail_ = tail;
  fifo_head_ = head;
  fifo_n_ += n;
  queued_.store(queued_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

bool DevicePool::any_run() const {
  for (int w = 0; w < size(); ++w) {
    if (runs_[static_cast<std::size_t>(w)].rest.load(std::memory_order_seq_cst)) return true;
  }
  return false;
}

OprBlock* DevicePool::take_run(int w, RunList& rest) {
  OprBlock* op = runs_[static_cast<std::size_t>(w)].rest.exchange(nullptr, std::memory_order_acq_rel);
  // The exchange read the release that published op, written after op's run_left.
  if (op && op->next) rest = RunList{op->next, nullptr, op->run_left - 1};
  return op;
}

void DevicePool::run_ops(OprBlock* op, RunList rest, int index, unsigned seen) {
  RunSlot& slot = runs_[static_cast<std::size_t>(index)];
  // With one worker nobody else takes a run or asks it to split: plain loads and stores do.
  const bool shared = size() > 1;
  // What another worker that takes the rest over needs, in its head op, and its length for the
  // spinner; then the rest itself.
  auto publish = [&slot](const RunList& r) {
    if (r.head) {
      r.head->run_left = r.n;
      slot.left.store(r.n, std::memory_order_relaxed);
    }
  };
  if (rest.head) {
    if (shared) {
      slot.split.store(false, std::memory_order_relaxed);  // asked of a run that has ended
      publish(rest);
    }
    slot.rest.store(rest.head, std::memory_order_seq_cst);
  }
  wake_if_unwatched(rest.head != nullptr);
  engine_->run_op(op, index);
  if (!rest.head) return;
  for (;;) {
    // Taken out of the slot before it runs, so that no other worker can take it too; the slot
    // holds null for these few instructions, which a looking worker reads as "no run". What
    // comes out is rest.head, unless another worker took the rest (null).
    OprBlock* next = shared ? slot.rest.exchange(nullptr, std::memory_order_acq_rel)
                            : slot.rest.load(std::memory_order_relaxed);
    if (!next) return;  // done, or another worker took the rest
    if (priority_pushes_.load(std::memory_order_acquire) != seen) {
      slot.rest.store(nullptr, std::memory_order_relaxed);
      give_back(next, rest.tail, rest.n);  // a priority op came: pop again (the heap goes first)
      return;
    }
    rest.head = next->next;  // read before it runs: run_op recycles the record
    --rest.n;
    if (shared && slot.split.load(std::memory_order_relaxed)) {
      slot.split.store(false, std::memory_order_relaxed);
      if (rest.n >= 2) split(rest);
    }
    if (shared) publish(rest);
    slot.rest.store(rest.head, std::memory_order_release);
    engine_->run_op(next, index);
  }
}

void DevicePool::split(RunList& rest) {
  // The earlier half stays: walking to the cut reads the records this worker runs next.
  const int keep = rest.n / 2;
  OprBlock* cut = rest.head;
  for (int i = 1; i < keep; ++i) cut = cut->next;
  OprBlock* given = cut->next;
  cut->next = nullptr;
  give_back(given, rest.tail, rest.n - keep);
  rest.tail = cut;
  rest.n = keep;
  poke_worker();  // the spinner that asked looks now, and takes the half as its run
  wake_if_unwatched(false);  // if it has stopped spinning meanwhile: the half is queued
}

void DevicePool::wake_if_unwatched(bool own_run) noexcept {
  // More ready work and nobody looking for it: wake a helper (here, not in the pusher). Work is
  // queued ops, the caller's run (which may stall on a long op), and other workers' runs, which
  // the worker that stopped spinning to run an op was watching. A run is published before this,
  // and both sides are sequentially consistent: a worker that stops spinning and parks meanwhile
  // either is counted here or sees the run before it waits (worker_main); a worker that saw the
  // caller spinning when it published its run is seen here.
  if (spinners_.load(std::memory_order_seq_cst) == 0 &&
      sleepers_.load(std::memory_order_seq_cst) > 0 &&
      (own_run || queued_.load(std::memory_order_relaxed) > 0 || (paced_ && any_run()))) {
    wake_one();
  }
}

bool DevicePool::spin_paced(int self, int& victim) {
  using Clock = std::chrono::steady_clock;
  auto t = Clock::now();
  auto end = t + kIdleSpin;
  const int workers = size();
  for (int w = 0; w < workers; ++w) seen_[static_cast<std::size_t>(w)] = SeenRun{};
  unsigned poked = hurry_.load(std::memory_order_acquire);  // at the last look
  unsigned pops = 0;         // pops_ at the last look that found the queue left to a runner
  bool left_before = false;  // that look was the last one
  for (int looks = 1;; ++looks) {
    const unsigned seen = hurry_.load(std::memory_order_acquire);
    // Queued ops go to another worker that is running ops (it takes them when its run ends)
    // unless they sat a whole look untaken, or this worker was poked (DevicePool::paced_).
    bool left = false;
    if (has_work()) {
      if (seen != poked || !other_running(self) || njobs_.load(std::memory_order_acquire) > 0 ||
          stop_.load(std::memory_order_acquire))
        return true;
      const unsigned p = pops_.load(std::memory_order_relaxed);
      if (left_before && p == pops) return true;
      pops = p;
      left = true;
    }
    left_before = left;
    poked = seen;
    // The other workers' runs. One whose rest is what it was at the last look has sat on one op
    // since then: take its rest. (A record recycled into the same place in a new run between two
    // looks reads as stale too; taking a run that moves on only spreads it.) Of those that move
    // on, ask the one with the most looks left at its pace to split, if that is kSplitLooks or
    // more.
    bool runs = false;
    int ask = -1, most_looks = kSplitLooks - 1;
    for (int w = 0; w < workers; ++w) {
      if (w == self) continue;
      const RunSlot& slot = runs_[static_cast<std::size_t>(w)];
      OprBlock* r = slot.rest.load(std::memory_order_relaxed);
      const int left = slot.left.load(std::memory_order_relaxed);
      SeenRun& before = seen_[static_cast<std::size_t>(w)];
      if (r != nullptr && r == before.rest) {
        victim = w;
        return true;
      }
      const int started = before.left - left;  // since the last look (in the same run if > 0)
      if (r != nullptr && before.rest != nullptr && started > 0 && left / started > most_looks) {
        most_looks = left / started;
        ask = w;
      }
      before = SeenRun{r, left};
      runs = runs || r != nullptr;
    }
    if (ask >= 0) {
      std::atomic<bool>& split = runs_[static_cast<std::size_t>(ask)].split;
      if (!split.load(std::memory_order_relaxed)) split.store(true, std::memory_order_relaxed);
    }
    // While another worker has a run, keep looking: it may stall on a long op.
    if (runs || left) end = t + kIdleSpin;
    if (t >= end) return false;
    // Yield now and then, as spin_until does: with more runnable threads than cores (the
    // frontend, BLAS's threads), one of them may need this core.
    if ((looks & 7) == 0) std::this_thread::yield();
    // Between looks, only hurry_'s line is read: it stays in both caches until a poke. Read
    // once per clock read: reading it after every pause instead made the wait round trip 8%
    // slower (bench/notes/per-op.md, "Paced polling").
    const auto next = t + kPollPace;
    do {
      cpu_relax();
      t = Clock::now();
    } while (t < next && hurry_.load(std::memory_order_acquire) == seen);
  }
}

bool DevicePool::other_running(int self) const {
  for (int w = 0; w < size(); ++w) {
    if (w != self && runs_[static_cast<std::size_t>(w)].running.load(std::memory_order_relaxed))
      return true;
  }
  return false;
}

bool DevicePool::has_work() const {
  return queued_.load(std::memory_order_acquire) > 0 ||
         njobs_.load(std::memory_order_acquire) > 0 || stop_.load(std::memory_order_acquire);
}

void DevicePool::worker_main(int index) {
  tls_worker = WorkerTls{engine_, this, index};
  RunSlot& slot = runs_[static_cast<std::size_t>(index)];
  tls_worker.run_rest = &slot.rest;
  // A device's backend may hold back the calls of the ops run so far (Backend::flush): it starts
  // them when this worker finds nothing more to run. The ops that waited for a held op are queued
  // here when it finishes, so a chain of small ops is held, and started, as a whole.
  const bool may_hold = !device_.is_cpu();
  // Marks the ops it runs (RunSlot::running), so that the spinner leaves what comes meanwhile to
  // it (spin_paced). A lone worker has no spinner beside it.
  const bool mark_running = paced_ && size() > 1;
  bool unflushed = false;
  int victim = -1;  // a worker whose run spin_paced found stale
  for (;;) {
    // Read before the pop: a priority op pushed after it ends the run.
    const unsigned seen = priority_pushes_.load(std::memory_order_acquire);
    RunList rest;
    OprBlock* op = try_pop(rest);
    // Another worker's stale run (spin_paced): its rest, if still there, is ours now.
    if (!op && victim >= 0) op = take_run(victim, rest);
    victim = -1;
    if (op) {
      unflushed = may_hold;
      if (mark_running) slot.running.store(true, std::memory_order_relaxed);
      run_ops(op, rest, index, seen);
      if (mark_running) slot.running.store(false, std::memory_order_relaxed);
      continue;
    }
    if (unflushed) {
      unflushed = false;
      flush_device(device_);
      continue;  // look again before idling: ops may have come meanwhile
    }
    if (help_job()) continue;
    if (stop_.load(std::memory_order_acquire)) return;
#if defined(__EMSCRIPTEN__)
    if (tls_worker.ran_chunks) {
      tls_worker.ran_chunks = false;
      // No more spinners than cores: with more workers than that, the rest would only take the
      // cores of those that spin and of the frontend thread.
      const int before = spinners_.fetch_add(1, std::memory_order_seq_cst);
      const bool found =
          before < max_spinners_ && spin_until([this] { return has_work(); }, kAfterJobSpin);
      spinners_.fetch_sub(1, std::memory_order_seq_cst);
      if (found) continue;
    }
#endif
    // Spin for a bounded time if no other worker does, then park.
    int expected = 0;
    if (spinners_.compare_exchange_strong(expected, 1)) {
      bool found =
          paced_ ? spin_paced(index, victim) : spin_until([this] { return has_work(); }, kIdleSpin);
      spinners_.fetch_sub(1, std::memory_order_seq_cst);
      if (found) continue;
    }
    std::unique_lock<std::mutex> lk(park_mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    while (queue_empty() && njobs_.load(std::memory_order_seq_cst) == 0 &&
           !stop_.load(std::memory_order_seq_cst)) {
      // A run that nobody watches (run_ops): watch it.
      if (paced_ && spinners_.load(std::memory_order_seq_cst) == 0 && any_run()) break;
      park_cv_.wait(lk);
      waking_.store(false, std::memory_order_release);  // whoever was signalled is back
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

// ---------------------------------------------------------------------------------------------
// parallel_for

namespace {
// Runs chunks of job until none is left to claim; `open` is the pool's count of jobs with chunks
// left (DevicePool::njobs_).
void run_chunks(ParallelJob* job, std::atomic<int>& open) {
  tls_worker.ran_chunks = true;
  for (;;) {
    const std::int64_t c = job->next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job->nchunks) return;
    // The last chunk claimed: the job has nothing left for idle workers (DevicePool::njobs_).
    if (c == job->nchunks - 1) open.fetch_sub(1, std::memory_order_seq_cst);
    const std::int64_t b = c * job->chunk, e = b + std::min(job->chunk, job->n - b);
    try {
      const ChunkScope chunk;
      (*job->fn)(b, e);
    } catch (...) {
      // Never let it escape a worker: the caller rethrows the first one once all chunks are done.
      std::lock_guard<SpinLock> lk(job->error_lock);
      if (!job->error) job->error = std::current_exception();
    }
    if (job->done.fetch_add(1, std::memory_order_seq_cst) + 1 == job->nchunks &&
        job->caller_sleeps.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lk(job->wait_mu);
      job->wait_cv.notify_one();
    }
  }
}
void unref(ParallelJob* job) {
  if (job->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete job;
}
}  // namespace

// A chunk helper (EngineOptions::cpu_chunk_helpers): runs chunks while a job has some left (a
// small job's too, if it finds one), else parks until parallel_for wakes it for a large one. It
// does not poll after a job: it runs on the frontend's core, which a frontend that pushes needs.
void DevicePool::helper_main() {
  // An engine thread, with no queue of its own: the chunks it runs are parts of ops, so a wait, a
  // configure_engine or a bounded push from one is refused or never waits, as on a worker (they
  // blocked for ever here: the op they waited for was the one that ran them).
  tls_worker = WorkerTls{engine_, nullptr, -1};
  for (;;) {
    if (help_job()) continue;
    std::unique_lock<std::mutex> lk(park_mu_);
    helper_sleepers_.fetch_add(1, std::memory_order_seq_cst);
    while (njobs_.load(std::memory_order_seq_cst) == 0 && !stop_.load(std::memory_order_seq_cst))
      helper_cv_.wait(lk);
    helper_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    if (stop_.load(std::memory_order_seq_cst)) return;
  }
}

bool DevicePool::help_job() {
  if (njobs_.load(std::memory_order_acquire) == 0) return false;
  ParallelJob* job = nullptr;
  {
    std::lock_guard<SpinLock> lk(jobs_lock_);
    for (ParallelJob* j : jobs_) {
      if (j->next.load(std::memory_order_relaxed) < j->nchunks) {
        job = j;
        job->refs.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
  }
  if (!job) return false;
  run_chunks(job, njobs_);
  unref(job);
  return true;
}

void DevicePool::parallel_for(std::int64_t n, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& fn,
                              std::int64_t work) {
  const bool with_helpers = chunk_helpers_ > 0 && (work > 0 ? work : n) >= kChunkHelperMinWork;
  const std::int64_t workers = size() + (with_helpers ? chunk_helpers_ : 0);
  // Rounded up without n + grain - 1, which overflowed for n near INT64_MAX (fn was never called).
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); };
  std::int64_t nchunks = std::min<std::int64_t>(ceil_div(n, grain), workers * 4);
  if (nchunks <= 1 || workers <= 1) {
    const ChunkScope chunk;
    fn(0, n);
    return;
  }
  auto* job = new ParallelJob;
  job->n = n;
  job->nchunks = nchunks;
  job->chunk = ceil_div(n, nchunks);
  job->nchunks = ceil_div(n, job->chunk);
  job->fn = &fn;
  // Counted before any thread can claim a chunk (helpers find it in jobs_, after this), so the
  // last claim's decrement never comes first.
  njobs_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::lock_guard<SpinLock> lk(jobs_lock_);
    jobs_.push_back(job);
  }
  const bool workers_sleep = sleepers_.load(std::memory_order_seq_cst) > 0;
  const bool helpers_sleep =
      with_helpers && helper_sleepers_.load(std::memory_order_seq_cst) > 0;
  if (workers_sleep || helpers_sleep) {
    std::lock_guard<std::mutex> lk(park_mu_);
    if (workers_sleep) park_cv_.notify_all();
    if (helpers_sleep) helper_cv_.notify_all();
  }
  run_chunks(job, njobs_);
  {  // every chunk is claimed now (njobs_ no longer counts it)
    std::lock_guard<SpinLock> lk(jobs_lock_);
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
  }
  // Chunks taken by helpers may still run: fn lives on our caller's stack until they are done.
  auto all_done = [job] { return job->done.load(std::memory_order_seq_cst) >= job->nchunks; };
#if defined(__EMSCRIPTEN__)
  // In wasm, yield() does not give up the core (sched_yield only runs queued calls): on a busy
  // machine a spinning caller takes CPU from a helper that another process has descheduled. So
  // spin briefly, then sleep until the last chunk's runner wakes us.
  if (!spin_until(all_done, std::chrono::microseconds(50))) {
    std::unique_lock<std::mutex> lk(job->wait_mu);
    job->caller_sleeps.store(true, std::memory_order_seq_cst);
    job->wait_cv.wait(lk, all_done);
  }
#else
  while (!all_done()) {
    cpu_relax();
    std::this_thread::yield();
  }
#endif
  // All chunks done: no more writers. Moved out, so that a helper that frees the job later does
  // not release the exception on its thread.
  std::exception_ptr error = std::move(job->error);
  unref(job);
  if (error) std::rethrow_exception(error);
}

void EngineImpl::parallel_for(std::int64_t n, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& fn,
                              std::int64_t work) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (kind_ == EngineKind::kNaive || n <= grain || !cpu_pool_) {
    const ChunkScope chunk;
    fn(0, n);
    return;
  }
  cpu_pool_->parallel_for(n, grain, fn, work);
}

}  // namespace detail
}  // namespace asyncnd
