// The engine against a serial reference: seeded random workloads (random read sets, one or more
// writes, read-only ops, waits mixed in), for 1, 2, 4 and 8 workers and the naive engine,
// compared exactly. A wrong dependency shows up as a different value (and, under TSan, a race).
#include <catch2/catch.hpp>

#include <asyncnd/engine.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace asyncnd;
using asyncnd_test::scaled;

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

struct WorkOp {
  std::vector<int> reads, writes;
  int wait_var = -1;      // >= 0: not an op but a wait_to_read of this variable
  bool waitall = false;   // not an op but a waitall
};

struct Workload {
  int nvars = 0;
  std::vector<WorkOp> ops;
};

Workload make_workload(std::uint64_t seed, int nvars, std::int64_t nops) {
  std::mt19937_64 rng(seed);
  Workload w;
  w.nvars = nvars;
  w.ops.reserve(static_cast<std::size_t>(nops));
  std::uniform_int_distribution<int> var(0, nvars - 1);
  for (std::int64_t i = 0; i < nops; ++i) {
    WorkOp op;
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 2) {
      op.wait_var = var(rng);
    } else if (kind == 2 && rng() % 20 == 0) {
      op.waitall = true;
    } else {
      const int nr = static_cast<int>(rng() % 5);         // 0..4 reads (duplicates allowed)
      const int nw = kind < 12 ? 0 : 1 + static_cast<int>(rng() % 2);  // 10%: read-only
      for (int k = 0; k < nr; ++k) op.reads.push_back(var(rng));
      while (static_cast<int>(op.writes.size()) < nw) {
        int v = var(rng);
        bool clash = false;
        for (int r : op.reads) clash = clash || r == v;
        if (!clash) op.writes.push_back(v);
      }
      if (op.reads.empty() && op.writes.empty()) op.reads.push_back(var(rng));
    }
    w.ops.push_back(std::move(op));
  }
  return w;
}

// What op i does to the state: every write becomes a hash of the op's index, its reads and the
// written variable's old value; a read-only op stores the hash of its reads in its own slot.
void apply(const WorkOp& op, std::size_t index, std::vector<std::uint64_t>& vals,
           std::vector<std::uint64_t>& outs) {
  std::uint64_t h = mix(0x1234, index);
  for (int r : op.reads) h = mix(h, vals[static_cast<std::size_t>(r)]);
  if (op.writes.empty()) {
    outs[index] = h;
    return;
  }
  for (int w : op.writes) {
    auto& v = vals[static_cast<std::size_t>(w)];
    v = mix(h, v + static_cast<std::uint64_t>(w));
  }
}

// gate_every > 0: before every gate_every-th op, an op that writes every variable and sleeps
// 200 us, so that the ops after it queue behind it on each variable, many deep (a backlog: most
// accesses are queued behind other queued ones, and made ready by completions, not by the push).
void run_workload(Engine& eng, const Workload& w, std::size_t gate_every = 0) {
  const std::size_t n = w.ops.size();
  std::vector<std::uint64_t> ref_vals(static_cast<std::size_t>(w.nvars), 1), vals = ref_vals;
  std::vector<std::uint64_t> ref_outs(n, 0), outs(n, 0);
  // The serial reference, with the value each wait must see.
  std::vector<std::uint64_t> expected_at_wait(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const WorkOp& op = w.ops[i];
    if (op.wait_var >= 0) expected_at_wait[i] = ref_vals[static_cast<std::size_t>(op.wait_var)];
    else if (!op.waitall) apply(op, i, ref_vals, ref_outs);
  }

  std::vector<Var> vars;
  for (int i = 0; i < w.nvars; ++i) vars.push_back(eng.new_var());
  std::size_t waits_checked = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const WorkOp& op = w.ops[i];
    if (gate_every > 0 && i % gate_every == 0) {
      eng.push([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); },
               std::vector<Var>{}, vars, PushOptions{Device{}, 0, "gate"});
    }
    if (op.wait_var >= 0) {
      eng.wait_to_read(vars[static_cast<std::size_t>(op.wait_var)]);
      // Reading on this thread right after the wait: TSan checks the engine's happens-before.
      REQUIRE(vals[static_cast<std::size_t>(op.wait_var)] == expected_at_wait[i]);
      ++waits_checked;
      continue;
    }
    if (op.waitall) {
      eng.waitall();
      continue;
    }
    std::vector<Var> rs, ws;
    for (int r : op.reads) rs.push_back(vars[static_cast<std::size_t>(r)]);
    for (int x : op.writes) ws.push_back(vars[static_cast<std::size_t>(x)]);
    const WorkOp* opp = &op;
    eng.push([opp, i, &vals, &outs] { apply(*opp, i, vals, outs); }, std::move(rs), std::move(ws),
             PushOptions{Device{}, static_cast<int>(i % 7 == 0), "work"});
  }
  eng.waitall();
  REQUIRE(vals == ref_vals);
  REQUIRE(outs == ref_outs);
  CHECK(waits_checked > 0);
  const EngineStats s = eng.stats();
  CHECK(s.pending == 0);
  CHECK(s.pushed == s.finished);
}

}  // namespace

TEST_CASE("engine matches a serial reference on random workloads", "[engine]") {
  const std::uint64_t seed = asyncnd_test::test_seed("engine random workload");
  const std::int64_t nops = scaled(100000, 2000);
  const int nvars = 128;
  const Workload w = make_workload(seed, nvars, nops);
  for (int workers : {1, 2, 4, 8}) {
    SECTION("threaded, " + std::to_string(workers) + " workers") {
      INFO("seed " << seed << ", " << nops << " ops, " << nvars << " variables");
      Engine eng(EngineOptions{EngineKind::kThreaded, workers});
      run_workload(eng, w);
    }
  }
  SECTION("threaded, 2 workers, every variable held now and then") {
    Engine eng(EngineOptions{EngineKind::kThreaded, 2});
    run_workload(eng, w, 1000);
  }
  SECTION("naive") {
    Engine eng(EngineOptions{EngineKind::kNaive});
    run_workload(eng, w);
  }
  SECTION("threaded with a tight in-flight bound") {
    Engine eng(EngineOptions{EngineKind::kThreaded, 2, 16, 0});
    run_workload(eng, w);
  }
}

TEST_CASE("a long chain of writes to one variable keeps push order", "[engine]") {
  for (int workers : {1, 2, 4, 8}) {
    Engine eng(EngineOptions{EngineKind::kThreaded, workers});
    Var v = eng.new_var();
    std::vector<int> order;
    const int n = static_cast<int>(scaled(20000, 500));
    for (int i = 0; i < n; ++i) eng.push([&order, i] { order.push_back(i); }, {}, {v});
    eng.wait_to_read(v);
    REQUIRE(order.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) REQUIRE(order[static_cast<std::size_t>(i)] == i);
  }
}
