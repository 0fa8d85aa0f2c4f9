// The start and stop pipelines of a task: one function per step, in the
// order they run. Every driver gets the same steps around it; what a later
// step needs from an earlier one travels in the StartOp.
//
// Start (TaskManager::Start):
//   1. Prepare             ids, an ended instance making way, dynamic user,
//                          credentials (resolved once), task dir, FIFOs, logs
//   2. JoinNetwork         the job's network namespace, wired by CNI (once
//                          per job: net/networks), its address and ports
//                          in the environment (task/network_step.cc)
//      AllocateDevices     device plugin resources: chosen, Allocate'd (or
//                          kept from an earlier start) and applied to the
//                          task before NRI sees it (task/device_step.cc)
//      NriCreate           NRI's CreateContainer (task/nri_steps.cc)
//   3. CreateCgroup        admission check of the limits, the task's cgroup
//                          with its limits written (before anything runs)
//   4. WriteBundle         the task's OCI hooks resolved, its bundle written
//   5-7. hooks             prestart + createRuntime, createContainer, and
//                          startContainer for drivers that cannot run it in
//                          the task (task/hook_steps.cc)
//   8. SpawnThroughDriver  the driver starts the task in that cgroup
//   9. poststart hooks
//  10. RecordStarted       the record persisted, FIFOs handed to the keeper,
//                          OOM watch, wait for the exit
// A task is recorded only once its poststart hooks have run: an agent killed
// before that leaves an unrecorded process, which recovery kills.
// A failed step is undone with the completed ones, in reverse; the error
// names the task and the step's reason.
//
// Exit (OnExit, whether the task ended by itself or was stopped):
//   KillCgroup -> tell OOM apart -> persist the exit -> drain logs -> event
//   -> poststop hooks -> exit callbacks. A failed start runs the poststop
//   hooks too once its bundle was written.
// Stop (TaskManager::Stop):       StopThroughDriver -> KillCgroup.
// Destroy (TaskManager::Destroy): DestroyThroughDriver -> KillCgroup ->
//   ReleaseUser -> RemoveCgroup -> Forget (logs closed, record removed).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "cgroup/cgroup.h"
#include "proc/uid_pool.h"
#include "task/entry.h"

namespace outpost::task {

namespace {

// A task running as another user without a workdir of its own starts in its
// task dir: every directory above it must let that user search it, or the
// start fails at chdir with a bare EACCES. Names the first one in the way
// (the agent changes the mode of no directory it did not create).
__attribute__((noinline)) Status CheckTaskDirReachable(const driver::TaskConfig& c, const proc::Credentials& who) {
  if (!c.workdir.empty() || who.uid == 0 || who.uid == ::geteuid()) return OkStatus();
  std::string dir = c.task_dir;
  for (size_t i = 1; i < dir.size(); ++i) {
    if (dir[i] != '/') continue;
    dir[i] = '\0';  // dir.c_str() is now the i-th ancestor
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return PathError("stat", dir);
    mode_t bit = st.st_uid == who.uid ? S_IXUSR : S_IXOTH;
    for (gid_t g : who.groups) {
      if (g == st.st_gid && bit == S_IXOTH) bit = S_IXGRP;
    }
    if (st.st_gid == who.gid && bit == S_IXOTH) bit = S_IXGRP;
    if ((st.st_mode & bit) == 0) {
      std::string parent = dir.c_str();
      dir[i] = '/';
      return Error(Code::kFailedPrecondition,
                   Format("task dir '%s' is out of reach of uid %u: '%s' (mode %04o, owner %u) does not let it "
                          "search; let other users search it (chmod o+x)",
                          dir.c_str(), static_cast<unsigned>(who.uid), parent.c_str(),
                          static_cast<unsigned>(st.st_mode & 07777), static_cast<unsigned>(st.st_uid)));
    }
    dir[i] = '/';
  }
  return OkStatus();
}

// The task's own dir, owned by its user. A restart (an ended instance was
// there: likely its dir too) looks first, which is one call where making
// it is three (mkdir, stat on EEXIST, chown).
Status MakeTaskDir(const std::string& dir, const proc::Credentials& who, bool likely_there) {
  struct stat st;
  if (likely_there && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == who.uid &&
      st.st_gid == who.gid) {
    return OkStatus();
  }
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(dir, 0700));
  if (::chown(dir.c_str(), who.uid, who.gid) != 0 && ::geteuid() == 0) return PathError("chown", dir);
  return OkStatus();
}

}  // namespace

