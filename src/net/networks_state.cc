// The networks of jobs: recovery after an agent restart, the plugins'
// VERSION probes, and what `outpost networks` and `outpost status` show.
#include "net/networks.h"

#include <set>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "net/link_check.h"
#include "net/netns.h"

namespace outpost::net {

// ---- recovery ----

void Networks::Recover(const std::map<std::string, std::shared_ptr<const NetworkSpec>>& wanted) {
  // Every job this node has a trace of: a pinned namespace, or a cache
  // entry of ours (killed during ADD before the pin was used, or after
  // the namespace went).
  std::set<std::string> found;
  std::string prefix = ContainerId("");
  if (auto names = sys::ListDir(options_.netns_dir); names.ok()) {
    for (const std::string& n : *names) {
      if (StartsWith(n, prefix) && n.size() > prefix.size()) found.insert(n.substr(prefix.size()));
    }
  }
  for (const std::string& path : ListCacheFiles(options_.cache_dir)) {
    auto e = ReadCacheFile(path);
    if (e.ok() && StartsWith(e->container_id, prefix)) found.insert(e->container_id.substr(prefix.size()));
  }
  std::vector<std::unique_ptr<Op>> ops;
  for (const std::string& job : found) {
    auto op = std::make_unique<Op>();
    op->job = job;
    auto w = wanted.find(job);
    if (w == wanted.end()) {
      op->kind = Op::kRelease;
      op->release_done.push_back([job](Status st) {
        log::WarnIfError(st, "network of a job that is gone not removed", {{"job", job}});
      });
    } else {
      op->kind = Op::kRecover;
      op->spec = w->second;
    }
    ops.push_back(std::move(op));
  }
  // Before anything asked for meanwhile, in order.
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) queue_.push_front(std::move(*it));
  recovered_ = true;
  RunNext();
}

void Networks::RunRecoverCheck(Op* op) {
  const NetworkSpec& spec = *op->spec;
  std::string path = NetnsPath(op->job);
  bool pinned = IsPinnedNetns(path);
  if (!spec.UsesCni()) {
    if (pinned) {
      JobNetwork n;
      n.job = op->job;
      n.mode = spec.mode;
      n.netns = path;
      attached_[op->job] = n;
      specs_[op->job] = op->spec;
    }
    return Finish(OkStatus());
  }
  auto list = ListFor(spec);
  Result<CacheEntry> entry = Error(Code::kNotFound, "no cache entry");
  if (list.ok()) entry = ReadCacheEntry(options_.cache_dir, list->name, ContainerId(op->job), "eth0");
  // Wired before (pin + a cached result of this network). Its interfaces
  // and addresses are looked at first (net/link_check): a network with any
  // of them gone is re-created, keeping its address where the IPAM plugin
  // can. Then CHECK where it can run; a CHECK that fails on a network whose
  // interfaces and addresses are in place is reported and the network
  // kept: plugins' CHECKs fail on healthy attachments (portmap 1.1.1's
  // always), and re-creating it would move the job to a new address under
  // its running tasks and drop their connections.
  if (pinned && entry.ok() && entry->HasResult()) {
    auto cached_list = ParseNetworkList(entry->config, true, "cache");
    auto result = CniResultFromJson(entry->result, list->cni_version);
    JobNetwork n;
    n.job = op->job;
    n.mode = spec.mode;
    n.network = list->name;
    n.netns = path;
    n.ports = spec.ports;
    Status st = result.ok() ? PickAddress(*result, &n.ip, &n.cidr) : Status(result.error());
    if (cached_list.ok() && st.ok()) {
      auto looked = InspectAttachment(*result, path);
      if (looked.ok() && !looked->empty()) {
        Emit(op->job, "network " + spec.mode + ": broken: " + JoinStrings(*looked, "; ") +
                          "; re-creating it with its address " + n.cidr, true);
        op->keep_cidr = n.cidr;
        return RecreateAfterRecovery(op);
      }
      if (!looked.ok()) {
        log::Warn("network: cannot look at the interfaces of a recovered network; CHECK decides alone",
                  {{"job", op->job}, {"error", looked.error().message()}});
      }
      Attachment att;
      att.container_id = entry->container_id;
      att.netns = path;
      att.ifname = entry->ifname;
      att.cni_args = entry->cni_args;
      att.capability_args = entry->capability_args;
      return CheckRecovered(op, std::make_shared<NetworkList>(std::move(*cached_list)), std::move(att),
                            entry->result, looked.ok(), std::move(n));
    }
    Emit(op->job, "network " + spec.mode + ": cached result unusable, re-creating it: " +
                      (st.ok() ? cached_list.error().message() : st.error().message()), true);
  }
  RecreateAfterRecovery(op);
}

