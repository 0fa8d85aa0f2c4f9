#include "task/manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "logs/log_pipe.h"
#include "cgroup/cgroup.h"
#include "proc/uid_pool.h"
#include "proc/users.h"

namespace outpost::task {

// Per task: its log pipes and what reading its logs needs. The rest of the
// config lives once, in the driver's handle (ConfigOf).
struct TaskManager::Logs {
  std::string name;
  int max_files = 10;
  std::unique_ptr<logs::LogPipe> out;
  std::unique_ptr<logs::LogPipe> err;
};

TaskManager::TaskManager(Loop* loop, Options options) : loop_(loop), options_(std::move(options)) {}

TaskManager::~TaskManager() {
  if (driver_ && subscription_) driver_->UnsubscribeEvents(subscription_);
}

Result<std::unique_ptr<TaskManager>> TaskManager::Create(Loop* loop, Options options) {
  std::unique_ptr<TaskManager> m(new TaskManager(loop, std::move(options)));
  // task-data is traversable (0711) so a task running as another user can
  // reach its own dir (0700, owned by that user); nothing can be listed.
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(m->options_.state_dir + "/task-data", 0711));
  if (::chmod((m->options_.state_dir + "/task-data").c_str(), 0711) != 0) {
    return ErrnoError("chmod '" + m->options_.state_dir + "/task-data'");
  }
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(m->options_.state_dir + "/logs", 0700));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(m->options_.runtime_dir + "/fifo", 0700));
  driver::ExecDriver::Options d;
  d.state_dir = m->options_.state_dir;
  d.keeper_is_parent = m->options_.keeper_is_parent;
  d.keeper_pid = m->options_.keeper_pid;
  d.cgroups = m->options_.cgroups;
  d.oom = m->options_.oom;
  d.allow_without_limits = m->options_.allow_without_limits;
  auto driver = driver::ExecDriver::Create(loop, d);
  if (!driver.ok()) return driver.error();
  m->driver_ = std::move(*driver);
  TaskManager* raw = m.get();
  m->subscription_ = m->driver_->SubscribeEvents([raw](const driver::TaskEvent& ev) {
    raw->Record(ev);
    // The task has exited: whatever it wrote is in the pipe now.
    if (ev.type == "exited" || ev.type == "signalled" || ev.type == "stopped") {
      auto it = raw->logs_.find(ev.task_id);
      if (it != raw->logs_.end()) {
        if (it->second->out) it->second->out->Drain();
        if (it->second->err) it->second->err->Drain();
      }
    }
  });
  return m;
}

std::string TaskManager::FifoPath(const std::string& id, const char* stream) const {
  return options_.runtime_dir + "/fifo/" + id + "." + stream;
}

Status TaskManager::OpenLogs(const driver::TaskConfig& c, uid_t uid, gid_t gid, Logs* out) {
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(c.log_dir, 0755));
  logs::RotationPolicy policy;
  policy.max_files = c.log_max_files;
  policy.max_file_size = c.log_max_file_size;
  // The callbacks keep only what an event needs, not the whole config.
  std::string id = c.id, name = c.name, job = c.job;
  auto on_error = [this, id, name, job](const char* stream) {
    return [this, id, name, job, stream](const std::string& error) {
      log::Warn("task log write failed", {{"task", id}, {"stream", stream}, {"error", error}});
      driver::TaskEvent ev;
      ev.task_id = id;
      ev.task_name = name;
      ev.job = job;
      ev.timestamp_unix_nanos = WallNanos();
      ev.type = "error";
      ev.message = std::string(stream) + " log: " + error;
      Record(ev);
    };
  };
  auto o = logs::LogPipe::Open(loop_, c.stdout_path, c.log_dir + "/" + c.name + ".stdout",
                               c.stdout_path + ".cursor", policy, uid, gid, on_error("stdout"));
  if (!o.ok()) return o.error().Wrap("stdout log");
  auto e = logs::LogPipe::Open(loop_, c.stderr_path, c.log_dir + "/" + c.name + ".stderr",
                               c.stderr_path + ".cursor", policy, uid, gid, on_error("stderr"));
  if (!e.ok()) return e.error().Wrap("stderr log");
  out->name = c.name;
  out->max_files = c.log_max_files;
  out->out = std::move(*o);
  out->err = std::move(*e);
  return OkStatus();
}

