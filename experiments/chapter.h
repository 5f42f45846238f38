// experiments/chapter.h: the chapter's experiments E1-E7 ("Asynchronous Computation"), natively.
// Each one runs the chapter's code on the engine and returns what it measured in a struct; none
// prints. Written once, used by:
//   examples/cpp/chapter.cpp  the demo (`make demo`): one run of each, printed with the chapter's
//                             text around the figures;
//   bench/native.cpp, gpu.cpp the benchmarks: repeats, medians, JSON keys (bench/README.md).
// Why a top-level folder: examples/ is what users copy and bench/ measures; both need these, and
// neither should reach into the other. This is not part of the library either (it is not
// installed, and core/include/asyncnd/ stays the public API): it uses that public API only, as
// any program would. CMake gives it to the demo, the benchmarks and the tests as the target
// asyncnd_experiments (`#include "experiments/chapter.h"`). Its JavaScript twin, on the
// WebAssembly engine, is experiments/chapter.cjs.
//
// Every function here runs on the calling thread and blocks until its experiment is finished
// (each ends with a wait), except e1_loop, which only queues. They throw asyncnd::Error as the
// engine does, and for a config they cannot run (a count below 1). What they change in the
// process-wide engine:
//   - e1 with `naive` reconfigures it and puts it back as the environment says
//     (EngineOptions::from_env), also when it throws: call it with nothing else queued;
//   - e2 and e5 use the profiler: a recording the caller had running is stopped, its events
//     replaced;
//   - e6 seeds the random numbers (E6Config::seed), and restores the in-flight bounds it found.
#pragma once

#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

