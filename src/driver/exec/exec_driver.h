// The built-in `exec` driver. Owns: every task process it started or
// recovered (pid, pidfd, process group), their exit results, stop/kill
// escalation, exec sessions, /proc-based stats, fingerprinting, and the
// persisted task handles under <state_dir>/tasks/<id>.json.
//
// Who reaps: with a keeper (the normal case) tasks are spawned with
// CLONE_PARENT, the keeper reaps them and reports exits through
// OnProcessExit; without one the driver reaps its own children through the
// loop. A recovered task whose parent is neither (the whole agent died and
// init adopted it) is watched through a pidfd and ends with "exit status
// unknown".
//
// Does not own log FIFOs or log files (task/log_pipe), nor restart policy
// (the job supervisor).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loop/loop.h"
#include "driver/driver.h"
#include "cgroup/cgroup.h"
#include "proc/users.h"

namespace outpost::driver {

class ExecDriver : public Driver {
 public:
  struct Options {
    std::string state_dir;     // handles live in <state_dir>/tasks
    bool keeper_is_parent = false;
    pid_t keeper_pid = 0;
    int64_t fingerprint_period_nanos = 30LL * 1000000000;
    size_t exec_output_limit = 64 << 10;
    proc::UserDb users;
    // cgroup v2 (may be null, or unavailable): tasks get a cgroup each.
    cgroup::Cgroups* cgroups = nullptr;
    cgroup::OomWatcher* oom = nullptr;
    // Where cgroup v2 is unusable: start tasks with limits anyway (config
    // cgroup_allow_without_limits) instead of refusing them.
    bool allow_without_limits = false;
  };

  static Result<std::unique_ptr<ExecDriver>> Create(Loop* loop, Options options);
  ~ExecDriver() override;

  std::string Name() const override { return "exec"; }
  Capabilities GetCapabilities() const override;
  Fingerprint GetFingerprint() override;
  void StartTask(const TaskConfig& config, StartCallback done) override;
  Status RecoverTask(const TaskHandle& handle) override;
  Status WaitTask(const std::string& id, WaitCallback done) override;
  void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal, DoneCallback done) override;
  void DestroyTask(const std::string& id, bool force, DoneCallback done) override;
  Result<TaskStatus> InspectTask(const std::string& id) override;
  Status SignalTask(const std::string& id, const std::string& signal) override;
  void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                ExecCallback done) override;
  Result<TaskStats> GetTaskStats(const std::string& id) override;
  std::vector<std::string> ListTasks() override;
  uint64_t SubscribeEvents(EventCallback cb) override;
  void UnsubscribeEvents(uint64_t id) override;

  // A process exited (reported by the keeper). Returns after the result is
  // persisted, so the caller may then acknowledge it to the keeper.
  void OnProcessExit(pid_t pid, int wait_status, int64_t unix_nanos);
  // Loads every persisted handle and recovers it. Tasks whose process is
  // gone wait for the keeper's journal; call JournalReplayed() once the
  // keeper has resent it (or at once without a keeper).
  Status RecoverAll();
  void JournalReplayed();

  const Options& options() const { return options_; }
  // The config a tracked task was started with (also after recovery).
  Result<TaskConfig> ConfigOf(const std::string& id);

  // Persisted handle encoding (exposed for tests).
  static std::string EncodeHandle(const TaskHandle& h, const ExitResult* exit, int64_t completed_at);
  static Result<TaskHandle> DecodeHandle(const std::string& text, ExitResult* exit, int64_t* completed_at,
                                         bool* has_exit);

 private:
  struct Task;
  struct ExecSession;

  ExecDriver(Loop* loop, Options options);

  Task* Find(const std::string& id);
  Task* FindByPid(pid_t pid);
  void Finish(Task* t, const ExitResult& result, int64_t unix_nanos);
  void Persist(Task* t);
  void KillEverything(Task* t);
  void Emit(const Task& t, const std::string& type, const std::string& message);
  std::string HandlePath(const std::string& id) const;
  void RefreshFingerprint();
  void WatchForeignProcess(Task* t);
  // cgroup side of a start (task/cgroup): creates the task's cgroup and
  // returns its fd for CLONE_INTO_CGROUP (invalid fd: no cgroup).
  Result<UniqueFd> PrepareCgroup(const TaskConfig& cfg, std::string* path, uint64_t* oom_base);
  void WatchOom(Task* t);
  TaskStats CgroupTaskStats(Task* t, const cgroup::CgroupStats& c, int64_t now, TaskStats s);
  cgroup::Cgroups* usable_cgroups() const {
    return options_.cgroups && options_.cgroups->available() ? options_.cgroups : nullptr;
  }

  Loop* loop_;
  Options options_;
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::map<uint64_t, EventCallback> subscribers_;
  uint64_t next_subscriber_ = 1;
  Fingerprint fingerprint_;
  Loop::TimerId fingerprint_timer_ = 0;
  bool journal_replayed_ = false;
  std::vector<std::unique_ptr<ExecSession>> sessions_;
};

// Task ids become file names: 1-128 of [A-Za-z0-9_.-], not starting with '.'.
Status ValidateTaskId(const std::string& id);

}  // namespace outpost::driver
