// The oci driver's CDI support (examples/plugins/oci-driver/cdi.h): spec
// files, priorities and conflicts, every kind of edit applied to a
// config.json as CDI's library does, and refusals by name.
#include "../../examples/plugins/oci-driver/cdi.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../../examples/plugins/oci-driver/spec.h"
#include "test_util.h"

namespace oci_driver::cdi {
namespace {

using picojson::value;

// JSON text without picojson's escaping of '/'.
std::string J(const value& v) {
  std::string s = v.serialize();
  for (size_t at; (at = s.find("\\/")) != std::string::npos;) s.erase(at, 1);
  return s;
}

value Parse(const std::string& text) {
  value v;
  EXPECT_EQ(ParseJson(&v, text), "") << text;
  return v;
}

void Write(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

const char kCamera[] = R"({
  "cdiVersion": "0.6.0",
  "kind": "vendor.example/camera",
  "containerEdits": {"env": ["CAMERA_DRIVER=uvc"], "additionalGids": [44, 0]},
  "devices": [
    {"name": "cam0", "containerEdits": {
      "env": ["CAMERA=cam0", "PATH=/opt/camera/bin:/usr/bin"],
      "deviceNodes": [{"path": "/dev/video0", "hostPath": "/dev/null", "permissions": "rw"},
                      {"path": "/dev/cam-fifo", "type": "p"}],
      "mounts": [{"hostPath": "/opt/camera/lib", "containerPath": "/usr/lib/camera", "options": ["ro", "bind"]},
                 {"hostPath": "/opt/camera", "containerPath": "/usr", "type": "bind", "options": ["rbind"]}],
      "hooks": [{"hookName": "createContainer", "path": "/usr/bin/camera-hook", "args": ["camera-hook", "x"],
                 "timeout": 5}]}},
    {"name": "cam1", "containerEdits": {"deviceNodes": [{"path": "/dev/video1", "type": "c", "major": 81,
                                                          "minor": 1, "fileMode": 432, "uid": 7}]}}
  ]
})";

Spec ParseOk(const std::string& text, const std::string& path = "/etc/cdi/camera.json", int prio = 0) {
  Spec s;
  std::vector<std::string> problems;
  EXPECT_TRUE(ParseSpec(text, path, prio, &s, &problems)) << JoinLines(problems);
  return s;
}

// A config.json as BuildSpec makes it, smaller.
value Base() {
  return Parse(R"({"process": {"env": ["PATH=/usr/bin", "HOME=/"], "user": {"uid": 1000, "gid": 1000}},
                   "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                              {"destination": "/usr/lib/camera", "type": "tmpfs", "source": "tmpfs"},
                              {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"}],
                   "linux": {"resources": {"devices": [{"allow": false, "access": "rwm"}]}},
                   "annotations": {"cdi.k8s.io/outpost": "vendor.example/camera=cam0"}})");
}

TEST(CdiSpec, EditsAreAppliedAsCdisLibraryDoes) {
  Registry reg;
  reg.Add(ParseOk(kCamera));
  value spec = Base();
  ASSERT_EQ(reg.Inject({"vendor.example/camera=cam0", "vendor.example/camera=cam1"}, &spec), "");
  EXPECT_EQ(J(spec.get("process").get("env")),
            R"(["PATH=/opt/camera/bin:/usr/bin","HOME=/","CAMERA_DRIVER=uvc","CAMERA=cam0"])")
      << "the spec's edits first, a variable set again replaced";
  EXPECT_EQ(J(spec.get("process").get("user").get("additionalGids")), "[44]") << "gid 0 is ignored";
  struct stat null {};
  ASSERT_EQ(::stat("/dev/null", &null), 0);
  EXPECT_EQ(J(spec.get("linux").get("devices")),
            "[{\"fileMode\":" + std::to_string(null.st_mode & 07777) +
                ",\"gid\":1000,\"major\":1,\"minor\":3,\"path\":\"/dev/video0\",\"type\":\"c\",\"uid\":1000},"
                "{\"gid\":1000,\"path\":\"/dev/cam-fifo\",\"type\":\"p\",\"uid\":1000},"
                "{\"fileMode\":432,\"gid\":1000,\"major\":81,\"minor\":1,\"path\":\"/dev/video1\",\"type\":\"c\",\"uid\":7}]")
      << "a node's type and numbers from the host, owner from the process";
  EXPECT_EQ(J(spec.get("linux").get("resources").get("devices")),
            R"([{"access":"rwm","allow":false},{"access":"rw","allow":true,"major":1,"minor":3,"type":"c"},)"
            R"({"access":"rwm","allow":true,"major":81,"minor":1,"type":"c"}])")
      << "a rule per char or block node, permissions default rwm";
  EXPECT_EQ(J(spec.get("mounts")),
            R"([{"destination":"/dev","source":"tmpfs","type":"tmpfs"},)"
            R"({"destination":"/proc","source":"proc","type":"proc"},)"
            R"({"destination":"/usr","options":["rbind"],"source":"/opt/camera","type":"bind"},)"
            R"({"destination":"/usr/lib/camera","options":["ro","bind"],"source":"/opt/camera/lib"}])")
      << "a mount on the same destination replaced; parents before children";
  EXPECT_EQ(J(spec.get("hooks")),
            R"({"createContainer":[{"args":["camera-hook","x"],"path":"/usr/bin/camera-hook","timeout":5}]})");
}

TEST(CdiSpec, AnnotationsNameTheDevices) {
  std::vector<std::string> names;
  EXPECT_EQ(AnnotatedDevices(Parse(R"({"annotations": {"cdi.k8s.io/outpost": "v.com/c=a,v.com/c=b",
                                        "cdi.k8s.io/plugin_x": "v.com/c=a", "other": "v.com/c=z"}})"),
                             &names),
            "");
  EXPECT_EQ(names, (std::vector<std::string>{"v.com/c=a", "v.com/c=b"}));
  names.clear();
  EXPECT_EQ(AnnotatedDevices(Parse(R"({"annotations": {"cdi.k8s.io/x": "v.com/c=a,,"}})"), &names),
            "annotation cdi.k8s.io/x: invalid CDI device name \"\"");
  EXPECT_EQ(AnnotatedDevices(Parse(R"({"process": {}})"), &names), "");
  EXPECT_EQ(AnnotatedDevices(Parse("0"), &names), "") << "not an object: no names (picojson would throw)";
}

