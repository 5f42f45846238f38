// [gpu] The CUDA-specific engine paths, on real GPUs only (SKIPPED with the reason otherwise):
// event dependencies between the copy and compute streams, copies CPU<->GPU and GPU<->GPU,
// errors from a failing kernel launch, device bytes in the stats and the allocator's cache, the
// chapter's MLP trained on the GPU, the device-side spans in the profile, and small calls held
// back and started together (ASYNCND_CUDA_BATCH).
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "ops_test_util.h"

#if ASYNCND_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

using namespace asyncnd;
using namespace asyncnd_test;

TEST_CASE("cuda: event dependencies order the copy and compute streams", "[gpu][engine]") {
  if (!gpus_or_skip("cuda event dependencies")) return;
  leak_checked([] {
    const Device g = Device::gpu(0);
    // 16 MB: copies long enough to overlap kernels, events recorded at each write; 4 KB: a small
    // block, whose event is recorded only when the other stream or the host waits for it.
    for (const std::int64_t n : {std::int64_t{1} << 22, std::int64_t{1000}}) {
      INFO("n = " << n);
      for (int round = 0; round < 3; ++round) {  // later rounds reuse the cached blocks
        // Host-to-device on the copy stream, then kernels on the compute stream that wait for it.
        NDArray x = nd::arange(0.0f, static_cast<float>(n), 1.0f).copy_to(g);
        for (int i = 0; i < 20; ++i) x += 1.0f;
        const NDArray mid = x.copy_to(Device::cpu());  // device-to-host waits for 20 kernels...
        for (int i = 0; i < 20; ++i) x += 1.0f;        // ...and the next writes wait for the copy
        const std::vector<float> m = mid.to_vector(), e = x.to_vector();
        std::int64_t bad = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          bad += m[static_cast<std::size_t>(i)] != static_cast<float>(i + 20);
          bad += e[static_cast<std::size_t>(i)] != static_cast<float>(i + 40);
        }
        CHECK(bad == 0);
      }
    }
    // wait_to_read waits for the device itself, not only for the launch.
    const NDArray a = nd::random_normal({1024, 1024}, 0, 1, g);
    const NDArray p = nd::dot(a, a);
    p.wait_to_read();
    const NDArray pc = nd::dot(a.copy_to(Device::cpu()), a.copy_to(Device::cpu()));
    check_close(p.to_vector(), pc.to_vector(), 1e-4, 1e-3, "1024^2 GEMM, cuBLAS vs CPU");
  });
}

TEST_CASE("cuda: copies between the CPU and a GPU, and on one GPU", "[gpu][engine]") {
  if (!gpus_or_skip("cuda copies")) return;
  leak_checked([] {
    Rng rng(test_seed("cuda copies"));
    for (std::int64_t n : {1, 1000, 3 << 20}) {
      const auto v = random_values(rng, n);
      const NDArray a = nd::from_vector(v, {n}, Device::gpu(0));
      check_exact(a.to_vector(), v, "cpu -> gpu(0) -> cpu, n=" + std::to_string(n));
      check_exact(a.copy().to_vector(), v, "copy() on gpu(0), n=" + std::to_string(n));
    }
  });
}

TEST_CASE("cuda: copies between two GPUs", "[gpu][multigpu]") {
  if (!gpus_or_skip("cuda GPU-to-GPU copies", 2)) return;
  leak_checked([] {
    Rng rng(test_seed("cuda peer copies"));
    const auto v = random_values(rng, 1 << 20);
    const NDArray a = nd::from_vector(v, {1 << 20}, Device::gpu(0));
    NDArray b = a.copy_to(Device::gpu(1));
    b += 1.0f;  // a later write on gpu(1) after the copy
    const NDArray back = b.copy_to(Device::gpu(0)) - 1.0f;
    check_close(back.to_vector(), v, 1e-6, 1e-6, "gpu(0) -> gpu(1) -> gpu(0)");
  });
}

