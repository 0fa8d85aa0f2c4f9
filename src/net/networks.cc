// The networks of jobs: the queue, Attach and Release. Recovery, listing
// and the VERSION probes are in networks_state.cc.
#include "net/networks.h"

#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "net/netns.h"
#include "proc/child_run.h"
#include "proc/spawn.h"

extern char** environ;

namespace outpost::net {


namespace {

std::string SpecKey(const NetworkSpec& s) { return NetworkSpecToJson(s).serialize(); }

std::string DescribeTimings(const std::vector<PluginTiming>& t) {
  std::string s;
  for (const PluginTiming& p : t) {
    s += Format("%s%s %lld ms", s.empty() ? "" : ", ", p.type.c_str(), static_cast<long long>(p.nanos / 1000000));
  }
  return s;
}

}  // namespace

std::string Networks::Ms(int64_t nanos) { return Format("%lld ms", static_cast<long long>(nanos / 1000000)); }

Result<std::unique_ptr<Networks>> Networks::Create(Loop* loop, Options options) {
  Status st = CheckBridgeOptions(options.bridge);
  if (!st.ok()) return st.error();
  if (options.cache_dir.empty()) return Error(Code::kInvalidArgument, "networks: no cache dir");
  std::unique_ptr<Networks> n(new Networks(loop, std::move(options)));
  std::weak_ptr<bool> alive = n->alive_;
  Networks* self = n.get();
  auto dir = ConfigDir::Start(loop, n->options_.config_dir, [self, alive] {
    if (!alive.lock()) return;
    // Plugins may have been replaced too: probe again.
    self->versions_.clear();
    self->ProbeAll();
  });
  if (!dir.ok()) return dir.error();
  n->configs_ = std::move(*dir);
  n->configs_->Rescan();
  // The plugins' VERSION answers for `outpost networks`, once the node has
  // settled after its start (a board's boot has better things to do).
  loop->AddTimer(kProbeDelayNanos, [self, alive] {
    if (alive.lock()) self->ProbeAll();
  });
  return n;
}

Networks::Networks(Loop* loop, Options options)
    : loop_(loop), options_(std::move(options)), bridge_list_(BridgeNetworkListOrDie(options_.bridge)) {}

Networks::~Networks() { *alive_ = false; }

std::string Networks::NetnsPath(const std::string& job) const {
  return options_.netns_dir + "/" + ContainerId(job);
}

Result<NetworkList> Networks::ListFor(const NetworkSpec& spec) const {
  if (spec.mode == "bridge") return bridge_list_;
  std::string name = spec.CniName();
  if (name.empty()) return Error(Code::kInvalidArgument, "mode " + QuoteForMessage(spec.mode) + " has no CNI network");
  auto list = configs_->Find(name);
  if (!list.ok()) {
    // A file dropped in just now may not have settled in the watch yet:
    // look again before refusing.
    configs_->Rescan();
    list = configs_->Find(name);
  }
  if (!list.ok()) return list.error();
  return **list;
}

Status Networks::Check(const NetworkSpec& spec) const {
  if (!spec.UsesCni()) return OkStatus();
  auto list = ListFor(spec);
  if (!list.ok()) return Error(Code::kFailedPrecondition, "network.mode: " + list.error().message());
  if (!spec.ports.empty()) {
    bool portmap = false;
    for (const PluginConf& p : list->plugins) portmap = portmap || p.HasCapability("portMappings");
    if (!portmap) {
      return Error(Code::kFailedPrecondition,
                   "network.ports: network " + QuoteForMessage(list->name) +
                       " has no plugin with the portMappings capability (such as portmap) to map them");
    }
  }
  return OkStatus();
}

Attachment Networks::AttachmentFor(const std::string& job, const NetworkSpec& spec) const {
  Attachment a;
  a.container_id = ContainerId(job);
  a.netns = NetnsPath(job);
  for (const auto& [k, v] : spec.cni_args) a.cni_args.emplace_back(k, v);
  // As Nomad adds NOMAD_JOB_ID (the spec refuses the name in cni_args).
  a.cni_args.emplace_back("OUTPOST_JOB_ID", job);
  if (!spec.ports.empty()) {
    picojson::array maps;
    for (const PortMapping& p : spec.ports) {
      picojson::object m;
      m["hostPort"] = picojson::value(p.host_port);
      m["containerPort"] = picojson::value(p.to);
      m["protocol"] = picojson::value(p.protocol);
      if (!p.host_ip.empty()) m["hostIP"] = picojson::value(p.host_ip);
      maps.emplace_back(std::move(m));
    }
    a.capability_args["portMappings"] = picojson::value(std::move(maps));
  }
  return a;
}

void Networks::RequestAddress(const std::string& cidr, Attachment* att) {
  for (const auto& [k, v] : att->cni_args) {
    if (k == "IP") return;  // the job's own cni_args ask for one already
  }
  att->cni_args.emplace_back("IP", cidr.substr(0, cidr.find('/')));
  att->capability_args["ips"] = picojson::value(picojson::array{picojson::value(cidr)});
}

std::string Networks::ListBytes(const NetworkList& list) {
  picojson::object o;
  o["cniVersion"] = picojson::value(list.cni_version);
  o["name"] = picojson::value(list.name);
  if (list.disable_check) o["disableCheck"] = picojson::value(true);
  picojson::array plugins;
  for (const PluginConf& p : list.plugins) plugins.emplace_back(p.raw);
  o["plugins"] = picojson::value(std::move(plugins));
  return picojson::value(std::move(o)).serialize();
}

void Networks::Emit(const std::string& job, const std::string& message, bool warn) {
  if (warn) {
    log::Warn("network: " + message, {{"job", job}});
  } else {
    log::Info("network: " + message, {{"job", job}});
  }
  if (options_.event) options_.event(job, "network", message);
}

// ---- the queue ----

void Networks::Enqueue(std::unique_ptr<Op> op, bool front) {
  if (front) {
    queue_.push_front(std::move(op));
  } else {
    queue_.push_back(std::move(op));
  }
  if (!running_ && recovered_) {
    std::weak_ptr<bool> alive = alive_;
    loop_->Defer([this, alive] {
      if (alive.lock() && !running_) RunNext();
    });
  }
}

void Networks::RunNext() {
  if (running_ || queue_.empty() || !recovered_) return;
  running_ = std::move(queue_.front());
  queue_.pop_front();
  running_->started_mono = MonotonicNanos();
  switch (running_->kind) {
    case Op::kAttach: return RunAttach(running_.get());
    case Op::kRelease: return RunRelease(running_.get());
    case Op::kRecover: return RunRecoverCheck(running_.get());
  }
}

void Networks::Finish(Status st) {
  std::unique_ptr<Op> op = std::move(running_);
  list_op_.reset();
  if (op->kind == Op::kRelease) {
    for (Done& d : op->release_done) d(st);
  } else {
    auto it = attached_.find(op->job);
    for (AttachDone& d : op->attach_done) {
      if (!st.ok()) {
        d(st.error());
      } else if (it == attached_.end()) {
        d(Error(Code::kInternal, "network of job " + op->job + " vanished"));
      } else {
        d(it->second);
      }
    }
  }
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive] {
    if (alive.lock()) RunNext();
  });
}

