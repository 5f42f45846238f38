// [conformance] every op case of tests/conformance_cases.h on every device: cpu(0) against the
// serial reference; the GPU emulated on the CPU (tests/emulated_device.h), which takes core/'s
// device path exactly as the CUDA backend does, against the reference and cpu(0); and every real
// GPU present (tagged [gpu]: SKIPPED with the reason when there is none).
#include <string>
#include <vector>

#include "conformance_cases.h"
#include "emulated_device.h"
#include "gpu_util.h"
#include "ops_test_util.h"

using namespace asyncnd;
using namespace asyncnd_test;

namespace {

// Runs every case on `device`; on devices other than the CPU, compares with the CPU's result.
void run_cases(Device device) {
  Rng rng(test_seed("conformance"));
  for (const OpCase& c : conformance_cases()) {
    std::vector<ref::Values> vals;
    std::vector<NDArray> cpu_in, dev_in;
    for (const InputSpec& in : c.inputs) {
      vals.push_back(random_values(rng, ref::size_of(in.shape), in.lo, in.hi));
      cpu_in.push_back(nd::from_vector(vals.back(), in.shape));
      dev_in.push_back(cpu_in.back().copy_to(device));
    }
    const std::string what = std::string(c.name) + " on " + device.str();
    const NDArray out = c.run(dev_in, device);
    CHECK(out.device() == device);
    const std::vector<float> got = out.to_vector();
    if (c.reference) check_close(got, c.reference(vals), c.rel, c.abs, what + " vs reference");
    if (!device.is_cpu()) {
      const NDArray cpu_out = c.run(cpu_in, Device::cpu());
      CHECK(out.shape() == cpu_out.shape());
      const std::vector<float> want = cpu_out.to_vector();
      INFO(what << " vs cpu(0)");
      if (c.same_bits) {
        CHECK(same_bits(got, want));
      } else {
        check_close(got, want, c.rel, c.abs, what + " vs cpu(0)");
      }
    }
  }
}

}  // namespace

TEST_CASE("backend conformance: cpu(0) against the serial reference", "[conformance]") {
  leak_checked([] { run_cases(Device::cpu()); });
}

TEST_CASE("backend conformance: a GPU emulated on the CPU, through the device path", "[conformance]") {
  const bool hold = GENERATE(false, true);  // true: kernels held until a flush (backend.h)
  INFO("hold " << hold);
  ScopedEmulatedGpu emulated(hold);
  leak_checked([&] {
    run_cases(Device::gpu(0));
    CHECK(emulated.gpu().launches() > conformance_cases().size());  // it really ran them
  });
}

TEST_CASE("backend conformance: every real GPU against the reference and cpu(0)", "[gpu][conformance]") {
  const int gpus = gpus_or_skip("backend conformance on GPUs");
  for (int id = 0; id < gpus; ++id) {
    INFO("gpu(" << id << ")");
    leak_checked([&] { run_cases(Device::gpu(id)); });
  }
}
