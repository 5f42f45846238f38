// What the engine reports and how it is configured: the profiler's trace, stats per device and
// the bounds in force, parallel_for, and the options and memory limits read from the
// environment.
#include <catch2/catch.hpp>

#include <asyncnd/detail/backend.h>  // detail::memory_limit_from
#include <asyncnd/engine.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <locale>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine_impl.h"  // detail::EngineAccess (core/src: internal)
#include "test_util.h"

using namespace asyncnd;
using asyncnd_test::Gate;
using asyncnd_test::sleep_ms;

TEST_CASE("profiler records every op as Chrome trace JSON", "[engine][profiler]") {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    Engine eng(EngineOptions{kind, 2});
    Var x = eng.new_var(), y = eng.new_var(), z = eng.new_var();
    eng.push([] {}, {}, {x});  // not recorded: before start
    eng.start_profiling();
    CHECK(eng.profiling());
    eng.push([] { sleep_ms(2); }, {x}, {y}, PushOptions{Device{}, 0, "mul"});
    eng.push([] {}, {y}, {z}, PushOptions{Device{}, 0, "add \"2\""});
    eng.waitall();
    const std::string json = eng.stop_profiling();
    CHECK_FALSE(eng.profiling());
    const auto events = eng.profile_events();
    REQUIRE(events.size() == 2);
    CHECK(events[0].name == "mul");
    CHECK(events[0].reads == std::vector<std::uint64_t>{x.id()});
    CHECK(events[0].writes == std::vector<std::uint64_t>{y.id()});
    CHECK(events[0].end_us - events[0].start_us >= 1500);
    CHECK(events[1].start_us >= events[0].end_us);
    CHECK(json.find("\"traceEvents\"") != std::string::npos);
    CHECK(json.find("\"ph\":\"X\"") != std::string::npos);
    CHECK(json.find("add \\\"2\\\"") != std::string::npos);
    if (kind == EngineKind::kThreaded) {
      CHECK(events[0].worker >= 0);
      CHECK(json.find("worker ") != std::string::npos);
    }
  }
}

// Three ways the trace went wrong: a restart while an op ran (its times on two clocks: negative
// durations), an asynchronous op on its worker's track ("X" events that overlap without nesting),
// and a name that is not UTF-8 (a JSON parser refused the whole file).
TEST_CASE("profiler: a restart, asynchronous ops and names that are not UTF-8", "[engine][profiler]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  Var a = eng.new_var(), b = eng.new_var(), c = eng.new_var();
  Gate gate;
  eng.start_profiling();
  eng.push([&] { gate.wait(); }, {}, {a}, PushOptions{Device{}, 0, "first"});
  eng.push([] {}, {a}, {b}, PushOptions{Device{}, 0, "queued"});
  sleep_ms(5);
  eng.stop_profiling();
  eng.start_profiling();  // both pushed in the previous recording: left out of this one
  gate.open = true;
  eng.push([] {}, {}, {c}, PushOptions{Device{}, 0, "bad\xff name \xe2\x82"});
  std::thread completer;
  eng.push_async(
      [&](Completion done) {
        completer = std::thread([d = std::move(done)]() mutable {
          sleep_ms(5);
          d.done();
        });
      },
      {}, {a}, PushOptions{Device{}, 0, "async"});
  eng.waitall();
  completer.join();
  const std::string json = eng.stop_profiling();
  const auto events = eng.profile_events();
  REQUIRE(events.size() == 2);
  for (const ProfileEvent& e : events) {
    INFO(e.name);
    CHECK(e.start_us >= e.push_us);
    CHECK(e.end_us >= e.start_us);
    CHECK(e.name != "first");
  }
  CHECK(events[1].async);
  CHECK(json.find("\"bad\\ufffd name \\ufffd\\ufffd\"") != std::string::npos);
  CHECK(json.find("{\"ph\":\"b\",\"cat\":\"async op\",\"id\":1,\"name\":\"async\"") !=
        std::string::npos);
  CHECK(json.find("{\"ph\":\"e\",\"cat\":\"async op\",\"id\":1,\"name\":\"async\"") !=
        std::string::npos);
}

namespace {
struct CommaDecimal : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
};
}  // namespace

