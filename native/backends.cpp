// The backends built into the native library: the one file with backend #ifs, so that core/ and
// the public headers look the same whatever backends were built.
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
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

namespace {

// The whole file, or false when it cannot be read.
bool read_text(const std::string& path, std::string& out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

// This process's cgroup path for a v2 hierarchy ("0::/path") or a v1 controller's
// ("N:...memory...:/path" for "memory"), from /proc/self/cgroup; empty when not listed.
std::string cgroup_path(bool v2, const char* controller) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool match = v2 ? line.compare(0, a, "0") == 0 && controllers.empty()
                          : (',' + controllers + ',').find(std::string(",") + controller + ",") !=
                                std::string::npos;
    if (match) return line.substr(b + 1);
  }
  return {};
}

// The cgroup file of this process's group if present, else the hierarchy's root one (inside a
// container the group's own files are mounted at the root). `controller`: v1's, for the path.
bool read_cgroup(const std::string& root, const std::string& file, bool v2, const char* controller,
                 std::string& out) {
  const std::string p = cgroup_path(v2, controller);
  if (!p.empty() && p != "/" && read_text(root + p + "/" + file, out)) return true;
  return read_text(root + "/" + file, out);
}

}  // namespace

}  // namespace detail

MemoryLimit program_memory_limit() {
  std::uint64_t physical = 0;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) physical = static_cast<std::uint64_t>(pages) * page;
  std::string v2, v1;
  const bool has_v2 = detail::read_cgroup("/sys/fs/cgroup", "memory.max", true, "", v2);
  const bool has_v1 =
      detail::read_cgroup("/sys/fs/cgroup/memory", "memory.limit_in_bytes", false, "memory", v1);
  return detail::memory_limit_from(has_v2 ? v2.c_str() : nullptr, has_v1 ? v1.c_str() : nullptr,
                                   physical);
}

CpuLimit program_cpu_limit() {
  int affinity = 0;
  // The mask's size grows until the kernel's fits (more than 1024 CPUs: EINVAL with the default).
  for (int n = 1024; n <= (1 << 20) && affinity == 0; n *= 4) {
    cpu_set_t* set = CPU_ALLOC(static_cast<std::size_t>(n));
    if (!set) break;
    const std::size_t size = CPU_ALLOC_SIZE(static_cast<std::size_t>(n));
    const bool got = ::sched_getaffinity(0, size, set) == 0;
    const bool too_small = !got && errno == EINVAL;
    if (got) affinity = CPU_COUNT_S(size, set);
    CPU_FREE(set);
    if (!got && !too_small) break;
  }
  std::string v2, quota, period;
  const bool has_v2 = detail::read_cgroup("/sys/fs/cgroup", "cpu.max", true, "", v2);
  bool has_v1 = false;
  for (const char* root : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    has_v1 = detail::read_cgroup(root, "cpu.cfs_quota_us", false, "cpu", quota) &&
             detail::read_cgroup(root, "cpu.cfs_period_us", false, "cpu", period);
    if (has_v1) break;
  }
  const double q = detail::cpu_quota_from(has_v2 ? v2.c_str() : nullptr,
                                          has_v1 ? quota.c_str() : nullptr,
                                          has_v1 ? period.c_str() : nullptr);
  return detail::cpu_limit_from(static_cast<int>(std::thread::hardware_concurrency()), affinity, q);
}

}  // namespace asyncnd
