// bench_native: the engine's costs and the chapter's experiments, measured natively.
//
// Usage: build/bench_native [--only=e6|gemm|overhead] [out.json]   (default
// bench/results/native.json, relative to the current directory when it has bench/ -- `make bench`
// runs it from the repository root -- else to the source tree the build was configured from).
// Writes a flat JSON object of named figures plus a `machine` object, and prints a table; with
// --only, one block's figures merged into the existing file. bench/README.md says what each
// figure means. Every figure is the median of several repeats: these machines are noisy.
#include "native/native.h"

#include <asyncnd/asyncnd.h>

#if ASYNCND_HAVE_OPENBLAS
#include <cblas.h>
#endif

// The engine's BLAS policy (core name, threads per call); native/ is on the bench's include path.
#include "cpu/cpu_backend.h"

#include "experiments/chapter.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <strings.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "bench_util.h"

using namespace asyncnd;
using namespace asyncnd_bench;
using namespace asyncnd_bench::native;

namespace {
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}

struct Figure {
  std::string key;
  double value;
  std::string what;
};
std::vector<Figure> g_figures;
}  // namespace

void asyncnd_bench::native::record(const std::string& key, double value, const std::string& what) {
  // NaN or inf would be written as bare `nan`/`inf`, which no JSON reader takes: one bad figure
  // made the whole file unreadable, and check-targets reported every native goal missing.
  if (!std::isfinite(value)) {
    std::fprintf(stderr, "bench_native: %s is %g, not a number: left out of the JSON\n",
                 key.c_str(), value);
    return;
  }
  g_figures.push_back({key, value, what});
  std::printf("  %-32s %14.4f   %s\n", key.c_str(), value, what.c_str());
  std::fflush(stdout);
}

void asyncnd_bench::native::heading(const char* title) { std::printf("\n%s\n", title); }

namespace {

// ---- engine overhead ---------------------------------------------------------------------

enum class Pattern {
  kPool,    // op i reads reads[i % kPool], writes writes[i % kPool]: many independent ops
  kChain,   // every op writes writes[0]: each waits for the previous one
  kVector,  // as kPool, through the std::vector<Var> overload of push (two allocations per op)
};

// The empty ops' variables: op i reads reads[i & (kPool - 1)] and writes writes[i & (kPool - 1)].
constexpr int kPool = 256;  // power of two: index with a mask
struct VarPool {
  std::vector<Var> reads, writes;
};

VarPool new_var_pool() {
  VarPool p;
  for (int i = 0; i < kPool; ++i) {
    p.reads.push_back(engine().new_var());
    p.writes.push_back(engine().new_var());
  }
  return p;
}

void delete_var_pool(VarPool& p) {
  for (int i = 0; i < kPool; ++i) {
    engine().delete_var(p.reads[i]);
    engine().delete_var(p.writes[i]);
  }
  engine().waitall();  // deletions are ops too: keep them out of the next repeat
}

// Empty ops through the public push, each reading one and writing one variable of a pool, so up
// to kPool consecutive ops are independent and many are in flight at once. Returns {per-op time
// including the final waitall, per-op time of the push calls alone}, each in ns.
std::pair<double, double> empty_ops(int n, Pattern pattern) {
  Engine& eng = engine();
  VarPool pool = new_var_pool();
  const std::vector<Var>& reads = pool.reads;
  const std::vector<Var>& writes = pool.writes;
  auto t0 = Clock::now();
  if (pattern == Pattern::kVector) {
    for (int i = 0; i < n; ++i)
      eng.push([] {}, std::vector<Var>{reads[i & (kPool - 1)]}, std::vector<Var>{writes[i & (kPool - 1)]});
  } else {
    const bool chain = pattern == Pattern::kChain;
    for (int i = 0; i < n; ++i)  // braced lists: the initializer_list overload, no allocation
      eng.push([] {}, {reads[i & (kPool - 1)]}, {writes[chain ? 0 : (i & (kPool - 1))]});
  }
  double push_s = since(t0);
  eng.waitall();
  double all_s = since(t0);
  delete_var_pool(pool);
  return {all_s / n * 1e9, push_s / n * 1e9};
}

// `n` wait round trips (push one empty op on v, wait_to_read v), each in microseconds, appended.
void wait_roundtrips(Var v, int n, std::vector<double>& us) {
  Engine& eng = engine();
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    eng.push([] {}, {}, {v});
    eng.wait_to_read(v);
    us.push_back(since(t0) * 1e6);
  }
}

