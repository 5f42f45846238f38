// The CPU's kernels: run_host_kernel runs one KernelCall on the calling thread (an engine worker)
// through the templated and SIMD loops of elementwise.h and reduce.h, split across the CPU workers
// with Engine::parallel_for. Shared by the CPU backends (native/cpu, wasm/), which add the GEMM.
#pragma once

#include "asyncnd/detail/kernel_call.h"

namespace asyncnd {
namespace kernels {

// Runs `call` to completion on host memory. Kind::kGemm is the backend's (it throws here), and
// Kind::kCopy copies between two host addresses. Throws asyncnd::Error for a call that no op
// describes (a unary function in a binary form, say).
void run_host_kernel(const detail::KernelCall& call);

// Elements per parallel_for chunk of a cheap map: large enough that a hand-off to another worker
// is small next to the work, small enough to split 1M-element ops (bench/notes/constants.md,
// "Hand-offs and grain sizes").
// Heavy maps (the op table's Cost) use a quarter of it.
constexpr std::int64_t kGrain = 32768;

// The Philox fill of [begin, end) (philox.h), compiled for this CPU's widest vectors
// (host_random.cpp).
void random_fill(std::uint64_t key, std::uint64_t stream, detail::RandomDist dist, float a,
                 float b, float* out, std::int64_t begin, std::int64_t end);

}  // namespace kernels
}  // namespace asyncnd
