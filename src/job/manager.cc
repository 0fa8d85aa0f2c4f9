#include "job/manager.h"

#include <algorithm>

#include "job/diff.h"
#include "job/manager_internal.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"

namespace outpost::job {

Error JobNotFound(const std::string& id) {
  return Error(Code::kNotFound, "job \"" + id + "\" not found (`outpost ps` lists the jobs)");
}

std::string JoinNames(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

JobManager::JobManager(Loop* loop, TaskRunner* runner, TaskStore* tasks, Options options)
    : loop_(loop),
      runner_(runner),
      tasks_(tasks),
      options_(std::move(options)),
      store_(options_.state_dir),
      unsaved_(loop, sys::Durability::kPowerCut) {}

JobManager::~JobManager() {
  *alive_ = false;
  dir_.reset();
}

Result<std::unique_ptr<JobManager>> JobManager::Create(Loop* loop, TaskRunner* runner, TaskStore* tasks,
                                                       Options options) {
  std::unique_ptr<JobManager> m(new JobManager(loop, runner, tasks, std::move(options)));
  OUTPOST_RETURN_IF_ERROR(m->store_.Init());
  return m;
}

std::shared_ptr<TaskSupervisor> JobManager::MakeSupervisor(Job* job, size_t i) {
  std::string id = job->stored->spec.id;
  std::weak_ptr<bool> alive = alive_;
  return std::make_shared<TaskSupervisor>(loop_, runner_, options_.events, id, job->TaskSpecAt(i),
                                          job->stored->spec.min_healthy_time_nanos, [this, alive, id] {
                                            if (alive.lock()) ScheduleEvaluate(id);
                                          });
}

void JobManager::MakeSupervisors(Job* job) {
  job->tasks.clear();
  for (size_t i = 0; i < job->stored->spec.tasks.size(); i++) job->tasks.push_back(MakeSupervisor(job, i));
}

void JobManager::ScheduleEvaluate(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->eval_scheduled) return;
  it->second->eval_scheduled = true;
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive, id] {
    if (alive.lock()) Evaluate(id);
  });
}

void JobManager::Evaluate(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& j = *it->second;
  j.eval_scheduled = false;
  SyncFailed(id, &j);
  const bool pending = !PendingOf(j).empty();
  if (pending && j.pending_since == 0) j.pending_since = MonotonicNanos();
  if (!pending) j.pending_since = 0;

  // Tasks dropped by an update: stop, then purge their instance and data.
  for (auto r = j.retiring.begin(); r != j.retiring.end();) {
    auto t = *r;
    if (t->state() != RunState::kDead) {
      t->Stop(-1);
      ++r;
      continue;
    }
    std::string tid = t->task_id();
    r = j.retiring.erase(r);
    tasks_->Purge(tid, [tid](Status st) {
      if (!st.ok()) log::Warn("cannot remove a task dropped from its job", {{"task", tid}, {"error", st.error().message()}});
    });
  }

  if (j.Wanted()) {
    // Any start may attach the job's network (the task start pipeline asks
    // for it); stopping releases it. A job recovered with its network is
    // attached too.
    if (j.stored->spec.network.Isolated()) j.network_attached = true;
    // Lifecycle: prestart tasks first; main tasks once every prestart task
    // has completed (sidecars: is running); poststart once the mains run.
    bool pre_done = true;
    for (const auto& t : j.tasks) {
      if (!IsPrestart(*t)) continue;
      t->Go();
      if (t->spec().lifecycle.sidecar ? t->state() != RunState::kRunning : !t->completed()) pre_done = false;
    }
    if (pre_done) j.main_started = true;
    if (j.main_started) {
      bool mains_up = true;
      for (const auto& t : j.tasks) {
        if (!IsMain(*t)) continue;
        t->Go();
        if (!(t->state() == RunState::kRunning || t->completed())) mains_up = false;
        // A main task with checks is up once they pass.
        if (t->state() == RunState::kRunning && !t->spec().checks.empty() && !t->healthy()) mains_up = false;
      }
      if (mains_up) j.post_started = true;
    }
    if (j.post_started) {
      for (const auto& t : j.tasks) {
        if (IsPoststart(*t)) t->Go();
      }
    }
    return;
  }

  // Stopping: main and poststart tasks first, prestart (sidecars) last.
  bool others_dead = true;
  for (const auto& t : j.tasks) {
    if (IsPrestart(*t)) continue;
    t->Stop(j.stop_timeout);
    if (t->state() != RunState::kDead) others_dead = false;
  }
  if (others_dead) {
    for (const auto& t : j.tasks) {
      if (IsPrestart(*t)) t->Stop(j.stop_timeout);
    }
  }
  if (!j.AllDead()) return;
  if (!j.restarting && options_.pod_ended) options_.pod_ended(id);
  // The job's network goes once its last task has stopped (not for a
  // whole-job restart): CNI DEL, then the namespace.
  if (!j.restarting && j.network_attached && options_.release_network) {
    if (j.releasing_network) return;
    j.releasing_network = true;
    std::weak_ptr<bool> alive = alive_;
    options_.release_network(id, [this, alive, id](Status st) {
      if (!alive.lock()) return;
      auto jt = jobs_.find(id);
      if (jt == jobs_.end()) return;
      jt->second->releasing_network = false;
      jt->second->network_attached = false;
      if (!st.ok()) JobEvent(id, "network", "network not removed: " + st.error().message());
      ScheduleEvaluate(id);
    });
    return;
  }
  auto waiters = std::move(j.stop_waiters);
  j.stop_waiters.clear();
  for (auto& w : waiters) w(OkStatus());
  if (j.removing) {
    FinishRemove(id);
    return;
  }
  if (j.restarting) {
    j.restarting = false;
    MakeSupervisors(&j);
    j.main_started = j.post_started = false;
    ScheduleEvaluate(id);
  }
}

