#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "agent/agent_nri.h"
#include "agent/api.h"
#include "agent/boot_id.h"
#include "agent/dir_claims.h"
#include "agent/job_api.h"
#include "agent/task_api.h"
#include "agent/watchdog.h"
#include "driver/exec/exec_driver.h"
#include "driver/remote.h"
#include "hooks/catalog.h"
#include "net/networks.h"
#include "task/manager.h"
#include "job/manager.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "keeper/keeper.h"
#include "proc/uid_pool.h"
#include "proc/procfs.h"
#include "proc/spawn.h"
#include "keeper/link.h"
#include "keeper/proto.h"
#include "plugin/registry.h"
#include "plugin/watcher.h"
#include "wire/rpc_server.h"

namespace outpost::agent {

namespace {

wire::ServerOptions ServerOptionsFrom(const Config& c) {
  wire::ServerOptions o;
  o.name = "api";
  o.max_connections = static_cast<size_t>(c.api_max_connections);
  o.max_connections_per_uid = static_cast<size_t>(c.api_max_connections_per_uid);
  o.allowed_uids = {0, ::getuid()};
  for (int64_t uid : c.api_allowed_uids) o.allowed_uids.push_back(static_cast<uid_t>(uid));
  o.idle_timeout_nanos = c.api_idle_timeout_nanos;
  o.frame_timeout_nanos = c.api_frame_timeout_nanos;
  o.write_queue_pause_bytes = c.api_max_write_queue / 2;
  o.write_queue_max_bytes = c.api_max_write_queue;
  o.read_buffers_max_bytes = c.api_max_read_buffers;
  return o;
}

// Asks whoever listens on path for its pid (SO_PEERCRED); 0 if nobody.
pid_t PeerPidOf(const std::string& path) {
  auto fd = sys::UnixConnect(path, false);
  if (!fd.ok()) return 0;
  auto cred = sys::GetPeerCred(fd->get());
  return cred.ok() ? cred->pid : 0;
}

}  // namespace

Result<std::unique_ptr<Agent>> Agent::Start(Config config, UniqueFd keeper_fd, bool keeper_empty) {
  std::unique_ptr<Agent> a(new Agent());
  a->config_ = std::move(config);
  a->started_mono_ = MonotonicNanos();
  a->started_wall_ = WallNanos();
  a->config_loaded_wall_ = a->started_wall_;
  a->keeper_pid_ = keeper_fd ? ::getppid() : 0;  // the keeper forked us
  Status st = a->Setup();
  if (!st.ok()) return st.error();
  if (keeper_fd) {
    st = a->AttachKeeper(std::move(keeper_fd), keeper_empty);
    if (!st.ok()) return st.error();
  }
  return a;
}

Agent::~Agent() {
  nomad_.reset();
  plugin_watcher_.reset();
  kubelet_watcher_.reset();
  plugins_.reset();
  driver_plugins_.reset();
  api_.reset();
  jobs_.reset();
  job_runner_.reset();
  tasks_.reset();
  exec_.reset();
  oom_.reset();
  cgroups_.reset();
  uids_.reset();
  if (!bound_socket_.empty()) {
    // Remove the socket only if it is still the one we bound: a newer agent
    // may have replaced it after deciding we were gone.
    struct stat st;
    if (::lstat(bound_socket_.c_str(), &st) == 0 && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
      ::unlink(bound_socket_.c_str());
    }
  }
}

Status Agent::Setup() {
  ApplyRuntimeSettings();
  ::signal(SIGPIPE, SIG_IGN);
  // Existing directories are used as they are (their mode is never
  // changed: one may be shared, like the socket's dir being the state dir's
  // parent) unless others could replace what the agent keeps there; jobs.d
  // too, whose files run commands as any user. Missing ones are created:
  // the state dir first, so its missing parents are searchable (0755)
  // whichever of the others shares them; the state dir 0711, which tasks
  // running as other users must pass through to their task dirs (nothing in
  // it can be listed); the runtime dir and the socket's dir 0700.
  OUTPOST_RETURN_IF_ERROR(CheckExistingDirs(config_));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(config_.state_dir, 0711));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(config_.runtime_dir, 0700));
  std::string socket_dir = sys::Dirname(config_.ApiSocket());
  if (socket_dir != config_.runtime_dir) OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(socket_dir, 0700));
  // Held by the keeper when there is one; checked here against the
  // configuration as this worker read it.
  auto claims = DirClaims::Take(config_, keeper_pid_);
  if (!claims.ok()) return claims.error();
  claims_ = std::move(*claims);

  auto loop = Loop::Create();
  if (!loop.ok()) return loop.error();
  loop_ = std::move(*loop);

  OUTPOST_RETURN_IF_ERROR(BindApiSocket());
  OUTPOST_RETURN_IF_ERROR(StartRegistry());
  OUTPOST_RETURN_IF_ERROR(StartTasks());
  OUTPOST_RETURN_IF_ERROR(StartPlugins());

  Loop* l = loop_.get();
  OUTPOST_RETURN_IF_ERROR(l->AddSignal(SIGTERM, [this](const signalfd_siginfo&) {
    log::Info("stopping on SIGTERM");
    Stop();
  }));
  OUTPOST_RETURN_IF_ERROR(l->AddSignal(SIGINT, [this](const signalfd_siginfo&) {
    log::Info("stopping on SIGINT");
    Stop();
  }));
  OUTPOST_RETURN_IF_ERROR(l->AddSignal(SIGHUP, [this](const signalfd_siginfo&) { Reload(); }));
  // Last: a start that fails earlier leaves the device alone.
  return config_.watchdog_device.empty() ? OkStatus() : watchdog_.Open(l, config_.watchdog_device);
}