// A backlog drained while waitall sleeps: n empty ops (1 read + 1 write each, over a VarPool)
// queued behind a gate op that holds all the variables, released by another thread
// 2 ms after waitall is called (past waitall's spin, so it sleeps). Per op, from the release until
// waitall returns. While the workers woke a sleeping waitall after every op (a futex wake each),
// this figure was about 1.5 times what it is since (bench/notes/per-op.md, "A sleeping waitall
// woken by every op").
double backlog_drain_ns(int n) {
  Engine& eng = engine();
  VarPool pool = new_var_pool();
  const std::vector<Var>& reads = pool.reads;
  const std::vector<Var>& writes = pool.writes;
  std::vector<Var> all = reads;
  all.insert(all.end(), writes.begin(), writes.end());
  std::atomic<bool> go{false};
  eng.push([&go] {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
  }, std::vector<Var>{}, all);
  for (int i = 0; i < n; ++i) eng.push([] {}, {reads[i & (kPool - 1)]}, {writes[i & (kPool - 1)]});
  Clock::time_point released;
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    released = Clock::now();
    go.store(true, std::memory_order_release);
  });
  eng.waitall();
  const auto end = Clock::now();
  releaser.join();
  delete_var_pool(pool);
  return std::chrono::duration<double>(end - released).count() / n * 1e9;
}

// The per-op costs and the floor they are judged against, measured in the same rounds: the floor,
// then the empty ops, then a slice of the wait round trips, kReps times. These VMs run in phases
// of seconds (a child timing the same GEMM gave 200-220 GFLOP/s for a few seconds, then 285-293;
// bench/notes/runs.md, "Figures measured side by side"), so a floor measured once before the others
// can land in another phase than the figures divided by it. Each figure is the median over the
// rounds (the wait round trip: over all its iterations).
void bench_per_op() {
  heading("per-op costs beside the spin floor (empty ops through Engine::push, 1 read + 1 write "
          "each; push one op + wait_to_read; two threads ping-pong an atomic), in 5 rounds");
  Engine& eng = engine();
  const int kN = 500000, kReps = 5, kWarmWaits = 2000, kRoundWarm = 200, kWaits = 4000;
  empty_ops(kN / 5, Pattern::kPool);  // warm-up: op pool, workers
  Var v = eng.new_var();
  std::vector<double> warm;
  wait_roundtrips(v, kWarmWaits, warm);
  std::vector<double> spin, all, push_only, chain, vec, drain, us;
  us.reserve(static_cast<std::size_t>(kReps) * kWaits);
  for (int r = 0; r < kReps; ++r) {
    spin.push_back(spin_roundtrip_once(100000));
    auto [a, p] = empty_ops(kN, Pattern::kPool);
    all.push_back(a);
    push_only.push_back(p);
    chain.push_back(empty_ops(kN / 2, Pattern::kChain).first);
    vec.push_back(empty_ops(kN / 2, Pattern::kVector).first);
    drain.push_back(backlog_drain_ns(kN / 25));
    wait_roundtrips(v, kRoundWarm, warm);  // back in step after the empty ops' waitall
    std::vector<double> round;
    round.reserve(kWaits);
    wait_roundtrips(v, kWaits, round);
    us.insert(us.end(), round.begin(), round.end());
    std::printf("  round %d: spin floor %6.1f ns, empty op %6.1f ns, wait round trip %6.3f us "
                "(%.2f x the floor)\n",
                r + 1, spin.back(), a, median(round), median(round) * 1e3 / spin.back());
  }
  eng.delete_var(v);
  eng.waitall();
  record("spin_roundtrip_ns", median(spin),
         "one round trip between two spinning threads, median of 5 x 100k, one per round");
  const double ns = median(all);
  record("push_overhead_ns", ns, "push+run of an empty op, per op, N=500k over 256 vars, incl. waitall");
  record("ops_per_s", 1e9 / ns, "= 1e9 / push_overhead_ns");
  record("push_only_ns", median(push_only), "the push calls alone, per op (same runs)");
  record("push_overhead_chain_ns", median(chain), "every op writes the same var (a chain), per op");
  record("push_overhead_vector_ns", median(vec), "as push_overhead_ns, reads/writes as std::vector<Var>");
  record("backlog_drain_ns", median(drain),
         "20k empty ops queued behind a gate, drained while waitall sleeps, per op");
  record("wait_roundtrip_us", median(us),
         "median of 20k iterations: 4k per round, after 200 not counted");
  record("wait_roundtrip_p90_us", percentile(us, 0.9), "90th percentile");
  record("wait_roundtrip_p99_us", percentile(us, 0.99), "99th percentile (a sleeping hand-off shows here)");
}