TEST(CdiSpec, ABaseSpecOfTheWrongShapeDoesNotThrow) {
  Registry reg;
  reg.Add(ParseOk(kCamera));
  value spec = Parse(R"({"process": {"env": [1], "user": 2}, "mounts": [3, {"destination": 4}],
                         "linux": {"devices": ["x"], "resources": 5}, "hooks": []})");
  ASSERT_EQ(reg.Inject({"vendor.example/camera=cam1"}, &spec), "");
  EXPECT_EQ(J(spec.get("linux").get("devices")),
            R"(["x",{"fileMode":432,"major":81,"minor":1,"path":"/dev/video1","type":"c","uid":7}])");
  EXPECT_EQ(J(spec.get("process").get("env")), R"([1,"CAMERA_DRIVER=uvc"])");
}

TEST(CdiSpec, UnknownNamesAndUnsupportedEditsAreRefusedByName) {
  Registry reg;
  reg.Add(ParseOk(R"({"cdiVersion": "1.0.0", "kind": "v.com/npu",
                      "devices": [{"name": "0", "containerEdits": {"netDevices": [{"hostInterfaceName": "x"}]}},
                                  {"name": "1", "containerEdits": {"mounts": [{"hostPath": "/a", "containerPath": "/b",
                                                                              "uidMappings": []}]}},
                                  {"name": "2", "containerEdits": {"deviceNodes": [{"path": "/dev/nope-cdi"}]}}]})",
                  "/var/run/cdi/npu.json", 1));
  value spec = Base();
  std::string before = J(spec);
  EXPECT_EQ(reg.Inject({"v.com/npu=0", "v.com/npu=1", "v.com/npu=9"}, &spec),
            "CDI device v.com/npu=0: device containerEdits.netDevices is not supported by this driver "
            "(/var/run/cdi/npu.json)\n"
            "CDI device v.com/npu=1: device containerEdits.mounts[].uidMappings is not supported by this driver "
            "(/var/run/cdi/npu.json)\n"
            "CDI device v.com/npu=9: unknown");
  EXPECT_EQ(reg.Inject({"v.com/npu=2"}, &spec), "deviceNodes: /dev/nope-cdi: No such file or directory");
  EXPECT_EQ(J(spec), before) << "nothing applied when anything fails";
}

