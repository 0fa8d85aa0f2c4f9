#include "agent/api.h"

#include <unistd.h>

#include "agent.pb.h"
#include "agent/agent.h"
#include "agent/plugin_api.h"
#include "devices/plugins.h"
#include "task/manager.h"
#include "cgroup/cgroup.h"
#include "job/manager.h"
#include "base/strings.h"
#include "base/clock.h"
#include "base/pb.h"
#include "wire/rpc_server.h"

namespace outpost::agent {

namespace {

// One line of `outpost status`: a capability, whether it is on, and details.
struct Feature {
  std::string name;
  bool enabled = false;
  std::string detail;
};

const char* ArchName() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "armhf";
#else
  return "unknown";
#endif
}

std::vector<Feature> CollectFeatures(Agent* agent) {
  std::vector<Feature> out;
  out.push_back({"api", true, "ttRPC on " + agent->config().ApiSocket()});
  Feature cgf{"cgroup2", false, ""};
  if (cgroup::Cgroups* cg = agent->cgroups(); cg && cg->available()) {
    std::string list;
    for (const std::string& c : cg->controllers()) list += (list.empty() ? "" : " ") + c;
    cgf.enabled = true;
    cgf.detail = cg->root() + ": " + list;
  } else {
    cgf.detail = (cg ? cg->reason() : std::string("not set up")) +
                 (agent->config().cgroup_allow_without_limits
                      ? "; tasks with limits run without them (cgroup_allow_without_limits)"
                      : "; jobs that set resource limits are refused");
  }
  out.push_back(cgf);
  out.push_back({"child_exits", true, agent->loop()->UsesPidfd() ? "pidfd" : "SIGCHLD + waitpid (no pidfd)"});
  if (task::TaskManager* tm = agent->tasks()) {
    for (const std::string& name : agent->drivers()->Names()) {
      auto fp = tm->Fingerprint(name);
      if (!fp.ok()) continue;
      std::string detail = std::string(driver::HealthName(fp->health)) + ": " + fp->description;
      for (const auto& [k, v] : fp->attributes) detail += " " + k + "=" + v;
      out.push_back({"driver." + name, fp->health == driver::Health::kHealthy, detail});
    }
    std::vector<std::string> problems = tm->LogProblems();
    std::string logs = Format("%zu tasks", tm->task_count());
    for (const std::string& p : problems) logs += "; " + p;
    out.push_back({"task_logs", problems.empty(), problems.empty() ? logs + ", all writing" : logs});
  }
  if (job::JobManager* jobs = agent->jobs()) {
    std::string detail = Format("%zu jobs", jobs->job_count());
    if (!jobs->recovered()) detail += " (recovering)";
    detail += jobs->jobs_dir().empty() ? "; no jobs.d" : "; jobs.d " + jobs->jobs_dir();
    std::string dir_problem = jobs->DirProblem();
    if (!dir_problem.empty()) detail += ": " + dir_problem;
    auto files = jobs->FileProblems();
    for (const auto& [path, error] : files) {
      std::string first = error.substr(0, error.find('\n'));
      if (!StartsWith(first, path)) first = path + ": " + first;
      detail += "; invalid job file " + first;
      if (error.find('\n') != std::string::npos) detail += " (more in `outpost ps`)";
    }
    for (const std::string& p : jobs->StoreProblems()) detail += "; stored job unreadable: " + p;
    // Problems with files do not turn jobs off: they are listed in the detail.
    out.push_back({"jobs", true, detail});
  }
  bool hooks_ok = true;
  std::string hooks = HooksSummary(agent, &hooks_ok);
  out.push_back({"hooks", hooks_ok, hooks});
  bool nets_ok = true;
  std::string nets = NetworksSummary(agent, &nets_ok);
  out.push_back({"networks", nets_ok, nets});
  bool nri_ok = false;
  std::string nri = NriSummary(agent, &nri_ok);
  out.push_back({"nri", nri_ok, nri});
  bool plugins_ok = false;
  std::string plugins = PluginSummary(agent, &plugins_ok);
  out.push_back({"plugins", plugins_ok, plugins});
  if (devices::DevicePlugins* d = agent->device_plugins()) {
    size_t devs = 0, healthy = 0;
    for (const devices::ResourceState& r : d->manager().resources()) {
      devs += r.devices.size();
      for (const devices::Device& dev : r.devices) healthy += r.connected && dev.healthy();
    }
    const std::string& dir = agent->config().device_plugins_dir;
    const std::string& registry = agent->config().kubelet_plugins_dir;
    std::string where = dir.empty() ? std::string("no kubelet.sock (device_plugins_dir is empty)")
                                    : "kubelet.sock in " + dir;
    if (!registry.empty()) where += "; plugins_registry " + registry;
    out.push_back({"device_plugins", true,
                   Format("%zu resources (%zu devices, %zu healthy); %s", d->manager().resources().size(), devs,
                          healthy, where.c_str())});
  }
  if (driver::nomad::Plugins* nomad = agent->nomad_plugins()) {
    bool nomad_ok = true;
    std::string summary = nomad->Summary(&nomad_ok);
    out.push_back({"nomad_plugins", nomad_ok, summary});
  }
  keeper::KeeperLink* keeper = agent->keeper_link();
  out.push_back({"keeper", keeper != nullptr,
                 keeper ? "pid " + std::to_string(keeper->keeper_pid()) + ": tasks outlive the worker"
                        : "--no-keeper: tasks are orphaned to init when the agent stops"});
  return out;
}

void HandleStatus(Agent* agent, const wire::CallContext&, std::string_view payload, wire::Responder responder) {
  PbOwned<outpost_v1_StatusRequest> req(outpost_v1_StatusRequest_fields);
  Status st = req.Decode(payload, "StatusRequest");
  if (!st.ok()) return responder.Fail(st.error());

  const Config& c = agent->config();
  std::string version = OUTPOST_VERSION, socket = c.ApiSocket(), arch = ArchName();
  std::vector<Feature> features = CollectFeatures(agent);
  std::vector<outpost_v1_Feature> fs(features.size());
  for (size_t i = 0; i < features.size(); ++i) {
    fs[i].name = PbStr(features[i].name);
    fs[i].enabled = features[i].enabled;
    fs[i].detail = PbStr(features[i].detail);
  }
  outpost_v1_StatusResponse resp = outpost_v1_StatusResponse_init_zero;
  resp.version = PbStr(version);
  resp.pid = ::getpid();
  resp.uptime_nanos = MonotonicNanos() - agent->started_mono();
  resp.config_path = PbStr(c.path);
  resp.api_socket = PbStr(socket);
  resp.state_dir = PbStr(c.state_dir);
  resp.runtime_dir = PbStr(c.runtime_dir);
  resp.features_count = static_cast<pb_size_t>(fs.size());
  resp.features = fs.data();
  resp.started_at_unix_nanos = agent->started_wall();
  resp.api_connections = static_cast<int32_t>(agent->api_connections());
  resp.config_loaded_unix_nanos = agent->config_loaded_wall();
  resp.arch = PbStr(arch);
  resp.keeper_pid = agent->keeper_link() ? agent->keeper_link()->keeper_pid() : 0;
  responder.Finish(PbEncode(outpost_v1_StatusResponse_fields, &resp, "StatusResponse"));
}

}  // namespace

void RegisterApi(Agent* agent, wire::RpcServer* server) {
  server->Register(kAgentService, "Status", [agent](const wire::CallContext& ctx, std::string_view payload,
                                                   wire::Responder responder) {
    HandleStatus(agent, ctx, payload, std::move(responder));
  });
  RegisterHooksApi(agent, server);
  RegisterNetworkApi(agent, server);
  RegisterNriApi(agent, server);
  RegisterDevicesApi(agent, server);
}

}  // namespace outpost::agent
