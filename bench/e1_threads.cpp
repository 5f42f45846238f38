// bench_e1_threads [out.json]: the chapter's E1 (10 x random_normal 1000x1000, then its product
// with itself) against the thread counts, for machines with many cores.
//
// Why: on a 16-vCPU Intel Xeon (15 engine workers, OpenBLAS with 16 threads) make demo's E1 took
// 2.2-2.5x as long on the engine as waiting after every op; on our 2-vCPU machines the two are
// alike. Candidates: (a) the demo timed the engine loop's first run, whose twenty outputs, all
// alive at once, were fresh memory (page faults; found on a Zen 4, where it costs about 25 ms:
// bench/README.md); (b) oversubscription: the engine runs the nine independent random_normals
// (split across idle workers) while a GEMM holds every core with OpenBLAS's threads, and
// OpenBLAS's statically split GEMM slows down as a whole when one of its threads loses its core;
// (c) OpenBLAS's threads polling for work after a GEMM, taking cores from the ops that follow.
// This program gathers what tells them apart, in one run of a few seconds:
//   1. E1 synchronous and on the engine with 1, 2, 4, ... CPU workers, the default number (one
//      per usable CPU but one) and one per usable CPU (configure_engine), medians of
//      five, and the first run of each on the workers just started (candidate a);
//   2. one profiled run of each loop with the default workers: the mean time of a dot and of a
//      random_normal, and how many other ops ran beside the dots on average (a dot that takes
//      longer on the engine than in the synchronous loop, with ops beside it: candidate b);
//   3. a random_normal alone and right after a GEMM (candidate c);
//   4. E1 in child processes with one setting changed: fewer BLAS threads (ASYNCND_BLAS_THREADS,
//      half the usable CPUs and 1) and OpenBLAS's polling cut short
//      (OPENBLAS_THREAD_TIMEOUT=4), each where the user has not set it.
// With out.json it writes the figures there (flat keys, "e1t_..."), and the engine run's trace
// beside it (e1_threads_trace.json, for Perfetto). tools/gpu-check.sh runs it on the GPU machine,
// the many-core machine we have. bench/notes/e1.md, "E1's first run, and the thread counts", has
// the results.
#include <asyncnd/asyncnd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "cpu/cpu_backend.h"
#include "experiments/chapter.h"

using namespace asyncnd;
using asyncnd_bench::median;

