#include "driver/exec/exec_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "proc/procfs.h"
#include "proc/spawn.h"

namespace outpost::driver {

namespace {

constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr const char* kNotFound = "task not found for given id";
// Environment variable carrying TaskHandle::instance (see KillEverything).
constexpr const char* kInstanceVar = "OUTPOST_TASK_INSTANCE";

ExitResult ResultFromWaitStatus(int status) {
  ExitResult r;
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
    r.exit_code = 128 + r.signal;
  }
  return r;
}

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Sends sig to the task's process group; falls back to the leader alone if
// the group is gone (ESRCH) but the leader is somehow still there.
int SignalGroup(pid_t pid, int sig) {
  if (::kill(-pid, sig) == 0) return 0;
  return ::kill(pid, sig);
}

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

struct ExecDriver::Task {
  TaskHandle handle;
  TaskState state = TaskState::kRunning;
  bool our_child = false;        // reaped by this process through the loop
  bool foreign_parent = false;   // recovered, but nobody we talk to reaps it
  bool awaiting_journal = false; // process gone at recovery; exit may still come from the keeper
  bool stop_requested = false;
  UniqueFd pidfd;
  ExitResult exit;
  int64_t completed_at = 0;
  std::vector<WaitCallback> waiters;
  std::vector<DoneCallback> stop_waiters;
  Loop::TimerId kill_timer = 0;
  uint64_t last_cpu_ticks = 0;
  int64_t last_sample_mono = 0;
  uint64_t last_cg_usage_ns = 0;
  int64_t last_cg_sample_mono = 0;
};

struct ExecDriver::ExecSession {
  pid_t pid = 0;
  UniqueFd out;
  std::string output;
  bool truncated = false;
  bool exited = false;
  bool eof = false;
  int status = 0;
  Loop::TimerId timer = 0;
  bool timed_out = false;
  ExecCallback done;
};

ExecDriver::ExecDriver(Loop* loop, Options options) : loop_(loop), options_(std::move(options)) {}

Result<std::unique_ptr<ExecDriver>> ExecDriver::Create(Loop* loop, Options options) {
  std::unique_ptr<ExecDriver> d(new ExecDriver(loop, std::move(options)));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(d->options_.state_dir + "/tasks", 0700));
  d->RefreshFingerprint();
  return d;
}

ExecDriver::~ExecDriver() {
  if (fingerprint_timer_) loop_->CancelTimer(fingerprint_timer_);
  for (auto& [id, t] : tasks_) {
    if (t->kill_timer) loop_->CancelTimer(t->kill_timer);
    if (t->pidfd && loop_->HasFd(t->pidfd.get())) loop_->RemoveFd(t->pidfd.get());
    if (t->our_child) loop_->UnwatchChild(t->handle.pid);
  }
  for (auto& s : sessions_) {
    if (s->timer) loop_->CancelTimer(s->timer);
    if (s->out) loop_->RemoveFd(s->out.get());
    if (!s->exited) loop_->UnwatchChild(s->pid);
  }
}

Capabilities ExecDriver::GetCapabilities() const {
  Capabilities c;
  c.send_signals = true;
  c.exec = true;
  c.fs_isolation = "none";
  c.dynamic_workload_users = true;  // user "dynamic" (agent/task_manager, task/uid_pool)
  return c;
}

void ExecDriver::RefreshFingerprint() {
  Fingerprint f;
  f.updated_unix_nanos = WallNanos();
  utsname u;
  if (::uname(&u) == 0) {
    f.attributes["kernel.name"] = u.sysname;
    f.attributes["kernel.version"] = u.release;
    f.attributes["cpu.arch"] = u.machine;
  }
  f.attributes["driver.exec"] = "true";
  f.attributes["driver.exec.keeper"] = options_.keeper_is_parent ? "true" : "false";
  int probe = PidfdOpen(::getpid());
  f.attributes["driver.exec.pidfd"] = probe >= 0 ? "true" : "false";
  if (probe >= 0) ::close(probe);
  f.attributes["driver.exec.root"] = ::geteuid() == 0 ? "true" : "false";
  // Resource control (Nomad's "resources" fingerprint): which cgroup v2
  // controllers tasks get, or why there are none.
  if (cgroup::Cgroups* cg = usable_cgroups()) {
    std::string list;
    for (const std::string& c : cg->controllers()) list += (list.empty() ? "" : ",") + c;
    f.attributes["driver.exec.cgroup.controllers"] = list;
    f.attributes["driver.exec.cgroup.root"] = cg->root();
  } else {
    f.attributes["driver.exec.cgroup.controllers"] = "";
    f.attributes["driver.exec.cgroup.unavailable"] = options_.cgroups ? options_.cgroups->reason() : "not set up";
  }
  f.attributes["driver.exec.dynamic_workload_users"] = "true";
  if (::access("/proc/self/stat", R_OK) != 0) {
    f.health = Health::kUnhealthy;
    f.description = "/proc is not mounted: cannot track task processes";
  } else {
    f.health = Health::kHealthy;
    f.description = ::geteuid() == 0 ? "Healthy" : "Healthy (not root: tasks run as the agent's user only)";
  }
  fingerprint_ = f;
  fingerprint_timer_ = loop_->AddTimer(options_.fingerprint_period_nanos, [this] { RefreshFingerprint(); });
}

