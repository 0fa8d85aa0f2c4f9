#include "keeper/keeper.h"

#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/clock.h"
#include "base/code_pages.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "keeper/channel.h"
#include "keeper/journal.h"
#include "proc/exit_status.h"

extern char** environ;

namespace outpost::keeper {

// ---- the keeper process ----------------------------------------------------

namespace {

constexpr int64_t kStopTimeoutNanos = 30LL * kNanosPerSecond;
// The code pages are dropped once the keeper has had nothing to do for this
// long: not between the exits of a task that crash-loops once a second (each
// drop would be followed by the same pages faulted in again at its next
// exit), and before an idle agent's resident set is measured (1.5 s of
// quiet in the benchmarks).
constexpr int64_t kQuietBeforeDropNanos = 1200 * kNanosPerMilli;
// A heartbeat deadline found this late means the keeper itself did not run
// (the whole agent frozen, a stopped keeper): not the worker's fault.
constexpr int64_t kOversleptNanos = kNanosPerSecond;

// Where to exec the agent binary from: the path we were started from, so a
// file replaced there (an upgrade) is what the next worker or keeper runs.
std::string ResolveSelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    std::string p(buf, static_cast<size_t>(n));
    // Replaced since we started: the kernel appends this to the old inode's path.
    const char kDeleted[] = " (deleted)";
    if (EndsWith(p, kDeleted)) p.resize(p.size() - (sizeof kDeleted - 1));
    return p;
  }
  // No /proc (early boot): the name execve() was given.
  const char* fn = reinterpret_cast<const char*>(::getauxval(AT_EXECFN));
  if (fn && *fn) return fn;
  return "/proc/self/exe";
}

std::string Str(int64_t v) { return std::to_string(v); }

// The keeper runs a few KiB of the agent binary's code, but start-up
// touches much more (base/code_pages.h): without a drop a static keeper
// idles at about 1.4 MiB RSS. The ranges are found once; dropping is then
// one madvise per range right before poll, so little code runs (and is
// mapped again) before we sleep.
// Drops the code pages (when asked) and sleeps in poll. Kept out of line and
// in the hot text section (grouped at the start of .text, with nothing else
// the keeper runs while idle), so that what runs between the drop and the
// sleep maps back one fault-around window, not the one of whatever function
// the loop would otherwise be inlined into.
[[gnu::noinline, gnu::hot]] int DropCodePagesAndPoll(const CodeRanges* drop, pollfd* pfd, nfds_t n, int timeout) {
  if (drop) {
    DropCodePages(*drop);
  }
  int r;
  do {
    r = ::poll(pfd, n, timeout);
  } while (r < 0 && errno == EINTR);
  return r;
}

// Writes s to stderr; for the forked child, which may only make raw syscalls.
void ChildWrite(const char* s) { (void)!::write(STDERR_FILENO, s, std::strlen(s)); }

class Keeper {
 public:
  Keeper(const std::vector<std::string>& args, const std::vector<int>& lock_fds) : args_(args) {
    for (int fd : lock_fds) {
      lock_fds_.push_back(fd);
      lock_fd_args_.push_back(kLockFdFlag + std::to_string(fd));
    }
  }
  Status Init(int journal_fd);
  int Run();

 private:
  void BuildArgv();
  void StartWorker();
  [[noreturn]] void WorkerChild(int fd);
  void ScheduleRestart(int64_t uptime_nanos, const char* why);
  void HandleReadable();
  void DrainSignals();
  void OnSignal(const signalfd_siginfo& si);
  void ReapChildren();
  void OnTaskExit(pid_t pid, int status);
  void OnWorkerExit(int status);
  static bool HasChildren();
  void RequestStop(StopRequest what, const char* signame);
  void ExecUpgrade();
  void RunTimers();
  int PollTimeoutMillis() const;

  std::vector<std::string> args_;
  std::vector<int> lock_fds_;               // owned by the caller (agent/dir_claims)
  std::vector<std::string> lock_fd_args_;   // --keeper-lock-fd=N, for the upgrade
  std::string exe_;
  std::vector<char*> worker_argv_;   // ... --worker --keeper-fd=N [--keeper-empty]
  std::vector<char*> upgrade_argv_;  // ... --keeper-journal-fd=N
  char keeper_fd_arg_[48] = {};
  char journal_fd_arg_[48] = {};
  const std::string agent_word_ = "agent";
  const std::string worker_word_ = kWorkerFlag;
  const std::string empty_word_ = kKeeperEmptyFlag;

  UniqueFd sigfd_;
  ExitJournal journal_;
  KeeperChannel channel_{&journal_};
  RestartBackoff backoff_;

