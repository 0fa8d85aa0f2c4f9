#include "proc/child_run.h"

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "base/strings.h"
#include "base/sys.h"
#include "proc/procfs.h"
#include "test_util.h"

namespace outpost::proc {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

std::string HelperPath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return sys::Dirname(n > 0 ? std::string(buf, static_cast<size_t>(n)) : "") + "/test_helper";
}

class ChildRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    helper_ = HelperPath();
    ASSERT_EQ(0, ::access(helper_.c_str(), X_OK)) << helper_ << " missing: build it with `make build/test_helper`";
    if (!outpost::testing::CanExecHelper(helper_)) {
      GTEST_SKIP() << "cannot exec " << helper_ << " from this process (qemu-user without binfmt_misc); "
                   << "the ARM VM test covers spawning";
    }
    loop_ = MakeLoop();
  }

  ChildRunRequest Req(std::vector<std::string> args) {
    ChildRunRequest r;
    r.path = helper_;
    r.argv = {helper_};
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    return r;
  }

  // Runs to completion; the result is in result_.
  void Run(ChildRunRequest r) {
    done_ = false;
    auto run = ChildRun::Start(loop_.get(), std::move(r), [this](const ChildRunResult& res) {
      result_ = res;
      done_ = true;
    });
    ASSERT_TRUE(run.ok()) << run.error().message();
    run_ = std::move(*run);
    ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done_; }, 20 * kNanosPerSecond));
  }

  std::string helper_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ChildRun> run_;
  ChildRunResult result_;
  bool done_ = false;
};

TEST_F(ChildRunTest, ArgvAndEnvAreExactlyWhatWasGiven) {
  auto r = Req({"args", "a b", "", "--x"});
  Run(r);
  EXPECT_TRUE(result_.Succeeded());
  EXPECT_EQ(result_.out, "a b\n\n--x\n");
  r = Req({"env"});
  r.env = {"ONLY=1", "EMPTY="};
  Run(r);
  EXPECT_EQ(result_.out, "ONLY=1\nEMPTY=\n");
  r = Req({"env"});  // no env at all: nothing inherited from us
  Run(r);
  EXPECT_EQ(result_.out, "");
}

TEST_F(ChildRunTest, StdinIsWrittenThenClosed) {
  auto r = Req({"cat"});
  r.stdin_data = std::string(300000, 'y') + "end";  // more than a pipe holds
  r.output_limit = 1 << 20;
  Run(r);
  EXPECT_TRUE(result_.Succeeded());
  EXPECT_EQ(result_.out.size(), 300003u);
  EXPECT_TRUE(EndsWith(result_.out, "yend"));
}

TEST_F(ChildRunTest, UnreadStdinDoesNotHoldTheRun) {
  auto r = Req({"exit", "0"});
  r.stdin_data = std::string(1 << 20, 'z');
  Run(r);
  EXPECT_TRUE(result_.Succeeded());
}

TEST_F(ChildRunTest, OutputIsBoundedPerStreamAndTheRestCounted) {
  auto r = Req({"huge-line", "100000"});
  r.output_limit = 1000;
  Run(r);
  EXPECT_EQ(result_.out.size(), 1000u);
  EXPECT_EQ(result_.out_dropped, 100001u - 1000u);
  r = Req({"stderr", "oops"});
  Run(r);
  EXPECT_EQ(result_.out, "");
  EXPECT_EQ(result_.err, "oops\n");
  r.merge_stderr = true;
  Run(r);
  EXPECT_EQ(result_.out, "oops\n");
  EXPECT_EQ(result_.err, "");
}

TEST_F(ChildRunTest, ExitCodeAndSignalAreReported) {
  Run(Req({"exit", "7"}));
  EXPECT_FALSE(result_.Succeeded());
  EXPECT_EQ(result_.exit.exit_code, 7);
  EXPECT_EQ(result_.exit.signal, 0);
  EXPECT_EQ(DescribeExitStatus(result_.exit), "exit code 7");
}

TEST_F(ChildRunTest, DeadlineKillsTheWholeProcessGroup) {
  // orphan forks a sleeper in its own session (out of the group); trap keeps
  // the leader alive until the deadline.
  auto r = Req({"trap", "USR1", "3"});
  r.timeout_nanos = 200 * kNanosPerMilli;
  Run(r);
  EXPECT_TRUE(result_.timed_out);
  EXPECT_EQ(result_.exit.signal, SIGKILL);
  EXPECT_FALSE(result_.Succeeded());
  EXPECT_GE(result_.duration_nanos, 200 * kNanosPerMilli);
}

TEST_F(ChildRunTest, ADescendantHoldingThePipesDoesNotHoldTheRun) {
  auto r = Req({"orphan", "30"});
  Run(r);
  EXPECT_TRUE(result_.Succeeded());
  pid_t orphan = static_cast<pid_t>(std::atoi(result_.out.c_str()));
  ASSERT_GT(orphan, 0) << result_.out;
  ::kill(orphan, SIGKILL);
}

TEST_F(ChildRunTest, ExecFailureIsAnErrorLikeAShell) {
  ChildRunRequest r;
  r.path = "/nonexistent/prog";
  r.argv = {"prog"};
  bool called = false;
  auto run = ChildRun::Start(loop_.get(), r, [&](const ChildRunResult&) { called = true; });
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message().find("exit status 127"), std::string::npos) << run.error().message();
  ASSERT_TRUE(loop_->RunOnce(10 * kNanosPerMilli).ok());
  EXPECT_FALSE(called);
}

TEST_F(ChildRunTest, DestroyingARunKillsItAndDoneNeverRuns) {
  bool called = false;
  auto run = ChildRun::Start(loop_.get(), Req({"sleep", "30"}), [&](const ChildRunResult&) { called = true; });
  ASSERT_TRUE(run.ok());
  pid_t pid = (*run)->pid();
  run->reset();
  // Reaped by the loop: the process disappears (no zombie left).
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return ::kill(pid, 0) != 0; }));
  EXPECT_FALSE(called);
}

TEST_F(ChildRunTest, DoneMayDestroyTheRun) {
  auto run = ChildRun::Start(loop_.get(), Req({"exit", "0"}), [&](const ChildRunResult&) {
    run_.reset();
    done_ = true;
  });
  ASSERT_TRUE(run.ok());
  run_ = std::move(*run);
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done_; }));
  EXPECT_EQ(run_, nullptr);
}

}  // namespace
}  // namespace outpost::proc
