// The backends built into the WebAssembly module: the worker-thread CPU backend only (no GPU in
// WebAssembly). The wasm counterpart of native/backends.cpp.
#include <vector>

#include "asyncnd/detail/backend.h"
#include "wasm_backend.h"

namespace asyncnd {
namespace detail {

const std::vector<Backend*>& builtin_backends() {
  static const std::vector<Backend*>* backends =
      new std::vector<Backend*>{&wasm_cpu_backend()};
  return *backends;
}

}  // namespace detail
}  // namespace asyncnd
