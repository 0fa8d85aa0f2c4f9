#include "driver/remote_codec.h"

#include "base/pb.h"
#include "base/strings.h"
#include "driver.pb.h"

namespace outpost::driver::remote {

namespace {

using driverproto::Bytes;
using driverproto::Keep;
using driverproto::MapOf;

void FillConfig(const TaskConfig& c, Keep* k, std::vector<outpost_driver_v1_Rlimit>* rl, outpost_driver_v1_TaskConfig* m) {
  m->id = k->S(c.id);
  m->job = k->S(c.job);
  m->name = k->S(c.name);
  m->command = k->S(c.command);
  m->args = k->List(c.args, &m->args_count);
  m->env = k->Map(c.env, &m->env_count);
  m->workdir = k->S(c.workdir);
  m->has_identity = true;
  m->identity.switch_user = c.identity.switch_user;
  m->identity.uid = c.identity.uid;
  m->identity.gid = c.identity.gid;
  m->identity.groups_count = static_cast<pb_size_t>(c.identity.groups.size());
  m->identity.groups = const_cast<uint32_t*>(reinterpret_cast<const uint32_t*>(c.identity.groups.data()));
  m->identity.name = k->S(c.identity.name);
  m->identity.home = k->S(c.identity.home);
  for (const auto& r : c.rlimits) rl->push_back({k->S(r.name), r.soft, r.hard});
  m->rlimits_count = static_cast<pb_size_t>(rl->size());
  m->rlimits = rl->data();
  m->kill_signal = k->S(c.kill_signal);
  m->kill_timeout_nanos = c.kill_timeout_nanos;
  m->task_dir = k->S(c.task_dir);
  m->stdout_path = k->S(c.stdout_path);
  m->stderr_path = k->S(c.stderr_path);
  m->cgroup = k->S(c.cgroup);
  m->driver_config = k->S(c.driver_config);
  m->netns = k->S(c.Netns());
  m->hostname = k->S(c.Hostname());
  m->oci_spec = k->S(c.oci_spec);
}

Result<ExitResult> ExitOf(const outpost_driver_v1_ExitResult& m, const char* where) {
  if (m.exit_code < -1 || m.exit_code > 255 || m.signal < 0 || m.signal > 64) {
    return Error(Code::kInvalidArgument, Format("%s: exit_code %d / signal %d out of range", where,
                                                static_cast<int>(m.exit_code), static_cast<int>(m.signal)));
  }
  ExitResult e;
  e.exit_code = m.exit_code;
  e.signal = m.signal;
  e.oom_killed = m.oom_killed;
  e.error = PbString(m.error);
  return e;
}

template <typename T>
Result<std::string> Encode(const pb_msgdesc_t* fields, const T& m, const char* what) {
  return PbEncode(fields, &m, what);
}

}  // namespace

Result<std::string> EncodeStartTask(const TaskConfig& config) {
  Keep k;
  std::vector<outpost_driver_v1_Rlimit> rl;
  outpost_driver_v1_StartTaskRequest m = outpost_driver_v1_StartTaskRequest_init_zero;
  m.has_config = true;
  FillConfig(config, &k, &rl, &m.config);
  return Encode(outpost_driver_v1_StartTaskRequest_fields, m, "StartTaskRequest");
}

Result<TaskHandle> DecodeStartTaskResponse(std::string_view bytes, const TaskConfig& config) {
  PbOwned<outpost_driver_v1_StartTaskResponse> m(outpost_driver_v1_StartTaskResponse_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "StartTaskResponse"));
  if (!m->has_handle) return Error(Code::kInvalidArgument, "StartTaskResponse.handle is missing");
  const auto& h = m->handle;
  if (h.version <= 0) return Error(Code::kInvalidArgument, "StartTaskResponse.handle.version must be > 0");
  if (h.pid < 0) return Error(Code::kInvalidArgument, "StartTaskResponse.handle.pid is negative");
  TaskHandle out;
  out.version = h.version;
  out.config = config;
  out.pid = h.pid;
  out.started_at_unix_nanos = h.started_at_unix_nanos;
  if (h.driver_state) out.driver_state.assign(reinterpret_cast<const char*>(h.driver_state->bytes), h.driver_state->size);
  return out;
}