  pid_t worker_pid_ = 0;
  int64_t worker_started_ = 0;
  bool ever_ready_ = false;  // some worker said hello (or we were upgraded)
  int64_t restart_at_ = -1;  // monotonic deadlines; -1 = none
  int64_t kill_at_ = -1;
  // Heartbeat (docs/supervision.md): armed by the worker's first beat, moved
  // on by each one; -1 = not watching (no beat yet, or beats turned off).
  int64_t beat_deadline_ = -1;
  int64_t beat_timeout_ = 0;
  bool killed_unresponsive_ = false;
  StopRequest stop_ = StopRequest::kNone;
  CodeRanges code_;
  bool trim_pending_ = true;  // we ran code since the last DropCodePages
  int64_t last_active_ = 0;   // when we last ran code for a wake-up
  void Ran() {
    trim_pending_ = true;
    last_active_ = MonotonicNanos();
  }
  bool done_ = false;
  int exit_code_ = 0;
};

Status Keeper::Init(int journal_fd) {
  // Daemonising descendants of tasks are reparented to us, not to init, so
  // their exits are journaled too and nothing escapes supervision.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    log::Warn("keeper: cannot become a child subreaper; orphaned task descendants go to init",
              {{"error", std::strerror(errno)}});
  }
  // A log line to a closed pipe (`outpost agent | logger`, logger gone) must
  // not kill the parent of every task. The worker gets the default back.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR2}) sigaddset(&set, s);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return ErrnoError("sigprocmask");
  sigfd_.Reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sigfd_) return ErrnoError("signalfd");

  exe_ = ResolveSelfExe();
  BuildArgv();
  code_ = FindCodeRanges();

  if (journal_fd >= 0) {
    // We are the same keeper (same pid), re-executed by an upgrade: a worker
    // ran before, so failures from now on are retried, never fatal.
    ever_ready_ = true;
    UniqueFd fd(journal_fd);
    Status st = LoadJournal(fd.get(), &journal_, &channel_);
    if (!st.ok()) {
      log::Error("keeper: exit journal from before the upgrade is damaged; kept what was readable",
                 {{"error", st.error().message()}, {"exits", Str(static_cast<int64_t>(journal_.size()))}});
    }
  }
  return OkStatus();
}

void Keeper::BuildArgv() {
  // Built once; only the fd numbers in the two fixed buffers change later.
  auto base = [&](std::vector<char*>* v) {
    v->push_back(const_cast<char*>(exe_.c_str()));
    v->push_back(const_cast<char*>(agent_word_.c_str()));
    for (const std::string& a : args_) v->push_back(const_cast<char*>(a.c_str()));
  };
  base(&worker_argv_);
  worker_argv_.push_back(const_cast<char*>(worker_word_.c_str()));
  worker_argv_.push_back(keeper_fd_arg_);
  worker_argv_.push_back(nullptr);  // --keeper-empty or the end (StartWorker)
  worker_argv_.push_back(nullptr);
  base(&upgrade_argv_);
  for (const std::string& a : lock_fd_args_) upgrade_argv_.push_back(const_cast<char*>(a.c_str()));
  upgrade_argv_.push_back(journal_fd_arg_);
  upgrade_argv_.push_back(nullptr);
}

int Keeper::Run() {
  log::Info(ever_ready_ ? "keeper re-executed after an upgrade" : "keeper started",
            {{"pid", Str(::getpid())},
             {"version", OUTPOST_VERSION},
             {"binary", exe_},
             {"unacked_exits", Str(static_cast<int64_t>(journal_.size()))},
             {"held_fifos", Str(static_cast<int64_t>(channel_.held_count()))}});
  ReapChildren();  // exits that happened while an upgrade exec was under way
  StartWorker();
  while (!done_) {
    pollfd pfd[2] = {{sigfd_.get(), POLLIN, 0}, {-1, 0, 0}};
    nfds_t n = 1;
    if (channel_.attached()) {
      pfd[1].fd = channel_.fd();
      pfd[1].events = static_cast<short>(POLLIN | (channel_.want_write() ? POLLOUT : 0));
      n = 2;
    }
    // Decide on the drop first: the timeout must not count a drop that is
    // about to happen (a zero timeout would wake the loop right after it).
    const bool drop = trim_pending_ && MonotonicNanos() - last_active_ >= kQuietBeforeDropNanos;
    if (drop) trim_pending_ = false;
    const int timeout = PollTimeoutMillis();
    int r = DropCodePagesAndPoll(drop ? &code_ : nullptr, pfd, n, timeout);
    if (r > 0) Ran();  // handling it runs code (a bare timeout wake-up hardly does)
    if (r < 0) {
      // Only EINVAL/ENOMEM are possible here; neither is a reason to leave
      // the tasks without a parent. Back off briefly and go on.
      log::Error("keeper: poll failed", {{"error", std::strerror(errno)}});
      ::usleep(100000);
      continue;
    }
    if (n == 2 && pfd[1].revents != 0) {
      if (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)) HandleReadable();
      if ((pfd[1].revents & POLLOUT) && channel_.attached()) channel_.OnWritable();
    }
    if (pfd[0].revents & POLLIN) DrainSignals();
    RunTimers();
  }
  log::Info("keeper stopped", {{"exit_code", Str(exit_code_)},
                               {"unacked_exits", Str(static_cast<int64_t>(journal_.size()))}});
  return exit_code_;
}

