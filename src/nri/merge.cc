// Ownership bookkeeping and the ContainerUpdate merge shared by every event
// (see merge.h). CreateContainer's adjustment merge is in merge_create.cc.
#include "nri/merge.h"

#include <utility>

#include "base/strings.h"

namespace outpost::nri {

// Quotes, backslashes and control bytes escaped; enough for ids.
std::string GoQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += Format("\\x%02x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out += "\"";
  return out;
}

namespace {

bool IsRemovalMark(const std::string& owner, std::string* clearer) {
  if (owner.empty() || owner[0] != '-') return false;
  *clearer = owner.substr(1);
  return true;
}

// Upstream: fmt.Errorf("plugins %q and %q both tried to set %s", ...) with
// the subject Field.String() + " " + key (a trailing space for simple
// fields).
Error Conflict(Field f, const std::string& plugin, const std::string& other, const std::string& key) {
  return Error(Code::kUnknown, "plugins " + GoQuote(plugin) + " and " + GoQuote(other) + " both tried to set " +
                                   FieldName(f) + " " + key);
}

// Who holds a claim, for the conflict check: nobody, or the previous
// claimant (a removal mark "-p" only lets p itself through).
Status CheckOwner(const std::string* owner, Field f, const std::string& key, const std::string& plugin) {
  if (owner == nullptr) return OkStatus();
  std::string other = *owner;
  std::string clearer;
  if (IsRemovalMark(other, &clearer)) {
    if (clearer == plugin) return OkStatus();
    other = clearer;
  }
  return Conflict(f, plugin, other, key);
}

}  // namespace

const char* FieldName(Field f) {
  static const char* const kNames[] = {
      "None",
      "Annotations",
      "Mounts",
      "OciHooks",
      "Devices",
      "CdiDevices",
      "Env",
      "Args",
      "MemLimit",
      "MemReservation",
      "MemSwapLimit",
      "MemKernelLimit",
      "MemTCPLimit",
      "MemSwappiness",
      "MemDisableOomKiller",
      "MemUseHierarchy",
      "CPUShares",
      "CPUQuota",
      "CPUPeriod",
      "CPURealtimeRuntime",
      "CPURealtimePeriod",
      "CPUSetCPUs",
      "CPUSetMems",
      "PidsLimit",
      "HugepageLimits",
      "BlockioClass",
      "RdtClass",
      "CgroupsUnified",
      "CgroupsPath",
      "OomScoreAdj",
      "Rlimits",
      "IoPriority",
      "SeccompPolicy",
      "Namespace",
      "Sysctl",
      "LinuxNetDevices",
      "LinuxSched",
      "RdtClosID",
      "RdtSchemata",
      "RdtEnableMonitoring",
      "MemoryPolicy",
  };
  auto i = static_cast<int32_t>(f);
  if (i < 0 || i >= static_cast<int32_t>(sizeof(kNames) / sizeof(kNames[0]))) return "Unknown";
  return kNames[i];
}

std::string PluginId(const std::string& index, const std::string& name) { return index + "-" + name; }

// ---- OwnerBook --------------------------------------------------------------

Status OwnerBook::ClaimSimple(const std::string& id, Field f, const std::string& plugin) {
  auto& simple = owners_[id].simple;
  auto key = static_cast<int32_t>(f);
  auto it = simple.find(key);
  OUTPOST_RETURN_IF_ERROR(CheckOwner(it == simple.end() ? nullptr : &it->second, f, "", plugin));
  simple[key] = plugin;
  claims_.push_back(Claim{plugin, f, "", false, id});
  return OkStatus();
}

Status OwnerBook::ClaimCompound(const std::string& id, Field f, const std::string& key, const std::string& plugin) {
  auto& owners = owners_[id].compound[static_cast<int32_t>(f)];
  auto it = owners.find(key);
  OUTPOST_RETURN_IF_ERROR(CheckOwner(it == owners.end() ? nullptr : &it->second, f, key, plugin));
  owners[key] = plugin;
  claims_.push_back(Claim{plugin, f, key, false, id});
  return OkStatus();
}

void OwnerBook::ClearSimple(const std::string& id, Field f, const std::string& plugin) {
  owners_[id].simple[static_cast<int32_t>(f)] = "-" + plugin;
  claims_.push_back(Claim{plugin, f, "", true, id});
}

void OwnerBook::ClearCompound(const std::string& id, Field f, const std::string& key, const std::string& plugin) {
  owners_[id].compound[static_cast<int32_t>(f)][key] = "-" + plugin;
  claims_.push_back(Claim{plugin, f, key, true, id});
}

void OwnerBook::AccumulateHooks(const std::string& id, const std::string& plugin) {
  auto& owner = owners_[id].simple[static_cast<int32_t>(Field::kOciHooks)];
  owner = owner.empty() ? plugin : owner + "," + plugin;
  claims_.push_back(Claim{plugin, Field::kOciHooks, "", false, id});
}

// ---- resources ----------------------------------------------------------------

namespace {

// One optional scalar: claim, then set in the request copy and (for
// CreateContainer) in the merged adjustment.
template <typename T, typename Parent>
Status SetScalar(OwnerBook* book, const std::string& id, const std::string& plugin, Field f, const std::optional<T>& v,
                 std::optional<Parent>* req, std::optional<Parent>* adj, std::optional<T> Parent::*member) {
  if (!v) return OkStatus();
  OUTPOST_RETURN_IF_ERROR(book->ClaimSimple(id, f, plugin));
  if (!*req) req->emplace();
  (**req).*member = v;
  if (adj != nullptr) {
    if (!*adj) adj->emplace();
    (**adj).*member = v;
  }
  return OkStatus();
}

template <typename Parent>
Status SetString(OwnerBook* book, const std::string& id, const std::string& plugin, Field f, const std::string& v,
                 std::optional<Parent>* req, std::optional<Parent>* adj, std::string Parent::*member) {
  if (v.empty()) return OkStatus();
  OUTPOST_RETURN_IF_ERROR(book->ClaimSimple(id, f, plugin));
  if (!*req) req->emplace();
  (**req).*member = v;
  if (adj != nullptr) {
    if (!*adj) adj->emplace();
    (**adj).*member = v;
  }
  return OkStatus();
}

}  // namespace

// The resource merge of upstream's adjustResources (adj != nullptr, device
// cgroup rules appended) and updateResources (adj == nullptr, device rules
// ignored).
Status MergeResourcesInto(OwnerBook* book, const std::string& id, const std::string& plugin, const Resources& src,
                          Resources* req, Resources* adj) {
  if (src.memory) {
    const Memory& m = *src.memory;
    auto* am = adj ? &adj->memory : nullptr;
    auto* rm = &req->memory;
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kMemLimit, m.limit, rm, am, &Memory::limit));
    OUTPOST_RETURN_IF_ERROR(
        SetScalar(book, id, plugin, Field::kMemReservation, m.reservation, rm, am, &Memory::reservation));
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kMemSwapLimit, m.swap, rm, am, &Memory::swap));
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kMemKernelLimit, m.kernel, rm, am, &Memory::kernel));
    OUTPOST_RETURN_IF_ERROR(
        SetScalar(book, id, plugin, Field::kMemTCPLimit, m.kernel_tcp, rm, am, &Memory::kernel_tcp));
    OUTPOST_RETURN_IF_ERROR(
        SetScalar(book, id, plugin, Field::kMemSwappiness, m.swappiness, rm, am, &Memory::swappiness));
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kMemDisableOomKiller, m.disable_oom_killer, rm, am,
                                      &Memory::disable_oom_killer));
    OUTPOST_RETURN_IF_ERROR(
        SetScalar(book, id, plugin, Field::kMemUseHierarchy, m.use_hierarchy, rm, am, &Memory::use_hierarchy));
  }
  if (src.cpu) {
    const Cpu& c = *src.cpu;
    auto* ac = adj ? &adj->cpu : nullptr;
    auto* rc = &req->cpu;
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kCPUShares, c.shares, rc, ac, &Cpu::shares));
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kCPUQuota, c.quota, rc, ac, &Cpu::quota));
    OUTPOST_RETURN_IF_ERROR(SetScalar(book, id, plugin, Field::kCPUPeriod, c.period, rc, ac, &Cpu::period));
    OUTPOST_RETURN_IF_ERROR(
        SetScalar(book, id, plugin, Field::kCPURealtimeRuntime, c.realtime_runtime, rc, ac, &Cpu::realtime_runtime));
    OUTPOST_RETURN_IF_ERROR(
        SetScalar(book, id, plugin, Field::kCPURealtimePeriod, c.realtime_period, rc, ac, &Cpu::realtime_period));
    OUTPOST_RETURN_IF_ERROR(SetString(book, id, plugin, Field::kCPUSetCPUs, c.cpus, rc, ac, &Cpu::cpus));
    OUTPOST_RETURN_IF_ERROR(SetString(book, id, plugin, Field::kCPUSetMems, c.mems, rc, ac, &Cpu::mems));
  }
  for (const HugepageLimit& l : src.hugepage_limits) {
    OUTPOST_RETURN_IF_ERROR(book->ClaimCompound(id, Field::kHugepageLimits, l.page_size, plugin));
    req->hugepage_limits.push_back(l);
    if (adj) adj->hugepage_limits.push_back(l);
  }
  if (adj != nullptr) {
    for (const DeviceCgroup& d : src.devices) {
      req->devices.push_back(d);
      adj->devices.push_back(d);
    }
  }
  for (const auto& [k, v] : src.unified) {
    OUTPOST_RETURN_IF_ERROR(book->ClaimCompound(id, Field::kCgroupsUnified, k, plugin));
    req->unified[k] = v;
    if (adj) adj->unified[k] = v;
  }
  if (src.blockio_class) {
    OUTPOST_RETURN_IF_ERROR(book->ClaimSimple(id, Field::kBlockioClass, plugin));
    req->blockio_class = src.blockio_class;
    if (adj) adj->blockio_class = src.blockio_class;
  }
  if (src.rdt_class) {
    OUTPOST_RETURN_IF_ERROR(book->ClaimSimple(id, Field::kRdtClass, plugin));
    req->rdt_class = src.rdt_class;
    if (adj) adj->rdt_class = src.rdt_class;
  }
  if (src.pids_limit) {
    OUTPOST_RETURN_IF_ERROR(book->ClaimSimple(id, Field::kPidsLimit, plugin));
    req->pids_limit = src.pids_limit;
    if (adj) adj->pids_limit = src.pids_limit;
  }
  return OkStatus();
}

