// The exec driver through the Driver contract alone (what the task layer
// and the driver conformance checks use), plus its keeper-facing calls.
#include "driver/exec/exec_driver.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"
#include "proc/procfs.h"
#include "test_util.h"

namespace outpost::driver {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

std::string HelperPath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string self = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  return sys::Dirname(self) + "/test_helper";
}

// True when /proc/<pid>/status shows signo in the mask named field
// ("SigIgn", "SigCgt"): the helper has installed its handler or SIG_IGN.
bool SignalMaskHas(pid_t pid, const char* field, int signo) {
  auto st = sys::ReadFile(Format("/proc/%d/status", pid));
  if (!st.ok()) return false;
  size_t at = st->find(std::string(field) + ":");
  if (at == std::string::npos) return false;
  unsigned long long mask = std::strtoull(st->c_str() + at + std::strlen(field) + 2, nullptr, 16);
  return (mask >> (signo - 1)) & 1;
}

std::string ReadAll(const std::string& path) {
  auto r = sys::ReadFile(path);
  return r.ok() ? *r : "";
}

class ExecDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outpost-driver.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    loop_ = MakeLoop();
    driver_ = NewDriver(false);
    helper_ = HelperPath();
    ASSERT_EQ(0, ::access(helper_.c_str(), X_OK)) << helper_ << " missing: build it with `make build/test_helper`";
    if (!outpost::testing::CanExecHelper(helper_)) {
      GTEST_SKIP() << "cannot exec " << helper_ << " from this process (qemu-user without binfmt_misc); "
                   << "the ARM VM test covers spawning";
    }
  }
  void TearDown() override {
    for (const std::string& id : started_) {
      if (driver_) (void)Destroy(id, true);
    }
    driver_.reset();
    std::string cmd = "rm -rf " + dir_;
    (void)::system(cmd.c_str());
  }
  std::unique_ptr<ExecDriver> NewDriver(bool keeper_is_parent) {
    ExecDriver::Options o;
    o.keeper_is_parent = keeper_is_parent;
    o.keeper_pid = ::getpid();
    auto d = ExecDriver::Create(loop_.get(), o);
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message());
    return d.ok() ? std::move(*d) : nullptr;
  }
  TaskConfig Config(const std::string& id, std::vector<std::string> args) {
    TaskConfig c;
    c.id = id;
    c.name = id;
    c.command = helper_;
    c.args = std::move(args);
    c.task_dir = dir_;
    c.stdout_path = dir_ + "/" + id + ".out";
    c.stderr_path = dir_ + "/" + id + ".err";
    ::close(::open(c.stdout_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    ::close(::open(c.stderr_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    return c;
  }
  Result<TaskHandle> Start(const TaskConfig& c) {
    Result<TaskHandle> out = Error(Code::kUnknown, "no callback");
    bool called = false;
    driver_->StartTask(c, [&](Result<TaskHandle> h) {
      out = std::move(h);
      called = true;
    });
    EXPECT_TRUE(called) << "exec driver answers StartTask synchronously";
    if (out.ok()) started_.push_back(c.id);
    return out;
  }
  ExitResult Wait(const std::string& id) {
    ExitResult r;
    bool done = false;
    driver_->WaitTask(id, [&](const ExitResult& e) {
      r = e;
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond));
    return r;
  }
  Result<TaskStatus> Inspect(const std::string& id) {
    Result<TaskStatus> out = Error(Code::kUnknown, "no callback");
    driver_->InspectTask(id, [&](Result<TaskStatus> s) { out = std::move(s); });
    return out;
  }
  template <typename Fn>
  Status Call(Fn fn) {
    Status out = Error(Code::kUnknown, "pending");
    bool done = false;
    fn([&](Status st) {
      out = st;
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond));
    return out;
  }
  Status Stop(const std::string& id, int64_t timeout, const std::string& sig) {
    return Call([&](Driver::DoneCallback cb) { driver_->StopTask(id, timeout, sig, cb); });
  }
  Status Destroy(const std::string& id, bool force) {
    return Call([&](Driver::DoneCallback cb) { driver_->DestroyTask(id, force, cb); });
  }
  Status Signal(const std::string& id, const std::string& sig) {
    return Call([&](Driver::DoneCallback cb) { driver_->SignalTask(id, sig, cb); });
  }
  Result<ExecResult> Exec(const std::string& id, std::vector<std::string> cmd, int64_t timeout) {
    Result<ExecResult> r = Error(Code::kUnknown, "pending");
    bool done = false;
    driver_->ExecTask(id, cmd, timeout, [&](Result<ExecResult> res) {
      r = std::move(res);
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond));
    return r;
  }

  std::string dir_;
  std::string helper_;
  std::vector<std::string> started_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ExecDriver> driver_;
};

TEST_F(ExecDriverTest, ExitCodeIsReportedAndWaitWorksBeforeAndAfterExit) {
  auto started = Start(Config("t1", {"exit", "3"}));
  ASSERT_TRUE(started.ok()) << started.error().message();
  EXPECT_GT(started->pid, 0);
  EXPECT_EQ(started->config.id, "t1");
  ExitResult r = Wait("t1");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.Successful());
  ExitResult again = Wait("t1");  // after the exit too
  EXPECT_EQ(again.exit_code, 3);
  auto st = Inspect("t1");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, TaskState::kExited);
  EXPECT_GT(st->completed_at_unix_nanos, 0);
  EXPECT_GE(st->completed_at_unix_nanos, st->started_at_unix_nanos);
  EXPECT_EQ(Wait("nope").error, "wait: task not found for given id");
}

TEST_F(ExecDriverTest, SignalDeathReports128PlusSigno) {
  ASSERT_TRUE(Start(Config("t1", {"sleep", "30"})).ok());
  ASSERT_TRUE(Signal("t1", "SIGKILL").ok());
  ExitResult r = Wait("t1");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(Signal("t1", "TERM").error().message(), "task t1 is not running");
}

TEST_F(ExecDriverTest, StartErrors) {
  ASSERT_TRUE(Start(Config("dup", {"sleep", "30"})).ok());
  auto dup = Start(Config("dup", {"sleep", "30"}));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().message(), "start task dup: task with ID \"dup\" already started");

  TaskConfig c = Config("nf", {});
  c.command = "definitely-not-a-command-xyz";
  auto nf = Start(c);
  ASSERT_FALSE(nf.ok());
  EXPECT_NE(nf.error().message().find("command \"definitely-not-a-command-xyz\" not found in PATH="),
            std::string::npos);
  EXPECT_NE(nf.error().message().find("(exit status 127)"), std::string::npos);
  EXPECT_EQ(Inspect("nf").error().code(), Code::kNotFound) << "nothing tracked after a failed start";

  std::string noexec = dir_ + "/noexec";
  ASSERT_TRUE(sys::WriteFileAtomic(noexec, "#!/bin/sh\n", 0644).ok());
  c = Config("ne", {});
  c.command = noexec;
  auto ne = Start(c);
  ASSERT_FALSE(ne.ok());
  EXPECT_EQ(ne.error().message(), "start task ne: command '" + noexec + "': Permission denied (exit status 126)");

  c = Config("wd", {"exit", "0"});
  c.workdir = "relative/dir";
  auto wd = Start(c);
  ASSERT_FALSE(wd.ok());
  EXPECT_EQ(wd.error().message(), "start task wd: working dir \"relative/dir\" must be an absolute path");

  c = Config("cd", {"exit", "0"});
  c.workdir = dir_ + "/missing-dir";
  auto cd = Start(c);
  ASSERT_FALSE(cd.ok());
  EXPECT_NE(cd.error().message().find("chdir '" + dir_ + "/missing-dir': No such file or directory"),
            std::string::npos)
      << cd.error().message();

  c = Config("cg", {"exit", "0"});
  c.cgroup = dir_ + "/no-such-cgroup";
  auto cg = Start(c);
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.error().message().find("task cgroup: open '" + dir_ + "/no-such-cgroup'"), std::string::npos)
      << cg.error().message();

  c = Config("ns", {"exit", "0"});
  c.SetJoined(dir_ + "/no-such-netns", "");
  auto ns = Start(c);
  ASSERT_FALSE(ns.ok());
  EXPECT_NE(ns.error().message().find("task network namespace: open network namespace '" + dir_ + "/no-such-netns'"),
            std::string::npos)
      << ns.error().message();
}

