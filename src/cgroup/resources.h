// The cgroup v2 limits of a task or a job, as the job spec states them and
// the cgroup code writes them (docs/job-spec.md names the file each writes).
// Owns: the types only; validation is job/spec_resources, writing is
// cgroup/limits.
#pragma once

#include <cstdint>
#include <map>
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

}  // namespace outpost::cgroup