Status Agent::BindApiSocket() {
  const std::string path = config_.ApiSocket();
  // One agent per socket. The lock (not the socket) decides: connect-probing
  // alone races when two agents start at once.
  std::string lock_path = path + ".lock";
  auto lock = sys::Open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
  if (!lock.ok()) return lock.error();
  if (sys::RetryEintr([&] { return ::flock(lock->get(), LOCK_EX | LOCK_NB); }) != 0) {
    if (errno != EWOULDBLOCK) return PathError("lock", lock_path);
    char who[32] = "";
    if (pid_t pid = PeerPidOf(path)) std::snprintf(who, sizeof who, "(pid %d) ", static_cast<int>(pid));
    return Error(Code::kAlreadyExists,
                 Format("another agent %sis already serving %s; stop it first or give this one another api_socket",
                        who, path.c_str()));
  }
  lock_fd_ = std::move(*lock);

  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Error(Code::kFailedPrecondition, Format("refusing to replace '%s': it exists and is not a socket", path.c_str()));
    }
    // We hold the lock, so whatever socket is there belongs to a dead agent.
    log::Warn("replacing stale API socket left by a previous agent", {{"socket", path}});
    if (::unlink(path.c_str()) != 0) return PathError("remove stale socket", path);
  }

  mode_t old_umask = ::umask(0077);
  auto listen = sys::UnixListen(path, 128);
  ::umask(old_umask);
  if (!listen.ok()) return listen.error();
  if (::chmod(path.c_str(), 0600) != 0 || ::lstat(path.c_str(), &st) != 0) {
    return PathError("chmod 0600", path);
  }
  bound_socket_ = path;
  socket_dev_ = st.st_dev;
  socket_ino_ = st.st_ino;

  auto server = wire::RpcServer::Create(loop_.get(), std::move(*listen), ServerOptionsFrom(config_));
  if (!server.ok()) return server.error();
  api_ = std::move(*server);
  RegisterApi(this, api_.get());
  return OkStatus();
}