namespace {

constexpr int kReps = 5;

std::vector<std::pair<std::string, double>> g_figures;
void record(const std::string& key, double v) { g_figures.emplace_back(key, v); }

struct E1Times {
  double sync_s, engine_s;              // medians
  double first_sync_s, first_engine_s;  // the first run of each, as make demo's E1 runs once
};

// kReps runs of each loop, alternated, after one warm-up product, on workers just started (the
// first run is the demo's case: a worker may run its first GEMM there).
E1Times e1_medians() {
  chapter::E1Config cfg;
  nd::dot(nd::random_normal({cfg.n, cfg.n}), nd::random_normal({cfg.n, cfg.n})).wait_to_read();
  std::vector<double> sync, eng;
  for (int r = 0; r < kReps; ++r) {
    const auto t0 = chapter::Clock::now();
    chapter::e1_loop(cfg.iters, cfg.n, Device{}, true);
    sync.push_back(chapter::seconds_since(t0));
    eng.push_back(chapter::e1_async(cfg.iters, cfg.n).finished_s);
  }
  return {median(sync), median(eng), sync[0], eng[0]};
}

struct ProfileSummary {
  double total_ms = 0;       // first start .. last end
  double dot_ms = 0;         // mean duration of a dot
  double random_ms = 0;      // mean duration of a random_normal
  double beside_dot = 0;     // mean number of other ops running at some point during a dot
  double max_running = 0;    // the most ops running at once
};

ProfileSummary summarize(const std::vector<ProfileEvent>& events) {
  ProfileSummary s;
  std::vector<const ProfileEvent*> ops;
  for (const ProfileEvent& e : events)
    if (e.lane.empty() && e.end_us > e.start_us) ops.push_back(&e);
  if (ops.empty()) return s;
  double first = ops[0]->start_us, last = ops[0]->end_us;
  double dot_sum = 0, random_sum = 0, beside_sum = 0;
  int dots = 0, randoms = 0;
  std::vector<std::pair<double, int>> edges;  // (time, +1 start / -1 end)
  for (const ProfileEvent* e : ops) {
    first = std::min(first, e->start_us);
    last = std::max(last, e->end_us);
    edges.emplace_back(e->start_us, 1);
    edges.emplace_back(e->end_us, -1);
    if (e->name == "dot") {
      dot_sum += e->end_us - e->start_us;
      ++dots;
      for (const ProfileEvent* o : ops)
        if (o != e && o->start_us < e->end_us && o->end_us > e->start_us) beside_sum += 1;
    } else if (e->name == "random_normal") {
      random_sum += e->end_us - e->start_us;
      ++randoms;
    }
  }
  std::sort(edges.begin(), edges.end());  // an end before a start at the same time
  int running = 0;
  for (const auto& [t, d] : edges) {
    running += d;
    s.max_running = std::max(s.max_running, static_cast<double>(running));
  }
  s.total_ms = (last - first) / 1e3;
  s.dot_ms = dots ? dot_sum / dots / 1e3 : 0;
  s.random_ms = randoms ? random_sum / randoms / 1e3 : 0;
  s.beside_dot = dots ? beside_sum / dots : 0;
  return s;
}

// One profiled run of the loop (synchronous or on the engine); returns the trace JSON.
std::string profiled(bool sync, ProfileSummary* out) {
  chapter::E1Config cfg;
  Engine& eng = engine();
  eng.start_profiling();
  chapter::e1_loop(cfg.iters, cfg.n, Device{}, sync);
  nd::waitall();
  std::string trace = eng.stop_profiling();
  *out = summarize(eng.profile_events());
  return trace;
}

struct RandomTimes {
  double alone_ms, after_gemm_ms;
};
constexpr int kRandomReps = 21;

// A random_normal's time from push to wait_to_read, alone (after another one) and right after a
// GEMM has finished (wait_to_read on the product), alternated, medians.
RandomTimes random_after_gemm() {
  const Shape shape = {1000, 1000};
  NDArray a = nd::random_normal(shape);
  nd::dot(a, a).wait_to_read();
  std::vector<double> alone, after;
  auto timed = [&] {
    const auto t0 = chapter::Clock::now();
    nd::random_normal(shape).wait_to_read();
    return chapter::seconds_since(t0) * 1e3;
  };
  for (int r = 0; r < kRandomReps; ++r) {
    nd::random_normal(shape).wait_to_read();
    alone.push_back(timed());
    nd::dot(a, a).wait_to_read();
    after.push_back(timed());
  }
  return {median(alone), median(after)};
}

void print_profile(const char* mode, const ProfileSummary& p) {
  std::printf("  %-12s %8.1f ms %9.2f ms %12.2f ms %12.1f %12.0f\n", mode, p.total_ms, p.dot_ms,
              p.random_ms, p.beside_dot, p.max_running);
  const std::string k = std::string("e1t_profile_") + mode;
  record(k + "_total_ms", p.total_ms);
  record(k + "_dot_ms", p.dot_ms);
  record(k + "_random_ms", p.random_ms);
  record(k + "_ops_beside_dot", p.beside_dot);
  record(k + "_max_running", p.max_running);
}

}  // namespace

