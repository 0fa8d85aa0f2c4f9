#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/sys.h"
#include "test_util.h"

namespace outpost {
namespace {

using testing::MakeLoop;
using testing::RunUntil;

struct Pipe {
  UniqueFd r, w;
  Pipe() {
    int fds[2];
    EXPECT_EQ(0, ::pipe2(fds, O_CLOEXEC | O_NONBLOCK));
    r.Reset(fds[0]);
    w.Reset(fds[1]);
  }
  void Put(const char* s) { ASSERT_EQ(static_cast<ssize_t>(strlen(s)), ::write(w.get(), s, strlen(s))); }
};

TEST(Loop, FdReadinessDeliversEvents) {
  auto loop = MakeLoop();
  Pipe p;
  std::string got;
  ASSERT_TRUE(loop->AddFd(p.r.get(), EPOLLIN, [&](uint32_t ev) {
    EXPECT_TRUE(ev & EPOLLIN);
    char buf[16];
    ssize_t n = ::read(p.r.get(), buf, sizeof buf);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  }).ok());
  p.Put("hello");
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return got == "hello"; }));
  EXPECT_FALSE(loop->AddFd(p.r.get(), EPOLLIN, [](uint32_t) {}).ok()) << "double registration must fail";
  loop->RemoveFd(p.r.get());
  p.Put("more");
  ASSERT_TRUE(loop->RunOnce(20 * kNanosPerMilli).ok());
  EXPECT_EQ(got, "hello") << "removed fd must not be delivered";
}

TEST(Loop, ModifyFdSwitchesInterest) {
  auto loop = MakeLoop();
  Pipe p;
  int writable = 0;
  ASSERT_TRUE(loop->AddFd(p.w.get(), 0, [&](uint32_t ev) {
    if (ev & EPOLLOUT) ++writable;
  }).ok());
  ASSERT_TRUE(loop->RunOnce(10 * kNanosPerMilli).ok());
  EXPECT_EQ(writable, 0);
  ASSERT_TRUE(loop->ModifyFd(p.w.get(), EPOLLOUT).ok());
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return writable > 0; }));
  EXPECT_FALSE(loop->ModifyFd(9999, EPOLLIN).ok());
}

// Two fds are ready in the same batch. Whichever callback runs first closes
// the other fd and registers a brand-new fd that reuses the same number. The
// stale event for the old registration must be dropped, not delivered to the
// new callback (and not to a freed one).
TEST(Loop, CallbackMayCloseFdWithPendingEventInSameBatch) {
  auto loop = MakeLoop();
  auto a = std::make_unique<Pipe>();
  auto b = std::make_unique<Pipe>();
  int calls_a = 0, calls_b = 0, calls_new = 0;
  Pipe replacement_src;
  UniqueFd replacement;
  auto close_other = [&](std::unique_ptr<Pipe>& other) {
    int num = other->r.get();
    loop->RemoveFd(num);
    other.reset();  // closes the fd number `num`
    // Reuse the number for an fd that is also readable right now.
    int dup = ::fcntl(replacement_src.r.get(), F_DUPFD_CLOEXEC, num);
    ASSERT_EQ(dup, num) << "expected the freed fd number to be reused";
    replacement.Reset(dup);
    replacement_src.Put("x");
    ASSERT_TRUE(loop->AddFd(dup, EPOLLIN, [&](uint32_t) {
      ++calls_new;
      char c;
      (void)::read(replacement.get(), &c, 1);
    }).ok());
  };
  ASSERT_TRUE(loop->AddFd(a->r.get(), EPOLLIN, [&](uint32_t) {
    ++calls_a;
    if (b) close_other(b);
    char c;
    if (a) (void)::read(a->r.get(), &c, 1);
  }).ok());
  ASSERT_TRUE(loop->AddFd(b->r.get(), EPOLLIN, [&](uint32_t) {
    ++calls_b;
    if (a) close_other(a);
    char c;
    if (b) (void)::read(b->r.get(), &c, 1);
  }).ok());
  a->Put("1");
  b->Put("1");
  ASSERT_TRUE(loop->RunOnce(100 * kNanosPerMilli).ok());
  EXPECT_EQ(calls_a + calls_b, 1) << "the closed fd's pending event must be dropped";
  EXPECT_EQ(calls_new, 0) << "a stale event must not reach the fd that reused the number";
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return calls_new == 1; }));
}

