// Shared by the NRI codec tests: hex helpers, value equality for the types
// of outpost/nri_api.h (the header has none), and fully populated values.
#pragma once

#include <cstdio>
#include <string>
#include <tuple>

#include "outpost/nri_api.h"

namespace outpost::nri {

#define NRI_TEST_EQ(T, ...)                                         \
  inline bool operator==(const T& x, const T& y) {                  \
    auto f = [](const T& v) { return std::tie(__VA_ARGS__); };      \
    return f(x) == f(y);                                            \
  }                                                                 \
  inline bool operator!=(const T& x, const T& y) { return !(x == y); }

NRI_TEST_EQ(KeyValue, v.key, v.value)
NRI_TEST_EQ(Mount, v.destination, v.type, v.source, v.options)
NRI_TEST_EQ(Hook, v.path, v.args, v.env, v.timeout)
NRI_TEST_EQ(Hooks, v.prestart, v.create_runtime, v.create_container, v.start_container, v.poststart, v.poststop)
NRI_TEST_EQ(Rlimit, v.type, v.hard, v.soft)
NRI_TEST_EQ(Namespace, v.type, v.path)
NRI_TEST_EQ(Device, v.path, v.type, v.major, v.minor, v.file_mode, v.uid, v.gid)
NRI_TEST_EQ(DeviceCgroup, v.allow, v.type, v.major, v.minor, v.access)
NRI_TEST_EQ(HugepageLimit, v.page_size, v.limit)
NRI_TEST_EQ(Memory, v.limit, v.reservation, v.swap, v.kernel, v.kernel_tcp, v.swappiness, v.disable_oom_killer,
            v.use_hierarchy)
NRI_TEST_EQ(Cpu, v.shares, v.quota, v.period, v.realtime_runtime, v.realtime_period, v.cpus, v.mems)
NRI_TEST_EQ(Resources, v.memory, v.cpu, v.hugepage_limits, v.blockio_class, v.rdt_class, v.unified, v.devices,
            v.pids_limit)
NRI_TEST_EQ(User, v.uid, v.gid, v.additional_gids)
NRI_TEST_EQ(PodSandbox, v.id, v.name, v.uid, v.namespace_, v.labels, v.annotations, v.runtime_handler,
            v.pod_overhead, v.pod_resources, v.cgroup_parent, v.cgroups_path, v.namespaces, v.resources, v.pid, v.ips)
NRI_TEST_EQ(Container, v.id, v.pod_sandbox_id, v.name, v.state, v.labels, v.annotations, v.args, v.env, v.mounts,
            v.hooks, v.namespaces, v.devices, v.resources, v.oom_score_adj, v.cgroups_path, v.sysctl, v.pid,
            v.rlimits, v.created_at, v.started_at, v.finished_at, v.exit_code, v.status_reason, v.status_message,
            v.cdi_devices, v.user)
NRI_TEST_EQ(LinuxAdjustment, v.devices, v.resources, v.cgroups_path, v.oom_score_adj, v.namespaces, v.sysctl,
            v.io_priority_raw, v.seccomp_policy_raw, v.net_devices_raw, v.scheduler_raw, v.rdt_raw,
            v.memory_policy_raw)
NRI_TEST_EQ(ContainerAdjustment, v.annotations, v.mounts, v.env, v.hooks, v.linux, v.rlimits, v.cdi_devices, v.args)
NRI_TEST_EQ(ContainerUpdate, v.container_id, v.resources, v.ignore_failure)
NRI_TEST_EQ(ContainerEviction, v.container_id, v.reason)
NRI_TEST_EQ(PluginInstance, v.name, v.index)
NRI_TEST_EQ(FieldOwners, v.simple, v.compound)

#undef NRI_TEST_EQ

}  // namespace outpost::nri

namespace outpost::nri_test {

// "0a 01 61" -> the bytes; spaces and newlines are ignored.
inline std::string Hex(const char* s) {
  std::string out;
  int hi = -1;
  for (; *s; ++s) {
    char c = *s;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) continue;
    if (hi < 0) {
      hi = d;
    } else {
      out.push_back(static_cast<char>(hi * 16 + d));
      hi = -1;
    }
  }
  return out;
}

// The bytes as "0a 01 61", for readable failures.
inline std::string ToHex(const std::string& b) {
  std::string out;
  char buf[4];
  for (unsigned char c : b) {
    std::snprintf(buf, sizeof buf, "%02x", c);
    if (!out.empty()) out += ' ';
    out += buf;
  }
  return out;
}

inline nri::Resources FullResources(int seed) {
  nri::Resources r;
  r.memory = nri::Memory{1000 + seed, 900, 2000, 0, 0, 60, true, false};
  r.cpu = nri::Cpu{1024, -1, 100000, 0, 0, "0-3", "0"};
  r.hugepage_limits = {{"2MB", 4u << 20}, {"1GB", 0}};
  r.blockio_class = "gold";
  r.rdt_class = "";
  r.unified = {{"memory.high", "max"}, {"cpu.weight", "100"}};
  r.devices = {{true, "c", 1, std::nullopt, "rwm"}, {false, "", std::nullopt, std::nullopt, ""}};
  r.pids_limit = 0;
  return r;
}

