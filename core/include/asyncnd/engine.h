// The dependency engine: queues operations, tracks which variables each reads and writes, and runs
// independent ones in parallel on per-device worker pools. Each declaration below states its
// contract (what it blocks on, which thread may call it, what it throws); README.md, "What the
// engine promises", sums it up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "asyncnd/detail/op_function.h"
#include "asyncnd/device.h"
#include "asyncnd/error.h"

namespace asyncnd {

namespace detail {
struct VarBlock;
struct OprBlock;
class EngineImpl;
struct EngineAccess;
}  // namespace detail

class Engine;

// What an op runs: any callable with no arguments (a lambda, also a move-only one; a function
// pointer; a std::function). Captures up to 136 bytes that move without throwing are stored
// inside the op, unallocated.
using OpFunction = detail::OpFunction;

// A variable: the unit of dependency tracking. Every array owns one; users who schedule their own
// work make them with Engine::new_var(). A Var is a reference-counted handle: copies name the same
// variable. Copying and destroying handles is thread safe. A default-constructed Var is null and
// any engine call given one throws asyncnd::Error.
class Var {
 public:
  Var() = default;
  Var(const Var& other) noexcept;
  Var(Var&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
  Var& operator=(const Var& other) noexcept;
  Var& operator=(Var&& other) noexcept {
    if (this != &other) {
      detail::VarBlock* old = p_;
      p_ = other.p_;
      other.p_ = nullptr;
      if (old) release(old);
    }
    return *this;
  }
  // Inline, so that a moved-from handle (most of those an op's push destroys) costs no call.
  ~Var() {
    if (p_) release(p_);
  }

  bool valid() const { return p_ != nullptr; }
  explicit operator bool() const { return valid(); }
  // A process-unique id, stable for the variable's life; the profiler and graphs use it.
  std::uint64_t id() const;
  // True once Engine::delete_var has been called on it (its deletion may still be pending).
  bool deleted() const;

  friend bool operator==(const Var& a, const Var& b) { return a.p_ == b.p_; }
  friend bool operator!=(const Var& a, const Var& b) { return a.p_ != b.p_; }

 private:
  friend class detail::EngineImpl;
  explicit Var(detail::VarBlock* p) : p_(p) {}  // adopts one reference
  // Drops one reference; the last one frees the variable once its queued ops are done. noexcept:
  // handles are dropped in destructors. (In WebAssembly with JS-based exceptions, a call that may
  // throw, made where locals need destroying, goes through a JavaScript trampoline.)
  static void release(detail::VarBlock* p) noexcept;
  detail::VarBlock* p_ = nullptr;
};

enum class EngineKind {
  kThreaded,  // default: ops run on worker threads, push returns at once
  // Every op runs inline inside push: the debugging mode (ASYNCND_ENGINE=naive). In push order:
  // an op pushed from inside an op runs right after it, and one pushed from another thread while
  // an asynchronous op awaits its Completion runs once it came (that push returns at once).
  // Limits, where the threaded engine has none: an op of one naive engine must not push to
  // another naive engine (the inner one's op is queued on the outer one's thread-local list);
  // and while an asynchronous op's fn has pushed ops of its own that have not run yet, ops
  // pushed by other threads may run before them (push_async has the waits it must not make).
  kNaive,
};

// Where the byte bound in force came from (EngineStats::max_inflight_bytes_source).
enum class BoundSource {
  kNone,      // no byte bound
  kCgroup,    // derived from the cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes)
  kPhysical,  // derived from the machine's physical memory
  kWasmHeap,  // derived from the WebAssembly module's maximum heap
  kEnv,       // ASYNCND_MAX_INFLIGHT_BYTES
  kUser,      // set in code: Engine::set_max_inflight, or EngineOptions given to an Engine
};
// "none", "cgroup", "physical", "wasm heap", "env", "user".
const char* bound_source_name(BoundSource source);

// The memory this program may use, as the default byte bound sees it.
struct MemoryLimit {
  std::uint64_t bytes = 0;                  // 0 = unknown: no default byte bound
  BoundSource source = BoundSource::kNone;  // kCgroup, kPhysical or kWasmHeap
};

// The memory this program may use: natively the smallest cgroup limit (v2 memory.max, v1
// memory.limit_in_bytes) of the process's group and its ancestors when one is set and below
// physical memory ("max", or v1's near-2^63 "unlimited", is no limit), else physical memory; in
// WebAssembly the module's maximum heap (2 GiB). Reads /proc and /sys once per call (the cgroup
// files wherever /proc/self/mountinfo has their hierarchies); never throws
// (bytes = 0 when nothing can be read).
MemoryLimit program_memory_limit();

// The CPUs this program may use, as every default thread count sees them (the engine's CPU
// workers, the BLAS threads, our GEMMs' threads, dist::init's share per rank).
struct CpuLimit {
  int cpus = 1;      // what the defaults count: the smallest of the three below, at least 1
  int online = 0;    // the machine's online CPUs (std::thread::hardware_concurrency)
  int affinity = 0;  // CPUs in this process's affinity mask (taskset, a cpuset, mpirun's binding);
                     // 0 = unknown
  double quota = 0;  // the cgroups' CPU quota, in CPUs (v2 cpu.max, v1 cpu.cfs_quota_us over
                     // cpu.cfs_period_us; the smallest along the process's group and its
                     // ancestors); counted rounded up; 0 = none
  const char* source = "online";  // which of the three decided: "online", "affinity" or "cgroup"
};

// The CPUs this program may use: natively the online CPUs, narrowed by the affinity mask and by
// the smallest cgroup CPU quota of the process's group and its ancestors (rounded up: a quota of
// 1.5 CPUs counts 2) where those are narrower. A container limited to 2 CPUs on a 64-core host,
// or a process under `taskset -c 0,1`, counts 2, not 64. In WebAssembly the online count alone
// (navigator.hardwareConcurrency, or Node's).
// Reads /proc and /sys at each call (engines and backends call it once, when they start), the
// cgroup files wherever /proc/self/mountinfo has their hierarchies; never throws.
// ASYNCND_CPU_WORKERS and ASYNCND_BLAS_THREADS still replace what is derived from it.
CpuLimit program_cpu_limit();

// The default byte bound of the process-wide engine: a quarter of program_memory_limit()
// (kDefaultInflightBytesDivisor), and never more than kDefaultInflightBytesCap (512 MiB).
// The quarter keeps queued work from taking the memory the program needs for itself on any
// machine (in WebAssembly: 512 MiB of the 2 GiB heap). The cap is what running ahead is worth:
// past a few hundred megabytes, queued work only adds storage the CPU allocator cannot recycle
// (its cache holds as much as this bound by default), whose fresh pages the workers must fault
// in, so E6 without a read ran slower with a quarter of a large machine's memory as its bound
// than with 512 MiB, which still runs several batches ahead. The measurements are in
// bench/notes/limits.md, "The default byte bound".
inline constexpr std::uint64_t kDefaultInflightBytesDivisor = 4;
inline constexpr std::uint64_t kDefaultInflightBytesCap = 512ull << 20;
// The default byte bound for a program that may use `memory_bytes` (0 = unknown: no bound).
constexpr std::uint64_t default_max_inflight_bytes(std::uint64_t memory_bytes) {
  return memory_bytes / kDefaultInflightBytesDivisor < kDefaultInflightBytesCap
             ? memory_bytes / kDefaultInflightBytesDivisor
             : kDefaultInflightBytesCap;
}

// How the CPU pool's idle workers take queued ops (EngineOptions::cpu_pacing, ASYNCND_CPU_PACING).
enum class Pacing {
  kAuto,  // kRuns natively; in WebAssembly kRuns for one worker, kOps for several
  // An idle worker looks at the queue every 4 us (at once when a thread waits or an op becomes
  // ready), and takes everything queued as a run, which it runs in push order. Another idle worker
  // takes over the rest of a run whose worker has sat on one op for a whole look, so independent
  // long ops still run side by side, and has a long run of short ops split, taking its later
  // half. A frontend pushing small ops then moves the queue's cache line between cores once per
  // run, not once per op.
  kRuns,
  kOps,  // idle workers watch the queue and take ops one by one as they come
};
// "auto", "runs", "ops".
const char* pacing_name(Pacing pacing);

// The most CPU workers, and the most chunk helpers, an engine takes (EngineOptions, and
// ASYNCND_CPU_WORKERS and ASYNCND_CPU_HELPERS).
inline constexpr int kMaxCpuThreads = 1024;

// An EngineOptions bound that is the default one: what from_env() sets, resolved when the engine
// starts (ASYNCND_MAX_INFLIGHT_OPS or _BYTES where set, else kDefaultMaxInflightOps ops and
// default_max_inflight_bytes(program_memory_limit().bytes) bytes). The bounds' default, so that
// EngineOptions{kind, workers} or a field set by hand leaves the memory bound as it would be.
inline constexpr std::size_t kDefaultBound = SIZE_MAX;

// An engine's configuration. The Engine constructor and configure_engine check it first: an
// unknown kind or pacing, or a count out of its range, throws asyncnd::Error naming the field and
// its value, and changes nothing. If a thread cannot be started (the process's limit on threads
// or memory), they throw asyncnd::Error saying how many started: the constructor makes no engine,
// and configure_engine restarts the configuration it replaced.
struct EngineOptions {
  EngineKind kind = EngineKind::kThreaded;
  // CPU worker threads, 0 to kMaxCpuThreads; 0 = one per CPU of program_cpu_limit() but one (at
  // least one), leaving a core to the frontend thread that pushes.
  int cpu_workers = 0;
  // Backpressure bounds; see Engine::set_max_inflight. kDefaultBound = the default bound (above);
  // 0 = no bound.
  std::size_t max_inflight_ops = kDefaultBound;
  std::size_t max_inflight_bytes = kDefaultBound;
  // Where max_inflight_bytes came from, for EngineStats; kNone with a nonzero bound means kUser.
  BoundSource max_inflight_bytes_source = BoundSource::kNone;
  Pacing cpu_pacing = Pacing::kAuto;  // the CPU pool's; a GPU's lone worker always takes runs
  // CPU chunk helpers, -1 to kMaxCpuThreads: threads that only run chunks of large parallel_for
  // loops (loops of kChunkHelperMinWork elements or more: a large map, reduction or random fill),
  // never ops. -1 = one when cpu_workers is the default and leaves a core to the frontend (2 CPUs
  // or more), else none; in WebAssembly always none (its threads come from a pool of fixed size).
  // GEMMs already use that core (BLAS's threads use every CPU); with the helper, large maps do too.
  int cpu_chunk_helpers = -1;
  // Reads ASYNCND_ENGINE (threaded|naive), ASYNCND_CPU_WORKERS, ASYNCND_CPU_HELPERS (a count:
  // cpu_chunk_helpers) and ASYNCND_CPU_PACING (auto|runs|ops) over the defaults above, and sets
  // the default bounds: kDefaultMaxInflightOps ops, and
  // default_max_inflight_bytes(program_memory_limit().bytes) bytes.
  // ASYNCND_MAX_INFLIGHT_OPS and ASYNCND_MAX_INFLIGHT_BYTES (whole numbers below SIZE_MAX, 0 = no
  // bound) replace them. The bounds it returns are numbers, never kDefaultBound. Throws
  // asyncnd::Error naming the variable and its value for a bad value (not a whole number, a
  // sign, trailing characters, too large; an unknown word).
  static EngineOptions from_env();
  // The same with `limit` in place of the machine's (tests simulate a small machine with it).
  static EngineOptions from_env(const MemoryLimit& limit);
};

// Engine::parallel_for's `work` from which the CPU pool's chunk helpers join a loop: 16 chunks
// of a cheap map (kGrain, core/src/kernels/host_kernels.h), about 0.1 ms of work. Below it, a
// helper woken for the loop cost more than it gave: on 2 vCPUs under KVM, x * 1.0001 on 64K
// floats, read each time, took 7 us alone and 67-70 us with the helper woken for it
// (bench/notes/per-op.md, "A chunk helper on the frontend's core").
inline constexpr std::int64_t kChunkHelperMinWork = 16 * 32768;

// The default bound on ops in flight of the process-wide engine: a frontend that runs this far
// ahead of the workers waits inside push. Bookkeeping per op queued, on x86-64: about 470 bytes
// (the op's record; 500 000 empty ops), about 1.2 KB for an op that makes a small array (its
// variable, handle and block on top; y = x + 1), so a frontend that runs the whole bound ahead
// with tiny ops holds about 250-600 MB of it (in WebAssembly about 670 bytes per y = x.add(1)).
// Records the workers free are kept for reuse up to about 15 MB (recycler.h); the rest go back
// to the allocator. A smaller bound (ASYNCND_MAX_INFLIGHT_OPS) bounds it where that matters. The
// byte bound (kDefaultInflightBytesDivisor) bounds what the queued ops' outputs hold.
inline constexpr std::size_t kDefaultMaxInflightOps = 1u << 19;

struct PushOptions {
  Device device{};          // which device's workers run the op
  int priority = 0;         // among ready ops of a device, higher runs first
  const char* name = "op";  // shown by the profiler and in error messages; must outlive the op
                            // (a string literal)
  // Bytes of output that this op keeps alive until it finishes; counted by the byte bound of
  // set_max_inflight and released when the op finishes.
  std::size_t bytes = 0;
};

struct DeviceStats {
  Device device;
  std::uint64_t bytes_in_use = 0;  // allocated now
  std::uint64_t bytes_peak = 0;    // most ever allocated at once (since reset_peak_bytes)
};

// The GEMM the CPU backend runs (dot, matmul, Dense) and why it was chosen. Natively:
// "openblas <core>" (the core OpenBLAS chose for this CPU, or a better one the backend moved it to
// when OpenBLAS fell back to a pre-AVX2 kernel on a CPU with AVX2 or AVX-512, after a self-test),
// "avx512" (asyncnd's own AVX-512 GEMM, after a self-test, on a CPU with AVX-512: unless
// OpenBLAS's kernel uses AVX-512 too and the GEMM has one thread, ASYNCND_BLAS_THREADS=1),
// "avx2" (asyncnd's own AVX2 GEMM, after a self-test, on a CPU with AVX2 and FMA but no AVX-512,
// where OpenBLAS stays on a pre-AVX2 kernel or the build has no OpenBLAS), or "portable"
// (ASYNCND_GEMM=portable, or a build without OpenBLAS on a CPU without AVX2); in WebAssembly
// "portable (wasm SIMD128)", or "portable (wasm SIMD128 + relaxed madd)" in the relaxed-SIMD
// module.
// ASYNCND_GEMM=auto|openblas|portable|avx512|avx2 chooses; a user's OPENBLAS_CORETYPE is never
// overridden (OpenBLAS keeps it, whichever GEMM runs). Starts the CPU backend if it has not
// started; throws asyncnd::Error for a bad ASYNCND_GEMM. Any thread.
struct CpuGemm {
  std::string kernel;
  std::string reason;
};
CpuGemm cpu_gemm();

struct EngineStats {
  std::uint64_t pushed = 0;    // ops pushed (waits excluded)
  std::uint64_t finished = 0;  // ops finished, run or skipped after an error
  std::uint64_t pending = 0;   // pushed - finished
  std::uint64_t inflight_bytes = 0;  // bytes that queued work keeps alive (see
                                     // set_max_inflight; counted while a byte bound is set)
  // Variables whose handles or ops are still alive, of every engine in the process (a variable
  // may outlive its engine, so each is counted where it is made and destroyed, process-wide).
  std::uint64_t live_vars = 0;
  // The bounds in force (0 = none; see set_max_inflight), where the byte bound came from, and how
  // many pushes have waited on a bound (since the engine started).
  std::uint64_t max_inflight_ops = 0;
  std::uint64_t max_inflight_bytes = 0;
  BoundSource max_inflight_bytes_source = BoundSource::kNone;
  std::uint64_t push_waits = 0;
  std::uint64_t bytes_in_use = 0;    // sum over devices
  std::uint64_t bytes_peak = 0;      // sum over devices of each device's peak
  std::vector<DeviceStats> devices;
};

// One op as the profiler saw it. Times are microseconds since the profiler started.
struct ProfileEvent {
  std::string name;
  Device device;
  int worker = -1;  // worker index on its device; -1 = ran inline on the pushing/waiting thread
  double push_us = 0, start_us = 0, end_us = 0;
  std::vector<std::uint64_t> reads, writes;  // Var::id()s
  bool failed = false;   // the op threw
  bool skipped = false;  // not run: an input was poisoned by an earlier failure
  // An asynchronous op (push_async): start..end spans until its Completion, while the worker went
  // on to other ops. The trace shows it as an async slice ("b"/"e"), not as a worker's op ("X"),
  // which would overlap that worker's later ops without nesting.
  bool async = false;
  // Empty for the engine's own events (an op on a worker, or inline). Otherwise the event is a
  // device-side span that a GPU backend recorded while profiling: when a launched kernel or copy
  // actually ran on the device (start_us, end_us; push_us = start_us, worker = -1, no reads or
  // writes), and `lane` names the device queue it ran on ("compute stream", "copy stream").
  std::string lane;
};

// How an asynchronous op (Engine::push_async) says that it has finished: hand it to whatever
// finishes the work (another thread, a device callback) and call done() or fail() there. Until
// then the op counts as running: ops that depend on it wait, and so do waits. Move-only; the first
// done()/fail() counts, later ones are ignored. Destroying a Completion that was never used fails
// the op ("completion dropped"), so that a lost handle cannot hang a waiter. Thread safe.
class Completion {
 public:
  Completion() = default;
  Completion(Completion&& other) noexcept : op_(other.op_.exchange(nullptr)) {}
  Completion& operator=(Completion&& other) noexcept;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion();