Status Agent::StartTasks() {
  cgroup::Cgroups::Options co;
  co.root = config_.cgroup_root;
  cgroups_ = cgroup::Cgroups::Setup(co);
  std::string controllers;
  for (const std::string& c : cgroups_->controllers()) controllers += (controllers.empty() ? "" : " ") + c;
  if (cgroups_->available()) {
    auto oom = cgroup::OomWatcher::Create(loop_.get());
    if (oom.ok()) oom_ = std::move(*oom);
    else log::WarnIfError(oom.error(), "OOM kills will not be reported as they happen");
    log::Info("cgroup v2", {{"root", cgroups_->root()}, {"controllers", controllers}});
  } else {
    log::Warn("resource limits unavailable", {{"reason", cgroups_->reason()}});
  }

  driver::ExecDriver::Options eo;
  eo.keeper_is_parent = keeper_pid_ > 0;
  eo.keeper_pid = keeper_pid_;
  if (cgroups_->available()) {
    for (char& c : controllers) c = c == ' ' ? ',' : c;
    eo.cgroup_controllers = controllers;
    eo.cgroup_root = cgroups_->root();
  } else {
    eo.cgroup_unavailable = cgroups_->reason();
  }
  auto exec = driver::ExecDriver::Create(loop_.get(), eo);
  if (!exec.ok()) return exec.error().Wrap("exec driver");
  exec_ = std::move(*exec);
  OUTPOST_RETURN_IF_ERROR(drivers_.Add(exec_.get()));

  hooks::CatalogOptions ho;
  ho.hooks_dirs = config_.hooks_dirs;
  ho.hook_path = config_.hook_path;
  auto catalog = hooks::Catalog::Start(loop_.get(), ho);
  if (!catalog.ok()) return catalog.error().Wrap("hooks");
  hooks_ = std::move(*catalog);

  OUTPOST_RETURN_IF_ERROR(StartNetworks());
  OUTPOST_RETURN_IF_ERROR(CreateNri());

  // The event history goes on from the previous worker's (task/events.h).
  OUTPOST_RETURN_IF_ERROR(events_.Persist(loop_.get(), config_.state_dir + "/events"));
  task::TaskManager::Options o;
  o.nri = nri_.get();
  o.nri_pod = [this](const std::string& job, nri::PodSandbox* pod) { FillNriPod(job, pod); };
  o.networks = networks_.get();
  o.networks_problem = networks_problem_;
  o.hooks = hooks_.get();
  o.hook_timeout_seconds = config_.hook_timeout_nanos / 1000000000LL;
  o.poststart_failure_stops = config_.poststart_failure_stops;
  o.state_dir = config_.state_dir;
  o.runtime_dir = config_.runtime_dir;
  o.drivers = &drivers_;
  o.events = &events_;
  o.cgroups = cgroups_.get();
  o.oom = oom_.get();
  o.allow_without_limits = config_.cgroup_allow_without_limits;
  const bool first_since_boot = FirstStartSinceBoot(config_.state_dir, config_.runtime_dir);
  o.first_since_boot = first_since_boot;
  o.driver_grace_nanos = config_.plugin_grace_period_nanos;
  auto pool = proc::UidPool::Open(config_.state_dir + "/dynamic-users.json",
                                  static_cast<uint32_t>(config_.dynamic_uid_first),
                                  static_cast<uint32_t>(config_.dynamic_uid_last));
  if (pool.ok()) {
    uids_ = std::move(*pool);
    if (!uids_->warning().empty()) log::Error(uids_->warning());
  } else {
    o.dynamic_users_problem = pool.error().message();
    log::Error("dynamic users unavailable", {{"error", pool.error().message()}});
  }
  o.uids = uids_.get();
  auto tm = task::TaskManager::Create(loop_.get(), o);
  if (!tm.ok()) return tm.error().Wrap("tasks");
  tasks_ = std::move(*tm);
  tasks_->SetDevices(devices_.get());
  OUTPOST_RETURN_IF_ERROR(tasks_->Recover());
  if (devices_) {
    std::vector<std::string> live;
    for (const task::TaskView& v : tasks_->List()) live.push_back(v.config.id);
    std::sort(live.begin(), live.end());
    devices_->Retain(live);
  }
  RegisterTaskApi(tasks_.get(), cgroups_.get(), &events_, loop_.get(), api_.get());
  if (cgroups_->available() && !first_since_boot) {
    // (After a boot the cgroup tree is new: nothing can be left.)
    // Cgroups of tasks nobody knows (an agent whose state was wiped, a
    // task removed while no agent ran) are killed and removed.
    std::set<std::string> keep;
    for (const task::TaskView& v : tasks_->List()) {
      if (!v.config.cgroup.empty()) keep.insert(v.config.cgroup);
      keep.insert(cgroups_->TaskPath(v.config.job, v.config.id));
    }
    for (const std::string& p : cgroups_->CleanLeftovers(keep)) log::Info("removed a leftover cgroup", {{"path", p}});
  }

  job_runner_ = std::make_unique<JobTaskRunner>(tasks_.get(), cgroups_.get(), devices_.get());
  job::JobManager::Options jo;
  jo.state_dir = config_.state_dir;
  jo.jobs_dir = config_.jobs_dir;
  jo.max_jobs = static_cast<size_t>(config_.max_jobs);
  jo.events = &events_;
  jo.first_since_boot = first_since_boot;
  cgroup::Cgroups* cg = cgroups_.get();
  bool allow = config_.cgroup_allow_without_limits;
  jo.check_resources = [cg, allow](const cgroup::Resources& r) { return cg->Check(r, allow); };
  driver::Registry* drivers = &drivers_;
  // A driver that is not registered (yet) is no error: the task waits for
  // it (boards start plugins and submit jobs in any order), and its config
  // is checked when it starts.
  jo.check_driver = [drivers](const std::string& name, const std::string& config) -> Status {
    driver::Driver* d = drivers->Find(name);
    return d ? d->CheckConfig(config) : OkStatus();
  };
  if (net::Networks* nets = networks_.get()) {
    jo.check_network = [nets](const net::NetworkSpec& n) { return nets->Check(n); };
    jo.release_network = [nets](const std::string& job, std::function<void(Status)> done) {
      nets->Release(job, std::move(done));
    };
  } else {
    std::string why = networks_problem_;
    jo.check_network = [why](const net::NetworkSpec&) -> Status {
      return Error(Code::kFailedPrecondition, "network.mode: job networks are not available on this node: " + why);
    };
  }
  task::TaskManager* tm_raw = tasks_.get();
  jo.pod_ended = [tm_raw](const std::string& job) { tm_raw->NriPodEnded(job); };
  auto jm = job::JobManager::Create(loop_.get(), job_runner_.get(), job_runner_.get(), jo);
  if (!jm.ok()) return jm.error().Wrap("jobs");
  jobs_ = std::move(*jm);
  job::JobManager* jobs = jobs_.get();
  // Freed devices are told after the current callback (a supervisor frees
  // them from inside its own state change).
  Loop* lp = loop_.get();
  job_runner_->SetDevicesFreed([this, lp] {
    lp->Defer([this] {
      if (jobs_) jobs_->OnDevicesChanged();
    });
  });
  tasks_->SetIdResolver([jobs](const std::string& j, const std::string& t) { return jobs->TaskId(j, t); });
  tasks_->SetDriverGoneListener([jobs](const std::string& name) { jobs->OnDriverGone(name); });
  RegisterJobApi(loop_.get(), jobs, tasks_.get(), cgroups_.get(), devices_.get(), &events_, api_.get());
  // With a keeper, the exits of tasks that ended while no worker ran arrive
  // with its journal: jobs are recovered once that is replayed, or once the
  // link is attached if the keeper has nothing to replay (AttachKeeper).
  if (keeper_pid_ == 0) RecoverJobs();
  OUTPOST_RETURN_IF_ERROR(StartNri());
  TrimAfterActivity();
  return OkStatus();
}

