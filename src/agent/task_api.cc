#include "agent/task_api.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>

#include "agent/api.h"
#include "agent/api_util.h"
#include "agent/log_api.h"
#include "cgroup/cgroup.h"
#include "task/manager.h"
#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "task.pb.h"
#include "wire/rpc_server.h"

namespace outpost::agent {

outpost_v1_LimitInfo* FillLimits(const cgroup::Resources& r, const std::string& path, const cgroup::Cgroups* cg,
                                 Arena* a, pb_size_t* count) {
  std::vector<cgroup::LimitState> limits;
  if (cg) limits = cg->Enforcement(r, path);
  *count = static_cast<pb_size_t>(limits.size());
  auto* out = a->Array<outpost_v1_LimitInfo>(limits.size());
  for (size_t i = 0; i < limits.size(); ++i) {
    out[i] = outpost_v1_LimitInfo_init_zero;
    out[i].file = a->Str(limits[i].file);
    out[i].value = a->Str(limits[i].value);
    out[i].enforced = limits[i].not_enforced.empty();
    out[i].not_enforced = a->Str(limits[i].not_enforced);
  }
  return out;
}

void FillInfo(const task::TaskView& v, const InfoSources& src, Arena* a, outpost_v1_TaskInfo* out) {
  *out = outpost_v1_TaskInfo_init_zero;
  out->id = a->Str(v.status.id);
  out->job = a->Str(v.config.job);
  out->name = a->Str(v.status.name);
  out->state = a->Str(driver::TaskStateName(v.status.state));
  std::string problem;
  if (v.status.state == driver::TaskState::kRunning && src.tasks) problem = src.tasks->DriverProblem(v.config.driver);
  out->pid = v.status.pid;
  out->started_at_unix_nanos = v.status.started_at_unix_nanos;
  out->completed_at_unix_nanos = v.status.completed_at_unix_nanos;
  out->exit_code = v.status.exit.exit_code;
  out->signal = v.status.exit.signal;
  out->oom_killed = v.status.exit.oom_killed;
  out->error = a->Str(v.status.exit.error);
  if (!problem.empty()) {
    out->state = a->Str("unknown");
    out->error = a->Str(problem);
  }
  out->limits = FillLimits(v.config.resources, v.config.cgroup, src.cgroups, a, &out->limits_count);
  out->command = a->Str(v.config.command);
  out->args_count = static_cast<pb_size_t>(v.config.args.size());
  out->args = a->StrArray(v.config.args);
  out->log_dir = a->Str(v.log_dir);
  out->log_bytes = v.log_bytes;
  out->log_dropped_bytes = v.log_dropped;
  out->log_error = a->Str(v.log_error);
  out->user = a->Str(v.config.user);
  out->workdir = a->Str(v.config.workdir.empty() ? v.config.task_dir : v.config.workdir);
  out->nri = a->Str(v.nri);
  out->network_address = a->Str(v.network.address);
  out->network_ports_count = static_cast<pb_size_t>(v.network.ports.size());
  out->network_ports = a->Array<outpost_v1_NetworkPort>(v.network.ports.size());
  size_t np = 0;
  for (const auto& [label, port] : v.network.ports) {
    out->network_ports[np].label = a->Str(label);
    out->network_ports[np++].port = port;
  }
  out->hook_runs_count = static_cast<pb_size_t>(v.hook_runs.size());
  out->hook_runs = a->Array<outpost_v1_HookRunInfo>(v.hook_runs.size());
  for (size_t i = 0; i < v.hook_runs.size(); ++i) {
    const hooks::HookRun& r = v.hook_runs[i];
    outpost_v1_HookRunInfo& o = out->hook_runs[i];
    o = outpost_v1_HookRunInfo_init_zero;
    o.stage = a->Str(hooks::StageName(r.stage));
    o.path = a->Str(r.hook.path);
    o.source = a->Str(r.hook.source);
    o.exit_code = r.exit_code;
    o.timed_out = r.timed_out;
    o.started_at_unix_nanos = r.started_unix_nanos;
    o.duration_nanos = r.duration_nanos;
    o.message = a->Str(hooks::DescribeRun(r));
    o.stderr_tail = a->Str(r.err_tail);
    o.ok = r.ok();
  }
}

namespace {

constexpr int64_t kMaxWaitNanos = 60LL * kNanosPerSecond;
constexpr size_t kMaxLogChunk = 60000;  // nanopb bytes fields are < 64 KiB

struct EventWait;

// Event waits in flight. A wait whose caller went away (its connection
// closed) is otherwise only noticed at the next event or when its wait ends
// (up to a minute on a quiet node), so a client that asks and hangs up in a
// loop could pile them up: the list is swept of them whenever it has
// doubled since the last sweep (amortized O(1) per call).
struct EventWaits {
  std::vector<std::weak_ptr<EventWait>> all;
  size_t after_sweep = 0;
};

// What the handlers work with.
struct TaskApi {
  task::TaskManager* tm;
  Loop* loop;
  task::EventLog* events;
  std::shared_ptr<EventWaits> waits;
  InfoSources info;
};

using Handler = void (*)(const TaskApi&, std::string_view, wire::Responder);

// A call that needs the task's driver while it cannot be reached is
// answered UNAVAILABLE naming the driver (the API's one use of that
// status; the CLI's exit code 4), whatever the layer below made of it: to
// the task manager, a driver plugin that is not registered (yet, after an
// agent restart) is no driver at all (NotFound).
Error DriverAware(const task::TaskManager* tm, const std::string& id, const Error& e) {
  if (e.code() != Code::kUnavailable && e.code() != Code::kNotFound) return e;
  auto v = tm->Inspect(id);
  if (!v.ok()) return e;
  std::string problem = tm->DriverProblem(v->config.driver);
  return problem.empty() ? e : Error(Code::kUnavailable, problem);
}

// The done callback of a call through the driver: an error made DriverAware.
std::function<void(Status)> ReplyThroughDriver(const task::TaskManager* tm, const std::string& id,
                                               const wire::Responder& r) {
  return [tm, id, r](Status st) { ReplyEmpty(r, st.ok() ? st : Status(DriverAware(tm, id, st.error()))); };
}

void StartTask(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_StartTaskRequest> req(outpost_v1_StartTaskRequest_fields);
  if (!DecodeOrFail(payload, &req, "StartTaskRequest", r)) return;
  const outpost_v1_TaskSpec& s = req->spec;
  driver::TaskConfig c;
  c.id = PbString(s.id);
  c.job = PbString(s.job);
  c.name = PbString(s.name);
  c.command = PbString(s.command);
  for (pb_size_t i = 0; i < s.args_count; ++i) c.args.push_back(PbString(s.args[i]));
  for (pb_size_t i = 0; i < s.env_count; ++i) c.env[PbString(s.env[i].name)] = PbString(s.env[i].value);
  c.workdir = PbString(s.workdir);
  c.user = PbString(s.user);
  c.group = PbString(s.group);
  for (pb_size_t i = 0; i < s.rlimits_count; ++i) {
    c.rlimits.push_back({PbString(s.rlimits[i].name), s.rlimits[i].soft, s.rlimits[i].hard});
  }
  if (s.kill_signal && *s.kill_signal) c.kill_signal = s.kill_signal;
  auto sig = proc::ParseSignal(c.kill_signal);
  if (!sig.ok()) return r.Fail(Error(Code::kInvalidArgument, "kill_signal: " + sig.error().message()));
  if (s.kill_timeout_nanos < 0) return r.Fail(Error(Code::kInvalidArgument, "kill_timeout must not be negative"));
  if (s.kill_timeout_nanos > 0) c.kill_timeout_nanos = s.kill_timeout_nanos;
  if (s.log_max_files < 0 || s.log_max_files > 1000) {
    return r.Fail(Error(Code::kInvalidArgument, "log max_files must be between 1 and 1000"));
  }
  if (s.log_max_files > 0) c.log_max_files = s.log_max_files;
  if (s.log_max_file_size > 0) {
    if (s.log_max_file_size < 4096) {
      return r.Fail(Error(Code::kInvalidArgument, "log max_file_size must be at least 4KiB"));
    }
    c.log_max_file_size = s.log_max_file_size;
  }
  InfoSources info = api.info;
  tm->Start(std::move(c), [r, info](Result<task::TaskView> v) {
    // A bare task's driver is exec, which is always there: UNAVAILABLE from
    // below is someone else's (a required NRI plugin that is closed), and is
    // not answered as a driver's.
    if (!v.ok() && v.error().code() == Code::kUnavailable) {
      return r.Fail(Error(Code::kFailedPrecondition, v.error().message()));
    }
    if (!v.ok()) return r.Fail(v.error());
    Arena a;
    outpost_v1_StartTaskResponse resp = outpost_v1_StartTaskResponse_init_zero;
    resp.has_task = true;
    FillInfo(*v, info, &a, &resp.task);
    r.Finish(PbEncode(outpost_v1_StartTaskResponse_fields, &resp, "StartTaskResponse"));
  });
}

void ListTasks(const TaskApi& api, std::string_view, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  std::vector<task::TaskView> views = tm->List();
  Arena a;
  std::vector<outpost_v1_TaskInfo> infos(views.size());
  for (size_t i = 0; i < views.size(); ++i) FillInfo(views[i], api.info, &a, &infos[i]);
  outpost_v1_ListTasksResponse resp = outpost_v1_ListTasksResponse_init_zero;
  resp.tasks_count = static_cast<pb_size_t>(infos.size());
  resp.tasks = infos.data();
  r.Finish(PbEncode(outpost_v1_ListTasksResponse_fields, &resp, "ListTasksResponse"));
}

void InspectTask(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_TaskIdRequest> req(outpost_v1_TaskIdRequest_fields);
  if (!DecodeOrFail(payload, &req, "TaskIdRequest", r)) return;
  auto id = tm->ResolveId(PbString(req->id));
  if (!id.ok()) return r.Fail(id.error());
  auto v = tm->Inspect(*id);
  if (!v.ok()) return r.Fail(v.error());
  Arena a;
  outpost_v1_TaskInfo info;
  FillInfo(*v, api.info, &a, &info);
  r.Finish(PbEncode(outpost_v1_TaskInfo_fields, &info, "TaskInfo"));
}

void StopTask(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_StopTaskRequest> req(outpost_v1_StopTaskRequest_fields);
  if (!DecodeOrFail(payload, &req, "StopTaskRequest", r)) return;
  auto id = tm->ResolveId(PbString(req->id));
  if (!id.ok()) return r.Fail(id.error());
  tm->Stop(*id, req->timeout_nanos, PbString(req->signal), ReplyThroughDriver(tm, *id, r));
}

void DestroyTask(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_DestroyTaskRequest> req(outpost_v1_DestroyTaskRequest_fields);
  if (!DecodeOrFail(payload, &req, "DestroyTaskRequest", r)) return;
  auto id = tm->ResolveId(PbString(req->id));
  if (!id.ok()) return r.Fail(id.error());
  tm->Destroy(*id, req->force, ReplyThroughDriver(tm, *id, r));
}

void SignalTask(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_SignalTaskRequest> req(outpost_v1_SignalTaskRequest_fields);
  if (!DecodeOrFail(payload, &req, "SignalTaskRequest", r)) return;
  auto id = tm->ResolveId(PbString(req->id));
  if (!id.ok()) return r.Fail(id.error());
  tm->Signal(*id, PbString(req->signal), ReplyThroughDriver(tm, *id, r));
}

void ExecTask(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_ExecTaskRequest> req(outpost_v1_ExecTaskRequest_fields);
  if (!DecodeOrFail(payload, &req, "ExecTaskRequest", r)) return;
  std::vector<std::string> cmd;
  for (pb_size_t i = 0; i < req->cmd_count; ++i) cmd.push_back(PbString(req->cmd[i]));
  auto id = tm->ResolveId(PbString(req->id));
  if (!id.ok()) return r.Fail(id.error());
  tm->Exec(*id, cmd, req->timeout_nanos, [tm, tid = *id, r](Result<driver::ExecResult> res) {
    if (!res.ok()) return r.Fail(DriverAware(tm, tid, res.error()));
    Arena a;
    outpost_v1_ExecTaskResponse resp = outpost_v1_ExecTaskResponse_init_zero;
    resp.exit_code = res->exit_code;
    resp.output = a.Bytes(res->output.substr(0, kMaxLogChunk));
    resp.truncated = res->truncated || res->output.size() > kMaxLogChunk;
    r.Finish(PbEncode(outpost_v1_ExecTaskResponse_fields, &resp, "ExecTaskResponse"));
  });
}

void TaskStats(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_TaskIdRequest> req(outpost_v1_TaskIdRequest_fields);
  if (!DecodeOrFail(payload, &req, "TaskIdRequest", r)) return;
  auto id = tm->ResolveId(PbString(req->id));
  if (!id.ok()) return r.Fail(id.error());
  tm->Stats(*id, [tm, tid = *id, r](Result<driver::TaskStats> s) {
  if (!s.ok()) return r.Fail(DriverAware(tm, tid, s.error()));
  Arena a;
  outpost_v1_TaskStatsResponse resp = outpost_v1_TaskStatsResponse_init_zero;
  resp.timestamp_unix_nanos = s->timestamp_unix_nanos;
  resp.rss_bytes = s->rss_bytes;
  resp.cpu_user_nanos = s->cpu_user_nanos;
  resp.cpu_system_nanos = s->cpu_system_nanos;
  resp.cpu_percent = s->cpu_percent;
  resp.measured_count = static_cast<pb_size_t>(s->measured.size());
  resp.measured = a.StrArray(s->measured);
  resp.cgroup_count = static_cast<pb_size_t>(s->cgroup.size());
  resp.cgroup = a.Array<outpost_v1_StatValue>(s->cgroup.size());
  size_t k = 0;
  for (const auto& [name, value] : s->cgroup) {
    resp.cgroup[k] = outpost_v1_StatValue_init_zero;
    resp.cgroup[k].name = a.Str(name);
    resp.cgroup[k].value = value;
    k++;
  }
  r.Finish(PbEncode(outpost_v1_TaskStatsResponse_fields, &resp, "TaskStatsResponse"));
  });
}

// Logs: agent/log_api.
void ReadLogs(const TaskApi& api, std::string_view payload, wire::Responder r) {
  ServeReadLogs(api.tm, api.loop, payload, std::move(r));
}

// Which events a call wants: by task id and job, or by ref (EventLog::AfterRef).
struct EventQuery {
  std::string task_id;
  std::string job;
  std::string ref;
  std::vector<task::EventRecord> After(const task::EventLog* log, uint64_t after) const {
    return ref.empty() ? log->After(after, task_id, job) : log->AfterRef(after, ref);
  }
  bool AnyAfter(const task::EventLog* log, uint64_t after) const {
    return ref.empty() ? log->AnyAfter(after, task_id, job) : log->AnyAfterRef(after, ref);
  }
};

void ReplyEvents(task::EventLog* log, uint64_t after, const EventQuery& q, const wire::Responder& r) {
  std::vector<task::EventRecord> evs = q.After(log, after);
  Arena a;
  std::vector<outpost_v1_TaskEvent> out(evs.size());
  for (size_t i = 0; i < evs.size(); ++i) {
    const driver::TaskEvent& e = evs[i].event;
    out[i] = outpost_v1_TaskEvent_init_zero;
    out[i].seq = evs[i].seq;
    out[i].task_id = a.Str(e.task_id);
    out[i].task_name = a.Str(e.task_name);
    out[i].job = a.Str(e.job);
    out[i].time_unix_nanos = e.timestamp_unix_nanos;
    out[i].type = a.Str(e.type);
    out[i].message = a.Str(e.message);
  }
  outpost_v1_WatchEventsResponse resp = outpost_v1_WatchEventsResponse_init_zero;
  resp.events_count = static_cast<pb_size_t>(out.size());
  resp.events = out.data();
  resp.last_seq = log->last_seq();
  r.Finish(PbEncode(outpost_v1_WatchEventsResponse_fields, &resp, "WatchEventsResponse"));
}

// Long-poll for events: answered on the next matching event, or when the
// wait ends (timed_out), whichever comes first.
struct EventWait {
  task::EventLog* log;
  Loop* loop;
  uint64_t after;
  EventQuery q;
  wire::Responder r;
  uint64_t notify = 0;
  Loop::TimerId timer = 0;
  bool done = false;
};

void CheckEvents(const std::shared_ptr<EventWait>& w, bool timed_out) {
  if (w->done) return;
  if (!timed_out && !w->q.AnyAfter(w->log, w->after) && w->r.pending()) {
    w->notify = w->log->NotifyOnEvent([w] { CheckEvents(w, false); });  // another task's event
    return;
  }
  w->done = true;
  if (timed_out) w->log->CancelNotify(w->notify);
  else w->loop->CancelTimer(w->timer);
  ReplyEvents(w->log, w->after, w->q, w->r);
}

// Drops the waits that ended and ends those nobody waits for any more.
[[gnu::cold]] void SweepAbandoned(EventWaits* waits) {
  if (waits->all.size() < std::max<size_t>(2 * waits->after_sweep, 64)) return;
  auto& all = waits->all;
  all.erase(std::remove_if(all.begin(), all.end(),
                           [](const std::weak_ptr<EventWait>& weak) {
                             std::shared_ptr<EventWait> w = weak.lock();
                             if (!w || w->done) return true;
                             if (w->r.pending()) return false;
                             w->done = true;
                             w->log->CancelNotify(w->notify);
                             w->loop->CancelTimer(w->timer);
                             return true;
                           }),
            all.end());
  waits->after_sweep = all.size();
}

void WatchEvents(const TaskApi& api, std::string_view payload, wire::Responder r) {
  task::TaskManager* tm = api.tm;
  PbOwned<outpost_v1_WatchEventsRequest> req(outpost_v1_WatchEventsRequest_fields);
  if (!DecodeOrFail(payload, &req, "WatchEventsRequest", r)) return;
  uint64_t after = req->after_seq;
  task::EventLog* log = api.events;
  EventQuery q;
  q.ref = PbString(req->ref);
  q.task_id = PbString(req->task_id);
  if (!q.ref.empty()) {
    // A ref names something while a job or task of that name exists or the
    // history holds events of it (a removed job's, until they age out).
    if (req->must_exist && !log->AnyOf(q.ref)) {
      auto id = tm->ResolveId(q.ref);
      if (!id.ok()) return r.Fail(id.error());
      if (!tm->Inspect(*id).ok()) {
        return r.Fail(Error(Code::kNotFound, "no job or task \"" + q.ref + "\" (and no events of one)"));
      }
    }
  } else if (!q.task_id.empty()) {
    auto id = tm->ResolveId(q.task_id);
    if (!id.ok()) return r.Fail(id.error());
    q.task_id = *id;
  }
  q.job = PbString(req->job);
  int64_t wait = std::min(std::max<int64_t>(req->wait_nanos, 0), kMaxWaitNanos);
  if (q.AnyAfter(log, after) || wait == 0) return ReplyEvents(log, after, q, r);
  auto w = std::make_shared<EventWait>();
  w->log = log;
  w->loop = api.loop;
  w->after = after;
  w->q = q;
  w->r = r;
  w->notify = log->NotifyOnEvent([w] { CheckEvents(w, false); });
  w->timer = api.loop->AddTimer(wait, [w] { CheckEvents(w, true); });
  SweepAbandoned(api.waits.get());
  api.waits->all.push_back(w);
}

}  // namespace

void RegisterTaskApi(task::TaskManager* tm, const cgroup::Cgroups* cgroups, task::EventLog* events, Loop* loop,
                     wire::RpcServer* server) {
  static const struct {
    const char* method;
    Handler fn;
  } kMethods[] = {
      {"StartTask", StartTask},     {"ListTasks", ListTasks},     {"InspectTask", InspectTask},
      {"StopTask", StopTask},       {"DestroyTask", DestroyTask}, {"SignalTask", SignalTask},
      {"ExecTask", ExecTask},       {"TaskStats", TaskStats},     {"ReadLogs", ReadLogs},
      {"WatchEvents", WatchEvents},
  };
  auto waits = std::make_shared<EventWaits>();
  for (const auto& m : kMethods) {
    Handler fn = m.fn;
    TaskApi api{tm, loop, events, waits, InfoSources{tm, cgroups}};
    server->Register(kAgentService, m.method,
                     [api, fn](const wire::CallContext&, std::string_view payload, wire::Responder r) {
                       fn(api, payload, std::move(r));
                     });
  }
}

}  // namespace outpost::agent