// ---- Attach ----

void Networks::Attach(const std::string& job, std::shared_ptr<const NetworkSpec> spec, AttachDone done) {
  std::string key = SpecKey(*spec);
  auto it = attached_.find(job);
  bool queued_for_job = running_ && running_->job == job;
  for (const auto& q : queue_) queued_for_job = queued_for_job || q->job == job;
  if (it != attached_.end() && !queued_for_job && SpecKey(*specs_[job]) == key) {
    JobNetwork copy = it->second;
    loop_->Defer([done = std::move(done), copy]() { done(copy); });
    return;
  }
  for (auto& q : queue_) {
    if (q->kind == Op::kAttach && q->job == job && SpecKey(*q->spec) == key) {
      q->attach_done.push_back(std::move(done));
      return;
    }
  }
  auto op = std::make_unique<Op>();
  op->kind = Op::kAttach;
  op->job = job;
  op->spec = std::move(spec);
  op->attach_done.push_back(std::move(done));
  Enqueue(std::move(op));
}

void Networks::RunAttach(Op* op) {
  auto it = attached_.find(op->job);
  if (it != attached_.end()) {
    if (SpecKey(*specs_[op->job]) == SpecKey(*op->spec)) return Finish(OkStatus());
    // The job's network changed (an update): the old attachment goes first;
    // the namespace stays (the job's tasks restart into the new wiring).
    std::string mode = it->second.mode;
    Emit(op->job, "network changed from " + mode + " to " + op->spec->mode + ": re-wiring");
    std::weak_ptr<bool> alive = alive_;
    auto old_list = ListFor(*specs_[op->job]);
    DeleteAttachment(op->job, old_list.ok() ? &*old_list : nullptr, [this, alive, op](Status st) {
      if (!alive.lock()) return;
      if (!st.ok()) return Finish(Error(st.error().code(), "network " + op->spec->mode + ": removing the old "
                                                              "network first: " + st.error().message()));
      RemoveCacheEntries(op->job);
      attached_.erase(op->job);
      specs_.erase(op->job);
      AttachResolved(op);
    });
    return;
  }
  AttachResolved(op);
}

