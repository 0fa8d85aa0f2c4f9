// proc/: command resolution, signal and rlimit names, /proc parsing, users.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/fd.h"
#include "base/strings.h"
#include "base/sys.h"
#include "net/netns.h"
#include "netns_test_util.h"
#include "proc/exit_status.h"
#include "proc/procfs.h"
#include "proc/spawn.h"
#include "proc/users.h"
#include "test_util.h"

namespace outpost {
namespace {

TEST(Spawn, ResolveCommandLikeAShell) {
  int code = 0;
  auto p = proc::ResolveCommand("sh", "/nonexistent:/bin:/usr/bin", &code);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(code, 0);
  auto nf = proc::ResolveCommand("no-such-cmd-xyz", "/bin", &code);
  EXPECT_FALSE(nf.ok());
  EXPECT_EQ(code, 127);
  EXPECT_EQ(nf.error().message(), "command \"no-such-cmd-xyz\" not found in PATH=/bin (exit status 127)");
  auto dir = proc::ResolveCommand("/tmp", "", &code);
  EXPECT_FALSE(dir.ok());
  EXPECT_EQ(code, 126);
}

TEST(Spawn, SignalAndRlimitNames) {
  EXPECT_EQ(*proc::ParseSignal("SIGTERM"), SIGTERM);
  EXPECT_EQ(*proc::ParseSignal("term"), SIGTERM);
  EXPECT_EQ(*proc::ParseSignal("9"), 9);
  EXPECT_FALSE(proc::ParseSignal("").ok());
  EXPECT_FALSE(proc::ParseSignal("SIGFOO").ok());
  EXPECT_FALSE(proc::ParseSignal("999").ok());
  EXPECT_STREQ(proc::SignalName(SIGINT), "SIGINT");
  EXPECT_EQ(*proc::ParseRlimitName("RLIMIT_NOFILE"), RLIMIT_NOFILE);
  EXPECT_EQ(*proc::ParseRlimitName("core"), RLIMIT_CORE);
  EXPECT_FALSE(proc::ParseRlimitName("files").ok());
}

TEST(Proc, ParsesStatWithAwkwardComm) {
  proc::ProcStat ps;
  std::string line = "42 (a b) c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 12345 1000000 256 rest";
  ASSERT_TRUE(proc::ParseProcStat(line, &ps));
  EXPECT_EQ(ps.pid, 42);
  EXPECT_EQ(ps.state, 'S');
  EXPECT_EQ(ps.ppid, 1);
  EXPECT_EQ(ps.pgrp, 42);
  EXPECT_EQ(ps.utime_ticks, 7u);
  EXPECT_EQ(ps.stime_ticks, 3u);
  EXPECT_EQ(ps.start_ticks, 12345u);
  EXPECT_EQ(ps.rss_pages, 256u);
  EXPECT_FALSE(proc::ParseProcStat("garbage", &ps));
  EXPECT_FALSE(proc::ParseProcStat("1 (x) S 1", &ps));
}

// A child forked by a second thread (as a Go plugin's are) and its own
// child are both found.
TEST(Proc, DescendantsOfIncludeChildrenOfEveryThreadAndTheirChildren) {
  if (::access(Format("/proc/%d/task/%d/children", ::getpid(), ::getpid()).c_str(), R_OK) != 0) {
    GTEST_SKIP() << "the kernel has no /proc/PID/task/TID/children";
  }
  int pids[2], hold[2];
  ASSERT_EQ(0, ::pipe(pids));
  ASSERT_EQ(0, ::pipe(hold));
  pid_t child = -1;
  std::thread t([&] {
    child = ::fork();
    if (child == 0) {
      pid_t grandchild = ::fork();
      if (grandchild == 0) {
        ::pause();
        ::_exit(0);
      }
      (void)!::write(pids[1], &grandchild, sizeof grandchild);
      ::pause();
      ::_exit(0);
    }
    char c;
    (void)!::read(hold[0], &c, 1);  // the thread lives until the check is done
  });
  pid_t grandchild = -1;
  ASSERT_EQ(static_cast<ssize_t>(sizeof grandchild), ::read(pids[0], &grandchild, sizeof grandchild));
  std::vector<pid_t> all = proc::DescendantsOf(::getpid());
  (void)!::write(hold[1], "x", 1);
  t.join();
  EXPECT_NE(all.end(), std::find(all.begin(), all.end(), child)) << "the thread's child";
  EXPECT_NE(all.end(), std::find(all.begin(), all.end(), grandchild)) << "its child";
  ::kill(grandchild, SIGKILL);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  for (int fd : {pids[0], pids[1], hold[0], hold[1]}) ::close(fd);
}

TEST(Users, ResolvesNamesNumbersAndGroupsFromFiles) {
  char tmpl[] = "/tmp/outpost-users.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  proc::UserDb db{dir + "/passwd", dir + "/group"};
  ASSERT_TRUE(sys::WriteFileAtomic(db.passwd_path,
                                   "root:x:0:0:root:/root:/bin/sh\n"
                                   "# comment\n"
                                   "broken line\n"
                                   "app:x:1001:1001:App:/home/app:/bin/false\n",
                                   0644)
                  .ok());
  ASSERT_TRUE(sys::WriteFileAtomic(db.group_path, "root:x:0:\napp:x:1001:\naudio:x:29:app,other\nvideo:x:44:other\n",
                                   0644)
                  .ok());
  auto app = proc::ResolveCredentials("app", "", db);
  ASSERT_TRUE(app.ok());
  EXPECT_EQ(app->uid, 1001u);
  EXPECT_EQ(app->gid, 1001u);
  EXPECT_EQ(app->home, "/home/app");
  EXPECT_EQ(app->groups, (std::vector<gid_t>{1001, 29}));
  auto num = proc::ResolveCredentials("1001", "audio", db);
  ASSERT_TRUE(num.ok());
  EXPECT_EQ(num->name, "app");
  EXPECT_EQ(num->gid, 29u);
  auto anon = proc::ResolveCredentials("5000", "", db);
  ASSERT_TRUE(anon.ok());
  EXPECT_EQ(anon->uid, 5000u);
  EXPECT_EQ(anon->gid, 5000u);
  EXPECT_EQ(anon->home, "/");
  auto bad = proc::ResolveCredentials("bob", "", db);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "user \"bob\" not found in " + db.passwd_path);
  auto badg = proc::ResolveCredentials("app", "wheel", db);
  ASSERT_FALSE(badg.ok());
  EXPECT_EQ(badg.error().message(), "group \"wheel\" not found in " + db.group_path);
  std::string cmd = "rm -rf " + dir;
  (void)::system(cmd.c_str());
}

// The files are parsed once and kept while unchanged; every kind of change
// is seen by the next lookup: a file replaced (rename), edited in place to
// the same size just now (within one timestamp tick of the last read), or
// removed.
TEST(Users, ChangesToTheFilesAreSeenByTheNextLookup) {
  char tmpl[] = "/tmp/outpost-users.XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  proc::UserDb db{dir + "/passwd", dir + "/group"};
  auto settle = [](const std::string& path) {  // as if written long ago: kept
    struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
    ASSERT_EQ(0, ::utimensat(AT_FDCWD, path.c_str(), old, 0));
  };
  ASSERT_TRUE(sys::WriteFileAtomic(db.passwd_path, "app:x:1001:1001::/home/a:/bin/sh\n", 0644).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(db.group_path, "app:x:1001:\n", 0644).ok());
  settle(db.passwd_path);
  settle(db.group_path);
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->home, "/home/a");
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->home, "/home/a");

  // Replaced by a rename, as useradd and vipw do.
  ASSERT_TRUE(sys::WriteFileAtomic(db.passwd_path, "app:x:1001:1001::/home/b:/bin/sh\n", 0644).ok());
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->home, "/home/b");

  // Rewritten in place, same size, twice in a row (same timestamp tick).
  settle(db.passwd_path);
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->home, "/home/b");
  for (const char* home : {"/home/c", "/home/d"}) {
    std::string text = std::string("app:x:1001:1001::") + home + ":/bin/sh\n";
    int fd = ::open(db.passwd_path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
    ::close(fd);
    EXPECT_EQ(proc::ResolveCredentials("app", "", db)->home, home);
  }

  // A group membership added; the group file removed.
  ASSERT_TRUE(sys::WriteFileAtomic(db.group_path, "app:x:1001:\naudio:x:29:app\n", 0644).ok());
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->groups, (std::vector<gid_t>{1001, 29}));
  ASSERT_EQ(0, ::unlink(db.group_path.c_str()));
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->groups, (std::vector<gid_t>{1001}));
  ASSERT_FALSE(proc::ResolveCredentials("app", "audio", db).ok());

  // Another database (another agent config in the same process).
  proc::UserDb other{dir + "/passwd2", dir + "/group"};
  ASSERT_TRUE(sys::WriteFileAtomic(other.passwd_path, "app:x:2002:2002::/srv:/bin/sh\n", 0644).ok());
  EXPECT_EQ(proc::ResolveCredentials("app", "", other)->uid, 2002u);
  EXPECT_EQ(proc::ResolveCredentials("app", "", db)->uid, 1001u);
  std::string cmd = "rm -rf " + dir;
  (void)::system(cmd.c_str());
}

