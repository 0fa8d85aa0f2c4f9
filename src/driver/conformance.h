// Driver conformance checks (spec A9, the items that apply to outpost
// drivers). Owns: the check list and an asynchronous runner over the
// Driver interface alone, so the built-in exec driver and any driver plugin
// are checked by the same code. Does not own: the drivers (the caller's
// registry, where the runner looks the driver up by name at every step: a
// plugin may deregister mid-check) or reporting (the API and CLI).
//
// Each check uses its own task ids ("conformance-<n>"), a task dir and log
// files under opts.work_dir, one deadline, and ends by destroying (force)
// every task it started, also when it failed. With cgroup v2 each task
// gets a cgroup of its own, as the task layer's start pipeline gives one
// (<root>/_tasks/<task id>), killed and removed when the check ends.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "driver/registry.h"
#include "loop/loop.h"
#include "proc/users.h"

namespace outpost::cgroup {
class Cgroups;
}

namespace outpost::driver {

enum class CheckOutcome { kPass, kFail, kSkip };
const char* CheckOutcomeName(CheckOutcome o);  // "pass", "fail", "skip"

struct CheckResult {
  std::string name;
  CheckOutcome outcome = CheckOutcome::kPass;
  std::string detail;  // why it failed or was skipped
  int64_t duration_nanos = 0;
};

struct ConformanceOptions {
  std::string work_dir;  // must exist; task dirs and logs go below it
  int64_t check_timeout_nanos = 15LL * 1000000000;
  // The node's cgroups (null or !available(): none; destroy-kills-all is
  // then skipped). Must outlive the run.
  cgroup::Cgroups* cgroups = nullptr;
  // Where users are resolved, as the start pipeline does (bad-user).
  proc::UserDb users;
  // The `config` object (JSON) of every check's task ("" = none).
  std::string driver_config;
};

// Runs every check in order on the driver registered in `drivers` as
// `name`; done gets all results. Once the name is no longer registered,
// the check under way and every later one fail with "driver <name> went
// away during the check". The registry and loop must outlive the run.
void RunConformance(Loop& loop, const Registry& drivers, const std::string& name, const ConformanceOptions& opts,
                    std::function<void(std::vector<CheckResult>)> done);

}  // namespace outpost::driver
