// The task manager's recovery (task/manager.h): loading the persisted
// task records at start, reattaching running tasks through their drivers
// (or waiting for a driver plugin to register), acting on driver plugins
// coming and going, and killing task processes no record accounts for.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "proc/procfs.h"
#include "proc/uid_pool.h"
#include "task/entry.h"
#include "task/manager.h"

namespace outpost::task {

Status TaskManager::Recover() {
  std::string dir = options_.state_dir + "/tasks";
  DIR* listing = ::opendir(dir.c_str());
  if (!listing) return PathError("open", dir);
  std::vector<std::string> files;
  while (dirent* e = ::readdir(listing)) {
    std::string n = e->d_name;
    if (EndsWith(n, ".json") && n[0] != '.') files.push_back(n);
  }
  ::closedir(listing);
  std::vector<std::string> running;
  for (const std::string& f : files) {
    std::string path = dir + "/" + f;
    auto text = sys::ReadFile(path, 4 << 20);
    if (text.ok() && text->find_first_not_of(std::string(1, '\0')) == std::string::npos) {
      // Records are not fsync'd (docs/process-model.md): a power cut can
      // leave one that was new empty (or its blocks unwritten: zeros). Its process died with the node.
      log::Info("task record left empty by a power cut: removed", {{"file", path}});
      ::unlink(path.c_str());
      continue;
    }
    Result<TaskRecord> rec = text.ok() ? DecodeTaskRecord(*text) : Result<TaskRecord>(text.error());
    if (!rec.ok()) {
      // A corrupt record must not stop the others from coming back. It is
      // moved aside for inspection (as job records are); an unreadable one
      // stays, since it may be fine once the error goes away.
      std::string bad = path + ".bad";
      bool damaged = text.ok() && std::rename(path.c_str(), bad.c_str()) == 0;
      log::Error("cannot recover task record", {{"file", path},
                                                {"error", rec.error().message() + (damaged ? " (moved to " + bad + ")" : "")}});
      continue;
    }
    const std::string id = rec->handle.config.id;
    if (Find(id)) continue;
    auto t = std::make_unique<Task>();
    t->record = std::move(*rec);
    const driver::TaskConfig& c = t->config();
    if (!c.stdout_path.empty() && !c.log_dir.empty()) {
      uid_t uid = c.identity.switch_user ? c.identity.uid : ::getuid();
      gid_t gid = c.identity.switch_user ? c.identity.gid : ::getgid();
      if (!c.identity.switch_user) {
        auto creds = proc::ResolveCredentials(c.user, c.group, options_.users);
        if (creds.ok()) {
          uid = creds->uid;
          gid = creds->gid;
        }
      }
      Status st = OpenLogs(c, uid, gid, t.get());
      log::WarnIfError(st, "cannot reopen task logs", {{"task", id}});
      if (t->record.exited && t->out) {
        t->out->Drain();
        t->err->Drain();
      }
    }
    t->has_user = options_.uids && options_.uids->Lookup(id).has_value();
    DropDerivedPaths(t.get());
    Task* raw = t.get();
    tasks_[id] = std::move(t);
    if (!raw->record.exited) running.push_back(id);
  }
  if (options_.uids) {
    // Uids of tasks that are gone (removed while no agent ran) go back.
    std::set<std::string> live;
    for (const auto& [id, t] : tasks_) live.insert(id);
    for (const auto& [owner, uid] : options_.uids->Reconcile(live)) {
      log::Info("released the dynamic user of a vanished task", {{"task", owner}, {"uid", std::to_string(uid)}});
    }
  }
  for (const std::string& id : running) {
    Task* t = Find(id);
    if (!DriverOf(*t)) {
      // A driver plugin registers some time after the agent starts: its
      // tasks wait for it, for its grace period.
      const std::string name = t->record.driver();
      if (awaiting_driver_[name].insert(id).second && !awaiting_timers_.count(name)) {
        std::weak_ptr<bool> alive = alive_;
        awaiting_timers_[name] = loop_->AddTimer(options_.driver_grace_nanos, [this, alive, name] {
          if (!alive.lock()) return;
          awaiting_timers_.erase(name);
          OnDriverGone(name, "its driver \"" + name + "\" did not register within " +
                                 FormatDuration(options_.driver_grace_nanos));
        });
      }
      log::Info("task waits for its driver to register", {{"task", id}, {"driver", name}});
      continue;
    }
    RecoverThroughDriver(id);
  }
  if (!options_.first_since_boot) KillUnrecorded(running);
  log::Info("tasks recovered", {{"count", std::to_string(tasks_.size())}});
  return OkStatus();
}

void TaskManager::RecoverThroughDriver(const std::string& id) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!d || t->record.exited) return;
  std::weak_ptr<bool> alive = alive_;
  const TaskRecord full = FullRecord(*t);
  d->RecoverTask(full.handle, [this, alive, id](Status st) {
    if (!alive.lock()) return;
    Task* task = Find(id);
    if (!task || task->record.exited) return;
    // A driver plugin that disconnected meanwhile: the task is not lost
    // yet; its next instance recovers it, or its grace period ends it.
    if (!st.ok() && st.error().code() == Code::kUnavailable) return;
    if (!st.ok()) {
      driver::ExitResult lost;
      lost.exit_code = -1;
      lost.error = "exit status unknown: " + st.error().message();
      return OnExit(id, lost);
    }
    // Recovered again (its driver plugin came back): its exit is already
    // waited for; the driver asks its new instance.
    if (task->waiting) return;
    // No cgroup left (a reboot removed it with the process): nothing to
    // watch, and no warning about it.
    if (::access(task->config().cgroup.c_str(), F_OK) == 0) WatchOom(*task);
    WaitForExit(id);
  });
}