TEST(ExitStatus, OneWordingOfAWaitStatus) {
  proc::ExitStatus s = proc::DecodeWaitStatus(3 << 8);
  EXPECT_EQ(s.exit_code, 3);
  EXPECT_EQ(s.signal, 0);
  EXPECT_EQ(proc::DescribeExitStatus(s), "exit code 3");
  s = proc::DecodeWaitStatus(SIGKILL);
  EXPECT_EQ(s.exit_code, 128 + SIGKILL);
  EXPECT_EQ(s.signal, SIGKILL);
  EXPECT_EQ(proc::DescribeExitStatus(s), "killed by SIGKILL");
  s = proc::DecodeWaitStatus(SIGSEGV | 0x80);
  EXPECT_EQ(proc::DescribeExitStatus(s), "killed by SIGSEGV, core dumped");
  char small[8];
  EXPECT_STREQ(proc::DescribeExitStatus(s, small, sizeof small), "killed ");  // truncated, terminated
}

TEST(Spawn, TaskRlimitsResolveNamesCheckOrderAndAddTheDefaultNofile) {
  rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit lim{100, 200};
  proc::SetTaskDefaultNofile(lim);
  auto r = proc::TaskRlimits({{"core", 0, 0}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].first, RLIMIT_NOFILE);
  EXPECT_EQ((*r)[1].second.rlim_cur, 100u);
  r = proc::TaskRlimits({{"nofile", 5, 6}});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(proc::TaskRlimits({{"nofile", 7, 6}}).error().message(),
            "rlimit nofile: soft limit is above the hard limit");
  EXPECT_FALSE(proc::TaskRlimits({{"nofiles", 1, 1}}).ok());
  proc::SetTaskDefaultNofile(saved);  // what a task inherits anyway
}