Fingerprint ExecDriver::GetFingerprint() { return fingerprint_; }

ExecDriver::Task* ExecDriver::Find(const std::string& id) {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : it->second.get();
}

ExecDriver::Task* ExecDriver::FindByPid(pid_t pid) {
  for (auto& [id, t] : tasks_) {
    if (t->handle.pid == pid && t->state != TaskState::kExited) return t.get();
  }
  return nullptr;
}

std::string ExecDriver::HandlePath(const std::string& id) const { return options_.state_dir + "/tasks/" + id + ".json"; }

void ExecDriver::Persist(Task* t) {
  std::string text = EncodeHandle(t->handle, t->state == TaskState::kExited ? &t->exit : nullptr, t->completed_at);
  Status st = sys::WriteFileAtomic(HandlePath(t->handle.config.id), text, 0600);
  if (!st.ok()) {
    log::Error("cannot persist task handle", {{"task", t->handle.config.id}, {"error", st.error().message()}});
    Emit(*t, "error", "cannot persist task state: " + st.error().message());
  }
}

void ExecDriver::Emit(const Task& t, const std::string& type, const std::string& message) {
  TaskEvent ev;
  ev.task_id = t.handle.config.id;
  ev.task_name = t.handle.config.name;
  ev.job = t.handle.config.job;
  ev.timestamp_unix_nanos = WallNanos();
  ev.type = type;
  ev.message = message;
  // Copy: a subscriber may unsubscribe (or subscribe) from its callback.
  std::vector<EventCallback> subs;
  for (auto& [id, cb] : subscribers_) subs.push_back(cb);
  for (auto& cb : subs) cb(ev);
}

uint64_t ExecDriver::SubscribeEvents(EventCallback cb) {
  uint64_t id = next_subscriber_++;
  subscribers_[id] = std::move(cb);
  return id;
}

void ExecDriver::UnsubscribeEvents(uint64_t id) { subscribers_.erase(id); }

std::vector<std::string> ExecDriver::ListTasks() {
  std::vector<std::string> out;
  for (auto& [id, t] : tasks_) out.push_back(id);
  return out;
}

