// program_cpu_limit(): the CPUs the defaults count (engine workers, BLAS threads, our GEMMs'
// threads), narrowed by the affinity mask and a cgroup's CPU quota. The parsers on texts, then
// this binary run again with one CPU in its mask and, where this test may make one, in a cgroup
// with a CPU quota.
#include <catch2/catch.hpp>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "asyncnd/asyncnd.h"
#include "asyncnd/detail/backend.h"
#include "cpu/cpu_backend.h"
#include "test_util.h"

using asyncnd::CpuLimit;
using asyncnd::program_cpu_limit;
using asyncnd::detail::cgroup_dirs_from;
using asyncnd::detail::cpu_limit_from;
using asyncnd::detail::cpu_quota_from;
using asyncnd_test::line_after;
using asyncnd_test::run_child;

// Children start without the thread counts a user may have set: ours and OpenBLAS's.
const std::string kNoCounts =
    "-u ASYNCND_BLAS_THREADS -u ASYNCND_CPU_WORKERS -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS "
    "-u OMP_NUM_THREADS";

TEST_CASE("cpu limit: the quota from the cgroup files' texts", "[cpu-limit]") {
  // v2 cpu.max
  CHECK(cpu_quota_from("200000 100000\n", nullptr, nullptr) == 2.0);
  CHECK(cpu_quota_from("150000 100000", nullptr, nullptr) == 1.5);
  CHECK(cpu_quota_from("50000 100000\n", nullptr, nullptr) == 0.5);
  CHECK(cpu_quota_from("max 100000\n", nullptr, nullptr) == 0);
  // v1 cpu.cfs_quota_us and cpu.cfs_period_us
  CHECK(cpu_quota_from(nullptr, "300000\n", "100000\n") == 3.0);
  CHECK(cpu_quota_from(nullptr, "-1\n", "100000\n") == 0);
  CHECK(cpu_quota_from(nullptr, "250000\n", nullptr) == 0);
  // v2 decides when its file parses, "max" included; v1 is read where v2's file does not parse.
  CHECK(cpu_quota_from("max 100000\n", "100000\n", "100000\n") == 0);
  CHECK(cpu_quota_from("", "100000\n", "100000\n") == 1.0);
  // Anything else is no quota: a zero period, signs, trailing words, too many digits.
  for (const char* bad : {"100000 0", "-5 100000", "100000 100000 x", "12abc 100000", "",
                          "99999999999999999999999 100000"}) {
    INFO(bad);
    CHECK(cpu_quota_from(bad, nullptr, nullptr) == 0);
  }
  CHECK(cpu_quota_from(nullptr, "100000 x", "100000") == 0);
}

