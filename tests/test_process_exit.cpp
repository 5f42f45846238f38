// The process around the engine, which is never torn down (engine.h): exit with GEMMs still
// queued on OpenBLAS, a Completion dropped during exit, and a forked child that drops arrays.
// Exit and fork cannot be undone, so each case runs in a child process: this binary again on a
// hidden test case (run_child), or fork().
#include <catch2/catch.hpp>

#include <asyncnd/asyncnd.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "test_util.h"

using namespace asyncnd;
using asyncnd_test::line_after;
using asyncnd_test::run_child;

// ---- exit with OpenBLAS GEMMs queued ---------------------------------------------------------

TEST_CASE("exit: OpenBLAS GEMMs still queued (child)", "[.][exit-child]") {
  if (!std::getenv("ASYNCND_TEST_EXIT_CHILD")) return;
  NDArray a = nd::random_normal({512, 512});
  for (int i = 0; i < 8; ++i) a = nd::dot(a, a) * 0.01f;  // queued, never waited for
  std::printf("pending=%llu\n", static_cast<unsigned long long>(engine().stats().pending));
  std::fflush(stdout);
  std::exit(0);
}

// OpenBLAS's library destructor frees its buffers and joins its threads while the workers go on
// with what is queued: a worker inside cblas_sgemm then crashed the exit (12 runs of 12 with one
// BLAS thread), or the exit waited for ever. The backend closes OpenBLAS at exit first
// (cpu_backend.cpp, close_blas_at_exit).
TEST_CASE("exit with OpenBLAS GEMMs still queued ends the process cleanly", "[engine][exit]") {
#if !ASYNCND_HAVE_OPENBLAS
  WARN("SKIPPED: built without OpenBLAS");
#elif defined(ASYNCND_TEST_SANITIZED)
  WARN("SKIPPED under the sanitizers: their own exit-time checks run beside the queued work");
#else
  for (int run = 0; run < 2; ++run) {
    int status = 0;
    const std::string out = run_child(
        "ASYNCND_TEST_EXIT_CHILD=1 ASYNCND_GEMM=openblas ASYNCND_BLAS_THREADS=1 timeout 120",
        "exit: OpenBLAS GEMMs still queued (child)", &status);
    INFO(out);
    CHECK(std::stoull("0" + line_after(out, "pending=")) >= 1);  // the exit met queued work
    REQUIRE(status == 0);
  }
#endif
}

// ---- a Completion dropped during exit --------------------------------------------------------

namespace {
std::string dropped_message() {
  Engine& eng = engine();
  Var v = eng.new_var();
  eng.push_async([](Completion) {}, {}, {v});  // the Completion is dropped unused
  try {
    eng.wait_to_read(v);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}
void print_dropped_at_exit() {
  std::printf("at_exit=%s\n", dropped_message().c_str());
  std::fflush(stdout);
}
}  // namespace

TEST_CASE("exit: a Completion dropped in an atexit handler (child)", "[.][exit-child]") {
  if (!std::getenv("ASYNCND_TEST_EXIT_CHILD")) return;
  // Registered before the message's first use: it runs after what that use registers.
  std::atexit(print_dropped_at_exit);
  std::printf("in_main=%s\n", dropped_message().c_str());
  std::fflush(stdout);
  std::exit(0);
}

// The message of a dropped Completion was a function-local static string, destroyed during
// exit while workers and exit handlers could still drop Completions: it read freed memory.
TEST_CASE("a Completion dropped during exit still says so", "[engine][exit]") {
  int status = 0;
  const std::string out = run_child("ASYNCND_TEST_EXIT_CHILD=1 timeout 120",
                                    "exit: a Completion dropped in an atexit handler (child)",
                                    &status);
  INFO(out);
  REQUIRE(status == 0);
  const std::string in_main = line_after(out, "in_main=");
  CHECK(in_main.find("completion dropped without done() or fail()") != std::string::npos);
  CHECK(line_after(out, "at_exit=") == in_main);
}

// ---- a forked child ------------------------------------------------------------------------

// A child made by fork() has none of the engine's threads, and a lock that a parent thread held
// at the fork stays held there: a child that only dropped an array (one in static storage, at its
// exit) hung in the engine's deletion, 4 children of 400 while the parent made and dropped small
// arrays. There, a dropped array is left as it is: the engine is not touched.
TEST_CASE("a forked child drops arrays without touching the engine", "[engine][fork]") {
#if defined(ASYNCND_TEST_SANITIZED)
  WARN("SKIPPED under the sanitizers: fork() beside running threads is theirs to watch");
#else
  NDArray kept = nd::ones({8});
  kept.wait_to_read();
  std::atomic<bool> stop{false};
  std::thread churn([&] {  // the parent's threads take the engine's locks all the time
    NDArray x = nd::ones({16});
    while (!stop.load()) {
      for (int i = 0; i < 64; ++i) x = x + 1.0f;
      x.wait_to_read();
    }
  });
  int hung = 0, failed = 0;
  const int children = 40;
  for (int c = 0; c < children; ++c) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 + (c * 37) % 500));
    const pid_t pid = ::fork();
    if (pid == 0) {
      // In the child: drop a handle and check that nothing was freed (the variable count is the
      // engine's own atomic counter, read without a lock). Exit status 0 = left as it is.
      const std::uint64_t before = engine().stats().live_vars;
      kept = NDArray();
      const std::uint64_t after = engine().stats().live_vars;
      ::_exit(after == before ? 0 : 1);
    }
    REQUIRE(pid > 0);
    int status = 0;
    pid_t r = 0;
    for (int t = 0; t < 1000 && (r = ::waitpid(pid, &status, WNOHANG)) == 0; ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // 10 s at most
    }
    if (r == 0) {
      ++hung;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
    }
  }
  stop.store(true);
  churn.join();
  CHECK(hung == 0);
  CHECK(failed == 0);
  CHECK(kept.to_vector()[0] == 1.0f);  // the parent's array is untouched
#endif
}
