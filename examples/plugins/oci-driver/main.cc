// outpost-oci-driver: the `oci` task driver. Runs each task as a container
// from a root file system through an OCI runtime (crun or runc): writes the
// bundle (config.json from the task's `config` and outpost's spec, with the
// hooks, NRI mounts and devices, cgroup and network namespace), then
// `create` + `start` (or `run --detach`, --run-detached). The container's
// init is the driver's child (it is a subreaper), so its exit status is
// exact (with `run --detach`, unless it ends before the runtime does); after
// a restart of the driver, tasks are recovered from the runtime's state.
// Built only on the public plugin library (include/outpost/) and picojson.
// docs/oci-driver.md.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "cdi.h"
#include "outpost/driver.h"
#include "probe.h"
#include "runtime.h"
#include "spec.h"

using namespace outpost::plugin_sdk;

namespace oci_driver {
namespace {

const int64_t kSecond = 1000000000;
// The runtime is probed again when the agent asks for the fingerprint
// (every 30 s) and the last probe is at least this old.
const int64_t kReprobeAfter = 10 * kSecond;

int64_t MonotonicNow() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * kSecond + ts.tv_nsec;
}

struct Settings {
  std::string name = "oci";
  std::string plugins_dir;
  std::string runtime;  // "" = crun on PATH, else runc
  std::string runtime_root;
  std::string state_dir = "/run/outpost-oci";
  bool no_pivot = false;  // boards running from an initramfs: pivot_root(2) refuses its root
  // false: `create` + `start`, the two commands of the OCI runtime
  // command-line spec: the init waits for `start` in the runtime's exec
  // fifo, so it is our child before it can run, and its exit status is
  // always ours. true (--run-detached): `run --detach`, one exec of the
  // runtime fewer (a third of a start), but an init that exits before the
  // runtime does is reaped by the runtime: its status is lost.
  bool run_detached = false;
  // CDI spec dirs, lowest priority first ("" = CDI's defaults).
  std::string cdi_spec_dirs;
};

struct Container {
  std::shared_ptr<Runtime> rt;
  std::string bundle;
  std::string cgroup;  // outpost's cgroup dir ("" = none)
  bool no_cgroups = false;
  int pid = 0;
  uint64_t oom_base = 0;  // memory.events oom_kill at the start
  bool exited = false;
  std::vector<std::function<void(Answer)>> stopping;
};

uint64_t OomKills(const std::string& cgroup) {
  if (cgroup.empty()) return 0;
  std::string text = ReadSmallFile(cgroup + "/memory.events", 4096);
  size_t at = text.find("oom_kill ");
  return at == std::string::npos ? 0 : std::strtoull(text.c_str() + at + 9, nullptr, 10);
}

class OciDriver : public TaskDriver {
 public:
  // Probes the runtime before the driver registers (blocking: no task can
  // start yet).
  explicit OciDriver(Settings s) : settings_(std::move(s)) {
    std::string name = settings_.runtime;
    if (name.empty()) name = !FindExecutable("crun").empty() || FindExecutable("runc").empty() ? "crun" : "runc";
    default_ = RuntimeFor(name);
    if (default_->path().empty()) {
      probe_.unusable = default_->Probe(&probe_.version);
    } else {
      probe_ = ProbeRuntime(*default_, ProbeDir(), settings_.no_pivot);
    }
    probed_at_ = MonotonicNow();
  }

  std::vector<std::string> CdiDirs() const {
    if (settings_.cdi_spec_dirs.empty()) return cdi::DefaultSpecDirs();
    std::vector<std::string> dirs;
    size_t start = 0;
    while (start <= settings_.cdi_spec_dirs.size()) {
      size_t colon = settings_.cdi_spec_dirs.find(':', start);
      if (colon == std::string::npos) colon = settings_.cdi_spec_dirs.size();
      if (colon > start) dirs.push_back(settings_.cdi_spec_dirs.substr(start, colon - start));
      start = colon + 1;
    }
    return dirs;
  }

