// The backends built into the native library: the one file with backend #ifs (STYLE.md).
#include <vector>

#include "asyncnd/detail/backend.h"
#include "cpu/cpu_backend.h"

#ifndef ASYNCND_HAVE_CUDA
#error "the build defines ASYNCND_HAVE_CUDA (0 or 1) on this target"
#endif
#if ASYNCND_HAVE_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace asyncnd {
namespace detail {

const std::vector<Backend*>& builtin_backends() {
  // Leaked on purpose, like the backends: usable by engine threads during exit.
  static const std::vector<Backend*>* backends = new std::vector<Backend*>{
      &cpu_backend(),
#if ASYNCND_HAVE_CUDA
      &cuda_backend(),  // native/cuda/: device_count() is 0 without a GPU or driver
#endif
  };
  return *backends;
}

}  // namespace detail
}  // namespace asyncnd
