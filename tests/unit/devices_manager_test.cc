// The device manager (devices/manager.h): devices and their health,
// a stream's end and the grace period, choosing devices as the kubelet
// does (reuse, preferred allocation, NUMA alignment), never a device twice
// or fewer than asked, why a task waits, and the checkpoint it keeps.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "base/sys.h"
#include "devices/manager.h"
#include "unit/test_util.h"

namespace outpost::devices {
namespace {

using Ids = std::vector<std::string>;
const std::string kCam = "vendor.example/camera";

std::vector<Device> Devs(const Ids& healthy, const Ids& unhealthy = {}) {
  std::vector<Device> out;
  for (const std::string& id : healthy) out.push_back({id, kHealthy, {}});
  for (const std::string& id : unhealthy) out.push_back({id, kUnhealthy, {}});
  return out;
}

class DevicesManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = testing::MakeLoop();
    ASSERT_TRUE(loop_);
    Make(nullptr);
  }
  void Make(CheckpointFile* file, int64_t grace = kDefaultGraceNanos) {
    m_ = std::make_unique<Manager>(loop_.get(), file, grace);
    m_->SetEventFn([this](const DeviceEvent& e) {
      const char* kinds[] = {"added", "removed", "health", "disconnected", "expired"};
      events_.push_back(std::string(kinds[e.kind]) + " " + e.resource + (e.device.empty() ? "" : " " + e.device) +
                        (e.kind == DeviceEvent::kAdded || e.kind == DeviceEvent::kHealthChanged
                             ? (e.healthy ? " healthy" : " unhealthy")
                             : ""));
    });
  }
  // Begin, Reserve, Commit with an empty response: the devices given.
  Ids Allocate(const std::string& task, int64_t count, const std::string& resource = kCam) {
    auto plan = m_->Begin(task, resource, count);
    EXPECT_TRUE(plan.ok()) << plan.error().message();
    if (!plan.ok()) return {};
    if (plan->reuse) return m_->Held(task, resource)->devices;
    auto ids = m_->Reserve(task, resource, count);
    EXPECT_TRUE(ids.ok()) << ids.error().message();
    if (!ids.ok()) return {};
    EXPECT_TRUE(m_->Commit(task, resource, {}).ok());
    return *ids;
  }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<Manager> m_;
  std::vector<std::string> events_;
};

TEST_F(DevicesManagerTest, ListAndWatchReplacesTheListAndTellsWhatChanged) {
  EXPECT_FALSE(m_->Update(kCam, "/p/cam.sock", Devs({"a"}))) << "no such resource yet";
  m_->Connect(kCam, "/p/cam.sock", {});
  ASSERT_NE(m_->Find(kCam), nullptr);
  EXPECT_TRUE(m_->Find(kCam)->connected);
  EXPECT_TRUE(m_->Update(kCam, "/p/cam.sock", Devs({"a", "b"})));
  EXPECT_TRUE(m_->Update(kCam, "/p/cam.sock", {{"b", "Unhealthy", {}}, {"c", "Healthy", {}}}));
  EXPECT_TRUE(m_->Update(kCam, "/p/cam.sock", {{"b", "", {}}, {"c", "Healthy", {0}}}));
  EXPECT_EQ(events_, (Ids{"added vendor.example/camera a healthy", "added vendor.example/camera b healthy",
                          "health vendor.example/camera b unhealthy", "added vendor.example/camera c healthy",
                          "removed vendor.example/camera a"}))
      << "an empty health is unhealthy as before; a topology change is no event";
  EXPECT_FALSE(m_->Update(kCam, "/p/other.sock", Devs({"x"}))) << "not the resource's endpoint";
  EXPECT_EQ(m_->Find(kCam)->devices.size(), 2u);
}

TEST_F(DevicesManagerTest, NeverTwiceNeverFewer) {
  m_->Connect(kCam, "/p/cam.sock", {});
  m_->Update(kCam, "/p/cam.sock", Devs({"a", "b", "c"}, {"d"}));
  Ids first = Allocate("j.t1", 2);
  EXPECT_EQ(first, (Ids{"a", "b"})) << "the plugin's order";
  EXPECT_EQ(m_->WaitReason("j.t2", {{kCam, 2}}), "resource vendor.example/camera: 1 of 3 healthy devices free, 2 needed");
  auto no = m_->Begin("j.t2", kCam, 2);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.error().code(), Code::kUnavailable);
  EXPECT_EQ(no.error().message(), "requested number of devices unavailable for vendor.example/camera. Requested: 2, Available: 1");
  EXPECT_FALSE(m_->Reserve("j.t2", kCam, 2).ok());
  EXPECT_EQ(m_->WaitReason("j.t2", {{kCam, 1}}), "");
  // Two starts in flight: a reservation counts as taken.
  auto r2 = m_->Reserve("j.t2", kCam, 1);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, Ids{"c"});
  EXPECT_EQ(m_->Reserve("j.t3", kCam, 1).error().message(),
            "requested number of devices unavailable for vendor.example/camera. Requested: 1, Available: 0");
  m_->Unreserve("j.t2", kCam);  // Allocate failed
  EXPECT_EQ(Allocate("j.t3", 1), Ids{"c"});
  m_->Release("j.t1");
  EXPECT_EQ(Allocate("j.t2", 2), (Ids{"a", "b"}));
  EXPECT_EQ(m_->WaitReason("j.t4", {{kCam, 1}, {"vendor.example/mic", 1}}),
            "resource vendor.example/camera: 0 of 3 healthy devices free, 1 needed; no device plugin for resource "
            "vendor.example/mic");
}