  Capabilities GetCapabilities() override {
    Capabilities c;
    c.send_signals = true;
    c.exec = true;
    c.fs_isolation = "image";
    c.mounts = true;
    c.devices = true;
    c.oom_score_adj = true;
    c.oci_runtime = true;
    c.network_isolation = {"host", "group", "none"};
    return c;
  }

  // The last probe's result; each ask starts the next probe (in a child
  // process) when that one is old enough, so a runtime installed, fixed or
  // broken later shows at a later ask, without a restart of the driver.
  Fingerprint GetFingerprint() override {
    Reprobe();
    Fingerprint f;
    f.attributes["driver.oci.runtime"] = default_->path().empty() ? default_->name() : default_->path();
    if (!probe_.unusable.empty()) {
      f.health = 0;
      f.description = probe_.unusable;
      return f;
    }
    f.attributes["driver.oci.version"] = probe_.version;
    if (!probe_.create_error.empty()) {
      f.health = 1;
      const std::string& name = default_->name();
      f.description = name.substr(name.rfind('/') + 1) + " cannot create containers here: " + probe_.create_error;
      f.attributes["driver.oci.probe"] = "failed";
      return f;
    }
    f.health = 2;
    f.description = "Healthy";
    f.attributes["driver.oci.probe"] = "ok";
    return f;
  }

  std::vector<ConfigField> ConfigSchema() override { return Schema(); }