TEST_CASE("cpu limit: the cgroup directories from mountinfo and /proc/self/cgroup", "[cpu-limit]") {
  using Dirs = std::vector<std::string>;
  // Debian 12, systemd, pure v2: the session's group, its slices, the root.
  const std::string pure_v2 =
      "25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
      "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
      "rw,nsdelegate,memory_recursiveprot\n";
  const std::string session = "0::/user.slice/user-1000.slice/session-2.scope\n";
  CHECK(cgroup_dirs_from(pure_v2, session, nullptr) ==
        Dirs{"/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope",
             "/sys/fs/cgroup/user.slice/user-1000.slice", "/sys/fs/cgroup/user.slice",
             "/sys/fs/cgroup"});
  CHECK(cgroup_dirs_from(pure_v2, session, "cpu").empty());  // no v1 hierarchy
  // Hybrid, as on this project's VMs: v1 controllers, v2 at /sys/fs/cgroup/unified (where a
  // controller moved to v2 is found too). cpu and cpuacct mounted together, as systemd does.
  const std::string hybrid =
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const std::string groups = "4:memory:/jobs/a\n2:cpu,cpuacct:/jobs/b\n1:name=systemd:/\n0::/u\n";
  CHECK(cgroup_dirs_from(hybrid, groups, "cpu") ==
        Dirs{"/sys/fs/cgroup/cpu,cpuacct/jobs/b", "/sys/fs/cgroup/cpu,cpuacct/jobs",
             "/sys/fs/cgroup/cpu,cpuacct"});
  CHECK(cgroup_dirs_from(hybrid, groups, "cpuacct") == cgroup_dirs_from(hybrid, groups, "cpu"));
  CHECK(cgroup_dirs_from(hybrid, groups, "memory") ==
        Dirs{"/sys/fs/cgroup/memory/jobs/a", "/sys/fs/cgroup/memory/jobs",
             "/sys/fs/cgroup/memory"});
  CHECK(cgroup_dirs_from(hybrid, groups, nullptr) ==
        Dirs{"/sys/fs/cgroup/unified/u", "/sys/fs/cgroup/unified"});
  CHECK(cgroup_dirs_from(hybrid, groups, "pids").empty());  // not mounted
  // "name=systemd" is no controller named "systemd", nor a v2 line.
  CHECK(cgroup_dirs_from(hybrid, groups, "systemd").empty());
  // A Docker container without a cgroup namespace: the mount's root is the container's group,
  // whose files sit at the mount point.
  const std::string docker =
      "700 690 0:29 /docker/4f2a /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu\n";
  CHECK(cgroup_dirs_from(docker, "5:cpu:/docker/4f2a\n", "cpu") == Dirs{"/sys/fs/cgroup/cpu"});
  CHECK(cgroup_dirs_from(docker, "5:cpu:/docker/4f2a/job\n", "cpu") ==
        Dirs{"/sys/fs/cgroup/cpu/job", "/sys/fs/cgroup/cpu"});
  // A group outside the mounted subtree (or a cgroup namespace's root: "/.."): the mount point.
  CHECK(cgroup_dirs_from(docker, "5:cpu:/docker/4f2b\n", "cpu") == Dirs{"/sys/fs/cgroup/cpu"});
  CHECK(cgroup_dirs_from(docker, "5:cpu:/docker/4f2abc\n", "cpu") == Dirs{"/sys/fs/cgroup/cpu"});
  CHECK(cgroup_dirs_from(pure_v2, "0::/../../init.scope\n", nullptr) == Dirs{"/sys/fs/cgroup"});
  // The kernel's octal escapes in a mount point, and a hierarchy mounted twice.
  const std::string twice =
      "50 31 0:40 / /mnt/my\\040groups rw - cgroup2 none rw\n"
      "51 31 0:40 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  CHECK(cgroup_dirs_from(twice, "0::/a\n", nullptr) ==
        Dirs{"/mnt/my groups/a", "/mnt/my groups", "/sys/fs/cgroup/a", "/sys/fs/cgroup"});
  // Texts that are not these files: nothing.
  CHECK(cgroup_dirs_from("", session, nullptr).empty());
  CHECK(cgroup_dirs_from(pure_v2, "", nullptr).empty());
  CHECK(cgroup_dirs_from("garbage - cgroup2\n", session, nullptr).empty());
}

TEST_CASE("cpu limit: the smallest of online CPUs, affinity mask and quota", "[cpu-limit]") {
  CpuLimit l = cpu_limit_from(64, 64, 0);
  CHECK(l.cpus == 64);
  CHECK(std::string(l.source) == "online");
  l = cpu_limit_from(64, 8, 0);  // taskset -c 0-7
  CHECK(l.cpus == 8);
  CHECK(std::string(l.source) == "affinity");
  l = cpu_limit_from(64, 64, 2.0);  // a container with --cpus=2
  CHECK(l.cpus == 2);
  CHECK(l.quota == 2.0);
  CHECK(std::string(l.source) == "cgroup");
  l = cpu_limit_from(64, 8, 1.5);  // rounded up: 2
  CHECK(l.cpus == 2);
  CHECK(std::string(l.source) == "cgroup");
  l = cpu_limit_from(64, 4, 6.0);  // the mask is narrower than the quota
  CHECK(l.cpus == 4);
  CHECK(std::string(l.source) == "affinity");
  l = cpu_limit_from(4, 0, 0.2);  // a fifth of a CPU still runs one thread
  CHECK(l.cpus == 1);
  l = cpu_limit_from(0, 0, 0);  // nothing known: one
  CHECK(l.cpus == 1);
  CHECK(l.affinity == 0);
  l = cpu_limit_from(2, 2, 2.0);  // a quota as wide as the machine narrows nothing
  CHECK(l.cpus == 2);
  CHECK(std::string(l.source) == "online");
}

// Run by the tests below in a child process: what a fresh process counts and starts.
TEST_CASE("cpu limit: report (child)", "[.][cpu-limit-child]") {
  const CpuLimit l = program_cpu_limit();
  std::printf("cpus=%d\nonline=%d\naffinity=%d\nquota=%g\nsource=%s\n", l.cpus, l.online,
              l.affinity, l.quota, l.source);
  std::printf("workers=%d\nblas=%d\n", asyncnd::engine().num_workers(),
              asyncnd::detail::cpu_blas_threads());
  const asyncnd::MemoryLimit m = asyncnd::program_memory_limit();
  std::printf("memory=%llu\nmemory_source=%s\n", static_cast<unsigned long long>(m.bytes),
              asyncnd::bound_source_name(m.source));
}