inline nri::Hooks FullHooks() {
  nri::Hooks h;
  h.prestart = {{"/bin/pre", {"pre", "-x"}, {"A=1"}, 5}};
  h.create_runtime = {{"/bin/cr", {}, {}, std::nullopt}};
  h.create_container = {{"/bin/cc", {"cc"}, {}, 0}};
  h.start_container = {{"/bin/sc", {}, {"B=2", ""}, std::nullopt}};
  h.poststart = {{"/bin/ps", {}, {}, -3}};
  h.poststop = {{"/bin/pst", {}, {}, 1}, {"/bin/pst2", {}, {}, std::nullopt}};
  return h;
}

inline nri::PodSandbox FullPod() {
  nri::PodSandbox p;
  p.id = "pod-id";
  p.name = "web";
  p.uid = "0f1e";
  p.namespace_ = "default";
  p.labels = {{"app", "web"}, {"tier", ""}};
  p.annotations = {{"io.kubernetes/x", "y"}};
  p.runtime_handler = "runc";
  p.pod_overhead = FullResources(1);
  p.pod_resources = nri::Resources{};
  p.cgroup_parent = "/kubepods";
  p.cgroups_path = "/kubepods/pod1";
  p.namespaces = {{"network", "/var/run/netns/x"}, {"ipc", ""}};
  p.resources = FullResources(2);
  p.pid = 4242;
  p.ips = {"10.0.0.2", "fd00::2"};
  return p;
}

inline nri::Container FullContainer() {
  nri::Container c;
  c.id = "ctr-id";
  c.pod_sandbox_id = "pod-id";
  c.name = "app";
  c.state = nri::ContainerState::kStopped;
  c.labels = {{"a", "1"}, {"b", "2"}};
  c.annotations = {{"k", "v"}};
  c.args = {"/bin/sh", "-c", ""};
  c.env = {"PATH=/bin", "HOME=/"};
  c.mounts = {{"/data", "bind", "/srv", {"rbind", "ro"}}, {"/tmp", "tmpfs", "", {}}};
  c.hooks = FullHooks();
  c.namespaces = {{"pid", ""}};
  c.devices = {{"/dev/fuse", "c", 10, 229, 0666, 0, 0}, {"/dev/null", "c", 1, 3, std::nullopt, 7, std::nullopt}};
  c.resources = FullResources(3);
  c.oom_score_adj = -998;
  c.cgroups_path = "/kubepods/pod1/ctr";
  c.sysctl = {{"net.ipv4.ip_forward", "1"}};
  c.pid = 77;
  c.rlimits = {{"RLIMIT_NOFILE", 4096, 1024}, {"RLIMIT_CORE", 0, 0}};
  c.created_at = 1700000000000000000;
  c.started_at = 1700000000100000000;
  c.finished_at = -1;
  c.exit_code = -1;
  c.status_reason = "Error";
  c.status_message = "boom";
  c.cdi_devices = {"vendor.com/gpu=0", "vendor.com/gpu=1"};
  c.user = nri::User{1000, 1000, {4, 24, 70000}};
  return c;
}

inline nri::ContainerAdjustment FullAdjustment() {
  nri::ContainerAdjustment a;
  a.annotations = {{"-old", ""}, {"new", "1"}};
  a.mounts = {{"/x", "bind", "/y", {"ro"}}, {"-/z", "", "", {}}};
  a.env = {{"A", "1"}, {"-B", ""}};
  a.hooks = FullHooks();
  nri::LinuxAdjustment l;
  l.devices = {{"/dev/kvm", "c", 10, 232, 0660, std::nullopt, 36}, {"-/dev/old", "", 0, 0, {}, {}, {}}};
  l.resources = FullResources(4);
  l.cgroups_path = "/x";
  l.oom_score_adj = 0;
  l.namespaces = {{"-network", ""}, {"ipc", "/proc/1/ns/ipc"}};
  l.sysctl = {{"kernel.shm_rmid_forced", "1"}};
  l.io_priority_raw = std::string("\x08\x02\x10\x04", 4);
  l.seccomp_policy_raw = std::string();  // present, empty
  l.net_devices_raw = {{"eth1", std::string("\x0a\x04net0", 6)}, {"-eth2", ""}};
  l.scheduler_raw = std::string("\x08\x01\x20\x00\x20\x02", 6);
  l.rdt_raw = std::string("\x20\x01", 2);
  l.memory_policy_raw = std::string("\x08\x02\x12\x03" "0-1", 7);
  a.linux = l;
  a.rlimits = {{"RLIMIT_NPROC", 100, 50}};
  a.cdi_devices = {"vendor.com/dev=a"};
  a.args = {"/bin/true", ""};
  return a;
}

inline nri::ContainerUpdate FullUpdate(const std::string& id) {
  nri::ContainerUpdate u;
  u.container_id = id;
  u.resources = FullResources(5);
  u.ignore_failure = true;
  return u;
}

}  // namespace outpost::nri_test
