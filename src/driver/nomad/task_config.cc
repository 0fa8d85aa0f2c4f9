#include "driver/nomad/task_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "nomad_driver.pb.h"

namespace outpost::driver::nomad {

namespace {

using NTaskConfig = hashicorp_nomad_plugins_drivers_proto_TaskConfig;
using NEnv = hashicorp_nomad_plugins_drivers_proto_TaskConfig_EnvEntry;
using NMount = hashicorp_nomad_plugins_drivers_proto_Mount;
using NDevice = hashicorp_nomad_plugins_drivers_proto_Device;
using NPort = hashicorp_nomad_plugins_drivers_proto_PortMapping;
using NHandle = hashicorp_nomad_plugins_drivers_proto_TaskHandle;

// FNV-1a, 64 bits: enough to tell jobs apart in an id.
uint64_t Fnv(std::string_view s, uint64_t h) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

// One directory of the layout, with Nomad's mode (not narrowed by the
// umask: its world-writable dirs must be that) and, for a task that runs as
// another user, that user as owner; only what differs is changed. The
// task's own dirs sit in a dir its user may write, so the user can put a
// symlink where one was: it is never followed (the mode and owner are set
// through the opened dir, O_NOFOLLOW), or a root agent would chmod and
// chown whatever it points at.
Status Dir(const std::string& path, mode_t mode, const Identity* owner) {
  if (::mkdir(path.c_str(), mode) != 0) {
    if (errno == ENOENT) {
      OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(path, mode));  // its parents first (the alloc root)
    } else if (errno != EEXIST) {
      return PathError("mkdir", path);
    }
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR || errno == ELOOP) {
      return Error(Code::kFailedPrecondition,
                   "'" + path + "' is not a directory (a file or a symlink is in its place; a symlink there is not followed)");
    }
    return PathError("open", path);
  }
  UniqueFd dir(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return PathError("stat", path);
  if ((st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) return PathError("chmod", path);
  const bool chown_wanted = owner != nullptr && owner->switch_user;
  if (chown_wanted && (st.st_uid != owner->uid || st.st_gid != owner->gid) &&
      ::fchown(fd, owner->uid, owner->gid) != 0 && ::geteuid() == 0) {
    return PathError("chown", path);
  }
  return OkStatus();
}

}  // namespace

std::string AllocId(const std::string& job) {
  uint64_t a = Fnv(job, 14695981039346656037ULL);
  uint64_t b = Fnv(job, a ^ 0x9e3779b97f4a7c15ULL);
  std::string hex = Format("%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" + hex.substr(16, 4) + "-" +
         hex.substr(20, 12);
}

AllocLayout Layout(const std::string& root, const std::string& job, const std::string& task) {
  AllocLayout l;
  l.alloc_dir = root + "/" + AllocId(job);
  l.shared_dir = l.alloc_dir + "/alloc";
  l.task_dir = l.alloc_dir + "/" + task;
  l.local_dir = l.task_dir + "/local";
  l.secrets_dir = l.task_dir + "/secrets";
  l.tmp_dir = l.task_dir + "/tmp";
  return l;
}

Status RemoveAllocDirs(const AllocLayout& l) {
  OUTPOST_RETURN_IF_ERROR(sys::RemoveTree(l.task_dir));
  auto names = sys::ListDir(l.alloc_dir);
  if (!names.ok()) return names.error().sys_errno() == ENOENT ? OkStatus() : names.error();
  for (const std::string& n : *names) {
    if (n != "alloc") return OkStatus();  // another task's dir: the allocation is still in use
  }
  return sys::RemoveTree(l.alloc_dir);
}

Status MakeAllocDirs(const AllocLayout& l, const Identity& who) {
  OUTPOST_RETURN_IF_ERROR(Dir(l.alloc_dir, 0755, nullptr));
  OUTPOST_RETURN_IF_ERROR(Dir(l.shared_dir, 0755, nullptr));
  for (const char* sub : {"/data", "/logs", "/tmp"}) OUTPOST_RETURN_IF_ERROR(Dir(l.shared_dir + sub, 0777, nullptr));
  OUTPOST_RETURN_IF_ERROR(Dir(l.task_dir, 0777, &who));
  OUTPOST_RETURN_IF_ERROR(Dir(l.local_dir, 0777, &who));
  // Nomad mounts a 1 MiB tmpfs on secrets/ and private/; here they are
  // directories only the task's user can read.
  OUTPOST_RETURN_IF_ERROR(Dir(l.secrets_dir, 0700, &who));
  OUTPOST_RETURN_IF_ERROR(Dir(l.task_dir + "/private", 0700, &who));
  return Dir(l.tmp_dir, 01777, &who);
}

std::map<std::string, std::string> TaskEnv(const TaskConfig& c, const AllocLayout& l, FsIsolation iso,
                                           const NodeInfo& node) {
  std::map<std::string, std::string> env;
  const bool host_paths = iso == FsIsolation::kNone || iso == FsIsolation::kUnveil;
  env["NOMAD_ALLOC_DIR"] = host_paths ? l.shared_dir : "/alloc";
  env["NOMAD_TASK_DIR"] = host_paths ? l.local_dir : "/local";
  env["NOMAD_SECRETS_DIR"] = host_paths ? l.secrets_dir : "/secrets";
  std::string alloc = AllocId(c.job.empty() ? c.name : c.job);
  env["NOMAD_ALLOC_ID"] = alloc;
  env["NOMAD_SHORT_ALLOC_ID"] = alloc.substr(0, 8);
  env["NOMAD_ALLOC_NAME"] = (c.job.empty() ? c.name : c.job) + "." + (c.job.empty() ? c.name : c.job) + "[0]";
  env["NOMAD_ALLOC_INDEX"] = "0";
  env["NOMAD_TASK_NAME"] = c.name;
  env["NOMAD_GROUP_NAME"] = c.job.empty() ? c.name : c.job;
  env["NOMAD_JOB_ID"] = c.job.empty() ? c.name : c.job;
  env["NOMAD_JOB_NAME"] = c.job.empty() ? c.name : c.job;
  env["NOMAD_NAMESPACE"] = "default";
  env["NOMAD_REGION"] = "global";
  env["NOMAD_DC"] = "dc1";
  env["NOMAD_PARENT_CGROUP"] = c.cgroup.empty() ? "" : sys::Dirname(c.cgroup);
  // Limits as Nomad's (MiB, MHz-like shares); 0 where outpost sets none.
  const cgroup::Resources& r = c.resources.get();
  env["NOMAD_MEMORY_LIMIT"] = std::to_string(r.memory_max > 0 ? r.memory_max >> 20 : 0);
  env["NOMAD_MEMORY_MAX_LIMIT"] = env["NOMAD_MEMORY_LIMIT"];
  env["NOMAD_CPU_LIMIT"] = std::to_string(r.cpu_weight > 0 ? r.cpu_weight * 1024 / 100 : 1024);
  env["NOMAD_CPU_CORES"] = r.cpuset_cpus;
  if (c.net && c.net->spec) {
    for (const net::PortMapping& p : c.net->spec->ports) {
      std::string to = std::to_string(p.to ? p.to : p.host_port);
      std::string host = std::to_string(p.host_port);
      env["NOMAD_PORT_" + p.label] = to;
      env["NOMAD_HOST_PORT_" + p.label] = host;
      env["NOMAD_ALLOC_PORT_" + p.label] = to;
    }
  }
  (void)node;
  // What outpost finds a task's processes by, as the exec driver sets it.
  env["OUTPOST_JOB"] = c.job;
  env["OUTPOST_TASK"] = c.name;
  env["OUTPOST_TASK_DIR"] = c.task_dir;
  for (const auto& [k, v] : c.env) env[k] = v;
  env["OUTPOST_TASK_ID"] = c.id;
  return env;
}

std::string NomadTaskId(const TaskConfig& c) {
  static uint64_t counter = 0;
  uint64_t salt = Fnv(c.id, static_cast<uint64_t>(WallNanos()) ^ (++counter << 32));
  return AllocId(c.job.empty() ? c.name : c.job) + "/" + c.name + "/" +
         Format("%08x", static_cast<unsigned>(salt ^ (salt >> 32)));
}

Result<std::string> EncodeStartTask(const TaskConfig& c, const std::string& nomad_id, const AllocLayout& l,
                                    const std::map<std::string, std::string>& env, const std::string& msgpack_config,
                                    const NodeInfo& node) {
  hashicorp_nomad_plugins_drivers_proto_StartTaskRequest req = hashicorp_nomad_plugins_drivers_proto_StartTaskRequest_init_zero;
  req.has_task = true;
  NTaskConfig& t = req.task;
  const std::string group = c.job.empty() ? c.name : c.job;
  const std::string alloc = AllocId(group);
  const std::string ns = "default";
  std::string user = c.identity.switch_user ? (c.identity.name.empty() ? std::to_string(c.identity.uid) : c.identity.name)
                                            : c.user;
  t.id = PbStr(nomad_id);
  t.name = PbStr(c.name);
  std::string_view config_view(msgpack_config);
  t.msgpack_driver_config = PbBytesOut(&config_view);
  std::vector<NEnv> envs;
  envs.reserve(env.size());
  for (const auto& [k, v] : env) envs.push_back(NEnv{PbStr(k), PbStr(v)});
  t.env_count = static_cast<pb_size_t>(envs.size());
  t.env = envs.data();
  // Resources: outpost's limits as Nomad's (its cgroup is outpost's).
  const cgroup::Resources& r = c.resources.get();
  t.has_resources = true;
  auto& res = t.resources;
  res.has_allocated_resources = true;
  res.allocated_resources.has_cpu = true;
  res.allocated_resources.cpu.cpu_shares = r.cpu_weight > 0 ? static_cast<int64_t>(r.cpu_weight * 1024 / 100) : 1024;
  res.allocated_resources.has_memory = true;
  res.allocated_resources.memory.memory_mb = r.memory_max > 0 ? r.memory_max >> 20 : 0;
  res.allocated_resources.memory.memory_max_mb = res.allocated_resources.memory.memory_mb;
  res.has_linux_resources = true;
  res.linux_resources.cpu_shares = res.allocated_resources.cpu.cpu_shares;
  res.linux_resources.memory_limit_bytes = r.memory_max > 0 ? r.memory_max : 0;
  if (r.cpu_max_quota_us >= 0) {
    res.linux_resources.cpu_quota = r.cpu_max_quota_us;
    res.linux_resources.cpu_period = static_cast<int64_t>(r.cpu_max_period_us);
  }
  res.linux_resources.cpuset_cpus = PbStr(r.cpuset_cpus);
  res.linux_resources.cpuset_cgroup = PbStr(c.cgroup);
  if (c.oom_score_adj) res.linux_resources.oom_score_adj = *c.oom_score_adj;
  std::vector<NPort> ports;
  if (c.net && c.net->spec) {
    for (const net::PortMapping& p : c.net->spec->ports) {
      ports.push_back(NPort{PbStr(p.label), static_cast<int32_t>(p.host_port),
                            static_cast<int32_t>(p.to ? p.to : p.host_port), PbStr(p.host_ip)});
    }
  }
  res.ports_count = static_cast<pb_size_t>(ports.size());
  res.ports = ports.data();
  // Mounts and devices (NRI adjustments, device plugins).
  std::vector<NMount> mounts;
  for (const Mount& m : c.mounts) {
    NMount nm = hashicorp_nomad_plugins_drivers_proto_Mount_init_zero;
    nm.task_path = PbStr(m.destination);
    nm.host_path = PbStr(m.source);
    nm.readonly = m.readonly;
    mounts.push_back(nm);
  }
  t.mounts_count = static_cast<pb_size_t>(mounts.size());
  t.mounts = mounts.data();
  std::vector<NDevice> devices;
  static const std::string kRwm = "rwm";
  for (const Device& d : c.devices) {
    devices.push_back(NDevice{PbStr(d.path), PbStr(d.host_path.empty() ? d.path : d.host_path),
                              PbStr(d.access.empty() ? kRwm : d.access)});
  }
  t.devices_count = static_cast<pb_size_t>(devices.size());
  t.devices = devices.data();
  t.user = PbStr(user);
  t.alloc_dir = PbStr(l.alloc_dir);
  t.stdout_path = PbStr(c.stdout_path);
  t.stderr_path = PbStr(c.stderr_path);
  t.task_group_name = PbStr(group);
  t.job_name = PbStr(group);
  t.job_id = PbStr(group);
  t.alloc_id = PbStr(alloc);
  t.namespace_ = PbStr(ns);
  t.node_name = PbStr(node.name);
  t.node_id = PbStr(node.id);
  const std::string& netns = c.Netns();
  if (!netns.empty()) {
    t.has_network_isolation_spec = true;
    t.network_isolation_spec.mode = hashicorp_nomad_plugins_drivers_proto_NetworkIsolationSpec_NetworkIsolationMode_GROUP;
    t.network_isolation_spec.path = PbStr(netns);
    if (!c.Hostname().empty()) {
      t.network_isolation_spec.has_hostsConfig = true;
      t.network_isolation_spec.hostsConfig.hostname = PbStr(c.Hostname());
    }
  }
  return PbEncode(hashicorp_nomad_plugins_drivers_proto_StartTaskRequest_fields, &req, "StartTaskRequest");
}

namespace {

// A TaskHandle decoded with its two byte fields kept, and encoded again
// from them.
struct HandleBytes {
  std::string driver_state;
  std::string driver_config;
  std::string_view state_view, config_view;
  void In(NHandle* h) {
    h->driver_state = PbBytesIn(&driver_state);
    h->config.msgpack_driver_config = PbBytesIn(&driver_config);
  }
  void Out(NHandle* h) {
    state_view = driver_state;
    config_view = driver_config;
    h->driver_state = PbBytesOut(&state_view);
    h->config.msgpack_driver_config = PbBytesOut(&config_view);
  }
};

}  // namespace

Result<StartAnswer> DecodeStartTask(std::string_view response) {
  hashicorp_nomad_plugins_drivers_proto_StartTaskResponse m = hashicorp_nomad_plugins_drivers_proto_StartTaskResponse_init_zero;
  HandleBytes hb;
  hb.In(&m.handle);
  OUTPOST_RETURN_IF_ERROR(PbDecode(response, hashicorp_nomad_plugins_drivers_proto_StartTaskResponse_fields, &m,
                                   "StartTaskResponse"));
  StartAnswer a;
  a.result = static_cast<StartAnswer::Result>(m.result);
  a.error = PbString(m.driver_error_msg);
  if (m.has_handle) {
    a.handle_version = m.handle.version;
    hb.Out(&m.handle);
    auto bytes = PbEncode(hashicorp_nomad_plugins_drivers_proto_TaskHandle_fields, &m.handle, "TaskHandle");
    if (!bytes.ok()) {
      pb_release(hashicorp_nomad_plugins_drivers_proto_StartTaskResponse_fields, &m);
      return bytes.error();
    }
    a.handle = std::move(*bytes);
  }
  if (m.has_network_override) {
    for (pb_size_t i = 0; i < m.network_override.port_map_count; ++i) {
      a.network.ports[PbString(m.network_override.port_map[i].key)] = m.network_override.port_map[i].value;
    }
    a.network.address = PbString(m.network_override.addr);
  }
  pb_release(hashicorp_nomad_plugins_drivers_proto_StartTaskResponse_fields, &m);
  return a;
}

Result<std::string> EncodeRecoverTask(const std::string& handle, std::string* nomad_id) {
  hashicorp_nomad_plugins_drivers_proto_RecoverTaskRequest req = hashicorp_nomad_plugins_drivers_proto_RecoverTaskRequest_init_zero;
  HandleBytes hb;
  hb.In(&req.handle);
  OUTPOST_RETURN_IF_ERROR(PbDecode(handle, hashicorp_nomad_plugins_drivers_proto_TaskHandle_fields, &req.handle,
                                   "stored TaskHandle"));
  req.has_handle = true;
  *nomad_id = PbString(req.handle.config.id);
  hb.Out(&req.handle);
  auto out = PbEncode(hashicorp_nomad_plugins_drivers_proto_RecoverTaskRequest_fields, &req, "RecoverTaskRequest");
  pb_release(hashicorp_nomad_plugins_drivers_proto_TaskHandle_fields, &req.handle);
  return out;
}

}  // namespace outpost::driver::nomad