std::string TaskManager::DriverProblem(const std::string& name) const {
  const driver::Driver* d = options_.drivers->Find(name);
  return d ? d->Unreachable() : "driver " + name + " is not registered";
}

bool TaskManager::DriverGone(const std::string& name) const {
  if (gone_drivers_.count(name)) return true;
  const driver::Driver* d = options_.drivers->Find(name);
  return !d && MonotonicNanos() - created_mono_ >= options_.driver_grace_nanos;
}

void TaskManager::OnDriverChanged(const std::string& name) {
  if (!options_.drivers->Find(name)) return;
  gone_drivers_.erase(name);
  SubscribeTo(name);
  std::set<std::string> ids;
  auto w = awaiting_driver_.find(name);
  if (w != awaiting_driver_.end()) {
    ids = std::move(w->second);
    awaiting_driver_.erase(w);
  }
  auto timer = awaiting_timers_.find(name);
  if (timer != awaiting_timers_.end()) {
    loop_->CancelTimer(timer->second);
    awaiting_timers_.erase(timer);
  }
  for (const auto& [id, t] : tasks_) {
    if (!t->record.exited && !t->starting && t->record.driver() == name) ids.insert(id);
  }
  for (const std::string& id : ids) RecoverThroughDriver(id);
  DestroyOrphans(name);
}

// What a driver has that no record accounts for (a container whose task
// was removed while the driver was away and given up on, a start cut short
// by the worker's death) goes: nothing runs, or holds a bundle, outside
// supervision. Asked after the recoveries, which the driver takes first.
void TaskManager::DestroyOrphans(const std::string& name) {
  driver::Driver* d = options_.drivers->Find(name);
  if (!d) return;
  std::weak_ptr<bool> alive = alive_;
  d->ListTasks([this, alive, name](Result<std::vector<std::string>> ids) {
    if (!alive.lock()) return;
    if (!ids.ok()) {
      if (ids.error().code() != Code::kUnimplemented && ids.error().code() != Code::kUnavailable) {
        log::Warn("cannot list a driver's tasks", {{"driver", name}, {"error", ids.error().message()}});
      }
      return;
    }
    driver::Driver* drv = options_.drivers->Find(name);
    for (const std::string& id : *ids) {
      if (!drv || Find(id)) continue;
      drv->DestroyTask(id, true, [this, alive, id, name](Status st) {
        if (!alive.lock()) return;
        driver::TaskEvent ev;
        ev.task_id = id;
        size_t dot = id.find('.');
        if (dot != std::string::npos) ev.job = id.substr(0, dot);
        ev.timestamp_unix_nanos = WallNanos();
        ev.type = "destroyed";
        ev.message = st.ok() ? "no task record accounts for it: destroyed by its driver " + name
                             : "no task record accounts for it, and its driver " + name +
                                   " could not destroy it: " + st.error().message();
        log::Warn(ev.message, {{"task", id}, {"driver", name}});
        options_.events->Publish(ev);
      });
    }
  });
}

void TaskManager::OnDriverGone(const std::string& name, const std::string& why) {
  gone_drivers_.insert(name);
  std::set<std::string> ids;
  auto w = awaiting_driver_.find(name);
  if (w != awaiting_driver_.end()) {
    ids = std::move(w->second);
    awaiting_driver_.erase(w);
  }
  for (const auto& [id, t] : tasks_) {
    if (!t->record.exited && !t->starting && t->record.driver() == name) ids.insert(id);
  }
  for (const std::string& id : ids) {
    Task* t = Find(id);
    if (!t || t->record.exited) continue;
    driver::ExitResult lost;
    lost.exit_code = -1;
    lost.error = "exit status unknown: " + why;
    OnExit(id, lost);
  }
  if (driver_gone_) driver_gone_(name);
}

// A live process in one of this agent's task dirs that no running record
// accounts for is what a start cut short leaves: the worker died between
// spawning the task and writing its record. The task's job would start it
// again (two copies), so it goes, with anything it started.
void TaskManager::KillUnrecorded(const std::vector<std::string>& running) {
  std::vector<std::string> rest;
  std::vector<pid_t> pids =
      proc::ProcessesWithEnvPrefix("OUTPOST_TASK_DIR=" + options_.state_dir + "/task-data/", &rest);
  for (size_t i = 0; i < pids.size(); ++i) {
    std::string id = rest[i].substr(0, rest[i].find('/'));
    if (pids[i] == ::getpid() || std::find(running.begin(), running.end(), id) != running.end()) continue;
    log::Warn("killing a task process that no record accounts for (its start was cut short)",
              {{"task", id}, {"pid", std::to_string(pids[i])}});
    ::kill(pids[i], SIGKILL);
  }
}

}  // namespace outpost::task
