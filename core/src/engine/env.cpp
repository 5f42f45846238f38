// parse_env_uint: the one rule for the library's numeric environment variables; and OpenBLAS's
// thread-count variables, read its way.
#include "asyncnd/detail/env.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "asyncnd/error.h"

namespace asyncnd {
namespace detail {

std::uint64_t parse_env_uint(const char* name, const char* value, std::uint64_t lo,
                             std::uint64_t hi, const char* what) {
  // Digits only: strtoull alone would take "-1" (as a huge number) and " 5".
  bool digits = *value != '\0';
  for (const char* c = value; *c != '\0'; ++c) digits = digits && *c >= '0' && *c <= '9';
  errno = 0;
  const unsigned long long v = digits ? std::strtoull(value, nullptr, 10) : 0;
  if (!digits || errno == ERANGE || v < lo || v > hi) {
    throw Error(std::string(name) + ": expected " + what + " from " + std::to_string(lo) +
                " to " + std::to_string(hi) + ", got '" + value + "'");
  }
  return v;
}

int openblas_threads_in_env() {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    const int n = v ? std::atoi(v) : 0;  // OpenBLAS's readenv_atoi: "4,2" (OpenMP's list) is 4
    if (n > 0) return n;
  }
  return 0;
}

}  // namespace detail
}  // namespace asyncnd
