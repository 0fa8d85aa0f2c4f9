// outpost next to its peers s6 (s6-svscan / s6-supervise / s6-log) and runit
// (runsvdir / runsv / svlogd), on the same work in the same run. Skips (exit 0,
// with a message) when s6 or runit is not installed (tools/deps.sh bench).
//
// Every service, whoever supervises it, is the same static program: a service
// dir's `run` is a symlink to test_helper, which reads its steps from
// ./run.args (`service stamp FILE sleep 1000`, ...; tests/helpers). outpost
// runs that same `run` (command = <svcdir>/run, workdir = <svcdir>), one job
// per service, restart {"policy": "always", "delay": "0s", "attempts": 0}. s6
// and runit services have a logger (log/run: `exec s6-log n10 s10485760
// ./main` / `exec svlogd ./main` with s10485760 n10), as outpost keeps every
// task's output in rotated files (10 x 10 MiB by default).
//
// Each supervisor tree runs under a wrapper process of ours (a fork of this
// bench, in its own session, a child subreaper): it starts the supervisor,
// and when told to stop (or when this bench dies: its pipe closes) it sends
// the supervisor its stop signal (outpost: SIGTERM, s6-svscan: SIGTERM,
// runsvdir: SIGHUP), then SIGKILLs whatever is left below it, reaps
// everything and reports getrusage(RUSAGE_CHILDREN): the CPU of the whole
// tree, services included. Nothing outlives the bench, also on SIGINT.
//
// Figures (PEER lines; a BENCH line each for outpost against the better peer):
//  1. start of one service: outpost: the job file renamed into jobs.d; s6: the
//     service dir renamed into the scan dir, then `s6-svscanctl -a`; runit:
//     renamed into the scan dir (runsvdir looks every 5 s) -> the service's
//     first instruction of main. p50. Floor: fork+exec of the same program.
//  2. start of 100 services at once: the 100 renames (+ one s6-svscanctl -a)
//     -> the last of the 100 mains. p50 of a few, each in a fresh tree.
//     Floor: 100 fork+exec (2 x 50, from test_helper floor).
//  3. restart after kill -9 of a service up for 1.2 s -> first instruction
//     of the new instance's main. p50.
//  4. CPU of a crash loop (a service that exits 1 at once): the tree's CPU
//     over a window minus that of the same tree with a sleeping service over
//     the same window, per second; starts per second alongside.
//  5. memory per service: VmRSS (and Pss) of every supervisor and logger
//     process (not the services), at 1, 100 and 1,000 services; slope per
//     service; kernel memory estimated from the processes' page tables and
//     kernel stacks; pipes counted.
//  6. log throughput: a service prints N numbered lines at full speed; from its
//     main to all N lines in the log files (polled every 1 ms); every line
//     checked to be there exactly once (the bench fails otherwise).
//     Floor: the same program writing to a regular file.
//  7. installed size: the files each needs (binaries and their non-libc
//     shared libraries) against outpost's stripped static binary.
//
//   peer_bench [--outpost PATH] [--helper PATH] [--reps N] [--lines N] [--quick]
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
#include "bench_util.h"

extern char** environ;

namespace outpost {
namespace {

using bench::g_interrupted;
using bench::Info;

enum Peer { kOutpost = 0, kS6 = 1, kRunit = 2 };
constexpr int kPeers = 3;
const char* const kPeerName[kPeers] = {"outpost", "s6", "runit"};

struct Bins {
  std::string outpost, helper;
  std::string svscan, svscanctl, s6log, supervise, s6svc;
  std::string runsvdir, runsv, svlogd, sv;
};

struct Tree;
Bins g_bins;
std::string g_dir, g_marker;
std::vector<Tree*> g_trees;  // running, for clean-up
bool g_cleaned = false;

void Cleanup();

[[noreturn]] void Fatal(const std::string& what) {
  std::fprintf(stderr, "peer_bench: %s\n", what.c_str());
  std::fflush(stderr);
  Cleanup();
  std::exit(1);
}

void CheckInterrupt() {
  if (g_interrupted) Fatal("interrupted");
}

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

// Runs argv, waits for it; true if it exited 0.
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

// ---- the wrapper: one supervisor tree ----------------------------------------------

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
  rusage ru;
  ::getrusage(RUSAGE_CHILDREN, &ru);
  long long us = (static_cast<long long>(ru.ru_utime.tv_sec) + ru.ru_stime.tv_sec) * 1000000LL + ru.ru_utime.tv_usec +
                 ru.ru_stime.tv_usec;
  line = Format("%lld\n", us);
  (void)!::write(res, line.data(), line.size());
  ::_exit(0);
}

struct Service {
  std::string name;
  std::vector<std::string> args;  // after `run`
};

struct Tree {
  Peer peer;
  std::string dir, svc, scan, stage, stamps, socket;
  pid_t wrapper = -1, root = -1;
  int ctl = -1;
  FILE* res = nullptr;
  int inotify = -1;
  bool stopped = false;

