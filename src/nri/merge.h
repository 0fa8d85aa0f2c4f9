// Combining NRI plugins' answers to one event, exactly as containerd/nri's
// adaptation does (pkg/adaptation/result.go, pkg/api/owners.go; docs/nri.md
// "Merging"). Owns: the request as it is mutated between plugins, the merged
// adjustment and updates, per-field ownership and the upstream conflict
// messages. Does not own: calling plugins, timeouts, or applying anything
// to a task (nri/adaptation, task/nri_steps).
//
// Errors use upstream's texts, for example
//   plugins "20-b" and "10-a" both tried to set Annotations foo
//   plugin "10-a" asked update of "ctr1" during creation
// A plugin id is "<index>-<name>".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "outpost/nri_api.h"

namespace outpost::nri {

// Field numbers of upstream's Field enum (ownership keys).
enum class Field : int32_t {
  kAnnotations = 1, kMounts = 2, kOciHooks = 3, kDevices = 4, kCdiDevices = 5, kEnv = 6, kArgs = 7,
  kMemLimit = 8, kMemReservation = 9, kMemSwapLimit = 10, kMemKernelLimit = 11, kMemTCPLimit = 12,
  kMemSwappiness = 13, kMemDisableOomKiller = 14, kMemUseHierarchy = 15, kCPUShares = 16, kCPUQuota = 17,
  kCPUPeriod = 18, kCPURealtimeRuntime = 19, kCPURealtimePeriod = 20, kCPUSetCPUs = 21, kCPUSetMems = 22,
  kPidsLimit = 23, kHugepageLimits = 24, kBlockioClass = 25, kRdtClass = 26, kCgroupsUnified = 27,
  kCgroupsPath = 28, kOomScoreAdj = 29, kRlimits = 30, kIoPriority = 31, kSeccompPolicy = 32,
  kNamespace = 33, kSysctl = 34, kLinuxNetDevices = 35, kLinuxSched = 36, kRdtClosID = 37,
  kRdtSchemata = 38, kRdtEnableMonitoring = 39, kMemoryPolicy = 40,
};
// Upstream's name of a field as conflict messages print it ("Annotations",
// "MemLimit", ...).
const char* FieldName(Field f);

// "10-logger".
std::string PluginId(const std::string& index, const std::string& name);

// One claim recorded for `outpost inspect`: which plugin set what.
struct Claim {
  std::string plugin;  // "10-a"
  Field field;
  std::string key;  // the compound key ("" for simple fields)
  bool removed = false;
};

// CreateContainer across plugins.
class CreateResult {
 public:
  CreateResult(const PodSandbox& pod, const Container& container);

  // One plugin's answer, in call order. Mutates the request the next
  // plugin sees, merges into the adjustment, records owners. An error
  // (conflict, update of the container being created, a bad value) fails
  // the creation; the result must not be used further.
  Status Apply(const std::string& plugin, const CreateContainerResponse& resp);

  const PodSandbox& pod() const { return pod_; }
  const Container& request() const { return current_; }   // as the next plugin sees it
  const Container& pristine() const { return pristine_; }  // for validators
  const ContainerAdjustment& adjustment() const { return adjust_; }
  const std::vector<ContainerUpdate>& updates() const { return updates_; }
  const OwningPlugins& owners() const { return owners_; }
  const std::vector<Claim>& claims() const { return claims_; }

 private:
  PodSandbox pod_;
  Container pristine_;
  Container current_;
  ContainerAdjustment adjust_;
  std::vector<ContainerUpdate> updates_;
  OwningPlugins owners_;
  std::vector<Claim> claims_;
  // implementation state as needed
};

// UpdateContainer (and UpdateContainers/StopContainer/Synchronize updates):
// per target container, the merged resources with simple-field ownership;
// ignore_failure AND-ed across plugins.
class UpdateResult {
 public:
  // target: the container being updated ("" for none: StopContainer,
  // unsolicited updates); its resources as requested.
  UpdateResult(const std::string& target, const Resources& requested);
  Status Apply(const std::string& plugin, const std::vector<ContainerUpdate>& updates);
  // The merged resources of the container being updated (requested + what
  // plugins changed).
  const Resources& target_resources() const;
  // Updates of other containers, merged per id, in first-seen order.
  std::vector<ContainerUpdate> others() const;

 private:
  std::string target_;
  Resources target_res_;
  std::map<std::string, ContainerUpdate> by_id_;
  std::vector<std::string> order_;
  OwningPlugins owners_;
};

}  // namespace outpost::nri
