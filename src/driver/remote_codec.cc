#include "driver/remote_codec.h"

#include <deque>

#include "base/pb.h"
#include "base/strings.h"
#include "driver.pb.h"

namespace outpost::driver::remote {

namespace {

// Strings a message points into while it is encoded.
struct Keep {
  std::deque<std::string> strings;
  std::deque<std::vector<char*>> lists;
  std::deque<std::vector<outpost_driver_v1_KeyValue>> kvs;
  char* S(const std::string& s) { return PbStr(strings.emplace_back(s)); }
  char** List(const std::vector<std::string>& v, pb_size_t* count) {
    auto& l = lists.emplace_back();
    for (const std::string& s : v) l.push_back(S(s));
    *count = static_cast<pb_size_t>(l.size());
    return l.data();
  }
  outpost_driver_v1_KeyValue* Map(const std::map<std::string, std::string>& m, pb_size_t* count) {
    auto& l = kvs.emplace_back();
    for (const auto& [k, v] : m) l.push_back({S(k), S(v)});
    *count = static_cast<pb_size_t>(l.size());
    return l.data();
  }
};

std::map<std::string, std::string> MapOf(const outpost_driver_v1_KeyValue* kv, pb_size_t n) {
  std::map<std::string, std::string> m;
  for (pb_size_t i = 0; i < n; ++i) m[PbString(kv[i].key)] = PbString(kv[i].value);
  return m;
}

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
}

TaskConfig ConfigOf(const outpost_driver_v1_TaskConfig& m) {
  TaskConfig c;
  c.id = PbString(m.id);
  c.job = PbString(m.job);
  c.name = PbString(m.name);
  c.command = PbString(m.command);
  for (pb_size_t i = 0; i < m.args_count; ++i) c.args.push_back(PbString(m.args[i]));
  c.env = MapOf(m.env, m.env_count);
  c.workdir = PbString(m.workdir);
  c.identity.switch_user = m.identity.switch_user;
  c.identity.uid = m.identity.uid;
  c.identity.gid = m.identity.gid;
  for (pb_size_t i = 0; i < m.identity.groups_count; ++i) c.identity.groups.push_back(m.identity.groups[i]);
  c.identity.name = PbString(m.identity.name);
  c.identity.home = PbString(m.identity.home);
  for (pb_size_t i = 0; i < m.rlimits_count; ++i) {
    c.rlimits.push_back({PbString(m.rlimits[i].name), m.rlimits[i].soft, m.rlimits[i].hard});
  }
  c.kill_signal = PbString(m.kill_signal);
  c.kill_timeout_nanos = m.kill_timeout_nanos;
  c.task_dir = PbString(m.task_dir);
  c.stdout_path = PbString(m.stdout_path);
  c.stderr_path = PbString(m.stderr_path);
  c.cgroup = PbString(m.cgroup);
  c.driver_config = PbString(m.driver_config);
  return c;
}

void FillExit(const ExitResult& e, Keep* k, outpost_driver_v1_ExitResult* m) {
  m->exit_code = e.exit_code;
  m->signal = e.signal;
  m->oom_killed = e.oom_killed;
  m->error = k->S(e.error);
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

// A bytes field (at most 65,535 bytes) for encoding, kept in *buf.
pb_bytes_array_t* Bytes(const std::string& data, std::vector<uint8_t>* buf) {
  buf->assign(PB_BYTES_ARRAY_T_ALLOCSIZE(data.size()), 0);
  auto* b = reinterpret_cast<pb_bytes_array_t*>(buf->data());
  b->size = static_cast<pb_size_t>(data.size());
  std::copy(data.begin(), data.end(), b->bytes);
  return b;
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

Result<TaskConfig> DecodeStartTask(std::string_view bytes) {
  PbOwned<outpost_driver_v1_StartTaskRequest> m(outpost_driver_v1_StartTaskRequest_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "StartTaskRequest"));
  return ConfigOf(m->config);
}

Result<std::string> EncodeStartTaskResponse(const TaskHandle& h) {
  Keep k;
  std::vector<outpost_driver_v1_Rlimit> rl;
  outpost_driver_v1_StartTaskResponse m = outpost_driver_v1_StartTaskResponse_init_zero;
  m.has_handle = true;
  m.handle.version = h.version;
  m.handle.pid = h.pid;
  m.handle.started_at_unix_nanos = h.started_at_unix_nanos;
  if (h.driver_state.size() > 65535) {
    return Error(Code::kInvalidArgument, "TaskHandle.driver_state is larger than 64 KiB");
  }
  std::vector<uint8_t> buf;
  m.handle.driver_state = Bytes(h.driver_state, &buf);
  // The config is not sent back: outpost keeps its own.
  return Encode(outpost_driver_v1_StartTaskResponse_fields, m, "StartTaskResponse");
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
  if (h.driver_state.size() > 65535) return Error(Code::kInvalidArgument, "driver state is larger than 64 KiB");
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

Result<std::string> DecodeTaskId(std::string_view bytes) {
  PbOwned<outpost_driver_v1_TaskIdRequest> m(outpost_driver_v1_TaskIdRequest_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "TaskIdRequest"));
  return PbString(m->id);
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

Result<std::string> EncodeWaitTask(bool exited, const ExitResult& result) {
  Keep k;
  outpost_driver_v1_WaitTaskResponse m = outpost_driver_v1_WaitTaskResponse_init_zero;
  m.exited = exited;
  m.has_result = exited;
  if (exited) FillExit(result, &k, &m.result);
  return Encode(outpost_driver_v1_WaitTaskResponse_fields, m, "WaitTaskResponse");
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
    size_t n = m->output->size > 4096 ? 4096 : m->output->size;
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

Result<std::string> EncodeTaskStatus(const TaskStatus& s) {
  Keep k;
  outpost_driver_v1_TaskStatus m = outpost_driver_v1_TaskStatus_init_zero;
  m.id = k.S(s.id);
  m.name = k.S(s.name);
  m.state = static_cast<int32_t>(s.state);
  m.pid = s.pid;
  m.started_at_unix_nanos = s.started_at_unix_nanos;
  m.completed_at_unix_nanos = s.completed_at_unix_nanos;
  m.has_exit = s.state == TaskState::kExited;
  FillExit(s.exit, &k, &m.exit);
  m.attributes = k.Map(s.attributes, &m.attributes_count);
  return Encode(outpost_driver_v1_TaskStatus_fields, m, "TaskStatus");
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
  return c;
}

Result<std::string> EncodeCapabilities(const Capabilities& c) {
  outpost_driver_v1_Capabilities m = outpost_driver_v1_Capabilities_init_zero;
  m.send_signals = c.send_signals;
  m.exec = c.exec;
  m.fs_isolation = PbStr(c.fs_isolation);
  m.dynamic_workload_users = c.dynamic_workload_users;
  return Encode(outpost_driver_v1_Capabilities_fields, m, "Capabilities");
}

Result<std::vector<SchemaField>> DecodeConfigSchema(std::string_view bytes) {
  PbOwned<outpost_driver_v1_ConfigSchema> m(outpost_driver_v1_ConfigSchema_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "ConfigSchema"));
  std::vector<SchemaField> out;
  for (pb_size_t i = 0; i < m->fields_count; ++i) {
    SchemaField f{PbString(m->fields[i].name), PbString(m->fields[i].type), m->fields[i].required};
    const std::string& t = f.type;
    if (f.name.empty() || f.name.size() > 128) {
      return Error(Code::kInvalidArgument, Format("ConfigSchema.fields[%u].name is empty or too long", i));
    }
    if (t != "string" && t != "number" && t != "bool" && t != "list" && t != "object") {
      return Error(Code::kInvalidArgument, Format("ConfigSchema.fields[%u].type must be string, number, bool, list "
                                                  "or object", i));
    }
    for (const SchemaField& o : out) {
      if (o.name == f.name) return Error(Code::kInvalidArgument, "ConfigSchema names field " + f.name + " twice");
    }
    out.push_back(std::move(f));
  }
  return out;
}

Result<std::string> EncodeConfigSchema(const std::vector<SchemaField>& fields) {
  std::vector<outpost_driver_v1_ConfigField> fs(fields.size(), outpost_driver_v1_ConfigField{});
  for (size_t i = 0; i < fields.size(); ++i) {
    fs[i].name = PbStr(fields[i].name);
    fs[i].type = PbStr(fields[i].type);
    fs[i].required = fields[i].required;
  }
  outpost_driver_v1_ConfigSchema m = outpost_driver_v1_ConfigSchema_init_zero;
  m.fields_count = static_cast<pb_size_t>(fs.size());
  m.fields = fs.data();
  return Encode(outpost_driver_v1_ConfigSchema_fields, m, "ConfigSchema");
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

Result<std::string> EncodeFingerprint(const Fingerprint& f) {
  Keep k;
  outpost_driver_v1_Fingerprint m = outpost_driver_v1_Fingerprint_init_zero;
  m.health = static_cast<int32_t>(f.health);
  m.description = k.S(f.description);
  m.attributes = k.Map(f.attributes, &m.attributes_count);
  return Encode(outpost_driver_v1_Fingerprint_fields, m, "Fingerprint");
}

Result<std::string> EncodeTaskEvents(uint64_t after) {
  outpost_driver_v1_TaskEventsRequest m = outpost_driver_v1_TaskEventsRequest_init_zero;
  m.after = after;
  return Encode(outpost_driver_v1_TaskEventsRequest_fields, m, "TaskEventsRequest");
}

Result<uint64_t> DecodeTaskEvents(std::string_view bytes) {
  PbOwned<outpost_driver_v1_TaskEventsRequest> m(outpost_driver_v1_TaskEventsRequest_fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, "TaskEventsRequest"));
  return static_cast<uint64_t>(m->after);
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

Result<std::string> EncodeTaskEventsResponse(const EventBatch& b) {
  Keep k;
  std::vector<outpost_driver_v1_TaskEvent> events;
  for (const SequencedEvent& s : b.events) {
    outpost_driver_v1_TaskEvent e = outpost_driver_v1_TaskEvent_init_zero;
    e.sequence = s.sequence;
    e.task_id = k.S(s.event.task_id);
    e.timestamp_unix_nanos = s.event.timestamp_unix_nanos;
    e.type = k.S(s.event.type);
    e.message = k.S(s.event.message);
    e.annotations = k.Map(s.event.annotations, &e.annotations_count);
    events.push_back(e);
  }
  outpost_driver_v1_TaskEventsResponse m = outpost_driver_v1_TaskEventsResponse_init_zero;
  m.events_count = static_cast<pb_size_t>(events.size());
  m.events = events.data();
  m.next = b.next;
  return Encode(outpost_driver_v1_TaskEventsResponse_fields, m, "TaskEventsResponse");
}

}  // namespace outpost::driver::remote
