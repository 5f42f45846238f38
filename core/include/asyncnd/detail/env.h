// Reading the library's numeric environment variables (ASYNCND_CPU_WORKERS, ASYNCND_BLAS_THREADS,
// ASYNCND_CPU_CACHE_MB) with one rule: a bad value is an error, never a silent default.
#pragma once

#include <cstdint>

namespace asyncnd {
namespace detail {

// `value` (of the variable `name`) as a whole number in [lo, hi]: digits only, no sign or spaces.
// Otherwise throws asyncnd::Error("<name>: expected <what> from <lo> to <hi>, got '<value>'").
std::uint64_t parse_env_uint(const char* name, const char* value, std::uint64_t lo,
                             std::uint64_t hi, const char* what);

}  // namespace detail
}  // namespace asyncnd
