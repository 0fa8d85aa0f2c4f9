// Helpers shared by unit tests: driving a Loop until a condition holds,
// with a hard deadline so a broken test fails instead of hanging.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

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

// A new private directory under base ("/tmp", "/dev/shm") named
// outpost-<what>-XXXXXX; "" (and a test failure) if it cannot be made.
inline std::string MakeTempDir(const std::string& base, const std::string& what) {
  std::string tmpl = base + "/outpost-" + what + "-XXXXXX";
  if (::mkdtemp(&tmpl[0]) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
    return "";
  }
  return tmpl;
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

namespace outpost::testing {

// Under qemu-user without binfmt_misc a cross-built test cannot exec another
// cross-built binary (ENOEXEC). Spawning tests skip there; the ARM VM test
// covers spawning on real ARM kernels.
inline bool CanExecHelper(const std::string& helper) {
  pid_t pid = ::fork();
  if (pid == 0) {
    char* const argv[] = {const_cast<char*>(helper.c_str()), const_cast<char*>("exit"), const_cast<char*>("0"),
                          nullptr};
    ::execv(helper.c_str(), argv);
    ::_exit(errno == ENOEXEC ? 99 : 98);
  }
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

}  // namespace outpost::testing
