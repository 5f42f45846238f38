// The threaded and naive engines' internals. In short: a variable is a small queue (readers
// running, a writer running, a FIFO of waiting accesses); an op counts the grants it still waits
// for (reads + writes + 1, the 1 held by push) and whoever brings the count to zero hands it to its
// device's ready queue; a finished op grants the next accesses of each variable it used. Waiting
// (wait_to_read) and deletion are ops too, so they run after every earlier use, and a failure
// travels as an error on the variables an op writes. Each structure below says the rest.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "asyncnd/engine.h"
#include "engine/sync.h"

namespace asyncnd {
namespace detail {

// Replaces o's bounds that are kDefaultBound with the default ones (asyncnd/engine.h), for the
// memory `limit` (null: program_memory_limit()). Throws asyncnd::Error for a bad
// ASYNCND_MAX_INFLIGHT_* value.
void resolve_default_bounds(EngineOptions& o, const MemoryLimit* limit);

// True in a child process made by fork() after the process-wide engine started. The child has
// none of the engine's threads, and a lock that a parent thread held at the fork stays held in
// it for ever, so there a variable or an array that is dropped (an array in static storage, at
// the child's exit) is left as it is, its storage with it, instead of waiting on such a lock.
extern std::atomic<bool> g_forked_child;

// What an asynchronous op fails with when its Completion is dropped unused (~Completion, and
// run_async when fn caught the exception that dropped it).
inline constexpr const char* kCompletionDropped = "completion dropped without done() or fail()";

// How many parallel_for chunks this thread is running (nested loops count each). A wait there is
// refused, whichever thread runs the chunk: the caller's own thread, an engine worker or a chunk
// helper (on those it would deadlock), so that it fails alike every time.
inline thread_local int t_chunk_depth = 0;
struct ChunkScope {
  ChunkScope() noexcept { ++t_chunk_depth; }
  ~ChunkScope() { --t_chunk_depth; }
  ChunkScope(const ChunkScope&) = delete;
  ChunkScope& operator=(const ChunkScope&) = delete;
};
inline bool forked_child() noexcept { return g_forked_child.load(std::memory_order_relaxed); }

struct OprBlock;
// What the naive engine runs later, in order (run_naive): an op, or a variable's deletion
// (op == nullptr), which must not free storage that a queued op before it uses.
struct NaiveItem {
  OprBlock* op = nullptr;
  Var var;
  OpFunction on_delete;
};

class EngineImpl;

// An op's failure: the message of the asyncnd::Error that waits rethrow. Stored as a string, not an
// exception_ptr: each waiting thread throws an exception object of its own, so no exception is
// shared (and reference counted inside libstdc++, where ThreadSanitizer cannot see it) across
// threads. `rethrown` (guarded by EngineImpl::err_mu_) is set when a wait first rethrows it, so
// that waitall no longer counts it: the one failure may sit on many variables (an op's outputs,
// and the outputs of the ops it poisoned). `epoch` says since which waitall it counts: a failure
// that a waitall already reported stays on its variables, and rethrowing it later must not
// count off a newer one.
struct OpFailure {
  explicit OpFailure(std::string m) : message(std::move(m)) {}
  std::string message;
  mutable bool rethrown = false;
  mutable std::uint64_t epoch = 0;
};
using ErrorRef = std::shared_ptr<const OpFailure>;

// One op's access to one variable; lives inside the op, linked into the variable's FIFO while it
// waits to be granted.
struct Access {
  OprBlock* op = nullptr;
  VarBlock* var = nullptr;
  Access* next = nullptr;
  bool write = false;
};

// A variable's state sits on two cache lines. The first, under `lock`, is written by the threads
// that push (grants, the queue, deletion); the second holds the count of completed accesses,
// which the worker that completes one raises without the lock and without touching the first
// line. So in a loop like E5's (y = x + 1), x (only read) and each new y (written once, then
// dropped) stay in the pushing thread's cache: before, the pusher's grant and the worker's
// completion both wrote the one line, which crossed between their cores twice per variable per
// op (bench/notes/per-op.md, "E5 on the Zen 4").
//
// Accesses running = issued - done. A write is granted only when none runs, so while one runs it
// is the only access running, and it is running exactly while done < write_mark (the value of
// issued just after its grant). A pusher that needs the exact count reads the second line;
// done_seen, a lower bound of done kept on the first line, spares that when it already says
// enough. When something waits for the running accesses to end (a queued access, a pending
// deletion, an orphaned variable), `attention` is set in the second line's word: from then on
// accesses complete under the lock, and the one that completes the last resolves what waited
// (EngineImpl::settle). Outside the lock, a non-empty queue always has `attention` set and an
// access still running: settle leaves the queue non-empty only then, so an access queued behind
// another needs no settle (enqueue_accesses). The counts only grow, also across a record's reuse
// (recycler.h). A thread in wait_to_read whose variable's last write runs watches the count too,
// without the lock.
struct alignas(64) VarBlock {
  std::atomic<int> refs{1};  // Var handles (ops hold none: see orphaned)
  EngineImpl* owner = nullptr;
  std::uint64_t id = 0;
  std::atomic<bool> deleted{false};
  std::atomic<bool> has_error{false};  // fast check; the error itself is guarded by err_mu_

