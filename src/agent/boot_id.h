// Whether a worker is the first since the node booted (so that nothing of
// an earlier agent can be left to look for): the boot id recorded in the
// state dir and the runtime dir. docs/process-model.md says why this is safe.
#pragma once

#include <string>

namespace outpost::agent {

// Records this boot's id in both dirs, and says whether this is the first
// worker of the boot (see boot_id.cc for the rule).
bool FirstStartSinceBoot(const std::string& state_dir, const std::string& runtime_dir);

}  // namespace outpost::agent
