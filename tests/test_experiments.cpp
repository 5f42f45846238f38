// The chapter's experiments (experiments/chapter.h), which the demo prints and the benchmarks
// record, at small sizes: each returns finite figures, E2's graph has the chapter's edges, E6
// calls back where the chapter prints and puts the engine's bound back; nothing is left queued or
// allocated. (The demo itself, at full size, is `make demo`.)
#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "experiments/chapter.h"
#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;

TEST_CASE("E1: the loop returns before waitall, each loop's peak holds a product, and the naive run "
          "leaves the engine as it was",
          "[experiments]") {
  leak_checked([] {
    const EngineKind kind = engine().kind();
    chapter::E1Config cfg;
    cfg.iters = 3;
    cfg.n = 64;
    const chapter::E1Result r = chapter::e1(cfg);
    CHECK(r.sync_s > 0);
    CHECK(r.naive_s > 0);
    CHECK(r.engine.returned_s <= r.engine.finished_s);
    CHECK(r.engine_first.returned_s <= r.engine_first.finished_s);
    // Each loop held at least one product's two 64x64 arrays at some point (16 KiB each).
    CHECK(r.sync_peak_mb >= 2 * 64 * 64 * 4 / 1e6);
    CHECK(r.engine_peak_mb >= 2 * 64 * 64 * 4 / 1e6);
    CHECK(engine().kind() == kind);
  });
}

TEST_CASE("E2: z = x * y + 2 is four ops, mul waits for both ones and add for mul", "[experiments]") {
  leak_checked([] {
    const chapter::E2Result r = chapter::e2();
    CHECK(r.z.find('3') != std::string::npos);
    REQUIRE(r.events.size() == 4);
    std::vector<std::string> ops;
    for (const ProfileEvent& e : r.events) ops.push_back(e.name);
    CHECK(ops == std::vector<std::string>{"ones", "ones", "mul", "add"});
    CHECK(r.edges == std::vector<std::pair<int, int>>{{0, 2}, {1, 2}, {2, 3}});
    CHECK(r.names.at(r.events[0].writes[0]) == "x");
    CHECK(r.names.at(r.events[1].writes[0]) == "y");
    CHECK(r.names.at(r.events[2].writes[0]) == "tmp1");
    CHECK(r.names.at(r.events[3].writes[0]) == "z");
  });
}

TEST_CASE("E3, E4: every wait costs a product", "[experiments]") {
  leak_checked([] {
    const chapter::E3Result r3 = chapter::e3(64);
    CHECK(r3.queued_s <= r3.printed_s);
    CHECK(r3.wait_to_read_s > 0);
    CHECK(r3.waitall2_s > 0);
    CHECK(r3.wait_first_of_two_s > 0);
    CHECK_FALSE(r3.sum.empty());
    const chapter::E4Result r4 = chapter::e4(64);
    CHECK(r4.values == 64u * 64u);
    CHECK(std::isfinite(r4.norm));
    CHECK(r4.norm > 0);
    CHECK_FALSE(r4.text.empty());
  });
}

TEST_CASE("E5: t1, t2, t3 from a real run, and the model's synchronous time is the measured one",
          "[experiments]") {
  leak_checked([] {
    chapter::E5Config cfg;
    cfg.n = 500;
    cfg.warmup = 100;
    cfg.profiled = 200;
    const chapter::E5Result r = chapter::e5(cfg);
    CHECK(r.sync_s > 0);
    CHECK(r.push_s <= r.async_s);
    CHECK(r.t1_s > 0);
    CHECK(r.t2_samples == 200u);
    CHECK(r.model.model_sync_s == Approx(r.sync_s));
    CHECK(std::isfinite(r.model.model_async_s));
  });
}

TEST_CASE("E6: the MLP trained four ways, on_next where the chapter prints, the bound restored",
          "[experiments]") {
  leak_checked([] {
    const std::size_t ops = engine().max_inflight_ops(), bytes = engine().max_inflight_bytes();
    chapter::E6Config cfg;
    cfg.num_batches = 3;
    cfg.batch_size = 16;
    cfg.features = 8;
    cfg.bound_bytes = 1 << 20;
    for (chapter::E6Mode mode : {chapter::E6Mode::kSync, chapter::E6Mode::kNoSync,
                                 chapter::E6Mode::kBounded, chapter::E6Mode::kDefault}) {
      INFO(chapter::e6_mode_name(mode));
      std::vector<std::pair<int, double>> calls;
      cfg.on_next = [&](int given, double s) { calls.emplace_back(given, s); };
      const chapter::E6Result r = chapter::e6(mode, cfg);
      REQUIRE(calls.size() == 3);  // asked for batches 2 and 3, then for one more: the end
      for (int i = 0; i < 3; ++i) CHECK(calls[i].first == i + 1);
      CHECK(calls[2].second >= calls[0].second);
      CHECK(r.total_s >= r.frontend_s);
      CHECK(r.engine_peak_mb > 0);
      CHECK(std::isfinite(r.final_loss));
      CHECK((mode == chapter::E6Mode::kSync) == (r.loss_sum > 0));
      if (mode == chapter::E6Mode::kNoSync) CHECK(r.bound_mb == 0);
      if (mode == chapter::E6Mode::kBounded) CHECK(r.bound_mb == Approx((1 << 20) / 1e6));
      CHECK(engine().max_inflight_ops() == ops);
      CHECK(engine().max_inflight_bytes() == bytes);
    }
  });
}

