// The NRI plugin library (include/outpost/nri.h) against a fake runtime:
// the test plays the runtime side (a mux trunk on a socketpair, the Runtime
// service on connection 2, a Plugin client on connection 1) and runs a Stub
// subclass in a forked child that inherits its end as NRI_PLUGIN_SOCKET, as
// a runtime-launched plugin does. The child's observations come back over
// the wire (adjustments, updates, error texts).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/strings.h"
#include "nri_fake_runtime.h"
#include "nriproto/codec.h"
#include "outpost/nri.h"

namespace outpost::testing {
namespace {

using namespace outpost::nri;  // NOLINT

// The plugin under test (runs in the child).
class ProbePlugin : public Stub {
 public:
  using Stub::Stub;

  std::string Synchronize(const std::vector<PodSandbox>& pods, const std::vector<Container>& ctrs,
                          std::vector<ContainerUpdate>* updates) override {
    // Reports what it got: one update per container, plus the pod count.
    for (const Container& c : ctrs) updates->push_back(ContainerUpdate{c.id, std::nullopt, false});
    updates->push_back(ContainerUpdate{Format("pods=%zu", pods.size()), std::nullopt, true});
    return "";
  }
  std::string RunPodSandbox(const PodSandbox& pod) override { return "RunPodSandbox saw " + pod.id; }
  std::string StopPodSandbox(const PodSandbox& pod) override { return "StopPodSandbox saw " + pod.id; }
  std::string StartContainer(const PodSandbox& pod, const Container& c) override {
    return "StartContainer saw " + pod.id + "/" + c.name;
  }
  std::string CreateContainer(const PodSandbox& pod, const Container& c, CreateContainerResponse* out) override {
    if (c.name == "bad") return "refusing container bad";
    ContainerAdjustment& adj = out->adjust.emplace();
    adj.env.push_back({"SEEN_BY", "probe"});
    adj.annotations["pod"] = pod.id;
    adj.linux.emplace().resources.emplace().memory.emplace().limit = 64 << 20;
    return "";
  }
};

class NriStubTest : public ::testing::Test {
 protected:
  // Forks the probe plugin with `events`, as a launched plugin.
  void Start(uint32_t events) {
    rt_.Start([events](int fd) {
      ::setenv("NRI_PLUGIN_SOCKET", std::to_string(fd).c_str(), 1);
      ::unsetenv("NRI_PLUGIN_NAME");
      ::unsetenv("NRI_PLUGIN_IDX");
      StubOptions o;
      o.argv0 = "/opt/nri/plugins/42-probe";
      o.events = events;
      ProbePlugin p(o);
      int rc = p.Run();
      ::_exit(std::getenv("NRI_PLUGIN_SOCKET") == nullptr ? rc : 77);
    });
  }
  Result<std::string> Call(const char* method, const std::string& payload) { return rt_.Call(method, payload); }
  ConfigureResponse Configure() { return rt_.Configure(); }

  FakeNriRuntime rt_;
  int& register_frames_ = rt_.register_frames;
  RegisterPluginRequest& registered_ = rt_.registered;
};

uint32_t AllBut(Event e) { return kValidEvents & ~EventMask(e); }

TEST_F(NriStubTest, RegistersWithArgv0NameAndIndex) {
  Start(0);
  EXPECT_EQ(register_frames_, 1);
  EXPECT_EQ(registered_.plugin_name, "probe");
  EXPECT_EQ(registered_.plugin_idx, "42");
  EXPECT_TRUE(StartsWith(registered_.nri_version, "outpost-")) << registered_.nri_version;
}

TEST_F(NriStubTest, ConfigureAnswersTheSubscription) {
  uint32_t mask = EventMask(Event::kCreateContainer) | EventMask(Event::kRunPodSandbox);
  Start(mask);
  EXPECT_EQ(static_cast<uint32_t>(Configure().events), mask);
}

TEST_F(NriStubTest, SplitSynchronizeIsRecombined) {
  Start(0);
  Configure();
  SynchronizeRequest first;
  first.more = true;
  first.pods.resize(2);
  first.pods[0].id = "p1";
  first.pods[1].id = "p2";
  first.containers.resize(1);
  first.containers[0].id = "c1";
  auto r1 = Call("Synchronize", nriproto::Encode(first));
  ASSERT_TRUE(r1.ok()) << r1.error().message();
  SynchronizeResponse resp1;
  ASSERT_TRUE(nriproto::Decode(*r1, &resp1).ok());
  EXPECT_TRUE(resp1.more);
  EXPECT_TRUE(resp1.update.empty());

  SynchronizeRequest last;
  last.pods.resize(1);
  last.pods[0].id = "p3";
  last.containers.resize(2);
  last.containers[0].id = "c2";
  last.containers[1].id = "c3";
  auto r2 = Call("Synchronize", nriproto::Encode(last));
  ASSERT_TRUE(r2.ok()) << r2.error().message();
  SynchronizeResponse resp2;
  ASSERT_TRUE(nriproto::Decode(*r2, &resp2).ok());
  EXPECT_FALSE(resp2.more);
  ASSERT_EQ(resp2.update.size(), 4u);
  EXPECT_EQ(resp2.update[0].container_id, "c1");
  EXPECT_EQ(resp2.update[1].container_id, "c2");
  EXPECT_EQ(resp2.update[2].container_id, "c3");
  EXPECT_EQ(resp2.update[3].container_id, "pods=3");
}

TEST_F(NriStubTest, CreateContainerReturnsTheAdjustment) {
  Start(0);
  Configure();
  PodContainerRequest req;
  req.pod.emplace().id = "pod-1";
  req.container.emplace().name = "web";
  auto r = Call("CreateContainer", nriproto::Encode(req));
  ASSERT_TRUE(r.ok()) << r.error().message();
  CreateContainerResponse resp;
  ASSERT_TRUE(nriproto::Decode(*r, &resp).ok());
  ASSERT_TRUE(resp.adjust.has_value());
  ASSERT_EQ(resp.adjust->env.size(), 1u);
  EXPECT_EQ(resp.adjust->env[0].key, "SEEN_BY");
  EXPECT_EQ(resp.adjust->env[0].value, "probe");
  EXPECT_EQ(resp.adjust->annotations["pod"], "pod-1");
  ASSERT_TRUE(resp.adjust->linux && resp.adjust->linux->resources && resp.adjust->linux->resources->memory);
  EXPECT_EQ(resp.adjust->linux->resources->memory->limit, int64_t{64} << 20);
}

TEST_F(NriStubTest, HandlerErrorIsStatusUnknownWithTheMessage) {
  Start(0);
  Configure();
  PodContainerRequest req;
  req.pod.emplace().id = "pod-1";
  req.container.emplace().name = "bad";
  auto r = Call("CreateContainer", nriproto::Encode(req));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnknown);
  EXPECT_EQ(r.error().message(), "refusing container bad");
}

TEST_F(NriStubTest, StateChangeDispatchesToTheEventHandler) {
  Start(0);
  Configure();
  StateChangeEvent ev;
  ev.event = Event::kStartContainer;
  ev.pod.emplace().id = "pod-7";
  ev.container.emplace().name = "db";
  auto r = Call("StateChange", nriproto::Encode(ev));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnknown);
  EXPECT_EQ(r.error().message(), "StartContainer saw pod-7/db");

