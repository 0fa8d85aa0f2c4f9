// peer_bench: a supervisor tree (outpost, s6 or runit) under a wrapper
// process of ours, its services, and the /proc helpers that find the
// processes below a pid.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "proc/procfs.h"
#include "peer_bench.h"

namespace outpost::peer_bench {
namespace {

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    Fatal("write " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  ::chmod(path.c_str(), mode);
}

void MkDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) Fatal("mkdir " + path + ": " + std::strerror(errno));
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string Which(const char* name) {
  const char* path = std::getenv("PATH");
  for (const std::string& d : Split(path ? path : "/usr/bin:/bin", ':')) {
    std::string p = (d.empty() ? "." : d) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  for (const char* d : {"/usr/bin", "/bin", "/usr/sbin", "/sbin"}) {
    std::string p = std::string(d) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

bool RunCommand(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int st = 0;
  if (sys::RetryEintr([&] { return ::waitpid(pid, &st, 0); }) != pid) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// ---- processes below a pid ------------------------------------------------------

namespace {

std::map<pid_t, std::vector<pid_t>> ChildrenMap() {
  std::map<pid_t, std::vector<pid_t>> kids;
  DIR* d = ::opendir("/proc");
  if (!d) return kids;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    proc::ProcStat ps;
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (proc::ReadProcStat(pid, &ps)) kids[ps.ppid].push_back(pid);
  }
  ::closedir(d);
  return kids;
}

}  // namespace

std::vector<pid_t> Descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> kids = ChildrenMap();
  std::vector<pid_t> out;
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto it = kids.find(p);
    if (it == kids.end()) continue;
    for (pid_t c : it->second) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

std::string Comm(pid_t pid) {
  auto text = sys::ReadFile(Format("/proc/%d/comm", pid), 256);
  if (!text.ok()) return "";
  std::string s = *text;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

bool HasMarker(pid_t pid) {
  auto env = sys::ReadFile(Format("/proc/%d/environ", pid), 1 << 20);
  if (!env.ok()) return false;
  for (const std::string& kv : Split(*env, '\0')) {
    if (kv == g_marker) return true;
  }
  return false;
}

long long LiveCpuNs(pid_t root, const std::string& skip_exe) {
  long long sum = 0;
  for (pid_t p : Descendants(root)) {
    proc::ProcStat ps;
    if (!proc::ReadProcStat(p, &ps) || ps.state == 'Z') continue;
    char exe[4096];
    ssize_t n = ::readlink(Format("/proc/%d/exe", p).c_str(), exe, sizeof exe - 1);
    if (n > 0 && skip_exe == std::string(exe, static_cast<size_t>(n))) continue;
    clockid_t clock;
    timespec ts;
    if (::clock_getcpuclockid(p, &clock) != 0 || ::clock_gettime(clock, &ts) != 0) continue;  // gone meanwhile
    sum += static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  }
  return sum;
}

// ---- the wrapper: one supervisor tree ----------------------------------------------

namespace {

// Runs in the forked wrapper: never returns.
[[noreturn]] void WrapperMain(const std::vector<std::string>& args, const std::string& cwd, const std::string& errlog,
                              int stop_sig, int ctl, int res) {
  ::setsid();
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGHUP, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  // Only our two pipe ends stay open: another tree's control pipe held here
  // would keep that tree alive after the bench died.
  int c = ::fcntl(ctl, F_DUPFD, 100), r = ::fcntl(res, F_DUPFD, 100);
  ::dup2(c, 3);
  ::dup2(r, 4);
  ::close_range(5, ~0U, 0);
  ctl = 3;
  res = 4;
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t sup = ::fork();
  if (sup == 0) {
    ::close(3);
    ::close(4);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    int null = ::open("/dev/null", O_RDWR);
    int err = ::open(errlog.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(null, 0);
    ::dup2(err, 1);
    ::dup2(err, 2);
    if (null > 2) ::close(null);
    if (err > 2) ::close(err);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  std::string line = Format("%d\n", static_cast<int>(sup));
  (void)!::write(res, line.data(), line.size());
  char buf[64];
  for (;;) {  // "stop" or EOF (the bench is gone)
    ssize_t n = ::read(ctl, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR) || (n > 0 && std::memchr(buf, '\n', static_cast<size_t>(n)))) break;
  }
  if (sup > 0) {
    ::kill(sup, stop_sig);
    int64_t end = MonotonicNanos() + 3 * kNanosPerSecond;
    while (MonotonicNanos() < end) {
      int st;
      pid_t p = ::waitpid(-1, &st, WNOHANG);
      if (p == sup) break;
      if (p <= 0) ::usleep(5000);
    }
  }
  // Whatever is left below us (tasks outpost leaves running across its own
  // restarts, supervisors that did not stop in time): SIGKILL, reap.
  int64_t end = MonotonicNanos() + 20 * kNanosPerSecond;
  for (;;) {
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::vector<pid_t> left = Descendants(::getpid());
    std::vector<pid_t> live;
    for (pid_t p : left) {
      proc::ProcStat ps;
      if (proc::ReadProcStat(p, &ps) && ps.state != 'Z') live.push_back(p);
    }
    if (left.empty() || MonotonicNanos() > end) break;
    for (pid_t p : live) ::kill(p, SIGKILL);
    ::usleep(5000);
  }
  while (::waitpid(-1, nullptr, 0) > 0) {
  }
  line = "done\n";
  (void)!::write(res, line.data(), line.size());
  ::_exit(0);
}

}  // namespace

// ---- the tree ---------------------------------------------------------------------

Tree::Tree(Peer p, const std::string& name) : peer(p) {
  dir = g_dir + "/" + name;
  svc = dir + "/svc";
  scan = dir + "/scan";
  stage = dir + "/stage";
  stamps = dir + "/stamps";
  MkDir(dir);
  MkDir(svc);
  MkDir(scan);
  MkDir(stage);
  MkDir(stamps);
  inotify = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify < 0 || ::inotify_add_watch(inotify, stamps.c_str(), IN_MOVED_TO) < 0) {
    Fatal(std::string("inotify: ") + std::strerror(errno));
  }
}

Tree::~Tree() {
  if (inotify >= 0) ::close(inotify);
}

void Tree::Start(int services) {
  std::vector<std::string> args;
  int sig = SIGTERM;
  if (peer == kOutpost) {
    socket = dir + "/run/outpost.sock";
    std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + JsonString(dir + "/state") + ", \"runtime_dir\": " +
                         JsonString(dir + "/run") + ", \"log_file\": " + JsonString(dir + "/agent.log") +
                         ", \"cgroup_root\": " + JsonString(dir + "/no-cgroup") +
                         ", \"log_level\": \"warn\", \"jobs_dir\": " + JsonString(scan) +
                         ", \"max_jobs\": " + std::to_string(std::max(1000, services + 16)) + "}\n";
    WriteFile(dir + "/config.json", config, 0600);
    args = {g_bins.outpost, "agent", "--config", dir + "/config.json"};
  } else if (peer == kS6) {
    args = {g_bins.svscan};
    // s6-svscan's default limit is 500 services (a logged service counts twice).
    if (2 * services + 8 > 500) args.insert(args.end(), {"-c", std::to_string(2 * services + 64)});
    args.push_back(scan);
  } else {
    args = {g_bins.runsvdir, scan};
    sig = SIGHUP;  // runsvdir: TERM to every runsv, then exit
  }
  int c[2], r[2];
  if (::pipe2(c, O_CLOEXEC) != 0 || ::pipe2(r, O_CLOEXEC) != 0) Fatal("pipe2");
  std::fflush(stdout);
  std::fflush(stderr);
  wrapper = ::fork();
  if (wrapper < 0) Fatal("fork");
  if (wrapper == 0) {
    ::setenv("OUTPOST_BENCH_RUN", g_dir.c_str(), 1);
    ::setenv("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", 1);
    WrapperMain(args, dir, dir + "/supervisor.log", sig, c[0], r[1]);
  }
  ::close(c[0]);
  ::close(r[1]);
  ctl = c[1];
  res = ::fdopen(r[0], "r");
  g_trees.push_back(this);
  char line[64];
  if (!res || !std::fgets(line, sizeof line, res)) Fatal("the wrapper of " + dir + " did not start");
  root = static_cast<pid_t>(std::atoi(line));
  // Ready?
  int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;
  if (peer == kOutpost) {
    if (bench::WaitForWorker(socket, 10 * kNanosPerSecond) <= 0) Fatal("outpost did not answer within 10 s");
    for (;;) {  // job calls answer Unavailable until the job manager recovered
      auto r2 = bench::CallOnce(socket, "InspectJob", bench::JobIdRequest("no-such-job"), kNanosPerSecond);
      if (r2.ok() || r2.error().code() != Code::kUnavailable) break;
      if (MonotonicNanos() > end) Fatal("outpost's job manager not ready within 10 s");
      CheckInterrupt();
      ::usleep(5000);
    }
  } else if (peer == kS6) {
    // Ready once it listens on its control FIFO (which exists a moment before).
    struct stat st;
    while (::stat((scan + "/.s6-svscan/control").c_str(), &st) != 0 || !RunCommand({g_bins.svscanctl, "-a", scan})) {
      if (MonotonicNanos() > end) Fatal("s6-svscan did not listen on its control FIFO within 10 s");
      CheckInterrupt();
      ::usleep(2000);
    }
  } else {
    proc::ProcStat ps;
    if (!proc::ReadProcStat(root, &ps)) Fatal("runsvdir did not start");
  }
}

void Tree::Stop() {
  if (stopped) return;
  stopped = true;
  g_trees.erase(std::remove(g_trees.begin(), g_trees.end(), this), g_trees.end());
  (void)!::write(ctl, "stop\n", 5);
  ::close(ctl);
  char line[64];
  (void)!std::fgets(line, sizeof line, res);  // "done": every process below it is gone
  std::fclose(res);
  bench::ReapWithin(wrapper, 30 * kNanosPerSecond);
}

std::string Tree::LogDir(const std::string& name) const {
  if (peer == kOutpost) return dir + "/state/logs/" + name + ".main";
  return scan + "/" + name + "/log/main";
}

bool Tree::IsLogFile(Peer p, const char* name) {
  if (p == kOutpost) return std::strncmp(name, "main.stdout", 11) == 0;
  return std::strcmp(name, "current") == 0 || name[0] == '@';
}

void Tree::Prepare(const Service& s) {
  std::string d = svc + "/" + s.name;
  if (peer != kOutpost) d = stage + "/" + s.name;
  MkDir(d);
  if (::symlink(g_bins.helper.c_str(), (d + "/run").c_str()) != 0) Fatal("symlink " + d + "/run");
  std::string args;
  for (const std::string& a : s.args) args += a + "\n";
  WriteFile(d + "/run.args", args);
  if (peer == kS6) {
    MkDir(d + "/log");
    MkDir(d + "/log/main");
    WriteFile(d + "/log/run", "#!/bin/sh\nexec s6-log n10 s10485760 ./main\n", 0755);
  } else if (peer == kRunit) {
    MkDir(d + "/log");
    MkDir(d + "/log/main");
    WriteFile(d + "/log/main/config", "s10485760\nn10\n");
    WriteFile(d + "/log/run", "#!/bin/sh\nexec svlogd ./main\n", 0755);
  } else {
    std::string restart = outpost_restart.empty() ? "" : ", \"restart\": " + outpost_restart;
    std::string job = "{\"id\": " + JsonString(s.name) + restart +
                      ", \"tasks\": [{\"name\": \"main\", \"command\": " +
                      JsonString(d + "/run") + ", \"workdir\": " + JsonString(d) + ", \"env\": {" +
                      JsonString(bench::kMarkerVar) + ": " + JsonString(g_dir) + "}}]}\n";
    WriteFile(stage + "/" + s.name + ".json", job);
  }
}

void Tree::Activate(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    std::string from = peer == kOutpost ? stage + "/" + n + ".json" : stage + "/" + n;
    std::string to = peer == kOutpost ? scan + "/" + n + ".json" : scan + "/" + n;
    if (::rename(from.c_str(), to.c_str()) != 0) Fatal("rename " + from + ": " + std::strerror(errno));
  }
  if (peer == kS6 && !RunCommand({g_bins.svscanctl, "-a", scan})) Fatal("s6-svscanctl -a failed");
}

int64_t Tree::StartSleepers(const char* prefix, int digits, int n, int64_t timeout,
                            std::map<std::string, Stamp>* out) {
  std::vector<std::string> names;
  std::set<std::string> want;
  for (int i = 0; i < n; ++i) {
    names.push_back(Format("%s%0*d", prefix, digits, i));
    want.insert(names.back());
    Prepare({names.back(), StampSleep(*this, names.back())});
  }
  int64_t t0 = MonotonicNanos();
  Activate(names);
  *out = WaitStamps(want, timeout);
  return t0;
}

std::map<std::string, Tree::Stamp> Tree::WaitStamps(const std::set<std::string>& names, int64_t timeout) {
  std::map<std::string, Stamp> got;
  int64_t end = MonotonicNanos() + timeout;
  auto take = [&](const std::string& n) {
    if (!names.count(n) || got.count(n)) return;
    auto text = sys::ReadFile(StampPath(n), 128);
    if (!text.ok()) return;
    Stamp s;
    char* e = nullptr;
    s.ns = std::strtoll(text->c_str(), &e, 10);
    s.pid = static_cast<pid_t>(std::strtol(e, nullptr, 10));
    if (s.ns <= 0 || s.pid <= 0) return;
    ::unlink(StampPath(n).c_str());
    got[n] = s;
  };
  for (const std::string& n : names) take(n);  // before the watch saw them
  alignas(inotify_event) char buf[64 * 1024];
  while (got.size() < names.size()) {
    int64_t left = end - MonotonicNanos();
    if (left <= 0) {
      std::string missing;
      for (const std::string& n : names) {
        if (!got.count(n)) missing = n;
      }
      Fatal(Format("%s: %zu of %zu services started within %.0f s (one missing: %s; see %s/supervisor.log)",
                   kPeerName[peer], got.size(), names.size(), static_cast<double>(timeout) / 1e9, missing.c_str(),
                   dir.c_str()));
    }
    CheckInterrupt();
    pollfd pfd{inotify, POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left / kNanosPerMilli + 1, 100)));
    ssize_t n = ::read(inotify, buf, sizeof buf);
    if (n <= 0) continue;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      if (ev->mask & IN_Q_OVERFLOW) {
        for (const std::string& nm : names) take(nm);
      } else if (ev->len) {
        take(ev->name);
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  return got;
}

}  // namespace outpost::peer_bench
