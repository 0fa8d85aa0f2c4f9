#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/strings.h"
#include "base/sys.h"
#include "driver/exec/exec_driver.h"
#include "proc/procfs.h"
#include "proc/spawn.h"
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
  size_t at = st->find(std::string(field) + ":\t");
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
    if (driver_) {
      for (const std::string& id : driver_->ListTasks()) {
        bool done = false;
        driver_->DestroyTask(id, true, [&](Status) { done = true; });
        RunUntil(loop_.get(), [&] { return done; });
      }
    }
    driver_.reset();
    std::string cmd = "rm -rf " + dir_;
    (void)::system(cmd.c_str());
  }
  std::unique_ptr<ExecDriver> NewDriver(bool keeper_is_parent) {
    ExecDriver::Options o;
    o.state_dir = dir_ + "/state";
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
    return out;
  }
  ExitResult Wait(const std::string& id) {
    ExitResult r;
    bool done = false;
    EXPECT_TRUE(driver_->WaitTask(id, [&](const ExitResult& e) {
      r = e;
      done = true;
    }).ok());
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond));
    return r;
  }
  Status Stop(const std::string& id, int64_t timeout, const std::string& sig) {
    Status out = Error(Code::kUnknown, "pending");
    bool done = false;
    driver_->StopTask(id, timeout, sig, [&](Status st) {
      out = st;
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond));
    return out;
  }
  Status Destroy(const std::string& id, bool force) {
    Status out = Error(Code::kUnknown, "pending");
    bool done = false;
    driver_->DestroyTask(id, force, [&](Status st) {
      out = st;
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 10 * kNanosPerSecond));
    return out;
  }

  std::string dir_;
  std::string helper_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ExecDriver> driver_;
};

TEST_F(ExecDriverTest, ExitCodeIsReportedAndWaitWorksBeforeAndAfterExit) {
  auto started = Start(Config("t1", {"exit", "3"}));
  ASSERT_TRUE(started.ok()) << started.error().message();
  ExitResult r = Wait("t1");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_FALSE(r.Successful());
  ExitResult again = Wait("t1");  // after the exit too
  EXPECT_EQ(again.exit_code, 3);
  auto st = driver_->InspectTask("t1");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, TaskState::kExited);
  EXPECT_GT(st->completed_at_unix_nanos, 0);
  EXPECT_GE(st->completed_at_unix_nanos, st->started_at_unix_nanos);
}

TEST_F(ExecDriverTest, SignalDeathReports128PlusSigno) {
  ASSERT_TRUE(Start(Config("t1", {"sleep", "30"})).ok());
  ASSERT_TRUE(driver_->SignalTask("t1", "SIGKILL").ok());
  ExitResult r = Wait("t1");
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_EQ(r.signal, SIGKILL);
}

TEST_F(ExecDriverTest, StartErrors) {
  ASSERT_TRUE(Start(Config("dup", {"sleep", "30"})).ok());
  auto dup = Start(Config("dup", {"sleep", "30"}));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().message(), "start task dup: task with ID \"dup\" already started");

  TaskConfig c = Config("u", {"exit", "0"});
  c.user = "no-such-user-xyz";
  auto u = Start(c);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().message(), "start task u: user \"no-such-user-xyz\" not found in /etc/passwd");
  EXPECT_TRUE(driver_->InspectTask("u").error().code() == Code::kNotFound) << "no handle after a failed start";

  c = Config("nf", {});
  c.command = "definitely-not-a-command-xyz";
  auto nf = Start(c);
  ASSERT_FALSE(nf.ok());
  EXPECT_NE(nf.error().message().find("command \"definitely-not-a-command-xyz\" not found in PATH="),
            std::string::npos);
  EXPECT_NE(nf.error().message().find("(exit status 127)"), std::string::npos);

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

  c = Config("bad/id", {"exit", "0"});
  EXPECT_FALSE(Start(c).ok());
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
  for (const std::string& want : std::vector<std::string>{"GREETING=hello world", "PATH=/bin:/usr/bin", "OUTPOST_JOB=web", "OUTPOST_TASK=api",
                                  "OUTPOST_TASK_ID=env", "OUTPOST_TASK_DIR=" + dir_, "HOME="}) {
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
  pid_t pid = driver_->InspectTask("stubborn")->pid;
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
  pid_t pid = driver_->InspectTask("trap")->pid;
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
  EXPECT_EQ(bad.error().message(), "unknown signal \"SIGNOPE\" (use a name such as TERM, HUP, USR1, KILL, or a number)");
  ASSERT_TRUE(Stop("t", 0, "").ok());
  EXPECT_EQ(Wait("t").signal, SIGKILL);
  EXPECT_EQ(Stop("nope", 0, "").error().message(), "task not found for given id");
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
  EXPECT_EQ(driver_->InspectTask("run").error().message(), "task not found for given id");
  EXPECT_NE(0, ::access((dir_ + "/state/tasks/run.json").c_str(), F_OK)) << "state removed";

  EXPECT_TRUE(Destroy("bg", true).ok());
  EXPECT_EQ(Destroy("bg", true).error().code(), Code::kNotFound);
}