void JobManager::FinishRemove(const std::string& id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job& j = *it->second;
  if (!j.purging.empty()) return;
  std::vector<std::string> ids;
  for (const auto& t : j.tasks) ids.push_back(t->task_id());
  if (ids.empty()) ids.push_back("");
  for (const std::string& tid : ids) j.purging.insert(tid);
  std::weak_ptr<bool> alive = alive_;
  for (const std::string& tid : ids) {
    auto done = [this, alive, id, tid](Status st) {
      if (!alive.lock()) return;
      auto jt = jobs_.find(id);
      if (!st.ok() && st.error().code() == Code::kUnavailable && jt != jobs_.end()) {
        // Its driver is away: the instance (a container, its state) is not
        // gone until the driver says so. The job stays, removing, and the
        // removal is made again when the driver is back or given up on.
        Job& job = *jt->second;
        std::string why = "removal waits for the driver of task " + tid + ": " + st.error().message();
        if (job.removal_waits.empty()) JobEvent(id, "waiting", why);
        job.removal_waits = why;
        for (const auto& t : job.tasks) {
          if (t->task_id() == tid) job.removal_waits_for = t->spec().driver;
        }
        if (job.pending_since == 0) job.pending_since = MonotonicNanos();
        if (!job.removal_retry) {
          job.removal_retry = loop_->AddTimer(kStopRetryNanos, [this, alive, id] {
            if (!alive.lock()) return;
            auto jt2 = jobs_.find(id);
            if (jt2 == jobs_.end()) return;
            jt2->second->removal_retry = 0;
            RetryRemovals({id});
          });
        }
      } else if (!st.ok() && st.error().code() != Code::kNotFound) {
        log::Warn("cannot remove a task of a removed job", {{"task", tid}, {"error", st.error().message()}});
      }
      if (jt == jobs_.end()) return;
      jt->second->purging.erase(tid);
      if (!jt->second->purging.empty() || !jt->second->removal_waits.empty()) return;
      unsaved_.Forget(store_.PathOf(id));
      Status rm = store_.Remove(id);
      auto waiters = std::move(jt->second->remove_waiters);
      if (!jt->second->stored->file.empty()) file_jobs_.erase(jt->second->stored->file);
      jobs_.erase(jt);
      JobEvent(id, "job-removed", "job removed");
      for (auto& w : waiters) w(rm);
    };
    if (tid.empty()) {
      loop_->Defer([done] { done(OkStatus()); });
    } else {
      tasks_->Purge(tid, done);
    }
  }
}

Status JobManager::Persist(const std::string& id, const StoredJob& next, std::string* note,
                           sys::Durability durability) {
  bool kept = false;
  Status st = unsaved_.Write(store_.PathOf(id), JobStore::Encode(next), &kept, durability);
  if (!st.ok()) return st.error().Wrap("save job \"" + id + "\"");
  if (kept) *note = " (saved in memory only: no space left on device; will be written when space returns)";
  return st;
}

