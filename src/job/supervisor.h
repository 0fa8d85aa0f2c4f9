// Supervision of one task of a job. Owns: the task's state machine (an
// explicit table, state x event -> next state + action; docs/supervision.md),
// the restart policy decision (backoff, attempts within an interval, the
// once-per-second throttle), the backoff timer, and the restart events. It
// drives the task through a TaskRunner (agent/ wires it to the TaskManager)
// and tells its owner (job/manager) whenever its state changes. It does not
// know about other tasks of the job: the owner decides when a task may start
// (lifecycle ordering) and derives the job's status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "job/checks.h"
#include "job/spec.h"
#include "loop/loop.h"
#include "driver/driver.h"
#include "task/events.h"

namespace outpost::job {

enum class RunState { kPending, kStarting, kRunning, kBackoff, kStopping, kDead };

// What a task waiting for device plugin resources waits for (no driver can
// be called this: driver names are lower-case letters, digits, - and _).
inline constexpr const char kWaitingForDevices[] = "(devices)";
const char* RunStateName(RunState s);  // pending, starting, running, backoff, stopping, dead

enum class RunEvent {
  kGo,             // the owner allows the task to start
  kStarted,        // the runner started it
  kStartFailed,    // the runner could not start it
  kExited,         // the running instance ended
  kBackoffElapsed, // the backoff timer fired
  kStop,           // stop requested (job stop/remove/update)
  kStopped,        // the runner finished stopping it
  kRestart,        // restart requested (operator, or the spec changed)
};
const char* RunEventName(RunEvent e);

enum class RunAction {
  kNone,
  kStart,         // call runner Start
  kApplyPolicy,   // exit/start failure: restart after a backoff, or finish
  kStop,          // call runner Stop
  kCancelBackoff, // cancel the timer (and finish)
  kRestartNow,    // cancel the timer, reset the policy window, start
  kDefer,         // remember the request; act once the current step is done
  kInvalid,       // the event cannot happen in this state: log and ignore
};
const char* RunActionName(RunAction a);

struct Transition {
  RunState next;
  RunAction action;
};
// The table. kApplyPolicy's next state (backoff or dead) is decided by
// DecideRestart; the table gives kBackoff as a placeholder.
Transition NextStep(RunState state, RunEvent event);

// Restart bookkeeping of one task (restart times within the interval; a
// vector, not a deque: libstdc++'s empty deque alone costs 600 bytes and
// there is one per task).
struct RestartHistory {
  std::vector<int64_t> restarts_mono;  // start times of restarts in the window (only with attempts > 0)
  int64_t last_start_mono = 0;        // any start, for the throttle and the time up
  uint64_t total = 0;                 // restarts since the job was submitted / agent start
  uint32_t quick = 0;                 // successive quick deaths (up less than min_healthy_time)
};

// How an instance ended, for whether its end is a quick death (QuickDeath):
// the restart delay doubles across quick deaths in a row, and any other end
// restarts at once (throttled to one start a second).
enum class EndCause {
  kExit,                   // it exited, was killed, or its start failed
  kUnhealthyNeverHealthy,  // stopped by a failing check (on_unhealthy "restart") before its checks ever passed
  kUnhealthyAfterHealthy,  // stopped by a failing check after its checks had passed
};

// The table of quick deaths (docs/supervision.md, "Restart policy"):
//   kExit                    quick when up less than min_healthy_time
//   kUnhealthyNeverHealthy   quick, however long it was up: a check that
//                            never passes must back off, not restart it
//                            every grace + threshold x interval forever
//   kUnhealthyAfterHealthy   not quick: it served, then failed (a restart
//                            at once, as for a long run that ended)
bool QuickDeath(EndCause cause, int64_t up_nanos, int64_t min_healthy_nanos);

struct RestartDecision {
  bool restart = false;
  bool quick = false;    // a quick death: the instance was up less than min_healthy_time
  int64_t delay_nanos = 0;
  bool failed = false;   // finished for good with a failure
  std::string reason;    // for events and `inspect`
};

constexpr int64_t kMinRestartSpacingNanos = 1000000000;  // never more than one start per second
constexpr int64_t kStopRetryNanos = 5000000000;         // a failed stop (other than a driver away) is tried again

// success: the exit (or start) was successful. exit_text: "exit code 1",
// "killed by SIGKILL", "start failed: ...". The instance that ended was up
// since history.last_start_mono (0 = unknown: counts as up long enough).
// One that is not a quick death (QuickDeath: up for at least
// min_healthy_nanos, or healthy before a check failed) restarts at once;
// quick deaths wait delay x 2^history.quick (capped at max_delay); no start
// comes sooner than a second after the previous one.
// A start failure that retrying cannot heal: the command is missing or not
// executable, the user is unknown, the driver refused the config
// (NotFound, PermissionDenied, InvalidArgument). *exit_code: a shell's
// status for it, 127 (not found) or 126 (not executable) when the error
// is the command's, else 0.
bool PermanentStartFailure(const Error& e, int* exit_code);

// cause: how it ended (QuickDeath).
RestartDecision DecideRestart(const TaskSpec& spec, bool success, const std::string& exit_text,
                              const RestartHistory& history, int64_t now_mono, int64_t min_healthy_nanos,
                              EndCause cause = EndCause::kExit);


// What the supervisor needs from whoever runs tasks.
class TaskRunner {
 public:
  using ExitCallback = std::function<void(const driver::ExitResult&)>;
  virtual ~TaskRunner() = default;
  // Starts config.id; an ended instance with the same id makes way (its
  // logs and task dir are kept). started runs once with the outcome; after
  // a successful start, exited runs once when the instance ends.
  virtual void Start(const driver::TaskConfig& config, std::function<void(Status)> started, ExitCallback exited) = 0;
  // Follows an instance recovered after an agent restart: exited runs once
  // when it ends (at once if it has). Error when there is no instance.
  virtual Status Watch(const std::string& id, ExitCallback exited) = 0;
  // timeout_nanos < 0: the task's own kill_timeout.
  virtual void Stop(const std::string& id, int64_t timeout_nanos, std::function<void(Status)> done) = 0;
  // A stop came while the instance is starting: a start that is only
  // waiting (for a required NRI plugin) is given up, and its started
  // callback reports that. Other starts run to their end (the stop is
  // applied after).
  virtual void AbortStart(const std::string& id) { (void)id; }
  // An exec health check: cmd run in the task's context through its
  // driver's ExecTask (job/checks). Unimplemented unless a runner has it.
  virtual void ExecCheck(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                         driver::Driver::ExecCallback done) {
    (void)id;
    (void)cmd;
    (void)timeout_nanos;
    done(Error(Code::kUnimplemented, "exec checks are not supported here"));
  }
  // The network namespace the running instance joined ("" = the node's).
  virtual std::string TaskNetns(const std::string& id) const {
    (void)id;
    return "";
  }
  // Whether the instance's process is alive right now.
  virtual void CheckAlive(const std::string& id, std::function<void(bool)> done) = 0;
  // Limits of a running task's cgroup, changed live (no restart).
  virtual Status UpdateResources(const std::string& id, const cgroup::Resources& r) = 0;
  // The job's own cgroup (parent of its tasks') and its limits.
  virtual Status ApplyJobResources(const std::string& job, const cgroup::Resources& r) = 0;
  // Why the named driver cannot take a start now ("" = it can): a driver
  // plugin that is not registered (yet) or is disconnected. A task due to
  // start then waits, pending, without a start attempt (TaskSupervisor).
  virtual std::string DriverProblem(const std::string& driver) const {
    (void)driver;
    return "";
  }
  // Why the task's device plugin resources cannot be had now ("" = they
  // can, or it asks for none): the task then waits, pending, as for its
  // driver, until JobManager::OnDevicesChanged.
  virtual std::string DeviceProblem(const std::string& task_id, const std::vector<devices::Request>& requests) const {
    (void)task_id;
    (void)requests;
    return "";
  }
  // The task ended for good (not a restart): the devices it holds are free.
  virtual void ReleaseDevices(const std::string& task_id) { (void)task_id; }
  // Which of limits r this node does not enforce, and why ("" = all are):
  // of the task task_id's cgroup, or with task_id "" of the job's own.
  // For the events that report a live limit change.
  virtual std::string LimitsNotEnforced(const std::string& job, const std::string& task_id,
                                        const cgroup::Resources& r) const {
    (void)job;
    (void)task_id;
    (void)r;
    return "";
  }
};

// What the driver is given for a job's task: id "<job>.<task>", the spec's
// fields, and the spec's fingerprint (to spot a stale instance later):
// fingerprint if given (TaskFingerprint(spec) already known), else computed.
driver::TaskConfig TaskConfigFor(const std::string& job, const TaskSpec& spec, std::string fingerprint = {});
inline std::string JobTaskId(const std::string& job, const std::string& task) { return job + "." + task; }

class TaskSupervisor : public std::enable_shared_from_this<TaskSupervisor> {
 public:
  // on_change runs after every state change (the owner re-evaluates the
  // job). The driver config is built from (job, spec) at each start, not
  // kept: with a thousand tasks every kept byte counts.
  // min_healthy_nanos: how long an instance must stay up (and be alive when
  // that time has passed) to count as healthy. spec: shared with the job's
  // stored spec (one copy per task), never changed through this pointer.
  TaskSupervisor(Loop* loop, TaskRunner* runner, task::EventSink* events, std::string job,
                 std::shared_ptr<const TaskSpec> spec, int64_t min_healthy_nanos, std::function<void()> on_change);
  ~TaskSupervisor();

