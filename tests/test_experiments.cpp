// The chapter's experiments (experiments/chapter.h), which the demo prints and the benchmarks
// record, at small sizes: each returns finite figures, E2's graph has the chapter's edges, E6
// calls back where the chapter prints and puts the engine's bound back; nothing is left queued or
// allocated. (The demo itself, at full size, is `make demo`.)
#include <asyncnd/asyncnd.h>

#include <catch2/catch.hpp>
#include <cmath>
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
