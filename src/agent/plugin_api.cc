#include "agent/plugin_api.h"

#include <unistd.h>

#include <deque>

#include "agent/agent.h"
#include "agent/api.h"
#include "job/manager.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "driver/conformance.h"
#include "driver/remote.h"
#include "base/sys.h"
#include "plugin.pb.h"
#include "plugin/registry.h"
#include "plugin/watcher.h"
#include "proc/procfs.h"
#include "task/manager.h"
#include "wire/rpc_server.h"

namespace outpost::agent {

// The plugin registry and the device plugins, before the tasks: a task
// recovered or started at once may hold or want devices.
Status Agent::StartRegistry() {
  plugin::RegistryOptions ro;
  ro.grace_nanos = config_.plugin_grace_period_nanos;
  ro.on_event = [this](const plugin::Event& e) { PublishPluginEvent(e); };
  plugins_ = std::make_unique<plugin::Registry>(loop_.get(), ro);
  if (config_.kubelet_plugins_dir.empty() && config_.device_plugins_dir.empty()) return OkStatus();
  devices::DevicePluginsOptions d;
  d.dir = config_.device_plugins_dir;
  d.state_dir = config_.state_dir;
  d.boot_id = proc::CurrentBootId();
  d.call_timeout_nanos = config_.driver_call_timeout_nanos;
  task::EventLog* events = &events_;
  d.on_event = [events](const std::string& type, const std::string& message,
                        const std::map<std::string, std::string>& annotations) {
    driver::TaskEvent ev;
    ev.timestamp_unix_nanos = WallNanos();
    ev.type = type;
    ev.message = message;
    ev.annotations = annotations;
    events->Publish(ev);
  };
  // Told after the current callback: the manager tells its events before
  // it takes the plugin's new list.
  Loop* lp = loop_.get();
  d.on_devices_changed = [this, lp] {
    lp->Defer([this] {
      if (jobs_) jobs_->OnDevicesChanged();
    });
  };
  devices_ = std::make_unique<devices::DevicePlugins>(loop_.get(), plugins_.get(), d);
  OUTPOST_RETURN_IF_ERROR(plugins_->AddHandler(devices_.get()));
  return devices_->Start();
}

void Agent::PublishPluginEvent(const plugin::Event& e) {
  driver::TaskEvent ev;
  ev.timestamp_unix_nanos = WallNanos();
  ev.type = "plugin_" + e.kind;
  ev.message = e.message;
  if (!e.type.empty()) ev.annotations["plugin_type"] = e.type;
  if (!e.name.empty()) ev.annotations["plugin_name"] = e.name;
  if (!e.socket.empty()) ev.annotations["socket"] = e.socket;
  events_.Publish(ev);
}

Status Agent::StartPlugins() {
  const std::string dir = config_.PluginsDir();
  // Not fatal: the watcher retries a dir it cannot watch, and status says why.
  Status made = sys::MkdirAll(dir, 0700);
  if (!made.ok()) log::Error("cannot create the plugins dir", {{"dir", dir}, {"error", made.error().message()}});
  auto publish = [this](const plugin::Event& e) { PublishPluginEvent(e); };
  // The handlers of the plugin types, before the first socket is looked at.
  task::TaskManager* tasks = tasks_.get();
  driver::TaskDriverHandler::Hooks hooks;
  // Tasks waiting for a driver plugin (not registered yet, or
  // disconnected) start once it is there.
  hooks.added = [this, tasks](const std::string& name) {
    tasks->SubscribeTo(name);
    if (jobs_) jobs_->OnDriverReady(name);
  };
  hooks.changed = [this, tasks](const std::string& name) {
    tasks->OnDriverChanged(name);
    if (jobs_) jobs_->OnDriverReady(name);
  };
  int64_t grace = config_.plugin_grace_period_nanos;
  driver::RemoteOptions ro_driver;
  ro_driver.call_timeout_nanos = config_.driver_call_timeout_nanos;
  ro_driver.start_timeout_nanos = config_.driver_start_timeout_nanos;
  hooks.expired = [tasks, grace](const std::string& name) {
    tasks->OnDriverGone(name, "driver \"" + name + "\" had no connected instance for " + FormatDuration(grace));
  };
  driver_plugins_ =
      std::make_unique<driver::TaskDriverHandler>(loop_.get(), plugins_.get(), &drivers_, ro_driver, hooks);
  OUTPOST_RETURN_IF_ERROR(plugins_->AddHandler(driver_plugins_.get()));

  plugin::WatcherOptions wo;
  wo.dir = dir;
  wo.on_event = publish;
  auto w = plugin::Watcher::Start(loop_.get(), plugins_.get(), wo);
  if (!w.ok()) return w.error().Wrap("plugins dir " + dir);
  plugin_watcher_ = std::move(*w);
  if (!config_.kubelet_plugins_dir.empty()) {
    // kubelet's plugins_registry: the same registration over gRPC.
    const std::string& kdir = config_.kubelet_plugins_dir;
    Status kmade = sys::MkdirAll(kdir, 0750);
    if (!kmade.ok()) {
      log::Error("cannot create the kubelet plugins dir", {{"dir", kdir}, {"error", kmade.error().message()}});
    }
    plugin::WatcherOptions kwo;
    kwo.dir = kdir;
    kwo.transport = plugin::Transport::kGrpc;
    kwo.name = "kubelet plugins dir";
    kwo.on_event = publish;
    auto kw = plugin::Watcher::Start(loop_.get(), plugins_.get(), kwo);
    if (!kw.ok()) return kw.error().Wrap("kubelet_plugins_dir " + kdir);
    kubelet_watcher_ = std::move(*kw);
  }
  StartNomadPlugins();
  RegisterPluginApi(this, api_.get());
  return OkStatus();
}

void Agent::StartNomadPlugins() {
  if (config_.nomad_plugin_dir.empty()) return;
  task::TaskManager* tasks = tasks_.get();
  driver::nomad::NomadOptions o;
  o.socket_dir = config_.runtime_dir + "/nomad-plugins";
  o.alloc_root = config_.state_dir + "/nomad-alloc";
  char host[256] = {0};
  o.node.name = ::gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
  o.node.id = driver::nomad::AllocId("node:" + o.node.name);
  o.call_timeout_nanos = config_.driver_call_timeout_nanos;
  o.start_timeout_nanos = config_.driver_start_timeout_nanos;
  o.grace_nanos = config_.plugin_grace_period_nanos;
  o.added = [this, tasks](const std::string& name) {
    tasks->SubscribeTo(name);
    if (jobs_) jobs_->OnDriverReady(name);
  };
  o.changed = [this, tasks](const std::string& name) {
    tasks->OnDriverChanged(name);
    if (jobs_) jobs_->OnDriverReady(name);
  };
  o.gone = [tasks](const std::string& name, const std::string& why) { tasks->OnDriverGone(name, why); };
  nomad_ = std::make_unique<driver::nomad::Plugins>(loop_.get(), &drivers_, config_.nomad_plugin_dir,
                                                    config_.nomad_plugins, o.socket_dir, o);
  nomad_->Start();
}

namespace {

void HandleListPlugins(Agent* agent, std::string_view payload, wire::Responder responder) {
  PbOwned<outpost_v1_ListPluginsRequest> req(outpost_v1_ListPluginsRequest_fields);
  Status st = req.Decode(payload, "ListPluginsRequest");
  if (!st.ok()) return responder.Fail(st.error());
  plugin::Registry* reg = agent->plugins();
  plugin::Watcher* watcher = agent->plugin_watcher();

  // nanopb points into these; they live until the reply is encoded.
  std::vector<plugin::Registry::PluginView> plugins = reg->List();
  std::vector<plugin::Watcher::SocketView> sockets = watcher->Sockets();
  if (plugin::Watcher* kw = agent->kubelet_watcher()) {
    for (auto& v : kw->Sockets()) sockets.push_back(std::move(v));
  }
  std::vector<std::string> types = reg->Types();
  std::string dir = agent->config().PluginsDir(), problem = watcher->problem();

  std::vector<char*> type_ptrs;
  for (const std::string& t : types) type_ptrs.push_back(PbStr(t));
  std::deque<std::vector<outpost_v1_PluginInstanceInfo>> instance_arrays;
  std::vector<outpost_v1_PluginEntry> entries(plugins.size(), outpost_v1_PluginEntry{});
  std::vector<std::string> health(plugins.size());
  for (size_t i = 0; i < plugins.size(); ++i) {
    const auto& p = plugins[i];
    driver::Driver* d = p.type == "TaskDriver" ? agent->drivers()->Find(p.name) : nullptr;
    if (d) {
      driver::Fingerprint f = d->GetFingerprint();
      health[i] = std::string(driver::HealthName(f.health)) + ": " + f.description;
    }
    entries[i].driver_health = PbStr(health[i]);
    const plugin::Instance* active = reg->Active(p.type, p.name);
    auto& arr = instance_arrays.emplace_back(p.instances.size(), outpost_v1_PluginInstanceInfo{});
    for (size_t j = 0; j < p.instances.size(); ++j) {
      const plugin::Instance& in = p.instances[j];
      arr[j].socket = PbStr(in.socket);
      arr[j].endpoint = PbStr(in.endpoint);
      arr[j].version = PbStr(in.version);
      arr[j].registered_at_unix_nanos = in.registered_unix_nanos;
      arr[j].connected = in.connected;
      arr[j].since_unix_nanos = in.since_unix_nanos;
      arr[j].active = active && active->id == in.id;
    }
    entries[i].type = PbStr(p.type);
    entries[i].name = PbStr(p.name);
    entries[i].instances_count = static_cast<pb_size_t>(arr.size());
    entries[i].instances = arr.data();
    entries[i].expires_at_unix_nanos = p.expires_unix_nanos;
    entries[i].last_error = PbStr(p.last_error);
  }
  std::vector<outpost_v1_PluginSocketInfo> socks(sockets.size(), outpost_v1_PluginSocketInfo{});
  for (size_t i = 0; i < sockets.size(); ++i) {
    const auto& s = sockets[i];
    socks[i].path = PbStr(s.path);
    socks[i].state = PbStr(s.state);
    socks[i].type = PbStr(s.type);
    socks[i].name = PbStr(s.name);
    socks[i].failures = s.failures;
    socks[i].last_error = PbStr(s.last_error);
    socks[i].next_attempt_unix_nanos = s.next_attempt_unix_nanos;
  }
  outpost_v1_ListPluginsResponse resp = outpost_v1_ListPluginsResponse_init_zero;
  resp.plugins_dir = PbStr(dir);
  resp.problem = PbStr(problem);
  resp.types_count = static_cast<pb_size_t>(type_ptrs.size());
  resp.types = type_ptrs.data();
  resp.grace_period_nanos = agent->config().plugin_grace_period_nanos;
  resp.plugins_count = static_cast<pb_size_t>(entries.size());
  resp.plugins = entries.data();
  resp.sockets_count = static_cast<pb_size_t>(socks.size());
  resp.sockets = socks.data();
  responder.Finish(PbEncode(outpost_v1_ListPluginsResponse_fields, &resp, "ListPluginsResponse"));
}

// Runs the conformance checks on a registered driver (exec or a plugin's)
// in the loop; the reply comes when the last check is done.
void HandleCheckDriver(Agent* agent, std::string_view payload, wire::Responder responder) {
  PbOwned<outpost_v1_CheckDriverRequest> req(outpost_v1_CheckDriverRequest_fields);
  Status st = req.Decode(payload, "CheckDriverRequest");
  if (!st.ok()) return responder.Fail(st.error());
  std::string name = PbString(req->name);
  auto d = agent->drivers()->Get(name);
  if (!d.ok()) return responder.Fail(d.error());
  if (!agent->drivers_being_checked()->insert(name).second) {
    return responder.Fail(Error(Code::kFailedPrecondition, "driver \"" + name + "\" is being checked already"));
  }
  driver::ConformanceOptions o;
  o.work_dir = agent->config().runtime_dir + "/conformance";
  (void)sys::MkdirAll(o.work_dir, 0700);
  o.cgroups = agent->cgroups();
  o.driver_config = PbString(req->config);
  if (!o.driver_config.empty()) {
    Status bad = (*d)->CheckConfig(o.driver_config);
    if (!bad.ok()) {
      agent->drivers_being_checked()->erase(name);
      return responder.Fail(bad.error().Wrap("--config"));
    }
  }
  // By name: a plugin driver may deregister while its checks run.
  driver::RunConformance(*agent->loop(), *agent->drivers(), name, o, [agent, name, responder](std::vector<driver::CheckResult> rs) {
    agent->drivers_being_checked()->erase(name);
    std::vector<outpost_v1_DriverCheck> checks(rs.size(), outpost_v1_DriverCheck{});
    for (size_t i = 0; i < rs.size(); ++i) {
      checks[i].check = PbStr(rs[i].name);
      checks[i].result = const_cast<char*>(driver::CheckOutcomeName(rs[i].outcome));
      checks[i].detail = PbStr(rs[i].detail);
      checks[i].duration_nanos = rs[i].duration_nanos;
    }
    outpost_v1_CheckDriverResponse resp = outpost_v1_CheckDriverResponse_init_zero;
    resp.checks_count = static_cast<pb_size_t>(checks.size());
    resp.checks = checks.data();
    responder.Finish(PbEncode(outpost_v1_CheckDriverResponse_fields, &resp, "CheckDriverResponse"));
  });
}

}  // namespace

void RegisterPluginApi(Agent* agent, wire::RpcServer* server) {
  server->Register(kAgentService, "ListPlugins",
                   [agent](const wire::CallContext&, std::string_view payload, wire::Responder responder) {
                     HandleListPlugins(agent, payload, std::move(responder));
                   });
  server->Register(kAgentService, "CheckDriver",
                   [agent](const wire::CallContext&, std::string_view payload, wire::Responder responder) {
                     HandleCheckDriver(agent, payload, std::move(responder));
                   });
}

std::string PluginSummary(Agent* agent, bool* on) {
  plugin::Registry* reg = agent->plugins();
  plugin::Watcher* watcher = agent->plugin_watcher();
  *on = reg && watcher;
  if (!*on) return "not started";
  auto plugins = reg->List();
  std::string out = Format("%zu plugin%s (%zu instance%s) in %s", plugins.size(), plugins.size() == 1 ? "" : "s",
                           reg->instance_count(), reg->instance_count() == 1 ? "" : "s",
                           agent->config().PluginsDir().c_str());
  if (!watcher->problem().empty()) {
    *on = false;
    out += ": " + watcher->problem();
  }
  for (const auto& p : plugins) {
    if (reg->Active(p.type, p.name)) continue;
    out += Format("; %s %s has no connected instance", p.type.c_str(), p.name.c_str());
  }
  for (plugin::Watcher* w : {watcher, agent->kubelet_watcher()}) {
    if (w == nullptr) continue;
    for (const auto& s : w->Sockets()) {
      if (s.state != "waiting") continue;
      out += "; " + s.path + " not registered: " + s.last_error;
    }
  }
  return out;
}

}  // namespace outpost::agent