TEST_F(ExecDriverTest, ExecRunsInTaskContextWithBoundedOutputAndTimeout) {
  TaskConfig c = Config("ex", {"sleep", "30"});
  c.env["MARK"] = "from-task";
  ASSERT_TRUE(Start(c).ok());
  Result<ExecResult> r = Error(Code::kUnknown, "pending");
  bool done = false;
  driver_->ExecTask("ex", {helper_, "env"}, 5 * kNanosPerSecond, [&](Result<ExecResult> res) {
    r = std::move(res);
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_NE(r->output.find("MARK=from-task"), std::string::npos);

  done = false;
  driver_->ExecTask("ex", {helper_, "huge-line", "200000"}, 5 * kNanosPerSecond, [&](Result<ExecResult> res) {
    r = std::move(res);
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->truncated) << "exit code " << r->exit_code << ", " << r->output.size() << " bytes";
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output.size(), driver_->options().exec_output_limit);

  done = false;
  driver_->ExecTask("ex", {helper_, "exit", "9"}, 5 * kNanosPerSecond, [&](Result<ExecResult> res) {
    r = std::move(res);
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  EXPECT_EQ(r->exit_code, 9);

  done = false;
  driver_->ExecTask("ex", {helper_, "sleep", "30"}, 100 * kNanosPerMilli, [&](Result<ExecResult> res) {
    r = std::move(res);
    done = true;
  });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);

  done = false;
  driver_->ExecTask("ex", {}, kNanosPerSecond, [&](Result<ExecResult> res) {
    r = std::move(res);
    done = true;
  });
  EXPECT_TRUE(done);
  EXPECT_FALSE(r.ok());
}

TEST_F(ExecDriverTest, StatsFromProcWithFirstPercentZero) {
  ASSERT_TRUE(Start(Config("st", {"sleep", "30"})).ok());
  auto s1 = driver_->GetTaskStats("st");
  ASSERT_TRUE(s1.ok());
  EXPECT_EQ(s1->cpu_percent, 0.0);
  EXPECT_GT(s1->rss_bytes, 0u);
  EXPECT_FALSE(s1->measured.empty());
  EXPECT_EQ(driver_->GetTaskStats("zzz").error().code(), Code::kNotFound);
}

TEST_F(ExecDriverTest, EventsFanOutToEverySubscriber) {
  std::vector<std::string> a, b;
  uint64_t sa = driver_->SubscribeEvents([&](const TaskEvent& e) { a.push_back(e.type); });
  driver_->SubscribeEvents([&](const TaskEvent& e) { b.push_back(e.type + ":" + e.task_id); });
  ASSERT_TRUE(Start(Config("ev", {"exit", "4"})).ok());
  Wait("ev");
  EXPECT_EQ(a, (std::vector<std::string>{"started", "exited"}));
  EXPECT_EQ(b, (std::vector<std::string>{"started:ev", "exited:ev"}));
  driver_->UnsubscribeEvents(sa);
  ASSERT_TRUE(Start(Config("ev2", {"exit", "0"})).ok());
  Wait("ev2");
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 4u);
}

TEST_F(ExecDriverTest, HandleRoundTrip) {
  TaskHandle h;
  h.config = Config("rt", {"a", "b c"});
  h.config.env["K"] = "V";
  h.config.rlimits.push_back({"nofile", 10, 20});
  h.pid = 1234;
  h.start_ticks = 99;
  ExitResult e;
  e.exit_code = 137;
  e.signal = 9;
  std::string text = ExecDriver::EncodeHandle(h, &e, 555);
  ExitResult e2;
  int64_t completed = 0;
  bool has_exit = false;
  auto h2 = ExecDriver::DecodeHandle(text, &e2, &completed, &has_exit);
  ASSERT_TRUE(h2.ok()) << h2.error().message();
  EXPECT_EQ(h2->config.args, h.config.args);
  EXPECT_EQ(h2->config.env, h.config.env);
  EXPECT_EQ(h2->config.rlimits[0].hard, 20u);
  EXPECT_EQ(h2->pid, 1234);
  EXPECT_EQ(h2->start_ticks, 99u);
  EXPECT_TRUE(has_exit);
  EXPECT_EQ(e2.exit_code, 137);
  EXPECT_EQ(completed, 555);
  EXPECT_FALSE(ExecDriver::DecodeHandle("{\"version\": 99, \"config\": {\"id\": \"x\"}}", &e2, &completed,
                                        &has_exit).ok());
  EXPECT_FALSE(ExecDriver::DecodeHandle("not json", &e2, &completed, &has_exit).ok());
}

// The test process plays the keeper: it is the tasks' parent, reaps them and
// reports exits to a second driver instance that recovered the handles.
TEST_F(ExecDriverTest, RecoveryReattachesAndReportsJournaledOrUnknownExits) {
  ASSERT_TRUE(Start(Config("live", {"sleep", "30"})).ok());
  ASSERT_TRUE(Start(Config("dies", {"sleep", "30"})).ok());
  ASSERT_TRUE(Start(Config("lost", {"sleep", "30"})).ok());
  ASSERT_TRUE(Start(Config("done", {"exit", "5"})).ok());
  EXPECT_EQ(Wait("done").exit_code, 5);
  pid_t live = driver_->InspectTask("live")->pid;
  pid_t dies = driver_->InspectTask("dies")->pid;
  pid_t lost = driver_->InspectTask("lost")->pid;
  // Simulate the worker dying: forget the driver without cleaning up.
  for (pid_t p : {live, dies, lost}) loop_->UnwatchChild(p);
  driver_.reset();
  // While "no worker" runs: two tasks end. We (the keeper) reap them.
  ::kill(dies, SIGUSR2);
  ::kill(lost, SIGTERM);
  int st_dies = 0, st_lost = 0;
  ASSERT_EQ(dies, ::waitpid(dies, &st_dies, 0));
  ASSERT_EQ(lost, ::waitpid(lost, &st_lost, 0));
  // A corrupt handle must not stop the others from coming back.
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/tasks/corrupt.json", "{oops", 0600).ok());

  driver_ = NewDriver(true);
  ASSERT_TRUE(driver_->RecoverAll().ok());
  EXPECT_EQ(driver_->InspectTask("live")->state, TaskState::kRunning);
  EXPECT_EQ(driver_->InspectTask("done")->state, TaskState::kExited);
  EXPECT_EQ(driver_->InspectTask("done")->exit.exit_code, 5);
  EXPECT_EQ(driver_->InspectTask("corrupt").error().code(), Code::kNotFound);
  // Recovering a tracked task again is a no-op.
  TaskHandle h;
  h.config.id = "live";
  EXPECT_TRUE(driver_->RecoverTask(h).ok());
  EXPECT_EQ(driver_->InspectTask("live")->pid, live);
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

TEST_F(ExecDriverTest, RecoveryDetectsPidReuseByStartTime) {
  TaskHandle h;
  h.config = Config("reused", {"sleep", "1"});
  h.pid = ::getpid();      // alive, but a different process than the handle says
  h.start_ticks = 1;       // not our start time
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/state/tasks/reused.json", ExecDriver::EncodeHandle(h, nullptr, 0), 0600)
                  .ok());
  driver_ = NewDriver(false);
  ASSERT_TRUE(driver_->RecoverAll().ok());
  driver_->JournalReplayed();
  auto st = driver_->InspectTask("reused");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, TaskState::kExited);
  EXPECT_NE(st->exit.error.find("exit status unknown"), std::string::npos);
}

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

}  // namespace
}  // namespace outpost::driver
