// The cgroup v2 limits of a task or a job, as the job spec states them and
// the cgroup code writes them (docs/job-spec.md names the file each writes).
// Owns: the types only; validation is job/spec_resources, writing is
// cgroup/limits.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace outpost::cgroup {

// One io.max line: limits for one block device ("MAJ:MIN rbps=.. wbps=..").
struct IoDeviceLimit {
  std::string device;  // as the user wrote it ("/dev/vda" or "254:0"), for messages
  uint32_t major = 0;
  uint32_t minor = 0;
  uint64_t rbps = 0;   // 0 = no limit ("max")
  uint64_t wbps = 0;
  uint64_t riops = 0;
  uint64_t wiops = 0;
};

// cgroup v2 limits of a task (or, at job level, of the job's cgroup). Unset
// values leave the kernel's default ("max", weight 100). docs/job-spec.md
// names the cgroup file each one writes.
struct Resources {
  uint64_t cpu_weight = 0;           // cpu.weight 1..10000; 0 = unset
  int64_t cpu_max_quota_us = -1;     // cpu.max quota; -1 = unset ("max")
  uint64_t cpu_max_period_us = 100000;
  std::string cpuset_cpus;           // cpuset.cpus ("" = unset), e.g. "0-1,3"
  std::string cpuset_mems;           // cpuset.mems
  int64_t memory_max = -1;           // bytes; -1 = unset
  int64_t memory_high = -1;
  int64_t memory_low = -1;
  int64_t memory_swap_max = -1;
  int64_t pids_max = -1;             // pids.max; -1 = unset
  uint64_t io_weight = 0;            // io.weight 1..10000; 0 = unset
  std::vector<IoDeviceLimit> io_max;
  // From NRI adjustments (not in the job spec): hugetlb.<size>.max by page
  // size ("2MB"), and cgroup files written verbatim ("memory.oom.group").
  std::map<std::string, uint64_t> hugetlb_max;
  std::map<std::string, std::string> unified;

  bool Any() const {
    return cpu_weight || cpu_max_quota_us >= 0 || !cpuset_cpus.empty() || !cpuset_mems.empty() || memory_max >= 0 ||
           memory_high >= 0 || memory_low >= 0 || memory_swap_max >= 0 || pids_max >= 0 || io_weight ||
           !io_max.empty() || !hugetlb_max.empty() || !unified.empty();
  }
};

// A task's Resources kept out of line (TaskConfig::resources): the worker
// keeps every task's config, and most tasks set no limit, so an unset one
// costs a pointer instead of the 256 bytes of a Resources. Reads see an
// empty Resources when none is held (get(), ->, or the conversion to
// const Resources&); assigning one with nothing set holds none;
// mutable_get() makes one to change in place.
class ResourcesBox {
 public:
  ResourcesBox() = default;
  ResourcesBox(const Resources& r) { *this = r; }  // NOLINT: implicit on purpose, like a Resources member
  ResourcesBox(const ResourcesBox& o) : p_(o.p_ ? std::make_unique<Resources>(*o.p_) : nullptr) {}
  ResourcesBox(ResourcesBox&&) noexcept = default;
  ResourcesBox& operator=(const ResourcesBox& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<Resources>(*o.p_) : nullptr;
    return *this;
  }
  ResourcesBox& operator=(ResourcesBox&&) noexcept = default;
  ResourcesBox& operator=(const Resources& r);

  const Resources& get() const { return p_ ? *p_ : Empty(); }
  operator const Resources&() const { return get(); }  // NOLINT: reads as a Resources
  const Resources* operator->() const { return &get(); }
  Resources& mutable_get();
  bool held() const { return p_ != nullptr; }

 private:
  static const Resources& Empty();
  std::unique_ptr<Resources> p_;
};

}  // namespace outpost::cgroup