void ExecDriver::StartTask(const TaskConfig& cfg, StartCallback done) {
  auto fail = [&](const Error& e) { done(e.Wrap("start task " + cfg.id)); };
  Status idst = ValidateTaskId(cfg.id);
  if (!idst.ok()) return fail(idst.error());
  if (Find(cfg.id)) return fail(Error(Code::kAlreadyExists, "task with ID \"" + cfg.id + "\" already started"));
  if (cfg.command.empty()) return fail(Error(Code::kInvalidArgument, "command is empty"));
  if (!cfg.workdir.empty() && cfg.workdir[0] != '/') {
    return fail(Error(Code::kInvalidArgument, "working dir \"" + cfg.workdir + "\" must be an absolute path"));
  }
  auto creds = proc::ResolveCredentials(cfg.user, cfg.group, options_.users);
  if (!creds.ok()) return fail(creds.error());
  bool switch_user = !cfg.user.empty() || !cfg.group.empty();
  if (switch_user && ::geteuid() != 0 && (creds->uid != ::geteuid() || creds->gid != ::getegid())) {
    return fail(Error(Code::kPermissionDenied, "running as user \"" + cfg.user + "\" needs a root agent"));
  }

  // Environment: documented defaults, then the task's own, then the marker
  // outpost needs to find the task's processes (not overridable).
  std::map<std::string, std::string> env;
  env["PATH"] = kDefaultPath;
  // A uid without a passwd entry (a dynamic user) lives in its task dir.
  env["HOME"] = creds->name.empty() && switch_user ? cfg.task_dir : creds->home;
  if (!creds->name.empty() || switch_user) {
    std::string name = creds->name.empty() ? std::to_string(creds->uid) : creds->name;
    env["USER"] = name;
    env["LOGNAME"] = name;
  }
  env["OUTPOST_JOB"] = cfg.job;
  env["OUTPOST_TASK"] = cfg.name;
  env["OUTPOST_TASK_DIR"] = cfg.task_dir;
  for (const auto& [k, v] : cfg.env) {
    if (k.empty() || k.find('=') != std::string::npos) {
      return fail(Error(Code::kInvalidArgument, "environment variable name \"" + k + "\" is not valid"));
    }
    env[k] = v;
  }
  env["OUTPOST_TASK_ID"] = cfg.id;
  std::string instance = Format("%s@%llx.%x", cfg.id.c_str(), static_cast<unsigned long long>(WallNanos()),
                                static_cast<unsigned>(::getpid()));
  env[kInstanceVar] = instance;

  int exit_code = 0;
  auto path = proc::ResolveCommand(cfg.command, env["PATH"], &exit_code);
  if (!path.ok()) return fail(path.error());

  proc::SpawnRequest req;
  req.path = *path;
  req.argv.push_back(cfg.command);
  req.argv.insert(req.argv.end(), cfg.args.begin(), cfg.args.end());
  for (const auto& [k, v] : env) req.env.push_back(k + "=" + v);
  req.workdir = cfg.workdir.empty() ? cfg.task_dir : cfg.workdir;
  req.set_credentials = switch_user || ::geteuid() == 0;
  req.creds = *creds;
  if (!req.set_credentials) req.creds = proc::Credentials{};
  for (const proc::Rlimit& r : cfg.rlimits) {
    auto res = proc::ParseRlimitName(r.name);
    if (!res.ok()) return fail(res.error());
    if (r.soft > r.hard) {
      return fail(Error(Code::kInvalidArgument, "rlimit " + r.name + ": soft limit is above the hard limit"));
    }
    rlimit lim{static_cast<rlim_t>(r.soft), static_cast<rlim_t>(r.hard)};
    req.rlimits.push_back({*res, lim});
  }
  rlimit nofile;
  bool has_nofile = false;
  for (const auto& r : req.rlimits) has_nofile |= r.first == RLIMIT_NOFILE;
  if (!has_nofile && proc::TaskDefaultNofile(&nofile)) req.rlimits.push_back({RLIMIT_NOFILE, nofile});
  UniqueFd out_fd, err_fd;
  auto open_out = [&](const std::string& p, UniqueFd* fd) -> Status {
    if (p.empty()) return OkStatus();
    // O_RDWR on a FIFO: the task itself keeps a reader on its pipe, so it
    // never gets SIGPIPE and buffered output survives while no agent reads.
    auto r = sys::Open(p, O_RDWR | O_NONBLOCK);
    if (!r.ok()) return r.error();
    OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(r->get(), false));
    *fd = std::move(*r);
    return OkStatus();
  };
  Status st = open_out(cfg.stdout_path, &out_fd);
  if (st.ok()) st = open_out(cfg.stderr_path, &err_fd);
  if (!st.ok()) return fail(st.error());
  req.stdout_fd = out_fd.get();
  req.stderr_fd = err_fd.get();
  req.clone_parent = options_.keeper_is_parent;
  std::string cgroup_path;
  uint64_t oom_base = 0;
  auto cgroup_fd = PrepareCgroup(cfg, &cgroup_path, &oom_base);
  if (!cgroup_fd.ok()) return fail(cgroup_fd.error());
  UniqueFd procs_fd;
  if (*cgroup_fd) {
    req.cgroup_fd = cgroup_fd->get();
    auto procs = sys::Open(cgroup_path + "/cgroup.procs", O_WRONLY);
    if (procs.ok()) procs_fd = std::move(*procs);
    req.cgroup_procs_fd = procs_fd.get();
  }

  auto spawned = proc::Spawn(req, &exit_code);
  if (!spawned.ok()) {
    if (!cgroup_path.empty()) (void)options_.cgroups->Remove(cgroup_path);
    return fail(spawned.error());
  }

  auto t = std::make_unique<Task>();
  t->handle.config = cfg;
  t->handle.pid = spawned->pid;
  t->handle.started_at_unix_nanos = WallNanos();
  proc::ProcStat ps;
  if (proc::ReadProcStat(spawned->pid, &ps)) t->handle.start_ticks = ps.start_ticks;
  t->handle.driver_state = options_.keeper_is_parent ? "keeper" : "agent";
  t->handle.instance = instance;
  t->handle.boot_id = proc::CurrentBootId();
  t->handle.cgroup = cgroup_path;
  t->handle.oom_kills_at_start = oom_base;
  t->pidfd = std::move(spawned->pidfd);
  Task* raw = t.get();
  tasks_[cfg.id] = std::move(t);
  if (spawned->parent_is_caller) {
    raw->our_child = true;
    pid_t pid = spawned->pid;
    Status w = loop_->WatchChild(pid, [this, pid](pid_t, int status) { OnProcessExit(pid, status, WallNanos()); });
    if (!w.ok()) log::Error("cannot watch task process", {{"task", cfg.id}, {"error", w.error().message()}});
  }
  Persist(raw);
  WatchOom(raw);
  log::Info("task started", {{"task", cfg.id}, {"pid", std::to_string(raw->handle.pid)}, {"command", *path}});
  Emit(*raw, "started", Format("started with pid %d", raw->handle.pid));
  done(raw->handle);
}