  // Event inputs (the owner's requests).
  void Go() { Handle(RunEvent::kGo); }
  void Stop(int64_t timeout_nanos);
  void Restart(const std::string& reason);
  // A recovered instance is running (after an agent restart): watch it.
  void Adopt();
  // A recovered instance had ended before we looked: treat as an exit.
  void AdoptExited(const driver::ExitResult& exit);
  // After an agent restart: the restarts counted before it (from the
  // instance's record), before Adopt or AdoptExited.
  void RestoreHistory(const driver::RestartMark& mark);
  // After an agent restart: the task had failed for good (the job's record
  // says so, with the reason); it stays failed, nothing is started.
  void RestoreFailed(const std::string& reason, const driver::ExitResult& exit);
  // New spec (an update that changed this task): restart with it if it runs.
  void Replace(std::shared_ptr<const TaskSpec> spec);
  // Only the limits changed: the running task keeps running; its cgroup
  // gets the new limits (and a later start uses them).
  Status UpdateLimits(std::shared_ptr<const TaskSpec> spec);
  // The same spec in a newer copy of the job (an update that left this task
  // alone): nothing happens, the older copy can go.
  void Rebind(std::shared_ptr<const TaskSpec> spec) {
    spec_ = std::move(spec);
    spec_hash_.clear();
  }