TEST_CASE("cpu limit: this process", "[cpu-limit]") {
  const CpuLimit l = program_cpu_limit();
  CHECK(l.online == static_cast<int>(std::thread::hardware_concurrency()));
  cpu_set_t mask;
  REQUIRE(::sched_getaffinity(0, sizeof mask, &mask) == 0);
  CHECK(l.affinity == CPU_COUNT(&mask));
  CHECK(l.cpus >= 1);
  CHECK(l.cpus <= l.online);
}

TEST_CASE("cpu limit: one CPU in the affinity mask counts one, and sizes the threads",
          "[cpu-limit]") {
  cpu_set_t all;
  REQUIRE(::sched_getaffinity(0, sizeof all, &all) == 0);
  if (CPU_COUNT(&all) < 2) {
    SUCCEED("SKIPPED: this process may run on one CPU only, so no mask can be narrower");
    return;
  }
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  // The child inherits this thread's mask; the engine's threads keep theirs.
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  int status = 0, status_env = 0;
  const std::string out =
      run_child(kNoCounts, "cpu limit: report (child)",
                &status);
  const std::string out_env =
      run_child(kNoCounts + " ASYNCND_BLAS_THREADS=3 ASYNCND_CPU_WORKERS=2",
                "cpu limit: report (child)",
                &status_env);
  ::sched_setaffinity(0, sizeof all, &all);
  INFO(out);
  REQUIRE(status == 0);
  CHECK(line_after(out, "cpus=") == "1");
  CHECK(line_after(out, "affinity=") == "1");
  CHECK(line_after(out, "source=") == "affinity");
  CHECK(line_after(out, "online=") == std::to_string(std::thread::hardware_concurrency()));
  CHECK(line_after(out, "workers=") == "1");
  CHECK(line_after(out, "blas=") == "1");
  // The user's counts still win.
  INFO(out_env);
  REQUIRE(status_env == 0);
  CHECK(line_after(out_env, "cpus=") == "1");
  CHECK(line_after(out_env, "workers=") == "2");
  CHECK(line_after(out_env, "blas=") == "3");
}

namespace {

// A cgroup group made for a test, with a group inside it, under the first mount of the hierarchy
// (found in /proc/self/mountinfo, as the library finds it) where this process may make one: v1's
// `controller`, or the v2 hierarchy where it offers `controller` (then enabled for the two
// groups: the root's cgroup.subtree_control too, put back after). Removed, inner first, when the
// test ends. valid() is false where that cannot be done here; why() says why.
class TestGroup {
 public:
  TestGroup(const char* controller, bool v2) : controller_(controller) {
    const std::string mountinfo = read("/proc/self/mountinfo");
    const std::string hierarchy = v2 ? std::string("cgroup v2 hierarchy offering ") + controller
                                     : std::string("cgroup v1 ") + controller + " controller";
    // Each mount point: the library's directories for a process at the hierarchy's root.
    const std::vector<std::string> mounts =
        v2 ? cgroup_dirs_from(mountinfo, "0::/\n", nullptr)
           : cgroup_dirs_from(mountinfo, std::string("1:") + controller + ":/\n", controller);
    why_ = "no " + hierarchy + " mounted here";
    for (const std::string& root : mounts) {
      if (::access(root.c_str(), W_OK) != 0) {
        why_ = "the " + hierarchy + " at " + root + " is not writable by this process";
        continue;
      }
      if (v2 && !lists(read(root + "/cgroup.controllers"), controller)) {
        why_ = "the cgroup v2 hierarchy at " + root + " does not offer " + controller +
               " (it is v1's here)";
        continue;
      }
      root_ = root;
      break;
    }
    if (root_.empty()) return;
    if (v2 && !lists(read(root_ + "/cgroup.subtree_control"), controller)) {
      if (!write(root_ + "/cgroup.subtree_control", std::string("+") + controller)) {
        why_ = "cannot enable " + std::string(controller) + " at " + root_;
        return;
      }
      enabled_at_root_ = true;
    }
    outer_ = root_ + "/asyncnd-test-" + std::to_string(::getpid());
    inner_ = outer_ + "/inner";
    if (::mkdir(outer_.c_str(), 0755) != 0 ||
        (v2 && !write(outer_ + "/cgroup.subtree_control", std::string("+") + controller)) ||
        ::mkdir(inner_.c_str(), 0755) != 0) {
      why_ = "cannot make " + inner_;
      return;
    }
    made_ = true;
  }
  ~TestGroup() {
    if (!outer_.empty()) {
      ::rmdir(inner_.c_str());  // after the children have exited: the groups are empty
      ::rmdir(outer_.c_str());
    }
    // The kernel refuses while the removed groups' state is still being freed: a moment.
    for (int i = 0; enabled_at_root_ && i < 50; ++i) {
      if (write(root_ + "/cgroup.subtree_control", std::string("-") + controller_)) break;
      ::usleep(100000);
    }
  }
  bool valid() const { return made_; }
  const std::string& why() const { return why_; }
  const std::string& outer() const { return outer_; }
  const std::string& inner() const { return inner_; }
  // Writes a group's file; false where the kernel refuses the value.
  static bool write(const std::string& file, const std::string& value) {
    std::ofstream f(file);
    f << value << "\n";
    f.close();
    return f.good();
  }
  // What the report child printed, run inside `dir` (it moves itself there first; it must exit
  // 0); "" where it cannot join, said as a skip.
  static std::string report_in(const std::string& dir) {
    int status = 0;
    const std::string out = run_child(
        kNoCounts + " sh -c 'echo $$ > " + dir + "/cgroup.procs && exec \"$0\" \"$@\"'",
        "cpu limit: report (child)", &status);
    if (status != 0 && out.find("cgroup.procs") != std::string::npos) {
      SUCCEED("SKIPPED: the child could not join " + dir);
      return "";
    }
    INFO(out);
    REQUIRE(status == 0);
    return out;
  }

