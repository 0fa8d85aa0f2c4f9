// TaskSupervisor and a task's health checks (job/checks): a task with
// checks is healthy when they pass; a failing check with on_unhealthy
// "restart" stops the instance, and its end goes through the restart policy
// like any failed exit (counted, backed off), told as "unhealthy: ...": a
// quick death when its checks never passed, else a restart at once.
#include "job/supervisor.h"

namespace outpost::job {

void TaskSupervisor::StartChecks() {
  std::weak_ptr<TaskSupervisor> weak = shared_from_this();
  uint64_t gen = generation_;
  checks_ = std::make_unique<TaskChecks>(loop_, runner_, task_id(), spec_,
                                         [weak, gen](TaskHealth h, const std::string& message, bool restart) {
                                           auto self = weak.lock();
                                           if (self && self->generation_ == gen) self->OnHealth(h, message, restart);
                                         });
}

void TaskSupervisor::OnHealth(TaskHealth h, const std::string& message, bool restart) {
  if (state_ != RunState::kRunning) return;
  bool was = healthy_;
  healthy_ = h == TaskHealth::kHealthy;
  // A restart for a failing check is a quick death unless the instance was
  // healthy first (QuickDeath).
  if (healthy_) was_healthy_ = true;
  if (healthy_ && !was) Emit("healthy", message);
  if (h == TaskHealth::kUnhealthy) Emit("unhealthy", message);
  if (restart && unhealthy_kill_.empty()) {
    unhealthy_kill_ = message;
    runner_->Stop(task_id(), -1, [](Status) {});  // the exit is what restarts it
  }
  if (on_change_) on_change_();
}

}  // namespace outpost::job
