// chapter: the experiments of the chapter "Asynchronous Computation", run natively (`make demo`).
//
// Walks through the chapter in its order and prints every figure it measures:
//   E1  random matrices and products: a synchronous baseline vs the asynchronous engine
//   E2  the dependency graph of z = x * y + 2, recorded by the profiler (text and Graphviz DOT)
//   E3  barriers: wait_to_read and waitall
//   E4  implicit blockers: to_vector, item, printing
//   E5  10 000 small additions, waiting after each vs once, and the t1/t2/t3 model
//   E6  memory: the chapter's MLP trained with a sync per batch, without (byte bound off), with a
//       small in-flight byte bound, and with the engine's default bound (examples/cpp/e6_mlp.h)
//   E7  CPU vs GPU: E1 on each device, and both at once (skipped, saying why, without a GPU)
// Takes about a minute (E6 trains 4 x 100 batches). bench/native.cpp measures the same
// things more carefully (repeats, medians).
#include <asyncnd/asyncnd.h>

#include "e6_mlp.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace asyncnd;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void heading(const char* title) { std::printf("\n== %s\n", title); }

// ---- E1 ------------------------------------------------------------------------------------
// The chapter makes ten random 1000x1000 matrices and multiplies each by itself, first in NumPy
// (which computes everything before returning), then in the framework (which only queues).
void e1() {
  heading("E1  ten random 1000x1000 matrices, each multiplied by itself");
  const int kIters = 10;
  NDArray warm = nd::dot(nd::random_normal({1000, 1000}), nd::random_normal({1000, 1000}));
  warm.wait_to_read();  // first use: threads, BLAS buffers and pages are set up outside the timing

  // Synchronous baseline, the way NumPy behaves: wait for every op before issuing the next.
  auto t0 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    NDArray a = nd::random_normal({1000, 1000});
    a.wait_to_read();
    NDArray b = nd::dot(a, a);
    b.wait_to_read();
  }
  double sync_s = since(t0);

  // The same with the naive engine, which runs every op inline inside the call: a debugging mode
  // and another synchronous baseline.
  configure_engine([] { EngineOptions o = EngineOptions::from_env(); o.kind = EngineKind::kNaive; return o; }());
  t0 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    NDArray a = nd::random_normal({1000, 1000});
    NDArray b = nd::dot(a, a);
  }
  double naive_s = since(t0);
  configure_engine(EngineOptions::from_env());  // back to the threaded engine

  // Asynchronous: the loop only queues work. Its time to return says nothing about the work;
  // waitall is what makes the timing honest.
  t0 = Clock::now();
  for (int i = 0; i < kIters; ++i) {
    NDArray a = nd::random_normal({1000, 1000});
    NDArray b = nd::dot(a, a);
  }
  double returned_s = since(t0);
  nd::waitall();
  double finished_s = since(t0);

  std::printf("  synchronous (wait after every op)  %8.4f s\n", sync_s);
  std::printf("  synchronous (naive engine)         %8.4f s\n", naive_s);
  std::printf("  engine: loop returned after        %8.4f s   <- only queued\n", returned_s);
  std::printf("  engine: waitall returned after     %8.4f s   <- the real cost\n", finished_s);
  std::printf("  Returning early is not computing faster: with waitall the engine is about as fast\n"
              "  as the synchronous run (faster where independent ops overlap).\n");
}