  Answer StartTask(const TaskConfig& c, TaskHandle* handle) override {
    TaskOptions opts;
    std::vector<std::string> problems;
    if (!ParseOptions(c.config_json, &opts, &problems)) return Answer::Fail(Code::kInvalidArgument, JoinLines(problems));
    if (c.command.empty() && !opts.has_args) {
      return Answer::Fail(Code::kInvalidArgument, "the task has no command, and its config no args: nothing to run");
    }
    std::shared_ptr<Runtime> rt = opts.runtime.empty() ? default_ : RuntimeFor(opts.runtime);
    if (rt->path().empty()) {
      return Answer::Fail(Code::kFailedPrecondition,
                          std::string(opts.runtime.empty() ? "driver oci" : "config.runtime") + ": OCI runtime " +
                              rt->name() + " not found" + (rt->name()[0] == '/' ? "" : " on PATH"));
    }
    picojson::value base;
    if (!c.oci_spec.empty()) {
      std::string err = ParseJson(&base, c.oci_spec);
      if (!err.empty()) return Answer::Fail(Code::kInvalidArgument, "TaskConfig.oci_spec: " + err);
    }
    std::string bundle = settings_.state_dir + "/bundles/" + c.id;
    if (!MkdirAll(bundle, 0700)) return Fail("cannot create bundle " + bundle);
    picojson::value spec = BuildSpec(c, opts, base);
    // CDI devices named in the spec's cdi.k8s.io/ annotations (a device
    // plugin's cdi_devices, put there by outpost): resolved from the spec
    // dirs as they are now, so a spec installed a moment ago counts.
    std::vector<std::string> cdi_names;
    std::string cdi_error = cdi::AnnotatedDevices(spec, &cdi_names);
    if (cdi_error.empty() && !cdi_names.empty()) {
      cdi::Registry registry;
      registry.Load(CdiDirs());
      cdi_error = registry.Inject(cdi_names, &spec);
    }
    if (!cdi_error.empty()) {
      RemoveBundle(bundle);
      return Answer::Fail(Code::kFailedPrecondition, cdi_error);
    }
    if (!WriteFile(bundle + "/config.json", spec.serialize(true), 0600)) {
      RemoveBundle(bundle);
      return Fail("cannot write " + bundle + "/config.json");
    }
    auto ct = std::make_shared<Container>();
    ct->rt = rt;
    ct->bundle = bundle;
    ct->cgroup = c.cgroup;
    ct->no_cgroups = c.cgroup.empty();
    if (!WriteFile(bundle + "/" + kBundleRuntimeFile, RuntimeJson(*rt, ct->no_cgroups).serialize(), 0600)) {
      RemoveBundle(bundle);
      return Fail("cannot write " + bundle + "/" + kBundleRuntimeFile);
    }
    // A container of this id left by a crashed start: gone before ours.
    // crun and runc keep a container's state in <root>/<id>: without it
    // there is nothing to delete, and no exec of the runtime (a fork+exec
    // of crun, about a fifth of a start) is spent on every start.
    struct stat left;
    if (::lstat((rt->root() + "/" + c.id).c_str(), &left) == 0) {
      (void)rt->Run({"delete", "--force", c.id}, ct->no_cgroups, "");
    }
    std::string log = bundle + "/runtime.log";
    ::unlink(log.c_str());
    int out = ::open(c.stdout_path.empty() ? "/dev/null" : c.stdout_path.c_str(), O_WRONLY | O_CLOEXEC);
    int err = ::open(c.stderr_path.empty() ? "/dev/null" : c.stderr_path.c_str(), O_WRONLY | O_CLOEXEC);
    if (out < 0 || err < 0) {
      if (out >= 0) ::close(out);
      if (err >= 0) ::close(err);
      RemoveBundle(bundle);
      return Fail("cannot open the task's output: " + std::string(std::strerror(errno)));
    }
    ct->oom_base = OomKills(c.cgroup);
    // `create` + `start`, or one exec of the runtime (`run --detach`).
    std::vector<std::string> create = settings_.run_detached ? std::vector<std::string>{"run", "--detach"}
                                                             : std::vector<std::string>{"create"};
    if (settings_.no_pivot) create.push_back("--no-pivot");
    create.insert(create.end(), {"--bundle", bundle, "--pid-file", bundle + "/pid", c.id});
    const char* step = settings_.run_detached ? " run: " : " create: ";
    RunResult r = rt->Run(create, ct->no_cgroups, log, out, err);
    ::close(out);
    ::close(err);
    // The pid is read before any reaping: the init may have exited already,
    // and is then a zombie child of ours that only WaitTask may reap.
    if (r.ok()) ct->pid = std::atoi(ReadSmallFile(bundle + "/pid", 64).c_str());
    if (r.ok() && ct->pid > 0) containers_[c.id] = ct;
    if (r.ok() && ct->pid > 0 && !settings_.run_detached) {
      r = rt->Run({"start", c.id}, ct->no_cgroups, log);
      step = " start: ";
    }
    ReapStrays();
    if (!r.ok() || ct->pid <= 0) {
      (void)rt->Run({"delete", "--force", c.id}, ct->no_cgroups, "");
      containers_.erase(c.id);
      if (ct->pid > 0) ::waitpid(ct->pid, nullptr, WNOHANG);
      RemoveBundle(bundle);
      return Answer::Fail(Code::kFailedPrecondition,
                          rt->name() + step + (r.ok() ? "no pid in " + bundle + "/pid" : r.error));
    }
    handle->pid = ct->pid;  // our child (we are a subreaper): the library reports its exit
    picojson::value state = RuntimeJson(*rt, ct->no_cgroups);
    picojson::object& st = state.get<picojson::object>();
    st["bundle"] = picojson::value(bundle);
    st["oom_base"] = picojson::value(static_cast<int64_t>(ct->oom_base));
    handle->driver_state = state.serialize();
    EmitEvent({c.id, 0, "started", rt->name() + " container, pid " + std::to_string(ct->pid), {}});
    return Answer::Ok();
  }

  void TaskExited(const std::string& id, ExitResult* result) override { Finish(id, result); }