// A process holding a network namespace of its own until destroyed: its
// /proc/<pid>/ns/net stands in for a pin (no mount needed).
class NetnsHolder {
 public:
  NetnsHolder() {
    int ready[2], release[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(release, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(release[1]);  // else our own copy would keep the read below from seeing EOF
      ::close(ready[0]);
      char c = ::unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
      (void)!::write(ready[1], &c, 1);
      (void)!::read(release[0], &c, 1);  // EOF once the test lets go
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    char c = 0;
    ok_ = ::read(ready[0], &c, 1) == 1 && c == 'y';
    ::close(ready[0]);
  }
  ~NetnsHolder() {
    if (release_ >= 0) ::close(release_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  bool ok() const { return ok_; }
  std::string path() const { return Format("/proc/%d/ns/net", pid_); }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool ok_ = false;
};

std::string NsLink(const std::string& path) {
  char buf[128];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST_F(ExecDriverTest, TheTaskAndItsExecSessionsJoinItsNetnsAndGetItsHostname) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (joins a network namespace, sets a hostname)";
  NetnsHolder holder;
  ASSERT_TRUE(holder.ok());
  const std::string want = NsLink(holder.path());
  ASSERT_NE(want, "");
  ASSERT_NE(want, NsLink("/proc/self/ns/net"));
  char ours[256] = {};
  ASSERT_EQ(::gethostname(ours, sizeof ours - 1), 0);

  TaskConfig c = Config("nst", {"sleep", "30"});
  c.SetJoined(holder.path(), "outpost-nst");
  auto h = Start(c);
  ASSERT_TRUE(h.ok()) << h.error().message();
  EXPECT_EQ(NsLink(Format("/proc/%d/ns/net", h->pid)), want);
  EXPECT_NE(NsLink(Format("/proc/%d/ns/uts", h->pid)), NsLink("/proc/self/ns/uts"));

  auto r = Exec("nst", {"/bin/sh", "-c", "readlink /proc/self/ns/net; uname -n"}, 5 * kNanosPerSecond);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, want + "\noutpost-nst\n");

  char after[256] = {};
  ASSERT_EQ(::gethostname(after, sizeof after - 1), 0);
  EXPECT_STREQ(after, ours) << "the agent's hostname is untouched";
  EXPECT_NE(NsLink("/proc/self/ns/net"), want) << "the agent stays in its own netns";
}

TEST_F(ExecDriverTest, NoFdLeaksIntoTheTask) {
  ASSERT_TRUE(Start(Config("fds", {"list-fds"})).ok());
  EXPECT_EQ(Wait("fds").exit_code, 0);
  EXPECT_EQ(ReadAll(dir_ + "/fds.out"), "0\n1\n2\n");
}

TEST_F(ExecDriverTest, EnvironmentHasDocumentedDefaultsAndExplicitValues) {
  TaskConfig c = Config("env", {"env"});
  c.job = "web";
  c.name = "api";
  c.env["GREETING"] = "hello world";
  c.env["PATH"] = "/bin:/usr/bin";
  ASSERT_TRUE(Start(c).ok());
  EXPECT_EQ(Wait("env").exit_code, 0);
  std::string out = ReadAll(dir_ + "/env.out");
  for (const std::string& want : std::vector<std::string>{"GREETING=hello world", "PATH=/bin:/usr/bin",
                                                          "OUTPOST_JOB=web", "OUTPOST_TASK=api", "OUTPOST_TASK_ID=env",
                                                          "OUTPOST_TASK_DIR=" + dir_, "HOME="}) {
    EXPECT_NE(out.find(want), std::string::npos) << want << " missing in:\n" << out;
  }
}

TEST_F(ExecDriverTest, WorkdirDefaultsToTaskDirAndRlimitsApply) {
  TaskConfig c = Config("pwd", {"pwd"});
  ASSERT_TRUE(Start(c).ok());
  Wait("pwd");
  EXPECT_EQ(ReadAll(dir_ + "/pwd.out"), dir_ + "\n");

  c = Config("rl", {"list-fds"});
  c.rlimits.push_back({"nofile", 2, 2});  // three stdio fds + opendir need more: list-fds must fail
  ASSERT_TRUE(Start(c).ok());
  EXPECT_NE(Wait("rl").exit_code, 0);

  c = Config("rlbad", {"exit", "0"});
  c.rlimits.push_back({"nofiles", 1, 1});
  auto bad = Start(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("unknown rlimit \"nofiles\""), std::string::npos);
}

TEST_F(ExecDriverTest, StopEscalatesToSigkillAfterTimeout) {
  ASSERT_TRUE(Start(Config("stubborn", {"ignore-term", "30"})).ok());
  // Let the helper install its SIG_IGN before we signal it: wait until its
  // signal mask in /proc shows SIGTERM ignored.
  pid_t pid = Inspect("stubborn")->pid;
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return SignalMaskHas(pid, "SigIgn", SIGTERM); }));
  int64_t start = MonotonicNanos();
  ASSERT_TRUE(Stop("stubborn", 200 * kNanosPerMilli, "SIGTERM").ok());
  EXPECT_GE(MonotonicNanos() - start, 200 * kNanosPerMilli);
  ExitResult r = Wait("stubborn");
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_TRUE(Stop("stubborn", kNanosPerSecond, "SIGTERM").ok()) << "stopping an exited task is not an error";
}

