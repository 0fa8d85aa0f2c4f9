// Combining NRI plugins' answers to one event, exactly as containerd/nri's
// adaptation does (pkg/adaptation/result.go, pkg/api/owners.go; docs/nri.md
// "Merging"). Owns: the request as it is mutated between plugins, the merged
// adjustment and updates, per-field ownership and the upstream conflict
// messages. Does not own: calling plugins, timeouts, or applying anything
// to a task (nri/adaptation, task/nri_steps).
//
// Errors use upstream's texts, for example
//   plugins "20-b" and "10-a" both tried to set Annotations foo
//   plugins "20-b" and "10-a" both tried to set MemLimit      (note: upstream
//     joins the field name and the empty key with a space, so a simple
//     field's message ends in "MemLimit ")
//   plugin "10-a" asked update of "ctr1" during creation
// A plugin id is "<index>-<name>".
//
// Upstream quirks kept on purpose (a Go runtime behaves the same way):
//   - a pure removal ("-k" with no "k" in the same answer) of an annotation,
//     sysctl or net device is forwarded as a marker but neither clears the
//     earlier owner nor removes the entry from the request;
//   - a pure removal of a device or an env variable removes it from the
//     request and from earlier plugins' adjustments but is not forwarded
//     as a marker (mounts are);
//   - namespace removals are claims like additions ("-net" then "net" from
//     one plugin conflicts);
//   - an args adjustment whose first element is "" clears the earlier
//     owner; the rest replaces the args.
// The raw (encoded) linux fields are owned as simple fields: IoPriority,
// SeccompPolicy, LinuxSched, MemoryPolicy; net devices per host interface;
// LinuxRdt per part (RdtClosID, RdtSchemata, RdtEnableMonitoring), its
// remove=true clearing all three (merge_rdt.cc). The request has no place
// for them, so later plugins do not see them there.
// One deliberate difference: upstream files a pure sysctl removal's marker
// under the annotations (a typo); here it goes to linux.sysctl.
// Submessages of the merged adjustment are created only when something is
// set in them (upstream sends empty ones; the meaning is the same).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "outpost/nri_api.h"

namespace outpost::nri {

// Field numbers of upstream's Field enum (ownership keys).
enum class Field : int32_t {
  kAnnotations = 1,
  kMounts = 2,
  kOciHooks = 3,
  kDevices = 4,
  kCdiDevices = 5,
  kEnv = 6,
  kArgs = 7,
  kMemLimit = 8,
  kMemReservation = 9,
  kMemSwapLimit = 10,
  kMemKernelLimit = 11,
  kMemTCPLimit = 12,
  kMemSwappiness = 13,
  kMemDisableOomKiller = 14,
  kMemUseHierarchy = 15,
  kCPUShares = 16,
  kCPUQuota = 17,
  kCPUPeriod = 18,
  kCPURealtimeRuntime = 19,
  kCPURealtimePeriod = 20,
  kCPUSetCPUs = 21,
  kCPUSetMems = 22,
  kPidsLimit = 23,
  kHugepageLimits = 24,
  kBlockioClass = 25,
  kRdtClass = 26,
  kCgroupsUnified = 27,
  kCgroupsPath = 28,
  kOomScoreAdj = 29,
  kRlimits = 30,
  kIoPriority = 31,
  kSeccompPolicy = 32,
  kNamespace = 33,
  kSysctl = 34,
  kLinuxNetDevices = 35,
  kLinuxSched = 36,
  kRdtClosID = 37,
  kRdtSchemata = 38,
  kRdtEnableMonitoring = 39,
  kMemoryPolicy = 40,
};
// Upstream's name of a field as conflict messages print it ("Annotations",
// "MemLimit", ...).
const char* FieldName(Field f);

// "10-logger".
std::string PluginId(const std::string& index, const std::string& name);
// Go's %q of s (how upstream's messages print plugin and container ids).
std::string GoQuote(const std::string& s);

// One claim recorded for `outpost inspect`: which plugin set what.
struct Claim {
  std::string plugin;  // "10-a"
  Field field;
  std::string key;  // the compound key ("" for simple fields)
  bool removed = false;
  std::string container;  // the container the claim is about
};

// Ownership for one event: upstream's OwningPlugins plus a log of claims.
class OwnerBook {
 public:
  Status ClaimSimple(const std::string& id, Field f, const std::string& plugin);
  Status ClaimCompound(const std::string& id, Field f, const std::string& key, const std::string& plugin);
  // Marks the field (key) as removed by plugin ("-<plugin>"): the remover
  // may claim it again, anyone else still conflicts with the remover.
  void ClearSimple(const std::string& id, Field f, const std::string& plugin);
  void ClearCompound(const std::string& id, Field f, const std::string& key, const std::string& plugin);
  // Hooks never conflict: the owner is the comma-joined list of plugins.
  void AccumulateHooks(const std::string& id, const std::string& plugin);

