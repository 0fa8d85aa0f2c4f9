// The task driver contract. Owns: the types every driver speaks (TaskConfig,
// TaskHandle, ExitResult, TaskStatus, TaskStats, TaskEvent, Fingerprint,
// Capabilities) and the abstract Driver interface.
//
// The built-in `exec` driver (driver/exec) implements it in the agent's
// process; drivers in other processes implement the same contract over
// ttRPC. So nothing crosses it by pointer: configs and handles are values,
// every operation reports through a callback (which may run before the call
// returns, or later from the loop), and a driver keeps no state outpost
// needs back — outpost persists each TaskHandle and hands it to RecoverTask.
//
// What outpost owns around a driver (the task layer's start and stop
// pipelines): the task dir, the log FIFOs, the cgroup (created with its
// limits before StartTask; the driver must start the task in it), the
// identity the task runs as (resolved once), restart policy, events history.
//
// Semantics follow Nomad's DriverPlugin; deviations are listed in
// docs/tasks.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cgroup/resources.h"
#include "devices/validate.h"
#include "hooks/bundle.h"
#include "hooks/hook.h"
#include "net/spec.h"
#include "proc/exit_status.h"
#include "proc/spawn.h"

namespace outpost::driver {

// Who a task runs as: resolved once by the start pipeline from the task's
// user and group (names, numbers or a dynamic user).
struct Identity {
  bool switch_user = false;  // set the credentials below (else: the agent's own)
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups (includes gid)
  std::string name;           // "" for a uid without a passwd entry
  std::string home;
};

// A task's OCI hooks and what they are run with (TaskConfig::oci).
struct TaskHooks {
  hooks::HookSet hooks;
  std::map<std::string, std::string> annotations;
  std::string bundle;            // the bundle dir ("" = not written yet)
  int64_t timeout_seconds = 10;  // for hooks without a timeout
};

// A task's network: the job's spec, and once joined the pinned namespace
// and hostname.
struct TaskNetwork {
  std::shared_ptr<const net::NetworkSpec> spec;
  std::string netns;     // "" = not joined yet
  std::string hostname;  // "" = the node's
};

// A bind mount into the task, and a device node to create in it (from NRI
// adjustments): hooks/bundle.h, which writes them into config.json.
using Mount = hooks::Mount;
using Device = hooks::Device;


// The job layer's restart bookkeeping as of a start, persisted with the
// task's record so that an agent restart or upgrade keeps it (restart
// counts, and the restart policy's window and throttle): the restarts so
// far, the times of those within the policy's interval and of the start
// (monotonic clock: valid within one boot).
struct RestartMark {
  uint64_t total = 0;
  std::vector<int64_t> window_mono;
  int64_t last_start_mono = 0;
};

struct TaskConfig {
  std::string id;    // unique per start
  std::string job;   // job id ("" for a bare task)
  std::string name;  // task name within the job
  std::string driver = "exec";
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // explicit; defaults added by the driver
  std::string workdir;                     // absolute; "" = task_dir
  std::string user;                        // as written: name, number, "dynamic" or "" (the agent's)
  std::string group;                       // as written; "" = the user's primary group
  Identity identity;                       // resolved by the start pipeline
  std::vector<proc::Rlimit> rlimits;
  std::string kill_signal = "SIGTERM";
  int64_t kill_timeout_nanos = 5LL * 1000000000;
  std::string task_dir;     // private dir of the task (created by the pipeline)
  std::string stdout_path;  // FIFO, or /dev/null
  std::string stderr_path;
  // cgroup v2 dir the task must start in ("" = none: no cgroup v2 here),
  // created by the pipeline with the limits below already written.
  std::string cgroup;
  cgroup::ResourcesBox resources;  // out of line: most tasks set none
  // The task's driver-specific `config` object as JSON ("" = none).
  std::string driver_config;
  // Device plugin resources it asks for (resources.devices), sorted by
  // name: the start pipeline allocates them (docs/devices.md).
  std::vector<devices::Request> device_requests;
  // Not used by drivers (the task layer's, persisted with the handle):
  // where the task's logs go, and the job layer's fingerprint of the spec.
  std::string log_dir;
  int log_max_files = 10;
  uint64_t log_max_file_size = 10u << 20;
  std::string spec_hash;
  std::shared_ptr<const RestartMark> restarts;  // null: none to keep (a first start)
  // OCI hooks (docs/hooks.md); null for a task with none (most tasks:
  // nothing kept per task). From the job layer: the job spec's hooks and the
  // annotations (job's and task's). The start pipeline merges in the node's
  // (hooks.d, per-stage directories), writes the bundle, and keeps this only
  // when some hook applies. A driver runs the startContainer hooks inside the
  // task's process right before its command is exec'd where
  // RunsStartContainerHooks() (the exec driver); for other drivers the agent
  // runs them just before StartTask. Not persisted in the record: the
  // bundle's config.json holds them.
  std::shared_ptr<const TaskHooks> oci;
  // The job's network (docs/networking.md); null for mode "host" (most
  // tasks: one pointer kept per task). From the job layer with the spec;
  // the start pipeline attaches the job to it and adds the pinned namespace
  // the task joins before exec and its hostname (and the OUTPOST_IP /
  // OUTPOST_*PORT_* environment). The record keeps netns and hostname.
  std::shared_ptr<const TaskNetwork> net;
  // From NRI plugins' adjustments (docs/nri.md), set by the start pipeline:
  // bind mounts (only for a driver whose Capabilities::mounts is set; the
  // pipeline refuses them for others) and the task's oom_score_adj.
  std::vector<Mount> mounts;
  std::vector<Device> devices;  // only for a driver whose Capabilities::devices is set
  std::optional<int> oom_score_adj;
  // For a driver whose Capabilities::oci_runtime is set: the task as an OCI
  // runtime-spec config.json (hooks merged from the job, hooks.d and NRI;
  // annotations; mounts and devices from NRI; linux.resources,
  // cgroupsPath and the network namespace to join), built by the start
  // pipeline right before the driver is asked. Not persisted.
  std::string oci_spec;
  // net's namespace and hostname, "" when there is none.
  const std::string& Netns() const;
  const std::string& Hostname() const;
  // net with the namespace joined (the spec kept; a new object: net is shared).
  void SetJoined(const std::string& netns, const std::string& hostname);
  // oci's hooks and annotations, empty when there is none.
  const hooks::HookSet& Hooks() const;
  const std::map<std::string, std::string>& Annotations() const;
};

struct ExitResult {
  int exit_code = 0;  // 128+signo for a signal death; -1 when unknown
  int signal = 0;
  bool oom_killed = false;
  std::string error;  // e.g. "exit status unknown: ..."
  bool Successful() const { return exit_code == 0 && signal == 0 && error.empty(); }
};
ExitResult ExitFromWaitStatus(int wait_status);
// "exit code 3", "killed by SIGKILL", "OOM killed", or the error.
std::string DescribeExit(const ExitResult& exit);

enum class TaskState { kUnknown, kRunning, kExited };
const char* TaskStateName(TaskState s);

// Where a driver says its task can be reached (Nomad's DriverNetwork: a
// plugin's own address and port map, e.g. a container's IP), shown by
// inspect; empty for drivers that say nothing.
struct DriverNetwork {
  std::string address;
  std::map<std::string, int32_t> ports;  // label -> port
  bool empty() const { return address.empty() && ports.empty(); }
};

// What StartTask returns and outpost persists (Nomad's TaskHandle): the
// config the task was started with and the driver's own state, opaque to
// outpost, given back to RecoverTask after an agent restart.
struct TaskHandle {
  int version = 1;  // of driver_state's format
  TaskConfig config;
  pid_t pid = 0;    // the task's main process, where the driver has one (shown, not acted on)
  int64_t started_at_unix_nanos = 0;
  std::string driver_state;
  DriverNetwork network;
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
  std::string type;     // started, exited, signalled, restarting, stopped, error, ...
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
  // Applies TaskConfig::mounts (bind mounts into the task), and device
  // adjustments: NRI adjustments of these fail a task's start on a driver
  // that cannot apply them.
  bool mounts = false;
  bool devices = false;
  bool oom_score_adj = false;  // applies TaskConfig::oom_score_adj
  // Runs its tasks through an OCI runtime from TaskConfig::oci_spec: the
  // runtime runs every OCI hook, so the agent runs none for its tasks.
  bool oci_runtime = false;
  // Network isolation modes ("host", "group", "none"); empty = all. A task
  // of a job with its own network needs "group".
  std::vector<std::string> network_isolation;
  bool JoinsJobNetworks() const;
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
  using InspectCallback = std::function<void(Result<TaskStatus>)>;
  using StatsCallback = std::function<void(Result<TaskStats>)>;
  using ExecCallback = std::function<void(Result<ExecResult>)>;
  using EventCallback = std::function<void(const TaskEvent&)>;

