// nri/convert: a task as an NRI container, limits both ways, and applying a
// merged adjustment to a task's config (or refusing it, naming the plugin
// and the field); the "nri" config object.
#include <gtest/gtest.h>

#include "agent/config.h"
#include "nri/adaptation.h"
#include "nri/convert.h"

namespace outpost::nri {
namespace {

driver::TaskConfig Task() {
  driver::TaskConfig c;
  c.id = "j.t";
  c.job = "j";
  c.name = "t";
  c.command = "/bin/app";
  c.args = {"-v"};
  c.env = {{"A", "1"}, {"B", "2"}};
  c.rlimits = {{"nofile", 10, 20}};
  c.resources.mutable_get().memory_max = 64 << 20;
  c.resources.mutable_get().cpu_weight = 100;
  return c;
}

driver::Capabilities Exec() {
  driver::Capabilities c;
  c.mounts = true;
  c.oom_score_adj = true;
  return c;
}

TEST(NriConvert, TaskBecomesAContainerPluginsCanRead) {
  Container n = ToContainer(Task(), ContainerState::kRunning);
  EXPECT_EQ(n.id, "j.t");
  EXPECT_EQ(n.pod_sandbox_id, "j");
  EXPECT_EQ(n.name, "t");
  EXPECT_EQ(n.args, (std::vector<std::string>{"/bin/app", "-v"}));
  EXPECT_EQ(n.env, (std::vector<std::string>{"A=1", "B=2"}));
  ASSERT_EQ(n.rlimits.size(), 1u);
  EXPECT_EQ(n.rlimits[0].type, "RLIMIT_NOFILE");
  EXPECT_EQ(n.rlimits[0].soft, 10u);
  EXPECT_EQ(n.rlimits[0].hard, 20u);
  ASSERT_TRUE(n.resources && n.resources->memory && n.resources->memory->limit);
  EXPECT_EQ(*n.resources->memory->limit, 64 << 20);
  ASSERT_TRUE(n.resources->cpu && n.resources->cpu->shares);
  EXPECT_EQ(SharesToWeight(*n.resources->cpu->shares), 100u) << "cpu.weight survives the trip through shares";
}

TEST(NriConvert, SharesAndWeightConvertAsRuncDoes) {
  EXPECT_EQ(SharesToWeight(2), 1u);
  EXPECT_EQ(SharesToWeight(1024), 39u);
  EXPECT_EQ(SharesToWeight(262144), 10000u);
  EXPECT_EQ(SharesToWeight(0), 0u) << "unset stays unset";
  EXPECT_EQ(WeightToShares(1), 2u);
  EXPECT_EQ(WeightToShares(10000), 262144u);
  for (uint64_t w : {1u, 39u, 100u, 5000u, 9999u, 10000u}) EXPECT_EQ(SharesToWeight(WeightToShares(w)), w) << w;
}

TEST(NriConvert, ResourcesMapToCgroupV2Files) {
  Resources r;
  r.memory.emplace();
  r.memory->limit = 100 << 20;
  r.memory->reservation = 10 << 20;
  r.memory->swap = 150 << 20;
  r.cpu.emplace();
  r.cpu->shares = 2048;
  r.cpu->quota = 50000;
  r.cpu->period = 100000;
  r.cpu->cpus = "0-1";
  r.pids_limit = 64;
  r.hugepage_limits.push_back({"2MB", 4 << 20});
  r.unified["memory.oom.group"] = "1";
  cgroup::Resources out;
  ASSERT_TRUE(ApplyResources(r, &out).ok());
  EXPECT_EQ(out.memory_max, 100 << 20);
  EXPECT_EQ(out.memory_low, 10 << 20);
  EXPECT_EQ(out.memory_swap_max, 50 << 20) << "OCI swap is memory + swap";
  EXPECT_EQ(out.cpu_weight, SharesToWeight(2048));
  EXPECT_EQ(out.cpu_max_quota_us, 50000);
  EXPECT_EQ(out.cpu_max_period_us, 100000u);
  EXPECT_EQ(out.cpuset_cpus, "0-1");
  EXPECT_EQ(out.pids_max, 64);
  EXPECT_EQ(out.hugetlb_max["2MB"], 4u << 20);
  EXPECT_EQ(out.unified["memory.oom.group"], "1");
}

TEST(NriConvert, ResourcesWithoutACgroupV2FileAreRefusedByName) {
  Resources r;
  r.memory.emplace();
  r.memory->kernel = 1;
  cgroup::Resources out;
  Status st = ApplyResources(r, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("memory.kernel has no cgroup v2 equivalent"), std::string::npos);
  Resources rdt;
  rdt.rdt_class = "gold";
  st = ApplyResources(rdt, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("rdt_class"), std::string::npos);
}

TEST(NriConvert, AdjustmentIsAppliedToTheTask) {
  driver::TaskConfig c = Task();
  ContainerAdjustment a;
  a.env = {{"C", "3"}, {"-A", ""}};
  a.annotations = {{"k", "v"}};
  a.args = {"/bin/other", "x"};
  a.rlimits = {{"RLIMIT_NOFILE", 200, 100}};
  a.mounts = {{"/dst", "bind", "/src", {"rbind", "ro"}}};
  a.linux.emplace();
  a.linux->oom_score_adj = 500;
  a.linux->resources.emplace();
  a.linux->resources->memory.emplace();
  a.linux->resources->memory->limit = 32 << 20;
  a.hooks.emplace();
  a.hooks->poststart.push_back({"/bin/hook", {"hook", "x"}, {}, 3});
  std::vector<Claim> claims = {{"10-a", Field::kEnv, "C", false, "j.t"}, {"10-a", Field::kOciHooks, "", false, "j.t"}};
  ASSERT_TRUE(ApplyAdjustment(a, claims, Exec(), &c).ok());
  EXPECT_EQ(c.env, (std::map<std::string, std::string>{{"B", "2"}, {"C", "3"}}));
  EXPECT_EQ(c.command, "/bin/other");
  EXPECT_EQ(c.args, (std::vector<std::string>{"x"}));
  ASSERT_EQ(c.rlimits.size(), 1u);
  EXPECT_EQ(c.rlimits[0].name, "nofile");
  EXPECT_EQ(c.rlimits[0].soft, 100u);
  EXPECT_EQ(c.rlimits[0].hard, 200u);
  ASSERT_EQ(c.mounts.size(), 1u);
  EXPECT_EQ(c.mounts[0], (driver::Mount{"/src", "/dst", true}));
  EXPECT_EQ(c.oom_score_adj, 500);
  EXPECT_EQ(c.resources->memory_max, 32 << 20);
  EXPECT_EQ(c.resources->cpu_weight, 100u) << "fields the plugin left alone stay";
  EXPECT_EQ(c.Annotations().at("k"), "v");
  ASSERT_EQ(c.Hooks().at(hooks::Stage::kPoststart).size(), 1u);
  EXPECT_EQ(c.Hooks().at(hooks::Stage::kPoststart)[0].timeout_seconds, 3);
  EXPECT_EQ(c.Hooks().at(hooks::Stage::kPoststart)[0].source, "nri plugin 10-a");
}

// A driver that applies devices (the oci driver) gets them in the task,
// replacing one at the same path; "-PATH" removes one.
TEST(NriConvert, DevicesAreAppliedWhereTheDriverCanAndSeenByLaterPlugins) {
  driver::TaskConfig c = Task();
  driver::Capabilities caps = Exec();
  caps.devices = true;
  ContainerAdjustment a;
  a.linux.emplace().devices = {{"/dev/fuse", "c", 10, 229, 0666u, {}, {}}, {"/dev/zero", "c", 1, 5, {}, {}, {}}};
  std::vector<Claim> claims = {{"20-dev", Field::kDevices, "/dev/fuse", false, "j.t"}};
  ASSERT_TRUE(ApplyAdjustment(a, claims, caps, &c).ok());
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[0].path, "/dev/fuse");
  EXPECT_EQ(c.devices[0].major, 10);
  EXPECT_EQ(c.devices[0].file_mode, 0666u);
  Container seen = ToContainer(c, ContainerState::kCreated);
  ASSERT_EQ(seen.devices.size(), 2u);
  EXPECT_EQ(seen.devices[1].path, "/dev/zero");
  ContainerAdjustment b;
  b.linux.emplace().devices = {{"-/dev/fuse", "", 0, 0, {}, {}, {}}, {"/dev/zero", "c", 1, 5, 0600u, {}, {}}};
  ASSERT_TRUE(ApplyAdjustment(b, claims, caps, &c).ok());
  ASSERT_EQ(c.devices.size(), 1u);
  EXPECT_EQ(c.devices[0].file_mode, 0600u);
  ContainerAdjustment bad;
  bad.linux.emplace().devices = {{"dev/x", "c", 1, 1, {}, {}, {}}};
  Status st = ApplyAdjustment(bad, claims, caps, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("device path must be absolute"), std::string::npos) << st.error().message();
  bad.linux->devices = {{"/dev/x", "z", 1, 1, {}, {}, {}}};
  st = ApplyAdjustment(bad, claims, caps, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("device type \"z\" is not c, b, u or p"), std::string::npos);
  EXPECT_EQ(c.devices.size(), 1u) << "nothing applied from a refused adjustment";
}

TEST(NriConvert, WhatTheDriverCannotApplyFailsNamingPluginAndField) {
  struct Case {
    const char* what;
    ContainerAdjustment adj;
    driver::Capabilities caps;
    const char* message;
  };
  std::vector<Case> cases;
  {
    Case c{"device on exec", {}, Exec(), "NRI plugin 20-dev adjusted Devices /dev/fuse: the exec driver cannot apply devices"};
    c.adj.linux.emplace().devices.push_back({"/dev/fuse", "c", 10, 229, {}, {}, {}});
    cases.push_back(c);
  }
  {
    Case c{"mount on a driver without mounts", {}, driver::Capabilities(),
           "NRI plugin 20-dev adjusted Mounts /dst: the exec driver cannot apply mounts"};
    c.adj.mounts.push_back({"/dst", "bind", "/src", {}});
    cases.push_back(c);
  }
  {
    Case c{"tmpfs mount", {}, Exec(), "applies bind mounts only (type \"tmpfs\")"};
    c.adj.mounts.push_back({"/dst", "tmpfs", "tmpfs", {}});
    cases.push_back(c);
  }
  {
    Case c{"cgroups path", {}, Exec(), "adjusted CgroupsPath: outpost owns the task's cgroup"};
    c.adj.linux.emplace().cgroups_path = "/elsewhere";
    cases.push_back(c);
  }
  {
    Case c{"seccomp", {}, Exec(), "adjusted SeccompPolicy: not supported"};
    c.adj.linux.emplace().seccomp_policy_raw = std::string("\x0a\x01x", 3);
    cases.push_back(c);
  }
  {
    Case c{"sysctl", {}, Exec(), "adjusted Sysctl net.ipv4.ip_forward"};
    c.adj.linux.emplace().sysctl["net.ipv4.ip_forward"] = "1";
    cases.push_back(c);
  }
  {
    Case c{"cdi", {}, Exec(), "adjusted CdiDevices vendor.com/gpu=0"};
    c.adj.cdi_devices.push_back("vendor.com/gpu=0");
    cases.push_back(c);
  }
  {
    Case c{"bad rlimit", {}, Exec(), "adjusted Rlimits RLIMIT_BOGUS"};
    c.adj.rlimits.push_back({"RLIMIT_BOGUS", 1, 1});
    cases.push_back(c);
  }
  for (Case& k : cases) {
    driver::TaskConfig c = Task();
    driver::TaskConfig before = c;
    std::vector<Claim> claims = {{"20-dev", Field::kDevices, "/dev/fuse", false, "j.t"},
                                 {"20-dev", Field::kMounts, "/dst", false, "j.t"},
                                 {"20-dev", Field::kCgroupsPath, "", false, "j.t"},
                                 {"20-dev", Field::kSeccompPolicy, "", false, "j.t"},
                                 {"20-dev", Field::kSysctl, "net.ipv4.ip_forward", false, "j.t"},
                                 {"20-dev", Field::kCdiDevices, "vendor.com/gpu=0", false, "j.t"},
                                 {"20-dev", Field::kRlimits, "RLIMIT_BOGUS", false, "j.t"}};
    k.adj.env.push_back({"SHOULD_NOT", "apply"});
    Status st = ApplyAdjustment(k.adj, claims, k.caps, &c);
    ASSERT_FALSE(st.ok()) << k.what;
    EXPECT_NE(st.error().message().find(k.message), std::string::npos) << k.what << ": " << st.error().message();
    EXPECT_EQ(c.env, before.env) << k.what << ": nothing applied from a refused adjustment";
  }
}

TEST(NriConvert, PluginFileNamesFollowUpstream) {
  std::string idx, name;
  ASSERT_TRUE(ParsePluginFileName("10-logger", &idx, &name).ok());
  EXPECT_EQ(idx, "10");
  EXPECT_EQ(name, "logger");
  ASSERT_TRUE(ParsePluginFileName("05-a-b", &idx, &name).ok());
  EXPECT_EQ(name, "a-b");
  EXPECT_EQ(ParsePluginFileName("logger", &idx, &name).error().message(),
            "invalid plugin name \"logger\", idx-pluginname expected");
  EXPECT_EQ(ParsePluginFileName("1-x", &idx, &name).error().message(), "invalid plugin index \"1\", must be 2 digits");
  EXPECT_EQ(CheckPluginIndex("a1").error().message(), "invalid plugin index \"a1\" (not [0-9][0-9])");
  EXPECT_EQ(CheckPluginName("").error().message(), "invalid plugin name: name is empty");
  EXPECT_EQ(CheckPluginName("a/b").error().message(), "invalid plugin name \"a/b\": contains invalid character '/'");
  EXPECT_TRUE(CheckPluginName("a.b+c_d-e").ok());
}

TEST(NriConfig, ObjectEnablesItWithUpstreamDefaults) {
  auto off = ParseConfig("{}", "x.json");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->nri.enable);
  auto on = ParseConfig(R"({"nri": {}})", "x.json");
  ASSERT_TRUE(on.ok()) << on.error().message();
  EXPECT_TRUE(on->nri.enable);
  EXPECT_EQ(on->nri.socket, "/var/run/nri/nri.sock");
  EXPECT_EQ(on->nri.plugin_dir, "/opt/nri/plugins");
  EXPECT_EQ(on->nri.plugin_config_dir, "/etc/nri/conf.d");
  EXPECT_EQ(on->nri.registration_timeout_nanos, 5000000000LL);
  EXPECT_EQ(on->nri.request_timeout_nanos, 2000000000LL);
  auto c = ParseConfig(R"({"nri": {"socket": "/run/n.sock", "required_plugins": ["gate"],
      "plugins": {"slow": {"request_timeout": "30s", "fail_policy": "fail"}}}})", "x.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->nri.required_plugins, (std::vector<std::string>{"gate"}));
  EXPECT_EQ(c->nri.plugins["slow"].request_timeout_nanos, 30000000000LL);
  EXPECT_TRUE(c->nri.plugins["slow"].fail);
}

TEST(NriConfig, ErrorsNameTheKey) {
  auto c = ParseConfig(R"({"nri": {"socket": "rel", "bogus": 1, "request_timeout": "0s",
      "plugins": {"p": {"fail_policy": "maybe"}}}})", "x.json");
  ASSERT_FALSE(c.ok());
  const std::string& m = c.error().message();
  EXPECT_NE(m.find("nri.socket: must be an absolute path"), std::string::npos) << m;
  EXPECT_NE(m.find("nri.bogus"), std::string::npos) << m;
  EXPECT_NE(m.find("nri.request_timeout: must be between 1ms and 1h"), std::string::npos) << m;
  EXPECT_NE(m.find("nri.plugins.p.fail_policy"), std::string::npos) << m;
}

}  // namespace
}  // namespace outpost::nri