 private:
  static std::string read(const std::string& file) {
    std::ifstream f(file);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // Whether the blank-separated `list` ("cpu memory pids\n") has `word`.
  static bool lists(const std::string& list, const std::string& word) {
    std::istringstream in(list);
    for (std::string w; in >> w;)
      if (w == word) return true;
    return false;
  }
  const char* controller_;
  std::string root_, outer_, inner_, why_;
  bool made_ = false, enabled_at_root_ = false;
};

// What the report child counts in a group with a CPU quota of `quota` CPUs (as it prints it),
// where `cpus` is that quota rounded up.
void check_quota_report(const std::string& out, const char* quota, int cpus) {
  const int online = static_cast<int>(std::thread::hardware_concurrency());
  CHECK(line_after(out, "quota=") == quota);
  const int affinity = std::stoi(line_after(out, "affinity="));
  const int expect = std::min({online, affinity, cpus});
  CHECK(line_after(out, "cpus=") == std::to_string(expect));
  CHECK(line_after(out, "blas=") == std::to_string(expect));
  if (expect < std::min(online, affinity)) CHECK(line_after(out, "source=") == "cgroup");
}

}  // namespace

TEST_CASE("cpu limit: a cgroup's CPU quota counts, rounded up, its ancestors' too",
          "[cpu-limit]") {
  // Only where this test may make a cgroup: cgroup v1's cpu controller mounted writable (root in
  // a container or VM such as ours). Elsewhere the parser cases above stand for it.
  TestGroup g("cpu", false);
  if (!g.valid()) {
    SUCCEED("SKIPPED: " + g.why());
    return;
  }
  struct Case {
    const char* outer_quota;  // us in 100 000
    const char* inner_quota;
    bool in_inner;            // the child joins the inner group, else the outer one
    const char* quota;        // what the child reports
    int cpus;                 // before the affinity mask and the online CPUs
  };
  const Case cases[] = {
      {"50000", "-1", false, "0.5", 1},
      {"150000", "-1", false, "1.5", 2},
      {"50000", "-1", true, "0.5", 1},      // the ancestor's quota
      {"150000", "50000", true, "0.5", 1},  // the smaller of the two
  };
  for (const Case& c : cases) {
    INFO("outer " << c.outer_quota << ", inner " << c.inner_quota << ", child in the "
                  << (c.in_inner ? "inner" : "outer") << " group");
    // Inner first when lowering, outer first when raising: the kernel keeps a child's quota at
    // most its parent's.
    TestGroup::write(g.inner() + "/cpu.cfs_quota_us", "-1");
    if (!TestGroup::write(g.outer() + "/cpu.cfs_quota_us", c.outer_quota) ||
        !TestGroup::write(g.inner() + "/cpu.cfs_quota_us", c.inner_quota)) {
      SUCCEED("SKIPPED: the kernel refused these quotas");
      return;
    }
    const std::string out = TestGroup::report_in(c.in_inner ? g.inner() : g.outer());
    if (out.empty()) return;
    INFO(out);
    check_quota_report(out, c.quota, c.cpus);
  }
}

TEST_CASE("cpu limit: a cgroup v2 group's cpu.max counts, rounded up, its ancestors' too",
          "[cpu-limit]") {
  // Only where this test may make a v2 group with the cpu controller: root on a machine with
  // cgroup v2 (Debian 12's default), or a user with a delegated subtree. Elsewhere (cpu is v1's on
  // this project's VMs) the parser cases above stand for it.
  TestGroup g("cpu", true);
  if (!g.valid()) {
    SUCCEED("SKIPPED: " + g.why());
    return;
  }
  struct Case {
    const char* outer_max;  // cpu.max: "<quota us> <period us>" or "max <period>"
    const char* inner_max;
    const char* quota;      // what the child, in the inner group, reports
    int cpus;               // before the affinity mask and the online CPUs
  };
  const Case cases[] = {
      {"50000 100000", "max 100000", "0.5", 1},     // the ancestor's quota
      {"150000 100000", "max 100000", "1.5", 2},
      {"150000 100000", "50000 100000", "0.5", 1},  // the smaller of the two
      {"50000 100000", "300000 200000", "0.5", 1},  // v2 lets a child's be the larger
      {"max 100000", "300000 200000", "1.5", 2},
  };
  for (const Case& c : cases) {
    INFO("outer cpu.max " << c.outer_max << ", inner " << c.inner_max);
    if (!TestGroup::write(g.outer() + "/cpu.max", c.outer_max) ||
        !TestGroup::write(g.inner() + "/cpu.max", c.inner_max)) {
      SUCCEED("SKIPPED: the kernel refused these quotas");
      return;
    }
    const std::string out = TestGroup::report_in(g.inner());
    if (out.empty()) return;
    INFO(out);
    check_quota_report(out, c.quota, c.cpus);
  }
}

TEST_CASE("cpu limit: the memory limit of a cgroup's ancestor counts too", "[cpu-limit]") {
  // Under v1 where memory is v1's (this project's VMs), else under v2.
  for (const bool v2 : {false, true}) {
    TestGroup g("memory", v2);
    if (!g.valid()) {
      SUCCEED("SKIPPED: " + g.why());
      continue;
    }
    // 1 GiB on the outer group only (the child needs far less), the child in the inner one.
    const std::uint64_t limit = 1ull << 30;
    if (!TestGroup::write(g.outer() + (v2 ? "/memory.max" : "/memory.limit_in_bytes"),
                          std::to_string(limit))) {
      SUCCEED("SKIPPED: the kernel refused a memory limit");
      continue;
    }
    const std::string out = TestGroup::report_in(g.inner());
    if (out.empty()) continue;
    INFO((v2 ? "v2: " : "v1: ") << out);
    CHECK(line_after(out, "memory=") == std::to_string(limit));
    CHECK(line_after(out, "memory_source=") == "cgroup");
  }
}

TEST_CASE("cpu limit: a BLAS thread count set in OpenBLAS's own variables is kept", "[cpu-limit]") {
  // OpenBLAS reads OPENBLAS_NUM_THREADS, then GOTO_NUM_THREADS, then OMP_NUM_THREADS, and ignores
  // values that do not start with a positive number; ASYNCND_BLAS_THREADS comes before all three.
  const std::string deflt = std::to_string(program_cpu_limit().cpus);
  const std::pair<std::string, std::string> cases[] = {
      {"OMP_NUM_THREADS=1", "1"},
      {"OMP_NUM_THREADS=3,1", "3"},
      {"GOTO_NUM_THREADS=2 OMP_NUM_THREADS=1", "2"},
      {"OPENBLAS_NUM_THREADS=3 GOTO_NUM_THREADS=2 OMP_NUM_THREADS=1", "3"},
      {"OPENBLAS_NUM_THREADS=0 OMP_NUM_THREADS=1", "1"},
      {"OMP_NUM_THREADS=abc", deflt},
      {"OMP_NUM_THREADS=1 ASYNCND_BLAS_THREADS=2", "2"},
  };
  for (const auto& c : cases) {
    int status = 0;
    const std::string out = run_child(kNoCounts + " " + c.first, "cpu limit: report (child)", &status);
    INFO(c.first << "\n" << out);
    REQUIRE(status == 0);
    CHECK(line_after(out, "blas=") == c.second);
  }
}
