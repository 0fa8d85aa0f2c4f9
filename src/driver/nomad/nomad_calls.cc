// The Driver contract over Nomad's driver protocol (see nomad_driver.h).
#include <signal.h>

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "driver/nomad/nomad_driver.h"
#include "nomad_driver.pb.h"
#include "nomad_structs.pb.h"
#include "proc/exit_status.h"
#include "proc/procfs.h"

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

// Whether a failed call's grpc-status-details-bin holds Nomad's
// RecoverableError{recoverable: true}.
bool Recoverable(const wire::hpack::HeaderList& trailers) {
  std::string_view b64;
  for (const auto& f : trailers) {
    if (f.name == "grpc-status-details-bin") b64 = f.value;
  }
  if (b64.empty()) return false;
  auto bytes = Base64Decode(std::string(b64));
  if (!bytes.ok()) return false;
  PbOwned<hashicorp_nomad_plugins_shared_structs_StatusDetails> st(
      hashicorp_nomad_plugins_shared_structs_StatusDetails_fields);
  if (!st.Decode(*bytes, "google.rpc.Status").ok()) return false;
  for (pb_size_t i = 0; i < st->details_count; ++i) {
    const auto& d = st->details[i];
    std::string type = PbString(d.type_url);
    if (!EndsWith(type, "/hashicorp.nomad.plugins.shared.structs.RecoverableError")) continue;
    hashicorp_nomad_plugins_shared_structs_RecoverableError r = hashicorp_nomad_plugins_shared_structs_RecoverableError_init_zero;
    std::string_view value = d.value ? std::string_view(reinterpret_cast<const char*>(d.value->bytes), d.value->size)
                                     : std::string_view();
    if (PbDecode(value, hashicorp_nomad_plugins_shared_structs_RecoverableError_fields, &r, "RecoverableError").ok()) {
      return r.recoverable;
    }
  }
  return false;
}

// Nomad's protocol names no process: the task's main one is found by the
// start's marker outpost put in its environment (the process of the task's that no
// other of its processes started), 0 when none shows (a VM, say).
// A signal as Nomad's drivers look it up: by its full name ("SIGHUP");
// "HUP", "hup" and "1" are spelled so. An unknown name goes as given (the
// plugin says what it makes of it).
std::string NomadSignal(const std::string& s) {
  auto n = proc::ParseSignal(s);
  if (!n.ok()) return s;
  const char* name = proc::SignalName(*n);
  return std::string(name) == "SIG?" ? s : std::string(name);
}

// The task's processes: looked for under the plugin first (its children and
// theirs: a few reads of /proc), then in every process's environment (a
// driver whose tasks are not its descendants, a kernel without the
// children files).
pid_t MainPid(const std::string& instance, pid_t plugin) {
  const std::string marker = "OUTPOST_TASK_INSTANCE=" + instance;
  std::vector<pid_t> pids;
  if (plugin > 0) {
    for (pid_t pid : proc::DescendantsOf(plugin)) {
      if (proc::HasEnv(pid, marker)) pids.push_back(pid);
    }
  }
  if (pids.empty()) pids = proc::ProcessesWithEnv(marker);
  pid_t main = 0;
  for (pid_t pid : pids) {
    proc::ProcStat st;
    if (!proc::ReadProcStat(pid, &st)) continue;
    if (std::find(pids.begin(), pids.end(), st.ppid) != pids.end()) continue;
    if (main == 0 || pid < main) main = pid;
  }
  return main;
}

// The NOMAD_ variables every task gets (ports and meta aside): what a
// task's config may name before it starts.
const std::map<std::string, std::string>& KnownVariables() {
  static const std::map<std::string, std::string> kKnown = [] {
    std::map<std::string, std::string> m;
    for (const char* n : {"NOMAD_ALLOC_DIR", "NOMAD_TASK_DIR", "NOMAD_SECRETS_DIR", "NOMAD_ALLOC_ID",
                          "NOMAD_SHORT_ALLOC_ID", "NOMAD_ALLOC_NAME", "NOMAD_ALLOC_INDEX", "NOMAD_TASK_NAME",
                          "NOMAD_GROUP_NAME", "NOMAD_JOB_ID", "NOMAD_JOB_NAME", "NOMAD_NAMESPACE", "NOMAD_REGION",
                          "NOMAD_DC", "NOMAD_PARENT_CGROUP", "NOMAD_MEMORY_LIMIT", "NOMAD_MEMORY_MAX_LIMIT",
                          "NOMAD_CPU_LIMIT", "NOMAD_CPU_CORES"}) {
      m[n] = "";
    }
    return m;
  }();
  return kKnown;
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
  o.env = &KnownVariables();
  json::Errors errors;
  (void)DecodeConfig(task_schema_.root, v, o, &errors);
  if (errors.empty()) return OkStatus();
  return Error(Code::kInvalidArgument, json::JoinErrors(errors));
}

