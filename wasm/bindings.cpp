// Embind bindings of the WebAssembly module: names only; the code is in glue.cpp (glue.h).
#include <emscripten/bind.h>

#include "glue.h"

EMSCRIPTEN_BINDINGS(asyncnd) {
  namespace w = asyncnd::wasm;
  using emscripten::function;
  function("init", &w::init);
  function("backendName", &w::backend_name);
  function("numWorkers", &w::num_workers);
  function("takeError", &w::take_error);
  function("hasError", &w::has_error);
  function("retain", &w::retain);
  function("release", &w::release);
  function("liveHandles", &w::live_handles);
  function("zeros", &w::zeros);
  function("ones", &w::ones);
  function("full", &w::full);
  function("arange", &w::arange);
  function("fromArray", &w::from_array);
  function("randomUniform", &w::random_uniform);
  function("randomNormal", &w::random_normal);
  function("seed", &w::seed);
  function("unary", &w::unary);
  function("binary", &w::binary);
  function("scalar", &w::scalar);
  function("dot", &w::dot);
  function("transpose", &w::transpose);
  function("reshape", &w::reshape);
  function("reduceAll", &w::reduce_all);
  function("reduce", &w::reduce);
  function("shape", &w::shape);
  function("size", &w::size);
  function("waitToRead", &w::wait_to_read);
  function("waitAll", &w::waitall);
  function("readPtr", &w::read_ptr);
  function("item", &w::item);
  function("toString", &w::to_string);
  function("requestRead", &w::request_read);
  function("stats", &w::stats);
  function("setMaxInflight", &w::set_max_inflight);
  function("profilerStart", &w::profiler_start);
  function("profilerStop", &w::profiler_stop);
  function("profilerEvents", &w::profiler_events);
  function("failingOp", &w::failing_op);
  function("gateOp", &w::gate_op);
  function("openGate", &w::open_gate);
  function("benchVars", &w::bench_vars);
  function("pushEmpty", &w::push_empty);
  function("benchVarsFree", &w::bench_vars_free);
  function("benchCoreAdds", &w::bench_core_adds);
}
