// E6, the chapter's memory experiment: the MLP (Dense 2048 relu, Dense 512 relu, Dense 1) trained
// with SGD (lr 0.005) and L2Loss on batches of 1024x512 from the chapter's data iterator, in four
// ways:
//   sync     reading the loss (an implicit blocker) every batch, as the chapter recommends;
//   nosync   never reading, with the engine's byte bound switched off (set_max_inflight(ops, 0)):
//            the chapter's problem, the frontend queues every batch at once and memory grows;
//   bounded  never reading, with a small in-flight byte bound (Engine::set_max_inflight):
//            push waits instead of letting queued outputs pile up;
//   default  never reading, the engine as it starts (its default byte bound, a quarter of the
//            memory the program may use, at most 512 MiB): runs ahead a few batches, then waits.
// Shared by the demo (examples/cpp/chapter.cpp) and the benchmark (bench/native.cpp).
#pragma once

#include <asyncnd/asyncnd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

namespace e6 {

enum class Mode { kSync, kNoSync, kBounded, kDefault };

inline const char* mode_name(Mode m) {
  return m == Mode::kSync     ? "sync"
         : m == Mode::kNoSync ? "nosync"
         : m == Mode::kBounded ? "bounded"
                               : "default";
}

// ASYNCND_E6_BATCHES shrinks the experiment (e.g. on a machine with little memory: the run that
// never synchronises holds about 63 MB per batch).
inline int default_batches() {
  if (const char* s = std::getenv("ASYNCND_E6_BATCHES")) {
    const int n = std::atoi(s);
    if (n > 0) return n;
  }
  return 100;
}

struct Config {
  int num_batches = default_batches();
  std::int64_t batch_size = 1024, features = 512;
  float lr = 0.005f;
  std::size_t bound_bytes = 0;  // for Mode::kBounded
  std::uint64_t seed = 42;
  int report_every = 0;  // DataIter prints "batch i, time t sec" every this many batches
};

// The byte bound of the bounded runs: three of the largest activations ([1024,2048] floats). Set
// ASYNCND_E6_BOUND_MB to try others; bench/README.md has the measurements behind this choice.
inline std::size_t default_bound_bytes() {
  if (const char* s = std::getenv("ASYNCND_E6_BOUND_MB")) {
    const double mb = std::atof(s);
    if (mb > 0) return static_cast<std::size_t>(mb * 1e6);
  }
  return 3 * 1024 * 2048 * sizeof(float);
}

struct Result {
  Mode mode;
  double total_s = 0;             // first batch handed out .. everything finished (waitall)
  double frontend_s = 0;          // first batch handed out .. the loop returned
  double per_batch_ms = 0;        // mean time between two batches handed out by the iterator
  double last_handout_s = 0;      // when the last batch was handed out (the chapter's print)
  double engine_peak_mb = 0;      // engine bytes in use at peak, during the run
  double engine_start_mb = 0;     // engine bytes in use before the run (parameters, gradients)
  double rss_start_mb = 0, rss_peak_mb = 0, rss_end_mb = 0;  // process RSS (/proc/self/status)
  double loss_sum = 0;            // sync only: the sum of the per-batch mean losses
  double final_loss = 0;          // mean loss of the last batch (read after the run)
  double bound_mb = 0;            // the byte bound in force during the run (0 = none)
  const char* bound_source = "none";  // where it came from (asyncnd::bound_source_name)
  std::uint64_t push_waits = 0;   // pushes that waited on a bound during the run
};

// A field of /proc/self/status in MB (VmRSS: now, VmHWM: peak since start or the last reset).
inline double proc_status_mb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, key.size(), key) == 0) return std::stod(line.substr(key.size())) / 1024.0;
  return 0.0;
}

// Hands freed heap memory back to the system (glibc keeps large freed blocks in its arenas, so
// the RSS after a run that allocated gigabytes would stay high), then resets VmHWM to the current
// RSS (Linux 4.0+; harmless where unsupported).
inline void reset_rss_peak() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}