  SpinLock lock;
  // Guarded by lock.
  // invariant: an ungranted read is queued only behind a write (running or queued).
  std::uint64_t issued = 0;      // accesses granted
  std::uint64_t write_mark = 0;  // issued just after the last write's grant
  std::uint64_t done_seen = 0;   // a lower bound of the completed accesses (the second line)
  bool attention = false;        // mirrors kAttention in `done`
  Access* head = nullptr;        // FIFO of ungranted accesses
  Access* tail = nullptr;
  // Set when the last handle went while accesses were still queued: the op whose completion
  // leaves the variable idle frees it.
  bool orphaned = false;
  // Set by delete_var while accesses are queued: on_delete runs when the last one completes.
  bool delete_pending = false;
  OpFunction on_delete;
  std::size_t delete_bytes = 0;  // counted in flight (pushed_bytes_) until on_delete has run
  // The storage is counted in flight by the op that writes it with PushOptions::bytes (the op
  // that made it) until `done` reaches this mark (its grant's write_mark), so a deletion does not
  // count it again before then: it waits in delete_bytes_later (EngineImpl::settle).
  std::uint64_t counted_until = 0;
  std::size_t delete_bytes_later = 0;

  ErrorRef error;  // guarded by EngineImpl::err_mu_
  // owner's serial (EngineImpl::serial_): an engine made at a destroyed one's address is not its
  // owner, though the pointers compare equal.
  std::uint64_t owner_serial = 0;

  // The second line: completed accesses << 1 | kAttention.
  static constexpr std::uint64_t kAttention = 1, kOneDone = 2;
  alignas(64) std::atomic<std::uint64_t> done{0};
};

enum class OpKind : std::uint8_t { kNormal, kWait };

// Set once by a wait op (on a worker), waited on by the thread in wait_to_read; lives on the
// waiter's stack. The waiter spins on `state`, alone on its cache line so that nothing else the
// signaller writes pulls the line away from the spinner, and parks on cv only after saying so
// (kSleeping, under mu); only then does the signaller take mu and notify. The signaller's last
// touch is the exchange to kReady, or, when the waiter slept, `released`: the waiter returns only
// after it, so its stack never goes away under the signaller. (Before this, the waiter took mu
// after every wait and met the signaller still holding it: a futex sleep and wake-up on a wait
// that had already finished; bench/notes/per-op.md, "The wait round trip on the Xeon".)
struct WaitSignal {
  enum : int { kWaiting, kSleeping, kReady };
  alignas(64) std::atomic<int> state{kWaiting};
  alignas(64) std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> released{false};
  ErrorRef error;  // written before state becomes kReady

  void set(ErrorRef err);                         // the signaller, once
  ErrorRef wait(std::chrono::microseconds spin);  // the waiter: spins up to `spin`, then parks
};

struct OprBlock {
  std::atomic<int> wait{0};  // grants still missing + 1 held by push
  OpKind kind = OpKind::kNormal;
  int priority = 0;
  int nreads = 0, nwrites = 0;
  Device device{};
  const char* name = "op";
  std::size_t bytes = 0;
  OpFunction fn;                          // kNormal: the work
  WaitSignal* signal = nullptr;           // kWait
  ErrorRef error;                         // inherited from a poisoned input; set at grant time
  double push_us = 0;                     // profiling only
  bool profiled = false;                  // pushed while the profiler ran
  std::uint32_t prof_session = 0;         // which recording (start_profiling) it was pushed in
  // Asynchronous ops (push_async) finish when both fn has returned and the Completion was used
  // (async_pending); the record lives until both the call and the Completion object are gone
  // (async_refs).
  bool async = false;
  std::atomic<bool> async_done{false};    // the first done()/fail()/drop counts
  // The Completion was destroyed unused while an exception passed through fn (~Completion): if fn
  // then returns normally (it caught the exception itself), the op fails as dropped.
  std::atomic<bool> async_dropped_unwinding{false};
  std::atomic<int> async_pending{0};
  std::atomic<int> async_refs{0};
  ErrorRef async_thrown;                  // what fn threw; written before the worker arrives
  ErrorRef async_failed;                  // fail()'s error; written before the completion arrives
  EngineImpl* engine = nullptr;
  int worker = -1;
  // At the head of a run's rest (DevicePool::runs_): the list's length, for a worker that takes
  // the rest over. Written by the run's worker before it publishes the list. (Here, in what was
  // padding before start_us: a pointer to the list's last op as well made the record 16 bytes
  // longer, so a taken-over run's last op is found by walking, when needed.)
  int run_left = 0;
  double start_us = 0;
  OprBlock* next = nullptr;               // ready-queue link
  std::uint64_t seq = 0;                  // push order, for the priority queue's ties
  Access* acc = nullptr;                  // nreads reads, then nwrites writes
  Access inline_acc[4];
  std::unique_ptr<Access[]> heap_acc;
};

// Ops that became ready while a variable lock was held; dispatched after it is released.
class ReadyList {
 public:
  void add(OprBlock* op) {
    if (n_ < kInline) small_[n_++] = op;
    else more_.push_back(op);
  }
  template <class F>
  void for_each(F&& f) {
    for (int i = 0; i < n_; ++i) f(small_[i]);
    for (OprBlock* op : more_) f(op);
  }
  bool empty() const { return n_ == 0; }

