// chapter: the experiments of the chapter "Asynchronous Computation", run natively (`make demo`).
//
// Walks through the chapter in its order and prints every figure it measures:
//   E1  random matrices and products: a synchronous baseline vs the asynchronous engine
//   E2  the dependency graph of z = x * y + 2, recorded by the profiler (text and Graphviz DOT)
//   E3  barriers: wait_to_read and waitall
//   E4  implicit blockers: to_vector, item, printing
//   E5  10 000 small additions, waiting after each vs once, and the t1/t2/t3 model
//   E6  memory: the chapter's MLP trained with a sync per batch, without (byte bound off), with a
//       small in-flight byte bound, and with the engine's default bound
//   E7  CPU vs GPU: E1 on each device, and both at once (skipped, saying why, without a GPU)
// The experiments themselves are in experiments/chapter.h, which the benchmarks (bench/native.cpp)
// share and repeat more carefully (medians); this file is the chapter's text around their figures.
// Takes about a minute (E6 trains 4 x 100 batches).
#include <asyncnd/asyncnd.h>

#include "experiments/chapter.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

using namespace asyncnd;

namespace {

void heading(const char* title) { std::printf("\n== %s\n", title); }

// ---- E1 ------------------------------------------------------------------------------------
// The chapter makes ten random 1000x1000 matrices and multiplies each by itself, first in NumPy
// (which computes everything before returning), then in the framework (which only queues).
void e1() {
  heading("E1  ten random 1000x1000 matrices, each multiplied by itself");
  const chapter::E1Result r = chapter::e1();
  // In milliseconds, three decimals: the loop's return is a small fraction of a millisecond.
  std::printf("  synchronous (wait after every op)  %10.3f ms\n", r.sync_s * 1e3);
  std::printf("  synchronous (naive engine)         %10.3f ms   <- each op runs inside its call\n",
              r.naive_s * 1e3);
  std::printf("  engine: loop returned after        %10.3f ms   <- only queued\n",
              r.engine.returned_s * 1e3);
  std::printf("  engine: waitall returned after     %10.3f ms   <- the real cost\n",
              r.engine.finished_s * 1e3);
  std::printf("  Returning early is not computing faster: with waitall the engine is about as fast\n"
              "  as the synchronous run (faster where independent ops overlap).\n");
  std::printf("  Its first run took %.4f s: running ahead kept %.0f MB of arrays alive at once (the\n"
              "  synchronous loop %.0f MB), and fresh memory costs page faults the first time; the\n"
              "  second run, above, reused it.\n",
              r.engine_first.finished_s, r.engine_peak_mb, r.sync_peak_mb);
}

// ---- E2 ------------------------------------------------------------------------------------
// The frontend issues ops; the backend sees them as a graph whose edges are variables.
void e2() {
  heading("E2  the dependency graph of z = x * y + 2");
  const chapter::E2Result r = chapter::e2();
  std::cout << "  z = " << r.z << "\n";
  auto list = [&](const std::vector<std::uint64_t>& vars) {
    std::string s;
    for (std::size_t k = 0; k < vars.size(); ++k) s += (k ? ", " : "") + r.names.at(vars[k]);
    return s;
  };
  std::printf("  ops in push order (reads -> writes):\n");
  for (std::size_t i = 0; i < r.events.size(); ++i) {
    const ProfileEvent& e = r.events[i];
    std::printf("    op%zu %s(%s) -> %s   [worker %d, ran %.1f..%.1f us]\n", i, e.name.c_str(),
                list(e.reads).c_str(), list(e.writes).c_str(), e.worker, e.start_us, e.end_us);
  }
  std::printf("  dependencies (an op waits for the earlier ops that touch what it writes, and for\n"
              "  the writers of what it reads):\n");
  for (auto& [from, to] : r.edges)
    std::printf("    op%d %s -> op%d %s\n", from, r.events[from].name.c_str(), to,
                r.events[to].name.c_str());
  std::printf("  Ops with no path between them (the two ones) may run at the same time.\n");

  // Graphviz: ops are boxes, variables are ellipses; paste into `dot -Tsvg` to draw it.
  std::printf("  Graphviz DOT:\ndigraph z_eq_x_times_y_plus_2 {\n  rankdir=LR;\n");
  for (auto& [id, n] : r.names)
    std::printf("  v%llu [label=\"%s\", shape=ellipse];\n", static_cast<unsigned long long>(id), n.c_str());
  for (std::size_t i = 0; i < r.events.size(); ++i) {
    std::printf("  op%zu [label=\"%s\", shape=box];\n", i, r.events[i].name.c_str());
    for (std::uint64_t v : r.events[i].reads)
      std::printf("  v%llu -> op%zu;\n", static_cast<unsigned long long>(v), i);
    for (std::uint64_t v : r.events[i].writes)
      std::printf("  op%zu -> v%llu;\n", i, static_cast<unsigned long long>(v));
  }
  std::printf("}\n");
}

// ---- E3 and E4 -------------------------------------------------------------------------------
// The chapter's 2000x2000 cells: queued vs finished, then each way of waiting.
void e3_e4() {
  heading("E3  barriers: wait_to_read and waitall");
  const chapter::E3Result r3 = chapter::e3();
  std::cout << "  sum = " << r3.sum << "\n";
  std::printf("  y = dot(x, x).sum() queued after %.4f s; printing it finished after %.4f s\n",
              r3.queued_s, r3.printed_s);
  std::printf("  one dot + y.wait_to_read()   %8.4f s\n", r3.wait_to_read_s);
  std::printf("  one dot + waitall()          %8.4f s   (about the same: both wait for the dot)\n", r3.waitall_s);
  std::printf("  two dots + waitall()         %8.4f s   (waitall waits for both)\n", r3.waitall2_s);
  std::printf("  two dots + y.wait_to_read()  %8.4f s   (on the first: about one dot, as they run in\n"
              "                                          the order pushed; wait only for what you need)\n",
              r3.wait_first_of_two_s);

  heading("E4  implicit blockers: anything that needs the values waits for them");
  const chapter::E4Result r4 = chapter::e4();
  std::printf("  dot + to_vector()      %8.4f s   (%zu values copied out)\n", r4.to_vector_s, r4.values);
  std::printf("  dot + norm().item()    %8.4f s   (norm = %g)\n", r4.item_s, r4.norm);
  std::printf("  dot + printing sum     %8.4f s   (%s)\n", r4.print_s, r4.text.c_str());
  std::printf("  Each costs a full dot: converting to host data, to a scalar or to text must wait.\n"
              "  Doing it often in a loop turns asynchronous code back into synchronous code.\n");
}

// ---- E5 ------------------------------------------------------------------------------------
// Many tiny ops: here the cost of talking to the backend dominates, and waiting after each op
// pays the round trip every time.
void e5() {
  heading("E5  10000 x (y = x + 1) on a [1,2] array: waiting each time vs once");
  const chapter::E5Config cfg;
  const chapter::E5Result r = chapter::e5(cfg);
  const int kN = cfg.n;
  const double t1 = r.t1_s, t2 = r.t2_s, t3 = r.model.t3_s;
  std::printf("  synchronous (wait_to_read each time)  %8.4f s  = %6.2f us per step\n", r.sync_s, r.sync_s / kN * 1e6);
  std::printf("  asynchronous (waitall once)           %8.4f s  = %6.2f us per step\n", r.async_s, r.async_s / kN * 1e6);
  std::printf("  speed-up                              %8.1f x\n", r.sync_s / r.async_s);
  std::printf("  pushing alone in the asynchronous loop  %6.2f us per step\n", r.push_s / kN * 1e6);
  std::printf("  estimates: t1 (push) %.2f us, t2 (compute, median of %zu profiled ops) %.2f us,\n"
              "             t3 (return, = sync/N - t1 - t2) %.2f us\n",
              t1 * 1e6, r.t2_samples, t2 * 1e6, t3 * 1e6);
  std::printf("  model: sync  N(t1+t2+t3) = %.4f s (t3 is fitted to it)\n", r.model.model_sync_s);
  std::printf("         async t1+N t2+t3  = %.4f s vs measured %.4f s\n", r.model.model_async_s, r.async_s);
  if (t1 > t2)
    std::printf("  Here t1 > t2: the frontend pushes more slowly than the workers compute, so the\n"
                "  asynchronous time is closer to N t1 (the model assumes N t2 > (N-1) t1), and\n"
                "  more, since pushing while a worker runs costs more than pushing alone.\n");
  // Per step, waiting once costs max(push, t2) (whichever side is slower sets the pace; the push
  // as the asynchronous loop measured it, dearer than t1, which follows a wait), waiting each time
  // t1 + t2 + t3: the gain is large only when the round trip t3 is long next to a push. A waiter
  // that sleeps pays ~50 us on these machines; one that spins, under 1 us.
  const double push = r.push_s / kN;
  std::printf("  Why: waiting each time pays t1+t2+t3 a step, waiting once max(push, t2), so the\n"
              "  speed-up is (t1+t2+t3)/max(push,t2) = %.1f x (t3 is fitted, so this restates the\n"
              "  measurement rather than predicts it): the round trip t3 (%.2f us) against a push\n"
              "  (%.2f us). The gain is large only when the round trip is long next to a push.\n",
              (t1 + t2 + t3) / std::max(push, t2), t3 * 1e6, push * 1e6);
}

// ---- E7 ------------------------------------------------------------------------------------
void e7() {
  heading("E7  CPU vs GPU: E1 on each device, then on both at once");
  const chapter::E7Result r = chapter::e7();
  if (!r.skipped.empty()) {
    std::printf("  SKIPPED: E7 needs a GPU, and there is none here (%s)\n", r.skipped.c_str());
    return;
  }
  for (auto [name, t] : {std::pair{Device::cpu().str(), r.cpu}, std::pair{Device::gpu(0).str(), r.gpu},
                         std::pair{std::string("both"), r.both}})
    std::printf("  %-7s loop returned after %8.4f s, waitall after %8.4f s\n", name.c_str(),
                t.returned_s, t.finished_s);
  const double sum = r.cpu.finished_s + r.gpu.finished_s;
  if (r.both.finished_s < 0.9 * sum) {
    std::printf("  Queued on two devices, the CPU's and the GPU's work ran at the same time: together\n"
                "  they took %.2f of the sum, about as long as the slower one alone.\n",
                r.both.finished_s / sum);
  } else {
    std::printf("  Not on this run: together they took %.2f of the sum. The loop still returned at\n"
                "  once, so the calls were asynchronous; the two ran one after the other because\n"
                "  the engine's threads and this one share the cores.\n",
                r.both.finished_s / sum);
  }
}

// ---- E6 ------------------------------------------------------------------------------------
// The chapter trains an MLP twice: reading the loss every batch (an implicit blocker), then never
// reading it. Without the read, the frontend queues all 100 batches in a blink and every queued
// batch's arrays are allocated at once. The engine's byte bound is the third way: push waits once
// the storage that queued work keeps alive passes the bound.
void e6_print(const chapter::E6Result& r) {
  std::printf("  %-8s total %7.3f s (loop returned after %6.3f s)  %7.2f ms per batch handed out"
              "  engine peak %8.1f MB (%.1f MB before)  RSS peak %8.1f MB (start %.1f, end %.1f)"
              "  last loss %.4g  byte bound %.0f MB (%s), %llu pushes waited\n",
              chapter::e6_mode_name(r.mode), r.total_s, r.frontend_s, r.per_batch_ms,
              r.engine_peak_mb, r.engine_start_mb, r.rss_peak_mb, r.rss_start_mb, r.rss_end_mb,
              r.final_loss, r.bound_mb, r.bound_source, static_cast<unsigned long long>(r.push_waits));
}

void e6_memory() {
  using chapter::E6Mode;
  chapter::E6Config cfg;
  heading(("E6  memory: the MLP (Dense 2048 relu, Dense 512 relu, Dense 1), " +
           std::to_string(cfg.num_batches) + " batches of 1024x512").c_str());
  // The chapter's data_iter prints at batches 50 and 100, when it is asked for the next batch.
  cfg.on_next = [](int given, double seconds) {
    if (given % 50 == 0) std::printf("batch %d, time %f sec\n", given, seconds);
  };
  std::printf("  (a) reading the loss every batch (l.mean().item()):\n");
  const chapter::E6Result sync = chapter::e6(E6Mode::kSync, cfg);
  std::printf("  (b) never reading it, the byte bound switched off (set_max_inflight(ops, 0)):\n");
  const chapter::E6Result nosync = chapter::e6(E6Mode::kNoSync, cfg);
  cfg.bound_bytes = chapter::e6_default_bound_bytes();
  std::printf("  (c) never reading, engine().set_max_inflight(ops, %.1f MB):\n",
              cfg.bound_bytes / 1e6);
  const chapter::E6Result bounded = chapter::e6(E6Mode::kBounded, cfg);
  const EngineStats st = engine().stats();
  std::printf("  (d) never reading, the default engine (byte bound %.0f MB, from %s):\n",
              st.max_inflight_bytes / 1e6, bound_source_name(st.max_inflight_bytes_source));
  const chapter::E6Result dflt = chapter::e6(E6Mode::kDefault, cfg);
  std::printf("  results (engine peak: bytes of arrays alive at once; RSS from /proc/self/status,\n"
              "  which also holds the allocator's cache and the process's own memory):\n");
  for (const chapter::E6Result* r : {&sync, &nosync, &bounded, &dflt}) e6_print(*r);
  std::printf("  (b) vs (a): the loop returned after %.3f s instead of %.3f s and the engine held\n"
              "  %.0f MB at peak instead of %.0f MB: every batch was queued before the first ran.\n",
              nosync.frontend_s, sync.frontend_s, nosync.engine_peak_mb, sync.engine_peak_mb);
  if (nosync.total_s > 1.1 * sync.total_s) {
    std::printf("  (b) also took longer in all (%.3f s against %.3f s): the memory it held at once\n"
                "  was fresh, and fresh memory costs a page fault per page the first time (as in E1).\n",
                nosync.total_s, sync.total_s);
  }
  std::printf("  (c): peak %.0f MB (%.2fx of (a)), total %.3f s (%.2fx of (b)): the bound keeps the\n"
              "  memory of (a) without a synchronising read.\n",
              bounded.engine_peak_mb, bounded.engine_peak_mb / sync.engine_peak_mb,
              bounded.total_s, bounded.total_s / nosync.total_s);
  std::printf("  (d): peak %.0f MB, total %.3f s (%.2fx of (b)), %llu pushes waited: the engine\n"
              "  bounds memory by itself, at %.0f MB here (a quarter of what the program may use, at\n"
              "  most 512 MiB). The bound is on what queued work holds; the peak also counts the\n"
              "  parameters, the batch and what autograd keeps, so it may pass the bound.\n",
              dflt.engine_peak_mb, dflt.total_s, dflt.total_s / nosync.total_s,
              static_cast<unsigned long long>(dflt.push_waits), dflt.bound_mb);
  std::printf("  The bounds of (c) and (d) are asyncnd's own. MXNet, where the chapter measures\n"
              "  this, has none: there, its advice to synchronise each minibatch stands.\n");
}

}  // namespace

int main() {
  try {
    std::printf("asyncnd: the chapter \"Asynchronous Computation\", natively\n");
    // The CPUs counted: the machine's, or fewer where a taskset mask or a container's quota says so.
    const CpuLimit cpus = program_cpu_limit();
    std::string on = std::to_string(cpus.cpus) + " CPU(s)";
    if (cpus.cpus < cpus.online) {
      on = std::to_string(cpus.cpus) + " of " + std::to_string(cpus.online) + " CPUs (limited by the " +
           (std::string(cpus.source) == "cgroup" ? "cgroup's CPU quota" : "affinity mask") + ")";
    }
    std::printf("engine: %s, %d CPU worker(s) on %s\n",
                engine().kind() == EngineKind::kThreaded ? "threaded" : "naive", engine().num_workers(),
                on.c_str());
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
