// Internal to job/manager*.cc: what the JobManager keeps per job.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "job/manager.h"

namespace outpost::job {

// "job X not found", and names joined with ", " (in manager.cc).
Error JobNotFound(const std::string& id);
std::string JoinNames(const std::vector<std::string>& v);

inline bool IsPrestart(const TaskSupervisor& t) { return t.spec().lifecycle.hook == Hook::kPrestart; }
inline bool IsMain(const TaskSupervisor& t) { return t.spec().lifecycle.hook == Hook::kMain; }
inline bool IsPoststart(const TaskSupervisor& t) { return t.spec().lifecycle.hook == Hook::kPoststart; }

struct JobManager::Job {
  // The supervisors' specs point into it (one TaskSpec per task): a new
  // spec makes a new StoredJob (the supervisors are then rebound or
  // replaced, and the old one goes with the last of them); only the other
  // fields are changed in place.
  std::shared_ptr<StoredJob> stored = std::make_shared<StoredJob>();
  std::vector<std::shared_ptr<TaskSupervisor>> tasks;     // in spec order
  std::vector<std::shared_ptr<TaskSupervisor>> retiring;  // dropped by an update: stop, then purge
  bool main_started = false;
  bool post_started = false;
  bool eval_scheduled = false;
  bool removing = false;
  bool restarting = false;  // whole-job restart: stop everything, then start afresh
  // The job may have a network (it was wanted with an isolated network
  // since the last release), and its release is under way.
  bool network_attached = false;
  bool releasing_network = false;
  int64_t stop_timeout = -1;
  std::vector<DoneCallback> stop_waiters;
  std::vector<DoneCallback> remove_waiters;
  std::set<std::string> purging;
  // The removal of the tasks' instances waits for their driver (its reason),
  // since when (monotonic), and for which driver.
  std::string removal_waits;
  std::string removal_waits_for;
  int64_t pending_since = 0;
  uint64_t removal_retry = 0;  // a timer: tried again now and then too

  bool Wanted() const { return stored->running && !removing && !restarting; }
  std::shared_ptr<const TaskSpec> TaskSpecAt(size_t i) const {
    return std::shared_ptr<const TaskSpec>(stored, &stored->spec.tasks[i]);
  }
  bool AllDead() const {
    for (const auto& t : tasks) {
      if (t->state() != RunState::kDead) return false;
    }
    return retiring.empty();
  }
};

}  // namespace outpost::job