void ExecDriver::OnProcessExit(pid_t pid, int wait_status, int64_t unix_nanos) {
  Task* t = FindByPid(pid);
  if (!t) {
    // Daemonised descendants adopted by the keeper, exec sessions of an
    // earlier worker, or an exit already recorded: nothing to do.
    log::Debug("exit of an untracked process", {{"pid", std::to_string(pid)}});
    return;
  }
  if (t->our_child) t->our_child = false;  // reaped by the loop
  Finish(t, ResultFromWaitStatus(wait_status), unix_nanos);
}

void ExecDriver::Finish(Task* t, const ExitResult& result, int64_t unix_nanos) {
  if (t->state == TaskState::kExited) return;
  t->state = TaskState::kExited;
  t->awaiting_journal = false;
  t->exit = result;
  t->completed_at = unix_nanos;
  if (t->kill_timer) {
    loop_->CancelTimer(t->kill_timer);
    t->kill_timer = 0;
  }
  if (t->pidfd) {
    if (loop_->HasFd(t->pidfd.get())) loop_->RemoveFd(t->pidfd.get());
    t->pidfd.Reset();
  }
  // The task is its main process: whatever it left behind (its process
  // group, and daemonised descendants carrying its marker) dies with it, as
  // in a container's PID namespace, so nothing outlives supervision.
  KillEverything(t);
  if (cgroup::Cgroups* cg = usable_cgroups(); cg && !t->handle.cgroup.empty()) {
    if (options_.oom) options_.oom->Unwatch(t->handle.cgroup);
    auto stats = cg->Stats(t->handle.cgroup);
    if (stats.ok() && stats->memory_events["oom_kill"] > t->handle.oom_kills_at_start && t->exit.signal == SIGKILL) {
      t->exit.oom_killed = true;
    }
  }
  Persist(t);
  const std::string& id = t->handle.config.id;
  std::string msg;
  const ExitResult& result_ = t->exit;  // with oom_killed filled in
  if (!result_.error.empty()) {
    msg = "exited: " + result_.error;
  } else if (result_.oom_killed) {
    msg = "OOM killed (memory limit reached)";
  } else if (result_.signal) {
    msg = Format("killed by %s (exit code %d)", proc::SignalName(result_.signal), result_.exit_code);
  } else {
    msg = Format("exited with code %d", result_.exit_code);
  }
  log::Info("task exited", {{"task", id}, {"exit_code", std::to_string(result_.exit_code)},
                            {"signal", std::to_string(result_.signal)}, {"error", result_.error}});
  Emit(*t, t->stop_requested ? "stopped" : result_.signal ? "signalled" : "exited", msg);
  std::vector<WaitCallback> waiters = std::move(t->waiters);
  std::vector<DoneCallback> stoppers = std::move(t->stop_waiters);
  t->waiters.clear();
  t->stop_waiters.clear();
  ExitResult copy = result_;
  for (auto& w : waiters) w(copy);
  for (auto& s : stoppers) s(OkStatus());
}

Status ExecDriver::WaitTask(const std::string& id, WaitCallback done) {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  if (t->state == TaskState::kExited) {
    ExitResult r = t->exit;
    loop_->Defer([done, r] { done(r); });
  } else {
    t->waiters.push_back(std::move(done));
  }
  return OkStatus();
}

Result<UniqueFd> ExecDriver::PrepareCgroup(const TaskConfig& cfg, std::string* path, uint64_t* oom_base) {
  cgroup::Cgroups* cg = usable_cgroups();
  if (!cg) {
    if (!cfg.resources.Any() || options_.allow_without_limits) return UniqueFd();
    std::string why = options_.cgroups ? options_.cgroups->reason() : "cgroups are not set up";
    return Error(Code::kFailedPrecondition, "resource limits need cgroup v2, which is not usable here (" + why +
                                                "); set cgroup_allow_without_limits in the agent config to run "
                                                "without them");
  }
  std::vector<std::string> problems = cg->Check(cfg.resources);
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    return Error(Code::kFailedPrecondition, all);
  }
  OUTPOST_RETURN_IF_ERROR(cg->EnsureJob(cfg.job, cgroup::Resources()));
  auto fd = cg->CreateTask(cfg.job, cfg.id, cfg.resources);
  if (!fd.ok()) return fd.error();
  *path = cg->TaskPath(cfg.job, cfg.id);
  auto stats = cg->Stats(*path);
  if (stats.ok()) *oom_base = stats->memory_events["oom_kill"];
  return fd;
}