  Tree(Peer p, const std::string& name) : peer(p) {
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
  ~Tree() {
    if (inotify >= 0) ::close(inotify);
  }

  // Starts the supervisor; services: the expected number (for s6-svscan's -c).
  void Start(int services) {
    std::vector<std::string> args;
    int sig = SIGTERM;
    if (peer == kOutpost) {
      socket = dir + "/run/outpost.sock";
      std::string config = "{\"state_dir\": " + JsonString(dir + "/state") + ", \"runtime_dir\": " +
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

  // CPU time (us) of the whole tree, services included, from start to stop.
  long long Stop() {
    if (stopped) return 0;
    stopped = true;
    g_trees.erase(std::remove(g_trees.begin(), g_trees.end(), this), g_trees.end());
    (void)!::write(ctl, "stop\n", 5);
    ::close(ctl);
    char line[64];
    long long us = -1;
    if (std::fgets(line, sizeof line, res)) us = std::atoll(line);
    std::fclose(res);
    bench::ReapWithin(wrapper, 30 * kNanosPerSecond);
    return us;
  }

  std::string StampPath(const std::string& name) const { return stamps + "/" + name; }
  // Where the service's output lands.
  std::string LogDir(const std::string& name) const {
    if (peer == kOutpost) return dir + "/state/logs/" + name + ".main";
    return scan + "/" + name + "/log/main";
  }
  static bool IsLogFile(Peer p, const char* name) {
    if (p == kOutpost) return std::strncmp(name, "main.stdout", 11) == 0;
    return std::strcmp(name, "current") == 0 || name[0] == '@';
  }

  // Prepares a service (dir and, for outpost, its job file) out of sight.
  void Prepare(const Service& s) {
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
      std::string job = "{\"id\": " + JsonString(s.name) +
                        ", \"restart\": {\"policy\": \"always\", \"delay\": \"0s\", \"attempts\": 0}, \"tasks\": "
                        "[{\"name\": \"main\", \"command\": " +
                        JsonString(d + "/run") + ", \"workdir\": " + JsonString(d) + ", \"env\": {" +
                        JsonString(bench::kMarkerVar) + ": " + JsonString(g_dir) + "}}]}\n";
      WriteFile(stage + "/" + s.name + ".json", job);
    }
  }

  // Makes prepared services visible to the supervisor, as a user would.
  void Activate(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      std::string from = peer == kOutpost ? stage + "/" + n + ".json" : stage + "/" + n;
      std::string to = peer == kOutpost ? scan + "/" + n + ".json" : scan + "/" + n;
      if (::rename(from.c_str(), to.c_str()) != 0) Fatal("rename " + from + ": " + std::strerror(errno));
    }
    if (peer == kS6 && !RunCommand({g_bins.svscanctl, "-a", scan})) Fatal("s6-svscanctl -a failed");
  }

  struct Stamp {
    int64_t ns = 0;
    pid_t pid = 0;
  };

  // Waits (inotify on the stamps dir) until every name has written its stamp;
  // reads and removes them. Fails after timeout.
  std::map<std::string, Stamp> WaitStamps(const std::set<std::string>& names, int64_t timeout) {
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
};

// ---- figures -----------------------------------------------------------------------

struct Figure {
  Figure(std::string n, std::string u) : name(std::move(n)), unit(std::move(u)) {}
  std::string name, unit, bench_name, bench_unit;
  double v[kPeers] = {0, 0, 0};
  double floor = -1;
  bool higher_better = false;
  // BENCH value when the PEER figure is "higher is better" (a rate): its inverse.
  double bench_v[kPeers] = {0, 0, 0};
};
std::vector<Figure> g_figures;

std::string Num(double v) {
  if (v < 0) return "-";
  double a = v < 0 ? -v : v;
  if (a >= 1000) return Format("%.0f", v);
  if (a >= 100) return Format("%.1f", v);
  if (a >= 10) return Format("%.2f", v);
  if (a >= 1) return Format("%.3f", v);
  return Format("%.4f", v);
}

void PrintFigure(const Figure& f) {
  std::printf("PEER %s outpost=%s s6=%s runit=%s floor=%s unit=%s\n", f.name.c_str(), Num(f.v[0]).c_str(),
              Num(f.v[1]).c_str(), Num(f.v[2]).c_str(), Num(f.floor).c_str(), f.unit.c_str());
  const double* b = f.higher_better ? f.bench_v : f.v;
  double best = std::min(b[kS6], b[kRunit]);
  std::printf("BENCH %s %s %s baseline=best_peer %s ratio=%.2f\n", f.bench_name.c_str(), Num(b[kOutpost]).c_str(),
              f.bench_unit.c_str(), Num(best).c_str(), best > 0 ? b[kOutpost] / best : 0.0);
  std::fflush(stdout);
}

void AddFigure(Figure f) {
  if (f.bench_name.empty()) f.bench_name = "peer_" + f.name;
  if (f.bench_unit.empty()) f.bench_unit = f.unit;
  PrintFigure(f);
  g_figures.push_back(f);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

int g_tree_seq = 0;
std::string TreeName(Peer p, const char* what) { return Format("%s-%s-%d", kPeerName[p], what, g_tree_seq++); }

std::vector<std::string> StampSleep(const Tree& t, const std::string& name) {
  return {"service", "stamp", t.StampPath(name), "sleep", "100000"};
}

// 1. One service, reps times, in one tree per peer.
void StartOne(bench::FloorProbe* floor, int reps) {
  Figure f{"start_1_service_p50", "ms"};
  for (int p = 0; p < kPeers; ++p) {
    Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "start1"));
    t.Start(reps + 1);
    std::vector<double> ms;
    for (int r = 0; r <= reps; ++r) {  // the first is a warm-up
      std::string n = Format("a%02d", r);
      t.Prepare({n, StampSleep(t, n)});
      int64_t t0 = MonotonicNanos();
      t.Activate({n});
      auto st = t.WaitStamps({n}, 30 * kNanosPerSecond);
      if (r > 0) ms.push_back(Ms(st[n].ns - t0));
    }
    t.Stop();
    f.v[p] = Median(ms);
    std::sort(ms.begin(), ms.end());
    Info("start of 1 service, %s: p50 %.3f ms, min %.3f, max %.3f ms (%d reps)", kPeerName[p], f.v[p], ms.front(),
         ms.back(), reps);
  }
  std::vector<double> fl;
  for (int r = 0; r < reps; ++r) {
    auto ns = floor->Stamp(g_dir + "/floor-stamp");
    if (!ns.ok()) Fatal(ns.error().message());
    fl.push_back(Ms(*ns));
  }
  f.floor = Median(fl);
  AddFigure(f);
}

// 2. 100 services at once, in a fresh tree per rep.
void StartHundred(bench::FloorProbe* floor, int reps) {
  constexpr int kN = 100;
  Figure f{"start_100_services_p50", "ms"};
  for (int p = 0; p < kPeers; ++p) {
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "start100"));
      t.Start(kN);
      std::vector<std::string> names;
      std::set<std::string> want;
      for (int i = 0; i < kN; ++i) {
        names.push_back(Format("h%03d", i));
        want.insert(names.back());
        t.Prepare({names.back(), StampSleep(t, names.back())});
      }
      int64_t t0 = MonotonicNanos();
      t.Activate(names);
      auto st = t.WaitStamps(want, 60 * kNanosPerSecond);
      int64_t last = 0;
      for (auto& kv : st) last = std::max(last, kv.second.ns);
      ms.push_back(Ms(last - t0));
      t.Stop();
    }
    f.v[p] = Median(ms);
    std::sort(ms.begin(), ms.end());
    Info("start of 100 services, %s: p50 %.2f ms, min %.2f, max %.2f ms (%d reps)", kPeerName[p], f.v[p],
         ms.front(), ms.back(), reps);
  }
  std::vector<double> fl;
  for (int r = 0; r < reps; ++r) {
    auto a = floor->Exec(50);
    auto b = floor->Exec(50);
    if (!a.ok() || !b.ok()) Fatal("floor probe: exec 50 failed");
    fl.push_back(Ms(*a + *b));
  }
  f.floor = Median(fl);
  AddFigure(f);
}

