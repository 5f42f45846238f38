// Hooks for the package's own tests, linked only into the build tree's hooks module
// (build-wasm/hooks/, see wasm/CMakeLists.txt), never into dist/: an op that fails when it runs,
// and a gate that keeps an op pending until the test opens it. glue_testing.js wraps them as
// nd._testing. The error protocol and the JavaScript-thread rule of glue.h apply.
#include <emscripten/bind.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "asyncnd/asyncnd.h"
#include "glue_internal.h"

namespace asyncnd {
namespace wasm {
namespace {

using emscripten::val;

// Gates (gate_op): completed by the JS thread, armed by a worker; either may come first.
struct Gate {
  bool opened = false, armed = false;
  float value = 0;
  float* data = nullptr;
  std::int64_t n = 0;
  Completion completion;
};
std::mutex g_gates_mu;
std::map<int, Gate> g_gates;

// Caller holds g_gates_mu; the gate has been opened and armed.
void finish_gate(std::map<int, Gate>::iterator it) {
  Gate& g = it->second;
  std::fill(g.data, g.data + g.n, g.value);
  Completion c = std::move(g.completion);
  g_gates.erase(it);
  c.done();
}

// An op that reads h and fails at run time with `message` (its output is poisoned).
int failing_op(int h, std::string message) {
  return make([&] {
    const NDArray& a = get(h);
    NDArray out = nd::empty(a.shape(), a.device());
    PushOptions opts;
    opts.name = "failing_op";
    engine().push([message] { throw Error(message); }, {a.var()}, {out.var()}, opts);
    return out;
  });
}

// A gate: an array of `shape` whose computing op (asynchronous: push_async) finishes only when
// open_gate(id, value) fills it with `value`. Returns the array's handle; the gate id is the
// same number. For tests that need an op to stay pending for as long as they like.
int gate_op(val shape) {
  return guarded(
      [&] {
        NDArray out = nd::empty(to_shape(shape, "gate_op"));
        float* data = const_cast<float*>(out.unsafe_data());
        const std::int64_t n = out.size();
        const int h = put(out);
        {
          std::lock_guard<std::mutex> lk(g_gates_mu);
          Gate& g = g_gates[h];
          g.data = data;
          g.n = n;
        }
        PushOptions opts;
        opts.name = "gate";
        engine().push_async(
            [h](Completion c) {
              std::lock_guard<std::mutex> lk(g_gates_mu);
              auto it = g_gates.find(h);
              it->second.completion = std::move(c);
              it->second.armed = true;
              if (it->second.opened) finish_gate(it);
            },
            {}, {out.var()}, opts);
        return h;
      },
      -1);
}

int open_gate(int id, float value) {
  return guarded(
      [&] {
        std::lock_guard<std::mutex> lk(g_gates_mu);
        auto it = g_gates.find(id);
        if (it == g_gates.end() || it->second.opened) {
          throw Error("open_gate: no closed gate " + std::to_string(id));
        }
        it->second.opened = true;
        it->second.value = value;
        if (it->second.armed) finish_gate(it);
        return 0;
      },
      -1);
}

}  // namespace
}  // namespace wasm
}  // namespace asyncnd

EMSCRIPTEN_BINDINGS(asyncnd_testing) {
  namespace w = asyncnd::wasm;
  using emscripten::function;
  function("failingOp", &w::failing_op);
  function("gateOp", &w::gate_op);
  function("openGate", &w::open_gate);
}
