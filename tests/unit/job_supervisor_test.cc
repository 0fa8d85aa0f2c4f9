// The supervision state table, the restart decision, the job status, and
// JobManager's orchestration (lifecycle order, updates, stop order,
// recovery) against a fake task runner: no processes, deterministic.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "job/manager.h"
#include "job/supervisor.h"
#include "test_util.h"

namespace outpost::job {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

// ---- the table -------------------------------------------------------------------

TEST(JobSupervisorTable, EveryCellIsDefined) {
  // Each (state, event) gives a known action; the transitions the design
  // relies on are checked one by one below.
  for (int s = 0; s <= static_cast<int>(RunState::kDead); s++) {
    for (int e = 0; e <= static_cast<int>(RunEvent::kRestart); e++) {
      Transition t = NextStep(static_cast<RunState>(s), static_cast<RunEvent>(e));
      EXPECT_STRNE(RunActionName(t.action), "?");
      EXPECT_STRNE(RunStateName(t.next), "?");
    }
  }
}

struct Row {
  RunState state;
  RunEvent event;
  RunState next;
  RunAction action;
};

TEST(JobSupervisorTable, Transitions) {
  const Row rows[] = {
      {RunState::kPending, RunEvent::kGo, RunState::kStarting, RunAction::kStart},
      {RunState::kPending, RunEvent::kStop, RunState::kDead, RunAction::kNone},
      {RunState::kPending, RunEvent::kExited, RunState::kPending, RunAction::kInvalid},
      {RunState::kStarting, RunEvent::kStarted, RunState::kRunning, RunAction::kNone},
      {RunState::kStarting, RunEvent::kStartFailed, RunState::kBackoff, RunAction::kApplyPolicy},
      {RunState::kStarting, RunEvent::kStop, RunState::kStarting, RunAction::kDefer},
      {RunState::kStarting, RunEvent::kRestart, RunState::kStarting, RunAction::kDefer},
      {RunState::kRunning, RunEvent::kExited, RunState::kBackoff, RunAction::kApplyPolicy},
      {RunState::kRunning, RunEvent::kStop, RunState::kStopping, RunAction::kStop},
      {RunState::kRunning, RunEvent::kRestart, RunState::kStopping, RunAction::kStop},
      {RunState::kRunning, RunEvent::kGo, RunState::kRunning, RunAction::kNone},
      {RunState::kBackoff, RunEvent::kBackoffElapsed, RunState::kStarting, RunAction::kStart},
      {RunState::kBackoff, RunEvent::kStop, RunState::kDead, RunAction::kCancelBackoff},
      {RunState::kBackoff, RunEvent::kRestart, RunState::kStarting, RunAction::kRestartNow},
      {RunState::kStopping, RunEvent::kExited, RunState::kStopping, RunAction::kNone},
      {RunState::kStopping, RunEvent::kStopped, RunState::kDead, RunAction::kNone},
      {RunState::kStopping, RunEvent::kRestart, RunState::kStopping, RunAction::kDefer},
      {RunState::kDead, RunEvent::kRestart, RunState::kStarting, RunAction::kRestartNow},
      {RunState::kDead, RunEvent::kGo, RunState::kDead, RunAction::kNone},
      {RunState::kDead, RunEvent::kExited, RunState::kDead, RunAction::kInvalid},
  };
  for (const Row& r : rows) {
    Transition t = NextStep(r.state, r.event);
    EXPECT_EQ(t.next, r.next) << RunStateName(r.state) << " x " << RunEventName(r.event);
    EXPECT_EQ(t.action, r.action) << RunStateName(r.state) << " x " << RunEventName(r.event) << " -> "
                                  << RunActionName(t.action);
  }
}

// ---- restart decisions -----------------------------------------------------------

TaskSpec SpecWith(RestartPolicy p, int64_t attempts = 3) {
  TaskSpec s;
  s.name = "t";
  s.command = "/bin/true";
  s.restart.policy = p;
  s.restart.attempts = attempts;
  s.restart.delay_nanos = 1 * kNanosPerSecond;
  s.restart.max_delay_nanos = 5 * kNanosPerSecond;
  s.restart.interval_nanos = 60 * kNanosPerSecond;
  return s;
}

constexpr int64_t kMinHealthy = 1 * kNanosPerSecond;

// The decision for an instance that ended at now after being up for up.
RestartDecision Decide(const TaskSpec& s, bool success, const std::string& text, RestartHistory* h, int64_t now,
                       int64_t up) {
  h->last_start_mono = now - up;
  return DecideRestart(s, success, text, *h, now, kMinHealthy);
}

// Applies a decision to the history as the supervisor does.
void Apply(const TaskSpec& s, const RestartDecision& d, RestartHistory* h, int64_t now) {
  if (s.restart.attempts > 0) h->restarts_mono.push_back(now + d.delay_nanos);
  h->quick = d.quick ? h->quick + 1 : 0;
  h->total++;
}

TEST(JobRestartPolicy, OnFailureRestartsFailuresOnly) {
  RestartHistory h;
  int64_t now = 1000 * kNanosPerSecond;
  RestartDecision ok = Decide(SpecWith(RestartPolicy::kOnFailure), true, "exit code 0", &h, now, 0);
  EXPECT_FALSE(ok.restart);
  EXPECT_FALSE(ok.failed);
  EXPECT_EQ(ok.reason, "completed: exit code 0");
  RestartDecision bad = Decide(SpecWith(RestartPolicy::kOnFailure), false, "exit code 2", &h, now, 0);
  EXPECT_TRUE(bad.restart);
  EXPECT_TRUE(bad.quick);
  EXPECT_EQ(bad.delay_nanos, 1 * kNanosPerSecond);
  EXPECT_EQ(bad.reason, "exit code 2 (restart 1 of 3 within 1m)");
}

TEST(JobRestartPolicy, AlwaysRestartsSuccessButNotFinishedHooks) {
  RestartHistory h;
  int64_t now = 1000 * kNanosPerSecond;
  EXPECT_TRUE(Decide(SpecWith(RestartPolicy::kAlways), true, "exit code 0", &h, now, 0).restart);
  TaskSpec pre = SpecWith(RestartPolicy::kAlways);
  pre.lifecycle.hook = Hook::kPrestart;
  EXPECT_FALSE(Decide(pre, true, "exit code 0", &h, now, 0).restart);
  pre.lifecycle.sidecar = true;
  EXPECT_TRUE(Decide(pre, true, "exit code 0", &h, now, 0).restart);
}

TEST(JobRestartPolicy, NeverFailsOnFailure) {
  RestartHistory h;
  RestartDecision d = DecideRestart(SpecWith(RestartPolicy::kNever), false, "killed by SIGKILL", h, 0, kMinHealthy);
  EXPECT_FALSE(d.restart);
  EXPECT_TRUE(d.failed);
  EXPECT_EQ(d.reason, "failed: killed by SIGKILL (restart policy \"never\")");
}

TEST(JobRestartPolicy, DefaultsRestartForever) {
  // The built-in defaults: no limit, for always and on-failure alike.
  TaskSpec s;
  EXPECT_EQ(s.restart.attempts, 0);
  for (RestartPolicy p : {RestartPolicy::kAlways, RestartPolicy::kOnFailure}) {
    s.restart.policy = p;
    RestartHistory h;
    int64_t now = 1000 * kNanosPerSecond;
    for (int i = 0; i < 500; i++) {
      RestartDecision d = Decide(s, false, "exit code 1", &h, now, 0);
      ASSERT_TRUE(d.restart) << i;
      ASSERT_FALSE(d.failed) << i;
      EXPECT_EQ(d.reason, "exit code 1");
      EXPECT_LE(d.delay_nanos, s.restart.max_delay_nanos);
      Apply(s, d, &h, now);
      now += d.delay_nanos + kNanosPerSecond / 10;
    }
    EXPECT_TRUE(h.restarts_mono.empty());  // no window kept without a limit
    EXPECT_EQ(h.total, 500u);
  }
}

TEST(JobRestartPolicy, QuickDeathsDoubleTheDelayUpToMax) {
  TaskSpec s = SpecWith(RestartPolicy::kOnFailure, 0);
  RestartHistory h;
  int64_t now = 1000 * kNanosPerSecond;
  std::vector<int64_t> delays;
  for (int i = 0; i < 5; i++) {
    RestartDecision d = Decide(s, false, "exit code 1", &h, now, kNanosPerSecond / 10);  // up 100 ms
    ASSERT_TRUE(d.restart) << i;
    EXPECT_TRUE(d.quick) << i;
    delays.push_back(d.delay_nanos);
    Apply(s, d, &h, now);
    now += d.delay_nanos + kNanosPerSecond / 10;
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{1 * kNanosPerSecond, 2 * kNanosPerSecond, 4 * kNanosPerSecond,
                                          5 * kNanosPerSecond, 5 * kNanosPerSecond}));
  // An instance that stayed up for min_healthy_time: back at once, and the
  // next quick death starts again from `delay`.
  RestartDecision up = Decide(s, false, "killed by SIGKILL", &h, now, kMinHealthy);
  ASSERT_TRUE(up.restart);
  EXPECT_FALSE(up.quick);
  EXPECT_EQ(up.delay_nanos, 0);
  Apply(s, up, &h, now);
  EXPECT_EQ(h.quick, 0u);
  now += 10 * kNanosPerSecond;
  RestartDecision again = Decide(s, false, "exit code 1", &h, now, kNanosPerSecond / 2);
  EXPECT_TRUE(again.quick);
  EXPECT_EQ(again.delay_nanos, 1 * kNanosPerSecond);
}