void TaskManager::Start(driver::TaskConfig config, StartedCallback started, ExitCallback exited) {
  auto op = std::make_shared<StartOp>();
  op->config = std::move(config);
  op->started = std::move(started);
  op->exited = std::move(exited);
  RunStart(std::move(op));
}

struct TaskManager::StartStep {
  const char* name;
  void (TaskManager::*run)(StartOp*, DoneCallback);
  void (TaskManager::*undo)(StartOp*);
};

// The start pipeline, in order.
const TaskManager::StartStep* TaskManager::StartSteps(size_t* count) {
  static const StartStep kSteps[] = {
      {"prepare", &TaskManager::Prepare, &TaskManager::UndoPrepare},
      {"network", &TaskManager::JoinNetwork, nullptr},
      {"devices", &TaskManager::AllocateDevices, nullptr},
      {"NRI CreateContainer", &TaskManager::NriCreate, &TaskManager::UndoNriCreate},
      {"create cgroup", &TaskManager::CreateCgroup, &TaskManager::UndoCreateCgroup},
      {"bundle", &TaskManager::WriteBundle, nullptr},
      {"prestart hooks", &TaskManager::RunCreateHooks, nullptr},
      {"createContainer hooks", &TaskManager::RunCreateContainerHooks, nullptr},
      {"startContainer hooks", &TaskManager::RunStartContainerForDriver, nullptr},
      {"spawn", &TaskManager::SpawnThroughDriver, &TaskManager::UndoSpawn},
      {"NRI StartContainer", &TaskManager::NriStarted, nullptr},
      {"poststart hooks", &TaskManager::RunPoststartHooks, nullptr},
      {"NRI PostStartContainer", &TaskManager::NriPostStart, nullptr},
      {"record", &TaskManager::RecordStarted, nullptr},
  };
  *count = sizeof kSteps / sizeof kSteps[0];
  return kSteps;
}

void TaskManager::RunStart(std::shared_ptr<StartOp> op) {
  size_t count = 0;
  const StartStep* steps = StartSteps(&count);
  if (op->step == count) {
    auto view = Inspect(op->config.id);
    StartedCallback cb = std::move(op->started);
    return cb(view);
  }
  std::weak_ptr<bool> alive = alive_;
  (this->*steps[op->step].run)(op.get(), [this, alive, op](Status st) {
    if (!alive.lock()) return;
    if (!st.ok()) return FailStart(op.get(), st.error());
    op->step++;
    RunStart(op);
  });
}

// Undoes the failed step's own partial work, then the steps before it, in
// reverse (an undo copes with a step that did only part of its work).
void TaskManager::FailStart(StartOp* op, const Error& e) {
  size_t count = 0;
  const StartStep* steps = StartSteps(&count);
  for (size_t i = op->step + 1; i-- > 0;) {
    if (steps[i].undo) (this->*steps[i].undo)(op);
  }
  const std::string prefix = "start task " + op->config.id;
  Error err = e.message().compare(0, prefix.size(), prefix) == 0 ? e : e.Wrap(prefix);
  StartedCallback cb = std::move(op->started);
  if (!op->bundle_written) return cb(err);
  // runtime-spec: a failed start still runs the poststop hooks, and the
  // start's outcome is told once they have run.
  std::weak_ptr<bool> alive = alive_;
  RunPoststop(op->config, [alive, cb, err] {
    if (alive.lock()) cb(err);
  });
}

// ---- 1. Prepare ---------------------------------------------------------

