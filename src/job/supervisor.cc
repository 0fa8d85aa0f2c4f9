#include "job/supervisor.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"

namespace outpost::job {

TaskSupervisor::TaskSupervisor(Loop* loop, TaskRunner* runner, task::EventSink* events, std::string job,
                               std::shared_ptr<const TaskSpec> spec, int64_t min_healthy_nanos,
                               std::function<void()> on_change)
    : loop_(loop),
      runner_(runner),
      events_(events),
      job_(std::move(job)),
      spec_(std::move(spec)),
      on_change_(std::move(on_change)),
      min_healthy_nanos_(min_healthy_nanos) {}

TaskSupervisor::~TaskSupervisor() {
  if (timer_) loop_->CancelTimer(timer_);
  CancelHealthCheck();
}

void TaskSupervisor::ScheduleHealthCheck() {
  CancelHealthCheck();
  if (!spec_->checks.empty()) return StartChecks();
  uint64_t gen = generation_;
  std::weak_ptr<TaskSupervisor> weak = shared_from_this();
  health_timer_ = loop_->AddTimer(min_healthy_nanos_, [weak, gen] {
    auto self = weak.lock();
    if (!self || self->generation_ != gen) return;
    self->health_timer_ = 0;
    // Up for min_healthy_time by the clock; alive now by the driver (an
    // exit that is not reported yet must not count as healthy).
    self->runner_->CheckAlive(self->task_id(), [weak, gen](bool alive) {
      auto s = weak.lock();
      if (!s || s->generation_ != gen || s->state_ != RunState::kRunning || !alive || s->healthy_) return;
      s->healthy_ = true;
      s->Emit("healthy", "running for " + FormatDuration(s->min_healthy_nanos_));
      if (s->on_change_) s->on_change_();
    });
  });
}

void TaskSupervisor::CancelHealthCheck() {
  if (health_timer_) loop_->CancelTimer(health_timer_);
  health_timer_ = 0;
  if (checks_) {
    // Maybe from inside one of its callbacks: stopped now, freed after.
    checks_->Stop();
    std::shared_ptr<TaskChecks> old(std::move(checks_));
    loop_->Defer([old] {});
  }
}

void TaskSupervisor::Stop(int64_t timeout_nanos) {
  stop_timeout_ = timeout_nanos;
  Handle(RunEvent::kStop);
}

void TaskSupervisor::Restart(const std::string& reason) {
  restart_reason_ = reason;
  Handle(RunEvent::kRestart);
}

void TaskSupervisor::Replace(std::shared_ptr<const TaskSpec> spec) {
  spec_ = std::move(spec);
  spec_hash_.clear();
  if (state_ == RunState::kPending) {
    // Starts with the new spec when allowed; one waiting for its driver
    // was allowed already (the new spec may name another driver).
    if (!waiting_for_.empty()) Handle(RunEvent::kGo);
    return;
  }
  Restart("the task's spec changed");
}

Status TaskSupervisor::UpdateLimits(std::shared_ptr<const TaskSpec> spec) {
  spec_ = std::move(spec);
  spec_hash_.clear();
  if (state_ != RunState::kRunning && state_ != RunState::kStarting) return OkStatus();
  Status st = runner_->UpdateResources(task_id(), spec_->resources);
  std::string unenforced = st.ok() ? runner_->LimitsNotEnforced(job_, task_id(), spec_->resources) : "";
  Emit("updated", !st.ok()             ? "resource limits not applied: " + st.error().message()
                  : unenforced.empty() ? "resource limits updated without a restart"
                                       : "resource limits updated without a restart; " + unenforced);
  return st;
}

void TaskSupervisor::Adopt() {
  uint64_t gen = ++generation_;
  // Its checks start over with this agent: healthy once they pass.
  was_healthy_ = false;
  ever_running_ = true;
  SetState(RunState::kRunning);
  ScheduleHealthCheck();
  std::weak_ptr<TaskSupervisor> weak = shared_from_this();
  Status st = runner_->Watch(task_id(), [weak, gen](const driver::ExitResult& exit) {
    auto self = weak.lock();
    if (self && self->generation_ == gen) self->Handle(RunEvent::kExited, &exit);
  });
  if (!st.ok()) {
    driver::ExitResult lost;
    lost.error = "lost after agent restart: " + st.error().message();
    Handle(RunEvent::kExited, &lost);
  }
}

void TaskSupervisor::AdoptExited(const driver::ExitResult& exit) {
  ++generation_;
  ever_running_ = true;
  SetState(RunState::kRunning);
  Handle(RunEvent::kExited, &exit);
}

void TaskSupervisor::RestoreHistory(const driver::RestartMark& mark) {
  history_.total = mark.total;
  history_.restarts_mono = mark.window_mono;
  history_.last_start_mono = mark.last_start_mono;
}

void TaskSupervisor::RestoreFailed(const std::string& reason, const driver::ExitResult& exit) {
  ++generation_;
  ever_running_ = true;
  failed_ = true;
  finished_ = true;
  reason_ = reason;
  last_exit_ = driver::DescribeExit(exit);
  SetState(RunState::kDead);
}

void TaskSupervisor::SetState(RunState s) {
  // Dead is final (a restart goes through backoff): the task's devices go.
  if (s == RunState::kDead && state_ != RunState::kDead && !spec_->devices.empty()) {
    runner_->ReleaseDevices(JobTaskId(job_, spec_->name));
  }
  state_ = s;
  if (s != RunState::kStopping) {
    stop_pending_ = false;
    stop_waits_for_.clear();
  }
  if (s != RunState::kPending) waiting_for_.clear();
  if (s != RunState::kBackoff) next_start_wall_ = 0;
  if (s != RunState::kRunning) {
    healthy_ = false;
    CancelHealthCheck();
  }
}

void TaskSupervisor::Handle(RunEvent ev, const driver::ExitResult* exit, const Status* status) {
  // The end of a task whose stop could not be made (its driver away): the
  // stop is done (the task layer ends a task whose driver stays away for
  // its grace period).
  if (ev == RunEvent::kExited && state_ == RunState::kStopping && stop_pending_) {
    if (exit) last_exit_ = driver::DescribeExit(*exit);
    if (timer_) loop_->CancelTimer(timer_);
    timer_ = 0;
    ev = RunEvent::kStopped;
  }
  Transition t = NextStep(state_, ev);
  RunState before = state_;
  switch (t.action) {
    case RunAction::kInvalid:
      log::Debug("supervisor: event ignored in this state",
                 {{"task", task_id()}, {"state", RunStateName(state_)}, {"event", RunEventName(ev)}});
      return;
    case RunAction::kDefer:
      // A stop wins over a restart; a restart never cancels a stop.
      if (deferred_ != RunEvent::kStop) deferred_ = ev;
      if (ev == RunEvent::kStop && state_ == RunState::kStarting) runner_->AbortStart(task_id());
      return;
    case RunAction::kNone:
      // Requests that change nothing (go while running, stop while
      // stopping) do not wake the owner: it re-evaluates on changes only.
      if (t.next == before && ev != RunEvent::kExited && ev != RunEvent::kStopped) return;
      if (ev == RunEvent::kExited && exit) last_exit_ = driver::DescribeExit(*exit);
      if (ev == RunEvent::kStop && state_ == RunState::kPending) {
        reason_ = "stopped before it started";
      }
      if (ev == RunEvent::kStopped) {
        reason_ = "stopped";
        finished_ = false;
        failed_ = false;
      }
      if (ev == RunEvent::kStarted) {
        ever_running_ = true;
        start_error_permanent_ = false;
        start_exit_code_ = 0;
        reason_.clear();
      }
      SetState(t.next);
      if (ev == RunEvent::kStarted) ScheduleHealthCheck();
      break;
    case RunAction::kStart:
      if (AwaitDriver()) return;
      SetState(t.next);
      DoStart();
      return;  // DoStart re-enters Handle with the outcome
    case RunAction::kRestartNow:
      if (timer_) loop_->CancelTimer(timer_);
      timer_ = 0;
      history_.restarts_mono.clear();
      history_.quick = 0;
      failed_ = false;
      finished_ = false;
      Emit("restarting", restart_reason_.empty() ? "restart requested" : restart_reason_);
      restart_reason_.clear();
      if (AwaitDriver()) return;
      SetState(t.next);
      DoStart();
      return;
    case RunAction::kCancelBackoff:
      if (timer_) loop_->CancelTimer(timer_);
      timer_ = 0;
      reason_ = "stopped";
      failed_ = false;
      finished_ = false;
      SetState(t.next);
      break;
    case RunAction::kStop:
      SetState(t.next);
      if (ev == RunEvent::kRestart) deferred_ = RunEvent::kRestart;
      DoStop();
      return;
    case RunAction::kApplyPolicy: {
      if (state_ == RunState::kStarting && deferred_ == RunEvent::kStop) {
        // Stopped while it started (a start given up while it waited for a
        // required NRI plugin, say): what the start came to is no exit of
        // the task's, and no restart is due.
        deferred_ = RunEvent::kGo;
        if (ev == RunEvent::kExited && exit) last_exit_ = driver::DescribeExit(*exit);
        reason_ = "stopped before it started";
        failed_ = false;
        finished_ = false;
        SetState(RunState::kDead);
        break;
      }
      std::string text;
      bool success = false;
      if (ev == RunEvent::kStartFailed) {
        text = "start failed: " + (status && !status->ok() ? status->error().message() : std::string("unknown error"));
        start_error_permanent_ = status && !status->ok() && PermanentStartFailure(status->error(), &start_exit_code_);
      } else {
        text = exit ? driver::DescribeExit(*exit) : "exit status unknown";
        success = exit && exit->Successful();
      }
      EndCause cause = EndCause::kExit;
      if (!unhealthy_kill_.empty()) {  // job/supervisor_checks.cc
        text = "unhealthy: " + unhealthy_kill_ + "; " + text;
        success = false;
        unhealthy_kill_.clear();
        cause = was_healthy_ ? EndCause::kUnhealthyAfterHealthy : EndCause::kUnhealthyNeverHealthy;
      }
      last_exit_ = text;
      ApplyPolicy(success, text, cause);
      break;
    }
  }
  // A request that arrived mid-step runs once the step is done.
  if (deferred_ != RunEvent::kGo &&
      (state_ == RunState::kRunning || state_ == RunState::kDead || state_ == RunState::kBackoff)) {
    RunEvent d = deferred_;
    deferred_ = RunEvent::kGo;
    Handle(d);
    return;
  }
  if (on_change_) on_change_();
}

bool TaskSupervisor::AwaitDriver() {
  std::string problem = runner_->DriverProblem(spec_->driver);
  std::string key = spec_->driver;
  if (problem.empty() && !spec_->devices.empty()) {
    problem = runner_->DeviceProblem(JobTaskId(job_, spec_->name), spec_->devices);
    key = kWaitingForDevices;
  }
  if (problem.empty()) return false;  // the start's SetState clears waiting_for_
  // Told once per wait: the owner's next Go finds it waiting still.
  bool news = state_ != RunState::kPending || waiting_for_.empty() || reason_ != problem;
  SetState(RunState::kPending);
  waiting_for_ = key;
  if (!news) return true;
  reason_ = problem;
  Emit("waiting", problem);
  if (on_change_) on_change_();
  return true;
}

void TaskSupervisor::DoStart() {
  uint64_t gen = ++generation_;
  unhealthy_kill_.clear();
  was_healthy_ = false;
  history_.last_start_mono = MonotonicNanos();
  std::weak_ptr<TaskSupervisor> weak = shared_from_this();
  // An exit can only follow a successful start; if the runner reports it
  // before the start's own callback (both from one step), it waits here.
  auto early_exit = std::make_shared<std::unique_ptr<driver::ExitResult>>();
  auto started = std::make_shared<bool>(false);
  if (spec_hash_.empty()) spec_hash_ = TaskFingerprint(*spec_);  // once per spec, not at every restart
  driver::TaskConfig config = TaskConfigFor(job_, *spec_, spec_hash_);
  if (history_.total > 0) {
    // Kept with the task's record: an agent restart goes on counting.
    auto mark = std::make_shared<driver::RestartMark>();
    mark->total = history_.total;
    mark->window_mono = history_.restarts_mono;
    mark->last_start_mono = history_.last_start_mono;
    config.restarts = std::move(mark);
  }
  runner_->Start(
      std::move(config),
      [weak, gen, early_exit, started](Status st) {
        auto self = weak.lock();
        if (!self || self->generation_ != gen) return;
        if (!st.ok()) return self->Handle(RunEvent::kStartFailed, nullptr, &st);
        *started = true;
        self->Handle(RunEvent::kStarted);
        if (*early_exit && self->generation_ == gen) self->Handle(RunEvent::kExited, early_exit->get());
      },
      [weak, gen, early_exit, started](const driver::ExitResult& exit) {
        auto self = weak.lock();
        if (!self || self->generation_ != gen) return;
        if (!*started) {
          *early_exit = std::make_unique<driver::ExitResult>(exit);
          return;
        }
        self->Handle(RunEvent::kExited, &exit);
      });
}

void TaskSupervisor::DoStop() {
  uint64_t gen = generation_;
  std::weak_ptr<TaskSupervisor> weak = shared_from_this();
  stop_waits_for_.clear();
  stop_pending_ = false;
  runner_->Stop(task_id(), stop_timeout_, [weak, gen](Status st) {
    auto self = weak.lock();
    if (!self || self->generation_ != gen || self->state_ != RunState::kStopping) return;
    if (st.ok() || st.error().code() == Code::kNotFound) return self->Handle(RunEvent::kStopped);
    // A stop is done only when the driver says so: with its driver away,
    // the task may well run on. It stays stopping, with the reason, and the
    // stop is made again when the driver is back (DriverReady) or, for any
    // other failure, after a while.
    self->StopPending(st.error());
  });
}

void TaskSupervisor::StopPending(const Error& e) {
  stop_pending_ = true;
  const bool driver_away = e.code() == Code::kUnavailable;
  std::string why = driver_away ? "stop waits for its driver: " + e.message()
                                : "stop failed, retrying in " + FormatDuration(kStopRetryNanos) + ": " + e.message();
  if (why != reason_) {
    reason_ = why;
    Emit("waiting", why);
  }
  if (driver_away) {
    stop_waits_for_ = spec_->driver;
  } else {
    std::weak_ptr<TaskSupervisor> weak = shared_from_this();
    uint64_t gen = generation_;
    timer_ = loop_->AddTimer(kStopRetryNanos, [weak, gen] {
      auto self = weak.lock();
      if (!self) return;
      self->timer_ = 0;
      if (self->generation_ == gen && self->state_ == RunState::kStopping) self->DoStop();
    });
  }
  if (on_change_) on_change_();
}

void TaskSupervisor::DriverReady() {
  if (state_ == RunState::kPending && !waiting_for_.empty()) return Handle(RunEvent::kGo);
  if (state_ == RunState::kStopping && !stop_waits_for_.empty()) DoStop();
}

void TaskSupervisor::ApplyPolicy(bool success, const std::string& text, EndCause cause) {
  int64_t now = MonotonicNanos();
  RestartDecision d = DecideRestart(*spec_, success, text, history_, now, min_healthy_nanos_, cause);
  reason_ = d.reason;
  if (!d.restart) {
    SetState(RunState::kDead);
    failed_ = d.failed;
    finished_ = true;
    if (d.failed) Emit("failed", d.reason);
    return;
  }
  auto& times = history_.restarts_mono;
  if (spec_->restart.attempts > 0) {
    times.erase(std::remove_if(times.begin(), times.end(),
                               [&](int64_t t) { return t <= now - spec_->restart.interval_nanos; }),
                times.end());
    times.push_back(now + d.delay_nanos);
  } else {
    times.clear();  // unlimited: no window to count in
  }
  history_.quick = d.quick ? history_.quick + 1 : 0;
  history_.total++;
  SetState(RunState::kBackoff);
  next_start_wall_ = WallNanos() + d.delay_nanos;
  Emit("restarting", (d.delay_nanos ? "restarting in " + FormatDuration(d.delay_nanos) : std::string("restarting now")) +
                         ": " + d.reason);
  std::weak_ptr<TaskSupervisor> weak = shared_from_this();
  timer_ = loop_->AddTimer(d.delay_nanos, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->timer_ = 0;
    self->Handle(RunEvent::kBackoffElapsed);
  });
}

void TaskSupervisor::Emit(const std::string& type, const std::string& message) {
  driver::TaskEvent ev;
  ev.task_id = task_id();
  ev.task_name = spec_->name;
  ev.job = job_;
  ev.timestamp_unix_nanos = WallNanos();
  ev.type = type;
  ev.message = message;
  log::Info("task " + type, {{"task", task_id()}, {"reason", message}});
  events_->Publish(ev);
}

}  // namespace outpost::job