void ExecDriver::WatchOom(Task* t) {
  if (!options_.oom || t->handle.cgroup.empty()) return;
  std::string id = t->handle.config.id;
  Status st = options_.oom->Watch(t->handle.cgroup, [this, id](uint64_t kills) {
    Task* task = Find(id);
    if (!task || kills <= task->handle.oom_kills_at_start) return;
    log::Warn("task OOM killed", {{"task", id}, {"oom_kills", std::to_string(kills)}});
    Emit(*task, "oom-killed", "OOM killed: the task reached its memory limit");
  });
  if (!st.ok()) log::Warn("cannot watch memory.events", {{"task", id}, {"error", st.error().message()}});
}

void ExecDriver::KillEverything(Task* t) {
  if (cgroup::Cgroups* cg = usable_cgroups(); cg && !t->handle.cgroup.empty()) {
    // Everything the task started is in its cgroup, whatever session or
    // process group it moved to.
    Status st = cg->Kill(t->handle.cgroup);
    if (st.ok()) return;
    log::Warn("cgroup kill failed; signalling the process group", {{"task", t->handle.config.id},
                                                                   {"error", st.error().message()}});
  }
  // The group id is only safe to signal while the leader lives: once it is
  // gone the number can be reused. Group members that outlive the leader
  // carry the marker and are found below.
  pid_t pid = t->handle.pid;
  if (t->state != TaskState::kExited) SignalGroup(pid, SIGKILL);
  // Descendants that left the process group (setsid daemons) still carry
  // the task's marker in their environment.
  // Handles written before the instance marker existed fall back to the id.
  std::string marker = t->handle.instance.empty() ? "OUTPOST_TASK_ID=" + t->handle.config.id
                                                  : std::string(kInstanceVar) + "=" + t->handle.instance;
  for (pid_t p : proc::ProcessesWithEnv(marker)) {
    if (p != ::getpid()) ::kill(p, SIGKILL);
  }
}

void ExecDriver::StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                          DoneCallback done) {
  Task* t = Find(id);
  if (!t) return done(Error(Code::kNotFound, kNotFound));
  auto sig = proc::ParseSignal(signal.empty() ? t->handle.config.kill_signal : signal);
  if (!sig.ok()) return done(sig.error());
  if (t->state == TaskState::kExited) return done(OkStatus());
  t->stop_requested = true;
  t->stop_waiters.push_back(std::move(done));
  if (timeout_nanos <= 0) {
    KillEverything(t);
    return;
  }
  SignalGroup(t->handle.pid, *sig);
  Emit(*t, "stopping", Format("sent %s, killing in %s", proc::SignalName(*sig), FormatDuration(timeout_nanos).c_str()));
  if (!t->kill_timer) {
    t->kill_timer = loop_->AddTimer(timeout_nanos, [this, id] {
      Task* task = Find(id);
      if (!task || task->state == TaskState::kExited) return;
      task->kill_timer = 0;
      log::Info("task did not stop in time; killing it", {{"task", id}});
      KillEverything(task);
    });
  }
}

void ExecDriver::DestroyTask(const std::string& id, bool force, DoneCallback done) {
  Task* t = Find(id);
  if (!t) return done(Error(Code::kNotFound, kNotFound));
  auto remove = [this, id](DoneCallback cb) {
    Task* task = Find(id);
    if (task) {
      // Leftovers were killed when the task exited (Finish).
      // Durable, so a power cut right after `rm` does not bring it back.
      Status rm = sys::RemoveFileDurable(HandlePath(id));
      if (!rm.ok()) log::Warn("cannot remove task handle", {{"task", id}, {"error", rm.error().message()}});
      if (task->our_child) loop_->UnwatchChild(task->handle.pid);
      if (cgroup::Cgroups* cg = usable_cgroups(); cg && !task->handle.cgroup.empty()) {
        // rmdir only: the kernel refuses (EBUSY) while anything is left in it.
        Status cst = cg->Remove(task->handle.cgroup);
        if (!cst.ok()) log::Warn("cannot remove task cgroup", {{"task", id}, {"error", cst.error().message()}});
        (void)cg->RemoveJobIfEmpty(task->handle.config.job);
      }
      tasks_.erase(id);
    }
    cb(OkStatus());
  };
  if (t->state == TaskState::kExited) return remove(std::move(done));
  if (!force) return done(Error(Code::kFailedPrecondition, "cannot destroy running task"));
  t->stop_requested = true;
  t->stop_waiters.push_back([remove, done](Status) { remove(done); });
  KillEverything(t);
}

