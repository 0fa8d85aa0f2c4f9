// Short-lived helper processes run from the loop: `outpost exec` sessions,
// and every helper the agent runs for a task (hook programs, network
// plugins). Owns: one child's whole run — spawning it with exactly the argv
// and environment given (nothing inherited), writing its stdin and closing
// it, capturing stdout and stderr up to a bound each (the rest is counted
// and dropped, never blocking the child), the deadline after which its whole
// process group gets SIGKILL, starting it in a given cgroup, and the result
// (exit status, output, timing). Never blocks the loop beyond the spawn
// itself.
//
// Does not own: deciding what a result means (the caller), resolving a
// command in PATH (proc/spawn ResolveCommand), long-running tasks (drivers).
//
// Output: when the child has exited, what it wrote is all in the pipes (a
// write that did not fit waited for us to read), so the run ends once the
// pipes are drained; a descendant that keeps them open afterwards cannot
// hold the run (its later output is not captured).
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "proc/exit_status.h"
#include "proc/users.h"

namespace outpost {
class Loop;
}

namespace outpost::proc {

struct ChildRunRequest {
  std::string path;               // what to exec (absolute, or relative to workdir's caller cwd)
  std::vector<std::string> argv;  // exactly, argv[0] included
  std::vector<std::string> env;   // exactly ("K=V"); empty = an empty environment
  std::string workdir;            // "" = the agent's
  std::string stdin_data;         // written to stdin, which is then closed
  size_t output_limit = 64 << 10; // bytes kept per stream
  bool merge_stderr = false;      // stderr into the stdout pipe (one stream, in order)
  int64_t timeout_nanos = 0;      // > 0: then the process group gets SIGKILL
  std::string cgroup;             // cgroup v2 dir to start in ("" = the agent's)
  bool set_credentials = false;   // setgroups/setgid/setuid to creds
  Credentials creds;
  std::vector<std::pair<int, rlimit>> rlimits;
  int netns_fd = -1;              // a network namespace to join (-1 = the agent's); the caller keeps it open
  std::string hostname;           // "" = the node's; else a UTS namespace of its own with this name
};

struct ChildRunResult {
  pid_t pid = 0;
  int wait_status = 0;
  ExitStatus exit;           // exit code (128+signo for a signal death)
  bool timed_out = false;    // killed at the deadline
  std::string out;           // stdout (with stderr when merged)
  std::string err;
  uint64_t out_dropped = 0;  // bytes over output_limit
  uint64_t err_dropped = 0;
  int64_t duration_nanos = 0;

  bool Succeeded() const { return !timed_out && exit.signal == 0 && exit.exit_code == 0; }
};

class ChildRun {
 public:
  using Done = std::function<void(const ChildRunResult&)>;

  // Spawns the child. done runs exactly once, from the loop (never from
  // inside Start), unless the ChildRun is destroyed first; done may destroy
  // it. Fails (and done never runs) when the child cannot be started,
  // including an exec failure (the error says which, with exit status 127
  // or 126 as a shell would).
  static Result<std::unique_ptr<ChildRun>> Start(Loop* loop, ChildRunRequest request, Done done);
  // A child still running is killed with its process group and reaped.
  ~ChildRun();
  ChildRun(const ChildRun&) = delete;
  ChildRun& operator=(const ChildRun&) = delete;

  pid_t pid() const;

 private:
  struct State;
  explicit ChildRun(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

}  // namespace outpost::proc
