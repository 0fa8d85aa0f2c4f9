// The NRI API (containerd/nri, package nri.pkg.api.v1alpha1) as plain C++17
// values: what an NRI plugin and a runtime say to each other. Shared by
// outpost's runtime side (the agent) and the C++ NRI plugin library
// (outpost/nri.h); the wire codec turns these into the protobuf messages a
// Go peer reads, with the upstream field numbers (docs/nri.md).
//
// Conventions:
//   - std::optional marks upstream's Optional* wrappers and singular
//     messages: present means "set", as on the wire.
//   - Maps are std::map (the wire order of a map is not significant).
//   - Fields outpost never reads or applies (io priority, seccomp, the
//     scheduler, RDT, memory policy, net devices) are kept as the encoded
//     bytes of their message ("raw"), so an adjustment that sets one is
//     forwarded intact to later plugins and validators and can be refused
//     by name instead of being dropped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace outpost::nri {

// Event numbers and the subscription mask (bit = 1 << (event - 1)).
enum class Event : int32_t {
  kUnknown = 0,
  kRunPodSandbox = 1,
  kStopPodSandbox = 2,
  kRemovePodSandbox = 3,
  kCreateContainer = 4,
  kPostCreateContainer = 5,
  kStartContainer = 6,
  kPostStartContainer = 7,
  kUpdateContainer = 8,
  kPostUpdateContainer = 9,
  kStopContainer = 10,
  kRemoveContainer = 11,
  kUpdatePodSandbox = 12,
  kPostUpdatePodSandbox = 13,
  kValidateContainerAdjustment = 14,
  kLast = 15,
};
constexpr uint32_t EventMask(Event e) { return 1u << (static_cast<int32_t>(e) - 1); }
// Every event a v0.10+ runtime knows (events 1..14); 0x7FF before v0.10.
constexpr uint32_t kValidEvents = (1u << (static_cast<int32_t>(Event::kLast) - 1)) - 1;
// The Plugin service's method for an event: "RunPodSandbox", ... ("" for
// kUnknown and kLast).
const char* EventMethod(Event e);

inline constexpr const char kPluginService[] = "nri.pkg.api.v1alpha1.Plugin";
inline constexpr const char kRuntimeService[] = "nri.pkg.api.v1alpha1.Runtime";
// NRI multiplexer connection ids.
constexpr uint32_t kPluginServiceConn = 1;
constexpr uint32_t kRuntimeServiceConn = 2;

enum class ContainerState : int32_t { kUnknown = 0, kCreated = 1, kPaused = 2, kRunning = 3, kStopped = 4 };

struct KeyValue {
  std::string key;
  std::string value;
};

struct Mount {
  std::string destination;
  std::string type;
  std::string source;
  std::vector<std::string> options;
};

struct Hook {
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int64_t> timeout;  // seconds
};

struct Hooks {
  std::vector<Hook> prestart;
  std::vector<Hook> create_runtime;
  std::vector<Hook> create_container;
  std::vector<Hook> start_container;
  std::vector<Hook> poststart;
  std::vector<Hook> poststop;
  bool empty() const {
    return prestart.empty() && create_runtime.empty() && create_container.empty() && start_container.empty() &&
           poststart.empty() && poststop.empty();
  }
};

struct Rlimit {  // POSIXRlimit
  std::string type;  // "RLIMIT_NOFILE", ...
  uint64_t hard = 0;
  uint64_t soft = 0;
};

struct Namespace {
  std::string type;  // "network", "mount", ...
  std::string path;
};

struct Device {  // LinuxDevice
  std::string path;
  std::string type;  // "c", "b", "u", "p"
  int64_t major = 0;
  int64_t minor = 0;
  std::optional<uint32_t> file_mode;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
};

struct DeviceCgroup {  // LinuxDeviceCgroup
  bool allow = false;
  std::string type;
  std::optional<int64_t> major;
  std::optional<int64_t> minor;
  std::string access;
};

struct HugepageLimit {
  std::string page_size;  // "2MB", "1GB"
  uint64_t limit = 0;
};

struct Memory {  // LinuxMemory
  std::optional<int64_t> limit;
  std::optional<int64_t> reservation;
  std::optional<int64_t> swap;
  std::optional<int64_t> kernel;
  std::optional<int64_t> kernel_tcp;
  std::optional<uint64_t> swappiness;
  std::optional<bool> disable_oom_killer;
  std::optional<bool> use_hierarchy;
};

struct Cpu {  // LinuxCPU
  std::optional<uint64_t> shares;
  std::optional<int64_t> quota;
  std::optional<uint64_t> period;
  std::optional<int64_t> realtime_runtime;
  std::optional<uint64_t> realtime_period;
  std::string cpus;
  std::string mems;
};

struct Resources {  // LinuxResources
  std::optional<Memory> memory;
  std::optional<Cpu> cpu;
  std::vector<HugepageLimit> hugepage_limits;
  std::optional<std::string> blockio_class;
  std::optional<std::string> rdt_class;
  std::map<std::string, std::string> unified;
  std::vector<DeviceCgroup> devices;
  std::optional<int64_t> pids_limit;  // LinuxPids{limit}; present = the message is
};

struct User {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> additional_gids;
};

struct PodSandbox {
  std::string id;
  std::string name;
  std::string uid;
  std::string namespace_;  // "namespace" on the wire
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string runtime_handler;
  // LinuxPodSandbox (sent when any of these is set)
  std::optional<Resources> pod_overhead;
  std::optional<Resources> pod_resources;
  std::string cgroup_parent;
  std::string cgroups_path;
  std::vector<Namespace> namespaces;
  std::optional<Resources> resources;
  uint32_t pid = 0;
  std::vector<std::string> ips;
};

