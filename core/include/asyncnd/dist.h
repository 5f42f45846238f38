// asyncnd::dist: data-parallel training over MPI. Several processes (ranks), each with its own
// engine, run the same program on their share of the batch; collectives (allreduce, broadcast)
// are engine ops that return at once and order against the ops around them like any other.
//
//   int main(int argc, char** argv) {
//     dist::Guard mpi(argc, argv);              // MPI_Init_thread ... MPI_Finalize
//     NDArray g = ...;
//     dist::allreduce(g, dist::Reduce::kMean);  // queued; g is averaged over the ranks
//     g.wait_to_read();                         // rethrows an MPI error of that collective
//   }
//
// Native builds with MPI only (CMake ASYNCND_WITH_MPI): declared in every build, defined in the
// library asyncnd::dist (link it; it brings MPI). The WebAssembly build has none of this.
//
// Ordering without a coordinator: every rank runs the same program, so each collective gets a
// sequence number when it is pushed, and one communication thread per process issues the
// collectives strictly in that order (blocking MPI calls where MPI provides MPI_THREAD_MULTIPLE,
// else nonblocking ones driven with MPI_Test: see init). So:
// push collectives from one thread, in the same order on every rank (as with MPI itself). The
// thread never holds an engine worker: a collective is an Engine::push_async op.
//
// Failures are loud: an MPI error becomes the op's error (rethrown at the next wait); a
// collective that does not complete within ASYNCND_DIST_TIMEOUT_S seconds (default 300) makes a
// watchdog thread print the collective's name and sequence number on stderr and call MPI_Abort,
// which ends every rank of the job. Collectives that differ between ranks (size, root, order) are
// the caller's error, as in MPI: ASYNCND_DIST_CHECK=1 (init) catches them; without it MPI may
// report one, or give wrong values, or a later collective hangs until the watchdog.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "asyncnd/ndarray.h"
#include "asyncnd/nn.h"

