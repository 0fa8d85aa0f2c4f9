#include "driver/exec/exec_driver.h"
#include "driver/exec/task.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "hooks/runner.h"
#include "net/netns.h"
#include "proc/procfs.h"
#include "proc/spawn.h"

namespace outpost::driver {

namespace {

// Environment variable carrying State::instance (see KillEverything).
constexpr const char* kInstanceVar = "OUTPOST_TASK_INSTANCE";

// Sends sig to the task's process group; falls back to the leader alone if
// the group is gone (ESRCH) but the leader is somehow still there.
int SignalGroup(pid_t pid, int sig) {
  if (::kill(-pid, sig) == 0) return 0;
  return ::kill(pid, sig);
}


}  // namespace


ExecDriver::ExecDriver(Loop* loop, Options options) : loop_(loop), options_(std::move(options)) {}

Result<std::unique_ptr<ExecDriver>> ExecDriver::Create(Loop* loop, Options options) {
  std::unique_ptr<ExecDriver> d(new ExecDriver(loop, std::move(options)));
  d->journal_replayed_ = !d->options_.keeper_is_parent;
  d->RefreshFingerprint();
  return d;
}

ExecDriver::~ExecDriver() {
  if (fingerprint_timer_) loop_->CancelTimer(fingerprint_timer_);
  for (Loop::TimerId id : exec_retries_) loop_->CancelTimer(id);
  for (auto& [id, t] : tasks_) {
    if (t->kill_timer) loop_->CancelTimer(t->kill_timer);
    if (t->our_child) loop_->UnwatchChild(t->pid);
  }
}

Capabilities ExecDriver::GetCapabilities() const {
  Capabilities c;
  c.send_signals = true;
  c.exec = true;
  c.fs_isolation = "none";
  c.dynamic_workload_users = true;  // user "dynamic" (task layer, proc/uid_pool)
  c.oom_score_adj = true;
  c.mounts = true;                  // NRI mount adjustments: bind mounts, private mount namespace
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
  int probe = sys::PidfdOpen(::getpid());
  f.attributes["driver.exec.pidfd"] = probe >= 0 ? "true" : "false";
  if (probe >= 0) ::close(probe);
  f.attributes["driver.exec.root"] = ::geteuid() == 0 ? "true" : "false";
  // Resource control (Nomad's "resources" fingerprint): which cgroup v2
  // controllers tasks get, or why there are none.
  f.attributes["driver.exec.cgroup.controllers"] = options_.cgroup_controllers;
  if (!options_.cgroup_root.empty()) f.attributes["driver.exec.cgroup.root"] = options_.cgroup_root;
  if (!options_.cgroup_unavailable.empty()) {
    f.attributes["driver.exec.cgroup.unavailable"] = options_.cgroup_unavailable;
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
  // The exit names only the pid: of two tasks sharing it (by_pid_), the
  // lowest id, so that the choice does not depend on the hash table.
  Task* found = nullptr;
  auto range = by_pid_.equal_range(pid);
  for (auto it = range.first; it != range.second; ++it) {
    if (!found || it->second->config.id < found->config.id) found = it->second;
  }
  return found;
}

ExecDriver::Task* ExecDriver::Add(std::unique_ptr<Task> t) {
  Task* raw = t.get();
  tasks_[raw->config.id] = std::move(t);
  if (raw->run_state != TaskState::kExited) by_pid_.emplace(raw->pid, raw);
  return raw;
}

void ExecDriver::Unindex(Task* t) {
  auto range = by_pid_.equal_range(t->pid);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second == t) {
      by_pid_.erase(it);
      return;
    }
  }
}

TaskHandle ExecDriver::HandleOf(const Task& t, const TaskConfig& config) const {
  TaskHandle h;
  h.version = kStateVersion;
  h.config = config;
  h.pid = t.pid;
  h.started_at_unix_nanos = t.started_at;
  State s;
  s.pid = t.pid;
  s.start_ticks = t.start_ticks;
  s.instance = t.instance;
  s.boot_id = proc::CurrentBootId();
  s.parent = t.parent;
  h.driver_state = EncodeState(s);
  return h;
}

