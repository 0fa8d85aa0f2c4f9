#include "task/manager.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "cgroup/cgroup.h"
#include "proc/uid_pool.h"
#include "task/entry.h"

namespace outpost::task {

namespace {

constexpr const char* kNotFound = "task not found for given id";

}  // namespace

Status ValidateTaskId(const std::string& id) {
  if (id.empty() || id.size() > 128) return Error(Code::kInvalidArgument, "task id must be 1-128 characters long");
  if (id[0] == '.') return Error(Code::kInvalidArgument, "task id \"" + id + "\" must not start with '.'");
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok) {
      return Error(Code::kInvalidArgument,
                   "task id \"" + id + "\" may only contain letters, digits, '_', '-' and '.'");
    }
  }
  return OkStatus();
}

TaskManager::TaskManager(Loop* loop, Options options) : loop_(loop), options_(std::move(options)), unsaved_(loop, sys::Durability::kProcessCrash) {}

TaskManager::~TaskManager() {
  *alive_ = false;
  // A plugin driver may be gone already (its handler is destroyed first):
  // only one still registered is told.
  for (auto& [name, sub] : subscriptions_) {
    if (options_.drivers->Find(name) == sub.first) sub.first->UnsubscribeEvents(sub.second);
  }
}

// Driver events (a plugin's TaskEvents) reach the task's events; a driver
// plugin registered after the start is subscribed when it appears.
void TaskManager::SubscribeTo(const std::string& name) {
  driver::Driver* d = options_.drivers->Find(name);
  if (!d) return;
  auto it = subscriptions_.find(name);
  if (it != subscriptions_.end() && it->second.first == d) return;
  subscriptions_[name] = {d, d->SubscribeEvents([this](const driver::TaskEvent& ev) { PublishDriverEvent(ev); })};
}

Result<std::unique_ptr<TaskManager>> TaskManager::Create(Loop* loop, Options options) {
  std::unique_ptr<TaskManager> m(new TaskManager(loop, std::move(options)));
  m->created_mono_ = MonotonicNanos();
  m->created_wall_ = WallNanos();
  const std::string& state = m->options_.state_dir;
  // task-data is traversable (0711) so a task running as another user can
  // reach its own dir (0700, owned by that user); nothing can be listed.
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(state + "/task-data", 0711));
  if (::chmod((state + "/task-data").c_str(), 0711) != 0) return ErrnoError("chmod '" + state + "/task-data'");
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(state + "/logs", 0700));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(state + "/tasks", 0700));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(m->options_.runtime_dir + "/fifo", 0700));
  for (const std::string& name : m->options_.drivers->Names()) m->SubscribeTo(name);
  return m;
}

// Drivers name the task by id only; the job and task names come from the
// task's record. A driver's events from before this worker started are
// replayed to it (its event cursor starts again at 0): those the history
// kept from an earlier worker are not told twice.
void TaskManager::PublishDriverEvent(const driver::TaskEvent& ev) {
  if (ev.timestamp_unix_nanos < created_wall_ && options_.events->Holds(ev)) return;
  const Task* t = Find(ev.task_id);
  if (!t) return options_.events->Publish(ev);
  driver::TaskEvent named = ev;
  named.task_name = t->config().name;
  named.job = t->config().job;
  options_.events->Publish(named);
}

TaskManager::Task* TaskManager::Find(const std::string& id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : it->second.get();
}

driver::Driver* TaskManager::DriverOf(const Task& t) const { return options_.drivers->Find(t.record.driver()); }

std::string TaskManager::FifoPath(const std::string& id, const char* stream) const {
  return options_.runtime_dir + "/fifo/" + id + "." + stream;
}

std::string TaskManager::TaskDirPath(const std::string& id) const { return options_.state_dir + "/task-data/" + id; }

std::string TaskManager::LogDirPath(const std::string& id) const { return options_.state_dir + "/logs/" + id; }

namespace {
enum DerivedPath : uint8_t { kTaskDir = 1, kLogDir = 2, kStdout = 4, kStderr = 8 };
}  // namespace

