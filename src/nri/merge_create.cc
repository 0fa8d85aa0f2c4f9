// CreateContainer: merging plugins' adjustments into one, mutating the
// request between plugins (see merge.h for the upstream quirks kept).
#include <set>
#include <utility>

#include "base/strings.h"
#include "nri/merge.h"

namespace outpost::nri {

namespace {

bool Marked(const std::string& key, std::string* stripped) {
  if (key.empty() || key[0] != '-') {
    *stripped = key;
    return false;
  }
  *stripped = key.substr(1);
  return true;
}

std::string EnvName(const std::string& kv) {
  auto eq = kv.find('=');
  return eq == std::string::npos ? kv : kv.substr(0, eq);
}

}  // namespace

CreateResult::CreateResult(const PodSandbox& pod, const Container& container)
    : pod_(pod), pristine_(container), current_(container), updates_("", Resources{}) {}

LinuxAdjustment& CreateResult::linux() {
  if (!adjust_.linux) adjust_.linux.emplace();
  return *adjust_.linux;
}

Resources& CreateResult::adjust_resources() {
  LinuxAdjustment& l = linux();
  if (!l.resources) l.resources.emplace();
  return *l.resources;
}

Resources& CreateResult::request_resources() {
  if (!current_.resources) current_.resources.emplace();
  return *current_.resources;
}

Status CreateResult::Apply(const std::string& plugin, const CreateContainerResponse& resp) {
  if (resp.adjust) OUTPOST_RETURN_IF_ERROR(Adjust(plugin, *resp.adjust));
  for (const ContainerUpdate& u : resp.update) {
    if (u.container_id == current_.id) {
      return Error(Code::kUnknown,
                   "plugin " + GoQuote(plugin) + " asked update of " + GoQuote(u.container_id) + " during creation");
    }
    OUTPOST_RETURN_IF_ERROR(updates_.Apply(&book_, plugin, u));
  }
  return OkStatus();
}

Status CreateResult::Adjust(const std::string& plugin, const ContainerAdjustment& a) {
  OUTPOST_RETURN_IF_ERROR(
      AdjustKeyed(plugin, Field::kAnnotations, a.annotations, &current_.annotations, &adjust_.annotations));
  OUTPOST_RETURN_IF_ERROR(AdjustMounts(plugin, a.mounts));
  OUTPOST_RETURN_IF_ERROR(AdjustEnv(plugin, a.env));
  OUTPOST_RETURN_IF_ERROR(AdjustArgs(plugin, a.args));
  if (a.hooks) AdjustHooks(plugin, *a.hooks);
  if (a.linux) {
    const LinuxAdjustment& l = *a.linux;
    const std::string& id = current_.id;
    OUTPOST_RETURN_IF_ERROR(AdjustDevices(plugin, l.devices));
    if (l.resources) OUTPOST_RETURN_IF_ERROR(AdjustResources(plugin, *l.resources));
    if (!l.cgroups_path.empty()) {
      OUTPOST_RETURN_IF_ERROR(book_.ClaimSimple(id, Field::kCgroupsPath, plugin));
      current_.cgroups_path = l.cgroups_path;
      linux().cgroups_path = l.cgroups_path;
    }
    if (l.oom_score_adj) {
      OUTPOST_RETURN_IF_ERROR(book_.ClaimSimple(id, Field::kOomScoreAdj, plugin));
      current_.oom_score_adj = l.oom_score_adj;
      linux().oom_score_adj = l.oom_score_adj;
    }
    OUTPOST_RETURN_IF_ERROR(
        AdjustRaw(plugin, Field::kIoPriority, l.io_priority_raw, &LinuxAdjustment::io_priority_raw));
    OUTPOST_RETURN_IF_ERROR(
        AdjustRaw(plugin, Field::kSeccompPolicy, l.seccomp_policy_raw, &LinuxAdjustment::seccomp_policy_raw));
    OUTPOST_RETURN_IF_ERROR(AdjustNamespaces(plugin, l.namespaces));
    if (!l.sysctl.empty()) {
      OUTPOST_RETURN_IF_ERROR(AdjustKeyed(plugin, Field::kSysctl, l.sysctl, &current_.sysctl, &linux().sysctl));
    }
    if (!l.net_devices_raw.empty()) {
      OUTPOST_RETURN_IF_ERROR(
          AdjustKeyed(plugin, Field::kLinuxNetDevices, l.net_devices_raw, nullptr, &linux().net_devices_raw));
    }
    OUTPOST_RETURN_IF_ERROR(AdjustRaw(plugin, Field::kLinuxSched, l.scheduler_raw, &LinuxAdjustment::scheduler_raw));
    if (l.rdt_raw) OUTPOST_RETURN_IF_ERROR(AdjustRdt(plugin, *l.rdt_raw));
    OUTPOST_RETURN_IF_ERROR(
        AdjustRaw(plugin, Field::kMemoryPolicy, l.memory_policy_raw, &LinuxAdjustment::memory_policy_raw));
  }
  OUTPOST_RETURN_IF_ERROR(AdjustRlimits(plugin, a.rlimits));
  OUTPOST_RETURN_IF_ERROR(AdjustCdiDevices(plugin, a.cdi_devices));
  return OkStatus();
}


Status CreateResult::AdjustMounts(const std::string& plugin, const std::vector<Mount>& in) {
  if (in.empty()) return OkStatus();
  std::vector<const Mount*> add;
  std::vector<const Mount*> del_marks;  // pure removals forwarded, input order
  std::set<std::string> del, mod;
  std::string key;
  for (const Mount& m : in) {
    if (Marked(m.destination, &key)) {
      if (del.insert(key).second) del_marks.push_back(&m);
    } else {
      add.push_back(&m);
      mod.insert(key);
    }
  }
  std::vector<Mount> kept;
  for (Mount& m : adjust_.mounts) {
    if (del.count(m.destination) != 0) {
      book_.ClearCompound(current_.id, Field::kMounts, m.destination, plugin);
      continue;
    }
    kept.push_back(std::move(m));
  }
  adjust_.mounts = std::move(kept);
  kept.clear();
  for (Mount& m : current_.mounts) {
    if (del.count(m.destination) != 0 || mod.count(m.destination) != 0) continue;
    kept.push_back(std::move(m));
  }
  current_.mounts = std::move(kept);
  for (const Mount* m : add) {
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, Field::kMounts, m->destination, plugin));
    adjust_.mounts.push_back(*m);
  }
  for (const Mount* m : del_marks) {
    if (mod.count(m->destination.substr(1)) == 0) adjust_.mounts.push_back(*m);
  }
  for (const Mount* m : add) current_.mounts.push_back(*m);
  return OkStatus();
}