// [api_errors]: CUDA calls fail here on purpose; tools/gpu-check.sh leaves it out of
// compute-sanitizer's runs, which would report them.
TEST_CASE("cuda: a failing kernel launch poisons its outputs with CUDA's error text",
          "[gpu][engine][api_errors]") {
  if (!gpus_or_skip("cuda kernel errors")) return;
#if ASYNCND_HAVE_CUDA
  leak_checked([] {
    const Device g = Device::gpu(0);
    // The transpose's launch fails as one asking for too many registers would
    // (cudaErrorLaunchOutOfResources, which does not damage the device context); u + 1, which
    // reads it, fails with its error.
    const NDArray t = nd::zeros({5, 3}, g);
    t.wait_to_read();
    detail::cuda_fail_next_launches(0, 1);
    const NDArray u = nd::transpose(t);
    const NDArray w = u + 1.0f;
    CHECK_THROWS_WITH(u.wait_to_read(), Catch::Contains("transpose failed on gpu(0)") &&
                                            Catch::Contains("cudaErrorLaunchOutOfResources"));
    CHECK_THROWS_WITH(w.to_vector(), Catch::Contains("cudaErrorLaunchOutOfResources"));
    check_exact((nd::ones({3}, g) + 1.0f).to_vector(), {2, 2, 2}, "the device still works");
    // Out of device memory: at the call, before anything is queued.
    expect_error([&] { nd::empty({std::int64_t{1} << 45}, g); }, {"empty", "cannot allocate"});
  });
#endif
}

TEST_CASE("cuda: a 2-D transpose of more rows than the grid has row tiles", "[gpu][ops]") {
  if (!gpus_or_skip("cuda tall transposes")) return;
  leak_checked([] {
    // The kernel's blocks take tiles of 32 rows, and the grid's y holds 65535 of them: past
    // 2 097 120 rows a block takes several. Rows that end mid-tile, one column and three.
    for (const Shape& shape : {Shape{2097153, 1}, Shape{65535 * 32 * 2 + 5, 3}}) {
      INFO("shape " << shape_str(shape));
      const std::int64_t n = shape[0] * shape[1];
      const NDArray cpu = nd::arange(0.0f, static_cast<float>(n), 1.0f).reshape(shape);
      const std::vector<float> want = nd::transpose(cpu).to_vector();
      const std::vector<float> got = nd::transpose(cpu.copy_to(Device::gpu(0))).to_vector();
      check_exact(got, want, "transpose on gpu(0) against the CPU's");
    }
  });
}

TEST_CASE("cuda: device bytes in the engine's stats, freed blocks are cached", "[gpu][engine]") {
  if (!gpus_or_skip("cuda allocator")) return;
  leak_checked([] {
    const auto gpu_bytes = [] { return device_bytes_in_use(Device::gpu(0)); };
    const auto before = gpu_bytes();
    {
      const NDArray a = nd::zeros({1 << 20}, Device::gpu(0));
      a.wait_to_read();
      CHECK(gpu_bytes() == before + (4u << 20));
    }
    nd::waitall();
    CHECK(gpu_bytes() == before);
#if ASYNCND_HAVE_CUDA
    CHECK(detail::cuda_cached_bytes(0) >= (4u << 20));
    // Small blocks come 64 to a cudaMalloc: 200 live arrays of a size not used before (7 KB)
    // take at most 4 driver calls, and all go back to the cache.
    const auto before_counts = detail::cuda_alloc_counts(0);
    {
      std::vector<NDArray> small;
      for (int i = 0; i < 200; ++i) small.push_back(nd::full({1777}, static_cast<float>(i), Device::gpu(0)));
      for (int i = 0; i < 200; i += 37)
        CHECK(small[static_cast<std::size_t>(i)].to_vector()[1776] == static_cast<float>(i));
    }
    nd::waitall();
    const auto after_counts = detail::cuda_alloc_counts(0);
    CHECK(after_counts.allocs - before_counts.allocs >= 200);
    CHECK(after_counts.driver_allocs - before_counts.driver_allocs <= 4);
    CHECK(gpu_bytes() == before);
#endif
  });
}

TEST_CASE("cuda: the chapter's MLP trains on the GPU as on the CPU", "[gpu][engine]") {
  if (!gpus_or_skip("cuda MLP")) return;
  leak_checked([] { check_mlp_on_device(Device::gpu(0)); });
}

