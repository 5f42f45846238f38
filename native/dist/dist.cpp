// asyncnd::dist: MPI set-up, and the collectives as engine ops handed to the communication
// thread (comm.h).
#include "asyncnd/dist.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "asyncnd/detail/env.h"
#include "asyncnd/engine.h"
#include "autograd/autograd_internal.h"  // detail::check_inplace_allowed
#include "comm.h"
#include "ops/chunk.h"                   // detail::bump_version

namespace asyncnd {
namespace dist {

namespace {

using detail::Comm;
using detail::Request;

std::unique_ptr<Comm> g_comm;
bool g_we_initialised_mpi = false;
bool g_finalized = false;  // we finalised MPI: it cannot be initialised again in this process
// MPI_COMM_WORLD's error handler before init set MPI_ERRORS_RETURN on it (test progress only; see
// init), put back by finalize. MPI_ERRHANDLER_NULL: init changed nothing.
MPI_Errhandler g_world_errhandler = MPI_ERRHANDLER_NULL;

// MPI counts are ints: larger arrays go in pieces of this many elements.
constexpr std::int64_t kMaxPiece = 1 << 30;

Comm& comm(const char* op) {
  if (!g_comm) {
    throw Error(std::string(op) + (g_finalized ? ": dist::finalize() has been called"
                                               : ": dist::init() has not been called"));
  }
  return *g_comm;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// ASYNCND_DIST_PROGRESS: "blocking" (blocking collectives, and a watchdog thread that may call
// MPI_Abort while the communication thread is inside MPI: needs MPI_THREAD_MULTIPLE), "test"
// (nonblocking collectives driven with MPI_Test, yielding the core between tests, the watchdog in
// the same loop: MPI_THREAD_SERIALIZED is enough), or unset: blocking where MPI provides
// MULTIPLE, else test. Measured here (2 ranks, 2 cores, native/dist/README.md): blocking with
// Open MPI yielding when idle moved 25 MB at 2-3 GB/s against 1.3-1.7 for test, and trained the
// MLP as fast; blocking without yielding took the cores from the engine's workers (MLP steps
// 1.2-2.5x slower).
enum class ProgressChoice { kAuto, kBlocking, kTest };
ProgressChoice progress_from_env() {
  const char* v = std::getenv("ASYNCND_DIST_PROGRESS");
  const std::string s = v ? v : "";
  if (s.empty()) return ProgressChoice::kAuto;
  if (s == "test") return ProgressChoice::kTest;
  if (s == "blocking") return ProgressChoice::kBlocking;
  throw Error("ASYNCND_DIST_PROGRESS: expected 'test' or 'blocking', got '" + s + "'");
}

double timeout_from_env() {
  const char* v = std::getenv("ASYNCND_DIST_TIMEOUT_S");
  if (!v || !*v) return 300.0;
  return static_cast<double>(
      asyncnd::detail::parse_env_uint("ASYNCND_DIST_TIMEOUT_S", v, 1, 7 * 24 * 3600, "seconds"));
}

enum class Kind { kAllreduce, kBroadcast };

// The steps of an allreduce or broadcast of n floats at p, in pieces that fit an int count.
void add_steps(Request& r, Kind kind, float* p, std::int64_t n, int root) {
  for (std::int64_t off = 0; off < n || (n == 0 && off == 0); off += kMaxPiece) {
    float* q = p + off;
    const int len = static_cast<int>(std::min(kMaxPiece, n - off));
    if (kind == Kind::kAllreduce) {
      r.steps.push_back([q, len](MPI_Comm c, MPI_Request* req) {
        return req ? MPI_Iallreduce(MPI_IN_PLACE, q, len, MPI_FLOAT, MPI_SUM, c, req)
                   : MPI_Allreduce(MPI_IN_PLACE, q, len, MPI_FLOAT, MPI_SUM, c);
      });
    } else {
      r.steps.push_back([q, len, root](MPI_Comm c, MPI_Request* req) {
        return req ? MPI_Ibcast(q, len, MPI_FLOAT, root, c, req)
                   : MPI_Bcast(q, len, MPI_FLOAT, root, c);
      });
    }
    if (n == 0) break;
  }
}

// A collective pushed as an engine op. It owns its sequence number from the push on: if the op
// never runs (an input was poisoned by an earlier failure, so the engine skips it), the
// destructor still takes part in the collective, with NaNs in a scratch buffer, so that the
// other ranks do not hang and see that something failed; this rank rethrows the original error
// at its next wait.
struct Ticket {
  Comm* comm;
  std::uint64_t seq;
  Kind kind;
  std::int64_t n;
  Reduce op;
  int root;
  std::string what;
  bool submitted = false;

  Request request() const {
    Request r;
    r.seq = seq;
    r.what = what;
    return r;
  }

  void submit(float* p, Completion done) {
    submitted = true;
    Request r = request();
    add_steps(r, kind, p, n, root);
    if (kind == Kind::kAllreduce) {
      r.bytes_reduced = static_cast<std::uint64_t>(n) * sizeof(float);
      if (op == Reduce::kMean && comm->size() > 1) {
        const float inv = 1.0f / static_cast<float>(comm->size());
        const bool pow2 = (comm->size() & (comm->size() - 1)) == 0;
        const float size = static_cast<float>(comm->size());
        std::int64_t count = n;
        // Multiplying by 1/size is exact for a power of two; otherwise divide, as the serial
        // reference (sum / size) does.
        r.after = [p, count, inv, pow2, size] {
          if (pow2) {
            for (std::int64_t i = 0; i < count; ++i) p[i] *= inv;
          } else {
            for (std::int64_t i = 0; i < count; ++i) p[i] /= size;
          }
        };
      }
    }
    auto c = std::make_shared<Completion>(std::move(done));  // std::function needs copies
    r.done = [c](const std::string* error) {
      if (error) c->fail(*error);
      else c->done();
    };
    comm->submit(std::move(r));
  }

  ~Ticket() {
    if (submitted) return;
    Request r = request();
    auto scratch = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n),
                                                        std::numeric_limits<float>::quiet_NaN());
    add_steps(r, kind, scratch->data(), n, root);
    r.done = [scratch](const std::string*) {};  // keeps the buffer alive until the end
    comm->submit(std::move(r));
  }
};

// Collectives take their sequence numbers in push order on the pushing thread; on a worker the
// number would be taken at a time that differs between ranks (and a blocking one would hold it).
void check_not_in_op(const char* op) {
  if (Engine::on_worker_thread())
    throw Error(std::string(op) + ": called from inside an op; collectives must be called from "
                                  "the thread that pushes them");
}

void check_array(const char* op, const NDArray& a) {
  if (!a.defined()) throw Error(std::string(op) + ": array is empty (default-constructed)");
  if (!a.device().is_cpu())
    throw Error(std::string(op) + ": array " + shape_str(a.shape()) + " is on " +
                a.device().str() +
                ": collectives take CPU arrays; copy it with a.copy_to(Device::cpu()) first");
}

void push_collective(const char* op_name, NDArray& a, Kind kind, Reduce op, int root,
                     std::string what) {
  Comm& c = comm(op_name);
  check_not_in_op(op_name);
  // An in-place write like +=: refused on an array autograd records, and counted, so that a
  // backward that would read the old values refuses (autograd.h, "In place").
  asyncnd::detail::check_inplace_allowed(op_name, a, nullptr);
  asyncnd::detail::bump_version(a);
  auto ticket = std::make_shared<Ticket>();
  ticket->comm = &c;
  ticket->kind = kind;
  ticket->n = a.size();
  ticket->op = op;
  ticket->root = root;
  ticket->seq = c.next_seq();
  ticket->what = std::move(what);
  // The storage of a CPU array, written by this op only while it runs (it declares the write).
  float* p = const_cast<float*>(a.unsafe_data());
  PushOptions o;
  o.name = op_name;
  // Ahead of queued compute: handing over to the communication thread takes microseconds, and
  // the sooner it has the collective, the sooner the other ranks' wait ends.
  o.priority = kCollectivePriority;
  engine().push_async([ticket, p](Completion done) { ticket->submit(p, std::move(done)); }, {},
                      {a.var()}, o);
}

// Runs a blocking collective on the communication thread, in sequence.
void run_blocking(const char* op, Request r) {
  check_not_in_op(op);
  Comm& c = comm(op);
  r.seq = c.next_seq();
  std::promise<std::string> result;
  std::future<std::string> f = result.get_future();
  r.done = [&result](const std::string* error) { result.set_value(error ? *error : ""); };
  c.submit(std::move(r));
  const std::string error = f.get();
  if (!error.empty()) throw Error(std::string(op) + ": " + error);
}

// Ranks on one machine share its cores. Left alone, each rank's OpenBLAS takes every core and
// its engine one worker per core but one: 2 ranks on 2 cores ran 4 BLAS threads and 2 workers,
// and the MLP's step was 8-15% slower, its ranks further apart (bench/notes/dist.md, "Results
// (2026-11-25, 07:03-07:07 UTC)"). torchrun sets OMP_NUM_THREADS=1 for the same reason. Before
// the engine starts (it reads these once); a user's own setting wins.
//
// Each rank's share: detail::rank_cpu_share. Unbound ranks (mpirun --bind-to none) all hold every
// CPU of their mask, so each gets those CPUs over the ranks; ranks that mpirun bound (Open MPI's
// default: to a core for 2 ranks or fewer, else to a socket or NUMA domain) keep what they were
// given, which dividing again would leave idle. Ranks in one container split its CPU quota.
void share_cores_among_local_ranks() {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
      MPI_SUCCESS)
    return;
  int local = 1;
  MPI_Comm_size(node, &local);
  if (local <= 1) {
    MPI_Comm_free(&node);
    return;
  }
  const CpuLimit limit = program_cpu_limit();
  // Masks of up to 1024 CPUs (cpu_set_t); beyond, or where one cannot be read, the CPUs this
  // process may use over the local ranks.
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const int got = ::sched_getaffinity(0, sizeof mine, &mine) == 0 ? 1 : 0;
  int all_got = 0;
  MPI_Allreduce(&got, &all_got, 1, MPI_INT, MPI_MIN, node);
  int n = std::max(1, limit.cpus / local);
  if (all_got) {
    std::vector<cpu_set_t> masks(static_cast<std::size_t>(local));
    if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, masks.data(), sizeof mine, MPI_BYTE, node) ==
        MPI_SUCCESS)
      n = detail::rank_cpu_share(mine, masks, limit.quota);
  }
  MPI_Comm_free(&node);
  // A count the user gave OpenBLAS (OMP_NUM_THREADS=1, as torchrun sets) wins, as it does alone.
  if (!asyncnd::detail::openblas_threads_in_env())
    setenv("ASYNCND_BLAS_THREADS", std::to_string(n).c_str(), 0);
  setenv("ASYNCND_CPU_WORKERS", std::to_string(std::max(1, n - 1)).c_str(), 0);
  // The share's frontend core serves large maps, as a lone process's does: a worker count set,
  // as here, gets no chunk helper unless asked (EngineOptions::cpu_chunk_helpers).
  setenv("ASYNCND_CPU_HELPERS", n > 1 ? "1" : "0", 0);
}

}  // namespace