int main(int argc, char** argv) {
  // --child: the run in a subprocess with one BLAS thread, not for users.
  const asyncnd_bench::BenchArgs args = asyncnd_bench::parse_bench_args(
      argc, argv, "bench_e1_threads [OUT.json]  (without OUT it prints its figures only; with "
                  "it, it also writes e1_threads_trace.json beside OUT)",
      {"--child"});
  const bool child = args.has("--child");
  const char* out_path = !child && !args.plain.empty() ? args.plain[0].c_str() : nullptr;
  // Read before the CPU backend starts: it sets OPENBLAS_THREAD_TIMEOUT where the user did not.
  const bool user_timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr;
  try {
    // The CPUs this process may use (the affinity mask and a cgroup CPU quota narrow the online
    // ones), as the engine's and BLAS's defaults count them: in a container limited to a few CPUs
    // of a big host, a worker per online CPU would only measure oversubscription.
    const CpuLimit limit = program_cpu_limit();
    const int cores = limit.cpus;
    const int deflt = engine().num_workers(Device::cpu());  // as configured by the environment
    if (child) {  // four lines per worker count for the parent: the default, and 1
      for (int w : {deflt, 1}) {
        EngineOptions o = EngineOptions::from_env();
        // The default row is the default engine (from_env as it is): an explicit count, even the
        // same one, leaves out the chunk helper the default engine has.
        if (w != deflt) o.cpu_workers = w;
        configure_engine(o);
        const E1Times t = e1_medians();
        std::printf("e1t_w%d_sync_s %.5f\ne1t_w%d_engine_s %.5f\ne1t_w%d_first_sync_s %.5f\n"
                    "e1t_w%d_first_engine_s %.5f\n",
                    w, t.sync_s, w, t.engine_s, w, t.first_sync_s, w, t.first_engine_s);
        if (deflt == 1) break;
      }
      return 0;
    }
    std::printf("bench_e1_threads: %s, %s, BLAS %s with %d threads%s, %d CPU "
                "workers by default, taking %s\n",
                asyncnd_bench::cpu_model().c_str(), asyncnd_bench::cores_text(limit).c_str(),
                detail::cpu_blas_corename().c_str(),
                detail::cpu_blas_threads(),
                std::getenv("ASYNCND_BLAS_THREADS") ? " (ASYNCND_BLAS_THREADS)" : "", deflt,
                pacing_name(engine().pacing()));
    record("e1t_hardware_threads", limit.online);
    record("e1t_cpus_usable", cores);
    record("e1t_blas_threads", detail::cpu_blas_threads());
    record("e1t_default_workers", deflt);

    // 1. The worker sweep.
    std::vector<int> counts;
    for (int w = 1; w < deflt; w *= 2) counts.push_back(w);
    counts.push_back(deflt);
    if (cores > deflt) counts.push_back(cores);  // a worker per usable CPU, frontend beside
    std::printf("\nE1, medians of %d, and the first run on fresh workers (s):\n  %-8s %10s %10s "
                "%14s %12s %12s\n",
                kReps, "workers", "sync", "engine", "engine/sync", "first sync", "first engine");
    for (int w : counts) {
      EngineOptions o = EngineOptions::from_env();
      if (w != deflt) o.cpu_workers = w;  // the default row: the default engine, as above
      configure_engine(o);
      const E1Times t = e1_medians();
      std::printf("  %-8d %10.4f %10.4f %14.2f %12.4f %12.4f\n", w, t.sync_s, t.engine_s,
                  t.engine_s / t.sync_s, t.first_sync_s, t.first_engine_s);
      const std::string k = "e1t_w" + std::to_string(w);
      record(k + "_sync_s", t.sync_s);
      record(k + "_engine_s", t.engine_s);
      record(k + "_first_sync_s", t.first_sync_s);
      record(k + "_first_engine_s", t.first_engine_s);
    }

    // 2. Where the time goes with the default workers.
    configure_engine(EngineOptions::from_env());
    std::printf("\nOne profiled run each, %d workers:\n  %-12s %11s %12s %15s %12s %12s\n", deflt,
                "loop", "total", "mean dot", "mean random", "ops beside", "most at once");
    ProfileSummary p;
    profiled(true, &p);
    print_profile("sync", p);
    const std::string trace = profiled(false, &p);
    print_profile("engine", p);

    // 3. What OpenBLAS's polling after a GEMM costs the op that follows.
    const RandomTimes rt = random_after_gemm();
    std::printf("\nrandom_normal 1000x1000, push to wait_to_read, median of %d: alone %.2f ms, "
                "right after a GEMM %.2f ms\n",
                kRandomReps, rt.alone_ms, rt.after_gemm_ms);
    record("e1t_random_alone_ms", rt.alone_ms);
    record("e1t_random_after_gemm_ms", rt.after_gemm_ms);

    // 4. E1 in child processes with one setting changed (each is read once per process).
    std::vector<std::pair<std::string, std::string>> variants;  // (key, environment)
    if (!std::getenv("ASYNCND_BLAS_THREADS") && cores > 1) {
      if (cores >= 4)
        variants.push_back({"blas" + std::to_string(cores / 2),
                            "ASYNCND_BLAS_THREADS=" + std::to_string(cores / 2)});
      variants.push_back({"blas1", "ASYNCND_BLAS_THREADS=1"});
    }
    if (!user_timeout && cpu_gemm().kernel.rfind("openblas ", 0) == 0)  // OpenBLAS's threads
      variants.push_back({"timeout4", "OPENBLAS_THREAD_TIMEOUT=4"});
    if (!variants.empty())
      std::printf("\nOne setting changed (child processes), medians of %d and first runs (s):\n"
                  "  %-30s %-8s %10s %10s %14s %12s %12s\n",
                  kReps, "setting", "workers", "sync", "engine", "engine/sync", "first sync",
                  "first engine");
    int status = 0;  // 1 when a child failed: its figures are missing
    for (const auto& [key, env] : variants) {
      const std::string cmd = env + " '" + std::string(argv[0]) + "' --child 2>&1";
      const asyncnd_bench::PeerRun r = asyncnd_bench::run_peer(cmd, "e1t_");
      if (r.status != 0 || r.figures.size() < 4 || r.figures.size() % 4 != 0) {
        std::printf("  %s: the child failed (status %d): %s\n", env.c_str(), r.status,
                    r.output.c_str());
        status = 1;
        continue;
      }
      for (std::size_t i = 0; i < r.figures.size(); i += 4) {  // the child's four lines per count
        const int w = std::atoi(r.figures[i].first.c_str() + 5);  // "e1t_w<N>_sync_s"
        const double sync_s = r.figures[i].second, engine_s = r.figures[i + 1].second;
        std::printf("  %-30s %-8d %10.4f %10.4f %14.2f %12.4f %12.4f\n", env.c_str(), w, sync_s,
                    engine_s, engine_s / sync_s, r.figures[i + 2].second, r.figures[i + 3].second);
        for (std::size_t j = i; j < i + 4; ++j)  // e1t_w<N>_... -> e1t_<key>_w<N>_...
          record("e1t_" + key + "_" + r.figures[j].first.substr(4), r.figures[j].second);
      }
    }

    if (out_path) {
      std::ofstream f(out_path);
      char date[32];
      const std::time_t now = std::time(nullptr);
      std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
      f << "{\n  \"machine\": {\"cpu_model\": " << asyncnd_bench::json_str(asyncnd_bench::cpu_model())
        << ", \"blas_core\": " << asyncnd_bench::json_str(detail::cpu_blas_corename())
        << ", \"date\": \"" << date << "\"}";
      for (const auto& [k, v] : g_figures) f << ",\n  \"" << k << "\": " << v;
      f << "\n}\n";
      const std::filesystem::path trace_path =
          std::filesystem::path(out_path).parent_path() / "e1_threads_trace.json";
      std::ofstream t(trace_path);
      t << trace;
      if (!f.flush() || !t.flush()) {
        std::fprintf(stderr, "bench_e1_threads: cannot write %s or %s\n", out_path,
                     trace_path.c_str());
        return 1;
      }
      std::printf("\nwrote %s and %s\n", out_path, trace_path.c_str());
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_e1_threads: %s\n", e.what());
    return 1;
  }
}
