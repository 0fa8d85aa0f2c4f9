// What every benchmark under tools/bench needs: failing loudly, the BENCH
// line (shared/design.md §7), percentiles of latency samples, and removing a
// scratch tree. Header-only: each benchmark is one .cc file.
#pragma once

#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace outpost::bench {

// Set by each benchmark's main, for messages.
inline const char*& Name() {
  static const char* name = "bench";
  return name;
}

[[noreturn]] inline void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s: %s\n", Name(), what, detail.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(Result<T> r, const char* what) {
  if (!r.ok()) Die(what, r.error().message());
  return std::move(*r);
}

// BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
inline void Print(const char* name, double value, const char* unit, const char* base_name, double base) {
  std::printf("BENCH %s %.1f %s baseline=%s %.1f ratio=%.2f\n", name, value, unit, base_name, base,
              base > 0 ? value / base : 0.0);
  std::fflush(stdout);
}

// The q-quantile (0..1) of nanosecond samples, in microseconds.
inline double PercentileMicros(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return static_cast<double>(v[i]) / 1000.0;
}

inline int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
inline void RemoveTree(const std::string& dir) { ::nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

}  // namespace outpost::bench
