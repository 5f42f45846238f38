// Helpers shared by the benchmark programs (bench/*.cpp): their command lines, wall time, medians,
// where bench/ is, and running a peer's script (bench/torch_peer.py) for its figures, the CPU's
// name.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "asyncnd/engine.h"

namespace asyncnd_bench {

using Clock = std::chrono::steady_clock;

// A benchmark's command line, read before anything runs: the options it knows and at most one
// plain argument (an output path, a count). `--help` or `-h` prints `usage` and exits
// 0; an option it does not know, or one plain argument too many, is an error that names it, with
// the usage, and exits 2. (Once `bench_native --help` ran the whole bench and wrote its figures to
// a file named "--help".) In `known`, a name ending in '=' takes a value (`--only=gemm`); the
// others are flags.
struct BenchArgs {
  std::string prog, usage;
  std::vector<std::string> plain;
  std::map<std::string, std::string> options;  // "--only=" -> "gemm"; a flag -> ""

  bool has(const std::string& name) const { return options.count(name) != 0; }
  std::string value(const std::string& name, const std::string& otherwise = "") const {
    const auto it = options.find(name);
    return it == options.end() ? otherwise : it->second;
  }
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s\n", prog.c_str(), why.c_str(), usage.c_str());
    std::exit(2);
  }
  // Plain argument i as a number no smaller than `min` (the whole argument: "5x" is an error).
  double number(std::size_t i, double otherwise, double min) const {
    if (i >= plain.size()) return otherwise;
    char* end = nullptr;
    const double v = std::strtod(plain[i].c_str(), &end);
    if (end == plain[i].c_str() || *end != '\0' || !(v >= min)) {
      char bound[32];
      std::snprintf(bound, sizeof bound, "%g", min);
      fail("'" + plain[i] + "' is not a number >= " + bound);
    }
    return v;
  }
};

inline BenchArgs parse_bench_args(int argc, char** argv, const char* usage,
                                  std::initializer_list<const char*> known = {}) {
  BenchArgs a;
  a.prog = std::filesystem::path(argc > 0 ? argv[0] : "bench").filename().string();
  a.usage = usage;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: %s\n", usage);
      std::exit(0);
    }
    // A negative number is a plain argument: the programs that take a number check its range.
    const bool number = arg.size() > 1 && arg[0] == '-' && (std::isdigit((unsigned char)arg[1]) ||
                                                            arg[1] == '.');
    if (arg.empty() || arg[0] != '-' || number) {
      if (!a.plain.empty()) a.fail("unexpected argument '" + arg + "' (one at most)");
      a.plain.push_back(arg);
      continue;
    }
    bool found = false;
    for (const char* k : known) {
      const std::string name = k;
      if (!name.empty() && name.back() == '=') {
        if (arg.rfind(name, 0) == 0) a.options[name] = arg.substr(name.size()), found = true;
        else if (arg == name.substr(0, name.size() - 1))
          a.fail("option '" + arg + "' needs a value: " + name + "VALUE");
      } else if (arg == name) {
        a.options[name] = "", found = true;
      }
      if (found) break;
    }
    if (!found) a.fail("unknown option '" + arg + "'");
  }
  return a;
}

inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// This machine's floor for a cross-core hand-off: two threads ping-pong one atomic, spinning
// (no sleep, no engine), n round trips. Our machines differ by 3x here (about 95 ns on the AMD
// ones, 275 ns on the Intel ones), so the per-op figures are judged as multiples of it.
inline double spin_roundtrip_once(int n) {
  std::atomic<int> turn{0};
  std::thread other([&] {
    for (int i = 0; i < n; ++i) {
      while (turn.load(std::memory_order_acquire) != 1) {
      }
      turn.store(0, std::memory_order_release);
    }
  });
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    turn.store(1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != 0) {
    }
  }
  const double ns = since(t0) / n * 1e9;
  other.join();
  return ns;
}

// bench/ of the repository: the current directory's (`make bench` runs from the root), else the
// source directory the build baked in.
inline std::string bench_dir() {
#ifdef ASYNCND_SOURCE_DIR
  if (!std::filesystem::exists("bench/e1_numpy.py")) return ASYNCND_SOURCE_DIR "/bench";
#endif
  return "bench";
}

