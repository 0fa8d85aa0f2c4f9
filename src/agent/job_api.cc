#include "agent/job_api.h"

#include "agent/api.h"
#include "agent/api_util.h"
#include "base/clock.h"
#include "base/strings.h"
#include "cgroup/cgroup.h"
#include "loop/loop.h"
#include "task/events.h"
#include "task/manager.h"
#include "base/pb.h"
#include "job.pb.h"
#include "wire/rpc_server.h"

namespace outpost::agent {

void JobTaskRunner::Start(const driver::TaskConfig& config, std::function<void(Status)> started,
                          ExitCallback exited) {
  tm_->Start(
      config, [started](Result<task::TaskView> v) { started(v.ok() ? OkStatus() : Status(v.error())); },
      std::move(exited));
}

Status JobTaskRunner::Watch(const std::string& id, ExitCallback exited) { return tm_->Watch(id, std::move(exited)); }

void JobTaskRunner::Stop(const std::string& id, int64_t timeout_nanos, std::function<void(Status)> done) {
  tm_->Stop(id, timeout_nanos, "", std::move(done));
}

void JobTaskRunner::AbortStart(const std::string& id) { (void)tm_->AbandonNriWait(id); }

void JobTaskRunner::CheckAlive(const std::string& id, std::function<void(bool)> done) {
  tm_->CheckAlive(id, std::move(done));
}

void JobTaskRunner::ExecCheck(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                              driver::Driver::ExecCallback done) {
  tm_->Exec(id, cmd, timeout_nanos, std::move(done));
}

std::string JobTaskRunner::TaskNetns(const std::string& id) const {
  auto v = tm_->Inspect(id);
  if (!v.ok() || !v->config.net) return "";
  return v->config.net->netns;
}

Status JobTaskRunner::UpdateResources(const std::string& id, const cgroup::Resources& r) {
  return tm_->UpdateResources(id, r);
}

Status JobTaskRunner::ApplyJobResources(const std::string& job, const cgroup::Resources& r) {
  return tm_->ApplyJobResources(job, r);
}

std::string JobTaskRunner::DriverProblem(const std::string& driver) const { return tm_->DriverProblem(driver); }

std::string JobTaskRunner::DeviceProblem(const std::string& task_id,
                                         const std::vector<devices::Request>& requests) const {
  // Without device plugins the start fails saying so (a task waiting for
  // devices that can never come would wait forever, silently).
  return devices_ == nullptr ? std::string() : devices_->WaitReason(task_id, requests);
}

void JobTaskRunner::ReleaseDevices(const std::string& task_id) {
  if (devices_ == nullptr) return;
  devices_->Release(task_id);
  if (devices_freed_) devices_freed_();
}

std::string JobTaskRunner::LimitsNotEnforced(const std::string& job, const std::string& task_id,
                                             const cgroup::Resources& r) const {
  if (!cgroups_) return "";
  if (task_id.empty()) return cgroup::NotEnforcedSummary(cgroups_->Enforcement(r, cgroups_->JobPath(job)));
  auto v = tm_->Inspect(task_id);
  if (!v.ok()) return "";
  return cgroup::NotEnforcedSummary(cgroups_->Enforcement(r, v->config.cgroup));
}

Result<job::TaskStore::Instance> JobTaskRunner::Lookup(const std::string& task_id) {
  auto v = tm_->Inspect(task_id);
  if (!v.ok()) return v.error();
  Instance i;
  i.running = v->status.state != driver::TaskState::kExited;
  i.exit = v->status.exit;
  i.spec_hash = v->config.spec_hash;
  i.restarts = v->config.restarts;
  return i;
}

void JobTaskRunner::Purge(const std::string& task_id, std::function<void(Status)> done) {
  tm_->Purge(task_id, std::move(done));
}

std::vector<std::pair<std::string, std::string>> JobTaskRunner::EndedJobTasks() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const task::TaskView& v : tm_->List()) {
    if (!v.config.job.empty() && v.status.state == driver::TaskState::kExited) out.push_back({v.config.id, v.config.job});
  }
  return out;
}

