// Jobs as the agent runs them. Owns: the set of jobs and their desired state
// (persisted through job/store before anything is acted on), one
// TaskSupervisor per task, lifecycle ordering between a job's tasks
// (prestart -> main -> poststart; stop in reverse), updates that restart only
// the tasks whose spec changed, the jobs.d directory (job/jobs_dir) with its
// per-file problems, recovery after an agent restart or a reboot, and the
// job status derived from the tasks. Tasks run through a TaskRunner, events
// go to an EventSink; the API (agent/job_api) and the CLI only see the
// views below.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "job/jobs_dir.h"
#include "job/spec.h"
#include "job/store.h"
#include "job/supervisor.h"
#include "task/events.h"
#include "loop/loop.h"
#include "loop/pending_writes.h"

namespace outpost::job {

// What recovery and removal need from the task layer beyond TaskRunner.
class TaskStore {
 public:
  virtual ~TaskStore() = default;
  struct Instance {
    bool running = false;
    driver::ExitResult exit;  // when !running
    std::string spec_hash;
    std::shared_ptr<const driver::RestartMark> restarts;  // as of its start; null: none
  };
  // NotFound when no instance with this id exists.
  virtual Result<Instance> Lookup(const std::string& task_id) = 0;
  // Removes the (ended) instance, its task dir and its logs.
  virtual void Purge(const std::string& task_id, std::function<void(Status)> done) = 0;
  // The ended instances that belong to a job, as (task id, job id).
  virtual std::vector<std::pair<std::string, std::string>> EndedJobTasks() = 0;
};

struct TaskStatusView {
  std::string name;
  std::string task_id;  // the driver's id: "<job>.<task>"
  RunState state = RunState::kPending;
  Lifecycle lifecycle;
  uint64_t restarts = 0;
  bool failed = false;
  bool completed = false;
  bool healthy = false;
  std::string health;               // "" = no checks or not running; starting, healthy, unhealthy
  std::vector<CheckView> checks;    // each check's last result, while it runs
  std::string reason;
  std::string last_exit;
  bool start_error_permanent = false;  // TaskSupervisor::start_error_permanent
  int start_exit_code = 0;
  int64_t next_start_unix_nanos = 0;
};

struct JobView {
  std::string id;
  std::string status;  // pending, running, degraded, backoff, failed, complete, stopping, stopped
  Source source = Source::kApi;
  std::string file;
  bool running = true;  // desired
  int64_t version = 0;
  int64_t submitted_unix_nanos = 0;
  JobSpec spec;
  std::vector<TaskStatusView> tasks;
  // Why a stop or removal is not done yet: a task whose stop waits for its
  // driver, or the removal of its instances waiting for it ("" = nothing
  // pending). pending_since: when it started waiting (monotonic).
  std::string pending;
  int64_t pending_since_mono = 0;
  bool pending_on_driver = false;  // what is pending waits for a driver to be back
};

struct SubmitResult {
  JobView job;
  bool created = false;
  bool unchanged = false;
  std::vector<std::string> restarted;  // tasks restarted because their spec changed
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> updated;  // limits changed live, no restart
  bool job_limits = false;           // the job cgroup's limits changed
  // "task t waits: driver x is not registered": tasks whose driver cannot
  // take a start now; they start once it can (pending until then).
  std::vector<std::string> waiting;
};

class JobManager {
 public:
  struct Options {
    std::string state_dir;
    std::string jobs_dir;  // "" = none
    size_t max_jobs = 1000;
    // Problems that make resource limits impossible on this node (no cgroup
    // v2, a controller missing, CPUs it does not have, ...): a job that
    // sets such limits is refused at submission. Null = no check.
    std::function<std::vector<std::string>(const cgroup::Resources&)> check_resources;
    // Whether the node has the task's driver and the driver takes its
    // config: errors one per line, each starting with the field below the
    // task ("driver: ..." or "config.image: ..."). Null = no check.
    std::function<Status(const std::string& driver, const std::string& config_json)> check_driver;
    // Whether the node has the job's network (net/networks Check): errors
    // one per line, each starting with the field ("network.mode: ...").
    // Null = no check.
    std::function<Status(const net::NetworkSpec&)> check_network;
    // Removes a job's network (CNI DEL, namespace unpinned) once its last
    // task stopped; done may carry an error (the job stops anyway). Null =
    // jobs have no networks to remove.
    std::function<void(const std::string& job, std::function<void(Status)> done)> release_network;
    // The job's last task has stopped (not for a whole-job restart): its
    // NRI pod sandbox is stopped and removed. May be called more than
    // once per stop. Null = nothing to tell.
    std::function<void(const std::string& job)> pod_ended;
    task::EventSink* events = nullptr;
    // This is the first agent since the node booted (docs/process-model.md):
    // no instance, failed state or restart count of before the boot counts.
    bool first_since_boot = false;
  };
  using DoneCallback = std::function<void(Status)>;

  static Result<std::unique_ptr<JobManager>> Create(Loop* loop, TaskRunner* runner, TaskStore* tasks,
                                                    Options options);
  ~JobManager();