// 3. Restart after kill -9 of a service that has been up 1.2 s.
void Restart(bench::FloorProbe* floor, int reps) {
  Figure f{"restart_after_kill9_p50", "ms"};
  for (int p = 0; p < kPeers; ++p) {
    Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "restart"));
    t.Start(1);
    std::string n = "r";
    t.Prepare({n, StampSleep(t, n)});
    t.Activate({n});
    auto st = t.WaitStamps({n}, 30 * kNanosPerSecond);
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      pid_t pid = st[n].pid;
      ::usleep(1200 * 1000);  // up for more than 1 s: no restart throttle applies
      CheckInterrupt();
      if (Comm(pid) != "run" || !HasMarker(pid)) Fatal(Format("pid %d is not our service any more", pid));
      int64_t t0 = MonotonicNanos();
      if (::kill(pid, SIGKILL) != 0) Fatal(Format("kill %d: %s", pid, std::strerror(errno)));
      st = t.WaitStamps({n}, 30 * kNanosPerSecond);
      if (st[n].pid == pid) Fatal("the service's pid did not change");
      ms.push_back(Ms(st[n].ns - t0));
    }
    t.Stop();
    f.v[p] = Median(ms);
    std::sort(ms.begin(), ms.end());
    Info("restart after kill -9, %s: p50 %.3f ms, min %.3f, max %.3f ms (%d reps)", kPeerName[p], f.v[p], ms.front(),
         ms.back(), reps);
  }
  std::vector<double> fl;
  for (int r = 0; r < reps; ++r) {
    auto ns = floor->Stamp(g_dir + "/floor-stamp");
    if (!ns.ok()) Fatal(ns.error().message());
    fl.push_back(Ms(*ns));
  }
  f.floor = Median(fl);
  AddFigure(f);
}

