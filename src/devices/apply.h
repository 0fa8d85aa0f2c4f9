// What a task gets for its devices: the ContainerAllocateResponses of its
// resources merged into one grant, as the kubelet merges them for a
// container (pod_devices.go deviceRunContainerOptions), plus the checks the
// kubelet leaves to the runtime (docs/devices.md, "What a task gets").
// Owns: the merge (the first value for a key wins, later conflicting ones
// are dropped with a warning, in resource-name order where the kubelet's
// is Go's map order), the checks of each field (paths absolute, names
// well-formed, permissions of r, w, m), and putting env, annotations and
// CDI names onto a task (the task's own values win, as in the kubelet).
// Does not own: how a driver applies mounts and devices (the exec driver,
// the oci driver's spec), or resolving CDI names (the oci driver's cdi.h).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "devices/codec.h"

namespace outpost::devices {

// The annotation key prefix CDI's ParseAnnotations reads device names from
// (the convention device plugins used before cdi_devices existed, and the
// one outpost hands CDI names to drivers with).
constexpr char kCdiAnnotationPrefix[] = "cdi.k8s.io/";
// Where a grant's cdi_devices go: "cdi.k8s.io/outpost" = "a=x,b=y".
constexpr char kCdiAnnotationKey[] = "cdi.k8s.io/outpost";

struct Grant {
  StringPairs env;          // in merge order
  StringPairs annotations;  // in merge order
  std::vector<Mount> mounts;
  std::vector<DeviceSpec> devices;        // permissions "" made "rwm"
  std::vector<std::string> cdi_devices;   // fully qualified names
  std::vector<std::string> warnings;      // what was dropped, and why (the kubelet logs it)
  bool empty() const {
    return env.empty() && annotations.empty() && mounts.empty() && devices.empty() && cdi_devices.empty();
  }
};

// Merges responses (resource name -> its response; ResponsesOf gives them
// sorted by name). Dedupe keys as the kubelet's: env and annotations by
// name, mounts and devices by container_path, CDI devices by name; the
// first wins. An invalid field fails the whole grant, naming the resource
// and the field:
//   resource vendor.example/camera: devices[0].host_path: must be an absolute path, got "video0"
// Checks: env names non-empty without '='; annotation keys non-empty;
// mount and device paths absolute (a device's container_path defaults to
// its host_path); permissions only r, w, m, each once ("" becomes "rwm", as
// CDI's default); CDI names fully qualified.
Result<Grant> MergeResponses(const std::vector<std::pair<std::string, const ContainerAllocateResponse*>>& responses);

// Puts the grant's env into a task's env, and its annotations (with its
// CDI names under kCdiAnnotationKey) into a task's annotations: a key the
// task sets itself keeps its value (the kubelet lets a container's own env
// and annotations override a device plugin's). Returns the keys the task
// kept, for a warning.
std::vector<std::string> MergeIntoTask(const Grant& grant, std::map<std::string, std::string>* env,
                                       std::map<std::string, std::string>* annotations);

}  // namespace outpost::devices