// A burst: kOps independent ops of about 1.5 us each (y = x + 1 over 2048 floats, each into a
// buffer of its own), pushed at once, then waitall; on an engine of the default CPU workers but
// at least 2, taking runs and taking ops (EngineOptions::cpu_pacing), alternated, kReps rounds.
// Runs queued faster than they are run grow long; the spinning worker splits them
// (worker_pool.cpp, split). Without that, most of a burst ran on one worker: bench/notes/per-op.md,
// "Splitting long runs".
void bench_burst() {
  constexpr int kOps = 4000, kReps = 5;
  static constexpr int kLen = 2048;
  const int workers = std::max(2, engine().num_workers());
  const std::string title = "a burst of " + std::to_string(kOps) +
                            " independent ops of ~1.5 us (x + 1 over " + std::to_string(kLen) +
                            " floats), on " + std::to_string(workers) +
                            " CPU workers taking runs, then ops, in " + std::to_string(kReps) +
                            " rounds";
  heading(title.c_str());
  std::vector<float> x(kLen, 1.0f), ys(static_cast<std::size_t>(kOps) * kLen);
  auto burst_ms = [&](Engine& eng, std::vector<Var>& vars) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kOps; ++i) {
      float* y = ys.data() + static_cast<std::size_t>(i) * kLen;
      eng.push(
          [&x, y] {
            for (int j = 0; j < kLen; ++j) y[j] = x[static_cast<std::size_t>(j)] + 1.0f;
          },
          {}, {vars[static_cast<std::size_t>(i)]});
    }
    eng.waitall();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> t[2];
  for (int r = 0; r < kReps; ++r) {
    for (int k = 0; k < 2; ++k) {
      EngineOptions o{EngineKind::kThreaded, workers};
      o.cpu_pacing = k == 0 ? Pacing::kRuns : Pacing::kOps;
      Engine eng(o);
      std::vector<Var> vars;
      for (int i = 0; i < kOps; ++i) vars.push_back(eng.new_var());
      burst_ms(eng, vars);  // warm-up: the op records, the buffers' pages, the workers
      t[k].push_back(burst_ms(eng, vars));
      for (Var v : vars) eng.delete_var(v);
      eng.waitall();
    }
    std::printf("  round %d: runs %7.2f ms, ops %7.2f ms\n", r + 1, t[0].back(), t[1].back());
  }
  record("burst_runs_ms", median(t[0]), "the burst, pushed and run, workers taking runs (median)");
  record("burst_ops_ms", median(t[1]), "the same, workers taking ops one by one");
  record("burst_runs_over_ops", median(t[0]) / median(t[1]), "= burst_runs_ms / burst_ops_ms");
  record("burst_workers", workers, "CPU workers of the burst's engines");
}

// ---- E5 ------------------------------------------------------------------------------------