TEST_F(ExecDriverTest, StopWithTrappedSignalReportsTheTasksOwnExitCode) {
  ASSERT_TRUE(Start(Config("trap", {"trap", "USR1", "42"})).ok());
  pid_t pid = Inspect("trap")->pid;
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return SignalMaskHas(pid, "SigCgt", SIGUSR1); }));
  ASSERT_TRUE(Stop("trap", 5 * kNanosPerSecond, "USR1").ok());
  ExitResult r = Wait("trap");
  EXPECT_EQ(r.exit_code, 42);
  EXPECT_EQ(r.signal, 0);
}

TEST_F(ExecDriverTest, StopTimeoutZeroKillsAtOnceAndUnknownSignalIsAnError) {
  ASSERT_TRUE(Start(Config("t", {"sleep", "30"})).ok());
  Status bad = Stop("t", kNanosPerSecond, "SIGNOPE");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message(),
            "unknown signal \"SIGNOPE\" (use a name such as TERM, HUP, USR1, KILL, or a number)");
  ASSERT_TRUE(Stop("t", 0, "").ok());
  EXPECT_EQ(Wait("t").signal, SIGKILL);
  EXPECT_EQ(Stop("nope", 0, "").error().message(), "task not found for given id");
}

TEST_F(ExecDriverTest, InspectTellsAnUnreportedExitFromARunningTask) {
  // With a keeper the driver learns of exits from it; until then the pidfd
  // already shows the process is gone, and running must not be claimed.
  // Started by a driver without a keeper (we are the parent), recovered by
  // one that has us as its keeper.
  auto h = Start(Config("q", {"sleep", "30"}));
  ASSERT_TRUE(h.ok());
  driver_ = NewDriver(true);
  ASSERT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(*h, cb); }).ok());
  EXPECT_EQ(Inspect("q")->state, TaskState::kRunning);
  ::kill(h->pid, SIGKILL);  // not reaped yet: the keeper has not reported it
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return Inspect("q")->state == TaskState::kUnknown; }));
  int st = 0;
  ASSERT_EQ(h->pid, ::waitpid(h->pid, &st, 0));
  driver_->OnProcessExit(h->pid, st, WallNanos());
  EXPECT_EQ(Inspect("q")->state, TaskState::kExited);
  EXPECT_EQ(Wait("q").signal, SIGKILL);
}

