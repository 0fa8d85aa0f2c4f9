// `outpost plugins`: registered plugins, their instances, and sockets in
// the plugins dir that are not registered (and why).
#include <cstdio>

#include "base/clock.h"
#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "plugin.pb.h"

namespace outpost::cli {

const char kPluginsHelp[] =
    "Usage: outpost plugins [--json]\n"
    "       outpost plugins check DRIVER [--config JSON] [--json]\n"
    "\n"
    "Lists the plugins registered through the plugins dir (config plugins_dir,\n"
    "default /run/outpost/plugins): type, name, version and each instance (its\n"
    "socket, endpoint, when it registered, connected or disconnected since when;\n"
    "`*` marks the one calls go to), then the sockets there that are not\n"
    "registered, with the last error and when the next attempt is.\n"
    "\n"
    "A plugin with no connected instance is cleaned up after plugin_grace_period\n"
    "(default 30s); its line says when. Nomad driver plugins (nomad_plugin_dir)\n"
    "do not register here: `outpost status` shows them.\n"
    "\n"
    "`plugins check DRIVER` runs the driver conformance checks against a\n"
    "registered driver (exec or a plugin's): one line per check, then a summary;\n"
    "--config gives every check's task that `config` object (the oci driver\n"
    "needs a rootfs with /bin/sh).\n"
    "exit status 1 when any check failed. See docs/plugins.md.\n";

namespace {

// "12s ago" / "in 3s" relative to now.
std::string Relative(int64_t unix_nanos) {
  if (unix_nanos == 0) return "-";
  int64_t d = unix_nanos - WallNanos();
  if (d > -kNanosPerSecond && d < kNanosPerSecond) return "now";
  std::string s = FormatDuration((d < 0 ? -d : d) / kNanosPerSecond * kNanosPerSecond);
  return d < 0 ? s + " ago" : "in " + s;
}

int RunCheck(const GlobalOptions& opts, const std::string& name, const std::string& config) {
  outpost_v1_CheckDriverRequest req = outpost_v1_CheckDriverRequest_init_zero;
  req.name = PbStr(name);
  req.config = PbStr(config);
  auto payload = PbEncode(outpost_v1_CheckDriverRequest_fields, &req, "CheckDriverRequest");
  if (!payload.ok()) return Fail(kExitFailure, payload.error().message());
  int code = 0;
  // The checks take seconds (each bounded at 15 s): a generous deadline.
  auto reply = CallAgent(opts, "CheckDriver", *payload, &code, 120 * kNanosPerSecond);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_CheckDriverResponse> resp(outpost_v1_CheckDriverResponse_fields);
  Status st = resp.Decode(*reply, "CheckDriverResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());
  int n[3] = {0, 0, 0};  // pass, fail, skip
  picojson::array arr;
  for (pb_size_t i = 0; i < resp->checks_count; ++i) {
    const auto& c = resp->checks[i];
    std::string result = PbString(c.result), detail = PbString(c.detail);
    n[result == "pass" ? 0 : result == "fail" ? 1 : 2]++;
    if (opts.json) {
      picojson::object o;
      o["check"] = picojson::value(PbString(c.check));
      o["result"] = picojson::value(result);
      o["detail"] = JsonText(detail);
      o["duration_ms"] = picojson::value(static_cast<double>(c.duration_nanos / 1000000));
      arr.emplace_back(o);
      continue;
    }
    std::string up = result == "pass" ? "PASS" : result == "fail" ? "FAIL" : "SKIP";
    if (result == "pass") {
      std::printf("%s %s %lld ms\n", up.c_str(), PbString(c.check).c_str(), (long long)(c.duration_nanos / 1000000));
    } else {
      std::printf("%s %s: %s\n", up.c_str(), PbString(c.check).c_str(), detail.c_str());
    }
  }
  if (opts.json) {
    PrintJson(picojson::value(arr));
  } else {
    std::printf("driver %s: %d passed, %d failed, %d skipped\n", name.c_str(), n[0], n[1], n[2]);
  }
  return n[1] ? kExitFailure : 0;
}

}  // namespace

int RunPlugins(const GlobalOptions& opts, const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "check") return RunCheck(opts, args[1], "");
  if (args.size() == 4 && args[0] == "check" && args[2] == "--config") return RunCheck(opts, args[1], args[3]);
  if (!args.empty()) return Fail(kExitUsage, "plugins takes no arguments; see `outpost plugins --help`");
  int code = 0;
  auto reply = CallAgent(opts, "ListPlugins", "", &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListPluginsResponse> resp(outpost_v1_ListPluginsResponse_fields);
  Status st = resp.Decode(*reply, "ListPluginsResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());

  if (opts.json) {
    picojson::object o;
    o["plugins_dir"] = JsonText(resp->plugins_dir);
    o["problem"] = JsonText(resp->problem);
    o["grace_period_seconds"] = picojson::value(static_cast<double>(resp->grace_period_nanos) / kNanosPerSecond);
    picojson::array types, plugins, sockets;
    for (pb_size_t i = 0; i < resp->types_count; ++i) types.emplace_back(PbString(resp->types[i]));
    for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
      const auto& p = resp->plugins[i];
      picojson::object po;
      po["type"] = JsonText(p.type);
      po["name"] = JsonText(p.name);
      po["expires_at"] = JsonTime(p.expires_at_unix_nanos);
      po["last_error"] = JsonText(p.last_error);
      if (p.driver_health && *p.driver_health) po["driver_health"] = picojson::value(PbString(p.driver_health));
      picojson::array insts;
      for (pb_size_t j = 0; j < p.instances_count; ++j) {
        const auto& in = p.instances[j];
        picojson::object io;
        io["socket"] = picojson::value(PbString(in.socket));
        io["endpoint"] = JsonText(in.endpoint);
        io["version"] = JsonText(in.version);
        io["registered_at"] = JsonTime(in.registered_at_unix_nanos);
        io["connected"] = picojson::value(in.connected);
        io["since"] = JsonTime(in.since_unix_nanos);
        io["active"] = picojson::value(in.active);
        insts.emplace_back(io);
      }
      po["instances"] = picojson::value(insts);
      plugins.emplace_back(po);
    }
    for (pb_size_t i = 0; i < resp->sockets_count; ++i) {
      const auto& s = resp->sockets[i];
      picojson::object so;
      so["path"] = picojson::value(PbString(s.path));
      so["state"] = picojson::value(PbString(s.state));
      so["type"] = JsonText(s.type);
      so["name"] = JsonText(s.name);
      so["failures"] = picojson::value(static_cast<int64_t>(s.failures));
      so["last_error"] = JsonText(s.last_error);
      so["next_attempt_at"] = JsonTime(s.next_attempt_unix_nanos);
      sockets.emplace_back(so);
    }
    o["types"] = picojson::value(types);
    o["plugins"] = picojson::value(plugins);
    o["sockets"] = picojson::value(sockets);
    PrintJson(picojson::value(o));
    return kExitOk;
  }

  std::string types;
  for (pb_size_t i = 0; i < resp->types_count; ++i) types += (types.empty() ? "" : ", ") + PbString(resp->types[i]);
  std::printf("plugins dir %s%s%s (plugin types: %s)\n", PbString(resp->plugins_dir).c_str(),
              PbString(resp->problem).empty() ? "" : ": ", PbString(resp->problem).c_str(),
              types.empty() ? "none" : types.c_str());
  if (resp->plugins_count == 0) std::printf("no plugins registered\n");
  for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
    const auto& p = resp->plugins[i];
    std::printf("\n%s %s", PbString(p.type).c_str(), PbString(p.name).c_str());
    if (p.expires_at_unix_nanos) {
      std::printf("  no connected instance: cleaned up %s", Relative(p.expires_at_unix_nanos).c_str());
    }
    std::printf("\n");
    for (pb_size_t j = 0; j < p.instances_count; ++j) {
      const auto& in = p.instances[j];
      std::string where = PbString(in.socket);
      if (PbString(in.endpoint) != where) where += " -> " + PbString(in.endpoint);
      std::printf("  %s %s  version %s  registered %s  %s %s\n", in.active ? "*" : " ", where.c_str(),
                  PbString(in.version).c_str(), Relative(in.registered_at_unix_nanos).c_str(),
                  in.connected ? "connected" : "DISCONNECTED", Relative(in.since_unix_nanos).c_str());
    }
    if (p.instances_count == 0) std::printf("  no instances (all sockets gone)\n");
    if (p.driver_health && *p.driver_health) std::printf("  driver %s\n", p.driver_health);
    if (p.last_error && *p.last_error) std::printf("  last error: %s\n", p.last_error);
  }
  bool header = false;
  for (pb_size_t i = 0; i < resp->sockets_count; ++i) {
    const auto& s = resp->sockets[i];
    if (PbString(s.state) == "registered") continue;
    if (!header) std::printf("\nnot registered:\n");
    header = true;
    std::printf("  %s  %s", PbString(s.path).c_str(), PbString(s.state).c_str());
    if (s.name && *s.name) std::printf(" (%s %s)", PbString(s.type).c_str(), s.name);
    if (s.failures) std::printf(", %d failed attempt%s", s.failures, s.failures == 1 ? "" : "s");
    if (s.next_attempt_unix_nanos) std::printf(", next %s", Relative(s.next_attempt_unix_nanos).c_str());
    std::printf("\n");
    if (s.last_error && *s.last_error) std::printf("    %s\n", s.last_error);
  }
  return kExitOk;
}

}  // namespace outpost::cli