void TaskManager::SetFifoHolder(HoldFifosFn hold, ReleaseFifosFn release) {
  hold_fifos_ = std::move(hold);
  release_fifos_ = std::move(release);
}

void TaskManager::HoldFifos(const std::string& id) {
  if (!hold_fifos_) return;
  std::vector<UniqueFd> owned;
  std::vector<int> fds;
  // The handle's paths (a recovered task keeps the FIFOs it was started with).
  auto c = driver_->ConfigOf(id);
  std::vector<std::string> paths = {FifoPath(id, "stdout"), FifoPath(id, "stderr")};
  if (c.ok() && !c->stdout_path.empty()) paths = {c->stdout_path, c->stderr_path};
  for (const std::string& p : paths) {
    auto fd = sys::Open(p, O_RDWR | O_NONBLOCK);
    if (!fd.ok()) {
      log::Warn("cannot open task FIFO for the keeper", {{"task", id}, {"error", fd.error().message()}});
      continue;
    }
    fds.push_back(fd->get());
    owned.push_back(std::move(*fd));
  }
  if (!fds.empty()) hold_fifos_(id, fds);  // the keeper gets its own copies
}

void TaskManager::HoldAllFifos() {
  for (const auto& [id, logs] : logs_) HoldFifos(id);
}

void TaskManager::CloseLogs(const std::string& id, bool remove_fifos) {
  auto it = logs_.find(id);
  if (it == logs_.end()) return;
  if (it->second->out) it->second->out->Drain();
  if (it->second->err) it->second->err->Drain();
  logs_.erase(it);
  if (release_fifos_) release_fifos_(id);
  if (remove_fifos) {
    for (const std::string& p : {FifoPath(id, "stdout"), FifoPath(id, "stderr")}) {
      ::unlink(p.c_str());
      ::unlink((p + ".cursor").c_str());
    }
  }
}

void TaskManager::Start(driver::TaskConfig c, StartCallback done) {
  if (c.id.empty()) {
    // Short, sortable, unique enough for one node: time + counter.
    c.id = Format("t%llx%llx", static_cast<unsigned long long>(WallNanos() / 1000000),
                  static_cast<unsigned long long>(++generated_ids_));
  }
  Status idst = driver::ValidateTaskId(c.id);
  if (!idst.ok()) return done(idst.error());
  if (logs_.count(c.id)) {
    return done(Error(Code::kAlreadyExists, "task with ID \"" + c.id + "\" already started"));
  }
  if (c.name.empty()) c.name = c.id;
  Status namest = driver::ValidateTaskId(c.name);
  if (!namest.ok()) return done(Error(Code::kInvalidArgument, "task name: " + namest.error().message()));
  if (c.user == "dynamic") {
    // A uid of its own from the pool, released when the task is destroyed.
    if (!options_.uids) {
      return done(Error(Code::kFailedPrecondition, "start task " + c.id + ": dynamic users are unavailable: " +
                                                       options_.dynamic_users_problem));
    }
    auto uid = options_.uids->Acquire(c.id);
    if (!uid.ok()) return done(uid.error().Wrap("start task " + c.id));
    c.user = std::to_string(*uid);
    c.group = c.user;
  }
  auto creds = proc::ResolveCredentials(c.user, c.group);
  if (!creds.ok()) {
    if (options_.uids) options_.uids->Release(c.id);
    return done(creds.error().Wrap("start task " + c.id));
  }
  c.task_dir = options_.state_dir + "/task-data/" + c.id;
  c.log_dir = options_.state_dir + "/logs/" + c.id;
  c.stdout_path = FifoPath(c.id, "stdout");
  c.stderr_path = FifoPath(c.id, "stderr");
  Status st = sys::MkdirAll(c.task_dir, 0700);
  if (st.ok() && ::chown(c.task_dir.c_str(), creds->uid, creds->gid) != 0 && ::geteuid() == 0) {
    st = ErrnoError("chown '" + c.task_dir + "'");
  }
  auto logs = std::make_unique<Logs>();
  if (st.ok()) st = OpenLogs(c, creds->uid, creds->gid, logs.get());
  if (!st.ok()) {
    if (options_.uids) options_.uids->Release(c.id);
    return done(st.error().Wrap("start task " + c.id));
  }
  logs_[c.id] = std::move(logs);
  std::string id = c.id;
  driver_->StartTask(c, [this, id, done](Result<driver::TaskHandle> h) {
    if (!h.ok()) {
      CloseLogs(id, true);
      if (options_.uids) options_.uids->Release(id);
      return done(h.error());
    }
    if (logs_.count(id)) HoldFifos(id);
    done(Inspect(id));
  });
}