  Answer RecoverTask(const TaskHandle& h) override {
    const std::string& id = h.config.id;
    picojson::value st;
    if (!ParseJson(&st, h.driver_state).empty() || !st.is<picojson::object>() || !st.get("runtime").is<std::string>() ||
        !st.get("root").is<std::string>() || !st.get("bundle").is<std::string>()) {
      return Answer::Fail(Code::kInvalidArgument, "task " + id + ": driver_state is not the oci driver's");
    }
    auto ct = std::make_shared<Container>();
    ct->rt = std::make_shared<Runtime>(st.get("runtime").get<std::string>(), st.get("root").get<std::string>());
    ct->bundle = st.get("bundle").get<std::string>();
    ct->cgroup = h.config.cgroup;
    ct->no_cgroups = st.get("no_cgroups").is<bool>() && st.get("no_cgroups").get<bool>();
    ct->oom_base = st.get("oom_base").is<int64_t>() ? static_cast<uint64_t>(st.get("oom_base").get<int64_t>()) : 0;
    ct->pid = h.pid;
    containers_[id] = ct;
    RunResult r = ct->rt->Run({"state", id}, ct->no_cgroups, "", -1, -1, 64 << 10);
    std::string status;
    int64_t pid = 0;
    if (r.ok()) ParseState(r.output, &status, &pid);
    std::string gone;
    if (status == "running" || status == "paused") {
      if (pid != h.pid) gone = "the runtime reports pid " + std::to_string(pid) + ", not " + std::to_string(h.pid);
    } else if (status == "created") {
      (void)ct->rt->Run({"delete", "--force", id}, ct->no_cgroups, "");
      gone = "the container was created but never started";
    } else {
      gone = status.empty() ? "the runtime does not know the container (" + r.error + ")" : "the container is " + status;
    }
    if (gone.empty()) {
      // Not our child any more: its exit status is lost with the earlier
      // driver process; that it ended (and OOM) is still seen: by pidfd,
      // else (Linux < 5.3) by looking once a second.
      int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
      if (fd >= 0) {
        ::close(fd);
        if (plugin()->WatchChild(static_cast<int>(pid), [this, id](int) { RecoveredEnded(id); })) return Answer::Ok();
      }
      PollRecovered(id, static_cast<int>(pid), StartTime(static_cast<int>(pid)));
      return Answer::Ok();
    }
    // Tracked as ended (the library adds the task when this returns).
    plugin()->After(0, [this, id, gone] {
      ExitResult e;
      e.exit_code = -1;
      e.error = "exit status unknown: " + gone;
      Finish(id, &e);
      ReportExit(id, e);
    });
    return Answer::Ok();
  }

  void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                std::function<void(Answer)> done) override {
    auto it = containers_.find(id);
    if (it == containers_.end() || it->second->exited) return done(Answer::Ok());
    std::shared_ptr<Container> ct = it->second;
    ct->stopping.push_back(std::move(done));
    Kill(id, *ct, SignalNumber(signal.empty() ? "SIGTERM" : signal));
    plugin()->After(timeout_nanos > 0 ? timeout_nanos : 0, [this, id, ct] {
      if (!ct->exited) Kill(id, *ct, SIGKILL);
    });
  }

  Answer SignalTask(const std::string& id, const std::string& signal) override {
    int sig = SignalNumber(signal);
    if (!sig) return Answer::Fail(Code::kInvalidArgument, "unknown signal \"" + signal + "\"");
    auto it = containers_.find(id);
    if (it == containers_.end()) return Answer::Fail(Code::kNotFound, "task not found for given id");
    if (it->second->exited) return Answer::Fail(Code::kFailedPrecondition, "task " + id + " is not running");
    if (!Kill(id, *it->second, sig)) return Fail(it->second->rt->name() + " kill failed");
    return Answer::Ok();
  }

  // The tasks tracked, and every bundle in the state dir: after a restart
  // of the driver (or of the agent) the agent destroys those no task record
  // accounts for, so no container outlives its task.
  std::vector<std::string> ListTasks() override {
    std::vector<std::string> ids = DefaultListTasks();
    std::set<std::string> seen(ids.begin(), ids.end());
    DIR* d = ::opendir((settings_.state_dir + "/bundles").c_str());
    if (d == nullptr) return ids;
    while (const dirent* e = ::readdir(d)) {
      std::string id = e->d_name;
      if (id == "." || id == ".." || e->d_type != DT_DIR || !seen.insert(id).second) continue;
      ids.push_back(id);
    }
    ::closedir(d);
    return ids;
  }