// stop_profiling moves the recording out while it writes the text (a copy of it, and a string
// stream that doubled and was copied out, filled the npm package's heap at 3.5 M ops), then back,
// for profile_events(). The text's numbers are written without a locale: a global one with a
// decimal comma made the JSON unreadable.
TEST_CASE("profiler: the recording is kept after stop and the trace ignores the global locale",
          "[engine][profiler]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  Var a = eng.new_var(), b = eng.new_var();
  eng.start_profiling();
  eng.push([] { sleep_ms(2); }, {}, {a}, PushOptions{Device{}, 0, "first"});
  eng.push([] {}, {a}, {b}, PushOptions{Device{}, 0, "second"});
  eng.waitall();
  const std::locale before = std::locale::global(std::locale(std::locale::classic(),
                                                             new CommaDecimal));
  std::string json;
  try {
    json = eng.stop_profiling();
  } catch (...) {
    std::locale::global(before);
    throw;
  }
  std::locale::global(before);
  const auto events = eng.profile_events();
  REQUIRE(events.size() == 2);
  CHECK(events[0].name == "first");
  CHECK(events[1].name == "second");
  CHECK(events[1].reads == std::vector<std::uint64_t>{a.id()});
  CHECK(json.find("\"second\"") != std::string::npos);
  const std::size_t dur = json.find("\"dur\":");
  REQUIRE(dur != std::string::npos);
  const std::string value = json.substr(dur + 6, json.find_first_of(",}", dur) - dur - 6);
  INFO(json);
  CHECK(value.find('.') != std::string::npos);
  CHECK(std::stod(value) >= 1500);  // microseconds, three decimals
  CHECK(json.find("\"queued_us\":") != std::string::npos);
}

TEST_CASE("stats count ops and bytes per device", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  const EngineStats s0 = eng.stats();
  // What array storage reports (Chunk), through the internal access: not a user call.
  detail::EngineImpl& impl = detail::EngineAccess::impl(eng);
  impl.note_alloc(Device::cpu(), 1000);
  impl.note_alloc(Device::cpu(), 500);
  impl.note_free(Device::cpu(), 1000);
  Var v = eng.new_var();
  for (int i = 0; i < 10; ++i) eng.push([] {}, {}, {v});
  eng.waitall();
  const EngineStats s = eng.stats();
  CHECK(s.pushed == s0.pushed + 10);
  CHECK(s.finished == s0.finished + 10);
  CHECK(s.pending == 0);
  REQUIRE_FALSE(s.devices.empty());
  CHECK(s.devices[0].device == Device::cpu());
  CHECK(s.devices[0].bytes_in_use == 500);
  CHECK(s.devices[0].bytes_peak == 1500);
  eng.reset_peak_bytes();
  CHECK(eng.stats().bytes_peak == 500);
  impl.note_free(Device::cpu(), 500);
}

TEST_CASE("stats keep every device's bytes apart, however high its id", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 1});
  detail::EngineImpl& impl = detail::EngineAccess::impl(eng);
  // gpu(16) and gpu(64) once shared gpu(0)'s count (an index modulo 16): each has its own now.
  const Device ids[] = {Device::gpu(0), Device::gpu(16), Device::gpu(64), Device::gpu(1000)};
  std::uint64_t bytes = 100;
  for (Device d : ids) impl.note_alloc(d, bytes++);
  const EngineStats s = eng.stats();
  for (std::size_t i = 0; i < 4; ++i) {
    INFO(ids[i].str());
    int found = 0;
    for (const DeviceStats& d : s.devices) {
      if (d.device != ids[i]) continue;
      ++found;
      CHECK(d.bytes_in_use == 100 + i);
    }
    CHECK(found == 1);
  }
  bytes = 100;
  for (Device d : ids) impl.note_free(d, bytes++);
}

TEST_CASE("parallel_for covers the range once, from ops and from outside", "[engine]") {
  for (int workers : {1, 2, 4}) {
    Engine eng(EngineOptions{EngineKind::kThreaded, workers});
    for (std::int64_t n : {0, 1, 7, 1000, 100003}) {
      std::vector<int> hits(static_cast<std::size_t>(n), 0);
      auto body = [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
      };
      eng.parallel_for(n, 100, body);
      Var v = eng.new_var();
      eng.push([&] { eng.parallel_for(n, 64, body); }, {}, {v});
      eng.wait_to_read(v);
      for (int h : hits) REQUIRE(h == 2);
    }
  }
}

