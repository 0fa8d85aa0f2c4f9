#include "job/diff.h"

#include <algorithm>
#include <map>
#include <set>

namespace outpost::job {

bool DropsALimit(const cgroup::Resources& a, const cgroup::Resources& b) {
  return (a.cpu_weight && !b.cpu_weight) || (a.cpu_max_quota_us >= 0 && b.cpu_max_quota_us < 0) ||
         (!a.cpuset_cpus.empty() && b.cpuset_cpus.empty()) || (!a.cpuset_mems.empty() && b.cpuset_mems.empty()) ||
         (a.memory_max >= 0 && b.memory_max < 0) || (a.memory_high >= 0 && b.memory_high < 0) ||
         (a.memory_low >= 0 && b.memory_low < 0) || (a.memory_swap_max >= 0 && b.memory_swap_max < 0) ||
         (a.pids_max >= 0 && b.pids_max < 0) || (a.io_weight && !b.io_weight) || a.io_max.size() > b.io_max.size();
}

bool SpecDiff::Restarts(const std::string& name) const {
  return std::find(restarted.begin(), restarted.end(), name) != restarted.end();
}

bool SpecDiff::Updates(const std::string& name) const {
  return std::find(updated.begin(), updated.end(), name) != updated.end();
}

SpecDiff DiffSpecs(const JobSpec& old_spec, const JobSpec& next) {
  SpecDiff d;
  std::map<std::string, const TaskSpec*> old_tasks;
  for (const TaskSpec& s : old_spec.tasks) old_tasks[s.name] = &s;
  d.job_limits = ResourcesFingerprint(old_spec.resources) != ResourcesFingerprint(next.resources);
  d.changed = old_spec.labels != next.labels || old_spec.annotations != next.annotations ||
              old_spec.tasks.size() != next.tasks.size() || d.job_limits ||
              old_spec.min_healthy_time_nanos != next.min_healthy_time_nanos;
  std::set<std::string> names;
  for (size_t i = 0; i < next.tasks.size(); i++) {
    const TaskSpec& s = next.tasks[i];
    names.insert(s.name);
    auto o = old_tasks.find(s.name);
    if (o == old_tasks.end()) {
      d.added.push_back(s.name);
      d.changed = true;
    } else if (TaskFingerprint(*o->second) != TaskFingerprint(s)) {
      d.restarted.push_back(s.name);
      d.changed = true;
    } else if (ResourcesFingerprint(o->second->resources) != ResourcesFingerprint(s.resources)) {
      // Limits only: applied live, unless one is dropped altogether.
      (DropsALimit(o->second->resources, s.resources) ? d.restarted : d.updated).push_back(s.name);
      d.changed = true;
    } else if (i < old_spec.tasks.size() && old_spec.tasks[i].name != s.name) {
      d.changed = true;  // order only
    }
  }
  for (const auto& [name, spec] : old_tasks) {
    if (!names.count(name)) d.removed.push_back(name);
  }
  return d;
}

}  // namespace outpost::job