void Networks::CheckRecovered(Op* op, std::shared_ptr<NetworkList> list, Attachment att, picojson::value cached,
                              bool intact, JobNetwork n) {
  const std::string in_place = intact ? "; interfaces and addresses in place" : "";
  auto adopt = [this, op, n](const std::string& how, bool warn) {
    attached_[op->job] = n;
    specs_[op->job] = op->spec;
    Emit(op->job, "network " + op->spec->mode + " recovered: " + n.cidr + " (" + how + ")", warn);
    Finish(OkStatus());
  };
  if (list->disable_check) return adopt("CHECK skipped: disableCheck" + in_place, false);
  if (CompareVersions(list->cni_version, "0.4.0") < 0) {
    return adopt("CHECK skipped: cniVersion " + list->cni_version + in_place, false);
  }
  std::weak_ptr<bool> alive = alive_;
  // A plugin whose VERSION answer has nothing from 0.4.0 on has no CHECK.
  ProbePlugins(*list, [this, alive, op, list, att, cached, intact, in_place, adopt, cidr = n.cidr] {
    if (!alive.lock()) return;
    std::string without = PluginWithoutCheck(*list);
    if (!without.empty()) return adopt("CHECK skipped: " + without + in_place, false);
    list_op_ = ListOp::Start(loop_, options_.plugins, *list, "CHECK", att, cached,
                             [this, alive, op, intact, adopt, cidr](ListOutcome out) {
      if (!alive.lock()) return;
      if (out.status.ok()) return adopt("CHECK passed in " + Ms(out.nanos), false);
      const std::string& why = out.status.error().message();
      if (intact) return adopt("CHECK failed, kept: its interfaces and addresses are in place: " + why, true);
      Emit(op->job, "network " + op->spec->mode + ": CHECK failed, re-creating it once with its address " + cidr +
                        ": " + why, true);
      op->keep_cidr = cidr;
      RecreateAfterRecovery(op);
    });
  });
}

void Networks::RecreateAfterRecovery(Op* op) {
  // Half-done (killed during ADD or DEL), broken (interfaces or addresses
  // gone, or CHECK failed where they could not be looked at) or gone (no
  // pin: a reboot): DEL what is left, best effort, then ADD into the pinned
  // namespace when there is one (its tasks may be running in it), asking
  // for op->keep_cidr when set.
  // Without a pin, the next task start makes the network afresh.
  std::weak_ptr<bool> alive = alive_;
  auto list = ListFor(*op->spec);
  DeleteAttachment(op->job, list.ok() ? &*list : nullptr, [this, alive, op](Status st) {
    if (!alive.lock()) return;
    if (!st.ok()) log::Warn("network: DEL of a half-done network failed", {{"job", op->job}, {"error", st.error().message()}});
    RemoveCacheEntries(op->job);
    if (!IsPinnedNetns(NetnsPath(op->job))) return Finish(OkStatus());
    op->kind = Op::kAttach;
    AttachResolved(op);
  });
}

// ---- VERSION probes ----

void Networks::ProbePlugins(const NetworkList& list, std::function<void()> then) {
  for (const PluginConf& p : list.plugins) {
    auto bin = FindPlugin(options_.plugins.path, p.type);
    if (!bin.ok() || versions_.count(*bin)) continue;
    std::string path = *bin;
    std::weak_ptr<bool> alive = alive_;
    ProbeVersion(loop_, options_.plugins, path,
                 [this, alive, path, &list, then](Result<std::vector<std::string>> v) {
                   if (!alive.lock()) return;
                   versions_.insert_or_assign(path, std::move(v));
                   ProbePlugins(list, then);
                 });
    return;
  }
  then();
}

