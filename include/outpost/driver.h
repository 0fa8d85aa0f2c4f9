// outpost plugin library: task drivers in C++. Implement TaskDriver and
// call RunTaskDriver; the library registers as type "TaskDriver", version
// "v1", serves every method of outpost.driver.v1.Driver (proto/driver.proto)
// with the decoding and encoding done for you, answers WaitTask as a long
// poll (pending until ReportExit), and serves TaskEvents from a bounded ring
// filled by EmitEvent. A child started in StartTask (handle.pid) is reaped
// by the library on its loop (no polling) and its exit reported; the
// default StopTask, SignalTask, DestroyTask and InspectTask work on that
// pid's process group. See examples/plugin-driver/example_driver.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "outpost/plugin.h"

namespace outpost::plugin_sdk {

struct Rlimit {
  std::string name;  // "nofile", "nproc", "core", ...
  uint64_t soft = 0, hard = 0;
};

// What StartTaskRequest carries.
struct TaskConfig {
  std::string id;  // unique per start
  std::string job, name, command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string cwd;
  bool switch_user = false;  // false: run as the driver's own user
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;
  std::string user, home;
  std::vector<Rlimit> rlimits;
  std::string kill_signal;  // "SIGTERM" when empty
  int64_t kill_timeout_nanos = 0;
  std::string task_dir, stdout_path, stderr_path;
  std::string cgroup;       // cgroup v2 dir to start the task in ("" = none)
  std::string config_json;  // the task's `config` object
  // The job's pinned network namespace the task is to join before exec
  // (setns(CLONE_NEWNET) on the opened path; "" = the host's), and the
  // hostname it is to get in a UTS namespace of its own ("" = the node's).
  std::string netns;
  std::string hostname;
  // Only for a driver whose Capabilities::oci_runtime is set: the task as
  // an OCI runtime-spec config.json (JSON; proto/driver.proto, TaskConfig
  // field oci_spec), with the hooks, annotations, NRI mounts and devices,
  // resources, cgroupsPath and network namespace outpost decided.
  std::string oci_spec;
};

struct TaskHandle {
  int32_t version = 1;
  TaskConfig config;
  int32_t pid = 0;
  int64_t started_at_unix_nanos = 0;
  std::string driver_state;  // opaque to outpost, at most 64 KiB
};

struct ExitResult {
  int32_t exit_code = 0;  // 128+signo for a signal death; -1 unknown
  int32_t signal = 0;
  bool oom_killed = false;
  std::string error;
};

struct TaskStatus {
  enum State { kUnknown = 0, kRunning = 1, kExited = 2 };
  std::string id, name;
  State state = kUnknown;
  int32_t pid = 0;
  int64_t started_at_unix_nanos = 0, completed_at_unix_nanos = 0;
  ExitResult exit;
  std::map<std::string, std::string> attributes;
};

struct TaskStats {
  int64_t timestamp_unix_nanos = 0;
  uint64_t rss_bytes = 0, cpu_user_nanos = 0, cpu_system_nanos = 0;
  double cpu_percent = 0;
  std::vector<std::string> measured;
  std::map<std::string, uint64_t> cgroup;
};

struct ExecResult {
  int32_t exit_code = 0;
  std::string output;  // at most 4 KiB
  bool truncated = false;
};

struct Capabilities {
  bool send_signals = true;
  bool exec = false;
  std::string fs_isolation = "none";
  bool dynamic_workload_users = false;
  // Applied from NRI adjustments (in TaskConfig::oci_spec); an adjustment
  // a driver cannot apply fails the task's start.
  bool mounts = false;
  bool devices = false;
  bool oom_score_adj = false;
  // Runs tasks through an OCI runtime from TaskConfig::oci_spec, which runs
  // every OCI hook: outpost runs none for this driver's tasks.
  bool oci_runtime = false;
  // Network isolation modes: "host", "group" (joins TaskConfig::netns),
  // "none"; empty = all. Tasks of jobs with a network need "group".
  std::vector<std::string> network_isolation;
};

struct Fingerprint {
  int32_t health = 2;  // 0 undetected, 1 unhealthy, 2 healthy
  std::string description = "Healthy";
  std::map<std::string, std::string> attributes;
};

struct ConfigField {
  ConfigField() = default;
  // (A constructor, so that {"name", "string", true, "..."} stays valid
  // under -Wextra as fields are added.)
  ConfigField(std::string n, std::string t, bool req = false, std::string desc = "", std::vector<ConfigField> f = {},
              std::string fmt = "")
      : name(std::move(n)), type(std::move(t)), required(req), description(std::move(desc)), fields(std::move(f)),
        format(std::move(fmt)) {}
  std::string name;
  std::string type;  // string, number, bool, list, object
  bool required = false;
  std::string description;
  // An object's fields, or those of each item of a list of objects;
  // checked by outpost at submission like the top level (empty: not).
  // One level: a sub-field's own `fields` are not sent.
  std::vector<ConfigField> fields;
  std::string format;  // strings (and lists of them): "absolute_path" or ""
};

struct TaskEvent {
  std::string task_id;
  int64_t timestamp_unix_nanos = 0;  // 0: now
  std::string type, message;
  std::map<std::string, std::string> annotations;
};

// An answer: ok, or a gRPC code and message for the agent.
struct Answer {
  bool ok = true;
  Code code = Code::kInternal;
  std::string message;
  static Answer Ok() { return {}; }
  static Answer Fail(Code c, std::string m) { return {false, c, std::move(m)}; }
};

class TaskDriver {
 public:
  virtual ~TaskDriver() = default;