void TaskManager::DropDerivedPaths(Task* t) const {
  driver::TaskConfig& c = t->record.handle.config;
  auto drop = [t](std::string* path, const std::string& derived, uint8_t bit) {
    if (path->empty() || *path != derived) return;
    std::string().swap(*path);
    t->derived_paths |= bit;
  };
  drop(&c.task_dir, TaskDirPath(c.id), kTaskDir);
  drop(&c.log_dir, LogDirPath(c.id), kLogDir);
  drop(&c.stdout_path, FifoPath(c.id, "stdout"), kStdout);
  drop(&c.stderr_path, FifoPath(c.id, "stderr"), kStderr);
}

void TaskManager::FillDerivedPaths(uint8_t derived, driver::TaskConfig* c) const {
  if (derived & kTaskDir) c->task_dir = TaskDirPath(c->id);
  if (derived & kLogDir) c->log_dir = LogDirPath(c->id);
  if (derived & kStdout) c->stdout_path = FifoPath(c->id, "stdout");
  if (derived & kStderr) c->stderr_path = FifoPath(c->id, "stderr");
}

driver::TaskConfig TaskManager::FullConfig(const Task& t) const {
  driver::TaskConfig c = t.config();
  FillDerivedPaths(t.derived_paths, &c);
  return c;
}

TaskRecord TaskManager::FullRecord(const Task& t) const {
  TaskRecord r = t.record;
  FillDerivedPaths(t.derived_paths, &r.handle.config);
  return r;
}

std::string TaskManager::RecordPath(const std::string& id) const {
  return options_.state_dir + "/tasks/" + id + ".json";
}

void TaskManager::Emit(const driver::TaskConfig& c, const std::string& type, const std::string& message) {
  driver::TaskEvent ev;
  ev.task_id = c.id;
  ev.task_name = c.name;
  ev.job = c.job;
  ev.timestamp_unix_nanos = WallNanos();
  ev.type = type;
  ev.message = message;
  options_.events->Publish(ev);
}

// One stream's files, from the task's record: derived from its id where the
// record left the path out (DropDerivedPaths), so a pipe keeps no path.
class TaskManager::StreamPaths final : public logs::LogPaths {
 public:
  StreamPaths(const TaskManager* m, const Task* t, bool err) : m_(m), t_(t), err_(err) {}
  std::string Fifo() const override {
    const driver::TaskConfig& c = t_->config();
    if (t_->derived_paths & (err_ ? kStderr : kStdout)) return m_->FifoPath(c.id, err_ ? "stderr" : "stdout");
    return err_ ? c.stderr_path : c.stdout_path;
  }
  std::string Log() const override {
    const driver::TaskConfig& c = t_->config();
    std::string dir = (t_->derived_paths & kLogDir) ? m_->LogDirPath(c.id) : c.log_dir;
    return dir + "/" + c.name + (err_ ? ".stderr" : ".stdout");
  }
  std::string Cursor() const override { return Fifo() + ".cursor"; }

 private:
  const TaskManager* m_;
  const Task* t_;
  bool err_;
};

Status TaskManager::OpenLogs(const driver::TaskConfig& c, uid_t uid, gid_t gid, Task* t) {
  // The log dir is made with the first log file (logs/rotator): a task that
  // never writes costs no inode there.
  logs::RotationPolicy policy;
  policy.max_files = c.log_max_files;
  policy.max_file_size = c.log_max_file_size;
  // The pipes belong to *t and die with it, so their callbacks can point to
  // it (a copy of the config in each would cost ~0.9 KiB per stream). Two
  // pointers fit in a std::function without an allocation of its own.
  auto report = [this](Task* task, const char* stream, const std::string& error, uint64_t dropped) {
    bool resumed = error.empty();
    std::string msg = resumed ? Format("%s log: writing again; %llu bytes dropped", stream,
                                       static_cast<unsigned long long>(dropped))
                              : std::string(stream) + " log: " + error + "; dropping output until it can be written";
    log::Warn(resumed ? "task log writing again" : "task log write failed", {{"task", task->id()}, {"message", msg}});
    Emit(task->config(), resumed ? "log-resumed" : "log-dropping", msg);
  };
  auto on_stdout_error = [report, t](const std::string& e, uint64_t d) { report(t, "stdout", e, d); };
  auto on_stderr_error = [report, t](const std::string& e, uint64_t d) { report(t, "stderr", e, d); };
  auto o = logs::LogPipe::Open(loop_, std::make_unique<StreamPaths>(this, t, false), policy, uid, gid, on_stdout_error);
  if (!o.ok()) return o.error().Wrap("stdout log");
  auto e = logs::LogPipe::Open(loop_, std::make_unique<StreamPaths>(this, t, true), policy, uid, gid, on_stderr_error);
  if (!e.ok()) return e.error().Wrap("stderr log");
  t->out = std::move(*o);
  t->err = std::move(*e);
  return OkStatus();
}