  const OwningPlugins& owners() const { return owners_; }
  const std::vector<Claim>& claims() const { return claims_; }

 private:
  OwningPlugins owners_;
  std::vector<Claim> claims_;
};

// Merges one plugin's resources into *dst with simple/compound ownership
// under container id, exactly like upstream's update path (hugepage limits
// appended, unified keys set, device cgroup rules ignored). On error *dst
// may be partly changed; callers work on a copy.
Status MergeUpdateResources(OwnerBook* book, const std::string& id, const std::string& plugin, const Resources& src,
                            Resources* dst);
// The same with a merged adjustment next to the request (CreateContainer):
// values go to both, and device cgroup rules are appended unowned.
Status MergeResourcesInto(OwnerBook* book, const std::string& id, const std::string& plugin, const Resources& src,
                          Resources* req, Resources* adj);

// ContainerUpdates of containers other than the one an event is about,
// merged per id in first-seen order (shared by CreateResult and
// UpdateResult). An update whose merge fails with ignore_failure set is
// dropped whole: neither its values nor its ownership claims stay.
class UpdateMerger {
 public:
  // target: the container whose updates are kept apart ("" for none),
  // with the resources a plugin's update starts from.
  UpdateMerger(std::string target, Resources target_res);
  Status Apply(OwnerBook* book, const std::string& plugin, const ContainerUpdate& u);
  const std::vector<ContainerUpdate>& others() const { return others_; }
  const Resources& target_resources() const { return target_res_; }
  const std::optional<ContainerUpdate>& target_update() const { return target_update_; }

 private:
  std::string target_;
  Resources target_res_;
  std::optional<ContainerUpdate> target_update_;
  std::vector<ContainerUpdate> others_;
  std::map<std::string, size_t> index_;
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
  const Container& request() const { return current_; }    // as the next plugin sees it
  const Container& pristine() const { return pristine_; }  // for validators
  const ContainerAdjustment& adjustment() const { return adjust_; }
  const std::vector<ContainerUpdate>& updates() const { return updates_.others(); }
  const OwningPlugins& owners() const { return book_.owners(); }
  const std::vector<Claim>& claims() const { return book_.claims(); }

 private:
  Status Adjust(const std::string& plugin, const ContainerAdjustment& a);
  Status AdjustMounts(const std::string& plugin, const std::vector<Mount>& in);
  Status AdjustEnv(const std::string& plugin, const std::vector<KeyValue>& in);
  Status AdjustArgs(const std::string& plugin, const std::vector<std::string>& in);
  void AdjustHooks(const std::string& plugin, const Hooks& in);
  Status AdjustDevices(const std::string& plugin, const std::vector<Device>& in);
  Status AdjustResources(const std::string& plugin, const Resources& in);
  Status AdjustNamespaces(const std::string& plugin, const std::vector<Namespace>& in);
  Status AdjustKeyed(const std::string& plugin, Field f, const std::map<std::string, std::string>& in,
                     std::map<std::string, std::string>* request, std::map<std::string, std::string>* out);
  Status AdjustRaw(const std::string& plugin, Field f, const std::optional<std::string>& in,
                   std::optional<std::string> LinuxAdjustment::*out);
  Status AdjustRdt(const std::string& plugin, const std::string& raw);
  Status AdjustRlimits(const std::string& plugin, const std::vector<Rlimit>& in);
  Status AdjustCdiDevices(const std::string& plugin, const std::vector<std::string>& in);
  LinuxAdjustment& linux();
  Resources& adjust_resources();
  Resources& request_resources();

  PodSandbox pod_;
  Container pristine_;
  Container current_;
  ContainerAdjustment adjust_;
  OwnerBook book_;
  UpdateMerger updates_;
  // The merged LinuxRdt, kept as the encoded entries of clos_id (1),
  // schemata (2) and enable_monitoring (3), plus remove (4).
  std::map<int, std::string> rdt_parts_;
  bool rdt_remove_ = false;
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
  // plugins changed); what the next plugin is asked with.
  const Resources& target_resources() const { return merger_.target_resources(); }
  // Upstream's last element of the UpdateContainer reply: the target's
  // merged update, absent when no plugin sent one for it. Its resources
  // are the requested ones plus plugins' changes once any plugin changed
  // something; ignore_failure is AND-ed.
  const std::optional<ContainerUpdate>& target_update() const { return merger_.target_update(); }
  // Updates of other containers, merged per id, in first-seen order.
  std::vector<ContainerUpdate> others() const { return merger_.others(); }
  const OwningPlugins& owners() const { return book_.owners(); }
  const std::vector<Claim>& claims() const { return book_.claims(); }

 private:
  OwnerBook book_;
  UpdateMerger merger_;
};

}  // namespace outpost::nri