void JobManager::JobEvent(const std::string& job, const std::string& type, const std::string& message) {
  driver::TaskEvent ev;
  ev.job = job;
  ev.timestamp_unix_nanos = WallNanos();
  ev.type = type;
  ev.message = message;
  log::Info(type, {{"job", job}, {"message", message}});
  options_.events->Publish(ev);
}

Result<SubmitResult> JobManager::Submit(const std::string& text) {
  auto spec = ParseJobSpec(text);
  if (!spec.ok()) return spec.error();
  return Apply(std::move(*spec), Source::kApi, "");
}

Status JobManager::CheckNode(const JobSpec& spec) const {
  std::vector<std::string> errors;
  auto check = [&](const cgroup::Resources& r, const std::string& path) {
    if (!r.Any() || !options_.check_resources) return;
    for (const std::string& p : options_.check_resources(r)) errors.push_back(path + ": " + p);
  };
  check(spec.resources, "resources");
  if (spec.network.Isolated() && options_.check_network) {
    Status st = options_.check_network(spec.network);
    if (!st.ok()) {
      for (const std::string& line : Split(st.error().message(), '\n')) errors.push_back(line);
    }
  }
  for (size_t i = 0; i < spec.tasks.size(); i++) {
    if (options_.check_driver) {
      Status st = options_.check_driver(spec.tasks[i].driver, spec.tasks[i].driver_config);
      if (!st.ok()) {
        for (const std::string& line : Split(st.error().message(), '\n')) {
          errors.push_back(Format("tasks[%zu].", i) + line);
        }
      }
    }
    check(spec.tasks[i].resources, Format("tasks[%zu].resources", i));
  }
  if (errors.empty()) return OkStatus();
  std::string all;
  for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
  return Error(Code::kInvalidArgument, all);
}

