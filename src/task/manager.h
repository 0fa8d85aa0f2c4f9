// Tasks as the agent runs them. Owns: the driver instance, each task's log
// plumbing (two LogPipes: FIFO -> rotating files), the on-disk layout of a
// task (task dir, log dir, FIFOs), the bounded event history behind
// `outpost events`, and recovery of all of it when the worker starts.
//
// Layout:
//   <state_dir>/tasks/<id>.json          driver handle (task/exec_driver)
//   <state_dir>/task-data/<id>/          the task's private dir (default workdir)
//   <state_dir>/logs/<id>/<name>.stdout  logs (+ .1 … .N-1), same for stderr
//   <runtime_dir>/fifo/<id>.stdout       FIFOs and their cursor records
//
// Does not own restart policy or jobs (job/ in a later issue).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/loop.h"
#include "driver/driver.h"
#include "driver/exec/exec_driver.h"

namespace outpost {
namespace logs {
class LogPipe;
}
namespace proc {
class UidPool;
}

namespace task {

struct TaskView {
  driver::TaskStatus status;
  driver::TaskConfig config;
  std::string log_dir;
  uint64_t log_bytes = 0;
  uint64_t log_dropped = 0;
  std::string log_error;
};

struct EventRecord {
  uint64_t seq = 0;
  driver::TaskEvent event;
};

class TaskManager {
 public:
  struct Options {
    std::string state_dir;
    std::string runtime_dir;
    bool keeper_is_parent = false;
    pid_t keeper_pid = 0;
    size_t event_history = 1000;
    cgroup::Cgroups* cgroups = nullptr;  // may be unavailable (see Cgroups::reason)
    cgroup::OomWatcher* oom = nullptr;
    bool allow_without_limits = false;
    // Pool for user "dynamic" (docs/dynamic-users.md); null = unavailable,
    // with the reason in dynamic_users_problem.
    proc::UidPool* uids = nullptr;
    std::string dynamic_users_problem;
  };

  static Result<std::unique_ptr<TaskManager>> Create(Loop* loop, Options options);
  ~TaskManager();

  // Recovers every persisted task and reopens its logs. Without a keeper,
  // tasks whose process is gone are reported "exit status unknown" at once;
  // with one, after JournalReplayed().
  Status Recover();
  void JournalReplayed() { driver_->JournalReplayed(); }
  // A process exited (from the keeper). Persisted before it returns.
  void OnProcessExit(pid_t pid, int wait_status, int64_t unix_nanos);

  using StartCallback = std::function<void(Result<TaskView>)>;
  void Start(driver::TaskConfig config, StartCallback done);
  void Stop(const std::string& id, int64_t timeout_nanos, const std::string& signal, driver::Driver::DoneCallback done);
  void Destroy(const std::string& id, bool force, driver::Driver::DoneCallback done);
  Result<TaskView> Inspect(const std::string& id);
  std::vector<TaskView> List();
  Status Signal(const std::string& id, const std::string& signal) { return driver_->SignalTask(id, signal); }
  void Exec(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
            driver::Driver::ExecCallback done) {
    driver_->ExecTask(id, cmd, timeout_nanos, std::move(done));
  }
  Result<driver::TaskStats> Stats(const std::string& id) { return driver_->GetTaskStats(id); }
  // Live limits: a task's cgroup, and a job's cgroup (created if missing).
  Status UpdateResources(const std::string& id, const cgroup::Resources& r);
  Status ApplyJobResources(const std::string& job, const cgroup::Resources& r);
  driver::Fingerprint Fingerprint() { return driver_->GetFingerprint(); }
  driver::Driver* driver() { return driver_.get(); }

  // Path of a task's active log file for stream "stdout" / "stderr".
  Result<std::string> LogPath(const std::string& id, bool stderr_stream);
  int LogMaxFiles(const std::string& id);

  // Removes an ended (or force-destroys a running) task together with its
  // task dir and log files. A task that does not exist is not an error.
  void Purge(const std::string& id, driver::Driver::DoneCallback done);

  // Events with seq > after_seq (task_id / job "" = all).
  std::vector<EventRecord> EventsAfter(uint64_t after_seq, const std::string& task_id,
                                       const std::string& job = "") const;
  // Events from above the driver (job supervision) join the same history.
  void RecordEvent(const driver::TaskEvent& ev) { Record(ev); }

  // Maps "JOB/TASK" to a task id for the task API (set by the job layer).
  using IdResolver = std::function<Result<std::string>(const std::string& job, const std::string& task)>;
  void SetIdResolver(IdResolver r) { resolver_ = std::move(r); }
  // id unchanged unless it has the form JOB/TASK.
  Result<std::string> ResolveId(const std::string& id) const;
  uint64_t last_seq() const { return next_seq_ - 1; }
  // Runs cb once when an event newer than after_seq arrives (long-poll).
  uint64_t NotifyOnEvent(std::function<void()> cb);
  void CancelNotify(uint64_t id) { notify_.erase(id); }

  size_t task_count() const { return logs_.size(); }

  // Hands a task's FIFOs (opened O_RDWR) to whoever keeps them open across
  // worker restarts (the keeper), and takes them back. Set once a keeper is
  // attached; HoldAllFifos re-hands every task's (a new keeper holds none).
  using HoldFifosFn = std::function<void(const std::string& id, const std::vector<int>& fds)>;
  using ReleaseFifosFn = std::function<void(const std::string& id)>;
  void SetFifoHolder(HoldFifosFn hold, ReleaseFifosFn release);
  void HoldAllFifos();
  // Log problems of all tasks, for `outpost status`.
  std::vector<std::string> LogProblems() const;

 private:
  struct Logs;

  TaskManager(Loop* loop, Options options);
  Status OpenLogs(const driver::TaskConfig& config, uid_t uid, gid_t gid, Logs* out);
  void CloseLogs(const std::string& id, bool remove_fifos);
  void Record(const driver::TaskEvent& ev);
  std::string FifoPath(const std::string& id, const char* stream) const;
  void HoldFifos(const std::string& id);

  Loop* loop_;
  Options options_;
  std::unique_ptr<driver::ExecDriver> driver_;
  std::map<std::string, std::unique_ptr<Logs>> logs_;
  std::deque<EventRecord> events_;
  uint64_t next_seq_ = 1;
  std::map<uint64_t, std::function<void()>> notify_;
  uint64_t next_notify_ = 1;
  uint64_t subscription_ = 0;
  uint64_t generated_ids_ = 0;
  IdResolver resolver_;
  HoldFifosFn hold_fifos_;
  ReleaseFifosFn release_fifos_;
};

}  // namespace task
}  // namespace outpost