Result<TaskStatus> ExecDriver::InspectTask(const std::string& id) {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  TaskStatus s;
  s.id = id;
  s.name = t->handle.config.name;
  s.state = t->state;
  s.pid = t->handle.pid;
  s.started_at_unix_nanos = t->handle.started_at_unix_nanos;
  s.completed_at_unix_nanos = t->completed_at;
  s.exit = t->exit;
  s.attributes["pid"] = std::to_string(t->handle.pid);
  s.attributes["parent"] = t->foreign_parent ? "foreign" : t->handle.driver_state;
  return s;
}

Result<TaskConfig> ExecDriver::ConfigOf(const std::string& id) {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  return t->handle.config;
}

Status ExecDriver::SignalTask(const std::string& id, const std::string& signal) {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  auto sig = proc::ParseSignal(signal);
  if (!sig.ok()) return sig.error();
  if (t->state == TaskState::kExited) return Error(Code::kFailedPrecondition, "task " + id + " is not running");
  if (SignalGroup(t->handle.pid, *sig) != 0) return ErrnoError("signal task " + id);
  return OkStatus();
}

TaskStats ExecDriver::CgroupTaskStats(Task* t, const cgroup::CgroupStats& c, int64_t now, TaskStats s) {
  // The cgroup counts every process of the task, also those that left its
  // process group, and reading it costs a few files instead of a scan of
  // every process's /proc/<pid>/stat.
  s.cgroup["memory.current"] = c.memory_current;
  s.cgroup["memory.swap.current"] = c.memory_swap_current;
  for (const auto& [k, v] : c.memory_stat) s.cgroup["memory.stat." + k] = v;
  for (const auto& [k, v] : c.memory_events) s.cgroup["memory.events." + k] = v;
  s.cgroup["cpu.stat.usage_usec"] = c.cpu_usage_usec;
  s.cgroup["cpu.stat.user_usec"] = c.cpu_user_usec;
  s.cgroup["cpu.stat.system_usec"] = c.cpu_system_usec;
  s.cgroup["cpu.stat.nr_periods"] = c.cpu_nr_periods;
  s.cgroup["cpu.stat.nr_throttled"] = c.cpu_nr_throttled;
  s.cgroup["cpu.stat.throttled_usec"] = c.cpu_throttled_usec;
  s.cgroup["pids.current"] = c.pids_current;
  for (const auto& [dev, kv] : c.io_stat) {
    for (const auto& [k, v] : kv) s.cgroup["io.stat." + dev + "." + k] = v;
  }
  s.measured = c.measured;
  s.rss_bytes = c.memory_current;
  s.cpu_user_nanos = c.cpu_user_usec * 1000;
  s.cpu_system_nanos = c.cpu_system_usec * 1000;
  uint64_t usage_ns = c.cpu_usage_usec * 1000;
  if (t->last_cg_sample_mono != 0 && now > t->last_cg_sample_mono && usage_ns >= t->last_cg_usage_ns) {
    s.cpu_percent = static_cast<double>(usage_ns - t->last_cg_usage_ns) /
                    static_cast<double>(now - t->last_cg_sample_mono) * 100.0;
  }
  t->last_cg_usage_ns = usage_ns;
  t->last_cg_sample_mono = now;
  s.measured.push_back("cpu percent");
  return s;
}

Result<TaskStats> ExecDriver::GetTaskStats(const std::string& id) {
  Task* t = Find(id);
  if (!t) return Error(Code::kNotFound, kNotFound);
  TaskStats s;
  s.timestamp_unix_nanos = WallNanos();
  if (t->state == TaskState::kExited) return s;
  int64_t now = MonotonicNanos();
  if (cgroup::Cgroups* cg = usable_cgroups(); cg && !t->handle.cgroup.empty()) {
    auto c = cg->Stats(t->handle.cgroup);
    if (c.ok()) return CgroupTaskStats(t, *c, now, s);
    // Unreadable cgroup: fall back to /proc below.
  }
  uint64_t ticks = 0, pages = 0;
  std::vector<pid_t> members = proc::ProcessGroupMembers(t->handle.pid);
  if (members.empty()) members.push_back(t->handle.pid);
  uint64_t user = 0, sys_ticks = 0;
  for (pid_t p : members) {
    proc::ProcStat ps;
    if (!proc::ReadProcStat(p, &ps)) continue;
    user += ps.utime_ticks;
    sys_ticks += ps.stime_ticks;
    pages += ps.rss_pages;
  }
  ticks = user + sys_ticks;
  const int64_t hz = proc::ClockTicksPerSecond();
  s.rss_bytes = pages * static_cast<uint64_t>(proc::PageSize());
  s.cpu_user_nanos = user * (kNanosPerSecond / hz);
  s.cpu_system_nanos = sys_ticks * (kNanosPerSecond / hz);
  if (t->last_sample_mono != 0 && now > t->last_sample_mono && ticks >= t->last_cpu_ticks) {
    double cpu = static_cast<double>(ticks - t->last_cpu_ticks) * (static_cast<double>(kNanosPerSecond) / hz);
    s.cpu_percent = cpu / static_cast<double>(now - t->last_sample_mono) * 100.0;
  }
  t->last_cpu_ticks = ticks;
  t->last_sample_mono = now;
  s.measured = {"RSS", "User Mode", "System Mode", "Percent"};
  return s;
}

