#include "driverproto/plugin_codec.h"

#include <deque>
#include <utility>

#include "driverproto/common.h"

namespace outpost::driverproto {

namespace {

using plugin_sdk::Capabilities;
using plugin_sdk::ConfigField;
using plugin_sdk::ExecResult;
using plugin_sdk::ExitResult;
using plugin_sdk::Fingerprint;
using plugin_sdk::TaskConfig;
using plugin_sdk::TaskHandle;
using plugin_sdk::TaskStats;
using plugin_sdk::TaskStatus;

TaskConfig ConfigOf(const outpost_driver_v1_TaskConfig& m) {
  TaskConfig c;
  c.id = PbString(m.id);
  c.job = PbString(m.job);
  c.name = PbString(m.name);
  c.command = PbString(m.command);
  c.args = ListOf(m.args, m.args_count);
  c.env = MapOf(m.env, m.env_count);
  c.cwd = PbString(m.workdir);
  c.switch_user = m.identity.switch_user;
  c.uid = m.identity.uid;
  c.gid = m.identity.gid;
  c.groups.assign(m.identity.groups, m.identity.groups + m.identity.groups_count);
  c.user = PbString(m.identity.name);
  c.home = PbString(m.identity.home);
  for (pb_size_t i = 0; i < m.rlimits_count; ++i) {
    c.rlimits.push_back({PbString(m.rlimits[i].name), m.rlimits[i].soft, m.rlimits[i].hard});
  }
  c.kill_signal = PbString(m.kill_signal);
  c.kill_timeout_nanos = m.kill_timeout_nanos;
  c.task_dir = PbString(m.task_dir);
  c.stdout_path = PbString(m.stdout_path);
  c.stderr_path = PbString(m.stderr_path);
  c.cgroup = PbString(m.cgroup);
  c.config_json = PbString(m.driver_config);
  c.netns = PbString(m.netns);
  c.hostname = PbString(m.hostname);
  c.oci_spec = PbString(m.oci_spec);
  return c;
}

void FillExit(const ExitResult& e, Keep* k, outpost_driver_v1_ExitResult* m) {
  m->exit_code = e.exit_code;
  m->signal = e.signal;
  m->oom_killed = e.oom_killed;
  m->error = k->S(e.error);
}

// Decodes bytes as message T (named what in errors) and converts it.
template <typename T, typename Convert>
auto DecodeAs(std::string_view bytes, const pb_msgdesc_t* fields, const char* what, Convert convert)
    -> Result<decltype(convert(std::declval<const T&>()))> {
  PbOwned<T> m(fields);
  OUTPOST_RETURN_IF_ERROR(m.Decode(bytes, what));
  return convert(*m);
}

}  // namespace

Result<TaskConfig> DecodeStartTask(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_StartTaskRequest>(bytes, outpost_driver_v1_StartTaskRequest_fields,
                                                     "StartTaskRequest",
                                                     [](const auto& m) { return ConfigOf(m.config); });
}

Result<TaskHandle> DecodeRecoverTask(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_RecoverTaskRequest>(
      bytes, outpost_driver_v1_RecoverTaskRequest_fields, "RecoverTaskRequest", [](const auto& m) {
        TaskHandle h;
        h.version = m.handle.version;
        h.config = ConfigOf(m.handle.config);
        h.pid = m.handle.pid;
        h.started_at_unix_nanos = m.handle.started_at_unix_nanos;
        h.driver_state = BytesOf(m.handle.driver_state);
        return h;
      });
}

Result<std::string> DecodeTaskId(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_TaskIdRequest>(bytes, outpost_driver_v1_TaskIdRequest_fields, "TaskIdRequest",
                                                  [](const auto& m) { return PbString(m.id); });
}

Result<StopTaskRequest> DecodeStopTask(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_StopTaskRequest>(
      bytes, outpost_driver_v1_StopTaskRequest_fields, "StopTaskRequest",
      [](const auto& m) { return StopTaskRequest{PbString(m.id), m.timeout_nanos, PbString(m.signal)}; });
}

Result<DestroyTaskRequest> DecodeDestroyTask(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_DestroyTaskRequest>(
      bytes, outpost_driver_v1_DestroyTaskRequest_fields, "DestroyTaskRequest",
      [](const auto& m) { return DestroyTaskRequest{PbString(m.id), m.force}; });
}

Result<SignalTaskRequest> DecodeSignalTask(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_SignalTaskRequest>(
      bytes, outpost_driver_v1_SignalTaskRequest_fields, "SignalTaskRequest",
      [](const auto& m) { return SignalTaskRequest{PbString(m.id), PbString(m.signal)}; });
}

Result<ExecTaskRequest> DecodeExecTask(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_ExecTaskRequest>(
      bytes, outpost_driver_v1_ExecTaskRequest_fields, "ExecTaskRequest",
      [](const auto& m) { return ExecTaskRequest{PbString(m.id), ListOf(m.cmd, m.cmd_count), m.timeout_nanos}; });
}

Result<uint64_t> DecodeTaskEvents(std::string_view bytes) {
  return DecodeAs<outpost_driver_v1_TaskEventsRequest>(
      bytes, outpost_driver_v1_TaskEventsRequest_fields, "TaskEventsRequest",
      [](const auto& m) { return static_cast<uint64_t>(m.after); });
}

Result<std::string> EncodeCapabilities(const Capabilities& c) {
  outpost_driver_v1_Capabilities m = outpost_driver_v1_Capabilities_init_zero;
  m.send_signals = c.send_signals;
  m.exec = c.exec;
  m.fs_isolation = PbStr(c.fs_isolation);
  m.dynamic_workload_users = c.dynamic_workload_users;
  m.mounts = c.mounts;
  m.devices = c.devices;
  m.oom_score_adj = c.oom_score_adj;
  m.oci_runtime = c.oci_runtime;
  std::vector<char*> modes;
  for (const std::string& n : c.network_isolation) modes.push_back(PbStr(n));
  m.network_isolation_count = static_cast<pb_size_t>(modes.size());
  m.network_isolation = modes.data();
  return PbEncode(outpost_driver_v1_Capabilities_fields, &m, "Capabilities");
}

Result<std::string> EncodeFingerprint(const Fingerprint& f) {
  Keep k;
  outpost_driver_v1_Fingerprint m = outpost_driver_v1_Fingerprint_init_zero;
  m.health = f.health;
  m.description = k.S(f.description);
  m.attributes = k.Map(f.attributes, &m.attributes_count);
  return PbEncode(outpost_driver_v1_Fingerprint_fields, &m, "Fingerprint");
}

Result<std::string> EncodeConfigSchema(const std::vector<ConfigField>& fields) {
  Keep k;
  std::deque<std::vector<outpost_driver_v1_ConfigSubField>> subs;  // nanopb points into these
  std::vector<outpost_driver_v1_ConfigField> out;
  for (const ConfigField& f : fields) {
    outpost_driver_v1_ConfigField m = outpost_driver_v1_ConfigField_init_zero;
    m.name = k.S(f.name);
    m.type = k.S(f.type);
    m.required = f.required;
    m.description = k.S(f.description);
    m.format = k.S(f.format);
    std::vector<outpost_driver_v1_ConfigSubField>& sub = subs.emplace_back();
    for (const ConfigField& g : f.fields) {
      sub.push_back({k.S(g.name), k.S(g.type), g.required, k.S(g.description), k.S(g.format)});
    }
    m.fields_count = static_cast<pb_size_t>(sub.size());
    m.fields = sub.empty() ? nullptr : sub.data();
    out.push_back(m);
  }
  outpost_driver_v1_ConfigSchema m = outpost_driver_v1_ConfigSchema_init_zero;
  m.fields_count = static_cast<pb_size_t>(out.size());
  m.fields = out.data();
  return PbEncode(outpost_driver_v1_ConfigSchema_fields, &m, "ConfigSchema");
}

Result<std::string> EncodeStartTaskResponse(const TaskHandle& h) {
  if (h.driver_state.size() > kMaxBytesField) {
    return Error(Code::kInvalidArgument, "TaskHandle.driver_state is larger than 64 KiB");
  }
  outpost_driver_v1_StartTaskResponse m = outpost_driver_v1_StartTaskResponse_init_zero;
  m.has_handle = true;
  m.handle.version = h.version;
  m.handle.pid = h.pid;
  m.handle.started_at_unix_nanos = h.started_at_unix_nanos;
  std::vector<uint8_t> buf;
  if (!h.driver_state.empty()) m.handle.driver_state = Bytes(h.driver_state, &buf);
  return PbEncode(outpost_driver_v1_StartTaskResponse_fields, &m, "StartTaskResponse");
}

Result<std::string> EncodeWaitTask(bool exited, const ExitResult& result) {
  Keep k;
  outpost_driver_v1_WaitTaskResponse m = outpost_driver_v1_WaitTaskResponse_init_zero;
  m.exited = exited;
  m.has_result = exited;
  if (exited) FillExit(result, &k, &m.result);
  return PbEncode(outpost_driver_v1_WaitTaskResponse_fields, &m, "WaitTaskResponse");
}

Result<std::string> EncodeTaskStatus(const TaskStatus& s) {
  Keep k;
  outpost_driver_v1_TaskStatus m = outpost_driver_v1_TaskStatus_init_zero;
  m.id = k.S(s.id);
  m.name = k.S(s.name);
  m.state = s.state;
  m.pid = s.pid;
  m.started_at_unix_nanos = s.started_at_unix_nanos;
  m.completed_at_unix_nanos = s.completed_at_unix_nanos;
  m.has_exit = s.state == TaskStatus::kExited;
  FillExit(s.exit, &k, &m.exit);
  m.attributes = k.Map(s.attributes, &m.attributes_count);
  return PbEncode(outpost_driver_v1_TaskStatus_fields, &m, "TaskStatus");
}

Result<std::string> EncodeTaskStats(const TaskStats& s) {
  Keep k;
  std::vector<outpost_driver_v1_StatValue> cg;
  for (const auto& kv : s.cgroup) cg.push_back({k.S(kv.first), kv.second});
  outpost_driver_v1_TaskStatsResponse m = outpost_driver_v1_TaskStatsResponse_init_zero;
  m.timestamp_unix_nanos = s.timestamp_unix_nanos;
  m.rss_bytes = s.rss_bytes;
  m.cpu_user_nanos = s.cpu_user_nanos;
  m.cpu_system_nanos = s.cpu_system_nanos;
  m.cpu_percent = s.cpu_percent;
  m.measured = k.List(s.measured, &m.measured_count);
  m.cgroup_count = static_cast<pb_size_t>(cg.size());
  m.cgroup = cg.data();
  return PbEncode(outpost_driver_v1_TaskStatsResponse_fields, &m, "TaskStatsResponse");
}

Result<std::string> EncodeExecTask(const ExecResult& e) {
  std::vector<uint8_t> buf;
  outpost_driver_v1_ExecTaskResponse m = outpost_driver_v1_ExecTaskResponse_init_zero;
  m.exit_code = e.exit_code;
  m.output = Bytes(e.output.size() > kMaxExecOutput ? e.output.substr(0, kMaxExecOutput) : e.output, &buf);
  m.truncated = e.truncated || e.output.size() > kMaxExecOutput;
  return PbEncode(outpost_driver_v1_ExecTaskResponse_fields, &m, "ExecTaskResponse");
}

Result<std::string> EncodeTaskIds(const std::vector<std::string>& ids) {
  Keep k;
  outpost_driver_v1_TaskIdsResponse m = outpost_driver_v1_TaskIdsResponse_init_zero;
  m.ids = k.List(ids, &m.ids_count);
  return PbEncode(outpost_driver_v1_TaskIdsResponse_fields, &m, "TaskIdsResponse");
}

Result<std::string> EncodeTaskEventsResponse(const std::vector<SequencedEvent>& events, uint64_t next) {
  Keep k;
  std::vector<outpost_driver_v1_TaskEvent> out;
  for (const SequencedEvent& s : events) {
    outpost_driver_v1_TaskEvent e = outpost_driver_v1_TaskEvent_init_zero;
    e.sequence = s.sequence;
    e.task_id = k.S(s.event.task_id);
    e.timestamp_unix_nanos = s.event.timestamp_unix_nanos;
    e.type = k.S(s.event.type);
    e.message = k.S(s.event.message);
    e.annotations = k.Map(s.event.annotations, &e.annotations_count);
    out.push_back(e);
  }
  outpost_driver_v1_TaskEventsResponse m = outpost_driver_v1_TaskEventsResponse_init_zero;
  m.events_count = static_cast<pb_size_t>(out.size());
  m.events = out.data();
  m.next = next;
  return PbEncode(outpost_driver_v1_TaskEventsResponse_fields, &m, "TaskEventsResponse");
}

}  // namespace outpost::driverproto