void Agent::ApplyRuntimeSettings() {
  log::SetLevel(config_.log_level);
  Status st = log::SetFile(config_.log_file);
  if (!st.ok()) log::Error("cannot open log file; logging to stderr only", {{"error", st.error().message()}});
  for (const std::string& w : config_.warnings) log::Warn(w);
}

void Agent::Reload() {
  if (config_.path.empty()) {
    log::Info("SIGHUP: running on built-in defaults (no --config file); re-reading the jobs directory");
    if (jobs_) jobs_->RescanDir();
    if (hooks_) hooks_->Rescan();
    return;
  }
  auto next = LoadConfig(config_.path);
  if (!next.ok()) {
    for (const std::string& line : Split(next.error().message(), '\n')) log::Error(line);
    log::Error("config reload failed; keeping the running configuration", {{"config", config_.path}});
    return;
  }
  std::string restart_keys;
  if (ReloadChangesRestartOnlyKeys(config_, *next, &restart_keys)) {
    log::Warn("config keys changed that take effect only after a restart; keeping their old values",
              {{"keys", restart_keys}});
    next->state_dir = config_.state_dir;
    next->runtime_dir = config_.runtime_dir;
    next->jobs_dir = config_.jobs_dir;
    next->cgroup_root = config_.cgroup_root;
    next->dynamic_uid_first = config_.dynamic_uid_first;
    next->dynamic_uid_last = config_.dynamic_uid_last;
    next->api_socket = config_.api_socket;
    next->watchdog_device = config_.watchdog_device;
    next->hooks_dirs = config_.hooks_dirs;
    next->hook_path = config_.hook_path;
    next->hook_timeout_nanos = config_.hook_timeout_nanos;
    next->poststart_failure_stops = config_.poststart_failure_stops;
    next->network = config_.network;
  }
  config_ = std::move(*next);
  config_loaded_wall_ = WallNanos();
  ApplyRuntimeSettings();
  api_->SetOptions(ServerOptionsFrom(config_));
  if (keeper_link_) keeper_link_->SetHeartbeat(config_.heartbeat_timeout_nanos);
  if (jobs_) {
    jobs_->SetMaxJobs(static_cast<size_t>(config_.max_jobs));
    jobs_->RescanDir();
  }
  if (hooks_) hooks_->Rescan();
  log::Info("config reloaded", {{"config", config_.path}});
}

