// Tasks as the agent runs them, whatever their driver. Owns: each task's
// record (persisted under <state_dir>/tasks/<id>.json, task/record), its
// on-disk layout (task dir, log dir, FIFOs), its log plumbing (two LogPipes:
// FIFO -> rotating files), its cgroup and dynamic user, the start and stop
// pipelines that put these around the driver (task/lifecycle.cc), what
// happens when a task ends (leftovers killed, OOM told apart, exit
// persisted, logs drained, event), and recovery of all of it when the
// worker starts. Drivers are reached only through the Driver contract, found
// in the registry by the name in each task's config.
//
// Layout:
//   <state_dir>/tasks/<id>.json          the task's record (task/record)
//   <state_dir>/task-data/<id>/          the task's private dir (default workdir)
//   <state_dir>/logs/<id>/<name>.stdout  logs (+ .1 … .N-1), same for stderr
//   <runtime_dir>/fifo/<id>.stdout       FIFOs and their cursor records
//
// Does not own restart policy or jobs (job/), the event history (it
// publishes to an EventSink), or the cgroup tree itself (cgroup/).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "devices/plugins.h"
#include "driver/driver.h"
#include "driver/registry.h"
#include "hooks/runner.h"
#include "loop/loop.h"
#include "loop/pending_writes.h"
#include "proc/users.h"
#include "task/events.h"
#include "task/record.h"

namespace outpost {
namespace cgroup {
class Cgroups;
class OomWatcher;
}  // namespace cgroup
namespace proc {
class UidPool;
}
namespace net {
class Networks;
}
namespace nri {
class Adaptation;
struct PodSandbox;
struct Container;
struct Resources;
}  // namespace nri
namespace hooks {
class Catalog;
class StageRun;
struct ResolvedHook;
}  // namespace hooks

namespace task {

struct TaskView {
  driver::TaskStatus status;
  std::vector<hooks::HookRun> hook_runs;  // the last run of each hook
  std::string nri;  // what NRI plugins did at its CreateContainer ("" = none consulted)
  driver::DriverNetwork network;  // where the driver says the task can be reached
  driver::TaskConfig config;
  std::string log_dir;
  uint64_t log_bytes = 0;
  uint64_t log_dropped = 0;
  std::string log_error;
};

// Task ids become file names: 1-128 of [A-Za-z0-9_.-], not starting with '.'.
Status ValidateTaskId(const std::string& id);

class TaskManager {
 public:
  struct Options {
    std::string state_dir;
    std::string runtime_dir;
    driver::Registry* drivers = nullptr;
    EventSink* events = nullptr;
    cgroup::Cgroups* cgroups = nullptr;  // may be unavailable (see Cgroups::reason)
    cgroup::OomWatcher* oom = nullptr;
    bool allow_without_limits = false;
    // Pool for user "dynamic" (docs/dynamic-users.md); null = unavailable,
    // with the reason in dynamic_users_problem.
    proc::UidPool* uids = nullptr;
    std::string dynamic_users_problem;
    proc::UserDb users;  // where user and group names are looked up
    // The first worker since the node booted: no process of an earlier
    // agent can be left, so recovery does not look for unrecorded ones.
    bool first_since_boot = false;
    // How long running tasks of a driver that is not registered (a driver
    // plugin that has not come back yet after an agent restart) wait for
    // it before they count as lost.
    int64_t driver_grace_nanos = 30LL * 1000000000;
    // OCI hooks (docs/hooks.md): the node's (hooks.d, per-stage
    // directories; null = only the job spec's), the timeout of a hook that
    // sets none, and whether a failed poststart hook stops the task
    // (runtime-spec 1.3) or is only logged (before 1.3).
    hooks::Catalog* hooks = nullptr;
    int64_t hook_timeout_seconds = 10;
    bool poststart_failure_stops = true;
    // Job networks (docs/networking.md); null = unavailable, with the
    // reason in networks_problem (a job asking for one fails to start).
    net::Networks* networks = nullptr;
    std::string networks_problem;
    // NRI (docs/nri.md); null = off. nri_pod adds what the job layer knows
    // to a job's pod sandbox (labels, annotations, addresses).
    nri::Adaptation* nri = nullptr;
    std::function<void(const std::string& job, nri::PodSandbox* pod)> nri_pod;
  };
  using DoneCallback = std::function<void(Status)>;
  using StartedCallback = std::function<void(Result<TaskView>)>;
  using ExitCallback = std::function<void(const driver::ExitResult&)>;

