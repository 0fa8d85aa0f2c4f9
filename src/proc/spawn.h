// Starting processes. Owns: the one place that forks. Everything the child
// needs (argv, envp, fds, credentials, rlimits) is prepared in the parent;
// the child side is a small async-signal-safe function that ends in execve
// or _exit and never returns into C++. An exec failure reaches the parent
// over a close-on-exec pipe and is reported like a shell: 127 for "not
// found", 126 for "not executable".
//
// Does not own what the process is (tasks, exec sessions): callers keep the
// pid and pidfd and decide who reaps.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "proc/users.h"

namespace outpost::proc {

struct Rlimit {
  std::string name;  // "nofile", "nproc", "core", ... (RLIMIT_ without prefix, lower case)
  uint64_t soft = 0;
  uint64_t hard = 0;
};

struct BindMount {
  std::string source;
  std::string destination;  // must exist
  bool readonly = false;
};

struct SpawnRequest {
  std::string path;               // absolute or relative to cwd; no PATH search here
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "K=V"
  std::string workdir;            // "" = inherit
  int stdin_fd = -1;              // -1 = /dev/null
  int stdout_fd = -1;             // -1 = /dev/null
  int stderr_fd = -1;             // -1 = /dev/null; may equal stdout_fd
  bool set_credentials = false;   // setgroups/setgid/setuid to creds
  Credentials creds;
  std::vector<std::pair<int, rlimit>> rlimits;
  bool new_process_group = true;
  // Make the caller's parent (the keeper) the child's parent, so the task
  // outlives this process. Needs clone3 or clone with CLONE_PARENT.
  bool clone_parent = false;
  int cgroup_fd = -1;        // the task's cgroup dir: clone3(CLONE_INTO_CGROUP)
  int cgroup_procs_fd = -1;  // its cgroup.procs: the child joins before exec where
                             // the kernel has no CLONE_INTO_CGROUP (before 5.7)
  int netns_fd = -1;  // setns(CLONE_NEWNET) in the child before credentials are dropped
  std::string hostname;  // non-empty: the child gets its own UTS namespace with this hostname (unshare + sethostname)
  // Bind mounts (NRI mount adjustments) made in a private mount namespace
  // of the child before credentials are dropped; the caller checked the
  // paths. Empty = the caller's mount namespace.
  std::vector<BindMount> bind_mounts;
  std::optional<int> oom_score_adj;  // written to /proc/self/oom_score_adj before exec
  // A step run inside the new process right before exec (after stdio,
  // rlimits, credentials and workdir): returns 0, or an errno that fails the
  // spawn ("pre-exec step: ..."). It may take long (run a hook program and
  // wait for it): Spawn then returns at once with exec_report set, and the
  // caller learns the outcome from ReadExecReport when that fd is readable.
  // Such a child gets a copy of the caller's memory (fork semantics); without
  // a pre-exec step the child shares it until exec (CLONE_VM | CLONE_VFORK),
  // which costs the same however big the caller is.
  std::function<int()> pre_exec;
  // When pre_exec fails: the child's own description of the failure (e.g. a
  // startContainer hook's exit code and stderr), sent with the report and
  // used as the whole error message. Called in the child; null = none.
  std::function<const char*()> pre_exec_message;
};

struct Spawned {
  pid_t pid = 0;
  UniqueFd pidfd;           // may be invalid on kernels without CLONE_PIDFD
  bool parent_is_caller = true;
  UniqueFd exec_report;     // only with a pre_exec step: see ReadExecReport
};

// Exec failure: the Error message names the path and the reason, and
// *exit_code (when given) gets 127 or 126 (or 1 for setup failures such as
// chdir or setuid).
Result<Spawned> Spawn(const SpawnRequest& req, int* exit_code = nullptr);

// The outcome of a spawn with a pre-exec step, from Spawned::exec_report
// once it is readable: OK when the child exec'd (the fd reads EOF), else the
// error Spawn would have returned (with *exit_code as there). A child that
// failed exits by itself: the caller reaps it as it reaps the task.
Status ReadExecReport(int fd, const std::string& path, const std::string& workdir, int* exit_code = nullptr);

// Finds cmd in the PATH of env (or a default PATH) the way a shell does.
// Not found → NotFound "... not found in PATH=..." (exit 127); found but
// not executable → PermissionDenied (exit 126).
Result<std::string> ResolveCommand(const std::string& cmd, const std::string& path_var, int* exit_code);

// The RLIMIT_NOFILE a task gets unless its config sets "nofile": the limit
// the agent itself was started with (the agent raises its own).
void SetTaskDefaultNofile(const rlimit& lim);
bool TaskDefaultNofile(rlimit* out);

// A task's rlimits for SpawnRequest::rlimits: each name resolved, soft <=
// hard checked, and the default RLIMIT_NOFILE added unless set.
Result<std::vector<std::pair<int, rlimit>>> TaskRlimits(const std::vector<Rlimit>& limits);

// rlimit names: "nofile", "nproc", "core", "stack", "cpu", "fsize", "data",
// "as", "memlock", "locks", "sigpending", "msgqueue", "nice", "rtprio",
// "rttime" (with or without an RLIMIT_ prefix, any case).
Result<int> ParseRlimitName(const std::string& name);

}  // namespace outpost::proc