TEST(JobRestartPolicy, UpLongEnoughRestartsAtOnceWhateverCameBefore) {
  TaskSpec s = SpecWith(RestartPolicy::kAlways, 0);
  RestartHistory h;
  h.quick = 7;  // many quick deaths before this instance
  h.total = 40;
  int64_t now = 1000 * kNanosPerSecond;
  RestartDecision d = Decide(s, true, "exit code 0", &h, now, 3 * kNanosPerSecond);
  ASSERT_TRUE(d.restart);
  EXPECT_FALSE(d.quick);
  EXPECT_EQ(d.delay_nanos, 0);
  // An instance recovered after an agent restart without a start time
  // counts as up long enough.
  h.last_start_mono = 0;
  EXPECT_EQ(DecideRestart(s, false, "exit code 1", h, now, kMinHealthy).delay_nanos, 0);
}

// Which ends are quick deaths (the delay doubles across them) and which
// restart at once: the table of QuickDeath, cell by cell.
TEST(JobRestartPolicy, QuickDeathTable) {
  struct Cell {
    EndCause cause;
    int64_t up;
    bool quick;
  };
  const int64_t ms = kNanosPerMilli, min = 60 * kNanosPerSecond;
  const Cell cells[] = {
      {EndCause::kExit, 0, true},
      {EndCause::kExit, 999 * ms, true},
      {EndCause::kExit, kMinHealthy, false},
      {EndCause::kExit, 10 * min, false},
      {EndCause::kUnhealthyNeverHealthy, 100 * ms, true},
      {EndCause::kUnhealthyNeverHealthy, 10 * min, true},  // up long, but never healthy
      {EndCause::kUnhealthyAfterHealthy, 100 * ms, false},  // healthy, then failed
      {EndCause::kUnhealthyAfterHealthy, 10 * min, false},
  };
  for (const Cell& c : cells) {
    EXPECT_EQ(QuickDeath(c.cause, c.up, kMinHealthy), c.quick)
        << static_cast<int>(c.cause) << " up " << c.up / ms << " ms";
  }
}

