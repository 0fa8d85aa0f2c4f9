// JobManager: recovery after an agent restart or a reboot, and the jobs.d
// directory (job/jobs_dir) as a source of jobs.
#include "base/log.h"
#include "base/strings.h"
#include "job/manager.h"
#include "job/manager_internal.h"

namespace outpost::job {

void JobManager::Recover() {
  std::vector<StoredJob> loaded = store_.LoadAll(&store_problems_);
  for (const std::string& p : store_problems_) log::Error("cannot load a stored job", {{"error", p}});
  for (StoredJob& s : loaded) {
    auto job = std::make_unique<Job>();
    job->stored = std::make_shared<StoredJob>(std::move(s));
    std::string id = job->stored->spec.id;
    MakeSupervisors(job.get());
    // After a reboot nothing of before counts: the job starts afresh in
    // lifecycle order, with no task failed and no restart counted. After an
    // agent restart or upgrade each task goes on where it was: a running
    // instance is adopted, an ended one is told to its restart policy (with
    // the restarts counted so far), and one that had failed for good stays
    // failed (docs/supervision.md).
    if (options_.first_since_boot) job->stored->failed.clear();
    std::vector<Result<TaskStore::Instance>> found;
    bool any_running = false;
    for (const auto& t : job->tasks) {
      found.push_back(tasks_->Lookup(t->task_id()));
      if (found.back().ok() && found.back()->running) any_running = true;
    }
    if (any_running || !options_.first_since_boot) {
      for (size_t i = 0; i < job->tasks.size(); i++) {
        auto& t = job->tasks[i];
        if (!found[i].ok()) continue;
        if (IsMain(*t)) job->main_started = true;
        if (IsPoststart(*t)) job->post_started = true;
        if (found[i]->restarts && !options_.first_since_boot) t->RestoreHistory(*found[i]->restarts);
        auto failed = job->stored->failed.find(t->spec().name);
        if (!found[i]->running && failed != job->stored->failed.end()) {
          t->RestoreFailed(failed->second, found[i]->exit);
        } else if (found[i]->running) {
          t->Adopt();
          if (found[i]->spec_hash != TaskFingerprint(t->spec())) {
            t->Replace(job->TaskSpecAt(i));
          }
        } else if (job->stored->running) {
          t->AdoptExited(found[i]->exit);
        }
      }
    }
    if (!job->stored->file.empty()) file_jobs_[job->stored->file] = id;
    if (job->stored->running && job->stored->spec.resources.Any()) {
      Status js = runner_->ApplyJobResources(id, job->stored->spec.resources);
      if (!js.ok()) log::Warn("job limits not applied", {{"job", id}, {"error", js.error().message()}});
    }
    jobs_[id] = std::move(job);
    ScheduleEvaluate(id);
  }
  // Task records are not written for power cuts (docs/process-model.md):
  // one removed with its job just before a cut may be back. Its job, whose
  // record is, is gone for good, so the task goes too.
  for (const auto& [task_id, job_id] : tasks_->EndedJobTasks()) {
    if (jobs_.count(job_id)) continue;
    log::Info("removing a task of a removed job", {{"task", task_id}, {"job", job_id}});
    tasks_->Purge(task_id, [task_id = task_id](Status st) {
      log::WarnIfError(st, "cannot remove a task of a removed job", {{"task", task_id}});
    });
  }
  log::Info("jobs recovered", {{"count", std::to_string(jobs_.size())}});
  recovered_ = true;
  if (options_.jobs_dir.empty()) return;
  JobsDir::Options o;
  o.dir = options_.jobs_dir;
  o.max_file_bytes = kMaxSpecBytes;
  JobsDir::Callbacks cb;
  cb.changed = [this](const std::string& path, const std::string& content) { OnFileChanged(path, content); };
  cb.removed = [this](const std::string& path) { OnFileRemoved(path); };
  cb.error = [](const std::string&, const std::string&) {};  // logged and kept by JobsDir
  auto d = JobsDir::Create(loop_, o, cb);
  if (!d.ok()) {
    log::Error("cannot watch the jobs directory", {{"dir", o.dir}, {"error", d.error().message()}});
    return;
  }
  dir_ = std::move(*d);
  RescanDir();
}

void JobManager::OnDriverReady(const std::string& driver) {
  std::vector<std::shared_ptr<TaskSupervisor>> ready;
  std::vector<std::string> removals;
  for (const auto& [id, j] : jobs_) {
    for (const auto& t : j->tasks) {
      if (t->waiting_for() == driver) ready.push_back(t);
    }
    for (const auto& t : j->retiring) {
      if (t->waiting_for() == driver) ready.push_back(t);
    }
    if (!j->removal_waits.empty() && j->removal_waits_for == driver) removals.push_back(id);
  }
  for (const auto& t : ready) t->DriverReady();
  RetryRemovals(removals);
}

void JobManager::OnDriverGone(const std::string& driver) {
  std::vector<std::string> removals;
  for (const auto& [id, j] : jobs_) {
    if (!j->removal_waits.empty() && j->removal_waits_for == driver) removals.push_back(id);
  }
  RetryRemovals(removals);
}

void JobManager::RetryRemovals(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second->removal_waits.empty()) continue;
    it->second->removal_waits.clear();
    it->second->removal_waits_for.clear();
    FinishRemove(id);
  }
}