  void done();
  // The op fails with `message`: stored on what it writes and rethrown at the next wait, as if it
  // had thrown.
  void fail(const std::string& message);

 private:
  friend class detail::EngineImpl;
  explicit Completion(detail::OprBlock* op) : op_(op) {}
  void complete(const std::string* error) noexcept;
  // Taken with exchange: done() and fail() may race on two threads, and only one may complete.
  std::atomic<detail::OprBlock*> op_{nullptr};
};

// The engine. Every member function is thread safe unless it says otherwise.
class Engine {
 public:
  explicit Engine(EngineOptions options = {});
  // Waits for all pending work, then stops the workers. Errors not yet rethrown are dropped.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  EngineKind kind() const;
  // Worker threads serving `device` (0 in the naive engine). Throws asyncnd::Error for a device
  // that does not exist.
  int num_workers(Device device = {}) const;
  // The CPU's chunk helpers (EngineOptions::cpu_chunk_helpers, resolved; 0 in the naive engine).
  int num_chunk_helpers() const;
  // How the workers serving `device` take queued ops: kRuns or kOps (EngineOptions::cpu_pacing
  // with kAuto resolved; a GPU's worker takes runs). kOps in the naive engine, which has none.
  Pacing pacing(Device device = {}) const;

  // A fresh variable owned by this engine. Never blocks.
  Var new_var();