  virtual ~Driver() = default;

  virtual std::string Name() const = 0;
  // Why the driver cannot be reached right now ("" = it can): a driver
  // plugin with no connected instance. Its tasks are then in an unknown
  // state, not ended.
  virtual std::string Unreachable() const { return ""; }
  virtual Capabilities GetCapabilities() const = 0;
  // Whether StartTask runs config.hooks' startContainer hooks itself, inside
  // the task's process right before its exec. If not, the agent runs them
  // just before StartTask.
  virtual bool RunsStartContainerHooks() const { return false; }
  // Checks a task's `config` object (JSON; "" = none) before a job that
  // uses it is accepted: InvalidArgument, one line per problem, each
  // starting with "config.<field>: ". The default takes anything.
  virtual Status CheckConfig(const std::string& config_json) const {
    (void)config_json;
    return OkStatus();
  }
  virtual Fingerprint GetFingerprint() = 0;

  // Starts the task in config.cgroup (when set), as config.identity, with
  // its stdout and stderr on the given FIFOs. A tracked id → AlreadyExists
  // "task with ID \"x\" already started".
  virtual void StartTask(const TaskConfig& config, StartCallback done) = 0;
  // Reattaches to a task from a persisted handle after an agent restart.
  // Already tracked → OK, no-op. A task that is gone is still tracked: its
  // WaitTask reports how it ended (or that this is unknown).
  virtual void RecoverTask(const TaskHandle& handle, DoneCallback done) = 0;
  // done runs once with the exit result (at once if it has exited); an
  // unknown id gives exit_code -1 with the error.
  virtual void WaitTask(const std::string& id, WaitCallback done) = 0;
  // Signal (the task layer passes the task's kill_signal when the caller
  // named none; "" = SIGTERM), wait up to timeout, then
  // SIGKILL. done runs when the task is gone. Stopping an exited task is
  // not an error.
  virtual void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                        DoneCallback done) = 0;
  // Forgets the task. Running without force → FailedPrecondition "cannot
  // destroy running task"; with force it is killed first.
  virtual void DestroyTask(const std::string& id, bool force, DoneCallback done) = 0;
  virtual void InspectTask(const std::string& id, InspectCallback done) = 0;
  virtual void SignalTask(const std::string& id, const std::string& signal, DoneCallback done) = 0;
  // Runs cmd in the task's context (its cgroup, identity, rlimits,
  // environment and working dir).
  virtual void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                        ExecCallback done) = 0;
  virtual void TaskStats(const std::string& id, StatsCallback done) = 0;
  // Every task the driver still has something of, started by this agent run
  // or an earlier one (a driver plugin keeping state across its restarts).
  // Optional: Unimplemented by default (the built-in exec driver knows only
  // what it is told).
  using ListCallback = std::function<void(Result<std::vector<std::string>>)>;
  virtual void ListTasks(ListCallback done) { done(Error(Code::kUnimplemented, "ListTasks is not implemented")); }
  // The task is gone for good (removed, or dropped from its job; not
  // between restarts): what the driver keeps of it on the node goes. The
  // task's own dir and logs are the task layer's.
  virtual Status RemoveTaskData(const TaskConfig& config) {
    (void)config;
    return OkStatus();
  }
  // Fan-out of the driver's own events; a subscriber must not block.
  virtual uint64_t SubscribeEvents(EventCallback cb) = 0;
  virtual void UnsubscribeEvents(uint64_t id) = 0;
};

}  // namespace outpost::driver