void TaskManager::CloseLogs(Task* t, bool remove_fifos) {
  if (t->out) t->out->Drain();
  if (t->err) t->err->Drain();
  bool had = t->out || t->err;
  t->out.reset();
  t->err.reset();
  if (had && release_fifos_) release_fifos_(t->id());
  t->fifos_held = false;
  if (remove_fifos) {
    driver::TaskConfig c = FullConfig(*t);
    for (const std::string& p : {c.stdout_path, c.stderr_path}) {
      if (p.empty()) continue;
      ::unlink(p.c_str());
      ::unlink((p + ".cursor").c_str());
    }
  }
}

void TaskManager::SetFifoHolder(HoldFifosFn hold, ReleaseFifosFn release) {
  hold_fifos_ = std::move(hold);
  release_fifos_ = std::move(release);
}

void TaskManager::HoldFifos(Task& t) {
  if (!hold_fifos_ || !t.out) return;
  std::vector<UniqueFd> owned;
  std::vector<int> fds;
  driver::TaskConfig c = FullConfig(t);
  for (const std::string& p : {c.stdout_path, c.stderr_path}) {
    auto fd = sys::Open(p, O_RDWR | O_NONBLOCK);
    if (!fd.ok()) {
      log::WarnIfError(fd.error(), "cannot open task FIFO for the keeper", {{"task", t.id()}});
      continue;
    }
    fds.push_back(fd->get());
    owned.push_back(std::move(*fd));
  }
  if (fds.empty()) return;
  hold_fifos_(t.id(), fds);  // the keeper gets its own copies
  t.fifos_held = true;
}

void TaskManager::HoldAllFifos() {
  for (const auto& [id, t] : tasks_) HoldFifos(*t);
}

void TaskManager::Persist(const Task& t) {
  bool kept = false;
  Status st = unsaved_.Write(RecordPath(t.id()), EncodeTaskRecord(FullRecord(t)), &kept);
  if (st.ok() && !kept) return;
  if (!st.ok()) log::Warn("cannot persist task state", {{"task", t.id()}, {"error", st.error().message()}});
  Emit(t.config(), "error", kept ? "task state kept in memory: no space left on device; written when space returns"
                                 : "cannot persist task state: " + st.error().message());
}

void TaskManager::WatchOom(const Task& t) {
  if (!options_.oom || t.config().cgroup.empty()) return;
  std::string id = t.id();
  Status st = options_.oom->Watch(t.config().cgroup, [this, id](uint64_t kills) {
    Task* task = Find(id);
    if (task && kills > task->record.oom_kills_at_start) ReportOom(task, kills);
  });
  log::WarnIfError(st, "cannot watch memory.events", {{"task", id}});
}

void TaskManager::ReportOom(Task* t, uint64_t kills) {
  if (t->oom_reported) return;
  t->oom_reported = true;
  log::Warn("task OOM killed", {{"task", t->id()}, {"oom_kills", std::to_string(kills)}});
  Emit(t->config(), "oom-killed", "OOM killed: the task reached its memory limit");
}