// The OCI hooks run a hook inside the new process before exec: that step
// may take long, and the spawner (the loop) must not wait for it.
TEST(Spawn, APreExecStepRunsInTheChildWithoutHoldingUpTheSpawner) {
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  UniqueFd go_r(go[0]), go_w(go[1]);
  proc::SpawnRequest req;
  req.path = "/bin/sh";
  req.argv = {"sh", "-c", "exit 7"};
  req.pre_exec = [fd = go_r.get()] {
    // Waits for the spawner to say so: it can only when Spawn returned.
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) return ETIMEDOUT;
    char c;
    return ::read(fd, &c, 1) == 1 && c == 'g' ? 0 : EIO;
  };
  auto s = proc::Spawn(req);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_TRUE(s->exec_report) << "a spawn with a pre-exec step reports its exec later";
  ASSERT_EQ(::write(go_w.get(), "g", 1), 1);
  EXPECT_TRUE(proc::ReadExecReport(s->exec_report.get(), req.path, req.workdir).ok());
  int st = 0;
  ASSERT_EQ(::waitpid(s->pid, &st, 0), s->pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7) << "the step ran, then the program";
}

TEST(Spawn, AFailedPreExecStepIsReportedAndTheChildExits) {
  proc::SpawnRequest req;
  req.path = "/bin/sh";
  req.argv = {"sh", "-c", "exit 0"};
  req.pre_exec = [] { return EPERM; };
  auto s = proc::Spawn(req);
  ASSERT_TRUE(s.ok()) << s.error().message();
  int code = 0;
  Status st = proc::ReadExecReport(s->exec_report.get(), req.path, req.workdir, &code);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "pre-exec step: " + std::string(std::strerror(EPERM)) + " (exit status 1)");
  EXPECT_EQ(code, 1);
  int ws = 0;
  ASSERT_EQ(::waitpid(s->pid, &ws, 0), s->pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 1);
}

