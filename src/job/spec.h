// Job specs. Owns: the JobSpec/TaskSpec types with their defaults, parsing a
// job document (JSON, written by people or provisioning scripts) with every
// error reported at once by JSON path, the size limits, the canonical
// encoding (defaults filled in) used for persistence and `inspect`, and the
// per-task fingerprints that tell whether a task must be restarted when its
// job is updated, or only has its limits changed. Does not run anything
// (job/supervisor, job/manager do).
//
// `resources` (cgroup v2 limits, task and job level) is parsed in
// spec_resources.cc, the canonical form in spec_json.cc. A task's `hooks`
// (OCI lifecycle hooks, hooks/hook.h) are read here too, and so is the job's
// `network` (net/spec.h). The job-level `hooks` is a recognised key refused
// as "not supported yet", so supporting it changes no existing field.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "devices/validate.h"
#include "driver/driver.h"
#include "hooks/hook.h"
#include "net/spec.h"

namespace outpost::job {

// Limits (docs/job-spec.md "Limits"); a spec over any of them is refused
// with a message naming the path and the limit.
constexpr size_t kMaxSpecBytes = 1 << 20;     // whole document
constexpr int kMaxSpecDepth = 16;             // JSON nesting
constexpr size_t kMaxIdLength = 63;           // job id, task name
constexpr size_t kMaxTasks = 64;              // tasks per job
constexpr size_t kMaxStringBytes = 4096;      // command, each arg, each env value, paths
constexpr size_t kMaxArgs = 256;              // args per task
constexpr size_t kMaxDriverConfigBytes = 64 << 10;  // a task's driver config, as JSON
constexpr size_t kMaxEnvBytes = 64 << 10;     // sum of name=value over a task's env
constexpr size_t kMaxLabels = 64;             // labels, and annotations, per job
constexpr size_t kMaxLabelBytes = 1024;       // each label / annotation key or value
constexpr size_t kMaxTaskHooks = 64;          // OCI hooks per task, all stages
constexpr size_t kMaxDeviceResources = 64;    // resources in a task's resources.devices
constexpr int64_t kMaxDeviceCount = 10000;    // devices of one resource (devices::kMaxDevices)

// An rlimit of "unlimited": RLIM_INFINITY once cast to the (64-bit) rlim_t.
constexpr uint64_t kRlimitUnlimited = ~uint64_t{0};

enum class RestartPolicy { kAlways, kOnFailure, kNever };
const char* RestartPolicyName(RestartPolicy p);  // "always", "on-failure", "never"

struct Restart {
  RestartPolicy policy = RestartPolicy::kOnFailure;
  int64_t delay_nanos = 1LL * 1000000000;       // first backoff
  int64_t max_delay_nanos = 60LL * 1000000000;  // backoff doubles up to this
  int64_t attempts = 0;                         // restarts allowed within interval; 0 = unlimited (the default)
  int64_t interval_nanos = 300LL * 1000000000;  // window attempts are counted in (with attempts > 0)
};

// Nomad's task lifecycle: main tasks start after every prestart task has
// finished successfully (or, for a prestart sidecar, is running); poststart
// tasks start once every main task is running. Sidecars run for the life of
// the job; non-sidecar hook tasks run to completion.
enum class Hook { kMain, kPrestart, kPoststart };
const char* HookName(Hook h);  // "main", "prestart", "poststart"

struct Lifecycle {
  Hook hook = Hook::kMain;
  bool sidecar = false;
};

// A health check of a task (docs/job-spec.md "checks"; run by job/checks).
enum class CheckType { kExec, kHttp, kTcp };
const char* CheckTypeName(CheckType t);  // "exec", "http", "tcp"
enum class OnUnhealthy { kNone, kRestart };
const char* OnUnhealthyName(OnUnhealthy o);  // "none", "restart"

constexpr size_t kMaxChecks = 8;  // checks per task

struct CheckSpec {
  CheckType type = CheckType::kTcp;
  std::string name;                  // "" = derived: "http /healthz", "tcp 8080", "exec pg_isready"
  std::vector<std::string> command;  // exec: argv, run in the task's context (driver ExecTask)
  std::string path = "/";            // http: the request target
  int port = 0;                      // http, tcp
  std::string address = "127.0.0.1"; // http, tcp: IPv4, in the job's network namespace when it has one
  int64_t interval_nanos = 10LL * 1000000000;
  int64_t timeout_nanos = 2LL * 1000000000;
  int64_t grace_nanos = 0;           // after each start, before the first check
  int failure_threshold = 3;         // consecutive failures: unhealthy
  int success_threshold = 1;         // consecutive successes: healthy (again)
  OnUnhealthy on_unhealthy = OnUnhealthy::kNone;
  // "http /healthz", or name when set: how events and inspect name it.
  std::string Label() const;
};

struct TaskSpec {
  std::string name;
  std::string driver = "exec";
  // The task's "config" object for its driver, as canonical JSON (keys
  // sorted); "" = none. What is in it is the driver's to check.
  std::string driver_config;
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string user;     // name or number; "" = the agent's user
  std::string group;    // name or number; "" = the user's primary group
  std::string workdir;  // absolute; "" = the task's own dir
  std::vector<proc::Rlimit> rlimits;
  int log_max_files = 10;
  uint64_t log_max_file_size = 10u << 20;
  std::string kill_signal = "SIGTERM";
  int64_t kill_timeout_nanos = 5LL * 1000000000;
  Restart restart;
  Lifecycle lifecycle;
  cgroup::ResourcesBox resources;  // the task's cgroup; updated live (not in TaskFingerprint)
  // resources.devices: device plugin resources and how many devices of
  // each, sorted by name (docs/devices.md). Part of the fingerprint: a
  // changed request restarts the task.
  std::vector<devices::Request> devices;
  // OCI hooks in the runtime-spec form (docs/hooks.md), run around every
  // start of the task; in the canonical form only when there are any.
  hooks::HookSet hooks;
  std::map<std::string, std::string> annotations;  // the task's own, over the job's
  // The job's annotations (not part of the task's canonical form: set by
  // the parser from the job document, one copy shared by the job's tasks),
  // for hooks and the task's bundle; null when the job has none.
  std::shared_ptr<const std::map<std::string, std::string>> job_annotations;
  // The job's network (one copy shared by the job's tasks; set by the
  // parser); null for mode "host". Part of the task's fingerprint: a
  // changed network restarts every task of the job.
  std::shared_ptr<const net::NetworkSpec> network;
  // Health checks (spec_checks.cc); part of the fingerprint (a changed
  // check restarts the task), left out of the canonical form when empty.
  std::vector<CheckSpec> checks;
};

struct JobSpec {
  std::string id;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  cgroup::Resources resources;  // the job's cgroup (parent of its tasks' cgroups)
  net::NetworkSpec network;     // the job's network namespace (docs/networking.md)
  // How long a task must stay up to count as healthy (`outpost run` waits
  // for that). Not part of any task's fingerprint: changing it restarts
  // nothing.
  int64_t min_healthy_time_nanos = 1000000000;
  std::vector<TaskSpec> tasks;  // in document order; names unique
};

// Parses and validates a job document. source names it in messages ("" for
// none): each error is one line "<source>: <path>: <what is wrong>" (or
// "<path>: ..." without a source), all of them joined by '\n', with Code
// kInvalidArgument.
Result<JobSpec> ParseJobSpec(const std::string& text, const std::string& source = "");
// Same for an already parsed document.
Result<JobSpec> JobSpecFromJson(const picojson::value& doc, const std::string& source = "");

// Canonical form: every field with its effective value (defaults filled in,
// durations as strings like "1m30s", sizes in bytes). ParseJobSpec of its
// serialisation gives back an equal spec. `resources` holds only the limits
// that are set (see ResourcesToJson); the job-level `resources` is left out
// when it sets none.
picojson::value JobSpecToJson(const JobSpec& spec);
picojson::value TaskSpecToJson(const TaskSpec& spec);

// Changes when anything that needs a restart of the task changes: every
// field except `resources`, which the agent changes live in the task's
// cgroup. Stable across versions of the binary that do not change the
// canonical form (tasks without limits keep the fingerprint they had before
// resources existed).
std::string TaskFingerprint(const TaskSpec& spec);

// Changes when any limit in r changes (task or job level): with an equal
// TaskFingerprint, a different ResourcesFingerprint means "apply the new
// limits, do not restart". 16 hex digits, like TaskFingerprint.
std::string ResourcesFingerprint(const cgroup::Resources& r);

// The `resources` object (spec_resources.cc). Reads it at path (e.g.
// "tasks[0].resources"), adding one "<path>.<field>: <problem>" line to
// errors per problem; unset limits keep cgroup::Resources' defaults. io.max
// device paths are resolved with stat() on this node. devices: a task's
// `devices` requests go there (sorted by resource); null for the job level,
// where `devices` is refused (devices are requested per task).
cgroup::Resources ResourcesFromJson(const picojson::value& v, const std::string& path,
                                  std::vector<std::string>* errors,
                                  std::vector<devices::Request>* devices = nullptr);
// A task's resources.devices in the canonical form: {"vendor.example/camera": 1}.
picojson::value DevicesToJson(const std::vector<devices::Request>& devices);
// Only the limits that are set: cpu.max as "QUOTA PERIOD", cpu.shares as the
// weight it maps to, sizes in bytes, io.max devices as "MAJOR:MINOR".
picojson::value ResourcesToJson(const cgroup::Resources& r);

// A task's `checks` array at path ("tasks[0].checks"), spec_checks.cc.
std::vector<CheckSpec> ChecksFromJson(const picojson::value& v, const std::string& path,
                                      std::vector<std::string>* errors);
picojson::value ChecksToJson(const std::vector<CheckSpec>& checks);

// Job ids and task names: 1-63 of [A-Za-z0-9_-], starting with a letter or
// digit. (No '.': the driver's task id is "<job>.<task>".)
Status ValidateName(const std::string& name, const char* what);

}  // namespace outpost::job
