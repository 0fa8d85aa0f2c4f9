// A Nomad driver plugin's life and configuration (see nomad_driver.h); the
// Driver calls are in nomad_calls.cc.
#include "driver/nomad/nomad_driver.h"

#include <signal.h>

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "goplugin.pb.h"
#include "nomad_base.pb.h"
#include "nomad_driver.pb.h"
#include "proc/procfs.h"

namespace outpost::driver::nomad {

namespace {

constexpr const char kApiVersion[] = "v0.1.0";  // drivers.ApiVersion010
// A plugin up this long before it exits restarts without waiting.
constexpr int64_t kStableNanos = 60LL * 1000000000;
// The ports Nomad's client gives drivers for their executors.
constexpr uint32_t kClientMinPort = 14000;
constexpr uint32_t kClientMaxPort = 14512;

Result<std::string> Empty() { return std::string(); }

}  // namespace

NomadPlugin::NomadPlugin(Loop* loop, Registry* registry, std::string path, NomadOptions options)
    : loop_(loop), registry_(registry), path_(std::move(path)), opts_(std::move(options)) {
  file_ = sys::Basename(path_);
  name_ = file_;
  caps_.mounts = true;
  caps_.devices = true;
  caps_.network_isolation = {"host", "group"};
  fingerprint_.description = "starting";
}

NomadPlugin::~NomadPlugin() {
  *alive_ = false;
  for (Loop::TimerId t : {restart_timer_, grace_timer_}) {
    if (t != 0) loop_->CancelTimer(t);
  }
  if (registered_) registry_->Remove(name_);
}

void NomadPlugin::Start() { Launch(); }

void NomadPlugin::Launch() {
  restart_timer_ = 0;
  if (shutting_down_) return;
  state_ = state_ == State::kStarting ? State::kStarting : State::kRestarting;
  PluginProcessOptions o;
  o.path = path_;
  o.name = name_;
  o.socket_dir = opts_.socket_dir;
  if (const PluginStanza* s = opts_.stanza ? opts_.stanza(file_, name_ == file_ ? "" : name_) : nullptr) o.args = s->args;
  std::weak_ptr<bool> alive = alive_;
  auto p = PluginProcess::Launch(
      loop_, o,
      [this, alive](Result<std::unique_ptr<wire::GrpcClient>> c) {
        if (alive.lock()) OnConnected(std::move(c));
      },
      [this, alive](int status) {
        if (alive.lock()) OnExited(status);
      });
  if (!p.ok()) return Fail("cannot launch " + path_ + ": " + p.error().message(), true);
  proc_ = std::move(*p);
}

void NomadPlugin::OnConnected(Result<std::unique_ptr<wire::GrpcClient>> c) {
  // A handshake outpost refuses (FailedPrecondition) is not retried.
  if (!c.ok()) return Fail(c.error().message(), c.error().code() != Code::kFailedPrecondition);
  client_ = std::move(*c);
  std::weak_ptr<bool> alive = alive_;
  client_->SetCloseCallback([this, alive](const Error& why) {
    if (!alive.lock()) return;
    // The process goes with it (or is made to): OnExited restarts.
    if (proc_ && proc_->running()) proc_->Stop();
    Lost("connection to the plugin lost: " + why.message());
  });
  OpenStdio();
  Configure();
}

// PluginInfo, ConfigSchema, SetConfig: Nomad's loader and driver manager.
void NomadPlugin::Configure() {
  std::weak_ptr<bool> alive = alive_;
  Call(kBaseService, "PluginInfo", Empty(), opts_.call_timeout_nanos, [this, alive](Result<std::string> r) {
    if (!alive.lock()) return;
    if (!r.ok()) return Fail("PluginInfo: " + r.error().message(), true);
    PbOwned<hashicorp_nomad_plugins_base_proto_PluginInfoResponse> info(
        hashicorp_nomad_plugins_base_proto_PluginInfoResponse_fields);
    Status st = info.Decode(*r, "PluginInfoResponse");
    if (!st.ok()) return Fail("PluginInfo: " + st.error().message(), true);
    if (info->type != hashicorp_nomad_plugins_base_proto_PluginType_DRIVER) {
      return Fail(Format("the plugin is of type %d, not a driver: outpost hosts Nomad task drivers", info->type),
                  false);
    }
    std::string name = PbString(info->name);
    std::vector<std::string> versions;
    for (pb_size_t i = 0; i < info->plugin_api_versions_count; ++i) {
      versions.push_back(PbString(info->plugin_api_versions[i]));
    }
    if (std::find(versions.begin(), versions.end(), kApiVersion) == versions.end()) {
      return Fail("the plugin speaks driver API versions [" + JoinStrings(versions, ", ") +
                      "], none of which outpost speaks (" + kApiVersion + ")",
                  false);
    }
    if (name.empty()) return Fail("PluginInfo names no plugin", false);
    if (registered_ && name != name_) {
      return Fail("the plugin now calls itself \"" + name + "\", not \"" + name_ + "\"", false);
    }
    name_ = name;
    version_ = PbString(info->plugin_version);
    api_version_ = kApiVersion;
    if (proc_) proc_->set_name(name_);
    std::weak_ptr<bool> alive2 = alive_;
    Call(kBaseService, "ConfigSchema", Empty(), opts_.call_timeout_nanos, [this, alive2](Result<std::string> s) {
      if (alive2.lock()) AfterSchema(std::move(s));
    });
  });
}

void NomadPlugin::AfterSchema(Result<std::string> reply) {
  if (!reply.ok()) return Fail("ConfigSchema: " + reply.error().message(), true);
  auto schema = DecodeSchemaResponse(*reply);
  if (!schema.ok()) return Fail("ConfigSchema: " + schema.error().message(), false);
  const PluginStanza* stanza = opts_.stanza ? opts_.stanza(file_, name_) : nullptr;
  picojson::value config{picojson::object()};
  if (stanza != nullptr && stanza->has_config) config = stanza->config;
  if (!schema->present && stanza != nullptr && stanza->has_config) {
    return Fail("configuration not allowed but config passed (the plugin has no config schema)", false);
  }
  DecodeOptions o;
  o.path = "nomad_plugins." + name_ + ".config";
  auto msgpack = EncodeConfig(*schema, config, o);
  // A config its schema refuses stops the plugin until the next agent start.
  if (!msgpack.ok()) return Fail(msgpack.error().message(), false);
  hashicorp_nomad_plugins_base_proto_SetConfigRequest req = hashicorp_nomad_plugins_base_proto_SetConfigRequest_init_zero;
  std::string_view view(*msgpack);
  req.msgpack_config = PbBytesOut(&view);
  req.has_nomad_config = true;
  req.nomad_config.has_driver = true;
  req.nomad_config.driver.ClientMinPort = kClientMinPort;
  req.nomad_config.driver.ClientMaxPort = kClientMaxPort;
  req.plugin_api_version = PbStr(api_version_);
  std::weak_ptr<bool> alive = alive_;
  Call(kBaseService, "SetConfig", PbEncode(hashicorp_nomad_plugins_base_proto_SetConfigRequest_fields, &req, "SetConfig"),
       opts_.call_timeout_nanos, [this, alive](Result<std::string> r) {
         if (!alive.lock()) return;
         if (!r.ok()) return Fail("SetConfig: " + r.error().message(), false);
         AfterSetConfig();
       });
}

// Init (Unimplemented is fine), TaskConfigSchema, Capabilities.
void NomadPlugin::AfterSetConfig() {
  std::weak_ptr<bool> alive = alive_;
  CallDriver("Init", Empty(), opts_.call_timeout_nanos, [this, alive](Result<std::string> r) {
    if (!alive.lock()) return;
    if (!r.ok() && r.error().code() != Code::kUnimplemented) return Fail("Init: " + r.error().message(), true);
    CallDriver("TaskConfigSchema", Empty(), opts_.call_timeout_nanos, [this, alive](Result<std::string> s) {
      if (!alive.lock()) return;
      if (!s.ok()) return Fail("TaskConfigSchema: " + s.error().message(), true);
      auto schema = DecodeSchemaResponse(*s);
      if (!schema.ok()) return Fail("TaskConfigSchema: " + schema.error().message(), false);
      task_schema_ = std::move(*schema);
      CallDriver("Capabilities", Empty(), opts_.call_timeout_nanos, [this, alive](Result<std::string> c) {
        if (alive.lock()) AfterCapabilities(std::move(c));
      });
    });
  });
}

void NomadPlugin::AfterCapabilities(Result<std::string> reply) {
  if (!reply.ok()) return Fail("Capabilities: " + reply.error().message(), true);
  PbOwned<hashicorp_nomad_plugins_drivers_proto_CapabilitiesResponse> m(
      hashicorp_nomad_plugins_drivers_proto_CapabilitiesResponse_fields);
  Status st = m.Decode(*reply, "CapabilitiesResponse");
  if (!st.ok()) return Fail("Capabilities: " + st.error().message(), false);
  const auto& c = m->capabilities;
  caps_.send_signals = c.send_signals;
  caps_.exec = c.exec;
  caps_.dynamic_workload_users = c.dynamic_workload_users;
  fs_isolation_ = static_cast<FsIsolation>(c.fs_isolation);
  static const char* const kIso[] = {"none", "chroot", "image", "unveil"};
  caps_.fs_isolation = kIso[static_cast<int>(fs_isolation_) & 3];
  // Nomad's MountConfigs: NO_MOUNTS refuses volume mounts.
  caps_.mounts = c.mount_configs != hashicorp_nomad_plugins_drivers_proto_DriverCapabilities_MountConfigs_NO_MOUNTS;
  caps_.network_isolation.clear();
  static const char* const kModes[] = {"host", "group", "task", "none"};
  for (pb_size_t i = 0; i < c.network_isolation_modes_count; ++i) {
    caps_.network_isolation.push_back(kModes[c.network_isolation_modes[i] & 3]);
  }
  // Nomad's default: host only, when a driver lists none.
  if (caps_.network_isolation.empty()) caps_.network_isolation = {"host"};
  Ready();
}

void NomadPlugin::Ready() {
  if (!registered_) {
    Status st = registry_->Add(this);
    if (!st.ok()) {
      return Fail("driver name \"" + name_ + "\" is taken: " + st.error().message(), false);
    }
    registered_ = true;
  }
  bool first = state_ == State::kStarting;
  state_ = State::kReady;
  problem_.clear();
  ready_mono_ = MonotonicNanos();
  if (grace_timer_ != 0) loop_->CancelTimer(grace_timer_);
  grace_timer_ = 0;
  log::Info("nomad plugin ready", {{"plugin", name_}, {"version", version_}, {"path", path_}});
  OpenStreams();
  // Starts cut short by the plugin's death: whatever it left goes.
  std::map<std::string, std::string> leftovers = std::move(destroy_when_back_);
  destroy_when_back_.clear();
  for (const auto& [id, instance] : leftovers) {
    // The new process may not know it (its state died with the old one):
    // then that start's processes are found by the marker outpost put in
    // their environment.
    DestroyTask(id, true, [marker = "OUTPOST_TASK_INSTANCE=" + instance](Status) {
      for (pid_t pid : proc::ProcessesWithEnv(marker)) ::kill(pid, SIGKILL);
    });
  }
  if (first && opts_.added) opts_.added(name_);
  // Tasks recorded for the driver (an agent restart, a plugin restart) are
  // recovered into this process.
  if (opts_.changed) opts_.changed(name_);
}

// Fingerprint, TaskEvents and the stdio stream stay open for the
// process's life, as Nomad's client keeps them.
void NomadPlugin::OpenStreams() {
  std::weak_ptr<bool> alive = alive_;
  fingerprint_call_ = client_->StartCall(kDriverService, "Fingerprint", 0);
  fingerprint_call_->OnMessage([this, alive](std::string_view m) {
    if (alive.lock()) OnFingerprint(m);
  });
  fingerprint_call_->OnDone([this, alive](const Status& st) {
    if (!alive.lock() || state_ != State::kReady) return;
    // Nomad re-dispenses the plugin when its fingerprint stream ends.
    fingerprint_.health = Health::kUnhealthy;
    fingerprint_.description = "fingerprint stream ended: " + (st.ok() ? std::string("by the plugin") : st.error().message());
    if (proc_ && proc_->running()) proc_->Stop();
  });
  (void)fingerprint_call_->Write("");
  fingerprint_call_->CloseSend();

  events_call_ = client_->StartCall(kDriverService, "TaskEvents", 0);
  events_call_->OnMessage([this, alive](std::string_view m) {
    if (alive.lock()) OnTaskEvent(m);
  });
  (void)events_call_->Write("");
  events_call_->CloseSend();

}

// go-plugin's stdio, opened at once as go-plugin's host does: a plugin
// whose stdout nobody drains blocks on a full pipe.
void NomadPlugin::OpenStdio() {
  std::weak_ptr<bool> alive = alive_;
  stdio_call_ = client_->StartCall("plugin.GRPCStdio", "StreamStdio", 0);
  stdio_call_->OnMessage([this, alive](std::string_view m) {
    if (!alive.lock()) return;
    plugin_StdioData d = plugin_StdioData_init_zero;
    std::string data;
    d.data = PbBytesIn(&data);
    if (!PbDecode(m, plugin_StdioData_fields, &d, "StdioData").ok()) return;
    const char* channel = d.channel == plugin_StdioData_Channel_STDERR ? "stderr" : "stdout";
    size_t start = 0;
    while (start < data.size()) {
      size_t nl = data.find('\n', start);
      std::string line = data.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!line.empty()) log::Info("nomad plugin: " + line, {{"plugin", name_}, {"stdio", channel}});
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  });
  (void)stdio_call_->Write("");
  stdio_call_->CloseSend();
}

void NomadPlugin::OnFingerprint(std::string_view message) {
  PbOwned<hashicorp_nomad_plugins_drivers_proto_FingerprintResponse> m(
      hashicorp_nomad_plugins_drivers_proto_FingerprintResponse_fields);
  if (!m.Decode(message, "FingerprintResponse").ok()) return;
  Fingerprint f;
  f.updated_unix_nanos = WallNanos();
  std::string err = PbString(m->err);
  switch (m->health) {
    case hashicorp_nomad_plugins_drivers_proto_FingerprintResponse_HealthState_HEALTHY: f.health = Health::kHealthy; break;
    case hashicorp_nomad_plugins_drivers_proto_FingerprintResponse_HealthState_UNHEALTHY: f.health = Health::kUnhealthy; break;
    default: f.health = Health::kUndetected; break;
  }
  f.description = PbString(m->health_description);
  if (!err.empty()) {
    f.health = Health::kUnhealthy;
    f.description = "failed to fingerprint driver: " + err;
  }
  for (pb_size_t i = 0; i < m->attributes_count; ++i) {
    const auto& e = m->attributes[i];
    if (!e.has_value) continue;
    const auto& v = e.value;
    std::string text;
    switch (v.which_value) {
      case hashicorp_nomad_plugins_shared_structs_Attribute_float_val_tag: text = Format("%g", v.value.float_val); break;
      case hashicorp_nomad_plugins_shared_structs_Attribute_int_val_tag: text = std::to_string(v.value.int_val); break;
      case hashicorp_nomad_plugins_shared_structs_Attribute_string_val_tag: text = PbString(v.value.string_val); break;
      case hashicorp_nomad_plugins_shared_structs_Attribute_bool_val_tag: text = v.value.bool_val ? "true" : "false"; break;
      default: break;
    }
    if (v.unit != nullptr && *v.unit != '\0') text += " " + PbString(v.unit);
    f.attributes[PbString(e.key)] = text;
  }
  bool changed = f.health != fingerprint_.health || f.description != fingerprint_.description;
  fingerprint_ = std::move(f);
  if (changed) {
    log::Info("nomad plugin fingerprint", {{"plugin", name_},
                                           {"health", HealthName(fingerprint_.health)},
                                           {"description", fingerprint_.description}});
  }
}

void NomadPlugin::OnTaskEvent(std::string_view message) {
  PbOwned<hashicorp_nomad_plugins_drivers_proto_DriverTaskEvent> m(
      hashicorp_nomad_plugins_drivers_proto_DriverTaskEvent_fields);
  if (!m.Decode(message, "DriverTaskEvent").ok()) return;
  TaskEvent e;
  e.task_id = PbString(m->task_id);
  auto known = outpost_ids_.find(e.task_id);
  if (known != outpost_ids_.end()) e.task_id = known->second;
  e.timestamp_unix_nanos = m->has_timestamp ? m->timestamp.seconds * kNanosPerSecond + m->timestamp.nanos : WallNanos();
  e.type = "driver";
  e.message = PbString(m->message);
  for (pb_size_t i = 0; i < m->annotations_count; ++i) {
    e.annotations[PbString(m->annotations[i].key)] = PbString(m->annotations[i].value);
  }
  e.annotations["driver"] = name_;
  auto subs = subscribers_;
  for (auto& [id, cb] : subs) cb(e);
}

// The plugin cannot be used: retry (with backoff) or not (its config is
// wrong, it is no driver, it speaks another protocol: until the agent
// starts again).
void NomadPlugin::Fail(const std::string& why, bool retry) {
  log::Error("nomad plugin failed", {{"plugin", name_}, {"path", path_}, {"error", why}});
  problem_ = why;
  if (!retry) {
    state_ = State::kFailed;
    fingerprint_.health = Health::kUnhealthy;
    fingerprint_.description = why;
  }
  if (proc_ && proc_->running()) {
    proc_->Stop();  // OnExited follows, and restarts unless failed
  } else {
    Lost(why);
  }
}

void NomadPlugin::OnExited(int wait_status) {
  (void)wait_status;
  Lost(problem_.empty() ? "the plugin exited" : problem_);
}

// The process or its connection is gone: restart it (unless it failed for
// good or the agent stops); its tasks wait for the next process, for the
// grace period.
void NomadPlugin::Lost(const std::string& why) {
  if (fingerprint_call_) fingerprint_call_->Cancel();
  if (events_call_) events_call_->Cancel();
  if (stdio_call_) stdio_call_->Cancel();
  fingerprint_call_.reset();
  events_call_.reset();
  stdio_call_.reset();
  if (client_) {
    std::shared_ptr<wire::GrpcClient> dead(std::move(client_));
    dead->SetCloseCallback(nullptr);
    dead->Close();
    loop_->Defer([dead] {});
  }
  for (auto& [id, w] : waits_) w.asking = false;
  if (proc_ && proc_->running()) return;  // its exit comes back here
  if (proc_) {
    std::shared_ptr<PluginProcess> done(std::move(proc_));
    loop_->Defer([done] {});
  }
  if (shutting_down_ || restart_timer_ != 0) return;
  if (state_ == State::kFailed) return;
  if (state_ == State::kReady) {
    state_ = State::kRestarting;
    problem_ = "restarting: " + why;
    fingerprint_.health = Health::kUnhealthy;
    fingerprint_.description = problem_;
  }
  if (registered_ && grace_timer_ == 0) {
    std::weak_ptr<bool> alive = alive_;
    grace_timer_ = loop_->AddTimer(opts_.grace_nanos, [this, alive, why] {
      if (!alive.lock()) return;
      grace_timer_ = 0;
      if (state_ != State::kReady && opts_.gone) {
        opts_.gone(name_, "its Nomad plugin was not back within " + FormatDuration(opts_.grace_nanos) + " (" + why + ")");
      }
    });
  }
  bool stable = ready_mono_ != 0 && MonotonicNanos() - ready_mono_ >= kStableNanos;
  backoff_nanos_ = stable ? 0
                          : std::min(std::max(opts_.restart_initial_nanos, backoff_nanos_ * 2), opts_.restart_max_nanos);
  ready_mono_ = 0;
  log::Warn("nomad plugin restarting", {{"plugin", name_}, {"why", why}, {"in", FormatDuration(backoff_nanos_)}});
  std::weak_ptr<bool> alive = alive_;
  restart_timer_ = loop_->AddTimer(backoff_nanos_, [this, alive] {
    if (alive.lock()) Launch();
  });
}

void NomadPlugin::Shutdown() {
  shutting_down_ = true;
  if (restart_timer_ != 0) loop_->CancelTimer(restart_timer_);
  restart_timer_ = 0;
  if (client_ && state_ == State::kReady) {
    // Driver.Shutdown, then go-plugin's controller: the plugin exits by
    // itself; the process stop below is the backstop.
    CallDriver("Shutdown", Empty(), 2 * kNanosPerSecond, [](Result<std::string>) {});
    client_->Call("plugin.GRPCController", "Shutdown", "", 2 * kNanosPerSecond, [](Result<std::string>) {});
  }
  if (proc_) proc_->Stop();
}

std::string NomadPlugin::Unreachable() const {
  if (state_ == State::kReady && client_) return "";
  return "driver \"" + name_ + "\": its Nomad plugin is " +
         (state_ == State::kFailed ? "failed: " + problem_ : std::string("restarting"));
}

void NomadPlugin::Call(const char* service, const char* method, Result<std::string> request, int64_t timeout_nanos,
                       Reply done) {
  if (!request.ok()) return loop_->Defer([done, e = request.error()] { done(e); });
  if (!client_ || !client_->accepting_calls()) {
    std::string why = Unreachable();
    return loop_->Defer([done, why] {
      done(Error(Code::kUnavailable, why.empty() ? std::string("the plugin is not connected") : why));
    });
  }
  client_->Call(service, method, *request, timeout_nanos,
                [done = std::move(done), name = name_, method](Result<std::string> r) {
                  done(r.ok() ? std::move(r) : Result<std::string>(Unanswered(name, method, r.error())));
                });
}

Error Unanswered(const std::string& driver, const char* method, const Error& e) {
  if (e.code() != Code::kUnimplemented) return e;
  return Error(Code::kUnimplemented,
               "driver " + driver + " does not support " + method + " (the plugin answered: " + e.message() + ")");
}

Error NomadPlugin::Unsupported(const char* what) const {
  return Error(Code::kUnimplemented, "driver " + name_ + " does not support " + what);
}

void NomadPlugin::Forget(const std::string& id) {
  waits_.erase(id);
  auto it = nomad_ids_.find(id);
  if (it == nomad_ids_.end()) return;
  outpost_ids_.erase(it->second);
  nomad_ids_.erase(it);
}

void NomadPlugin::EmitEvent(const std::string& task, const std::string& type, const std::string& message) {
  TaskEvent e;
  e.task_id = task;
  e.timestamp_unix_nanos = WallNanos();
  e.type = type;
  e.message = message;
  auto subs = subscribers_;
  for (auto& [sid, cb] : subs) cb(e);
}

uint64_t NomadPlugin::SubscribeEvents(EventCallback cb) {
  uint64_t id = next_subscriber_++;
  subscribers_[id] = std::move(cb);
  return id;
}

void NomadPlugin::UnsubscribeEvents(uint64_t id) { subscribers_.erase(id); }

}  // namespace outpost::driver::nomad
