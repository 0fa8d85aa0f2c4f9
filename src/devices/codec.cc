// nanopb's structs of proto/deviceplugin.proto to and from plain ones. Every
// string and repeated field is a pointer (deviceplugin.options): on encoding
// they point into the caller's values, on decoding PbOwned frees them.
#include "devices/codec.h"

#include <algorithm>

#include "base/pb.h"
#include "base/strings.h"
#include "deviceplugin.pb.h"
#include "devices/validate.h"

namespace outpost::devices {

namespace {

// A string field as the encoder wants it: absent when empty (proto3 sends
// no empty strings; nanopb would send a non-NULL pointer to "").
char* Str(const std::string& s) { return s.empty() ? nullptr : PbStr(s); }

// nanopb counts with a 16-bit pb_size_t here; nothing outpost sends comes
// near (device lists are bounded by kMaxDevices).
pb_size_t Count(size_t n) { return static_cast<pb_size_t>(std::min<size_t>(n, PB_SIZE_MAX)); }

// Pointers into strings, for a repeated string field.
std::vector<char*> Ptrs(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size());
  for (const std::string& s : v) out.push_back(PbStr(s));
  return out;
}

std::vector<std::string> Strings(char** v, pb_size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (pb_size_t i = 0; i < n; ++i) out.push_back(PbString(v[i]));
  return out;
}

// The encoding of msg; see the header for why it cannot fail.
std::string Encode(const pb_msgdesc_t* fields, const void* msg, const char* what) {
  auto r = PbEncode(fields, msg, what);
  return r.ok() ? std::move(*r) : std::string();
}

template <typename T>
Status Decode(std::string_view bytes, PbOwned<T>* msg, const char* what) {
  if (bytes.size() > kMaxMessageBytes) {
    return Error(Code::kResourceExhausted, Format("decode %s: %zu bytes, more than the limit of %zu", what,
                                                  bytes.size(), kMaxMessageBytes));
  }
  return msg->Decode(bytes, what);
}

// A proto3 map (repeated entries): sorted, the last value of a repeated key.
template <typename Entry>
StringPairs Map(const Entry* entries, pb_size_t n) {
  StringPairs out;
  for (pb_size_t i = 0; i < n; ++i) {
    std::string key = PbString(entries[i].key);
    auto it = std::lower_bound(out.begin(), out.end(), key,
                               [](const std::pair<std::string, std::string>& p, const std::string& k) { return p.first < k; });
    if (it != out.end() && it->first == key) it->second = PbString(entries[i].value);
    else out.emplace(it, std::move(key), PbString(entries[i].value));
  }
  return out;
}

template <typename Entry>
std::vector<Entry> MapEntries(const StringPairs& m) {
  std::vector<Entry> out(m.size());
  for (size_t i = 0; i < m.size(); ++i) {
    out[i].key = Str(m[i].first);
    out[i].value = Str(m[i].second);
  }
  return out;
}

ContainerAllocateResponse FromPb(const v1beta1_ContainerAllocateResponse& p) {
  ContainerAllocateResponse r;
  r.envs = Map(p.envs, p.envs_count);
  r.annotations = Map(p.annotations, p.annotations_count);
  for (pb_size_t i = 0; i < p.mounts_count; ++i) {
    const v1beta1_Mount& m = p.mounts[i];
    r.mounts.push_back({PbString(m.container_path), PbString(m.host_path), m.read_only});
  }
  for (pb_size_t i = 0; i < p.devices_count; ++i) {
    const v1beta1_DeviceSpec& d = p.devices[i];
    r.devices.push_back({PbString(d.container_path), PbString(d.host_path), PbString(d.permissions)});
  }
  for (pb_size_t i = 0; i < p.cdi_devices_count; ++i) r.cdi_devices.push_back(PbString(p.cdi_devices[i].name));
  return r;
}

// Encodes r through a nanopb struct pointing into it (and into the vectors
// made here, which live until the encoding is done).
struct AllocatePb {
  explicit AllocatePb(const ContainerAllocateResponse& r)
      : envs(MapEntries<v1beta1_ContainerAllocateResponse_EnvsEntry>(r.envs)),
        annotations(MapEntries<v1beta1_ContainerAllocateResponse_AnnotationsEntry>(r.annotations)) {
    for (const Mount& m : r.mounts) mounts.push_back({Str(m.container_path), Str(m.host_path), m.read_only});
    for (const DeviceSpec& d : r.devices) {
      devices.push_back({Str(d.container_path), Str(d.host_path), Str(d.permissions)});
    }
    for (const std::string& n : r.cdi_devices) cdi.push_back({Str(n)});
    msg.envs_count = Count(envs.size());
    msg.envs = envs.data();
    msg.annotations_count = Count(annotations.size());
    msg.annotations = annotations.data();
    msg.mounts_count = Count(mounts.size());
    msg.mounts = mounts.data();
    msg.devices_count = Count(devices.size());
    msg.devices = devices.data();
    msg.cdi_devices_count = Count(cdi.size());
    msg.cdi_devices = cdi.data();
  }
  std::vector<v1beta1_ContainerAllocateResponse_EnvsEntry> envs;
  std::vector<v1beta1_ContainerAllocateResponse_AnnotationsEntry> annotations;
  std::vector<v1beta1_Mount> mounts;
  std::vector<v1beta1_DeviceSpec> devices;
  std::vector<v1beta1_CDIDevice> cdi;
  v1beta1_ContainerAllocateResponse msg = v1beta1_ContainerAllocateResponse_init_zero;
};

std::string EncodeIds(const std::vector<std::string>& ids, bool allocate) {
  std::vector<char*> p = Ptrs(ids);
  if (allocate) {
    v1beta1_ContainerAllocateRequest c = {Count(p.size()), p.data()};
    v1beta1_AllocateRequest m = {1, &c};
    return Encode(v1beta1_AllocateRequest_fields, &m, "AllocateRequest");
  }
  v1beta1_PreStartContainerRequest m = {Count(p.size()), p.data()};
  return Encode(v1beta1_PreStartContainerRequest_fields, &m, "PreStartContainerRequest");
}

}  // namespace