// A check that never passes backs off like a crash loop, however long each
// instance stays up before its checks fail it; an instance that had been
// healthy comes back at once and starts the doubling afresh.
TEST(JobRestartPolicy, UnhealthyBeforeEverHealthyDoublesTheDelay) {
  TaskSpec s = SpecWith(RestartPolicy::kOnFailure, 0);
  RestartHistory h;
  int64_t now = 1000 * kNanosPerSecond;
  const int64_t up = 30 * kNanosPerSecond;  // grace + failure_threshold x interval
  const std::string why = "unhealthy: check http /healthz: 503 (3 of 3); killed by SIGTERM";
  std::vector<int64_t> delays;
  for (int i = 0; i < 5; i++) {
    h.last_start_mono = now - up;
    RestartDecision d = DecideRestart(s, false, why, h, now, kMinHealthy, EndCause::kUnhealthyNeverHealthy);
    ASSERT_TRUE(d.restart) << i;
    EXPECT_TRUE(d.quick) << i;
    EXPECT_EQ(d.reason, why);
    delays.push_back(d.delay_nanos);
    Apply(s, d, &h, now);
    now += d.delay_nanos + up;
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{1 * kNanosPerSecond, 2 * kNanosPerSecond, 4 * kNanosPerSecond,
                                          5 * kNanosPerSecond, 5 * kNanosPerSecond}));
  h.last_start_mono = now - up;
  RestartDecision served = DecideRestart(s, false, why, h, now, kMinHealthy, EndCause::kUnhealthyAfterHealthy);
  ASSERT_TRUE(served.restart);
  EXPECT_FALSE(served.quick);
  EXPECT_EQ(served.delay_nanos, 0);
  Apply(s, served, &h, now);
  EXPECT_EQ(h.quick, 0u);
  now += up;
  h.last_start_mono = now - up;
  EXPECT_EQ(DecideRestart(s, false, why, h, now, kMinHealthy, EndCause::kUnhealthyNeverHealthy).delay_nanos,
            1 * kNanosPerSecond);
  // Healthy and failed within its first second: the throttle still holds
  // it to one start a second.
  h.last_start_mono = now - 300 * kNanosPerMilli;
  EXPECT_EQ(DecideRestart(s, false, why, h, now, kMinHealthy, EndCause::kUnhealthyAfterHealthy).delay_nanos,
            700 * kNanosPerMilli);
}

TEST(JobRestartPolicy, AttemptsWithinIntervalFail) {
  TaskSpec s = SpecWith(RestartPolicy::kOnFailure, 4);
  RestartHistory h;
  int64_t now = 1000 * kNanosPerSecond;
  for (int i = 0; i < 4; i++) {
    // Up long enough each time: restarted at once, yet counted.
    RestartDecision d = Decide(s, false, "exit code 1", &h, now, 2 * kNanosPerSecond);
    ASSERT_TRUE(d.restart) << i;
    EXPECT_EQ(d.delay_nanos, 0) << i;
    EXPECT_EQ(d.reason, Format("exit code 1 (restart %d of 4 within 1m)", i + 1));
    Apply(s, d, &h, now);
    now += 2 * kNanosPerSecond;
  }
  RestartDecision last = Decide(s, false, "exit code 1", &h, now, 2 * kNanosPerSecond);
  EXPECT_FALSE(last.restart);
  EXPECT_TRUE(last.failed);
  EXPECT_EQ(last.reason, "failed: exit code 1; restart limit reached (4 restarts within 1m)");
  // Once the window has passed, the count starts afresh.
  RestartDecision later = Decide(s, false, "exit code 1", &h, now + 120 * kNanosPerSecond, 2 * kNanosPerSecond);
  EXPECT_TRUE(later.restart);
  EXPECT_EQ(later.reason, "exit code 1 (restart 1 of 4 within 1m)");
}

TEST(JobRestartPolicy, NeverMoreThanOneStartPerSecond) {
  TaskSpec s = SpecWith(RestartPolicy::kAlways, 0);
  s.restart.delay_nanos = 0;
  s.restart.max_delay_nanos = 0;
  RestartHistory h;
  int64_t now = 1000 * kNanosPerSecond;
  // Died 200 ms after it started: the throttle holds the next start back
  // until a second after the previous one (min_healthy_time 0 or delay 0
  // alike).
  h.last_start_mono = now - 200 * kNanosPerMilli;
  RestartDecision d = DecideRestart(s, true, "exit code 0", h, now, kMinHealthy);
  ASSERT_TRUE(d.restart);
  EXPECT_EQ(d.delay_nanos, 800 * kNanosPerMilli);
  RestartDecision no_min = DecideRestart(SpecWith(RestartPolicy::kAlways, 0), true, "exit code 0", h, now, 0);
  EXPECT_FALSE(no_min.quick);
  EXPECT_EQ(no_min.delay_nanos, 800 * kNanosPerMilli);
  // A task that had been up for a while is restarted at once, however often
  // it was restarted before (as runit and s6 do).
  h.last_start_mono = now - 5 * kNanosPerSecond;
  h.total = 3;
  RestartDecision up = DecideRestart(s, true, "exit code 0", h, now, kMinHealthy);
  ASSERT_TRUE(up.restart);
  EXPECT_EQ(up.delay_nanos, 0);
}

TEST(JobRestartPolicy, DescribeExit) {
  driver::ExitResult e;
  EXPECT_EQ(driver::DescribeExit(e), "exit code 0");
  e.exit_code = 137;
  e.signal = 9;
  EXPECT_EQ(driver::DescribeExit(e), "killed by SIGKILL");
  e.oom_killed = true;
  EXPECT_EQ(driver::DescribeExit(e), "OOM killed");
  e.error = "exit status unknown";
  EXPECT_EQ(driver::DescribeExit(e), "exit status unknown");
}

// ---- job status ----------------------------------------------------------------------

