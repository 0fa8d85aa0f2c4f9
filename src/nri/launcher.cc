#include "nri/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "nri/adaptation.h"
#include "nri/plugin.h"
#include "proc/exit_status.h"
#include "proc/spawn.h"

namespace outpost::nri {

struct Launcher::Proc {
  std::string id;  // "NN-name"
  std::string index;
  std::string name;
  std::string path;
  pid_t pid = 0;
  LoopFd stderr_pipe;
  std::string stderr_partial;
  int64_t backoff_ms = 0;
  Loop::TimerId restart_timer = 0;
  uint64_t launches = 0;
  std::string last_exit;
};

Launcher::Launcher(Adaptation* owner) : owner_(owner) {}

Launcher::~Launcher() {
  *alive_ = false;
  Stop();
}

void Launcher::Start() {
  const std::string& dir = owner_->config_.plugin_dir;
  auto names = sys::ListDir(dir);
  if (!names.ok()) {
    if (names.error().sys_errno() != ENOENT) {
      problems_.push_back("plugin dir " + dir + ": " + names.error().message());
      log::Warn("nri: cannot read the plugin dir", {{"dir", dir}, {"error", names.error().message()}});
    }
    return;
  }
  // What is launched from here runs as the agent (root): a dir or file
  // others may write is refused, as for the driver plugins' dir.
  auto unsafe = [](const struct stat& st) {
    return ::geteuid() == 0 && (st.st_uid != 0 || (st.st_mode & 022) != 0);
  };
  struct stat dst;
  if (::stat(dir.c_str(), &dst) == 0 && unsafe(dst)) {
    std::string why = Format("plugin dir %s may be written by others (mode %04o, owner %u): nothing launched from it",
                             dir.c_str(), static_cast<unsigned>(dst.st_mode & 07777), static_cast<unsigned>(dst.st_uid));
    problems_.push_back(why);
    log::Error("nri: " + why);
    return;
  }
  std::vector<std::string> sorted = *names;
  std::sort(sorted.begin(), sorted.end());
  for (const std::string& file : sorted) {
    const std::string path = dir + "/" + file;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode) || (st.st_mode & 0111) == 0) continue;
    if (unsafe(st)) {
      problems_.push_back(Format("%s may be written by others (mode %04o, owner %u) (not launched)", path.c_str(),
                                 static_cast<unsigned>(st.st_mode & 07777), static_cast<unsigned>(st.st_uid)));
      log::Error("nri: plugin not launched: writable by others", {{"path", path}});
      continue;
    }
    auto p = std::make_unique<Proc>();
    Status named = ParsePluginFileName(file, &p->index, &p->name);
    if (!named.ok()) {
      // Upstream refuses to start the runtime here; one bad file should not
      // take every other plugin (and the node's tasks) with it.
      problems_.push_back(path + ": " + named.error().message() + " (not launched)");
      log::Error("nri: plugin not launched", {{"path", path}, {"error", named.error().message()}});
      continue;
    }
    p->id = file;
    p->path = path;
    p->backoff_ms = owner_->config_.restart_initial_ms;
    Proc* raw = p.get();
    procs_[file] = std::move(p);
    Launch(raw);
  }
}

void Launcher::Stop() {
  stopping_ = true;
  for (auto& entry : procs_) {
    Proc* p = entry.second.get();
    if (p->restart_timer) owner_->loop_->CancelTimer(p->restart_timer);
    p->restart_timer = 0;
    if (p->pid > 0) {
      ::kill(p->pid, SIGKILL);
      owner_->loop_->UnwatchChild(p->pid);
      // Reaped here: nothing will watch it any more.
      int status;
      (void)sys::RetryEintr([&] { return ::waitpid(p->pid, &status, 0); });
      p->pid = 0;
    }
    p->stderr_pipe.Reset();
  }
}

