// A task's OCI bundle: a directory with a config.json describing the task as
// a runtime-spec 1.x document, for hooks written for runc/crun/Kata/podman
// that open <bundle>/config.json. Owns: building that document from what the
// task layer knows, and writing it atomically. The exec driver isolates no
// file system: `root` is the host root, read-write.
#pragma once

#include <picojson.h>
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "cgroup/resources.h"
#include "hooks/hook.h"
#include "proc/spawn.h"

namespace outpost::hooks {

// A bind mount into the task.
struct Mount {
  std::string source;
  std::string destination;
  bool readonly = false;
  bool operator==(const Mount& o) const {
    return source == o.source && destination == o.destination && readonly == o.readonly;
  }
};

// A device node to create in the task, with access to it allowed ("rwm").
struct Device {
  std::string path;  // absolute, in the task
  std::string type;  // "c", "b", "u", "p"
  int64_t major = 0;
  int64_t minor = 0;
  std::optional<uint32_t> file_mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::string host_path;  // where the node has it ("" = path): a device plugin's grant may differ
  std::string access;     // the cgroup rule's access, of r, w, m ("" = "rwm")
};

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
  std::vector<Mount> bind_mounts;        // mounts (NRI), after the standard ones
  std::vector<Device> devices;           // linux.devices, each allowed in linux.resources.devices
  std::optional<int> oom_score_adj;      // process.oomScoreAdj
  HookSet hooks;                         // the merged hooks
  std::map<std::string, std::string> annotations;
};

// The config.json document.
picojson::value BundleConfig(const BundleInput& in);

// The document, checked as a runtime would (InvalidArgument naming the
// field), as text: indented or compact.
Result<std::string> BundleText(const BundleInput& in, bool indent);

// Writes <dir>/config.json (dir created 0755 if missing) atomically: a
// temporary file, then rename; not fsync'd (it describes a running task and
// is rewritten at its next start).
Status WriteBundle(const std::string& dir, const BundleInput& in);

}  // namespace outpost::hooks