Status NomadPlugin::RemoveTaskData(const TaskConfig& config) {
  return RemoveAllocDirs(Layout(opts_.alloc_root, config.job.empty() ? config.name : config.job, config.name));
}

void NomadPlugin::StartTask(const TaskConfig& config, StartCallback done) {
  std::string why = Unreachable();
  if (!why.empty()) return done(Error(Code::kUnavailable, why));
  AllocLayout layout = Layout(opts_.alloc_root, config.job.empty() ? config.name : config.job, config.name);
  Status dirs = MakeAllocDirs(layout, config.identity);
  if (!dirs.ok()) return done(dirs.error().Wrap("allocation dir"));
  std::map<std::string, std::string> env = TaskEnv(config, layout, fs_isolation_, opts_.node);
  // This start's processes, told from earlier starts' of the same task.
  const std::string instance = Format("%s@%llx", config.id.c_str(), static_cast<unsigned long long>(WallNanos()));
  env["OUTPOST_TASK_INSTANCE"] = instance;
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
  const std::string nomad_id = NomadTaskId(config);
  auto request = EncodeStartTask(config, nomad_id, layout, env, *msgpack, opts_.node);
  if (!request.ok()) return done(request.error());
  Remember(config.id, nomad_id);
  // A call of its own (not Call): a failed start's trailers say whether
  // Nomad would retry it (a RecoverableError detail).
  auto call = client_->StartCall(kDriverService, "StartTask", opts_.start_timeout_nanos);
  // The answer and the handle-to-be in one block the callbacks share (a
  // TaskConfig captured by value would be copied in every callback's code).
  struct Start {
    TaskHandle h;
    std::string answer;
    bool got = false;
  };
  auto s = std::make_shared<Start>();
  s->h.config = config;
  call->OnMessage([s](std::string_view m) {
    s->answer = std::string(m);
    s->got = true;
  });
  std::weak_ptr<bool> alive = alive_;
  wire::GrpcCall* raw = call.get();
  call->OnDone([this, alive, raw, s, nomad_id, instance, done = std::move(done)](const Status& st) {
    if (!alive.lock()) return;
    const std::string& id = s->h.config.id;
    const std::string what = "driver " + name_ + ": StartTask";
    if (!st.ok()) {
      // The plugin went away mid-start: what it started goes once it is
      // back (Nomad retries the start; outpost's restart policy does).
      if (st.error().code() == Code::kUnavailable || st.error().code() == Code::kCanceled) {
        destroy_when_back_[id] = instance;
        return done(Error(Code::kUnavailable, what + ": " + st.error().message()));
      }
      // Nomad: a recoverable error goes to the restart policy; any other
      // fails the task.
      bool recoverable = Recoverable(raw->headers());
      if (NomadId(id) == nomad_id) Forget(id);
      return done(Error(recoverable ? Code::kUnavailable : Code::kInvalidArgument, what + ": " + st.error().message()));
    }
    auto a = s->got ? DecodeStartTask(s->answer) : Result<StartAnswer>(Error(Code::kInternal, "no message"));
    std::string bad = !a.ok() ? a.error().message()
                      : a->result == StartAnswer::kFatal ? a->error
                      : a->result == StartAnswer::kRetry ? a->error
                      : a->handle.empty() ? std::string("no handle") : std::string();
    if (!bad.empty()) {
      if (NomadId(id) == nomad_id) Forget(id);
      bool retry = a.ok() && a->result == StartAnswer::kRetry;
      return done(Error(retry ? Code::kUnavailable : a.ok() && a->result == StartAnswer::kFatal ? Code::kInvalidArgument
                                                                                               : Code::kInternal,
                        what + ": " + bad));
    }
    std::shared_ptr<TaskHandle> h(s, &s->h);
    h->version = a->handle_version;
    h->started_at_unix_nanos = WallNanos();
    // Kept as text: task records are JSON.
    h->driver_state = Base64Encode(a->handle);
    h->network = std::move(a->network);
    FindPid(id, instance, h, kPidLookups, done);
  });
  (void)call->Write(*request);
  call->CloseSend();
}

// The task's main process: the oldest one with the task's instance in its
// environment. A plugin may answer StartTask between its fork and the
// child's exec (the child still has the plugin's environment): looked up
// again, every 25 ms, a few times; a driver whose tasks are no local
// process (a VM) starts without a pid after that.
void NomadPlugin::FindPid(const std::string& id, const std::string& instance, std::shared_ptr<TaskHandle> h,
                          int tries, StartCallback done) {
  h->pid = MainPid(instance, pid());
  if (h->pid == 0 && tries > 1) {
    std::weak_ptr<bool> alive = alive_;
    loop_->AddTimer(25 * 1000000LL, [this, alive, id, instance, h, tries, done = std::move(done)]() mutable {
      if (alive.lock()) FindPid(id, instance, h, tries - 1, std::move(done));
    });
    return;
  }
  EmitEvent(id, "started", h->pid > 0 ? Format("started with pid %d", h->pid) : std::string("started"));
  done(std::move(*h));
}