  // Queues fn to run on opts.device once every earlier op that writes one of `reads`, and every
  // earlier op that reads or writes one of `writes`, has finished. Returns at once, except that it
  // blocks while the in-flight bound is exceeded (never when called from inside an op). To read
  // and modify a variable, list it in `writes` only. Duplicates within reads or within writes are
  // allowed. fn runs on a worker thread (inline in the naive engine); whatever it throws is
  // caught, stored on `writes`, and rethrown by the next wait on them and by waitall.
  // Throws asyncnd::Error, queuing nothing, for: a null or deleted variable, a variable of another
  // engine, a variable in both reads and writes, a device that does not exist.
  void push(OpFunction fn, std::vector<Var> reads, std::vector<Var> writes,
            PushOptions opts = {});
  // The same, for braced lists (`push(fn, {a, b}, {c})`): no vector is allocated.
  void push(OpFunction fn, std::initializer_list<Var> reads,
            std::initializer_list<Var> writes, PushOptions opts = {});

  // Like push, but the op finishes when fn's Completion says so (done() or fail()) and fn has
  // returned, whichever comes last: for work that completes elsewhere (a device, another thread)
  // without holding a worker meanwhile. If fn throws, the op fails with that exception; a
  // Completion fn drops unused fails it as "completion dropped", also while an exception passes
  // that fn catches itself. In the naive engine, push_async returns only once the op has
  // finished, unless called from inside an op (then it runs after that op, as push). In the
  // naive engine, a thread that waits (wait_to_read, waitall) while an asynchronous op awaits its
  // Completion waits for that Completion, whatever it reads: it must not be the thread that
  // would complete it; nor may an op wait for a thread of its own that pushes (its push waits
  // for the op). The threaded engine has neither limit. The op counts toward the
  // in-flight bound until its Completion: a thread that finishes it must not first push where
  // the bound is reached (that push waits for the op, which waits for the thread); push after
  // done(), or from inside an op, which never waits.
  void push_async(std::function<void(Completion)> fn, std::vector<Var> reads,
                  std::vector<Var> writes, PushOptions opts = {});

