// A task's OCI bundle: a directory with a config.json describing the task as
// a runtime-spec 1.x document, for hooks written for runc/crun/Kata/podman
// that open <bundle>/config.json. Owns: building that document from what the
// task layer knows, and writing it atomically. The exec driver isolates no
// file system: `root` is the host root, read-write.
#pragma once

#include <picojson.h>
#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "cgroup/resources.h"
#include "hooks/hook.h"
#include "proc/spawn.h"

namespace outpost::hooks {

struct BundleInput {
  std::string id;                        // the task's id (used for hostname when none)
  std::vector<std::string> args;         // process.args: the resolved command first
  std::vector<std::string> env;          // process.env, "K=V"
  std::string cwd;                       // process.cwd (absolute)
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> additional_gids;
  std::vector<proc::Rlimit> rlimits;     // process.rlimits (RLIMIT_<NAME upper>)
  std::string hostname;                  // "" = the node's
  std::string cgroup_path;               // linux.cgroupsPath (the task's cgroup, absolute below the cgroup2 root); "" = none
  cgroup::Resources resources;           // linux.resources, in OCI form, only what is set
  std::vector<std::string> namespaces;   // linux.namespaces types the task has of its own ("network", ...)
  std::map<std::string, std::string> namespace_paths;  // type -> path (e.g. network -> /run/netns/outpost-job)
  HookSet hooks;                         // the merged hooks
  std::map<std::string, std::string> annotations;
};

// The config.json document.
picojson::value BundleConfig(const BundleInput& in);

// Writes <dir>/config.json (dir created 0755 if missing) atomically: a
// temporary file, then rename; not fsync'd (it describes a running task and
// is rewritten at its next start).
Status WriteBundle(const std::string& dir, const BundleInput& in);

}  // namespace outpost::hooks