void init() {
  int argc = 0;
  char** argv = nullptr;
  init(argc, argv);
}

void init(int& argc, char**& argv) {
  static const char* kOp = "dist::init";
  if (g_comm) throw Error(std::string(kOp) + ": called twice");
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_finalized || finalized)  // MPI_Init_thread would abort the job
    throw Error(std::string(kOp) + ": MPI was finalized already in this process (by "
                                   "dist::finalize or the program), and cannot start again");
  const double timeout = timeout_from_env();
  const ProgressChoice choice = progress_from_env();
  const char* check_env = std::getenv("ASYNCND_DIST_CHECK");
  const bool check =
      check_env && *check_env &&
      asyncnd::detail::parse_env_uint("ASYNCND_DIST_CHECK", check_env, 0, 1, "a switch") == 1;
  int already = 0;
  MPI_Initialized(&already);
  int provided = MPI_THREAD_SINGLE;
  if (already) {
    MPI_Query_thread(&provided);
  } else {
    if (choice != ProgressChoice::kTest) {
      // Open MPI's blocking calls spin; with ranks sharing cores with the engine's workers, let
      // them yield when nothing progresses (a user's own setting wins).
      setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    }
    const int requested =
        choice == ProgressChoice::kTest ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
    if (MPI_Init_thread(&argc, &argv, requested, &provided) != MPI_SUCCESS)
      throw Error(std::string(kOp) + ": MPI_Init_thread failed");
    g_we_initialised_mpi = true;
  }
  // One thread calls MPI at a time, but not always the same one (main, then ours): SERIALIZED.
  // Blocking progress: MULTIPLE, so that the watchdog can abort while the other thread blocks.
  const bool blocking = choice == ProgressChoice::kBlocking ||
                        (choice == ProgressChoice::kAuto && provided >= MPI_THREAD_MULTIPLE);
  const detail::Progress progress = blocking ? detail::Progress::kBlocking : detail::Progress::kTest;
  const int needed = blocking ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
  if (provided < needed) {
    if (g_we_initialised_mpi) {  // not left running for nobody to finalise
      MPI_Finalize();
      g_we_initialised_mpi = false;
      g_finalized = true;
    }
    throw Error(std::string(kOp) + ": MPI provides " + thread_level_name(provided) +
                ", asyncnd::dist needs " + thread_level_name(needed) +
                (needed == MPI_THREAD_MULTIPLE ? " for ASYNCND_DIST_PROGRESS=blocking"
                                               : " (its communication thread calls MPI)"));
  }
  share_cores_among_local_ranks();
  if (progress == detail::Progress::kTest) {
    // The communicator the collectives run on returns errors as codes (Comm), which become the
    // op's error. But Open MPI 4.1 reports a failed nonblocking collective, found by MPI_Test, on
    // MPI_COMM_WORLD, whose default handler aborts the job: two ranks whose allreduces differed
    // in size ended with Open MPI's MPI_ERR_TRUNCATE banner instead of the op's error. So world
    // returns codes too until finalize (a program's own calls on it as well; documented in dist.h).
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &g_world_errhandler);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  g_comm = std::make_unique<Comm>(MPI_COMM_WORLD, timeout, progress);
  g_comm->set_check(check);
}