Result<std::string> EncodeRecoverTask(const TaskHandle& h) {
  if (h.driver_state.size() > driverproto::kMaxBytesField) {
    return Error(Code::kInvalidArgument, "driver state is larger than 64 KiB");
  }
  Keep k;
  std::vector<outpost_driver_v1_Rlimit> rl;
  outpost_driver_v1_RecoverTaskRequest m = outpost_driver_v1_RecoverTaskRequest_init_zero;
  m.has_handle = true;
  m.handle.version = h.version;
  m.handle.pid = h.pid;
  m.handle.started_at_unix_nanos = h.started_at_unix_nanos;
  m.handle.has_config = true;
  FillConfig(h.config, &k, &rl, &m.handle.config);
  std::vector<uint8_t> buf;
  m.handle.driver_state = Bytes(h.driver_state, &buf);
  return Encode(outpost_driver_v1_RecoverTaskRequest_fields, m, "RecoverTaskRequest");
}

Result<std::string> EncodeTaskId(const std::string& id) {
  outpost_driver_v1_TaskIdRequest m = outpost_driver_v1_TaskIdRequest_init_zero;
  m.id = PbStr(id);
  return Encode(outpost_driver_v1_TaskIdRequest_fields, m, "TaskIdRequest");
}

Result<bool> DecodeWaitTask(std::string_view bytes, ExitResult* result) {
  PbOwned<outpost_driver_v1_WaitTaskResponse> m(outpost_driver_v1_WaitTaskResponse_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "WaitTaskResponse"));
  if (!m->exited) return false;
  auto e = ExitOf(m->result, "WaitTaskResponse.result");
  if (!e.ok()) return e.error();
  *result = *e;
  return true;
}

Result<std::string> EncodeStopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal) {
  outpost_driver_v1_StopTaskRequest m = outpost_driver_v1_StopTaskRequest_init_zero;
  m.id = PbStr(id);
  m.timeout_nanos = timeout_nanos;
  m.signal = PbStr(signal);
  return Encode(outpost_driver_v1_StopTaskRequest_fields, m, "StopTaskRequest");
}

Result<std::string> EncodeDestroyTask(const std::string& id, bool force) {
  outpost_driver_v1_DestroyTaskRequest m = outpost_driver_v1_DestroyTaskRequest_init_zero;
  m.id = PbStr(id);
  m.force = force;
  return Encode(outpost_driver_v1_DestroyTaskRequest_fields, m, "DestroyTaskRequest");
}

Result<std::string> EncodeSignalTask(const std::string& id, const std::string& signal) {
  outpost_driver_v1_SignalTaskRequest m = outpost_driver_v1_SignalTaskRequest_init_zero;
  m.id = PbStr(id);
  m.signal = PbStr(signal);
  return Encode(outpost_driver_v1_SignalTaskRequest_fields, m, "SignalTaskRequest");
}

Result<std::string> EncodeExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos) {
  Keep k;
  outpost_driver_v1_ExecTaskRequest m = outpost_driver_v1_ExecTaskRequest_init_zero;
  m.id = PbStr(id);
  m.cmd = k.List(cmd, &m.cmd_count);
  m.timeout_nanos = timeout_nanos;
  return Encode(outpost_driver_v1_ExecTaskRequest_fields, m, "ExecTaskRequest");
}

Result<ExecResult> DecodeExecTask(std::string_view bytes) {
  PbOwned<outpost_driver_v1_ExecTaskResponse> m(outpost_driver_v1_ExecTaskResponse_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "ExecTaskResponse"));
  ExecResult r;
  r.exit_code = m->exit_code;
  if (m->output) {
    size_t n = m->output->size > driverproto::kMaxExecOutput ? driverproto::kMaxExecOutput : m->output->size;
    r.output.assign(reinterpret_cast<const char*>(m->output->bytes), n);
    r.truncated = m->truncated || n < m->output->size;
  }
  return r;
}