namespace chapter {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- E1: ten random 1000x1000 matrices, each multiplied by itself -------------------------------

// The chapter's loop on `device`: `iters` times a random normal n x n matrix and its product with
// itself. Only queues, returning at once; with `wait_each` it waits for every op before issuing
// the next, the way NumPy behaves (a synchronous baseline).
inline void e1_loop(int iters, std::int64_t n, asyncnd::Device device, bool wait_each) {
  using namespace asyncnd;
  for (int i = 0; i < iters; ++i) {
    NDArray a = nd::random_normal({n, n}, 0.0f, 1.0f, device);
    if (wait_each) a.wait_to_read();
    NDArray b = nd::dot(a, a);
    if (wait_each) b.wait_to_read();
  }
}

struct QueueTiming {
  double returned_s = 0;  // the loop returned (its ops only queued)
  double finished_s = 0;  // waitall returned: the real cost
};

// e1_loop without waits, timed to its return and then to waitall.
inline QueueTiming e1_async(int iters, std::int64_t n, asyncnd::Device device = {}) {
  QueueTiming t;
  const auto t0 = Clock::now();
  e1_loop(iters, n, device, false);
  t.returned_s = seconds_since(t0);
  asyncnd::nd::waitall();
  t.finished_s = seconds_since(t0);
  return t;
}

struct E1Config {
  int iters = 10;
  std::int64_t n = 1000;
  bool naive = true;  // also time the loop on the naive engine (every op runs inside its call)
};
struct E1Result {
  double sync_s = 0;   // wait after every op
  double naive_s = 0;  // the naive engine (0 when not asked for)
  QueueTiming engine;  // the threaded engine: loop returned, waitall returned (its second run)
  // The engine loop's first run. Running ahead keeps every queued op's output alive at once
  // (2 x iters arrays, against 2 for the synchronous loop), and the first time that memory is
  // fresh: the operating system maps it page by page as the ops first write it (about 25 000
  // page faults for E1's 80 MB), which the ops pay. The CPU allocator keeps the blocks, so the
  // second run reuses them: that run is `engine`, compared with the synchronous loop, which
  // reuses its two blocks from the start.
  QueueTiming engine_first;
  double sync_peak_mb = 0, engine_peak_mb = 0;  // the engine's peak bytes in use in each loop
};

// The engine's peak bytes in use (MB) while fn runs.
template <class F>
double peak_mb_during(F&& fn) {
  asyncnd::Engine& eng = asyncnd::engine();
  eng.reset_peak_bytes();
  fn();
  return eng.stats().bytes_peak / 1e6;
}

// One warm-up product first (threads, BLAS buffers, pages), outside the timings.
inline E1Result e1(const E1Config& cfg = {}) {
  using namespace asyncnd;
  if (cfg.iters < 1 || cfg.n < 1)
    throw Error("chapter::e1: iters and n must be >= 1, got iters=" + std::to_string(cfg.iters) +
                " n=" + std::to_string(cfg.n));
  nd::dot(nd::random_normal({cfg.n, cfg.n}), nd::random_normal({cfg.n, cfg.n})).wait_to_read();
  E1Result r;
  r.sync_peak_mb = peak_mb_during([&] {
    const auto t0 = Clock::now();
    e1_loop(cfg.iters, cfg.n, Device{}, true);
    r.sync_s = seconds_since(t0);
  });
  if (cfg.naive) {
    EngineOptions naive = EngineOptions::from_env();
    naive.kind = EngineKind::kNaive;
    configure_engine(naive);
    struct Back {  // to the threaded engine, also if the loop throws
      ~Back() { configure_engine(EngineOptions::from_env()); }
    } back;
    const auto t0 = Clock::now();
    e1_loop(cfg.iters, cfg.n, Device{}, false);
    r.naive_s = seconds_since(t0);
  }
  r.engine_peak_mb = peak_mb_during([&] { r.engine_first = e1_async(cfg.iters, cfg.n); });
  r.engine = e1_async(cfg.iters, cfg.n);
  return r;
}

// ---- E2: the dependency graph of z = x * y + 2 -------------------------------------------------

struct E2Result {
  std::string z;                                 // z, as operator<< writes it
  std::vector<asyncnd::ProfileEvent> events;     // the profiled ops, in push order
  std::map<std::uint64_t, std::string> names;    // Var id -> x, y, z, or tmp1, tmp2... (in the
                                                 // order the ops' reads, then writes, name them)
  std::vector<std::pair<int, int>> edges;        // (earlier op, op that waits for it), sorted
};

// The profiler records each op's reads and writes, which is all a graph needs; the edges replay
// the engine's rules: a read waits for the last write of its variable, a write for the last write
// and for every read since.
inline E2Result e2() {
  using namespace asyncnd;
  Engine& eng = engine();
  eng.start_profiling();
  NDArray x = nd::ones({1, 2});
  NDArray y = nd::ones({1, 2});
  NDArray z = x * y + 2;
  z.wait_to_read();
  eng.stop_profiling();
  E2Result r;
  std::ostringstream text;
  text << z;
  r.z = text.str();
  r.events = eng.profile_events();
  std::stable_sort(r.events.begin(), r.events.end(),
                   [](const ProfileEvent& a, const ProfileEvent& b) { return a.push_us < b.push_us; });
  r.names = {{x.var().id(), "x"}, {y.var().id(), "y"}, {z.var().id(), "z"}};
  int temps = 0;
  auto name = [&](std::uint64_t id) {
    if (!r.names.count(id)) r.names.emplace(id, "tmp" + std::to_string(++temps));
  };
  std::map<std::uint64_t, int> last_writer;           // var id -> op that last wrote it
  std::map<std::uint64_t, std::vector<int>> readers;  // var id -> ops that read it since
  for (std::size_t i = 0; i < r.events.size(); ++i) {
    const ProfileEvent& e = r.events[i];
    const int me = static_cast<int>(i);
    for (std::uint64_t v : e.reads) {
      name(v);
      auto it = last_writer.find(v);
      if (it != last_writer.end()) r.edges.emplace_back(it->second, me);
      readers[v].push_back(me);
    }
    for (std::uint64_t v : e.writes) {
      name(v);
      auto it = last_writer.find(v);
      if (it != last_writer.end()) r.edges.emplace_back(it->second, me);
      for (int rd : readers[v]) r.edges.emplace_back(rd, me);
      readers[v].clear();
      last_writer[v] = me;
    }
  }
  std::sort(r.edges.begin(), r.edges.end());
  r.edges.erase(std::unique(r.edges.begin(), r.edges.end()), r.edges.end());
  return r;
}

// ---- E3 and E4: barriers and implicit blockers, on the chapter's 2000x2000 products -------------

// x ~ U(0, 1) [n, n], and one product to warm up.
inline asyncnd::NDArray e3_input(std::int64_t n) {
  using namespace asyncnd;
  NDArray x = nd::random_uniform({n, n});
  nd::dot(x, x).wait_to_read();
  return x;
}

struct E3Result {
  std::string sum;            // dot(x, x).sum(), as operator<< writes it
  double queued_s = 0;        // y = dot(x, x).sum() returned (queued)
  double printed_s = 0;       // ... and writing it out returned (an implicit blocker)
  double wait_to_read_s = 0;  // one dot, then y.wait_to_read()
  double waitall_s = 0;       // one dot, then waitall()
  double waitall2_s = 0;      // two dots, then waitall()
  // Two dots, then y.wait_to_read() on the first: about one product where the engine runs them
  // in the order pushed, where waitall waits for both (the chapter's exercise: wait only for
  // what you need).
  double wait_first_of_two_s = 0;
};

inline E3Result e3(std::int64_t n = 2000) {
  using namespace asyncnd;
  const NDArray x = e3_input(n);
  E3Result r;
  auto t0 = Clock::now();
  NDArray s = nd::dot(x, x).sum();
  r.queued_s = seconds_since(t0);
  std::ostringstream text;
  text << s;
  r.sum = text.str();
  r.printed_s = seconds_since(t0);

  t0 = Clock::now();
  NDArray y = nd::dot(x, x);
  y.wait_to_read();
  r.wait_to_read_s = seconds_since(t0);

  t0 = Clock::now();
  y = nd::dot(x, x);
  nd::waitall();
  r.waitall_s = seconds_since(t0);

  t0 = Clock::now();
  y = nd::dot(x, x);
  NDArray z = nd::dot(x, x);
  nd::waitall();
  r.waitall2_s = seconds_since(t0);

  t0 = Clock::now();
  y = nd::dot(x, x);
  z = nd::dot(x, x);
  y.wait_to_read();
  r.wait_first_of_two_s = seconds_since(t0);
  nd::waitall();  // the second, not timed: it must not run into what comes next
  return r;
}

struct E4Result {
  double to_vector_s = 0;  // dot, then to_vector()
  std::size_t values = 0;  // ... how many values it copied out
  double item_s = 0;       // dot, then norm().item()
  float norm = 0;          // ... its value
  double print_s = 0;      // dot, then writing its sum to a stream
  std::string text;        // ... what was written
};

// Each of these needs the values, so each waits for a whole product.
inline E4Result e4(std::int64_t n = 2000) {
  using namespace asyncnd;
  const NDArray x = e3_input(n);
  E4Result r;
  auto t0 = Clock::now();
  NDArray y = nd::dot(x, x);
  const std::vector<float> host = y.to_vector();
  r.to_vector_s = seconds_since(t0);
  r.values = host.size();

  t0 = Clock::now();
  y = nd::dot(x, x);
  r.norm = y.norm().item();
  r.item_s = seconds_since(t0);

  std::ostringstream sink;
  t0 = Clock::now();
  y = nd::dot(x, x);
  sink << y.sum();
  r.print_s = seconds_since(t0);
  r.text = sink.str();
  return r;
}

// ---- E5: many tiny ops, waiting after each vs once; the chapter's t1, t2, t3 ---------------------

// The chapter's model: synchronous ~ N (t1 + t2 + t3), asynchronous ~ t1 + N t2 + t3, with t3 the
// part of a synchronous step that remains once the push (t1) and the compute (t2) are taken out.
struct E5Model {
  double t3_s = 0;            // sync_s / n - t1 - t2
  double model_sync_s = 0;    // n (t1 + t2 + t3): equals sync_s, since t3 is fitted to it
  double model_async_s = 0;   // t1 + n t2 + t3
};
inline E5Model e5_model(int n, double sync_s, double t1_s, double t2_s) {
  E5Model m;
  m.t3_s = sync_s / n - t1_s - t2_s;
  m.model_sync_s = n * (t1_s + t2_s + m.t3_s);
  m.model_async_s = t1_s + n * t2_s + m.t3_s;
  return m;
}

struct E5Config {
  int n = 10000;        // the chapter's 10 000 steps of y = x + 1 on a [1, 2] array
  int warmup = 1000;    // steps first, untimed: workers awake, allocator primed
  int profiled = 1000;  // ops profiled for t2
};
struct E5Result {
  double sync_s = 0;   // wait_to_read after each step
  double async_s = 0;  // waitall once at the end
  double push_s = 0;   // the asynchronous loop's pushes alone (before its waitall)
  double t1_s = 0;     // queueing one op while the backend is idle: the mean push of a
                       // synchronous loop, timed around each push (apart from sync_s)
  double t2_s = 0;     // the compute of one op: median start..end of the profiled ops
  std::size_t t2_samples = 0;
  E5Model model;       // from sync_s, t1_s, t2_s
};

// In the asynchronous loop a push costs more than t1: the frontend and a worker touch the same
// variables at the same time.
inline E5Result e5(const E5Config& cfg = {}) {
  using namespace asyncnd;
  if (cfg.n < 1 || cfg.warmup < 0 || cfg.profiled < 0)
    throw Error("chapter::e5: n must be >= 1, warmup and profiled >= 0, got n=" +
                std::to_string(cfg.n) + " warmup=" + std::to_string(cfg.warmup) +
                " profiled=" + std::to_string(cfg.profiled));
  NDArray x = nd::ones({1, 2});
  NDArray y;
  for (int i = 0; i < cfg.warmup; ++i) y = x + 1;
  nd::waitall();
  E5Result r;
  auto t0 = Clock::now();
  for (int i = 0; i < cfg.n; ++i) {
    y = x + 1;
    y.wait_to_read();
  }
  r.sync_s = seconds_since(t0);

  t0 = Clock::now();
  for (int i = 0; i < cfg.n; ++i) y = x + 1;
  r.push_s = seconds_since(t0);
  nd::waitall();
  r.async_s = seconds_since(t0);

  double t1_total = 0;
  for (int i = 0; i < cfg.n; ++i) {
    const auto a = Clock::now();
    y = x + 1;
    t1_total += seconds_since(a);
    y.wait_to_read();
  }
  r.t1_s = t1_total / cfg.n;

  Engine& eng = engine();
  eng.start_profiling();
  for (int i = 0; i < cfg.profiled; ++i) y = x + 1;
  nd::waitall();
  eng.stop_profiling();
  std::vector<double> run_us;
  for (const ProfileEvent& e : eng.profile_events())
    if (!e.reads.empty() && !e.writes.empty()) run_us.push_back(e.end_us - e.start_us);
  std::sort(run_us.begin(), run_us.end());
  r.t2_samples = run_us.size();
  r.t2_s = run_us.empty() ? 0.0 : run_us[run_us.size() / 2] * 1e-6;
  r.model = e5_model(cfg.n, r.sync_s, r.t1_s, r.t2_s);
  return r;
}

// ---- E6: the memory of training the chapter's MLP -------------------------------------------------
// The MLP (Dense 2048 relu, Dense 512 relu, Dense 1) trained with SGD (lr 0.005) and L2Loss on
// batches of 1024x512 from the chapter's data iterator, in four ways:
//   sync     reading the loss (an implicit blocker) every batch, as the chapter recommends;
//   nosync   never reading, with the engine's byte bound switched off (set_max_inflight(ops, 0)):
//            the chapter's problem, the frontend queues every batch at once and memory grows;
//   bounded  never reading, with a small in-flight byte bound (Engine::set_max_inflight):
//            push waits instead of letting queued outputs pile up;
//   default  never reading, the engine as it starts (its default byte bound, a quarter of the
//            memory the program may use, at most 512 MiB): runs ahead a few batches, then waits.

enum class E6Mode { kSync, kNoSync, kBounded, kDefault };

inline const char* e6_mode_name(E6Mode m) {
  return m == E6Mode::kSync      ? "sync"
         : m == E6Mode::kNoSync  ? "nosync"
         : m == E6Mode::kBounded ? "bounded"
                                 : "default";
}

// The value of the environment variable `name` (set), a number above 0 and up to `max` (whole
// when `whole`); anything else throws, naming the variable ("1e3" was read as 1 and "abc" as the
// default, silently).
inline double e6_env_number(const char* name, const char* s, double max, bool whole) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v > 0) || v > max ||
      (whole && v != static_cast<double>(static_cast<long long>(v))))
    throw asyncnd::Error(std::string(name) + ": expected " +
                         (whole ? "a whole number from 1" : "a number above 0") + " to " +
                         std::to_string(static_cast<long long>(max)) + ", got '" + s + "'");
  return v;
}