void TaskManager::WaitForExit(const std::string& id) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!d) return;
  t->waiting = true;
  std::weak_ptr<bool> alive = alive_;
  d->WaitTask(id, [this, alive, id](const driver::ExitResult& exit) {
    if (alive.lock()) OnExit(id, exit);
  });
}

Status TaskManager::Watch(const std::string& id, ExitCallback exited) {
  Task* t = Find(id);
  if (!t || t->starting) return Error(Code::kNotFound, kNotFound);
  if (t->record.exited) {
    driver::ExitResult exit = t->record.exit;
    exited(exit);
    return OkStatus();
  }
  t->on_exit.push_back(std::move(exited));
  return OkStatus();
}

Result<TaskView> TaskManager::Inspect(const std::string& id) const {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  TaskView v;
  v.config = FullConfig(*t);
  auto runs = hook_runs_.find(id);
  if (runs != hook_runs_.end()) v.hook_runs = runs->second;
  v.nri = t->nri_report;
  v.network = t->record.handle.network;
  driver::TaskStatus& s = v.status;
  s.id = id;
  s.name = v.config.name;
  s.state = t->starting ? driver::TaskState::kUnknown
            : t->record.exited ? driver::TaskState::kExited
                               : driver::TaskState::kRunning;
  s.pid = t->record.handle.pid;
  s.started_at_unix_nanos = t->record.handle.started_at_unix_nanos;
  s.completed_at_unix_nanos = t->record.completed_at_unix_nanos;
  s.exit = t->record.exit;
  v.log_dir = v.config.log_dir;
  for (logs::LogPipe* p : {t->out.get(), t->err.get()}) {
    if (!p) continue;
    v.log_bytes += p->stats().bytes_written;
    v.log_dropped += p->stats().bytes_dropped;
    if (!p->stats().last_error.empty()) v.log_error = p->stats().last_error;
  }
  return v;
}

std::vector<TaskView> TaskManager::List() const {
  std::vector<TaskView> out;
  for (const auto& [id, t] : tasks_) {
    auto v = Inspect(id);
    if (v.ok()) out.push_back(std::move(*v));
  }
  return out;
}

void TaskManager::Signal(const std::string& id, const std::string& signal, DoneCallback done) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!d) return done(Error(Code::kNotFound, kNotFound));
  d->SignalTask(id, signal, std::move(done));
}

void TaskManager::Exec(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                       driver::Driver::ExecCallback done) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!d) return done(Error(Code::kNotFound, kNotFound));
  d->ExecTask(id, cmd, timeout_nanos, std::move(done));
}

void TaskManager::Stats(const std::string& id, driver::Driver::StatsCallback done) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!d) return done(Error(Code::kNotFound, kNotFound));
  cgroup::Cgroups* cg = options_.cgroups;
  if (t->record.exited || t->config().cgroup.empty() || !cg || !cg->available()) {
    return d->TaskStats(id, std::move(done));
  }
  auto c = cg->Stats(t->config().cgroup);
  if (!c.ok()) return d->TaskStats(id, std::move(done));  // unreadable cgroup: the driver's own view
  // The cgroup counts every process of the task, also those that left its
  // process group, and reading it costs a few files.
  driver::TaskStats s;
  s.timestamp_unix_nanos = WallNanos();
  s.cgroup["memory.current"] = c->memory_current;
  s.cgroup["memory.swap.current"] = c->memory_swap_current;
  for (const auto& [k, v] : c->memory_stat) s.cgroup["memory.stat." + k] = v;
  for (const auto& [k, v] : c->memory_events) s.cgroup["memory.events." + k] = v;
  s.cgroup["cpu.stat.usage_usec"] = c->cpu_usage_usec;
  s.cgroup["cpu.stat.user_usec"] = c->cpu_user_usec;
  s.cgroup["cpu.stat.system_usec"] = c->cpu_system_usec;
  s.cgroup["cpu.stat.nr_periods"] = c->cpu_nr_periods;
  s.cgroup["cpu.stat.nr_throttled"] = c->cpu_nr_throttled;
  s.cgroup["cpu.stat.throttled_usec"] = c->cpu_throttled_usec;
  s.cgroup["pids.current"] = c->pids_current;
  for (const auto& [dev, kv] : c->io_stat) {
    for (const auto& [k, v] : kv) s.cgroup["io.stat." + dev + "." + k] = v;
  }
  s.measured = c->measured;
  s.rss_bytes = c->memory_current;
  s.cpu_user_nanos = c->cpu_user_usec * 1000;
  s.cpu_system_nanos = c->cpu_system_usec * 1000;
  int64_t now = MonotonicNanos();
  uint64_t usage_ns = c->cpu_usage_usec * 1000;
  if (t->last_cg_sample_mono != 0 && now > t->last_cg_sample_mono && usage_ns >= t->last_cg_usage_ns) {
    s.cpu_percent = static_cast<double>(usage_ns - t->last_cg_usage_ns) /
                    static_cast<double>(now - t->last_cg_sample_mono) * 100.0;
  }
  t->last_cg_usage_ns = usage_ns;
  t->last_cg_sample_mono = now;
  s.measured.push_back("cpu percent");
  done(s);
}

