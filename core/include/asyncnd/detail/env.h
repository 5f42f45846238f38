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

// The BLAS thread count a user set in OpenBLAS's own variables, read as OpenBLAS reads them: the
// first of OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS and OMP_NUM_THREADS whose value starts with a
// positive number (atoi); 0 when none does (OpenBLAS ignores such values, and so do we). They are
// OpenBLAS's, so they do not follow parse_env_uint's rule. The CPU backend takes this count after
// ASYNCND_BLAS_THREADS and before the CPUs this process may use; dist::init leaves it alone.
int openblas_threads_in_env();

}  // namespace detail
}  // namespace asyncnd
