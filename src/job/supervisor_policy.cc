// supervisor.h's decisions, apart from the TaskSupervisor that acts on
// them: the state machine's names and transition table, which start
// failures are permanent, what counts as a quick death, the restart
// policy's verdict, and the driver's TaskConfig for a task spec.
#include <algorithm>

#include "base/clock.h"
#include "base/strings.h"
#include "job/supervisor.h"

namespace outpost::job {

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kPending: return "pending";
    case RunState::kStarting: return "starting";
    case RunState::kRunning: return "running";
    case RunState::kBackoff: return "backoff";
    case RunState::kStopping: return "stopping";
    case RunState::kDead: return "dead";
  }
  return "?";
}

const char* RunEventName(RunEvent e) {
  switch (e) {
    case RunEvent::kGo: return "go";
    case RunEvent::kStarted: return "started";
    case RunEvent::kStartFailed: return "start-failed";
    case RunEvent::kExited: return "exited";
    case RunEvent::kBackoffElapsed: return "backoff-elapsed";
    case RunEvent::kStop: return "stop";
    case RunEvent::kStopped: return "stopped";
    case RunEvent::kRestart: return "restart";
  }
  return "?";
}

const char* RunActionName(RunAction a) {
  switch (a) {
    case RunAction::kNone: return "none";
    case RunAction::kStart: return "start";
    case RunAction::kApplyPolicy: return "apply-policy";
    case RunAction::kStop: return "stop";
    case RunAction::kCancelBackoff: return "cancel-backoff";
    case RunAction::kRestartNow: return "restart-now";
    case RunAction::kDefer: return "defer";
    case RunAction::kInvalid: return "invalid";
  }
  return "?";
}

namespace {

using S = RunState;
using A = RunAction;
constexpr int kStates = 6;
constexpr int kEvents = 8;
constexpr Transition X(S s) { return {s, A::kInvalid}; }

// Rows: states in enum order; columns: events in enum order
//            go                 started              start-failed             exited
//            backoff-elapsed    stop                 stopped                  restart
constexpr Transition kTable[kStates][kEvents] = {
    /* pending */ {{S::kStarting, A::kStart}, X(S::kPending), X(S::kPending), X(S::kPending),
                   X(S::kPending), {S::kDead, A::kNone}, X(S::kPending), {S::kStarting, A::kRestartNow}},
    /* starting */ {{S::kStarting, A::kNone}, {S::kRunning, A::kNone}, {S::kBackoff, A::kApplyPolicy},
                    {S::kBackoff, A::kApplyPolicy}, X(S::kStarting), {S::kStarting, A::kDefer}, X(S::kStarting),
                    {S::kStarting, A::kDefer}},
    /* running */ {{S::kRunning, A::kNone}, X(S::kRunning), X(S::kRunning), {S::kBackoff, A::kApplyPolicy},
                   X(S::kRunning), {S::kStopping, A::kStop}, X(S::kRunning), {S::kStopping, A::kStop}},
    /* backoff */ {{S::kBackoff, A::kNone}, X(S::kBackoff), X(S::kBackoff), X(S::kBackoff),
                   {S::kStarting, A::kStart}, {S::kDead, A::kCancelBackoff}, X(S::kBackoff),
                   {S::kStarting, A::kRestartNow}},
    /* stopping */ {{S::kStopping, A::kNone}, X(S::kStopping), X(S::kStopping), {S::kStopping, A::kNone},
                    X(S::kStopping), {S::kStopping, A::kNone}, {S::kDead, A::kNone}, {S::kStopping, A::kDefer}},
    /* dead */ {{S::kDead, A::kNone}, X(S::kDead), X(S::kDead), X(S::kDead), X(S::kDead), {S::kDead, A::kNone},
                X(S::kDead), {S::kStarting, A::kRestartNow}},
};

}  // namespace

Transition NextStep(RunState state, RunEvent event) {
  return kTable[static_cast<int>(state)][static_cast<int>(event)];
}

bool PermanentStartFailure(const Error& e, int* exit_code) {
  *exit_code = 0;
  if (e.code() != Code::kNotFound && e.code() != Code::kPermissionDenied && e.code() != Code::kInvalidArgument) {
    return false;
  }
  // proc/ ends a command's error with the status a shell would give it.
  const std::string& m = e.message();
  for (int code : {127, 126}) {
    if (EndsWith(m, "(exit status " + std::to_string(code) + ")")) *exit_code = code;
  }
  return true;
}