Result<TaskStatus> DecodeTaskStatus(std::string_view bytes) {
  PbOwned<outpost_driver_v1_TaskStatus> m(outpost_driver_v1_TaskStatus_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "TaskStatus"));
  if (m->state < 0 || m->state > 2) return Error(Code::kInvalidArgument, "TaskStatus.state out of range");
  TaskStatus s;
  s.id = PbString(m->id);
  s.name = PbString(m->name);
  s.state = static_cast<TaskState>(m->state);
  s.pid = m->pid;
  s.started_at_unix_nanos = m->started_at_unix_nanos;
  s.completed_at_unix_nanos = m->completed_at_unix_nanos;
  if (m->has_exit) {
    auto e = ExitOf(m->exit, "TaskStatus.exit");
    if (!e.ok()) return e.error();
    s.exit = *e;
  }
  s.attributes = MapOf(m->attributes, m->attributes_count);
  return s;
}

Result<std::vector<std::string>> DecodeTaskIds(std::string_view bytes) {
  PbOwned<outpost_driver_v1_TaskIdsResponse> m(outpost_driver_v1_TaskIdsResponse_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "TaskIdsResponse"));
  std::vector<std::string> ids;
  for (pb_size_t i = 0; i < m->ids_count; ++i) {
    std::string id = PbString(m->ids[i]);
    if (id.empty() || id.size() > 255 || id.find('/') != std::string::npos) {
      return Error(Code::kInvalidArgument, Format("TaskIdsResponse.ids[%u]: not a task id", static_cast<unsigned>(i)));
    }
    ids.push_back(std::move(id));
  }
  return ids;
}

Result<TaskStats> DecodeTaskStats(std::string_view bytes) {
  PbOwned<outpost_driver_v1_TaskStatsResponse> m(outpost_driver_v1_TaskStatsResponse_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "TaskStatsResponse"));
  TaskStats s;
  s.timestamp_unix_nanos = m->timestamp_unix_nanos;
  s.rss_bytes = m->rss_bytes;
  s.cpu_user_nanos = m->cpu_user_nanos;
  s.cpu_system_nanos = m->cpu_system_nanos;
  s.cpu_percent = m->cpu_percent;
  for (pb_size_t i = 0; i < m->measured_count; ++i) s.measured.push_back(PbString(m->measured[i]));
  for (pb_size_t i = 0; i < m->cgroup_count; ++i) s.cgroup[PbString(m->cgroup[i].name)] = m->cgroup[i].value;
  return s;
}

Result<Capabilities> DecodeCapabilities(std::string_view bytes) {
  PbOwned<outpost_driver_v1_Capabilities> m(outpost_driver_v1_Capabilities_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "Capabilities"));
  Capabilities c;
  c.send_signals = m->send_signals;
  c.exec = m->exec;
  c.fs_isolation = m->fs_isolation ? m->fs_isolation : "none";
  c.dynamic_workload_users = m->dynamic_workload_users;
  // NRI mounts, devices and oom_score_adj reach a plugin in oci_spec only.
  c.oci_runtime = m->oci_runtime;
  c.mounts = m->mounts && c.oci_runtime;
  c.devices = m->devices && c.oci_runtime;
  c.oom_score_adj = m->oom_score_adj && c.oci_runtime;
  for (pb_size_t i = 0; i < m->network_isolation_count; ++i) {
    std::string mode = PbString(m->network_isolation[i]);
    if (mode != "host" && mode != "group" && mode != "none") {
      return Error(Code::kInvalidArgument, "Capabilities.network_isolation: unknown mode \"" + mode +
                                               "\" (host, group or none)");
    }
    c.network_isolation.push_back(mode);
  }
  return c;
}

namespace {

// One field (of the schema, or of an object field): checked, named at.
template <typename M>
Result<SchemaField> SchemaFieldOf(const M& m, const std::string& at) {
  SchemaField f{PbString(m.name), PbString(m.type), m.required, {}, PbString(m.format)};
  const std::string& t = f.type;
  if (f.name.empty() || f.name.size() > 128) return Error(Code::kInvalidArgument, at + ".name is empty or too long");
  if (t != "string" && t != "number" && t != "bool" && t != "list" && t != "object") {
    return Error(Code::kInvalidArgument, at + ".type must be string, number, bool, list or object");
  }
  if (!f.format.empty() && f.format != "absolute_path") {
    return Error(Code::kInvalidArgument, at + ".format must be absolute_path or empty");
  }
  return f;
}

Status NoTwice(const std::vector<SchemaField>& out, const SchemaField& f) {
  for (const SchemaField& o : out) {
    if (o.name == f.name) return Error(Code::kInvalidArgument, "ConfigSchema names field " + f.name + " twice");
  }
  return OkStatus();
}

}  // namespace