void TaskManager::Prepare(StartOp* op, DoneCallback done) {
  driver::TaskConfig& c = op->config;
  if (c.id.empty()) {
    // Short, sortable, unique enough for one node: time + counter.
    c.id = Format("t%llx%llx", static_cast<unsigned long long>(WallNanos() / 1000000),
                  static_cast<unsigned long long>(++generated_ids_));
  }
  OUTPOST_RETURN_IF_ERROR_CB(ValidateTaskId(c.id), done);
  if (c.name.empty()) c.name = c.id;
  Status namest = ValidateTaskId(c.name);
  if (!namest.ok()) return done(Error(Code::kInvalidArgument, "task name: " + namest.error().message()));
  if (Task* old = Find(c.id); old && (old->starting || !old->record.exited)) {
    return done(Error(Code::kAlreadyExists, "task with ID \"" + c.id + "\" already started"));
  }
  // Checked here for every driver (the bundle and the driver need it absolute).
  if (!c.workdir.empty() && c.workdir[0] != '/') {
    return done(Error(Code::kInvalidArgument, "working dir \"" + c.workdir + "\" must be an absolute path"));
  }
  auto d = options_.drivers->Get(c.driver);
  if (!d.ok()) return done(d.error());
  op->driver = *d;
  // Checked at submission too, unless the driver was not registered then.
  Status valid = op->driver->CheckConfig(c.driver_config);
  if (!valid.ok()) return done(valid);
  // An ended instance makes way (a start refused above leaves it as it
  // was); its logs and task dir stay for this one. Its log pipes are kept
  // when this one's streams are set up the same (a restart: no FIFO
  // reopened, none handed to the keeper again), with the entry they point
  // to.
  std::unique_ptr<Task> kept;
  KeptStreams streams;
  if (Task* old = Find(c.id)) {
    NriRemoved(old);
    if (driver::Driver* od = DriverOf(*old)) od->DestroyTask(c.id, false, [](Status) {});
    kept = std::move(tasks_.extract(c.id).mapped());
    streams = KeepStreams(kept.get());
    op->replaced = true;
  }

  // A kept entry is reused (its pipes' callbacks point to it), emptied but
  // for its pipes.
  std::unique_ptr<Task> t = kept ? std::move(kept) : std::make_unique<Task>();
  t->starting = true;
  t->record.handle.config.driver = c.driver;
  Task* raw = t.get();
  tasks_[c.id] = std::move(t);
  op->inserted = true;
  if (c.user == "dynamic") {
    // A uid of its own from the pool, released when the task is destroyed.
    if (!options_.uids) {
      return done(Error(Code::kFailedPrecondition, "dynamic users are unavailable: " + options_.dynamic_users_problem));
    }
    auto uid = options_.uids->Acquire(c.id);
    if (!uid.ok()) return done(uid.error());
    raw->has_user = true;
    c.user = std::to_string(*uid);
    c.group = c.user;
  }
  auto creds = proc::ResolveCredentials(c.user, c.group, options_.users);
  if (!creds.ok()) return done(creds.error());
  driver::Identity& who = c.identity;
  bool named = !c.user.empty() || !c.group.empty();
  if (named && ::geteuid() != 0 && (creds->uid != ::geteuid() || creds->gid != ::getegid())) {
    return done(Error(Code::kPermissionDenied, "running as user \"" + c.user + "\" needs a root agent"));
  }
  who.switch_user = named || ::geteuid() == 0;
  who.uid = creds->uid;
  who.gid = creds->gid;
  who.groups = creds->groups;
  who.name = creds->name;
  who.home = creds->home;
  if (!who.switch_user) who = driver::Identity{false, 0, 0, {}, creds->name, creds->home};

  c.task_dir = TaskDirPath(c.id);
  c.log_dir = LogDirPath(c.id);
  c.stdout_path = FifoPath(c.id, "stdout");
  c.stderr_path = FifoPath(c.id, "stderr");
  OUTPOST_RETURN_IF_ERROR_CB(MakeTaskDir(c.task_dir, *creds, op->replaced), done);
  OUTPOST_RETURN_IF_ERROR_CB(CheckTaskDirReachable(c, *creds), done);
  raw->record.handle.config = c;
  DropDerivedPaths(raw);
  if (streams.Same(c)) return done(OkStatus());
  if (raw->out || raw->err) CloseLogs(raw, false);  // set up differently now: made anew
  done(OpenLogs(c, creds->uid, creds->gid, raw));
}

