#include "devices/manager.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"

namespace outpost::devices {

namespace {

bool Has(const std::vector<std::string>& sorted, const std::string& s) {
  return std::binary_search(sorted.begin(), sorted.end(), s);
}

bool ByName(const ResourceState& r, const std::string& name) { return r.name < name; }

Error Unavailable(std::string msg) { return Error(Code::kUnavailable, std::move(msg)); }

}  // namespace

std::vector<int64_t> NumaNodes(const std::string& list) {
  std::vector<int64_t> out;
  if (list.empty()) return out;
  for (const std::string& item : Split(list, ',')) {
    std::vector<std::string> ends = Split(item, '-');
    auto lo = ParseInt(ends[0], 0, 65535);
    auto hi = ends.size() == 2 ? ParseInt(ends[1], 0, 65535) : lo;
    if (ends.size() > 2 || !lo.ok() || !hi.ok() || *hi < *lo) return {};
    for (int64_t n = *lo; n <= *hi; ++n) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Manager::Manager(Loop* loop, CheckpointFile* checkpoint, int64_t grace_nanos)
    : loop_(loop), checkpoint_(checkpoint), grace_nanos_(grace_nanos) {}

Manager::~Manager() {
  for (const ResourceState& r : resources_) {
    if (r.expiry) loop_->CancelTimer(r.expiry);
  }
}

ResourceState* Manager::FindMutable(const std::string& resource) {
  auto it = std::lower_bound(resources_.begin(), resources_.end(), resource, ByName);
  return it != resources_.end() && it->name == resource ? &*it : nullptr;
}

const ResourceState* Manager::Find(const std::string& resource) const {
  return const_cast<Manager*>(this)->FindMutable(resource);
}

std::vector<Allocation>::iterator Manager::Lower(const std::string& task, const std::string& resource) {
  return std::lower_bound(allocations_.begin(), allocations_.end(), std::make_pair(&task, &resource),
                          [](const Allocation& a, const std::pair<const std::string*, const std::string*>& k) {
                            return a.task != *k.first ? a.task < *k.first : a.resource < *k.second;
                          });
}

const Allocation* Manager::Held(const std::string& task, const std::string& resource) const {
  auto it = const_cast<Manager*>(this)->Lower(task, resource);
  return it != allocations_.end() && it->task == task && it->resource == resource ? &*it : nullptr;
}

void Manager::Emit(DeviceEvent::Kind kind, const std::string& resource, const std::string& device, bool healthy) {
  if (on_event_) on_event_(DeviceEvent{kind, resource, device, healthy});
}

void Manager::Persist() {
  if (!checkpoint_) return;
  log::WarnIfError(checkpoint_->Save(Snapshot()), "device checkpoint not written",
                   {{"file", checkpoint_->path()}});
}

CheckpointData Manager::Snapshot() const {
  CheckpointData d;
  d.boot_id = boot_id_;
  for (const Allocation& a : allocations_) {
    if (!a.committed) continue;  // the kubelet too keeps only allocations with a response
    CheckpointEntry& e = d.entries.emplace_back();
    e.task = a.task;
    e.resource = a.resource;
    const ResourceState* r = Find(a.resource);
    for (const std::string& id : a.devices) {
      const Device* dev = nullptr;
      if (r) {
        for (const Device& x : r->devices) {
          if (x.id == id) dev = &x;
        }
      }
      if (!dev || dev->numa_nodes.empty()) e.devices.emplace_back(-1, id);
      else for (int64_t n : dev->numa_nodes) e.devices.emplace_back(n, id);
    }
    e.alloc_resp = EncodeContainerAllocateResponse(a.response);
  }
  for (const ResourceState& r : resources_) {
    std::vector<std::string> ids;
    for (const Device& dev : r.devices) ids.push_back(dev.id);
    std::sort(ids.begin(), ids.end());
    d.registered.emplace_back(r.name, std::move(ids));
  }
  return d;
}

void Manager::Restore(const CheckpointData& data, const std::string& boot_id) {
  boot_id_ = boot_id;
  for (const auto& [name, ids] : data.registered) {
    if (FindMutable(name)) continue;
    ResourceState r;
    r.name = name;
    auto it = std::lower_bound(resources_.begin(), resources_.end(), name, ByName);
    StartGrace(&*resources_.insert(it, std::move(r)));
  }
  bool rebooted = !data.boot_id.empty() && !boot_id.empty() && data.boot_id != boot_id;
  if (rebooted && !data.entries.empty()) {
    log::Info("device allocations of the checkpoint dropped: the node rebooted since it was written",
              {{"allocations", std::to_string(data.entries.size())}});
  }
  for (const CheckpointEntry& e : data.entries) {
    if (rebooted) break;
    auto response = DecodeContainerAllocateResponse(e.alloc_resp);
    if (!response.ok()) continue;  // DecodeCheckpoint checked it
    auto it = Lower(e.task, e.resource);
    if (it == allocations_.end() || it->task != e.task || it->resource != e.resource) {
      it = allocations_.insert(it, Allocation{e.task, e.resource, {}, true, std::move(*response)});
    }
    for (const auto& [node, id] : e.devices) {
      if (std::find(it->devices.begin(), it->devices.end(), id) == it->devices.end()) it->devices.push_back(id);
    }
  }
  Persist();
}

void Manager::StartGrace(ResourceState* r) {
  r->connected = false;
  r->disconnected_at = MonotonicNanos();
  if (r->expiry) return;  // a grace period already running keeps its deadline
  std::string name = r->name;
  r->expiry = loop_->AddTimer(grace_nanos_, [this, name] { Expire(name); });
}

void Manager::Expire(const std::string& resource) {
  auto it = std::lower_bound(resources_.begin(), resources_.end(), resource, ByName);
  if (it == resources_.end() || it->name != resource) return;
  it->expiry = 0;
  if (it->connected) return;
  // Allocations stay: tasks that hold its devices keep them (the kubelet
  // keeps pods' devices in its checkpoint, not in the endpoint).
  resources_.erase(it);
  Emit(DeviceEvent::kExpired, resource);
  Persist();
}

void Manager::Connect(const std::string& resource, const std::string& endpoint, const PluginOptions& options) {
  ResourceState* r = FindMutable(resource);
  bool added = !r;
  if (!r) {
    ResourceState fresh;
    fresh.name = resource;
    auto it = std::lower_bound(resources_.begin(), resources_.end(), resource, ByName);
    r = &*resources_.insert(it, std::move(fresh));
  }
  r->endpoint = endpoint;
  r->options = options;
  r->connected = true;
  if (r->expiry) loop_->CancelTimer(r->expiry);
  r->expiry = 0;
  if (added) Persist();
}

bool Manager::Update(const std::string& resource, const std::string& endpoint, std::vector<Device> devices) {
  ResourceState* r = FindMutable(resource);
  if (!r || !r->connected || r->endpoint != endpoint) return false;
  // Events against the previous list: a device new, gone, or whose health
  // changed (health only: a topology change is no event).
  std::vector<std::string> before, healthy, now;  // sorted IDs
  for (const Device& d : r->devices) (d.healthy() ? healthy : before).push_back(d.id);
  before.insert(before.end(), healthy.begin(), healthy.end());
  std::sort(before.begin(), before.end());
  std::sort(healthy.begin(), healthy.end());
  bool ids_changed = devices.size() != before.size();
  for (const Device& d : devices) {
    now.push_back(d.id);
    if (!Has(before, d.id)) {
      ids_changed = true;
      Emit(DeviceEvent::kAdded, resource, d.id, d.healthy());
    } else if (Has(healthy, d.id) != d.healthy()) {
      Emit(DeviceEvent::kHealthChanged, resource, d.id, d.healthy());
    }
  }
  std::sort(now.begin(), now.end());
  for (const std::string& id : before) {
    if (!Has(now, id)) Emit(DeviceEvent::kRemoved, resource, id);
  }
  r = FindMutable(resource);  // an event handler may not change the manager, but be safe
  if (!r) return false;
  r->devices = std::move(devices);
  if (ids_changed) Persist();
  return true;
}

bool Manager::Disconnect(const std::string& resource, const std::string& endpoint) {
  ResourceState* r = FindMutable(resource);
  if (!r || !r->connected || r->endpoint != endpoint) return false;
  for (Device& d : r->devices) d.health = kUnhealthy;
  StartGrace(r);
  Emit(DeviceEvent::kDisconnected, resource);
  return true;
}

std::vector<std::string> Manager::InUse(const std::string& resource, const std::string& except_task) const {
  std::vector<std::string> out;
  for (const Allocation& a : allocations_) {
    if (a.resource == resource && a.task != except_task) out.insert(out.end(), a.devices.begin(), a.devices.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<Manager::Candidates> Manager::Check(const std::string& task, const std::string& resource, int64_t count,
                                           const std::vector<int64_t>& numa) const {
  const ResourceState* r = Find(resource);
  if (!r) return Unavailable("cannot allocate unregistered device " + resource);
  std::vector<std::string> used = InUse(resource, task);
  Candidates c;
  size_t healthy = 0;
  bool topology = false;
  for (const Device& d : r->devices) {
    topology |= !d.numa_nodes.empty();
    healthy += d.healthy();
  }
  if (healthy == 0) return Unavailable("no healthy devices present; cannot allocate unhealthy devices " + resource);
  // The kubelet's filterByAffinity: with a NUMA hint and devices that have
  // a topology, those on a hinted node first, then those on other nodes,
  // then those without one (node -1); otherwise all are alike.
  for (const Device& d : r->devices) {
    if (!d.healthy() || Has(used, d.id)) continue;
    ++c.available;
    bool known = false, aligned = false;
    for (int64_t n : d.numa_nodes) {
      known |= n >= 0;
      aligned |= n >= 0 && std::binary_search(numa.begin(), numa.end(), n);
    }
    if (numa.empty() || !topology || !known) c.none.push_back(&d);
    else (aligned ? c.aligned : c.unaligned).push_back(&d);
  }
  if (c.available < static_cast<size_t>(count)) {
    return Unavailable(Format("requested number of devices unavailable for %s. Requested: %lld, Available: %zu",
                              resource.c_str(), static_cast<long long>(count), c.available));
  }
  return c;
}

std::string Manager::WaitReason(const std::string& task, const std::vector<Request>& requests) const {
  std::vector<std::string> why;
  for (const Request& q : requests) {
    const Allocation* held = Held(task, q.resource);
    const ResourceState* r = Find(q.resource);
    bool reuse = held && held->committed && held->devices.size() == static_cast<size_t>(q.count);
    if (reuse && (!r || r->connected || !r->options.pre_start_required)) continue;
    if (!r) {
      why.push_back("no device plugin for resource " + q.resource);
    } else if (!r->connected) {
      why.push_back("resource " + q.resource + ": its device plugin is not connected");
    } else if (!reuse) {
      std::vector<std::string> used = InUse(q.resource, task);
      size_t healthy = 0, unused = 0;
      for (const Device& d : r->devices) {
        healthy += d.healthy();
        unused += d.healthy() && !Has(used, d.id);
      }
      if (unused < static_cast<size_t>(q.count)) {
        why.push_back(Format("resource %s: %zu of %zu healthy devices free, %lld needed", q.resource.c_str(), unused,
                             healthy, static_cast<long long>(q.count)));
      }
    }
  }
  return JoinStrings(why, "; ");
}

Result<Plan> Manager::Begin(const std::string& task, const std::string& resource, int64_t count,
                            const std::vector<int64_t>& numa) {
  Plan plan;
  auto it = Lower(task, resource);
  if (it != allocations_.end() && it->task == task && it->resource == resource) {
    if (it->committed && it->devices.size() == static_cast<size_t>(count)) {
      plan.reuse = true;
      return plan;
    }
    Erase(it);
  }
  auto c = Check(task, resource, count, numa);
  if (!c.ok()) return c.error();
  const ResourceState* r = Find(resource);
  if (!r->options.get_preferred_allocation_available) return plan;
  // The kubelet's devicesToAllocate: if the aligned devices are more than
  // enough, the plugin chooses among them; else all of them are taken and
  // it chooses the rest from every available one.
  size_t n = static_cast<size_t>(count);
  if (n == c->aligned.size()) return plan;
  plan.ask = true;
  plan.preferred.size = static_cast<int32_t>(count);
  for (const Device* d : c->aligned) {
    plan.preferred.available.push_back(d->id);
    if (n > c->aligned.size()) plan.preferred.must_include.push_back(d->id);
  }
  if (n > c->aligned.size()) {
    for (const auto* group : {&c->unaligned, &c->none}) {
      for (const Device* d : *group) plan.preferred.available.push_back(d->id);
    }
  }
  return plan;
}

Result<std::vector<std::string>> Manager::Reserve(const std::string& task, const std::string& resource, int64_t count,
                                                  const std::vector<std::string>& preferred,
                                                  const std::vector<int64_t>& numa) {
  auto it = Lower(task, resource);
  if (it != allocations_.end() && it->task == task && it->resource == resource) {
    if (it->committed && it->devices.size() == static_cast<size_t>(count)) return it->devices;
    Erase(it);
  }
  auto c = Check(task, resource, count, numa);
  if (!c.ok()) return c.error();
  size_t n = static_cast<size_t>(count);
  std::vector<std::string> chosen;
  auto take = [&](const std::vector<const Device*>& from) {
    for (const Device* d : from) {
      if (chosen.size() == n) return;
      if (std::find(chosen.begin(), chosen.end(), d->id) == chosen.end()) chosen.push_back(d->id);
    }
  };
  // The plugin's answer, in its order, as far as it names candidates of
  // the group it was asked about.
  auto take_preferred = [&](std::vector<const Device*> group) {
    std::vector<const Device*> picked;
    for (const std::string& id : preferred) {
      for (const Device* d : group) {
        if (d->id == id) picked.push_back(d);
      }
    }
    take(picked);
  };
  if (n < c->aligned.size()) {
    take_preferred(c->aligned);
    take(c->aligned);
  } else {
    take(c->aligned);
    std::vector<const Device*> all = c->aligned;
    all.insert(all.end(), c->unaligned.begin(), c->unaligned.end());
    all.insert(all.end(), c->none.begin(), c->none.end());
    take_preferred(all);
    take(c->unaligned);
    take(c->none);
  }
  if (chosen.size() != n) {  // Check counted them: cannot happen
    return Error(Code::kInternal, Format("unexpectedly allocated less resources than required. Requested: %zu, Got: %zu",
                                         n, chosen.size()));
  }
  it = Lower(task, resource);
  allocations_.insert(it, Allocation{task, resource, chosen, false, {}});
  return chosen;
}

Status Manager::Commit(const std::string& task, const std::string& resource, ContainerAllocateResponse response) {
  auto it = Lower(task, resource);
  if (it == allocations_.end() || it->task != task || it->resource != resource) {
    return Error(Code::kNotFound, "no devices of " + resource + " reserved for task " + task);
  }
  it->committed = true;
  it->response = std::move(response);
  Persist();
  return OkStatus();
}

void Manager::Erase(std::vector<Allocation>::iterator it) {
  bool committed = it->committed;
  allocations_.erase(it);
  if (committed) Persist();
}

void Manager::Unreserve(const std::string& task, const std::string& resource) {
  auto it = Lower(task, resource);
  if (it != allocations_.end() && it->task == task && it->resource == resource && !it->committed) {
    allocations_.erase(it);
  }
}

void Manager::Trim(const std::string& task, const std::vector<Request>& requests) {
  bool committed = false;
  auto it = Lower(task, "");
  while (it != allocations_.end() && it->task == task) {
    bool asked = false;
    for (const Request& q : requests) {
      asked |= q.resource == it->resource && q.count == static_cast<int64_t>(it->devices.size());
    }
    if (asked) {
      ++it;
    } else {
      committed |= it->committed;
      it = allocations_.erase(it);
    }
  }
  if (committed) Persist();
}

void Manager::Release(const std::string& task) {
  auto first = Lower(task, "");
  auto last = first;
  bool committed = false;
  while (last != allocations_.end() && last->task == task) committed |= (last++)->committed;
  allocations_.erase(first, last);
  if (committed) Persist();
}

void Manager::Retain(const std::vector<std::string>& live) {
  size_t before = allocations_.size();
  allocations_.erase(std::remove_if(allocations_.begin(), allocations_.end(),
                                    [&](const Allocation& a) { return !Has(live, a.task); }),
                     allocations_.end());
  if (allocations_.size() != before) Persist();
}

std::vector<std::pair<std::string, const ContainerAllocateResponse*>> Manager::ResponsesOf(
    const std::string& task) const {
  std::vector<std::pair<std::string, const ContainerAllocateResponse*>> out;
  for (auto it = const_cast<Manager*>(this)->Lower(task, ""); it != allocations_.end() && it->task == task; ++it) {
    if (it->committed) out.emplace_back(it->resource, &it->response);
  }
  return out;
}

}  // namespace outpost::devices