// ASYNCND_E6_BATCHES shrinks the experiment (e.g. on a machine with little memory: the run that
// never synchronises holds about 63 MB per batch).
inline int e6_default_batches() {
  const char* s = std::getenv("ASYNCND_E6_BATCHES");
  return s ? static_cast<int>(e6_env_number("ASYNCND_E6_BATCHES", s, 1e6, true)) : 100;
}

// The byte bound of the bounded runs: three of the largest activations ([1024,2048] floats). Set
// ASYNCND_E6_BOUND_MB to try others; bench/notes/limits.md has the measurements behind this choice.
inline std::size_t e6_default_bound_bytes() {
  const char* s = std::getenv("ASYNCND_E6_BOUND_MB");
  if (!s) return 3 * 1024 * 2048 * sizeof(float);
  return static_cast<std::size_t>(e6_env_number("ASYNCND_E6_BOUND_MB", s, 1e9, false) * 1e6);
}

struct E6Config {
  int num_batches = e6_default_batches();
  std::int64_t batch_size = 1024, features = 512;
  float lr = 0.005f;
  std::size_t bound_bytes = 0;  // for E6Mode::kBounded
  std::uint64_t seed = 42;
  // Where the batches are made, and so the parameters (Dense's deferred initialisation).
  asyncnd::Device device;
  // Called on the calling thread each time the loop asks the data iterator for the next batch,
  // from the second time on: `given` batches were handed out so far, `seconds` after the first.
  // The chapter's data_iter prints "batch i, time t sec" there; the measurement includes the call.
  std::function<void(int given, double seconds)> on_next;
};

