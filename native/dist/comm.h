// The communication thread: the one thread of a process that calls MPI between dist::init and
// dist::finalize. Collectives arrive in any order (as the engine runs their ops) and are issued
// strictly in sequence-number order. Two ways to run them (Progress): blocking MPI calls, with a
// watchdog thread that aborts the job when one does not complete in time (needs
// MPI_THREAD_MULTIPLE: it calls MPI_Abort while the other thread is inside MPI); or nonblocking
// ones driven to completion with MPI_Test, the watchdog in the same loop (SERIALIZED suffices).
// dist.cpp chooses (ASYNCND_DIST_PROGRESS); native/dist/README.md has the measurements.
#pragma once

#include <mpi.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "asyncnd/dist.h"

namespace asyncnd {
namespace dist {
namespace detail {

// One MPI call of a collective: given a request it starts the nonblocking form, given null it
// makes the blocking call. Returns an MPI error code.
using Step = std::function<int(MPI_Comm, MPI_Request*)>;

// One collective as the communication thread runs it.
struct Request {
  std::uint64_t seq = 0;
  std::string what;  // "allreduce(sum) of 1000 float32": in errors and the watchdog's message
  // Issued one after the other, each awaited (a large allreduce is several MPI calls; an
  // allgather of strings is lengths, then bytes).
  std::vector<Step> steps;
  std::function<void()> after;                       // on success, before done
  std::function<void(const std::string* error)> done;  // always called once; error or null
  std::uint64_t bytes_reduced = 0;
};

enum class Progress { kBlocking, kTest };

class Comm {
 public:
  // Duplicates `world` for our own traffic and starts the thread (and, blocking, the watchdog).
  // timeout_s: the watchdog's.
  Comm(MPI_Comm world, double timeout_s, Progress progress);
  // Stops the thread once every submitted request ran, then frees the communicator.
  ~Comm();

  int rank() const { return rank_; }
  int size() const { return size_; }
  double timeout_s() const { return timeout_s_; }

  // The next sequence number, taken at push time. Atomic, but only one thread pushing
  // collectives gives the same order on every rank.
  std::uint64_t next_seq() { return allocated_.fetch_add(1); }
  // Hands a request over (any thread). It runs once every smaller sequence number has run.
  void submit(Request r);
  Stats stats();
  // Testing aid: the next collective fails with this MPI error code on this rank instead of
  // being issued (every rank must inject, or the others wait for it).
  void inject_error(int code) { inject_error_.store(code); }
  // ASYNCND_DIST_CHECK: before each collective, an allgather of every rank's description of it;
  // if they differ, the collective fails on every rank, naming both. Every rank must set the same.
  void set_check(bool on) { check_.store(on); }

 private:
  void loop();
  // Runs r's steps; returns an error message or "" on success.
  std::string run(Request& r);
  // Runs one step to completion (blocking, or driven by MPI_Test); its MPI error code.
  int complete(const Step& step, const Request& r, std::chrono::steady_clock::time_point t0);
  // The ASYNCND_DIST_CHECK allgather; sets `differs` to the message when the ranks disagree.
  int check(const Request& r, std::chrono::steady_clock::time_point t0, std::string& differs);
  [[noreturn]] void watchdog_abort(std::uint64_t seq, const std::string& what, double waited_s);
  void watchdog_loop();  // Progress::kBlocking

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  Progress progress_;
  std::atomic<std::uint64_t> allocated_{0};

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, Request> waiting_;  // submitted, not yet issued
  std::uint64_t next_issue_ = 0;
  bool stop_ = false;
  Stats stats_;
  std::atomic<int> inject_error_{0};
  std::atomic<bool> check_{false};
  // The collective running now, for the watchdog (under mu_): its sequence number, description
  // and start; running_ is false between collectives.
  bool running_ = false;
  std::uint64_t running_seq_ = 0;
  std::string running_what_;
  std::chrono::steady_clock::time_point running_since_;
  std::condition_variable watchdog_cv_;
  std::thread thread_, watchdog_;
};

// The process's communication thread (dist::init made it); throws asyncnd::Error before init.
Comm& comm_for_testing();

// A rank's share of its machine's CPUs, for its BLAS threads and engine workers (dist::init): each
// CPU of its affinity mask `mine` counts 1 / (the masks in `local`, every local rank's, this one's
// included, that hold it); with a cgroup CPU quota (`quota` CPUs, 0 = none) at most quota over the
// local ranks. Rounded down, at least 1.
int rank_cpu_share(const cpu_set_t& mine, const std::vector<cpu_set_t>& local, double quota);

}  // namespace detail
}  // namespace dist
}  // namespace asyncnd
