// The Driver contract over Nomad's driver protocol (see nomad_driver.h).
#include <signal.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "driver/nomad/nomad_driver.h"
#include "nomad_driver.pb.h"
#include "proc/exit_status.h"

namespace outpost::driver::nomad {

namespace {

google_protobuf_Duration Duration(int64_t nanos) {
  google_protobuf_Duration d;
  d.seconds = nanos / kNanosPerSecond;
  d.nanos = static_cast<int32_t>(nanos % kNanosPerSecond);
  return d;
}

int64_t Nanos(const google_protobuf_Timestamp& t) { return t.seconds * kNanosPerSecond + t.nanos; }

ExitResult ExitOf(const hashicorp_nomad_plugins_drivers_proto_ExitResult& r, const std::string& err) {
  ExitResult e;
  e.exit_code = r.signal != 0 && r.exit_code == 0 ? 128 + r.signal : r.exit_code;
  e.signal = r.signal;
  e.oom_killed = r.oom_killed;
  e.error = err;
  return e;
}

}  // namespace

Status NomadPlugin::CheckConfig(const std::string& config_json) const {
  if (!task_schema_.present) {
    if (state_ != State::kReady) return OkStatus();  // checked at the start, once the plugin says
    if (config_json.empty() || config_json == "{}") return OkStatus();
    return Error(Code::kInvalidArgument, "config: driver " + name_ + " takes no config");
  }
  picojson::value v{picojson::object()};
  if (!config_json.empty()) {
    auto parsed = json::Parse(config_json);
    if (!parsed.ok()) return parsed.error().Wrap("config");
    v = std::move(*parsed);
  }
  DecodeOptions o;
  o.vars = DecodeOptions::Vars::kDefer;  // resolved from the task's environment at start
  json::Errors errors;
  (void)DecodeConfig(task_schema_.root, v, o, &errors);
  if (errors.empty()) return OkStatus();
  return Error(Code::kInvalidArgument, json::JoinErrors(errors));
}

void NomadPlugin::StartTask(const TaskConfig& config, StartCallback done) {
  std::string why = Unreachable();
  if (!why.empty()) return done(Error(Code::kUnavailable, why));
  AllocLayout layout = Layout(opts_.alloc_root, config.job.empty() ? config.name : config.job, config.name);
  Status dirs = MakeAllocDirs(layout, config.identity);
  if (!dirs.ok()) return done(dirs.error().Wrap("allocation dir"));
  std::map<std::string, std::string> env = TaskEnv(config, layout, fs_isolation_, opts_.node);
  picojson::value v{picojson::object()};
  if (!config.driver_config.empty()) {
    auto parsed = json::Parse(config.driver_config);
    if (!parsed.ok()) return done(parsed.error().Wrap("config"));
    v = std::move(*parsed);
  }
  DecodeOptions o;
  o.vars = DecodeOptions::Vars::kResolve;
  o.env = &env;
  auto msgpack = EncodeConfig(task_schema_, v, o);
  if (!msgpack.ok()) return done(msgpack.error());
  auto request = EncodeStartTask(config, layout, env, *msgpack, opts_.node);
  std::weak_ptr<bool> alive = alive_;
  const std::string id = config.id;
  CallDriver("StartTask", std::move(request), opts_.start_timeout_nanos,
             [this, alive, config, id, done = std::move(done)](Result<std::string> r) {
               if (!alive.lock()) return;
               if (!r.ok()) {
                 // The plugin went away mid-start: what it started goes once
                 // it is back (Nomad retries the start; outpost's restart
                 // policy does).
                 if (r.error().code() == Code::kUnavailable) destroy_when_back_.insert(id);
                 return done(r.error().Wrap("driver " + name_ + ": StartTask"));
               }
               auto a = DecodeStartTask(*r);
               if (!a.ok()) return done(a.error());
               if (a->result == StartAnswer::kFatal) {
                 // Retrying cannot help: the start fails at once.
                 return done(Error(Code::kInvalidArgument, "driver " + name_ + ": " + a->error));
               }
               if (a->result == StartAnswer::kRetry) {
                 return done(Error(Code::kUnavailable, "driver " + name_ + " (retry): " + a->error));
               }
               if (a->handle.empty()) return done(Error(Code::kInternal, "driver " + name_ + ": StartTask returned no handle"));
               TaskHandle h;
               h.version = a->handle_version;
               h.config = config;
               h.started_at_unix_nanos = WallNanos();
               h.driver_state = std::move(a->handle);
               done(std::move(h));
             });
}

void NomadPlugin::RecoverTask(const TaskHandle& handle, DoneCallback done) {
  std::weak_ptr<bool> alive = alive_;
  const std::string id = handle.config.id;
  CallDriver("RecoverTask", EncodeRecoverTask(handle.driver_state), opts_.call_timeout_nanos,
             [this, alive, id, done = std::move(done)](Result<std::string> r) {
               if (!alive.lock()) return;
               if (!r.ok()) {
                 if (r.error().code() == Code::kUnavailable) return done(r.error());
                 // Nomad: a handle the plugin cannot recover is cleaned up
                 // (and the task started again).
                 DestroyTask(id, true, [](Status) {});
                 return done(r.error().Wrap("driver " + name_ + " could not recover the task"));
               }
               auto w = waits_.find(id);
               if (w != waits_.end() && !w->second.asking) AskWait(id);
               done(OkStatus());
             });
}

void NomadPlugin::WaitTask(const std::string& id, WaitCallback done) {
  Wait& w = waits_[id];
  w.callbacks.push_back(std::move(done));
  if (!w.asking && state_ == State::kReady) AskWait(id);
}

// One WaitTask in flight per task, with no deadline (Nomad's client keeps
// exactly this call open). A connection lost meanwhile leaves the waiters:
// they are asked again once the task is recovered into the next process.
void NomadPlugin::AskWait(const std::string& id) {
  waits_[id].asking = true;
  hashicorp_nomad_plugins_drivers_proto_WaitTaskRequest req = hashicorp_nomad_plugins_drivers_proto_WaitTaskRequest_init_zero;
  req.task_id = PbStr(id);
  std::weak_ptr<bool> alive = alive_;
  CallDriver("WaitTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_WaitTaskRequest_fields, &req, "WaitTask"), 0,
             [this, alive, id](Result<std::string> r) {
               if (!alive.lock()) return;
               auto w = waits_.find(id);
               if (w == waits_.end()) return;
               w->second.asking = false;
               if (!r.ok() && (r.error().code() == Code::kUnavailable || r.error().code() == Code::kCanceled)) return;
               ExitResult exit;
               if (!r.ok()) {
                 exit.exit_code = -1;
                 exit.error = "driver " + name_ + ": WaitTask: " + r.error().message();
               } else {
                 PbOwned<hashicorp_nomad_plugins_drivers_proto_WaitTaskResponse> m(
                     hashicorp_nomad_plugins_drivers_proto_WaitTaskResponse_fields);
                 Status st = m.Decode(*r, "WaitTaskResponse");
                 std::string err = st.ok() ? PbString(m->err) : st.error().message();
                 exit = ExitOf(m->result, err);
                 if (!err.empty()) exit.exit_code = -1;
               }
               std::vector<WaitCallback> cbs = std::move(w->second.callbacks);
               waits_.erase(w);
               for (auto& cb : cbs) cb(exit);
             });
}

void NomadPlugin::StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal, DoneCallback done) {
  hashicorp_nomad_plugins_drivers_proto_StopTaskRequest req = hashicorp_nomad_plugins_drivers_proto_StopTaskRequest_init_zero;
  req.task_id = PbStr(id);
  req.has_timeout = true;
  req.timeout = Duration(timeout_nanos);
  std::string sig = signal.empty() ? "SIGTERM" : signal;
  req.signal = PbStr(sig);
  CallDriver("StopTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_StopTaskRequest_fields, &req, "StopTask"),
             timeout_nanos + opts_.call_timeout_nanos,
             [done = std::move(done)](Result<std::string> r) { done(r.ok() ? OkStatus() : Status(r.error())); });
}

