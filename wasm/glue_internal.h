// Shared by the glue files (glue.cpp: arrays and the engine; glue_nn.cpp: autograd and nn): the
// array handle table and the error protocol of glue.h. JavaScript thread only, like glue.h.
#pragma once

#include <exception>
#include <new>
#include <string>

#include <emscripten/val.h>

#include "asyncnd/asyncnd.h"

namespace asyncnd {
namespace wasm {

// Stores the message that take_error() returns next. Allocates nothing.
void store_error(const char* message) noexcept;

// Runs f; on an exception stores its message and returns `fail` (no exception reaches JS). The
// handlers allocate nothing: they run most often when the heap is full.
template <class F, class R>
R guarded(F&& f, R fail) {
  try {
    return f();
  } catch (const std::bad_alloc&) {  // outside an array's storage, whose allocator names the op
    store_error("out of WebAssembly memory (std::bad_alloc): the 2 GiB heap is full");
  } catch (const std::exception& e) {
    store_error(e.what());
  } catch (...) {
    store_error("asyncnd: unknown C++ exception");
  }
  return fail;
}

// A new handle for `a` (a slot in the table).
int put(NDArray a);
// The array of a live handle; throws asyncnd::Error for a freed or unknown one.
const NDArray& get(int h);
// f() into a new handle, or -1 with the error stored.
template <class F>
int make(F&& f) {
  return guarded([&] { return put(f()); }, -1);
}
// A JS array of non-negative integers (and -1 when allowed) as a Shape; throws naming `op`.
Shape to_shape(const emscripten::val& v, const char* op, bool allow_minus_one = false);

}  // namespace wasm
}  // namespace asyncnd
