// What an update of a job changes. Owns: comparing a job's stored spec with
// a submitted one task by task — which tasks are new, which must restart
// (their fingerprint changed, or a limit is dropped: a running cgroup cannot
// be told "no value"), which only get new limits live, which are gone, and
// whether anything changed at all. Does not act on it (job/manager does).
#pragma once

#include <string>
#include <vector>

#include "job/spec.h"

namespace outpost::job {

struct SpecDiff {
  bool changed = false;    // anything at all (also order, labels, job fields)
  bool job_limits = false; // the job cgroup's limits changed
  std::vector<std::string> added;
  std::vector<std::string> restarted;  // spec changed: restart
  std::vector<std::string> updated;    // limits only: applied live
  std::vector<std::string> removed;

  bool Restarts(const std::string& name) const;
  bool Updates(const std::string& name) const;
};

SpecDiff DiffSpecs(const JobSpec& old_spec, const JobSpec& next);

// Whether a limit set in a is unset in b.
bool DropsALimit(const cgroup::Resources& a, const cgroup::Resources& b);

}  // namespace outpost::job