void Networks::AttachResolved(Op* op) {
  const NetworkSpec& spec = *op->spec;
  std::string prefix = "network " + spec.mode + ": ";
  if (spec.UsesCni()) {
    auto list = ListFor(spec);
    if (!list.ok()) return Finish(Error(list.error().code(), prefix + list.error().message()));
    op->list = std::move(*list);
    op->att = AttachmentFor(op->job, spec);
    if (!op->keep_cidr.empty()) RequestAddress(op->keep_cidr, &op->att);
    Status st = ValidateAttachment(op->att);
    if (!st.ok()) return Finish(Error(st.error().code(), prefix + st.error().message()));
  }
  Status st = PinNewNetns(options_.netns_dir, ContainerId(op->job));
  if (st.ok()) {
    op->pinned_here = true;
  } else if (st.error().code() != Code::kAlreadyExists) {
    return Finish(Error(st.error().code(), prefix + st.error().message()));
  }
  if (!spec.UsesCni()) {
    JobNetwork n;
    n.job = op->job;
    n.mode = spec.mode;
    n.netns = NetnsPath(op->job);
    n.ports = spec.ports;
    attached_[op->job] = n;
    specs_[op->job] = op->spec;
    Emit(op->job, "network none: namespace " + n.netns + " with loopback only");
    return Finish(OkStatus());
  }
  std::weak_ptr<bool> alive = alive_;
  ProbePlugins(op->list, [this, alive, op] {
    if (!alive.lock()) return;
    Status versions = CheckVersions(op->list);
    if (!versions.ok()) return FailAttach(op, versions.error().message());
    AttachPinned(op);
  });
}

CacheEntry Networks::CacheEntryFor(const Op& op) {
  CacheEntry e;
  e.network = op.list.name;
  e.container_id = op.att.container_id;
  e.ifname = op.att.ifname;
  e.netns = op.att.netns;
  e.config = ListBytes(op.list);
  e.cni_args = op.att.cni_args;
  e.capability_args = op.att.capability_args;
  return e;
}

void Networks::AttachPinned(Op* op) {
  // Written before ADD, so that an agent killed during it still knows what
  // to DEL (containerd PR #12922); the result follows after ADD.
  CacheEntry e = CacheEntryFor(*op);
  Status written = WriteCacheEntry(options_.cache_dir, e);
  if (!written.ok()) return FailAttach(op, "result cache: " + written.error().message());
  if (op->spec->mode == "bridge" && !admin_chain_ready_) return AttachAdmin(op);
  AttachAdd(op);
}

void Networks::AttachAdmin(Op* op) {
  // Nomad's NOMAD-ADMIN rule: the firewall plugin jumps to the admin chain,
  // which accepts traffic to the bridge's subnet. "-N" fails when the chain
  // exists (fine); the rule is added unless "-C" finds it.
  std::weak_ptr<bool> alive = alive_;
  RunCommand(AdminChainCreate(options_.bridge), [this, alive, op](Status) {
    if (!alive.lock()) return;
    RunCommand(AdminRuleCheck(options_.bridge), [this, alive, op](Status present) {
      if (!alive.lock()) return;
      if (present.ok()) {
        admin_chain_ready_ = true;
        return AttachAdd(op);
      }
      RunCommand(AdminRuleAppend(options_.bridge), [this, alive, op](Status st) {
        if (!alive.lock()) return;
        if (!st.ok()) return FailAttach(op, "admin chain " + options_.bridge.admin_chain + ": " + st.error().message());
        admin_chain_ready_ = true;
        AttachAdd(op);
      });
    });
  });
}

void Networks::AttachAdd(Op* op) {
  op->add_started = true;
  std::weak_ptr<bool> alive = alive_;
  list_op_ = ListOp::Start(loop_, options_.plugins, op->list, "ADD", op->att, picojson::value(),
                           [this, alive, op](ListOutcome out) {
                             if (!alive.lock()) return;
                             AttachAdded(op, std::move(out));
                           });
}

