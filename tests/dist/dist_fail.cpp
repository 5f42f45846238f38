// Programs that fail on purpose, run by ctest dist_fail_* through cmake/mpi_expect_failure.cmake,
// which checks that the whole job exits non-zero within seconds with the expected message.
//   throw: rank 1 throws out of main while rank 0 waits for an allreduce that needs rank 1.
//   guard: the same, but the exception unwinds through dist::Guard to a catch in main: printed
//          and rethrown inside the Guard's scope, as native/dist/README.md shows, since the catch
//          further up never runs (the Guard aborts the job first).
//   skip:  rank 1 skips a collective; rank 0's watchdog (ASYNCND_DIST_TIMEOUT_S) aborts the job.
//   mismatch: the ranks' allreduces differ in size (no ASYNCND_DIST_CHECK): rank 0, which receives
//          more than it expects, gets MPI_ERR_TRUNCATE as the op's error, prints it and exits 1
//          (in either progress mode: with "test" it was Open MPI's fatal handler on MPI_COMM_WORLD).
//   reinit: init after finalize, which MPI cannot do: an asyncnd::Error (it was Open MPI's abort
//          from inside MPI_Query_thread), printed, then exit 1 on every rank.
#include <asyncnd/asyncnd.h>
#include <asyncnd/dist.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

using namespace asyncnd;

namespace {

void rank0_waits() {
  NDArray a = nd::ones({1000});
  dist::allreduce(a);
  a.wait_to_read();  // never returns: rank 1 is not there
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "throw") {
    dist::init(argc, argv);
    if (dist::rank() == 1) throw std::runtime_error("dist_fail: rank 1 throws");
    rank0_waits();
  } else if (mode == "guard") {
    try {
      dist::Guard mpi(argc, argv);
      try {
        if (dist::rank() == 1) throw std::runtime_error("dist_fail: rank 1 throws");
        rank0_waits();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", dist::rank(), e.what());
        throw;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "never printed: the Guard aborts the job first: %s\n", e.what());
      return 1;
    }
  } else if (mode == "mismatch") {
    dist::init(argc, argv);
    NDArray a = nd::ones({dist::rank() == 0 ? 5 : 7});
    dist::allreduce(a);
    try {
      a.wait_to_read();
    } catch (const Error& e) {
      std::fprintf(stderr, "rank %d caught: %s\n", dist::rank(), e.what());
      std::fflush(stderr);
      std::_Exit(1);  // mpirun ends the job; another rank may be waiting in the collective
    }
    std::this_thread::sleep_for(std::chrono::seconds(60));
  } else if (mode == "skip") {
    dist::Guard mpi(argc, argv);
    NDArray a = nd::ones({1000});
    dist::allreduce(a);  // #0 on every rank
    if (dist::rank() != 1) dist::allreduce(a);  // #1: rank 1 skips it
    a.wait_to_read();
    std::this_thread::sleep_for(std::chrono::seconds(60));
  } else if (mode == "reinit") {
    dist::init(argc, argv);
    dist::finalize();
    try {
      dist::init(argc, argv);
    } catch (const Error& e) {
      std::fprintf(stderr, "caught: %s\n", e.what());
      return 1;
    }
  } else {
    std::fprintf(stderr, "dist_fail: mode throw, guard, skip, mismatch or reinit\n");
    return 2;
  }
  return 0;
}