// The chapter's E5 (experiments/chapter.h), five times; each figure is the median over the runs.
// Within a run the synchronous and asynchronous loops alternate, so drift affects both alike.
// t1 is what the chapter means: queueing one op while the backend is idle, timed around each push
// of a synchronous loop (separate, so the clock reads do not count in e5_sync_s). The asynchronous
// loop's pushes cost more (e5_async_step_us): there the frontend and a worker touch the same
// variables and queue at the same time, and cache lines cross between the cores.
void bench_e5() {
  heading("E5: 10000 x (y = x + 1) on a [1,2] array");
  const int kReps = 5;
  chapter::E5Config cfg;
  cfg.warmup = 2000;
  cfg.profiled = 2000;
  std::vector<double> sync, async, push, t1, t2;
  for (int r = 0; r < kReps; ++r) {
    const chapter::E5Result res = chapter::e5(cfg);
    sync.push_back(res.sync_s);
    async.push_back(res.async_s);
    push.push_back(res.push_s);
    t1.push_back(res.t1_s);
    t2.push_back(res.t2_s);
  }
  const int n = cfg.n;
  const double sync_s = median(sync), async_s = median(async);
  const chapter::E5Model model = chapter::e5_model(n, sync_s, median(t1), median(t2));
  record("e5_sync_s", sync_s, "wait_to_read after each of the 10000 adds");
  record("e5_async_s", async_s, "nd::waitall once at the end");
  record("e5_speedup", sync_s / async_s, "e5_sync_s / e5_async_s");
  record("e5_t1_us", median(t1) * 1e6, "push: one y = x + 1 queued while the backend is idle (mean per step)");
  record("e5_async_step_us", median(push) / n * 1e6,
         "push in the async loop, per step (frontend and worker contend)");
  record("e5_t2_us", median(t2) * 1e6, "compute: median start..end of a profiled add");
  record("e5_t3_us", model.t3_s * 1e6, "return: sync/N - t1 - t2");
  record("e5_model_async_s", model.model_async_s, "chapter's model t1 + N t2 + t3 (compare e5_async_s)");
}

// ---- E1 ------------------------------------------------------------------------------------

// The chapter's E1 (experiments/chapter.h) five times, without its naive-engine run.
void bench_e1() {
  heading("E1: 10 x (random_normal 1000x1000, dot)");
  const int kReps = 5;
  chapter::E1Config cfg;
  cfg.naive = false;
  std::vector<double> ret, all, sync;
  double first = 0, peak = 0;
  for (int r = 0; r < kReps; ++r) {
    const chapter::E1Result res = chapter::e1(cfg);
    ret.push_back(res.engine.returned_s);
    all.push_back(res.engine.finished_s);
    sync.push_back(res.sync_s);
    if (r == 0) first = res.engine_first.finished_s;
    peak = std::max(peak, res.engine_peak_mb);
  }
  record("e1_engine_return_s", median(ret), "the loop returns (ops only queued)");
  record("e1_engine_waitall_s", median(all), "until waitall returns (same runs)");
  record("e1_engine_sync_s", median(sync), "wait_to_read after every op (NumPy-style, float32)");
  record("e1_engine_first_waitall_s", first,
         "the engine loop's first run in this process (its memory fresh), to waitall");
  record("e1_engine_peak_mb", peak, "arrays alive at once in the engine loop (all runs' peak)");
}

