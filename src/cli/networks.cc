// `outpost networks`: the networks jobs can use (the built-in bridge and the
// CNI config dir's), the plugins each needs with where they were found and
// the spec versions they support, the jobs attached now, and the config
// files that are not used; `--show NAME`: the conflist a network uses
// (docs/networking.md).
#include <cstdio>

#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "network.pb.h"

namespace outpost::cli {

const char kNetworksHelp[] =
    "Usage: outpost networks [--show NETWORK] [--json]\n"
    "\n"
    "Lists the networks a job's `network.mode` can name: \"bridge\" (built in:\n"
    "loopback, bridge, firewall and portmap on config bridge_network_subnet) and\n"
    "\"cni/NAME\" for every network in the CNI config dir (config cni_config_dir).\n"
    "For each: its cniVersion, the plugins it runs in order, where each was found\n"
    "in cni_path and the spec versions it reports (its VERSION answer, asked in\n"
    "the background 2 s after the agent starts and whenever the config dir\n"
    "changes), and the jobs attached to it.\n"
    "Then the config files that are not used, and why.\n"
    "\n"
    "--show NETWORK prints the conflist that network uses (\"bridge\", \"cni/NAME\"\n"
    "or NAME). See docs/networking.md.\n";

namespace {

picojson::value StringsJson(char** v, pb_size_t n) {
  picojson::array a;
  for (pb_size_t i = 0; i < n; ++i) a.emplace_back(PbString(v[i]));
  return picojson::value(std::move(a));
}

std::string Joined(char** v, pb_size_t n, const char* sep) {
  std::string s;
  for (pb_size_t i = 0; i < n; ++i) s += (i ? sep : "") + PbString(v[i]);
  return s;
}

void PrintJsonReply(const outpost_v1_ListNetworksResponse& r) {
  picojson::object o;
  picojson::array nets;
  for (pb_size_t i = 0; i < r.networks_count; ++i) {
    const auto& n = r.networks[i];
    picojson::object e;
    e["name"] = picojson::value(PbString(n.name));
    e["mode"] = picojson::value(PbString(n.mode));
    e["file"] = JsonText(n.file);
    e["cni_version"] = JsonText(n.cni_version);
    e["disable_check"] = picojson::value(n.disable_check);
    picojson::array plugins;
    for (pb_size_t k = 0; k < n.plugins_count; ++k) {
      const auto& p = n.plugins[k];
      picojson::object po;
      po["type"] = picojson::value(PbString(p.type));
      po["binary"] = picojson::value(PbString(p.binary));
      po["versions"] = StringsJson(p.versions, p.versions_count);
      po["problem"] = JsonText(p.problem);
      plugins.emplace_back(std::move(po));
    }
    e["plugins"] = picojson::value(std::move(plugins));
    e["jobs"] = StringsJson(n.jobs, n.jobs_count);
    nets.emplace_back(std::move(e));
  }
  o["networks"] = picojson::value(std::move(nets));
  picojson::array jobs;
  for (pb_size_t i = 0; i < r.attached_count; ++i) {
    const auto& j = r.attached[i];
    picojson::object e;
    e["job"] = picojson::value(PbString(j.job));
    e["mode"] = picojson::value(PbString(j.mode));
    e["netns"] = JsonText(j.netns);
    e["cidr"] = JsonText(j.cidr);
    e["ports"] = StringsJson(j.ports, j.ports_count);
    jobs.emplace_back(std::move(e));
  }
  o["attached"] = picojson::value(std::move(jobs));
  o["problems"] = StringsJson(r.problems, r.problems_count);
  o["cni_config_dir"] = JsonText(r.config_dir);
  o["cni_path"] = StringsJson(r.cni_path, r.cni_path_count);
  o["netns_dir"] = JsonText(r.netns_dir);
  o["unavailable"] = JsonText(r.unavailable);
  o["queued"] = picojson::value(static_cast<int64_t>(r.queued));
  PrintJson(picojson::value(std::move(o)));
}

}  // namespace

int RunNetworks(const GlobalOptions& opts, const std::vector<std::string>& args) {
  auto a = ParseArgs(args, {"--show"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "networks");
  if (!a->pos.empty()) return UsageError("networks takes no positional arguments (use --show NETWORK)", "networks");
  std::string show = a->Get("--show") ? *a->Get("--show") : "";
  outpost_v1_ListNetworksRequest req = outpost_v1_ListNetworksRequest_init_zero;
  req.show = PbStr(show);
  auto payload = PbEncode(outpost_v1_ListNetworksRequest_fields, &req, "ListNetworksRequest");
  if (!payload.ok()) return Fail(kExitFailure, payload.error().message());
  int code = 0;
  auto reply = CallAgent(opts, "ListNetworks", *payload, &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListNetworksResponse> resp(outpost_v1_ListNetworksResponse_fields);
  Status st = resp.Decode(*reply, "ListNetworksResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());
  if (!show.empty()) {
    std::printf("%s\n", PbString(resp->config).c_str());
    return kExitOk;
  }
  if (opts.json) {
    PrintJsonReply(*resp);
    return kExitOk;
  }
  if (!PbString(resp->unavailable).empty()) {
    std::printf("job networks unavailable: %s\n", PbString(resp->unavailable).c_str());
    return kExitOk;
  }
  std::printf("configs: %s   plugins: %s   namespaces: %s\n", PbString(resp->config_dir).c_str(),
              Joined(resp->cni_path, resp->cni_path_count, ":").c_str(), PbString(resp->netns_dir).c_str());
  for (pb_size_t i = 0; i < resp->networks_count; ++i) {
    const auto& n = resp->networks[i];
    std::string file = PbString(n.file);
    std::printf("%s  (network %s, cniVersion %s%s, %s)\n", PbString(n.mode).c_str(), PbString(n.name).c_str(),
                PbString(n.cni_version).c_str(), n.disable_check ? ", no CHECK" : "",
                file.empty() ? "built in" : file.c_str());
    for (pb_size_t k = 0; k < n.plugins_count; ++k) {
      const auto& p = n.plugins[k];
      std::string binary = PbString(p.binary);
      std::string versions = Joined(p.versions, p.versions_count, " ");
      std::printf("  %-10s %s%s%s%s\n", PbString(p.type).c_str(), binary.empty() ? "NOT FOUND" : binary.c_str(),
                  versions.empty() ? "" : ("  versions " + versions).c_str(), PbString(p.problem).empty() ? "" : "  ",
                  PbString(p.problem).c_str());
    }
    if (n.jobs_count) std::printf("  jobs: %s\n", Joined(n.jobs, n.jobs_count, ", ").c_str());
  }
  for (pb_size_t i = 0; i < resp->attached_count; ++i) {
    const auto& j = resp->attached[i];
    std::printf("job %s: %s %s in %s%s%s\n", PbString(j.job).c_str(), PbString(j.mode).c_str(),
                PbString(j.cidr).empty() ? "-" : PbString(j.cidr).c_str(), PbString(j.netns).c_str(),
                j.ports_count ? ", ports " : "", Joined(j.ports, j.ports_count, ", ").c_str());
  }
  for (pb_size_t i = 0; i < resp->problems_count; ++i) std::printf("not used: %s\n", resp->problems[i]);
  if (resp->queued) std::printf("%d network operations queued\n", resp->queued);
  return kExitOk;
}

}  // namespace outpost::cli
