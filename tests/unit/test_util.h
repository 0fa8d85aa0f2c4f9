// Helpers shared by unit tests: driving a Loop until a condition holds,
// with a hard deadline so a broken test fails instead of hanging.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "base/clock.h"
#include "loop/loop.h"

namespace outpost::testing {

// Runs the loop until pred() is true or timeout passes. Returns pred().
inline bool RunUntil(Loop* loop, const std::function<bool()>& pred, int64_t timeout_nanos = 5 * kNanosPerSecond) {
  int64_t deadline = MonotonicNanos() + timeout_nanos;
  while (!pred()) {
    int64_t left = deadline - MonotonicNanos();
    if (left <= 0) return pred();
    Status st = loop->RunOnce(left < 50 * kNanosPerMilli ? left : 50 * kNanosPerMilli);
    if (!st.ok()) {
      ADD_FAILURE() << "RunOnce: " << st.error().message();
      return false;
    }
  }
  return true;
}

inline std::unique_ptr<Loop> MakeLoop() {
  auto loop = Loop::Create();
  if (!loop.ok()) {
    ADD_FAILURE() << loop.error().message();
    return nullptr;
  }
  return std::move(loop.value());
}

}  // namespace outpost::testing