inline asyncnd::nn::Sequential make_net() {
  using namespace asyncnd;
  nn::Sequential net;
  net.add(nn::Dense(2048, "relu")).add(nn::Dense(512, "relu")).add(nn::Dense(1));
  return net;
}

// One run: a fresh network (same seed, so every mode does the same arithmetic), a warm-up batch
// (deferred parameter creation, allocator and BLAS set-up) outside the measurement, then
// `num_batches` batches. The engine's byte bound is switched off for kNoSync, set for kBounded,
// left as the engine started for kSync and kDefault; restored after (Engine::reset_max_inflight).
inline Result run(Mode mode, const Config& cfg) {
  using namespace asyncnd;
  using Clock = std::chrono::steady_clock;
  Engine& eng = engine();
  nd::seed(cfg.seed);
  nn::Sequential net = make_net();
  nn::L2Loss loss;
  nn::SGD trainer(net.parameters(), cfg.lr);
  {
    nn::DataIter warm(1, cfg.batch_size, cfg.features);
    nn::Batch b;
    warm.next(b);
    NDArray l;
    {
      autograd::Record rec;
      l = loss(net(b.X), b.y);
    }
    l.backward(nd::ones(l.shape()));
    trainer.step(cfg.batch_size);
    nd::waitall();
  }

  Result r;
  r.mode = mode;
  const std::size_t ops = eng.max_inflight_ops();
  if (mode == Mode::kNoSync) eng.set_max_inflight(ops, 0);
  if (mode == Mode::kBounded) eng.set_max_inflight(ops, cfg.bound_bytes);
  const EngineStats before = eng.stats();
  r.bound_mb = before.max_inflight_bytes / 1e6;
  r.bound_source = bound_source_name(before.max_inflight_bytes_source);
  eng.reset_peak_bytes();
  reset_rss_peak();
  r.engine_start_mb = eng.stats().bytes_in_use / 1e6;
  r.rss_start_mb = proc_status_mb("VmRSS");

  nn::DataIter it(cfg.num_batches, cfg.batch_size, cfg.features, cfg.report_every);
  nn::Batch b;
  NDArray l;
  Clock::time_point t0;
  bool first = true;
  while (it.next(b)) {
    if (first) t0 = Clock::now(), first = false;
    {
      autograd::Record rec;
      l = loss(net(b.X), b.y);
    }
    if (mode == Mode::kSync) r.loss_sum += l.mean().item();  // the synchronising read
    l.backward(nd::ones(l.shape()));  // the chapter's l.backward() on a [batch] loss
    trainer.step(cfg.batch_size);
  }
  r.frontend_s = std::chrono::duration<double>(Clock::now() - t0).count();
  nd::waitall();
  r.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const EngineStats after = eng.stats();
  r.engine_peak_mb = after.bytes_peak / 1e6;
  r.push_waits = after.push_waits - before.push_waits;
  r.rss_peak_mb = proc_status_mb("VmHWM");
  r.rss_end_mb = proc_status_mb("VmRSS");
  const auto& h = it.handout_s();
  r.last_handout_s = h.empty() ? 0.0 : h.back();
  r.per_batch_ms = h.size() > 1 ? 1e3 * (h.back() - h.front()) / static_cast<double>(h.size() - 1)
                                : 0.0;
  r.final_loss = l.defined() ? l.mean().item() : 0.0;
  if (mode == Mode::kNoSync || mode == Mode::kBounded) eng.reset_max_inflight();
  return r;
}

inline void print(const Result& r) {
  std::printf("  %-8s total %7.3f s (loop returned after %6.3f s)  %7.2f ms per batch handed out"
              "  engine peak %8.1f MB (%.1f MB before)  RSS peak %8.1f MB (start %.1f, end %.1f)"
              "  last loss %.4g  byte bound %.0f MB (%s), %llu pushes waited\n",
              mode_name(r.mode), r.total_s, r.frontend_s, r.per_batch_ms, r.engine_peak_mb,
              r.engine_start_mb, r.rss_peak_mb, r.rss_start_mb, r.rss_end_mb, r.final_loss,
              r.bound_mb, r.bound_source, static_cast<unsigned long long>(r.push_waits));
}

}  // namespace e6