// An idle worker spins, or wakes, for a job only while it has chunks left to claim: a helper that
// kept spinning on a job whose last chunk another thread runs would take that thread's core (on
// 2 vCPUs with 2 workers, the synchronous E1 ran 13% slower: bench/notes/e1.md).
TEST_CASE("a parallel_for job stops drawing idle workers once its chunks are all claimed",
          "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  detail::EngineImpl& impl = detail::EngineAccess::impl(eng);
  for (std::int64_t n : {2, 100}) {  // 2 chunks (both claimed below), and 8 (some left)
    std::atomic<int> entered{0};
    std::atomic<bool> release{false};
    auto body = [&](std::int64_t, std::int64_t) {
      entered.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    };
    std::thread caller([&] { eng.parallel_for(n, 1, body); });
    // The caller and the workers each hold one chunk while they wait for `release`.
    const int holders = n == 2 ? 2 : 1;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (entered.load() < holders && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    REQUIRE(entered.load() >= holders);
    CHECK(impl.cpu_open_jobs() == (n == 2 ? 0 : 1));
    release = true;
    caller.join();
    CHECK(impl.cpu_open_jobs() == 0);
  }
}

// A chunk helper runs only chunks, and only of loops of kChunkHelperMinWork or more: with the
// lone worker held by an op, a large loop from the test thread still gets a second thread.
TEST_CASE("a large parallel_for gets the chunk helper while the worker is busy", "[engine]") {
  EngineOptions o{EngineKind::kThreaded, 1};
  o.cpu_chunk_helpers = 1;
  Engine eng(o);
  REQUIRE(eng.num_chunk_helpers() == 1);
  Gate gate;
  Var held = eng.new_var();
  eng.push([&] { gate.wait(); }, {}, {held});
  std::mutex mu;
  std::vector<std::thread::id> ids;
  std::atomic<int> entered{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Each chunk waits (at most until the deadline) for a second thread to enter one: the caller
  // alone would run them all one after another, and time out.
  auto body = [&](std::int64_t, std::int64_t) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end())
        ids.push_back(std::this_thread::get_id());
    }
    entered.fetch_add(1);
    while (entered.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  };
  eng.parallel_for(64, 1, body, kChunkHelperMinWork);
  gate.open = true;
  eng.wait_to_read(held);
  std::lock_guard<std::mutex> lk(mu);
  CHECK(ids.size() == 2);
  CHECK(std::find(ids.begin(), ids.end(), std::this_thread::get_id()) != ids.end());
}

// The chunk helper runs parts of ops: waits from it are refused and bounded pushes never wait, as
// on a worker (they blocked for ever: the op they waited for was the one whose chunk they ran).
TEST_CASE("a chunk on the chunk helper is inside an op: waits throw and pushes never wait",
          "[engine]") {
  EngineOptions o{EngineKind::kThreaded, 1};
  o.cpu_chunk_helpers = 1;
  Engine eng(o);
  REQUIRE(eng.num_chunk_helpers() == 1);
  eng.set_max_inflight(1, 0);  // the op itself fills it: a push from outside would wait
  std::mutex mu;
  std::vector<std::thread::id> ids;
  std::atomic<int> entered{0}, not_engine{0}, refused{0}, chunks{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Var v = eng.new_var(), w = eng.new_var();
  eng.push(
      [&] {
        eng.parallel_for(
            8, 1,
            [&](std::int64_t, std::int64_t) {
              {
                std::lock_guard<std::mutex> lk(mu);
                if (std::find(ids.begin(), ids.end(), std::this_thread::get_id()) == ids.end())
                  ids.push_back(std::this_thread::get_id());
              }
              chunks.fetch_add(1);
              if (!Engine::on_worker_thread()) not_engine.fetch_add(1);
              try {
                eng.waitall();
              } catch (const Error& e) {
                if (std::string(e.what()).find("inside a parallel_for chunk") != std::string::npos)
                  refused.fetch_add(1);
              }
              eng.push([] {}, {}, {w});  // bounded, from inside an op: never waits
              // Wait (until the deadline) for a second thread to enter: then both ran chunks.
              entered.fetch_add(1);
              while (entered.load() < 2 && std::chrono::steady_clock::now() < deadline)
                std::this_thread::yield();
            },
            kChunkHelperMinWork);
      },
      {}, {v}, PushOptions{Device{}, 0, "split_op"});
  eng.wait_to_read(v);
  eng.waitall();
  std::lock_guard<std::mutex> lk(mu);
  CHECK(ids.size() == 2);  // the worker and the helper
  CHECK(not_engine.load() == 0);
  CHECK(refused.load() == chunks.load());
}

// The chunk arithmetic computed n + grain - 1: near INT64_MAX it overflowed and fn was never
// called.
TEST_CASE("parallel_for covers a range up to INT64_MAX", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  for (std::int64_t n : {INT64_MAX, INT64_MAX - 1, INT64_MAX - 2}) {
    std::atomic<std::uint64_t> covered{0};
    std::atomic<std::int64_t> highest{0};
    eng.parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
      covered.fetch_add(static_cast<std::uint64_t>(e - b));
      std::int64_t h = highest.load();
      while (e > h && !highest.compare_exchange_weak(h, e)) {
      }
    });
    CHECK(covered.load() == static_cast<std::uint64_t>(n));
    CHECK(highest.load() == n);
  }
}