// CPU (us) of `fork + exec helper service exit 1 + wait`, from a small child.
double ForkExecCpuUs(int n) {
  rusage before, after;
  ::getrusage(RUSAGE_CHILDREN, &before);
  std::fflush(stdout);
  pid_t c = ::fork();
  if (c == 0) {
    for (int i = 0; i < n; ++i) {
      pid_t k = ::fork();
      if (k == 0) {
        const char* argv[] = {g_bins.helper.c_str(), "service", "exit", "1", nullptr};
        ::execv(argv[0], const_cast<char* const*>(argv));
        ::_exit(127);
      }
      ::waitpid(k, nullptr, 0);
    }
    ::_exit(0);
  }
  ::waitpid(c, nullptr, 0);
  ::getrusage(RUSAGE_CHILDREN, &after);
  auto us = [](const rusage& r) {
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
           static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  };
  return (us(after) - us(before)) / n;
}

// 4. Crash loop CPU: tree with `service count F exit 1` minus tree with a sleeping service, same window.
void CrashLoop(double window_s) {
  Figure f{"crash_loop_cpu", "ms/s"};
  Figure starts{"crash_loop_starts", "1/s"};
  int64_t window = static_cast<int64_t>(window_s * 1e9);
  for (int p = 0; p < kPeers; ++p) {
    long long cpu[2] = {0, 0};
    int count = 0;
    for (int crash = 0; crash < 2; ++crash) {
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), crash ? "crash" : "idle"));
      t.Start(1);
      std::string n = "c";
      std::string counter = t.dir + "/starts";
      t.Prepare({n, crash ? std::vector<std::string>{"service", "count", counter, "exit", "1"}
                          : std::vector<std::string>{"service", "count", counter, "sleep", "100000"}});
      t.Activate({n});
      // The window opens at the first start (runsvdir may take up to 5 s to see the service).
      int64_t t0 = 0;
      for (int64_t end = MonotonicNanos() + 30 * kNanosPerSecond; t0 == 0;) {
        auto text = sys::ReadFile(counter, 4096);
        if (text.ok() && !text->empty() && text->back() == '\n') t0 = std::strtoll(text->c_str(), nullptr, 10);
        if (MonotonicNanos() > end) Fatal(Format("%s: the crash-loop service did not start", kPeerName[p]));
        CheckInterrupt();
        if (t0 == 0) ::usleep(2000);  // polled every 2 ms
      }
      while (MonotonicNanos() - t0 < window) {
        CheckInterrupt();
        ::usleep(20000);
      }
      if (crash) {
        auto text = sys::ReadFile(counter, 1 << 20);
        count = 0;
        for (const std::string& l : Split(text.ok() ? *text : std::string(), '\n')) {
          if (!l.empty() && std::strtoll(l.c_str(), nullptr, 10) < t0 + window) ++count;
        }
      }
      cpu[crash] = t.Stop();
    }
    f.v[p] = static_cast<double>(cpu[1] - cpu[0]) / 1000.0 / window_s;
    starts.v[p] = count / window_s;
    Info("crash loop, %s: %d starts in %.1f s; tree CPU %.1f ms crashing, %.1f ms with a sleeping service: "
         "%.3f ms CPU per s, %.3f ms per start",
         kPeerName[p], count, window_s, cpu[1] / 1000.0, cpu[0] / 1000.0, f.v[p],
         count > 1 ? static_cast<double>(cpu[1] - cpu[0]) / 1000.0 / (count - 1) : 0.0);
  }
  double per_start_us = ForkExecCpuUs(20);
  f.floor = per_start_us / 1000.0 * 1.0;  // one start per second
  starts.floor = -1;
  Info("default backoff: s6-supervise waits 1 s before restarting a service that ran < 1 s; runsv waits 1 s "
       "likewise; outpost (default delay 1s doubling to 1m, 5 attempts per 5m, then failed) is measured here "
       "with delay 0s, attempts 0 (no limit): at most one start per second, as the peers");
  Info("floor: one fork+exec+exit of the same program per second: %.3f ms CPU per start", per_start_us / 1000.0);
  AddFigure(f);
  Info("crash loop starts per second: outpost %.2f, s6 %.2f, runit %.2f", starts.v[0], starts.v[1], starts.v[2]);
}