std::string Networks::PluginWithoutCheck(const NetworkList& list) const {
  for (const PluginConf& p : list.plugins) {
    auto bin = FindPlugin(options_.plugins.path, p.type);
    if (!bin.ok()) continue;
    auto v = versions_.find(*bin);
    if (v == versions_.end() || !v->second.ok()) continue;
    bool check = false;
    for (const std::string& s : *v->second) check = check || CompareVersions(s, "0.4.0") >= 0;
    if (!check) {
      return "plugin " + p.type + " reports no CHECK support (versions " + JoinStrings(*v->second, ", ") + ")";
    }
  }
  return "";
}

Status Networks::CheckVersions(const NetworkList& list) const {
  for (const PluginConf& p : list.plugins) {
    auto bin = FindPlugin(options_.plugins.path, p.type);
    if (!bin.ok()) return Error(Code::kFailedPrecondition, "plugin " + p.type + ": " + bin.error().message());
    auto v = versions_.find(*bin);
    if (v == versions_.end() || !v->second.ok()) continue;  // VERSION failed: ADD will say more
    bool supported = false;
    for (const std::string& s : *v->second) supported = supported || s == list.cni_version;
    if (!supported) {
      return Error(Code::kFailedPrecondition,
                   Format("plugin %s (%s) does not support cniVersion %s of network %s; it supports %s",
                          p.type.c_str(), bin->c_str(), list.cni_version.c_str(), list.name.c_str(),
                          JoinStrings(*v->second, ", ").c_str()));
    }
  }
  return OkStatus();
}

// ---- views ----

const JobNetwork* Networks::Find(const std::string& job) const {
  auto it = attached_.find(job);
  return it == attached_.end() ? nullptr : &it->second;
}

std::vector<const JobNetwork*> Networks::Attached() const {
  std::vector<const JobNetwork*> out;
  for (const auto& [job, n] : attached_) out.push_back(&n);
  return out;
}

std::vector<NetworkView> Networks::List() const {
  std::vector<NetworkList> lists;
  lists.push_back(bridge_list_);
  for (const auto& [name, l] : configs_->networks()) lists.push_back(l);
  std::vector<NetworkView> out;
  for (size_t i = 0; i < lists.size(); i++) {
    const NetworkList& l = lists[i];
    NetworkView v;
    v.name = l.name;
    v.mode = i == 0 ? "bridge" : "cni/" + l.name;
    v.file = l.file;
    v.cni_version = l.cni_version;
    v.disable_check = l.disable_check;
    for (const PluginConf& p : l.plugins) {
      PluginView pv;
      pv.type = p.type;
      auto bin = FindPlugin(options_.plugins.path, p.type);
      if (!bin.ok()) {
        pv.problem = bin.error().message();
      } else {
        pv.binary = *bin;
        auto ver = versions_.find(*bin);
        if (ver != versions_.end() && ver->second.ok()) {
          pv.versions = *ver->second;
        } else if (ver != versions_.end()) {
          pv.problem = "VERSION: " + ver->second.error().message();
        }
      }
      v.plugins.push_back(std::move(pv));
    }
    for (const auto& [job, n] : attached_) {
      if (n.mode == v.mode) v.jobs.push_back(job);
    }
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::string> Networks::ShowConfig(const std::string& name) const {
  std::string n = StartsWith(name, "cni/") ? name.substr(4) : name;
  if (name == "bridge" || n == options_.bridge.network) return BridgeConflist(options_.bridge);
  auto list = configs_->Find(n);
  if (!list.ok()) return list.error();
  return (*list)->bytes;
}

std::map<std::string, std::string> Networks::ConfigProblems() const { return configs_->problems(); }

std::string Networks::ConfigDirProblem() const { return configs_->DirProblem(); }

void Networks::ProbeAll() {
  // For `outpost networks`: every network's plugins, one probe at a time.
  if (probe_all_) return;  // one walk at a time
  auto all = std::make_shared<NetworkList>(bridge_list_);
  for (const auto& [name, l] : configs_->networks()) {
    all->plugins.insert(all->plugins.end(), l.plugins.begin(), l.plugins.end());
  }
  probe_all_ = all;
  std::weak_ptr<bool> alive = alive_;
  ProbePlugins(*all, [this, alive] {
    if (alive.lock()) probe_all_.reset();
  });
}

}  // namespace outpost::net