 private:
  static constexpr int kInline = 8;
  OprBlock* small_[kInline];
  int n_ = 0;
  std::vector<OprBlock*> more_;
};

// A parallel_for in progress: chunks handed out by an atomic counter to the caller and to idle
// workers. Reference counted because a helper may arrive after the caller has left.
struct ParallelJob {
  std::atomic<int> refs{1};
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> done{0};
  std::int64_t n = 0, chunk = 0, nchunks = 0;
  const std::function<void(std::int64_t, std::int64_t)>* fn = nullptr;
  SpinLock error_lock;
  std::exception_ptr error;  // the first chunk's exception
  // The caller sleeps here (wasm only) while helpers finish their last chunks; whoever finishes
  // the last chunk wakes it when caller_sleeps is set.
  std::atomic<bool> caller_sleeps{false};
  std::mutex wait_mu;
  std::condition_variable wait_cv;
};

// Whether a CPU pool of `workers` with `pacing` takes runs (Pacing::kAuto resolved).
bool paced_pool(Pacing pacing, int workers);

// The workers of one device and their ready queue.
class DevicePool {
 public:
  // paced: its idle workers take runs (Pacing::kRuns; paced_pool), else ops one by one.
  // chunk_helpers: threads that run parallel_for chunks only, never ops (EngineOptions).
  DevicePool(EngineImpl* engine, Device device, int workers, bool paced, int chunk_helpers = 0);
  ~DevicePool();  // stops and joins the workers; the queue must be empty
  // Without `urgent`, a paced pool's idle worker finds op at its next look; with it (an op that a
  // completion made ready, unless on one of this pool's workers, which looks itself; a push from
  // a thread that waits after its pushes), and for a priority op, it looks now (hurry).
  void enqueue(OprBlock* op, bool urgent) noexcept;
  // A thread is about to wait for ops: the idle worker of a paced pool looks at the queue now.
  void hurry();
  int size() const { return workers_; }
  bool paced() const { return paced_; }
  Device device() const { return device_; }
  // Ops queued and not yet taken by a worker: a hint, without locks (worker_has_more_ops).
  int queued_hint() const { return queued_.load(std::memory_order_relaxed); }

  // work: Engine::parallel_for's (the chunk helpers join from kChunkHelperMinWork).
  void parallel_for(std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& fn, std::int64_t work);
  int chunk_helpers() const { return chunk_helpers_; }
  // parallel_for jobs with chunks not yet claimed (njobs_), for tests.
  int open_jobs() const { return njobs_.load(std::memory_order_seq_cst); }

 private:
  void worker_main(int index);
  void helper_main();  // a chunk helper: help_job, else park until a job is published
  void join_all() noexcept;  // stops and joins the threads (the destructor; a failed start)
  // The ops of a run not yet started: a list in push order (OprBlock::next), its last op (null
  // when not known: a run taken over from another worker; found by walking when needed), and how
  // many.
  struct RunList {
    OprBlock* head = nullptr;
    OprBlock* tail = nullptr;
    int n = 0;
  };
  // The next op; a paced pool may also take the FIFO's other ops, which it returns in rest.
  OprBlock* try_pop(RunList& rest);
  // Runs op, then the ops of rest one by one, through the worker's slot (runs_): until the run
  // is done, another worker takes the rest, or a priority op comes (priority_pushes_ no longer
  // `seen`). Asked to (RunSlot::split), it gives the later half of its rest back to the FIFO.
  void run_ops(OprBlock* op, RunList rest, int index, unsigned seen);
  // Puts a run's unstarted ops (n, ending in tail, or null: walked to) back at the FIFO's head.
  void give_back(OprBlock* head, OprBlock* tail, int n);
  // Gives the later half of rest (2 ops or more) back to the FIFO, for the spinner that asked.
  void split(RunList& rest);
  // An idle paced worker: true once has_work() (queued ops only once they sat a whole look, while
  // another worker is running: paced_), or once another worker's run has sat on the same op for a
  // whole look (stale: its slot's index in `victim`, else -1). Meanwhile it asks a run that moves
  // on, but slowly for its length, to split (RunSlot::split).
  bool spin_paced(int self, int& victim);
  // Takes the rest of worker w's run, if still there.
  OprBlock* take_run(int w, RunList& rest);
  void poke_worker() noexcept;  // changes hurry_
  bool has_work() const;     // a hint, without locks
  bool queue_empty();        // exact, under qlock_
  bool help_job();  // runs chunks of some active job; false if none
  void wake_one() noexcept;
  // wake_one when nobody spins, somebody sleeps, and work is left that nobody watches: queued
  // ops, the caller's own run (own_run), another worker's run.
  void wake_if_unwatched(bool own_run) noexcept;
  bool any_run() const;  // some worker's run has ops not started (runs_)
  bool other_running(int self) const;  // a worker but self runs ops it took (RunSlot::running)