// A loop started outside any op: its chunks run on the calling thread, idle workers and the chunk
// helper. A wait in a chunk used to return on the calling thread and throw "inside an op" on the
// others, by the luck of which thread took the chunk: now every chunk refuses it alike.
TEST_CASE("a wait inside a parallel_for chunk is refused on every thread", "[engine]") {
  EngineOptions o{EngineKind::kThreaded, 2};
  o.cpu_chunk_helpers = 1;
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    o.kind = kind;
    Engine eng(o);
    std::atomic<int> chunks{0}, refused{0};
    eng.parallel_for(
        64, 1,
        [&](std::int64_t, std::int64_t) {
          chunks.fetch_add(1);
          try {
            eng.waitall();
          } catch (const Error& e) {
            if (std::string(e.what()).find("waitall: called from inside a parallel_for chunk") !=
                std::string::npos)
              refused.fetch_add(1);
          }
        },
        kChunkHelperMinWork);
    CHECK(chunks.load() > 0);
    CHECK(refused.load() == chunks.load());
    CHECK_NOTHROW(eng.waitall());  // outside the loop, as before
  }
}

TEST_CASE("the chunk helper: one by default, none when the worker count is set", "[engine]") {
  const int cpus = program_cpu_limit().cpus;
  CHECK(Engine(EngineOptions{}).num_chunk_helpers() == (cpus > 1 ? 1 : 0));
  CHECK(Engine(EngineOptions{EngineKind::kThreaded, 3}).num_chunk_helpers() == 0);
  CHECK(Engine(EngineOptions{EngineKind::kNaive}).num_chunk_helpers() == 0);
  EngineOptions two{EngineKind::kThreaded, 3};
  two.cpu_chunk_helpers = 2;
  CHECK(Engine(two).num_chunk_helpers() == 2);
  // Loops large and small cover their range once with helpers and workers both.
  for (std::int64_t n : {1000, 100003, 1 << 20}) {
    std::vector<int> hits(static_cast<std::size_t>(n), 0);
    Engine eng(two);
    eng.parallel_for(n, 64, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) ++hits[static_cast<std::size_t>(i)];
    });
    for (int h : hits) REQUIRE(h == 1);
  }
  ::setenv("ASYNCND_CPU_HELPERS", "0", 1);
  CHECK(EngineOptions::from_env().cpu_chunk_helpers == 0);
  ::setenv("ASYNCND_CPU_HELPERS", "lots", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(),
                    Catch::Contains("ASYNCND_CPU_HELPERS") && Catch::Contains("lots"));
  ::unsetenv("ASYNCND_CPU_HELPERS");
  CHECK(EngineOptions::from_env().cpu_chunk_helpers == -1);
}

TEST_CASE("an exception inside parallel_for reaches the caller, not the worker", "[engine]") {
  Engine eng(EngineOptions{EngineKind::kThreaded, 2});
  std::atomic<std::int64_t> covered{0};
  auto body = [&](std::int64_t b, std::int64_t e) {
    covered += e - b;
    if (b == 0) throw std::runtime_error("chunk zero failed");
  };
  CHECK_THROWS_WITH(eng.parallel_for(100000, 1000, body), Catch::Contains("chunk zero failed"));
  CHECK(covered.load() == 100000);
  Var v = eng.new_var();
  eng.push([&] { eng.parallel_for(100000, 1000, body); }, {}, {v},
           PushOptions{Device{}, 0, "split_op"});
  CHECK_THROWS_WITH(eng.wait_to_read(v),
                    Catch::Contains("split_op") && Catch::Contains("chunk zero failed"));
}

