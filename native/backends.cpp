// The backends built into the native library: the one file with backend #ifs (STYLE.md).
#include <vector>

#include "asyncnd/detail/backend.h"
#include "cpu/cpu_backend.h"

#ifndef ASYNCND_HAVE_CUDA
#define ASYNCND_HAVE_CUDA 0
#endif

namespace asyncnd {
namespace detail {

const std::vector<Backend*>& builtin_backends() {
  // Leaked on purpose, like the backends: usable by engine threads during exit.
  static const std::vector<Backend*>* backends = new std::vector<Backend*>{
      &cpu_backend(),
#if ASYNCND_HAVE_CUDA
      &cuda_backend(),  // native/cuda/ (not written yet)
#endif
  };
  return *backends;
}

}  // namespace detail
}  // namespace asyncnd
