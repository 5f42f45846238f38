// The engine's scheduling core: push, grants along variable queues, completion, waits, deletion,
// errors and backpressure. Worker pools are in worker_pool.cpp, the profiler in profiler.cpp.
// One file on purpose, though past the ~800 lines at which we split others: split into three
// (waits, errors and deletion; bounds and stats), the push of an empty op cost 14% more, since GCC
// then inlined less into push, grant, finish and settle (bench/notes/per-op.md,
// "`engine_impl.cpp` in three files").
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "asyncnd/detail/backend.h"
#include "engine/engine_impl.h"
#include "engine/recycler.h"

namespace asyncnd {
namespace detail {

namespace {

// Variables made (ids handed out) and destroyed, by every engine; live = made - destroyed. Two
// counters that only grow, on lines of their own: the pushing thread makes variables, and often a
// worker destroys them (the last op of an orphaned variable), so one count of live variables
// would cross between their cores on every op.
alignas(64) std::atomic<std::uint64_t> g_next_var_id{1};
alignas(64) std::atomic<std::uint64_t> g_vars_destroyed{0};

constexpr auto kWaitSpin = std::chrono::microseconds(50);

}  // namespace

// Ops the naive engine is running on this thread (ops that ops push nest), and the ops pushed from
// inside them, run after them in push order (run_naive).
thread_local int t_naive_op_depth = 0;
thread_local std::deque<NaiveItem> t_naive_deferred;
// This thread waited (wait_to_read, waitall) since its last push: its next push is urgent
// (DevicePool::enqueue). t_pushed_urgent: its last push was; then a paced worker already looks
// (it was poked, or it was busy and looks when done), and its waits need not poke it again.
thread_local bool t_waited = false;
thread_local bool t_pushed_urgent = false;

// EngineOptions' checks (engine.h): before anything starts or stops.
static void check_options(const EngineOptions& o) {
  auto bad = [](const char* field, long long value, const char* expected) {
    throw Error(std::string("engine options: ") + field + " is " + std::to_string(value) +
                " (expected " + expected + ")");
  };
  if (o.kind != EngineKind::kThreaded && o.kind != EngineKind::kNaive) {
    bad("kind", static_cast<long long>(o.kind), "EngineKind::kThreaded or kNaive");
  }
  if (o.cpu_pacing != Pacing::kAuto && o.cpu_pacing != Pacing::kRuns &&
      o.cpu_pacing != Pacing::kOps) {
    bad("cpu_pacing", static_cast<long long>(o.cpu_pacing), "Pacing::kAuto, kRuns or kOps");
  }
  // A count from its default (the lowest value) to kMaxCpuThreads.
  auto count = [&](const char* field, int value, int lowest) {
    if (value < lowest || value > kMaxCpuThreads) {
      const std::string range = std::to_string(lowest) + " (the default) to " +
                                std::to_string(kMaxCpuThreads);
      bad(field, value, range.c_str());
    }
  };
  count("cpu_workers", o.cpu_workers, 0);
  count("cpu_chunk_helpers", o.cpu_chunk_helpers, -1);
}

// On a thread that runs an op: a threaded engine's worker, or an op the naive engine runs inside
// push (where waiting for what was pushed would wait for the op itself).
bool EngineImpl::inside_op() const {
  return (Engine::on_worker_thread() && kind_ == EngineKind::kThreaded) || t_naive_op_depth > 0;
}

namespace {
std::atomic<std::uint64_t> g_next_engine_serial{1};
}  // namespace

EngineImpl::EngineImpl(EngineOptions options)
    : serial_(g_next_engine_serial.fetch_add(1, std::memory_order_relaxed)) {
  check_options(options);
  out_of_memory_error();  // made now, while there is memory to make it
  t0_ns_ = profiler_clock_ns();
  for (int i = 0; i < kDeviceKindCount * kIdsPerKind; ++i) {
    mem_[i].device = Device{static_cast<DeviceKind>(i / kIdsPerKind), i % kIdsPerKind};
  }
  mem_[0].used = true;  // the CPU is always reported
  start(options);
}

EngineImpl::~EngineImpl() {
  try {
    waitall();
  } catch (...) {
    // documented: errors not yet rethrown are dropped at destruction
  }
  // A Completion's thread may still be inside the engine after its op counted as finished.
  while (completing_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  stop();
}

void EngineImpl::start(EngineOptions options) {
  resolve_default_bounds(options, nullptr);  // may throw: nothing is started yet
  options_ = options;
  kind_ = options.kind;
  start_ops_ = options.max_inflight_ops;
  start_bytes_ = options.max_inflight_bytes;
  start_source_ = options.max_inflight_bytes == 0 ? BoundSource::kNone
                  : options.max_inflight_bytes_source == BoundSource::kNone
                      ? BoundSource::kUser
                      : options.max_inflight_bytes_source;
  max_ops_ = start_ops_;
  max_bytes_ = start_bytes_;
  bytes_source_ = start_source_;
  // Default: one worker per core but one, which the frontend thread keeps: with as many workers
  // as cores, a frontend that keeps pushing and busy workers are more runnable threads than
  // cores. (GEMMs still use every core: BLAS has its own threads.) The cores this process may
  // use: a container's quota or a taskset mask, not the machine's count (program_cpu_limit).
  cpus_ = program_cpu_limit().cpus;
  cpu_workers_ = options.cpu_workers > 0 ? options.cpu_workers : std::max(1, cpus_ - 1);
  if (kind_ == EngineKind::kThreaded) {
    // The core left to the frontend serves large maps too (EngineOptions::cpu_chunk_helpers):
    // by default only with the default worker count, which left it, so that a count set by hand
    // is all the CPU threads there are unless a helper is asked for too (as dist::init asks, for
    // a rank whose share of a machine is 2 CPUs or more).
#if defined(__EMSCRIPTEN__)
    const int helpers = 0;
#else
    const int helpers = options.cpu_chunk_helpers >= 0 ? options.cpu_chunk_helpers
                        : options.cpu_workers <= 0 && cpus_ > 1 ? 1
                                                                : 0;
#endif
    cpu_pool_ = std::make_unique<DevicePool>(this, Device::cpu(), cpu_workers_,
                                             paced_pool(options.cpu_pacing, cpu_workers_), helpers);
  }
}

void EngineImpl::stop() {
  cpu_pool_.reset();
  std::lock_guard<std::mutex> lk(pools_mu_);
  other_pools_.clear();
  n_other_pools_.store(0, std::memory_order_release);
}

void EngineImpl::refuse_in_chunk(const char* call) {
  if (t_chunk_depth > 0) {
    throw Error(std::string(call) + ": called from inside a parallel_for chunk; wait before or "
                "after the loop (a chunk may run on an engine thread, where it would deadlock)");
  }
}

void EngineImpl::reconfigure(EngineOptions options) {
  refuse_in_chunk("configure_engine");
  if (inside_op()) {
    throw Error("configure_engine: called from inside an op; it would stop its own worker");
  }
  check_options(options);
  // An earlier op's failure does not stop the reconfiguration: it is applied, then the failure is
  // reported (as waitall would have), so one call both configures and reports.
  std::exception_ptr failure;
  try {
    waitall();
  } catch (const Error&) {
    failure = std::current_exception();
  }
  const EngineOptions before = options_;
  stop();
  try {
    start(options);
  } catch (const std::exception& e) {
    // Its threads could not all start (DevicePool), or memory ran out: the engine runs on as it
    // was configured, and says why the new configuration did not take, and what failed before.
    start(before);
    if (!failure) throw;
    try {
      std::rethrow_exception(failure);
    } catch (const Error& earlier) {
      throw Error(std::string(e.what()) + "; and an earlier op failed: " + earlier.what());
    }
  }
  if (failure) std::rethrow_exception(failure);
}

int EngineImpl::num_workers(Device device) {
  if (!device.is_cpu() || device.id != 0) backend_for(device, "num_workers");
  if (kind_ == EngineKind::kNaive) return 0;
  return pool_for(device).size();
}

Pacing EngineImpl::pacing(Device device) {
  if (!device.is_cpu() || device.id != 0) backend_for(device, "pacing");
  if (kind_ == EngineKind::kNaive) return Pacing::kOps;
  return pool_for(device).paced() ? Pacing::kRuns : Pacing::kOps;
}

DevicePool* EngineImpl::find_pool_locked(Device device) noexcept {
  for (auto& p : other_pools_) {
    if (p->device() == device) return p.get();
  }
  return nullptr;
}

DevicePool& EngineImpl::pool_for(Device device) {
  if (device.is_cpu()) return *cpu_pool_;
  std::lock_guard<std::mutex> lk(pools_mu_);
  if (DevicePool* p = find_pool_locked(device)) return *p;
  // One worker launches a GPU's ops; the device itself runs them asynchronously.
  other_pools_.push_back(std::make_unique<DevicePool>(this, device, 1, true));
  n_other_pools_.store(static_cast<int>(other_pools_.size()), std::memory_order_release);
  return *other_pools_.back();
}

DevicePool& EngineImpl::pool_of(Device device) noexcept {
  if (device.is_cpu()) return *cpu_pool_;
  std::lock_guard<std::mutex> lk(pools_mu_);
  if (DevicePool* p = find_pool_locked(device)) return *p;
  std::abort();  // invariant: push made it (pool_for)
}

// ---------------------------------------------------------------------------------------------
// Variables

// Variable records are recycled like op records (recycler.h): the pushing thread makes one per new
// array, and a worker often destroys it (an orphaned variable's last op), which with malloc and
// free meant the frontend's malloc waiting on the lock of its own arena, which the worker's free
// held (bench/notes/per-op.md, "E5 on the Zen 4"). destroy_var resets a record before it goes back.
Var EngineImpl::new_var() {
  VarBlock* v = Recycler<VarBlock>::get();
  v->refs.store(1, std::memory_order_relaxed);
  v->owner = this;
  v->owner_serial = serial_;
  v->id = g_next_var_id.fetch_add(1, std::memory_order_relaxed);
  return Var(v);
}

void EngineImpl::destroy_var(VarBlock* v) noexcept {
  g_vars_destroyed.fetch_add(1, std::memory_order_release);
  v->owner = nullptr;
  v->deleted.store(false, std::memory_order_relaxed);
  v->has_error.store(false, std::memory_order_relaxed);
  // invariant: idle, so issued == done_seen == done and nothing waits (attention is clear). The
  // counts stay: resetting the second line would write a line the last worker holds.
  v->head = v->tail = nullptr;
  v->orphaned = false;
  v->delete_pending = false;
  v->on_delete = nullptr;
  v->delete_bytes = 0;
  v->delete_bytes_later = 0;
  v->error = nullptr;
  Recycler<VarBlock>::put(v);
}

void EngineImpl::release_var(VarBlock* v) noexcept {
  if (v && v->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    bool idle;
    ReadyList ready;
    Settled settled;
    // Read now: once orphaned is set and the lock released, the last op may free v.
    EngineImpl* const e = v->owner;
    {
      std::lock_guard<SpinLock> lk(v->lock);
      // Idle: it can go now. (Checked before anything touches the engine, which may be gone
      // when nothing is queued: a handle can outlive the Engine.)
      idle = idle_now(v);
      if (!idle) {
        // Ops still queued on it: the one that finishes last frees it.
        v->orphaned = true;
        e->settle(v, ready, settled);
      }
    }
    if (idle) {
      destroy_var(v);
    } else {
      e->after_settle(v, settled);
      e->dispatch_all(ready);
    }
  }
}

bool EngineImpl::idle_now(VarBlock* v) {
  if (v->head != nullptr) return false;
  if (v->issued != v->done_seen) v->done_seen = v->done.load(std::memory_order_acquire) >> 1;
  return v->issued == v->done_seen;
}

bool EngineImpl::write_running_now(VarBlock* v) {
  if (v->done_seen < v->write_mark) v->done_seen = v->done.load(std::memory_order_acquire) >> 1;
  return v->done_seen < v->write_mark;
}

void EngineImpl::check_var(const VarBlock* v, const char* op, const char* role) const {
  if (v == nullptr) throw Error(std::string(op) + ": " + role + " variable is null");
  if (v->owner != this || v->owner_serial != serial_) {
    throw Error(std::string(op) + ": " + role + " variable " + std::to_string(v->id) +
                " belongs to another engine");
  }
  if (v->deleted.load(std::memory_order_acquire)) {
    throw Error(std::string(op) + ": " + role + " variable " + std::to_string(v->id) +
                " was deleted");
  }
}

// ---------------------------------------------------------------------------------------------
// Ops

namespace {
OprBlock* alloc_op() { return Recycler<OprBlock>::get(); }

void recycle_op(OprBlock* op) {
  op->heap_acc.reset();
  op->error = nullptr;
  op->signal = nullptr;
  op->push_us = 0;
  op->profiled = false;
  op->async = false;
  op->async_done.store(false, std::memory_order_relaxed);
  op->async_dropped_unwinding.store(false, std::memory_order_relaxed);
  op->async_thrown = nullptr;
  op->async_failed = nullptr;
  op->engine = nullptr;
  op->seq = 0;
  op->priority = 0;
  op->bytes = 0;
  op->nreads = op->nwrites = 0;
  Recycler<OprBlock>::put(op);
}
}  // namespace

// The next push's op record was freed by a worker, which wrote it last: asking for its lines now,
// in the background, spares the next push the wait (its first locked instruction would wait for
// every store to them).
void EngineImpl::prefetch_for_write(OprBlock* op) {
#if defined(__x86_64__) || defined(__i386__)
  if (op == nullptr) return;
  const char* p = reinterpret_cast<const char*>(op);
  for (std::size_t off = 0; off < sizeof(OprBlock); off += 64) {
    asm volatile("prefetchw %0" : : "m"(*(p + off)));
  }
#else
  (void)op;
#endif
}

OprBlock* EngineImpl::new_op(int nacc) {
  OprBlock* op = alloc_op();
  if (nacc <= 4) {
    op->acc = op->inline_acc;
  } else {
    op->heap_acc.reset(new Access[static_cast<std::size_t>(nacc)]);
    op->acc = op->heap_acc.get();
  }
  return op;
}

void EngineImpl::free_op(OprBlock* op) {
  recycle_op(op);
}

template <class Vars>
void EngineImpl::push(OpFunction fn, Vars reads, Vars writes, const PushOptions& opts,
                      bool async) {
  const std::size_t nreads = reads.size(), nwrites = writes.size();
  const char* name = opts.name ? opts.name : "op";
  // Validate everything before taking ownership of anything: a bad call queues nothing.
  for (std::size_t i = 0; i < nreads; ++i) check_var(peek(reads[i]), name, "read");
  for (std::size_t i = 0; i < nwrites; ++i) check_var(peek(writes[i]), name, "write");
  for (std::size_t i = 0; i < nreads; ++i) {
    for (std::size_t j = 0; j < nwrites; ++j) {
      const Var& r = reads[i];
      if (r == writes[j]) {
        throw Error(std::string(name) + ": variable " + std::to_string(r.id()) +
                    " is both read and written; list it in writes only");
      }
    }
  }
  if (!opts.device.is_cpu() || opts.device.id != 0) {
    backend_for(opts.device, name);
    pool_for(opts.device);  // made here, where it may throw, not in dispatch (noexcept)
  }
  if (!fn) throw Error(std::string(name) + ": empty function");

  // Again (push ends with it too): a worker that recycled the previous record, next to this one
  // in memory, may have read these lines since, and then each store below would wait for our
  // copy to be made writable again. A loop that pushes and reads each result (the wait round
  // trip) on a Xeon of 2 vCPUs: push 450-600 -> 330-370 ns (bench/notes/per-op.md, "The wait round
  // trip on the Xeon").
  prefetch_for_write(Recycler<OprBlock>::peek());
  // Ops hold no references: a variable lives while a handle or a queued access names it (see
  // release_var), which saves two contended atomic operations per access. The caller's handles
  // keep the variables alive until the accesses are queued. Duplicates are dropped.
  OprBlock* op = new_op(static_cast<int>(nreads + nwrites));
  int n = 0;
  auto add = [&](const Var& var, bool write, int from) {
    VarBlock* v = peek(var);
    for (int i = from; i < n; ++i) {
      if (op->acc[i].var == v) return;
    }
    op->acc[n++] = Access{op, v, nullptr, write};
  };
  for (std::size_t i = 0; i < nreads; ++i) add(reads[i], false, 0);
  op->nreads = n;
  for (std::size_t i = 0; i < nwrites; ++i) add(writes[i], true, op->nreads);
  op->nwrites = n - op->nreads;
  op->kind = OpKind::kNormal;
  op->fn = std::move(fn);
  op->async = async;
  op->engine = this;
  op->priority = opts.priority;
  op->device = opts.device;
  op->name = name;
  // Bytes are tracked only while a byte bound is set: an atomic less per op otherwise.
  op->bytes = max_bytes_.load(std::memory_order_relaxed) ? opts.bytes : 0;

  if (kind_ == EngineKind::kNaive) {
    run_naive(op);
  } else {
    if (!Engine::on_worker_thread()) backpressure(op->bytes);
    submit(op, opts.priority);
    prefetch_for_write(Recycler<OprBlock>::peek());
  }
}
template void EngineImpl::push<VarArray>(OpFunction, VarArray, VarArray, const PushOptions&,
                                         bool);
template void EngineImpl::push<VarPtrs>(OpFunction, VarPtrs, VarPtrs, const PushOptions&, bool);

void EngineImpl::submit(OprBlock* op, int priority) {
  if (profiling()) {
    op->profiled = true;
    op->prof_session = prof_session_.load(std::memory_order_relaxed);
    op->push_us = now_us();
  }
  if (priority != 0) op->seq = seq_.fetch_add(1, std::memory_order_relaxed);

  pushed_all_.fetch_add(1, std::memory_order_seq_cst);
  if (op->bytes) pushed_bytes_.fetch_add(op->bytes, std::memory_order_relaxed);
  enqueue_accesses(op);
}

void EngineImpl::backpressure(std::size_t bytes) {
  std::size_t mo = max_ops_.load(std::memory_order_relaxed);
  std::size_t mb = max_bytes_.load(std::memory_order_relaxed);
  if (mo == 0 && mb == 0) return;
  auto ops_ok = [&] {
    if (mo == 0) return true;
    // seen_finished_ is a lower bound of finished_all_: only read the workers' counter when the
    // cheap bound says we might be over.
    std::uint64_t pushed = pushed_all_.load(std::memory_order_relaxed);
    if (pushed - seen_finished_.load(std::memory_order_relaxed) < mo) return true;
    std::uint64_t fin = finished_all_.load(std::memory_order_acquire);
    seen_finished_.store(fin, std::memory_order_relaxed);
    return pushed - fin < mo;
  };
  auto bytes_ok = [&] {
    if (mb == 0 || bytes == 0) return true;
    // As for ops: an upper bound from seen_finished_bytes_ first, the workers' count if needed.
    const std::uint64_t pushed = pushed_bytes_.load(std::memory_order_relaxed);
    if (pushed - seen_finished_bytes_.load(std::memory_order_relaxed) + bytes <= mb) return true;
    const std::uint64_t fin = finished_bytes_.load(std::memory_order_acquire);
    seen_finished_bytes_.store(fin, std::memory_order_relaxed);
    const std::uint64_t now = pushed - fin;
    return now == 0 || now + bytes <= mb;
  };
  auto ok = [&] { return ops_ok() && bytes_ok(); };
  if (ok()) return;
  push_waits_.fetch_add(1, std::memory_order_relaxed);
  hurry_workers();
  // Waiting, the bounds are read again: set_max_inflight (which wakes sleepers under done_mu_)
  // may lift them, and a push blocked under the old bound must see it.
  auto ok_now = [&] {
    mo = max_ops_.load(std::memory_order_relaxed);
    mb = max_bytes_.load(std::memory_order_relaxed);
    return ok();
  };
  if (spin_until(ok_now, std::chrono::microseconds(20))) return;
  std::unique_lock<std::mutex> lk(done_mu_);
  bound_sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with finish's fetch_add on finished_all_ then seq_cst load of bound_sleepers_: without
  // it, the acquire loads in ok() could read the counters from before that finish (allowed on a
  // weakly ordered CPU) while finish reads no sleeper, and the wake-up would be lost.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  done_cv_.wait(lk, ok_now);
  bound_sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

void EngineImpl::enqueue_accesses(OprBlock* op) {
  const int n = op->nreads + op->nwrites;
  op->wait.store(n + 1, std::memory_order_relaxed);
  // Grants made here are counted locally and taken off the op's counter in one atomic operation
  // at the end (with the push's own hold); workers completing earlier ops grant concurrently.
  int granted_here = 0;
  ReadyList ready;  // stays empty in practice: see settle()
  for (int i = 0; i < n; ++i) {
    Access* a = &op->acc[i];
    VarBlock* v = a->var;
    v->lock.lock();
    bool granted = false;
    if (v->head == nullptr) {
      if (!a->write) {
        granted = !write_running_now(v);
        if (granted) ++v->issued;
      } else {
        granted = idle_now(v);
        if (granted) {
          v->write_mark = ++v->issued;
          if (op->bytes) v->counted_until = v->write_mark;
        }
      }
    }
    Settled settled;  // used only when the access is queued
    // Queued behind another queued access, nothing settle could do has changed: a queue left
    // non-empty has kAttention raised and an access still running, whose completion settles
    // under the lock (settle). So the worker's line is not read then: in a backlog (the workers
    // behind the frontend), reading it cost the worker a transfer back per access.
    const bool settles = !granted && v->tail == nullptr;
    if (granted) {
      capture_poison(a);
      ++granted_here;
    } else {
      a->next = nullptr;
      if (settles) v->head = a;
      else v->tail->next = a;
      v->tail = a;
      // The last running access grants it (or settle does, if they all ended just now; grant()
      // then takes it off op->wait, which push's hold keeps above zero).
      if (settles) settle(v, ready, settled);
    }
    v->lock.unlock();
    // The caller holds a handle, so v is not orphaned, and not pending deletion unless another
    // thread deletes it right now; then this runs what settle handed over.
    if (settles) after_settle(v, settled);
  }
  const int mine = granted_here + 1;
  if (op->wait.fetch_sub(mine, std::memory_order_acq_rel) == mine) {
    // A thread that waited since its last push likely waits for this one too (a loop that
    // reads each result): the idle worker looks now. Otherwise it looks within kPollPace
    // (worker_pool.cpp), and in a loop of pushes takes several at once.
    dispatch(op, t_waited);
    t_pushed_urgent = t_waited;
    t_waited = false;
  }
  dispatch_all(ready);
}

// Caller holds a->var->lock. Poison is captured at grant time, so whether an op is skipped
// depends only on push order, not on when a concurrent wait clears the variable's error.
void EngineImpl::capture_poison(Access* a) noexcept {
  OprBlock* op = a->op;
  if (a->var->has_error.load(std::memory_order_acquire) && op->kind == OpKind::kNormal) {
    std::lock_guard<std::mutex> lk(err_mu_);
    if (!op->error && a->var->error) op->error = a->var->error;
  }
}

// Caller holds v->lock, with done_seen exact (attention raised, or nothing runs). Whether an op
// that counts bytes in flight (PushOptions::bytes) still writes v: granted and not completed, or
// queued.
bool EngineImpl::storage_counted_by_writer(const VarBlock* v) noexcept {
  if (v->done_seen < v->counted_until) return true;
  for (const Access* a = v->head; a != nullptr; a = a->next) {
    if (a->write && a->op->bytes) return true;
  }
  return false;
}

// Caller holds a->var->lock.
void EngineImpl::grant(Access* a, ReadyList& ready) noexcept {
  capture_poison(a);
  if (a->op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1) ready.add(a->op);
}

// Completes one access of a finished op: the variable grants what it can to its queued ops
// (collected in `ready`), and a deletion waiting for the variable to go idle runs, before this
// op counts as finished, so memory is back when waitall returns.
void EngineImpl::complete_access(VarBlock* v, ReadyList& ready) noexcept {
  // Counted on the variable's second line, unless something waits for the running accesses to
  // end (kAttention). Once the count is raised, v is not touched again: it may be freed.
  std::uint64_t w = v->done.load(std::memory_order_relaxed);
  while (!(w & VarBlock::kAttention)) {
    if (v->done.compare_exchange_weak(w, w + VarBlock::kOneDone, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return;
    }
  }
  Settled settled;
  {
    std::lock_guard<SpinLock> lk(v->lock);
    // Counted under the lock, so that exactly one completion, the last, sees the accesses end.
    v->done_seen = (v->done.fetch_add(VarBlock::kOneDone, std::memory_order_acq_rel) >> 1) + 1;
    settle(v, ready, settled);
  }
  after_settle(v, settled);
}

void EngineImpl::settle(VarBlock* v, ReadyList& ready, Settled& out) noexcept {
  for (;;) {
    if (v->head == nullptr && !v->orphaned && !v->delete_pending) break;  // nothing waits
    if (v->issued != v->done_seen) {
      // Accesses may still run. Raising kAttention sends every later completion through the
      // lock; the count it returns is exact, and stays so while we hold the lock.
      std::uint64_t w;
      if (v->attention) {
        w = v->done.load(std::memory_order_acquire);
      } else {
        w = v->done.fetch_or(VarBlock::kAttention, std::memory_order_acq_rel);
        v->attention = true;
      }
      v->done_seen = w >> 1;
    }
    if (v->delete_bytes_later && !storage_counted_by_writer(v)) {
      // The op that made the storage has finished (its bytes leave the count): the storage, kept
      // alive for queued readers, is counted from now on as the deletion's.
      v->delete_bytes = v->delete_bytes_later;
      v->delete_bytes_later = 0;
      pushed_bytes_.fetch_add(v->delete_bytes, std::memory_order_relaxed);
    }
    Access* a = v->head;
    const bool write_runs = v->done_seen < v->write_mark;
    if (a != nullptr && !a->write && !write_runs) {
      // Reads behind a write that has ended: every consecutive one runs, together.
      while (v->head && !v->head->write) {
        a = v->head;
        v->head = a->next;
        ++v->issued;
        grant(a, ready);
      }
      if (!v->head) v->tail = nullptr;
      continue;
    }
    if (v->issued != v->done_seen) return;  // the last running access settles
    // Nothing runs.
    if (a != nullptr) {  // a write (reads at the head were granted above)
      v->head = a->next;
      if (!v->head) v->tail = nullptr;
      v->write_mark = ++v->issued;
      if (a->op->bytes) v->counted_until = v->write_mark;
      grant(a, ready);
      continue;
    }
    if (v->delete_pending) {
      out.deleter = std::move(v->on_delete);
      v->on_delete = nullptr;
      v->delete_pending = false;
      out.deleted_bytes = v->delete_bytes;
      v->delete_bytes = 0;
      v->delete_bytes_later = 0;  // its writer and readers ended together: never counted
    }
    out.destroy = v->orphaned;
    break;
  }
  if (v->attention) {  // nothing waits for the running accesses any more
    v->done.fetch_and(~VarBlock::kAttention, std::memory_order_acq_rel);
    v->attention = false;
  }
}

void EngineImpl::after_settle(VarBlock* v, Settled& s) noexcept {
  run_deleter(s.deleter);
  if (s.deleted_bytes) release_inflight(s.deleted_bytes);
  if (s.destroy) destroy_var(v);
}

void EngineImpl::release_inflight(std::size_t bytes) noexcept {
  // The caller (finish, run_wait) wakes the waiters afterwards. seq_cst: a sleeping push's fence
  // (backpressure) must see it once the waker saw no sleeper.
  finished_bytes_.fetch_add(bytes, std::memory_order_seq_cst);
}

void EngineImpl::notify_done_waiters() {
  const bool bound_sleeps = bound_sleepers_.load(std::memory_order_seq_cst) != 0;
  if (!bound_sleeps && waitall_sleepers_.load(std::memory_order_seq_cst) == 0) return;
  const std::uint64_t f = finished_all_.load(std::memory_order_seq_cst);
  const std::uint64_t p = pushed_all_.load(std::memory_order_seq_cst);
  bool wake = f >= p;  // waitall may return
  // A sleeping waitall alone is woken only then. Before, it was woken by the bound's condition
  // below too, so while it slept every finished op paid a futex wake and the sleeper a wake-up
  // that found work still pending: draining a backlog of empty ops after waitall fell asleep cost
  // 1.5-3 times more per op (bench/notes/per-op.md, "A sleeping waitall woken by every op").
  if (!wake && bound_sleeps) {
    // A push blocked by a bound: wake it once in-flight work is down to half of each bound set
    // (hysteresis). Waking it after every finished op cost a context switch per op on the cores
    // the ops run on (E6: ~100 wake-ups per batch). No wake-up is lost for good: while anything
    // is in flight, ops keep finishing, and the last one finds f >= p.
    const std::size_t mo = max_ops_.load(std::memory_order_relaxed);
    const std::size_t mb = max_bytes_.load(std::memory_order_relaxed);
    wake = (mo == 0 || p - f <= mo / 2) && (mb == 0 || inflight_bytes() <= mb / 2);
  }
  if (!wake) return;
  std::lock_guard<std::mutex> lk(done_mu_);
  done_cv_.notify_all();
}

void EngineImpl::dispatch(OprBlock* op, bool urgent) noexcept {
  switch (op->kind) {
    case OpKind::kWait: run_wait(op); break;
    case OpKind::kNormal: pool_of(op->device).enqueue(op, urgent); break;
  }
}

void EngineImpl::hurry_workers() {
  if (cpu_pool_) cpu_pool_->hurry();
  if (n_other_pools_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lk(pools_mu_);
  for (auto& p : other_pools_) p->hurry();
}

void EngineImpl::dispatch_all(ReadyList& ready) noexcept {
  ready.for_each([this](OprBlock* op) { dispatch(op); });
}

// Runs op's function unless an input was poisoned, and stores a failure on the op's outputs.
void EngineImpl::execute(OprBlock* op, int worker) {
  const double start = op->profiled ? now_us() : 0;
  bool failed = false;
  ErrorRef err = op->error;  // inherited: skip
  if (!err) {
    try {
      op->fn();
    } catch (...) {
      err = wrap_error(op, std::current_exception());
      record_error(err);
      failed = true;
    }
  }
  // Destroy what the closure captured before the op counts as finished, so that memory held by
  // captures is back by the time waitall returns.
  op->fn = nullptr;
  if (err) {
    for (int i = 0; i < op->nwrites; ++i) set_error(op->acc[op->nreads + i].var, err);
  }
  if (op->profiled && profiling()) {
    record_event(op, worker, start, now_us(), failed, !failed && err != nullptr);
  }
}

void EngineImpl::run_op(OprBlock* op, int worker) {
  if (op->async) {
    run_async(op, worker);
    return;
  }
  execute(op, worker);
  finish(op);
}

// ---------------------------------------------------------------------------------------------
// Asynchronous ops: fn gets a Completion; the op finishes once fn has returned and the Completion
// was used (done, fail or dropped), whichever comes last, with fn's exception if it threw, else
// fail()'s error. The record lives until both the call and the Completion object are gone.

namespace {
thread_local OprBlock* t_async_op = nullptr;  // the async op whose fn runs on this thread
}

OprBlock* EngineImpl::current_async_op() { return t_async_op; }

void EngineImpl::push_async(std::function<void(Completion)> fn, VarArray reads,
                            VarArray writes, const PushOptions& opts) {
  if (!fn) throw Error(std::string(opts.name ? opts.name : "op") + ": empty function");
  push([f = std::move(fn)]() mutable { f(Completion(t_async_op)); }, reads, writes, opts, true);
}

void EngineImpl::run_async(OprBlock* op, int worker, int extra_refs) {
  op->worker = worker;
  op->start_us = op->profiled ? now_us() : 0;
  if (op->error) {  // an input was poisoned: skip, as for any op
    execute(op, worker);
    if (kind_ != EngineKind::kNaive) finish(op);
    return;
  }
  op->async_refs.store(2 + extra_refs, std::memory_order_relaxed);
  op->async_pending.store(2, std::memory_order_relaxed);
  // Moved out: a Completion used on another thread may finish the op while fn still runs here.
  OpFunction f = std::move(op->fn);
  OprBlock* outer = t_async_op;
  t_async_op = op;
  ErrorRef thrown;
  try {
    f();
  } catch (...) {
    thrown = wrap_error(op, std::current_exception());
  }
  t_async_op = outer;
  f = nullptr;
  if (thrown) {
    op->async_thrown = std::move(thrown);
    // fn threw before using its Completion (destroyed while unwinding, see ~Completion): the
    // throw stands for it.
    if (!op->async_done.exchange(true, std::memory_order_acq_rel)) arrive_async(op);
  } else if (op->async_dropped_unwinding.load(std::memory_order_acquire) &&
             !op->async_done.exchange(true, std::memory_order_acq_rel)) {
    // Destroyed while an exception passed through, which fn then caught: nothing else will
    // complete the op (a waiter hung for ever).
    op->async_failed = op_error(op, kCompletionDropped);
    arrive_async(op);
  }
  arrive_async(op);
  release_async(op);
}

void EngineImpl::arrive_async(OprBlock* op) {
  if (op->async_pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    complete_async(op, op->async_thrown ? op->async_thrown : op->async_failed);
  }
}

void EngineImpl::complete_async(OprBlock* op, ErrorRef err) {
  if (err) {
    record_error(err);
    for (int i = 0; i < op->nwrites; ++i) set_error(op->acc[op->nreads + i].var, err);
  }
  if (op->profiled && profiling()) {
    record_event(op, op->worker, op->start_us, now_us(), err != nullptr, false);
  }
  // The naive engine never queued the accesses: run_naive finishes the op itself.
  if (kind_ != EngineKind::kNaive) finish(op, false);
}

void EngineImpl::release_async(OprBlock* op) {
  if (op->async_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) free_op(op);
}

ErrorRef EngineImpl::op_error(const OprBlock* op, const std::string& what) noexcept {
  try {
    return std::make_shared<const OpFailure>(std::string(op->name) + " failed on " +
                                             op->device.str() + ": " + what);
  } catch (...) {
    return out_of_memory_error();
  }
}

ErrorRef EngineImpl::out_of_memory_error() noexcept {
  // Made with the first engine (EngineImpl's constructor asks), while memory is there. Never
  // destroyed, as the engine: a worker may still fail an op during exit.
  static const ErrorRef* const e = new ErrorRef(std::make_shared<const OpFailure>(
      "an op failed, and there was no memory left to say which or why (out of memory)"));
  return *e;
}

void EngineImpl::finish(OprBlock* op, bool recycle) {
  // Order matters for what waiters observe: the variables grant their next ops first (collected,
  // not yet run; an orphaned variable left idle is freed, a pending deletion runs), then the op
  // counts as finished, and only then do the granted ops run (a queued wait among them returns).
  // So when waitall or a queued wait returns, stats already include this op and its memory is
  // back. A wait_to_read that watches the completion count (no wait queued) returns as soon as
  // its variable's access is counted: the counters here may come a moment later (engine.h).
  ReadyList ready;
  for (int i = 0; i < op->nreads + op->nwrites; ++i) complete_access(op->acc[i].var, ready);
  const std::size_t bytes = op->bytes;
  if (bytes) finished_bytes_.fetch_add(bytes, std::memory_order_seq_cst);  // see release_inflight
  finished_all_.fetch_add(1, std::memory_order_seq_cst);
  notify_done_waiters();
  dispatch_all(ready);
  // Recycled last: the counter's locked add and the granted ops would otherwise first wait for
  // the recycling's stores to the record, whose lines the pushing thread wrote
  // (bench/notes/per-op.md, "Recycling an op record last").
  if (recycle) free_op(op);
}

// ---------------------------------------------------------------------------------------------
// Waits

void EngineImpl::run_wait(OprBlock* op) {
  VarBlock* v = op->acc[0].var;
  WaitSignal* s = op->signal;
  ErrorRef err;
  {
    std::lock_guard<SpinLock> lk(v->lock);
    err = take_error(v);
  }
  ReadyList ready;
  complete_access(v, ready);
  notify_done_waiters();  // a deletion it released may unblock a bounded push
  dispatch_all(ready);
  s->set(std::move(err));  // the waiter may return now, and its stack, holding s, go away
  // Recycled after the signal, not before: the signal's exchange would first wait for the
  // recycling's stores to the record, whose lines the waiting thread wrote when it pushed it.
  free_op(op);
}

void WaitSignal::set(ErrorRef err) {
  if (err) error = std::move(err);
  if (state.exchange(kReady, std::memory_order_acq_rel) != kSleeping) return;
  {
    std::lock_guard<std::mutex> lk(mu);
    cv.notify_one();
  }
  released.store(true, std::memory_order_release);
}

ErrorRef WaitSignal::wait(std::chrono::microseconds spin) {
  auto ready = [this] { return state.load(std::memory_order_acquire) == kReady; };
  if (spin_until(ready, spin)) return error;
  std::unique_lock<std::mutex> lk(mu);
  int expected = kWaiting;
  if (!state.compare_exchange_strong(expected, kSleeping, std::memory_order_acq_rel)) {
    return error;  // set between the spin and here, before it could see kSleeping: it is done
  }
  cv.wait(lk, ready);
  lk.unlock();
  // The signaller notified under mu and now sets released: a few instructions, unless it lost
  // its core in between.
  while (!released.load(std::memory_order_acquire)) std::this_thread::yield();
  return error;
}

void EngineImpl::wait_to_read(const Var& var) {
  VarBlock* v = peek(var);
  check_var(v, "wait_to_read", "the");
  // The naive engine could wait here (what it ran is done, but for the op inside which it would
  // wait): it refuses too, so that a program behaves the same with either engine kind.
  refuse_in_chunk("wait_to_read");
  if (inside_op()) {
    throw Error("wait_to_read: called from inside an op; it would deadlock the worker");
  }
  if (kind_ == EngineKind::kNaive) wait_naive_queue();  // its pushes may be queued (run_naive)
  // Also when nothing is pending: a thread that reads results makes its next push urgent.
  t_waited = true;
  ErrorRef err;
  WaitSignal sig;
  bool hurried = false;
  auto spin = kWaitSpin;
  {
    std::unique_lock<SpinLock> lk(v->lock);
    if (v->head == nullptr && write_running_now(v)) {
      // Watching: the variable's last write runs (or is granted) and nothing is queued behind
      // it, as in a loop that pushes and reads each result. Then this thread only watches the
      // count of completed accesses on the variable's second line, which the worker raises first
      // thing in finish(): no wait op to queue on the variable, grant and signal (see VarBlock).
      // On a Xeon of 2 vCPUs the wait round trip went from 7.4 to about 4 times the spin floor
      // (bench/notes/per-op.md, "The wait round trip on the Xeon"). Past the spin budget, the path
      // below queues a wait and parks at once.
      const std::uint64_t mark = v->write_mark;
      lk.unlock();  // hurry_workers may block (see below)
      if (!t_pushed_urgent) hurry_workers();
      hurried = true;
      auto written = [&] { return (v->done.load(std::memory_order_acquire) >> 1) >= mark; };
      if (!spin_until(written, kWaitSpin)) spin = std::chrono::microseconds(0);
      lk.lock();
    }
    if (v->head == nullptr && !write_running_now(v)) {
      // Fast path: no write pending, nothing to wait for.
      err = take_error(v);
    } else {
      OprBlock* op = new_op(1);
      op->kind = OpKind::kWait;
      op->name = "wait_to_read";
      op->signal = &sig;
      op->nreads = 1;
      op->acc[0] = Access{op, v, nullptr, false};
      op->wait.store(1, std::memory_order_relaxed);
      // A read is queued whenever a write runs or waits (see the invariant on VarBlock).
      if (v->tail) v->tail->next = &op->acc[0];
      else v->head = &op->acc[0];
      v->tail = &op->acc[0];
      // The running write's completion grants it (or this does, if the write ended just now).
      ReadyList ready;
      Settled settled;
      settle(v, ready, settled);
      lk.unlock();
      // After the unlock: hurry_workers may take pools_mu_, and a spin lock is never held across
      // a call that can block (sync.h).
      if (!t_pushed_urgent && !hurried) hurry_workers();
      after_settle(v, settled);  // nothing, unless another thread deletes v right now
      dispatch_all(ready);
      err = sig.wait(spin);
    }
  }
  if (err) throw Error(err->message);
}

void EngineImpl::waitall() {
  refuse_in_chunk("waitall");
  if (inside_op()) {
    throw Error("waitall: called from inside an op; it would deadlock the worker");
  }
  // Done when, at one instant, everything pushed has finished: that includes ops that running
  // ops push (and, if other threads keep pushing, their work too). finished_all_ is read first;
  // pushed_all_ only grows, so f >= p means all pushed up to that read had finished.
  auto done = [&] {
    const std::uint64_t f = finished_all_.load(std::memory_order_seq_cst);
    return f >= pushed_all_.load(std::memory_order_seq_cst);
  };
  t_waited = true;
  if (!t_pushed_urgent && !done()) hurry_workers();
  if (!spin_until(done, kWaitSpin)) {
    std::unique_lock<std::mutex> lk(done_mu_);
    waitall_sleepers_.fetch_add(1, std::memory_order_seq_cst);
    done_cv_.wait(lk, done);
    waitall_sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
  retire_all_deferred();  // their ops are done: memory is back when waitall returns
  ErrorRef first;
  std::size_t count = 0;
  {
    std::lock_guard<std::mutex> lk(err_mu_);
    count = errors_unreported_;
    for (const ErrorRef& e : errors_) {
      if (!e->rethrown) {
        first = e;
        break;
      }
    }
    // Every listed one was rethrown, and some after them were not listed: the latest, if no wait
    // rethrew it, else only the count.
    if (!first && count && latest_error_ && !latest_error_->rethrown) first = latest_error_;
    if (!first && errors_out_of_memory_) first = out_of_memory_error();
    errors_.clear();
    errors_overflowed_ = false;
    errors_unreported_ = 0;
    errors_out_of_memory_ = 0;
    ++errors_epoch_;
    latest_error_.reset();
  }
  if (count == 0) return;
  if (!first) {
    throw Error(std::to_string(count) + " failed op" + (count > 1 ? "s" : "") +
                " since the last waitall that no wait has reported (the engine keeps the "
                "messages of the first " + std::to_string(kListedErrors) +
                " and the latest, which waits reported)");
  }
  if (count == 1) throw Error(first->message);
  throw Error(first->message + " (and " + std::to_string(count - 1) + " more failed op" +
              (count > 2 ? "s" : "") + " since the last waitall)");
}

// ---------------------------------------------------------------------------------------------
// Deletion

void EngineImpl::delete_var(Var var, OpFunction on_delete, std::size_t bytes, bool may_defer) {
  VarBlock* v = peek(var);
  check_var(v, "delete_var", "the");
  if (v->deleted.exchange(true, std::memory_order_acq_rel)) {
    throw Error("delete_var: variable " + std::to_string(v->id) + " was already deleted");
  }
  delete_marked(std::move(var), std::move(on_delete), bytes, may_defer);
}

bool EngineImpl::delete_array_var(Var var, OpFunction on_delete, std::size_t bytes) noexcept {
  VarBlock* v = peek(var);
  // invariant: an array's variable is this engine's (Chunk makes it with engine().new_var()).
  if (v == nullptr || v->deleted.exchange(true, std::memory_order_acq_rel)) return false;
  delete_marked(std::move(var), std::move(on_delete), bytes, /*may_defer=*/true);
  return true;
}

void EngineImpl::delete_marked(Var var, OpFunction on_delete, std::size_t bytes,
                               bool may_defer) noexcept {
  if (kind_ == EngineKind::kNaive && naive_delete_later(var, on_delete)) return;
  VarBlock* v = peek(var);
  // Deletion is not an op: on_delete waits on the variable itself and runs when its last queued
  // access completes, so it takes no queue slot and no hand-off. No new access can arrive:
  // pushing a deleted variable throws.
  const bool small = may_defer && bytes <= kDeferMaxBytes && kind_ == EngineKind::kThreaded;
  {
    std::unique_lock<SpinLock> lk(v->lock);
    // A small variable is deferred unless the first line alone says it is idle: asking the
    // second (idle_now) would wait for a line a worker may have just written.
    if (small ? v->head == nullptr && v->issued == v->done_seen : idle_now(v)) {
      lk.unlock();
      run_deleter(on_delete);
      return;  // var's handle goes here, and with it the variable
    }
  }
  if (small) {
    defer_delete(std::move(var), std::move(on_delete), bytes);
  } else {
    delete_when_idle(std::move(var), std::move(on_delete), bytes);
  }
}

// The deletion waits on the variable: the access that completes last runs it (settle).
void EngineImpl::delete_when_idle(Var var, OpFunction on_delete, std::size_t bytes) noexcept {
  VarBlock* v = peek(var);
  Settled settled;
  ReadyList ready;  // stays empty: nothing is queued behind a deletion
  {
    std::lock_guard<SpinLock> lk(v->lock);
    v->on_delete = std::move(on_delete);
    v->delete_pending = true;
    settle(v, ready, settled);  // takes on_delete back if the accesses ended just now
    // Storage kept alive by queued work counts toward the byte bound until it is freed: from now
    // on, or, while the op that made it still counts it (its PushOptions::bytes), from when that
    // op's write ends (settle), so that it is never counted twice.
    if (v->delete_pending && bytes && max_bytes_.load(std::memory_order_relaxed)) {
      if (storage_counted_by_writer(v)) {
        v->delete_bytes_later = bytes;
      } else {
        v->delete_bytes = bytes;
        pushed_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      }
    }
  }
  after_settle(v, settled);
  var = Var();  // our handle: the variable itself lives until its accesses are done
}

// A small variable whose ops may still run (E5's y = x + 1 drops the previous y one step after
// pushing the op that writes it) waits in a FIFO of kDeferred on the deleting side, with its
// handle, instead of on the variable; when kDeferred more have come, or at waitall, the oldest is
// deleted here if its ops are done, which by then they nearly always are. So:
//   - the worker completes its access without the lock: nothing waits on the variable;
//   - the free and the variable's record stay on the thread that made them;
//   - whether it is idle is asked of the worker's line kDeferred deletions later, with the line
//     fetched in the background one deletion before (the prefetch below), not waited for.
// Waiting on the variable instead cost two line transfers more per op (the pusher's kAttention on
// the worker's line, the worker's lock on the pusher's), and asking at once one exposed transfer
// (bench/notes/per-op.md, "E5 on the Zen 4").
void EngineImpl::defer_delete(Var var, OpFunction on_delete, std::size_t bytes) noexcept {
  DeferredDelete oldest;
  {
    std::lock_guard<SpinLock> lk(deferred_lock_);
    if (deferred_count_ == kDeferred) {
      oldest = std::move(deferred_[deferred_first_]);
      deferred_first_ = (deferred_first_ + 1) % kDeferred;
      --deferred_count_;
    }
    deferred_[(deferred_first_ + deferred_count_) % kDeferred] =
        DeferredDelete{std::move(var), std::move(on_delete), bytes};
    ++deferred_count_;
    // The next to go: its count of completed accesses, which a worker wrote, is fetched now, in
    // the background, rather than waited for then.
    if (deferred_count_ == kDeferred) {
      __builtin_prefetch(&peek(deferred_[deferred_first_].var)->done);
    }
  }
  if (oldest.var) retire_deferred(oldest);
}

void EngineImpl::retire_deferred(DeferredDelete& d) noexcept {
  VarBlock* v = peek(d.var);
  bool now;
  {
    std::lock_guard<SpinLock> lk(v->lock);
    now = idle_now(v);
  }
  if (now) {
    run_deleter(d.on_delete);
    d.var = Var();
  } else {
    delete_when_idle(std::move(d.var), std::move(d.on_delete), d.bytes);
  }
}

void EngineImpl::retire_all_deferred() noexcept {
  DeferredDelete batch[kDeferred];
  int n = 0;
  {
    std::lock_guard<SpinLock> lk(deferred_lock_);
    for (; deferred_count_ > 0; --deferred_count_) {
      batch[n++] = std::move(deferred_[deferred_first_]);
      deferred_first_ = (deferred_first_ + 1) % kDeferred;
    }
  }
  for (int i = 0; i < n; ++i) retire_deferred(batch[i]);
}

void EngineImpl::run_deleter(OpFunction& on_delete) noexcept {
  if (!on_delete) return;
  try {
    on_delete();
  } catch (...) {
    // on_delete must not throw (documented); never let it escape into a worker.
  }
  on_delete = nullptr;
}

// ---------------------------------------------------------------------------------------------
// The naive engine: every op runs inside its push, on the pushing thread, one at a time, in push
// order. Two kinds of push wait their turn instead, so that the order stays push order:
// - pushed from inside an op: it runs after that op (and the ops pushed before it), still inside
//   the push that ran the outer op. Run at once, it ran before the op that pushed it, which a
//   write of the same variable after it then overwrote (a recursive mutex let it in).
// - pushed from another thread while an asynchronous op waits for its Completion: queued, and
//   run by the waiting thread once the Completion came. The thread that completes it may be the
//   one that pushes: it blocked on the mutex the waiting thread held, for ever. A wait from such
//   a thread (wait_to_read) first waits for the queue to be run.
// Other threads' pushes wait while one thread runs ops (naive_busy_). A deletion while ops wait
// their turn joins them (naive_delete_later): it ran at once, and freed storage a queued op used.

void EngineImpl::run_naive(OprBlock* op) {
  pushed_all_.fetch_add(1, std::memory_order_relaxed);
  if (profiling()) {
    op->profiled = true;
    op->prof_session = prof_session_.load(std::memory_order_relaxed);
    op->push_us = now_us();
  }
  if (t_naive_op_depth > 0) {  // from inside an op that this thread runs
    t_naive_deferred.push_back(NaiveItem{op, Var(), nullptr});
    return;
  }
  {
    std::unique_lock<std::mutex> lk(naive_mu_);
    naive_cv_.wait(lk, [&] { return !naive_busy_ || naive_async_waiting_; });
    if (naive_busy_) {  // another thread waits for an asynchronous op's Completion
      naive_after_async_.push_back(NaiveItem{op, Var(), nullptr});
      ++naive_queued_;
      return;
    }
    naive_busy_ = true;
  }
  struct Idle {
    EngineImpl* e;
    ~Idle() {
      {
        std::lock_guard<std::mutex> lk(e->naive_mu_);
        e->naive_busy_ = false;
      }
      e->naive_cv_.notify_all();
    }
  } idle{this};
  run_naive_one(op);
  while (!t_naive_deferred.empty()) {
    NaiveItem next = std::move(t_naive_deferred.front());
    t_naive_deferred.pop_front();
    run_naive_item(next);
  }
}

void EngineImpl::run_naive_item(NaiveItem& item) {
  if (item.op) {
    run_naive_one(item.op);
  } else {
    run_deleter(item.on_delete);
    item.var = Var();
  }
}

// Runs one op of the naive engine on this thread (naive_busy_ is ours).
void EngineImpl::run_naive_one(OprBlock* op) {
  ++t_naive_op_depth;
  struct Leave {
    ~Leave() { --t_naive_op_depth; }
  } leave;
  {
    std::lock_guard<std::mutex> elk(err_mu_);
    for (int i = 0; i < op->nreads + op->nwrites && !op->error; ++i) op->error = op->acc[i].var->error;
  }
  if (op->async) {
    const bool skipped = op->error != nullptr;
    run_async(op, -1, 1);  // one more reference, ours, so that the record outlives the wait
    if (!op->device.is_cpu()) flush_device(op->device);  // nothing is held in push order
    if (!skipped) {
      // Debug mode runs everything in push order: wait here until the op has completed, letting
      // other threads' pushes queue meanwhile (the one that completes it may push first).
      {
        std::lock_guard<std::mutex> lk(naive_mu_);
        naive_async_waiting_ = true;
      }
      naive_cv_.notify_all();
      while (op->async_pending.load(std::memory_order_acquire) != 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      {
        std::lock_guard<std::mutex> lk(naive_mu_);
        naive_async_waiting_ = false;
      }
      finished_all_.fetch_add(1, std::memory_order_relaxed);
      release_async(op);
      // What other threads queued meanwhile, in order; deletions may still join (until none is
      // left to run, naive_delete_later queues them behind).
      for (;;) {
        std::deque<NaiveItem> later;
        {
          std::lock_guard<std::mutex> lk(naive_mu_);
          if (naive_after_async_.empty()) break;
          later.swap(naive_after_async_);
        }
        for (NaiveItem& item : later) {
          run_naive_item(item);
          std::lock_guard<std::mutex> lk(naive_mu_);
          --naive_queued_;
        }
      }
      naive_cv_.notify_all();  // wait_naive_queue: what was queued has run
      return;
    }
  } else {
    execute(op, -1);
  }
  free_op(op);
  finished_all_.fetch_add(1, std::memory_order_relaxed);
}

// A deletion in the naive engine while ops wait their turn (run_naive) goes behind them: on this
// thread's list when it runs ops and has some waiting, else behind other threads' queued ones.
// True if it was queued (var and on_delete taken).
bool EngineImpl::naive_delete_later(Var& var, OpFunction& on_delete) {
  if (t_naive_op_depth > 0 && !t_naive_deferred.empty()) {
    t_naive_deferred.push_back(NaiveItem{nullptr, std::move(var), std::move(on_delete)});
    return true;
  }
  std::lock_guard<std::mutex> lk(naive_mu_);
  if (naive_queued_ == 0) return false;
  naive_after_async_.push_back(NaiveItem{nullptr, std::move(var), std::move(on_delete)});
  ++naive_queued_;
  return true;
}

// A wait in the naive engine: ops that this thread pushed while an asynchronous op waited for
// its Completion are queued (run_naive); what they write is ready once the queue has run.
void EngineImpl::wait_naive_queue() {
  std::unique_lock<std::mutex> lk(naive_mu_);
  naive_cv_.wait(lk, [&] { return naive_queued_ == 0; });
}

// ---------------------------------------------------------------------------------------------
// Errors

ErrorRef EngineImpl::wrap_error(const OprBlock* op, std::exception_ptr e) noexcept {
  try {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {  // a kernel's own buffer (a GEMM's packing): say so
      return op_error(op, "out of memory (std::bad_alloc)");
    } catch (const std::exception& ex) {
      // A what() that returns null (a broken exception class) made the std::string throw, which
      // was then reported as out of memory.
      const char* what = ex.what();
      return op_error(op, what ? what : "exception with a null what()");
    } catch (const char* text) {  // throw "message": its text, not "unknown exception"
      return op_error(op, std::string("exception of type const char*: ") +
                              (text ? text : "(null)"));
    } catch (const std::string& text) {
      return op_error(op, "exception of type std::string: " + text);
    } catch (...) {
      return op_error(op, "unknown exception (not derived from std::exception)");
    }
  } catch (...) {  // the std::string of `what` could not be made
    return out_of_memory_error();
  }
}

void EngineImpl::set_error(VarBlock* v, const ErrorRef& e) {
  std::lock_guard<std::mutex> lk(err_mu_);
  v->error = e;
  v->has_error.store(true, std::memory_order_release);
}

ErrorRef EngineImpl::take_error(VarBlock* v) {
  if (!v->has_error.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard<std::mutex> lk(err_mu_);
  ErrorRef e = std::move(v->error);
  v->error = nullptr;
  v->has_error.store(false, std::memory_order_release);
  // Rethrown once: waitall will not report it again. The shared out-of-memory failure stands for
  // many, so it is counted off instead of marked.
  if (e && e == out_of_memory_error()) {
    if (errors_out_of_memory_ > 0) {
      --errors_out_of_memory_;
      --errors_unreported_;
    }
  } else if (e && !e->rethrown) {
    e->rethrown = true;
    if (e->epoch == errors_epoch_ && errors_unreported_ > 0) --errors_unreported_;
    while (!errors_.empty() && errors_.front()->rethrown) errors_.pop_front();
  }
  return e;
}

void EngineImpl::record_error(ErrorRef e) noexcept {
  std::lock_guard<std::mutex> lk(err_mu_);
  ++errors_unreported_;
  if (e == out_of_memory_error()) {
    ++errors_out_of_memory_;
    return;
  }
  e->epoch = errors_epoch_;
  latest_error_ = e;
  if (errors_overflowed_ || errors_.size() >= kListedErrors) {
    errors_overflowed_ = true;
    return;
  }
  try {
    errors_.push_back(std::move(e));
  } catch (...) {
    errors_overflowed_ = true;  // out of memory: still counted, waitall reports it
  }
}

// ---------------------------------------------------------------------------------------------
// Bounds and stats

void EngineImpl::set_max_inflight(std::size_t ops, std::size_t bytes, BoundSource source) {
  max_ops_.store(ops, std::memory_order_relaxed);
  max_bytes_.store(bytes, std::memory_order_relaxed);
  bytes_source_.store(bytes ? source : BoundSource::kNone, std::memory_order_relaxed);
  // Wake pushers blocked under the old bound.
  std::lock_guard<std::mutex> lk(done_mu_);
  done_cv_.notify_all();
}

void EngineImpl::reset_max_inflight() { set_max_inflight(start_ops_, start_bytes_, start_source_); }

EngineStats EngineImpl::stats() const {
  EngineStats s;
  s.max_inflight_ops = max_ops_.load(std::memory_order_relaxed);
  s.max_inflight_bytes = max_bytes_.load(std::memory_order_relaxed);
  s.max_inflight_bytes_source = bytes_source_.load(std::memory_order_relaxed);
  s.push_waits = push_waits_.load(std::memory_order_relaxed);
  // finished first: pushed only grows, so pending never goes negative.
  const std::uint64_t fin_all = finished_all_.load(), pushed_all = pushed_all_.load();
  s.finished = fin_all;
  s.pushed = pushed_all;
  s.pending = pushed_all > fin_all ? pushed_all - fin_all : 0;
  s.inflight_bytes = inflight_bytes();
  const std::uint64_t destroyed = g_vars_destroyed.load(std::memory_order_acquire);
  s.live_vars = g_next_var_id.load(std::memory_order_acquire) - 1 - destroyed;
  std::vector<const DeviceMem*> mems;
  for (const DeviceMem& m : mem_) mems.push_back(&m);
  {
    std::lock_guard<std::mutex> lock(mem_more_mu_);
    for (const auto& kv : mem_more_) mems.push_back(kv.second.get());
    mems.push_back(&mem_overflow_);  // counted only if used
  }
  for (const DeviceMem* m : mems) {
    if (!m->used.load()) continue;
    const std::int64_t now = m->in_use(), peak = std::max(now, m->peak.load());
    DeviceStats d;
    d.device = m->device;
    d.bytes_in_use = static_cast<std::uint64_t>(std::max<std::int64_t>(0, now));
    d.bytes_peak = static_cast<std::uint64_t>(peak);
    s.bytes_in_use += d.bytes_in_use;
    s.bytes_peak += d.bytes_peak;
    s.devices.push_back(d);
  }
  return s;
}

void EngineImpl::reset_peak_bytes() {
  for (auto& m : mem_) m.peak.store(m.in_use());
  std::lock_guard<std::mutex> lock(mem_more_mu_);
  for (auto& kv : mem_more_) kv.second->peak.store(kv.second->in_use());
  mem_overflow_.peak.store(mem_overflow_.in_use());
}

EngineImpl::DeviceMem& EngineImpl::mem_more(Device d) noexcept {
  std::lock_guard<std::mutex> lock(mem_more_mu_);
  try {
    std::unique_ptr<DeviceMem>& slot = mem_more_[{static_cast<int>(d.kind), d.id}];
    if (!slot) {
      slot = std::make_unique<DeviceMem>();
      slot->device = d;
      slot->used = true;
    }
    return *slot;
  } catch (...) {
    mem_overflow_.device = d;
    mem_overflow_.used = true;
    return mem_overflow_;
  }
}

void EngineImpl::note_alloc(Device device, std::size_t bytes) noexcept {
  DeviceMem& m = mem_for(device);
  // The freed count is read after the add: a free that races with it then makes `now` smaller
  // than the bytes in use at the add, never larger, so the peak is one the program reached. (Read
  // before, a free and another thread's allocation in between counted the freed bytes twice:
  // 100 in use, one frees 100 and another allocates 100, then this 100 made a peak of 300.)
  const std::uint64_t allocated = m.allocated.fetch_add(bytes, std::memory_order_acq_rel) + bytes;
  const std::int64_t now =
      static_cast<std::int64_t>(allocated - m.freed.load(std::memory_order_acquire));
  std::int64_t peak = m.peak.load(std::memory_order_relaxed);
  while (now > peak && !m.peak.compare_exchange_weak(peak, now)) {
  }
}

void EngineImpl::note_free(Device device, std::size_t bytes) noexcept {
  mem_for(device).freed.fetch_add(bytes, std::memory_order_release);
}

double EngineImpl::now_us() const {
  return static_cast<double>(profiler_clock_ns() - t0_ns_.load(std::memory_order_relaxed)) * 1e-3;
}

}  // namespace detail
}  // namespace asyncnd