TEST_CASE("EngineOptions::from_env reads ASYNCND_ENGINE, ASYNCND_CPU_WORKERS and "
          "ASYNCND_CPU_PACING", "[engine]") {
  ::setenv("ASYNCND_ENGINE", "naive", 1);
  ::setenv("ASYNCND_CPU_WORKERS", "3", 1);
  EngineOptions o = EngineOptions::from_env();
  CHECK(o.kind == EngineKind::kNaive);
  CHECK(o.cpu_workers == 3);
  CHECK(o.max_inflight_ops == kDefaultMaxInflightOps);
  CHECK(o.cpu_pacing == Pacing::kAuto);
  ::setenv("ASYNCND_ENGINE", "turbo", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(), Catch::Contains("turbo"));
  ::unsetenv("ASYNCND_ENGINE");
  ::setenv("ASYNCND_CPU_WORKERS", "many", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(), Catch::Contains("many"));
  ::unsetenv("ASYNCND_CPU_WORKERS");
  for (Pacing p : {Pacing::kAuto, Pacing::kRuns, Pacing::kOps}) {
    ::setenv("ASYNCND_CPU_PACING", pacing_name(p), 1);
    CHECK(EngineOptions::from_env().cpu_pacing == p);
  }
  ::setenv("ASYNCND_CPU_PACING", "", 1);
  CHECK(EngineOptions::from_env().cpu_pacing == Pacing::kAuto);
  ::setenv("ASYNCND_CPU_PACING", "Runs", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(),
                    Catch::Contains("ASYNCND_CPU_PACING") && Catch::Contains("'Runs'") &&
                        Catch::Contains("'auto', 'runs' or 'ops'"));
  ::unsetenv("ASYNCND_CPU_PACING");
}

// Whether `eng` still runs an op and reports it done.
static bool runs_an_op(Engine& eng) {
  Var v = eng.new_var();
  int x = 0;
  eng.push([&] { x = 1; }, {}, {v});
  eng.wait_to_read(v);
  eng.delete_var(std::move(v));
  return x == 1;
}

TEST_CASE("EngineOptions out of range are an error naming the field and change nothing",
          "[engine][errors]") {
  auto with = [](auto set) {
    EngineOptions o;
    set(o);
    return o;
  };
  const std::vector<std::pair<EngineOptions, std::string>> bad = {
      {with([](EngineOptions& o) { o.kind = static_cast<EngineKind>(7); }), "kind is 7"},
      {with([](EngineOptions& o) { o.cpu_pacing = static_cast<Pacing>(9); }), "cpu_pacing is 9"},
      {with([](EngineOptions& o) { o.cpu_workers = -1; }), "cpu_workers is -1"},
      {with([](EngineOptions& o) { o.cpu_workers = kMaxCpuThreads + 1; }), "cpu_workers is 1025"},
      {with([](EngineOptions& o) { o.cpu_chunk_helpers = -2; }), "cpu_chunk_helpers is -2"},
      {with([](EngineOptions& o) { o.cpu_chunk_helpers = 100000; }),
       "cpu_chunk_helpers is 100000"},
  };
  Engine& eng = engine();
  const EngineKind kind = eng.kind();
  const int workers = eng.num_workers();
  for (const auto& b : bad) {
    INFO(b.second);
    // Before: an unknown kind made an engine that crashed at its first push, and 100000 helpers
    // or workers were started one by one.
    CHECK_THROWS_WITH(Engine(b.first), Catch::Contains("engine options: " + b.second));
    CHECK_THROWS_WITH(configure_engine(b.first), Catch::Contains("engine options: " + b.second));
    CHECK(eng.kind() == kind);
    CHECK(eng.num_workers() == workers);
    CHECK(runs_an_op(eng));
  }
}