// "N cores", or "N cores, M usable (affinity mask)" / "(cgroup CPU quota Q)" where the affinity
// mask or a cgroup's CPU quota narrows them: what the engine's defaults count (program_cpu_limit;
// pass it where the caller has read it already).
inline std::string cores_text(const asyncnd::CpuLimit& l = asyncnd::program_cpu_limit()) {
  std::string s = std::to_string(l.online) + " cores";
  if (l.cpus == l.online) return s;
  char why[64];
  if (std::strcmp(l.source, "cgroup") == 0) {
    std::snprintf(why, sizeof why, "cgroup CPU quota %.3g", l.quota);
  } else {
    std::snprintf(why, sizeof why, "affinity mask");
  }
  return s + ", " + std::to_string(l.cpus) + " usable (" + why + ")";
}

// The same for a bench's `machine` object: "cores", "cpus_usable" and "cpus_usable_source"
// (program_cpu_limit's source: "online", "affinity" or "cgroup").
inline std::string cores_json() {
  const asyncnd::CpuLimit l = asyncnd::program_cpu_limit();
  return "\"cores\": " + std::to_string(l.online) + ", \"cpus_usable\": " + std::to_string(l.cpus) +
         ", \"cpus_usable_source\": \"" + l.source + "\"";
}

// What a peer's script printed: `key value` lines whose key starts with `prefix` (the figures),
// "# " lines (comments, such as the peer's version), the whole output and the exit status.
struct PeerRun {
  int status = -1;  // the shell's exit status; -1: the command could not be started
  std::vector<std::pair<std::string, double>> figures;
  std::vector<std::string> comments;
  std::string output;
};

// What `command`, run through the shell, printed on stdout; `status` (when given) gets the shell's
// exit status, or -1 when the command could not be started.
inline std::string command_output(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (status) *status = -1;
  if (!p) return out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int st = pclose(p);
  if (status) *status = st;
  return out;
}

// Runs `command` through the shell (append 2>&1 to see its errors in `output`) and reads it.
inline PeerRun run_peer(const std::string& command, const char* prefix) {
  PeerRun r;
  r.output = command_output(command, &r.status);
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# ", 0) == 0) r.comments.push_back(line.substr(2));
    char key[64];
    double v = 0;
    if (std::sscanf(line.c_str(), "%63s %lf", key, &v) == 2 &&
        std::strncmp(key, prefix, std::strlen(prefix)) == 0)
      r.figures.emplace_back(key, v);
  }
  return r;
}

// The value of the first line of `text` that starts with `key` (after its ':', spaces
// trimmed), or "".
inline std::string field_value(std::istream& text, const char* key) {
  for (std::string line; std::getline(text, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto c = line.find(':');
    if (c == std::string::npos) continue;
    const auto b = line.find_first_not_of(" \t", c + 1);
    return b == std::string::npos ? "" : line.substr(b);
  }
  return "";
}

// The CPU's model name: /proc/cpuinfo's "model name" with its family and model numbers (x86-64:
// a VM may name only the line, "AMD EPYC", which spans Zen 2 to Zen 5), else lscpu's "Vendor ID"
// and "Model name" (64-bit ARM's /proc/cpuinfo has only implementer and part numbers, which lscpu
// names, e.g. "ARM Neoverse-N1"), else "unknown".
// `s` as a JSON string, quotes included (control characters dropped).
inline std::string json_str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

inline std::string cpu_model() {
  auto cpuinfo = [](const char* key) {
    std::ifstream in("/proc/cpuinfo");
    return field_value(in, key);
  };
  if (std::string m = cpuinfo("model name"); !m.empty()) {
    const std::string family = cpuinfo("cpu family"), model = cpuinfo("model\t");
    return family.empty() || model.empty() ? m : m + " (family " + family + " model " + model + ")";
  }
  const std::string out = command_output("LC_ALL=C lscpu 2>/dev/null");
  std::istringstream a(out), b(out);
  const std::string vendor = field_value(a, "Vendor ID"), model = field_value(b, "Model name");
  if (model.empty() || model == "-") return "unknown";
  return vendor.empty() || model.rfind(vendor, 0) == 0 ? model : vendor + " " + model;
}

}  // namespace asyncnd_bench
