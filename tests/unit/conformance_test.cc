// The driver conformance runner: all checks pass against the exec driver
// (destroy-kills-all is skipped without cgroup v2, which these tests never
// have: the VM test covers it), a driver that breaks a rule (reports SIGTERM
// for a SIGKILL stop) fails the check that covers it, and a driver that
// deregisters mid-check fails that check and every later one.
#include "driver/conformance.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cgroup/cgroup.h"
#include "driver/exec/exec_driver.h"
#include "test_util.h"

namespace outpost::driver {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

// Forwards to a real driver; optionally lies about SIGKILL deaths and
// claims it cannot signal.
class Wrapped : public Driver {
 public:
  explicit Wrapped(Driver* d) : d_(d) {}
  bool lie_about_sigkill = false;
  bool no_signals = false;
  // StopTask's timeout 0 taken as this grace period (a driver that reads
  // 0 as "my default").
  int64_t grace_for_zero = 0;
  // Deregisters itself from it on the first WaitTask, which then reports
  // the exit as unknown, as for a plugin whose connection dropped.
  Registry* vanish_on_wait = nullptr;
  std::string Name() const override { return "wrapped"; }
  Capabilities GetCapabilities() const override {
    Capabilities c = d_->GetCapabilities();
    if (no_signals) c.send_signals = false;
    return c;
  }
  Fingerprint GetFingerprint() override { return d_->GetFingerprint(); }
  void StartTask(const TaskConfig& c, StartCallback done) override { d_->StartTask(c, std::move(done)); }
  void RecoverTask(const TaskHandle& h, DoneCallback done) override { d_->RecoverTask(h, std::move(done)); }
  void WaitTask(const std::string& id, WaitCallback done) override {
    if (vanish_on_wait) {
      vanish_on_wait->Remove(Name());
      vanish_on_wait = nullptr;
      return d_->WaitTask(id, [done](const ExitResult&) {
        ExitResult lost;
        lost.exit_code = -1;
        lost.error = "wait: connection closed";
        done(lost);
      });
    }
    d_->WaitTask(id, [this, done](const ExitResult& e) {
      ExitResult r = e;
      if (lie_about_sigkill && r.signal == SIGKILL) r.signal = SIGTERM, r.exit_code = 128 + SIGTERM;
      done(r);
    });
  }
  void StopTask(const std::string& id, int64_t t, const std::string& s, DoneCallback done) override {
    d_->StopTask(id, t == 0 ? grace_for_zero : t, s, std::move(done));
  }
  void DestroyTask(const std::string& id, bool force, DoneCallback done) override {
    d_->DestroyTask(id, force, std::move(done));
  }
  void InspectTask(const std::string& id, InspectCallback done) override { d_->InspectTask(id, std::move(done)); }
  void SignalTask(const std::string& id, const std::string& s, DoneCallback done) override {
    d_->SignalTask(id, s, std::move(done));
  }
  void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t t, ExecCallback done) override {
    d_->ExecTask(id, cmd, t, std::move(done));
  }
  void TaskStats(const std::string& id, StatsCallback done) override { d_->TaskStats(id, std::move(done)); }
  uint64_t SubscribeEvents(EventCallback cb) override { return d_->SubscribeEvents(std::move(cb)); }
  void UnsubscribeEvents(uint64_t id) override { d_->UnsubscribeEvents(id); }

 private:
  Driver* d_;
};

class ConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outpost-conformance.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    loop_ = MakeLoop();
    ExecDriver::Options o;
    o.keeper_pid = ::getpid();
    auto d = ExecDriver::Create(loop_.get(), o);
    ASSERT_TRUE(d.ok()) << d.error().message();
    exec_ = std::move(*d);
  }
  void TearDown() override {
    exec_.reset();
    std::string cmd = "rm -rf " + dir_;
    (void)::system(cmd.c_str());
  }
  std::map<std::string, CheckResult> Run(Driver& d, Registry* reg = nullptr, cgroup::Cgroups* cg = nullptr,
                                         const std::string& passwd = "") {
    Registry own;
    if (!reg) reg = &own;
    EXPECT_TRUE(reg->Add(&d).ok());
    ConformanceOptions o;
    o.work_dir = dir_;
    o.cgroups = cg;
    if (!passwd.empty()) o.users.passwd_path = passwd;
    bool done = false;
    std::map<std::string, CheckResult> out;
    order_.clear();
    RunConformance(*loop_, *reg, d.Name(), o, [&](std::vector<CheckResult> rs) {
      for (auto& r : rs) out[r.name] = r, order_.push_back(r.name);
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 120 * kNanosPerSecond));
    return out;
  }
  std::string dir_;
  std::vector<std::string> order_;  // of the last run's checks
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ExecDriver> exec_;
};

