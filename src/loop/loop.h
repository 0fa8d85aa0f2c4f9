// The event loop. Owns: the one epoll instance of the process, the timerfd
// behind all timers, the signalfd behind all signal callbacks, child-exit
// watches (pidfd, with a SIGCHLD + waitpid fallback for kernels without
// pidfd_open) and deferred callbacks. Single-threaded: every method must be
// called from the loop's thread.
//
// Does not own the fds registered with AddFd. Callers hold an fd and its
// registration together in a LoopFd (below), which unregisters before it
// closes; raw AddFd/RemoveFd are for the loop's own fds and tests.
//
// Safety rule: before each callback the loop looks its registration up again
// (by fd and a generation number), so a callback may remove or close any fd,
// cancel any timer or unwatch any child, including ones with events pending in
// the same epoll batch, without use-after-free or stale delivery.
#pragma once

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/fd.h"

namespace outpost {

class Loop {
 public:
  using FdCallback = std::function<void(uint32_t events)>;  // EPOLLIN|EPOLLOUT|EPOLLHUP|EPOLLERR...
  using TimerCallback = std::function<void()>;
  using SignalCallback = std::function<void(const signalfd_siginfo& info)>;
  // wait_status is as from waitpid(): use WIFEXITED/WEXITSTATUS/WTERMSIG.
  using ChildCallback = std::function<void(pid_t pid, int wait_status)>;
  using TimerId = uint64_t;

  static Result<std::unique_ptr<Loop>> Create();
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // fd readiness. Level-triggered. One registration per fd.
  Status AddFd(int fd, uint32_t events, FdCallback cb);
  Status ModifyFd(int fd, uint32_t events);
  void RemoveFd(int fd);
  bool HasFd(int fd) const { return fds_.count(fd) != 0; }

  // One-shot timers on the monotonic clock. Timers due at the same instant
  // run in the order they were added. Ids are never reused.
  TimerId AddTimer(int64_t delay_nanos, TimerCallback cb);
  TimerId AddTimerAt(int64_t monotonic_deadline_nanos, TimerCallback cb);
  bool CancelTimer(TimerId id);  // false if it already ran or was cancelled
  size_t PendingTimers() const { return timers_.size(); }

  // Blocks signo for the process and delivers it through the signalfd.
  // One callback per signal number; adding again replaces it.
  Status AddSignal(int signo, SignalCallback cb);
  void RemoveSignal(int signo);

  // Calls cb once when the child pid exits, after reaping it. pid must be
  // our child. Uses pidfd_open; falls back to SIGCHLD + waitpid(pid, WNOHANG)
  // when the kernel has no pidfd (or ForceSigchldFallback was called).
  Status WatchChild(pid_t pid, ChildCallback cb);
  void UnwatchChild(pid_t pid);
  // For tests and old kernels: use the SIGCHLD path even where pidfd works.
  void ForceSigchldFallback() { pidfd_supported_ = false; }
  bool UsesPidfd() const { return pidfd_supported_; }

  // Runs cb after the current batch of events, before the loop waits again.
  // Deferred callbacks added by deferred callbacks run in the same turn.
  void Defer(std::function<void()> cb);

  // Run() drops the resident pages of the binary's code (base/code_pages.h)
  // once nothing has woken the loop for quiet_nanos since it last did: an
  // idle process keeps only what it runs again. Off (0) by default.
  void DropCodeWhenIdle(int64_t quiet_nanos);

  // Runs until Stop(). Returns an error only if epoll itself fails.
  Status Run();
  // One wait (at most timeout_nanos; -1 = forever) and dispatch. For tests.
  Status RunOnce(int64_t timeout_nanos);
  void Stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

 private:
  Loop() = default;

  struct FdEntry {
    uint32_t generation;
    FdCallback cb;
  };
  struct Timer {
    int64_t deadline;
    uint64_t seq;
    bool operator<(const Timer& o) const { return deadline != o.deadline ? deadline < o.deadline : seq < o.seq; }
  };
  struct ChildWatch {
    UniqueFd pidfd;  // invalid in SIGCHLD mode
    ChildCallback cb;
  };

  void ArmTimerFd();
  void OnTimerFd();
  void OnSignalFd();
  void OnChildPidfd(pid_t pid);
  void ReapFallbackChildren();
  Status UpdateSignalMask();
  void RunDeferred();

  UniqueFd epfd_;
  UniqueFd timerfd_;
  UniqueFd signalfd_;
  uint32_t next_generation_ = 1;
  std::unordered_map<int, std::shared_ptr<FdEntry>> fds_;
  std::map<Timer, TimerCallback> timers_;
  std::unordered_map<TimerId, int64_t> timer_deadlines_;  // id(=seq) -> deadline, for cancellation
  uint64_t next_timer_seq_ = 1;
  int64_t armed_deadline_ = -1;
  std::map<int, SignalCallback> signals_;
  sigset_t original_mask_;
  bool mask_saved_ = false;
  std::unordered_map<pid_t, std::shared_ptr<ChildWatch>> children_;
  bool pidfd_supported_ = true;
  bool sigchld_for_children_ = false;
  std::vector<std::function<void()>> deferred_;
  bool stopped_ = false;
  bool woke_ = false;              // RunOnce dispatched something
  int64_t drop_quiet_nanos_ = 0;   // DropCodeWhenIdle; 0 = off
  bool drop_pending_ = false;      // code ran since the last drop
  int64_t last_woke_ = 0;          // monotonic
};

// An fd and its registration on a loop, owned together: destruction (or
// Reset) removes the registration, then closes the fd, so no callback can
// run for a closed or reused fd number. Movable, not copyable.
class LoopFd {
 public:
  LoopFd() = default;
  // Registers fd (which must be valid) for events. On failure fd is closed.
  static Result<LoopFd> Watch(Loop* loop, UniqueFd fd, uint32_t events, Loop::FdCallback cb);
  ~LoopFd() { Reset(); }
  LoopFd(LoopFd&& o) noexcept : loop_(std::exchange(o.loop_, nullptr)), fd_(std::move(o.fd_)) {}
  LoopFd& operator=(LoopFd&& o) noexcept;
  LoopFd(const LoopFd&) = delete;
  LoopFd& operator=(const LoopFd&) = delete;

  int get() const { return fd_.get(); }
  bool valid() const { return fd_.valid(); }
  explicit operator bool() const { return valid(); }
  Status Modify(uint32_t events);
  // Unregisters and closes.
  void Reset();
  // Unregisters and hands the fd back, still open.
  UniqueFd Release();

 private:
  Loop* loop_ = nullptr;
  UniqueFd fd_;
};

}  // namespace outpost