// What the streams of an ended instance were opened with; empties *t but
// for its pipes (and whether the keeper holds their FIFOs).
TaskManager::KeptStreams TaskManager::KeepStreams(Task* t) {
  const driver::TaskConfig& c = t->config();
  KeptStreams k{t->out && t->err, c.identity.switch_user, c.identity.uid, c.identity.gid, c.log_max_files,
                c.log_max_file_size};
  std::unique_ptr<logs::LogPipe> out = std::move(t->out), err = std::move(t->err);
  bool held = t->fifos_held;
  *t = Task();
  t->out = std::move(out);
  t->err = std::move(err);
  t->fifos_held = held;
  return k;
}

void TaskManager::UndoPrepare(StartOp* op) {
  Task* t = op->inserted ? Find(op->config.id) : nullptr;
  if (!t) return;
  CloseLogs(t, true);
  ReleaseUser(op->config.id);
  tasks_.erase(op->config.id);
  // The ended instance this start replaced is gone with it.
  if (op->replaced) ::unlink(RecordPath(op->config.id).c_str());
}

// ---- 2. CreateCgroup ----------------------------------------------------

void TaskManager::CreateCgroup(StartOp* op, DoneCallback done) {
  driver::TaskConfig& c = op->config;
  cgroup::Cgroups* cg = options_.cgroups;
  if (!cg) return done(OkStatus());
  std::vector<std::string> problems = cg->Check(c.resources, options_.allow_without_limits);
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    return done(Error(Code::kFailedPrecondition, all));
  }
  if (!cg->available()) return done(OkStatus());
  OUTPOST_RETURN_IF_ERROR_CB(cg->EnsureJob(c.job, cgroup::Resources()), done);
  auto fd = cg->CreateTask(c.job, c.id, c.resources);
  if (!fd.ok()) return done(fd.error());
  op->cgroup = cg->TaskPath(c.job, c.id);
  c.cgroup = op->cgroup;
  auto stats = cg->Stats(op->cgroup);
  if (stats.ok()) op->oom_base = stats->memory_events["oom_kill"];
  if (Task* t = Find(c.id)) t->record.handle.config.cgroup = c.cgroup;
  done(OkStatus());
}

void TaskManager::UndoCreateCgroup(StartOp* op) {
  if (!op->cgroup.empty()) RemoveCgroup(op->config);
}

// ---- 3. SpawnThroughDriver ----------------------------------------------

void TaskManager::SpawnThroughDriver(StartOp* op, DoneCallback done) {
  std::weak_ptr<bool> alive = alive_;
  op->driver->StartTask(op->config, [this, op, alive, done](Result<driver::TaskHandle> h) {
    if (!alive.lock()) return;
    if (!h.ok()) return done(h.error());
    op->handle = std::move(*h);
    if (op->driver->RunsStartContainerHooks()) RecordInChildHooks(op->config);
    done(OkStatus());
  });
}

void TaskManager::UndoSpawn(StartOp* op) { op->driver->DestroyTask(op->config.id, true, [](Status) {}); }

// ---- 4. RecordStarted ---------------------------------------------------

