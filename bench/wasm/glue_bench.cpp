// The WebAssembly benchmark's hooks (bench.mjs), linked only into the build tree's hooks module
// (build-wasm/hooks/, see wasm/CMakeLists.txt), never into the package: a pool of engine
// variables with an empty op between two of them (the cost of one push through Embind), and a
// loop of tiny ops inside C++ (the core's cost without the JS wrapper). glue_bench.js wraps them
// as nd._bench. The error protocol and the JavaScript-thread rule of wasm/glue.h apply.
#include <emscripten/bind.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "asyncnd/asyncnd.h"
#include "glue_internal.h"

namespace asyncnd {
namespace wasm {
namespace {

std::vector<Var> g_bench_vars;  // JavaScript thread only

// A pool of n engine variables (replacing the previous one).
int bench_vars(int n) {
  return guarded(
      [&] {
        if (n < 1) throw Error("bench_vars: n must be at least 1");
        g_bench_vars.clear();
        for (int i = 0; i < n; ++i) g_bench_vars.push_back(engine().new_var());
        return n;
      },
      -1);
}

// An empty op that reads pool[r] and writes pool[w].
int push_empty(int r, int w) {
  // No bounds check beyond the vector's: a benchmark hook, called with indices it made.
  return guarded(
      [&] {
        engine().push([] {}, {g_bench_vars.at(static_cast<std::size_t>(r))},
                      {g_bench_vars.at(static_cast<std::size_t>(w))});
        return 0;
      },
      -1);
}

int bench_vars_free() {
  return guarded(
      [] {
        for (Var& v : g_bench_vars) engine().delete_var(std::move(v));
        g_bench_vars.clear();
        return 0;
      },
      -1);
}

// n times (a + 1, then drop the result) inside C++: the core's cost of a tiny op without the JS
// wrapper and Embind (the benchmark compares it with the same loop written in JavaScript).
int bench_core_adds(int h, int n) {
  return guarded(
      [&] {
        const NDArray& a = get(h);
        for (int i = 0; i < n; ++i) NDArray y = a + 1.0f;
        return 0;
      },
      -1);
}

}  // namespace
}  // namespace wasm
}  // namespace asyncnd

EMSCRIPTEN_BINDINGS(asyncnd_bench) {
  namespace w = asyncnd::wasm;
  using emscripten::function;
  function("benchVars", &w::bench_vars);
  function("pushEmpty", &w::push_empty);
  function("benchVarsFree", &w::bench_vars_free);
  function("benchCoreAdds", &w::bench_core_adds);
}
