// Driver conformance checks (spec A9, the items that apply to outpost
// drivers). Owns: the check list and an asynchronous runner over the
// Driver interface alone, so the built-in exec driver and any driver plugin
// are checked by the same code. Does not own: finding the driver (the
// caller's registry) or reporting (the API and CLI).
//
// Each check uses its own task ids ("conformance-<n>"), a task dir and log
// files under opts.work_dir, one deadline, and ends by destroying (force)
// every task it started, also when it failed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "driver/driver.h"
#include "loop/loop.h"

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
};

// Runs every check in order; done gets all results. The driver and loop
// must outlive the run.
void RunConformance(Loop& loop, Driver& driver, const ConformanceOptions& opts,
                    std::function<void(std::vector<CheckResult>)> done);

}  // namespace outpost::driver