void TaskManager::CheckAlive(const std::string& id, std::function<void(bool)> done) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!d || t->starting || t->record.exited) return done(false);
  d->InspectTask(id, [done](Result<driver::TaskStatus> s) {
    done(s.ok() && s->state == driver::TaskState::kRunning);
  });
}

Status TaskManager::UpdateResources(const std::string& id, const cgroup::Resources& r) {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  cgroup::Cgroups* cg = options_.cgroups;
  std::vector<std::string> problems = cg ? cg->Check(r, options_.allow_without_limits)
                                         : std::vector<std::string>{};
  if (!problems.empty()) return Error(Code::kFailedPrecondition, problems.front());
  if (cg && cg->available() && !t->config().cgroup.empty()) OUTPOST_RETURN_IF_ERROR(cg->Apply(t->config().cgroup, r));
  t->record.handle.config.resources = r;
  NriUpdated(id, r);
  return OkStatus();
}

Status TaskManager::ApplyJobResources(const std::string& job, const cgroup::Resources& r) {
  cgroup::Cgroups* cg = options_.cgroups;
  if (cg && cg->available()) OUTPOST_RETURN_IF_ERROR(cg->EnsureJob(job, r));  // else refused at submission if it mattered
  NriPodUpdated(job, r);
  return OkStatus();
}

Result<driver::Fingerprint> TaskManager::Fingerprint(const std::string& driver_name) const {
  auto d = options_.drivers->Get(driver_name);
  if (!d.ok()) return d.error();
  return (*d)->GetFingerprint();
}

Result<std::string> TaskManager::ResolveId(const std::string& id) const {
  size_t slash = id.find('/');
  if (slash == std::string::npos) return id;
  if (!resolver_) return Error(Code::kNotFound, "no job \"" + id.substr(0, slash) + "\" (jobs are not available)");
  return resolver_(id.substr(0, slash), id.substr(slash + 1));
}

Result<std::string> TaskManager::LogPath(const std::string& id, bool stderr_stream) const {
  Task* t = Find(id);
  if (!t || !t->out) return Error(Code::kNotFound, kNotFound);
  return FullConfig(*t).log_dir + "/" + t->config().name + (stderr_stream ? ".stderr" : ".stdout");
}

int TaskManager::LogMaxFiles(const std::string& id) const {
  Task* t = Find(id);
  return t ? t->config().log_max_files : 10;
}

std::vector<std::string> TaskManager::LogProblems() const {
  std::vector<std::string> out;
  for (const auto& [id, t] : tasks_) {
    for (logs::LogPipe* p : {t->out.get(), t->err.get()}) {
      if (p && !p->stats().last_error.empty()) {
        out.push_back(id + ": " + p->stats().last_error +
                      Format(" (%llu bytes dropped)", static_cast<unsigned long long>(p->stats().bytes_dropped)));
      }
    }
  }
  return out;
}

}  // namespace outpost::task