void NomadPlugin::DestroyTask(const std::string& id, bool force, DoneCallback done) {
  hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest req = hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest_init_zero;
  req.task_id = PbStr(id);
  req.force = force;
  std::weak_ptr<bool> alive = alive_;
  CallDriver("DestroyTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest_fields, &req, "DestroyTask"),
             opts_.call_timeout_nanos, [this, alive, id, done = std::move(done)](Result<std::string> r) {
               if (!alive.lock()) return;
               if (r.ok()) waits_.erase(id);
               // A task the plugin does not know is gone already.
               if (!r.ok() && r.error().message().find("task not found") != std::string::npos) return done(OkStatus());
               done(r.ok() ? OkStatus() : Status(r.error()));
             });
}

void NomadPlugin::InspectTask(const std::string& id, InspectCallback done) {
  hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest req = hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest_init_zero;
  req.task_id = PbStr(id);
  CallDriver("InspectTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest_fields, &req, "InspectTask"),
             opts_.call_timeout_nanos, [done = std::move(done)](Result<std::string> r) {
               if (!r.ok()) return done(r.error());
               PbOwned<hashicorp_nomad_plugins_drivers_proto_InspectTaskResponse> m(
                   hashicorp_nomad_plugins_drivers_proto_InspectTaskResponse_fields);
               Status st = m.Decode(*r, "InspectTaskResponse");
               if (!st.ok()) return done(st.error());
               TaskStatus s;
               const auto& t = m->task;
               s.id = PbString(t.id);
               s.name = PbString(t.name);
               s.state = t.state == hashicorp_nomad_plugins_drivers_proto_TaskState_RUNNING  ? TaskState::kRunning
                         : t.state == hashicorp_nomad_plugins_drivers_proto_TaskState_EXITED ? TaskState::kExited
                                                                                               : TaskState::kUnknown;
               if (t.has_started_at) s.started_at_unix_nanos = Nanos(t.started_at);
               if (t.has_completed_at) s.completed_at_unix_nanos = Nanos(t.completed_at);
               if (t.has_result) s.exit = ExitOf(t.result, "");
               for (pb_size_t i = 0; i < m->driver.attributes_count; ++i) {
                 s.attributes[PbString(m->driver.attributes[i].key)] = PbString(m->driver.attributes[i].value);
               }
               // Nomad's DriverNetwork: where the task can be reached.
               if (m->has_network_override) {
                 const auto& n = m->network_override;
                 if (n.addr != nullptr && *n.addr != '\0') s.attributes["network.address"] = PbString(n.addr);
                 for (pb_size_t i = 0; i < n.port_map_count; ++i) {
                   s.attributes["network.port." + PbString(n.port_map[i].key)] = std::to_string(n.port_map[i].value);
                 }
               }
               done(std::move(s));
             });
}

