// The driver conformance runner: all checks pass against the exec driver,
// and a driver that breaks a rule (reports SIGTERM for a SIGKILL stop)
// fails the check that covers it.
#include "driver/conformance.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>

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
    d_->WaitTask(id, [this, done](const ExitResult& e) {
      ExitResult r = e;
      if (lie_about_sigkill && r.signal == SIGKILL) r.signal = SIGTERM, r.exit_code = 128 + SIGTERM;
      done(r);
    });
  }
  void StopTask(const std::string& id, int64_t t, const std::string& s, DoneCallback done) override {
    d_->StopTask(id, t, s, std::move(done));
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
  std::map<std::string, CheckResult> Run(Driver& d) {
    ConformanceOptions o;
    o.work_dir = dir_;
    bool done = false;
    std::map<std::string, CheckResult> out;
    RunConformance(*loop_, d, o, [&](std::vector<CheckResult> rs) {
      for (auto& r : rs) out[r.name] = r;
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }, 120 * kNanosPerSecond));
    return out;
  }
  std::string dir_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<ExecDriver> exec_;
};

TEST_F(ConformanceTest, ExecDriverPassesAll) {
  auto rs = Run(*exec_);
  EXPECT_EQ(12u, rs.size());
  for (auto& [name, r] : rs) {
    EXPECT_EQ(CheckOutcome::kPass, r.outcome) << name << ": " << r.detail;
  }
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

}  // namespace
}  // namespace outpost::driver
