// What every benchmark under tools/bench needs: failing loudly, info lines,
// the BENCH line (format in docs/benchmarks.md), percentiles of latency samples,
// SIGINT/SIGTERM, child processes and /proc figures, removing a scratch tree;
// then, for the benchmarks that drive a whole agent (agent_bench, job_bench,
// cgroup_bench), the agent's API. Header-only: each benchmark is one .cc file
// (but peer_bench: peer_bench*.cc, see peer_bench.h).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent.pb.h"
#include "job.pb.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "proc/procfs.h"
#include "task.pb.h"
#include "wire/rpc_client.h"

namespace outpost::bench {

// Set by each benchmark's main, for messages.
inline const char*& Name() {
  static const char* name = "bench";
  return name;
}

[[noreturn]] inline void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s: %s\n", Name(), what, detail.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(Result<T> r, const char* what) {
  if (!r.ok()) Die(what, r.error().message());
  return std::move(*r);
}

// "<name>: <message>" on stdout, flushed: the detail next to the BENCH lines.
inline void Info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline void Info(const char* fmt, ...) {
  std::printf("%s: ", Name());
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::printf("\n");
  std::fflush(stdout);
}

// Set by SIGINT/SIGTERM once CatchInterrupts ran: the benchmark stops
// measuring and cleans up instead of dying with agents and tasks left behind.
inline volatile sig_atomic_t g_interrupted = 0;
inline void OnInterrupt(int) { g_interrupted = 1; }
inline void CatchInterrupts() {
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnInterrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

// s in single quotes for /bin/sh.
inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Paths of outpost and test_helper: as given, or next to this binary's
// directory (build/bench/x -> build/outpost); made absolute. An error
// message if one is not executable.
inline std::string FindBinaries(std::string* outpost, std::string* helper) {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return std::string("readlink /proc/self/exe: ") + std::strerror(errno);
  self[n] = '\0';
  std::string build = sys::Dirname(sys::Dirname(self));
  if (outpost->empty()) *outpost = build + "/outpost";
  if (helper->empty()) *helper = build + "/test_helper";
  for (std::string* p : {outpost, helper}) {
    if (::access(p->c_str(), X_OK) != 0) return *p + " not found (make all build/test_helper)";
    if ((*p)[0] != '/') {
      char cwd[4096];
      if (::getcwd(cwd, sizeof cwd)) *p = std::string(cwd) + "/" + *p;
    }
  }
  return "";
}

// Raises the soft RLIMIT_NOFILE to the hard one, and the hard one to `want`
// if it is short and we may (root, CAP_SYS_RESOURCE): an agent inherits it,
// and each task costs its worker about 7 fds. Returns the soft limit now.
inline rlim_t RaiseNofile(rlim_t want) {
  rlimit nofile;
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  const rlimit old_nofile = nofile;
  if (nofile.rlim_max != RLIM_INFINITY && nofile.rlim_max < want) {
    rlimit more{want, want};
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0) nofile = more;
  }
  nofile.rlim_cur = nofile.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  Info("RLIMIT_NOFILE soft %llu hard %llu -> soft %llu hard %llu, inherited by the agent%s",
       static_cast<unsigned long long>(old_nofile.rlim_cur), static_cast<unsigned long long>(old_nofile.rlim_max),
       static_cast<unsigned long long>(nofile.rlim_cur), static_cast<unsigned long long>(nofile.rlim_max),
       nofile.rlim_cur < want ? " (may be too low for this many tasks)" : "");
  return nofile.rlim_cur;
}

// BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
inline void Print(const char* name, double value, const char* unit, const char* base_name, double base) {
  std::printf("BENCH %s %.1f %s baseline=%s %.1f ratio=%.2f\n", name, value, unit, base_name, base,
              base > 0 ? value / base : 0.0);
  std::fflush(stdout);
}

