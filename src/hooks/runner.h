// Running hooks: the one place a hook program is exec'd, whoever asked for
// it (a task's stages, NRI adjustments, the oci driver plugin). Owns: one
// stage's hooks run in order, one at a time, on the loop (never blocking it):
// each exec'd with exactly its argv and env, the state JSON on stdin (then
// closed), stdout and stderr captured up to a bound and logged, killed with
// its whole process group at its timeout; the error a failure becomes; and
// the in-child form used for startContainer (run inside the new task
// process, before its exec). Does not own which hooks apply (hooks/catalog)
// or what a failure does to the task (the task pipelines).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "hooks/hook.h"
#include "proc/child_run.h"

namespace outpost {
class Loop;
}

namespace outpost::hooks {

// One hook's run, as events and `outpost inspect` show it.
struct HookRun {
  Stage stage = Stage::kPrestart;
  Hook hook;
  int64_t started_unix_nanos = 0;
  int64_t duration_nanos = 0;  // -1: not known (startContainer run inside the task's process)
  int exit_code = 0;      // 128+signo for a signal death; -1 when it could not be started
  int signal = 0;         // the signal that killed it (0 if it exited), to tell SIGKILL from exit code 137
  int64_t timeout_seconds = 0;  // the timeout that applied (the hook's own or the stage's default)
  bool timed_out = false;
  std::string out_tail;   // the last bytes of stdout / stderr (up to kTailBytes each)
  std::string err_tail;
  std::string error;      // "" = success; else the message HookError gives
  bool ok() const { return error.empty(); }
};
constexpr size_t kTailBytes = 1024;

// "hook createRuntime /usr/libexec/foo: exit 0 in 12 ms" (success) or
// "hook createRuntime /usr/libexec/foo: exit code 3 in 12 ms: <stderr tail>",
// "hook createRuntime /usr/libexec/foo ran past its timeout of 5s",
// "hook createRuntime /usr/libexec/foo: cannot start: <why>" (for a run
// with exit_code -1 that is r.error, which holds the why).
std::string DescribeRun(const HookRun& r);

struct StageOptions {
  int64_t default_timeout_seconds = 10;  // for hooks without a timeout
  size_t output_limit = 16 << 10;        // bytes kept per stream (the rest counted and dropped)
  // Run every hook even after one failed (poststop); otherwise the first
  // failure ends the stage.
  bool continue_after_failure = false;
};

// Runs hooks in order. each runs after every hook (success or not); done runs
// once at the end with OK, or the first failure's error (the DescribeRun
// text). Both run from the loop, never from inside Start. Destroying the
// StageRun kills a hook still running (with its process group) and nothing
// more is called.
class StageRun {
 public:
  using Each = std::function<void(const HookRun&)>;
  using Done = std::function<void(Status)>;
  static std::unique_ptr<StageRun> Start(Loop* loop, Stage stage, std::vector<Hook> hooks,
                                         std::string state_json, StageOptions options, Each each, Done done);
  ~StageRun();
  StageRun(const StageRun&) = delete;
  StageRun& operator=(const StageRun&) = delete;

 private:
  StageRun() = default;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// startContainer runs inside the task's new process (after it is in its
// cgroup and has its user, right before its exec): the child forks the hook,
// writes the state to its stdin, waits for it and fails the start when it
// fails. Everything is prepared in the agent beforehand (Prepare); Run is
// called in the child, which has its own copy of the agent's memory, and
// does no allocation.
class InChildHooks {
 public:
  // hooks of one stage; the timeouts as in StageOptions. The state's pid is
  // the child's own, filled in by Run (state.pid is ignored).
  static Result<std::unique_ptr<InChildHooks>> Prepare(Stage stage, const std::vector<Hook>& hooks,
                                                       const State& state, int64_t default_timeout_seconds);
  ~InChildHooks();
  // In the child: runs the hooks in order. Returns 0, or an errno-like
  // nonzero code with message() holding what DescribeRun would say for the
  // failed hook (exit code and stderr tail included).
  int Run();
  const char* message() const;
  bool empty() const;

 private:
  InChildHooks() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outpost::hooks
