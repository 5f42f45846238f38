// The communication thread (comm.h): in-order issue, blocking calls or MPI_Test progress, the
// watchdog.
#include "comm.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace asyncnd {
namespace dist {
namespace detail {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

}  // namespace

Comm::Comm(MPI_Comm world, double timeout_s, Progress progress)
    : timeout_s_(timeout_s), progress_(progress) {
  MPI_Comm_dup(world, &comm_);
  // Errors come back as codes, which become the op's error, instead of aborting the job.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  thread_ = std::thread([this] { loop(); });
  if (progress_ == Progress::kBlocking) watchdog_ = std::thread([this] { watchdog_loop(); });
}

Comm::~Comm() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (watchdog_.joinable()) {
    watchdog_cv_.notify_all();
    watchdog_.join();
  }
  MPI_Comm_free(&comm_);
}

void Comm::submit(Request r) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    const std::uint64_t seq = r.seq;
    waiting_.emplace(seq, std::move(r));
  }
  cv_.notify_all();
}

Stats Comm::stats() {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void Comm::loop() {
  for (;;) {
    Request r;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // invariant: collectives are issued in sequence order, the same on every rank; a later one
      // that is ready waits for the earlier ones.
      cv_.wait(lk, [&] {
        return (!waiting_.empty() && waiting_.begin()->first == next_issue_) ||
               (stop_ && waiting_.empty());
      });
      if (waiting_.empty()) return;  // stopping, nothing left
      auto it = waiting_.begin();
      r = std::move(it->second);
      waiting_.erase(it);
      running_ = true;
      running_seq_ = r.seq;
      running_what_ = r.what;
      running_since_ = Clock::now();
    }
    const Clock::time_point t0 = Clock::now();
    std::string error = run(r);
    if (error.empty() && r.after) r.after();
    {
      std::lock_guard<std::mutex> lk(mu_);
      running_ = false;
      ++next_issue_;
      if (error.empty()) {
        ++stats_.collectives;
        stats_.bytes_reduced += r.bytes_reduced;
        stats_.comm_seconds += seconds_since(t0);
      }
    }
    if (r.done) r.done(error.empty() ? nullptr : &error);
  }
}

std::string Comm::run(Request& r) {
  const Clock::time_point t0 = Clock::now();
  auto failed = [&r](int rc) {
    return "collective #" + std::to_string(r.seq) + " " + r.what + ": " + mpi_error_text(rc);
  };
  const int injected = inject_error_.exchange(0);
  if (injected != 0) return failed(injected);
  if (check_.load()) {
    std::string differs;
    const int rc = check(r, t0, differs);
    if (rc != MPI_SUCCESS) return failed(rc);
    if (!differs.empty()) return differs;
  }
  for (auto& step : r.steps) {
    const int rc = complete(step, r, t0);
    if (rc != MPI_SUCCESS) return failed(rc);
  }
  return {};
}

int Comm::complete(const Step& step, const Request& r, Clock::time_point t0) {
  if (progress_ == Progress::kBlocking) return step(comm_, nullptr);  // the watchdog keeps time
  MPI_Request q = MPI_REQUEST_NULL;
  int rc = step(comm_, &q);
  if (rc != MPI_SUCCESS) return rc;
  // Open MPI progresses a nonblocking collective only inside MPI calls: this loop drives it.
  // Spin first (a round of a collective is microseconds), then yield the core to the engine's
  // workers, which share it on a small machine.
  int flag = 0;
  for (unsigned spins = 0;; ++spins) {
    MPI_Status status;
    rc = MPI_Test(&q, &flag, &status);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (spins >= 256) {
      if ((spins & 255) == 0) {
        const double waited = seconds_since(t0);
        if (waited > timeout_s_) watchdog_abort(r.seq, r.what, waited);
      }
      std::this_thread::yield();
    }
  }
}

int Comm::check(const Request& r, Clock::time_point t0, std::string& differs) {
  // Every rank's description of its collective number r.seq, fixed-size so that one allgather
  // takes them, whatever they are: a hash of the whole description (a shape of 64 dimensions is
  // longer than the buffer), then as much of it as fits, for the message.
  constexpr int kLen = 256;
  std::vector<char> mine(kLen, '\0'), all(static_cast<std::size_t>(kLen) * size_, '\0');
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (const char ch : r.what) hash = (hash ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  char head[20];
  std::snprintf(head, sizeof head, "%016llx ", static_cast<unsigned long long>(hash));
  const std::string text = head + r.what;
  text.copy(mine.data(), kLen - 1);
  const int rc = complete(
      [&](MPI_Comm c, MPI_Request* q) {
        return q ? MPI_Iallgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, c, q)
                 : MPI_Allgather(mine.data(), kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, c);
      },
      r, t0);
  if (rc != MPI_SUCCESS) return rc;
  const std::string first(all.data());
  // The description without its hash, "..." where it was cut.
  const auto shown = [](const std::string& s) {
    return s.substr(17) + (s.size() == static_cast<std::size_t>(kLen) - 1 ? "..." : "");
  };
  for (int k = 1; k < size_; ++k) {
    const std::string other(all.data() + static_cast<std::size_t>(k) * kLen);
    if (other != first) {
      differs = "collective #" + std::to_string(r.seq) + " differs between ranks " +
                "(ASYNCND_DIST_CHECK): rank 0 issues " + shown(first) + ", rank " +
                std::to_string(k) + " issues " + shown(other);
      break;
    }
  }
  return MPI_SUCCESS;
}

void Comm::watchdog_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!(stop_ && waiting_.empty() && !running_)) {
    // Checks a few times per timeout, at most every 100 ms: the abort comes at most that late.
    const double period = std::min(0.1, timeout_s_ / 4);
    watchdog_cv_.wait_for(lk, std::chrono::duration<double>(period));
    if (running_) {
      const double waited = seconds_since(running_since_);
      if (waited > timeout_s_) watchdog_abort(running_seq_, running_what_, waited);
    }
  }
}

void Comm::watchdog_abort(std::uint64_t seq, const std::string& what, double waited_s) {
  std::fprintf(stderr,
               "asyncnd dist: rank %d of %d: collective #%llu %s did not complete within %.0f s "
               "(ASYNCND_DIST_TIMEOUT_S); another rank skipped it, issued a different "
               "collective, or is stuck. Calling MPI_Abort.\n",
               rank_, size_, static_cast<unsigned long long>(seq), what.c_str(), waited_s);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);  // MPI_Abort does not return; in case it does
}

}  // namespace detail
}  // namespace dist
}  // namespace asyncnd
