// The NRI codec's round trips: fully populated values (every field set,
// optional values present holding 0) encode and decode back equal, and the
// re-encoding is byte-identical.
#include <gtest/gtest.h>

#include <string>

#include "nri_codec_test_util.h"
#include "nriproto/codec.h"

namespace outpost::nriproto {
namespace {

using nri_test::FullAdjustment;
using nri_test::FullContainer;
using nri_test::FullPod;
using nri_test::FullResources;
using nri_test::FullUpdate;

template <typename T>
T RoundTrip(const T& v) {
  std::string enc = Encode(v);
  T back;
  Status st = Decode(enc, &back);
  EXPECT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(Encode(back), enc);
  return back;
}

TEST(NriCodecRoundTrip, Container) {
  nri::Container c = FullContainer();
  nri::Container back = RoundTrip(c);
  EXPECT_TRUE(back == c);
  EXPECT_EQ(back.exit_code, -1);
  EXPECT_EQ(back.state, nri::ContainerState::kStopped);
  ASSERT_TRUE(back.user.has_value());
  EXPECT_EQ(back.user->additional_gids, (std::vector<uint32_t>{4, 24, 70000}));
  EXPECT_EQ(back.devices[0].uid, std::optional<uint32_t>(0));
  EXPECT_FALSE(back.devices[1].file_mode.has_value());
  ASSERT_TRUE(back.hooks.has_value());
  EXPECT_EQ(back.hooks->create_container[0].timeout, std::optional<int64_t>(0));
  EXPECT_EQ(back.hooks->poststart[0].timeout, std::optional<int64_t>(-3));
  EXPECT_EQ(back.args.back(), "");  // an empty element of a repeated string stays
}

TEST(NriCodecRoundTrip, PodSandbox) {
  nri::PodSandbox p = FullPod();
  nri::PodSandbox back = RoundTrip(p);
  EXPECT_TRUE(back == p);
  ASSERT_TRUE(back.pod_resources.has_value());  // present though empty
  EXPECT_EQ(back.namespace_, "default");
  EXPECT_EQ(back.labels.at("tier"), "");
}

TEST(NriCodecRoundTrip, ContainerAdjustmentWithRawFields) {
  nri::ContainerAdjustment a = FullAdjustment();
  nri::ContainerAdjustment back = RoundTrip(a);
  EXPECT_TRUE(back == a);
  ASSERT_TRUE(back.linux.has_value());
  EXPECT_EQ(back.linux->io_priority_raw, std::string("\x08\x02\x10\x04", 4));
  ASSERT_TRUE(back.linux->seccomp_policy_raw.has_value());
  EXPECT_EQ(*back.linux->seccomp_policy_raw, "");
  EXPECT_EQ(back.linux->net_devices_raw.at("eth1"), std::string("\x0a\x04net0", 6));
  EXPECT_EQ(back.linux->net_devices_raw.at("-eth2"), "");
  EXPECT_EQ(back.linux->oom_score_adj, std::optional<int64_t>(0));
  EXPECT_EQ(back.env[1].key, "-B");
}

TEST(NriCodecRoundTrip, ContainerUpdate) {
  nri::ContainerUpdate u = FullUpdate("c1");
  nri::ContainerUpdate back = RoundTrip(u);
  EXPECT_TRUE(back == u);
  nri::ContainerUpdate bare{"c2", std::nullopt, false};
  EXPECT_TRUE(RoundTrip(bare) == bare);
}

TEST(NriCodecRoundTrip, OptionalWrappersHoldingZero) {
  nri::Resources r;
  r.memory = nri::Memory{0, std::nullopt, 0, std::nullopt, std::nullopt, 0, false, std::nullopt};
  r.cpu = nri::Cpu{0, 0, std::nullopt, 0, std::nullopt, "", ""};
  r.blockio_class = "";
  r.pids_limit = 0;
  r.devices = {{false, "", 0, std::nullopt, ""}};
  nri::ContainerUpdate u{"", r, false};
  nri::ContainerUpdate back = RoundTrip(u);
  EXPECT_TRUE(back == u);
  ASSERT_TRUE(back.resources && back.resources->memory && back.resources->cpu);
  EXPECT_EQ(back.resources->memory->limit, std::optional<int64_t>(0));
  EXPECT_FALSE(back.resources->memory->reservation.has_value());
  EXPECT_EQ(back.resources->memory->disable_oom_killer, std::optional<bool>(false));
  EXPECT_EQ(back.resources->cpu->shares, std::optional<uint64_t>(0));
  EXPECT_EQ(back.resources->blockio_class, std::optional<std::string>(""));
  EXPECT_FALSE(back.resources->rdt_class.has_value());
  EXPECT_EQ(back.resources->pids_limit, std::optional<int64_t>(0));
  EXPECT_EQ(back.resources->devices[0].major, std::optional<int64_t>(0));
}

TEST(NriCodecRoundTrip, SynchronizeRequestAndResponse) {
  nri::SynchronizeRequest req;
  req.pods = {FullPod(), nri::PodSandbox{}};
  req.containers = {FullContainer(), nri::Container{}, FullContainer()};
  req.containers[2].id = "other";
  req.more = true;
  nri::SynchronizeRequest back = RoundTrip(req);
  ASSERT_EQ(back.pods.size(), 2u);
  ASSERT_EQ(back.containers.size(), 3u);
  EXPECT_TRUE(back.pods == req.pods);
  EXPECT_TRUE(back.containers == req.containers);
  EXPECT_TRUE(back.more);

  nri::SynchronizeResponse resp{{FullUpdate("a"), FullUpdate("b")}, true};
  nri::SynchronizeResponse rback = RoundTrip(resp);
  EXPECT_TRUE(rback.update == resp.update);
  EXPECT_TRUE(rback.more);
}

TEST(NriCodecRoundTrip, ValidateContainerAdjustmentRequest) {
  nri::ValidateContainerAdjustmentRequest req;
  req.pod = FullPod();
  req.container = FullContainer();
  req.adjust = FullAdjustment();
  req.update = {FullUpdate("x")};
  req.owners["ctr-id"].simple = {{7, "10-a"}, {28, "20-b"}, {-1, ""}};
  req.owners["ctr-id"].compound = {{1, {{"k1", "10-a"}, {"k2", "20-b"}}}, {2, {}}};
  req.owners["other"].simple = {{8, "30-c"}};
  req.owners["empty"] = nri::FieldOwners{};
  req.plugins = {{"a", "10"}, {"b", "20"}};
  nri::ValidateContainerAdjustmentRequest back = RoundTrip(req);
  EXPECT_TRUE(back.pod == req.pod);
  EXPECT_TRUE(back.container == req.container);
  EXPECT_TRUE(back.adjust == req.adjust);
  EXPECT_TRUE(back.update == req.update);
  EXPECT_TRUE(back.owners == req.owners);
  EXPECT_TRUE(back.plugins == req.plugins);
  EXPECT_EQ(back.owners.at("ctr-id").compound.at(1).at("k2"), "20-b");

  nri::ValidateContainerAdjustmentResponse resp{true, "no hooks"};
  nri::ValidateContainerAdjustmentResponse rback = RoundTrip(resp);
  EXPECT_TRUE(rback.reject);
  EXPECT_EQ(rback.reason, "no hooks");
}

TEST(NriCodecRoundTrip, UpdateContainersRequestAndResponse) {
  nri::UpdateContainersRequest req{{FullUpdate("a"), {"b", std::nullopt, true}}, {{"c", "evicted"}, {"d", ""}}};
  nri::UpdateContainersRequest back = RoundTrip(req);
  EXPECT_TRUE(back.update == req.update);
  EXPECT_TRUE(back.evict == req.evict);

  nri::UpdateContainersResponse resp{{FullUpdate("f")}};
  EXPECT_TRUE(RoundTrip(resp).failed == resp.failed);
}

TEST(NriCodecRoundTrip, EventRequestsAndResponses) {
  nri::PodContainerRequest pc{FullPod(), FullContainer()};
  nri::PodContainerRequest pcb = RoundTrip(pc);
  EXPECT_TRUE(pcb.pod == pc.pod);
  EXPECT_TRUE(pcb.container == pc.container);
  nri::PodContainerRequest pod_only{FullPod(), std::nullopt};
  EXPECT_FALSE(RoundTrip(pod_only).container.has_value());

  nri::UpdatePodSandboxRequest up{FullPod(), FullResources(7), nri::Resources{}};
  nri::UpdatePodSandboxRequest upb = RoundTrip(up);
  EXPECT_TRUE(upb.pod == up.pod);
  EXPECT_TRUE(upb.overhead_linux_resources == up.overhead_linux_resources);
  EXPECT_TRUE(upb.linux_resources == up.linux_resources);

  nri::CreateContainerResponse cc{FullAdjustment(), {FullUpdate("o")}, {{"e", "why"}}};
  nri::CreateContainerResponse ccb = RoundTrip(cc);
  EXPECT_TRUE(ccb.adjust == cc.adjust);
  EXPECT_TRUE(ccb.update == cc.update);
  EXPECT_TRUE(ccb.evict == cc.evict);

  nri::UpdateContainerRequest uc{FullPod(), FullContainer(), FullResources(8)};
  nri::UpdateContainerRequest ucb = RoundTrip(uc);
  EXPECT_TRUE(ucb.container == uc.container);
  EXPECT_TRUE(ucb.linux_resources == uc.linux_resources);

  nri::UpdateContainerResponse ur{{FullUpdate("u")}, {{"v", "w"}}};
  nri::UpdateContainerResponse urb = RoundTrip(ur);
  EXPECT_TRUE(urb.update == ur.update);
  EXPECT_TRUE(urb.evict == ur.evict);

  nri::StopContainerResponse sr{{FullUpdate("s")}};
  EXPECT_TRUE(RoundTrip(sr).update == sr.update);

  nri::StateChangeEvent ev{nri::Event::kPostStartContainer, FullPod(), FullContainer()};
  nri::StateChangeEvent evb = RoundTrip(ev);
  EXPECT_EQ(evb.event, nri::Event::kPostStartContainer);
  EXPECT_TRUE(evb.pod == ev.pod);
  EXPECT_TRUE(evb.container == ev.container);

  nri::ConfigureRequest cr{"cfg: 1\n", "outpost", "v1.2.3", 5000, 2000, "v0.12.2"};
  nri::ConfigureRequest crb = RoundTrip(cr);
  EXPECT_EQ(crb.config, cr.config);
  EXPECT_EQ(crb.runtime_name, cr.runtime_name);
  EXPECT_EQ(crb.runtime_version, cr.runtime_version);
  EXPECT_EQ(crb.registration_timeout_ms, 5000);
  EXPECT_EQ(crb.request_timeout_ms, 2000);
  EXPECT_EQ(crb.nri_version, cr.nri_version);
}

}  // namespace
}  // namespace outpost::nriproto
