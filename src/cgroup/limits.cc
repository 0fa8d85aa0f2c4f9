// Cgroups: writing cgroup::Resources to the controller files (Apply) and
// telling in advance which of them this node cannot honour (Check).
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>

#include "base/strings.h"
#include "cgroup/cgroup.h"

namespace outpost::cgroup {
namespace {

constexpr int64_t kMinMemory = 1 << 20;  // below this a task cannot even exec
constexpr int kMaxCpuNumber = 65535;     // bounds ParseCpuList's set

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

std::string MaxOr(uint64_t v) { return v == 0 ? std::string("max") : std::to_string(v); }

std::string IoMaxLine(const IoDeviceLimit& d) {
  return Format("%u:%u rbps=%s wbps=%s riops=%s wiops=%s", d.major, d.minor, MaxOr(d.rbps).c_str(),
                MaxOr(d.wbps).c_str(), MaxOr(d.riops).c_str(), MaxOr(d.wiops).c_str());
}

// The cgroup files r writes and their values, in the order Apply writes
// them (io.max: one line per device, each its own write).
std::vector<std::pair<std::string, std::string>> LimitWrites(const Resources& r) {
  std::vector<std::pair<std::string, std::string>> writes;
  if (r.cpu_weight) writes.push_back({"cpu.weight", std::to_string(r.cpu_weight)});
  if (r.cpu_max_quota_us >= 0) {
    writes.push_back({"cpu.max", Format("%lld %llu", static_cast<long long>(r.cpu_max_quota_us),
                                        static_cast<unsigned long long>(r.cpu_max_period_us))});
  } else if (r.cpu_max_period_us != 100000) {
    writes.push_back({"cpu.max", Format("max %llu", static_cast<unsigned long long>(r.cpu_max_period_us))});
  }
  if (!r.cpuset_cpus.empty()) writes.push_back({"cpuset.cpus", r.cpuset_cpus});
  if (!r.cpuset_mems.empty()) writes.push_back({"cpuset.mems", r.cpuset_mems});
  if (r.memory_low >= 0) writes.push_back({"memory.low", std::to_string(r.memory_low)});
  if (r.memory_high >= 0) writes.push_back({"memory.high", std::to_string(r.memory_high)});
  if (r.memory_max >= 0) writes.push_back({"memory.max", std::to_string(r.memory_max)});
  if (r.memory_swap_max >= 0) writes.push_back({"memory.swap.max", std::to_string(r.memory_swap_max)});
  if (r.pids_max >= 0) writes.push_back({"pids.max", std::to_string(r.pids_max)});
  if (r.io_weight) writes.push_back({"io.weight", "default " + std::to_string(r.io_weight)});
  for (const IoDeviceLimit& d : r.io_max) writes.push_back({"io.max", IoMaxLine(d)});
  for (const auto& [size, max] : r.hugetlb_max) writes.push_back({"hugetlb." + size + ".max", std::to_string(max)});
  for (const auto& [file, value] : r.unified) writes.push_back({file, value});
  return writes;
}

// The controllers whose files limits write ("memory" for memory.max);
// hugetlb is one outpost never enables (NRI adjustments may ask for it).
bool Managed(const std::string& controller) {
  for (const char* c : {"cpuset", "cpu", "io", "memory", "pids", "hugetlb"}) {
    if (controller == c) return true;
  }
  return false;
}

std::string ControllerOf(const std::string& file) { return file.substr(0, file.find('.')); }

// Whether the file's controller is enabled (files of no controller outpost
// manages are written as they are: the kernel decides).
bool Enabled(const std::set<std::string>& enabled, const std::string& file) {
  std::string c = ControllerOf(file);
  return !Managed(c) || enabled.count(c) > 0;
}

std::string JoinControllers(const std::set<std::string>& controllers) {
  std::string out;
  for (const std::string& c : controllers) out += (out.empty() ? "" : " ") + c;
  return out.empty() ? "none" : out;
}

std::string DeviceName(const IoDeviceLimit& d) {
  std::string mm = Format("%u:%u", d.major, d.minor);
  return d.device.empty() || d.device == mm ? mm : d.device + " (" + mm + ")";
}

}  // namespace

bool ParseCpuList(const std::string& text, std::set<int>* out) {
  std::set<int> result;
  std::string t = Trim(text);
  if (!t.empty()) {
    for (const std::string& part : Split(t, ',')) {
      size_t dash = part.find('-');
      auto lo = ParseInt(part.substr(0, dash), 0, kMaxCpuNumber);
      if (!lo.ok()) return false;
      int64_t hi = *lo;
      if (dash != std::string::npos) {
        auto h = ParseInt(part.substr(dash + 1), 0, kMaxCpuNumber);
        if (!h.ok() || *h < *lo) return false;
        hi = *h;
      }
      for (int64_t i = *lo; i <= hi; ++i) result.insert(static_cast<int>(i));
    }
  }
  *out = std::move(result);
  return true;
}

ResourcesBox& ResourcesBox::operator=(const Resources& r) {
  // cpu_max_period_us is the one field Any() leaves out (it means nothing
  // without a quota), and it is kept all the same.
  if (r.Any() || r.cpu_max_period_us != Resources().cpu_max_period_us) {
    p_ = std::make_unique<Resources>(r);
  } else {
    p_.reset();
  }
  return *this;
}

Resources& ResourcesBox::mutable_get() {
  if (!p_) p_ = std::make_unique<Resources>();
  return *p_;
}

const Resources& ResourcesBox::Empty() {
  static const Resources kEmpty;
  return kEmpty;
}

Status Cgroups::Apply(const std::string& path, const Resources& r) {
  // Written in this order; the first failure stops (the limits before it
  // stay written, which a retry or the task's removal sorts out).
  for (const auto& [file, value] : LimitWrites(r)) {
    if (!Enabled(controllers_, file)) continue;  // let through by Check: not enforced (Enforcement)
    OUTPOST_RETURN_IF_ERROR(WriteCgroupFile(path + "/" + file, value));
  }
  return OkStatus();
}

std::vector<LimitState> Cgroups::Enforcement(const Resources& r, const std::string& path) const {
  std::vector<LimitState> out;
  for (auto& [file, value] : LimitWrites(r)) {
    LimitState s{file, value, ""};
    if (!available_) {
      s.not_enforced = "cgroup v2 is not usable on this node (" + reason_ + ")";
    } else if (path.empty()) {
      s.not_enforced = "the task runs outside a cgroup (it was started while cgroup v2 was not usable here; a "
                       "restart puts it in one)";
    } else if (!Enabled(controllers_, file)) {
      s.not_enforced = "the " + ControllerOf(file) + " controller is not enabled here (enabled: " +
                       JoinControllers(controllers_) + ")";
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string NotEnforcedSummary(const std::vector<LimitState>& limits) {
  // Reasons in the order first seen, each with its files (io.max once
  // however many devices it limits).
  std::vector<std::pair<std::string, std::vector<std::string>>> by_reason;
  for (const LimitState& l : limits) {
    if (l.not_enforced.empty()) continue;
    auto it = std::find_if(by_reason.begin(), by_reason.end(), [&](const auto& p) { return p.first == l.not_enforced; });
    if (it == by_reason.end()) it = by_reason.insert(by_reason.end(), {l.not_enforced, {}});
    if (std::find(it->second.begin(), it->second.end(), l.file) == it->second.end()) it->second.push_back(l.file);
  }
  std::string out;
  for (const auto& [why, files] : by_reason) {
    out += (out.empty() ? "" : "; ") + JoinStrings(files, ", ") + " not enforced: " + why;
  }
  return out;
}

std::vector<std::string> Cgroups::Check(const Resources& r, bool allow_without_limits) const {
  std::vector<std::string> problems;
  if (!r.Any()) return problems;
  if (!available_) {
    if (allow_without_limits) return problems;
    problems.push_back("resource limits need cgroup v2, which is not usable on this node (" + reason_ +
                       "); set cgroup_allow_without_limits in the agent config to run such jobs without limits");
    return problems;
  }
  std::string enabled = JoinControllers(controllers_);
  // A missing controller refuses the limit, or, when allowed, leaves it
  // unenforced (its value is still checked).
  auto need = [&](bool set, const char* field, const char* controller) {
    if (set && !controllers_.count(controller) && !allow_without_limits) {
      problems.push_back(Format("%s needs the %s controller, which is not available here (enabled: %s)", field,
                                controller, enabled.c_str()));
      return false;
    }
    return set;
  };

  if (need(r.cpu_weight != 0, "cpu.weight", "cpu") && r.cpu_weight > 10000) {
    problems.push_back(Format("cpu.weight must be between 1 and 10000 (got %llu)",
                              static_cast<unsigned long long>(r.cpu_weight)));
  }
  if (need(r.cpu_max_quota_us >= 0 || r.cpu_max_period_us != 100000, "cpu.max", "cpu")) {
    // The kernel's bounds (kernel/sched/core.c): 1ms <= period <= 1s,
    // quota >= 1ms.
    if (r.cpu_max_period_us < 1000 || r.cpu_max_period_us > 1000000) {
      problems.push_back("cpu.max period must be between 1000 and 1000000 microseconds");
    }
    if (r.cpu_max_quota_us >= 0 && r.cpu_max_quota_us < 1000) {
      problems.push_back("cpu.max quota must be at least 1000 microseconds");
    }
  }
  struct CpusetField {
    const char* field;
    const std::string& value;
    const std::string& effective;
    const char* what;
  };
  for (const CpusetField& f : {CpusetField{"cpuset.cpus", r.cpuset_cpus, effective_cpus_, "CPUs"},
                               CpusetField{"cpuset.mems", r.cpuset_mems, effective_mems_, "memory nodes"}}) {
    if (!need(!f.value.empty(), f.field, "cpuset")) continue;
    std::set<int> want, have;
    if (!ParseCpuList(f.value, &want) || want.empty()) {
      problems.push_back(Format("%s \"%s\" is not a list like 0-3,5", f.field, f.value.c_str()));
      continue;
    }
    if (f.effective.empty() || !ParseCpuList(f.effective, &have)) continue;  // unknown: the kernel decides
    for (int n : want) {
      if (!have.count(n)) {
        problems.push_back(Format("%s \"%s\" is outside this node's %s %s", f.field, f.value.c_str(), f.what,
                                  f.effective.c_str()));
        break;
      }
    }
  }
  struct MemField {
    const char* field;
    int64_t value;
    bool has_minimum;
  };
  for (const MemField& f : {MemField{"memory.max", r.memory_max, true}, MemField{"memory.high", r.memory_high, true},
                            MemField{"memory.low", r.memory_low, false},
                            MemField{"memory.swap.max", r.memory_swap_max, false}}) {
    if (!need(f.value >= 0, f.field, "memory")) continue;
    if (f.has_minimum && f.value < kMinMemory) problems.push_back(Format("%s must be at least 1MiB", f.field));
  }
  if (r.memory_swap_max >= 0 && controllers_.count("memory") &&
      ::access((root() + "/memory.swap.max").c_str(), F_OK) != 0) {
    problems.push_back("memory.swap.max needs swap accounting, which this kernel does not have");
  }
  need(r.pids_max >= 0, "pids.max", "pids");
  for (const auto& [size, max] : r.hugetlb_max) {
    (void)max;
    need(true, ("hugetlb." + size + ".max").c_str(), "hugetlb");
  }
  for (const auto& [file, value] : r.unified) {
    (void)value;
    // A cgroup interface file of the task's own cgroup, by its bare name.
    if (file.empty() || file.find('/') != std::string::npos || file.compare(0, 7, "cgroup.") == 0 ||
        file.find('.') == std::string::npos) {
      problems.push_back(Format("unified key \"%s\" is not a controller file name like memory.oom.group",
                                file.c_str()));
    } else if (Managed(ControllerOf(file))) {
      need(true, file.c_str(), ControllerOf(file).c_str());
    }
  }
  if (need(r.io_weight != 0, "io.weight", "io") && r.io_weight > 10000) {
    problems.push_back(
        Format("io.weight must be between 1 and 10000 (got %llu)", static_cast<unsigned long long>(r.io_weight)));
  }
  if (need(!r.io_max.empty(), "io.max", "io")) {
    for (const IoDeviceLimit& d : r.io_max) {
      std::string sys = Format("/sys/dev/block/%u:%u", d.major, d.minor);
      if (::access(sys.c_str(), F_OK) != 0) {
        problems.push_back(Format("io.max device %s does not exist", DeviceName(d).c_str()));
      } else if (::access((sys + "/partition").c_str(), F_OK) == 0) {
        // blk-cgroup takes whole disks only (ENODEV for a partition).
        problems.push_back(Format("io.max device %s is a partition; io.max takes whole disks", DeviceName(d).c_str()));
      }
    }
  }
  return problems;
}

}  // namespace outpost::cgroup
