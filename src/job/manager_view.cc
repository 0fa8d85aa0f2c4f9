// JobManager: what a job looks like from outside (its status derived from
// its tasks', what is pending, the views ps and inspect print).
#include "job/manager.h"
#include "job/manager_internal.h"

#include "base/strings.h"

namespace outpost::job {

std::string DeriveJobStatus(bool desired_running, const std::vector<TaskStatusView>& tasks) {
  bool all_dead = true, any_failed = false, any_backoff = false, any_running = false, mains_ok = true,
       mains_dead = true, hooks_failed = false;
  for (const TaskStatusView& t : tasks) {
    bool main = t.lifecycle.hook == Hook::kMain;
    if (t.state != RunState::kDead) all_dead = false;
    if (t.failed) any_failed = true;
    if (t.failed && !main) hooks_failed = true;
    if (t.state == RunState::kBackoff) any_backoff = true;
    if (t.state == RunState::kRunning) any_running = true;
    if (main && t.state != RunState::kDead) mains_dead = false;
    if (main && !(t.state == RunState::kRunning || t.completed)) mains_ok = false;
    if (t.lifecycle.sidecar && t.state != RunState::kRunning && t.state != RunState::kDead) mains_ok = false;
  }
  if (!desired_running) return all_dead ? "stopped" : "stopping";
  if (mains_dead) return any_failed ? "failed" : "complete";
  if (hooks_failed && !any_running) return "failed";
  if (any_failed || any_backoff) {
    if (any_running) return "degraded";
    return any_backoff ? "backoff" : "failed";
  }
  if (mains_ok && any_running) return "running";
  return "pending";
}

std::string WaitingReason(const std::vector<TaskStatusView>& tasks, size_t i) {
  const Hook hook = tasks[i].lifecycle.hook;
  if (hook == Hook::kPrestart) return "";
  // A main task waits for the prestart tasks; a poststart task for the mains.
  const Hook before = hook == Hook::kMain ? Hook::kPrestart : Hook::kMain;
  for (const TaskStatusView& t : tasks) {
    if (t.lifecycle.hook != before) continue;
    bool ready = t.lifecycle.sidecar || before == Hook::kMain ? t.state == RunState::kRunning || t.completed
                                                                : t.completed;
    if (ready) continue;
    std::string how = t.failed ? "failed: " + t.last_exit
                      : t.state == RunState::kBackoff && !t.last_exit.empty()
                          ? "backoff: " + t.last_exit
                          : std::string(RunStateName(t.state));
    return Format("waiting for %s task %s (%s)", HookName(before), t.name.c_str(), how.c_str());
  }
  return "";
}

JobView JobManager::ViewOf(const Job& j) const {
  JobView v;
  v.id = j.stored->spec.id;
  v.source = j.stored->source;
  v.file = j.stored->file;
  v.running = j.stored->running;
  v.version = j.stored->version;
  v.submitted_unix_nanos = j.stored->submitted_unix_nanos;
  v.spec = j.stored->spec;
  for (const auto& t : j.tasks) {
    TaskStatusView tv;
    tv.name = t->spec().name;
    tv.task_id = t->task_id();
    tv.state = t->state();
    tv.lifecycle = t->spec().lifecycle;
    tv.restarts = t->restarts();
    tv.failed = t->failed();
    tv.completed = t->completed();
    tv.healthy = t->healthy();
    tv.health = t->health();
    tv.checks = t->check_views();
    tv.reason = t->reason();
    tv.last_exit = t->last_exit();
    tv.start_error_permanent = t->start_error_permanent();
    tv.start_exit_code = t->start_exit_code();
    tv.next_start_unix_nanos = t->next_start_unix_nanos();
    v.tasks.push_back(std::move(tv));
  }
  if (j.Wanted()) {
    for (size_t i = 0; i < v.tasks.size(); i++) {
      TaskStatusView& tv = v.tasks[i];
      if (tv.state == RunState::kPending && tv.reason.empty()) tv.reason = WaitingReason(v.tasks, i);
    }
  }
  v.status = DeriveJobStatus(j.Wanted(), v.tasks);
  if (j.removing) v.status = "removing";
  else if (j.restarting) v.status = "restarting";
  v.pending = PendingOf(j);
  v.pending_since_mono = v.pending.empty() ? 0 : j.pending_since;
  v.pending_on_driver = !j.removal_waits.empty();
  for (const auto& t : j.tasks) {
    if (t->stop_pending() && !t->waiting_for().empty()) v.pending_on_driver = true;
  }
  return v;
}

std::string JobManager::PendingOf(const Job& j) const {
  if (!j.removal_waits.empty()) return j.removal_waits;
  if (j.Wanted()) return "";
  for (const auto& t : j.tasks) {
    if (t->stop_pending()) return "task " + t->spec().name + ": " + t->reason();
  }
  for (const auto& t : j.retiring) {
    if (t->stop_pending()) return "task " + t->spec().name + ": " + t->reason();
  }
  return "";
}

Result<JobView> JobManager::Inspect(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return JobNotFound(id);
  return ViewOf(*it->second);
}

std::vector<JobView> JobManager::List() const {
  std::vector<JobView> out;
  for (const auto& [id, j] : jobs_) out.push_back(ViewOf(*j));
  return out;
}

Result<std::string> JobManager::TaskId(const std::string& job, const std::string& task) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return JobNotFound(job);
  std::vector<std::string> names;
  for (const auto& t : it->second->tasks) {
    if (t->spec().name == task) return t->task_id();
    names.push_back(t->spec().name);
  }
  return Error(Code::kNotFound, "job \"" + job + "\" has no task \"" + task + "\" (tasks: " + JoinNames(names) + ")");
}

}  // namespace outpost::job