TEST_F(ExecDriverTest, DestroyRefusesRunningTaskAndForceKillsBackgroundChildren) {
  // A daemonised child does not outlive its task's main process (Nomad's
  // NoOrphanedTasks): it leaves the process group but carries the marker.
  ASSERT_TRUE(Start(Config("bg", {"orphan", "60"})).ok());
  EXPECT_EQ(Wait("bg").exit_code, 0);
  pid_t orphan = static_cast<pid_t>(std::stol(ReadAll(dir_ + "/bg.out")));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] {
    proc::ProcStat ps;
    return !proc::ReadProcStat(orphan, &ps) || ps.state == 'Z';
  })) << "the orphan of an exited task must be killed";

  ASSERT_TRUE(Start(Config("run", {"sleep", "30"})).ok());
  Status st = Destroy("run", false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "cannot destroy running task");
  EXPECT_TRUE(Destroy("run", true).ok());
  EXPECT_EQ(Inspect("run").error().message(), "task not found for given id");

  EXPECT_TRUE(Destroy("bg", true).ok());
  EXPECT_EQ(Destroy("bg", true).error().code(), Code::kNotFound);
}

TEST_F(ExecDriverTest, ExecRunsInTaskContextWithBoundedOutputAndTimeout) {
  TaskConfig c = Config("ex", {"sleep", "30"});
  c.env["MARK"] = "from-task";
  c.rlimits.push_back({"core", 0, 0});
  ASSERT_TRUE(Start(c).ok());
  auto r = Exec("ex", {helper_, "env"}, 5 * kNanosPerSecond);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_NE(r->output.find("MARK=from-task"), std::string::npos);

  r = Exec("ex", {helper_, "pwd"}, 5 * kNanosPerSecond);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, dir_ + "\n") << "the task's working dir";

  r = Exec("ex", {helper_, "huge-line", "200000"}, 5 * kNanosPerSecond);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->truncated) << "exit code " << r->exit_code << ", " << r->output.size() << " bytes";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output.size(), ExecDriver::Options().exec_output_limit);

  r = Exec("ex", {helper_, "exit", "9"}, 5 * kNanosPerSecond);
  EXPECT_EQ(r->exit_code, 9);

  r = Exec("ex", {helper_, "sleep", "30"}, 100 * kNanosPerMilli);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);

  bool done = false;
  driver_->ExecTask("ex", {}, kNanosPerSecond, [&](Result<ExecResult> res) {
    r = std::move(res);
    done = true;
  });
  EXPECT_TRUE(done);
  EXPECT_FALSE(r.ok());
}