  Answer DestroyTask(const std::string& id, bool force) override {
    auto it = containers_.find(id);
    if (it == containers_.end()) return DestroyUntracked(id, force);
    std::shared_ptr<Container> ct = it->second;
    if (!ct->exited && !force) return Answer::Fail(Code::kFailedPrecondition, "cannot destroy running task");
    // delete runs the poststop hooks; --force kills a running container first.
    RunResult r = ct->rt->Run({"delete", "--force", id}, ct->no_cgroups, "");
    ReapStrays();
    if (!r.ok() && r.error.find("does not exist") == std::string::npos &&
        r.error.find("not exist") == std::string::npos) {
      return Fail(ct->rt->name() + " delete: " + r.error);
    }
    RemoveBundle(ct->bundle);
    containers_.erase(it);
    return DefaultDestroyTask(id, true);
  }

  Answer InspectTask(const std::string& id, TaskStatus* status) override {
    Answer a = DefaultInspectTask(id, status);
    auto it = containers_.find(id);
    if (a.ok && it != containers_.end()) {
      status->attributes["runtime"] = it->second->rt->path();
      status->attributes["bundle"] = it->second->bundle;
    }
    return a;
  }

  void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                std::function<void(Answer, ExecResult)> done) override {
    auto it = containers_.find(id);
    if (it == containers_.end()) return done(Answer::Fail(Code::kNotFound, "task not found for given id"), {});
    std::shared_ptr<Container> ct = it->second;
    if (ct->exited) return done(Answer::Fail(Code::kFailedPrecondition, "task " + id + " is not running"), {});
    if (cmd.empty()) return done(Answer::Fail(Code::kInvalidArgument, "no command to exec"), {});
    std::string path = ct->bundle + "/exec.out";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return done(Fail("cannot create " + path), {});
    ::unlink(path.c_str());
    std::vector<std::string> command = {"exec", id};
    command.insert(command.end(), cmd.begin(), cmd.end());
    std::string error;
    pid_t pid = ct->rt->Spawn(command, ct->no_cgroups, fd, &error);
    if (pid < 0) {
      ::close(fd);
      return done(Fail(error), {});
    }
    execs_.insert(pid);
    auto finished = std::make_shared<bool>(false);
    plugin()->WatchChild(pid, [this, pid, fd, done, finished](int status) {
      *finished = true;
      execs_.erase(pid);
      ExecResult r;
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      char buf[4097];
      ssize_t n = ::pread(fd, buf, sizeof buf, 0);
      ::close(fd);
      if (n > 0) r.output.assign(buf, static_cast<size_t>(std::min<ssize_t>(n, 4096)));
      r.truncated = n > 4096;
      done(Answer::Ok(), r);
    });
    if (timeout_nanos > 0) {
      plugin()->After(timeout_nanos, [pid, finished] {
        if (!*finished) ::kill(pid, SIGKILL);
      });
    }
  }

 private:
  static Answer Fail(const std::string& m) { return Answer::Fail(Code::kInternal, m); }

  std::string ProbeDir() const { return settings_.state_dir + "/probe"; }

  static picojson::value RuntimeJson(const Runtime& rt, bool no_cgroups) {
    picojson::object o;
    o["runtime"] = picojson::value(rt.path());
    o["root"] = picojson::value(rt.root());
    o["no_cgroups"] = picojson::value(no_cgroups);
    return picojson::value(o);
  }

  // A bundle (and its container) of a task this process does not track:
  // deleted with the runtime it was created with (its runtime.json; the
  // default runtime for a bundle without one), then the bundle goes.
  Answer DestroyUntracked(const std::string& id, bool force) {
    std::string bundle = settings_.state_dir + "/bundles/" + id;
    struct stat sb;
    if (id.empty() || id.find('/') != std::string::npos || id[0] == '.' || ::lstat(bundle.c_str(), &sb) != 0 ||
        !S_ISDIR(sb.st_mode)) {
      return DefaultDestroyTask(id, force);
    }
    std::shared_ptr<Runtime> rt = default_;
    bool no_cgroups = false;
    picojson::value st;
    std::string text = ReadSmallFile(bundle + "/" + kBundleRuntimeFile, 64 << 10);
    if (!text.empty() && ParseJson(&st, text).empty() && st.is<picojson::object>() &&
        st.get("runtime").is<std::string>() && st.get("root").is<std::string>()) {
      rt = std::make_shared<Runtime>(st.get("runtime").get<std::string>(), st.get("root").get<std::string>());
      no_cgroups = st.get("no_cgroups").is<bool>() && st.get("no_cgroups").get<bool>();
    }
    if (::lstat((rt->root() + "/" + id).c_str(), &sb) == 0) {
      if (rt->path().empty()) return Fail("bundle " + bundle + ": OCI runtime " + rt->name() + " not found");
      RunResult r = rt->Run({"delete", "--force", id}, no_cgroups, "");
      ReapStrays();
      if (!r.ok() && r.error.find("not exist") == std::string::npos) return Fail(rt->name() + " delete: " + r.error);
    }
    RemoveBundle(bundle);
    EmitEvent({id, 0, "destroyed", "container and bundle " + bundle + " removed", {}});
    return DefaultDestroyTask(id, true);
  }

  // The next probe, in `outpost-oci-driver --probe` (the driver's own
  // binary): the driver's loop, and with it every task start, never waits
  // for the runtime's runs. The result arrives with the child's exit.
  void Reprobe() {
    if (probe_pid_ > 0 || MonotonicNow() - probed_at_ < kReprobeAfter) return;
    default_ = RuntimeFor(default_->name());  // installed or moved meanwhile
    if (default_->path().empty()) {
      probe_ = ProbeResult();
      probe_.unusable = default_->Probe(&probe_.version);  // a PATH lookup: nothing to wait for
      probed_at_ = MonotonicNow();
      return;
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    std::vector<std::string> args = {"/proc/self/exe", "--probe", "--runtime", default_->path(), "--dir", ProbeDir()};
    if (settings_.no_pivot) args.push_back("--no-pivot");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    if (pid < 0 || !plugin()->WatchChild(pid, [this, fd = fds[0]](int) {
          // The child has exited: its few lines are all in the pipe.
          std::string text;
          char buf[4096];
          ssize_t n;
          while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
          ::close(fd);
          probe_ = ParseProbeOutput(text);
          probe_pid_ = 0;
          probed_at_ = MonotonicNow();
        })) {
      ::close(fds[0]);
      if (pid > 0) ::waitpid(pid, nullptr, 0);
      return;
    }
    probe_pid_ = pid;
  }

  std::shared_ptr<Runtime> RuntimeFor(const std::string& name) {
    std::string root = settings_.runtime_root;
    if (root.empty()) {
      size_t slash = name.rfind('/');
      root = settings_.state_dir + "/" + (slash == std::string::npos ? name : name.substr(slash + 1));
    }
    return std::make_shared<Runtime>(name, root);
  }

  // The runtime's kill; the init's pid directly when the runtime cannot
  // (a container it already counts as stopped, say).
  bool Kill(const std::string& id, const Container& ct, int sig) {
    RunResult r = ct.rt->Run({"kill", id, std::to_string(sig)}, ct.no_cgroups, "");
    ReapStrays();
    return r.ok() || (ct.pid > 0 && ::kill(ct.pid, sig) == 0);
  }

  void RecoveredEnded(const std::string& id) {
    ExitResult e;
    e.exit_code = -1;
    e.error = "exit status unknown: the container's init was recovered after a driver restart";
    Finish(id, &e);
    ReportExit(id, e);
  }

  // Field 22 of /proc/PID/stat (the start time): tells a pid reused by
  // another process from the container's init.
  static std::string StartTime(int pid) {
    std::string stat = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat", 4096);
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return "";
    size_t at = paren + 2;
    for (int field = 3; field < 22 && at != std::string::npos; ++field) {
      at = stat.find(' ', at);
      if (at != std::string::npos) ++at;
    }
    return at == std::string::npos ? "" : stat.substr(at, stat.find(' ', at) - at);
  }

  void PollRecovered(const std::string& id, int pid, const std::string& started) {
    plugin()->After(kSecond, [this, id, pid, started] {
      auto it = containers_.find(id);
      if (it == containers_.end() || it->second->exited) return;
      std::string now = StartTime(pid);
      bool zombie = ReadSmallFile("/proc/" + std::to_string(pid) + "/stat", 4096).find(") Z ") != std::string::npos;
      if (now.empty() || now != started || zombie) return RecoveredEnded(id);
      PollRecovered(id, pid, started);
    });
  }

  // The container ended: OOM from its cgroup, and StopTask calls answered.
  void Finish(const std::string& id, ExitResult* result) {
    auto it = containers_.find(id);
    if (it == containers_.end()) return;
    std::shared_ptr<Container> ct = it->second;
    ct->exited = true;
    if (OomKills(ct->cgroup) > ct->oom_base) result->oom_killed = true;
    auto stopping = std::move(ct->stopping);
    for (auto& done : stopping) done(Answer::Ok());
  }

  // The runtime's helpers that outlive it become our children (we are a
  // subreaper): reap all but containers' inits and execs in flight.
  void ReapStrays() {
    std::string kids = ReadSmallFile("/proc/self/task/" + std::to_string(::getpid()) + "/children", 64 << 10);
    std::set<int> keep(execs_.begin(), execs_.end());
    for (const auto& [id, ct] : containers_) keep.insert(ct->pid);
    if (probe_pid_ > 0) keep.insert(probe_pid_);
    size_t pos = 0;
    while (pos < kids.size()) {
      int pid = std::atoi(kids.c_str() + pos);
      size_t sp = kids.find(' ', pos);
      pos = sp == std::string::npos ? kids.size() : sp + 1;
      if (pid > 0 && !keep.count(pid)) ::waitpid(pid, nullptr, WNOHANG);
    }
  }

  Settings settings_;
  std::shared_ptr<Runtime> default_;
  ProbeResult probe_;
  int64_t probed_at_ = 0;
  pid_t probe_pid_ = 0;  // the probe running now (0: none)
  std::map<std::string, std::shared_ptr<Container>> containers_;
  std::set<int> execs_;
};

