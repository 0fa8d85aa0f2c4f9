// The exec driver's `outpost exec` sessions: a command run in a running
// task's context (its environment as the process has it, its cgroup,
// identity, rlimits and working dir), with bounded output and a deadline.
// And TaskStats: a task's process group as /proc shows it.
#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "driver/exec/exec_driver.h"
#include "driver/exec/task.h"
#include "net/netns.h"
#include "proc/procfs.h"
#include "proc/spawn.h"

namespace outpost::driver {

void ExecDriver::ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                          ExecCallback done) {
  ExecTaskTry(id, cmd, timeout_nanos, std::move(done), 0);
}

void ExecDriver::ExecTaskTry(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                             ExecCallback done, int attempt) {
  Task* t = Find(id);
  if (!t) return done(NotFound());
  if (cmd.empty()) return done(Error(Code::kInvalidArgument, "exec: command is empty"));
  if (t->run_state == TaskState::kExited) {
    return done(Error(Code::kFailedPrecondition, "task " + id + " is not running"));
  }
  if (timeout_nanos <= 0) timeout_nanos = 60LL * kNanosPerSecond;
  const KeptConfig& cfg = t->config;
  // The task's context: its environment as the process really has it, its
  // cgroup, identity, rlimits and working dir.
  proc::ChildRunRequest req;
  auto environ = sys::ReadFile(Format("/proc/%d/environ", t->pid), 1 << 20);
  if (!environ.ok()) return done(environ.error().Wrap("exec: cannot read the task's environment"));
  for (const std::string& kv : Split(*environ, '\0')) {
    if (!kv.empty()) req.env.push_back(kv);
  }
  if (req.env.empty()) {
    // Every task has OUTPOST_TASK_* at least: none means the kernel has not
    // set up the new image's environment yet (the start returns as soon as
    // the task's exec has replaced its memory, a little before). Again in
    // 1 ms, for up to a second.
    if (attempt >= 1000) return done(Error(Code::kUnavailable, "exec: the task's environment is empty"));
    auto timer = std::make_shared<Loop::TimerId>(0);
    *timer = loop_->AddTimer(kNanosPerMilli, [this, timer, id, cmd, timeout_nanos, done, attempt] {
      exec_retries_.erase(*timer);
      ExecTaskTry(id, cmd, timeout_nanos, done, attempt + 1);
    });
    exec_retries_.insert(*timer);
    return;
  }
  std::string path_var = kDefaultPath;
  for (const std::string& kv : req.env) {
    if (StartsWith(kv, "PATH=")) path_var = kv.substr(5);
  }
  int exit_code = 0;
  auto path = proc::ResolveCommand(cmd[0], path_var, &exit_code);
  if (!path.ok()) return done(path.error());
  auto rlimits = proc::TaskRlimits(cfg.rlimits);
  if (!rlimits.ok()) return done(rlimits.error());
  req.path = *path;
  req.argv = cmd;
  req.workdir = cfg.exec_dir;
  req.merge_stderr = true;
  req.output_limit = options_.exec_output_limit;
  req.timeout_nanos = timeout_nanos;
  req.cgroup = cfg.cgroup;
  req.set_credentials = cfg.switch_user;
  req.creds.uid = cfg.uid;
  req.creds.gid = cfg.gid;
  req.creds.groups = cfg.groups;
  req.rlimits = std::move(*rlimits);
  // The task's network and hostname: a session sees what the task sees.
  UniqueFd netns_fd;
  if (cfg.net && !cfg.net->netns.empty()) {
    auto fd = net::OpenNetns(cfg.net->netns);
    if (!fd.ok()) return done(fd.error().Wrap("exec: task network namespace"));
    netns_fd = std::move(*fd);
    req.netns_fd = netns_fd.get();
  }
  if (cfg.net) req.hostname = cfg.net->hostname;
  uint64_t session = next_session_++;
  auto run = proc::ChildRun::Start(loop_, std::move(req), [this, session, done](const proc::ChildRunResult& r) {
    if (r.timed_out) {
      done(Error(Code::kDeadlineExceeded, "exec: command timed out and was killed"));
    } else {
      ExecResult er;
      er.exit_code = r.exit.exit_code;
      er.output = r.out;
      er.truncated = r.out_dropped > 0;
      done(std::move(er));
    }
    sessions_.erase(session);  // destroys the finished run
  });
  if (!run.ok()) return done(run.error());
  sessions_[session] = std::move(*run);
}

void ExecDriver::TaskStats(const std::string& id, StatsCallback done) {
  Task* t = Find(id);
  if (!t) return done(NotFound());
  driver::TaskStats s;
  s.timestamp_unix_nanos = WallNanos();
  if (t->run_state == TaskState::kExited) return done(s);
  int64_t now = MonotonicNanos();
  std::vector<pid_t> members = proc::ProcessGroupMembers(t->pid);
  if (members.empty()) members.push_back(t->pid);
  uint64_t user = 0, sys_ticks = 0, pages = 0;
  for (pid_t p : members) {
    proc::ProcStat ps;
    if (!proc::ReadProcStat(p, &ps)) continue;
    user += ps.utime_ticks;
    sys_ticks += ps.stime_ticks;
    pages += ps.rss_pages;
  }
  uint64_t ticks = user + sys_ticks;
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
  done(s);
}

}  // namespace outpost::driver