  // Blocks until every write to v pushed before this call has finished. If one of them failed (or
  // was skipped because of an earlier failure), rethrows that error once and clears it from v.
  // Throws asyncnd::Error for a null or deleted variable. Must not be called from inside an op.
  // A GPU op counts as finished once queued on its device's stream: NDArray::wait_to_read (not
  // this call) also waits for the device. It returns as soon as the writes are done and their
  // results visible; the engine's counters (stats().finished, pending, inflight_bytes) may count
  // the last of them a moment later. After waitall they are exact.
  void wait_to_read(const Var& v);

  // Blocks until every op pushed before this call has finished, and every op those ops pushed
  // (if other threads keep pushing, until they pause), then rethrows the first error
  // raised since the last waitall that no wait_to_read has rethrown yet, with how many more there
  // were ("... (and 2 more failed ops since the last waitall)"), and forgets the others. (It keeps
  // the messages of the first 64 failures and of the latest: when waits rethrew those 64, it
  // names the latest. A failure nobody reads costs a count, whatever their number.)
  // Errors are the engine's, not the calling thread's: with several pushing threads, one
  // thread's waitall may rethrow (and so forget) an error of another thread's op.
  // It does not clear the variables' errors: each still rethrows its own at its next wait_to_read.
  // Then waits for every GPU to finish its queued work, and throws a device error if one failed.
  // Must not be called from inside an op: throws "waitall: called from inside an op" there (with
  // either engine kind).
  void waitall();

