// Helpers shared by the Catch2 tests: seeds and the workload scale, both from the environment, and
// running this test binary again on one hidden test case.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <asyncnd/engine.h>

namespace asyncnd_test {

// A GPU index that no machine has: the tests of "no such device" errors use it, since gpu(0),
// gpu(1), ... exist where the tests run on GPUs (tools/gpu-check.sh).
constexpr int kAbsentGpu = 4000;

// ASYNCND_TEST_SEED reproduces a seeded test; otherwise a fixed default, printed either way.
inline std::uint64_t test_seed(const char* test_name, std::uint64_t fallback = 20261122) {
  std::uint64_t seed = fallback;
  if (const char* s = std::getenv("ASYNCND_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::cout << "[seed] " << test_name << ": ASYNCND_TEST_SEED=" << seed << "\n";
  return seed;
}

// ASYNCND_TEST_SCALE shrinks workloads (the sanitizer builds run at 0.1).
inline double test_scale() {
  if (const char* s = std::getenv("ASYNCND_TEST_SCALE")) {
    double v = std::atof(s);
    if (v > 0) return v;
  }
  return 1.0;
}

inline std::int64_t scaled(std::int64_t n, std::int64_t at_least = 1) {
  auto v = static_cast<std::int64_t>(static_cast<double>(n) * test_scale());
  return v < at_least ? at_least : v;
}

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// An op that blocks a worker until the test opens the gate.
struct Gate {
  std::atomic<bool> open{false};
  void wait() const {
    while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
};

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Runs this test binary again on one hidden test case, with OPENBLAS_CORETYPE unset and `before`
// in front of it (more environment, or a command that runs it: `env` takes both), and returns
// what it printed (stdout and stderr) and its exit status. Under an emulator the child runs under
// it too: the environment's ASYNCND_TEST_EMULATOR (make test-x86-cpus: "qemu-x86_64 -cpu
// Nehalem", so that the child sees the same emulated CPU), else in a cross build (make
// test-arm64) the toolchain's CMAKE_CROSSCOMPILING_EMULATOR, compiled in: the shell would not
// know how to run an AArch64 binary. The binary's path comes from readlink, which qemu-user
// answers with the emulated program, where /proc/PID/exe would be qemu itself.
// Built with AddressSanitizer or ThreadSanitizer (GCC's macros, clang's __has_feature).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ASYNCND_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ASYNCND_TEST_SANITIZED 1
#endif
#endif

#ifdef ASYNCND_TEST_EMULATOR
constexpr bool kUnderEmulator = true;  // a cross build, run under the emulator compiled in
#else
constexpr bool kUnderEmulator = false;
#endif

inline std::string run_child(const std::string& before, const std::string& test, int* status) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    *status = -1;
    return "run_child: readlink(/proc/self/exe) failed";
  }
  self[n] = '\0';
#ifdef ASYNCND_TEST_EMULATOR
  std::string runner = std::string(ASYNCND_TEST_EMULATOR) + " ";
#else
  std::string runner;
#endif
  if (const char* e = std::getenv("ASYNCND_TEST_EMULATOR")) runner = std::string(e) + " ";
  const std::string cmd = "env -u OPENBLAS_CORETYPE " + before + " " + runner + "'" + self +
                          "' '" + test + "' 2>&1";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    *status = ::pclose(p);
  } else {
    *status = -1;
  }
  return out;
}

// The rest of the line after the first `key` in `text`, or "" when `key` is absent.
inline std::string line_after(const std::string& text, const std::string& key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return {};
  const auto end = text.find('\n', at);
  return text.substr(at + key.size(), end - at - key.size());
}

// Pushes an async op that writes v and returns its Completion once the engine has handed it
// over: the op stays in flight until the caller completes it.
inline asyncnd::Completion hold_async(asyncnd::Engine& eng, const asyncnd::Var& v) {
  asyncnd::Completion held;
  std::atomic<bool> handed{false};
  eng.push_async(
      [&](asyncnd::Completion c) {
        held = std::move(c);
        handed = true;
      },
      {}, {v});
  while (!handed) std::this_thread::yield();
  return held;
}

}  // namespace asyncnd_test
