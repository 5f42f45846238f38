// The WebAssembly CPU backend: host memory inside the wasm heap and SGEMM on the engine's workers
// (which are pthreads, i.e. Web Workers). Used by backends.cpp; not part of the public API.
#pragma once

#include "asyncnd/detail/backend.h"

namespace asyncnd {
namespace detail {

// The process-wide WebAssembly CPU backend; made on first use, never destroyed. Thread safe.
Backend& wasm_cpu_backend();

}  // namespace detail
}  // namespace asyncnd