TaskStatusView TV(RunState s, Hook hook = Hook::kMain, bool failed = false, bool completed = false,
                  bool sidecar = false) {
  TaskStatusView v;
  v.state = s;
  v.lifecycle.hook = hook;
  v.lifecycle.sidecar = sidecar;
  v.failed = failed;
  v.completed = completed;
  return v;
}

TEST(JobStatus, Derived) {
  using S = RunState;
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kPending), TV(S::kRunning)}), "pending");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kRunning), TV(S::kRunning)}), "running");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kRunning), TV(S::kBackoff)}), "degraded");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kRunning), TV(S::kDead, Hook::kMain, true)}), "degraded");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kDead, Hook::kMain, true)}), "failed");
  // Nothing runs: a task waiting to be restarted is not "degraded".
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kBackoff)}), "backoff");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kBackoff), TV(S::kDead, Hook::kMain, true)}), "backoff");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kDead, Hook::kPrestart, false, true), TV(S::kBackoff)}), "backoff");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kDead, Hook::kMain, true), TV(S::kStarting)}), "failed");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kRunning, Hook::kPrestart, false, false, true), TV(S::kBackoff)}),
            "degraded");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kDead, Hook::kMain, false, true)}), "complete");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kDead, Hook::kPrestart, true), TV(S::kPending)}), "failed");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kDead, Hook::kPrestart, false, true), TV(S::kRunning)}), "running");
  EXPECT_EQ(DeriveJobStatus(true, {TV(S::kStarting, Hook::kPrestart, false, false, true), TV(S::kPending)}),
            "pending");
  EXPECT_EQ(DeriveJobStatus(false, {TV(S::kStopping), TV(S::kDead)}), "stopping");
  EXPECT_EQ(DeriveJobStatus(false, {TV(S::kDead), TV(S::kDead)}), "stopped");
}

TEST(JobStatus, WaitingReason) {
  using S = RunState;
  auto named = [](TaskStatusView v, const char* name, const char* exit = "") {
    v.name = name;
    v.last_exit = exit;
    return v;
  };
  std::vector<TaskStatusView> tasks = {named(TV(S::kPending), "web"),
                                       named(TV(S::kDead, Hook::kPrestart, true), "setup", "exit code 1"),
                                       named(TV(S::kPending, Hook::kPoststart), "announce")};
  EXPECT_EQ(WaitingReason(tasks, 0), "waiting for prestart task setup (failed: exit code 1)");
  EXPECT_EQ(WaitingReason(tasks, 1), "");
  EXPECT_EQ(WaitingReason(tasks, 2), "waiting for main task web (pending)");
  tasks[1] = named(TV(S::kBackoff, Hook::kPrestart), "setup", "exit code 2");
  EXPECT_EQ(WaitingReason(tasks, 0), "waiting for prestart task setup (backoff: exit code 2)");
  tasks[1] = named(TV(S::kRunning, Hook::kPrestart), "setup");
  EXPECT_EQ(WaitingReason(tasks, 0), "waiting for prestart task setup (running)");
  // A prestart sidecar is ready once it runs; a completed prestart task too.
  tasks[1] = named(TV(S::kRunning, Hook::kPrestart, false, false, true), "proxy");
  EXPECT_EQ(WaitingReason(tasks, 0), "");
  tasks[1] = named(TV(S::kDead, Hook::kPrestart, false, true), "setup");
  EXPECT_EQ(WaitingReason(tasks, 0), "");
  tasks[0].state = S::kRunning;
  EXPECT_EQ(WaitingReason(tasks, 2), "");
}

// ---- orchestration with a fake runner --------------------------------------------------

class FakeTasks : public TaskRunner, public TaskStore, public task::EventSink {
 public:
  struct Inst {
    bool running = false;
    int starts = 0;
    std::string spec_hash;
    std::function<void(const driver::ExitResult&)> wait;
  };
  std::map<std::string, Inst> inst;
  std::vector<std::string> log;  // "start web.a", "stop web.a", "purge web.a"
  std::vector<driver::TaskEvent> events;
  std::set<std::string> fail_start;
  std::set<std::string> hold_start;  // starts that wait (for a required NRI plugin, say)
  std::map<std::string, std::function<void(Status)>> held;
  std::map<std::string, std::string> driver_problem;  // by driver name

