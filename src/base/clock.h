// Time sources. Monotonic time for deadlines and timers (never jumps);
// wall time only for display and persisted timestamps.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>

namespace outpost {

constexpr int64_t kNanosPerMilli = 1000000;
constexpr int64_t kNanosPerSecond = 1000000000;

inline int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

inline int64_t WallNanos() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

// RFC 3339 UTC with milliseconds: 2026-11-22T19:25:20.123Z
std::string FormatWallTime(int64_t wall_nanos);

}  // namespace outpost
