// Merging a task's ContainerAllocateResponses into one grant
// (devices/apply.h): the kubelet's first-wins rule, the checks, and the
// task's own env and annotations winning over a plugin's.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "devices/apply.h"

namespace outpost::devices {
namespace {

using Responses = std::vector<std::pair<std::string, const ContainerAllocateResponse*>>;

TEST(DevicesApply, FirstValueWinsAsInTheKubelet) {
  ContainerAllocateResponse cam, mic;
  cam.envs = {{"CAM", "0"}, {"SHARED", "cam"}};  // sorted, as decoded
  cam.annotations = {{"a.example/x", "1"}};
  cam.mounts = {{"/usr/lib/vendor", "/opt/vendor/lib", true}};
  cam.devices = {{"/dev/video0", "/dev/video0", "rw"}, {"/dev/ctl", "/dev/cam-ctl", ""}};
  cam.cdi_devices = {"vendor.example/camera=0"};
  mic.envs = {{"MIC", "1"}, {"SHARED", "mic"}};
  mic.annotations = {{"a.example/x", "2"}, {"b.example/y", "3"}};
  mic.mounts = {{"/usr/lib/vendor", "/opt/other/lib", false}, {"/data", "/srv/mic", false}};
  mic.devices = {{"/dev/ctl", "/dev/mic-ctl", "r"}, {"/dev/snd", "/dev/snd/pcm0", "rwm"}};
  mic.cdi_devices = {"vendor.example/camera=0", "vendor.example/mic=1"};
  auto g = MergeResponses({{"vendor.example/camera", &cam}, {"vendor.example/mic", &mic}});
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->env, (StringPairs{{"CAM", "0"}, {"SHARED", "cam"}, {"MIC", "1"}}));
  EXPECT_EQ(g->annotations, (StringPairs{{"a.example/x", "1"}, {"b.example/y", "3"}}));
  EXPECT_EQ(g->mounts, (std::vector<Mount>{{"/usr/lib/vendor", "/opt/vendor/lib", true}, {"/data", "/srv/mic", false}}));
  EXPECT_EQ(g->devices, (std::vector<DeviceSpec>{{"/dev/video0", "/dev/video0", "rw"},
                                                 {"/dev/ctl", "/dev/cam-ctl", "rwm"},
                                                 {"/dev/snd", "/dev/snd/pcm0", "rwm"}}));
  EXPECT_EQ(g->cdi_devices, (std::vector<std::string>{"vendor.example/camera=0", "vendor.example/mic=1"}));
  EXPECT_EQ(g->warnings,
            (std::vector<std::string>{
                "resource vendor.example/mic: conflicting envs SHARED=\"mic\" (keeps \"cam\") dropped",
                "resource vendor.example/mic: conflicting device /dev/ctl of /dev/mic-ctl (keeps /dev/cam-ctl) dropped",
                "resource vendor.example/mic: conflicting mount /usr/lib/vendor of /opt/other/lib (keeps "
                "/opt/vendor/lib) dropped",
                "resource vendor.example/mic: conflicting annotations a.example/x=\"2\" (keeps \"1\") dropped"}));
  // The same value twice is no conflict.
  auto same = MergeResponses({{"a.example/x", &cam}, {"a.example/y", &cam}});
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->warnings.empty());
  EXPECT_TRUE(MergeResponses({})->empty());
}

TEST(DevicesApply, InvalidFieldsFailTheGrantNamingResourceAndField) {
  struct Case {
    ContainerAllocateResponse r;
    std::string error;
  };
  std::vector<Case> cases(8);
  cases[0].r.devices = {{"/dev/x", "video0", ""}};
  cases[0].error = "resource r.example/x: devices[0].host_path: must be an absolute path, got \"video0\"";
  cases[1].r.devices = {{"dev/x", "/dev/video0", ""}};
  cases[1].error = "resource r.example/x: devices[0].container_path: must be an absolute path, got \"dev/x\"";
  cases[2].r.devices = {{"/dev/x", "/dev/video0", "rwx"}};
  cases[2].error = "resource r.example/x: devices[0].permissions: expected r, w and m, each at most once, got \"rwx\"";
  cases[3].r.devices = {{"/dev/x", "/dev/video0", "rr"}};
  cases[3].error = "resource r.example/x: devices[0].permissions: expected r, w and m, each at most once, got \"rr\"";
  cases[4].r.mounts = {{"/a", "/b", false}, {"", "/b", false}};
  cases[4].error = "resource r.example/x: mounts[1].container_path: must be an absolute path, got \"\"";
  cases[5].r.envs = {{"A=B", "c"}};
  cases[5].error = "resource r.example/x: envs[\"A=B\"]: not a valid name";
  cases[6].r.annotations = {{"", "c"}};
  cases[6].error = "resource r.example/x: annotations[\"\"]: not a valid name";
  cases[7].r.cdi_devices = {"camera0"};
  cases[7].error =
      "resource r.example/x: cdi_devices[0].name: expected a CDI device name like \"vendor.com/class=name\", got "
      "\"camera0\"";
  for (const Case& c : cases) {
    auto g = MergeResponses({{"r.example/x", &c.r}});
    ASSERT_FALSE(g.ok()) << c.error;
    EXPECT_EQ(g.error().message(), c.error);
  }
  // A device's container path defaults to its host path.
  ContainerAllocateResponse r;
  r.devices = {{"", "/dev/video0", "r"}};
  auto g = MergeResponses({{"r.example/x", &r}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->devices[0].container_path, "/dev/video0");
}

TEST(DevicesApply, TheTasksOwnEnvAndAnnotationsWin) {
  Grant g;
  g.env = {{"CAM", "0"}, {"PATH", "/vendor/bin"}};
  g.annotations = {{"x.example/a", "1"}};
  g.cdi_devices = {"vendor.com/cam=0", "vendor.com/cam=1"};
  std::map<std::string, std::string> env = {{"PATH", "/usr/bin"}};
  std::map<std::string, std::string> annotations = {{"x.example/a", "mine"}};
  auto kept = MergeIntoTask(g, &env, &annotations);
  EXPECT_EQ(kept, (std::vector<std::string>{"PATH", "x.example/a"}));
  EXPECT_EQ(env, (std::map<std::string, std::string>{{"CAM", "0"}, {"PATH", "/usr/bin"}}));
  EXPECT_EQ(annotations, (std::map<std::string, std::string>{
                             {"cdi.k8s.io/outpost", "vendor.com/cam=0,vendor.com/cam=1"}, {"x.example/a", "mine"}}));
}

}  // namespace
}  // namespace outpost::devices