size_t Agent::api_connections() const { return api_ ? api_->connection_count() : 0; }

void Agent::Stop() {
  if (!nomad_ || !nomad_->AnyRunning()) return loop_->Stop();
  // Nomad's plugins are asked to shut down (their tasks keep running) and
  // given up to 2 s, as Nomad's client gives them.
  nomad_->Shutdown();
  int64_t until = MonotonicNanos() + 2 * kNanosPerSecond;
  std::function<void()> poll;
  auto check = std::make_shared<std::function<void()>>();
  *check = [this, until, check] {
    if (!nomad_->AnyRunning() || MonotonicNanos() >= until) {
      *check = nullptr;
      return loop_->Stop();
    }
    loop_->AddTimer(20 * kNanosPerMilli, [check] {
      if (*check) (*check)();
    });
  };
  (*check)();
}

Status Agent::Run() {
  log::Info("agent started", {{"version", OUTPOST_VERSION},
                              {"pid", std::to_string(::getpid())},
                              {"socket", config_.ApiSocket()},
                              {"config", config_.path.empty() ? "(defaults)" : config_.path}});
  // As the keeper: an idle worker keeps only the code it runs again
  // (base/code_pages.h), once nothing has woken it for 1.2 s.
  loop_->DropCodeWhenIdle(1200 * kNanosPerMilli);
  Status st = loop_->Run();
  log::Info("agent stopped");
  return st;
}

Status Agent::AttachKeeper(UniqueFd fd, bool keeper_empty) {
  // Without an exit handler the link acknowledges each exit at once.
  auto link = keeper::KeeperLink::Attach(loop_.get(), std::move(fd), nullptr, keeper_empty);
  if (!link.ok()) return link.error().Wrap("keeper socket");
  keeper_link_ = std::move(*link);
  if (tasks_) {
    // The exec driver's tasks are the keeper's children: their exits come
    // from it. By the time OnProcessExit returns the task layer has
    // persisted the exit: then the keeper may forget it.
    driver::ExecDriver* exec = exec_.get();
    keeper::KeeperLink* l = keeper_link_.get();
    l->SetExitHandler([exec, l](pid_t pid, int status, int64_t nanos) {
      exec->OnProcessExit(pid, status, nanos);
      l->Ack(pid);
    });
    task::TaskManager* tm = tasks_.get();
    tm->SetFifoHolder(
        [l](const std::string& id, const std::vector<int>& fds) {
          l->HoldFifos(keeper::proto::TaskKey(id.data(), id.size()), fds);
        },
        [l](const std::string& id) { l->ReleaseFifos(keeper::proto::TaskKey(id.data(), id.size())); });
    tm->HoldAllFifos();
    Agent* self = this;
    // Beats start once the worker is fully up: recovering many tasks and
    // jobs is busy, not hung, and must not get it killed. Last: with an
    // empty keeper this runs at once, and the tasks the jobs start need the
    // exit handler and the FIFO holder above.
    l->SetHeartbeat(config_.heartbeat_timeout_nanos);
    l->SetOnJournalReplayed([exec, self, l] {
      exec->JournalReplayed();
      self->RecoverJobs();
      l->StartHeartbeat();
    });
  }
  return OkStatus();
}

}  // namespace outpost::agent
