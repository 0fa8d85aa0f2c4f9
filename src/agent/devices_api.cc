// ListDevices: the device plugin resources, their devices with health and
// holder, and the plugin serving each (`outpost devices`, docs/devices.md).
#include "agent/agent.h"
#include "agent/api.h"
#include "agent/api_util.h"
#include "devices/plugins.h"
#include "devices_status.pb.h"

namespace outpost::agent {

namespace {

void HandleListDevices(Agent* agent, std::string_view payload, const wire::Responder& r) {
  PbOwned<outpost_v1_ListDevicesRequest> req(outpost_v1_ListDevicesRequest_fields);
  if (!DecodeOrFail(payload, &req, "ListDevicesRequest", r)) return;
  devices::DevicePlugins* d = agent->device_plugins();
  Arena arena;
  outpost_v1_ListDevicesResponse resp = outpost_v1_ListDevicesResponse_init_zero;
  resp.enabled = d != nullptr;
  resp.device_plugins_dir = arena.Str(agent->config().device_plugins_dir);
  resp.kubelet_plugins_dir = arena.Str(agent->config().kubelet_plugins_dir);
  if (d != nullptr) {
    // Holders by "job.task" id (neither name holds a '.'), shown as
    // job/task whether the task is running or waiting for its restart.
    std::map<std::pair<std::string, std::string>, std::string> holder;
    for (const devices::Allocation& a : d->manager().allocations()) {
      std::string shown = a.task;
      size_t dot = shown.find('.');
      if (dot != std::string::npos) shown[dot] = '/';
      for (const std::string& id : a.devices) holder[{a.resource, id}] = shown;
    }
    const auto& resources = d->manager().resources();
    auto* list = arena.Array<outpost_v1_DeviceResource>(resources.size());
    for (size_t i = 0; i < resources.size(); ++i) {
      const devices::ResourceState& rs = resources[i];
      outpost_v1_DeviceResource& o = list[i];
      o = outpost_v1_DeviceResource_init_zero;
      o.name = arena.Str(rs.name);
      o.endpoint = arena.Str(rs.endpoint);
      o.connected = rs.connected;
      o.pre_start_required = rs.options.pre_start_required;
      o.preferred_allocation = rs.options.get_preferred_allocation_available;
      auto* devs = arena.Array<outpost_v1_DeviceEntry>(rs.devices.size());
      for (size_t j = 0; j < rs.devices.size(); ++j) {
        const devices::Device& dev = rs.devices[j];
        devs[j] = outpost_v1_DeviceEntry_init_zero;
        devs[j].id = arena.Str(dev.id);
        devs[j].healthy = rs.connected && dev.healthy();
        auto h = holder.find({rs.name, dev.id});
        devs[j].task = arena.Str(h == holder.end() ? std::string() : h->second);
        devs[j].numa_count = static_cast<pb_size_t>(dev.numa_nodes.size());
        devs[j].numa = const_cast<int64_t*>(dev.numa_nodes.data());
      }
      o.devices_count = static_cast<pb_size_t>(rs.devices.size());
      o.devices = devs;
    }
    resp.resources_count = static_cast<pb_size_t>(resources.size());
    resp.resources = list;
  }
  r.Finish(PbEncode(outpost_v1_ListDevicesResponse_fields, &resp, "ListDevicesResponse"));
}

}  // namespace

void RegisterDevicesApi(Agent* agent, wire::RpcServer* server) {
  server->Register(kAgentService, "ListDevices",
                   [agent](const wire::CallContext&, std::string_view payload, wire::Responder responder) {
                     HandleListDevices(agent, payload, responder);
                   });
}

}  // namespace outpost::agent