  static Result<std::unique_ptr<TaskManager>> Create(Loop* loop, Options options);
  // Device plugins (docs/devices.md), made after the task manager (they
  // hang off the plugin registry); null: a task asking for devices fails
  // to start, saying they are off.
  void SetDevices(devices::DevicePlugins* d) { devices_ = d; }
  ~TaskManager();

  // Loads every persisted task, reopens its logs and recovers the running
  // ones through their drivers. A task whose process is gone learns how it
  // ended from its driver (for exec: after the keeper's journal replay).
  Status Recover();

  // The start pipeline (task/lifecycle.cc). An ended instance with the same
  // id makes way (its logs and task dir stay). started runs once with the
  // outcome; after a successful start, exited runs once when the task ends.
  void Start(driver::TaskConfig config, StartedCallback started, ExitCallback exited = nullptr);
  // exited runs once when the current instance ends (at once if it has).
  // NotFound when there is no instance.
  Status Watch(const std::string& id, ExitCallback exited);
  // The stop pipeline: signal, wait up to timeout (< 0: the task's own
  // kill_timeout), kill, and everything left in its cgroup. The task stays
  // (exited) until destroyed.
  void Stop(const std::string& id, int64_t timeout_nanos, const std::string& signal, DoneCallback done);
  // The destroy pipeline: the driver forgets it (a running task only with
  // force: it is killed first), its dynamic user is released, its cgroup
  // removed, its logs closed (files stay) and its record removed.
  void Destroy(const std::string& id, bool force, DoneCallback done);
  // Destroy (forced), and the task dir and log files go too. A task that
  // does not exist is not an error.
  void Purge(const std::string& id, DoneCallback done);

  Result<TaskView> Inspect(const std::string& id) const;
  std::vector<TaskView> List() const;
  void Signal(const std::string& id, const std::string& signal, DoneCallback done);
  void Exec(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
            driver::Driver::ExecCallback done);
  // From the task's cgroup where it has one (outpost owns it, whatever the
  // driver), else from its driver.
  void Stats(const std::string& id, driver::Driver::StatsCallback done);
  // Whether the task's process is alive right now, asked of its driver (an
  // exit not reported yet counts as not alive).
  void CheckAlive(const std::string& id, std::function<void(bool)> done);
  // Live limits: a task's cgroup, and a job's cgroup (created if missing).
  Status UpdateResources(const std::string& id, const cgroup::Resources& r);
  Status ApplyJobResources(const std::string& job, const cgroup::Resources& r);
  // A driver plugin's active instance changed (it registered, came back,
  // or a newer instance took over): its running tasks are recovered through
  // it (a task it tracks already is a no-op), tasks that waited for it
  // included, and their exits waited for again.
  void OnDriverChanged(const std::string& driver_name);
  // Destroys what the driver has (ListTasks) that no record accounts for.
  void DestroyOrphans(const std::string& driver_name);
  // The driver's events (a plugin's TaskEvents) go to its tasks' events
  // from now on; once per driver.
  void SubscribeTo(const std::string& driver_name);
  // A driver plugin had no connected instance for its grace period: its
  // running tasks are lost (exit unknown), and their restart policy applies.
  void OnDriverGone(const std::string& driver_name, const std::string& why);
  // Why a task's driver cannot be reached now ("" = it can): "driver x is
  // not registered" (a driver plugin not back yet) or the driver's own
  // reason (disconnected). Its running tasks are then in an unknown state.
  std::string DriverProblem(const std::string& driver_name) const;
  // The driver is away and given up on: its grace period ended with no
  // instance connected (or, never registered since this agent started, as
  // long ago as that). Then a task of it is forgotten without telling it.
  bool DriverGone(const std::string& driver_name) const;
  // The named driver's fingerprint (NotFound for an unknown driver).
  Result<driver::Fingerprint> Fingerprint(const std::string& driver_name) const;