  // Deletes v once every op pushed before this call that uses it has finished, and then runs
  // on_delete (if given): at once on the calling thread if nothing is queued on v, else on the
  // thread that finishes v's last op. on_delete must not throw. Never blocks.
  // (An array's own storage is deleted through an internal path that may let a small array wait
  // for up to 16 later deletions or the next waitall: core/src/engine/engine_impl.cpp,
  // defer_delete. So stats() may count up to 16 small arrays, at most 1 MiB, as still alive
  // until then.)
  // After this call, pushing v throws. Deleting twice throws. A push of v on another thread at
  // the same time as this call is a race, as using any object while it is destroyed: the push
  // may be accepted and its op run after on_delete. Order the two (arrays never race so: their
  // storage's variable is deleted when the last handle goes). `bytes`: the storage on_delete
  // frees; while the deletion waits for queued ops, it counts toward the byte bound of
  // set_max_inflight (memory that queued work keeps alive).
  void delete_var(Var v, OpFunction on_delete = {}, std::size_t bytes = 0);

  // Bounds the work in flight: push blocks while `ops` ops are pending, or while the bytes that
  // queued work keeps alive exceed `bytes`: the PushOptions::bytes of pending ops plus the
  // storage of deleted variables whose deletion waits for queued ops (delete_var's `bytes`),
  // each byte once: storage dropped while a pending op that writes it with PushOptions::bytes
  // (the op that made it) counts it is counted as the deletion's only from when that op's write
  // ends. (A dropped array of 64 KiB or less first waits, uncounted, among the last 16 such
  // drops: at most 1 MiB.) An op larger than the bound still runs when nothing else is in
  // flight. Arrays still held by handles are not in flight: peak memory is about what the
  // program holds, plus the bound, plus the output of the op being pushed. A blocked push is
  // woken once in-flight work is down to about half of each bound set (or everything finished),
  // then pushes on: fewer wake-ups of the pushing thread. 0 = no bound. Takes effect for the
  // next push.
  // The process-wide engine starts bounded (EngineOptions::from_env: 524 288 ops, and a quarter of
  // the memory the program may use, at most 512 MiB); this call replaces both, and stats() then
  // reports the byte bound's source as kUser (kNone for 0).
  void set_max_inflight(std::size_t ops, std::size_t bytes);
  // Restores the bounds this engine started with (its EngineOptions, with their source).
  void reset_max_inflight();
  std::size_t max_inflight_ops() const;
  std::size_t max_inflight_bytes() const;