TEST_CASE("cuda: the profile shows when kernels and copies ran on the device", "[gpu][engine]") {
  if (!gpus_or_skip("cuda device-side profile")) return;
  leak_checked([] {
    const Device g = Device::gpu(0);
    const NDArray a = nd::random_normal({2048, 2048}, 0, 1, g);
    const NDArray host = nd::ones({1 << 22});  // 16 MB
    nd::waitall();
    Engine& eng = engine();
    eng.start_profiling();
    NDArray p = nd::dot(a, a);
    for (int i = 0; i < 3; ++i) p = nd::dot(p, a) * 1e-3f;
    const NDArray next = host.copy_to(g);  // the next batch, copied while the products run
    const float back = nd::sum(next).item();
    const std::string trace = eng.stop_profiling();
    CHECK(back == static_cast<float>(1 << 22));
    std::vector<ProfileEvent> compute, copies;
    for (const ProfileEvent& e : eng.profile_events()) {
      if (e.lane == "compute stream") compute.push_back(e);
      if (e.lane == "copy stream") copies.push_back(e);
      if (e.lane.empty()) continue;
      INFO(e.lane << ": " << e.name << " " << e.start_us << ".." << e.end_us << " us");
      CHECK(e.device == g);
      CHECK(e.start_us >= 0);
      CHECK(e.end_us >= e.start_us);
    }
    // 4 GEMMs, the scaling, the sum's reduction on the compute stream; the copy in and the
    // result's copy out on the copy stream.
    REQUIRE(compute.size() >= 8);
    REQUIRE(copies.size() == 2);
    CHECK(copies[0].name.find("copy cpu(0)->gpu(0) (16777216 B)") != std::string::npos);
    int gemms = 0;
    for (std::size_t i = 0; i < compute.size(); ++i) {
      gemms += compute[i].name.rfind("gemm 2048x2048x2048", 0) == 0;
      // One stream runs in order: each span starts after the one before it ends (event times
      // have a resolution of about half a microsecond).
      if (i > 0) CHECK(compute[i].start_us >= compute[i - 1].end_us - 1.0);
    }
    CHECK(gemms == 4);
    CHECK(compute[0].end_us - compute[0].start_us > 10.0);  // a 2048^3 product takes > 10 us
    CHECK(trace.find("\"copy stream\"") != std::string::npos);
    CHECK(trace.find("\"cat\":\"device\"") != std::string::npos);
  });
}

#if ASYNCND_HAVE_CUDA
namespace {
// Small calls held back and started together (ASYNCND_CUDA_BATCH), for the scope.
class ScopedBatching {
 public:
  explicit ScopedBatching(bool on) : before_(detail::cuda_batching()) {
    detail::cuda_set_batching(on);
  }
  ~ScopedBatching() {
    try {
      nd::waitall();  // the held calls start before the switch goes back
    } catch (...) {
      // an op error: the test that left it has failed its own checks
    }
    detail::cuda_set_batching(before_);
  }
  ScopedBatching(const ScopedBatching&) = delete;
  ScopedBatching& operator=(const ScopedBatching&) = delete;

 private:
  bool before_;
};

// Small calls (held when batching is on) between the calls that start them: copies both ways, a
// GEMM, a reduction, a host read, and blocks freed and reused. What it read, in order. On a GPU,
// its device's worker is held while the program queues its ops (so that the worker finds them
// queued, and holds the small calls), until the first read.
std::vector<std::vector<float>> held_calls_program(const Device d) {
  std::optional<WorkerHold> hold;
  if (!d.is_cpu()) hold.emplace(d);
  std::vector<std::vector<float>> out;
  NDArray x = nd::arange(0.0f, 1000.0f, 1.0f).copy_to(d);  // the copy stream writes x
  std::vector<NDArray> mids;
  for (int i = 0; i < 30; ++i) {
    x += 1.0f;
    const NDArray y = x * 0.5f + 2.0f;  // y and the temporary: freed, reused by the next step
    if (i % 10 == 9) mids.push_back(y.copy_to(Device::cpu()));
  }
  const NDArray g = nd::dot(nd::reshape(x, {40, 25}), nd::ones({25, 8}, d)) + 1.0f;
  const NDArray r = nd::arange(0.0f, 10.0f, 0.25f, d) - nd::full({40}, 0.5f, d);
  const NDArray s = nd::sum(nd::exp(x * 0.001f));
  if (hold) hold->release();
  for (const NDArray& m : mids) out.push_back(m.to_vector());
  out.push_back(g.to_vector());
  out.push_back(r.to_vector());
  out.push_back(s.to_vector());
  out.push_back(x.to_vector());
  return out;
}
}  // namespace

