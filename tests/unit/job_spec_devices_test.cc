// A task's device requests in its job spec (`resources.devices`,
// docs/job-spec.md, docs/devices.md): what is accepted, every error with its
// JSON path, the canonical form, and that a changed request restarts the
// task while limits still change live.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/json.h"
#include "job/diff.h"
#include "job/spec.h"
#include "unit/job_spec_test_util.h"

namespace outpost::job {
namespace {

using spec_test::Res;

std::string Devices(const std::string& object) { return Res(R"("devices": )" + object); }

TEST(JobSpecDevices, RequestsAreReadSortedByResource) {
  auto spec = ParseJobSpec(Devices(R"({"vendor.example/camera": 1, "example.com/npu": 2})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  std::vector<devices::Request> want = {{"example.com/npu", 2}, {"vendor.example/camera", 1}};
  EXPECT_EQ(spec->tasks[0].devices, want);
  EXPECT_FALSE(spec->tasks[0].resources->Any()) << "devices are no cgroup limit";
}

TEST(JobSpecDevices, TheKubeletsNamesAreAccepted) {
  for (const char* name : {"vendor.example/camera", "nvidia.com/gpu", "a/b", "intel.com/sriov_netdevice",
                           "example.com/Foo.Bar-1", "1-x.example/9"}) {
    auto spec = ParseJobSpec(Devices(std::string("{\"") + name + "\": 1}"));
    EXPECT_TRUE(spec.ok()) << name << ": " << spec.error().message();
  }
  auto many = ParseJobSpec(Devices(R"({"vendor.example/camera": 10000})"));
  EXPECT_TRUE(many.ok()) << many.error().message();
}

struct Bad {
  std::string doc;
  std::string error;
};

TEST(JobSpecDevices, EveryMistakeGetsItsPathAndMessage) {
  const std::string invalid = "tasks[0].resources.devices[\"";
  std::vector<Bad> cases = {
      {Devices(R"(["vendor.example/camera"])"),
       "tasks[0].resources.devices: expected an object of resource names and device counts, like "
       "{\"vendor.example/camera\": 1}, got array"},
      {Devices(R"({"camera": 1})"),
       invalid + "camera\"]: the ResourceName \"camera\" is invalid: expected DOMAIN/NAME like \"vendor.example/camera\""},
      {Devices(R"({"Vendor.example/camera": 1})"),
       invalid + "Vendor.example/camera\"]: the ResourceName \"Vendor.example/camera\" is invalid: the domain "
                 "\"Vendor.example\" must be lower-case letters, digits, '-' and '.', each dot-separated part "
                 "starting and ending with a letter or digit, at most 244 bytes"},
      {Devices(R"({"vendor.example/cam/0": 1})"),
       invalid + "vendor.example/cam/0\"]: the ResourceName \"vendor.example/cam/0\" is invalid: must have exactly "
                 "one '/' (DOMAIN/NAME)"},
      {Devices(R"({"vendor.example/-cam": 1})"),
       invalid + "vendor.example/-cam\"]: the ResourceName \"vendor.example/-cam\" is invalid: the name \"-cam\" "
                 "must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"},
      {Devices(R"({"kubernetes.io/cpu": 1})"),
       invalid + "kubernetes.io/cpu\"]: the ResourceName \"kubernetes.io/cpu\" is invalid: names in kubernetes.io/ "
                 "are the kubelet's own resources, not a device plugin's"},
      {Devices(R"({"requests.example/x": 1})"),
       invalid + "requests.example/x\"]: the ResourceName \"requests.example/x\" is invalid: must not start with "
                 "\"requests.\""},
      {Devices(R"({"vendor.example/camera": 0})"),
       invalid + "vendor.example/camera\"]: expected a whole number of devices from 1 to 10000, got 0"},
      {Devices(R"({"vendor.example/camera": 1.5})"),
       invalid + "vendor.example/camera\"]: expected a whole number of devices from 1 to 10000, got 1.5"},
      {Devices(R"({"vendor.example/camera": "1"})"),
       invalid + "vendor.example/camera\"]: expected a whole number of devices from 1 to 10000, got \"1\""},
      {Devices(R"({"vendor.example/camera": 10001})"),
       invalid + "vendor.example/camera\"]: expected a whole number of devices from 1 to 10000, got 10001"},
      {R"({"id": "j", "resources": {"devices": {"vendor.example/camera": 1}},
           "tasks": [{"name": "a", "command": "/bin/sh"}]})",
       "resources.devices: devices are requested per task (tasks[i].resources.devices; docs/devices.md)"},
  };
  for (const Bad& c : cases) {
    auto spec = ParseJobSpec(c.doc);
    ASSERT_FALSE(spec.ok()) << c.doc;
    EXPECT_EQ(spec.error().message(), c.error) << c.doc;
  }
  // Every problem at once, next to the task's other mistakes.
  auto spec = ParseJobSpec(Res(R"("devices": {"a": 1, "b.example/x": -1}, "cpu": {"weight": 0})"));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message(),
            "tasks[0].resources.devices[\"a\"]: the ResourceName \"a\" is invalid: expected DOMAIN/NAME like "
            "\"vendor.example/camera\"\n"
            "tasks[0].resources.devices[\"b.example/x\"]: expected a whole number of devices from 1 to 10000, got -1\n"
            "tasks[0].resources.cpu.weight: must be between 1 and 10000, got 0");
}

TEST(JobSpecDevices, TooManyResources) {
  std::string obj = "{";
  for (int i = 0; i < 65; ++i) obj += (i ? ", " : "") + std::string("\"v.example/r") + std::to_string(i) + "\": 1";
  auto spec = ParseJobSpec(Devices(obj + "}"));
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.error().message(), "tasks[0].resources.devices: 65 resources, more than the limit of 64");
}

