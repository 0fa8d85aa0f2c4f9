// The device checkpoint (devices/checkpoint.h): the kubelet's layout, the
// checksum, the kubelet's v1 device lists, and a corrupt file reported and
// set aside without a crash.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "base/json.h"
#include "base/sys.h"
#include "devices/checkpoint.h"
#include "unit/test_util.h"

namespace outpost::devices {
namespace {

CheckpointData Sample() {
  CheckpointData d;
  CheckpointEntry e;
  e.task = "web.cam";
  e.resource = "vendor.example/camera";
  e.devices = {{-1, "cam1"}, {0, "cam0"}, {1, "cam0"}};
  ContainerAllocateResponse r;
  r.envs = {{"CAMERA", "cam0,cam1"}};
  r.devices = {{"/dev/video0", "/dev/video0", "rw"}};
  r.cdi_devices = {"vendor.example/camera=cam0"};
  e.alloc_resp = EncodeContainerAllocateResponse(r);
  d.entries.push_back(e);
  d.registered = {{"vendor.example/camera", {"cam0", "cam1", "cam2"}}, {"vendor.example/mic", {}}};
  d.boot_id = "0f7a";
  return d;
}

TEST(DevicesCheckpoint, TheKubeletsLayout) {
  std::string text = EncodeCheckpoint(Sample());
  auto doc = json::Parse(text);
  ASSERT_TRUE(doc.ok()) << doc.error().message();
  const picojson::value& entry = doc->get("Data").get("PodDeviceEntries").get(0);
  EXPECT_EQ(entry.get("PodUID").get<std::string>(), "web");
  EXPECT_EQ(entry.get("ContainerName").get<std::string>(), "cam");
  EXPECT_EQ(entry.get("ResourceName").get<std::string>(), "vendor.example/camera");
  EXPECT_EQ(json::Write(entry.get("DeviceIDs")), R"({"-1":["cam1"],"0":["cam0"],"1":["cam0"]})");
  EXPECT_TRUE(entry.get("AllocResp").is<std::string>());
  EXPECT_EQ(json::Write(doc->get("Data").get("RegisteredDevices")),
            R"({"vendor.example/camera":["cam0","cam1","cam2"],"vendor.example/mic":[]})");
  EXPECT_TRUE(doc->get("Checksum").is<int64_t>());
  EXPECT_EQ(doc->get("BootID").get<std::string>(), "0f7a");

  auto back = DecodeCheckpoint(text);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(EncodeCheckpoint(*back), text);
  EXPECT_EQ(back->entries[0].alloc_resp, Sample().entries[0].alloc_resp);
  auto resp = DecodeContainerAllocateResponse(back->entries[0].alloc_resp);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(resp->cdi_devices, std::vector<std::string>{"vendor.example/camera=cam0"});
  EXPECT_EQ(back->boot_id, "0f7a");
  // No BootID when unknown (the kubelet omits it too).
  CheckpointData empty;
  EXPECT_EQ(EncodeCheckpoint(empty).find("BootID"), std::string::npos);
}

// A document whose Data is data, with a checksum that matches it.
std::string Signed(const std::string& data) {
  auto d = json::Parse(data);
  EXPECT_TRUE(d.ok());
  uint32_t h = 2166136261u;
  for (unsigned char c : json::Write(*d)) {
    h ^= c;
    h *= 16777619u;
  }
  return "{\"Data\": " + data + ", \"Checksum\": " + std::to_string(h) + "}";
}

TEST(DevicesCheckpoint, TheKubeletsV1FlatListsAndNullsAreRead) {
  auto d = DecodeCheckpoint(Signed(R"({"PodDeviceEntries": [{"PodUID": "j", "ContainerName": "t",
      "ResourceName": "a.example/b", "DeviceIDs": ["x", "y"], "AllocResp": ""}], "RegisteredDevices": {"a.example/b": null}})"));
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->entries[0].task, "j.t");
  EXPECT_EQ(d->entries[0].devices, (std::vector<std::pair<int64_t, std::string>>{{-1, "x"}, {-1, "y"}}));
  ASSERT_EQ(d->registered.size(), 1u);
  auto nulls = DecodeCheckpoint(Signed(R"({"PodDeviceEntries": null, "RegisteredDevices": null})"));
  ASSERT_TRUE(nulls.ok()) << nulls.error().message();
  EXPECT_TRUE(nulls->empty());
}