  std::string DriverProblem(const std::string& driver) const override {
    auto it = driver_problem.find(driver);
    return it == driver_problem.end() ? "" : it->second;
  }
  void Start(const driver::TaskConfig& c, std::function<void(Status)> started, ExitCallback exited) override {
    log.push_back("start " + c.id);
    if (fail_start.count(c.id)) return started(Error(Code::kNotFound, "no such file"));
    if (hold_start.count(c.id)) {
      held[c.id] = std::move(started);
      return;
    }
    Inst& i = inst[c.id];
    i.running = true;
    i.starts++;
    i.spec_hash = c.spec_hash;
    i.wait = std::move(exited);
    started(OkStatus());
  }
  Status Watch(const std::string& id, ExitCallback exited) override {
    auto it = inst.find(id);
    if (it == inst.end()) return Error(Code::kNotFound, "no task " + id);
    it->second.wait = std::move(exited);
    return OkStatus();
  }
  void CheckAlive(const std::string& id, std::function<void(bool)> done) override {
    auto it = inst.find(id);
    done(it != inst.end() && it->second.running);
  }
  void Stop(const std::string& id, int64_t, std::function<void(Status)> done) override {
    log.push_back("stop " + id);
    Exit(id, 143);
    done(OkStatus());
  }
  void AbortStart(const std::string& id) override {
    log.push_back("abort " + id);
    auto it = held.find(id);
    if (it == held.end()) return;
    auto started = std::move(it->second);
    held.erase(it);
    started(Error(Code::kAborted, "stopped while waiting"));
  }
  void Publish(const driver::TaskEvent& ev) override { events.push_back(ev); }
  Status UpdateResources(const std::string& id, const cgroup::Resources& r) override {
    log.push_back("limits " + id + " " + std::to_string(r.memory_max));
    return OkStatus();
  }
  Status ApplyJobResources(const std::string& job, const cgroup::Resources& r) override {
    log.push_back("job-limits " + job + " " + std::to_string(r.memory_max));
    return OkStatus();
  }
  Result<Instance> Lookup(const std::string& id) override {
    auto it = inst.find(id);
    if (it == inst.end()) return Error(Code::kNotFound, "no task");
    Instance i;
    i.running = it->second.running;
    i.spec_hash = it->second.spec_hash;
    if (!i.running) i.exit.exit_code = 1;
    return i;
  }
  void Purge(const std::string& id, std::function<void(Status)> done) override {
    log.push_back("purge " + id);
    inst.erase(id);
    done(OkStatus());
  }
  std::vector<std::pair<std::string, std::string>> EndedJobTasks() override {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [id, i] : inst) {
      if (!i.running) out.push_back({id, id.substr(0, id.find('.'))});
    }
    return out;
  }
  void Exit(const std::string& id, int code) {
    Inst& i = inst[id];
    if (!i.running) return;
    i.running = false;
    driver::ExitResult e;
    e.exit_code = code;
    if (i.wait) {
      auto w = std::move(i.wait);
      i.wait = nullptr;
      w(e);
    }
  }
  int Index(const std::string& entry) const {
    for (size_t k = 0; k < log.size(); k++) {
      if (log[k] == entry) return static_cast<int>(k);
    }
    return -1;
  }
};

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outpost-jobmgr-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    loop_ = MakeLoop();
    ASSERT_TRUE(loop_);
    Reopen();
  }
  void TearDown() override {
    jobs_.reset();
    (void)sys::RemoveTree(dir_);
  }
  void Reopen() {
    jobs_.reset();
    JobManager::Options o;
    o.state_dir = dir_;
    o.max_jobs = 3;
    o.events = &fake_;
    auto m = JobManager::Create(loop_.get(), &fake_, &fake_, o);
    ASSERT_TRUE(m.ok()) << m.error().message();
    jobs_ = std::move(*m);
    jobs_->Recover();
  }
  std::string State(const std::string& job, const std::string& task) {
    auto v = jobs_->Inspect(job);
    if (!v.ok()) return "no job";
    for (const auto& t : v->tasks) {
      if (t.name == task) return RunStateName(t.state);
    }
    return "no task";
  }
  std::string Status(const std::string& job) {
    auto v = jobs_->Inspect(job);
    return v.ok() ? v->status : v.error().message();
  }
  bool Settle(const std::function<bool()>& pred) { return RunUntil(loop_.get(), pred, 3 * kNanosPerSecond); }

  std::string dir_;
  std::unique_ptr<Loop> loop_;
  FakeTasks fake_;
  std::unique_ptr<JobManager> jobs_;
};

const char kLifecycle[] = R"({"id": "web", "tasks": [
  {"name": "main", "command": "/bin/main"},
  {"name": "pre", "command": "/bin/pre", "lifecycle": {"hook": "prestart"}},
  {"name": "side", "command": "/bin/side", "lifecycle": {"hook": "prestart", "sidecar": true}},
  {"name": "post", "command": "/bin/post", "lifecycle": {"hook": "poststart"}}]})";

TEST_F(JobManagerTest, LifecycleOrder) {
  auto r = jobs_->Submit(kLifecycle);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->created);
  ASSERT_TRUE(Settle([&] { return State("web", "pre") == "running" && State("web", "side") == "running"; }));
  // Main waits for the prestart task to finish.
  ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(State("web", "main"), "pending");
  EXPECT_EQ(State("web", "post"), "pending");
  EXPECT_EQ(Status("web"), "pending");
  fake_.Exit("web.pre", 0);
  ASSERT_TRUE(Settle([&] { return State("web", "post") == "running"; }));
  EXPECT_EQ(State("web", "pre"), "dead");
  EXPECT_LT(fake_.Index("start web.main"), fake_.Index("start web.post"));
  EXPECT_EQ(Status("web"), "running");
  // Stop: main and poststart first, the prestart sidecar last.
  bool stopped = false;
  jobs_->Stop("web", -1, [&](outpost::Status st) { stopped = st.ok(); });
  ASSERT_TRUE(Settle([&] { return stopped; }));
  EXPECT_LT(fake_.Index("stop web.main"), fake_.Index("stop web.side"));
  EXPECT_LT(fake_.Index("stop web.post"), fake_.Index("stop web.side"));
  EXPECT_EQ(Status("web"), "stopped");
}

TEST_F(JobManagerTest, AStopWhileAStartWaitsAbortsThatStart) {
  fake_.hold_start.insert("w.a");
  ASSERT_TRUE(jobs_->Submit(R"({"id": "w", "tasks": [{"name": "a", "command": "/bin/a"}]})").ok());
  ASSERT_TRUE(Settle([&] { return fake_.held.count("w.a") == 1; }));
  EXPECT_EQ(State("w", "a"), "starting");
  bool removed = false;
  jobs_->Remove("w", [&](outpost::Status st) { removed = st.ok(); });
  ASSERT_TRUE(Settle([&] { return removed; })) << "a removal does not wait for a start that waits";
  EXPECT_GE(fake_.Index("abort w.a"), 0);
  EXPECT_FALSE(jobs_->Inspect("w").ok()) << "the job is gone";
}

TEST_F(JobManagerTest, FailedPrestartBlocksMainAndFailsTheJob) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "j", "tasks": [{"name": "m", "command": "/m"},
    {"name": "p", "command": "/p", "lifecycle": {"hook": "prestart"}, "restart": {"policy": "never"}}]})")
                  .ok());
  ASSERT_TRUE(Settle([&] { return State("j", "p") == "running"; }));
  fake_.Exit("j.p", 1);
  ASSERT_TRUE(Settle([&] { return Status("j") == "failed"; }));
  EXPECT_EQ(State("j", "m"), "pending");
  EXPECT_EQ(jobs_->Inspect("j")->tasks[0].reason, "waiting for prestart task p (failed: exit code 1)");
  EXPECT_EQ(fake_.Index("start j.m"), -1);
}

