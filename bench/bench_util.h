// Helpers shared by the benchmark programs (bench/*.cpp): wall time, medians, where bench/ is.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace asyncnd_bench {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// bench/ of the repository: the current directory's (`make bench` runs from the root), else the
// source directory the build baked in.
inline std::string bench_dir() {
#ifdef ASYNCND_SOURCE_DIR
  if (!std::filesystem::exists("bench/e1_numpy.py")) return ASYNCND_SOURCE_DIR "/bench";
#endif
  return "bench";
}

}  // namespace asyncnd_bench