  void SetMinHealthy(int64_t nanos) { min_healthy_nanos_ = nanos; }
  // The driver this task waits for is back: the start it was due, or the
  // stop it could not make, goes on.
  void DriverReady();

  RunState state() const { return state_; }
  // Running, and has stayed up for min_healthy_time (checked with the
  // driver when that time has passed), or for a task with checks: its
  // checks pass (job/checks). Emits a "healthy" event once per instance,
  // and again after each recovery from "unhealthy".
  bool healthy() const { return healthy_; }
  // "" for a task without checks or not running; else starting, healthy,
  // unhealthy. And each check's last result (empty when not running).
  std::string health() const { return checks_ ? TaskHealthName(checks_->health()) : ""; }
  std::vector<CheckView> check_views() const { return checks_ ? checks_->Views() : std::vector<CheckView>(); }
  const TaskSpec& spec() const { return *spec_; }
  std::string task_id() const { return JobTaskId(job_, spec_->name); }
  bool failed() const { return failed_; }
  bool completed() const { return state_ == RunState::kDead && !failed_ && finished_; }
  bool ever_running() const { return ever_running_; }
  uint64_t restarts() const { return history_.total; }
  const std::string& reason() const { return reason_; }
  const std::string& last_exit() const { return last_exit_; }
  // The last start failed for good (PermanentStartFailure); cleared by a
  // start that succeeds. With the shell's status for it (127, 126 or 0).
  bool start_error_permanent() const { return start_error_permanent_; }
  int start_exit_code() const { return start_exit_code_; }
  int64_t next_start_unix_nanos() const { return next_start_wall_; }
  // The driver a start waits for ("" = none): pending, reason says why.
  // Or the driver a stop waits for: stopping, reason says why.
  const std::string& waiting_for() const { return stop_waits_for_.empty() ? waiting_for_ : stop_waits_for_; }
  // Stopping, and the stop cannot be made now (its driver is away, or it
  // failed and is retried): reason() says why.
  bool stop_pending() const { return stop_pending_; }

 private:
  void Handle(RunEvent ev, const driver::ExitResult* exit = nullptr, const Status* status = nullptr);
  // A start is due: true (and pending) when the task's driver cannot take
  // it now; the start is made when the driver is back (DriverReady).
  bool AwaitDriver();
  void DoStart();
  void DoStop();
  void StopPending(const Error& e);
  void ApplyPolicy(bool success, const std::string& text, EndCause cause);
  void Emit(const std::string& type, const std::string& message);
  void SetState(RunState s);
  void ScheduleHealthCheck();
  void CancelHealthCheck();
  void StartChecks();
  void OnHealth(TaskHealth h, const std::string& message, bool restart);

  Loop* loop_;
  TaskRunner* runner_;
  task::EventSink* events_;
  std::string job_;
  std::shared_ptr<const TaskSpec> spec_;
  std::string spec_hash_;  // TaskFingerprint(*spec_), "" until a start needs it
  std::function<void()> on_change_;
  int64_t min_healthy_nanos_;
  RunState state_ = RunState::kPending;
  bool healthy_ = false;
  uint64_t health_timer_ = 0;
  std::unique_ptr<TaskChecks> checks_;  // while running, for a task with checks
  std::string unhealthy_kill_;          // why the running instance is being restarted by its checks
  bool was_healthy_ = false;            // the running instance's checks have passed (since its start)
  RestartHistory history_;
  uint64_t generation_ = 0;   // bumps at every start: late callbacks of an older instance are ignored
  uint64_t timer_ = 0;
  bool failed_ = false;
  bool finished_ = false;     // dead because it finished (not because it was stopped)
  bool ever_running_ = false;
  bool start_error_permanent_ = false;
  int start_exit_code_ = 0;
  RunEvent deferred_ = RunEvent::kGo;  // kGo = nothing deferred
  int64_t stop_timeout_ = -1;
  std::string restart_reason_;
  std::string reason_;
  std::string last_exit_;
  std::string waiting_for_;
  std::string stop_waits_for_;  // the driver a pending stop waits for
  bool stop_pending_ = false;
  int64_t next_start_wall_ = 0;
};

}  // namespace outpost::job