  EngineImpl* engine_;
  Device device_;
  const int max_spinners_;  // the cores this process may use: the most that spin after a
                            // parallel_for (wasm)
  const int workers_;       // threads_.size() once all have started (workers read this meanwhile)
  const int chunk_helpers_;
  std::vector<std::thread> threads_;  // the workers, then the chunk helpers

  // What every push and every idle worker touch, on one cache line: the FIFO and its lock, the
  // counts a spinning worker watches, and the parking counts a push reads to decide whether to
  // wake one. A push then moves one line between the pusher's and the worker's cores, not three
  // (bench/notes/per-op.md, "E5 on the Zen 4").
  alignas(64) SpinLock qlock_;
  OprBlock* fifo_head_ = nullptr;  // priority-0 ops, FIFO
  OprBlock* fifo_tail_ = nullptr;
  int fifo_n_ = 0;                 // ops in the FIFO (queued_ counts the heap's too)
  std::atomic<int> queued_{0};
  // Pops so far (modified under qlock_ only): the spinner compares it between looks to tell a
  // queue that sat a whole look untaken (spin_paced).
  std::atomic<unsigned> pops_{0};
  // parallel_for jobs with chunks not yet claimed. Idle workers spin or wake for these only: a
  // job whose chunks are all claimed needs no helper, and a helper spinning on it would take the
  // core of the thread that runs its last chunk
  // (bench/notes/e1.md, "E1's first run, and the thread counts").
  std::atomic<int> njobs_{0};
  // Parking. At most one idle worker spins at a time (in wasm, beside those fresh from a
  // parallel_for: worker_pool.cpp, kAfterJobSpin); the rest sleep until woken.
  std::atomic<int> sleepers_{0};
  std::atomic<int> spinners_{0};
  // A sleeper was signalled (wake_one) and has not yet returned from its wait. While it is set,
  // wake_one signals no other: the woken worker, once it takes an op, wakes a helper itself if
  // more wait (worker_main). So a pusher pays a wake's system call at most once per wake-up's
  // latency, not once per op that finds nobody spinning (worker_pool.cpp, wake_one).
  std::atomic<bool> waking_{false};
  std::atomic<bool> stop_{false};

  // Pacing. In a loop of small pushes (E5), a worker that watches the queue's line takes each op
  // as it comes: the line, and the pusher's time, then cross between cores once per op. A paced
  // worker, once idle, looks at the queue only every kPollPace, so that the pusher keeps the line
  // in its cache meanwhile, and then takes all that came in one go: a run. It looks at once when
  // hurry_ changes: a thread is about to wait (hurry), a thread that waited since its last push
  // pushes again, a completion on a thread other than the pool's workers (a GPU's) made an op
  // ready, or a priority op came (which also ends the runs early: the rest goes back to the FIFO).
  //
  // In a pool of several workers, a run must not hold back ops that others could run side by
  // side (E1's independent products). So a run's unstarted ops sit in its worker's slot
  // (runs_), and the idle worker that looks at the queue also looks at the slots: one whose
  // worker has not started another op since its last look (a kPollPace ago at least) it takes
  // whole, and runs as its own run. Ops of a microsecond or less so stay on one worker, in
  // order, as a lone worker would run them; longer ones spread over the pool a look apart each.
  //
  // A run can also be long: a burst of short ops queued while every worker was busy, taken whole
  // by the first to look, would run there while the others idle. So the spinner also estimates
  // how long each run that moves on has left: its ops left (RunSlot::left) over those it started
  // since the last look. If that is kSplitLooks looks or more, it asks the run's worker to split
  // (RunSlot::split), which gives the later half of its rest back to the FIFO at its next op;
  // the spinner takes that half as its own run, and may later ask either to split again. Short
  // runs (E5's pushes, a look's worth of small ops) are never split.
  //
  // While another worker is running ops it took (RunSlot::running), the spinner leaves newly
  // queued ops to it: that worker takes the queue whole when its run ends, so a stream of small
  // ops stays on one core, as with a lone worker. The spinner takes the queue itself once it has
  // sat a whole look untaken (pops_ unchanged), when no other worker is running, and at once when
  // poked (a thread waits, an urgent push, a priority op, a split it asked for). Before, each look
  // of the spinner took what had come, so the stream moved from core to core: on 16 vCPUs with 15
  // workers an empty op cost 2.6-5.5 times the spin floor, and 1.84-2.22 after in ten processes
  // of thirteen (bench/notes/per-op.md, "The queue left to the running worker").
  //
  // A GPU's pool (one worker) is always paced, the CPU's as EngineOptions::cpu_pacing says
  // (paced_pool). bench/notes/per-op.md, "Paced polling", "Runs in a pool of several workers" and
  // "Splitting long runs".
  const bool paced_;
  alignas(64) std::atomic<unsigned> hurry_{0};
  // Priority ops pushed so far: a change ends the runs in progress, whose rest goes back to the
  // FIFO (the heap goes first). Separate from hurry_, which every poke changes (a completion that
  // made an op ready, a waiting thread), so that runs end for priority ops only; read once per op
  // by every worker in a run, on a line of its own.
  alignas(64) std::atomic<unsigned> priority_pushes_{0};
  // One line per worker: the rest of its run and its length, written by the worker once per op
  // it starts (the rest exchanged to null by another that takes it over; its head op says how
  // long it is: OprBlock::run_left), and the spinner's request to split. Only the spinning
  // worker (one at a time) reads them all, and keeps what it saw at its last look in seen_.
  struct alignas(64) RunSlot {
    std::atomic<OprBlock*> rest{nullptr};
    std::atomic<int> left{0};          // rest's length, for the spinner: a hint
    std::atomic<bool> split{false};    // set by the spinner, cleared by the run's worker
    std::atomic<bool> running{false};  // the worker runs ops it took (not parked, not looking)
  };
  struct SeenRun {
    OprBlock* rest = nullptr;
    int left = 0;
  };
  std::unique_ptr<RunSlot[]> runs_;
  std::unique_ptr<SeenRun[]> seen_;

