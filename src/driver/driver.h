// The task driver contract. Owns: the types every driver speaks (TaskConfig,
// TaskHandle, ExitResult, TaskStatus, TaskStats, TaskEvent, Fingerprint,
// Capabilities) and the abstract Driver interface. The built-in `exec`
// driver (task/exec_driver) is the first implementation; external driver
// plugins will implement the same contract over ttRPC later, which is why
// every operation that may take time reports through a callback.
//
// Semantics follow Nomad's DriverPlugin (shared/spec/driver-and-registration.md
// A1-A2); deviations are listed in docs/tasks.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "cgroup/resources.h"
#include "proc/exit_status.h"
#include "proc/spawn.h"

namespace outpost::driver {

struct TaskConfig {
  std::string id;    // unique per start
  std::string job;   // job id ("" for a bare task)
  std::string name;  // task name within the job
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // explicit; defaults added by the driver
  std::string workdir;                     // absolute; "" = task_dir
  std::string user;                        // name or number; "" = the agent's user
  std::string group;                       // name or number; "" = the user's primary group
  std::vector<proc::Rlimit> rlimits;
  std::string kill_signal = "SIGTERM";
  int64_t kill_timeout_nanos = 5LL * 1000000000;
  std::string task_dir;     // private dir of the task (created by the caller)
  std::string stdout_path;  // FIFO, or /dev/null
  std::string stderr_path;
  // Where the agent writes the task's output (not used by the driver itself,
  // persisted with the handle so logging resumes after a restart).
  std::string log_dir;
  int log_max_files = 10;
  uint64_t log_max_file_size = 10u << 20;
  cgroup::Resources resources;
  // Opaque to drivers: the job layer's fingerprint of the spec this instance
  // was started from (persisted, to spot a stale instance after a restart).
  std::string spec_hash;
};

struct ExitResult {
  int exit_code = 0;  // 128+signo for a signal death
  int signal = 0;
  bool oom_killed = false;
  std::string error;  // e.g. "exit status unknown"
  bool Successful() const { return exit_code == 0 && signal == 0 && error.empty(); }
};

enum class TaskState { kUnknown, kRunning, kExited };
const char* TaskStateName(TaskState s);

// What a driver persists to reattach after an agent restart.
struct TaskHandle {
  int version = 1;
  TaskConfig config;
  pid_t pid = 0;
  uint64_t start_ticks = 0;  // field 22 of /proc/<pid>/stat: detects pid reuse
  int64_t started_at_unix_nanos = 0;
  std::string driver_state;  // opaque to the caller
  // Unique per start (id + start time): the exec driver puts it in the
  // task's environment to find its processes without confusing them with a
  // same-named task of another agent or an earlier run.
  std::string instance;
  // /proc/sys/kernel/random/boot_id when it started: after a reboot the pid
  // (and even its start time, on a board that boots the same way each time)
  // may belong to another process.
  std::string boot_id;
  // The task's cgroup ("" without cgroup v2) and its memory.events oom_kill
  // count when it started (the cgroup outlives a restart of the task).
  std::string cgroup;
  uint64_t oom_kills_at_start = 0;
};

struct TaskStatus {
  std::string id;
  std::string name;
  TaskState state = TaskState::kUnknown;
  pid_t pid = 0;
  int64_t started_at_unix_nanos = 0;
  int64_t completed_at_unix_nanos = 0;  // 0 while running
  ExitResult exit;                      // valid when state == kExited
  std::map<std::string, std::string> attributes;
};

struct TaskStats {
  int64_t timestamp_unix_nanos = 0;
  uint64_t rss_bytes = 0;
  uint64_t cpu_user_nanos = 0;
  uint64_t cpu_system_nanos = 0;
  double cpu_percent = 0;  // from deltas; 0 on the first sample
  std::vector<std::string> measured;  // names of the fields actually measured
  // From the task's cgroup when it has one: "memory.current",
  // "memory.stat.anon", "cpu.stat.nr_throttled", "pids.current", ...
  std::map<std::string, uint64_t> cgroup;
};

struct TaskEvent {
  std::string task_id;
  std::string task_name;
  std::string job;
  int64_t timestamp_unix_nanos = 0;
  std::string type;     // started, exited, signalled, restarting, stopped, error, log
  std::string message;  // human-readable
  std::map<std::string, std::string> annotations;
};

enum class Health { kUndetected, kUnhealthy, kHealthy };
const char* HealthName(Health h);

struct Fingerprint {
  Health health = Health::kUndetected;
  std::string description;
  std::map<std::string, std::string> attributes;
  int64_t updated_unix_nanos = 0;
};

struct Capabilities {
  bool send_signals = true;
  bool exec = true;
  std::string fs_isolation = "none";
  bool dynamic_workload_users = false;
};

struct ExecResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr combined, bounded
  bool truncated = false;
};

class Driver {
 public:
  using StartCallback = std::function<void(Result<TaskHandle>)>;
  using WaitCallback = std::function<void(const ExitResult&)>;
  using DoneCallback = std::function<void(Status)>;
  using ExecCallback = std::function<void(Result<ExecResult>)>;
  using EventCallback = std::function<void(const TaskEvent&)>;

  virtual ~Driver() = default;

  virtual std::string Name() const = 0;
  virtual Capabilities GetCapabilities() const = 0;
  virtual Fingerprint GetFingerprint() = 0;

  // Duplicate id → AlreadyExists "task with ID \"x\" already started".
  virtual void StartTask(const TaskConfig& config, StartCallback done) = 0;
  // Reattach after a restart. Already tracked → OK, no-op.
  virtual Status RecoverTask(const TaskHandle& handle) = 0;
  // Runs done once with the exit result (at once if already exited).
  virtual Status WaitTask(const std::string& id, WaitCallback done) = 0;
  // Signal the process group, wait up to timeout, then SIGKILL the group.
  // done runs when the task is gone. Stopping an exited task is not an error.
  virtual void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                        DoneCallback done) = 0;
  // Running without force → FailedPrecondition "cannot destroy running task".
  virtual void DestroyTask(const std::string& id, bool force, DoneCallback done) = 0;
  virtual Result<TaskStatus> InspectTask(const std::string& id) = 0;
  virtual Status SignalTask(const std::string& id, const std::string& signal) = 0;
  virtual void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                        ExecCallback done) = 0;
  virtual Result<TaskStats> GetTaskStats(const std::string& id) = 0;
  virtual std::vector<std::string> ListTasks() = 0;
  // Fan-out; a subscriber must not block (the loop calls it inline).
  virtual uint64_t SubscribeEvents(EventCallback cb) = 0;
  virtual void UnsubscribeEvents(uint64_t id) = 0;
};


}  // namespace outpost::driver