TEST_F(ExecDriverTest, StatsFromProcWithFirstPercentZero) {
  auto h = Start(Config("st", {"sleep", "30"}));
  ASSERT_TRUE(h.ok());
  Result<TaskStats> s1 = Error(Code::kUnknown, "none");
  driver_->TaskStats("st", [&](Result<TaskStats> s) { s1 = std::move(s); });
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->cpu_percent, 0.0);  // the first sample has no delta yet
  EXPECT_FALSE(s1->measured.empty());
  // Until the new image has touched its first pages (just after execve) the
  // task's RSS can read 0: the memory figure is checked once it is there.
  uint64_t rss = 0;
  EXPECT_TRUE(RunUntil(loop_.get(), [&] {
    driver_->TaskStats("st", [&](Result<TaskStats> s) { rss = s.ok() ? s->rss_bytes : 0; });
    return rss > 0;
  }));
  driver_->TaskStats("zzz", [&](Result<TaskStats> s) { s1 = std::move(s); });
  EXPECT_EQ(s1.error().code(), Code::kNotFound);
}

TEST_F(ExecDriverTest, EventsFanOutToEverySubscriber) {
  std::vector<std::string> a, b;
  uint64_t sa = driver_->SubscribeEvents([&](const TaskEvent& e) { a.push_back(e.type); });
  driver_->SubscribeEvents([&](const TaskEvent& e) { b.push_back(e.type + ":" + e.task_id); });
  ASSERT_TRUE(Start(Config("ev", {"sleep", "30"})).ok());
  ASSERT_TRUE(Stop("ev", kNanosPerSecond, "").ok());
  EXPECT_EQ(a, (std::vector<std::string>{"started", "stopping"}));
  EXPECT_EQ(b, (std::vector<std::string>{"started:ev", "stopping:ev"}));
  driver_->UnsubscribeEvents(sa);
  ASSERT_TRUE(Start(Config("ev2", {"exit", "0"})).ok());
  Wait("ev2");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 3u);
}

