// Between outpost's task types and NRI's (docs/nri.md "What each driver
// applies"). Owns: a task as the NRI container plugins see, limits in NRI
// form and back (cpu shares <-> cpu.weight as runc converts them, OCI swap
// <-> memory.swap.max), rlimit and hook forms, and applying a merged
// CreateContainer adjustment to a task's config: every field is either
// applied or refused with an error naming the plugin and the field (never
// dropped).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "cgroup/resources.h"
#include "driver/driver.h"
#include "hooks/hook.h"
#include "nri/merge.h"
#include "outpost/nri_api.h"

namespace outpost::nri {

Resources ToNri(const cgroup::Resources& r);
// Applies the fields r sets onto *out (r's unset fields leave *out as is).
// Fields cgroup v2 has no file for are errors naming the field
// ("memory.kernel has no cgroup v2 equivalent").
Status ApplyResources(const Resources& r, cgroup::Resources* out);
uint64_t SharesToWeight(uint64_t shares);
uint64_t WeightToShares(uint64_t weight);  // SharesToWeight(WeightToShares(w)) == w

Rlimit ToNri(const proc::Rlimit& r);      // "nofile" -> "RLIMIT_NOFILE"
Hooks ToNri(const hooks::HookSet& set);

// A task as an NRI container (state, pid and times as given).
Container ToContainer(const driver::TaskConfig& c, ContainerState state);

// Applies a merged adjustment to c. claims say which plugin set which
// field, for the errors. caps: what c's driver can apply.
Status ApplyAdjustment(const ContainerAdjustment& adj, const std::vector<Claim>& claims,
                       const driver::Capabilities& caps, driver::TaskConfig* c);

}  // namespace outpost::nri
