// The WebAssembly CPU backend: 64-byte aligned blocks from the wasm heap (malloc is thread safe
// under -pthread) and our own packed SIMD GEMM, on the engine worker that runs the op and the idle
// ones. There is no BLAS in WebAssembly.
#include "wasm_backend.h"

#include <cstdlib>
#include <string>

#include "asyncnd/engine.h"
#include "asyncnd/error.h"

namespace asyncnd {
namespace detail {
namespace {

constexpr std::size_t kAlign = 64;

class WasmCpuBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::kCPU; }
  std::string name() const override {
    return "cpu (WebAssembly, " + std::to_string(kSimdBits) + "-bit SIMD, worker threads)";
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

  void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
             float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
             float beta, float* c, std::int64_t ldc) override {
    // Packed SIMD128 GEMM (core/src/portable_gemm.cpp), split across the engine's workers.
    portable_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
  return {"portable (wasm SIMD128)", "the WebAssembly build has no BLAS: core's packed SIMD128 GEMM"};
}

}  // namespace asyncnd