TEST(CdiSpec, SpecProblemsNameFileAndField) {
  struct Case {
    std::string text, problem;
  };
  for (const Case& c : std::vector<Case>{
           {"[]", "/x.json: expected an object"},
           {"{", "/x.json: "},
           {R"({"kind": "v.com/c", "devices": [{"name": "a"}]})", "/x.json: cdiVersion: required"},
           {R"({"cdiVersion": "0.6.0", "kind": "vcom", "devices": [{"name": "a"}]})",
            "/x.json: kind: expected vendor/class like \"vendor.com/device\", got \"vcom\""},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": []})",
            "/x.json: devices: must list at least one device"},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": [{"name": "-a"}]})",
            "/x.json: devices[0].name: expected letters, digits, '_', '-', '.', ':' (a letter or digit at both ends), "
            "got \"-a\""},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": [{"name": "a"}, {"name": "a"}]})",
            "/x.json: devices[1].name: device \"a\" is listed twice"},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": [{"name": "a", "containerEdits":
                {"mounts": [{"hostPath": "/a", "containerPath": "b"}]}}]})",
            "/x.json: devices[0].containerEdits.mounts[0].containerPath: must be an absolute path"},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": [{"name": "a", "containerEdits":
                {"hooks": [{"hookName": "prestop", "path": "/x"}]}}]})",
            "/x.json: devices[0].containerEdits.hooks[0].hookName: unknown hook \"prestop\""},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": [{"name": "a"}],
                "containerEdits": {"env": ["NOEQUALS"]}})",
            "/x.json: containerEdits.env: \"NOEQUALS\" is not NAME=value"},
           {R"({"cdiVersion": "0.6.0", "kind": "v.com/c", "devices": [{"name": "a", "containerEdits":
                {"deviceNodes": [{"path": "/dev/x", "major": -1, "type": "x"}]}}]})",
            "/x.json: devices[0].containerEdits.deviceNodes[0].type: expected b, c, u or p, got \"x\""},
       }) {
    Spec s;
    std::vector<std::string> problems;
    EXPECT_FALSE(ParseSpec(c.text, "/x.json", 0, &s, &problems)) << c.text;
    ASSERT_FALSE(problems.empty()) << c.text;
    EXPECT_EQ(problems[0].substr(0, c.problem.size()), c.problem) << JoinLines(problems);
  }
}

TEST(CdiSpec, DirsPrioritiesAndConflicts) {
  std::string root = outpost::testing::MakeTempDir("/tmp", "cdi");
  ASSERT_FALSE(root.empty());
  std::string etc = root + "/etc", run = root + "/run";
  ASSERT_EQ(::mkdir(etc.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(run.c_str(), 0755), 0);
  auto spec = [](const char* kind, const char* dev, const char* env) {
    return std::string(R"({"cdiVersion": "0.6.0", "kind": ")") + kind + R"(", "devices": [{"name": ")" + dev +
           R"(", "containerEdits": {"env": [")" + env + R"("]}}]})";
  };
  Write(etc + "/a.json", spec("v.com/c", "x", "FROM=etc"));
  Write(run + "/a.json", spec("v.com/c", "x", "FROM=run"));  // the later dir wins
  Write(etc + "/b.json", spec("v.com/d", "y", "FROM=b"));
  Write(etc + "/c.json", spec("v.com/d", "y", "FROM=c"));    // the same dir: a conflict
  Write(etc + "/d.yaml", "cdiVersion: 0.6.0");
  Write(etc + "/e.json", "not json");
  Registry reg;
  reg.Load({etc, run, root + "/missing"});
  value s = Parse(R"({"process": {"env": []}})");
  ASSERT_EQ(reg.Inject({"v.com/c=x"}, &s), "");
  EXPECT_EQ(J(s.get("process").get("env")), R"(["FROM=run"])");
  std::string err = reg.Inject({"v.com/d=y"}, &s);
  EXPECT_EQ(err.rfind("CDI device v.com/d=y: unknown (no spec in " + etc + ", " + run + ", " + root +
                          "/missing defines it); problems with the specs: ",
                      0),
            0u)
      << err;
  EXPECT_NE(err.find("conflicting device v.com/d=y (specs " + etc + "/b.json, " + etc + "/c.json)"), std::string::npos);
  EXPECT_NE(err.find(etc + "/d.yaml: YAML specs are not read"), std::string::npos);
  EXPECT_NE(err.find(etc + "/e.json: "), std::string::npos);
  for (const char* f : {"/etc/a.json", "/run/a.json", "/etc/b.json", "/etc/c.json", "/etc/d.yaml", "/etc/e.json"}) {
    ::unlink((root + f).c_str());
  }
  ::rmdir(etc.c_str());
  ::rmdir(run.c_str());
  ::rmdir(root.c_str());
}

TEST(CdiSpec, QualifiedNames) {
  EXPECT_TRUE(IsQualifiedName("vendor.com/class=name"));
  EXPECT_TRUE(IsQualifiedName("v.com/c=0:1"));
  EXPECT_FALSE(IsQualifiedName("vendor.com/class"));
  EXPECT_FALSE(IsQualifiedName("name"));
  EXPECT_FALSE(IsQualifiedName("vendor.com/cl/ass=x"));
  EXPECT_FALSE(IsQualifiedName("/vendor.com/class=x"));
}

}  // namespace
}  // namespace oci_driver::cdi