TEST_CASE("cuda: small calls held and started together give the CPU's values",
          "[gpu][engine]") {
  if (!gpus_or_skip("cuda held calls")) return;
  leak_checked([] {
    const auto want = held_calls_program(Device::cpu());
    for (const bool on : {true, false}) {
      INFO("batching " << on);
      ScopedBatching batching(on);
      const auto before = detail::cuda_held_counts(0);
      const auto got = held_calls_program(Device::gpu(0));
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        check_close(got[i], want[i], 1e-6, 1e-6, "read " + std::to_string(i));
      const auto after = detail::cuda_held_counts(0);
      if (detail::cuda_batching()) CHECK(after.calls - before.calls >= 60);  // the adds, at least
      else CHECK(after.calls == before.calls);  // off, or a build that never holds
    }
  });
}

TEST_CASE("cuda: a small call whose result is read at once is launched, not held",
          "[gpu][engine]") {
  if (!gpus_or_skip("cuda read at once")) return;
  leak_checked([] {
    ScopedBatching batching(true);
    const Device g = Device::gpu(0);
    const NDArray x = nd::ones({1, 2}, g);
    nd::waitall();
    // E5's waiting loop. (Not to_vector: its copy to the CPU is an op of its own, which may be
    // queued before the worker takes the add, and then the add is held until the copy starts it.)
    std::vector<NDArray> ys;  // kept: no deletion is queued beside the steps
    const auto before = detail::cuda_held_counts(0);
    for (int i = 0; i < 50; ++i) {
      ys.push_back(x + static_cast<float>(i));
      ys.back().wait_to_read();
    }
    const auto after = detail::cuda_held_counts(0);
    CHECK(after.calls == before.calls);  // the worker never knew of a next op
    for (int i = 0; i < 50; ++i) {
      const std::vector<float> v = ys[static_cast<std::size_t>(i)].to_vector();
      REQUIRE(v == std::vector<float>{1.0f + i, 1.0f + i});
    }
  });
}

TEST_CASE("cuda: ops queued behind a busy worker start as a few batches", "[gpu][engine]") {
  if (!gpus_or_skip("cuda batches")) return;
  leak_checked([] {
    ScopedBatching batching(true);
    if (!detail::cuda_batching()) {
      std::cout << "SKIPPED: cuda batches: this build never holds calls "
                   "(ASYNCND_CUDA_EAGER_EVENT_BYTES under 8 KB)" << std::endl;
      return;
    }
    const Device g = Device::gpu(0);
    const NDArray x = nd::ones({1, 2}, g);
    nd::waitall();
    // A host op on gpu(0)'s worker holds it while 200 of E5's steps queue up behind it.
    WorkerHold hold(g);
    std::vector<NDArray> ys;
    for (int i = 0; i < 200; ++i) ys.push_back(x + static_cast<float>(i));
    const auto before = detail::cuda_held_counts(0);
    hold.release();
    nd::waitall();
    const auto after = detail::cuda_held_counts(0);
    CHECK(after.calls - before.calls == 200);
    // 200 / kTinyBatchMax (48) = 5 batches when the worker takes them in one run; a few more if
    // it took them in pieces.
    CHECK(after.batches - before.batches <= 20);
    for (int i = 0; i < 200; ++i) {
      const std::vector<float> v = ys[static_cast<std::size_t>(i)].to_vector();
      REQUIRE(v == std::vector<float>{1.0f + i, 1.0f + i});
    }
  });
}

TEST_CASE("cuda: ASYNCND_CUDA_BATCH is 0 or 1 (unset: 1), and says so otherwise", "[cuda]") {
  CHECK(detail::cuda_batching_from_env(nullptr));  // on by default
  CHECK(detail::cuda_batching_from_env(""));
  CHECK_FALSE(detail::cuda_batching_from_env("0"));
  CHECK(detail::cuda_batching_from_env("1"));
  for (const char* bad : {"yes", "2", " 1", "on"}) {
    INFO(bad);
    CHECK_THROWS_WITH(detail::cuda_batching_from_env(bad),
                      Catch::Contains("ASYNCND_CUDA_BATCH='" + std::string(bad) + "'") &&
                          Catch::Contains("expected 0"));
  }
}
#endif
