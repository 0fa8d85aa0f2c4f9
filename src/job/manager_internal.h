// Internal to job/manager*.cc: what the JobManager keeps per job.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "job/manager.h"

namespace outpost::job {

inline bool IsPrestart(const TaskSupervisor& t) { return t.spec().lifecycle.hook == Hook::kPrestart; }
inline bool IsMain(const TaskSupervisor& t) { return t.spec().lifecycle.hook == Hook::kMain; }
inline bool IsPoststart(const TaskSupervisor& t) { return t.spec().lifecycle.hook == Hook::kPoststart; }

struct JobManager::Job {
  StoredJob stored;
  std::vector<std::shared_ptr<TaskSupervisor>> tasks;     // in spec order
  std::vector<std::shared_ptr<TaskSupervisor>> retiring;  // dropped by an update: stop, then purge
  bool main_started = false;
  bool post_started = false;
  bool eval_scheduled = false;
  bool removing = false;
  bool restarting = false;  // whole-job restart: stop everything, then start afresh
  int64_t stop_timeout = -1;
  std::vector<DoneCallback> stop_waiters;
  std::vector<DoneCallback> remove_waiters;
  std::set<std::string> purging;

  bool Wanted() const { return stored.running && !removing && !restarting; }
  bool AllDead() const {
    for (const auto& t : tasks) {
      if (t->state() != RunState::kDead) return false;
    }
    return retiring.empty();
  }
};

}  // namespace outpost::job
