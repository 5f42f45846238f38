// [gpu] The CUDA-specific engine paths, on real GPUs only (SKIPPED with the reason otherwise):
// event dependencies between the copy and compute streams, copies CPU<->GPU and GPU<->GPU,
// errors from a failing kernel launch, device bytes in the stats and the allocator's cache.
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
    const std::int64_t n = 1 << 22;  // 16 MB: copies long enough to overlap kernels
    // Host-to-device on the copy stream, then kernels on the compute stream that must wait for it.
    NDArray x = nd::arange(0.0f, static_cast<float>(n), 1.0f).copy_to(g);
    for (int i = 0; i < 20; ++i) x += 1.0f;
    const NDArray mid = x.copy_to(Device::cpu());  // device-to-host waits for the 20 kernels...
    for (int i = 0; i < 20; ++i) x += 1.0f;        // ...and the next writes wait for the copy
    const std::vector<float> m = mid.to_vector(), e = x.to_vector();
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      bad += m[static_cast<std::size_t>(i)] != static_cast<float>(i + 20);
      bad += e[static_cast<std::size_t>(i)] != static_cast<float>(i + 40);
    }
    CHECK(bad == 0);
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

TEST_CASE("cuda: a failing kernel launch poisons its outputs with CUDA's error text", "[gpu][engine]") {
  if (!gpus_or_skip("cuda kernel errors")) return;
  leak_checked([] {
    const Device g = Device::gpu(0);
    // A 2-D transpose with more than 65535 tiles of rows exceeds the grid's y limit: the launch
    // fails with cudaErrorInvalidConfiguration, which does not damage the device context.
    const NDArray t = nd::zeros({2097153, 1}, g);
    const NDArray u = nd::transpose(t);
    const NDArray w = u + 1.0f;
    CHECK_THROWS_WITH(u.wait_to_read(), Catch::Contains("transpose failed on gpu(0)") &&
                                            Catch::Contains("cudaErrorInvalidConfiguration"));
    CHECK_THROWS_WITH(w.to_vector(), Catch::Contains("cudaErrorInvalidConfiguration"));
    check_exact((nd::ones({3}, g) + 1.0f).to_vector(), {2, 2, 2}, "the device still works");
    // Out of device memory: at the call, before anything is queued.
    expect_error([&] { nd::empty({std::int64_t{1} << 45}, g); }, {"empty", "cannot allocate"});
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
#endif
  });
}