void TaskManager::RecordStarted(StartOp* op, DoneCallback done) {
  Task* t = Find(op->config.id);
  if (!t) return done(Error(Code::kAborted, "the task was removed while it started"));
  t->starting = false;
  // The record already holds the config (Prepare, CreateCgroup): take only
  // the driver's part of its handle, without copying its config again.
  driver::TaskHandle& h = op->handle;
  t->record.handle.version = h.version;
  t->record.handle.pid = h.pid;
  t->record.handle.started_at_unix_nanos = h.started_at_unix_nanos;
  t->record.handle.driver_state = std::move(h.driver_state);
  t->record.handle.network = std::move(h.network);
  if (t->record.handle.started_at_unix_nanos == 0) t->record.handle.started_at_unix_nanos = WallNanos();
  t->record.oom_kills_at_start = op->oom_base;
  if (op->exited) t->on_exit.push_back(std::move(op->exited));
  Persist(*t);
  if (!t->fifos_held) HoldFifos(*t);  // a restart's kept pipes are held already
  WatchOom(*t);
  WaitForExit(t->id());
  done(OkStatus());
}

// ---- exit ---------------------------------------------------------------

void TaskManager::OnExit(const std::string& id, const driver::ExitResult& result) {
  Task* t = Find(id);
  if (!t || t->record.exited) return;
  const driver::TaskConfig& c = t->config();
  driver::ExitResult exit = result;
  // The task is its main process: whatever it left in its cgroup dies with
  // it, as in a container's PID namespace, so nothing outlives supervision.
  KillCgroup(*t);
  cgroup::Cgroups* cg = options_.cgroups;
  if (cg && cg->available() && !c.cgroup.empty()) {
    if (options_.oom) options_.oom->Unwatch(c.cgroup);
    auto stats = cg->Stats(c.cgroup);
    uint64_t kills = stats.ok() ? stats->memory_events["oom_kill"] : 0;
    if (kills > t->record.oom_kills_at_start && exit.signal == SIGKILL) {
      exit.oom_killed = true;
      ReportOom(t, kills);  // the watch, just removed, may not have heard of it yet
    }
  }
  t->record.exited = true;
  t->record.exit = exit;
  t->record.completed_at_unix_nanos = WallNanos();
  Persist(*t);
  if (t->out) t->out->Drain();  // whatever it wrote is in the pipe now
  if (t->err) t->err->Drain();
  std::string msg;
  if (!exit.error.empty()) {
    msg = "exited: " + exit.error;
  } else if (exit.oom_killed) {
    msg = "OOM killed (memory limit reached)";
  } else if (exit.signal) {
    msg = driver::DescribeExit(exit) + Format(" (exit code %d)", exit.exit_code);
  } else {
    msg = Format("exited with code %d", exit.exit_code);
  }
  log::Info("task exited", {{"task", id}, {"exit_code", std::to_string(exit.exit_code)},
                            {"signal", std::to_string(exit.signal)}, {"error", exit.error}});
  Emit(c, t->stop_requested ? "stopped" : exit.signal ? "signalled" : "exited", msg);
  NriStopped(t);
  auto callbacks = std::make_shared<std::vector<ExitCallback>>(std::move(t->on_exit));
  t->on_exit.clear();
  // The poststop hooks run before anyone hears of the exit: a restart, a
  // stop or a removal waits for them, as runc's delete does.
  std::weak_ptr<bool> alive = alive_;
  t->poststop_running = true;
  RunPoststop(c, [this, alive, id, callbacks, exit] {
    if (!alive.lock()) return;
    std::vector<std::function<void()>> waiting;
    if (Task* ended = Find(id)) ended->poststop_running = false;
    auto it = after_poststop_.find(id);
    if (it != after_poststop_.end()) {
      waiting = std::move(it->second);
      after_poststop_.erase(it);
    }
    for (auto& cb : *callbacks) cb(exit);
    for (auto& cb : waiting) cb();
  });
}

// ---- stop ---------------------------------------------------------------

void TaskManager::Stop(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                       DoneCallback done) {
  // A start still waiting for a required NRI plugin is simply given up.
  if (AbandonNriWait(id)) return done(OkStatus());
  StopThroughDriver(id, timeout_nanos, signal, [this, id, done](Status st) {
    if (Task* t = Find(id)) KillCgroup(*t);
    if (!st.ok()) return done(st);
    AwaitExit(id, done);
  });
}