  // Loads the desired state and adopts the tasks the task layer recovered.
  // Call once every task's fate is known (after the keeper's journal replay).
  // Then starts watching jobs.d.
  void Recover();
  bool recovered() const { return recovered_; }

  // Creates or updates a job from a document. Invalid → InvalidArgument with
  // every problem; nothing changes.
  Result<SubmitResult> Submit(const std::string& text);
  // Desired state "stopped" (persisted); done when every task has stopped.
  void Stop(const std::string& id, int64_t timeout_nanos, DoneCallback done);
  // Stops and removes a job with its tasks' dirs and logs. File-managed
  // jobs are refused (remove the file).
  void Remove(const std::string& id, DoneCallback done);
  // Restarts one task ("" = every task); a stopped job is started again.
  Status Restart(const std::string& id, const std::string& task);
  // `outpost start`: a stopped job is started (as Restart does); one meant
  // to run already is left alone, *already set.
  Status Start(const std::string& id, bool* already);

  Result<JobView> Inspect(const std::string& id) const;
  std::vector<JobView> List() const;
  // "<job>.<task>" for JOB/TASK, with NotFound errors naming what is missing.
  Result<std::string> TaskId(const std::string& job, const std::string& task) const;

  // Problems to show in `outpost status` / `ps`: invalid jobs.d files
  // (path -> error), the jobs.d dir itself, unreadable store records.
  std::map<std::string, std::string> FileProblems() const;
  std::string DirProblem() const;
  const std::string& jobs_dir() const { return options_.jobs_dir; }
  const std::vector<std::string>& StoreProblems() const { return store_problems_; }
  // Re-reads jobs.d (SIGHUP).
  void RescanDir();
  // A driver registered or came back: the tasks waiting for it start, the
  // stops and removals waiting for it are made.
  void OnDriverReady(const std::string& driver);
  // Device plugin resources changed (devices came, turned healthy or were
  // freed): tasks waiting for devices try again.
  void OnDevicesChanged() { OnDriverReady(kWaitingForDevices); }
  // A driver had no connected instance for its grace period: its tasks were
  // ended (task layer); removals waiting for it go on without it.
  void OnDriverGone(const std::string& driver);
  void SetMaxJobs(size_t n) { options_.max_jobs = n; }
  size_t job_count() const { return jobs_.size(); }

  // How long a job whose file was removed waits for another file to take it
  // over (a rename) before it is removed.
  static constexpr int64_t kFileMoveGraceNanos = 1000LL * 1000000;

  static std::string TaskIdOf(const std::string& job, const std::string& task) { return JobTaskId(job, task); }

 private:
  struct Job;

  JobManager(Loop* loop, TaskRunner* runner, TaskStore* tasks, Options options);
  Result<SubmitResult> Apply(JobSpec spec, Source source, const std::string& file);
  // What this node cannot do for spec (unknown drivers, limits it cannot
  // enforce), one line per problem with its path; the job is refused.
  Status CheckNode(const JobSpec& spec) const;
  // The supervisor of the job's i-th task.
  std::shared_ptr<TaskSupervisor> MakeSupervisor(Job* job, size_t i);
  // job->tasks: a new supervisor for every task of the stored spec.
  void MakeSupervisors(Job* job);
  void ScheduleEvaluate(const std::string& id);
  void Evaluate(const std::string& id);
  void FinishRemove(const std::string& id);
  void RetryRemovals(const std::vector<std::string>& ids);
  // Persists the tasks that failed for good, when they changed.
  void SyncFailed(const std::string& id, Job* job);
  // What the job's stop or removal waits for ("" = nothing).
  std::string PendingOf(const Job& job) const;
  // Writes next as id's record. When the disk is full (ENOSPC, EDQUOT) the
  // change is kept in memory only: OK, with a note for the event, and the
  // record is written when space returns (loop/pending_writes).
  // Writes a job record: fsync'd (it must survive a power cut) unless
  // durability says otherwise (docs/process-model.md, "What is written when").
  Status Persist(const std::string& id, const StoredJob& next, std::string* note,
                 sys::Durability durability = sys::Durability::kPowerCut);
  JobView ViewOf(const Job& job) const;
  void JobEvent(const std::string& job, const std::string& type, const std::string& message);
  void OnFileChanged(const std::string& path, const std::string& content);
  void OnFileRemoved(const std::string& path);

  Loop* loop_;
  TaskRunner* runner_;
  TaskStore* tasks_;
  Options options_;
  JobStore store_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::unique_ptr<JobsDir> dir_;
  std::map<std::string, std::string> file_problems_;  // path -> error
  std::map<std::string, std::string> file_jobs_;      // path -> job id
  std::vector<std::string> store_problems_;
  PendingWrites unsaved_;  // records the full disk could not take yet
  bool recovered_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The job's status from its tasks (docs/supervision.md).
std::string DeriveJobStatus(bool desired_running, const std::vector<TaskStatusView>& tasks);
// Why tasks[i], pending in a job wanted running, has not started: the task
// it waits for in the lifecycle order and how that one is ("waiting for
// prestart task setup (failed: exit code 1)"); "" when it waits for nothing.
std::string WaitingReason(const std::vector<TaskStatusView>& tasks, size_t i);

}  // namespace outpost::job