const char kUsage[] =
    "usage: outpost-oci-driver [--name NAME] [--plugins-dir DIR] [--runtime crun|runc|PATH]\n"
    "                          [--runtime-root DIR] [--state-dir DIR] [--no-pivot] [--run-detached]\n"
    "                          [--cdi-spec-dirs DIR[:DIR...]]\n"
    "Registers with the outpost agent as task driver NAME (default oci). docs/oci-driver.md\n";

}  // namespace
}  // namespace oci_driver

int main(int argc, char** argv) {
  // The driver's own probe process (Reprobe), not a user's command.
  if (argc > 1 && std::string(argv[1]) == "--probe") return oci_driver::ProbeMain(argc, argv);
  oci_driver::Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string* target = a == "--name"           ? &s.name
                          : a == "--plugins-dir"  ? &s.plugins_dir
                          : a == "--runtime"      ? &s.runtime
                          : a == "--runtime-root" ? &s.runtime_root
                          : a == "--state-dir"    ? &s.state_dir
                          : a == "--cdi-spec-dirs" ? &s.cdi_spec_dirs
                                                  : nullptr;
    if (a == "--no-pivot") {
      s.no_pivot = true;
      continue;
    }
    if (a == "--run-detached") {
      s.run_detached = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(oci_driver::kUsage, stdout);
      return 0;
    }
    if (!target || i + 1 >= argc) {
      std::fprintf(stderr, "outpost-oci-driver: %s: %s\n%s", a.c_str(),
                   target ? "needs a value" : "unknown option", oci_driver::kUsage);
      return 2;
    }
    *target = argv[++i];
  }
  if (s.state_dir.empty() || s.state_dir[0] != '/') {
    std::fprintf(stderr, "outpost-oci-driver: --state-dir must be an absolute path\n");
    return 2;
  }
  // Containers' inits become our children when the runtime exits after
  // `create` (or `run --detach`): their exit status is then ours to read.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) std::perror("outpost-oci-driver: PR_SET_CHILD_SUBREAPER");
  Options options;
  options.name = s.name;
  options.plugins_dir = s.plugins_dir;
  oci_driver::OciDriver driver(s);
  return RunTaskDriver(options, driver);
}