void Keeper::StartWorker() {
  restart_at_ = -1;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
    log::Error("keeper: socketpair for the worker failed", {{"error", std::strerror(errno)}});
    ScheduleRestart(0, "socketpair failed");
    return;
  }
  std::snprintf(keeper_fd_arg_, sizeof keeper_fd_arg_, "%s%d", kKeeperFdFlag, sv[1]);
  // No child and no exit held: the worker would wait for a replay of
  // nothing, and no task it recovers can exit through us (an earlier
  // keeper's tasks went to init with it). It need not wait for the replay.
  const bool empty = journal_.empty() && !HasChildren();
  worker_argv_[worker_argv_.size() - 2] = empty ? const_cast<char*>(empty_word_.c_str()) : nullptr;
  pid_t pid = ::fork();
  if (pid == 0) WorkerChild(sv[1]);
  ::close(sv[1]);
  if (pid < 0) {
    log::Error("keeper: fork of the worker failed", {{"error", std::strerror(errno)}});
    ::close(sv[0]);
    ScheduleRestart(0, "fork failed");
    return;
  }
  channel_.Attach(UniqueFd(sv[0]));
  worker_pid_ = pid;
  worker_started_ = MonotonicNanos();
  log::Info("worker started", {{"pid", Str(pid)}, {"binary", exe_}});
}

void Keeper::WorkerChild(int fd) {
  // Only raw syscalls from here to execve.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);  // an ignored signal would stay ignored across execve
  if (::fcntl(fd, F_SETFD, 0) != 0) _exit(126);  // the one fd the worker inherits
  ::execve(exe_.c_str(), worker_argv_.data(), environ);
  int err = errno;
  char num[16];
  std::snprintf(num, sizeof num, "%d", err);
  ChildWrite("outpost: keeper: cannot execute the worker ");
  ChildWrite(exe_.c_str());
  ChildWrite(": errno ");
  ChildWrite(num);
  ChildWrite("\n");
  _exit(err == ENOENT ? 127 : 126);
}

void Keeper::ScheduleRestart(int64_t uptime_nanos, const char* why) {
  int64_t delay = backoff_.NextDelay(uptime_nanos);
  restart_at_ = MonotonicNanos() + delay;
  log::Info("restarting the worker", {{"in", FormatDuration(delay)}, {"reason", why}});
}

void Keeper::HandleReadable() {
  KeeperChannel::ReadResult r = channel_.OnReadable();
  if (r.hello) {
    ever_ready_ = true;
    log::Info("worker ready", {{"pid", Str(r.worker_pid)}, {"unacked_exits", Str(static_cast<int64_t>(r.replay))}});
  }
  if (r.beat && worker_pid_ > 0 && stop_ == StopRequest::kNone) {
    beat_timeout_ = r.beat_timeout_nanos;
    beat_deadline_ = beat_timeout_ > 0 ? MonotonicNanos() + beat_timeout_ : -1;
  }
  if (r.eof && worker_pid_ > 0) log::Debug("worker closed its keeper socket", {{"pid", Str(worker_pid_)}});
}

void Keeper::DrainSignals() {
  signalfd_siginfo si[8];
  for (;;) {
    ssize_t n = sys::Read(sigfd_.get(), si, sizeof si);
    if (n <= 0) return;
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof si[0]; ++i) OnSignal(si[i]);
    if (done_) return;
  }
}