  alignas(64) std::vector<OprBlock*> heap_;  // ops with priority != 0, a max-heap on (priority, -seq)
  SpinLock jobs_lock_;
  std::vector<ParallelJob*> jobs_;
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  // Chunk helpers park apart from the workers, so that a push's wake_one never wakes a helper in
  // place of a worker; parallel_for wakes them all.
  std::atomic<int> helper_sleepers_{0};
  std::condition_variable helper_cv_;  // with park_mu_
};

// The variables an op reads or writes, as push takes them: a contiguous array of handles (the
// public Engine::push's lists), or pointers to handles held elsewhere (the ops' path,
// ops/ops_common.h, which so copies no handle: a copy and its release are two atomic operations
// on the variable). push is compiled for each, so neither pays a test per variable.
struct VarArray {
  const Var* vars;
  std::size_t n;
  const Var& operator[](std::size_t i) const { return vars[i]; }
  std::size_t size() const { return n; }
};
struct VarPtrs {
  const Var* const* ptrs;
  std::size_t n;
  const Var& operator[](std::size_t i) const { return *ptrs[i]; }
  std::size_t size() const { return n; }
};

class EngineImpl {
 public:
  explicit EngineImpl(EngineOptions options);
  ~EngineImpl();

  void start(EngineOptions options);  // resolves the default bounds, makes the CPU pool
  void stop();                               // joins all pools (queues must be empty)
  void reconfigure(EngineOptions options);
  // This thread runs an op of this engine: waits and reconfiguration from it are refused.
  bool inside_op() const;
  static void refuse_in_chunk(const char* call);  // throws inside a parallel_for chunk

  EngineKind kind() const { return kind_; }
  int num_workers(Device device);
  int num_chunk_helpers() const { return cpu_pool_ ? cpu_pool_->chunk_helpers() : 0; }
  int cpus() const { return cpus_; }  // program_cpu_limit().cpus as the engine started
  Pacing pacing(Device device);

  Var new_var();
  // The caller's handles must stay alive until push returns.
  // Vars: VarArray or VarPtrs (instantiated for both in engine_impl.cpp).
  template <class Vars>
  void push(OpFunction fn, Vars reads, Vars writes, const PushOptions& opts, bool async = false);
  void push_async(std::function<void(Completion)> fn, VarArray reads, VarArray writes,
                  const PushOptions& opts);
  // push_async for the library's own device ops (ops/ops_common.h): fn(Completion) is kept in the
  // op's record (OpFunction's inline storage), not in a std::function, and the variables come as
  // arrays, so a device op allocates nothing beyond its record. Measured (bench/notes/gpu.md,
  // "Built after the H200 runs"): E5 on the GPU emulated on the CPU went from 2.7-3.4 to 1.2-2.0
  // us per step; on an H200, where the CUDA launch dominates, the change was within the
  // machine's noise.
  template <class F>
  void push_device(F&& fn, VarPtrs reads, VarPtrs writes, const PushOptions& opts) {
    push([f = std::forward<F>(fn)]() mutable { f(Completion(current_async_op())); }, reads,
         writes, opts, true);
  }
  // Called by Completion.
  void complete_async(OprBlock* op, ErrorRef err);
  void arrive_async(OprBlock* op);  // one of the two parties is done
  void release_async(OprBlock* op);
  // Around a Completion's done()/fail()/drop on any thread: the op may count as finished (and
  // waitall return) before that thread is done with the engine, so ~EngineImpl waits for these
  // to end before it frees anything (a completing thread read a destroyed engine's counters).
  void begin_completion() noexcept { completing_.fetch_add(1, std::memory_order_acq_rel); }
  void end_completion() noexcept { completing_.fetch_sub(1, std::memory_order_acq_rel); }
  // "<op> failed on <device>: <what>". Never throws: where the message cannot be allocated (the
  // heap is full, as in WebAssembly), the shared out_of_memory_error() stands for it.
  static ErrorRef op_error(const OprBlock* op, const std::string& what) noexcept;
  static ErrorRef out_of_memory_error() noexcept;
  static OprBlock* current_async_op();
  void wait_to_read(const Var& v);
  void waitall();
  // Engine::delete_var. With `may_defer` (an array's own storage, Chunk), the deletion of a small
  // variable that ops used may wait in a FIFO of kDeferred on the deleting side (engine_impl.cpp,
  // defer_delete), which later deletions and waitall empty: on_delete then runs later than the
  // variable's last op, so only a caller that waits for nothing from it may ask for that.
  void delete_var(Var v, OpFunction on_delete, std::size_t bytes, bool may_defer = false);
  // The same for an array's own variable, from Chunk's destructor, with may_defer: never throws.
  // False, and nothing done, when v was already deleted (Engine::delete_var on an array's var()
  // by hand; its storage then stays allocated, as no deletion of it can be proved safe).
  bool delete_array_var(Var v, OpFunction on_delete, std::size_t bytes) noexcept;
  static constexpr int kDeferred = 16;
  static constexpr std::size_t kDeferMaxBytes = std::size_t(64) << 10;
  void set_max_inflight(std::size_t ops, std::size_t bytes,
                        BoundSource source = BoundSource::kUser);
  void reset_max_inflight();
  std::size_t max_ops() const { return max_ops_.load(std::memory_order_relaxed); }
  std::size_t max_bytes() const { return max_bytes_.load(std::memory_order_relaxed); }

