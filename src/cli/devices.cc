// `outpost devices`: the device plugin resources (docs/devices.md), one row
// per device: its resource, health, the task holding it and the plugin
// serving it.
#include <cstdio>

#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "devices_status.pb.h"

namespace outpost::cli {

const char kDevicesHelp[] =
    "Usage: outpost devices [--json]\n"
    "\n"
    "Lists the resources of the device plugins registered with the agent\n"
    "(kubelet's device plugins: through device_plugins_dir/kubelet.sock or\n"
    "kubelet_plugins_dir), one row per device: the resource, the device's id,\n"
    "its health (a resource whose plugin went away has only unhealthy devices\n"
    "until it is back), the task holding it (job/task, or -) and the plugin's\n"
    "socket. Tasks ask for devices with resources.devices in the job spec.\n"
    "See docs/devices.md.\n";

int RunDevices(const GlobalOptions& opts, const std::vector<std::string>& args) {
  auto a = ParseArgs(args, {}, {});
  if (!a.ok()) return UsageError(a.error().message(), "devices");
  if (!a->pos.empty()) return UsageError("devices takes no arguments", "devices");
  outpost_v1_ListDevicesRequest req = outpost_v1_ListDevicesRequest_init_zero;
  auto payload = PbEncode(outpost_v1_ListDevicesRequest_fields, &req, "ListDevicesRequest");
  if (!payload.ok()) return Fail(kExitFailure, payload.error().message());
  int code = 0;
  auto reply = CallAgent(opts, "ListDevices", *payload, &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListDevicesResponse> resp(outpost_v1_ListDevicesResponse_fields);
  Status st = resp.Decode(*reply, "ListDevicesResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());
  if (opts.json) {
    picojson::object o;
    o["enabled"] = picojson::value(resp->enabled);
    o["device_plugins_dir"] = JsonText(resp->device_plugins_dir);
    o["kubelet_plugins_dir"] = JsonText(resp->kubelet_plugins_dir);
    picojson::array list;
    for (pb_size_t i = 0; i < resp->resources_count; ++i) {
      const auto& r = resp->resources[i];
      picojson::object e;
      e["name"] = picojson::value(PbString(r.name));
      e["endpoint"] = JsonText(r.endpoint);
      e["connected"] = picojson::value(r.connected);
      e["pre_start_required"] = picojson::value(r.pre_start_required);
      e["preferred_allocation"] = picojson::value(r.preferred_allocation);
      picojson::array devs;
      for (pb_size_t j = 0; j < r.devices_count; ++j) {
        const auto& d = r.devices[j];
        picojson::object de;
        de["id"] = picojson::value(PbString(d.id));
        de["health"] = picojson::value(d.healthy ? "healthy" : "unhealthy");
        de["task"] = JsonText(d.task);
        picojson::array numa;
        for (pb_size_t k = 0; k < d.numa_count; ++k) numa.emplace_back(static_cast<int64_t>(d.numa[k]));
        de["numa"] = picojson::value(std::move(numa));
        devs.emplace_back(std::move(de));
      }
      e["devices"] = picojson::value(std::move(devs));
      list.emplace_back(std::move(e));
    }
    o["resources"] = picojson::value(std::move(list));
    PrintJson(picojson::value(std::move(o)));
    return kExitOk;
  }
  if (!resp->enabled) {
    std::printf("device plugins are off (kubelet_plugins_dir and device_plugins_dir are empty in the config)\n");
    return kExitOk;
  }
  if (resp->resources_count == 0) {
    std::string dir = PbString(resp->device_plugins_dir), registry = PbString(resp->kubelet_plugins_dir);
    std::string where = dir.empty() ? "" : "at " + dir + "/kubelet.sock";
    if (!registry.empty()) where += (where.empty() ? "in " : " or in ") + registry;
    std::printf("no device plugin resources (plugins register %s)\n", where.c_str());
    return kExitOk;
  }
  std::printf("%-32s %-16s %-10s %-24s %s\n", "RESOURCE", "DEVICE", "HEALTH", "TASK", "PLUGIN");
  for (pb_size_t i = 0; i < resp->resources_count; ++i) {
    const auto& r = resp->resources[i];
    std::string plugin = PbString(r.endpoint);
    if (plugin.empty()) plugin = "-";
    if (!r.connected) plugin += " (not connected)";
    if (r.devices_count == 0) {
      std::printf("%-32s %-16s %-10s %-24s %s\n", PbString(r.name).c_str(), "-", "-", "-", plugin.c_str());
    }
    for (pb_size_t j = 0; j < r.devices_count; ++j) {
      const auto& d = r.devices[j];
      std::string task = PbString(d.task);
      std::printf("%-32s %-16s %-10s %-24s %s\n", PbString(r.name).c_str(), PbString(d.id).c_str(),
                  d.healthy ? "healthy" : "unhealthy", task.empty() ? "-" : task.c_str(), plugin.c_str());
    }
  }
  return kExitOk;
}

}  // namespace outpost::cli