void Keeper::OnSignal(const signalfd_siginfo& si) {
  switch (si.ssi_signo) {
    case SIGCHLD:
      ReapChildren();
      break;
    case SIGTERM:
      RequestStop(StopRequest::kStop, "SIGTERM");
      break;
    case SIGINT:
      RequestStop(StopRequest::kStop, "SIGINT");
      break;
    case SIGUSR2:
      RequestStop(StopRequest::kUpgrade, "SIGUSR2");
      break;
    case SIGHUP:
      if (worker_pid_ > 0) {
        log::Info("SIGHUP: forwarding to the worker (configuration reload)", {{"pid", Str(worker_pid_)}});
        ::kill(worker_pid_, SIGHUP);
      } else {
        log::Info("SIGHUP: no worker running; the next one reads the configuration when it starts");
      }
      break;
    default:
      break;
  }
}

void Keeper::ReapChildren() {
  for (;;) {
    int status = 0;
    pid_t pid = sys::RetryEintr([&] { return ::waitpid(-1, &status, WNOHANG); });
    if (pid <= 0) return;  // 0: none left exited; -1 ECHILD: no children at all
    if (pid == worker_pid_) {
      OnWorkerExit(status);
    } else {
      OnTaskExit(pid, status);
    }
  }
}

void Keeper::OnTaskExit(pid_t pid, int status) {
  uint64_t dropped = journal_.dropped();
  channel_.OnTaskExit(ExitRecord{pid, status, WallNanos()});
  if (log::GetLevel() <= log::Level::kDebug) {
    char buf[48];
    proc::DescribeExitStatus(proc::DecodeWaitStatus(status), buf, sizeof buf);
    log::Debug("task exited", {{"pid", Str(pid)}, {"status", buf}});
  }
  uint64_t now = journal_.dropped();
  if (now != dropped && (now & (now - 1)) == 0) {  // 1, 2, 4, 8...: a flood stays a few lines
    log::Warn("exit journal full: dropped the oldest unacknowledged task exit",
              {{"dropped_total", Str(static_cast<int64_t>(now))}});
  }
}

void Keeper::OnWorkerExit(int status) {
  // A hello or acks may still sit in the socket: let them count.
  if (channel_.attached()) HandleReadable();
  channel_.Detach();
  const pid_t pid = worker_pid_;
  const int64_t uptime = MonotonicNanos() - worker_started_;
  worker_pid_ = 0;
  kill_at_ = -1;
  beat_deadline_ = -1;
  const bool unresponsive = killed_unresponsive_;
  killed_unresponsive_ = false;
  char buf[48];
  proc::DescribeExitStatus(proc::DecodeWaitStatus(status), buf, sizeof buf);
  log::Info("worker exited", {{"pid", Str(pid)}, {"status", buf}, {"uptime", FormatDuration(uptime)}});
  // Exiting is only for a first start that failed with nothing to look
  // after: no live children (tasks a worker may have spawned before its
  // hello) and no journaled exits.
  const bool may_have_tasks = ever_ready_ || !journal_.empty() || HasChildren();
  WorkerExitDecision d = DecideOnWorkerExit(stop_, may_have_tasks, status);
  switch (d.action) {
    case WorkerExitDecision::kExitKeeper:
      if (stop_ == StopRequest::kNone) {
        log::Error("the worker failed to start; the keeper exits with its status", {{"exit_code", Str(d.exit_code)}});
      }
      done_ = true;
      exit_code_ = d.exit_code;
      break;
    case WorkerExitDecision::kExecUpgrade:
      ExecUpgrade();
      break;
    case WorkerExitDecision::kRestart:
      ScheduleRestart(uptime, unresponsive ? "the worker was unresponsive (no heartbeat)"
                              : WIFEXITED(status) && WEXITSTATUS(status) == 2
                                  ? "configuration error: fix the file; the keeper keeps the tasks and retries"
                                  : "worker exited unexpectedly");
      break;
  }
}

bool Keeper::HasChildren() {
  // WNOWAIT: only look. 0 = we have children (exited or not); -1 ECHILD = none.
  siginfo_t si;
  std::memset(&si, 0, sizeof si);
  return sys::RetryEintr([&] { return ::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT); }) == 0;
}

void Keeper::RequestStop(StopRequest what, const char* signame) {
  if (stop_ == StopRequest::kStop || stop_ == what) {
    log::Info(std::string(signame) + ": already stopping");
    return;
  }
  stop_ = what;
  restart_at_ = -1;
  beat_deadline_ = -1;  // the stop has its own deadline (kill_at_)
  if (what == StopRequest::kStop) {
    log::Info(std::string("stopping on ") + signame + "; tasks keep running for the next agent",
              {{"worker", Str(worker_pid_)}});
  } else {
    log::Info(std::string(signame) + ": upgrade: stopping the worker, then executing the binary again",
              {{"binary", exe_}, {"worker", Str(worker_pid_)}});
  }
  if (worker_pid_ > 0) {
    ::kill(worker_pid_, SIGTERM);
    ::kill(worker_pid_, SIGCONT);  // a stopped worker must see it too
    if (kill_at_ < 0) kill_at_ = MonotonicNanos() + kStopTimeoutNanos;
    return;
  }
  if (what == StopRequest::kStop) {
    done_ = true;
    exit_code_ = 0;
  } else {
    ExecUpgrade();
  }
}

