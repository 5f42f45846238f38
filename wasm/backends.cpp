// The backends built into the WebAssembly module: the worker-thread CPU backend only (no GPU in
// WebAssembly). The wasm counterpart of native/backends.cpp.
#include <emscripten.h>
#include <emscripten/heap.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "asyncnd/detail/backend.h"
#include "wasm_backend.h"

namespace asyncnd {
namespace detail {

namespace {

// In a browser, each pthread's clock is performance.now() minus a drift that Emscripten 3.1.6
// measures once from a message's timestamp, so threads disagree by that message's delay
// (bench/notes/constants.md, "WebAssembly: exceptions and clocks"), and the profiler's timeline
// showed ops starting before the ops they read had finished. performance.timeOrigin +
// performance.now() is the same clock in every thread; a fixed epoch (2023-11-14) is subtracted
// first to keep double precision (~8 ns). Node's clock (process.hrtime) is already shared by its
// threads: is_browser() leaves it alone.
EM_JS(double, asyncnd_shared_clock_ms, (), {
  return (performance.timeOrigin - 1.7e12) + performance.now();
});
EM_JS(int, asyncnd_is_browser, (), {
  return (typeof process === 'undefined' || !process.versions || !process.versions.node) &&
         typeof performance !== 'undefined' && performance.timeOrigin !== undefined ? 1 : 0;
});

std::int64_t shared_clock_ns() { return static_cast<std::int64_t>(asyncnd_shared_clock_ms() * 1e6); }

}  // namespace

const std::vector<Backend*>& builtin_backends() {
  static const std::vector<Backend*>* backends = [] {
    if (asyncnd_is_browser()) set_profiler_clock(&shared_clock_ns);
    return new std::vector<Backend*>{&wasm_cpu_backend()};
  }();
  return *backends;
}

}  // namespace detail

// The module's maximum heap (-sMAXIMUM_MEMORY in wasm/CMakeLists.txt): queued work and everything
// else share it, whatever the machine has.
MemoryLimit program_memory_limit() {
  return {static_cast<std::uint64_t>(emscripten_get_heap_max()), BoundSource::kWasmHeap};
}

// No affinity masks or cgroups to read here: the browser's or Node's count of hardware threads.
CpuLimit program_cpu_limit() {
  return detail::cpu_limit_from(static_cast<int>(std::thread::hardware_concurrency()), 0, 0);
}

}  // namespace asyncnd
