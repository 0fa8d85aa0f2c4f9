// The oci driver's task `config` and the config.json it builds
// (examples/plugins/oci-driver/spec.h).
#include "../../examples/plugins/oci-driver/spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>

#include "test_util.h"

namespace oci_driver {
namespace {

using picojson::array;
using picojson::value;

// JSON text without picojson's escaping of '/'.
std::string J(const value& v) {
  std::string s = v.serialize();
  for (size_t at; (at = s.find("\\/")) != std::string::npos;) s.erase(at, 1);
  return s;
}

std::string Problems(const std::string& json, TaskOptions* o = nullptr) {
  TaskOptions local;
  std::vector<std::string> p;
  ParseOptions(json, o ? o : &local, &p);
  return JoinLines(p);
}

TEST(OciSpec, ConfigProblemsNameTheField) {
  EXPECT_EQ(Problems("[1]"), "config: not a JSON object");
  EXPECT_EQ(Problems(R"({"rootfs": 1e999})"), "config: not a JSON object") << "picojson's throw is caught";
  std::string status;
  int64_t pid = 1;
  EXPECT_FALSE(ParseState(R"({"status": "running", "pid": 1e999})", &status, &pid));
  EXPECT_EQ(Problems("{}"), "config.rootfs: required (the container's root file system)");
  EXPECT_EQ(Problems(R"({"rootfs": "rel"})"), "config.rootfs: must be an absolute path, got \"rel\"");
  EXPECT_EQ(Problems(R"({"rootfs": "/nonexistent/root"})"),
            "config.rootfs: /nonexistent/root is not a directory on this node");
  std::string all = Problems(R"({"rootfs": "/", "readonly_rootfs": 1, "args": [], "bogus": 1,
    "mounts": [{"destination": "d", "source": "/nonexistent"}, 5, {"destination": "/t", "type": "tmpfs", "x": 1}],
    "devices": ["/dev/null:rel", "/etc/passwd", "/nonexistent-dev"],
    "capabilities": ["net_admin", "CAP_NOPE"], "runtime": "kata"})");
  for (const char* want : {
           "config.readonly_rootfs: must be true or false",
           "config.args: must not be empty",
           "config.bogus: unknown field",
           "config.mounts[0].destination: must be an absolute path, got \"d\"",
           "config.mounts[0].source: /nonexistent does not exist on this node",
           "config.mounts[1]: must be an object with source, destination, type, options",
           "config.mounts[2].x: unknown field (a mount takes source, destination, type, options)",
           "config.devices[0]: \"/dev/null:rel\" is not HOST_PATH or HOST_PATH:CONTAINER_PATH (absolute paths)",
           "config.devices[1]: /etc/passwd is not a character or block device",
           "config.devices[2]: /nonexistent-dev does not exist on this node",
           "config.capabilities[1]: unknown capability \"CAP_NOPE\"",
           "config.runtime: must be crun, runc or an absolute path, got \"kata\"",
       }) {
    EXPECT_NE(all.find(want), std::string::npos) << want << "\nin:\n" << all;
  }
  EXPECT_EQ(all.find("capabilities[0]"), std::string::npos) << "net_admin is CAP_NET_ADMIN: " << all;
}

outpost::plugin_sdk::TaskConfig Task() {
  outpost::plugin_sdk::TaskConfig t;
  t.id = "j.t";
  t.name = "t";
  t.command = "/bin/app";
  t.args = {"-v"};
  t.env = {{"A", "1"}};
  return t;
}

const value* FindIn(const array& a, const char* key, const std::string& v) {
  for (const value& x : a) {
    if (x.is<picojson::object>() && x.contains(key) && x.get(key).is<std::string>() && x.get(key).get<std::string>() == v) {
      return &x;
    }
  }
  return nullptr;
}

// Without a spec from outpost (the conformance checks): built from the
// config alone, with the standard mounts, namespaces and device rules.
TEST(OciSpec, BuiltFromTheConfigAlone) {
  TaskOptions o;
  std::vector<std::string> p;
  ASSERT_TRUE(ParseOptions(R"({"rootfs": "/", "readonly_rootfs": true, "devices": ["/dev/null:/dev/x"],
      "mounts": [{"source": "/tmp", "destination": "/data"}], "capabilities": ["NET_ADMIN"], "hostname": "box"})",
                           &o, &p))
      << JoinLines(p);
  value s = BuildSpec(Task(), o, value());
  EXPECT_EQ(s.get("ociVersion").get<std::string>(), "1.0.2");
  EXPECT_EQ(s.get("root").get("path").get<std::string>(), "/");
  EXPECT_TRUE(s.get("root").get("readonly").get<bool>());
  EXPECT_EQ(s.get("hostname").get<std::string>(), "box");
  EXPECT_EQ(J(s.get("process").get("args")), R"(["/bin/app","-v"])");
  EXPECT_EQ(s.get("process").get("cwd").get<std::string>(), "/");
  EXPECT_EQ(J(s.get("process").get("env")),
            R"(["A=1","PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])");
  EXPECT_EQ(J(s.get("process").get("capabilities").get("bounding")), R"(["CAP_NET_ADMIN"])");
  EXPECT_TRUE(s.get("process").get("noNewPrivileges").get<bool>());
  const array& mounts = s.get("mounts").get<array>();
  for (const char* d : {"/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys", "/sys/fs/cgroup", "/data"}) {
    EXPECT_TRUE(FindIn(mounts, "destination", d)) << d;
  }
  EXPECT_EQ(J(FindIn(mounts, "destination", "/data")->get("options")), R"(["rbind","rprivate"])");
  const array& ns = s.get("linux").get("namespaces").get<array>();
  EXPECT_EQ(ns.size(), 4u) << "pid, ipc, uts, mount; no network: the node's";
  EXPECT_FALSE(FindIn(ns, "type", "network"));
  const value* dev = FindIn(s.get("linux").get("devices").get<array>(), "path", "/dev/x");
  ASSERT_TRUE(dev);
  EXPECT_EQ(dev->get("major").get<int64_t>(), 1);
  EXPECT_EQ(dev->get("minor").get<int64_t>(), 3);
  const array& rules = s.get("linux").get("resources").get("devices").get<array>();
  EXPECT_FALSE(rules.front().get("allow").get<bool>()) << "deny all first";
  EXPECT_TRUE(rules.back().get("allow").get<bool>());
  EXPECT_EQ(rules.back().get("major").get<int64_t>(), 1);
  EXPECT_FALSE(s.get("linux").contains("cgroupsPath"));
}

