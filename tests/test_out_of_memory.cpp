// An op that fails when memory has run out: the engine's handling of the failure (its message, its
// list of failures) must not need memory it cannot get. An exception there escaped the worker and
// ended the process; in WebAssembly, where the 2 GiB heap fills, it did (found by an audit).
//
// The test binary replaces the global operator new with one that fails, on one thread, while a
// flag is set: an op sets it and throws, and the flag is cleared by the destructor of something
// its closure captured, which runs after the engine handled the failure (EngineImpl::execute).
// Sanitizer builds keep their own operator new: there the test says SKIPPED.
#include <catch2/catch.hpp>

#include <asyncnd/asyncnd.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "test_util.h"

#ifndef ASYNCND_TEST_SANITIZED
namespace {
thread_local bool t_fail_allocations = false;
}  // namespace

void* operator new(std::size_t n) {
  if (t_fail_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#endif

TEST_CASE("an op failing with no memory left fails its outputs, and the engine goes on",
          "[engine][errors]") {
#ifdef ASYNCND_TEST_SANITIZED
  SUCCEED("SKIPPED: sanitizer builds keep their own operator new");
#else
  using namespace asyncnd;
  // Clears the flag when the op's closure is destroyed: after the failure was handled.
  struct Restore {
    ~Restore() { t_fail_allocations = false; }
  };
  NDArray kept = nd::full({3}, 2.0f);
  NDArray out = nd::zeros({3});
  nd::waitall();
  // The closure holds the only reference, so Restore goes with it.
  engine().push([restore = std::make_shared<Restore>()] {
    std::runtime_error thrown("the kernel's own allocation failed");  // made while we may
    t_fail_allocations = true;  // this worker's allocations fail from here on
    throw thrown;
  }, {}, {out.var()}, PushOptions{Device{}, 0, "starved", 0});
  CHECK_THROWS_WITH(out.wait_to_read(),
                    Catch::Contains("no memory left to say which or why (out of memory)"));
  CHECK_NOTHROW(nd::waitall());  // reported once, by the read
  // The engine goes on; other arrays keep their values.
  CHECK(kept.to_vector() == std::vector<float>{2, 2, 2});
  CHECK((kept + 1.0f).to_vector() == std::vector<float>{3, 3, 3});
#endif
}