// ---- E6 ------------------------------------------------------------------------------------
// The chapter's MLP, 100 batches, trained four ways (experiments/chapter.h), in five rounds; each
// figure is the median over the rounds. A round runs the two modes that never read first, then
// read-each-batch (sync) and the default engine next to each other, in turns (sync first in even
// rounds): their ratio is a goal, and a tie on a machine where both are bound by the GEMM, while
// such a machine's speed drifts by 15% from one half-minute to the next ("E6 default against
// read-each-batch, side by side" in bench/notes/runs.md). Both then also start on the CPU cache
// that nosync filled, so neither pays the page faults of a first run in the process.
void bench_e6() {
  heading("E6: the chapter's MLP, 100 batches of 1024x512, sync / nosync / bounded / default");
  const int kReps = 5;
  chapter::E6Config cfg;
  cfg.bound_bytes = chapter::e6_default_bound_bytes();
  const chapter::E6Mode modes[] = {chapter::E6Mode::kSync, chapter::E6Mode::kNoSync,
                                   chapter::E6Mode::kBounded, chapter::E6Mode::kDefault};
  constexpr int kModes = 4;
  constexpr int sync = 0, nosync = 1, bounded = 2, dflt = 3;  // indices into modes
  std::vector<double> total[kModes], peak[kModes], rss[kModes], batch[kModes], waits;
  double default_bound_mb = 0;
  const int order[2][kModes] = {{nosync, bounded, sync, dflt}, {nosync, bounded, dflt, sync}};
  for (int r = 0; r < kReps; ++r) {
    for (int m : order[r % 2]) {
      const chapter::E6Result res = chapter::e6(modes[m], cfg);
      std::printf("  %-8s run %d: %7.3f s, engine peak %8.1f MB, RSS peak %8.1f MB, %llu pushes waited\n",
                  chapter::e6_mode_name(res.mode), r + 1, res.total_s, res.engine_peak_mb,
                  res.rss_peak_mb, static_cast<unsigned long long>(res.push_waits));
      total[m].push_back(res.total_s);
      peak[m].push_back(res.engine_peak_mb);
      rss[m].push_back(res.rss_peak_mb);
      batch[m].push_back(res.per_batch_ms);
      if (m == dflt) {
        waits.push_back(static_cast<double>(res.push_waits));
        default_bound_mb = res.bound_mb;
      }
    }
    std::printf("  round %d: default / sync %.3f\n", r + 1, total[dflt].back() / total[sync].back());
  }
  for (int m = 0; m < kModes; ++m) {
    const std::string k = std::string("e6_") + chapter::e6_mode_name(modes[m]);
    record(k + "_s", median(total[m]), "total time, first batch handed out to waitall");
    record(k + "_peak_mb", median(peak[m]), "engine bytes in use at peak (MB)");
    record(k + "_rss_peak_mb", median(rss[m]), "process RSS at peak during the run (MB)");
    record(k + "_batch_ms", median(batch[m]), "time between two batches handed out (ms)");
  }
  record("e6_bound_mb", cfg.bound_bytes / 1e6, "the in-flight byte bound of the bounded runs (MB)");
  record("e6_default_bound_mb", default_bound_mb,
         std::string("the engine's default byte bound (MB), from ") +
             bound_source_name(engine().stats().max_inflight_bytes_source));
  record("e6_default_push_waits", median(waits), "pushes that waited on the default bound");
}


std::filesystem::path default_out() { return bench_dir() + "/results/native.json"; }

// Runs the chapter's E1 in NumPy. Done first, before the engine starts, so that no engine or
// OpenBLAS thread of ours competes with it for the two cores.
void bench_numpy(const std::string& exe_dir) {
  heading("E1 in NumPy (float64), /usr/bin/python3 bench/e1_numpy.py");
  std::string script = bench_dir() + "/e1_numpy.py";
  if (!std::filesystem::exists(script)) script = exe_dir + "/../bench/e1_numpy.py";
  if (!std::filesystem::exists(script)) {
    std::fprintf(stderr, "bench_native: e1_numpy.py not found; e1_numpy_s omitted\n");
    return;
  }
  std::string cmd = "/usr/bin/python3 '" + script + "' 5";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[128] = {0};
  bool got = p && std::fgets(buf, sizeof buf, p) != nullptr;
  int status = p ? pclose(p) : -1;
  char* end = nullptr;
  double s = got ? std::strtod(buf, &end) : 0.0;
  if (!got || status != 0 || end == buf || s <= 0) {
    std::fprintf(stderr, "bench_native: NumPy run failed (is python3-numpy installed for "
                         "/usr/bin/python3?); e1_numpy_s omitted\n");
    return;
  }
  record("e1_numpy_s", s, "NumPy float64, median of 5 after a warm-up");
}