TEST_F(DevicesManagerTest, TheKubeletsRefusals) {
  EXPECT_EQ(m_->Begin("j.t", kCam, 1).error().message(), "cannot allocate unregistered device vendor.example/camera");
  EXPECT_EQ(m_->WaitReason("j.t", {{kCam, 1}}), "no device plugin for resource vendor.example/camera");
  m_->Connect(kCam, "/p/cam.sock", {});
  m_->Update(kCam, "/p/cam.sock", Devs({}, {"a"}));
  EXPECT_EQ(m_->Begin("j.t", kCam, 1).error().message(),
            "no healthy devices present; cannot allocate unhealthy devices vendor.example/camera");
  EXPECT_EQ(m_->WaitReason("j.t", {{kCam, 1}}), "resource vendor.example/camera: 0 of 0 healthy devices free, 1 needed");
}

TEST_F(DevicesManagerTest, ATaskKeepsItsDevicesAcrossRestartsAndChangedRequestsAreTrimmed) {
  m_->Connect(kCam, "/p/cam.sock", {});
  m_->Update(kCam, "/p/cam.sock", Devs({"a", "b", "c"}));
  ContainerAllocateResponse resp;
  resp.envs = {{"CAM", "a"}};
  ASSERT_TRUE(m_->Begin("j.t", kCam, 1).ok());
  ASSERT_TRUE(m_->Reserve("j.t", kCam, 1).ok());
  ASSERT_TRUE(m_->Commit("j.t", kCam, resp).ok());
  // A restart: the same devices, no Allocate, the stored response.
  auto again = m_->Begin("j.t", kCam, 1);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->reuse);
  auto responses = m_->ResponsesOf("j.t");
  ASSERT_EQ(responses.size(), 1u);
  EXPECT_EQ(responses[0].first, kCam);
  EXPECT_EQ(*responses[0].second, resp);
  // It keeps them while its plugin is away (no PreStartContainer needed).
  m_->Disconnect(kCam, "/p/cam.sock");
  EXPECT_EQ(m_->WaitReason("j.t", {{kCam, 1}}), "");
  m_->Connect(kCam, "/p/cam.sock", {true, false});
  m_->Disconnect(kCam, "/p/cam.sock");
  EXPECT_EQ(m_->WaitReason("j.t", {{kCam, 1}}), "resource vendor.example/camera: its device plugin is not connected")
      << "PreStartContainer needs the plugin";
  m_->Connect(kCam, "/p/cam.sock", {});
  m_->Update(kCam, "/p/cam.sock", Devs({"a", "b", "c"}));
  // A changed request: trimmed before the start, chosen anew.
  m_->Trim("j.t", {{kCam, 2}});
  EXPECT_EQ(m_->Held("j.t", kCam), nullptr);
  EXPECT_EQ(Allocate("j.t", 2), (Ids{"a", "b"}));
  m_->Trim("j.t", {{kCam, 2}});
  EXPECT_NE(m_->Held("j.t", kCam), nullptr) << "what is still asked for stays";
  m_->Trim("j.t", {});
  EXPECT_EQ(m_->Held("j.t", kCam), nullptr);
  // Begin drops a stale count by itself too.
  Allocate("j.t", 1);
  auto two = m_->Begin("j.t", kCam, 2);
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->reuse);
  EXPECT_EQ(m_->Held("j.t", kCam), nullptr);
  // Retain after recovery: only live tasks keep theirs.
  Allocate("j.a", 1);
  Allocate("j.b", 1);
  m_->Retain({"j.b"});
  EXPECT_EQ(m_->Held("j.a", kCam), nullptr);
  EXPECT_NE(m_->Held("j.b", kCam), nullptr);
}