  // The hooks a start of the task would run, per stage, and why each
  // applies (*why) or a hooks.d file does not (*skipped).
  hooks::HookSet ResolveHooks(const driver::TaskConfig& c, std::vector<hooks::ResolvedHook>* why,
                              std::vector<std::string>* skipped) const;

  // Path of a task's active log file for stream "stdout" / "stderr".
  Result<std::string> LogPath(const std::string& id, bool stderr_stream) const;
  int LogMaxFiles(const std::string& id) const;
  // Log problems of all tasks, for `outpost status`.
  std::vector<std::string> LogProblems() const;

  // Maps "JOB/TASK" to a task id for the task API (set by the job layer).
  using IdResolver = std::function<Result<std::string>(const std::string& job, const std::string& task)>;
  // Told after OnDriverGone (the job layer: removals waiting for the driver).
  void SetDriverGoneListener(std::function<void(const std::string& driver_name)> fn) {
    driver_gone_ = std::move(fn);
  }
  void SetIdResolver(IdResolver r) { resolver_ = std::move(r); }
  // id unchanged unless it has the form JOB/TASK.
  Result<std::string> ResolveId(const std::string& id) const;

  size_t task_count() const { return tasks_.size(); }

  // NRI (task/nri_steps.cc): every running task as a container and every
  // pod sandbox (a job whose RunPodSandbox was sent and not yet followed
  // by StopPodSandbox), for a plugin's Synchronize; a plugin's update of a
  // running task's limits (applied over its current ones).
  void NriState(std::vector<nri::PodSandbox>* pods, std::vector<nri::Container>* containers) const;
  Status ApplyNriUpdate(const std::string& id, const nri::Resources& update);
  // The job's last task stopped: StopPodSandbox, once after its
  // RunPodSandbox (sent before its first task's CreateContainer);
  // RemovePodSandbox follows when its last task is removed.
  void NriPodEnded(const std::string& job);
  // A start waiting for required NRI plugins, stopped meanwhile: the wait
  // is given up and the start fails ("stopped while waiting ..."). False
  // when the task is not waiting.
  bool AbandonNriWait(const std::string& id);

  // Hands a task's FIFOs (opened O_RDWR) to whoever keeps them open across
  // worker restarts (the keeper), and takes them back. Set once a keeper is
  // attached; HoldAllFifos re-hands every task's (a new keeper holds none).
  using HoldFifosFn = std::function<void(const std::string& id, const std::vector<int>& fds)>;
  using ReleaseFifosFn = std::function<void(const std::string& id)>;
  void SetFifoHolder(HoldFifosFn hold, ReleaseFifosFn release);
  void HoldAllFifos();

 private:
  struct Task;
  struct StartOp;
  class StreamPaths;  // a task's log paths, derived when asked (manager.cc)
  struct Logs;