bool Device::healthy() const { return health == kHealthy; }

Result<RegisterRequest> DecodeRegisterRequest(std::string_view bytes) {
  PbOwned<v1beta1_RegisterRequest> m(v1beta1_RegisterRequest_fields);
  OUTPOST_RETURN_IF_ERROR(Decode(bytes, &m, "RegisterRequest"));
  RegisterRequest r;
  r.version = PbString(m->version);
  r.endpoint = PbString(m->endpoint);
  r.resource_name = PbString(m->resource_name);
  r.has_options = m->has_options;
  r.options = {m->options.pre_start_required, m->options.get_preferred_allocation_available};
  return r;
}

Result<PluginOptions> DecodePluginOptions(std::string_view bytes) {
  PbOwned<v1beta1_DevicePluginOptions> m(v1beta1_DevicePluginOptions_fields);
  OUTPOST_RETURN_IF_ERROR(Decode(bytes, &m, "DevicePluginOptions"));
  return PluginOptions{m->pre_start_required, m->get_preferred_allocation_available};
}

Result<std::vector<Device>> DecodeListAndWatchResponse(std::string_view bytes) {
  PbOwned<v1beta1_ListAndWatchResponse> m(v1beta1_ListAndWatchResponse_fields);
  OUTPOST_RETURN_IF_ERROR(Decode(bytes, &m, "ListAndWatchResponse"));
  auto fail = [](const std::string& msg) { return Error(Code::kInvalidArgument, "ListAndWatchResponse: " + msg); };
  if (m->devices_count > kMaxDevices) {
    return fail(Format("%u devices, more than the limit of %zu", static_cast<unsigned>(m->devices_count), kMaxDevices));
  }
  std::vector<Device> out;
  std::vector<std::pair<std::string, size_t>> seen;  // id -> index in out, sorted
  for (pb_size_t i = 0; i < m->devices_count; ++i) {
    const v1beta1_Device& p = m->devices[i];
    Device d;
    d.id = PbString(p.ID);
    if (d.id.empty()) return fail(Format("devices[%u]: empty ID", static_cast<unsigned>(i)));
    if (d.id.size() > kMaxDeviceIdBytes) {
      return fail(Format("devices[%u]: ID of %zu bytes, more than the limit of %zu", static_cast<unsigned>(i),
                         d.id.size(), kMaxDeviceIdBytes));
    }
    d.health = PbString(p.health);
    if (p.has_topology) {
      if (p.topology.nodes_count > kMaxNumaNodes) {
        return fail(Format("devices[%u]: %u NUMA nodes, more than the limit of %zu", static_cast<unsigned>(i),
                           static_cast<unsigned>(p.topology.nodes_count), kMaxNumaNodes));
      }
      for (pb_size_t j = 0; j < p.topology.nodes_count; ++j) d.numa_nodes.push_back(p.topology.nodes[j].ID);
      std::sort(d.numa_nodes.begin(), d.numa_nodes.end());
      d.numa_nodes.erase(std::unique(d.numa_nodes.begin(), d.numa_nodes.end()), d.numa_nodes.end());
    }
    auto it = std::lower_bound(seen.begin(), seen.end(), d.id,
                               [](const std::pair<std::string, size_t>& s, const std::string& k) { return s.first < k; });
    if (it != seen.end() && it->first == d.id) {
      out[it->second] = std::move(d);
    } else {
      seen.emplace(it, d.id, out.size());
      out.push_back(std::move(d));
    }
  }
  return out;
}