  StateChangeEvent run;
  run.event = Event::kRunPodSandbox;
  run.pod.emplace().id = "pod-8";
  auto r2 = Call("StateChange", nriproto::Encode(run));
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().message(), "RunPodSandbox saw pod-8");
}

TEST_F(NriStubTest, UnsubscribedEventIsAnsweredAsSuccess) {
  Start(AllBut(Event::kStopPodSandbox));
  Configure();
  PodContainerRequest req;
  req.pod.emplace().id = "pod-1";
  auto stop = Call("StopPodSandbox", nriproto::Encode(req));
  EXPECT_TRUE(stop.ok()) << stop.error().message();
  auto run = Call("RunPodSandbox", nriproto::Encode(req));  // subscribed: the handler's error
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.error().message(), "RunPodSandbox saw pod-1");
  auto unknown = Call("NoSuchMethod", "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code(), Code::kUnimplemented);
}

TEST_F(NriStubTest, LostConnectionEndsRunWithOne) {
  Start(0);
  Configure();
  rt_.Disconnect();
  EXPECT_EQ(rt_.WaitChild(), 1);
}

TEST_F(NriStubTest, SigtermStopsRunWithZero) {
  Start(0);
  Configure();
  ASSERT_EQ(::kill(rt_.child(), SIGTERM), 0);
  EXPECT_EQ(rt_.WaitChild(), 0);
}

TEST(NriStubIdentity, ResolvesFromArgv0AndRefusesBadNames) {
  ::unsetenv("NRI_PLUGIN_NAME");
  ::unsetenv("NRI_PLUGIN_IDX");
  std::string name, idx;
  StubOptions o;
  o.argv0 = "/opt/nri/plugins/10-logger";
  EXPECT_EQ(ResolveIdentity(o, &name, &idx), "");
  EXPECT_EQ(name, "logger");
  EXPECT_EQ(idx, "10");

  o.argv0 = "/usr/bin/logger";
  EXPECT_EQ(ResolveIdentity(o, &name, &idx), "invalid plugin name \"logger\", idx-pluginname expected");

  o.argv0 = "1-logger";
  EXPECT_NE(ResolveIdentity(o, &name, &idx), "");

  o.index = "05";  // an index alone: the base name is the name
  o.argv0 = "/usr/bin/logger";
  EXPECT_EQ(ResolveIdentity(o, &name, &idx), "");
  EXPECT_EQ(name, "logger");
  EXPECT_EQ(idx, "05");

  StubOptions env;
  env.argv0 = "whatever";
  ::setenv("NRI_PLUGIN_NAME", "fromenv", 1);
  ::setenv("NRI_PLUGIN_IDX", "33", 1);
  EXPECT_EQ(ResolveIdentity(env, &name, &idx), "");
  EXPECT_EQ(name, "fromenv");
  EXPECT_EQ(idx, "33");
  env.name = "fromopts";
  EXPECT_EQ(ResolveIdentity(env, &name, &idx), "");
  EXPECT_EQ(name, "fromopts");
  ::unsetenv("NRI_PLUGIN_NAME");
  ::unsetenv("NRI_PLUGIN_IDX");
}

}  // namespace
}  // namespace outpost::testing