  TaskManager(Loop* loop, Options options);
  Task* Find(const std::string& id) const;
  void PublishDriverEvent(const driver::TaskEvent& ev);
  driver::Driver* DriverOf(const Task& t) const;
  std::string FifoPath(const std::string& id, const char* stream) const;
  std::string TaskDirPath(const std::string& id) const;
  std::string LogDirPath(const std::string& id) const;
  // The four paths a start derives from a task's id (task dir, log dir and
  // the two FIFOs) are not kept per task in memory: one equal to what
  // this agent derives is stored empty, with its bit in Task::derived_paths,
  // and filled in wherever a whole config or record leaves the manager
  // (records on disk, views, drivers, log plumbing).
  void DropDerivedPaths(Task* t) const;
  void FillDerivedPaths(uint8_t derived, driver::TaskConfig* c) const;
  driver::TaskConfig FullConfig(const Task& t) const;
  TaskRecord FullRecord(const Task& t) const;
  std::string RecordPath(const std::string& id) const;
  Status OpenLogs(const driver::TaskConfig& config, uid_t uid, gid_t gid, Task* t);
  void CloseLogs(Task* t, bool remove_fifos);
  void KillUnrecorded(const std::vector<std::string>& running);
  void HoldFifos(Task& t);
  // A restart keeps the ended instance's log pipes when they would be made
  // the same (same identity, so the same owner; same rotation): see Prepare.
  struct KeptStreams {
    bool kept = false;
    bool switch_user = false;
    uid_t uid = 0;
    gid_t gid = 0;
    int max_files = 0;
    uint64_t max_file_size = 0;
    bool Same(const driver::TaskConfig& c) const {
      return kept && c.identity.switch_user == switch_user && c.identity.uid == uid && c.identity.gid == gid &&
             c.log_max_files == max_files && c.log_max_file_size == max_file_size;
    }
  };
  static KeptStreams KeepStreams(Task* t);
  // Writes t's record. On a full disk (ENOSPC, EDQUOT) it is kept in memory
  // and written when space returns (loop/pending_writes).
  void Persist(const Task& t);
  void Emit(const driver::TaskConfig& c, const std::string& type, const std::string& message);
  void WatchOom(const Task& t);
  // The "oom-killed" event, once per instance: from the memory.events watch
  // or, when the exit is handled before the watch's notification, from it.
  void ReportOom(Task* t, uint64_t kills);
  void WaitForExit(const std::string& id);

  // ---- task/lifecycle.cc: the pipelines, one function per step ----
  // Start: Prepare -> JoinNetwork -> CreateCgroup -> bundle and hooks ->
  // SpawnThroughDriver -> poststart hooks -> RecordStarted.
  struct StartStep;
  static const StartStep* StartSteps(size_t* count);
  void RunStart(std::shared_ptr<StartOp> op);
  void FailStart(StartOp* op, const Error& e);
  void Prepare(StartOp* op, DoneCallback done);
  void UndoPrepare(StartOp* op);
  void CreateCgroup(StartOp* op, DoneCallback done);
  void UndoCreateCgroup(StartOp* op);
  void SpawnThroughDriver(StartOp* op, DoneCallback done);
  void UndoSpawn(StartOp* op);
  void RecordStarted(StartOp* op, DoneCallback done);
  // task/nri_steps.cc: the NRI events of a task's life.
  bool NriActive() const;
  nri::PodSandbox NriPod(const driver::TaskConfig& c) const;
  void NriCreate(StartOp* op, DoneCallback done);
  // The start waits for required plugins (why: which, and what happened),
  // then NriCreate again.
  void NriWait(StartOp* op, DoneCallback done, const std::string& why);
  void UndoNriCreate(StartOp* op);
  void NriStarted(StartOp* op, DoneCallback done);
  void NriPostStart(StartOp* op, DoneCallback done);
  void NriStopped(Task* t);
  void NriRemoved(Task* t);
  void NriUpdated(const std::string& id, const cgroup::Resources& requested);
  void NriPodUpdated(const std::string& job, const cgroup::Resources& r);
  // task/network_step.cc: the job's network (nothing for mode "host").
  void JoinNetwork(StartOp* op, DoneCallback done);
  // task/device_step.cc: device plugin resources (nothing without any).
  void AllocateDevices(StartOp* op, DoneCallback done);
  Status ApplyGrant(const devices::Grant& g, StartOp* op);
  // task/hook_steps.cc: the OCI hook steps.
  std::string BundlePath(const std::string& id) const;
  // What the task's config.json says (hooks: the merged set).
  hooks::BundleInput BundleInputOf(const driver::TaskConfig& c, hooks::HookSet merged) const;
  // Whether the task's driver runs its OCI hooks (Capabilities::oci_runtime).
  bool RuntimeRunsHooks(const driver::TaskConfig& c) const;
  void WriteBundle(StartOp* op, DoneCallback done);
  void RunCreateHooks(StartOp* op, DoneCallback done);
  void RunCreateContainerHooks(StartOp* op, DoneCallback done);
  void RunStartContainerForDriver(StartOp* op, DoneCallback done);
  void RunPoststartHooks(StartOp* op, DoneCallback done);
  // Runs the stages in order (stages without hooks skipped); done gets the
  // first failure. pid goes into the state (0: none).
  void RunHooks(const driver::TaskConfig& c, std::vector<hooks::Stage> stages, pid_t pid,
                bool continue_after_failure, DoneCallback done);
  void RecordHookRun(const driver::TaskConfig& c, const hooks::HookRun& r);
  // startContainer hooks a driver ran inside the task's process: they
  // succeeded, since the task started (a failure fails the start).
  void RecordInChildHooks(const driver::TaskConfig& c);
  // The poststop hooks of an ended instance (from its bundle when it was
  // recovered), then `then`.
  void RunPoststop(const driver::TaskConfig& c, std::function<void()> then);
  // The hooks a task's bundle lists (null, logged, when it cannot be read).
  std::shared_ptr<const driver::TaskHooks> LoadBundleHooks(const std::string& id, const std::string& bundle) const;
  // When a task has ended (by itself or stopped): KillCgroup -> TellOom ->
  // persist the exit -> drain logs -> event -> exit callbacks.
  void OnExit(const std::string& id, const driver::ExitResult& exit);
  // RecoverTask through the task's driver, then its exit waited for.
  void RecoverThroughDriver(const std::string& id);
  // Stop: StopThroughDriver -> KillCgroup -> AwaitExit. Destroy: DestroyThroughDriver ->
  // ReleaseUser -> RemoveCgroup -> Forget.
  void StopThroughDriver(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                         DoneCallback done);
  void KillCgroup(const Task& t);
  void AwaitExit(const std::string& id, DoneCallback done);
  static constexpr int64_t kStopExitWaitNanos = 10LL * 1000000000;
  void DestroyThroughDriver(const std::string& id, bool force, DoneCallback done);
  void ReleaseUser(const std::string& id);
  void RemoveCgroup(const driver::TaskConfig& c);
  void RemoveCgroupDir(const std::string& id, const std::string& job, const std::string& path, int attempt);
  void Forget(const std::string& id);