// 5. Memory of the supervisors and loggers.
//
// Kernel memory is estimated, not measured (that needs a memory cgroup per
// tree): per supervisor/logger thread a 16 KiB kernel stack and a
// task_struct; per process its mm, signal, sighand, files and pid objects,
// one vm_area_struct + anon_vma_chain per mapping, its page tables (VmPTE)
// and a struct file per open fd; object sizes from /proc/slabinfo. Per
// pipe or FIFO in the tree (the services' ends included), the figures
// measured with a memory cgroup for docs/benchmarks.md: 2.4 KiB at the
// default 64 KiB size, 17.4 KiB at 1 MiB, in between by its slots.
std::map<std::string, double> SlabSizes() {
  std::map<std::string, double> out;
  auto text = sys::ReadFile("/proc/slabinfo", 1 << 20);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    std::vector<std::string> f;
    for (const std::string& w : Split(line, ' ')) {
      if (!w.empty()) f.push_back(w);
    }
    if (f.size() > 3 && f[0] != "#") out[f[0]] = std::atof(f[3].c_str());
  }
  return out;
}

struct Census {
  int procs = 0, threads = 0, fds = 0, pipes = 0, loggers = 0, maps = 0;
  long rss = 0, pss = 0, pte = 0;
  double pipe_kib = 0;
  double KernelKiB(const std::map<std::string, double>& slab) const {
    auto sz = [&](const char* n, double dflt) {
      auto it = slab.find(n);
      return it == slab.end() ? dflt : it->second;
    };
    double per_thread = 16384 + sz("task_struct", 4288);
    double per_proc = sz("mm_struct", 1600) + sz("signal_cache", 1152) + sz("sighand_cache", 2112) +
                      sz("files_cache", 704) + sz("pid", 192);
    double bytes = threads * per_thread + procs * per_proc + maps * (sz("vm_area_struct", 192) + sz("anon_vma_chain", 64)) +
                   fds * sz("filp", 192);
    return bytes / 1024 + static_cast<double>(pte) + pipe_kib;
  }
};

Census Count(const Tree& t) {
  Census c;
  std::set<std::pair<dev_t, ino_t>> pipes;
  for (pid_t pid : Descendants(t.wrapper)) {
    std::string comm = Comm(pid);
    bool service = comm == "run";  // the service itself: the same under every supervisor
    // Pipes of everyone (the services' ends included): the kernel memory supervision costs.
    DIR* d = ::opendir(Format("/proc/%d/fd", pid).c_str());
    int fds = 0;
    if (d) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        ++fds;
        std::string fdpath = Format("/proc/%d/fd/%s", pid, e->d_name);
        struct stat st;
        if (::stat(fdpath.c_str(), &st) == 0 && S_ISFIFO(st.st_mode) && pipes.insert({st.st_dev, st.st_ino}).second) {
          // Its size: reopened read-only, non-blocking (reads nothing, changes nothing).
          int fd = ::open(fdpath.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
          int size = fd >= 0 ? ::fcntl(fd, F_GETPIPE_SZ) : -1;
          if (fd >= 0) ::close(fd);
          double slots = size > 0 ? size / 4096.0 : 16;
          c.pipe_kib += slots <= 16 ? 2.4 : 2.4 + 15.0 * (slots - 16) / 240.0;
        }
      }
      ::closedir(d);
    }
    if (service) continue;
    if (comm == "s6-log" || comm == "svlogd") ++c.loggers;
    ++c.procs;
    c.fds += fds;
    c.rss += std::max(0L, bench::RssKiB(pid));
    c.pss += std::max(0L, bench::ProcKiB(pid, "smaps_rollup", "Pss"));
    c.pte += std::max(0L, bench::ProcKiB(pid, "status", "VmPTE"));
    c.threads += static_cast<int>(std::max(0L, bench::ProcKiB(pid, "status", "Threads")));
    auto maps = sys::ReadFile(Format("/proc/%d/maps", pid), 1 << 22);
    if (maps.ok()) c.maps += static_cast<int>(std::count(maps->begin(), maps->end(), '\n'));
  }
  c.pipes = static_cast<int>(pipes.size());
  return c;
}

