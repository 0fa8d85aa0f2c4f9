// The data model (pods, containers, resources, adjustments, updates,
// ownership) to and from nanopb structs; see model.h.
#include <utility>

#include "nriproto/model.h"

namespace outpost::nriproto {

namespace {

pb::CDIDevice* CdiDevices(const std::vector<std::string>& names, Arena& a, pb_size_t* count) {
  pb::CDIDevice* l = a.Array<pb::CDIDevice>(names.size(), count);
  for (pb_size_t i = 0; i < *count; ++i) l[i].name = a.S(names[i]);
  return l;
}

std::vector<std::string> CdiNames(const pb::CDIDevice* l, pb_size_t n) {
  std::vector<std::string> out;
  for (pb_size_t i = 0; i < n; ++i) out.push_back(PbString(l[i].name));
  return out;
}

pb_bytes_array_t* Raw(const std::optional<std::string>& v, Arena& a) { return v ? a.Bytes(*v) : nullptr; }

std::optional<std::string> RawOf(const pb_bytes_array_t* b) {
  if (!b) return std::nullopt;
  return BytesOf(b);
}

bool HasLinux(const nri::PodSandbox& v) {
  return v.pod_overhead || v.pod_resources || !v.cgroup_parent.empty() || !v.cgroups_path.empty() ||
         !v.namespaces.empty() || v.resources;
}

bool HasLinux(const nri::Container& v) {
  return !v.namespaces.empty() || !v.devices.empty() || v.resources || v.oom_score_adj || !v.cgroups_path.empty() ||
         !v.sysctl.empty();
}

bool HasAny(const nri::LinuxAdjustment& v) {
  return !v.devices.empty() || v.resources || !v.cgroups_path.empty() || v.oom_score_adj || !v.namespaces.empty() ||
         !v.sysctl.empty() || v.io_priority_raw || v.seccomp_policy_raw || !v.net_devices_raw.empty() ||
         v.scheduler_raw || v.rdt_raw || v.memory_policy_raw;
}

}  // namespace

// ---- encoding --------------------------------------------------------------

void Fill(const nri::KeyValue& v, Arena& a, pb::KeyValue* m) {
  m->key = a.S(v.key);
  m->value = a.S(v.value);
}

void Fill(const nri::Mount& v, Arena& a, pb::Mount* m) {
  m->destination = a.S(v.destination);
  m->type = a.S(v.type);
  m->source = a.S(v.source);
  m->options = StringList(v.options, a, &m->options_count);
}

void Fill(const nri::Hook& v, Arena& a, pb::Hook* m) {
  m->path = a.S(v.path);
  m->args = StringList(v.args, a, &m->args_count);
  m->env = StringList(v.env, a, &m->env_count);
  m->timeout = Wrap<pb::OptionalInt>(v.timeout, a);
}

void Fill(const nri::Hooks& v, Arena& a, pb::Hooks* m) {
  m->prestart = Array<pb::Hook>(v.prestart, a, &m->prestart_count);
  m->create_runtime = Array<pb::Hook>(v.create_runtime, a, &m->create_runtime_count);
  m->create_container = Array<pb::Hook>(v.create_container, a, &m->create_container_count);
  m->start_container = Array<pb::Hook>(v.start_container, a, &m->start_container_count);
  m->poststart = Array<pb::Hook>(v.poststart, a, &m->poststart_count);
  m->poststop = Array<pb::Hook>(v.poststop, a, &m->poststop_count);
}

void Fill(const nri::Rlimit& v, Arena& a, pb::POSIXRlimit* m) {
  m->type = a.S(v.type);
  m->hard = v.hard;
  m->soft = v.soft;
}

void Fill(const nri::Namespace& v, Arena& a, pb::LinuxNamespace* m) {
  m->type = a.S(v.type);
  m->path = a.S(v.path);
}

void Fill(const nri::Device& v, Arena& a, pb::LinuxDevice* m) {
  m->path = a.S(v.path);
  m->type = a.S(v.type);
  m->major = v.major;
  m->minor = v.minor;
  m->file_mode = Wrap<pb::OptionalFileMode>(v.file_mode, a);
  m->uid = Wrap<pb::OptionalUInt32>(v.uid, a);
  m->gid = Wrap<pb::OptionalUInt32>(v.gid, a);
}

void Fill(const nri::DeviceCgroup& v, Arena& a, pb::LinuxDeviceCgroup* m) {
  m->allow = v.allow;
  m->type = a.S(v.type);
  m->major = Wrap<pb::OptionalInt64>(v.major, a);
  m->minor = Wrap<pb::OptionalInt64>(v.minor, a);
  m->access = a.S(v.access);
}

void Fill(const nri::HugepageLimit& v, Arena& a, pb::HugepageLimit* m) {
  m->page_size = a.S(v.page_size);
  m->limit = v.limit;
}

void Fill(const nri::Memory& v, Arena& a, pb::LinuxMemory* m) {
  m->limit = Wrap<pb::OptionalInt64>(v.limit, a);
  m->reservation = Wrap<pb::OptionalInt64>(v.reservation, a);
  m->swap = Wrap<pb::OptionalInt64>(v.swap, a);
  m->kernel = Wrap<pb::OptionalInt64>(v.kernel, a);
  m->kernel_tcp = Wrap<pb::OptionalInt64>(v.kernel_tcp, a);
  m->swappiness = Wrap<pb::OptionalUInt64>(v.swappiness, a);
  m->disable_oom_killer = Wrap<pb::OptionalBool>(v.disable_oom_killer, a);
  m->use_hierarchy = Wrap<pb::OptionalBool>(v.use_hierarchy, a);
}

void Fill(const nri::Cpu& v, Arena& a, pb::LinuxCPU* m) {
  m->shares = Wrap<pb::OptionalUInt64>(v.shares, a);
  m->quota = Wrap<pb::OptionalInt64>(v.quota, a);
  m->period = Wrap<pb::OptionalUInt64>(v.period, a);
  m->realtime_runtime = Wrap<pb::OptionalInt64>(v.realtime_runtime, a);
  m->realtime_period = Wrap<pb::OptionalUInt64>(v.realtime_period, a);
  m->cpus = a.S(v.cpus);
  m->mems = a.S(v.mems);
}

void Fill(const nri::Resources& v, Arena& a, pb::LinuxResources* m) {
  m->memory = Ptr<pb::LinuxMemory>(v.memory, a);
  m->cpu = Ptr<pb::LinuxCPU>(v.cpu, a);
  m->hugepage_limits = Array<pb::HugepageLimit>(v.hugepage_limits, a, &m->hugepage_limits_count);
  m->blockio_class = WrapString(v.blockio_class, a);
  m->rdt_class = WrapString(v.rdt_class, a);
  m->unified = StringMap(v.unified, a, &m->unified_count);
  m->devices = Array<pb::LinuxDeviceCgroup>(v.devices, a, &m->devices_count);
  if (v.pids_limit) {
    m->pids = a.New<pb::LinuxPids>();
    m->pids->limit = *v.pids_limit;
  }
}

void Fill(const nri::User& v, Arena& a, pb::User* m) {
  m->uid = v.uid;
  m->gid = v.gid;
  m->additional_gids = a.Array<uint32_t>(v.additional_gids.size(), &m->additional_gids_count);
  for (pb_size_t i = 0; i < m->additional_gids_count; ++i) m->additional_gids[i] = v.additional_gids[i];
}

void Fill(const nri::PodSandbox& v, Arena& a, pb::PodSandbox* m) {
  m->id = a.S(v.id);
  m->name = a.S(v.name);
  m->uid = a.S(v.uid);
  m->namespace_ = a.S(v.namespace_);
  m->labels = StringMap(v.labels, a, &m->labels_count);
  m->annotations = StringMap(v.annotations, a, &m->annotations_count);
  m->runtime_handler = a.S(v.runtime_handler);
  if (HasLinux(v)) {
    pb::LinuxPodSandbox* l = m->linux = a.New<pb::LinuxPodSandbox>();
    l->pod_overhead = Ptr<pb::LinuxResources>(v.pod_overhead, a);
    l->pod_resources = Ptr<pb::LinuxResources>(v.pod_resources, a);
    l->cgroup_parent = a.S(v.cgroup_parent);
    l->cgroups_path = a.S(v.cgroups_path);
    l->namespaces = Array<pb::LinuxNamespace>(v.namespaces, a, &l->namespaces_count);
    l->resources = Ptr<pb::LinuxResources>(v.resources, a);
  }
  m->pid = v.pid;
  m->ips = StringList(v.ips, a, &m->ips_count);
}

void Fill(const nri::Container& v, Arena& a, pb::Container* m) {
  m->id = a.S(v.id);
  m->pod_sandbox_id = a.S(v.pod_sandbox_id);
  m->name = a.S(v.name);
  m->state = static_cast<nri_pkg_api_v1alpha1_ContainerState>(v.state);
  m->labels = StringMap(v.labels, a, &m->labels_count);
  m->annotations = StringMap(v.annotations, a, &m->annotations_count);
  m->args = StringList(v.args, a, &m->args_count);
  m->env = StringList(v.env, a, &m->env_count);
  m->mounts = Array<pb::Mount>(v.mounts, a, &m->mounts_count);
  m->hooks = Ptr<pb::Hooks>(v.hooks, a);
  if (HasLinux(v)) {
    pb::LinuxContainer* l = m->linux = a.New<pb::LinuxContainer>();
    l->namespaces = Array<pb::LinuxNamespace>(v.namespaces, a, &l->namespaces_count);
    l->devices = Array<pb::LinuxDevice>(v.devices, a, &l->devices_count);
    l->resources = Ptr<pb::LinuxResources>(v.resources, a);
    l->oom_score_adj = Wrap<pb::OptionalInt>(v.oom_score_adj, a);
    l->cgroups_path = a.S(v.cgroups_path);
    l->sysctl = StringMap(v.sysctl, a, &l->sysctl_count);
  }
  m->pid = v.pid;
  m->rlimits = Array<pb::POSIXRlimit>(v.rlimits, a, &m->rlimits_count);
  m->created_at = v.created_at;
  m->started_at = v.started_at;
  m->finished_at = v.finished_at;
  m->exit_code = v.exit_code;
  m->status_reason = a.S(v.status_reason);
  m->status_message = a.S(v.status_message);
  m->CDI_devices = CdiDevices(v.cdi_devices, a, &m->CDI_devices_count);
  m->user = Ptr<pb::User>(v.user, a);
}

void Fill(const nri::LinuxAdjustment& v, Arena& a, pb::LinuxContainerAdjustment* m) {
  m->devices = Array<pb::LinuxDevice>(v.devices, a, &m->devices_count);
  m->resources = Ptr<pb::LinuxResources>(v.resources, a);
  m->cgroups_path = a.S(v.cgroups_path);
  m->oom_score_adj = Wrap<pb::OptionalInt>(v.oom_score_adj, a);
  m->io_priority = Raw(v.io_priority_raw, a);
  m->seccomp_policy = Raw(v.seccomp_policy_raw, a);
  m->namespaces = Array<pb::LinuxNamespace>(v.namespaces, a, &m->namespaces_count);
  m->sysctl = StringMap(v.sysctl, a, &m->sysctl_count);
  std::map<std::string, std::string> tmp;
  const auto& net_devices = SentKeys(v.net_devices_raw, &tmp);
  m->net_devices = a.Array<pb::NetDeviceEntry>(net_devices.size(), &m->net_devices_count);
  pb_size_t i = 0;
  for (auto it = net_devices.begin(); i < m->net_devices_count; ++it, ++i) {
    m->net_devices[i].key = a.S(it->first);
    m->net_devices[i].value = a.Bytes(it->second);
  }
  m->scheduler = Raw(v.scheduler_raw, a);
  m->rdt = Raw(v.rdt_raw, a);
  m->memory_policy = Raw(v.memory_policy_raw, a);
}

void Fill(const nri::ContainerAdjustment& v, Arena& a, pb::ContainerAdjustment* m) {
  m->annotations = StringMap(v.annotations, a, &m->annotations_count);
  m->mounts = Array<pb::Mount>(v.mounts, a, &m->mounts_count);
  m->env = Array<pb::KeyValue>(v.env, a, &m->env_count);
  m->hooks = Ptr<pb::Hooks>(v.hooks, a);
  if (v.linux && HasAny(*v.linux)) m->linux = Ptr<pb::LinuxContainerAdjustment>(v.linux, a);
  m->rlimits = Array<pb::POSIXRlimit>(v.rlimits, a, &m->rlimits_count);
  m->CDI_devices = CdiDevices(v.cdi_devices, a, &m->CDI_devices_count);
  m->args = StringList(v.args, a, &m->args_count);
}

void Fill(const nri::ContainerUpdate& v, Arena& a, pb::ContainerUpdate* m) {
  m->container_id = a.S(v.container_id);
  if (v.resources) {
    m->linux = a.New<pb::LinuxContainerUpdate>();
    m->linux->resources = Ptr<pb::LinuxResources>(v.resources, a);
  }
  m->ignore_failure = v.ignore_failure;
}

void Fill(const nri::ContainerEviction& v, Arena& a, pb::ContainerEviction* m) {
  m->container_id = a.S(v.container_id);
  m->reason = a.S(v.reason);
}

void Fill(const nri::PluginInstance& v, Arena& a, pb::PluginInstance* m) {
  m->name = a.S(v.name);
  m->index = a.S(v.index);
}

void Fill(const nri::OwningPlugins& owning, Arena& a, pb::OwningPlugins* m) {
  nri::OwningPlugins tmp;
  const nri::OwningPlugins& v = SentKeys(owning, &tmp);
  m->owners = a.Array<pb::FieldOwnersEntry>(v.size(), &m->owners_count);
  pb_size_t i = 0;
  for (auto it = v.begin(); i < m->owners_count; ++it, ++i) {
    pb::FieldOwnersEntry& e = m->owners[i];
    e.key = a.S(it->first);
    pb::FieldOwners* f = e.value = a.New<pb::FieldOwners>();
    const nri::FieldOwners& owners = it->second;
    f->simple = a.Array<pb::SimpleOwnerEntry>(owners.simple.size(), &f->simple_count);
    pb_size_t j = 0;
    for (auto s = owners.simple.begin(); j < f->simple_count; ++s, ++j) {
      f->simple[j].key = s->first;
      f->simple[j].value = a.S(s->second);
    }
    f->compound = a.Array<pb::CompoundOwnerEntry>(owners.compound.size(), &f->compound_count);
    j = 0;
    for (auto c = owners.compound.begin(); j < f->compound_count; ++c, ++j) {
      f->compound[j].key = c->first;
      pb::CompoundFieldOwners* o = f->compound[j].value = a.New<pb::CompoundFieldOwners>();
      o->owners = StringMap(c->second, a, &o->owners_count);
    }
  }
}

// ---- decoding --------------------------------------------------------------

void Read(const pb::KeyValue& m, nri::KeyValue* v) {
  v->key = PbString(m.key);
  v->value = PbString(m.value);
}

void Read(const pb::Mount& m, nri::Mount* v) {
  v->destination = PbString(m.destination);
  v->type = PbString(m.type);
  v->source = PbString(m.source);
  v->options = ListOf(m.options, m.options_count);
}

void Read(const pb::Hook& m, nri::Hook* v) {
  v->path = PbString(m.path);
  v->args = ListOf(m.args, m.args_count);
  v->env = ListOf(m.env, m.env_count);
  v->timeout = Unwrap<int64_t>(m.timeout);
}

void Read(const pb::Hooks& m, nri::Hooks* v) {
  v->prestart = VecOf<nri::Hook>(m.prestart, m.prestart_count);
  v->create_runtime = VecOf<nri::Hook>(m.create_runtime, m.create_runtime_count);
  v->create_container = VecOf<nri::Hook>(m.create_container, m.create_container_count);
  v->start_container = VecOf<nri::Hook>(m.start_container, m.start_container_count);
  v->poststart = VecOf<nri::Hook>(m.poststart, m.poststart_count);
  v->poststop = VecOf<nri::Hook>(m.poststop, m.poststop_count);
}

void Read(const pb::POSIXRlimit& m, nri::Rlimit* v) {
  v->type = PbString(m.type);
  v->hard = m.hard;
  v->soft = m.soft;
}

void Read(const pb::LinuxNamespace& m, nri::Namespace* v) {
  v->type = PbString(m.type);
  v->path = PbString(m.path);
}

void Read(const pb::LinuxDevice& m, nri::Device* v) {
  v->path = PbString(m.path);
  v->type = PbString(m.type);
  v->major = m.major;
  v->minor = m.minor;
  v->file_mode = Unwrap<uint32_t>(m.file_mode);
  v->uid = Unwrap<uint32_t>(m.uid);
  v->gid = Unwrap<uint32_t>(m.gid);
}

void Read(const pb::LinuxDeviceCgroup& m, nri::DeviceCgroup* v) {
  v->allow = m.allow;
  v->type = PbString(m.type);
  v->major = Unwrap<int64_t>(m.major);
  v->minor = Unwrap<int64_t>(m.minor);
  v->access = PbString(m.access);
}

void Read(const pb::HugepageLimit& m, nri::HugepageLimit* v) {
  v->page_size = PbString(m.page_size);
  v->limit = m.limit;
}

void Read(const pb::LinuxMemory& m, nri::Memory* v) {
  v->limit = Unwrap<int64_t>(m.limit);
  v->reservation = Unwrap<int64_t>(m.reservation);
  v->swap = Unwrap<int64_t>(m.swap);
  v->kernel = Unwrap<int64_t>(m.kernel);
  v->kernel_tcp = Unwrap<int64_t>(m.kernel_tcp);
  v->swappiness = Unwrap<uint64_t>(m.swappiness);
  v->disable_oom_killer = Unwrap<bool>(m.disable_oom_killer);
  v->use_hierarchy = Unwrap<bool>(m.use_hierarchy);
}

void Read(const pb::LinuxCPU& m, nri::Cpu* v) {
  v->shares = Unwrap<uint64_t>(m.shares);
  v->quota = Unwrap<int64_t>(m.quota);
  v->period = Unwrap<uint64_t>(m.period);
  v->realtime_runtime = Unwrap<int64_t>(m.realtime_runtime);
  v->realtime_period = Unwrap<uint64_t>(m.realtime_period);
  v->cpus = PbString(m.cpus);
  v->mems = PbString(m.mems);
}

void Read(const pb::LinuxResources& m, nri::Resources* v) {
  v->memory = OptOf<nri::Memory>(m.memory);
  v->cpu = OptOf<nri::Cpu>(m.cpu);
  v->hugepage_limits = VecOf<nri::HugepageLimit>(m.hugepage_limits, m.hugepage_limits_count);
  v->blockio_class = UnwrapString(m.blockio_class);
  v->rdt_class = UnwrapString(m.rdt_class);
  v->unified = MapOf(m.unified, m.unified_count);
  v->devices = VecOf<nri::DeviceCgroup>(m.devices, m.devices_count);
  v->pids_limit = m.pids ? std::optional<int64_t>(m.pids->limit) : std::nullopt;
}

void Read(const pb::User& m, nri::User* v) {
  v->uid = m.uid;
  v->gid = m.gid;
  v->additional_gids.assign(m.additional_gids, m.additional_gids + m.additional_gids_count);
}

void Read(const pb::PodSandbox& m, nri::PodSandbox* v) {
  v->id = PbString(m.id);
  v->name = PbString(m.name);
  v->uid = PbString(m.uid);
  v->namespace_ = PbString(m.namespace_);
  v->labels = MapOf(m.labels, m.labels_count);
  v->annotations = MapOf(m.annotations, m.annotations_count);
  v->runtime_handler = PbString(m.runtime_handler);
  if (const pb::LinuxPodSandbox* l = m.linux) {
    v->pod_overhead = OptOf<nri::Resources>(l->pod_overhead);
    v->pod_resources = OptOf<nri::Resources>(l->pod_resources);
    v->cgroup_parent = PbString(l->cgroup_parent);
    v->cgroups_path = PbString(l->cgroups_path);
    v->namespaces = VecOf<nri::Namespace>(l->namespaces, l->namespaces_count);
    v->resources = OptOf<nri::Resources>(l->resources);
  }
  v->pid = m.pid;
  v->ips = ListOf(m.ips, m.ips_count);
}

void Read(const pb::Container& m, nri::Container* v) {
  v->id = PbString(m.id);
  v->pod_sandbox_id = PbString(m.pod_sandbox_id);
  v->name = PbString(m.name);
  v->state = static_cast<nri::ContainerState>(m.state);
  v->labels = MapOf(m.labels, m.labels_count);
  v->annotations = MapOf(m.annotations, m.annotations_count);
  v->args = ListOf(m.args, m.args_count);
  v->env = ListOf(m.env, m.env_count);
  v->mounts = VecOf<nri::Mount>(m.mounts, m.mounts_count);
  v->hooks = OptOf<nri::Hooks>(m.hooks);
  if (const pb::LinuxContainer* l = m.linux) {
    v->namespaces = VecOf<nri::Namespace>(l->namespaces, l->namespaces_count);
    v->devices = VecOf<nri::Device>(l->devices, l->devices_count);
    v->resources = OptOf<nri::Resources>(l->resources);
    v->oom_score_adj = Unwrap<int64_t>(l->oom_score_adj);
    v->cgroups_path = PbString(l->cgroups_path);
    v->sysctl = MapOf(l->sysctl, l->sysctl_count);
  }
  v->pid = m.pid;
  v->rlimits = VecOf<nri::Rlimit>(m.rlimits, m.rlimits_count);
  v->created_at = m.created_at;
  v->started_at = m.started_at;
  v->finished_at = m.finished_at;
  v->exit_code = m.exit_code;
  v->status_reason = PbString(m.status_reason);
  v->status_message = PbString(m.status_message);
  v->cdi_devices = CdiNames(m.CDI_devices, m.CDI_devices_count);
  v->user = OptOf<nri::User>(m.user);
}

void Read(const pb::LinuxContainerAdjustment& m, nri::LinuxAdjustment* v) {
  v->devices = VecOf<nri::Device>(m.devices, m.devices_count);
  v->resources = OptOf<nri::Resources>(m.resources);
  v->cgroups_path = PbString(m.cgroups_path);
  v->oom_score_adj = Unwrap<int64_t>(m.oom_score_adj);
  v->namespaces = VecOf<nri::Namespace>(m.namespaces, m.namespaces_count);
  v->sysctl = MapOf(m.sysctl, m.sysctl_count);
  v->io_priority_raw = RawOf(m.io_priority);
  v->seccomp_policy_raw = RawOf(m.seccomp_policy);
  v->net_devices_raw.clear();
  for (pb_size_t i = 0; i < m.net_devices_count; ++i) {
    v->net_devices_raw[PbString(m.net_devices[i].key)] = BytesOf(m.net_devices[i].value);
  }
  v->scheduler_raw = RawOf(m.scheduler);
  v->rdt_raw = RawOf(m.rdt);
  v->memory_policy_raw = RawOf(m.memory_policy);
}

void Read(const pb::ContainerAdjustment& m, nri::ContainerAdjustment* v) {
  v->annotations = MapOf(m.annotations, m.annotations_count);
  v->mounts = VecOf<nri::Mount>(m.mounts, m.mounts_count);
  v->env = VecOf<nri::KeyValue>(m.env, m.env_count);
  v->hooks = OptOf<nri::Hooks>(m.hooks);
  v->linux = OptOf<nri::LinuxAdjustment>(m.linux);
  v->rlimits = VecOf<nri::Rlimit>(m.rlimits, m.rlimits_count);
  v->cdi_devices = CdiNames(m.CDI_devices, m.CDI_devices_count);
  v->args = ListOf(m.args, m.args_count);
}

void Read(const pb::ContainerUpdate& m, nri::ContainerUpdate* v) {
  v->container_id = PbString(m.container_id);
  v->resources = m.linux ? OptOf<nri::Resources>(m.linux->resources) : std::nullopt;
  v->ignore_failure = m.ignore_failure;
}

void Read(const pb::ContainerEviction& m, nri::ContainerEviction* v) {
  v->container_id = PbString(m.container_id);
  v->reason = PbString(m.reason);
}

void Read(const pb::PluginInstance& m, nri::PluginInstance* v) {
  v->name = PbString(m.name);
  v->index = PbString(m.index);
}

void Read(const pb::OwningPlugins& m, nri::OwningPlugins* v) {
  v->clear();
  for (pb_size_t i = 0; i < m.owners_count; ++i) {
    nri::FieldOwners owners;
    if (const pb::FieldOwners* f = m.owners[i].value) {
      for (pb_size_t j = 0; j < f->simple_count; ++j) owners.simple[f->simple[j].key] = PbString(f->simple[j].value);
      for (pb_size_t j = 0; j < f->compound_count; ++j) {
        const pb::CompoundFieldOwners* o = f->compound[j].value;
        owners.compound[f->compound[j].key] = o ? MapOf(o->owners, o->owners_count)
                                                : std::map<std::string, std::string>();
      }
    }
    (*v)[PbString(m.owners[i].key)] = std::move(owners);
  }
}

}  // namespace outpost::nriproto