Result<SubmitResult> JobManager::Apply(JobSpec spec, Source source, const std::string& file) {
  SubmitResult result;
  // A job from jobs.d has its desired state on disk already: the file, read
  // again at every start. Its record only has to survive a worker crash, so
  // it is not fsync'd (which made every job file dropped in cost two fsyncs
  // before its tasks could start). A job through the API is on disk before
  // the call returns.
  const sys::Durability durability =
      source == Source::kFile ? sys::Durability::kProcessCrash : sys::Durability::kPowerCut;
  OUTPOST_RETURN_IF_ERROR(CheckNode(spec));
  for (const TaskSpec& t : spec.tasks) {
    std::string problem = runner_->DriverProblem(t.driver);
    if (!problem.empty()) result.waiting.push_back("task " + t.name + " waits: " + problem);
  }
  auto it = jobs_.find(spec.id);
  if (it == jobs_.end()) {
    if (jobs_.size() >= options_.max_jobs) {
      return Error(Code::kResourceExhausted,
                   Format("cannot add job \"%s\": the node already runs %zu jobs, the limit (config key max_jobs)",
                          spec.id.c_str(), jobs_.size()));
    }
    auto job = std::make_unique<Job>();
    job->stored->spec = std::move(spec);
    job->stored->source = source;
    job->stored->file = file;
    job->stored->submitted_unix_nanos = WallNanos();
    std::string note;
    if (source == Source::kFile) {
      OUTPOST_RETURN_IF_ERROR(Persist(job->stored->spec.id, *job->stored, &note, durability));
    } else {
      Status st = store_.Save(*job->stored);
      if (!st.ok()) return st.error().Wrap("save job \"" + job->stored->spec.id + "\"");
    }
    MakeSupervisors(job.get());
    std::string id = job->stored->spec.id;
    jobs_[id] = std::move(job);
    if (!file.empty()) file_jobs_[file] = id;
    size_t n = jobs_[id]->tasks.size();
    if (jobs_[id]->stored->spec.resources.Any()) {
      Status js = runner_->ApplyJobResources(id, jobs_[id]->stored->spec.resources);
      if (!js.ok()) log::Warn("job limits not applied", {{"job", id}, {"error", js.error().message()}});
    }
    JobEvent(id, "job-submitted",
             Format("job submitted (%zu task%s, source %s)", n, n == 1 ? "" : "s", SourceName(source)) + note);
    ScheduleEvaluate(id);
    result.created = true;
    for (const TaskSpec& s : jobs_[id]->stored->spec.tasks) result.added.push_back(s.name);
    result.job = ViewOf(*jobs_[id]);
    return result;
  }

  Job& j = *it->second;
  const std::string id = spec.id;  // a copy: spec is moved below
  if (j.removing) {
    return Error(Code::kFailedPrecondition, "job \"" + id + "\" is being removed; submit it again once it is gone");
  }
  if (j.stored->source == Source::kFile && source == Source::kApi) {
    return Error(Code::kFailedPrecondition,
                 "job \"" + id + "\" is managed by the file " + j.stored->file + "; edit that file instead");
  }
  if (j.stored->source == Source::kApi && source == Source::kFile) {
    return Error(Code::kAlreadyExists, "job \"" + id +
                                           "\" already exists (submitted through the API); remove it with "
                                           "`outpost rm " + id + "` or use another id in this file");
  }
  // A job file renamed (or its job moved to another file): the old file is
  // gone, so the new one takes the job over as an update.
  bool moved = source == Source::kFile && j.stored->file != file;
  if (moved && file_jobs_.count(j.stored->file)) {
    return Error(Code::kAlreadyExists, "job \"" + id + "\" is already defined by the file " + j.stored->file);
  }

  SpecDiff diff = DiffSpecs(j.stored->spec, spec);
  result.job_limits = diff.job_limits;
  result.added = diff.added;
  result.restarted = diff.restarted;
  result.updated = diff.updated;
  result.removed = diff.removed;
  bool spec_changed = diff.changed;
  std::set<std::string> new_names;
  for (const TaskSpec& s : spec.tasks) new_names.insert(s.name);
  bool was_stopped = !j.stored->running || j.restarting;
  // The same spec again: nothing to do. A job the operator stopped stays
  // stopped (`outpost start` starts it); a jobs.d file's is started again.
  bool left_stopped = !j.stored->running && !j.restarting && source == Source::kApi;
  if (!spec_changed && !moved && (!was_stopped || left_stopped)) {
    result.unchanged = true;
    result.job = ViewOf(j);
    return result;
  }

  StoredJob next = *j.stored;
  next.spec = std::move(spec);
  next.running = true;
  if (moved) next.file = file;
  if (spec_changed) next.version++;
  next.submitted_unix_nanos = WallNanos();
  std::string note;
  OUTPOST_RETURN_IF_ERROR(Persist(id, next, &note, durability));

  if (was_stopped) {
    // A stopped job starts afresh with the new spec (in lifecycle order)
    // once everything of the old run has stopped.
    j.stored = std::make_shared<StoredJob>(std::move(next));
    for (const auto& t : j.tasks) {
      if (!new_names.count(t->spec().name)) j.retiring.push_back(t);
    }
    j.restarting = true;
    result.restarted.clear();
  } else {
    std::map<std::string, std::shared_ptr<TaskSupervisor>> by_name;
    for (const auto& t : j.tasks) by_name[t->spec().name] = t;
    j.stored = std::make_shared<StoredJob>(std::move(next));
    std::vector<std::shared_ptr<TaskSupervisor>> tasks;
    for (size_t i = 0; i < j.stored->spec.tasks.size(); i++) {
      const std::string& name = j.stored->spec.tasks[i].name;
      auto b = by_name.find(name);
      if (b == by_name.end()) {
        tasks.push_back(MakeSupervisor(&j, i));
        continue;
      }
      b->second->SetMinHealthy(j.stored->spec.min_healthy_time_nanos);
      if (diff.Restarts(name)) {
        b->second->Replace(j.TaskSpecAt(i));
      } else if (diff.Updates(name)) {
        (void)b->second->UpdateLimits(j.TaskSpecAt(i));  // the outcome is an event
      } else {
        b->second->Rebind(j.TaskSpecAt(i));
      }
      tasks.push_back(b->second);
      by_name.erase(b);
    }
    for (auto& [name, t] : by_name) j.retiring.push_back(t);
    j.tasks = std::move(tasks);
  }
  std::string what;
  if (!result.restarted.empty()) what += "; restarting: " + JoinNames(result.restarted);
  if (!result.added.empty()) what += "; added: " + JoinNames(result.added);
  if (!result.removed.empty()) what += "; removed: " + JoinNames(result.removed);
  if (!result.updated.empty()) what += "; limits updated live: " + JoinNames(result.updated);
  if (result.job_limits && j.Wanted()) {
    Status js = runner_->ApplyJobResources(id, j.stored->spec.resources);
    std::string unenforced = js.ok() ? runner_->LimitsNotEnforced(id, "", j.stored->spec.resources) : "";
    if (!js.ok()) what += "; job limits not applied: " + js.error().message();
    if (!unenforced.empty()) what += "; job limits: " + unenforced;
  }
  std::string head = spec_changed ? Format("job updated to version %lld", static_cast<long long>(j.stored->version))
                                  : std::string(was_stopped ? "job started again" : "job unchanged");
  if (moved) head += "; now defined by the file " + file;
  if (spec_changed && was_stopped) head += "; starting";
  JobEvent(id, "job-updated", head + what + note);
  ScheduleEvaluate(id);
  result.job = ViewOf(j);
  return result;
}

