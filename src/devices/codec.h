// The kubelet's device plugin messages (v1beta1, proto/deviceplugin.proto)
// as plain structs, both ways: what outpost receives (RegisterRequest,
// DevicePluginOptions, ListAndWatchResponse, PreferredAllocationResponse,
// AllocateResponse) is decoded from untrusted bytes into values or an error
// naming the message and the field, never a crash; what it sends
// (PreferredAllocationRequest, AllocateRequest, PreStartContainerRequest) is
// encoded. The other direction of each exists for tests and the checkpoint
// (ContainerAllocateResponse is kept encoded there, as by the kubelet).
// Owns no transport (the gRPC calls are wire/'s, the sequence the
// registration handler's) and no state (manager.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace outpost::devices {

// grpc-go's default receive limit, the kubelet's: a bigger message is
// refused before nanopb sees it.
constexpr size_t kMaxMessageBytes = 4 << 20;
// Beyond the kubelet, which takes anything: bounds on what one plugin can
// make outpost keep.
constexpr size_t kMaxDevices = 10000;        // per ListAndWatch message (SR-IOV, shared RDMA: thousands)
constexpr size_t kMaxDeviceIdBytes = 1024;   // the API documents 63
constexpr size_t kMaxNumaNodes = 1024;       // per device (the kernel's MAX_NUMNODES)

using StringPairs = std::vector<std::pair<std::string, std::string>>;  // sorted by key, keys unique

struct PluginOptions {
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
  bool operator==(const PluginOptions& o) const {
    return pre_start_required == o.pre_start_required &&
           get_preferred_allocation_available == o.get_preferred_allocation_available;
  }
};

struct RegisterRequest {
  std::string version;
  std::string endpoint;
  std::string resource_name;
  bool has_options = false;  // options are ignored (GetDevicePluginOptions answers), as by current kubelets
  PluginOptions options;
};

struct Device {
  std::string id;
  std::string health;               // kHealthy, or anything else: unhealthy
  std::vector<int64_t> numa_nodes;  // TopologyInfo.nodes[].ID, sorted, unique; empty: no topology
  bool healthy() const;
  bool operator==(const Device& o) const {
    return id == o.id && health == o.health && numa_nodes == o.numa_nodes;
  }
};

// One ContainerPreferredAllocationRequest (the kubelet always sends one).
struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int32_t size = 0;
};

struct Mount {
  std::string container_path;
  std::string host_path;
  bool read_only = false;
  bool operator==(const Mount& o) const {
    return container_path == o.container_path && host_path == o.host_path && read_only == o.read_only;
  }
};

struct DeviceSpec {
  std::string container_path;
  std::string host_path;
  std::string permissions;
  bool operator==(const DeviceSpec& o) const {
    return container_path == o.container_path && host_path == o.host_path && permissions == o.permissions;
  }
};

// What a plugin tells outpost to give a task for the devices it allocated.
// Maps decoded as proto3 does (a repeated key: the last value), sorted.
struct ContainerAllocateResponse {
  StringPairs envs;
  std::vector<Mount> mounts;
  std::vector<DeviceSpec> devices;
  StringPairs annotations;
  std::vector<std::string> cdi_devices;  // CDIDevice.name
  bool operator==(const ContainerAllocateResponse& o) const {
    return envs == o.envs && mounts == o.mounts && devices == o.devices && annotations == o.annotations &&
           cdi_devices == o.cdi_devices;
  }
};

// ---- outpost's side: received --------------------------------------------

Result<RegisterRequest> DecodeRegisterRequest(std::string_view bytes);
Result<PluginOptions> DecodePluginOptions(std::string_view bytes);
// The complete device list. Refused: more than kMaxDevices, an empty or
// over-long ID, more than kMaxNumaNodes nodes. A repeated ID keeps its last
// entry (the kubelet keys devices by ID), in the place of its first.
Result<std::vector<Device>> DecodeListAndWatchResponse(std::string_view bytes);
// container_responses[0].deviceIDs (the kubelet reads only that one; none:
// no preference).
Result<std::vector<std::string>> DecodePreferredAllocationResponse(std::string_view bytes);
// container_responses[0]. None: the kubelet's error, `no containers return
// in allocation response ...`.
Result<ContainerAllocateResponse> DecodeAllocateResponse(std::string_view bytes);

// ---- outpost's side: sent -------------------------------------------------
// Encoding cannot fail (every field is a plain value or a pointer into the
// argument): these return the bytes.

std::string EncodePreferredAllocationRequest(const PreferredRequest& r);
std::string EncodeAllocateRequest(const std::vector<std::string>& device_ids);
std::string EncodePreStartContainerRequest(const std::vector<std::string>& device_ids);

// ---- the checkpoint's AllocResp --------------------------------------------

std::string EncodeContainerAllocateResponse(const ContainerAllocateResponse& r);
Result<ContainerAllocateResponse> DecodeContainerAllocateResponse(std::string_view bytes);

// ---- a plugin's side (tests, fuzzing) ---------------------------------------

std::string EncodeRegisterRequest(const RegisterRequest& r);
std::string EncodePluginOptions(const PluginOptions& o);
std::string EncodeListAndWatchResponse(const std::vector<Device>& devices);
Result<PreferredRequest> DecodePreferredAllocationRequest(std::string_view bytes);
std::string EncodePreferredAllocationResponse(const std::vector<std::string>& device_ids);
Result<std::vector<std::string>> DecodeAllocateRequest(std::string_view bytes);
std::string EncodeAllocateResponse(const ContainerAllocateResponse& r);
Result<std::vector<std::string>> DecodePreStartContainerRequest(std::string_view bytes);

}  // namespace outpost::devices