TEST_F(ExecDriverTest, StateRoundTripAndTheFirstOnDiskFormat) {
  ExecDriver::State s;
  s.pid = 1234;
  s.start_ticks = 99;
  s.instance = "t@1.2";
  s.boot_id = "b";
  s.parent = "keeper";
  auto back = ExecDriver::DecodeState(ExecDriver::kStateVersion, ExecDriver::EncodeState(s));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->pid, 1234);
  EXPECT_EQ(back->start_ticks, 99u);
  EXPECT_EQ(back->instance, "t@1.2");
  EXPECT_EQ(back->parent, "keeper");
  // Version 0: a whole handle file of the first format.
  auto v0 = ExecDriver::DecodeState(
      0, R"({"version": 1, "driver": "exec", "pid": 77, "start_ticks": 5, "driver_state": "agent",
             "instance": "x@1", "config": {"id": "x"}})");
  ASSERT_TRUE(v0.ok()) << v0.error().message();
  EXPECT_EQ(v0->pid, 77);
  EXPECT_EQ(v0->parent, "agent");
  EXPECT_FALSE(ExecDriver::DecodeState(9, "{}").ok());
  EXPECT_FALSE(ExecDriver::DecodeState(2, "not json").ok());
  EXPECT_EQ(ExecDriver::DecodeState(2, "{}").error().message(), "pid: missing");
}

// The test process plays the keeper: it is the tasks' parent, reaps them and
// reports exits to a second driver instance that recovered the handles.
TEST_F(ExecDriverTest, RecoveryReattachesAndReportsJournaledOrUnknownExits) {
  std::map<std::string, TaskHandle> handles;
  for (const char* id : {"live", "dies", "lost"}) {
    auto h = Start(Config(id, {"sleep", "30"}));
    ASSERT_TRUE(h.ok());
    handles[id] = *h;
  }
  pid_t live = handles["live"].pid, dies = handles["dies"].pid, lost = handles["lost"].pid;
  // Simulate the worker dying: forget the driver without cleaning up.
  driver_.reset();
  started_.clear();
  // While "no worker" runs: two tasks end. We (the keeper) reap them.
  ::kill(dies, SIGUSR2);
  ::kill(lost, SIGTERM);
  int st_dies = 0, st_lost = 0;
  ASSERT_EQ(dies, ::waitpid(dies, &st_dies, 0));
  ASSERT_EQ(lost, ::waitpid(lost, &st_lost, 0));

  driver_ = NewDriver(true);
  for (auto& entry : handles) {
    const auto& h = entry.second;
    ASSERT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(h, cb); }).ok());
    started_.push_back(entry.first);
  }
  EXPECT_EQ(Inspect("live")->state, TaskState::kRunning);
  // Recovering a tracked task again is a no-op.
  EXPECT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(handles["live"], cb); }).ok());
  EXPECT_EQ(Inspect("live")->pid, live);
  // A handle whose state cannot be read is refused with the reason.
  TaskHandle broken = handles["live"];
  broken.config.id = "broken";
  broken.driver_state = "{oops";
  Status bs = Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(broken, cb); });
  ASSERT_FALSE(bs.ok());
  EXPECT_NE(bs.error().message().find("recover task broken: driver state"), std::string::npos);
  // The journal has the exit of "dies" but not of "lost".
  driver_->OnProcessExit(dies, st_dies, WallNanos());
  driver_->JournalReplayed();
  ExitResult d = Wait("dies");
  EXPECT_EQ(d.signal, SIGUSR2);
  EXPECT_EQ(d.exit_code, 128 + SIGUSR2);
  ExitResult l = Wait("lost");
  EXPECT_EQ(l.exit_code, -1);
  EXPECT_EQ(l.error, "exit status unknown: the process ended while no agent was running");
  // The live one exits later: reported through the keeper path.
  ::kill(live, SIGKILL);
  int st_live = 0;
  ASSERT_EQ(live, ::waitpid(live, &st_live, 0));
  driver_->OnProcessExit(live, st_live, WallNanos());
  EXPECT_EQ(Wait("live").signal, SIGKILL);
}