  EngineStats stats() const;
  void reset_peak_bytes();
  // The failures waitall keeps the messages of: the first kListedErrors since the last waitall,
  // and the latest (errors_ below). listed_errors() is how many are listed now, for the tests.
  static constexpr std::size_t kListedErrors = 64;
  std::size_t listed_errors() const {
    std::lock_guard<std::mutex> lk(err_mu_);
    return errors_.size();
  }
  // Counts bytes of device memory for stats(): array storage (Chunk) calls them. Never blocks.
  void note_alloc(Device device, std::size_t bytes) noexcept;
  void note_free(Device device, std::size_t bytes) noexcept;

  void start_profiling();
  std::string stop_profiling();
  std::vector<ProfileEvent> profile_events() const;
  bool profiling() const { return profiling_.load(std::memory_order_relaxed); }

  void parallel_for(std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& fn, std::int64_t work);
  // The CPU pool's parallel_for jobs with chunks not yet claimed (DevicePool::open_jobs), for tests.
  int cpu_open_jobs() const { return cpu_pool_ ? cpu_pool_->open_jobs() : 0; }

  // Called by workers.
  void run_op(OprBlock* op, int worker);

  // The engine's bookkeeping from here to dispatch is noexcept: it runs in destructors (a Var's)
  // and on workers, where nothing could be thrown to; an allocation failure inside it (a
  // ReadyList of more than 8 ops, a priority queue's growth) ends the process, which is what a
  // throw from a destructor did before, and no half-made grant is left behind. It also keeps
  // these calls direct in WebAssembly, where a call that may throw, made where locals must be
  // destroyed, goes through a JavaScript trampoline (bench/notes/wasm.md, "WebAssembly: calls that
  // may throw").
  static void release_var(VarBlock* v) noexcept;
  static void destroy_var(VarBlock* v) noexcept;

 private:
  friend class DevicePool;
  static VarBlock* peek(const Var& v) { return v.p_; }
  void check_var(const VarBlock* v, const char* op, const char* role) const;
  DevicePool& pool_for(Device device);  // makes a device's pool on its first op; may throw
  DevicePool& pool_of(Device device) noexcept;  // a pool pool_for made
  DevicePool* find_pool_locked(Device device) noexcept;  // caller holds pools_mu_; null: none
  void backpressure(std::size_t bytes);