TEST(Loop, CallbackMayRemoveItself) {
  auto loop = MakeLoop();
  Pipe p;
  int calls = 0;
  ASSERT_TRUE(loop->AddFd(p.r.get(), EPOLLIN, [&](uint32_t) {
    ++calls;
    loop->RemoveFd(p.r.get());  // destroys the std::function we are running in
  }).ok());
  p.Put("x");
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return calls == 1; }));
  ASSERT_TRUE(loop->RunOnce(10 * kNanosPerMilli).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(loop->HasFd(p.r.get()));
}

TEST(Loop, TimersRunInDeadlineOrderThenInsertionOrder) {
  auto loop = MakeLoop();
  std::vector<int> order;
  int64_t base = MonotonicNanos() + 20 * kNanosPerMilli;
  loop->AddTimerAt(base + 10 * kNanosPerMilli, [&] { order.push_back(3); });
  loop->AddTimerAt(base, [&] { order.push_back(1); });
  loop->AddTimerAt(base, [&] { order.push_back(2); });
  loop->AddTimerAt(base - 5 * kNanosPerMilli, [&] { order.push_back(0); });
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return order.size() == 4; }));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(loop->PendingTimers(), 0u);
}

TEST(Loop, TimerDoesNotFireEarly) {
  auto loop = MakeLoop();
  int64_t start = MonotonicNanos();
  int64_t fired_at = 0;
  loop->AddTimer(30 * kNanosPerMilli, [&] { fired_at = MonotonicNanos(); });
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return fired_at != 0; }));
  EXPECT_GE(fired_at - start, 30 * kNanosPerMilli);
}

TEST(Loop, CancelledTimersNeverRun) {
  auto loop = MakeLoop();
  bool a = false, b = false, c = false;
  auto ta = loop->AddTimer(5 * kNanosPerMilli, [&] { a = true; });
  Loop::TimerId tb = 0;
  // c runs first (earlier) and cancels b, which is due in the same batch.
  loop->AddTimer(1 * kNanosPerMilli, [&] {
    c = true;
    EXPECT_TRUE(loop->CancelTimer(tb));
  });
  tb = loop->AddTimer(2 * kNanosPerMilli, [&] { b = true; });
  EXPECT_TRUE(loop->CancelTimer(ta));
  EXPECT_FALSE(loop->CancelTimer(ta)) << "second cancel reports false";
  bool sentinel = false;
  loop->AddTimer(40 * kNanosPerMilli, [&] { sentinel = true; });
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return sentinel; }));
  EXPECT_TRUE(c);
  EXPECT_FALSE(a);
  EXPECT_FALSE(b);
  EXPECT_FALSE(loop->CancelTimer(999999));
}

TEST(Loop, TimerAddedFromTimerRuns) {
  auto loop = MakeLoop();
  int n = 0;
  std::function<void()> tick = [&] {
    if (++n < 5) loop->AddTimer(0, tick);
  };
  loop->AddTimer(0, tick);
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return n == 5; }));
}

TEST(Loop, SignalsAreDeliveredThroughSignalfd) {
  auto loop = MakeLoop();
  int got = 0;
  pid_t sender = 0;
  ASSERT_TRUE(loop->AddSignal(SIGUSR1, [&](const signalfd_siginfo& info) {
    got = static_cast<int>(info.ssi_signo);
    sender = static_cast<pid_t>(info.ssi_pid);
  }).ok());
  ASSERT_EQ(0, ::kill(::getpid(), SIGUSR1));
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return got != 0; }));
  EXPECT_EQ(got, SIGUSR1);
  EXPECT_EQ(sender, ::getpid());
  loop->RemoveSignal(SIGUSR1);
  EXPECT_FALSE(loop->AddSignal(0, [](const signalfd_siginfo&) {}).ok());
}