void JobManager::Stop(const std::string& id, int64_t timeout_nanos, DoneCallback done) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return done(JobNotFound(id));
  Job& j = *it->second;
  if (j.stored->running) {
    StoredJob next = *j.stored;
    next.running = false;
    std::string note;
    Status st = Persist(id, next, &note);
    if (!st.ok()) return done(st);
    j.stored->running = false;
    JobEvent(id, "job-stopping", "job stop requested" + note);
  }
  j.restarting = false;
  j.stop_timeout = timeout_nanos;
  j.stop_waiters.push_back(std::move(done));
  ScheduleEvaluate(id);
}

void JobManager::Remove(const std::string& id, DoneCallback done) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return done(JobNotFound(id));
  Job& j = *it->second;
  if (j.stored->source == Source::kFile && done) {
    return done(Error(Code::kFailedPrecondition, "job \"" + id + "\" is managed by the file " + j.stored->file +
                                                    "; remove that file to remove the job"));
  }
  if (j.stored->running) {
    // If the agent dies mid-way, the job comes back stopped, not running.
    StoredJob next = *j.stored;
    next.running = false;
    std::string note;
    Status st = Persist(id, next, &note);
    if (!st.ok() && done) return done(st);
    j.stored->running = false;
    if (!note.empty()) JobEvent(id, "job-removing", "job removal requested" + note);
  }
  j.removing = true;
  j.restarting = false;
  if (done) j.remove_waiters.push_back(std::move(done));
  ScheduleEvaluate(id);
}

Status JobManager::Restart(const std::string& id, const std::string& task) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return JobNotFound(id);
  Job& j = *it->second;
  if (j.removing) return Error(Code::kFailedPrecondition, "job \"" + id + "\" is being removed");
  if (!task.empty()) {
    for (const auto& t : j.tasks) {
      if (t->spec().name != task) continue;
      if (!j.Wanted()) {
        return Error(Code::kFailedPrecondition,
                     "job \"" + id + "\" is stopped; restart the whole job with `outpost restart " + id + "`");
      }
      t->Restart("restart requested");
      return OkStatus();
    }
    auto name = TaskId(id, task);
    return name.error();
  }
  std::string note;
  if (!j.stored->running) {
    StoredJob next = *j.stored;
    next.running = true;
    OUTPOST_RETURN_IF_ERROR(Persist(id, next, &note));
    j.stored->running = true;
  }
  JobEvent(id, "job-restarting", "job restart requested" + note);
  j.restarting = true;
  ScheduleEvaluate(id);
  return OkStatus();
}

Status JobManager::Start(const std::string& id, bool* already) {
  *already = false;
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return JobNotFound(id);
  if (it->second->removing) return Error(Code::kFailedPrecondition, "job \"" + id + "\" is being removed");
  if (it->second->stored->running) {
    *already = true;
    return OkStatus();
  }
  return Restart(id, "");
}

void JobManager::SyncFailed(const std::string& id, Job* j) {
  std::map<std::string, std::string> now;
  for (const auto& t : j->tasks) {
    if (t->failed()) now[t->spec().name] = t->reason();
  }
  if (now == j->stored->failed) return;
  // Written like the desired state it qualifies: a failed task stays failed
  // across agent restarts and upgrades until the job is restarted or its
  // spec changes.
  std::swap(j->stored->failed, now);
  std::string note;
  const bool file = j->stored->source == Source::kFile;
  Status st = Persist(id, *j->stored, &note, file ? sys::Durability::kProcessCrash : sys::Durability::kPowerCut);
  if (!st.ok()) {
    std::swap(j->stored->failed, now);
    log::Warn("cannot record which tasks failed", {{"job", id}, {"error", st.error().message()}});
  }
}

}  // namespace outpost::job