// Run by the test below in a child process, under a memory limit that leaves room for a few
// dozen threads' stacks: an engine of 1000 workers cannot start them all.
TEST_CASE("engine: workers that cannot start (child)", "[.][engine-start-child]") {
  // Hidden tests still run where every test is run in one process ("~[gpu]"): there the memory
  // limit and the alarm below would hold for the tests after this one.
  if (std::getenv("ASYNCND_TEST_START_CHILD") == nullptr) {
    SUCCEED("SKIPPED: run by the test below, in a child process");
    return;
  }
  ::alarm(60);  // the failure this checks was a hang
  Engine& eng = engine();
  const int workers = eng.num_workers();
  rlimit as{};
  REQUIRE(::getrlimit(RLIMIT_AS, &as) == 0);
  std::ifstream status("/proc/self/status");
  std::string line;
  std::uint64_t vm_kb = 0;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoull(line.substr(7));
  REQUIRE(vm_kb > 0);
  as.rlim_cur = (vm_kb << 10) + (512ull << 20);
  REQUIRE(::setrlimit(RLIMIT_AS, &as) == 0);
  EngineOptions many;
  many.cpu_workers = 1000;
  CHECK_THROWS_WITH(Engine(many), Catch::Contains("engine: could not start cpu(0)'s worker") &&
                                      Catch::Contains("of 1000"));
  CHECK_THROWS_WITH(configure_engine(many), Catch::Contains("could not start cpu(0)'s worker"));
  // configure_engine restarted the engine as it was.
  CHECK(eng.num_workers() == workers);
  CHECK(runs_an_op(eng));
  std::printf("child done\n");
}

TEST_CASE("an engine whose workers cannot all start throws and configure_engine keeps the old "
          "one", "[engine][errors]") {
#ifdef ASYNCND_TEST_SANITIZED
  SUCCEED("SKIPPED: the sanitizers' shadow memory does not fit under a memory limit");
  return;
#endif
  if (std::getenv("ASYNCND_TEST_EMULATOR") != nullptr || asyncnd_test::kUnderEmulator) {
    SUCCEED("SKIPPED: under qemu-user the memory limit applies to the emulator's own reservations");
    return;
  }
  int status = 0;
  const std::string out =
      asyncnd_test::run_child("ASYNCND_TEST_START_CHILD=1", "engine: workers that cannot start (child)",
                              &status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("child done") != std::string::npos);
}

TEST_CASE("pacing: natively every CPU pool takes runs unless told otherwise", "[engine]") {
  for (int workers : {1, 3}) {
    INFO(workers << " workers");
    CHECK(Engine(EngineOptions{EngineKind::kThreaded, workers}).pacing() == Pacing::kRuns);
    EngineOptions o{EngineKind::kThreaded, workers};
    o.cpu_pacing = Pacing::kOps;
    CHECK(Engine(o).pacing() == Pacing::kOps);
    o.cpu_pacing = Pacing::kRuns;
    CHECK(Engine(o).pacing() == Pacing::kRuns);
  }
  CHECK(Engine(EngineOptions{EngineKind::kNaive}).pacing() == Pacing::kOps);
  CHECK_THROWS_WITH(Engine(EngineOptions{}).pacing(Device{DeviceKind::kCPU, 3}),
                    Catch::Contains("pacing"));
}

TEST_CASE("memory_limit_from: the cgroup's limit when below physical memory, else physical",
          "[engine][backpressure]") {
  using detail::memory_limit_from;
  const std::uint64_t phys = 24ull << 30;
  auto check = [](MemoryLimit m, std::uint64_t bytes, BoundSource source) {
    CHECK(m.bytes == bytes);
    CHECK(m.source == source);
  };
  check(memory_limit_from(nullptr, nullptr, phys), phys, BoundSource::kPhysical);
  check(memory_limit_from("max\n", nullptr, phys), phys, BoundSource::kPhysical);
  check(memory_limit_from("max\n", "1073741824\n", phys), phys, BoundSource::kPhysical);
  check(memory_limit_from("1073741824\n", nullptr, phys), 1ull << 30, BoundSource::kCgroup);
  check(memory_limit_from(nullptr, "536870912\n", phys), 512ull << 20, BoundSource::kCgroup);
  // cgroup v1's "unlimited" is about 2^63: physical memory decides.
  check(memory_limit_from(nullptr, "9223372036854771712\n", phys), phys, BoundSource::kPhysical);
  check(memory_limit_from(nullptr, "99999999999999999999999\n", phys), phys,
        BoundSource::kPhysical);
  check(memory_limit_from("", "536870912", phys), 512ull << 20, BoundSource::kCgroup);
  check(memory_limit_from("1073741824", nullptr, 0), 1ull << 30, BoundSource::kCgroup);
  check(memory_limit_from(nullptr, nullptr, 0), 0, BoundSource::kNone);
  // ... and "unlimited" is none where physical memory is unknown, as "max" is (it was taken for an
  // 8 EiB limit, and the default bound came out as 512 MiB "from the cgroup").
  check(memory_limit_from(nullptr, "9223372036854771712\n", 0), 0, BoundSource::kNone);
  check(memory_limit_from("max", nullptr, 0), 0, BoundSource::kNone);

  const MemoryLimit here = program_memory_limit();
  INFO("this machine: " << here.bytes << " bytes, " << bound_source_name(here.source));
  CHECK(here.bytes > 0);
  CHECK((here.source == BoundSource::kCgroup || here.source == BoundSource::kPhysical));
}