  virtual Capabilities GetCapabilities() { return {}; }
  virtual Fingerprint GetFingerprint() { return {}; }
  virtual std::vector<ConfigField> ConfigSchema() { return {}; }
  // Starts the task; fills handle (pid: the library reaps it if it is our
  // child, and signals its process group: make it a group leader).
  virtual Answer StartTask(const TaskConfig& config, TaskHandle* handle) = 0;
  // A task of an earlier instance; default: NotFound (not ours).
  virtual Answer RecoverTask(const TaskHandle& handle) { return DefaultRecoverTask(handle); }
  // Default: kill_signal, then SIGKILL after the timeout; done once the
  // exit is reported.
  virtual void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                        std::function<void(Answer)> done) {
    DefaultStopTask(id, timeout_nanos, signal, std::move(done));
  }
  virtual Answer DestroyTask(const std::string& id, bool force) { return DefaultDestroyTask(id, force); }
  virtual Answer InspectTask(const std::string& id, TaskStatus* status) { return DefaultInspectTask(id, status); }
  virtual Answer SignalTask(const std::string& id, const std::string& signal) { return DefaultSignalTask(id, signal); }
  // Default: the task's process (its pid; not its children) from /proc:
  // RSS and CPU time. The agent takes a task's stats from its cgroup where
  // it has one, so this is for nodes without cgroup v2.
  virtual Answer GetTaskStats(const std::string& id, TaskStats* stats) { return DefaultGetTaskStats(id, stats); }
  // Every task this driver still has something of (ListTasks): by default
  // those this instance started or recovered and has not destroyed. A
  // driver that keeps state across its own restarts (a container runtime's
  // state dir) reports what that holds, so that the agent can destroy what
  // no task record accounts for; DestroyTask must then take such an id.
  virtual std::vector<std::string> ListTasks() { return DefaultListTasks(); }
  virtual void ExecTask(const std::string&, const std::vector<std::string>&, int64_t,
                        std::function<void(Answer, ExecResult)> done) {
    done(Answer::Fail(Code::kUnimplemented, "ExecTask is not implemented"), ExecResult{});
  }

  // A child started by StartTask (handle.pid) exited: called on the loop
  // before the exit is reported, to amend it (oom_killed, an error) or to
  // clean up. Not called for exits the driver reports with ReportExit.
  virtual void TaskExited(const std::string& id, ExitResult* result) {
    (void)id;
    (void)result;
  }

  // The defaults, for an override to fall back on. (Every virtual is
  // inline, so a driver built with RTTI links with the library built
  // without.)
  Answer DefaultRecoverTask(const TaskHandle& handle);
  void DefaultStopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                       std::function<void(Answer)> done);
  Answer DefaultDestroyTask(const std::string& id, bool force);
  Answer DefaultInspectTask(const std::string& id, TaskStatus* status);
  Answer DefaultSignalTask(const std::string& id, const std::string& signal);
  Answer DefaultGetTaskStats(const std::string& id, TaskStats* stats);
  std::vector<std::string> DefaultListTasks() const;

  // For the author, from loop callbacks: the task exited (answers its
  // WaitTask calls; later ones get it at once), an event for TaskEvents.
  void ReportExit(const std::string& id, const ExitResult& result);
  void EmitEvent(TaskEvent event);
  // The plugin (timers: plugin()->After); set by RunTaskDriver.
  Plugin* plugin() const { return plugin_; }

 private:
  friend struct DriverServer;
  Plugin* plugin_ = nullptr;
  struct DriverServer* server_ = nullptr;
};

// Options for RunTaskDriver beyond Plugin's. before_call(method, run) is
// called for every Driver call instead of run() (tests: delay or drop it).
struct DriverOptions {
  std::function<void(const std::string& method, std::function<void()> run)> before_call;
  size_t events_kept = 256;
  std::function<void(Plugin*)> on_start;  // just before the plugin runs (timers, say)
};

// options.type is set here, and versions to {"v1"} when empty. Returns what Plugin::Run does.
int RunTaskDriver(Options options, TaskDriver& driver, DriverOptions driver_options = {});

// "SIGTERM", "TERM", "15" -> 15; 0 when unknown.
int SignalNumber(const std::string& name);

}  // namespace outpost::plugin_sdk
