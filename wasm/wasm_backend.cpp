// The WebAssembly CPU backend: 64-byte aligned blocks from the wasm heap (malloc is thread safe
// under -pthread) and our own packed SIMD GEMM, on the engine worker that runs the op and the idle
// ones. There is no BLAS in WebAssembly.
#include "wasm_backend.h"

#include <cstdlib>
#include <string>

#include "asyncnd/engine.h"
#include "asyncnd/error.h"
#include "kernels/host_kernels.h"

namespace asyncnd {
namespace detail {
namespace {

constexpr std::size_t kAlign = 64;

class WasmCpuBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCPU; }
  // This file is compiled once per module: with -mrelaxed-simd for the relaxed one.
  std::string name() const override {
#ifdef __wasm_relaxed_simd__
    return "cpu (WebAssembly, " + std::to_string(kSimdBits) + "-bit SIMD + relaxed FMA, worker threads)";
#else
    return "cpu (WebAssembly, " + std::to_string(kSimdBits) + "-bit SIMD, worker threads)";
#endif
  }
  int device_count() const override { return 1; }

  // A zero-size request still gets a unique block, as on the native backend.
  void* alloc(int /*device_id*/, std::size_t bytes) override {
    const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
    if (!p) {
      throw Error("alloc: out of WebAssembly memory for " + std::to_string(bytes) +
                  " bytes (the module's heap is limited to 2 GiB)");
    }
    return p;
  }
  void free(int /*device_id*/, void* p, std::size_t /*bytes*/) noexcept override { std::free(p); }

  // Every op's kernel: core's templated and SIMD128 loops, and for GEMM the packed SIMD GEMM
  // (core/src/kernels/portable_gemm.cpp), split across the engine's workers. Runs on the calling worker.
  void launch(int /*device_id*/, const KernelCall& c, Completion /*done*/) override {
    if (c.kind != KernelCall::Kind::kGemm) return kernels::run_host_kernel(c);
    const KernelCall::Gemm& g = c.gemm;
    if (g.m <= 0 || g.n <= 0) return;
    portable_sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, c.a, g.lda, c.b, g.ldb, g.beta,
                   c.out, g.ldc);
  }

 private:
#ifdef __wasm_simd128__
  static constexpr int kSimdBits = 128;
#else
  static constexpr int kSimdBits = 0;
#endif
};

}  // namespace

Backend& wasm_cpu_backend() {
  // Leaked on purpose, like the native backend: workers may free arrays during exit.
  static WasmCpuBackend* backend = new WasmCpuBackend();
  return *backend;
}

}  // namespace detail

CpuGemm cpu_gemm() {
#ifdef __wasm_relaxed_simd__
  return {"portable (wasm SIMD128 + relaxed madd)",
          "the WebAssembly build has no BLAS: core's packed GEMM, 6x8 f32x4.relaxed_madd micro-kernel"};
#else
  return {"portable (wasm SIMD128)", "the WebAssembly build has no BLAS: core's packed SIMD128 GEMM"};
#endif
}

}  // namespace asyncnd