TEST_F(JobManagerTest, UpdateRestartsOnlyChangedTasks) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "u", "tasks": [{"name": "a", "command": "/a"}, {"name": "b", "command": "/b"},
    {"name": "c", "command": "/c"}]})")
                  .ok());
  ASSERT_TRUE(Settle([&] { return Status("u") == "running"; }));
  const std::string b_hash = fake_.inst["u.b"].spec_hash;
  auto same = jobs_->Submit(R"({"id": "u", "tasks": [{"name": "a", "command": "/a"}, {"name": "b", "command": "/b"},
    {"name": "c", "command": "/c"}]})");
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->unchanged);
  auto r = jobs_->Submit(R"({"id": "u", "tasks": [{"name": "a", "command": "/a"}, {"name": "b", "command": "/b2"},
    {"name": "d", "command": "/d"}]})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->restarted, std::vector<std::string>{"b"});
  EXPECT_EQ(r->added, std::vector<std::string>{"d"});
  EXPECT_EQ(r->removed, std::vector<std::string>{"c"});
  EXPECT_EQ(r->job.version, 2);
  ASSERT_TRUE(Settle([&] {
    return Status("u") == "running" && fake_.Index("purge u.c") >= 0 && fake_.inst["u.b"].starts == 2;
  })) << Status("u") << " " << ::testing::PrintToString(fake_.log);
  EXPECT_EQ(fake_.inst["u.a"].starts, 1);
  EXPECT_EQ(fake_.inst["u.d"].starts, 1);
  // The supervisor keeps its task's fingerprint between starts: the new
  // spec's, not the one it had before the update.
  auto view = jobs_->Inspect("u");
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->spec.tasks.size(), 3u);
  EXPECT_EQ(view->spec.tasks[1].name, "b");
  EXPECT_EQ(fake_.inst["u.b"].spec_hash, TaskFingerprint(view->spec.tasks[1]));
  EXPECT_NE(fake_.inst["u.b"].spec_hash, b_hash);
}

TEST_F(JobManagerTest, InvalidUpdateChangesNothing) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "v", "tasks": [{"name": "a", "command": "/a"}]})").ok());
  ASSERT_TRUE(Settle([&] { return Status("v") == "running"; }));
  auto r = jobs_->Submit(R"({"id": "v", "tasks": [{"name": "a", "command": ""}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
  ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(fake_.inst["v.a"].starts, 1);
  EXPECT_EQ(jobs_->Inspect("v")->version, 1);
}

TEST_F(JobManagerTest, MaxJobs) {
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(jobs_->Submit(Format(R"({"id": "m%d", "tasks": [{"name": "a", "command": "/a"}]})", i)).ok());
  }
  auto r = jobs_->Submit(R"({"id": "m9", "tasks": [{"name": "a", "command": "/a"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "cannot add job \"m9\": the node already runs 3 jobs, the limit (config key max_jobs)");
}

TEST_F(JobManagerTest, RestartPolicyAfterExitAndManualRestart) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "r", "tasks": [{"name": "a", "command": "/a",
    "restart": {"policy": "on-failure", "attempts": 1, "delay": "1s", "max_delay": "1s"}}]})")
                  .ok());
  ASSERT_TRUE(Settle([&] { return State("r", "a") == "running"; }));
  fake_.Exit("r.a", 3);
  EXPECT_EQ(State("r", "a"), "backoff");
  // Throttled: at least a second between starts.
  const std::string first_hash = fake_.inst["r.a"].spec_hash;
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return fake_.inst["r.a"].starts == 2; }, 3 * kNanosPerSecond));
  EXPECT_EQ(fake_.inst["r.a"].spec_hash, first_hash);
  EXPECT_EQ(first_hash, TaskFingerprint(jobs_->Inspect("r")->spec.tasks[0]));
  fake_.Exit("r.a", 3);
  EXPECT_EQ(State("r", "a"), "dead");
  EXPECT_EQ(Status("r"), "failed");
  bool saw_failed = false;
  for (const auto& e : fake_.events) saw_failed |= e.type == "failed" && e.task_name == "a";
  EXPECT_TRUE(saw_failed);
  ASSERT_TRUE(jobs_->Restart("r", "a").ok());
  EXPECT_EQ(State("r", "a"), "running");
  EXPECT_EQ(fake_.inst["r.a"].starts, 3);
  EXPECT_EQ(jobs_->Restart("r", "zz").error().message(), "job \"r\" has no task \"zz\" (tasks: a)");
}

// The message of the index-th event of type on task a of job ("" = none).
std::string EventMessage(const FakeTasks& f, const std::string& job, const std::string& type, int index) {
  for (const auto& e : f.events) {
    if (e.job == job && e.task_name == "a" && e.type == type && index-- == 0) return e.message;
  }
  return "";
}

TEST_F(JobManagerTest, AnInstanceUpForMinHealthyTimeRestartsAtOnce) {
  // Defaults: min_healthy_time 1s, restart on-failure, no limit.
  ASSERT_TRUE(jobs_->Submit(R"({"id": "up", "tasks": [{"name": "a", "command": "/a"}]})").ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !EventMessage(fake_, "up", "healthy", 0).empty(); },
                       5 * kNanosPerSecond));
  fake_.Exit("up.a", 1);
  EXPECT_EQ(EventMessage(fake_, "up", "restarting", 0), "restarting now: exit code 1");
  ASSERT_TRUE(Settle([&] { return fake_.inst["up.a"].starts == 2 && State("up", "a") == "running"; }));
  EXPECT_EQ(jobs_->Inspect("up")->tasks[0].restarts, 1u);
}