Status MergeUpdateResources(OwnerBook* book, const std::string& id, const std::string& plugin, const Resources& src,
                            Resources* dst) {
  return MergeResourcesInto(book, id, plugin, src, dst, nullptr);
}

// ---- UpdateMerger -----------------------------------------------------------------

UpdateMerger::UpdateMerger(std::string target, Resources target_res)
    : target_(std::move(target)), target_res_(std::move(target_res)) {}

Status UpdateMerger::Apply(OwnerBook* book, const std::string& plugin, const ContainerUpdate& u) {
  const std::string& id = u.container_id;
  const bool is_target = !target_.empty() && id == target_;
  ContainerUpdate* entry = nullptr;
  if (is_target) {
    if (!target_update_) {
      target_update_ = ContainerUpdate{id, Resources{}, u.ignore_failure};
    } else {
      target_update_->ignore_failure = target_update_->ignore_failure && u.ignore_failure;
    }
    entry = &*target_update_;
  } else {
    auto it = index_.find(id);
    if (it == index_.end()) {
      index_.emplace(id, others_.size());
      others_.push_back(ContainerUpdate{id, Resources{}, u.ignore_failure});
      entry = &others_.back();
    } else {
      entry = &others_[it->second];
      entry->ignore_failure = entry->ignore_failure && u.ignore_failure;
    }
  }
  if (!u.resources) return OkStatus();

  // Work on copies: a failed update that may be ignored leaves neither
  // values nor claims behind.
  Resources res = is_target ? target_res_ : entry->resources.value_or(Resources{});
  OwnerBook saved = *book;
  Status st = MergeUpdateResources(book, id, plugin, *u.resources, &res);
  if (!st.ok()) {
    if (!u.ignore_failure) return st;
    *book = std::move(saved);
    return OkStatus();
  }
  if (is_target) target_res_ = res;
  entry->resources = std::move(res);
  return OkStatus();
}

// ---- UpdateResult ----------------------------------------------------------------

UpdateResult::UpdateResult(const std::string& target, const Resources& requested) : merger_(target, requested) {}

Status UpdateResult::Apply(const std::string& plugin, const std::vector<ContainerUpdate>& updates) {
  for (const ContainerUpdate& u : updates) OUTPOST_RETURN_IF_ERROR(merger_.Apply(&book_, plugin, u));
  return OkStatus();
}

}  // namespace outpost::nri