void ExecDriver::WatchForeignProcess(Task* t) {
  // Not our child and not the keeper's: a pidfd still tells us when it
  // ends, but nobody can tell us how.
  int fd = PidfdOpen(t->handle.pid);
  if (fd < 0) return;
  t->pidfd.Reset(fd);
  std::string id = t->handle.config.id;
  Status st = loop_->AddFd(fd, EPOLLIN, [this, id](uint32_t) {
    Task* task = Find(id);
    if (!task) return;
    ExitResult r;
    r.exit_code = -1;
    r.error = "exit status unknown: the task was adopted by another process while no keeper ran";
    Finish(task, r, WallNanos());
  });
  if (!st.ok()) log::Warn("cannot watch recovered task", {{"task", id}, {"error", st.error().message()}});
}

Status ExecDriver::RecoverTask(const TaskHandle& handle) {
  const std::string& id = handle.config.id;
  OUTPOST_RETURN_IF_ERROR(ValidateTaskId(id));
  if (Find(id)) return OkStatus();  // already tracked: no-op
  auto t = std::make_unique<Task>();
  t->handle = handle;
  proc::ProcStat ps;
  bool same_boot = handle.boot_id.empty() || proc::CurrentBootId().empty() || handle.boot_id == proc::CurrentBootId();
  bool alive = same_boot && handle.pid > 0 && proc::ReadProcStat(handle.pid, &ps) && ps.state != 'Z' &&
               (handle.start_ticks == 0 || ps.start_ticks == handle.start_ticks);
  if (!same_boot) log::Info("task from before a reboot: its process is gone", {{"task", id}});
  Task* raw = t.get();
  tasks_[id] = std::move(t);
  if (alive) {
    raw->state = TaskState::kRunning;
    if (options_.keeper_is_parent && ps.ppid == options_.keeper_pid) {
      // The keeper reaps it and reports the exit; a pidfd is kept only for
      // liveness checks.
      int fd = PidfdOpen(handle.pid);
      if (fd >= 0) raw->pidfd.Reset(fd);
    } else {
      raw->foreign_parent = true;
      WatchForeignProcess(raw);
    }
    log::Info("task recovered", {{"task", id}, {"pid", std::to_string(handle.pid)}});
    Emit(*raw, "recovered", Format("reattached to pid %d", handle.pid));
    WatchOom(raw);
  } else {
    // Gone (or pid reused). Its exit may be in the keeper's journal.
    raw->awaiting_journal = true;
    if (journal_replayed_) JournalReplayed();
  }
  return OkStatus();
}

Status ExecDriver::RecoverAll() {
  std::string dir = options_.state_dir + "/tasks";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return ErrnoError("open '" + dir + "'");
  std::vector<std::string> files;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (EndsWith(n, ".json") && n[0] != '.') files.push_back(n);
  }
  ::closedir(d);
  for (const std::string& f : files) {
    std::string path = dir + "/" + f;
    auto text = sys::ReadFile(path, 4 << 20);
    ExitResult exit;
    int64_t completed_at = 0;
    bool has_exit = false;
    Result<TaskHandle> h = text.ok() ? DecodeHandle(*text, &exit, &completed_at, &has_exit)
                                     : Result<TaskHandle>(text.error());
    if (!h.ok()) {
      // A corrupt handle must not stop the others from coming back; keep
      // the file for inspection.
      log::Error("cannot recover task handle", {{"file", path}, {"error", h.error().message()}});
      continue;
    }
    if (has_exit) {
      auto t = std::make_unique<Task>();
      t->handle = *h;
      t->state = TaskState::kExited;
      t->exit = exit;
      t->completed_at = completed_at;
      tasks_[h->config.id] = std::move(t);
      continue;
    }
    Status st = RecoverTask(*h);
    if (!st.ok()) log::Error("cannot recover task", {{"file", path}, {"error", st.error().message()}});
  }
  return OkStatus();
}

void ExecDriver::JournalReplayed() {
  journal_replayed_ = true;
  std::vector<Task*> unknown;
  for (auto& [id, t] : tasks_) {
    if (t->awaiting_journal && t->state != TaskState::kExited) unknown.push_back(t.get());
  }
  for (Task* t : unknown) {
    ExitResult r;
    r.exit_code = -1;
    r.error = "exit status unknown: the process ended while no agent was running";
    Finish(t, r, WallNanos());
  }
}