TEST(Loop, SignalMaskIsRestoredWhenLoopGoes) {
  {
    auto loop = MakeLoop();
    ASSERT_TRUE(loop->AddSignal(SIGUSR2, [](const signalfd_siginfo&) {}).ok());
    sigset_t cur;
    sigprocmask(SIG_BLOCK, nullptr, &cur);
    EXPECT_EQ(1, sigismember(&cur, SIGUSR2));
  }
  sigset_t cur;
  sigprocmask(SIG_BLOCK, nullptr, &cur);
  EXPECT_EQ(0, sigismember(&cur, SIGUSR2));
}

pid_t ForkExit(int code, int sig = 0) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (sig) ::raise(sig);
    ::_exit(code);
  }
  return pid;
}

void ExpectChildExits(Loop* loop) {
  int status1 = -1, status2 = -1;
  pid_t p1 = ForkExit(7);
  pid_t p2 = ForkExit(0, SIGKILL);
  ASSERT_GT(p1, 0);
  ASSERT_GT(p2, 0);
  ASSERT_TRUE(loop->WatchChild(p1, [&](pid_t pid, int st) {
    EXPECT_EQ(pid, p1);
    status1 = st;
  }).ok());
  ASSERT_TRUE(loop->WatchChild(p2, [&](pid_t, int st) { status2 = st; }).ok());
  EXPECT_FALSE(loop->WatchChild(p1, [](pid_t, int) {}).ok()) << "double watch must fail";
  ASSERT_TRUE(RunUntil(loop, [&] { return status1 != -1 && status2 != -1; }));
  ASSERT_TRUE(WIFEXITED(status1));
  EXPECT_EQ(WEXITSTATUS(status1), 7);
  ASSERT_TRUE(WIFSIGNALED(status2));
  EXPECT_EQ(WTERMSIG(status2), SIGKILL);
  // Reaped: no zombie left behind.
  EXPECT_EQ(-1, ::waitpid(p1, nullptr, WNOHANG));
  EXPECT_EQ(ECHILD, errno);
}

TEST(Loop, ChildExitViaPidfd) {
  auto loop = MakeLoop();
  ASSERT_TRUE(loop->UsesPidfd());
  ExpectChildExits(loop.get());
  EXPECT_TRUE(loop->UsesPidfd());
}

TEST(Loop, ChildExitViaSigchldFallback) {
  auto loop = MakeLoop();
  loop->ForceSigchldFallback();
  ExpectChildExits(loop.get());
}

TEST(Loop, UnwatchedChildCallbackNeverRuns) {
  auto loop = MakeLoop();
  bool called = false;
  int r[2];
  ASSERT_EQ(0, ::pipe2(r, O_CLOEXEC));
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(r[1]);
    char c;
    (void)::read(r[0], &c, 1);
    ::_exit(0);
  }
  ::close(r[0]);
  ASSERT_TRUE(loop->WatchChild(pid, [&](pid_t, int) { called = true; }).ok());
  loop->UnwatchChild(pid);
  ::close(r[1]);  // child exits now
  int st;
  ASSERT_EQ(pid, ::waitpid(pid, &st, 0));
  ASSERT_TRUE(loop->RunOnce(20 * kNanosPerMilli).ok());
  EXPECT_FALSE(called);
}