void Memory(const std::vector<int>& sizes) {
  const std::map<std::string, double> slab = SlabSizes();
  std::vector<Figure> totals;
  Figure rss{"mem_per_service_rss", "KiB"}, pss{"mem_per_service_pss", "KiB"}, kmem{"kmem_per_service_est", "KiB"};
  Figure pipes{"pipes_per_service", "pipes"};
  for (int n : sizes) totals.push_back(Figure{Format("mem_total_%d_services_rss", n), "KiB"});
  for (int p = 0; p < kPeers; ++p) {
    std::vector<Census> cs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int n = sizes[i];
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), Format("mem%d", n).c_str()));
      t.Start(n);
      std::vector<std::string> names;
      std::set<std::string> want;
      for (int k = 0; k < n; ++k) {
        names.push_back(Format("m%04d", k));
        want.insert(names.back());
        t.Prepare({names.back(), StampSleep(t, names.back())});
      }
      int64_t t0 = MonotonicNanos();
      t.Activate(names);
      t.WaitStamps(want, 120 * kNanosPerSecond);
      double up_s = static_cast<double>(MonotonicNanos() - t0) / 1e9;
      Census c;
      // The loggers start alongside the services: wait until all are up (polled every 50 ms).
      for (int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;;) {
        c = Count(t);
        if (p == kOutpost || c.loggers >= n) break;
        if (MonotonicNanos() > end) Fatal(Format("%s: only %d of %d loggers up", kPeerName[p], c.loggers, n));
        CheckInterrupt();
        ::usleep(50000);
      }
      ::usleep(1500 * 1000);  // let start-up allocations settle (outpost's keeper drops pages after 1 s idle)
      c = Count(t);
      cs.push_back(c);
      Info("%s with %d services (all up after %.2f s): %d supervisor/logger processes (%d threads), VmRSS %ld KiB, "
           "Pss %ld KiB, page tables %ld KiB, %d mappings, %d fds; %d pipes/FIFOs in the tree (%.0f KiB); "
           "kernel estimate %.0f KiB",
           kPeerName[p], n, up_s, c.procs, c.threads, c.rss, c.pss, c.pte, c.maps, c.fds, c.pipes, c.pipe_kib,
           c.KernelKiB(slab));
      totals[i].v[p] = static_cast<double>(c.rss);
      t.Stop();
    }
    const Census& a = cs.front();
    const Census& b = cs.back();
    double dn = sizes.back() - sizes.front();
    rss.v[p] = static_cast<double>(b.rss - a.rss) / dn;
    pss.v[p] = static_cast<double>(b.pss - a.pss) / dn;
    kmem.v[p] = (b.KernelKiB(slab) - a.KernelKiB(slab)) / dn;
    pipes.v[p] = (b.pipes - a.pipes) / dn;
  }
  for (Figure& f : totals) AddFigure(f);
  AddFigure(rss);
  AddFigure(pss);
  AddFigure(kmem);
  AddFigure(pipes);
}

// 6. Log throughput, each line exactly once.
uint64_t ExpectedBytes(long n) {
  uint64_t b = 0;
  for (long i = 1; i <= n; ++i) b += std::to_string(i).size() + 1;
  return b;
}

uint64_t LogBytes(Peer p, const std::string& dir, std::vector<std::string>* files) {
  uint64_t total = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (!Tree::IsLogFile(p, e->d_name)) continue;
    struct stat st;
    std::string path = dir + "/" + e->d_name;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    total += static_cast<uint64_t>(st.st_size);
    if (files) files->push_back(path);
  }
  ::closedir(d);
  return total;
}

void VerifyLines(const char* who, const std::vector<std::string>& files, long n) {
  std::vector<uint8_t> seen(static_cast<size_t>(n) + 1, 0);
  long lines = 0;
  for (const std::string& f : files) {
    auto text = sys::ReadFile(f, 1 << 30);
    if (!text.ok()) Fatal(std::string(who) + ": read " + f);
    size_t at = 0;
    while (at < text->size()) {
      size_t nl = text->find('\n', at);
      if (nl == std::string::npos) Fatal(Format("%s: %s ends in a partial line", who, f.c_str()));
      char* end = nullptr;
      long v = std::strtol(text->c_str() + at, &end, 10);
      if (end != text->c_str() + nl || v < 1 || v > n) {
        Fatal(Format("%s: unexpected line in %s: \"%s\"", who, f.c_str(), text->substr(at, std::min<size_t>(nl - at, 80)).c_str()));
      }
      if (seen[static_cast<size_t>(v)]++) Fatal(Format("%s: line %ld is in the logs twice", who, v));
      ++lines;
      at = nl + 1;
    }
  }
  if (lines != n) {
    long first = 0;
    for (long i = 1; i <= n && !first; ++i) {
      if (!seen[static_cast<size_t>(i)]) first = i;
    }
    Fatal(Format("%s: %ld of %ld lines in the logs (first missing: %ld)", who, lines, n, first));
  }
}

