// A start's own events through nri/adaptation (docs/nri.md "Failures and
// fail policies", "Required plugins"): the pod's RunPodSandbox and the
// container's CreateContainer, with the fail policies and the required
// plugins applied to both; and a plugin listed once across its
// connections. Fake plugins: nri_adaptation_test_util.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "nri_adaptation_test_util.h"

namespace outpost::nri {
namespace {

using NriStart = adaptation_test::NriAdaptation;
using adaptation_test::FakePlugin;

TEST_F(NriStart, AHungPluginIsClosedAndSkippedOrFailsPerItsPolicy) {
  config_.request_timeout_ms = 40;
  config_.plugins["strict"].fail_policy = FailPolicy::kFail;
  Make();
  std::vector<wire::Responder> held;
  Plugin("slow", "10", EventMask(Event::kCreateContainer))
      ->Handle("CreateContainer", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  auto out = Create("ctr");
  ASSERT_TRUE(out.ok()) << out.error().message();
  ASSERT_EQ(out->plugins.size(), 1u);
  EXPECT_EQ(out->plugins[0].result, "skipped: closed: CreateContainer timed out after 40 ms");
  EXPECT_EQ(State("slow"), "closed");

  Plugin("strict", "20", EventMask(Event::kCreateContainer))
      ->Handle("CreateContainer", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  out = Create("ctr2");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message().find("NRI plugin 20-strict (fail_policy \"fail\")"), std::string::npos)
      << out.error().message();
}

TEST_F(NriStart, RequiredPluginsAreWaitedFor) {
  config_.required_plugins = {"gate"};
  Make();
  EXPECT_EQ(a_->MissingRequired(), "gate");
  bool started = false;
  a_->WaitForRequired([&] { started = true; });
  (void)loop_->RunOnce(10 * kNanosPerMilli);
  EXPECT_FALSE(started);
  Plugin("gate", "10", 0);
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return started; }));
  EXPECT_EQ(a_->MissingRequired(), "");
}

// As the stock logger with -events all, stopped with SIGSTOP: a plugin
// that answers nothing from RunPodSandbox on.
TEST_F(NriStart, AStartFailsWhenAFailPolicyPluginTimesOutAtRunPodSandbox) {
  config_.request_timeout_ms = 40;
  config_.required_plugins = {"logger"};
  config_.plugins["logger"].fail_policy = FailPolicy::kFail;
  Make();
  std::vector<wire::Responder> held;
  FakePlugin* logger = Plugin("logger", "10", kValidEvents);
  logger->Handle("RunPodSandbox", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  logger->Handle("CreateContainer", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  FakePlugin* other = Plugin("other", "20", kValidEvents);
  other->Handle("RunPodSandbox", [](std::string_view, wire::Responder r) { r.Reply(""); });
  auto out = Create("ctr", true);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message(), "NRI plugin 10-logger (fail_policy \"fail\"): closed: RunPodSandbox timed out after 40 ms");
  EXPECT_EQ(std::count(other->calls.begin(), other->calls.end(), "RunPodSandbox"), 1)
      << "every subscriber gets the pod's RunPodSandbox";
  EXPECT_EQ(std::count(other->calls.begin(), other->calls.end(), "CreateContainer"), 0) << "no CreateContainer";
}

TEST_F(NriStart, AStartWaitsWhenARequiredPluginClosesAtRunPodSandbox) {
  config_.request_timeout_ms = 40;
  config_.required_plugins = {"logger"};
  Make();
  std::vector<wire::Responder> held;
  FakePlugin* logger = Plugin("logger", "10", kValidEvents);
  logger->Handle("RunPodSandbox", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  FakePlugin* other = Plugin("other", "20", EventMask(Event::kCreateContainer));
  auto out = Create("ctr", true);
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out->wait_for, "logger");
  EXPECT_FALSE(out->undo) << "no CreateContainer went out";
  EXPECT_FALSE(out->adjust);
  ASSERT_EQ(out->plugins.size(), 1u);
  EXPECT_EQ(out->plugins[0].result, "skipped: closed: RunPodSandbox timed out after 40 ms");
  EXPECT_EQ(std::count(other->calls.begin(), other->calls.end(), "CreateContainer"), 0);
  EXPECT_EQ(a_->MissingRequired(), "logger");
}

TEST_F(NriStart, AStartWaitsWhenARequiredPluginClosesAtCreateContainer) {
  config_.request_timeout_ms = 40;
  config_.required_plugins = {"gate"};
  Make();
  std::vector<wire::Responder> held;
  Adjust(Plugin("a", "10", EventMask(Event::kCreateContainer)), [](ContainerAdjustment* adj) {
    adj->env.push_back({"X", "1"});
  });
  Plugin("gate", "20", EventMask(Event::kCreateContainer))
      ->Handle("CreateContainer", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  auto out = Create("ctr");
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out->wait_for, "gate");
  EXPECT_TRUE(out->undo) << "10-a got CreateContainer: it is to be told the container is gone";
  EXPECT_FALSE(out->adjust) << "nothing is applied";
  ASSERT_EQ(out->plugins.size(), 2u);
  EXPECT_EQ(out->plugins[1].result, "skipped: closed: CreateContainer timed out after 40 ms");
}

TEST_F(NriStart, AStartQueuedBehindAnEventThatClosedARequiredPluginWaits) {
  config_.request_timeout_ms = 40;
  config_.required_plugins = {"gate"};
  Make();
  std::vector<wire::Responder> held;
  FakePlugin* gate = Plugin("gate", "10", kValidEvents);
  gate->Handle("StartContainer", [&](std::string_view, wire::Responder r) { held.push_back(r); });
  a_->Notify(Event::kStartContainer, Pod(), Ctr("first"));  // queued before the start, times out
  auto out = Create("ctr");
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(out->wait_for, "gate");
  EXPECT_EQ(std::count(gate->calls.begin(), gate->calls.end(), "CreateContainer"), 0);
}

// As a stock plugin run as a job with restart "always": connected, gone,
// connected again, twice.
TEST_F(NriStart, APluginIsListedOnceAcrossItsConnections) {
  Make();
  for (int i = 0; i < 3; ++i) {
    FakePlugin* p = Plugin("ext", "10", EventMask(Event::kCreateContainer));
    Adjust(p, [](ContainerAdjustment*) {});
    auto out = Create("c" + std::to_string(i));
    ASSERT_TRUE(out.ok()) << out.error().message();
    if (i == 2) break;
    p->trunk_->Close();
    ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return State("ext") == "closed"; }));
  }
  std::vector<PluginInfo> list = a_->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].state, "ready");
  EXPECT_EQ(list[0].restarts, 2u);
  EXPECT_EQ(list[0].requests, 9u) << "Configure, Synchronize and CreateContainer per connection";
  EXPECT_NE(list[0].last_error.find("connection closed"), std::string::npos) << list[0].last_error;
}

}  // namespace
}  // namespace outpost::nri