void Launcher::Launch(Proc* p) {
  p->restart_timer = 0;
  if (stopping_) return;
  std::string config;
  const std::string& conf_dir = owner_->config_.plugin_config_dir;
  if (!conf_dir.empty()) {
    for (const std::string& f : {conf_dir + "/" + p->id + ".conf", conf_dir + "/" + p->name + ".conf"}) {
      auto text = sys::ReadFile(f, 1 << 20);
      if (text.ok()) {
        config = std::move(*text);
        break;
      }
      if (text.error().sys_errno() != ENOENT) {
        log::Warn("nri: cannot read plugin config", {{"plugin", p->id}, {"path", f}, {"error", text.error().message()}});
      }
    }
  }
  auto fail = [&](const std::string& why) {
    p->last_exit = "cannot launch: " + why;
    log::Error("nri: cannot launch plugin", {{"plugin", p->id}, {"error", why}});
    OnExit(p, -1);
  };
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return fail(std::strerror(errno));
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int errpipe[2];
  if (::pipe2(errpipe, O_CLOEXEC | O_NONBLOCK) != 0) return fail(std::strerror(errno));
  UniqueFd err_r(errpipe[0]), err_w(errpipe[1]);
  // The write end blocks like any stderr.
  (void)sys::SetNonBlocking(err_w.get(), false);

  proc::SpawnRequest req;
  req.path = p->path;
  req.argv = {p->path};
  req.env = {"NRI_PLUGIN_NAME=" + p->name, "NRI_PLUGIN_IDX=" + p->index, "NRI_PLUGIN_SOCKET=3"};
  req.stderr_fd = err_w.get();
  const int sock = theirs.get();
  // fd 3 in the plugin: everything else is close-on-exec by then; dup2
  // clears the flag on the copy (and on fd 3 itself when it already is).
  req.pre_exec = [sock]() -> int {
    if (sock == 3) return ::fcntl(3, F_SETFD, 0) == 0 ? 0 : errno;
    return ::dup2(sock, 3) == 3 ? 0 : errno;
  };
  auto spawned = proc::Spawn(req);
  if (!spawned.ok()) return fail(spawned.error().message());
  if (spawned->exec_report) {
    // Blocking read: EOF at exec, which comes at once (the step is a dup2).
    Status st = proc::ReadExecReport(spawned->exec_report.get(), p->path, "");
    if (!st.ok()) {
      (void)sys::RetryEintr([&] {
        int status;
        return ::waitpid(spawned->pid, &status, 0);
      });
      return fail(st.error().message());
    }
  }
  theirs.Reset();
  err_w.Reset();
  p->pid = spawned->pid;
  ++p->launches;
  std::weak_ptr<bool> alive = alive_;
  Status watched = owner_->loop_->WatchChild(p->pid, [this, alive, p](pid_t, int status) {
    if (alive.lock()) OnExit(p, status);
  });
  if (!watched.ok()) log::Warn("nri: cannot watch plugin", {{"plugin", p->id}, {"error", watched.error().message()}});
  auto pipe = LoopFd::Watch(owner_->loop_, std::move(err_r), EPOLLIN, [this, alive, p](uint32_t) {
    if (alive.lock()) OnStderr(p);
  });
  if (pipe.ok()) p->stderr_pipe = std::move(*pipe);
  log::Info("nri: launched plugin", {{"plugin", p->id}, {"pid", std::to_string(p->pid)}});
  auto conn = PluginConn::Create(owner_, owner_->next_plugin_++, std::move(ours), true, p->index, p->name);
  if (!conn.ok()) {
    log::Error("nri: cannot talk to launched plugin", {{"plugin", p->id}, {"error", conn.error().message()}});
    ::kill(p->pid, SIGKILL);
    return;
  }
  (*conn)->config = config;
  // SO_PEERCRED of a socketpair names its creator, the agent: the plugin's
  // pid is the one it was spawned with.
  (*conn)->peer_pid = p->pid;
  PluginConn* raw = conn->get();
  uint64_t id = raw->id;
  Adaptation* owner = owner_;
  raw->registration_timer =
      owner_->loop_->AddTimer(owner_->config_.registration_timeout_ms * 1000000, [owner, alive, id] {
        if (!alive.lock()) return;
        for (auto& q : owner->plugins_) {
          if (q->id != id) continue;
          q->registration_timer = 0;
          if (q->state == PluginState::kRegistering) q->Close("plugin registration timed out");
        }
      });
  owner_->plugins_.push_back(std::move(*conn));
  owner_->TakeOver(raw);  // its previous launch's entry, with the counters
}

void Launcher::OnStderr(Proc* p) {
  char buf[4096];
  for (;;) {
    ssize_t n = sys::Read(p->stderr_pipe.get(), buf, sizeof buf);
    if (n > 0) {
      p->stderr_partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = p->stderr_partial.find('\n')) != std::string::npos) {
        log::Info("nri plugin: " + p->stderr_partial.substr(0, nl), {{"plugin", p->id}});
        p->stderr_partial.erase(0, nl + 1);
      }
      if (p->stderr_partial.size() > 4096) {
        log::Info("nri plugin: " + p->stderr_partial, {{"plugin", p->id}});
        p->stderr_partial.clear();
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (!p->stderr_partial.empty()) log::Info("nri plugin: " + p->stderr_partial, {{"plugin", p->id}});
    p->stderr_partial.clear();
    p->stderr_pipe.Reset();
    return;
  }
}

void Launcher::OnExit(Proc* p, int wait_status) {
  if (wait_status != -1) {
    p->pid = 0;
    p->last_exit = proc::DescribeExitStatus(proc::DecodeWaitStatus(wait_status));
    if (p->stderr_pipe) OnStderr(p);
  }
  // Its connection, if still open, goes with it.
  for (auto& q : owner_->plugins_) {
    if (q->launched && !q->closed() && q->index + "-" + q->name == p->id) q->Close("plugin exited: " + p->last_exit);
  }
  if (stopping_) return;
  log::Warn("nri: launched plugin ended; restarting",
            {{"plugin", p->id}, {"exit", p->last_exit}, {"in_ms", std::to_string(p->backoff_ms)}});
  std::weak_ptr<bool> alive = alive_;
  p->restart_timer = owner_->loop_->AddTimer(p->backoff_ms * 1000000, [this, alive, p] {
    if (alive.lock()) Launch(p);
  });
  p->backoff_ms = std::min(p->backoff_ms * 2, owner_->config_.restart_max_ms);
}

void Launcher::OnReady(const std::string& id) {
  auto it = procs_.find(id);
  if (it != procs_.end()) it->second->backoff_ms = owner_->config_.restart_initial_ms;
}

void Launcher::OnClosed(const std::string& id, const std::string& why) {
  auto it = procs_.find(id);
  if (it == procs_.end() || it->second->pid <= 0) return;
  log::Info("nri: killing launched plugin", {{"plugin", id}, {"reason", why}});
  ::kill(it->second->pid, SIGKILL);  // its exit restarts it
}

std::vector<std::string> Launcher::Problems() const {
  std::vector<std::string> out = problems_;
  for (const auto& [id, p] : procs_) {
    if (p->pid == 0 && p->launches > 0) out.push_back(id + ": not running (" + p->last_exit + "), restarting");
  }
  return out;
}

}  // namespace outpost::nri