// With outpost's spec: its hooks, annotations, env, user, rlimits,
// resources, cgroupsPath, NRI mounts and devices are kept; the network
// namespace is joined by path; the driver's root, args and namespaces win.
TEST(OciSpec, OutpostsSpecIsKeptAndCompleted) {
  value base;
  ASSERT_EQ(picojson::parse(base, R"({
    "ociVersion": "1.2.0",
    "process": {"args": ["/host/path"], "cwd": "/task/dir", "env": ["B=2", "PATH=/opt"], "user": {"uid": 7, "gid": 8},
                "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 10, "hard": 20}], "oomScoreAdj": 300},
    "root": {"path": "/", "readonly": false},
    "hooks": {"poststop": [{"path": "/bin/true"}]},
    "annotations": {"k": "v"},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/nri", "type": "bind", "source": "/srv/nri", "options": ["rbind", "rprivate", "ro"]}],
    "linux": {"cgroupsPath": "/outpost/j/j.t", "namespaces": [{"type": "network", "path": "/run/netns/x"}],
              "resources": {"memory": {"limit": 1048576}, "devices": [{"allow": true, "type": "c", "major": 10, "minor": 229, "access": "rwm"}]},
              "devices": [{"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229}]}})"),
            "");
  TaskOptions o;
  o.rootfs = "/srv/root";
  o.args = {"/bin/sh", "-c", "x"};
  o.has_args = true;
  outpost::plugin_sdk::TaskConfig t = Task();
  t.netns = "/run/netns/x";
  t.hostname = "web";
  value s = BuildSpec(t, o, base);
  EXPECT_EQ(J(s.get("process").get("args")), R"(["/bin/sh","-c","x"])");
  EXPECT_EQ(J(s.get("process").get("env")), R"(["B=2","PATH=/opt"])");
  EXPECT_EQ(s.get("process").get("user").get("uid").get<int64_t>(), 7);
  EXPECT_EQ(s.get("process").get("oomScoreAdj").get<int64_t>(), 300);
  EXPECT_EQ(s.get("process").get("rlimits").get<array>().size(), 1u);
  EXPECT_EQ(s.get("root").get("path").get<std::string>(), "/srv/root");
  EXPECT_EQ(s.get("hostname").get<std::string>(), "web");
  EXPECT_EQ(J(s.get("hooks")), R"({"poststop":[{"path":"/bin/true"}]})");
  EXPECT_EQ(J(s.get("annotations")), R"({"k":"v"})");
  const array& mounts = s.get("mounts").get<array>();
  ASSERT_TRUE(FindIn(mounts, "destination", "/nri"));
  EXPECT_EQ(std::count_if(mounts.begin(), mounts.end(),
                          [](const value& m) { return m.get("destination").get<std::string>() == "/proc"; }),
            1);
  const value& lx = s.get("linux");
  EXPECT_EQ(lx.get("cgroupsPath").get<std::string>(), "/outpost/j/j.t");
  const value* net = FindIn(lx.get("namespaces").get<array>(), "type", "network");
  ASSERT_TRUE(net);
  EXPECT_EQ(net->get("path").get<std::string>(), "/run/netns/x");
  EXPECT_TRUE(FindIn(lx.get("namespaces").get<array>(), "type", "pid"));
  EXPECT_EQ(lx.get("resources").get("memory").get("limit").get<int64_t>(), 1048576);
  EXPECT_TRUE(FindIn(lx.get("devices").get<array>(), "path", "/dev/fuse"));
  const array& rules = lx.get("resources").get("devices").get<array>();
  EXPECT_FALSE(rules.front().get("allow").get<bool>());
  EXPECT_EQ(rules.back().get("minor").get<int64_t>(), 229) << "outpost's device rule after the defaults";
}

}  // namespace
}  // namespace oci_driver