TEST_F(JobManagerTest, QuickDeathsWaitLongerEachTime) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "q", "min_healthy_time": "10m", "tasks": [{"name": "a", "command": "/a",
    "restart": {"delay": "1s", "max_delay": "1m"}}]})")
                  .ok());
  ASSERT_TRUE(Settle([&] { return State("q", "a") == "running"; }));
  fake_.Exit("q.a", 1);
  EXPECT_EQ(EventMessage(fake_, "q", "restarting", 0), "restarting in 1s: exit code 1");
  EXPECT_EQ(State("q", "a"), "backoff");
  EXPECT_EQ(Status("q"), "backoff");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return fake_.inst["q.a"].starts == 2; }, 5 * kNanosPerSecond));
  fake_.Exit("q.a", 1);
  EXPECT_EQ(EventMessage(fake_, "q", "restarting", 1), "restarting in 2s: exit code 1");
  // An operator's restart forgets the quick deaths.
  ASSERT_TRUE(jobs_->Restart("q", "a").ok());
  ASSERT_TRUE(Settle([&] { return State("q", "a") == "running"; }));
  // Throttled still: the start before was less than a second ago.
  fake_.Exit("q.a", 1);
  EXPECT_EQ(EventMessage(fake_, "q", "restarting", 3), "restarting in 1s: exit code 1");
}

TEST_F(JobManagerTest, TasksWaitForTheirDriverWithoutUsingRestartAttempts) {
  fake_.driver_problem["plug"] = "driver plug is not registered";
  auto r = jobs_->Submit(R"({"id": "w", "tasks": [{"name": "a", "command": "/a", "driver": "plug",
    "restart": {"policy": "on-failure", "attempts": 1, "delay": "1s", "max_delay": "1s"}},
    {"name": "b", "command": "/b"}]})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->waiting, std::vector<std::string>{"task a waits: driver plug is not registered"});
  ASSERT_TRUE(Settle([&] { return State("w", "b") == "running"; }));
  ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(State("w", "a"), "pending");
  EXPECT_EQ(jobs_->Inspect("w")->tasks[0].reason, "driver plug is not registered");
  EXPECT_EQ(fake_.Index("start w.a"), -1);
  auto waits = [&] {
    int n = 0;
    for (const auto& e : fake_.events) n += e.type == "waiting" && e.task_name == "a";
    return n;
  };
  EXPECT_EQ(waits(), 1) << "told once, however often the job is evaluated";

  // The driver registers: the task starts.
  fake_.driver_problem.clear();
  jobs_->OnDriverReady("plug");
  EXPECT_EQ(State("w", "a"), "running");
  EXPECT_EQ(fake_.inst["w.a"].starts, 1);

  // It fails while its driver is away: the restart waits for the driver
  // instead of failing, so it does not use up the one attempt.
  fake_.driver_problem["plug"] = "driver plug is disconnected";
  fake_.Exit("w.a", 1);
  ASSERT_TRUE(Settle([&] { return State("w", "a") == "pending"; })) << State("w", "a");
  EXPECT_EQ(jobs_->Inspect("w")->tasks[0].reason, "driver plug is disconnected");
  EXPECT_EQ(fake_.inst["w.a"].starts, 1);
  jobs_->OnDriverReady("other");
  EXPECT_EQ(State("w", "a"), "pending");
  fake_.driver_problem.clear();
  jobs_->OnDriverReady("plug");
  EXPECT_EQ(State("w", "a"), "running");
  EXPECT_EQ(fake_.inst["w.a"].starts, 2);
  fake_.Exit("w.a", 1);
  EXPECT_EQ(State("w", "a"), "dead");
  EXPECT_EQ(Status("w"), "degraded");

  // A task waiting for its driver can be stopped.
  fake_.driver_problem["plug"] = "driver plug is not registered";
  ASSERT_TRUE(jobs_->Restart("w", "a").ok());
  EXPECT_EQ(State("w", "a"), "pending");
  bool stopped = false;
  jobs_->Stop("w", -1, [&](outpost::Status st) { stopped = st.ok(); });
  ASSERT_TRUE(Settle([&] { return stopped; }));
  EXPECT_EQ(State("w", "a"), "dead");
  EXPECT_EQ(fake_.inst["w.a"].starts, 2);
}

TEST_F(JobManagerTest, RecoveryAdoptsRunningTasksAndRestartsStaleOnes) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "p", "tasks": [{"name": "a", "command": "/a"}, {"name": "b", "command": "/b"}]})")
                  .ok());
  ASSERT_TRUE(Settle([&] { return Status("p") == "running"; }));
  // Agent restart: "a" still runs, "b" ended meanwhile.
  fake_.inst["p.b"].running = false;
  Reopen();
  ASSERT_TRUE(Settle([&] { return fake_.inst["p.b"].starts == 2; }));
  EXPECT_EQ(fake_.inst["p.a"].starts, 1);
  EXPECT_EQ(State("p", "a"), "running");
  // A stopped job stays stopped.
  bool stopped = false;
  jobs_->Stop("p", -1, [&](outpost::Status) { stopped = true; });
  ASSERT_TRUE(Settle([&] { return stopped; }));
  Reopen();
  ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(Status("p"), "stopped");
  EXPECT_EQ(fake_.inst["p.a"].starts, 1);
}

// Task records are not fsync'd: after a power cut, the record of a task
// removed with its job can be back while the job's record is not.
TEST_F(JobManagerTest, RecoveryRemovesEndedTasksOfJobsThatAreGone) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "kept", "tasks": [{"name": "a", "command": "/a"}]})").ok());
  ASSERT_TRUE(Settle([&] { return Status("kept") == "running"; }));
  fake_.inst["kept.a"].running = false;  // ended while no agent ran: restarted, not removed
  fake_.inst["gone.a"].running = false;  // came back after a power cut
  Reopen();
  ASSERT_TRUE(Settle([&] { return fake_.inst["kept.a"].starts == 2; }));
  EXPECT_GE(fake_.Index("purge gone.a"), 0);
  EXPECT_EQ(fake_.inst.count("gone.a"), 0u);
  EXPECT_LT(fake_.Index("purge kept.a"), 0);
  EXPECT_EQ(State("kept", "a"), "running");
}