// The peer: PyTorch eager on the CPU (Debian's python3-torch, which `make bench` installs), E5's
// per-step cost and, unless e5_only, E6 reading the loss each batch, with as many threads as our
// BLAS gets. ASYNCND_PYTHON names another Python (the GPU machine's, whose python3 has PyTorch;
// tools/gpu-check.sh), else Debian's /usr/bin/python3.
void bench_torch(const std::string& exe_dir, int threads, bool e5_only) {
  const char* py_env = std::getenv("ASYNCND_PYTHON");
  const std::string py = py_env && *py_env ? py_env : "/usr/bin/python3";
  heading(("PyTorch eager (CPU), " + py + " bench/torch_peer.py").c_str());
  std::string script = bench_dir() + "/torch_peer.py";
  if (!std::filesystem::exists(script)) script = exe_dir + "/../bench/torch_peer.py";
  const std::string cmd = py + " '" + script + "' " + std::to_string(threads) +
                          (e5_only ? " --e5" : "") + " 2>&1";
  const PeerRun run = std::filesystem::exists(script) ? run_peer(cmd, "torch_") : PeerRun{};
  for (const std::string& c : run.comments) std::printf("  %s\n", c.c_str());
  for (const auto& [key, v] : run.figures)
    record(key, v, key == "torch_e5_step_us"
                       ? "10000 x y = x + 1 on a [1,2] tensor, per step, median of 5"
                       : "the chapter's MLP, 100 batches of 1024x512, loss read each batch");
  if (run.status != 0 || run.figures.size() != (e5_only ? 1u : 2u)) {
    std::fprintf(stderr, "bench_native: the PyTorch peer did not run (make bench installs "
                         "python3-torch); torch_* omitted:\n%s\n", run.output.c_str());
  }
}

// ---- machine and output ------------------------------------------------------------------

using asyncnd_bench::json_str;

// OpenBLAS's core as the backend left it (cpu_gemm() starts the backend, which may switch it),
// whichever GEMM runs (machine.gemm says that); "none" in a build without OpenBLAS (it said our
// GEMM's name there, as if OpenBLAS ran it).
std::string blas_corename() {
  cpu_gemm();
#if ASYNCND_HAVE_OPENBLAS
  return openblas_get_corename();
#else
  return "none";
#endif
}
int blas_threads_policy() { return detail::cpu_blas_threads(); }

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v ? v : dflt;
}

// Load average: other processes on these 2-core machines halve the figures; recorded at the
// start and the end of the run so that a noisy run can be recognised afterwards.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}
std::string g_load_start;

// Percent of the machine's CPU time that was busy over `seconds`, from /proc/stat, taken before
// the run starts: anything well above 0 is another process that will skew the figures.
double busy_percent(double seconds) {
  auto sample = [](unsigned long long& total, unsigned long long& idle) {
    std::ifstream in("/proc/stat");
    std::string cpu;
    unsigned long long v[8] = {0};
    in >> cpu;
    for (auto& x : v) in >> x;
    total = 0;
    for (auto x : v) total += x;
    idle = v[3] + v[4];  // idle + iowait
  };
  unsigned long long t0, i0, t1, i1;
  sample(t0, i0);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  sample(t1, i1);
  return t1 > t0 ? 100.0 * (1.0 - double(i1 - i0) / double(t1 - t0)) : 0.0;
}
double g_busy_before = 0;