TEST(JobSpecDevices, CanonicalFormReadsBack) {
  auto spec = ParseJobSpec(Res(R"("devices": {"vendor.example/camera": 2}, "pids": {"max": 10})"));
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  picojson::value v = TaskSpecToJson(spec->tasks[0]);
  EXPECT_EQ(json::Write(v.get("resources")), R"({"devices":{"vendor.example/camera":2},"pids":{"max":10}})");
  auto back = JobSpecFromJson(JobSpecToJson(*spec));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->tasks[0].devices, spec->tasks[0].devices);
  EXPECT_EQ(JobSpecToJson(*back).serialize(), JobSpecToJson(*spec).serialize());
  // A task without devices has none in its canonical form.
  auto plain = ParseJobSpec(Res(R"("pids": {"max": 10})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(TaskSpecToJson(plain->tasks[0]).get("resources").serialize(), R"({"pids":{"max":10}})");
}

TEST(JobSpecDevices, AChangedRequestRestartsTheTaskLimitsStillChangeLive) {
  auto base = ParseJobSpec(Res(R"("devices": {"vendor.example/camera": 1}, "pids": {"max": 10})"));
  auto more = ParseJobSpec(Res(R"("devices": {"vendor.example/camera": 2}, "pids": {"max": 10})"));
  auto other = ParseJobSpec(Res(R"("devices": {"vendor.example/mic": 1}, "pids": {"max": 10})"));
  auto none = ParseJobSpec(Res(R"("pids": {"max": 10})"));
  auto limits = ParseJobSpec(Res(R"("devices": {"vendor.example/camera": 1}, "pids": {"max": 20})"));
  ASSERT_TRUE(base.ok() && more.ok() && other.ok() && none.ok() && limits.ok());
  for (const auto* next : {&*more, &*other, &*none}) {
    SpecDiff d = DiffSpecs(*base, *next);
    EXPECT_TRUE(d.Restarts("a")) << JobSpecToJson(*next).serialize();
  }
  SpecDiff live = DiffSpecs(*base, *limits);
  EXPECT_FALSE(live.Restarts("a"));
  EXPECT_TRUE(live.Updates("a"));
  EXPECT_FALSE(DiffSpecs(*base, *base).changed);
}

TEST(JobSpecDevices, FingerprintOfATaskWithoutDevicesDidNotChange) {
  // The pinned value of job_spec_canonical_test.cc: devices add nothing to
  // a task that has none.
  auto spec = ParseJobSpec(R"({"id": "j", "tasks": [{"name": "a", "command": "/bin/true"}]})");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(TaskFingerprint(spec->tasks[0]), "ecec03ccc4a23bd5");
}

}  // namespace
}  // namespace outpost::job
