#include "nri/convert.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"

namespace outpost::nri {

namespace {

constexpr hooks::Stage kStages[] = {hooks::Stage::kPrestart,       hooks::Stage::kCreateRuntime,
                                    hooks::Stage::kCreateContainer, hooks::Stage::kStartContainer,
                                    hooks::Stage::kPoststart,      hooks::Stage::kPoststop};

std::vector<Hook>* StageList(Hooks* h, hooks::Stage s) {
  switch (s) {
    case hooks::Stage::kPrestart: return &h->prestart;
    case hooks::Stage::kCreateRuntime: return &h->create_runtime;
    case hooks::Stage::kCreateContainer: return &h->create_container;
    case hooks::Stage::kStartContainer: return &h->start_container;
    case hooks::Stage::kPoststart: return &h->poststart;
    case hooks::Stage::kPoststop: return &h->poststop;
  }
  return &h->prestart;
}

// The plugin that last claimed field (and key), for errors.
std::string Owner(const std::vector<Claim>& claims, Field f, const std::string& key) {
  for (auto it = claims.rbegin(); it != claims.rend(); ++it) {
    if (it->field == f && (key.empty() || it->key == key)) return it->plugin;
  }
  for (auto it = claims.rbegin(); it != claims.rend(); ++it) {
    if (it->field == f) return it->plugin;
  }
  return "?";
}

Error Refuse(const std::vector<Claim>& claims, Field f, const std::string& key, const std::string& why) {
  return Error(Code::kFailedPrecondition,
               Format("NRI plugin %s adjusted %s%s%s: %s", Owner(claims, f, key).c_str(), FieldName(f),
                      key.empty() ? "" : " ", key.c_str(), why.c_str()));
}

bool Removal(const std::string& key, std::string* name) {
  if (key.empty() || key[0] != '-') return false;
  *name = key.substr(1);
  return true;
}

}  // namespace

uint64_t SharesToWeight(uint64_t shares) {
  if (shares == 0) return 0;
  if (shares < 2) shares = 2;
  if (shares > 262144) shares = 262144;
  return 1 + ((shares - 2) * 9999) / 262142;
}

// The smallest shares that convert back to weight (rounded up), so that a
// weight survives the trip through NRI unchanged.
uint64_t WeightToShares(uint64_t weight) {
  if (weight == 0) return 0;
  return 2 + ((weight - 1) * 262142 + 9998) / 9999;
}

Resources ToNri(const cgroup::Resources& r) {
  Resources n;
  if (r.memory_max >= 0 || r.memory_low >= 0 || r.memory_swap_max >= 0) {
    Memory& m = n.memory.emplace();
    if (r.memory_max >= 0) m.limit = r.memory_max;
    if (r.memory_low >= 0) m.reservation = r.memory_low;
    if (r.memory_swap_max >= 0 && r.memory_max >= 0) m.swap = r.memory_max + r.memory_swap_max;
  }
  if (r.cpu_weight || r.cpu_max_quota_us >= 0 || !r.cpuset_cpus.empty() || !r.cpuset_mems.empty()) {
    Cpu& c = n.cpu.emplace();
    if (r.cpu_weight) c.shares = WeightToShares(r.cpu_weight);
    if (r.cpu_max_quota_us >= 0) {
      c.quota = r.cpu_max_quota_us;
      c.period = r.cpu_max_period_us;
    }
    c.cpus = r.cpuset_cpus;
    c.mems = r.cpuset_mems;
  }
  if (r.pids_max >= 0) n.pids_limit = r.pids_max;
  for (const auto& [size, max] : r.hugetlb_max) n.hugepage_limits.push_back({size, max});
  n.unified = r.unified;
  return n;
}

Status ApplyResources(const Resources& r, cgroup::Resources* out) {
  std::vector<std::string> refused;
  if (r.memory) {
    const Memory& m = *r.memory;
    if (m.limit) out->memory_max = *m.limit > 0 ? *m.limit : -1;
    if (m.reservation) out->memory_low = *m.reservation > 0 ? *m.reservation : -1;
    if (m.swap) {
      // OCI's swap is memory + swap; cgroup v2's swap.max is the swap alone.
      int64_t limit = m.limit ? *m.limit : out->memory_max;
      if (*m.swap < 0) {
        out->memory_swap_max = -1;
      } else if (limit > 0 && *m.swap >= limit) {
        out->memory_swap_max = *m.swap - limit;
      } else {
        refused.push_back(Format("memory.swap %lld needs a memory limit no larger than it",
                                 static_cast<long long>(*m.swap)));
      }
    }
    if (m.kernel) refused.push_back("memory.kernel has no cgroup v2 equivalent");
    if (m.kernel_tcp) refused.push_back("memory.kernel_tcp has no cgroup v2 equivalent");
    if (m.swappiness) refused.push_back("memory.swappiness has no cgroup v2 equivalent");
    if (m.disable_oom_killer) refused.push_back("memory.disable_oom_killer has no cgroup v2 equivalent");
    if (m.use_hierarchy) refused.push_back("memory.use_hierarchy has no cgroup v2 equivalent");
  }
  if (r.cpu) {
    const Cpu& c = *r.cpu;
    if (c.shares) out->cpu_weight = SharesToWeight(*c.shares);
    if (c.quota) out->cpu_max_quota_us = *c.quota > 0 ? *c.quota : -1;
    if (c.period && *c.period > 0) out->cpu_max_period_us = *c.period;
    if (c.realtime_runtime || c.realtime_period) refused.push_back("cpu.realtime_* has no cgroup v2 equivalent");
    if (!c.cpus.empty()) out->cpuset_cpus = c.cpus;
    if (!c.mems.empty()) out->cpuset_mems = c.mems;
  }
  if (r.pids_limit) out->pids_max = *r.pids_limit > 0 ? *r.pids_limit : -1;
  for (const HugepageLimit& h : r.hugepage_limits) out->hugetlb_max[h.page_size] = h.limit;
  for (const auto& [k, v] : r.unified) out->unified[k] = v;
  if (r.blockio_class) refused.push_back("blockio_class is not supported");
  if (r.rdt_class) refused.push_back("rdt_class is not supported");
  if (!r.devices.empty()) refused.push_back("device cgroup rules are not supported (cgroup v2 has no devices file)");
  if (refused.empty()) return OkStatus();
  std::string all;
  for (const auto& s : refused) all += (all.empty() ? "" : "; ") + s;
  return Error(Code::kFailedPrecondition, all);
}

Rlimit ToNri(const proc::Rlimit& r) {
  std::string type = r.name;
  for (char& ch : type) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (type.compare(0, 7, "RLIMIT_") != 0) type = "RLIMIT_" + type;
  return Rlimit{type, r.hard, r.soft};
}

Hooks ToNri(const hooks::HookSet& set) {
  Hooks h;
  for (hooks::Stage s : kStages) {
    for (const hooks::Hook& hk : set.at(s)) {
      Hook n;
      n.path = hk.path;
      n.args = hk.args;
      n.env = hk.env;
      if (hk.timeout_seconds > 0) n.timeout = hk.timeout_seconds;
      StageList(&h, s)->push_back(std::move(n));
    }
  }
  return h;
}

Container ToContainer(const driver::TaskConfig& c, ContainerState state) {
  Container n;
  n.id = c.id;
  n.pod_sandbox_id = c.job;
  n.name = c.name;
  n.state = state;
  n.annotations = c.Annotations();
  n.args.push_back(c.command);
  n.args.insert(n.args.end(), c.args.begin(), c.args.end());
  for (const auto& [k, v] : c.env) n.env.push_back(k + "=" + v);
  for (const driver::Mount& m : c.mounts) {
    Mount nm;
    nm.destination = m.destination;
    nm.source = m.source;
    nm.type = "bind";
    nm.options = {"rbind", m.readonly ? "ro" : "rw"};
    n.mounts.push_back(std::move(nm));
  }
  for (const driver::Device& d : c.devices) n.devices.push_back({d.path, d.type, d.major, d.minor, d.file_mode, d.uid, d.gid});
  if (c.oci && !c.Hooks().empty()) n.hooks = ToNri(c.Hooks());
  if (!c.Netns().empty()) n.namespaces.push_back({"network", c.Netns()});
  if (!c.Hostname().empty()) n.namespaces.push_back({"uts", ""});
  if (c.resources->Any()) n.resources = ToNri(c.resources);
  if (c.oom_score_adj) n.oom_score_adj = *c.oom_score_adj;
  n.cgroups_path = c.cgroup;
  for (const proc::Rlimit& r : c.rlimits) n.rlimits.push_back(ToNri(r));
  if (c.identity.switch_user) {
    User& u = n.user.emplace();
    u.uid = c.identity.uid;
    u.gid = c.identity.gid;
    for (gid_t g : c.identity.groups) {
      if (g != c.identity.gid) u.additional_gids.push_back(g);
    }
  }
  return n;
}

Status ApplyAdjustment(const ContainerAdjustment& adj, const std::vector<Claim>& claims,
                       const driver::Capabilities& caps, driver::TaskConfig* c) {
  const std::string drv = "the " + c->driver + " driver";
  std::string name;
  // Refusals first: nothing is applied from an adjustment that fails.
  if (adj.linux) {
    const LinuxAdjustment& l = *adj.linux;
    for (const Device& d : l.devices) {
      if (!Removal(d.path, &name) && !caps.devices) {
        return Refuse(claims, Field::kDevices, d.path, drv + " cannot apply devices");
      }
    }
    if (!l.cgroups_path.empty()) {
      return Refuse(claims, Field::kCgroupsPath, "", "outpost owns the task's cgroup (" + l.cgroups_path + ")");
    }
    if (l.oom_score_adj && !caps.oom_score_adj) return Refuse(claims, Field::kOomScoreAdj, "", drv + " cannot apply it");
    for (const Namespace& ns : l.namespaces) {
      return Refuse(claims, Field::kNamespace, ns.type, "namespace adjustments are not supported");
    }
    for (const auto& [k, v] : l.sysctl) return Refuse(claims, Field::kSysctl, k, "sysctl adjustments are not supported");
    if (l.io_priority_raw) return Refuse(claims, Field::kIoPriority, "", "not supported");
    if (l.seccomp_policy_raw) return Refuse(claims, Field::kSeccompPolicy, "", "not supported");
    for (const auto& [k, v] : l.net_devices_raw) return Refuse(claims, Field::kLinuxNetDevices, k, "not supported");
    if (l.scheduler_raw) return Refuse(claims, Field::kLinuxSched, "", "not supported");
    if (l.rdt_raw) return Refuse(claims, Field::kRdtClosID, "", "not supported");
    if (l.memory_policy_raw) return Refuse(claims, Field::kMemoryPolicy, "", "not supported");
  }
  for (const std::string& d : adj.cdi_devices) {
    return Refuse(claims, Field::kCdiDevices, d, "CDI devices are not supported");
  }
  if (adj.hooks) {
    Hooks h = *adj.hooks;
    for (hooks::Stage s : kStages) {
      for (const Hook& n : *StageList(&h, s)) {
        if (n.path.empty() || n.path[0] != '/') {
          return Refuse(claims, Field::kOciHooks, "", "hook path \"" + n.path + "\" is not absolute");
        }
      }
    }
  }
  std::vector<driver::Device> devices = c->devices;
  if (adj.linux) {
    for (const Device& d : adj.linux->devices) {
      bool removal = Removal(d.path, &name);
      std::string path = removal ? name : d.path;
      devices.erase(std::remove_if(devices.begin(), devices.end(),
                                   [&](const driver::Device& x) { return x.path == path; }),
                    devices.end());
      if (removal) continue;
      if (d.path.empty() || d.path[0] != '/') {
        return Refuse(claims, Field::kDevices, d.path, "device path must be absolute");
      }
      if (d.type != "c" && d.type != "b" && d.type != "u" && d.type != "p") {
        return Refuse(claims, Field::kDevices, d.path, "device type \"" + d.type + "\" is not c, b, u or p");
      }
      devices.push_back({d.path, d.type, d.major, d.minor, d.file_mode, d.uid, d.gid, {}, {}});
    }
  }
  std::vector<driver::Mount> mounts = c->mounts;
  for (const Mount& m : adj.mounts) {
    if (Removal(m.destination, &name)) {
      mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                                  [&](const driver::Mount& x) { return x.destination == name; }),
                   mounts.end());
      continue;
    }
    if (!caps.mounts) return Refuse(claims, Field::kMounts, m.destination, drv + " cannot apply mounts");
    bool bind = m.type == "bind" || m.type.empty();
    bool ro = false;
    for (const std::string& o : m.options) {
      bind = bind || o == "bind" || o == "rbind";
      ro = ro || o == "ro";
    }
    if (!bind) {
      return Refuse(claims, Field::kMounts, m.destination,
                    drv + " applies bind mounts only (type \"" + m.type + "\")");
    }
    if (m.source.empty() || m.source[0] != '/' || m.destination.empty() || m.destination[0] != '/') {
      return Refuse(claims, Field::kMounts, m.destination, "source and destination must be absolute paths");
    }
    mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                                [&](const driver::Mount& x) { return x.destination == m.destination; }),
                 mounts.end());
    mounts.push_back({m.source, m.destination, ro});
  }
  cgroup::Resources res = c->resources;
  if (adj.linux && adj.linux->resources) {
    Status st = ApplyResources(*adj.linux->resources, &res);
    if (!st.ok()) {
      // Named after the plugin that set a resource field (the message
      // names the field itself).
      std::string who = "?";
      for (const Claim& c2 : claims) {
        int f = static_cast<int>(c2.field);
        if (f >= static_cast<int>(Field::kMemLimit) && f <= static_cast<int>(Field::kCgroupsUnified)) who = c2.plugin;
      }
      return Error(Code::kFailedPrecondition,
                   Format("NRI plugin %s adjusted resources: %s", who.c_str(), st.error().message().c_str()));
    }
  }
  std::vector<proc::Rlimit> rlimits = c->rlimits;
  for (const Rlimit& r : adj.rlimits) {
    std::string n = r.type;
    for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (n.compare(0, 7, "rlimit_") == 0) n = n.substr(7);
    auto known = proc::ParseRlimitName(n);
    if (!known.ok()) return Refuse(claims, Field::kRlimits, r.type, known.error().message());
    if (r.soft > r.hard) return Refuse(claims, Field::kRlimits, r.type, "soft limit above the hard limit");
    rlimits.erase(std::remove_if(rlimits.begin(), rlimits.end(), [&](const proc::Rlimit& x) { return x.name == n; }),
                  rlimits.end());
    rlimits.push_back({n, r.soft, r.hard});
  }

  // Everything can be applied: apply.
  c->mounts = std::move(mounts);
  c->devices = std::move(devices);
  c->resources = std::move(res);
  c->rlimits = std::move(rlimits);
  if (adj.linux && adj.linux->oom_score_adj) c->oom_score_adj = static_cast<int>(*adj.linux->oom_score_adj);
  for (const KeyValue& kv : adj.env) {
    if (Removal(kv.key, &name)) {
      c->env.erase(name);
    } else {
      c->env[kv.key] = kv.value;
    }
  }
  if (!adj.args.empty() && !adj.args[0].empty()) {
    c->command = adj.args[0];
    c->args.assign(adj.args.begin() + 1, adj.args.end());
  }
  bool hooks_added = adj.hooks && !adj.hooks->empty();
  if (!adj.annotations.empty() || hooks_added) {
    auto oci = c->oci ? std::make_shared<driver::TaskHooks>(*c->oci) : std::make_shared<driver::TaskHooks>();
    for (const auto& [k, v] : adj.annotations) {
      if (Removal(k, &name)) {
        oci->annotations.erase(name);
      } else {
        oci->annotations[k] = v;
      }
    }
    if (hooks_added) {
      Hooks h = *adj.hooks;
      for (hooks::Stage s : kStages) {
        for (const Hook& n : *StageList(&h, s)) {
          hooks::Hook hk;
          hk.path = n.path;
          hk.args = n.args;
          hk.env = n.env;
          hk.timeout_seconds = n.timeout.value_or(0);
          hk.source = "nri plugin " + Owner(claims, Field::kOciHooks, "");
          oci->hooks.at(s).push_back(std::move(hk));
        }
      }
    }
    c->oci = std::move(oci);
  }
  return OkStatus();
}

}  // namespace outpost::nri