void Networks::AttachAdded(Op* op, ListOutcome out) {
  if (!out.status.ok()) return FailAttach(op, out.status.error().message());
  CacheEntry e = CacheEntryFor(*op);
  e.result = out.result;
  JobNetwork n;
  n.job = op->job;
  n.mode = op->spec->mode;
  n.network = op->list.name;
  n.netns = op->att.netns;
  n.ports = op->spec->ports;
  n.timings = out.timings;
  n.add_nanos = out.nanos;
  auto result = CniResultFromJson(out.result, op->list.cni_version);
  Status st = result.ok() ? PickAddress(*result, &n.ip, &n.cidr) : Status(result.error());
  if (!st.ok()) return FailAttach(op, "ADD result: " + st.error().message());
  // The tasks start only once the result is on disk: DEL needs it.
  st = WriteCacheEntry(options_.cache_dir, e);
  if (!st.ok()) return FailAttach(op, "result cache: " + st.error().message());
  attached_[op->job] = n;
  specs_[op->job] = op->spec;
  Emit(op->job, Format("network %s ready: %s in %s (%s)", op->spec->mode.c_str(), n.cidr.c_str(),
                       Ms(out.nanos).c_str(), DescribeTimings(out.timings).c_str()));
  if (!op->keep_cidr.empty() && op->keep_cidr != n.cidr) {
    Emit(op->job, "network " + op->spec->mode + ": the IPAM plugin gave " + n.cidr + " instead of " + op->keep_cidr +
                      "; the running tasks keep OUTPOST_IP of the old address until they restart", true);
  }
  Finish(OkStatus());
}

void Networks::FailAttach(Op* op, const std::string& why) {
  // Spec: a DEL must follow a failed ADD, for the whole list in reverse
  // (plugins never called included); the first error is what the user sees.
  Error first(Code::kFailedPrecondition, "network " + op->spec->mode + ": " + why);
  Emit(op->job, first.message() + "; undoing");
  std::weak_ptr<bool> alive = alive_;
  auto undo = [this, alive, op, first](Status del) {
    if (!alive.lock()) return;
    if (!del.ok()) {
      // Left for Release or the next agent's recovery to DEL again.
      Emit(op->job, "undoing the failed ADD: " + del.error().message());
      return Finish(first);
    }
    RemoveCacheEntries(op->job);
    if (!op->keep_cidr.empty() && op->add_started) {
      // The old address could not be had again (taken, or refused by the
      // IPAM plugin): a new one beats no network for the running tasks.
      Emit(op->job, "network " + op->spec->mode + ": could not keep the address " + op->keep_cidr +
                        "; re-creating it with a new one", true);
      op->keep_cidr.clear();
      op->add_started = false;
      return AttachResolved(op);
    }
    if (op->pinned_here) log::WarnIfError(UnpinNetns(NetnsPath(op->job)), "unpin network namespace");
    Finish(first);
  };
  if (!op->add_started) return undo(OkStatus());
  list_op_ = ListOp::Start(loop_, options_.plugins, op->list, "DEL", op->att, picojson::value(),
                           [undo](ListOutcome out) { undo(out.status); });
}

// ---- Release ----

void Networks::Release(const std::string& job, Done done) {
  for (auto& q : queue_) {
    if (q->kind == Op::kRelease && q->job == job) {
      q->release_done.push_back(std::move(done));
      return;
    }
  }
  auto op = std::make_unique<Op>();
  op->kind = Op::kRelease;
  op->job = job;
  op->release_done.push_back(std::move(done));
  Enqueue(std::move(op));
}

void Networks::RunRelease(Op* op) {
  auto spec = specs_.find(op->job);
  Result<NetworkList> list = Error(Code::kNotFound, "");
  if (spec != specs_.end() && spec->second->UsesCni()) list = ListFor(*spec->second);
  bool had = attached_.count(op->job) != 0 || IsPinnedNetns(NetnsPath(op->job));
  std::weak_ptr<bool> alive = alive_;
  DeleteAttachment(op->job, list.ok() ? &*list : nullptr, [this, alive, op, had](Status st) {
    if (!alive.lock()) return;
    if (!st.ok()) {
      Emit(op->job, "network not removed, tried again at the next release or agent start: " + st.error().message());
      return Finish(st);
    }
    RemoveCacheEntries(op->job);
    Status un = UnpinNetns(NetnsPath(op->job));
    if (!un.ok()) return Finish(un);
    attached_.erase(op->job);
    specs_.erase(op->job);
    if (had) Emit(op->job, "network removed");
    Finish(OkStatus());
  });
}