// Without a pre-exec step the child shares the spawner's memory until it
// execs: nothing it does before exec may show in the spawner, and an exec
// failure is still reported by Spawn itself.
TEST(Spawn, WithoutAPreExecStepTheOutcomeIsKnownWhenSpawnReturns) {
  proc::SpawnRequest req;
  req.path = "/bin/sh";
  req.argv = {"sh", "-c", "exit 5"};
  req.workdir = "/";
  // The child may share our fd table until it has its own stdio (after a
  // first spawn showed it shares our memory): our 0..2 must be ours after.
  int held[2];
  ASSERT_EQ(::pipe2(held, O_CLOEXEC), 0);  // stdio sources that are not 0..2
  UniqueFd held_r(held[0]), held_w(held[1]);
  req.stdout_fd = held_w.get();
  auto ours = [] {
    std::string s;
    for (int fd = 0; fd < 3; ++fd) {
      struct stat st;
      s += ::fstat(fd, &st) == 0 ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) : "closed";
      int fl = ::fcntl(fd, F_GETFD);
      s += fl >= 0 && (fl & FD_CLOEXEC) ? "+cloexec " : " ";
    }
    return s;
  };
  const std::string before = ours();
  for (int i = 0; i < 2; ++i) {  // the first one finds out whether memory is shared
    auto s = proc::Spawn(req);
    ASSERT_TRUE(s.ok()) << s.error().message();
    int ws = 0;
    ASSERT_EQ(::waitpid(s->pid, &ws, 0), s->pid);
  }
  EXPECT_EQ(ours(), before);
  req.stdout_fd = -1;
  errno = 0;
  auto ok = proc::Spawn(req);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_FALSE(ok->exec_report);
  int ws = 0;
  ASSERT_EQ(::waitpid(ok->pid, &ws, 0), ok->pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 5);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_NE(std::string(cwd), "/") << "the child's chdir is its own";

  req.workdir = "/no/such/dir";
  int code = 0;
  auto bad = proc::Spawn(req, &code);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(), "chdir '/no/such/dir': " + std::string(std::strerror(ENOENT)) + " (exit status 1)");
  EXPECT_EQ(code, 1);
  req.workdir = "";
  req.path = "/no/such/program";
  auto missing = proc::Spawn(req, &code);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_EQ(code, 127);
}