namespace asyncnd {
namespace dist {

// Initialises MPI (asking for MPI_THREAD_MULTIPLE, needing MPI_THREAD_SERIALIZED), starts the
// communication thread and reads ASYNCND_DIST_TIMEOUT_S and ASYNCND_DIST_PROGRESS: "blocking"
// (blocking collectives, a watchdog thread; needs MULTIPLE), "test" (nonblocking collectives
// driven with MPI_Test; SERIALIZED suffices), unset: blocking where MPI provides MULTIPLE. When
// it initialises MPI itself with blocking progress possible (not "test"), sets
// OMPI_MCA_mpi_yield_when_idle=1 for Open MPI unless already set (its blocking calls then yield
// the core to the engine's workers). ASYNCND_DIST_CHECK=1 (the same on every rank): before each
// collective, every rank's description of it (the op, its shape, the root) is allgathered, and if
// they differ the collective fails on every rank naming both (a debugging aid: one more small
// collective each). Ranks on one machine share its cores: where there are several, each gets its
// share (each CPU of its affinity mask over the local ranks whose masks hold it, and at most the
// cgroup's CPU quota over the local ranks; native/dist/README.md), as ASYNCND_BLAS_THREADS and
// ASYNCND_CPU_WORKERS (that share less one, at least one), unless the user set those; call init
// before the first array, which starts the engine with them. If the program already initialised
// MPI, uses it (it must provide the level) and leaves finalising it to the program. With "test"
// progress, MPI_COMM_WORLD's error handler is MPI_ERRORS_RETURN from init to finalize, which
// puts the previous one back: Open MPI reports a failed nonblocking collective there, and its
// default handler would end the job instead of failing the op (the program's own calls on
// MPI_COMM_WORLD get error codes back meanwhile). Main thread, once. Throws
// asyncnd::Error if called twice, after MPI was finalized (MPI cannot start again in a process),
// if MPI provides too low a thread level (naming it; MPI is finalized again if init started it),
// or for a bad variable.
void init(int& argc, char**& argv);
void init();  // the same without the command line
// Waits for every queued op (engine().waitall(); an error it rethrows is printed to stderr, not
// thrown), stops the communication thread, then MPI_Finalize (if init initialised MPI). Blocks.
// No-op if not initialised.
void finalize();
bool initialized();

// RAII: init() in the constructor, finalize() in the destructor. Destroyed while an exception
// unwinds the stack (one rank failed, the others may be waiting in a collective), it calls
// MPI_Abort instead, so that the whole job exits non-zero at once instead of hanging. That happens
// before a catch outside the Guard's scope runs, so the exception's message would be lost: catch,
// print and rethrow it inside the Guard's scope (native/dist/README.md, "Failures are loud").
class Guard {
 public:
  Guard(int& argc, char**& argv) { init(argc, argv); }
  Guard() { init(); }
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
};

// This process's rank in [0, size()), and the number of ranks. Throw asyncnd::Error before init.
int rank();
int size();

// Blocks until every rank reached its barrier. Issued in sequence after the collectives pushed
// before it; it does not wait for local ops (call nd::waitall() first for that). Rethrows an MPI
// error. Not from inside an op.
void barrier();

// The engine priority of collective ops (and of the trainer's copies into its buckets): ahead of
// queued compute, so that communication starts as early as its inputs allow.
inline constexpr int kCollectivePriority = 1 << 20;

enum class Reduce { kSum, kMean };
// "sum", "mean".
const char* reduce_name(Reduce op);

// In place, queued (returns at once): a becomes the elementwise sum (or mean) of a over every
// rank. An op that writes a's variable: it runs after earlier ops on a, later ops see the result.
// Every rank must call it with an array of the same size, in the same order. CPU arrays only:
// copy a GPU array to the CPU first (DistributedTrainer does this for its gradients). Throws
// asyncnd::Error before init, for an empty array or a GPU array, an unknown Reduce, from inside
// an op, and for an array autograd is recording (an in-place write, as +=; autograd.h), queuing
// nothing.
void allreduce(NDArray& a, Reduce op = Reduce::kSum);
// In place, queued: a takes root's values on every rank. Same rules as allreduce; throws also for
// a root outside [0, size()).
void broadcast(NDArray& a, int root = 0);

// Blocking, collective: every rank passes its own `text`; returns every rank's, indexed by rank.
// Issued in sequence like the others. (The trainer checks its parameter layout with it.)
std::vector<std::string> allgather_strings(const std::string& text);

// What this process's communication thread has done since init.
struct Stats {
  std::uint64_t collectives = 0;  // issued and completed
  std::uint64_t bytes_reduced = 0;  // payload of allreduce collectives, summed
  double comm_seconds = 0;          // time from issuing each collective to its completion, summed
};
Stats stats();

// Measuring how much communication hides behind compute, from the profiler's events
// (Engine::profile_events). mark(name) queues an empty op named `name` (a string literal) that
// writes a variable of its own: its push time marks where the program was. overlap() sums the
// time the allreduce ops ran, and the part of it during which at least one op pushed between a
// `begin` mark and the following `end` mark (e.g. around backward()) ran too. An allreduce runs
// from when the communication thread could issue it: its op's start, or the end of the
// collective before it (the thread issues them one at a time, in order), to its op's end.
void mark(const char* name);
struct Overlap {
  double comm_us = 0;    // allreduce ops, summed
  double hidden_us = 0;  // of which, while a marked op ran
  double fraction() const { return comm_us > 0 ? hidden_us / comm_us : 0.0; }
};
Overlap overlap(const std::vector<ProfileEvent>& events, const char* begin, const char* end);

}  // namespace dist

namespace nn {

struct DistributedOptions {
  // Gradient buckets (PyTorch DDP's defaults and rule): parameters are taken in reverse order
  // (the order backward produces their gradients) into flat buckets; a bucket closes as soon as
  // it holds at least its cap, bucket_bytes, or first_bucket_bytes for the first one so that
  // communication starts early. So the parameter that crosses the cap is the bucket's last.
  std::size_t bucket_bytes = 25u << 20;
  std::size_t first_bucket_bytes = 1u << 20;
  // The rank whose initial parameters every rank takes.
  int root = 0;
};

// SGD for data-parallel training (Horovod's DistributedTrainer, PyTorch's DDP): each rank
// computes gradients on its share of the batch; step() sums them over the ranks, one allreduce
// per bucket, and applies w -= lr * summed_grad / global_batch (the ranks' batch sizes summed, at
// the end of the first bucket), all queued: SGD on the whole batch, also where the shares
// differ. Because backward() only queues, a bucket's allreduce starts the moment backward has
// written its last gradient, while the rest of backward still runs: communication overlaps
// backward. Priorities make the buckets' copies run ahead of queued backward ops and the first
// layers' updates (which the next forward pass needs first) run first. After step(), p.grad()
// holds the averaged gradient (GPU gradients go through host memory: copy, allreduce, copy back,
// all queued).
//
// With one rank it computes exactly what nn::SGD does, refusing stale gradients as it does.
// Thread safety: one thread, the one that pushes the rank's collectives.
class DistributedTrainer {
 public:
  // Collective and blocking, on every rank: checks that every rank has the same parameters (the
  // same shapes and devices, in the same order; names are only reported, since each process
  // numbers its layers itself) and throws asyncnd::Error on every rank, saying what differs, if
  // not; then broadcasts the root's values (queued). Throws asyncnd::Error, on every rank, if a
  // parameter is not initialised yet (run a forward pass first, or give Dense its in_units), and
  // for arguments wrong on any rank (an empty parameter handle, a bucket size of 0, a root that
  // is not a rank, a learning rate that is not finite), naming the rank. A moved-from trainer
  // throws at every call.
  DistributedTrainer(std::vector<Parameter> params, float learning_rate,
                     DistributedOptions options = {});
  ~DistributedTrainer();
  DistributedTrainer(DistributedTrainer&&) noexcept;
  DistributedTrainer& operator=(DistributedTrainer&&) noexcept;

  // Queues the gradient allreduces and the updates; returns at once. batch_size: this rank's
  // batch (the ranks' may differ, as in an epoch's last batch). Throws asyncnd::Error, queuing
  // nothing, after dist::finalize or inside an autograd Record (the update is in place, as
  // nn::SGD's). A batch_size <= 0 throws too, and so does a stale gradient (nn::SGD's rule: one
  // that nothing wrote since this trainer was made or last stepped; there is no skipping it
  // here, since every rank must apply the same update), after queuing this step's collectives so
  // that the other ranks' are matched: their updates then fail (the error rethrown at their next
  // read of a parameter), and no rank changes a parameter.
  void step(std::int64_t batch_size);
  // Queues a broadcast of the root's parameter values (the constructor does it once).
  void broadcast_parameters();

  float learning_rate() const;
  void set_learning_rate(float lr);  // throws asyncnd::Error, changing nothing, unless finite
  // The buckets: indices into the parameter list, in allreduce order.
  std::vector<std::vector<std::size_t>> buckets() const;
  // Bytes of gradients allreduced by one step (the batch sizes ride along: 8 bytes more).
  std::size_t bytes_per_step() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace nn
}  // namespace asyncnd