void Keeper::ExecUpgrade() {
  UniqueFd mfd(::memfd_create("outpost-exit-journal", MFD_CLOEXEC));
  Status st = mfd ? SaveJournal(journal_, mfd.get(), &channel_) : Status(ErrnoError("memfd_create"));
  if (st.ok() && ::lseek(mfd.get(), 0, SEEK_SET) != 0) st = ErrnoError("lseek");
  if (st.ok() && ::fcntl(mfd.get(), F_SETFD, 0) != 0) st = ErrnoError("fcntl");
  if (st.ok()) {
    std::snprintf(journal_fd_arg_, sizeof journal_fd_arg_, "%s%d", kJournalFdFlag, mfd.get());
    log::Info("upgrade: executing", {{"binary", exe_},
                                     {"unacked_exits", Str(static_cast<int64_t>(journal_.size()))},
                                     {"held_fifos", Str(static_cast<int64_t>(channel_.held_count()))}});
    // Blocked signals stay blocked and pending across execve, children stay
    // ours, and the held FIFOs stay open: the new image picks all of it up.
    // So do the directory locks: a lock released for the length of the
    // execve would let another agent take the directories.
    channel_.SetHeldCloseOnExec(false);
    for (int fd : lock_fds_) (void)::fcntl(fd, F_SETFD, 0);
    ::execve(exe_.c_str(), upgrade_argv_.data(), environ);
    st = ErrnoError("execve '" + exe_ + "'");
    for (int fd : lock_fds_) (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
    channel_.SetHeldCloseOnExec(true);
  }
  log::Error("upgrade failed; this keeper carries on with a new worker", {{"error", st.error().message()}});
  stop_ = StopRequest::kNone;
  StartWorker();
}

void Keeper::RunTimers() {
  const int64_t now = MonotonicNanos();
  if (kill_at_ >= 0 && now >= kill_at_) {
    kill_at_ = -1;
    Ran();
    if (worker_pid_ > 0) {
      log::Warn("the worker did not stop in time; killing it", {{"pid", Str(worker_pid_)},
                                                                {"timeout", FormatDuration(kStopTimeoutNanos)}});
      ::kill(worker_pid_, SIGKILL);
    }
  }
  if (beat_deadline_ >= 0 && now >= beat_deadline_) {
    Ran();
    const int64_t late = now - beat_deadline_;
    if (late > kOversleptNanos) {
      beat_deadline_ = now + beat_timeout_;
      log::Info("the keeper itself did not run for a while; giving the worker a new heartbeat period");
    } else {
      beat_deadline_ = -1;
      if (worker_pid_ > 0) {
        log::Warn("worker unresponsive: no heartbeat for " + FormatDuration(beat_timeout_) + "; killing pid " +
                  Str(worker_pid_));
        killed_unresponsive_ = true;
        ::kill(worker_pid_, SIGKILL);
      }
    }
  }
  if (restart_at_ >= 0 && now >= restart_at_ && stop_ == StopRequest::kNone && worker_pid_ == 0) {
    Ran();
    StartWorker();
  }
}

int Keeper::PollTimeoutMillis() const {
  int64_t next = -1;
  // A pending page drop waits until the keeper has been quiet long enough.
  const int64_t trim_at = trim_pending_ ? last_active_ + kQuietBeforeDropNanos : -1;
  for (int64_t d : {restart_at_, kill_at_, beat_deadline_, trim_at}) {
    if (d >= 0 && (next < 0 || d < next)) next = d;
  }
  if (next < 0) return -1;
  int64_t left = next - MonotonicNanos();
  if (left <= 0) return 0;
  int64_t ms = (left + kNanosPerMilli - 1) / kNanosPerMilli;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace

int RunKeeper(const std::vector<std::string>& agent_args, int journal_fd, const std::vector<int>& lock_fds) {
  // Heap, not stack: the journal ring is 64 KiB. It is default-initialised,
  // so its pages stay untouched until exits arrive.
  std::unique_ptr<Keeper> keeper(new Keeper(agent_args, lock_fds));
  Status st = keeper->Init(journal_fd);
  if (!st.ok()) {
    log::Error("keeper failed to start", {{"error", st.error().message()}});
    return 1;
  }
  return keeper->Run();
}

}  // namespace outpost::keeper