std::string machine_json() {
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ostringstream m;
  m << "{\"cpu_model\": " << json_str(cpu_model())
    << ", " << cores_json()
    << ", \"openblas_corename\": " << json_str(blas_corename())
    << ", \"openblas_threads\": " << blas_threads_policy()
    << ", \"gemm\": " << json_str(cpu_gemm().kernel)
    << ", \"gemm_reason\": " << json_str(cpu_gemm().reason)
    << ", \"sgemm1000_best_kernel\": " << json_str(best_kernel())
    << ", \"cpu_workers\": " << engine().num_workers()
    << ", \"cpu_chunk_helpers\": " << engine().num_chunk_helpers()
    << ", \"cpu_pacing\": " << json_str(pacing_name(engine().pacing()))
    // The CPU allocator's bound follows the memory (CachingAllocator::default_limit), and E6's
    // default run faults blocks in again when it is smaller than what the run holds.
    << ", \"cpu_cache_mb\": " << (detail::cpu_cache_limit() >> 20)
    << ", \"max_inflight_mb\": " << (engine().stats().max_inflight_bytes >> 20)
    << ", \"engine\": " << json_str(engine().kind() == EngineKind::kThreaded ? "threaded" : "naive")
    << ", \"env_OPENBLAS_CORETYPE\": " << json_str(env_or("OPENBLAS_CORETYPE", ""))
    << ", \"env_ASYNCND_BLAS_THREADS\": " << json_str(env_or("ASYNCND_BLAS_THREADS", ""))
    << ", \"env_OPENBLAS_NUM_THREADS\": " << json_str(env_or("OPENBLAS_NUM_THREADS", ""))
    << ", \"env_OMP_NUM_THREADS\": " << json_str(env_or("OMP_NUM_THREADS", ""))
    << ", \"env_ASYNCND_CPU_WORKERS\": " << json_str(env_or("ASYNCND_CPU_WORKERS", ""))
    << ", \"env_ASYNCND_CPU_HELPERS\": " << json_str(env_or("ASYNCND_CPU_HELPERS", ""))
    << ", \"loadavg_start\": " << json_str(g_load_start)
    << ", \"cpu_busy_before_pct\": " << g_busy_before
    << ", \"date\": " << json_str(date) << "}";
  return m.str();
}

std::string exe_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  return std::filesystem::path(std::string(buf, static_cast<std::size_t>(n))).parent_path().string();
}

// --only=e6: writes the figures measured into the existing file, keeping its other keys and its
// "machine" line (the file has one "key": value per line, as main writes it).
void merge_into(const std::filesystem::path& out) {
  std::ifstream in(out);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  std::vector<std::string> body;  // the "key": value lines, without the trailing comma
  std::string machine;
  for (const std::string& l : lines) {
    if (l.rfind("  \"machine\":", 0) == 0) machine = l;
    else if (l.rfind("  \"", 0) == 0) body.push_back(l.back() == ',' ? l.substr(0, l.size() - 1) : l);
  }
  for (const Figure& f : g_figures) {
    char num[64];
    std::snprintf(num, sizeof num, "%.6g", f.value);
    const std::string key = "  " + json_str(f.key) + ":";
    const std::string entry = key + " " + num;
    bool found = false;
    for (std::string& b : body) {
      if (b.rfind(key, 0) == 0) b = entry, found = true;
    }
    if (!found) body.push_back(entry);
  }
  if (machine.empty()) machine = "  \"machine\": " + machine_json();
  // The machine object is the whole run's; --only=gemm found the best kernel again, so it names
  // that one (the sgemm1000_best_kernel_gflops beside it is this run's).
  const std::string best_key = "\"sgemm1000_best_kernel\": \"";
  const auto best_at = machine.find(best_key);
  if (!best_kernel().empty() && best_at != std::string::npos) {
    const auto from = best_at + best_key.size() - 1;
    const auto to = machine.find('"', from + 1);
    if (to != std::string::npos) machine.replace(from, to + 1 - from, json_str(best_kernel()));
  }
  std::ofstream f(out);
  f << "{\n";
  for (const std::string& b : body) f << b << ",\n";
  f << machine << "\n}\n";
}

}  // namespace

