// bench_handoff: how far the engine's wait round trip (push one empty op, wait_to_read its
// variable: bench_native's wait_roundtrip_us) sits from hand-offs between two threads that carry
// no engine at all, on this machine, as multiples of the spin floor (bench_native's
// spin_roundtrip_ns: one cache line that both threads read and write). All are measured in each
// of five rounds, one after another, so that they see the same phase of a VM.
//
// The hand-offs, from cheapest to the engine's shape:
//   two lines    each thread writes a line of its own and spins on the other's;
//   mailbox/1    the caller writes a one-line record and its sequence number into a mailbox line;
//                the other thread reads the record, writes it, and counts the op done on a line of
//                its own, which the caller spins on;
//   mailbox/8    the same with an eight-line record (an engine op record is 464 bytes);
//   mailbox/8 back   the same, the completion written back into the mailbox line.
// bench/notes/per-op.md, "The wait round trip against hand-offs without an engine", reads them.
//
// Usage: build/bench_handoff [rounds]   (default 5; prints a table, writes nothing)
#include <asyncnd/asyncnd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "bench_util.h"

using namespace asyncnd;
using namespace asyncnd_bench;

namespace {

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

struct alignas(64) Line {
  std::atomic<long> v{0};
};
struct alignas(64) Record {
  long word[8][8];  // eight lines; the hand-offs touch the first word of the first `lines`
};

// Two threads, each writing its own line and spinning on the other's; ns per round trip.
double two_lines(int n) {
  Line a, b;
  std::thread other([&] {
    for (long i = 1; i <= n; ++i) {
      while (a.v.load(std::memory_order_acquire) != i) relax();
      b.v.store(i, std::memory_order_release);
    }
  });
  auto t0 = Clock::now();
  for (long i = 1; i <= n; ++i) {
    a.v.store(i, std::memory_order_release);
    while (b.v.load(std::memory_order_acquire) != i) relax();
  }
  const double ns = since(t0) / n * 1e9;
  other.join();
  return ns;
}

// The mailbox hand-offs; ns per round trip. `back`: the completion goes into the mailbox line.
double mailbox(int n, int lines, bool back) {
  Line box, done;
  Record rec[2];
  std::thread worker([&] {
    for (long i = 1; i <= n; ++i) {
      while (box.v.load(std::memory_order_acquire) != i) relax();
      Record& r = rec[i & 1];
      long sum = 0;
      for (int l = 0; l < lines; ++l) sum += r.word[l][0];
      r.word[0][1] = sum;  // the worker writes the record too (an op's run_left, its recycling)
      if (back) {
        box.v.store(-i, std::memory_order_release);
      } else {
        done.v.store(i, std::memory_order_release);
      }
    }
  });
  auto t0 = Clock::now();
  for (long i = 1; i <= n; ++i) {
    Record& r = rec[i & 1];
    for (int l = 0; l < lines; ++l) r.word[l][0] = i;
    box.v.store(i, std::memory_order_release);
    if (back) {
      while (box.v.load(std::memory_order_acquire) != -i) relax();
    } else {
      while (done.v.load(std::memory_order_acquire) != i) relax();
    }
  }
  const double ns = since(t0) / n * 1e9;
  worker.join();
  return ns;
}

// The engine's wait round trip, as bench_native times it: median ns of n.
double engine_roundtrip(Var v, int n) {
  Engine& eng = engine();
  std::vector<double> ns;
  ns.reserve(n);
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    eng.push([] {}, {}, {v});
    eng.wait_to_read(v);
    ns.push_back(since(t0) * 1e9);
  }
  return median(ns);
}

}  // namespace

int main(int argc, char** argv) {
  const asyncnd_bench::BenchArgs args =
      asyncnd_bench::parse_bench_args(argc, argv, "bench_handoff [ROUNDS]  (default 5)");
  const double r = args.number(0, 5, 1);
  if (r != static_cast<int>(r)) args.fail("ROUNDS must be a whole number, got " + args.plain[0]);
  const int rounds = static_cast<int>(r);
  const int kN = 50000, kWaits = 4000;
  Engine& eng = engine();
  Var v = eng.new_var();
  engine_roundtrip(v, 2000);  // warm-up: the op pool, the worker's pace
  std::printf("bench_handoff: %s, %s, %d CPU workers taking %s; ns per round trip "
              "(x the spin floor)\n",
              cpu_model().c_str(), cores_text().c_str(), eng.num_workers(),
              pacing_name(eng.pacing()));
  std::printf("  %-5s %8s %16s %16s %16s %16s %16s\n", "round", "floor", "two lines", "mailbox/1",
              "mailbox/8", "mailbox/8 back", "engine wait");
  const int kFigures = 5;
  std::vector<double> ratio[kFigures];
  for (int r = 0; r < rounds; ++r) {
    const double floor = spin_roundtrip_once(kN);
    const double f[kFigures] = {two_lines(kN), mailbox(kN, 1, false), mailbox(kN, 8, false),
                                mailbox(kN, 8, true), engine_roundtrip(v, kWaits)};
    std::printf("  %-5d %8.0f", r + 1, floor);
    for (int i = 0; i < kFigures; ++i) {
      ratio[i].push_back(f[i] / floor);
      std::printf(" %8.0f (%5.2f)", f[i], f[i] / floor);
    }
    std::printf("\n");
  }
  std::printf("  %-5s %8s", "median", "");
  for (int i = 0; i < kFigures; ++i) std::printf(" %8s (%5.2f)", "", median(ratio[i]));
  std::printf("\n");
  eng.delete_var(v);
  eng.waitall();
  return 0;
}