namespace {

template <typename PairList>
outpost_v1_EnvVar* Pairs(const PairList& m, Arena* a) {
  auto* out = a->Array<outpost_v1_EnvVar>(m.size());
  size_t i = 0;
  for (const auto& [k, v] : m) {
    out[i] = outpost_v1_EnvVar_init_zero;
    out[i].name = a->Str(k);
    out[i].value = a->Str(v);
    i++;
  }
  return out;
}

// The handlers' view of the agent.
struct JobApi {
  Loop* loop;
  job::JobManager* jobs;
  task::TaskManager* tm;
  task::EventLog* events;
  const cgroup::Cgroups* cgroups;
  const devices::DevicePlugins* devices;  // null: device plugins off
};

// The devices a task holds, per resource, and their plugins' annotations.
void FillDevices(const devices::DevicePlugins* d, const std::string& task_id, Arena* a, outpost_v1_JobTaskInfo* o) {
  if (d == nullptr) return;
  std::vector<const devices::Allocation*> held;
  std::vector<std::pair<std::string, std::string>> notes;
  for (const devices::Allocation& al : d->manager().allocations()) {
    if (al.task != task_id || !al.committed) continue;
    held.push_back(&al);
    notes.insert(notes.end(), al.response.annotations.begin(), al.response.annotations.end());
  }
  o->devices_count = static_cast<pb_size_t>(held.size());
  o->devices = a->Array<outpost_v1_HeldDevices>(held.size());
  for (size_t i = 0; i < held.size(); ++i) {
    o->devices[i] = outpost_v1_HeldDevices_init_zero;
    o->devices[i].resource = a->Str(held[i]->resource);
    o->devices[i].ids_count = static_cast<pb_size_t>(held[i]->devices.size());
    o->devices[i].ids = a->StrArray(held[i]->devices);
  }
  o->device_annotations_count = static_cast<pb_size_t>(notes.size());
  o->device_annotations = Pairs(notes, a);
}

void FillJob(const job::JobView& v, const JobApi& api, bool full, Arena* a, outpost_v1_JobInfo* out) {
  task::TaskManager* tm = api.tm;
  *out = outpost_v1_JobInfo_init_zero;
  out->id = a->Str(v.id);
  out->status = a->Str(v.status);
  out->source = a->Str(job::SourceName(v.source));
  out->file = a->Str(v.file);
  out->desired = a->Str(v.running ? "running" : "stopped");
  out->version = v.version;
  out->submitted_at_unix_nanos = v.submitted_unix_nanos;
  out->labels_count = static_cast<pb_size_t>(v.spec.labels.size());
  out->labels = Pairs(v.spec.labels, a);
  out->annotations_count = static_cast<pb_size_t>(v.spec.annotations.size());
  out->annotations = Pairs(v.spec.annotations, a);
  out->tasks_count = static_cast<pb_size_t>(v.tasks.size());
  out->tasks = a->Array<outpost_v1_JobTaskInfo>(v.tasks.size());
  for (size_t i = 0; i < v.tasks.size(); i++) {
    const job::TaskStatusView& t = v.tasks[i];
    outpost_v1_JobTaskInfo& o = out->tasks[i];
    o = outpost_v1_JobTaskInfo_init_zero;
    o.name = a->Str(t.name);
    o.task_id = a->Str(t.task_id);
    o.state = a->Str(job::RunStateName(t.state));
    o.lifecycle = a->Str(job::HookName(t.lifecycle.hook));
    o.sidecar = t.lifecycle.sidecar;
    o.restarts = t.restarts;
    o.failed = t.failed;
    o.completed = t.completed;
    o.healthy = t.healthy;
    o.health = a->Str(t.health);
    o.checks_count = static_cast<pb_size_t>(t.checks.size());
    o.checks = a->Array<outpost_v1_CheckResultInfo>(t.checks.size());
    for (size_t c = 0; c < t.checks.size(); c++) {
      const job::CheckView& cv = t.checks[c];
      outpost_v1_CheckResultInfo& co = o.checks[c];
      co = outpost_v1_CheckResultInfo_init_zero;
      co.name = a->Str(cv.label);
      co.type = a->Str(job::CheckTypeName(cv.type));
      co.status = a->Str(job::CheckVerdictName(cv.state.verdict));
      co.last_ok = cv.state.last_ok;
      co.output = a->Str(cv.state.output);
      co.last_unix_nanos = cv.state.last_unix_nanos;
      co.runs = cv.state.runs;
      co.successes = cv.state.successes;
      co.failures = cv.state.failures;
    }
    o.reason = a->Str(t.reason);
    o.last_exit = a->Str(t.last_exit);
    o.start_error_permanent = t.start_error_permanent;
    o.start_exit_code = t.start_exit_code;
    o.next_start_unix_nanos = t.next_start_unix_nanos;
    FillDevices(api.devices, t.task_id, a, &o);
    auto tv = tm->Inspect(t.task_id);
    if (tv.ok()) {
      if (tv->status.state != driver::TaskState::kExited) o.pid = tv->status.pid;
      // A running task whose driver plugin is away (within its grace
      // period): not known to be running, not known to have ended.
      if (tv->status.state == driver::TaskState::kRunning) {
        std::string problem = tm->DriverProblem(tv->config.driver);
        if (!problem.empty()) {
          o.state = a->Str("unknown");
          o.reason = a->Str(problem);
        }
      }
      o.started_at_unix_nanos = tv->status.started_at_unix_nanos;
      if (full) {
        o.has_task = true;
        FillInfo(*tv, InfoSources{tm, api.cgroups}, a, &o.task);
      }
    }
  }
  out->pending = a->Str(v.pending);
  if (full) {
    out->spec_json = a->Str(job::JobSpecToJson(v.spec).serialize(true));
    const cgroup::Cgroups* cg = api.cgroups;
    out->limits = FillLimits(v.spec.resources, cg ? cg->JobPath(v.id) : "", cg, a, &out->limits_count);
  }
}

bool Ready(job::JobManager* jobs, const wire::Responder& r) {
  if (jobs->recovered()) return true;
  // (Not UNAVAILABLE: the API keeps that for a driver it cannot reach.)
  r.Fail(Error(Code::kFailedPrecondition, "the agent is still recovering its jobs; try again in a moment"));
  return false;
}

void SubmitJob(const JobApi& api, const wire::CallContext&, std::string_view payload, wire::Responder r) {
  job::JobManager* jobs = api.jobs;
  PbOwned<outpost_v1_SubmitJobRequest> req(outpost_v1_SubmitJobRequest_fields);
  if (!DecodeOrFail(payload, &req, "SubmitJobRequest", r) || !Ready(jobs, r)) return;
  uint64_t seq = api.events->last_seq();
  auto res = jobs->Submit(PbString(req->spec_json));
  if (!res.ok()) return r.Fail(res.error());
  Arena a;
  outpost_v1_SubmitJobResponse resp = outpost_v1_SubmitJobResponse_init_zero;
  resp.has_job = true;
  FillJob(res->job, api, false, &a, &resp.job);
  resp.created = res->created;
  resp.unchanged = res->unchanged;
  resp.restarted_count = static_cast<pb_size_t>(res->restarted.size());
  resp.restarted = a.StrArray(res->restarted);
  resp.added_count = static_cast<pb_size_t>(res->added.size());
  resp.added = a.StrArray(res->added);
  resp.removed_count = static_cast<pb_size_t>(res->removed.size());
  resp.removed = a.StrArray(res->removed);
  resp.waiting_count = static_cast<pb_size_t>(res->waiting.size());
  resp.waiting = a.StrArray(res->waiting);
  resp.events_seq = seq;
  r.Finish(PbEncode(outpost_v1_SubmitJobResponse_fields, &resp, "SubmitJobResponse"));
}

void ListJobs(const JobApi& api, const wire::CallContext&, std::string_view payload, wire::Responder r) {
  job::JobManager* jobs = api.jobs;
  PbOwned<outpost_v1_ListJobsRequest> req(outpost_v1_ListJobsRequest_fields);
  if (!DecodeOrFail(payload, &req, "ListJobsRequest", r)) return;
  std::vector<job::JobView> views = jobs->List();
  Arena a;
  outpost_v1_ListJobsResponse resp = outpost_v1_ListJobsResponse_init_zero;
  resp.jobs_count = static_cast<pb_size_t>(views.size());
  resp.jobs = a.Array<outpost_v1_JobInfo>(views.size());
  for (size_t i = 0; i < views.size(); i++) FillJob(views[i], api, false, &a, &resp.jobs[i]);
  std::map<std::string, std::string> problems = jobs->FileProblems();
  resp.problems_count = static_cast<pb_size_t>(problems.size());
  resp.problems = a.Array<outpost_v1_FileProblem>(problems.size());
  size_t i = 0;
  for (const auto& [path, error] : problems) {
    resp.problems[i] = outpost_v1_FileProblem_init_zero;
    resp.problems[i].path = a.Str(path);
    resp.problems[i].error = a.Str(error);
    i++;
  }
  resp.jobs_dir = a.Str(jobs->jobs_dir());
  resp.jobs_dir_problem = a.Str(jobs->DirProblem());
  r.Finish(PbEncode(outpost_v1_ListJobsResponse_fields, &resp, "ListJobsResponse"));
}

void InspectJob(const JobApi& api, const wire::CallContext&, std::string_view payload, wire::Responder r) {
  job::JobManager* jobs = api.jobs;
  PbOwned<outpost_v1_JobIdRequest> req(outpost_v1_JobIdRequest_fields);
  if (!DecodeOrFail(payload, &req, "JobIdRequest", r)) return;
  auto v = jobs->Inspect(PbString(req->id));
  if (!v.ok()) return r.Fail(v.error());
  Arena a;
  outpost_v1_JobInfo info;
  FillJob(*v, api, true, &a, &info);
  r.Finish(PbEncode(outpost_v1_JobInfo_fields, &info, "JobInfo"));
}

// A stop or removal is answered when it is done; one that cannot be done
// now (a task's driver is away) is answered "pending", with the reason,
// once it has waited for `wait` (or just before the caller's deadline): the
// agent goes on with it, and carries it out when it can (docs/supervision.md,
// "Stopping and removing while a driver is away").
constexpr int64_t kDefaultPendingWaitNanos = 10 * kNanosPerSecond;
constexpr int64_t kPendingPollNanos = 200 * kNanosPerMilli;

void AnswerPending(Loop* loop, job::JobManager* jobs, std::string id, const char* what, int64_t wait,
                   int64_t deadline, wire::Responder r) {
  loop->AddTimer(kPendingPollNanos, [loop, jobs, id, what, wait, deadline, r] {
    if (!r.pending()) return;
    auto v = jobs->Inspect(id);
    if (!v.ok()) return;  // removed: its own callback answers
    const int64_t now = MonotonicNanos();
    const bool waited = !v->pending.empty() && now - v->pending_since_mono >= wait;
    const bool late = deadline > 0 && now + 2 * kPendingPollNanos >= deadline;
    if (!waited && !late) return AnswerPending(loop, jobs, id, what, wait, deadline, r);
    if (v->pending.empty()) {
      return r.Fail(Error(Code::kDeadlineExceeded,
                          Format("the %s of job %s is not done yet (it goes on): job %s", what, id.c_str(),
                                 v->status.c_str())));
    }
    r.Fail(Error(v->pending_on_driver ? Code::kUnavailable : Code::kAborted,
                 Format("the %s of job %s is pending: %s; the agent carries it out as soon as it can", what,
                        id.c_str(), v->pending.c_str())));
  });
}

void StopJob(const JobApi& api, const wire::CallContext& ctx, std::string_view payload, wire::Responder r) {
  job::JobManager* jobs = api.jobs;
  PbOwned<outpost_v1_StopJobRequest> req(outpost_v1_StopJobRequest_fields);
  if (!DecodeOrFail(payload, &req, "StopJobRequest", r) || !Ready(jobs, r)) return;
  std::string id = PbString(req->id);
  jobs->Stop(id, req->timeout_nanos, [r](Status st) { ReplyEmpty(r, st); });
  if (r.pending()) {
    AnswerPending(api.loop, jobs, id, "stop", req->wait_nanos > 0 ? req->wait_nanos : kDefaultPendingWaitNanos,
                  ctx.deadline, r);
  }
}

void RemoveJob(const JobApi& api, const wire::CallContext& ctx, std::string_view payload, wire::Responder r) {
  job::JobManager* jobs = api.jobs;
  PbOwned<outpost_v1_RemoveJobRequest> req(outpost_v1_RemoveJobRequest_fields);
  if (!DecodeOrFail(payload, &req, "RemoveJobRequest", r) || !Ready(jobs, r)) return;
  std::string id = PbString(req->id);
  jobs->Remove(id, [r](Status st) { ReplyEmpty(r, st); });
  if (r.pending()) {
    AnswerPending(api.loop, jobs, id, "removal", req->wait_nanos > 0 ? req->wait_nanos : kDefaultPendingWaitNanos,
                  ctx.deadline, r);
  }
}

void RestartJob(const JobApi& api, const wire::CallContext&, std::string_view payload, wire::Responder r) {
  job::JobManager* jobs = api.jobs;
  PbOwned<outpost_v1_RestartJobRequest> req(outpost_v1_RestartJobRequest_fields);
  if (!DecodeOrFail(payload, &req, "RestartJobRequest", r) || !Ready(jobs, r)) return;
  std::string id = PbString(req->id);
  bool already = false;
  Status st = OkStatus();
  if (req->start_only) {
    if (!PbString(req->task).empty()) return r.Fail(Error(Code::kInvalidArgument, "start takes a whole job, not a task"));
    st = jobs->Start(id, &already);
  } else {
    st = jobs->Restart(id, PbString(req->task));
  }
  if (!st.ok()) return r.Fail(st.error());
  outpost_v1_RestartJobResponse resp = outpost_v1_RestartJobResponse_init_zero;
  resp.already_running = already;
  auto v = jobs->Inspect(id);
  std::string status = v.ok() ? v->status : "";
  resp.status = PbStr(status);
  r.Finish(PbEncode(outpost_v1_RestartJobResponse_fields, &resp, "RestartJobResponse"));
}

using Handler = void (*)(const JobApi&, const wire::CallContext&, std::string_view, wire::Responder);

}  // namespace

void RegisterJobApi(Loop* loop, job::JobManager* jobs, task::TaskManager* tm, const cgroup::Cgroups* cgroups,
                    const devices::DevicePlugins* devices, task::EventLog* events, wire::RpcServer* server) {
  static const struct {
    const char* method;
    Handler fn;
  } kMethods[] = {
      {"SubmitJob", SubmitJob}, {"ListJobs", ListJobs},   {"InspectJob", InspectJob},
      {"StopJob", StopJob},     {"RemoveJob", RemoveJob}, {"RestartJob", RestartJob},
  };
  const JobApi api{loop, jobs, tm, events, cgroups, devices};
  for (const auto& m : kMethods) {
    Handler fn = m.fn;
    server->Register(kAgentService, m.method,
                     [api, fn](const wire::CallContext& ctx, std::string_view payload, wire::Responder r) {
                       fn(api, ctx, payload, std::move(r));
                     });
  }
}

}  // namespace outpost::agent