TEST_F(JobManagerTest, RemoveDeletesTasksAndRecord) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "x", "tasks": [{"name": "a", "command": "/a"}]})").ok());
  ASSERT_TRUE(Settle([&] { return Status("x") == "running"; }));
  bool removed = false;
  jobs_->Remove("x", [&](outpost::Status st) { removed = st.ok(); });
  ASSERT_TRUE(Settle([&] { return removed; }));
  EXPECT_GE(fake_.Index("purge x.a"), 0);
  EXPECT_FALSE(jobs_->Inspect("x").ok());
  Reopen();
  EXPECT_FALSE(jobs_->Inspect("x").ok());
}

}  // namespace
}  // namespace outpost::job

namespace outpost::job {
namespace {

TEST_F(JobManagerTest, LimitsChangeLiveAndDroppingOneRestarts) {
  ASSERT_TRUE(jobs_->Submit(R"({"id": "l", "tasks": [{"name": "a", "command": "/a",
    "resources": {"memory": {"max": "64MiB"}}}]})")
                  .ok());
  ASSERT_TRUE(Settle([&] { return Status("l") == "running"; }));
  auto r = jobs_->Submit(R"({"id": "l", "tasks": [{"name": "a", "command": "/a",
    "resources": {"memory": {"max": "128MiB"}}}]})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->updated, std::vector<std::string>{"a"});
  EXPECT_TRUE(r->restarted.empty());
  EXPECT_EQ(r->job.version, 2);
  EXPECT_GE(fake_.Index("limits l.a 134217728"), 0);
  EXPECT_EQ(fake_.inst["l.a"].starts, 1);
  // Without a memory limit at all: a fresh cgroup, so a restart.
  auto d = jobs_->Submit(R"({"id": "l", "tasks": [{"name": "a", "command": "/a"}]})");
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->restarted, std::vector<std::string>{"a"});
  ASSERT_TRUE(Settle([&] { return fake_.inst["l.a"].starts == 2; }));
}

TEST(JobStartFailure, PermanentOnesAndTheirShellStatus) {
  int code = -1;
  EXPECT_TRUE(PermanentStartFailure(Error(Code::kNotFound, "command \"nosuch\" not found in PATH=/bin (exit status 127)"),
                                    &code));
  EXPECT_EQ(code, 127);
  EXPECT_TRUE(PermanentStartFailure(
      Error(Code::kPermissionDenied, "command '/tmp/x': Permission denied (exit status 126)"), &code));
  EXPECT_EQ(code, 126);
  EXPECT_TRUE(PermanentStartFailure(Error(Code::kNotFound, "user \"nobody2\" not found in /etc/passwd"), &code));
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(PermanentStartFailure(Error(Code::kInvalidArgument, "the driver refused the config"), &code));
  EXPECT_EQ(code, 0);
  // What can heal: a driver away, a resource short for now, a timeout.
  EXPECT_FALSE(PermanentStartFailure(Error(Code::kUnavailable, "driver x is not registered"), &code));
  EXPECT_FALSE(PermanentStartFailure(Error(Code::kResourceExhausted, "fork: EAGAIN (exit status 127)"), &code));
  EXPECT_EQ(code, 0);
  EXPECT_FALSE(PermanentStartFailure(Error(Code::kDeadlineExceeded, "timed out"), &code));
}

TEST_F(JobManagerTest, AFailedStartIsPermanentUntilAStartSucceeds) {
  fake_.fail_start.insert("p.a");
  ASSERT_TRUE(jobs_->Submit(R"({"id": "p", "tasks": [{"name": "a", "command": "/bin/a"}]})").ok());
  ASSERT_TRUE(Settle([&] { return jobs_->Inspect("p")->tasks[0].start_error_permanent; }));
  EXPECT_EQ(jobs_->Inspect("p")->tasks[0].start_exit_code, 0);
  fake_.fail_start.clear();
  ASSERT_TRUE(jobs_->Restart("p", "a").ok());
  ASSERT_TRUE(Settle([&] { return State("p", "a") == "running"; }));
  EXPECT_FALSE(jobs_->Inspect("p")->tasks[0].start_error_permanent);
}

TEST_F(JobManagerTest, StartStartsAStoppedJobOnly) {
  const char* spec = R"({"id": "s", "tasks": [{"name": "a", "command": "/bin/a"}]})";
  ASSERT_TRUE(jobs_->Submit(spec).ok());
  ASSERT_TRUE(Settle([&] { return Status("s") == "running"; }));
  bool already = false;
  ASSERT_TRUE(jobs_->Start("s", &already).ok());
  EXPECT_TRUE(already);
  EXPECT_EQ(fake_.inst["s.a"].starts, 1);
  bool stopped = false;
  jobs_->Stop("s", -1, [&](outpost::Status st) { stopped = st.ok(); });
  ASSERT_TRUE(Settle([&] { return stopped; }));
  // The same spec again leaves the stopped job stopped.
  auto same = jobs_->Submit(spec);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->unchanged);
  EXPECT_FALSE(same->job.running);
  ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(Status("s"), "stopped");
  ASSERT_TRUE(jobs_->Start("s", &already).ok());
  EXPECT_FALSE(already);
  ASSERT_TRUE(Settle([&] { return Status("s") == "running"; }));
  EXPECT_EQ(fake_.inst["s.a"].starts, 2);
  EXPECT_EQ(jobs_->Start("nosuch", &already).error().code(), Code::kNotFound);
}

}  // namespace
}  // namespace outpost::job