Result<std::vector<std::string>> DecodePreferredAllocationResponse(std::string_view bytes) {
  PbOwned<v1beta1_PreferredAllocationResponse> m(v1beta1_PreferredAllocationResponse_fields);
  OUTPOST_RETURN_IF_ERROR(
      Decode(bytes, &m, "PreferredAllocationResponse"));
  if (m->container_responses_count == 0) return std::vector<std::string>();
  return Strings(m->container_responses[0].deviceIDs, m->container_responses[0].deviceIDs_count);
}

Result<ContainerAllocateResponse> DecodeAllocateResponse(std::string_view bytes) {
  PbOwned<v1beta1_AllocateResponse> m(v1beta1_AllocateResponse_fields);
  OUTPOST_RETURN_IF_ERROR(Decode(bytes, &m, "AllocateResponse"));
  if (m->container_responses_count == 0) {
    // The kubelet's words (it goes on with the response printed, empty).
    return Error(Code::kInvalidArgument, "no containers return in allocation response (container_responses is empty)");
  }
  return FromPb(m->container_responses[0]);
}

std::string EncodePreferredAllocationRequest(const PreferredRequest& r) {
  std::vector<char*> available = Ptrs(r.available);
  std::vector<char*> must = Ptrs(r.must_include);
  v1beta1_ContainerPreferredAllocationRequest c = {Count(available.size()), available.data(), Count(must.size()),
                                                   must.data(), r.size};
  v1beta1_PreferredAllocationRequest m = {1, &c};
  return Encode(v1beta1_PreferredAllocationRequest_fields, &m, "PreferredAllocationRequest");
}

std::string EncodeAllocateRequest(const std::vector<std::string>& device_ids) { return EncodeIds(device_ids, true); }

std::string EncodePreStartContainerRequest(const std::vector<std::string>& device_ids) {
  return EncodeIds(device_ids, false);
}

std::string EncodeContainerAllocateResponse(const ContainerAllocateResponse& r) {
  AllocatePb p(r);
  return Encode(v1beta1_ContainerAllocateResponse_fields, &p.msg, "ContainerAllocateResponse");
}

Result<ContainerAllocateResponse> DecodeContainerAllocateResponse(std::string_view bytes) {
  PbOwned<v1beta1_ContainerAllocateResponse> m(v1beta1_ContainerAllocateResponse_fields);
  OUTPOST_RETURN_IF_ERROR(
      Decode(bytes, &m, "ContainerAllocateResponse"));
  return FromPb(*m);
}