void finalize() {
  if (!g_comm) return;
  try {
    engine().waitall();  // every collective pushed so far is handed to the thread (or skipped)
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asyncnd dist: rank %d: dist::finalize: an op failed: %s\n",
                 g_comm->rank(), e.what());
  }
  g_comm.reset();  // the thread finishes what was submitted, then stops
  if (g_world_errhandler != MPI_ERRHANDLER_NULL) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, g_world_errhandler);
    MPI_Errhandler_free(&g_world_errhandler);  // the reference MPI_Comm_get_errhandler gave
    g_world_errhandler = MPI_ERRHANDLER_NULL;
  }
  if (g_we_initialised_mpi) {
    MPI_Finalize();
    g_we_initialised_mpi = false;
    g_finalized = true;
  }
}

bool initialized() { return g_comm != nullptr; }

Guard::~Guard() {
  if (std::uncaught_exceptions() > 0 && g_comm) {
    // This rank is failing; the others may wait in a collective for it forever. End the job.
    std::fprintf(stderr,
                 "asyncnd dist: rank %d of %d: an exception is unwinding past dist::Guard; "
                 "calling MPI_Abort (catch, print and rethrow inside the Guard's scope to see it)\n",
                 g_comm->rank(), g_comm->size());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  finalize();
}

int rank() { return comm("dist::rank").rank(); }
int size() { return comm("dist::size").size(); }

const char* reduce_name(Reduce op) { return op == Reduce::kSum ? "sum" : "mean"; }

void allreduce(NDArray& a, Reduce op) {
  static const char* kOp = "dist_allreduce";
  comm("dist::allreduce");
  check_array("dist::allreduce", a);
  if (op != Reduce::kSum && op != Reduce::kMean)
    throw Error("dist::allreduce: unknown Reduce " + std::to_string(static_cast<int>(op)) +
                " (expected Reduce::kSum or kMean)");
  push_collective(kOp, a, Kind::kAllreduce, op, 0,
                  std::string("allreduce(") + reduce_name(op) + ") of " + shape_str(a.shape()) +
                      " float32");
}

void broadcast(NDArray& a, int root) {
  static const char* kOp = "dist_broadcast";
  Comm& c = comm("dist::broadcast");
  check_array("dist::broadcast", a);
  if (root < 0 || root >= c.size())
    throw Error("dist::broadcast: root " + std::to_string(root) + " is not a rank (size " +
                std::to_string(c.size()) + ")");
  push_collective(kOp, a, Kind::kBroadcast, Reduce::kSum, root,
                  "broadcast(root " + std::to_string(root) + ") of " + shape_str(a.shape()) +
                      " float32");
}

void barrier() {
  Request r;
  r.what = "barrier";
  r.steps.push_back(
      [](MPI_Comm c, MPI_Request* q) { return q ? MPI_Ibarrier(c, q) : MPI_Barrier(c); });
  run_blocking("dist::barrier", std::move(r));
}

std::vector<std::string> allgather_strings(const std::string& text) {
  static const char* kOp = "dist::allgather_strings";
  const int n = comm(kOp).size();
  // A text too long for an int count takes part with length -1, so that every rank learns it
  // and throws (a rank that threw alone left the others waiting in the collective).
  const bool too_long = text.size() > static_cast<std::size_t>(std::numeric_limits<int>::max());
  // Lengths first, then the bytes: two steps of one request, so nothing comes in between.
  auto mine = std::make_shared<int>(too_long ? -1 : static_cast<int>(text.size()));
  auto lengths = std::make_shared<std::vector<int>>(static_cast<std::size_t>(n));
  auto offsets = std::make_shared<std::vector<int>>(static_cast<std::size_t>(n));
  auto bytes = std::make_shared<std::vector<char>>();
  Request r;
  r.what = "allgather of strings";  // the same on every rank, whatever the lengths
  r.steps.push_back([mine, lengths](MPI_Comm c, MPI_Request* q) {
    return q ? MPI_Iallgather(mine.get(), 1, MPI_INT, lengths->data(), 1, MPI_INT, c, q)
             : MPI_Allgather(mine.get(), 1, MPI_INT, lengths->data(), 1, MPI_INT, c);
  });
  r.steps.push_back([&text, lengths, offsets, bytes](MPI_Comm c, MPI_Request* q) {
    long long total = 0;
    for (std::size_t i = 0; i < lengths->size(); ++i) {
      if ((*lengths)[i] < 0) return static_cast<int>(MPI_SUCCESS);  // every rank throws below
      (*offsets)[i] = static_cast<int>(total);
      total += (*lengths)[i];
    }
    if (total > std::numeric_limits<int>::max()) return static_cast<int>(MPI_ERR_COUNT);
    bytes->resize(static_cast<std::size_t>(total));
    const int n = static_cast<int>(text.size());
    return q ? MPI_Iallgatherv(text.data(), n, MPI_CHAR, bytes->data(), lengths->data(),
                               offsets->data(), MPI_CHAR, c, q)
             : MPI_Allgatherv(text.data(), n, MPI_CHAR, bytes->data(), lengths->data(),
                              offsets->data(), MPI_CHAR, c);
  });
  run_blocking(kOp, std::move(r));
  for (int i = 0; i < n; ++i) {
    if ((*lengths)[static_cast<std::size_t>(i)] < 0)
      throw Error(std::string(kOp) + ": rank " + std::to_string(i) +
                  "'s text is longer than an MPI count (2^31 - 1 bytes)");
  }
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.emplace_back(bytes->data() + (*offsets)[static_cast<std::size_t>(i)],
                     static_cast<std::size_t>((*lengths)[static_cast<std::size_t>(i)]));
  return out;
}

Stats stats() { return comm("dist::stats").stats(); }

void mark(const char* name) {
  static Var v = engine().new_var();  // never deleted: marks are ordered among themselves only
  PushOptions o;
  o.name = name;
  engine().push([] {}, {}, {v}, o);
}

Overlap overlap(const std::vector<ProfileEvent>& events, const char* begin, const char* end) {
  // The push-time windows between begin and end marks.
  std::vector<std::pair<double, double>> windows;
  double open = -1;
  for (const ProfileEvent& e : events) {
    if (e.name == begin) open = e.push_us;
    if (e.name == end && open >= 0) {
      windows.emplace_back(open, e.push_us);
      open = -1;
    }
  }
  auto marked = [&](const ProfileEvent& e) {
    if (e.name == begin || e.name == end) return false;
    for (const auto& w : windows)
      if (e.push_us >= w.first && e.push_us <= w.second) return true;
    return false;
  };
  // An allreduce op starts when the engine hands it to the communication thread, which issues
  // collectives one at a time in sequence order (their completion order): one handed over while
  // an earlier one ran waited for it. Its time on the thread starts when the earlier one ended.
  std::vector<const ProfileEvent*> coll;
  for (const ProfileEvent& e : events)
    if (e.name == "dist_allreduce" || e.name == "dist_broadcast") coll.push_back(&e);
  std::sort(coll.begin(), coll.end(),
            [](const ProfileEvent* x, const ProfileEvent* y) { return x->end_us < y->end_us; });
  Overlap out;
  double previous_end = -1e300;
  for (const ProfileEvent* c : coll) {
    const ProfileEvent& a = *c;
    const double start = std::max(a.start_us, std::min(previous_end, a.end_us));
    previous_end = a.end_us;
    if (a.name != "dist_allreduce") continue;
    out.comm_us += a.end_us - start;
    std::vector<std::pair<double, double>> cover;  // a's time covered by marked ops
    for (const ProfileEvent& e : events)
      if (marked(e) && e.start_us < a.end_us && start < e.end_us)
        cover.emplace_back(std::max(e.start_us, start), std::min(e.end_us, a.end_us));
    std::sort(cover.begin(), cover.end());
    double reach = start;
    for (const auto& c : cover) {
      const double from = std::max(c.first, reach);
      if (c.second > from) {
        out.hidden_us += c.second - from;
        reach = c.second;
      }
    }
  }
  return out;
}

namespace detail {
Comm& comm_for_testing() { return comm("dist::detail::comm_for_testing"); }

int rank_cpu_share(const cpu_set_t& mine, const std::vector<cpu_set_t>& local, double quota) {
  double share = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &mine)) continue;
    int holders = 0;
    for (const cpu_set_t& m : local) holders += CPU_ISSET(c, &m) ? 1 : 0;
    share += 1.0 / std::max(1, holders);
  }
  if (quota > 0 && !local.empty()) share = std::min(share, quota / static_cast<double>(local.size()));
  return std::max(1, static_cast<int>(share + 1e-9));
}
}  // namespace detail

}  // namespace dist
}  // namespace asyncnd
