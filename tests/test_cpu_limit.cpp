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

// A cgroup v1 group made for a test, under a writable controller's mount, with a group inside it;
// removed (inner first) when the test ends. valid() is false where that cannot be done here.
class TestGroup {
 public:
  TestGroup(const std::string& root, const char* probe) {
    if (::access((root + "/" + probe).c_str(), R_OK) != 0 || ::access(root.c_str(), W_OK) != 0) {
      why_ = "no writable cgroup v1 controller at " + root;
      return;
    }
    outer_ = root + "/asyncnd-test-" + std::to_string(::getpid());
    inner_ = outer_ + "/inner";
    if (::mkdir(outer_.c_str(), 0755) != 0 || ::mkdir(inner_.c_str(), 0755) != 0) {
      why_ = "cannot make " + inner_;
      return;
    }
    made_ = true;
  }
  ~TestGroup() {
    ::rmdir(inner_.c_str());  // after the children have exited: the groups are empty
    ::rmdir(outer_.c_str());
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
  // The report child, run inside `dir` (it moves itself there first); "" where it cannot join.
  static std::string report_in(const std::string& dir, int* status) {
    const std::string out = run_child(
        kNoCounts + " sh -c 'echo $$ > " + dir + "/cgroup.procs && exec \"$0\" \"$@\"'",
        "cpu limit: report (child)", status);
    return *status != 0 && out.find("cgroup.procs") != std::string::npos ? "" : out;
  }

 private:
  std::string outer_, inner_, why_;
  bool made_ = false;
};

}  // namespace

TEST_CASE("cpu limit: a cgroup's CPU quota counts, rounded up, its ancestors' too",
          "[cpu-limit]") {
  // Only where this test may make a cgroup: cgroup v1's cpu controller mounted writable (root in
  // a container or VM such as ours). Elsewhere the parser cases above stand for it.
  TestGroup g("/sys/fs/cgroup/cpu", "cpu.cfs_period_us");
  if (!g.valid()) {
    SUCCEED("SKIPPED: " + g.why());
    return;
  }
  const int online = static_cast<int>(std::thread::hardware_concurrency());
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
    int status = 0;
    const std::string out = TestGroup::report_in(c.in_inner ? g.inner() : g.outer(), &status);
    if (out.empty()) {
      SUCCEED("SKIPPED: the child could not join the test's group");
      return;
    }
    INFO(out);
    REQUIRE(status == 0);
    CHECK(line_after(out, "quota=") == c.quota);
    const int affinity = std::stoi(line_after(out, "affinity="));
    const int expect = std::min({online, affinity, c.cpus});
    CHECK(line_after(out, "cpus=") == std::to_string(expect));
    CHECK(line_after(out, "blas=") == std::to_string(expect));
    if (expect < std::min(online, affinity)) CHECK(line_after(out, "source=") == "cgroup");
  }
}

TEST_CASE("cpu limit: the memory limit of a cgroup's ancestor counts too", "[cpu-limit]") {
  TestGroup g("/sys/fs/cgroup/memory", "memory.limit_in_bytes");
  if (!g.valid()) {
    SUCCEED("SKIPPED: " + g.why());
    return;
  }
  // 1 GiB on the outer group only (the child needs far less), the child in the inner one.
  const std::uint64_t limit = 1ull << 30;
  if (!TestGroup::write(g.outer() + "/memory.limit_in_bytes", std::to_string(limit))) {
    SUCCEED("SKIPPED: the kernel refused a memory limit");
    return;
  }
  int status = 0;
  const std::string out = TestGroup::report_in(g.inner(), &status);
  if (out.empty()) {
    SUCCEED("SKIPPED: the child could not join the test's group");
    return;
  }
  INFO(out);
  REQUIRE(status == 0);
  CHECK(line_after(out, "memory=") == std::to_string(limit));
  CHECK(line_after(out, "memory_source=") == "cgroup");
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
