// `outpost nri`: the NRI plugins the agent talks to (docs/nri.md): index,
// name, where it came from, its state and subscriptions, when it connected,
// its requests, failures and last error; the plugin files not launched and
// required plugins that are missing.
#include <cstdio>

#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "nri_status.pb.h"
#include "outpost/nri_api.h"

namespace outpost::cli {

const char kNriHelp[] =
    "Usage: outpost nri [--json]\n"
    "\n"
    "Lists the NRI plugins (containerd's Node Resource Interface) the agent talks\n"
    "to: pre-installed ones it launched from the plugin dir (config\n"
    "nri.plugin_dir) and external ones connected to its socket (nri.socket).\n"
    "For each plugin (listed once, however often it was launched or connected):\n"
    "its index and name, source, state (registering, configuring, synchronizing,\n"
    "ready, closed), the events it subscribed to, its process, when it last\n"
    "connected, its restarts (connections after the first), requests sent and\n"
    "failures (over all its connections), the last error, and its request\n"
    "timeout and fail policy. Then the plugin files not launched and\n"
    "why, and the required plugins (nri.required_plugins) that are not ready:\n"
    "tasks wait for those. See docs/nri.md.\n";

namespace {

std::string Events(uint32_t mask) {
  if (mask == nri::kValidEvents) return "all";
  std::string out;
  for (int e = 1; e < static_cast<int>(nri::Event::kLast); ++e) {
    if (mask & nri::EventMask(static_cast<nri::Event>(e))) {
      out += (out.empty() ? "" : ",") + std::string(nri::EventMethod(static_cast<nri::Event>(e)));
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace

int RunNri(const GlobalOptions& opts, const std::vector<std::string>& args) {
  auto a = ParseArgs(args, {}, {});
  if (!a.ok()) return UsageError(a.error().message(), "nri");
  if (!a->pos.empty()) return UsageError("nri takes no arguments", "nri");
  outpost_v1_ListNriPluginsRequest req = outpost_v1_ListNriPluginsRequest_init_zero;
  auto payload = PbEncode(outpost_v1_ListNriPluginsRequest_fields, &req, "ListNriPluginsRequest");
  if (!payload.ok()) return Fail(kExitFailure, payload.error().message());
  int code = 0;
  auto reply = CallAgent(opts, "ListNriPlugins", *payload, &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListNriPluginsResponse> resp(outpost_v1_ListNriPluginsResponse_fields);
  Status st = resp.Decode(*reply, "ListNriPluginsResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());
  if (opts.json) {
    picojson::object o;
    o["enabled"] = picojson::value(resp->enabled);
    o["socket"] = JsonText(resp->socket);
    o["plugin_dir"] = JsonText(resp->plugin_dir);
    picojson::array list;
    for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
      const auto& p = resp->plugins[i];
      picojson::object e;
      e["index"] = picojson::value(PbString(p.index));
      e["name"] = picojson::value(PbString(p.name));
      e["source"] = picojson::value(PbString(p.source));
      e["state"] = picojson::value(PbString(p.state));
      e["events"] = picojson::value(static_cast<int64_t>(p.events));
      e["event_names"] = picojson::value(Events(p.events));
      e["pid"] = picojson::value(static_cast<int64_t>(p.pid));
      e["nri_version"] = JsonText(p.nri_version);
      e["state_change"] = picojson::value(p.state_change);
      e["connected_unix_nanos"] = picojson::value(p.connected_unix_nanos);
      e["restarts"] = picojson::value(static_cast<int64_t>(p.restarts));
      e["requests"] = picojson::value(static_cast<int64_t>(p.requests));
      e["failures"] = picojson::value(static_cast<int64_t>(p.failures));
      e["last_error"] = JsonText(p.last_error);
      e["request_timeout_ms"] = picojson::value(p.request_timeout_ms);
      e["fail_policy"] = picojson::value(PbString(p.fail_policy));
      e["required"] = picojson::value(p.required);
      list.emplace_back(std::move(e));
    }
    o["plugins"] = picojson::value(std::move(list));
    picojson::array problems;
    for (pb_size_t i = 0; i < resp->problems_count; ++i) problems.emplace_back(PbString(resp->problems[i]));
    o["problems"] = picojson::value(std::move(problems));
    o["missing_required"] = JsonText(resp->missing_required);
    PrintJson(picojson::value(std::move(o)));
    return kExitOk;
  }
  if (!resp->enabled) {
    std::printf("NRI is off (enable it with the \"nri\" object of the agent config)\n");
    return kExitOk;
  }
  std::printf("socket: %s   plugin dir: %s\n", PbString(resp->socket).c_str(), PbString(resp->plugin_dir).c_str());
  if (resp->plugins_count == 0) std::printf("no plugins\n");
  for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
    const auto& p = resp->plugins[i];
    std::printf("%s-%s  %s %s%s  pid %d  since %s  restarts %llu  requests %llu  failures %llu  timeout %lldms  "
                "fail_policy %s%s\n",
                PbString(p.index).c_str(), PbString(p.name).c_str(), PbString(p.source).c_str(),
                PbString(p.state).c_str(), p.required ? " (required)" : "", p.pid, Age(p.connected_unix_nanos).c_str(),
                static_cast<unsigned long long>(p.restarts), static_cast<unsigned long long>(p.requests), static_cast<unsigned long long>(p.failures),
                static_cast<long long>(p.request_timeout_ms), PbString(p.fail_policy).c_str(),
                p.state_change ? "  (old plugin: StateChange)" : "");
    std::printf("  events: %s\n", Events(p.events).c_str());
    if (!PbString(p.nri_version).empty()) std::printf("  nri version: %s\n", PbString(p.nri_version).c_str());
    if (!PbString(p.last_error).empty()) std::printf("  last error: %s\n", PbString(p.last_error).c_str());
  }
  for (pb_size_t i = 0; i < resp->problems_count; ++i) std::printf("problem: %s\n", resp->problems[i]);
  if (!PbString(resp->missing_required).empty()) {
    std::printf("required, not ready (tasks wait): %s\n", PbString(resp->missing_required).c_str());
  }
  return kExitOk;
}

}  // namespace outpost::cli