void NomadPlugin::SignalTask(const std::string& id, const std::string& signal, DoneCallback done) {
  if (!caps_.send_signals) return done(Unsupported("signals"));
  hashicorp_nomad_plugins_drivers_proto_SignalTaskRequest req = hashicorp_nomad_plugins_drivers_proto_SignalTaskRequest_init_zero;
  req.task_id = PbStr(id);
  req.signal = PbStr(signal);
  CallDriver("SignalTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_SignalTaskRequest_fields, &req, "SignalTask"),
             opts_.call_timeout_nanos,
             [done = std::move(done)](Result<std::string> r) { done(r.ok() ? OkStatus() : Status(r.error())); });
}

void NomadPlugin::ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                           ExecCallback done) {
  if (!caps_.exec) return done(Unsupported("exec"));
  hashicorp_nomad_plugins_drivers_proto_ExecTaskRequest req = hashicorp_nomad_plugins_drivers_proto_ExecTaskRequest_init_zero;
  req.task_id = PbStr(id);
  std::vector<char*> argv;
  for (const std::string& a : cmd) argv.push_back(PbStr(a));
  req.command_count = static_cast<pb_size_t>(argv.size());
  req.command = argv.data();
  req.has_timeout = true;
  req.timeout = Duration(timeout_nanos);
  CallDriver("ExecTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_ExecTaskRequest_fields, &req, "ExecTask"),
             timeout_nanos + opts_.call_timeout_nanos, [done = std::move(done)](Result<std::string> r) {
               if (!r.ok()) return done(r.error());
               hashicorp_nomad_plugins_drivers_proto_ExecTaskResponse m = hashicorp_nomad_plugins_drivers_proto_ExecTaskResponse_init_zero;
               std::string out, err;
               m.stdout = PbBytesIn(&out);
               m.stderr = PbBytesIn(&err);
               Status st = PbDecode(*r, hashicorp_nomad_plugins_drivers_proto_ExecTaskResponse_fields, &m, "ExecTaskResponse");
               if (!st.ok()) return done(st.error());
               ExecResult e;
               e.exit_code = m.has_result ? ExitOf(m.result, "").exit_code : 0;
               // Nomad's answer keeps the two apart; outpost's exec shows
               // them together, stdout first.
               e.output = std::move(out);
               e.output += err;
               done(std::move(e));
             });
}