void ExecDriver::Emit(const Task& t, const std::string& type, const std::string& message) {
  TaskEvent ev;
  ev.task_id = t.config.id;
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

void ExecDriver::StartTask(const TaskConfig& cfg, StartCallback done) {
  auto fail = [&](const Error& e) { done(e.Wrap("start task " + cfg.id)); };
  if (Find(cfg.id)) return fail(Error(Code::kAlreadyExists, "task with ID \"" + cfg.id + "\" already started"));
  if (cfg.command.empty()) return fail(Error(Code::kInvalidArgument, "command is empty"));
  if (!cfg.workdir.empty() && cfg.workdir[0] != '/') {
    return fail(Error(Code::kInvalidArgument, "working dir \"" + cfg.workdir + "\" must be an absolute path"));
  }
  const Identity& who = cfg.identity;

  // Environment: documented defaults, then the task's own, then the marker
  // outpost needs to find the task's processes (not overridable).
  std::map<std::string, std::string> env;
  env["PATH"] = kDefaultPath;
  // A uid without a passwd entry (a dynamic user) lives in its task dir.
  env["HOME"] = who.name.empty() && who.switch_user ? cfg.task_dir : (who.home.empty() ? "/" : who.home);
  if (!who.name.empty() || who.switch_user) {
    std::string name = who.name.empty() ? std::to_string(who.uid) : who.name;
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
  req.set_credentials = who.switch_user;
  req.creds.uid = who.uid;
  req.creds.gid = who.gid;
  req.creds.groups = who.groups;
  auto rlimits = proc::TaskRlimits(cfg.rlimits);
  if (!rlimits.ok()) return fail(rlimits.error());
  req.rlimits = std::move(*rlimits);
  UniqueFd out_fd, err_fd;
  auto open_out = [&](const std::string& p, UniqueFd* fd) -> Status {
    if (p.empty()) return OkStatus();
    // O_RDWR on a FIFO: the task itself keeps a reader on its pipe, so it
    // never gets SIGPIPE and buffered output survives while no agent reads.
    // Such an open never waits for a peer (fifo(7)), so the task's end is
    // opened blocking as it is, with no O_NONBLOCK to clear afterwards.
    auto r = sys::Open(p, O_RDWR);
    if (!r.ok()) return r.error();
    *fd = std::move(*r);
    return OkStatus();
  };
  Status st = open_out(cfg.stdout_path, &out_fd);
  if (st.ok()) st = open_out(cfg.stderr_path, &err_fd);
  if (!st.ok()) return fail(st.error());
  req.stdout_fd = out_fd.get();
  req.stderr_fd = err_fd.get();
  req.clone_parent = options_.keeper_is_parent;
  UniqueFd cgroup_fd, procs_fd;
  if (!cfg.cgroup.empty()) {
    auto fd = sys::Open(cfg.cgroup, O_RDONLY | O_DIRECTORY);
    if (!fd.ok()) return fail(fd.error().Wrap("task cgroup"));
    cgroup_fd = std::move(*fd);
    auto procs = sys::Open(cfg.cgroup + "/cgroup.procs", O_WRONLY);
    if (procs.ok()) procs_fd = std::move(*procs);
    req.cgroup_fd = cgroup_fd.get();
    req.cgroup_procs_fd = procs_fd.get();
  }
  // Opened here, closed once the child has joined it (after Spawn returns).
  UniqueFd netns_fd;
  if (!cfg.Netns().empty()) {
    auto fd = net::OpenNetns(cfg.Netns());
    if (!fd.ok()) return fail(fd.error().Wrap("task network namespace"));
    netns_fd = std::move(*fd);
    req.netns_fd = netns_fd.get();
  }
  req.hostname = cfg.Hostname();
  // NRI mount adjustments: bind mounts in a private mount namespace of the
  // task. Both ends must exist (nothing is created in the agent's tree).
  for (const Mount& m : cfg.mounts) {
    struct stat sb;
    if (::stat(m.source.c_str(), &sb) != 0) return fail(PathError("bind mount source", m.source));
    if (::stat(m.destination.c_str(), &sb) != 0) return fail(PathError("bind mount destination", m.destination));
    req.bind_mounts.push_back({m.source, m.destination, m.readonly});
  }
  req.oom_score_adj = cfg.oom_score_adj;

  // startContainer hooks run in the new process, after it is in its cgroup
  // and has its user, right before its exec; the spawn returns at once and
  // the exec report tells how it went.
  std::unique_ptr<hooks::InChildHooks> in_child;
  if (cfg.oci && !cfg.oci->hooks.at(hooks::Stage::kStartContainer).empty()) {
    hooks::State state;
    state.id = cfg.id;
    state.stage = hooks::Stage::kStartContainer;
    state.bundle = cfg.oci->bundle;
    state.annotations = cfg.oci->annotations;
    auto prepared = hooks::InChildHooks::Prepare(hooks::Stage::kStartContainer,
                                                 cfg.oci->hooks.at(hooks::Stage::kStartContainer), state,
                                                 cfg.oci->timeout_seconds);
    if (!prepared.ok()) return fail(prepared.error());
    in_child = std::move(*prepared);
    hooks::InChildHooks* hooks = in_child.get();
    req.pre_exec = [hooks] { return hooks->Run(); };
    req.pre_exec_message = [hooks] { return hooks->message(); };
  }

  auto spawned = proc::Spawn(req, &exit_code);
  if (!spawned.ok()) return fail(spawned.error());
  in_child.reset();  // the child has its own copy

  auto t = std::make_unique<Task>();
  t->config = KeptConfig(cfg);
  t->pid = spawned->pid;
  t->started_at = WallNanos();
  proc::ProcStat ps;
  if (proc::ReadProcStat(spawned->pid, &ps)) t->start_ticks = ps.start_ticks;
  t->parent = options_.keeper_is_parent ? "keeper" : "agent";
  t->instance = instance;
  t->pidfd = std::move(spawned->pidfd);
  Task* raw = Add(std::move(t));
  if (spawned->parent_is_caller) {
    raw->our_child = true;
    pid_t pid = spawned->pid;
    log::WarnIfError(loop_->WatchChild(pid, [this, pid](pid_t, int status) { OnProcessExit(pid, status, WallNanos()); }),
                     "cannot watch task process", {{"task", cfg.id}});
  }
  if (spawned->exec_report) {
    // Registered already (its exit may come before the report is read);
    // started once the report says it exec'd.
    std::string id = cfg.id, resolved = *path, workdir = req.workdir;
    auto watched = LoopFd::Watch(
        loop_, std::move(spawned->exec_report), EPOLLIN,
        [this, id, resolved, workdir, cfg, done](uint32_t) {
          Task* started = Find(id);
          if (!started) return;
          Status report = proc::ReadExecReport(started->exec_report.get(), resolved, workdir);
          started->exec_report.Reset();
          if (!report.ok()) {
            // The child exits by itself; whoever is its parent reaps it (the
            // loop's watch stays, and finds no task for the pid).
            Unindex(started);
            tasks_.erase(id);
            return done(report.error().Wrap("start task " + id));
          }
          Started(started, cfg, resolved, done);
        });
    if (!watched.ok()) {
      KillEverything(raw);
      return fail(watched.error());
    }
    raw->exec_report = std::move(*watched);
    return;
  }
  Started(raw, cfg, *path, done);
}

void ExecDriver::Started(Task* t, const TaskConfig& cfg, const std::string& path, const StartCallback& done) {
  log::Info("task started", {{"task", cfg.id}, {"pid", std::to_string(t->pid)}, {"command", path}});
  Emit(*t, "started", Format("started with pid %d", t->pid));
  done(HandleOf(*t, cfg));
}

void ExecDriver::OnProcessExit(pid_t pid, int wait_status, int64_t unix_nanos) {
  Task* t = FindByPid(pid);
  if (!t) {
    // Daemonised descendants adopted by the keeper, exec sessions of an
    // earlier worker, or an exit already recorded: nothing to do.
    log::Debug("exit of an untracked process", {{"pid", std::to_string(pid)}});
    return;
  }
  t->our_child = false;  // reaped (by the loop or the keeper)
  Finish(t, ExitFromWaitStatus(wait_status), unix_nanos);
}

void ExecDriver::Finish(Task* t, const ExitResult& result, int64_t unix_nanos) {
  if (t->run_state == TaskState::kExited) return;
  t->run_state = TaskState::kExited;
  Unindex(t);
  t->awaiting_journal = false;
  t->exit = result;
  t->completed_at = unix_nanos;
  if (t->kill_timer) {
    loop_->CancelTimer(t->kill_timer);
    t->kill_timer = 0;
  }
  t->foreign_watch.Reset();
  if (t->foreign_poll) {
    loop_->CancelTimer(t->foreign_poll);
    t->foreign_poll = 0;
  }
  t->pidfd.Reset();
  // The task is its main process: whatever it left behind dies with it, as
  // in a container's PID namespace, so nothing outlives supervision.
  KillEverything(t);
  std::vector<WaitCallback> waiters = std::move(t->waiters);
  std::vector<DoneCallback> stoppers = std::move(t->stop_waiters);
  t->waiters.clear();
  t->stop_waiters.clear();
  ExitResult copy = t->exit;
  for (auto& w : waiters) w(copy);
  for (auto& s : stoppers) s(OkStatus());
}

void ExecDriver::WaitTask(const std::string& id, WaitCallback done) {
  Task* t = Find(id);
  if (!t) {
    ExitResult lost;
    lost.exit_code = -1;
    lost.error = "wait: " + std::string(kNotFound);
    return done(lost);
  }
  if (t->run_state == TaskState::kExited) return done(t->exit);
  t->waiters.push_back(std::move(done));
}

void ExecDriver::KillEverything(Task* t) {
  // A task in a cgroup is killed whole by the task layer (cgroup.kill);
  // here: its process group, and without a cgroup its marked descendants.
  // The group id is only safe to signal while the leader lives: once it is
  // gone the number can be reused. Group members that outlive the leader
  // carry the marker and are found below.
  pid_t pid = t->pid;
  if (t->run_state != TaskState::kExited) SignalGroup(pid, SIGKILL);
  if (!t->config.cgroup.empty()) return;
  // Descendants that left the process group (setsid daemons) still carry
  // the task's marker in their environment. Handles written before the
  // instance marker existed fall back to the id.
  std::string marker = t->instance.empty() ? "OUTPOST_TASK_ID=" + t->config.id
                                           : std::string(kInstanceVar) + "=" + t->instance;
  if (SweepKeeperChildren(t, marker)) return;
  for (pid_t p : proc::ProcessesWithEnv(marker)) {
    if (p != ::getpid()) ::kill(p, SIGKILL);
  }
}

// The keeper is a subreaper and the parent of our tasks: once a task's main
// process has exited, every descendant it left is a child of the keeper or
// below one. So only the keeper's children that are no running task's main
// process need their environment read, not every process on the node: the
// cost does not grow with the number of tasks. False where this cannot be
// done (no keeper, or a kernel without /proc/PID/task/PID/children): then
// the caller reads every process.
bool ExecDriver::SweepKeeperChildren(Task* t, const std::string& marker) {
  if (!options_.keeper_is_parent || options_.keeper_pid <= 0 || std::strcmp(t->parent, "keeper") != 0) return false;
  // While the main process lives its descendants may still be below it;
  // its exit (Finish) sweeps them.
  if (t->run_state != TaskState::kExited) return true;
  std::vector<pid_t> kids;
  if (!proc::ChildrenOf(options_.keeper_pid, &kids)) return false;
  const pid_t self = ::getpid();
  for (pid_t k : kids) {
    // by_pid_: the main processes of the tasks still running.
    if (k == self || by_pid_.count(k) || !proc::HasEnv(k, marker)) continue;
    // It and whatever it started: collected before the kill, as the dead
    // one's children move up to the keeper.
    std::vector<pid_t> tree{k}, below;
    for (size_t i = 0; i < tree.size() && tree.size() < 4096; ++i) {
      if (proc::ChildrenOf(tree[i], &below)) tree.insert(tree.end(), below.begin(), below.end());
    }
    for (pid_t p : tree) {
      if (p != self) ::kill(p, SIGKILL);
    }
  }
  return true;
}

void ExecDriver::StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                          DoneCallback done) {
  Task* t = Find(id);
  if (!t) return done(NotFound());
  auto sig = proc::ParseSignal(signal.empty() ? "SIGTERM" : signal);
  if (!sig.ok()) return done(sig.error());
  if (t->run_state == TaskState::kExited) return done(OkStatus());
  t->stop_waiters.push_back(std::move(done));
  if (timeout_nanos <= 0) {
    KillEverything(t);
    return;
  }
  SignalGroup(t->pid, *sig);
  Emit(*t, "stopping",
       Format("sent %s, killing in %s", proc::SignalName(*sig), FormatDuration(timeout_nanos).c_str()));
  if (!t->kill_timer) {
    t->kill_timer = loop_->AddTimer(timeout_nanos, [this, id] {
      Task* task = Find(id);
      if (!task || task->run_state == TaskState::kExited) return;
      task->kill_timer = 0;
      log::Info("task did not stop in time; killing it", {{"task", id}});
      KillEverything(task);
    });
  }
}

void ExecDriver::DestroyTask(const std::string& id, bool force, DoneCallback done) {
  Task* t = Find(id);
  if (!t) return done(NotFound());
  auto remove = [this, id](DoneCallback cb) {
    if (Task* task = Find(id)) {
      if (task->our_child) loop_->UnwatchChild(task->pid);
      Unindex(task);
      tasks_.erase(id);
    }
    cb(OkStatus());
  };
  if (t->run_state == TaskState::kExited) return remove(std::move(done));
  if (!force) return done(Error(Code::kFailedPrecondition, "cannot destroy running task"));
  t->stop_waiters.push_back([remove, done](Status) { remove(done); });
  KillEverything(t);
}

void ExecDriver::InspectTask(const std::string& id, InspectCallback done) {
  Task* t = Find(id);
  if (!t) return done(NotFound());
  TaskStatus s;
  s.id = id;
  s.state = t->run_state;
  // Running means alive now: an exit the keeper has not reported yet shows
  // in the pidfd first.
  if (s.state == TaskState::kRunning && t->pidfd) {
    pollfd p{t->pidfd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) s.state = TaskState::kUnknown;
  }
  s.pid = t->pid;
  s.started_at_unix_nanos = t->started_at;
  s.completed_at_unix_nanos = t->completed_at;
  s.exit = t->exit;
  s.attributes["pid"] = std::to_string(t->pid);
  s.attributes["parent"] = t->foreign_parent ? "foreign" : t->parent;
  done(s);
}

void ExecDriver::SignalTask(const std::string& id, const std::string& signal, DoneCallback done) {
  Task* t = Find(id);
  if (!t) return done(NotFound());
  auto sig = proc::ParseSignal(signal);
  if (!sig.ok()) return done(sig.error());
  if (t->run_state == TaskState::kExited) {
    return done(Error(Code::kFailedPrecondition, "task " + id + " is not running"));
  }
  if (SignalGroup(t->pid, *sig) != 0) return done(ErrnoError("signal task " + id));
  done(OkStatus());
}

}  // namespace outpost::driver