struct Container {
  std::string id;
  std::string pod_sandbox_id;
  std::string name;
  ContainerState state = ContainerState::kUnknown;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> args;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<Mount> mounts;
  std::optional<Hooks> hooks;
  // LinuxContainer (sent when any of these is set)
  std::vector<Namespace> namespaces;
  std::vector<Device> devices;
  std::optional<Resources> resources;
  std::optional<int64_t> oom_score_adj;
  std::string cgroups_path;
  std::map<std::string, std::string> sysctl;
  uint32_t pid = 0;
  std::vector<Rlimit> rlimits;
  int64_t created_at = 0;  // unix nanoseconds
  int64_t started_at = 0;
  int64_t finished_at = 0;
  int32_t exit_code = 0;
  std::string status_reason;
  std::string status_message;
  std::vector<std::string> cdi_devices;  // CDIDevice{name}
  std::optional<User> user;
};

struct LinuxAdjustment {  // LinuxContainerAdjustment
  std::vector<Device> devices;  // path "-/dev/x": remove
  std::optional<Resources> resources;
  std::string cgroups_path;
  std::optional<int64_t> oom_score_adj;
  std::vector<Namespace> namespaces;  // type "-net": remove
  std::map<std::string, std::string> sysctl;
  // Never applied by outpost: the encoded messages, kept to forward them
  // and to refuse them by name.
  std::optional<std::string> io_priority_raw;     // field 5
  std::optional<std::string> seccomp_policy_raw;  // field 6
  std::map<std::string, std::string> net_devices_raw;  // field 9: host name -> LinuxNetDevice bytes
  std::optional<std::string> scheduler_raw;       // field 10
  std::optional<std::string> rdt_raw;             // field 11
  std::optional<std::string> memory_policy_raw;   // field 12
};

struct ContainerAdjustment {
  std::map<std::string, std::string> annotations;  // key "-k": remove k
  std::vector<Mount> mounts;                       // destination "-/d": remove
  std::vector<KeyValue> env;                       // key "-K": remove
  std::optional<Hooks> hooks;
  std::optional<LinuxAdjustment> linux;
  std::vector<Rlimit> rlimits;
  std::vector<std::string> cdi_devices;
  std::vector<std::string> args;
};

struct ContainerUpdate {
  std::string container_id;
  std::optional<Resources> resources;  // LinuxContainerUpdate{resources}
  bool ignore_failure = false;
};

struct ContainerEviction {
  std::string container_id;
  std::string reason;
};

struct PluginInstance {
  std::string name;
  std::string index;
};

// Who set what during one event, per container id (Field enum values as
// keys: 1 Annotations ... 40 MemoryPolicy).
struct FieldOwners {
  std::map<int32_t, std::string> simple;
  std::map<int32_t, std::map<std::string, std::string>> compound;
};
using OwningPlugins = std::map<std::string, FieldOwners>;

// ---- requests and responses ----------------------------------------------

struct RegisterPluginRequest {
  std::string plugin_name;
  std::string plugin_idx;
  std::string nri_version;
};

struct ConfigureRequest {
  std::string config;
  std::string runtime_name;
  std::string runtime_version;
  int64_t registration_timeout_ms = 0;
  int64_t request_timeout_ms = 0;
  std::string nri_version;
};

struct ConfigureResponse {
  int32_t events = 0;              // 0 = every valid event
  int64_t request_timeout_ms = 0;  // asked by the plugin (newer stubs); 0 = none
};

struct SynchronizeRequest {
  std::vector<PodSandbox> pods;
  std::vector<Container> containers;
  bool more = false;
};

struct SynchronizeResponse {
  std::vector<ContainerUpdate> update;
  bool more = false;
};

// Every event request that carries a pod and/or a container:
// Run/Stop/Remove/PostUpdatePodSandbox (pod only), CreateContainer,
// PostCreate/Start/PostStart/PostUpdate/Stop/RemoveContainer.
struct PodContainerRequest {
  std::optional<PodSandbox> pod;
  std::optional<Container> container;
};

struct UpdatePodSandboxRequest {
  std::optional<PodSandbox> pod;
  std::optional<Resources> overhead_linux_resources;
  std::optional<Resources> linux_resources;
};

struct CreateContainerResponse {
  std::optional<ContainerAdjustment> adjust;
  std::vector<ContainerUpdate> update;
  std::vector<ContainerEviction> evict;
};

struct UpdateContainerRequest {
  std::optional<PodSandbox> pod;
  std::optional<Container> container;
  std::optional<Resources> linux_resources;
};

struct UpdateContainerResponse {
  std::vector<ContainerUpdate> update;
  std::vector<ContainerEviction> evict;
};

struct StopContainerResponse {
  std::vector<ContainerUpdate> update;
};

struct StateChangeEvent {
  Event event = Event::kUnknown;
  std::optional<PodSandbox> pod;
  std::optional<Container> container;
};

struct ValidateContainerAdjustmentRequest {
  std::optional<PodSandbox> pod;
  std::optional<Container> container;  // pristine
  std::optional<ContainerAdjustment> adjust;
  std::vector<ContainerUpdate> update;
  OwningPlugins owners;
  std::vector<PluginInstance> plugins;
};

struct ValidateContainerAdjustmentResponse {
  bool reject = false;
  std::string reason;
};

struct UpdateContainersRequest {
  std::vector<ContainerUpdate> update;
  std::vector<ContainerEviction> evict;
};

struct UpdateContainersResponse {
  std::vector<ContainerUpdate> failed;
};

}  // namespace outpost::nri