  OprBlock* new_op(int nacc);
  static void prefetch_for_write(OprBlock* op);
  void free_op(OprBlock* op);
  // Appends op's accesses to its variables' queues; dispatches it if all were granted.
  void enqueue_accesses(OprBlock* op);
  void grant(Access* a, ReadyList& ready) noexcept;
  static bool storage_counted_by_writer(const VarBlock* v) noexcept;
  void capture_poison(Access* a) noexcept;
  void complete_access(VarBlock* v, ReadyList& ready) noexcept;
  // What a variable does when its running accesses end, or arranges for the last of them to do
  // (VarBlock): grants queued accesses that may run, takes a pending deletion's on_delete, and
  // says whether an orphaned variable is left idle (the caller frees it after unlocking). Caller
  // holds v->lock.
  struct Settled {
    OpFunction deleter;
    std::size_t deleted_bytes = 0;
    bool destroy = false;
  };
  void settle(VarBlock* v, ReadyList& ready, Settled& out) noexcept;
  // Caller holds v->lock. Exact answers, reading the second line only when the first cannot tell.
  static bool idle_now(VarBlock* v);           // no access runs or waits
  static bool write_running_now(VarBlock* v);  // a write runs
  void after_settle(VarBlock* v, Settled& s) noexcept;  // runs the deleter, frees v; unlocked
  void submit(OprBlock* op, int priority);  // counts and queues a validated op
  // urgent: see DevicePool::enqueue. op's pool exists: push made it (pool_for).
  void dispatch(OprBlock* op, bool urgent = true) noexcept;
  void dispatch_all(ReadyList& ready) noexcept;
  void hurry_workers();  // the caller is about to wait: idle paced workers look now
  void execute(OprBlock* op, int worker);
  void finish(OprBlock* op, bool recycle = true);
  void run_async(OprBlock* op, int worker, int extra_refs = 0);
  void run_wait(OprBlock* op);
  static void run_deleter(OpFunction& on_delete) noexcept;
  struct DeferredDelete {
    Var var;
    OpFunction on_delete;
    std::size_t bytes = 0;  // delete_var's: counted toward the byte bound if it must wait
  };
  // delete_var's work once v is marked deleted.
  void delete_marked(Var var, OpFunction on_delete, std::size_t bytes, bool may_defer) noexcept;
  void delete_when_idle(Var var, OpFunction on_delete, std::size_t bytes) noexcept;
  void defer_delete(Var var, OpFunction on_delete, std::size_t bytes) noexcept;
  void retire_deferred(DeferredDelete& d) noexcept;
  void retire_all_deferred() noexcept;
  // Takes `bytes` off the in-flight count (the caller then calls notify_done_waiters).
  void release_inflight(std::size_t bytes) noexcept;
  // Wakes threads sleeping in waitall or in a bounded push, when one of them may proceed.
  void notify_done_waiters();
  void run_naive(OprBlock* op);
  void run_naive_one(OprBlock* op);
  void run_naive_item(NaiveItem& item);
  bool naive_delete_later(Var& var, OpFunction& on_delete);
  void wait_naive_queue();

  // Errors.
  // A failure's handling allocates nothing that can fail: it runs on a worker, where an exception
  // escaping would end the process, and most often when memory ran out.
  static ErrorRef wrap_error(const OprBlock* op, std::exception_ptr e) noexcept;
  void set_error(VarBlock* v, const ErrorRef& e);  // caller holds no var lock
  ErrorRef take_error(VarBlock* v);               // clears; caller holds v->lock
  void record_error(ErrorRef e) noexcept;

  void record_event(OprBlock* op, int worker, double start_us, double end_us, bool failed,
                    bool skipped) noexcept;
  void record_event_or_throw(OprBlock* op, int worker, double start_us, double end_us,
                             bool failed, bool skipped);
  double now_us() const;

  EngineOptions options_;  // as given to start(): what reconfigure restores if the new one fails
  EngineKind kind_ = EngineKind::kThreaded;
  int cpu_workers_ = 0;
  int cpus_ = 1;  // program_cpu_limit().cpus when the engine started: the pools' idea of "cores"
  std::unique_ptr<DevicePool> cpu_pool_;
  std::mutex pools_mu_;
  std::vector<std::unique_ptr<DevicePool>> other_pools_;  // GPU devices, made on first use
  std::atomic<int> n_other_pools_{0};  // other_pools_.size(), read without pools_mu_
  // The naive engine (run_naive): whether a thread runs ops, whether that run waits for an
  // asynchronous op's Completion, what other threads pushed or deleted meanwhile (run after it),
  // and how many of those have not run yet.
  std::mutex naive_mu_;
  std::condition_variable naive_cv_;
  bool naive_busy_ = false;
  bool naive_async_waiting_ = false;
  std::deque<NaiveItem> naive_after_async_;
  std::size_t naive_queued_ = 0;

  // Counters on two cache lines: pushers write the first, workers the second. Each count only
  // grows, and what is in flight is a difference (pushed - finished): a counter that both sides
  // add to and take from would cross between their cores on every op (bench/notes/per-op.md, "E5 on
  // the Zen 4"). seen_* are the pusher's lower bounds of the workers' counts: push reads the
  // workers' line only when the cheap bound says a limit may be reached.
  alignas(64) std::atomic<std::uint64_t> pushed_all_{0};  // normal + delete ops
  std::atomic<std::uint64_t> pushed_bytes_{0};  // bytes of pushed ops and of pending deletions
  std::atomic<std::uint64_t> seen_finished_{0};
  std::atomic<std::uint64_t> seen_finished_bytes_{0};
  alignas(64) std::atomic<std::uint64_t> finished_all_{0};
  std::atomic<std::uint64_t> finished_bytes_{0};  // of finished ops and of deletions run
  // Bytes in flight at this instant: the workers' count is read first, so the result is never
  // negative.
  std::uint64_t inflight_bytes() const {
    const std::uint64_t fin = finished_bytes_.load(std::memory_order_acquire);
    return pushed_bytes_.load(std::memory_order_acquire) - fin;
  }
  alignas(64) std::atomic<std::size_t> max_ops_{0};  // read by every push: off the workers' line
  std::atomic<std::size_t> max_bytes_{0};
  std::atomic<BoundSource> bytes_source_{BoundSource::kNone};
  std::size_t start_ops_ = 0, start_bytes_ = 0;  // the bounds of the options: reset_max_inflight
  BoundSource start_source_ = BoundSource::kNone;
  std::atomic<std::uint64_t> push_waits_{0};
  std::atomic<std::uint64_t> seq_{0};