TEST(Loop, DeferredRunsAfterBatchInOrderIncludingNested) {
  auto loop = MakeLoop();
  std::vector<int> order;
  loop->Defer([&] {
    order.push_back(1);
    loop->Defer([&] { order.push_back(3); });
  });
  loop->Defer([&] { order.push_back(2); });
  ASSERT_TRUE(loop->RunOnce(0).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(Loop, StopEndsRun) {
  auto loop = MakeLoop();
  int ticks = 0;
  loop->AddTimer(1 * kNanosPerMilli, [&] {
    ++ticks;
    loop->Stop();
  });
  ASSERT_TRUE(loop->Run().ok());
  EXPECT_EQ(ticks, 1);
  EXPECT_TRUE(loop->stopped());
}

TEST(LoopFd, ResetUnregistersThenClosesAndMovedFromIsInert) {
  auto loop = MakeLoop();
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd w(p[1]);
  int calls = 0;
  auto watched = LoopFd::Watch(loop.get(), UniqueFd(p[0]), EPOLLIN, [&](uint32_t) { ++calls; });
  ASSERT_TRUE(watched.ok());
  LoopFd a = std::move(*watched);
  LoopFd b = std::move(a);
  EXPECT_FALSE(a.valid());
  a.Reset();  // inert: must not unregister b's fd
  EXPECT_TRUE(loop->HasFd(p[0]));
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  ASSERT_TRUE(loop->RunOnce(0).ok());
  EXPECT_EQ(calls, 1);
  b.Reset();
  EXPECT_FALSE(loop->HasFd(p[0]));
  EXPECT_EQ(::fcntl(p[0], F_GETFD), -1);  // closed
  ASSERT_TRUE(loop->RunOnce(0).ok());
  EXPECT_EQ(calls, 1);
}

TEST(LoopFd, ReleaseKeepsTheFdOpen) {
  auto loop = MakeLoop();
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd w(p[1]);
  auto watched = LoopFd::Watch(loop.get(), UniqueFd(p[0]), EPOLLIN, [](uint32_t) {});
  ASSERT_TRUE(watched.ok());
  UniqueFd fd = watched->Release();
  EXPECT_FALSE(loop->HasFd(p[0]));
  EXPECT_EQ(fd.get(), p[0]);
  EXPECT_NE(::fcntl(p[0], F_GETFD), -1);
}

// The resident KiB of this binary's own read-only mappings (its code and
// constants: /proc/self/smaps entries of /proc/self/exe), -1 when
// unreadable. Shared libraries (a sanitizer build's) are left out: the drop
// is of the executable's pages only.
long ExeCodeRssKiB() {
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  auto smaps = sys::ReadFile("/proc/self/smaps");
  if (n <= 0 || !smaps.ok()) return -1;
  const std::string path(exe, static_cast<size_t>(n));
  long total = 0;
  bool ours = false;
  size_t pos = 0;
  while (pos < smaps->size()) {
    size_t end = smaps->find('\n', pos);
    if (end == std::string::npos) end = smaps->size();
    std::string line = smaps->substr(pos, end - pos);
    pos = end + 1;
    // A mapping's header: "start-end perms offset dev inode [path]".
    size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(':') > dash && line.compare(0, 4, "Rss:") != 0 &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {
      size_t sp = line.find(' ');
      std::string perms = sp == std::string::npos ? "" : line.substr(sp + 1, 4);
      ours = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0 &&
             perms.size() == 4 && perms[1] != 'w';
      continue;
    }
    if (ours && line.compare(0, 4, "Rss:") == 0) total += std::strtol(line.c_str() + 4, nullptr, 10);
  }
  return total;
}

// An idle loop drops the resident pages of the binary's code: read once the
// loop has been quiet past the delay (a timer's wake maps back only what it
// runs).
TEST(Loop, DropCodeWhenIdleDropsTheCodePagesOfAnIdleLoop) {
  // Under qemu-user, /proc/self/status is the emulator's, and it does not
  // pass MADV_DONTNEED on to the guest's file mappings: the ARM VM runs the
  // agent on a real kernel instead.
  auto status = sys::ReadFile("/proc/self/status");
  if (status.ok() && status->find("Name:\tqemu-") != std::string::npos) GTEST_SKIP() << "under qemu-user";
  auto loop = MakeLoop();
  long before = ExeCodeRssKiB();
  ASSERT_GT(before, 0);
  long after = -1;
  loop->DropCodeWhenIdle(50 * kNanosPerMilli);
  loop->AddTimer(400 * kNanosPerMilli, [&] {
    after = ExeCodeRssKiB();
    loop->Stop();
  });
  ASSERT_TRUE(loop->Run().ok());
  ASSERT_GT(after, 0);
  EXPECT_LT(after, before / 2) << "the binary's resident code before " << before << " KiB, after " << after << " KiB";
}

}  // namespace
}  // namespace outpost