void TaskManager::Stop(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                       driver::Driver::DoneCallback done) {
  if (timeout_nanos < 0) {
    auto config = driver_->ConfigOf(id);
    timeout_nanos = config.ok() ? config->kill_timeout_nanos : 5 * kNanosPerSecond;
  }
  driver_->StopTask(id, timeout_nanos, signal, std::move(done));
}

void TaskManager::Destroy(const std::string& id, bool force, driver::Driver::DoneCallback done) {
  driver_->DestroyTask(id, force, [this, id, done](Status st) {
    if (st.ok()) {
      CloseLogs(id, true);
      if (options_.uids) options_.uids->Release(id);
      // The task dir goes with the task; its logs stay for inspection until
      // the log dir is removed by the operator (or the job that owns it).
    }
    done(st);
  });
}

void TaskManager::Purge(const std::string& id, driver::Driver::DoneCallback done) {
  std::string task_dir = options_.state_dir + "/task-data/" + id;
  std::string log_dir = options_.state_dir + "/logs/" + id;
  auto remove_dirs = [task_dir, log_dir, done](Status st) {
    if (!st.ok() && st.error().code() != Code::kNotFound) return done(st);
    Status a = sys::RemoveTree(task_dir);
    Status b = sys::RemoveTree(log_dir);
    done(!a.ok() ? a : b);
  };
  if (!driver_->InspectTask(id).ok()) {
    CloseLogs(id, true);
    if (options_.uids) options_.uids->Release(id);
    return remove_dirs(OkStatus());
  }
  Destroy(id, true, remove_dirs);
}

Status TaskManager::UpdateResources(const std::string& id, const cgroup::Resources& r) {
  auto c = driver_->ConfigOf(id);
  if (!c.ok()) return c.error();
  cgroup::Cgroups* cg = options_.cgroups;
  if (!cg || !cg->available()) {
    if (!r.Any() || options_.allow_without_limits) return OkStatus();
    return Error(Code::kFailedPrecondition, "resource limits need cgroup v2, which is not usable here");
  }
  std::vector<std::string> problems = cg->Check(r);
  if (!problems.empty()) return Error(Code::kFailedPrecondition, problems.front());
  return cg->Apply(cg->TaskPath(c->job, c->id), r);
}

Status TaskManager::ApplyJobResources(const std::string& job, const cgroup::Resources& r) {
  cgroup::Cgroups* cg = options_.cgroups;
  if (!cg || !cg->available()) return OkStatus();  // refused at submission if it mattered
  return cg->EnsureJob(job, r);
}

Result<std::string> TaskManager::ResolveId(const std::string& id) const {
  size_t slash = id.find('/');
  if (slash == std::string::npos) return id;
  if (!resolver_) return Error(Code::kNotFound, "no job \"" + id.substr(0, slash) + "\" (jobs are not available)");
  return resolver_(id.substr(0, slash), id.substr(slash + 1));
}

Result<TaskView> TaskManager::Inspect(const std::string& id) {
  auto status = driver_->InspectTask(id);
  if (!status.ok()) return status.error();
  TaskView v;
  v.status = *status;
  auto it = logs_.find(id);
  if (it != logs_.end()) {
    auto config = driver_->ConfigOf(id);
    if (config.ok()) v.config = std::move(*config);
    v.log_dir = v.config.log_dir;
    for (logs::LogPipe* p : {it->second->out.get(), it->second->err.get()}) {
      if (!p) continue;
      v.log_bytes += p->stats().bytes_written;
      v.log_dropped += p->stats().bytes_dropped;
      if (!p->stats().last_error.empty()) v.log_error = p->stats().last_error;
    }
  }
  return v;
}