TEST_CASE("from_env: the default byte bound is a quarter of the memory limit (at most 512 MiB), "
          "the environment "
          "overrides both bounds", "[engine][backpressure]") {
  ::unsetenv("ASYNCND_MAX_INFLIGHT_BYTES");
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");
  const MemoryLimit small{64ull << 20, BoundSource::kCgroup};
  EngineOptions o = EngineOptions::from_env(small);
  CHECK(o.max_inflight_ops == kDefaultMaxInflightOps);
  CHECK(o.max_inflight_bytes == (64u << 20) / kDefaultInflightBytesDivisor);
  CHECK(o.max_inflight_bytes_source == BoundSource::kCgroup);
  o = EngineOptions::from_env(MemoryLimit{});
  CHECK(o.max_inflight_bytes == 0);
  CHECK(o.max_inflight_bytes_source == BoundSource::kNone);
  CHECK(EngineOptions::from_env().max_inflight_bytes ==
        default_max_inflight_bytes(program_memory_limit().bytes));
  // The cap: a quarter of 64 GiB would be 16 GiB.
  CHECK(EngineOptions::from_env(MemoryLimit{64ull << 30, BoundSource::kPhysical})
            .max_inflight_bytes == kDefaultInflightBytesCap);
  CHECK(default_max_inflight_bytes(2ull << 30) == 512ull << 20);

  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", "1000", 1);
  ::setenv("ASYNCND_MAX_INFLIGHT_OPS", "7", 1);
  o = EngineOptions::from_env(small);
  CHECK(o.max_inflight_bytes == 1000);
  CHECK(o.max_inflight_bytes_source == BoundSource::kEnv);
  CHECK(o.max_inflight_ops == 7);
  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", "0", 1);  // 0: no bound
  ::setenv("ASYNCND_MAX_INFLIGHT_OPS", "0", 1);
  o = EngineOptions::from_env(small);
  CHECK(o.max_inflight_bytes == 0);
  CHECK(o.max_inflight_bytes_source == BoundSource::kNone);
  CHECK(o.max_inflight_ops == 0);
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");

  for (const char* bad : {"-1", "12abc", "lots", "", " 5", "1e9", "99999999999999999999999"}) {
    ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", bad, 1);
    CHECK_THROWS_WITH(EngineOptions::from_env(small),
                      Catch::Contains("ASYNCND_MAX_INFLIGHT_BYTES") &&
                          Catch::Contains(std::string("'") + bad + "'"));
  }
  ::unsetenv("ASYNCND_MAX_INFLIGHT_BYTES");
  ::setenv("ASYNCND_MAX_INFLIGHT_OPS", "-3", 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(small),
                    Catch::Contains("ASYNCND_MAX_INFLIGHT_OPS") && Catch::Contains("'-3'"));
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");
}