Status CreateResult::AdjustEnv(const std::string& plugin, const std::vector<KeyValue>& in) {
  if (in.empty()) return OkStatus();
  std::vector<const KeyValue*> add;
  std::set<std::string> del, mod;
  std::string key;
  for (const KeyValue& e : in) {
    if (Marked(e.key, &key)) {
      del.insert(key);
    } else {
      add.push_back(&e);
      mod.insert(key);
    }
  }
  std::vector<KeyValue> kept;
  for (KeyValue& e : adjust_.env) {
    if (del.count(e.key) != 0) {
      book_.ClearCompound(current_.id, Field::kEnv, e.key, plugin);
      continue;
    }
    kept.push_back(std::move(e));
  }
  adjust_.env = std::move(kept);
  std::vector<std::string> env;
  for (std::string& e : current_.env) {
    std::string name = EnvName(e);
    if (del.count(name) != 0 || mod.count(name) != 0) continue;
    env.push_back(std::move(e));
  }
  current_.env = std::move(env);
  for (const KeyValue* e : add) {
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, Field::kEnv, e->key, plugin));
    adjust_.env.push_back(*e);
  }
  for (const KeyValue* e : add) current_.env.push_back(e->key + "=" + e->value);
  return OkStatus();
}

Status CreateResult::AdjustArgs(const std::string& plugin, const std::vector<std::string>& in) {
  if (in.empty()) return OkStatus();
  auto first = in.begin();
  if (in[0].empty()) {
    book_.ClearSimple(current_.id, Field::kArgs, plugin);
    ++first;
  }
  OUTPOST_RETURN_IF_ERROR(book_.ClaimSimple(current_.id, Field::kArgs, plugin));
  adjust_.args.assign(first, in.end());
  current_.args = adjust_.args;
  return OkStatus();
}

void CreateResult::AdjustHooks(const std::string& plugin, const Hooks& in) {
  const bool had_adjust = adjust_.hooks.has_value();
  const bool had_request = current_.hooks.has_value();
  if (!had_adjust) adjust_.hooks.emplace();
  if (!had_request) current_.hooks.emplace();
  bool any = false;
  auto append = [&any](const std::vector<Hook>& src, std::vector<Hook>* a, std::vector<Hook>* r) {
    if (src.empty()) return;
    a->insert(a->end(), src.begin(), src.end());
    r->insert(r->end(), src.begin(), src.end());
    any = true;
  };
  Hooks& a = *adjust_.hooks;
  Hooks& r = *current_.hooks;
  append(in.prestart, &a.prestart, &r.prestart);
  append(in.poststart, &a.poststart, &r.poststart);
  append(in.poststop, &a.poststop, &r.poststop);
  append(in.create_runtime, &a.create_runtime, &r.create_runtime);
  append(in.create_container, &a.create_container, &r.create_container);
  append(in.start_container, &a.start_container, &r.start_container);
  if (any) book_.AccumulateHooks(current_.id, plugin);
  // Leave no empty Hooks behind that were not there before.
  if (!had_adjust && a.empty()) adjust_.hooks.reset();
  if (!had_request && r.empty()) current_.hooks.reset();
}