// The chaos suite's seed 1934: a task recovered alive whose parent is no
// longer the keeper (re-parented to init after the whole agent was killed)
// ended right after the recovery looked at it, and was reported running
// with a dead pid forever. Its end at that very moment must be seen.
TEST_F(ExecDriverTest, AForeignTaskEndingRightAfterItWasFoundAliveIsSeenToEnd) {
  auto h = Start(Config("f", {"sleep", "30"}));
  ASSERT_TRUE(h.ok());
  driver_.reset();  // the worker is gone; we, its parent, are "init" now
  started_.clear();
  ExecDriver::Options o;
  o.keeper_is_parent = true;
  o.keeper_pid = ::getppid();  // a keeper that is not the task's parent
  o.recovered_alive_for_test = [](pid_t pid) {
    // Dies and is reaped (by "init") between the look and what follows.
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
  };
  auto d = ExecDriver::Create(loop_.get(), o);
  ASSERT_TRUE(d.ok());
  driver_ = std::move(*d);
  ASSERT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(*h, cb); }).ok());
  started_.push_back("f");
  ExitResult r = Wait("f");
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_EQ(r.error, "exit status unknown: the task was adopted by another process while no keeper ran");
  EXPECT_EQ(Inspect("f")->state, TaskState::kExited);
}

// Alive at recovery and ended later, any time later: seen too.
TEST_F(ExecDriverTest, AForeignTaskIsWatchedUntilItEnds) {
  auto h = Start(Config("g", {"sleep", "30"}));
  ASSERT_TRUE(h.ok());
  driver_.reset();
  started_.clear();
  ExecDriver::Options o;
  o.keeper_is_parent = true;
  o.keeper_pid = ::getppid();
  auto d = ExecDriver::Create(loop_.get(), o);
  ASSERT_TRUE(d.ok());
  driver_ = std::move(*d);
  ASSERT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(*h, cb); }).ok());
  started_.push_back("g");
  EXPECT_EQ(Inspect("g")->state, TaskState::kRunning);
  ::kill(h->pid, SIGKILL);
  int st = 0;
  ASSERT_EQ(h->pid, ::waitpid(h->pid, &st, 0));
  EXPECT_EQ(Wait("g").exit_code, -1);
}

TEST_F(ExecDriverTest, RecoveryDetectsPidReuseByStartTime) {
  TaskHandle h;
  h.version = ExecDriver::kStateVersion;
  h.config = Config("reused", {"sleep", "1"});
  ExecDriver::State s;
  s.pid = ::getpid();  // alive, but a different process than the handle says
  s.start_ticks = 1;   // not our start time
  s.parent = "agent";
  h.driver_state = ExecDriver::EncodeState(s);
  ASSERT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(h, cb); }).ok());
  ExitResult r = Wait("reused");  // no keeper: the journal counts as replayed
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_NE(r.error.find("exit status unknown"), std::string::npos);
}

// The exit of a pid goes to the task still running under it, not to an
// ended one that had the same pid: a recovered handle naming a live task's
// pid but another start time is a process gone (pid reused), ended at once.
TEST_F(ExecDriverTest, AnEndedTaskWithTheSamePidDoesNotTakeTheExit) {
  auto a = Start(Config("a", {"sleep", "30"}));
  ASSERT_TRUE(a.ok());
  TaskHandle h;
  h.version = ExecDriver::kStateVersion;
  h.config = Config("0-ghost", {"sleep", "1"});  // sorts before "a"
  ExecDriver::State s;
  s.pid = a->pid;
  s.start_ticks = 1;
  s.parent = "agent";
  h.driver_state = ExecDriver::EncodeState(s);
  ASSERT_TRUE(Call([&](Driver::DoneCallback cb) { driver_->RecoverTask(h, cb); }).ok());
  EXPECT_EQ(Wait("0-ghost").exit_code, -1);
  EXPECT_EQ(Inspect("a")->state, TaskState::kRunning);
  ::kill(a->pid, SIGKILL);
  EXPECT_EQ(Wait("a").signal, SIGKILL);
  EXPECT_TRUE(Destroy("0-ghost", false).ok());
}

}  // namespace
}  // namespace outpost::driver