void Networks::DeleteAttachment(const std::string& job, const NetworkList* list, std::function<void(Status)> then) {
  // What the cache says wins: it holds the list, args and capabilities the
  // ADD used. Without a usable entry, DEL runs without prevResult (best
  // effort: firewall's per-address rules need prevResult) from the list the
  // job's spec names, if any.
  std::string cid = ContainerId(job);
  std::string suffix = "-" + cid + "-eth0";
  NetworkList from_cache;
  const NetworkList* use = list;
  Attachment att;
  att.container_id = cid;
  att.netns = IsPinnedNetns(NetnsPath(job)) ? NetnsPath(job) : "";
  picojson::value cached;
  for (const std::string& path : ListCacheFiles(options_.cache_dir)) {
    if (!EndsWith(path, suffix)) continue;
    auto e = ReadCacheFile(path);
    if (!e.ok()) {
      log::Warn("network: unusable result cache entry; DEL without it", {{"job", job}, {"error", e.error().message()}});
      continue;
    }
    if (e->container_id != cid) continue;
    auto l = ParseNetworkList(e->config, true, path);
    if (!l.ok()) {
      log::Warn("network: cached network config unusable", {{"job", job}, {"error", l.error().message()}});
      continue;
    }
    from_cache = std::move(*l);
    use = &from_cache;
    att.cni_args = e->cni_args;
    att.capability_args = e->capability_args;
    cached = e->result;
    break;
  }
  if (!use) return then(OkStatus());
  if (use != &from_cache && specs_.count(job)) {
    Attachment a = AttachmentFor(job, *specs_[job]);
    att.cni_args = a.cni_args;
    att.capability_args = a.capability_args;
  }
  list_op_ = ListOp::Start(loop_, options_.plugins, *use, "DEL", att, cached, [job, then](ListOutcome out) {
    if (out.status.ok() && !out.timings.empty()) {
      log::Info("network: DEL done", {{"job", job}, {"took", Ms(out.nanos)}, {"plugins", DescribeTimings(out.timings)}});
    }
    then(out.status);
  });
}

void Networks::RemoveCacheEntries(const std::string& job) {
  std::string cid = ContainerId(job);
  std::string suffix = "-" + cid + "-eth0";
  for (const std::string& path : ListCacheFiles(options_.cache_dir)) {
    if (!EndsWith(path, suffix)) continue;
    auto e = ReadCacheFile(path);
    // A corrupt entry with our name goes too: it cannot be used any more.
    if (e.ok() && e->container_id != cid) continue;
    log::WarnIfError(sys::RemoveFileDurable(path), "remove CNI result cache entry", {{"path", path}});
  }
}

void Networks::RunCommand(std::vector<std::string> argv, std::function<void(Status)> then) {
  int code = 0;
  const char* path_var = getenv("PATH");
  auto bin = proc::ResolveCommand(argv[0], path_var ? path_var : "", &code);
  if (!bin.ok()) return then(Error(bin.error().code(), argv[0] + ": " + bin.error().message()));
  proc::ChildRunRequest req;
  req.path = *bin;
  req.argv = argv;
  for (char** e = environ; e && *e; ++e) req.env.emplace_back(*e);
  req.timeout_nanos = options_.plugins.timeout_nanos;
  req.output_limit = 4 << 10;
  std::string cmdline = JoinStrings(argv, " ");
  std::weak_ptr<bool> alive = alive_;
  auto run = proc::ChildRun::Start(loop_, std::move(req), [this, alive, cmdline, then](const proc::ChildRunResult& r) {
    if (!alive.lock()) return;
    Status st = OkStatus();
    if (!r.Succeeded()) {
      std::string err = r.err.empty() ? r.out : r.err;
      while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
      st = Error(Code::kFailedPrecondition,
                 Format("%s: %s%s%s", cmdline.c_str(), r.timed_out ? "timed out" : proc::DescribeExitStatus(r.exit).c_str(),
                        err.empty() ? "" : ": ", err.c_str()));
    }
    loop_->Defer([this, alive, then, st] {
      if (!alive.lock()) return;
      command_.reset();
      then(st);
    });
  });
  if (!run.ok()) return then(run.error());
  command_ = std::move(*run);
}

}  // namespace outpost::net