  Loop* loop_;
  Options options_;
  devices::DevicePlugins* devices_ = nullptr;  // SetDevices; null: off
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::map<std::string, std::pair<driver::Driver*, uint64_t>> subscriptions_;  // by driver name
  // Running tasks found at recovery whose driver was not registered, by
  // driver name; a timer per driver ends the wait.
  std::map<std::string, std::set<std::string>> awaiting_driver_;
  std::map<std::string, Loop::TimerId> awaiting_timers_;
  // Drivers given up on: no connected instance for their grace period
  // (OnDriverGone) until they register again. What is left to destroy of
  // their tasks is destroyed when they are back (DestroyOrphans).
  std::set<std::string> gone_drivers_;
  std::function<void(const std::string&)> driver_gone_;
  int64_t created_mono_ = 0;
  int64_t created_wall_ = 0;  // wall time of Create: older driver events are replays
  uint64_t generated_ids_ = 0;
  IdResolver resolver_;
  HoldFifosFn hold_fifos_;
  ReleaseFifosFn release_fifos_;
  PendingWrites unsaved_;  // records the full disk could not take yet
  std::map<uint64_t, std::unique_ptr<hooks::StageRun>> running_hooks_;
  uint64_t hook_runs_started_ = 0;
  std::map<std::string, std::vector<hooks::HookRun>> hook_runs_;  // by task id
  // What waits for a task's poststop hooks, by task id (few at a time).
  std::map<std::string, std::vector<std::function<void()>>> after_poststop_;
  // Jobs whose RunPodSandbox was sent: true while running, false once
  // stopped (RemovePodSandbox follows its last task's RemoveContainer).
  mutable std::map<std::string, bool> nri_pods_;  // NriState marks pods the plugins learn of
  // Starts waiting for required NRI plugins, by task id: the wait and the
  // step's callback.
  std::map<std::string, std::pair<uint64_t, DoneCallback>> nri_waits_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace task
}  // namespace outpost