Result<std::vector<SchemaField>> DecodeConfigSchema(std::string_view bytes) {
  PbOwned<outpost_driver_v1_ConfigSchema> m(outpost_driver_v1_ConfigSchema_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "ConfigSchema"));
  std::vector<SchemaField> out;
  for (pb_size_t i = 0; i < m->fields_count; ++i) {
    const outpost_driver_v1_ConfigField& mf = m->fields[i];
    std::string at = Format("ConfigSchema.fields[%u]", i);
    auto f = SchemaFieldOf(mf, at);
    if (!f.ok()) return f.error();
    if (mf.fields_count > 0 && f->type != "object" && f->type != "list") {
      return Error(Code::kInvalidArgument, at + ".fields: only for object or list");
    }
    for (pb_size_t j = 0; j < mf.fields_count; ++j) {
      auto g = SchemaFieldOf(mf.fields[j], Format("%s.fields[%u]", at.c_str(), j));
      if (!g.ok()) return g.error();
      OUTPOST_RETURN_IF_ERROR(NoTwice(f->fields, *g));
      f->fields.push_back(std::move(*g));
    }
    OUTPOST_RETURN_IF_ERROR(NoTwice(out, *f));
    out.push_back(std::move(*f));
  }
  return out;
}

Result<Fingerprint> DecodeFingerprint(std::string_view bytes) {
  PbOwned<outpost_driver_v1_Fingerprint> m(outpost_driver_v1_Fingerprint_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "Fingerprint"));
  if (m->health < 0 || m->health > 2) return Error(Code::kInvalidArgument, "Fingerprint.health out of range");
  Fingerprint f;
  f.health = static_cast<Health>(m->health);
  f.description = PbString(m->description);
  f.attributes = MapOf(m->attributes, m->attributes_count);
  return f;
}

Result<std::string> EncodeTaskEvents(uint64_t after) {
  outpost_driver_v1_TaskEventsRequest m = outpost_driver_v1_TaskEventsRequest_init_zero;
  m.after = after;
  return Encode(outpost_driver_v1_TaskEventsRequest_fields, m, "TaskEventsRequest");
}

Result<EventBatch> DecodeTaskEventsResponse(std::string_view bytes) {
  PbOwned<outpost_driver_v1_TaskEventsResponse> m(outpost_driver_v1_TaskEventsResponse_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "TaskEventsResponse"));
  if (m->events_count > kMaxEventsPerReply) {
    return Error(Code::kInvalidArgument, Format("TaskEventsResponse.events: %u, at most %zu", static_cast<unsigned>(m->events_count),
                                                kMaxEventsPerReply));
  }
  EventBatch b;
  b.next = m->next;
  uint64_t last = 0;
  for (pb_size_t i = 0; i < m->events_count; ++i) {
    const outpost_driver_v1_TaskEvent& e = m->events[i];
    std::string where = Format("TaskEventsResponse.events[%u]", static_cast<unsigned>(i));
    if (e.sequence == 0 || (i > 0 && e.sequence <= last)) {
      return Error(Code::kInvalidArgument, where + ".sequence: 0 or not above the one before");
    }
    last = e.sequence;
    SequencedEvent s;
    s.sequence = e.sequence;
    s.event.task_id = PbString(e.task_id);
    s.event.timestamp_unix_nanos = e.timestamp_unix_nanos;
    s.event.type = PbString(e.type);
    s.event.message = PbString(e.message);
    s.event.annotations = MapOf(e.annotations, e.annotations_count);
    if (s.event.type.empty()) return Error(Code::kInvalidArgument, where + ".type is empty");
    b.events.push_back(std::move(s));
  }
  if (!b.events.empty() && b.next < last) {
    return Error(Code::kInvalidArgument, "TaskEventsResponse.next is below the last event's sequence");
  }
  return b;
}

}  // namespace outpost::driver::remote