struct E6Result {
  E6Mode mode = E6Mode::kSync;
  double total_s = 0;             // first batch handed out .. everything finished (waitall)
  double frontend_s = 0;          // first batch handed out .. the loop returned
  double per_batch_ms = 0;        // mean time between two batches handed out by the iterator
  double last_handout_s = 0;      // when the last batch was handed out
  double engine_peak_mb = 0;      // engine bytes in use at peak, during the run
  double engine_start_mb = 0;     // engine bytes in use before the run (parameters, gradients)
  double device_peak_mb = 0;      // of those, the peak on cfg.device alone
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

inline asyncnd::nn::Sequential e6_make_net() {
  using namespace asyncnd;
  nn::Sequential net;
  net.add(nn::Dense(2048, "relu")).add(nn::Dense(512, "relu")).add(nn::Dense(1));
  return net;
}

// One run: a fresh network (same seed, so every mode does the same arithmetic), a warm-up batch
// (deferred parameter creation, allocator and BLAS set-up) outside the measurement, then
// `num_batches` batches. Each mode starts from the engine's own bounds (reset_max_inflight: those
// it started with); the byte bound is then switched off for kNoSync and set to cfg.bound_bytes
// for kBounded. The bounds the caller had are put back after, also when the run throws.
inline E6Result e6(E6Mode mode, const E6Config& cfg) {
  using namespace asyncnd;
  if (cfg.num_batches < 1)
    throw Error("chapter::e6: num_batches must be >= 1, got " + std::to_string(cfg.num_batches));
  if (mode == E6Mode::kBounded && cfg.bound_bytes == 0)
    throw Error("chapter::e6: the bounded mode needs a byte bound above 0 (E6Config::bound_bytes;"
                " 0 is no bound at all)");
  Engine& eng = engine();
  struct CallersBounds {
    Engine& eng;
    std::size_t ops = eng.max_inflight_ops(), bytes = eng.max_inflight_bytes();
    BoundSource source = eng.stats().max_inflight_bytes_source;
    ~CallersBounds() {
      eng.reset_max_inflight();
      if (eng.max_inflight_ops() != ops || eng.max_inflight_bytes() != bytes ||
          eng.stats().max_inflight_bytes_source != source)
        eng.set_max_inflight(ops, bytes);
    }
  } callers{eng};
  eng.reset_max_inflight();
  nd::seed(cfg.seed);
  nn::Sequential net = e6_make_net();
  nn::L2Loss loss;
  nn::SGD trainer(net.parameters(), cfg.lr);
  {
    nn::DataIter warm(1, cfg.batch_size, cfg.features, cfg.device);
    nn::Batch b;
    warm.next(b);
    NDArray l;
    {
      autograd::Record rec;
      l = loss(net(b.X), b.y);
    }
    l.backward(nd::ones(l.shape(), l.device()));
    trainer.step(cfg.batch_size);
    nd::waitall();
  }

  E6Result r;
  r.mode = mode;
  const std::size_t ops = eng.max_inflight_ops();
  if (mode == E6Mode::kNoSync) eng.set_max_inflight(ops, 0);
  if (mode == E6Mode::kBounded) eng.set_max_inflight(ops, cfg.bound_bytes);
  const EngineStats before = eng.stats();
  r.bound_mb = before.max_inflight_bytes / 1e6;
  r.bound_source = bound_source_name(before.max_inflight_bytes_source);
  eng.reset_peak_bytes();
  reset_rss_peak();
  r.engine_start_mb = eng.stats().bytes_in_use / 1e6;
  r.rss_start_mb = proc_status_mb("VmRSS");

  nn::DataIter it(cfg.num_batches, cfg.batch_size, cfg.features, cfg.device);
  nn::Batch b;
  NDArray l;
  Clock::time_point first_ask, t0;
  for (int given = 0;; ++given) {
    if (given == 0) first_ask = Clock::now();
    else if (cfg.on_next) cfg.on_next(given, seconds_since(first_ask));
    if (!it.next(b)) break;
    if (given == 0) t0 = Clock::now();
    {
      autograd::Record rec;
      l = loss(net(b.X), b.y);
    }
    if (mode == E6Mode::kSync) r.loss_sum += l.mean().item();  // the synchronising read
    l.backward(nd::ones(l.shape(), l.device()));  // the chapter's l.backward() on a [batch] loss
    trainer.step(cfg.batch_size);
  }
  r.frontend_s = seconds_since(t0);
  nd::waitall();
  r.total_s = seconds_since(t0);
  const EngineStats after = eng.stats();
  r.engine_peak_mb = after.bytes_peak / 1e6;
  for (const DeviceStats& d : after.devices)
    if (d.device == cfg.device) r.device_peak_mb = d.bytes_peak / 1e6;
  r.push_waits = after.push_waits - before.push_waits;
  r.rss_peak_mb = proc_status_mb("VmHWM");
  r.rss_end_mb = proc_status_mb("VmRSS");
  const auto& h = it.handout_s();
  r.last_handout_s = h.empty() ? 0.0 : h.back();
  r.per_batch_ms = h.size() > 1 ? 1e3 * (h.back() - h.front()) / static_cast<double>(h.size() - 1)
                                : 0.0;
  r.final_loss = l.defined() ? l.mean().item() : 0.0;
  return r;  // the caller's bounds come back here (callers)
}

// ---- E7: CPU vs GPU ------------------------------------------------------------------------------

struct E7Result {
  std::string skipped;  // not empty: why it did not run (no GPU here)
  QueueTiming cpu, gpu;  // E1's asynchronous loop on each device
  QueueTiming both;      // the loop queued on the GPU, then on the CPU, then one waitall
};

// E1 again on the CPU and on gpu(0): on both, the loop returns long before the work is done, and
// waitall gives the real cost. Then both at once: queued on different devices, they overlap.
inline E7Result e7(int iters = 10, std::int64_t n = 1000) {
  using namespace asyncnd;
  E7Result r;
  const Device gpu = Device::gpu(0);
  try {
    nd::zeros({1}, gpu).wait_to_read();
  } catch (const Error& e) {
    r.skipped = e.what();
    return r;
  }
  e1_loop(iters, n, gpu, false);  // first use: streams, cuBLAS and the allocator set up untimed
  nd::waitall();
  r.cpu = e1_async(iters, n, Device::cpu());
  r.gpu = e1_async(iters, n, gpu);
  const auto t0 = Clock::now();
  e1_loop(iters, n, gpu, false);
  e1_loop(iters, n, Device::cpu(), false);
  r.both.returned_s = seconds_since(t0);
  nd::waitall();
  r.both.finished_s = seconds_since(t0);
  return r;
}

}  // namespace chapter
