// ListNetworks: the networks jobs can use (the built-in bridge and the CNI
// config dir's), the plugins each needs with where they were found and
// their VERSION answers, the jobs attached now, and the config files that
// are not used (`outpost networks [--show NAME]`, docs/networking.md).
#include "agent/agent.h"
#include "agent/api.h"
#include "agent/api_util.h"
#include "base/strings.h"
#include "net/networks.h"
#include "network.pb.h"

namespace outpost::agent {

namespace {

char** Strings(Arena* a, const std::vector<std::string>& v, pb_size_t* count) {
  *count = static_cast<pb_size_t>(v.size());
  return a->StrArray(v);
}

void FillNetwork(const net::NetworkView& v, Arena* a, outpost_v1_Network* out) {
  *out = outpost_v1_Network_init_zero;
  out->name = a->Str(v.name);
  out->mode = a->Str(v.mode);
  out->file = a->Str(v.file);
  out->cni_version = a->Str(v.cni_version);
  out->disable_check = v.disable_check;
  auto* plugins = a->Array<outpost_v1_NetworkPlugin>(v.plugins.size());
  for (size_t i = 0; i < v.plugins.size(); ++i) {
    const net::PluginView& p = v.plugins[i];
    plugins[i] = outpost_v1_NetworkPlugin_init_zero;
    plugins[i].type = a->Str(p.type);
    plugins[i].binary = a->Str(p.binary);
    plugins[i].versions = Strings(a, p.versions, &plugins[i].versions_count);
    plugins[i].problem = a->Str(p.problem);
  }
  out->plugins = plugins;
  out->plugins_count = static_cast<pb_size_t>(v.plugins.size());
  out->jobs = Strings(a, v.jobs, &out->jobs_count);
}

void HandleListNetworks(Agent* agent, std::string_view payload, const wire::Responder& r) {
  PbOwned<outpost_v1_ListNetworksRequest> req(outpost_v1_ListNetworksRequest_fields);
  if (!DecodeOrFail(payload, &req, "ListNetworksRequest", r)) return;
  const Config::Network& c = agent->config().network;
  net::Networks* nets = agent->networks();
  Arena a;
  outpost_v1_ListNetworksResponse resp = outpost_v1_ListNetworksResponse_init_zero;
  resp.config_dir = a.Str(c.cni_config_dir);
  resp.cni_path = Strings(&a, c.cni_path, &resp.cni_path_count);
  resp.netns_dir = a.Str(c.netns_dir);
  resp.unavailable = a.Str(agent->networks_problem());
  std::string show = PbString(req->show);
  std::string config;
  std::vector<net::NetworkView> views;
  std::vector<std::string> problems;
  std::vector<const net::JobNetwork*> attached;
  if (nets) {
    if (!show.empty()) {
      auto conf = nets->ShowConfig(show);
      if (!conf.ok()) return r.Fail(conf.error());
      config = *conf;
    }
    views = nets->List();
    for (const auto& [file, why] : nets->ConfigProblems()) problems.push_back(file + ": " + why);
    std::string dir = nets->ConfigDirProblem();
    if (!dir.empty()) problems.push_back(c.cni_config_dir + ": " + dir);
    attached = nets->Attached();
    resp.queued = static_cast<int32_t>(nets->queued());
    // Answers show up in the next listing.
    nets->ProbeAll();
  } else if (!show.empty()) {
    return r.Fail(Error(Code::kFailedPrecondition, "job networks are not available: " + agent->networks_problem()));
  }
  resp.config = a.Str(config);
  auto* list = a.Array<outpost_v1_Network>(views.size());
  for (size_t i = 0; i < views.size(); ++i) FillNetwork(views[i], &a, &list[i]);
  resp.networks = list;
  resp.networks_count = static_cast<pb_size_t>(views.size());
  auto* jobs = a.Array<outpost_v1_AttachedJob>(attached.size());
  for (size_t i = 0; i < attached.size(); ++i) {
    const net::JobNetwork& n = *attached[i];
    jobs[i] = outpost_v1_AttachedJob_init_zero;
    jobs[i].job = a.Str(n.job);
    jobs[i].mode = a.Str(n.mode);
    jobs[i].netns = a.Str(n.netns);
    jobs[i].cidr = a.Str(n.cidr);
    std::vector<std::string> ports;
    for (const net::PortMapping& p : n.ports) {
      ports.push_back(Format("%s %s:%lld->%lld/%s", p.label.c_str(), p.host_ip.empty() ? "*" : p.host_ip.c_str(),
                             static_cast<long long>(p.host_port), static_cast<long long>(p.to), p.protocol.c_str()));
    }
    jobs[i].ports = Strings(&a, ports, &jobs[i].ports_count);
  }
  resp.attached = jobs;
  resp.attached_count = static_cast<pb_size_t>(attached.size());
  resp.problems = Strings(&a, problems, &resp.problems_count);
  r.Finish(PbEncode(outpost_v1_ListNetworksResponse_fields, &resp, "ListNetworksResponse"));
}

}  // namespace

std::string NetworksSummary(Agent* agent, bool* ok) {
  net::Networks* nets = agent->networks();
  if (!nets) {
    *ok = false;
    return "unavailable: " + agent->networks_problem();
  }
  std::string names;
  size_t jobs = 0;
  std::vector<std::string> missing;
  for (const net::NetworkView& v : nets->List()) {
    names += (names.empty() ? "" : ", ") + v.mode;
    jobs += v.jobs.size();
    std::vector<std::string> absent;
    for (const net::PluginView& p : v.plugins) {
      if (p.binary.empty()) absent.push_back(p.type);
    }
    if (!absent.empty()) missing.push_back(v.mode + ": plugins not in cni_path: " + JoinStrings(absent, ", "));
  }
  std::string dir = nets->options().config_dir;
  // A node without CNI configs is normal (the bridge network needs none).
  if (!nets->ConfigDirProblem().empty()) dir += ": not there, watched for";
  std::string out = Format("%s; %zu jobs attached (%s)", names.c_str(), jobs, dir.c_str());
  auto problems = nets->ConfigProblems();
  *ok = problems.empty() && missing.empty();
  for (const std::string& m : missing) out += "; " + m;
  for (const auto& [file, why] : problems) out += "; not used: " + file + ": " + why;
  return out;
}

void RegisterNetworkApi(Agent* agent, wire::RpcServer* server) {
  server->Register(kAgentService, "ListNetworks",
                   [agent](const wire::CallContext&, std::string_view payload, wire::Responder responder) {
                     HandleListNetworks(agent, payload, responder);
                   });
}

}  // namespace outpost::agent