  EngineStats stats() const;
  void reset_peak_bytes();

  // Starts recording every op (name, device, worker, push/start/end time, reads and writes) pushed
  // from now on; a start while recording starts a new recording (ops pushed before it are left
  // out, also those still running). The recording has no bound: about 0.3-0.5 KB per op natively
  // (465 bytes an op for a million tiny ops), kept until the next start.
  void start_profiling();
  // Stops recording and returns the events as Chrome trace JSON (open it in Perfetto or
  // chrome://tracing): about 170 bytes per op more, while the recording stays. The events stay
  // available through profile_events() (which copies them) until the next start.
  std::string stop_profiling();
  std::vector<ProfileEvent> profile_events() const;
  bool profiling() const;

  // Runs fn(begin, end) over [0, n) in chunks of at least `grain`, using the idle workers of the
  // CPU device and the calling thread, and the CPU's chunk helpers too when `work` (about how many
  // elements the whole loop touches; 0 counts n) is kChunkHelperMinWork or more; returns when all
  // chunks are done. Serial in the naive engine or when n <= grain. If fn throws, the other
  // chunks still run and the first exception is rethrown here. Usable from inside an op. fn may
  // push but not wait: wait_to_read, waitall and configure_engine throw inside a chunk, whatever
  // thread runs it (on a worker they would deadlock).
  void parallel_for(std::int64_t n, std::int64_t grain,
                    const std::function<void(std::int64_t, std::int64_t)>& fn,
                    std::int64_t work = 0);