// A driver may answer StopTask once the kill is sent (a plugin need not wait
// for its child): the stop is done only when the exit has been seen, so a
// task is gone when `outpost stop` or `rm` returns. Bounded: a driver that
// never reports the exit does not hold the stop forever.
void TaskManager::AwaitExit(const std::string& id, DoneCallback done) {
  Task* t = Find(id);
  if (!t) return done(OkStatus());
  if (t->record.exited) {
    // Its poststop hooks are part of the stop.
    if (!t->poststop_running) return done(OkStatus());
    after_poststop_[id].push_back([done] { done(OkStatus()); });
    return;
  }
  auto once = std::make_shared<DoneCallback>(std::move(done));
  std::weak_ptr<bool> alive = alive_;
  Loop::TimerId timer = loop_->AddTimer(kStopExitWaitNanos, [alive, id, once] {
    if (!alive.lock() || !*once) return;
    log::Warn("the driver stopped the task but has not reported its exit", {{"task", id}});
    auto cb = std::move(*once);
    *once = nullptr;
    cb(OkStatus());
  });
  t->on_exit.push_back([this, alive, once, timer](const driver::ExitResult&) {
    if (!alive.lock() || !*once) return;
    loop_->CancelTimer(timer);
    auto cb = std::move(*once);
    *once = nullptr;
    cb(OkStatus());
  });
}

void TaskManager::StopThroughDriver(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                                    DoneCallback done) {
  Task* t = Find(id);
  driver::Driver* d = t ? DriverOf(*t) : nullptr;
  if (!t || t->starting) return done(Error(Code::kNotFound, "task not found for given id"));
  if (t->record.exited) return done(OkStatus());
  // A driver plugin not registered (yet): the task may run on; the stop is
  // made once it is back (or its grace period ends the task).
  if (!d) return done(Error(Code::kUnavailable, DriverProblem(t->record.driver())));
  if (timeout_nanos < 0) timeout_nanos = t->config().kill_timeout_nanos;
  t->stop_requested = true;
  d->StopTask(id, timeout_nanos, signal.empty() ? t->config().kill_signal : signal, std::move(done));
}

void TaskManager::KillCgroup(const Task& t) {
  cgroup::Cgroups* cg = options_.cgroups;
  if (!cg || !cg->available() || t.config().cgroup.empty()) return;
  // Everything the task started is in its cgroup, whatever session or
  // process group it moved to.
  log::WarnIfError(cg->Kill(t.config().cgroup), "cannot kill what is left in the task's cgroup", {{"task", t.id()}});
}

// ---- destroy ------------------------------------------------------------

void TaskManager::Destroy(const std::string& id, bool force, DoneCallback done) {
  if (force) (void)AbandonNriWait(id);
  if (Task* t = Find(id); t && t->poststop_running) {
    // After its poststop hooks, which read its bundle.
    after_poststop_[id].push_back([this, id, force, done] { Destroy(id, force, done); });
    return;
  }
  DestroyThroughDriver(id, force, [this, id, done](Status st) {
    if (!st.ok()) return done(st);
    Task* t = Find(id);
    if (t) {
      KillCgroup(*t);
      ReleaseUser(id);
      RemoveCgroup(t->config());
      Forget(id);
    }
    done(OkStatus());
  });
}

void TaskManager::DestroyThroughDriver(const std::string& id, bool force, DoneCallback done) {
  Task* t = Find(id);
  if (!t || t->starting) return done(Error(Code::kNotFound, "task not found for given id"));
  driver::Driver* d = DriverOf(*t);
  if (!t->record.exited && !force) return done(Error(Code::kFailedPrecondition, "cannot destroy running task"));
  const std::string name = t->record.driver();
  if (!d || !d->Unreachable().empty()) {
    // What the driver keeps of the task (a container's state, its bundle)
    // is only gone when the driver says so: wait for it, unless it has been
    // given up on. What such a driver still has is destroyed when it is
    // back (DestroyOrphans).
    if (!DriverGone(name)) return done(Error(Code::kUnavailable, DriverProblem(name)));
    log::Warn("task forgotten without its driver, which is gone; what the driver kept of it is destroyed when it "
              "registers again",
              {{"task", id}, {"driver", name}});
    return done(OkStatus());
  }
  if (!t->record.exited) t->stop_requested = true;
  d->DestroyTask(id, force, [done](Status st) {
    // A driver that no longer knows the task (an ended one it forgot) is
    // no reason to keep it.
    done(st.ok() || st.error().code() == Code::kNotFound ? OkStatus() : st);
  });
}