void JobManager::RescanDir() {
  if (!dir_) return;
  std::set<std::string> known;
  for (const auto& [path, id] : file_jobs_) known.insert(path);
  dir_->Rescan(known);
}

void JobManager::OnFileChanged(const std::string& path, const std::string& content) {
  auto spec = ParseJobSpec(content, path);
  if (!spec.ok()) {
    file_problems_[path] = spec.error().message();
    for (const std::string& line : Split(spec.error().message(), '\n')) log::Error(line);
    log::Error("invalid job file ignored; the running version (if any) keeps running", {{"file", path}});
    return;
  }
  // The file now names another job: the old one goes.
  auto prev = file_jobs_.find(path);
  if (prev != file_jobs_.end() && prev->second != spec->id) {
    std::string old = prev->second;
    file_jobs_.erase(prev);
    auto jt = jobs_.find(old);
    if (jt != jobs_.end() && jt->second->stored->file == path) Remove(old, nullptr);
  }
  auto r = Apply(std::move(*spec), Source::kFile, path);
  if (!r.ok()) {
    file_problems_[path] = path + ": " + r.error().message();
    log::Error("job file not applied", {{"file", path}, {"error", r.error().message()}});
    return;
  }
  file_problems_.erase(path);
  file_jobs_[path] = r->job.id;
}

void JobManager::OnFileRemoved(const std::string& path) {
  file_problems_.erase(path);
  auto it = file_jobs_.find(path);
  if (it == file_jobs_.end()) return;
  std::string id = it->second;
  file_jobs_.erase(it);
  // Not at once: a rename (a.json -> b.json) reports the removal first and
  // the new name a moment later; then b.json takes the job over.
  std::weak_ptr<bool> alive = alive_;
  loop_->AddTimer(kFileMoveGraceNanos, [this, alive, id, path] {
    if (!alive.lock()) return;
    auto jt = jobs_.find(id);
    if (jt == jobs_.end() || jt->second->stored->file != path || file_jobs_.count(path)) return;
    log::Info("job file removed: removing its job", {{"file", path}, {"job", id}});
    Remove(id, nullptr);
  });
}

std::map<std::string, std::string> JobManager::FileProblems() const {
  std::map<std::string, std::string> out = file_problems_;
  if (dir_) {
    for (const auto& [path, error] : dir_->problems()) out[path] = error;
  }
  return out;
}

std::string JobManager::DirProblem() const { return dir_ ? dir_->dir_problem() : std::string(); }

}  // namespace outpost::job