TEST_F(ConformanceTest, ExecDriverPassesAll) {
  // A cgroup root outside any cgroup2 mount: cgroup v2 is unavailable.
  cgroup::Cgroups::Options co;
  co.root = dir_ + "/no-cgroup";
  auto cg = cgroup::Cgroups::Setup(co);
  ASSERT_FALSE(cg->available());
  auto rs = Run(*exec_, nullptr, cg.get());
  EXPECT_EQ(13u, rs.size());
  for (auto& [name, r] : rs) {
    if (name == "destroy-kills-all") continue;
    EXPECT_EQ(CheckOutcome::kPass, r.outcome) << name << ": " << r.detail;
  }
  EXPECT_EQ(CheckOutcome::kSkip, rs["destroy-kills-all"].outcome) << rs["destroy-kills-all"].detail;
  EXPECT_EQ("no cgroup v2 on this node", rs["destroy-kills-all"].detail);
  EXPECT_EQ(CheckOutcome::kPass, rs["bad-user"].outcome) << rs["bad-user"].detail;
}

// Where the "missing" user exists (here as the agent's own uid), the start
// succeeds and bad-user fails; the task it started is cleaned up.
TEST_F(ConformanceTest, BadUserFailsWhenTheStartSucceeds) {
  std::string passwd = dir_ + "/passwd";
  FILE* f = ::fopen(passwd.c_str(), "w");
  ASSERT_NE(nullptr, f);
  ::fprintf(f, "outpost-conformance-no-such-user:x:%u:%u::/:/bin/sh\n", ::geteuid(), ::getegid());
  ::fclose(f);
  auto rs = Run(*exec_, nullptr, nullptr, passwd);
  EXPECT_EQ(CheckOutcome::kFail, rs["bad-user"].outcome);
  EXPECT_EQ("start as a missing user succeeded", rs["bad-user"].detail);
  EXPECT_EQ(CheckOutcome::kPass, rs["bad-command"].outcome) << rs["bad-command"].detail;
}

TEST_F(ConformanceTest, DriverGoneMidCheckFailsThatCheckAndTheRest) {
  Registry reg;
  Wrapped w(exec_.get());
  // start-wait, the first check, makes the first WaitTask call: what it
  // then sees (an unknown exit) is reported as the driver's going, and the
  // later checks find no driver.
  w.vanish_on_wait = &reg;
  auto rs = Run(w, &reg);
  ASSERT_EQ(13u, order_.size());
  EXPECT_EQ("start-wait", order_[0]);
  for (size_t i = 0; i < order_.size(); ++i) {
    const CheckResult& r = rs[order_[i]];
    EXPECT_EQ(CheckOutcome::kFail, r.outcome) << order_[i];
    EXPECT_EQ("driver wrapped went away during the check", r.detail) << order_[i];
  }
  EXPECT_EQ(nullptr, reg.Find("wrapped"));
}

TEST_F(ConformanceTest, BrokenRuleFailsItsCheckAndCapabilitiesSkip) {
  Wrapped w(exec_.get());
  w.lie_about_sigkill = true;
  w.no_signals = true;
  auto rs = Run(w);
  EXPECT_EQ(CheckOutcome::kFail, rs["stop-sigkill"].outcome);
  EXPECT_EQ("wait result signal 15, expected 9", rs["stop-sigkill"].detail);
  EXPECT_EQ(CheckOutcome::kSkip, rs["signal"].outcome);
  EXPECT_EQ("driver wrapped cannot signal tasks", rs["signal"].detail);
  EXPECT_EQ(CheckOutcome::kPass, rs["start-wait"].outcome) << rs["start-wait"].detail;
}

// Timeout 0 read as a 30 s grace: the task stopped with 5 s just after it
// ends first, which the check tells (an order of exits, not a time limit).
TEST_F(ConformanceTest, TimeoutZeroWithAGraceFailsItsCheck) {
  Wrapped w(exec_.get());
  w.grace_for_zero = 30 * kNanosPerSecond;
  auto rs = Run(w);
  EXPECT_EQ(CheckOutcome::kFail, rs["stop-timeout-0"].outcome);
  EXPECT_EQ("the task stopped with timeout 0 had not ended when the one with a 5 s grace was killed",
            rs["stop-timeout-0"].detail);
  EXPECT_EQ(CheckOutcome::kPass, rs["stop-sigkill"].outcome) << rs["stop-sigkill"].detail;
}

}  // namespace
}  // namespace outpost::driver