std::vector<TaskView> TaskManager::List() {
  std::vector<TaskView> out;
  for (const std::string& id : driver_->ListTasks()) {
    auto v = Inspect(id);
    if (v.ok()) out.push_back(std::move(*v));
  }
  return out;
}

Result<std::string> TaskManager::LogPath(const std::string& id, bool stderr_stream) {
  auto it = logs_.find(id);
  if (it == logs_.end()) return Error(Code::kNotFound, "task not found for given id");
  return options_.state_dir + "/logs/" + id + "/" + it->second->name + (stderr_stream ? ".stderr" : ".stdout");
}

int TaskManager::LogMaxFiles(const std::string& id) {
  auto it = logs_.find(id);
  return it == logs_.end() ? 10 : it->second->max_files;
}

Status TaskManager::Recover() {
  OUTPOST_RETURN_IF_ERROR(driver_->RecoverAll());
  for (const std::string& id : driver_->ListTasks()) {
    if (logs_.count(id)) continue;
    // The handle carries the config, including the log settings.
    auto status = driver_->InspectTask(id);
    if (!status.ok()) continue;
    auto config = driver_->ConfigOf(id);
    if (!config.ok()) continue;
    const driver::TaskConfig& c = *config;
    if (c.stdout_path.empty() || c.log_dir.empty()) continue;
    auto creds = proc::ResolveCredentials(c.user, c.group);
    auto logs = std::make_unique<Logs>();
    Status st = OpenLogs(c, creds.ok() ? creds->uid : ::getuid(), creds.ok() ? creds->gid : ::getgid(), logs.get());
    if (!st.ok()) {
      log::Error("cannot reopen task logs", {{"task", id}, {"error", st.error().message()}});
      continue;
    }
    if (status->state == driver::TaskState::kExited) {
      logs->out->Drain();
      logs->err->Drain();
    }
    logs_[id] = std::move(logs);
  }
  if (options_.uids) {
    // Uids of tasks that are gone (removed while no agent ran) go back.
    std::set<std::string> live;
    for (const std::string& id : driver_->ListTasks()) live.insert(id);
    for (const auto& [owner, uid] : options_.uids->Reconcile(live)) {
      log::Info("released the dynamic user of a vanished task", {{"task", owner}, {"uid", std::to_string(uid)}});
    }
  }
  if (!options_.keeper_is_parent) driver_->JournalReplayed();
  log::Info("tasks recovered", {{"count", std::to_string(driver_->ListTasks().size())}});
  return OkStatus();
}

void TaskManager::OnProcessExit(pid_t pid, int wait_status, int64_t unix_nanos) {
  driver_->OnProcessExit(pid, wait_status, unix_nanos);
}

void TaskManager::Record(const driver::TaskEvent& ev) {
  events_.push_back({next_seq_++, ev});
  while (events_.size() > options_.event_history) events_.pop_front();
  if (notify_.empty()) return;
  auto pending = std::move(notify_);
  notify_.clear();
  for (auto& [id, cb] : pending) cb();
}

std::vector<EventRecord> TaskManager::EventsAfter(uint64_t after_seq, const std::string& task_id,
                                              const std::string& job) const {
  std::vector<EventRecord> out;
  for (const EventRecord& r : events_) {
    if (r.seq <= after_seq) continue;
    if (!task_id.empty() && r.event.task_id != task_id) continue;
    if (!job.empty() && r.event.job != job) continue;
    out.push_back(r);
  }
  return out;
}

uint64_t TaskManager::NotifyOnEvent(std::function<void()> cb) {
  uint64_t id = next_notify_++;
  notify_[id] = std::move(cb);
  return id;
}

std::vector<std::string> TaskManager::LogProblems() const {
  std::vector<std::string> out;
  for (const auto& [id, l] : logs_) {
    for (logs::LogPipe* p : {l->out.get(), l->err.get()}) {
      if (p && !p->stats().last_error.empty()) {
        out.push_back(id + ": " + p->stats().last_error +
                      Format(" (%llu bytes dropped)", static_cast<unsigned long long>(p->stats().bytes_dropped)));
      }
    }
  }
  return out;
}

}  // namespace outpost::task
