#include "hooks/bundle.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <set>

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::hooks {

namespace {

using picojson::array;
using picojson::object;
using picojson::value;

// Integers as integers (PICOJSON_USE_INT64): exact beyond 2^53, and read
// back by json::ObjectReader::Int, which takes no doubles.
value Num(int64_t n) { return value(n); }
// picojson has no uint64: above INT64_MAX (RLIM_INFINITY) the largest it
// can write, which no limit reaches either.
value NumU(uint64_t n) { return value(static_cast<int64_t>(std::min<uint64_t>(n, INT64_MAX))); }

value Strings(const std::vector<std::string>& v) {
  array a;
  for (const auto& s : v) a.emplace_back(s);
  return value(std::move(a));
}

// "nofile", "RLIMIT_NOFILE", "Nofile" -> "RLIMIT_NOFILE" (the runtime-spec's form).
std::string RlimitType(const std::string& name) {
  std::string up;
  for (char c : name) up += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return StartsWith(up, "RLIMIT_") ? up : "RLIMIT_" + up;
}

value Rlimits(const std::vector<proc::Rlimit>& limits) {
  array a;
  bool nofile = false;
  auto add = [&a](const std::string& type, uint64_t soft, uint64_t hard) {
    object o;
    o["type"] = value(type);
    o["soft"] = NumU(soft);
    o["hard"] = NumU(hard);
    a.emplace_back(std::move(o));
  };
  for (const proc::Rlimit& l : limits) {
    std::string type = RlimitType(l.name);
    nofile = nofile || type == "RLIMIT_NOFILE";
    add(type, l.soft, l.hard);
  }
  // The task gets the agent's start-up RLIMIT_NOFILE unless it sets one
  // (proc::TaskRlimits): say so, as a runtime would.
  rlimit lim;
  if (!nofile && proc::TaskDefaultNofile(&lim)) add("RLIMIT_NOFILE", lim.rlim_cur, lim.rlim_max);
  return value(std::move(a));
}

value Process(const BundleInput& in) {
  object user;
  user["uid"] = Num(static_cast<int64_t>(in.uid));
  user["gid"] = Num(static_cast<int64_t>(in.gid));
  if (!in.additional_gids.empty()) {
    array g;
    for (gid_t id : in.additional_gids) g.push_back(Num(static_cast<int64_t>(id)));
    user["additionalGids"] = value(std::move(g));
  }
  object p;
  p["terminal"] = value(false);
  p["user"] = value(std::move(user));
  p["args"] = Strings(in.args);
  p["env"] = Strings(in.env);
  p["cwd"] = value(in.cwd);
  p["rlimits"] = Rlimits(in.rlimits);
  p["noNewPrivileges"] = value(false);
  if (in.oom_score_adj) p["oomScoreAdj"] = Num(*in.oom_score_adj);
  return value(std::move(p));
}

// The exec driver mounts nothing: these are the host's own file systems,
// which the task sees as they are. Listed so that hooks that look for them
// find them, not because anything created them.
value Mounts(const BundleInput& in) {
  array a;
  for (const char* m : {"proc", "sysfs", "devtmpfs"}) {
    object o;
    o["destination"] = value(std::string(m) == "proc" ? "/proc" : std::string(m) == "sysfs" ? "/sys" : "/dev");
    o["type"] = value(m);
    o["source"] = value(m);
    a.emplace_back(std::move(o));
  }
  for (const Mount& m : in.bind_mounts) {
    object o;
    o["destination"] = value(m.destination);
    o["type"] = value("bind");
    o["source"] = value(m.source);
    o["options"] = Strings({"rbind", "rprivate", m.readonly ? "ro" : "rw"});
    a.emplace_back(std::move(o));
  }
  return value(std::move(a));
}

value Devices(const std::vector<Device>& devices) {
  array a;
  for (const Device& d : devices) {
    object o;
    o["path"] = value(d.path);
    o["type"] = value(d.type);
    o["major"] = Num(d.major);
    o["minor"] = Num(d.minor);
    if (d.file_mode) o["fileMode"] = Num(*d.file_mode);
    if (d.uid) o["uid"] = Num(*d.uid);
    if (d.gid) o["gid"] = Num(*d.gid);
    a.emplace_back(std::move(o));
  }
  return value(std::move(a));
}

// linux.resources.devices: each device of the task allowed, as NRI's
// runtime side adds it with the device ("rwm").
value DeviceRules(const std::vector<Device>& devices) {
  array a;
  for (const Device& d : devices) {
    object o;
    o["allow"] = value(true);
    o["type"] = value(d.type == "u" ? "c" : d.type);
    o["major"] = Num(d.major);
    o["minor"] = Num(d.minor);
    o["access"] = value(d.access.empty() ? std::string("rwm") : d.access);
    a.emplace_back(std::move(o));
  }
  return value(std::move(a));
}

// cgroup v2 weights (1..10000) to the v1 scales the OCI fields use, as runc
// and crun map them the other way (so a runtime reading ours gets back
// about the weight we have): cpu.shares 2..262144, blkio.weight 10..1000.
uint64_t CpuShares(uint64_t weight) { return 2 + ((weight - 1) * 262142) / 9999; }
uint64_t BlkioWeight(uint64_t weight) { return 10 + ((weight - 1) * 990) / 9999; }

value Throttle(const std::vector<cgroup::IoDeviceLimit>& limits, uint64_t cgroup::IoDeviceLimit::*rate) {
  array a;
  for (const auto& l : limits) {
    if (l.*rate == 0) continue;
    object o;
    o["major"] = Num(static_cast<int64_t>(l.major));
    o["minor"] = Num(static_cast<int64_t>(l.minor));
    o["rate"] = NumU(l.*rate);
    a.emplace_back(std::move(o));
  }
  return value(std::move(a));
}

// linux.resources with only what is set. The OCI (v1-shaped) fields where
// there is one, and `unified` with the cgroup v2 files as the task's cgroup
// has them: for what has no OCI field (memory.high, memory.swap.max alone)
// and, exactly, for the weights whose OCI fields are on another scale.
value Resources(const cgroup::Resources& r) {
  object res, unified;
  object mem;
  if (r.memory_max >= 0) mem["limit"] = Num(static_cast<int64_t>(r.memory_max));
  if (r.memory_low >= 0) mem["reservation"] = Num(static_cast<int64_t>(r.memory_low));
  if (r.memory_max >= 0 && r.memory_swap_max >= 0) {
    // OCI swap is memory+swap (v1 memsw); v2 has the swap alone.
    mem["swap"] = Num(static_cast<int64_t>(r.memory_max + r.memory_swap_max));
  } else if (r.memory_swap_max >= 0) {
    unified["memory.swap.max"] = value(std::to_string(r.memory_swap_max));
  }
  if (r.memory_high >= 0) unified["memory.high"] = value(std::to_string(r.memory_high));
  if (!mem.empty()) res["memory"] = value(std::move(mem));

  object cpu;
  if (r.cpu_weight) {
    cpu["shares"] = Num(static_cast<int64_t>(CpuShares(r.cpu_weight)));
    unified["cpu.weight"] = value(std::to_string(r.cpu_weight));
  }
  if (r.cpu_max_quota_us >= 0) {
    cpu["quota"] = Num(static_cast<int64_t>(r.cpu_max_quota_us));
    cpu["period"] = Num(static_cast<int64_t>(r.cpu_max_period_us));
  }
  if (!r.cpuset_cpus.empty()) cpu["cpus"] = value(r.cpuset_cpus);
  if (!r.cpuset_mems.empty()) cpu["mems"] = value(r.cpuset_mems);
  if (!cpu.empty()) res["cpu"] = value(std::move(cpu));

  if (r.pids_max >= 0) {
    object pids;
    pids["limit"] = Num(static_cast<int64_t>(r.pids_max));
    res["pids"] = value(std::move(pids));
  }

  object io;
  if (r.io_weight) {
    io["weight"] = Num(static_cast<int64_t>(BlkioWeight(r.io_weight)));
    unified["io.weight"] = value(std::to_string(r.io_weight));
  }
  const std::pair<const char*, uint64_t cgroup::IoDeviceLimit::*> throttles[] = {
      {"throttleReadBpsDevice", &cgroup::IoDeviceLimit::rbps},
      {"throttleWriteBpsDevice", &cgroup::IoDeviceLimit::wbps},
      {"throttleReadIOPSDevice", &cgroup::IoDeviceLimit::riops},
      {"throttleWriteIOPSDevice", &cgroup::IoDeviceLimit::wiops},
  };
  for (const auto& [key, rate] : throttles) {
    value t = Throttle(r.io_max, rate);
    if (!t.get<array>().empty()) io[key] = std::move(t);
  }
  if (!io.empty()) res["blockIO"] = value(std::move(io));
  if (!unified.empty()) res["unified"] = value(std::move(unified));
  return value(std::move(res));
}

value Namespaces(const BundleInput& in) {
  array a;
  std::set<std::string> seen;
  auto add = [&](const std::string& type) {
    if (!seen.insert(type).second) return;
    object o;
    o["type"] = value(type);
    auto p = in.namespace_paths.find(type);
    if (p != in.namespace_paths.end() && !p->second.empty()) o["path"] = value(p->second);
    a.emplace_back(std::move(o));
  };
  for (const std::string& type : in.namespaces) add(type);
  for (const auto& [type, path] : in.namespace_paths) add(type);  // joined ones not listed above
  return value(std::move(a));
}

std::string NodeHostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// The runtime-spec's required fields, as a runtime would refuse them.
Status Validate(const BundleInput& in) {
  std::vector<std::string> problems;
  if (in.args.empty()) problems.push_back("process.args: must not be empty");
  if (in.cwd.empty() || in.cwd[0] != '/') problems.push_back("process.cwd: must be absolute, got \"" + in.cwd + "\"");
  if (!in.cgroup_path.empty() && in.cgroup_path[0] != '/') {
    problems.push_back("linux.cgroupsPath: must be absolute, got \"" + in.cgroup_path + "\"");
  }
  if (problems.empty()) return OkStatus();
  return Error(Code::kInvalidArgument, "config.json of task " + in.id + ": " + JoinStrings(problems, "; "));
}

}  // namespace

picojson::value BundleConfig(const BundleInput& in) {
  object doc;
  doc["ociVersion"] = value(kOciVersion);
  doc["process"] = Process(in);
  object root;
  root["path"] = value("/");
  root["readonly"] = value(false);
  doc["root"] = value(std::move(root));
  std::string hostname = in.hostname.empty() ? NodeHostname() : in.hostname;
  doc["hostname"] = value(hostname.empty() ? in.id : hostname);
  doc["mounts"] = Mounts(in);
  if (!in.hooks.empty()) doc["hooks"] = HooksToJson(in.hooks);
  if (!in.annotations.empty()) {
    object a;
    for (const auto& [k, v] : in.annotations) a[k] = value(v);
    doc["annotations"] = value(std::move(a));
  }
  object lx;
  if (!in.cgroup_path.empty()) lx["cgroupsPath"] = value(in.cgroup_path);
  if (in.resources.Any() || !in.devices.empty()) {
    value res = Resources(in.resources);
    if (!in.devices.empty()) res.get<object>()["devices"] = DeviceRules(in.devices);
    lx["resources"] = std::move(res);
  }
  if (!in.devices.empty()) lx["devices"] = Devices(in.devices);
  lx["namespaces"] = Namespaces(in);
  doc["linux"] = value(std::move(lx));
  return value(std::move(doc));
}

Result<std::string> BundleText(const BundleInput& in, bool indent) {
  OUTPOST_RETURN_IF_ERROR(Validate(in));
  return BundleConfig(in).serialize(indent);
}

Status WriteBundle(const std::string& dir, const BundleInput& in) {
  OUTPOST_RETURN_IF_ERROR(Validate(in));
  Status st = sys::MkdirAll(dir, 0755);
  if (!st.ok()) return st.error().Wrap("bundle of task " + in.id);
  // 0600: process.env may carry secrets; hooks run as root.
  st = sys::WriteFileAtomic(dir + "/config.json", BundleConfig(in).serialize(true), 0600,
                            sys::Durability::kProcessCrash);
  if (!st.ok()) return st.error().Wrap("bundle of task " + in.id);
  return OkStatus();
}

}  // namespace outpost::hooks