// ---- E2 ------------------------------------------------------------------------------------
// The frontend issues ops; the backend sees them as a graph whose edges are variables. The
// profiler records each op's reads and writes, which is all a graph needs.
void e2() {
  heading("E2  the dependency graph of z = x * y + 2");
  Engine& eng = engine();
  eng.start_profiling();
  NDArray x = nd::ones({1, 2});
  NDArray y = nd::ones({1, 2});
  NDArray z = x * y + 2;
  z.wait_to_read();
  eng.stop_profiling();
  std::cout << "  z = " << z << "\n";

  std::vector<ProfileEvent> events = eng.profile_events();
  std::stable_sort(events.begin(), events.end(),
                   [](const ProfileEvent& a, const ProfileEvent& b) { return a.push_us < b.push_us; });

  // Name the variables we know; the rest are the temporaries the expression made.
  std::map<std::uint64_t, std::string> names = {
      {x.var().id(), "x"}, {y.var().id(), "y"}, {z.var().id(), "z"}};
  int temps = 0;
  auto name_of = [&](std::uint64_t id) {
    auto it = names.find(id);
    if (it == names.end()) it = names.emplace(id, "tmp" + std::to_string(++temps)).first;
    return it->second;
  };

  std::printf("  ops in push order (reads -> writes):\n");
  // The engine's rules, replayed: a read waits for the last write of its variable; a write waits
  // for the last write and for every read since.
  std::map<std::uint64_t, int> last_writer;               // var id -> op that last wrote it
  std::map<std::uint64_t, std::vector<int>> readers;      // var id -> ops that read it since
  std::vector<std::pair<int, int>> edges;                 // (earlier op, op that waits for it)
  for (std::size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    std::string line = "    op" + std::to_string(i) + " " + e.name + "(";
    for (std::size_t k = 0; k < e.reads.size(); ++k) line += (k ? ", " : "") + name_of(e.reads[k]);
    line += ") -> ";
    for (std::size_t k = 0; k < e.writes.size(); ++k) line += (k ? ", " : "") + name_of(e.writes[k]);
    char when[96];
    std::snprintf(when, sizeof when, "   [worker %d, ran %.1f..%.1f us]", e.worker, e.start_us, e.end_us);
    std::printf("%s%s\n", line.c_str(), when);
    const int me = static_cast<int>(i);
    for (std::uint64_t r : e.reads) {
      auto it = last_writer.find(r);
      if (it != last_writer.end()) edges.emplace_back(it->second, me);
      readers[r].push_back(me);
    }
    for (std::uint64_t w : e.writes) {
      auto it = last_writer.find(w);
      if (it != last_writer.end()) edges.emplace_back(it->second, me);
      for (int rd : readers[w]) edges.emplace_back(rd, me);
      readers[w].clear();
      last_writer[w] = me;
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::printf("  dependencies (an op waits for the earlier ops that touch what it writes, and for\n"
              "  the writers of what it reads):\n");
  for (auto& [from, to] : edges)
    std::printf("    op%d %s -> op%d %s\n", from, events[from].name.c_str(), to, events[to].name.c_str());
  std::printf("  Ops with no path between them (the two ones) may run at the same time.\n");

  // Graphviz: ops are boxes, variables are ellipses; paste into `dot -Tsvg` to draw it.
  std::ostringstream dot;
  dot << "digraph z_eq_x_times_y_plus_2 {\n  rankdir=LR;\n";
  for (auto& [id, n] : names) dot << "  v" << id << " [label=\"" << n << "\", shape=ellipse];\n";
  for (std::size_t i = 0; i < events.size(); ++i) {
    dot << "  op" << i << " [label=\"" << events[i].name << "\", shape=box];\n";
    for (std::uint64_t r : events[i].reads) dot << "  v" << r << " -> op" << i << ";\n";
    for (std::uint64_t w : events[i].writes) dot << "  op" << i << " -> v" << w << ";\n";
  }
  dot << "}\n";
  std::printf("  Graphviz DOT:\n%s", dot.str().c_str());
}

// ---- E3 and E4 -------------------------------------------------------------------------------
// The chapter's 2000x2000 cells: queued vs finished, then each way of waiting.
void e3_e4() {
  heading("E3  barriers: wait_to_read and waitall");
  NDArray x = nd::random_uniform({2000, 2000});
  nd::dot(x, x).wait_to_read();  // warm-up

  auto t0 = Clock::now();
  NDArray s = nd::dot(x, x).sum();
  double queued = since(t0);
  std::cout << "  sum = " << s << "\n";
  double printed = since(t0);
  std::printf("  y = dot(x, x).sum() queued after %.4f s; printing it finished after %.4f s\n",
              queued, printed);

  t0 = Clock::now();
  NDArray y = nd::dot(x, x);
  y.wait_to_read();
  double wtr = since(t0);

  t0 = Clock::now();
  y = nd::dot(x, x);
  nd::waitall();
  double wall = since(t0);

  t0 = Clock::now();
  y = nd::dot(x, x);
  NDArray z = nd::dot(x, x);
  nd::waitall();
  double wall2 = since(t0);

  std::printf("  one dot + y.wait_to_read()   %8.4f s\n", wtr);
  std::printf("  one dot + waitall()          %8.4f s   (about the same: both wait for the dot)\n", wall);
  std::printf("  two dots + waitall()         %8.4f s   (waitall waits for both)\n", wall2);

  heading("E4  implicit blockers: anything that needs the values waits for them");
  t0 = Clock::now();
  y = nd::dot(x, x);
  std::vector<float> host = y.to_vector();
  double tv = since(t0);

  t0 = Clock::now();
  y = nd::dot(x, x);
  float n = y.norm().item();
  double ti = since(t0);

  std::ostringstream sink;
  t0 = Clock::now();
  y = nd::dot(x, x);
  sink << y.sum();
  double tp = since(t0);

  std::printf("  dot + to_vector()      %8.4f s   (%zu values copied out)\n", tv, host.size());
  std::printf("  dot + norm().item()    %8.4f s   (norm = %g)\n", ti, n);
  std::printf("  dot + printing sum     %8.4f s   (%s)\n", tp, sink.str().c_str());
  std::printf("  Each costs a full dot: converting to host data, to a scalar or to text must wait.\n"
              "  Doing it often in a loop turns asynchronous code back into synchronous code.\n");
}

// ---- E5 ------------------------------------------------------------------------------------
// Many tiny ops: here the cost of talking to the backend dominates, and waiting after each op
// pays the round trip every time.
void e5() {
  heading("E5  10000 x (y = x + 1) on a [1,2] array: waiting each time vs once");
  const int kN = 10000;
  NDArray x = nd::ones({1, 2});
  NDArray y;
  for (int i = 0; i < 1000; ++i) y = x + 1;  // warm-up: workers awake, allocator primed
  nd::waitall();

  auto t0 = Clock::now();
  for (int i = 0; i < kN; ++i) {
    y = x + 1;
    y.wait_to_read();
  }
  double sync_s = since(t0);

  t0 = Clock::now();
  for (int i = 0; i < kN; ++i) y = x + 1;
  double push_s = since(t0);  // pushing alone
  nd::waitall();
  double async_s = since(t0);

  // t1, queueing one op while the backend is idle: timed around each push of a synchronous loop
  // (separate, so that the clock reads do not count in sync_s). In the asynchronous loop a push
  // costs more: the frontend and a worker touch the same variables at the same time.
  double t1_total = 0;
  for (int i = 0; i < kN; ++i) {
    auto a = Clock::now();
    y = x + 1;
    t1_total += since(a);
    y.wait_to_read();
  }

  // t2, the compute of one op, from the profiler: each op's start..end on its worker.
  Engine& eng = engine();
  eng.start_profiling();
  for (int i = 0; i < 1000; ++i) y = x + 1;
  nd::waitall();
  eng.stop_profiling();
  std::vector<double> run;
  for (const ProfileEvent& e : eng.profile_events())
    if (!e.writes.empty() && !e.reads.empty()) run.push_back(e.end_us - e.start_us);
  std::sort(run.begin(), run.end());
  double t2 = run.empty() ? 0.0 : run[run.size() / 2] * 1e-6;

  // The chapter's model: synchronous ~ N (t1 + t2 + t3), asynchronous ~ t1 + N t2 + t3.
  double t1 = t1_total / kN;             // frontend: queueing one op
  double t3 = sync_s / kN - t1 - t2;     // what remains of a synchronous step: the hand-back
  double model_async = t1 + kN * t2 + t3;
  std::printf("  synchronous (wait_to_read each time)  %8.4f s  = %6.2f us per step\n", sync_s, sync_s / kN * 1e6);
  std::printf("  asynchronous (waitall once)           %8.4f s  = %6.2f us per step\n", async_s, async_s / kN * 1e6);
  std::printf("  speed-up                              %8.1f x\n", sync_s / async_s);
  std::printf("  pushing alone in the asynchronous loop  %6.2f us per step\n", push_s / kN * 1e6);
  std::printf("  estimates: t1 (push) %.2f us, t2 (compute, median of %zu profiled ops) %.2f us,\n"
              "             t3 (return, = sync/N - t1 - t2) %.2f us\n",
              t1 * 1e6, run.size(), t2 * 1e6, t3 * 1e6);
  std::printf("  model: sync  N(t1+t2+t3) = %.4f s (t3 is fitted to it)\n", kN * (t1 + t2 + t3));
  std::printf("         async t1+N t2+t3  = %.4f s vs measured %.4f s\n", model_async, async_s);
  if (t1 > t2)
    std::printf("  Here t1 > t2: the frontend pushes more slowly than the workers compute, so the\n"
                "  asynchronous time is closer to N t1 (the model assumes N t2 > (N-1) t1), and\n"
                "  more, since pushing while a worker runs costs more than pushing alone.\n");
  // Per step, waiting once costs max(t1, t2) (whichever side is slower sets the pace), waiting
  // each time t1 + t2 + t3: the gain is large only when the round trip t3 is long next to a push.
  // A waiter that sleeps pays ~50 us on these machines; one that spins, under 1 us.
  std::printf("  Waiting each time pays t3 on every step: the expected gain (t1+t2+t3)/max(t1,t2) is\n"
              "  %.1f x here; it is large only when the round trip is long next to a push.\n",
              (t1 + t2 + t3) / std::max(t1, t2));
}

// ---- E7 ------------------------------------------------------------------------------------
// E1 again on the CPU and on the GPU: on both, the loop returns long before the work is done, and
// waitall gives the real cost. Then both at once: queued on different devices, they overlap.
void e7() {
  heading("E7  CPU vs GPU: E1 on each device, then on both at once");
  const Device gpu = Device::gpu(0);
  try {
    nd::zeros({1}, gpu).wait_to_read();
  } catch (const Error& e) {
    std::printf("  SKIPPED: E7 needs a GPU, and there is none here (%s)\n", e.what());
    return;
  }
  const int kIters = 10;
  auto run = [&](Device d) {
    for (int i = 0; i < kIters; ++i) {
      NDArray a = nd::random_normal({1000, 1000}, 0.0f, 1.0f, d);
      NDArray b = nd::dot(a, a);
    }
  };
  run(gpu);  // first use: streams, cuBLAS and the allocator are set up outside the timing
  nd::waitall();
  for (Device d : {Device::cpu(), gpu}) {
    auto t0 = Clock::now();
    run(d);
    const double returned = since(t0);
    nd::waitall();
    std::printf("  %-7s loop returned after %8.4f s, waitall after %8.4f s\n", d.str().c_str(),
                returned, since(t0));
  }
  auto t0 = Clock::now();
  run(gpu);
  run(Device::cpu());
  const double returned = since(t0);
  nd::waitall();
  std::printf("  both    loop returned after %8.4f s, waitall after %8.4f s\n", returned, since(t0));
  std::printf("  Queued on two devices, the CPU's and the GPU's work run at the same time: together\n"
              "  they take about as long as the slower one alone, not the sum.\n");
}

// ---- E6 ------------------------------------------------------------------------------------
// The chapter trains an MLP twice: reading the loss every batch (an implicit blocker), then never
// reading it. Without the read, the frontend queues all 100 batches in a blink and every queued
// batch's arrays are allocated at once. The engine's byte bound is the third way: push waits once
// the storage that queued work keeps alive passes the bound.
void e6_memory() {
  heading("E6  memory: the MLP (Dense 2048 relu, Dense 512 relu, Dense 1), 100 batches of 1024x512");
  e6::Config cfg;
  cfg.report_every = 50;  // the chapter's data_iter prints at batches 50 and 100
  std::printf("  (a) reading the loss every batch (l.mean().item()):\n");
  e6::Result sync = e6::run(e6::Mode::kSync, cfg);
  std::printf("  (b) never reading it, the byte bound switched off (set_max_inflight(ops, 0)):\n");
  e6::Result nosync = e6::run(e6::Mode::kNoSync, cfg);
  cfg.bound_bytes = e6::default_bound_bytes();
  std::printf("  (c) never reading, engine().set_max_inflight(ops, %.1f MB):\n",
              cfg.bound_bytes / 1e6);
  e6::Result bounded = e6::run(e6::Mode::kBounded, cfg);
  const EngineStats st = engine().stats();
  std::printf("  (d) never reading, the default engine (byte bound %.0f MB, from %s):\n",
              st.max_inflight_bytes / 1e6, bound_source_name(st.max_inflight_bytes_source));
  e6::Result dflt = e6::run(e6::Mode::kDefault, cfg);
  std::printf("  results (engine peak: bytes of arrays alive at once; RSS from /proc/self/status,\n"
              "  which also holds the allocator's cache and the process's own memory):\n");
  for (const e6::Result* r : {&sync, &nosync, &bounded, &dflt}) e6::print(*r);
  std::printf("  (b) vs (a): the loop returned after %.3f s instead of %.3f s and the engine held\n"
              "  %.0f MB at peak instead of %.0f MB: every batch was queued before the first ran.\n",
              nosync.frontend_s, sync.frontend_s, nosync.engine_peak_mb, sync.engine_peak_mb);
  std::printf("  (c): peak %.0f MB (%.2fx of (a)), total %.3f s (%.2fx of (b)): the bound keeps the\n"
              "  memory of (a) without a synchronising read.\n",
              bounded.engine_peak_mb, bounded.engine_peak_mb / sync.engine_peak_mb,
              bounded.total_s, bounded.total_s / nosync.total_s);
  std::printf("  (d): peak %.0f MB, total %.3f s (%.2fx of (b)), %llu pushes waited: the engine\n"
              "  bounds memory by itself, at %.0f MB here (a quarter of what the program may use, at most 512 MiB).\n",
              dflt.engine_peak_mb, dflt.total_s, dflt.total_s / nosync.total_s,
              static_cast<unsigned long long>(dflt.push_waits), dflt.bound_mb);
}

}  // namespace

int main() {
  try {
    std::printf("asyncnd: the chapter \"Asynchronous Computation\", natively\n");
    std::printf("engine: %s, %d CPU worker(s)\n",
                engine().kind() == EngineKind::kThreaded ? "threaded" : "naive", engine().num_workers());
    nd::seed(42);
    e1();
    e2();
    e3_e4();
    e5();
    e6_memory();
    e7();
  } catch (const Error& e) {
    std::fprintf(stderr, "asyncnd error: %s\n", e.what());
    return 1;
  }
  return 0;
}