void LogThroughput(long n, int runs) {
  Figure f{"log_throughput", "MiB/s"};
  f.higher_better = true;
  f.bench_name = "peer_log_ns_per_line";
  f.bench_unit = "ns";
  const uint64_t bytes = ExpectedBytes(n);
  for (int p = 0; p < kPeers; ++p) {
    double best = 1e30;
    size_t nfiles = 0;
    for (int r = 0; r < runs; ++r) {
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "log"));
      t.Start(1);
      std::string name = "l";
      t.Prepare({name, {"service", "stamp", t.StampPath(name), "lines", std::to_string(n), "sleep", "100000"}});
      t.Activate({name});
      auto st = t.WaitStamps({name}, 30 * kNanosPerSecond);
      std::string dir = t.LogDir(name);
      int64_t done = 0;
      for (int64_t end = MonotonicNanos() + 120 * kNanosPerSecond;;) {  // polled every 1 ms
        uint64_t now = LogBytes(static_cast<Peer>(p), dir, nullptr);
        if (now >= bytes) {
          done = MonotonicNanos();
          break;
        }
        if (MonotonicNanos() > end) {
          Fatal(Format("%s: %llu of %llu bytes in %s after 120 s", kPeerName[p], static_cast<unsigned long long>(now),
                       static_cast<unsigned long long>(bytes), dir.c_str()));
        }
        CheckInterrupt();
        ::usleep(1000);
      }
      ::usleep(200000);  // anything beyond the expected bytes (a duplicate) has time to show up
      std::vector<std::string> files;
      LogBytes(static_cast<Peer>(p), dir, &files);
      VerifyLines(kPeerName[p], files, n);
      nfiles = files.size();
      best = std::min(best, static_cast<double>(done - st[name].ns) / 1e9);
      t.Stop();
    }
    f.v[p] = static_cast<double>(bytes) / (1 << 20) / best;
    f.bench_v[p] = best * 1e9 / static_cast<double>(n);
    Info("log, %s: %ld lines (%.1f MiB) in the log files %.3f s after the service's main (best of %d): "
         "%.0f lines/s, %.1f MiB/s; %zu files; every line once",
         kPeerName[p], n, static_cast<double>(bytes) / (1 << 20), best, runs, n / best, f.v[p], nfiles);
  }
  // Floor: the same program writing to a regular file.
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    std::string out = g_dir + "/floor.log", stamp = g_dir + "/floor-log-stamp";
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    std::fflush(stdout);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fd, 1);
      std::string ns = std::to_string(n);
      const char* argv[] = {g_bins.helper.c_str(), "service", "stamp", stamp.c_str(), "lines", ns.c_str(), nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(fd);
    ::waitpid(pid, nullptr, 0);
    int64_t done = MonotonicNanos();
    auto text = sys::ReadFile(stamp, 128);
    if (!text.ok()) Fatal("floor: no stamp");
    best = std::min(best, static_cast<double>(done - std::strtoll(text->c_str(), nullptr, 10)) / 1e9);
    ::unlink(out.c_str());
    ::unlink(stamp.c_str());
  }
  f.floor = static_cast<double>(bytes) / (1 << 20) / best;
  Info("log floor: the same %ld lines to a regular file in %.3f s: %.0f lines/s", n, best, n / best);
  AddFigure(f);
}

// 7. Installed size.
long FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

// The shared libraries path needs, except libc and the dynamic loader (ldd's "=> /path").
std::vector<std::string> SharedLibs(const std::string& path) {
  std::vector<std::string> out;
  std::string cmd = "ldd '" + path + "' 2>/dev/null";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  char line[1024];
  while (std::fgets(line, sizeof line, f)) {
    const char* arrow = std::strstr(line, "=> /");
    if (!arrow) continue;
    std::string lib = arrow + 3;
    lib = lib.substr(0, lib.find(' '));
    if (lib.find("/libc.so") != std::string::npos || lib.find("ld-linux") != std::string::npos) continue;
    out.push_back(lib);
  }
  ::pclose(f);
  return out;
}

double InstalledKiB(const char* who, const std::vector<std::string>& bins) {
  std::set<std::string> files(bins.begin(), bins.end());
  for (const std::string& b : bins) {
    for (const std::string& l : SharedLibs(b)) files.insert(l);
  }
  long total = 0;
  std::string list;
  for (const std::string& f : files) {
    long b = FileBytes(f);
    total += std::max(0L, b);
    list += Format(" %s=%ld", f.c_str(), b);
  }
  Info("installed, %s: %ld bytes:%s", who, total, list.c_str());
  return static_cast<double>(total) / 1024;
}

