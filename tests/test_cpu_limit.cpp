// program_cpu_limit(): the CPUs the defaults count (engine workers, BLAS threads, our GEMMs'
// threads), narrowed by the affinity mask and a cgroup's CPU quota. The parsers on texts, then
// this binary run again with one CPU in its mask and, where this test may make one, in a cgroup
// with a CPU quota.
#include <catch2/catch.hpp>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include "asyncnd/asyncnd.h"
#include "asyncnd/detail/backend.h"
#include "cpu/cpu_backend.h"
#include "test_util.h"

using asyncnd::CpuLimit;
using asyncnd::program_cpu_limit;
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

TEST_CASE("cpu limit: a cgroup's CPU quota counts, rounded up", "[cpu-limit]") {
  // Only where this test may make a cgroup: cgroup v1's cpu controller mounted writable (root in
  // a container or VM such as ours). Elsewhere the parser cases above stand for it.
  const std::string root = "/sys/fs/cgroup/cpu";
  std::ifstream period_file(root + "/cpu.cfs_period_us");
  if (!period_file || ::access(root.c_str(), W_OK) != 0) {
    SUCCEED("SKIPPED: no writable cgroup v1 cpu controller at " + root);
    return;
  }
  const std::string group = root + "/asyncnd-test-" + std::to_string(::getpid());
  if (::mkdir(group.c_str(), 0755) != 0) {
    SUCCEED("SKIPPED: cannot make " + group);
    return;
  }
  struct Remove {
    std::string path;
    ~Remove() { ::rmdir(path.c_str()); }  // after the child has exited: the group is empty
  } remove{group};
  std::ofstream(group + "/cpu.cfs_period_us") << "100000\n";
  for (const auto& c : {std::make_pair("50000", "0.5"), std::make_pair("150000", "1.5")}) {
    std::ofstream quota(group + "/cpu.cfs_quota_us");
    quota << c.first << "\n";
    quota.close();
    if (!quota.good()) {  // e.g. above a quota the parent group has
      SUCCEED("SKIPPED: the kernel refused a quota of " + std::string(c.first) + " us");
      return;
    }
    int status = 0;
    // The child moves itself into the group, then runs the test.
    const std::string out =
        run_child(kNoCounts + " sh -c 'echo $$ > " + group +
                      "/cgroup.procs && exec \"$0\" \"$@\"'",
                  "cpu limit: report (child)", &status);
    INFO(out);
    if (status != 0 && out.find("cgroup.procs") != std::string::npos) {
      SUCCEED("SKIPPED: the child could not join " + group);
      return;
    }
    REQUIRE(status == 0);
    CHECK(line_after(out, "quota=") == c.second);
    const int online = static_cast<int>(std::thread::hardware_concurrency());
    const int affinity = std::stoi(line_after(out, "affinity="));
    const int expect = std::min({online, affinity, c.first == std::string("50000") ? 1 : 2});
    CHECK(line_after(out, "cpus=") == std::to_string(expect));
    CHECK(line_after(out, "blas=") == std::to_string(expect));
    if (expect < std::min(online, affinity)) CHECK(line_after(out, "source=") == "cgroup");
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