// EngineOptions{kind, workers} (all a caller means to change) once made an engine with no bound at
// all: the bounds' own default is the default bound, resolved when the engine starts.
TEST_CASE("bounds left at kDefaultBound are the default ones: a private engine and "
          "configure_engine keep memory bounded", "[engine][backpressure]") {
  ::unsetenv("ASYNCND_MAX_INFLIGHT_BYTES");
  ::unsetenv("ASYNCND_MAX_INFLIGHT_OPS");
  CHECK(EngineOptions{}.max_inflight_ops == kDefaultBound);
  CHECK(EngineOptions{}.max_inflight_bytes == kDefaultBound);
  const EngineOptions want = EngineOptions::from_env();
  REQUIRE(want.max_inflight_bytes != kDefaultBound);
  auto check_defaults = [&](const EngineStats& s, const char* what) {
    INFO(what);
    CHECK(s.max_inflight_ops == want.max_inflight_ops);
    CHECK(s.max_inflight_bytes == want.max_inflight_bytes);
    CHECK(s.max_inflight_bytes_source == want.max_inflight_bytes_source);
  };
  {
    Engine eng(EngineOptions{EngineKind::kThreaded, 1});
    check_defaults(eng.stats(), "a private engine");
    eng.set_max_inflight(3, 4);
    eng.reset_max_inflight();  // back to the bounds it started with: the defaults
    check_defaults(eng.stats(), "after reset_max_inflight");
  }
  configure_engine({EngineKind::kThreaded, 2});
  check_defaults(engine().stats(), "configure_engine({kThreaded, 2})");
  configure_engine({EngineKind::kNaive});
  check_defaults(engine().stats(), "configure_engine({kNaive})");
  // Only the bound left at its default follows the environment; one set by hand stays.
  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", "4096", 1);
  EngineOptions o{EngineKind::kThreaded, 1};
  o.max_inflight_ops = 0;  // no bound
  configure_engine(o);
  CHECK(engine().stats().max_inflight_ops == 0);
  CHECK(engine().stats().max_inflight_bytes == 4096);
  CHECK(engine().stats().max_inflight_bytes_source == BoundSource::kEnv);
  // A bad value fails the configuration and leaves the engine as it was.
  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", "lots", 1);
  CHECK_THROWS_WITH(configure_engine({EngineKind::kThreaded, 1}),
                    Catch::Contains("ASYNCND_MAX_INFLIGHT_BYTES") && Catch::Contains("'lots'"));
  CHECK(engine().stats().max_inflight_bytes == 4096);
  CHECK(engine().kind() == EngineKind::kThreaded);
  // SIZE_MAX is kDefaultBound: the environment's bound stops below it.
  ::setenv("ASYNCND_MAX_INFLIGHT_BYTES", std::to_string(SIZE_MAX).c_str(), 1);
  CHECK_THROWS_WITH(EngineOptions::from_env(), Catch::Contains("ASYNCND_MAX_INFLIGHT_BYTES"));
  ::unsetenv("ASYNCND_MAX_INFLIGHT_BYTES");
  configure_engine(EngineOptions::from_env());
  check_defaults(engine().stats(), "from_env again");
}

TEST_CASE("stats: the bounds in force, the byte bound's source, and the pushes that waited",
          "[engine][backpressure]") {
  Engine eng(EngineOptions::from_env(MemoryLimit{1ull << 30, BoundSource::kWasmHeap}));
  EngineStats s = eng.stats();
  CHECK(s.max_inflight_ops == kDefaultMaxInflightOps);
  CHECK(s.max_inflight_bytes == (1u << 30) / kDefaultInflightBytesDivisor);
  CHECK(s.max_inflight_bytes_source == BoundSource::kWasmHeap);
  CHECK(std::string(bound_source_name(s.max_inflight_bytes_source)) == "wasm heap");
  CHECK(s.push_waits == 0);

  eng.set_max_inflight(2, 100);
  s = eng.stats();
  CHECK(s.max_inflight_ops == 2);
  CHECK(s.max_inflight_bytes == 100);
  CHECK(s.max_inflight_bytes_source == BoundSource::kUser);
  // A gated op and a second one fill the op bound: the third push waits until the gate opens.
  Gate gate;
  Var a = eng.new_var(), b = eng.new_var(), c = eng.new_var();
  eng.push([&] { gate.wait(); }, {}, {a});
  eng.push([] {}, {a}, {b});
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open = true;
  });
  eng.push([] {}, {}, {c});
  opener.join();
  eng.waitall();
  CHECK(eng.stats().push_waits >= 1);

  eng.set_max_inflight(0, 0);
  s = eng.stats();
  CHECK(s.max_inflight_ops == 0);
  CHECK(s.max_inflight_bytes == 0);
  CHECK(s.max_inflight_bytes_source == BoundSource::kNone);
  eng.reset_max_inflight();
  s = eng.stats();
  CHECK(s.max_inflight_bytes == (1u << 30) / kDefaultInflightBytesDivisor);
  CHECK(s.max_inflight_bytes_source == BoundSource::kWasmHeap);

  Engine mine(EngineOptions{EngineKind::kThreaded, 1, 0, 5000});
  CHECK(mine.stats().max_inflight_bytes_source == BoundSource::kUser);
  CHECK(std::string(bound_source_name(BoundSource::kNone)) == "none");
}