TEST_F(DevicesManagerTest, PreferredAllocationIsAskedAndOnlyAPreference) {
  m_->Connect(kCam, "/p/cam.sock", {false, true});
  m_->Update(kCam, "/p/cam.sock", Devs({"a", "b", "c", "d"}));
  Allocate("j.x", 1);  // a
  auto plan = m_->Begin("j.t", kCam, 2);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->ask);
  EXPECT_EQ(plan->preferred.available, (Ids{"b", "c", "d"}));
  EXPECT_TRUE(plan->preferred.must_include.empty());
  EXPECT_EQ(plan->preferred.size, 2);
  // The answer's free and healthy IDs, in its order; taken, unknown and
  // surplus ones ignored; too few topped up.
  auto ids = m_->Reserve("j.t", kCam, 2, {"a", "zz", "d"});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (Ids{"d", "b"}));
  m_->Unreserve("j.t", kCam);
  ids = m_->Reserve("j.t", kCam, 2, {"d", "c", "b"});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (Ids{"d", "c"}));
  // A plugin that does not offer it is not asked.
  m_->Connect("vendor.example/mic", "/p/mic.sock", {});
  m_->Update("vendor.example/mic", "/p/mic.sock", Devs({"m"}));
  auto mic = m_->Begin("j.t", "vendor.example/mic", 1);
  ASSERT_TRUE(mic.ok());
  EXPECT_FALSE(mic->ask);
}

TEST_F(DevicesManagerTest, NumaAlignmentAsTheKubeletsFilterByAffinity) {
  m_->Connect(kCam, "/p/cam.sock", {false, true});
  m_->Update(kCam, "/p/cam.sock",
             {{"n0a", kHealthy, {0}}, {"n1a", kHealthy, {1}}, {"none", kHealthy, {}}, {"n1b", kHealthy, {1}},
              {"n0b", kHealthy, {0}}, {"n01", kHealthy, {0, 1}}});
  // More aligned devices than needed: the plugin chooses among them.
  auto plan = m_->Begin("j.t", kCam, 1, {1});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->ask);
  EXPECT_EQ(plan->preferred.available, (Ids{"n1a", "n1b", "n01"}));
  EXPECT_TRUE(plan->preferred.must_include.empty());
  auto ids = m_->Reserve("j.t", kCam, 1, {"n0a", "n01"}, {1});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, Ids{"n01"}) << "the answer counts only where aligned";
  m_->Unreserve("j.t", kCam);
  // Exactly as many aligned as needed: taken, nothing asked.
  auto exact = m_->Begin("j.t", kCam, 3, {1});
  ASSERT_TRUE(exact.ok());
  EXPECT_FALSE(exact->ask);
  ids = m_->Reserve("j.t", kCam, 3, {}, {1});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (Ids{"n1a", "n1b", "n01"}));
  m_->Unreserve("j.t", kCam);
  // More than the aligned ones: all aligned, then the plugin's choice of
  // the rest, then unaligned, then those without a topology.
  plan = m_->Begin("j.t", kCam, 5, {1});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->preferred.must_include, (Ids{"n1a", "n1b", "n01"}));
  EXPECT_EQ(plan->preferred.available, (Ids{"n1a", "n1b", "n01", "n0a", "n0b", "none"}));
  ids = m_->Reserve("j.t", kCam, 5, {"none"}, {1});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (Ids{"n1a", "n1b", "n01", "none", "n0a"}));
  m_->Unreserve("j.t", kCam);
  // No hint (no cpuset.mems): all alike, the plugin's order.
  ids = m_->Reserve("j.t", kCam, 2);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (Ids{"n0a", "n1a"}));
  EXPECT_EQ(NumaNodes("0-1,3"), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(NumaNodes(""), std::vector<int64_t>{});
  EXPECT_EQ(NumaNodes("3-1"), std::vector<int64_t>{});
}