// "<name><=<limit><unit>:PASS" (or FAIL), for a summary line.
inline std::string Verdict(const std::string& name, double value, double limit, const char* unit) {
  return Format("%s<=%.0f%s:%s", name.c_str(), limit, unit, value <= limit ? "PASS" : "FAIL");
}

// The q-quantile (0..1) of nanosecond samples, in microseconds.
inline double PercentileMicros(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return static_cast<double>(v[i]) / 1000.0;
}

inline int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
inline void RemoveTree(const std::string& dir) { ::nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

// The agent's runtime dir (FIFOs, cursor files, the API socket) for a bench
// whose state dir is under dir: on tmpfs, as on a node (the default
// runtime_dir, /run/outpost, is tmpfs there), when /dev/shm is one; else
// dir/run. The caller removes it when it is not under dir.
inline std::string MakeRuntimeDir(const std::string& dir) {
  struct statfs fs;
  if (::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    std::string t = "/dev/shm/outpost-bench-run-XXXXXX";
    if (::mkdtemp(&t[0])) return t;
  }
  std::string d = dir + "/run";
  ::mkdir(d.c_str(), 0700);
  return d;
}

// Starts a process in its own session (a Ctrl-C of the bench does not reach
// it), stdio on /dev/null (stderr to stderr_path when given).
inline pid_t SpawnDetached(const std::vector<std::string>& args, const std::string& stderr_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setsid();  // a Ctrl-C for the bench must not stop the agent behind its back
    int null = ::open("/dev/null", O_RDWR);
    int err = stderr_path.empty() ? null : ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err < 0 ? null : err, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// When a bench fails: the last 15 lines of the agent's log on stderr and,
// when keep_as is given, the whole log moved to keep_as (next to the
// scratch dir, which the clean-up removes).
inline void ReportAgentLog(const std::string& log, const std::string& keep_as = "") {
  if (log.empty()) return;
  auto text = sys::ReadFile(log, 256 << 20);
  if (text.ok()) {
    std::vector<std::string> lines = Split(*text, '\n');
    size_t from = lines.size() > 15 ? lines.size() - 15 : 0;
    std::fprintf(stderr, "%s: last lines of the agent log:\n", Name());
    for (size_t i = from; i < lines.size(); ++i) std::fprintf(stderr, "  %s\n", lines[i].c_str());
  }
  if (!keep_as.empty() && ::rename(log.c_str(), keep_as.c_str()) == 0) {
    std::fprintf(stderr, "%s: the whole agent log is in %s\n", Name(), keep_as.c_str());
  }
}

// Waits for our child pid to exit, up to timeout; true if it did.
inline bool ReapWithin(pid_t pid, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (MonotonicNanos() >= end) return false;
    ::usleep(5000);
  }
}

// The CLOCK_MONOTONIC time written by `test_helper timestamp FILE` (the
// helper's first instruction), once the file is complete; the file is
// removed. -1 after timeout.
inline int64_t WaitStamp(const std::string& path, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  while (MonotonicNanos() < end) {
    auto text = sys::ReadFile(path, 64);
    if (text.ok() && !text->empty() && text->back() == '\n') {
      ::unlink(path.c_str());
      return std::strtoll(text->c_str(), nullptr, 10);
    }
    ::usleep(200);
  }
  return -1;
}

// Waits for a stamp like WaitStamp, but asleep in poll on an inotify watch
// of the stamp's dir between looks: WaitStamp looks every 200 us, which on
// a 2-core machine takes CPU from what the start waits for (the agent, its
// plugins, an OCI runtime) and not from a baseline the bench waits for
// blocked. Watch the dir once, Drain() before each start.
class StampWatch {
 public:
  // Empty error: watching dir (IN_CLOSE_WRITE, IN_MOVED_TO).
  std::string Watch(const std::string& dir) {
    fd_ = UniqueFd(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (fd_.get() < 0 || ::inotify_add_watch(fd_.get(), dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
      return "inotify on " + dir + ": " + std::strerror(errno);
    }
    return "";
  }
  void Drain() const {
    char buf[4096];
    while (::read(fd_.get(), buf, sizeof buf) > 0) {
    }
  }
  // The CLOCK_MONOTONIC time written to path (in the watched dir), once the
  // file is complete; the file is removed. -1 at deadline.
  int64_t Wait(const std::string& path, int64_t deadline) const {
    for (;;) {
      auto text = sys::ReadFile(path, 64);
      if (text.ok() && !text->empty() && text->back() == '\n') {
        ::unlink(path.c_str());
        return std::strtoll(text->c_str(), nullptr, 10);
      }
      int64_t left = deadline - MonotonicNanos();
      if (left <= 0) return -1;
      pollfd p = {fd_.get(), POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(std::min<int64_t>(left / kNanosPerMilli + 1, 1000)));
      Drain();
    }
  }

 private:
  UniqueFd fd_;
};

// The fork+exec floor, measured by `test_helper floor`: a small static
// process started once for the purpose, so the floor does not grow with the
// bench's own size (a process holding 1,000 tasks' state forks slower) and a
// ratio cannot improve because its baseline got slower. Requests go one at a
// time over pipes, so a bench can interleave them with what it measures.
class FloorProbe {
 public:
  FloorProbe() = default;
  FloorProbe(const FloorProbe&) = delete;
  FloorProbe& operator=(const FloorProbe&) = delete;
  // Empty error: started. env: the environment the probe (and so each child
  // it starts) gets; empty = ours.
  std::string Start(const std::string& helper, const std::vector<std::string>& env = {}) {
    std::vector<char*> envp;
    for (const std::string& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
    envp.push_back(nullptr);
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
    pid_ = ::fork();
    if (pid_ < 0) return std::string("fork: ") + std::strerror(errno);
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::signal(SIGINT, SIG_IGN);  // the bench's Ctrl-C handling closes the pipe instead
      const char* argv[] = {helper.c_str(), "floor", nullptr};
      ::execve(argv[0], const_cast<char* const*>(argv), env.empty() ? environ : envp.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = ::fdopen(out[0], "r");
    return from_ ? "" : std::string("fdopen: ") + std::strerror(errno);
  }
  ~FloorProbe() {
    if (to_ >= 0) ::close(to_);  // EOF: the helper exits
    if (from_) ::fclose(from_);
    if (pid_ > 0) ReapWithin(pid_, 5 * kNanosPerSecond);
  }
  pid_t pid() const { return pid_; }
  // Nanoseconds from before the fork until `test_helper timestamp file` wrote its clock.
  Result<int64_t> Stamp(const std::string& file) { return Ask("stamp " + file); }
  // Nanoseconds from before the first fork until k children have exec'd.
  Result<int64_t> Exec(int k) { return Ask("exec " + std::to_string(k)); }
  // Median nanoseconds of k runs of an OCI hook's floor: fork + execve of
  // prog with argv `args` (empty: [prog]) and an empty environment, a
  // 200-byte state JSON on a stdin pipe then closed, stdout and stderr pipes
  // read to EOF, waitpid. Words may not contain spaces; prog must exit 0.
  Result<int64_t> Run(int k, const std::string& prog, const std::vector<std::string>& args = {}) {
    std::string req = "run " + std::to_string(k) + " " + prog;
    for (const std::string& a : args) req += " " + a;
    return Ask(req);
  }

 private:
  Result<int64_t> Ask(const std::string& request) {
    std::string line = request + "\n";
    if (to_ < 0 || !sys::WriteAll(to_, line.data(), line.size(), "floor probe").ok()) {
      return Error(Code::kUnavailable, "floor probe: cannot write to test_helper floor");
    }
    char buf[512];
    if (!std::fgets(buf, sizeof buf, from_)) return Error(Code::kUnavailable, "floor probe: test_helper floor exited");
    buf[std::strcspn(buf, "\n")] = '\0';
    char* end = nullptr;
    long long ns = std::strtoll(buf, &end, 10);
    if (end == buf || *end != '\0' || ns < 0) return Error(Code::kInternal, std::string("floor probe: ") + buf);
    return static_cast<int64_t>(ns);
  }
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
};

// Every process whose environment holds marker ("K=V"): the tasks a
// bench started, for clean-up.
inline std::vector<pid_t> PidsWithEnv(const std::string& marker) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    auto env = sys::ReadFile(Format("/proc/%d/environ", pid), 1 << 20);
    if (!env.ok()) continue;
    for (const std::string& kv : Split(*env, '\0')) {
      if (kv == marker) {
        out.push_back(pid);
        break;
      }
    }
  }
  ::closedir(d);
  return out;
}

// A "Name:  value kB" field of /proc/<pid>/status or smaps_rollup, in KiB; -1 if absent.
inline long ProcKiB(pid_t pid, const char* file, const char* field) {
  auto text = sys::ReadFile(Format("/proc/%d/%s", pid, file), 1 << 16);
  if (!text.ok()) return -1;
  std::string key = std::string("\n") + field + ":";
  std::string all = "\n" + *text;
  size_t at = all.find(key);
  if (at == std::string::npos) return -1;
  return std::strtol(all.c_str() + at + key.size(), nullptr, 10);
}
inline long RssKiB(pid_t pid) { return ProcKiB(pid, "status", "VmRSS"); }

// Open fds of a process; -1 if unreadable.
inline int CountFds(pid_t pid) {
  DIR* d = ::opendir(Format("/proc/%d/fd", pid).c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

// One line of the memory split of a process, for the analysis.
inline void DescribeMemory(const char* who, pid_t pid) {
  Info("%s pid %d: VmRSS=%ld RssAnon=%ld RssFile=%ld RssShmem=%ld VmData=%ld VmPTE=%ld KiB; smaps_rollup "
       "Pss_Anon=%ld Pss_File=%ld Private_Dirty=%ld KiB; fds=%d",
       who, pid, RssKiB(pid), ProcKiB(pid, "status", "RssAnon"), ProcKiB(pid, "status", "RssFile"),
       ProcKiB(pid, "status", "RssShmem"), ProcKiB(pid, "status", "VmData"), ProcKiB(pid, "status", "VmPTE"),
       ProcKiB(pid, "smaps_rollup", "Pss_Anon"), ProcKiB(pid, "smaps_rollup", "Pss_File"),
       ProcKiB(pid, "smaps_rollup", "Private_Dirty"), CountFds(pid));
}

// VmRSS once pid sleeps (state S) and its RSS has not changed for stable_ms
// (at most 10 s, or until interrupted). The keeper drops its code pages up
// to 1 s after its last activity, so its figure needs a longer quiet period
// than the others.
inline long SettledRssKiB(pid_t pid, int stable_ms = 300) {
  long last = -2;
  int64_t since = MonotonicNanos();
  int64_t end = since + 10 * kNanosPerSecond;
  while (MonotonicNanos() < end && !g_interrupted) {
    ::usleep(50000);
    proc::ProcStat ps;
    if (!proc::ReadProcStat(pid, &ps)) return -1;
    long now = RssKiB(pid);
    if (now != last || ps.state != 'S') {
      last = now;
      since = MonotonicNanos();
    } else if (MonotonicNanos() - since >= stable_ms * kNanosPerMilli) {
      return now;
    }
  }
  return last;
}

// ---- an agent's API ---------------------------------------------------------

constexpr const char* kAgentService = "outpost.v1.Agent";
// Every task a benchmark starts carries <kMarkerVar>=<its scratch dir> in its
// environment, so that clean-up finds it (PidsWithEnv) whatever happened.
constexpr const char* kMarkerVar = "OUTPOST_BENCH_RUN";

// One call on a new connection to the agent's socket.
inline Result<std::string> CallOnce(const std::string& socket, const char* method, const std::string& payload,
                                    int64_t timeout) {
  auto client = wire::BlockingClient::Connect(socket, timeout);
  if (!client.ok()) return client.error();
  return client->Call(kAgentService, method, payload, timeout);
}

// The worker's pid from the Status API, once it answers (0 on timeout or
// when interrupted).
inline pid_t WaitForWorker(const std::string& socket, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  while (MonotonicNanos() < end && !g_interrupted) {
    auto reply = CallOnce(socket, "Status", "", kNanosPerSecond);
    if (reply.ok()) {
      PbOwned<outpost_v1_StatusResponse> resp(outpost_v1_StatusResponse_fields);
      if (resp.Decode(*reply, "StatusResponse").ok() && resp->pid > 0) return resp->pid;
    }
    ::usleep(20000);
  }
  return 0;
}

// DestroyTask of id, forced.
inline std::string DestroyRequest(const std::string& id) {
  outpost_v1_DestroyTaskRequest req = outpost_v1_DestroyTaskRequest_init_zero;
  req.id = PbStr(id);
  req.force = true;
  auto out = PbEncode(outpost_v1_DestroyTaskRequest_fields, &req, "DestroyTaskRequest");
  return out.ok() ? *out : std::string();
}

// RemoveJob / InspectJob of id.
inline std::string JobIdRequest(const std::string& id) {
  outpost_v1_JobIdRequest req = outpost_v1_JobIdRequest_init_zero;
  req.id = PbStr(id);
  auto out = PbEncode(outpost_v1_JobIdRequest_fields, &req, "JobIdRequest");
  return out.ok() ? *out : std::string();
}

// SubmitJob of a job document.
inline std::string SubmitJobRequest(const std::string& spec_json) {
  outpost_v1_SubmitJobRequest req = outpost_v1_SubmitJobRequest_init_zero;
  req.spec_json = PbStr(spec_json);
  auto out = PbEncode(outpost_v1_SubmitJobRequest_fields, &req, "SubmitJobRequest");
  return out.ok() ? *out : std::string();
}

// StartTask of a bare task `helper ARG1 ARG2` marked with marker_dir.
inline std::string StartRequest(const std::string& helper, const std::string& marker_dir, const std::string& id,
                                const std::string& arg1, const std::string& arg2) {
  std::string name = kMarkerVar, value = marker_dir;
  char* args[] = {PbStr(arg1), PbStr(arg2)};
  outpost_v1_EnvVar env = {PbStr(name), PbStr(value)};
  outpost_v1_StartTaskRequest req = outpost_v1_StartTaskRequest_init_zero;
  req.has_spec = true;
  req.spec.id = PbStr(id);
  req.spec.command = PbStr(helper);
  req.spec.args_count = 2;
  req.spec.args = args;
  req.spec.env_count = 1;
  req.spec.env = &env;
  auto out = PbEncode(outpost_v1_StartTaskRequest_fields, &req, "StartTaskRequest");
  return out.ok() ? *out : std::string();
}

struct Outcome {
  bool done = false;
  bool ok = false;
  Code code = Code::kOk;
  std::string reply;       // or the error message
  int64_t done_nanos = 0;  // monotonic time of the reply
};

// Calls method once per payload on one connection, at most `window` in
// flight. Stops issuing new calls once one fails with a deadline (the agent
// is stuck: waiting for more would only add time), and on SIGINT/SIGTERM if
// interruptible (not during clean-up). Calls never issued stay !done.
inline std::vector<Outcome> Pipeline(const std::string& socket, const char* method,
                                     const std::vector<std::string>& payloads, size_t window, int64_t call_timeout,
                                     bool interruptible) {
  std::vector<Outcome> out(payloads.size());
  auto loop = Loop::Create();
  if (!loop.ok()) return out;
  auto client = wire::RpcClient::Connect(loop->get(), socket);
  if (!client.ok()) return out;
  size_t next = 0, in_flight = 0;
  bool stuck = false;
  std::function<void()> issue = [&] {
    while (!stuck && !(interruptible && g_interrupted) && in_flight < window && next < payloads.size()) {
      size_t i = next++;
      ++in_flight;
      (*client)->Call(kAgentService, method, payloads[i], call_timeout, [&, i](Result<std::string> r) {
        --in_flight;
        out[i].done = true;
        out[i].done_nanos = MonotonicNanos();
        out[i].ok = r.ok();
        if (r.ok()) {
          out[i].reply = std::move(*r);
        } else {
          out[i].code = r.error().code();
          out[i].reply = r.error().message();
          if (r.error().code() == Code::kDeadlineExceeded || r.error().code() == Code::kUnavailable) stuck = true;
        }
        issue();
      });
    }
  };
  issue();
  while (in_flight > 0) (void)(*loop)->RunOnce(100 * kNanosPerMilli);
  return out;
}

// ---- clean-up of a bench's agent (also on failure and SIGINT) ----
// Each returns false when something had to be forced, which the bench
// reports as a failed run.

// RemoveJob of every job in *jobs through the API (a job already gone is
// fine); *jobs (a vector or set of ids) is emptied.
template <typename Ids>
bool RemoveJobsForCleanup(const std::string& socket, Ids* jobs, int64_t timeout_nanos) {
  if (jobs->empty()) return true;
  std::vector<std::string> reqs;
  for (const std::string& id : *jobs) reqs.push_back(JobIdRequest(id));
  bool ok = true;
  for (const Outcome& o : Pipeline(socket, "RemoveJob", reqs, 8, timeout_nanos, false)) {
    if (!o.done || (!o.ok && o.code != Code::kNotFound)) {
      ok = false;
      std::fprintf(stderr, "%s: RemoveJob in clean-up: %s\n", Name(), o.done ? o.reply.c_str() : "not attempted");
    }
  }
  jobs->clear();
  return ok;
}

// The keeper stops its worker and exits on SIGTERM; SIGKILL after 10 s.
// *keeper is reaped and set to 0.
inline bool StopKeeper(pid_t* keeper) {
  if (*keeper <= 0) return true;
  bool ok = true;
  ::kill(*keeper, SIGTERM);
  if (!ReapWithin(*keeper, 10 * kNanosPerSecond)) {
    std::fprintf(stderr, "%s: the keeper did not stop on SIGTERM; killing it\n", Name());
    ok = false;
    ::kill(*keeper, SIGKILL);
    ReapWithin(*keeper, 5 * kNanosPerSecond);
  }
  *keeper = 0;
  return ok;
}

// A worker the keeper left: killed only while it is still this run's (its
// command line names the run's config), never a reused pid.
inline void KillOwnWorker(pid_t worker, const std::string& config) {
  if (worker <= 0) return;
  proc::ProcStat ps;
  if (proc::ReadProcStat(worker, &ps) && ps.state != 'Z') {
    auto cmd = sys::ReadFile(Format("/proc/%d/cmdline", worker), 4096);
    if (cmd.ok() && cmd->find(config) != std::string::npos) ::kill(worker, SIGKILL);
  }
}

// Every process with marker in its environment (tasks, helpers): waits up
// to 0.5 s for them to go, then SIGKILLs what is left, for up to 3 s.
inline bool SweepMarker(const std::string& marker) {
  if (marker.empty()) return true;
  size_t killed = 0;
  for (int i = 0; i < 60; ++i) {
    std::vector<pid_t> strays = PidsWithEnv(marker);
    if (strays.empty()) break;
    if (i >= 10) {
      for (pid_t p : strays) {
        if (::kill(p, SIGKILL) == 0) ++killed;
      }
    }
    ::usleep(50000);
  }
  if (killed) Info("clean-up: %zu stray processes killed by the /proc sweep", killed);
  if (!PidsWithEnv(marker).empty()) std::fprintf(stderr, "%s: processes with %s survive!\n", Name(), marker.c_str());
  return killed == 0;
}

}  // namespace outpost::bench