bool QuickDeath(EndCause cause, int64_t up_nanos, int64_t min_healthy_nanos) {
  switch (cause) {
    case EndCause::kExit: return up_nanos < min_healthy_nanos;
    case EndCause::kUnhealthyNeverHealthy: return true;
    case EndCause::kUnhealthyAfterHealthy: return false;
  }
  return true;
}

RestartDecision DecideRestart(const TaskSpec& spec, bool success, const std::string& exit_text,
                              const RestartHistory& history, int64_t now_mono, int64_t min_healthy_nanos,
                              EndCause cause) {
  RestartDecision d;
  const Restart& r = spec.restart;
  bool hook_task = spec.lifecycle.hook != Hook::kMain && !spec.lifecycle.sidecar;
  if (success && (r.policy != RestartPolicy::kAlways || hook_task)) {
    d.reason = "completed: " + exit_text;
    return d;
  }
  if (r.policy == RestartPolicy::kNever) {
    d.failed = !success;
    d.reason = (success ? "completed: " : "failed: ") + exit_text + " (restart policy \"never\")";
    return d;
  }
  size_t recent = 0;
  if (r.attempts > 0) {
    for (int64_t t : history.restarts_mono) {
      if (t > now_mono - r.interval_nanos) recent++;
    }
    if (recent >= static_cast<size_t>(r.attempts)) {
      d.failed = true;
      d.reason = Format("failed: %s; restart limit reached (%zu restart%s within %s)", exit_text.c_str(), recent,
                        recent == 1 ? "" : "s", FormatDuration(r.interval_nanos).c_str());
      return d;
    }
  }
  // An instance that stayed up for min_healthy_time (or was healthy before
  // a check failed) comes back at once; a quick death waits `delay`,
  // doubled for each quick death before it.
  int64_t up = history.last_start_mono > 0 ? now_mono - history.last_start_mono : min_healthy_nanos;
  d.quick = QuickDeath(cause, up, min_healthy_nanos);
  int64_t delay = 0;
  if (d.quick) {
    delay = r.delay_nanos;
    for (uint32_t i = 0; i < history.quick && delay < r.max_delay_nanos; i++) delay *= 2;
    delay = std::min(delay, r.max_delay_nanos);
  }
  if (history.last_start_mono > 0) {
    delay = std::max(delay, history.last_start_mono + kMinRestartSpacingNanos - now_mono);
  }
  d.restart = true;
  d.delay_nanos = std::max<int64_t>(delay, 0);
  d.reason = exit_text;
  if (r.attempts > 0) {
    d.reason += Format(" (restart %zu of %lld within %s)", recent + 1, static_cast<long long>(r.attempts),
                       FormatDuration(r.interval_nanos).c_str());
  }
  return d;
}

driver::TaskConfig TaskConfigFor(const std::string& job, const TaskSpec& s, std::string fingerprint) {
  driver::TaskConfig c;
  c.id = JobTaskId(job, s.name);
  c.job = job;
  c.name = s.name;
  c.driver = s.driver;
  c.driver_config = s.driver_config;
  c.device_requests = s.devices;
  c.command = s.command;
  c.args = s.args;
  c.env = s.env;
  c.workdir = s.workdir;
  c.user = s.user;
  c.group = s.group;
  c.rlimits = s.rlimits;
  c.kill_signal = s.kill_signal;
  c.kill_timeout_nanos = s.kill_timeout_nanos;
  c.log_max_files = s.log_max_files;
  c.log_max_file_size = s.log_max_file_size;
  c.resources = s.resources;
  if (s.network) {
    auto n = std::make_shared<driver::TaskNetwork>();
    n->spec = s.network;
    c.net = std::move(n);
  }
  if (!s.hooks.empty() || !s.annotations.empty() || s.job_annotations) {
    auto oci = std::make_shared<driver::TaskHooks>();
    oci->hooks = s.hooks;
    if (s.job_annotations) oci->annotations = *s.job_annotations;
    for (const auto& [k, v] : s.annotations) oci->annotations[k] = v;
    c.oci = std::move(oci);
  }
  c.spec_hash = fingerprint.empty() ? TaskFingerprint(s) : std::move(fingerprint);
  return c;
}

}  // namespace outpost::job