// bench_native [--only=e6|gemm|overhead] [out.json]
int main(int argc, char** argv) {
  // --gemm-kernel: a child of bench_gemm_sweep, not for users.
  const asyncnd_bench::BenchArgs args = asyncnd_bench::parse_bench_args(
      argc, argv, "bench_native [--only=e6|gemm|overhead] [OUT.json]  (default OUT: "
                  "bench/results/native.json; --only updates those figures in OUT)",
      {"--only=", "--gemm-kernel"});
  const std::string self_exe =
      exe_dir() + "/" + std::filesystem::path(argv[0]).filename().string();
#if ASYNCND_HAVE_OPENBLAS
  if (args.has("--gemm-kernel")) return gemm_kernel_child();
#endif
  const std::filesystem::path out =
      args.plain.empty() ? default_out() : std::filesystem::path(args.plain[0]);
  const std::string only = args.value("--only=");
  if (args.has("--only=") && only != "e6" && only != "gemm" && only != "overhead") {
    std::fprintf(stderr, "bench_native: --only takes e6, gemm or overhead, got '%s'\n", only.c_str());
    return 2;
  }
  if (!only.empty()) {
    try {
      std::printf("bench_native --only=%s: %s, %s, load average %s, OpenBLAS core %s, "
                  "GEMM %s, %d CPU workers taking %s\n",
                  only.c_str(), cpu_model().c_str(), cores_text().c_str(),
                  loadavg().c_str(), blas_corename().c_str(), cpu_gemm().kernel.c_str(),
                  engine().num_workers(), pacing_name(engine().pacing()));
      if (only == "e6") {
        bench_e6();
      } else if (only == "overhead") {  // the per-op costs against this machine's hand-off floor
        bench_per_op();
        bench_burst();
        bench_e5();
        bench_torch(exe_dir(), blas_threads_policy(), true);  // E5's peer, in the same run
      } else {  // the engine's GEMM against the best kernel this CPU has
#if ASYNCND_HAVE_OPENBLAS
        bench_gemm_sweep(self_exe);
#endif
        bench_own_sgemm();
        bench_sgemm_rounds();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_native: stopped by an error: %s\n", e.what());
      return 1;
    }
    merge_into(out);
    std::printf("\nupdated %s\n", out.string().c_str());
    return 0;
  }
  try {
    g_load_start = loadavg();
    g_busy_before = busy_percent(1.0);
    std::printf("bench_native: %s, %s; before the run: load average %s, CPU %.0f%% busy%s\n",
                cpu_model().c_str(), cores_text().c_str(), g_load_start.c_str(),
                g_busy_before, g_busy_before > 10 ? " (another process is running: expect noise)" : "");
    bench_numpy(exe_dir());
    std::printf("\nengine: %d CPU workers taking %s, OpenBLAS core %s, %d BLAS threads (policy)\n"
                "GEMM: %s (%s)\n",
                engine().num_workers(), pacing_name(engine().pacing()), blas_corename().c_str(),
                blas_threads_policy(),
                cpu_gemm().kernel.c_str(), cpu_gemm().reason.c_str());
    bench_torch(exe_dir(), blas_threads_policy(), false);
    bench_per_op();
    bench_burst();
    bench_e5();
#if ASYNCND_HAVE_OPENBLAS
    bench_gemm_sweep(self_exe);
#else
    std::fprintf(stderr, "bench_native: built without OpenBLAS: no kernel sweep, no "
                         "sgemm1000_direct_* figures\n");
#endif
    bench_own_sgemm();
    bench_sgemm_rounds();
    bench_e1();
    bench_e6();
  } catch (const std::exception& e) {
    // Write what was measured anyway; check-targets reports the rest as missing.
    std::fprintf(stderr, "bench_native: stopped by an error: %s\n", e.what());
  }

  std::ostringstream js;
  js << "{\n";
  for (const Figure& f : g_figures) {
    char num[64];
    std::snprintf(num, sizeof num, "%.6g", f.value);
    js << "  " << json_str(f.key) << ": " << num << ",\n";
  }
  js << "  \"machine\": " << machine_json() << "\n}\n";
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
  std::ofstream f(out);
  f << js.str();
  if (!f) {
    std::fprintf(stderr, "bench_native: cannot write %s\n", out.string().c_str());
    return 1;
  }
  std::printf("\nwrote %s\n", out.string().c_str());
  return 0;
}