TEST_F(DevicesManagerTest, AStreamsEndMakesDevicesUnhealthyAndTheGracePeriodDropsTheResource) {
  Make(nullptr, 50 * kNanosPerMilli);
  m_->Connect(kCam, "/p/cam.sock", {});
  m_->Update(kCam, "/p/cam.sock", Devs({"a", "b"}));
  Allocate("j.t", 1);
  EXPECT_FALSE(m_->Disconnect(kCam, "/p/old.sock")) << "not its endpoint";
  EXPECT_TRUE(m_->Disconnect(kCam, "/p/cam.sock"));
  EXPECT_FALSE(m_->Find(kCam)->connected);
  for (const Device& d : m_->Find(kCam)->devices) EXPECT_FALSE(d.healthy()) << d.id;
  EXPECT_EQ(m_->WaitReason("j.u", {{kCam, 1}}), "resource vendor.example/camera: its device plugin is not connected");
  EXPECT_FALSE(m_->Update(kCam, "/p/cam.sock", Devs({"a"}))) << "a closed stream says nothing";
  // Registered again within the grace period: the new list restores health.
  m_->Connect(kCam, "/p/cam2.sock", {});
  EXPECT_FALSE(m_->Find(kCam)->devices[0].healthy()) << "until its first list";
  EXPECT_TRUE(m_->Update(kCam, "/p/cam2.sock", Devs({"a", "b"})));
  EXPECT_TRUE(testing::RunUntil(loop_.get(), [] { return false; }, 120 * kNanosPerMilli) == false);
  ASSERT_NE(m_->Find(kCam), nullptr) << "the grace period stopped";
  // An old instance's stream ending does not stop the new one (kubernetes#121994).
  EXPECT_FALSE(m_->Disconnect(kCam, "/p/cam.sock"));
  EXPECT_TRUE(m_->Find(kCam)->connected);
  // Gone for good: dropped after the grace period; the task keeps its device.
  events_.clear();
  m_->Disconnect(kCam, "/p/cam2.sock");
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return m_->Find(kCam) == nullptr; }));
  EXPECT_EQ(events_, (Ids{"disconnected vendor.example/camera", "expired vendor.example/camera"}));
  EXPECT_NE(m_->Held("j.t", kCam), nullptr);
  EXPECT_EQ(m_->WaitReason("j.u", {{kCam, 1}}), "no device plugin for resource vendor.example/camera");
  // It comes back: the device the task holds is still not given away.
  m_->Connect(kCam, "/p/cam3.sock", {});
  m_->Update(kCam, "/p/cam3.sock", Devs({"a", "b"}));
  EXPECT_EQ(Allocate("j.u", 1), Ids{"b"});
}

TEST_F(DevicesManagerTest, TheCheckpointKeepsAllocationsAcrossAnAgentRestart) {
  std::string dir = testing::MakeTempDir("/tmp", "devices");
  ASSERT_FALSE(dir.empty());
  std::string path = dir + "/" + kCheckpointFile;
  {
    CheckpointFile file(loop_.get(), path);
    Make(&file);
    m_->Connect(kCam, "/p/cam.sock", {});
    m_->Update(kCam, "/p/cam.sock", {{"a", kHealthy, {0}}, {"b", kHealthy, {}}, {"c", kHealthy, {}}});
    ContainerAllocateResponse resp;
    resp.devices = {{"/dev/cam0", "/dev/video0", "rw"}};
    ASSERT_TRUE(m_->Begin("j.t", kCam, 1).ok());
    ASSERT_TRUE(m_->Reserve("j.t", kCam, 1).ok());
    ASSERT_TRUE(m_->Commit("j.t", kCam, resp).ok());
    ASSERT_TRUE(m_->Reserve("j.u", kCam, 1).ok());  // not committed: not kept
    struct stat before {}, after {};
    ASSERT_EQ(::stat(path.c_str(), &before), 0);
    m_->Update(kCam, "/p/cam.sock", {{"a", kUnhealthy, {0}}, {"b", kHealthy, {}}, {"c", kHealthy, {}}});
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(before.st_ino, after.st_ino) << "a health flip does not rewrite the file";
    m_.reset();
  }
  CheckpointFile file(loop_.get(), path);
  std::string problem;
  CheckpointData data = file.Load(&problem);
  EXPECT_EQ(problem, "");
  ASSERT_EQ(data.entries.size(), 1u);
  EXPECT_EQ(data.entries[0].task, "j.t");
  EXPECT_EQ(data.entries[0].devices, (std::vector<std::pair<int64_t, std::string>>{{0, "a"}}));
  Make(&file);
  m_->Restore(data, "boot-1");
  const ResourceState* r = m_->Find(kCam);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->connected);
  EXPECT_TRUE(r->devices.empty());
  EXPECT_EQ(m_->WaitReason("j.x", {{kCam, 1}}), "resource vendor.example/camera: its device plugin is not connected");
  EXPECT_EQ(m_->WaitReason("j.t", {{kCam, 1}}), "") << "it holds its device";
  auto plan = m_->Begin("j.t", kCam, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->reuse);
  EXPECT_EQ(m_->ResponsesOf("j.t")[0].second->devices[0].host_path, "/dev/video0");
  // The plugin registers again: the held device is not given to another.
  m_->Connect(kCam, "/p/cam.sock", {});
  m_->Update(kCam, "/p/cam.sock", Devs({"a", "b"}));
  EXPECT_EQ(Allocate("j.x", 1), Ids{"b"});
  // After a reboot (another boot id) allocations are dropped.
  Manager rebooted(loop_.get(), nullptr);
  data.boot_id = "boot-0";
  rebooted.Restore(data, "boot-1");
  EXPECT_EQ(rebooted.Held("j.t", kCam), nullptr);
  EXPECT_NE(rebooted.Find(kCam), nullptr);
  m_.reset();
  ASSERT_TRUE(sys::RemoveTree(dir).ok());
}

}  // namespace
}  // namespace outpost::devices
