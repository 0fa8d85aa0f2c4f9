// What the exec driver keeps per task, and what its files share (internal
// to src/driver/exec/: exec_driver.cc, exec_session.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "driver/exec/exec_driver.h"
#include "loop/loop.h"

namespace outpost::driver {

inline constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
inline constexpr const char* kNotFound = "task not found for given id";
inline Error NotFound() { return Error(Code::kNotFound, kNotFound); }

struct ExecDriver::Task {
  KeptConfig config;
  // The driver state (State) of the task, less the boot id: every task the
  // driver tracks runs in this boot.
  pid_t pid = 0;
  uint64_t start_ticks = 0;
  std::string instance;
  const char* parent = "keeper";  // who reaps it: "keeper" or "agent"
  int64_t started_at = 0;
  TaskState run_state = TaskState::kRunning;
  bool our_child = false;         // reaped by this process through the loop
  bool foreign_parent = false;    // recovered, but nobody we talk to reaps it
  bool awaiting_journal = false;  // process gone at recovery; exit may still come from the keeper
  UniqueFd pidfd;                 // liveness (and, for a foreign parent, the exit itself)
  LoopFd foreign_watch;
  Loop::TimerId foreign_poll = 0;  // when no pidfd could be watched
  // Started with startContainer hooks run in the new process: its exec
  // report, readable once it exec'd (EOF) or failed (docs/hooks.md).
  LoopFd exec_report;
  ExitResult exit;
  int64_t completed_at = 0;
  std::vector<WaitCallback> waiters;
  std::vector<DoneCallback> stop_waiters;
  Loop::TimerId kill_timer = 0;
  uint64_t last_cpu_ticks = 0;
  int64_t last_sample_mono = 0;
};

}  // namespace outpost::driver