void ExecDriver::ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                          ExecCallback done) {
  Task* t = Find(id);
  if (!t) return done(Error(Code::kNotFound, kNotFound));
  if (cmd.empty()) return done(Error(Code::kInvalidArgument, "exec: command is empty"));
  if (t->state == TaskState::kExited) return done(Error(Code::kFailedPrecondition, "task " + id + " is not running"));
  if (timeout_nanos <= 0) timeout_nanos = 60LL * kNanosPerSecond;
  const TaskConfig& cfg = t->handle.config;
  auto creds = proc::ResolveCredentials(cfg.user, cfg.group, options_.users);
  if (!creds.ok()) return done(creds.error());
  // Same environment as the task: read it from the running process when we
  // can (it is what the task really has), else rebuild from the config.
  std::vector<std::string> env;
  auto environ = sys::ReadFile(Format("/proc/%d/environ", t->handle.pid), 1 << 20);
  if (environ.ok()) {
    for (const std::string& kv : Split(*environ, '\0')) {
      if (!kv.empty()) env.push_back(kv);
    }
  } else {
    env.push_back(std::string("PATH=") + kDefaultPath);
    for (const auto& [k, v] : cfg.env) env.push_back(k + "=" + v);
  }
  std::string path_var = kDefaultPath;
  for (const std::string& kv : env) {
    if (StartsWith(kv, "PATH=")) path_var = kv.substr(5);
  }
  int exit_code = 0;
  auto path = proc::ResolveCommand(cmd[0], path_var, &exit_code);
  if (!path.ok()) return done(path.error());
  // Only our end is non-blocking: the command's stdout must block when the
  // pipe is full, as any program expects of its stdout.
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return done(ErrnoError("pipe"));
  UniqueFd r(p[0]), w(p[1]);
  Status nb = sys::SetNonBlocking(r.get(), true);
  if (!nb.ok()) return done(nb.error());
  proc::SpawnRequest req;
  req.path = *path;
  req.argv = cmd;
  req.env = env;
  req.workdir = cfg.workdir.empty() ? cfg.task_dir : cfg.workdir;
  req.stdout_fd = w.get();
  req.stderr_fd = w.get();
  req.set_credentials = !cfg.user.empty() || !cfg.group.empty() || ::geteuid() == 0;
  req.creds = *creds;
  if (!req.set_credentials) req.creds = proc::Credentials{};
  auto spawned = proc::Spawn(req, &exit_code);
  if (!spawned.ok()) return done(spawned.error());
  w.Reset();

  auto s = std::make_unique<ExecSession>();
  ExecSession* sp = s.get();
  s->pid = spawned->pid;
  s->out = std::move(r);
  s->done = std::move(done);
  sessions_.push_back(std::move(s));
  size_t limit = options_.exec_output_limit;
  auto finish_if_done = [this, sp] {
    if (!sp->exited || !sp->eof) return;
    if (sp->timer) loop_->CancelTimer(sp->timer);
    ExecCallback cb = std::move(sp->done);
    Result<ExecResult> result = ExecResult{};
    if (sp->timed_out) {
      result = Error(Code::kDeadlineExceeded, "exec: command timed out and was killed");
    } else {
      ExecResult er;
      er.exit_code = ResultFromWaitStatus(sp->status).exit_code;
      er.output = std::move(sp->output);
      er.truncated = sp->truncated;
      result = std::move(er);
    }
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->get() == sp) {
        sessions_.erase(it);
        break;
      }
    }
    cb(std::move(result));
  };
  Status st = loop_->AddFd(sp->out.get(), EPOLLIN, [this, sp, limit, finish_if_done](uint32_t) {
    char buf[4096];
    for (;;) {
      ssize_t n = sys::Read(sp->out.get(), buf, sizeof buf);
      if (n > 0) {
        size_t room = limit > sp->output.size() ? limit - sp->output.size() : 0;
        sp->output.append(buf, std::min(room, static_cast<size_t>(n)));
        if (static_cast<size_t>(n) > room) sp->truncated = true;
        continue;
      }
      if (n < 0 && errno == EAGAIN) return;
      loop_->RemoveFd(sp->out.get());
      sp->eof = true;
      finish_if_done();
      return;
    }
  });
  if (!st.ok()) log::Error("exec: cannot watch output", {{"error", st.error().message()}});
  pid_t pid = sp->pid;
  (void)loop_->WatchChild(pid, [sp, finish_if_done](pid_t, int status) {
    sp->exited = true;
    sp->status = status;
    finish_if_done();
  });
  sp->timer = loop_->AddTimer(timeout_nanos, [sp, pid] {
    sp->timer = 0;
    sp->timed_out = true;
    ::kill(-pid, SIGKILL);
  });
}

}  // namespace outpost::driver
