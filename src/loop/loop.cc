#include "loop/loop.h"

#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/code_pages.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost {

namespace {

// epoll user data: the fd in the low 32 bits, the registration generation in
// the high 32 bits. An event whose generation no longer matches the live
// registration belongs to an fd that was removed (and maybe reused) earlier
// in the same batch and is dropped.
uint64_t PackData(int fd, uint32_t generation) {
  return (static_cast<uint64_t>(generation) << 32) | static_cast<uint32_t>(fd);
}

// waitid(P_PIDFD) arrived in 5.4, pidfd_open in 5.3; on 5.3 waitid by pid
// works just as well because the pidfd only serves as the wake-up.
int WaitStatusFromSiginfo(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return (info.si_status & 0xff) << 8;
  // CLD_KILLED / CLD_DUMPED: encode like waitpid does.
  return (info.si_status & 0x7f) | (info.si_code == CLD_DUMPED ? 0x80 : 0);
}

}  // namespace

Result<std::unique_ptr<Loop>> Loop::Create() {
  std::unique_ptr<Loop> loop(new Loop());
  loop->epfd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!loop->epfd_) return ErrnoError("epoll_create1");
  loop->timerfd_.Reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!loop->timerfd_) return ErrnoError("timerfd_create");
  Loop* raw = loop.get();
  OUTPOST_RETURN_IF_ERROR(loop->AddFd(loop->timerfd_.get(), EPOLLIN, [raw](uint32_t) { raw->OnTimerFd(); }));
  return loop;
}

Loop::~Loop() {
  // Give the process its signal mask back so a later Loop (tests) or an
  // exec'd child does not inherit blocked signals.
  if (mask_saved_) ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

Status Loop::AddFd(int fd, uint32_t events, FdCallback cb) {
  if (fds_.count(fd)) return Error(Code::kAlreadyExists, Format("fd %d is already registered", fd));
  auto entry = std::make_shared<FdEntry>();
  entry->generation = next_generation_++;
  if (next_generation_ == 0) next_generation_ = 1;
  entry->cb = std::move(cb);
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = PackData(fd, entry->generation);
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return ErrnoError(Format("epoll add fd %d", fd));
  fds_[fd] = std::move(entry);
  return OkStatus();
}

Status Loop::ModifyFd(int fd, uint32_t events) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return Error(Code::kNotFound, Format("fd %d is not registered", fd));
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = PackData(fd, it->second->generation);
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) return ErrnoError(Format("epoll mod fd %d", fd));
  return OkStatus();
}

void Loop::RemoveFd(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  // EBADF/ENOENT are fine here: the fd may already be closed by its owner.
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
  fds_.erase(it);
}

Loop::TimerId Loop::AddTimer(int64_t delay_nanos, TimerCallback cb) {
  if (delay_nanos < 0) delay_nanos = 0;
  return AddTimerAt(MonotonicNanos() + delay_nanos, std::move(cb));
}

Loop::TimerId Loop::AddTimerAt(int64_t deadline, TimerCallback cb) {
  uint64_t seq = next_timer_seq_++;
  timers_.emplace(Timer{deadline, seq}, std::move(cb));
  timer_deadlines_[seq] = deadline;
  if (armed_deadline_ < 0 || deadline < armed_deadline_) ArmTimerFd();
  return seq;
}

bool Loop::CancelTimer(TimerId id) {
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return false;
  timers_.erase(Timer{it->second, id});
  timer_deadlines_.erase(it);
  // The timerfd may stay armed for the cancelled deadline; OnTimerFd then
  // finds nothing due and re-arms. Cheaper than re-arming on every cancel.
  return true;
}

void Loop::ArmTimerFd() {
  itimerspec its{};
  if (timers_.empty()) {
    armed_deadline_ = -1;
  } else {
    int64_t deadline = timers_.begin()->first.deadline;
    if (deadline <= 0) deadline = 1;  // 0 would disarm the timerfd
    its.it_value.tv_sec = deadline / kNanosPerSecond;
    its.it_value.tv_nsec = deadline % kNanosPerSecond;
    armed_deadline_ = deadline;
  }
  if (::timerfd_settime(timerfd_.get(), TFD_TIMER_ABSTIME, &its, nullptr) != 0) {
    log::Error("timerfd_settime failed", {{"error", std::strerror(errno)}});
  }
}