// Found by an audit: e6 put back the engine's startup bounds, not the caller's; its default mode
// ran with the caller's bound; a throw left the bound off; 0 batches reported the clock's epoch
// as the run time; the bounded mode with a bound of 0 ran unbounded under that name.
TEST_CASE("E6 puts back the caller's bounds and refuses configs it cannot run", "[experiments]") {
  leak_checked([] {
    Engine& eng = engine();
    const std::size_t own_ops = eng.max_inflight_ops(), own_bytes = eng.max_inflight_bytes();
    chapter::E6Config cfg;
    cfg.num_batches = 2;
    cfg.batch_size = 16;
    cfg.features = 8;
    cfg.bound_bytes = 1 << 20;
    eng.set_max_inflight(1000, 12345678);
    const chapter::E6Result d = chapter::e6(chapter::E6Mode::kDefault, cfg);
    CHECK(d.bound_mb == Approx(own_bytes / 1e6));  // the engine's own bound, not the caller's
    CHECK(std::string(d.bound_source) != "user");
    chapter::e6(chapter::E6Mode::kBounded, cfg);
    CHECK(eng.max_inflight_ops() == 1000);
    CHECK(eng.max_inflight_bytes() == 12345678);
    cfg.on_next = [](int given, double) {
      if (given == 1) throw Error("on_next failed");
    };
    CHECK_THROWS_WITH(chapter::e6(chapter::E6Mode::kNoSync, cfg), "on_next failed");
    nd::waitall();
    CHECK(eng.max_inflight_bytes() == 12345678);
    CHECK(eng.stats().max_inflight_bytes_source == BoundSource::kUser);
    cfg.on_next = nullptr;
    eng.reset_max_inflight();
    chapter::e6(chapter::E6Mode::kSync, cfg);
    CHECK(eng.max_inflight_ops() == own_ops);
    CHECK(eng.max_inflight_bytes() == own_bytes);
    CHECK(eng.stats().max_inflight_bytes_source != BoundSource::kUser);  // still the engine's own
    chapter::E6Config zero = cfg;
    zero.num_batches = 0;
    CHECK_THROWS_WITH(chapter::e6(chapter::E6Mode::kSync, zero),
                      "chapter::e6: num_batches must be >= 1, got 0");
    chapter::E6Config unbounded = cfg;
    unbounded.bound_bytes = 0;
    CHECK_THROWS_WITH(chapter::e6(chapter::E6Mode::kBounded, unbounded),
                      Catch::Contains("the bounded mode needs a byte bound above 0"));
  });
}

TEST_CASE("E1 and E5 refuse counts below 1 and E6 reads its variables strictly", "[experiments]") {
  chapter::E1Config e1;
  e1.iters = 0;
  CHECK_THROWS_WITH(chapter::e1(e1), Catch::Contains("chapter::e1: iters and n must be >= 1"));
  chapter::E5Config e5;
  e5.n = 0;
  CHECK_THROWS_WITH(chapter::e5(e5), Catch::Contains("chapter::e5: n must be >= 1"));
  for (const char* bad : {"2.5", "10abc", "abc", "-4", "0", "", "1e7"}) {
    INFO("ASYNCND_E6_BATCHES=" << bad);
    ::setenv("ASYNCND_E6_BATCHES", bad, 1);
    CHECK_THROWS_WITH(chapter::e6_default_batches(),
                      std::string("ASYNCND_E6_BATCHES: expected a whole number from 1 to ") +
                          "1000000, got '" + bad + "'");
  }
  ::setenv("ASYNCND_E6_BATCHES", "7", 1);
  CHECK(chapter::e6_default_batches() == 7);
  ::setenv("ASYNCND_E6_BATCHES", "1e3", 1);  // atoi read it as 1
  CHECK(chapter::e6_default_batches() == 1000);
  ::unsetenv("ASYNCND_E6_BATCHES");
  CHECK(chapter::e6_default_batches() == 100);
  for (const char* bad : {"-5", "abc", "0"}) {
    ::setenv("ASYNCND_E6_BOUND_MB", bad, 1);
    CHECK_THROWS_WITH(chapter::e6_default_bound_bytes(), Catch::Contains("ASYNCND_E6_BOUND_MB"));
  }
  ::setenv("ASYNCND_E6_BOUND_MB", "2.5", 1);
  CHECK(chapter::e6_default_bound_bytes() == 2500000);
  ::unsetenv("ASYNCND_E6_BOUND_MB");
  CHECK(chapter::e6_default_bound_bytes() == 3u * 1024 * 2048 * sizeof(float));
}

TEST_CASE("E7: runs on a GPU, or says why not", "[experiments]") {
  leak_checked([] {
    const chapter::E7Result r = chapter::e7(2, 64);
    if (r.skipped.empty()) {
      CHECK(r.gpu.returned_s <= r.gpu.finished_s);
      CHECK(r.both.finished_s > 0);
    } else {
      CHECK(r.cpu.finished_s == 0);
    }
  });
}