  // True on the engine's own threads: its workers, and the CPU's chunk helpers (which run chunks
  // of ops' parallel_for loops).
  static bool on_worker_thread();

 private:
  friend struct detail::EngineAccess;  // the library's own code (core/src/engine/engine_impl.h)
  std::unique_ptr<detail::EngineImpl> impl_;
};

namespace detail {
extern std::atomic<Engine*> g_engine;  // the process-wide engine once made, else null
Engine& make_engine();                 // makes it (once, thread-safe); throws on a bad setting
}  // namespace detail

// The process-wide engine, made on first use with EngineOptions::from_env(); never destroyed
// before exit. Inline, and a plain load once made: every op's push asks for it.
inline Engine& engine() {
  Engine* e = detail::g_engine.load(std::memory_order_acquire);
  return e != nullptr ? *e : detail::make_engine();
}

// Replaces the process-wide engine's configuration with `options`, every field of it (a bound
// left at kDefaultBound is the default bound; EngineOptions::from_env() is the configuration the
// engine was made with): waits for all work first, then restarts the workers. Variables and
// arrays stay valid. Call it from one thread while no other thread uses the engine. If an
// earlier op failed and no wait reported it yet, the configuration is still applied, then that
// failure is thrown (as waitall would). Throws "configure_engine: called from inside an op" from
// an op (and changes nothing).
void configure_engine(EngineOptions options);

}  // namespace asyncnd