  // Written by the threads that delete variables only (defer_delete).
  alignas(64) SpinLock deferred_lock_;
  int deferred_first_ = 0, deferred_count_ = 0;  // guarded by deferred_lock_
  DeferredDelete deferred_[kDeferred];

  alignas(64) std::mutex done_mu_;  // waitall and backpressure sleepers
  std::condition_variable done_cv_;
  // Counted apart because they wake on different conditions (notify_done_waiters): a sleeping
  // waitall only when everything has finished, a push blocked by a bound at half the bound.
  std::atomic<int> waitall_sleepers_{0};
  std::atomic<int> bound_sleepers_{0};

  std::atomic<int> completing_{0};  // begin_completion .. end_completion in progress
  const std::uint64_t serial_;      // unique in the process (VarBlock::owner_serial)
  mutable std::mutex err_mu_;
  // The failures since the last waitall (record_error, take_error), for waitall to report the
  // first one no wait rethrew and how many more: a count, the first kListedErrors of them in
  // order (a run of failures nobody reads, of any length, costs no more; a rethrow is O(1)), and
  // the latest. Guarded by err_mu_.
  std::deque<ErrorRef> errors_;
  bool errors_overflowed_ = false;  // a failure was not listed: none after it is, until waitall
  std::size_t errors_unreported_ = 0;
  std::uint64_t errors_epoch_ = 1;  // one more at each waitall (OpFailure::epoch)
  std::size_t errors_out_of_memory_ = 0;  // of those, failures with the shared message (one object)
  ErrorRef latest_error_;

  struct DeviceMem {
    Device device;
    std::atomic<bool> used{false};
    // Bytes allocated and freed, each only growing, on lines of their own: the thread that
    // allocates an array is often not the one that frees it (a worker runs the deletion of an
    // array whose last handle went while ops were queued on it). The peak is the allocating
    // side's, never above what was in use at some moment (note_alloc).
    alignas(64) std::atomic<std::uint64_t> allocated{0};
    std::atomic<std::int64_t> peak{0};
    alignas(64) std::atomic<std::uint64_t> freed{0};
    std::int64_t in_use() const {
      const std::uint64_t f = freed.load(std::memory_order_acquire);
      return static_cast<std::int64_t>(allocated.load(std::memory_order_acquire) - f);
    }
  };
  // Byte counts per device: a fixed slot for the first kIdsPerKind ids of each kind (lock-free),
  // and a map, under mem_more_mu_, for any higher id, so that no two devices share a count.
  static constexpr int kIdsPerKind = 64;
  DeviceMem mem_[kDeviceKindCount * kIdsPerKind];
  mutable std::mutex mem_more_mu_;
  std::map<std::pair<int, int>, std::unique_ptr<DeviceMem>> mem_more_;
  DeviceMem mem_overflow_;  // mem_more's slot when a new one cannot be allocated
  DeviceMem& mem_for(Device d) noexcept {
    const int k = static_cast<int>(d.kind);
    if (k >= 0 && k < kDeviceKindCount && d.id >= 0 && d.id < kIdsPerKind) {
      DeviceMem& m = mem_[k * kIdsPerKind + d.id];
      if (!m.used.load(std::memory_order_relaxed)) m.used.store(true, std::memory_order_relaxed);
      return m;
    }
    return mem_more(d);
  }
  // ids past kIdsPerKind (or unknown kinds), under mem_more_mu_. Never throws: without memory
  // for a new slot, the device is counted in a shared overflow slot (its stats then mix).
  DeviceMem& mem_more(Device d) noexcept;

  std::atomic<bool> profiling_{false};
  // Profiler epoch, profiler_clock_ns(); atomic because workers read it while a new
  // profiling session starts.
  std::atomic<std::int64_t> t0_ns_{0};
  // Counts start_profiling calls: an op pushed in an earlier recording is not recorded in this one
  // (its times are on the earlier recording's clock: a restart gave negative durations).
  std::atomic<std::uint32_t> prof_session_{0};
  mutable std::mutex prof_mu_;
  std::vector<ProfileEvent> events_;
  std::atomic<std::uint64_t> events_lost_{0};  // record_event's, out of memory
};

// How the library's own code reaches an Engine's EngineImpl (Engine befriends it):
// configure_engine, the byte counts of array storage, and the tests. Not part of the API:
// core/src is neither installed nor on a user's include path.
struct EngineAccess {
  static EngineImpl& impl(Engine& e) { return *e.impl_; }
};

}  // namespace detail
}  // namespace asyncnd