void Loop::OnTimerFd() {
  uint64_t expirations;
  (void)sys::Read(timerfd_.get(), &expirations, sizeof expirations);
  int64_t now = MonotonicNanos();
  // Only timers due now run in this turn; a timer added by a callback with
  // zero delay runs on the next turn, so a re-arming timer cannot starve fds.
  std::vector<TimerId> due;
  for (auto& [t, cb] : timers_) {
    if (t.deadline > now) break;
    due.push_back(t.seq);
  }
  for (TimerId id : due) {
    auto it = timer_deadlines_.find(id);
    if (it == timer_deadlines_.end()) continue;  // cancelled by an earlier callback
    auto node = timers_.extract(Timer{it->second, id});
    timer_deadlines_.erase(it);
    node.mapped()();
  }
  ArmTimerFd();
}

Status Loop::UpdateSignalMask() {
  sigset_t mask;
  sigemptyset(&mask);
  for (auto& [signo, cb] : signals_) sigaddset(&mask, signo);
  if (sigchld_for_children_) sigaddset(&mask, SIGCHLD);
  if (!mask_saved_) {
    if (::sigprocmask(SIG_BLOCK, nullptr, &original_mask_) != 0) return ErrnoError("sigprocmask");
    mask_saved_ = true;
  }
  sigset_t block = original_mask_;
  for (int s = 1; s < NSIG; ++s) {
    if (sigismember(&mask, s) == 1) sigaddset(&block, s);
  }
  if (::sigprocmask(SIG_SETMASK, &block, nullptr) != 0) return ErrnoError("sigprocmask");
  if (!signalfd_) {
    int fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) return ErrnoError("signalfd");
    signalfd_.Reset(fd);
    OUTPOST_RETURN_IF_ERROR(AddFd(fd, EPOLLIN, [this](uint32_t) { OnSignalFd(); }));
  } else if (::signalfd(signalfd_.get(), &mask, 0) < 0) {
    return ErrnoError("signalfd update");
  }
  return OkStatus();
}

Status Loop::AddSignal(int signo, SignalCallback cb) {
  if (signo <= 0 || signo >= NSIG) return Error(Code::kInvalidArgument, Format("bad signal number %d", signo));
  signals_[signo] = std::move(cb);
  return UpdateSignalMask();
}

void Loop::RemoveSignal(int signo) {
  if (signals_.erase(signo)) (void)UpdateSignalMask();
}

void Loop::OnSignalFd() {
  for (;;) {
    signalfd_siginfo info;
    ssize_t n = sys::Read(signalfd_.get(), &info, sizeof info);
    if (n != static_cast<ssize_t>(sizeof info)) return;  // EAGAIN: drained
    int signo = static_cast<int>(info.ssi_signo);
    if (signo == SIGCHLD && sigchld_for_children_) ReapFallbackChildren();
    auto it = signals_.find(signo);
    if (it != signals_.end()) {
      SignalCallback cb = it->second;  // the callback may remove itself
      cb(info);
    }
  }
}

Status Loop::WatchChild(pid_t pid, ChildCallback cb) {
  if (pid <= 0) return Error(Code::kInvalidArgument, Format("bad pid %d", pid));
  if (children_.count(pid)) return Error(Code::kAlreadyExists, Format("pid %d is already watched", pid));
  auto watch = std::make_shared<ChildWatch>();
  watch->cb = std::move(cb);
  if (pidfd_supported_) {
    int fd = sys::PidfdOpen(pid);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
      // EPERM: seccomp filters in some sandboxes reject pidfd_open.
      pidfd_supported_ = false;
    } else if (fd < 0) {
      return ErrnoError(Format("pidfd_open %d", pid));
    } else {
      // pidfd_open does not take O_NONBLOCK/O_CLOEXEC flags on old kernels;
      // it always sets CLOEXEC, and a pidfd never blocks on read readiness.
      watch->pidfd.Reset(fd);
      Status st = AddFd(fd, EPOLLIN, [this, pid](uint32_t) { OnChildPidfd(pid); });
      if (!st.ok()) return st;
      children_[pid] = std::move(watch);
      return OkStatus();
    }
  }
  if (!sigchld_for_children_) {
    sigchld_for_children_ = true;
    OUTPOST_RETURN_IF_ERROR(UpdateSignalMask());
  }
  children_[pid] = std::move(watch);
  // The child may have exited before SIGCHLD was blocked and routed here.
  Defer([this] { ReapFallbackChildren(); });
  return OkStatus();
}

void Loop::UnwatchChild(pid_t pid) {
  auto it = children_.find(pid);
  if (it == children_.end()) return;
  if (it->second->pidfd) RemoveFd(it->second->pidfd.get());
  children_.erase(it);
}

