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

// The directories of this process's cgroup and its ancestors, for the v2 hierarchy and for
// v1's `v1_controller`, wherever they are mounted (detail::cgroup_dirs_from); empty where the
// kernel's files cannot be read.
struct GroupDirs {
  std::vector<std::string> v2, v1;
};
GroupDirs cgroup_dirs(const char* v1_controller) {
  GroupDirs d;
  std::string mountinfo, groups;
  if (read_text("/proc/self/mountinfo", mountinfo) && read_text("/proc/self/cgroup", groups)) {
    d.v2 = detail::cgroup_dirs_from(mountinfo, groups, nullptr);
    d.v1 = detail::cgroup_dirs_from(mountinfo, groups, v1_controller);
  }
  return d;
}

}  // namespace

}  // namespace detail

// The smallest limit along the process's groups (v2 memory.max, v1 memory.limit_in_bytes), else
// physical memory.
MemoryLimit program_memory_limit() {
  std::uint64_t physical = 0;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) physical = static_cast<std::uint64_t>(pages) * page;
  MemoryLimit m = detail::memory_limit_from(nullptr, nullptr, physical);
  std::string text;
  auto narrow = [&](const MemoryLimit& l) {
    if (l.source == BoundSource::kCgroup && (m.source != BoundSource::kCgroup || l.bytes < m.bytes))
      m = l;
  };
  const detail::GroupDirs groups = detail::cgroup_dirs("memory");
  for (const std::string& dir : groups.v2)
    if (detail::read_text(dir + "/memory.max", text))
      narrow(detail::memory_limit_from(text.c_str(), nullptr, physical));
  for (const std::string& dir : groups.v1)
    if (detail::read_text(dir + "/memory.limit_in_bytes", text))
      narrow(detail::memory_limit_from(nullptr, text.c_str(), physical));
  return m;
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
  // The smallest quota along the process's groups (v2 cpu.max; v1 cpu.cfs_quota_us over
  // cpu.cfs_period_us).
  double q = 0;
  auto narrow = [&q](double level) {
    if (level > 0 && (q == 0 || level < q)) q = level;
  };
  std::string text, period;
  const detail::GroupDirs groups = detail::cgroup_dirs("cpu");
  for (const std::string& dir : groups.v2)
    if (detail::read_text(dir + "/cpu.max", text))
      narrow(detail::cpu_quota_from(text.c_str(), nullptr, nullptr));
  for (const std::string& dir : groups.v1)
    if (detail::read_text(dir + "/cpu.cfs_quota_us", text) &&
        detail::read_text(dir + "/cpu.cfs_period_us", period))
      narrow(detail::cpu_quota_from(nullptr, text.c_str(), period.c_str()));
  return detail::cpu_limit_from(static_cast<int>(std::thread::hardware_concurrency()), affinity, q);
}

}  // namespace asyncnd