std::string EncodeRegisterRequest(const RegisterRequest& r) {
  v1beta1_RegisterRequest m = v1beta1_RegisterRequest_init_zero;
  m.version = Str(r.version);
  m.endpoint = Str(r.endpoint);
  m.resource_name = Str(r.resource_name);
  m.has_options = r.has_options;
  m.options = {r.options.pre_start_required, r.options.get_preferred_allocation_available};
  return Encode(v1beta1_RegisterRequest_fields, &m, "RegisterRequest");
}

std::string EncodePluginOptions(const PluginOptions& o) {
  v1beta1_DevicePluginOptions m = {o.pre_start_required, o.get_preferred_allocation_available};
  return Encode(v1beta1_DevicePluginOptions_fields, &m, "DevicePluginOptions");
}

std::string EncodeListAndWatchResponse(const std::vector<Device>& devices) {
  std::vector<std::vector<v1beta1_NUMANode>> nodes(devices.size());
  std::vector<v1beta1_Device> devs(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device& d = devices[i];
    for (int64_t n : d.numa_nodes) nodes[i].push_back({n});
    devs[i].ID = Str(d.id);
    devs[i].health = Str(d.health);
    devs[i].has_topology = !d.numa_nodes.empty();
    devs[i].topology = {Count(nodes[i].size()), nodes[i].data()};
  }
  v1beta1_ListAndWatchResponse m = {Count(devs.size()), devs.data()};
  return Encode(v1beta1_ListAndWatchResponse_fields, &m, "ListAndWatchResponse");
}

Result<PreferredRequest> DecodePreferredAllocationRequest(std::string_view bytes) {
  PbOwned<v1beta1_PreferredAllocationRequest> m(v1beta1_PreferredAllocationRequest_fields);
  OUTPOST_RETURN_IF_ERROR(
      Decode(bytes, &m, "PreferredAllocationRequest"));
  PreferredRequest r;
  if (m->container_requests_count == 0) return r;
  const v1beta1_ContainerPreferredAllocationRequest& c = m->container_requests[0];
  r.available = Strings(c.available_deviceIDs, c.available_deviceIDs_count);
  r.must_include = Strings(c.must_include_deviceIDs, c.must_include_deviceIDs_count);
  r.size = c.allocation_size;
  return r;
}

std::string EncodePreferredAllocationResponse(const std::vector<std::string>& device_ids) {
  std::vector<char*> p = Ptrs(device_ids);
  v1beta1_ContainerPreferredAllocationResponse c = {Count(p.size()), p.data()};
  v1beta1_PreferredAllocationResponse m = {1, &c};
  return Encode(v1beta1_PreferredAllocationResponse_fields, &m, "PreferredAllocationResponse");
}

Result<std::vector<std::string>> DecodeAllocateRequest(std::string_view bytes) {
  PbOwned<v1beta1_AllocateRequest> m(v1beta1_AllocateRequest_fields);
  OUTPOST_RETURN_IF_ERROR(Decode(bytes, &m, "AllocateRequest"));
  if (m->container_requests_count == 0) return std::vector<std::string>();
  return Strings(m->container_requests[0].devices_ids, m->container_requests[0].devices_ids_count);
}

std::string EncodeAllocateResponse(const ContainerAllocateResponse& r) {
  AllocatePb p(r);
  v1beta1_AllocateResponse m = {1, &p.msg};
  return Encode(v1beta1_AllocateResponse_fields, &m, "AllocateResponse");
}

Result<std::vector<std::string>> DecodePreStartContainerRequest(std::string_view bytes) {
  PbOwned<v1beta1_PreStartContainerRequest> m(v1beta1_PreStartContainerRequest_fields);
  OUTPOST_RETURN_IF_ERROR(Decode(bytes, &m, "PreStartContainerRequest"));
  return Strings(m->devices_ids, m->devices_ids_count);
}

}  // namespace outpost::devices
