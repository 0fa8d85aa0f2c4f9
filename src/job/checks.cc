#include "job/checks.h"

#include "base/clock.h"
#include "base/strings.h"
#include "job/check_probe.h"
#include "job/supervisor.h"

namespace outpost::job {

const char* CheckVerdictName(CheckVerdict v) {
  switch (v) {
    case CheckVerdict::kPending: return "pending";
    case CheckVerdict::kPassing: return "passing";
    case CheckVerdict::kFailing: return "failing";
  }
  return "?";
}

const char* TaskHealthName(TaskHealth h) {
  switch (h) {
    case TaskHealth::kStarting: return "starting";
    case TaskHealth::kHealthy: return "healthy";
    case TaskHealth::kUnhealthy: return "unhealthy";
  }
  return "?";
}

bool RecordCheckResult(const CheckSpec& spec, CheckState* s, bool ok) {
  s->runs++;
  s->last_ok = ok;
  if (ok) {
    s->successes++;
    s->failures = 0;
  } else {
    s->failures++;
    s->successes = 0;
  }
  CheckVerdict before = s->verdict;
  if (ok && s->successes >= spec.success_threshold) s->verdict = CheckVerdict::kPassing;
  if (!ok && s->failures >= spec.failure_threshold) s->verdict = CheckVerdict::kFailing;
  return s->verdict != before;
}

TaskHealth HealthOf(const std::vector<CheckState>& states) {
  bool all_pass = true;
  for (const CheckState& s : states) {
    if (s.verdict == CheckVerdict::kFailing) return TaskHealth::kUnhealthy;
    if (s.verdict != CheckVerdict::kPassing) all_pass = false;
  }
  return all_pass ? TaskHealth::kHealthy : TaskHealth::kStarting;
}

struct TaskChecks::Slot {
  Loop::TimerId timer = 0;
  std::unique_ptr<NetProbe> probe;
  bool running = false;
};

namespace {

// One line, printable, bounded: what inspect and events show of an output.
std::string Excerpt(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= kCheckOutputBytes) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

TaskChecks::TaskChecks(Loop* loop, TaskRunner* runner, std::string task_id, std::shared_ptr<const TaskSpec> spec,
                       OnHealth on_health)
    : loop_(loop), runner_(runner), task_id_(std::move(task_id)), spec_(std::move(spec)), on_health_(std::move(on_health)) {
  states_.resize(spec_->checks.size());
  for (size_t i = 0; i < spec_->checks.size(); i++) {
    slots_.push_back(std::make_unique<Slot>());
    Schedule(i, spec_->checks[i].grace_nanos);
  }
}

TaskChecks::~TaskChecks() { Stop(); }

void TaskChecks::Stop() {
  *alive_ = false;
  for (auto& s : slots_) {
    if (s->timer) loop_->CancelTimer(s->timer);
    s->timer = 0;
    s->probe.reset();
  }
}

std::vector<CheckView> TaskChecks::Views() const {
  std::vector<CheckView> out;
  for (size_t i = 0; i < states_.size(); i++) {
    CheckView v;
    v.label = spec_->checks[i].Label();
    v.type = spec_->checks[i].type;
    v.state = states_[i];
    out.push_back(std::move(v));
  }
  return out;
}

void TaskChecks::Schedule(size_t i, int64_t delay) {
  Slot* s = slots_[i].get();
  s->timer = loop_->AddTimer(delay, [this, i, s] {
    s->timer = 0;
    Run(i);
  });
}

void TaskChecks::Run(size_t i) {
  const CheckSpec& c = spec_->checks[i];
  Slot* s = slots_[i].get();
  s->running = true;
  if (c.type == CheckType::kExec) {
    std::weak_ptr<bool> alive = alive_;
    runner_->ExecCheck(task_id_, c.command, c.timeout_nanos, [this, alive, i](Result<driver::ExecResult> r) {
      auto a = alive.lock();
      if (!a || !*a) return;
      if (!r.ok()) return Done(i, false, r.error().message());
      std::string out = Excerpt(r->output);
      if (r->exit_code == 0) return Done(i, true, out.empty() ? "exit code 0" : out);
      Done(i, false, Format("exit code %d", r->exit_code) + (out.empty() ? "" : ": " + out));
    });
    return;
  }
  s->probe = std::make_unique<NetProbe>(loop_, c, runner_->TaskNetns(task_id_),
                                        [this, i](const ProbeResult& r) { Done(i, r.ok, r.output); });
}

void TaskChecks::Done(size_t i, bool ok, std::string output) {
  const CheckSpec& c = spec_->checks[i];
  Slot* s = slots_[i].get();
  s->running = false;
  // The probe that called us is deleted later: this runs inside its callback.
  if (s->probe) {
    std::shared_ptr<NetProbe> old(s->probe.release());
    loop_->Defer([old] {});
  }
  CheckState& st = states_[i];
  st.output = Excerpt(output);
  st.last_unix_nanos = WallNanos();
  bool changed = RecordCheckResult(c, &st, ok);
  Schedule(i, c.interval_nanos);
  if (!changed) return;
  TaskHealth before = health_;
  health_ = HealthOf(states_);
  if (health_ == before && st.verdict != CheckVerdict::kFailing) return;
  std::string msg;
  bool restart = false;
  if (st.verdict == CheckVerdict::kFailing) {
    msg = Format("check %s: %s (%d of %d)", c.Label().c_str(), st.output.c_str(), st.failures, c.failure_threshold);
    restart = c.on_unhealthy == OnUnhealthy::kRestart;
  } else if (health_ == TaskHealth::kHealthy) {
    msg = states_.size() == 1 ? "check " + c.Label() + ": " + st.output
                              : Format("%zu checks passing", states_.size());
  } else {
    msg = "check " + c.Label() + ": " + st.output;
  }
  on_health_(health_, msg, restart);  // may destroy this
}

}  // namespace outpost::job
