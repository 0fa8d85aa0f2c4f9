// ListNriPlugins: the NRI plugins connected, launched or closed, with their
// subscriptions and counters, the plugin files not launched, and required
// plugins that are missing (`outpost nri`, docs/nri.md); and the NRI line of
// `outpost status`.
#include "agent/agent.h"
#include "agent/api.h"
#include "agent/api_util.h"
#include "base/strings.h"
#include "nri/adaptation.h"
#include "nri_status.pb.h"

namespace outpost::agent {

namespace {

void HandleListNriPlugins(Agent* agent, std::string_view payload, const wire::Responder& r) {
  PbOwned<outpost_v1_ListNriPluginsRequest> req(outpost_v1_ListNriPluginsRequest_fields);
  if (!DecodeOrFail(payload, &req, "ListNriPluginsRequest", r)) return;
  const Config::Nri& c = agent->config().nri;
  nri::Adaptation* a = agent->nri();
  Arena arena;
  outpost_v1_ListNriPluginsResponse resp = outpost_v1_ListNriPluginsResponse_init_zero;
  resp.enabled = a != nullptr;
  resp.socket = arena.Str(c.socket);
  resp.plugin_dir = arena.Str(c.plugin_dir);
  std::vector<nri::PluginInfo> plugins;
  std::vector<std::string> problems;
  std::string missing;
  if (a) {
    plugins = a->List();
    problems = a->Problems();
    missing = a->MissingRequired();
  }
  auto* list = arena.Array<outpost_v1_NriPlugin>(plugins.size());
  for (size_t i = 0; i < plugins.size(); ++i) {
    const nri::PluginInfo& p = plugins[i];
    outpost_v1_NriPlugin& o = list[i];
    o = outpost_v1_NriPlugin_init_zero;
    o.index = arena.Str(p.index);
    o.name = arena.Str(p.name);
    o.source = arena.Str(p.source);
    o.state = arena.Str(p.state);
    o.events = p.events;
    o.pid = static_cast<int32_t>(p.pid);
    o.nri_version = arena.Str(p.nri_version);
    o.state_change = p.state_change;
    o.connected_unix_nanos = p.connected_unix_nanos;
    o.restarts = p.restarts;
    o.requests = p.requests;
    o.failures = p.failures;
    o.last_error = arena.Str(p.last_error);
    o.request_timeout_ms = p.request_timeout_ms;
    o.fail_policy = arena.Str(p.fail_policy);
    o.required = p.required;
  }
  resp.plugins = list;
  resp.plugins_count = static_cast<pb_size_t>(plugins.size());
  resp.problems = arena.StrArray(problems);
  resp.problems_count = static_cast<pb_size_t>(problems.size());
  resp.missing_required = arena.Str(missing);
  r.Finish(PbEncode(outpost_v1_ListNriPluginsResponse_fields, &resp, "ListNriPluginsResponse"));
}

}  // namespace

std::string NriSummary(Agent* agent, bool* ok) {
  nri::Adaptation* a = agent->nri();
  if (!a) {
    *ok = false;
    return "off (config \"nri\")";
  }
  size_t ready = 0, total = 0;
  std::string names;
  for (const nri::PluginInfo& p : a->List()) {
    if (p.state == "closed") continue;
    ++total;
    if (p.state == "ready") ++ready;
    names += (names.empty() ? "" : ", ") + p.index + "-" + p.name + (p.state == "ready" ? "" : " (" + p.state + ")");
  }
  std::string out = Format("%zu plugins ready of %zu", ready, total);
  if (!names.empty()) out += ": " + names;
  std::string missing = a->MissingRequired();
  if (!missing.empty()) out += "; required, not ready: " + missing;
  std::vector<std::string> problems = a->Problems();
  for (const std::string& p : problems) out += "; " + p;
  *ok = missing.empty() && problems.empty();
  return out;
}

void RegisterNriApi(Agent* agent, wire::RpcServer* server) {
  server->Register(kAgentService, "ListNriPlugins",
                   [agent](const wire::CallContext&, std::string_view payload, wire::Responder responder) {
                     HandleListNriPlugins(agent, payload, responder);
                   });
}

}  // namespace outpost::agent