void Loop::OnChildPidfd(pid_t pid) {
  auto it = children_.find(pid);
  if (it == children_.end()) return;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  int r = sys::RetryEintr([&] { return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG); });
  if (r == 0 && info.si_pid == 0) return;  // spurious: not exited yet
  std::shared_ptr<ChildWatch> watch = it->second;
  RemoveFd(watch->pidfd.get());
  children_.erase(it);
  // r < 0 (ECHILD): someone else reaped it; report an unknown status.
  int status = r == 0 ? WaitStatusFromSiginfo(info) : (255 << 8);
  watch->cb(pid, status);
}

void Loop::ReapFallbackChildren() {
  std::vector<pid_t> pids;
  for (auto& [pid, w] : children_) {
    if (!w->pidfd) pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    pid_t r = sys::RetryEintr([&] { return ::waitpid(pid, &status, WNOHANG); });
    if (r == 0) continue;
    auto it = children_.find(pid);
    if (it == children_.end()) continue;
    std::shared_ptr<ChildWatch> watch = it->second;
    children_.erase(it);
    watch->cb(pid, r == pid ? status : (255 << 8));
  }
}

void Loop::Defer(std::function<void()> cb) { deferred_.push_back(std::move(cb)); }

void Loop::RunDeferred() {
  // Index loop: callbacks may append more deferred work, which runs in the
  // same turn.
  for (size_t i = 0; i < deferred_.size(); ++i) {
    std::function<void()> cb = std::move(deferred_[i]);
    cb();
  }
  deferred_.clear();
}

Status Loop::RunOnce(int64_t timeout_nanos) {
  RunDeferred();
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  int timeout_ms = -1;
  if (!deferred_.empty()) {
    timeout_ms = 0;
  } else if (timeout_nanos >= 0) {
    timeout_ms = static_cast<int>((timeout_nanos + kNanosPerMilli - 1) / kNanosPerMilli);
  }
  int n = ::epoll_wait(epfd_.get(), events, kMaxEvents, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return OkStatus();
    return ErrnoError("epoll_wait");
  }
  woke_ = n > 0 || !deferred_.empty();
  for (int i = 0; i < n; ++i) {
    int fd = static_cast<int>(events[i].data.u64 & 0xffffffffu);
    uint32_t generation = static_cast<uint32_t>(events[i].data.u64 >> 32);
    auto it = fds_.find(fd);
    if (it == fds_.end() || it->second->generation != generation) continue;
    // Hold a reference: the callback may remove its own registration.
    std::shared_ptr<FdEntry> entry = it->second;
    entry->cb(events[i].events);
  }
  RunDeferred();
  return OkStatus();
}

void Loop::DropCodeWhenIdle(int64_t quiet_nanos) {
  drop_quiet_nanos_ = quiet_nanos;
  drop_pending_ = quiet_nanos > 0;
  last_woke_ = MonotonicNanos();
}

Status Loop::Run() {
  stopped_ = false;
  CodeRanges code;
  if (drop_quiet_nanos_ > 0) code = FindCodeRanges();
  while (!stopped_) {
    int64_t wait = -1;
    if (drop_pending_) {
      int64_t left = last_woke_ + drop_quiet_nanos_ - MonotonicNanos();
      if (left <= 0) {
        DropCodePages(code);
        drop_pending_ = false;
      } else {
        wait = left;
      }
    }
    OUTPOST_RETURN_IF_ERROR(RunOnce(wait));
    if (woke_ && drop_quiet_nanos_ > 0) {
      drop_pending_ = true;
      last_woke_ = MonotonicNanos();
    }
  }
  return OkStatus();
}

Result<LoopFd> LoopFd::Watch(Loop* loop, UniqueFd fd, uint32_t events, Loop::FdCallback cb) {
  OUTPOST_RETURN_IF_ERROR(loop->AddFd(fd.get(), events, std::move(cb)));
  LoopFd w;
  w.loop_ = loop;
  w.fd_ = std::move(fd);
  return w;
}

LoopFd& LoopFd::operator=(LoopFd&& o) noexcept {
  if (this != &o) {
    Reset();
    loop_ = std::exchange(o.loop_, nullptr);
    fd_ = std::move(o.fd_);
  }
  return *this;
}

Status LoopFd::Modify(uint32_t events) {
  if (!loop_ || !fd_) return Error(Code::kFailedPrecondition, "fd is not registered");
  return loop_->ModifyFd(fd_.get(), events);
}

void LoopFd::Reset() { (void)Release(); }

UniqueFd LoopFd::Release() {
  if (loop_ && fd_) loop_->RemoveFd(fd_.get());
  loop_ = nullptr;
  return std::move(fd_);
}

}  // namespace outpost