void InstalledSize() {
  Figure f{"installed_size", "KiB"};
  std::string stripped = g_dir + "/outpost.stripped";
  std::string strip = Which("strip");
  if (!strip.empty() && RunCommand({strip, "-o", stripped, g_bins.outpost})) {
    f.v[kOutpost] = InstalledKiB("outpost (stripped, static: its libc included)", {stripped});
  } else {
    f.v[kOutpost] = InstalledKiB("outpost (not stripped: no strip found)", {g_bins.outpost});
  }
  f.v[kS6] = InstalledKiB("s6 (glibc not counted)",
                          {g_bins.svscan, g_bins.svscanctl, g_bins.supervise, g_bins.s6log, g_bins.s6svc});
  f.v[kRunit] = InstalledKiB("runit (glibc not counted)", {g_bins.runsvdir, g_bins.runsv, g_bins.svlogd, g_bins.sv});
  // The shared glibc the peers use (outpost carries its own, static).
  std::string libc;
  FILE* l = ::popen(("ldd '" + g_bins.runsv + "' 2>/dev/null").c_str(), "r");
  char line[1024];
  while (l && std::fgets(line, sizeof line, l)) {
    const char* arrow = std::strstr(line, "=> /");
    if (arrow && std::strstr(line, "libc.so")) libc = std::string(arrow + 3).substr(0, std::string(arrow + 3).find(' '));
  }
  if (l) ::pclose(l);
  double libc_kib = libc.empty() ? 0 : static_cast<double>(FileBytes(libc)) / 1024;
  Info("not counted above: the peers' shared %s, %.0f KiB (with it: s6 %.0f KiB, runit %.0f KiB)",
       libc.empty() ? "libc" : libc.c_str(), libc_kib, f.v[kS6] + libc_kib, f.v[kRunit] + libc_kib);
  AddFigure(f);
}

// ---- clean-up ----------------------------------------------------------------------

void Cleanup() {
  if (g_cleaned) return;
  g_cleaned = true;
  std::vector<Tree*> trees = g_trees;
  for (Tree* t : trees) t->Stop();
  if (!g_marker.empty()) {
    std::vector<pid_t> strays = bench::PidsWithEnv(g_marker);
    for (pid_t p : strays) ::kill(p, SIGKILL);
    if (!strays.empty()) std::fprintf(stderr, "peer_bench: killed %zu stray processes\n", strays.size());
  }
  if (!g_dir.empty()) bench::RemoveTree(g_dir);
}

int Main(int argc, char** argv) {
  bench::Name() = "peer_bench";
  int reps = 7;
  long lines = 2000000;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) {
      g_bins.outpost = argv[++i];
    } else if (a == "--helper" && i + 1 < argc) {
      g_bins.helper = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--lines" && i + 1 < argc) {
      lines = std::max(1L, std::atol(argv[++i]));
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: peer_bench [--outpost PATH] [--helper PATH] [--reps N] [--lines N] [--quick]\n");
      return 2;
    }
  }
  std::string missing = bench::FindBinaries(&g_bins.outpost, &g_bins.helper);
  if (!missing.empty()) Fatal(missing);
  struct {
    const char* name;
    std::string* path;
  } need[] = {{"s6-svscan", &g_bins.svscan},   {"s6-svscanctl", &g_bins.svscanctl}, {"s6-supervise", &g_bins.supervise},
              {"s6-log", &g_bins.s6log},       {"s6-svc", &g_bins.s6svc},           {"runsvdir", &g_bins.runsvdir},
              {"runsv", &g_bins.runsv},        {"svlogd", &g_bins.svlogd},          {"sv", &g_bins.sv}};
  std::string absent;
  for (auto& n : need) {
    *n.path = Which(n.name);
    if (n.path->empty()) absent += std::string(" ") + n.name;
  }
  if (!absent.empty()) {
    std::printf("peer_bench: skipped: not installed:%s (Debian packages s6 and runit: tools/deps.sh bench)\n",
                absent.c_str());
    return 0;
  }
  bench::CatchInterrupts();
  const int64_t begun = MonotonicNanos();
  bench::RaiseNofile(16 * 1024);
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-peer-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal("mkdtemp " + tmpl + ": " + std::strerror(errno));
  g_dir = tmpl;
  g_marker = std::string(bench::kMarkerVar) + "=" + g_dir;

  bench::FloorProbe floor;
  std::string err = floor.Start(g_bins.helper);
  if (!err.empty()) Fatal("floor probe: " + err);

  if (quick) reps = std::min(reps, 3);
  Info("outpost %s; s6 %s; runit %s; %d reps; runsvdir looks at its directory every 5 s by design",
       g_bins.outpost.c_str(), g_bins.svscan.c_str(), g_bins.runsvdir.c_str(), reps);
  StartOne(&floor, reps);
  StartHundred(&floor, quick ? 1 : 3);
  Restart(&floor, reps);
  CrashLoop(quick ? 3 : 6);
  Memory(quick ? std::vector<int>{1, 100} : std::vector<int>{1, 100, 1000});
  LogThroughput(quick ? lines / 4 : lines, quick ? 1 : 2);
  InstalledSize();

  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs; total %.1f s", load[0], ::sysconf(_SC_NPROCESSORS_ONLN),
       static_cast<double>(MonotonicNanos() - begun) / 1e9);
  Cleanup();
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