Status CreateResult::AdjustDevices(const std::string& plugin, const std::vector<Device>& in) {
  if (in.empty()) return OkStatus();
  std::vector<const Device*> add;
  std::set<std::string> del, mod;
  std::string key;
  for (const Device& d : in) {
    if (Marked(d.path, &key)) {
      del.insert(key);
    } else {
      add.push_back(&d);
      mod.insert(key);
    }
  }
  if (adjust_.linux) {
    std::vector<Device> kept;
    for (Device& d : adjust_.linux->devices) {
      if (del.count(d.path) != 0) {
        book_.ClearCompound(current_.id, Field::kDevices, d.path, plugin);
        continue;
      }
      kept.push_back(std::move(d));
    }
    adjust_.linux->devices = std::move(kept);
  }
  std::vector<Device> kept;
  for (Device& d : current_.devices) {
    if (del.count(d.path) != 0 || mod.count(d.path) != 0) continue;
    kept.push_back(std::move(d));
  }
  current_.devices = std::move(kept);
  for (const Device* d : add) {
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, Field::kDevices, d->path, plugin));
    linux().devices.push_back(*d);
  }
  for (const Device* d : add) current_.devices.push_back(*d);
  return OkStatus();
}

Status CreateResult::AdjustResources(const std::string& plugin, const Resources& in) {
  return MergeResourcesInto(&book_, current_.id, plugin, in, &request_resources(), &adjust_resources());
}

Status CreateResult::AdjustNamespaces(const std::string& plugin, const std::vector<Namespace>& in) {
  std::string key;
  for (const Namespace& n : in) {
    bool removed = Marked(n.type, &key);
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, Field::kNamespace, key, plugin));
    bool found = false;
    for (auto it = current_.namespaces.begin(); it != current_.namespaces.end(); ++it) {
      if (it->type != key) continue;
      if (removed) {
        current_.namespaces.erase(it);
      } else {
        *it = n;
      }
      found = true;
      break;
    }
    if (!found && !removed) current_.namespaces.push_back(n);
    linux().namespaces.push_back(n);
  }
  return OkStatus();
}



// Annotations, sysctl and net devices: string maps with "-key" removal
// markers and one owner per key. request: the request's map (null for net
// devices: the request has none); out: the adjustment's.
Status CreateResult::AdjustKeyed(const std::string& plugin, Field f, const std::map<std::string, std::string>& in,
                                 std::map<std::string, std::string>* request,
                                 std::map<std::string, std::string>* out) {
  std::set<std::string> del;
  std::string key;
  for (const auto& [k, v] : in) {
    if (Marked(k, &key)) del.insert(key);
  }
  for (const auto& [k, v] : in) {
    if (Marked(k, &key)) continue;
    if (del.count(k) != 0) {
      book_.ClearCompound(current_.id, f, k, plugin);
      if (request) request->erase(k);
      (*out)["-" + k] = "";
    }
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, f, k, plugin));
    if (request) (*request)[k] = v;
    (*out)[k] = v;
    del.erase(k);
  }
  for (const std::string& k : del) (*out)["-" + k] = "";
  return OkStatus();
}

Status CreateResult::AdjustRaw(const std::string& plugin, Field f, const std::optional<std::string>& in,
                               std::optional<std::string> LinuxAdjustment::*out) {
  if (!in) return OkStatus();
  OUTPOST_RETURN_IF_ERROR(book_.ClaimSimple(current_.id, f, plugin));
  linux().*out = in;
  return OkStatus();
}

Status CreateResult::AdjustRlimits(const std::string& plugin, const std::vector<Rlimit>& in) {
  for (const Rlimit& l : in) {
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, Field::kRlimits, l.type, plugin));
    current_.rlimits.push_back(l);
    adjust_.rlimits.push_back(l);
  }
  return OkStatus();
}

Status CreateResult::AdjustCdiDevices(const std::string& plugin, const std::vector<std::string>& in) {
  for (const std::string& name : in) {
    OUTPOST_RETURN_IF_ERROR(book_.ClaimCompound(current_.id, Field::kCdiDevices, name, plugin));
    adjust_.cdi_devices.push_back(name);
  }
  return OkStatus();
}

}  // namespace outpost::nri