// Spawns cmd (through /bin/sh -c) with the given namespace settings, its
// stdout on a pipe; returns what it printed, or "ERROR: ..." (the spawn
// failed or the child did not exit 0). With a pre-exec step the child is a
// copy of us (fork semantics), else it shares our memory until exec: both
// paths must join the same way.
std::string SpawnAndRead(const std::string& cmd, int netns_fd, const std::string& hostname, bool with_pre_exec) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return "ERROR: pipe";
  UniqueFd r(p[0]), w(p[1]);
  proc::SpawnRequest req;
  req.path = "/bin/sh";
  req.argv = {"sh", "-c", cmd};
  req.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  req.stdout_fd = w.get();
  req.netns_fd = netns_fd;
  req.hostname = hostname;
  if (with_pre_exec) req.pre_exec = [] { return 0; };
  auto s = proc::Spawn(req);
  if (!s.ok()) return "ERROR: " + s.error().message();
  w.Reset();
  if (with_pre_exec) {
    Status st = proc::ReadExecReport(s->exec_report.get(), req.path, "");
    if (!st.ok()) return "ERROR: " + st.error().message();
  }
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = sys::Read(r.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int ws = 0;
  sys::RetryEintr([&] { return ::waitpid(s->pid, &ws, 0); });
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) return "ERROR: child wait status " + std::to_string(ws) + ": " + out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(Spawn, TheChildJoinsTheGivenNetworkNamespace) {
  std::string why = testing::NetnsTestSkipReason();
  if (!why.empty()) GTEST_SKIP() << why;
  std::string tmp = testing::MakeTempDir("/tmp", "spawn-netns");
  ASSERT_FALSE(tmp.empty());
  std::string err = testing::RunInMountNsChild([tmp]() -> std::string {
    Status st = net::PinNewNetns(tmp + "/pins", "job");
    if (!st.ok()) return "pin: " + st.error().message();
    const std::string pin = tmp + "/pins/job";
    auto fd = net::OpenNetns(pin);
    if (!fd.ok()) return fd.error().message();
    const std::string want = Format("net:[%lu]", static_cast<unsigned long>(testing::NsInode(pin)));
    const std::string ours = Format("net:[%lu]", static_cast<unsigned long>(testing::NsInode("/proc/self/ns/net")));
    if (want == ours) return "the pin is our own namespace";
    for (bool pre_exec : {false, true}) {
      std::string got = SpawnAndRead("readlink /proc/self/ns/net", fd->get(), "", pre_exec);
      if (got != want) return "child's netns (pre_exec " + std::to_string(pre_exec) + "): " + got + ", want " + want;
    }
    // Without a netns_fd the child stays in ours; and so do we.
    std::string got = SpawnAndRead("readlink /proc/self/ns/net", -1, "", false);
    if (got != ours) return "child without netns_fd: " + got + ", want " + ours;
    if (testing::NsInode("/proc/self/ns/net") != testing::NsInode("/proc/" + std::to_string(::getppid()) + "/ns/net")) {
      return "the spawner left its network namespace";
    }
    (void)net::UnpinNetns(pin);
    return "";
  });
  (void)sys::RemoveTree(tmp);
  EXPECT_EQ(err, "");
}

TEST(Spawn, TheChildGetsItsOwnHostname) {
  std::string why = testing::NetnsTestSkipReason();
  if (!why.empty()) GTEST_SKIP() << why;
  char before[256] = {};
  ASSERT_EQ(::gethostname(before, sizeof before - 1), 0);
  for (bool pre_exec : {false, true}) {
    EXPECT_EQ(SpawnAndRead("uname -n", -1, "outpost-test-host", pre_exec), "outpost-test-host") << pre_exec;
  }
  EXPECT_EQ(SpawnAndRead("uname -n", -1, "", false), before);
  char after[256] = {};
  ASSERT_EQ(::gethostname(after, sizeof after - 1), 0);
  EXPECT_STREQ(after, before);  // the spawner's UTS namespace is untouched
}

TEST(Spawn, AFailedNamespaceStepIsReportedWithItsName) {
  // /dev/null is no namespace: setns fails (EINVAL) before any privilege
  // check, so this runs without root too.
  UniqueFd not_ns(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(not_ns.valid());
  for (bool pre_exec : {false, true}) {
    std::string got = SpawnAndRead("true", not_ns.get(), "", pre_exec);
    EXPECT_EQ(got.rfind("ERROR: join network namespace: ", 0), 0u) << got;
  }
  // An over-long hostname (the kernel takes 64 bytes) fails as such; as
  // non-root the unshare fails first, under the same name.
  std::string got = SpawnAndRead("true", -1, std::string(65, 'h'), false);
  EXPECT_EQ(got.rfind("ERROR: set hostname: ", 0), 0u) << got;
}

}  // namespace
}  // namespace outpost