void TaskManager::ReleaseUser(const std::string& id) {
  Task* t = Find(id);
  if (!t || !t->has_user || !options_.uids) return;
  options_.uids->Release(id);
  t->has_user = false;
}

void TaskManager::RemoveCgroup(const driver::TaskConfig& c) {
  cgroup::Cgroups* cg = options_.cgroups;
  if (!cg || !cg->available() || c.cgroup.empty()) return;
  RemoveCgroupDir(c.id, c.job, c.cgroup, 0);
}

// rmdir only: the kernel refuses (EBUSY) while anything is left in it. Right
// after cgroup.kill the killed processes may still be exiting, so EBUSY is
// retried every 50 ms for 2 s before it is reported; a retry is dropped once
// a task of that id exists again (a new start owns the dir then).
void TaskManager::RemoveCgroupDir(const std::string& id, const std::string& job, const std::string& path,
                                  int attempt) {
  cgroup::Cgroups* cg = options_.cgroups;
  Status st = cg->Remove(path);
  if (!st.ok() && st.error().sys_errno() == EBUSY && attempt < 40) {
    std::weak_ptr<bool> alive = alive_;
    loop_->AddTimer(50 * kNanosPerMilli, [this, alive, id, job, path, attempt] {
      if (alive.lock() && !Find(id)) RemoveCgroupDir(id, job, path, attempt + 1);
    });
    return;
  }
  log::WarnIfError(st, "cannot remove task cgroup", {{"task", id}});
  (void)cg->RemoveJobIfEmpty(job);
}

void TaskManager::Forget(const std::string& id) {
  Task* t = Find(id);
  if (!t) return;
  NriRemoved(t);
  CloseLogs(t, true);
  hook_runs_.erase(id);
  // Its bundle describes an instance that is gone (cheap on the tmpfs).
  if (::access(BundlePath(id).c_str(), F_OK) == 0) {
    log::WarnIfError(sys::RemoveTree(BundlePath(id)), "cannot remove the task's bundle", {{"task", id}});
  }
  unsaved_.Forget(RecordPath(id));
  // Like the record's writes, without fsync (docs/process-model.md, "What
  // is written when"): after a power cut, recovery drops what came back.
  if (::unlink(RecordPath(id).c_str()) != 0 && errno != ENOENT) {
    log::Warn("cannot remove task record", {{"task", id}, {"error", PathError("remove", RecordPath(id)).message()}});
  }
  tasks_.erase(id);
}

void TaskManager::Purge(const std::string& id, DoneCallback done) {
  std::string task_dir = TaskDirPath(id);
  std::string log_dir = LogDirPath(id);
  Task* t = Find(id);
  // What the driver keeps of the task (a Nomad plugin's allocation dir),
  // looked up again once it is destroyed: the driver may be gone by then.
  std::shared_ptr<driver::TaskConfig> config;
  if (t) config = std::make_shared<driver::TaskConfig>(t->config());
  auto remove_dirs = [this, task_dir, log_dir, config, done](Status st) {
    if (!st.ok() && st.error().code() != Code::kNotFound) return done(st);
    Status a = sys::RemoveTree(task_dir);
    Status b = sys::RemoveTree(log_dir);
    driver::Driver* d = config ? options_.drivers->Find(config->driver) : nullptr;
    Status c = d ? d->RemoveTaskData(*config) : OkStatus();
    done(!a.ok() ? a : !b.ok() ? b : c);
  };
  if (!t) {
    if (options_.uids) options_.uids->Release(id);
    return remove_dirs(OkStatus());
  }
  Destroy(id, true, remove_dirs);
}

}  // namespace outpost::task