// Nomad streams stats; one sample is taken and the stream cancelled.
void NomadPlugin::TaskStats(const std::string& id, StatsCallback done) {
  std::string why = Unreachable();
  if (!why.empty()) return done(Error(Code::kUnavailable, why));
  hashicorp_nomad_plugins_drivers_proto_TaskStatsRequest req = hashicorp_nomad_plugins_drivers_proto_TaskStatsRequest_init_zero;
  req.task_id = PbStr(id);
  req.has_collection_interval = true;
  req.collection_interval = Duration(kNanosPerSecond);
  auto bytes = PbEncode(hashicorp_nomad_plugins_drivers_proto_TaskStatsRequest_fields, &req, "TaskStats");
  if (!bytes.ok()) return done(bytes.error());
  auto call = client_->StartCall(kDriverService, "TaskStats", opts_.call_timeout_nanos);
  auto shared_done = std::make_shared<StatsCallback>(std::move(done));
  wire::GrpcCall* raw = call.get();
  call->OnMessage([raw, shared_done](std::string_view m) {
    if (!*shared_done) return;
    PbOwned<hashicorp_nomad_plugins_drivers_proto_TaskStatsResponse> r(
        hashicorp_nomad_plugins_drivers_proto_TaskStatsResponse_fields);
    Status st = r.Decode(m, "TaskStatsResponse");
    StatsCallback cb = std::move(*shared_done);
    *shared_done = nullptr;
    raw->Cancel();
    if (!st.ok()) return cb(st.error());
    ::outpost::driver::TaskStats s;
    const auto& t = r->stats;
    s.timestamp_unix_nanos = t.has_timestamp ? Nanos(t.timestamp) : WallNanos();
    if (t.has_agg_resource_usage) {
      const auto& u = t.agg_resource_usage;
      if (u.has_memory) {
        s.rss_bytes = u.memory.rss;
        s.measured.push_back("rss");
      }
      if (u.has_cpu) {
        // Nomad reports CPU time in nanoseconds of the mode (user, system).
        s.cpu_user_nanos = static_cast<uint64_t>(u.cpu.user_mode);
        s.cpu_system_nanos = static_cast<uint64_t>(u.cpu.system_mode);
        s.cpu_percent = u.cpu.percent;
        s.measured.push_back("cpu_percent");
      }
    }
    cb(std::move(s));
  });
  call->OnDone([shared_done](const Status& st) {
    if (!*shared_done) return;
    StatsCallback cb = std::move(*shared_done);
    *shared_done = nullptr;
    cb(st.ok() ? Error(Code::kUnavailable, "TaskStats ended without a sample") : st.error());
  });
  (void)call->Write(*bytes);
  call->CloseSend();
}

}  // namespace outpost::driver::nomad