TEST(DevicesCheckpoint, CorruptOrForeignFilesAreErrors) {
  std::string good = EncodeCheckpoint(Sample());
  std::string tampered = good;
  tampered.replace(tampered.find("cam2"), 4, "cam3");
  struct Case {
    std::string text;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {tampered, "device checkpoint: checksum "},
           {"", "device checkpoint: "},
           {"{\"Data\": ", "device checkpoint: "},
           {"[]", "device checkpoint: expected an object with Data and Checksum"},
           {R"({"Data": {}, "Checksum": "1"})", "device checkpoint: expected an object with Data and Checksum"},
           {Signed(R"({"PodDeviceEntries": {}})"), "device checkpoint: Data.PodDeviceEntries: expected an array"},
           {Signed(R"({"PodDeviceEntries": [{"PodUID": "j"}]})"),
            "device checkpoint: PodDeviceEntries[0]: expected an object with strings PodUID, ContainerName, "
            "ResourceName, AllocResp"},
           {Signed(R"({"PodDeviceEntries": [{"PodUID": "j.x", "ContainerName": "t", "ResourceName": "r",
                "AllocResp": "", "DeviceIDs": []}]})"),
            "device checkpoint: PodDeviceEntries[0]: PodUID and ContainerName must name a job and a task"},
           {Signed(R"({"PodDeviceEntries": [{"PodUID": "j", "ContainerName": "t", "ResourceName": "r",
                "AllocResp": "", "DeviceIDs": {"x": ["a"]}}]})"),
            "device checkpoint: PodDeviceEntries[0].DeviceIDs: expected NUMA node numbers with lists of device IDs"},
           {Signed(R"({"PodDeviceEntries": [{"PodUID": "j", "ContainerName": "t", "ResourceName": "r",
                "AllocResp": "!!", "DeviceIDs": []}]})"),
            "device checkpoint: PodDeviceEntries[0].AllocResp: not valid base64"},
           {Signed(R"({"PodDeviceEntries": [{"PodUID": "j", "ContainerName": "t", "ResourceName": "r",
                "AllocResp": "Cg==", "DeviceIDs": []}]})"),
            "device checkpoint: PodDeviceEntries[0].AllocResp: decode ContainerAllocateResponse"},
           {Signed(R"({"RegisteredDevices": {"r": [1]}})"),
            "device checkpoint: Data.RegisteredDevices: expected lists of device IDs"},
       }) {
    auto d = DecodeCheckpoint(c.text);
    ASSERT_FALSE(d.ok()) << c.text;
    EXPECT_EQ(d.error().message().substr(0, c.error.size()), c.error) << d.error().message();
  }
}

TEST(DevicesCheckpoint, TheFileIsWrittenOnlyWhenItChangesAndACorruptOneIsSetAside) {
  auto loop = testing::MakeLoop();
  ASSERT_TRUE(loop);
  std::string dir = testing::MakeTempDir("/tmp", "devckpt");
  ASSERT_FALSE(dir.empty());
  std::string path = dir + "/" + kCheckpointFile;
  {
    CheckpointFile file(loop.get(), path);
    std::string problem = "x";
    EXPECT_TRUE(file.Load(&problem).empty()) << "missing: empty, no problem";
    EXPECT_EQ(problem, "");
    ASSERT_TRUE(file.Save(Sample()).ok());
    auto text = sys::ReadFile(path);
    ASSERT_TRUE(text.ok());
    // Written in place, padded with spaces to a 512-byte multiple
    // (sys::OverwriteFile: it survives an agent crash, not a power cut).
    std::string want = EncodeCheckpoint(Sample());
    ASSERT_GE(text->size(), want.size());
    EXPECT_EQ(text->substr(0, want.size()), want);
    EXPECT_EQ(text->find_first_not_of(" \n", want.size()), std::string::npos);
    std::string loaded_problem = "x";
    EXPECT_EQ(EncodeCheckpoint(CheckpointFile(loop.get(), path).Load(&loaded_problem)), want) << "the padded file reads back";
    EXPECT_EQ(loaded_problem, "");
    ASSERT_EQ(::unlink(path.c_str()), 0);
    ASSERT_TRUE(file.Save(Sample()).ok());
    EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the same content is not written again";
  }
  ASSERT_TRUE(sys::WriteFileAtomic(path, "{\"Data\": {}, \"Checksum\": 7}", 0600).ok());
  CheckpointFile file(loop.get(), path);
  std::string problem;
  EXPECT_TRUE(file.Load(&problem).empty());
  EXPECT_EQ(problem.rfind("device checkpoint: checksum 7 does not match its data (", 0), 0u) << problem;
  EXPECT_NE(problem.find("(moved to " + path + ".bad)"), std::string::npos) << problem;
  EXPECT_EQ(::access((path + ".bad").c_str(), F_OK), 0);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  ASSERT_TRUE(file.Save(Sample()).ok());
  std::string again;
  CheckpointFile reread(loop.get(), path);
  EXPECT_EQ(reread.Load(&again).entries.size(), 1u);
  EXPECT_EQ(again, "");
  ASSERT_TRUE(sys::RemoveTree(dir).ok());
}

}  // namespace
}  // namespace outpost::devices