void NomadPlugin::RecoverTask(const TaskHandle& handle, DoneCallback done) {
  std::weak_ptr<bool> alive = alive_;
  const std::string id = handle.config.id;
  std::string nomad_id;
  auto bytes = Base64Decode(handle.driver_state);
  auto request = bytes.ok() ? EncodeRecoverTask(*bytes, &nomad_id) : Result<std::string>(bytes.error().Wrap("stored handle"));
  if (request.ok()) Remember(id, nomad_id);
  CallDriver("RecoverTask", std::move(request), opts_.call_timeout_nanos,
             [this, alive, id, done = std::move(done)](Result<std::string> r) {
               if (!alive.lock()) return;
               if (!r.ok()) {
                 if (r.error().code() == Code::kUnavailable) return done(r.error());
                 // Nomad: a handle the plugin cannot recover is cleaned up
                 // (and the task started again). What the plugin no longer
                 // knows of goes too, found by the task's marker: no
                 // instance of it may run before the new start.
                 Error e = r.error().Wrap("driver " + name_ + " could not recover the task");
                 return DestroyTask(id, true, [marker = "OUTPOST_TASK_ID=" + id, e, done](Status) {
                   for (pid_t pid : proc::ProcessesWithEnv(marker)) ::kill(pid, SIGKILL);
                   done(e);
                 });
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
  req.task_id = PbStr(NomadId(id));
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
  req.task_id = PbStr(NomadId(id));
  req.has_timeout = true;
  req.timeout = Duration(timeout_nanos);
  std::string sig = signal.empty() ? "SIGTERM" : NomadSignal(signal);
  req.signal = PbStr(sig);
  CallDriver("StopTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_StopTaskRequest_fields, &req, "StopTask"),
             timeout_nanos + opts_.call_timeout_nanos,
             [done = std::move(done)](Result<std::string> r) { done(r.ok() ? OkStatus() : Status(r.error())); });
}

void NomadPlugin::DestroyTask(const std::string& id, bool force, DoneCallback done) {
  hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest req = hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest_init_zero;
  const std::string nomad = NomadId(id);
  req.task_id = PbStr(nomad);
  req.force = force;
  std::weak_ptr<bool> alive = alive_;
  CallDriver("DestroyTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest_fields, &req, "DestroyTask"),
             opts_.call_timeout_nanos, [this, alive, id, nomad, done = std::move(done)](Result<std::string> r) {
               if (!alive.lock()) return;
               // A task the plugin does not know is gone already.
               bool gone = r.ok() || r.error().message().find("task not found") != std::string::npos;
               // Unless a new start of the task took the id meanwhile.
               if (gone && NomadId(id) == nomad) Forget(id);
               if (gone) return done(OkStatus());
               done(r.ok() ? OkStatus() : Status(r.error()));
             });
}

void NomadPlugin::InspectTask(const std::string& id, InspectCallback done) {
  hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest req = hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest_init_zero;
  req.task_id = PbStr(NomadId(id));
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
  const std::string nomad = NomadId(id), sig = NomadSignal(signal);
  req.task_id = PbStr(nomad);
  req.signal = PbStr(sig);
  CallDriver("SignalTask", PbEncode(hashicorp_nomad_plugins_drivers_proto_SignalTaskRequest_fields, &req, "SignalTask"),
             opts_.call_timeout_nanos,
             [done = std::move(done)](Result<std::string> r) { done(r.ok() ? OkStatus() : Status(r.error())); });
}

void NomadPlugin::ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                           ExecCallback done) {
  if (!caps_.exec) return done(Unsupported("exec"));
  hashicorp_nomad_plugins_drivers_proto_ExecTaskRequest req = hashicorp_nomad_plugins_drivers_proto_ExecTaskRequest_init_zero;
  req.task_id = PbStr(NomadId(id));
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
  req.task_id = PbStr(NomadId(id));
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
        // Nomad's user_mode and system_mode are percentages of the
        // interval (its executor's cpu stats), not CPU time: only the
        // total percentage has a place in outpost's stats.
        s.cpu_percent = u.cpu.percent;
        s.measured.push_back("cpu_percent");
      }
    }
    cb(std::move(s));
  });
  call->OnDone([shared_done, name = name_](const Status& st) {
    if (!*shared_done) return;
    StatsCallback cb = std::move(*shared_done);
    *shared_done = nullptr;
    cb(st.ok() ? Error(Code::kUnavailable, "TaskStats ended without a sample") : Unanswered(name, "TaskStats", st.error()));
  });
  (void)call->Write(*bytes);
  call->CloseSend();
}

}  // namespace outpost::driver::nomad
