// The NRI steps of the task pipelines (docs/nri.md): a task instance is an
// NRI container, its job the pod. Start: CreateContainer (adjustments
// merged by the adaptation and applied to the config before the cgroup is
// created and the hooks run; a required plugin that is absent makes the
// start wait), then PostCreateContainer and StartContainer once the driver
// started it, PostStartContainer after its poststart hooks. Exit:
// StopContainer, once per instance whether it was stopped or ended by
// itself. Gone (destroyed, or an ended instance making way for the next):
// RemoveContainer. Live limit changes: UpdateContainer, PostUpdateContainer.
// Notifications never hold a task up: they are queued in order and the
// pipeline moves on.
#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "cgroup/cgroup.h"
#include "nri/adaptation.h"
#include "nri/convert.h"
#include "task/entry.h"

namespace outpost::task {

nri::PodSandbox TaskManager::NriPod(const driver::TaskConfig& c) const {
  nri::PodSandbox pod;
  pod.id = c.job.empty() ? c.id : c.job;
  pod.name = pod.id;
  pod.uid = pod.id;
  if (!c.Netns().empty()) pod.namespaces.push_back({"network", c.Netns()});
  if (options_.cgroups && options_.cgroups->available() && !c.job.empty()) {
    pod.cgroup_parent = options_.cgroups->JobPath(c.job);
  }
  if (options_.nri_pod && !c.job.empty()) options_.nri_pod(c.job, &pod);
  return pod;
}

bool TaskManager::NriActive() const { return options_.nri && options_.nri->active(); }

namespace {

// A task as NRI container in state s, as CreateContainer left it: its
// config holds the adjustments (annotations included), created_at is when
// CreateContainer was sent (a task recovered after an agent restart: its
// start).
nri::Container ContainerOf(const driver::TaskConfig& c, int64_t created_at, nri::ContainerState s) {
  nri::Container ctr = nri::ToContainer(c, s);
  ctr.created_at = created_at;
  return ctr;
}

int64_t CreatedAt(const TaskRecord& r, int64_t nri_created_at) {
  return nri_created_at ? nri_created_at : r.handle.started_at_unix_nanos;
}

}  // namespace

void TaskManager::NriCreate(StartOp* op, DoneCallback done) {
  if (!NriActive()) return done(OkStatus());
  nri::Adaptation* a = options_.nri;
  std::string missing = a->MissingRequired();
  if (!missing.empty()) return NriWait(op, std::move(done), missing);
  driver::TaskConfig& c = op->config;
  if (options_.cgroups && options_.cgroups->available()) c.cgroup = options_.cgroups->TaskPath(c.job, c.id);
  op->nri_created_at = WallNanos();
  nri::Container ctr = ContainerOf(c, op->nri_created_at, nri::ContainerState::kUnknown);
  nri::PodSandbox pod = NriPod(c);
  // (A bare task's pod is only its request's context: no pod events.)
  bool run_pod = false;
  auto known = nri_pods_.find(pod.id);
  if (!c.job.empty() && (known == nri_pods_.end() || !known->second)) {
    // A stopped pod starting again is a new sandbox: the old one goes.
    if (known != nri_pods_.end()) a->Notify(nri::Event::kRemovePodSandbox, pod, std::nullopt);
    nri_pods_[pod.id] = true;
    // A job with a task running already (recovered after an agent restart:
    // the plugins learnt of it in Synchronize) is no new pod.
    bool running = false;
    for (const auto& [tid, t] : tasks_) {
      running = running || (t->config().job == c.job && !c.job.empty() && !t->starting && !t->record.exited);
    }
    run_pod = !running;
  }
  std::weak_ptr<bool> alive = alive_;
  a->CreateContainer(
      pod, ctr,
      [this, alive, op, done](Result<nri::CreateOutcome> r) {
        if (!alive.lock()) return;
        driver::TaskConfig& cfg = op->config;
        if (!r.ok()) return done(r.error().Wrap("NRI"));
        std::string report;
        for (const nri::PluginOutcome& p : r->plugins) {
          report += (report.empty() ? "" : "; ") + p.plugin + ": " + p.result;
        }
        if (!r->wait_for.empty()) {
          if (r->undo) {
            // Plugins that got CreateContainer are told it is gone.
            nri::PodSandbox of = NriPod(cfg);
            nri::Container gone = ContainerOf(cfg, op->nri_created_at, nri::ContainerState::kStopped);
            options_.nri->Notify(nri::Event::kStopContainer, of, gone);
            options_.nri->Notify(nri::Event::kRemoveContainer, of, gone);
          }
          return NriWait(op, done, r->wait_for + (report.empty() ? "" : " (" + report + ")"));
        }
        op->nri_created = true;
        if (Task* t = Find(cfg.id)) {
          t->nri_report = report;
          t->nri_created_at = op->nri_created_at;
        }
        if (!report.empty()) Emit(cfg, "nri", report);
        if (!r->adjust) return done(OkStatus());
        driver::Capabilities caps = op->driver->GetCapabilities();
        Status st = nri::ApplyAdjustment(*r->adjust, r->claims, caps, &cfg);
        if (!st.ok()) return done(st.error().Wrap("NRI"));
        if (Task* t = Find(cfg.id)) {
          t->record.handle.config = cfg;
          DropDerivedPaths(t);  // kept empty in memory, as Prepare left them
        }
        done(OkStatus());
      },
      run_pod);
}

void TaskManager::NriWait(StartOp* op, DoneCallback done, const std::string& why) {
  Emit(op->config, "waiting", "waiting for required NRI plugin(s): " + why);
  const std::string id = op->config.id;
  std::weak_ptr<bool> alive = alive_;
  uint64_t wait = options_.nri->WaitForRequired([this, alive, op, done, id] {
    if (!alive.lock()) return;
    nri_waits_.erase(id);
    NriCreate(op, done);
  });
  nri_waits_[id] = {wait, std::move(done)};
}

bool TaskManager::AbandonNriWait(const std::string& id) {
  auto it = nri_waits_.find(id);
  if (it == nri_waits_.end()) return false;
  options_.nri->CancelWait(it->second.first);
  DoneCallback done = std::move(it->second.second);
  nri_waits_.erase(it);
  done(Error(Code::kAborted, "stopped while waiting for required NRI plugin(s): " + options_.nri->MissingRequired()));
  return true;
}

void TaskManager::UndoNriCreate(StartOp* op) {
  if (!op->nri_created || !options_.nri) return;
  // As containerd undoes a failed creation: stopped, then removed.
  nri::PodSandbox pod = NriPod(op->config);
  nri::Container ctr = ContainerOf(op->config, op->nri_created_at, nri::ContainerState::kStopped);
  options_.nri->Notify(nri::Event::kStopContainer, pod, ctr);
  options_.nri->Notify(nri::Event::kRemoveContainer, pod, ctr);
  if (Task* t = Find(op->config.id)) t->nri_stopped = true;
}

void TaskManager::NriStarted(StartOp* op, DoneCallback done) {
  nri::Adaptation* a = options_.nri;
  if (op->nri_created && (a->Wants(nri::Event::kPostCreateContainer) || a->Wants(nri::Event::kStartContainer))) {
    nri::PodSandbox pod = NriPod(op->config);
    nri::Container ctr = ContainerOf(op->config, op->nri_created_at, nri::ContainerState::kCreated);
    ctr.pid = static_cast<uint32_t>(op->handle.pid);
    a->Notify(nri::Event::kPostCreateContainer, pod, ctr);
    ctr.state = nri::ContainerState::kRunning;
    ctr.started_at = op->handle.started_at_unix_nanos ? op->handle.started_at_unix_nanos : WallNanos();
    a->Notify(nri::Event::kStartContainer, pod, ctr);
  }
  done(OkStatus());
}

void TaskManager::NriPostStart(StartOp* op, DoneCallback done) {
  if (op->nri_created && options_.nri->Wants(nri::Event::kPostStartContainer)) {
    nri::Container ctr = ContainerOf(op->config, op->nri_created_at, nri::ContainerState::kRunning);
    ctr.pid = static_cast<uint32_t>(op->handle.pid);
    ctr.started_at = op->handle.started_at_unix_nanos ? op->handle.started_at_unix_nanos : WallNanos();
    options_.nri->Notify(nri::Event::kPostStartContainer, NriPod(op->config), ctr);
  }
  done(OkStatus());
}

void TaskManager::NriStopped(Task* t) {
  if (!options_.nri || t->nri_stopped) return;
  t->nri_stopped = true;
  if (!options_.nri->active()) return;
  nri::Container ctr =
      ContainerOf(t->config(), CreatedAt(t->record, t->nri_created_at), nri::ContainerState::kStopped);
  ctr.pid = static_cast<uint32_t>(t->record.handle.pid);
  ctr.started_at = t->record.handle.started_at_unix_nanos;
  ctr.finished_at = t->record.completed_at_unix_nanos;
  ctr.exit_code = t->record.exit.exit_code;
  if (t->record.exit.oom_killed) ctr.status_reason = "OOMKilled";
  ctr.status_message = driver::DescribeExit(t->record.exit);
  options_.nri->Notify(nri::Event::kStopContainer, NriPod(t->config()), ctr);
}

void TaskManager::NriRemoved(Task* t) {
  if (!options_.nri || !options_.nri->active() || t->starting) return;
  NriStopped(t);  // a removal implies a stop (upstream's guard)
  nri::Container ctr =
      ContainerOf(t->config(), CreatedAt(t->record, t->nri_created_at), nri::ContainerState::kStopped);
  ctr.started_at = t->record.handle.started_at_unix_nanos;
  ctr.finished_at = t->record.completed_at_unix_nanos;
  ctr.exit_code = t->record.exit.exit_code;
  nri::PodSandbox pod = NriPod(t->config());
  options_.nri->Notify(nri::Event::kRemoveContainer, pod, ctr);
  // The stopped pod's last container gone: the pod goes too.
  auto it = nri_pods_.find(pod.id);
  if (it == nri_pods_.end() || it->second) return;
  for (const auto& [id, other] : tasks_) {
    if (other.get() != t && other->config().job == t->config().job) return;
  }
  nri_pods_.erase(it);
  options_.nri->Notify(nri::Event::kRemovePodSandbox, pod, std::nullopt);
}

void TaskManager::NriUpdated(const std::string& id, const cgroup::Resources& requested) {
  Task* t = Find(id);
  if (!t || !NriActive() || t->starting || t->record.exited) return;
  nri::Container ctr =
      ContainerOf(t->config(), CreatedAt(t->record, t->nri_created_at), nri::ContainerState::kRunning);
  ctr.pid = static_cast<uint32_t>(t->record.handle.pid);
  ctr.started_at = t->record.handle.started_at_unix_nanos;
  nri::PodSandbox pod = NriPod(t->config());
  std::weak_ptr<bool> alive = alive_;
  nri::Resources want = nri::ToNri(requested);
  options_.nri->UpdateContainer(pod, ctr, want, [this, alive, id, pod, requested](Result<nri::Resources> r) {
    if (!alive.lock()) return;
    Task* now = Find(id);
    if (!now || now->record.exited) return;
    if (!r.ok()) {
      log::Warn("NRI UpdateContainer failed; the requested limits stay", {{"task", id}, {"error", r.error().message()}});
    } else {
      // Plugins may have changed the update: the merged resources win.
      cgroup::Resources merged = requested;
      Status st = nri::ApplyResources(*r, &merged);
      if (st.ok() && options_.cgroups && options_.cgroups->available() && !now->config().cgroup.empty()) {
        st = options_.cgroups->Apply(now->config().cgroup, merged);
      }
      if (!st.ok()) {
        Emit(now->config(), "error", "NRI UpdateContainer: " + st.error().message());
      } else {
        now->record.handle.config.resources = merged;
      }
    }
    nri::Container updated =
        ContainerOf(now->config(), CreatedAt(now->record, now->nri_created_at), nri::ContainerState::kRunning);
    updated.pid = static_cast<uint32_t>(now->record.handle.pid);
    updated.started_at = now->record.handle.started_at_unix_nanos;
    options_.nri->Notify(nri::Event::kPostUpdateContainer, pod, updated);
  });
}

void TaskManager::NriPodUpdated(const std::string& job, const cgroup::Resources& r) {
  auto known = nri_pods_.find(job);
  if (!NriActive() || known == nri_pods_.end() || !known->second) return;
  driver::TaskConfig c;
  c.job = job;
  nri::PodSandbox pod = NriPod(c);
  nri::Adaptation* a = options_.nri;
  std::weak_ptr<bool> alive = alive_;
  a->UpdatePodSandbox(pod, nri::ToNri(r), [a, alive, pod] {
    if (alive.lock()) a->Notify(nri::Event::kPostUpdatePodSandbox, pod, std::nullopt);
  });
}

void TaskManager::NriPodEnded(const std::string& job) {
  auto it = nri_pods_.find(job);
  if (!options_.nri || it == nri_pods_.end() || !it->second) return;
  it->second = false;
  driver::TaskConfig c;
  c.job = job;
  options_.nri->Notify(nri::Event::kStopPodSandbox, NriPod(c), std::nullopt);
}

Status TaskManager::ApplyNriUpdate(const std::string& id, const nri::Resources& update) {
  Task* t = Find(id);
  if (!t || t->record.exited) return Error(Code::kNotFound, "no running container \"" + id + "\"");
  cgroup::Resources merged = t->config().resources;
  OUTPOST_RETURN_IF_ERROR(nri::ApplyResources(update, &merged));
  cgroup::Cgroups* cg = options_.cgroups;
  std::vector<std::string> problems = cg ? cg->Check(merged, options_.allow_without_limits)
                                         : std::vector<std::string>{};
  if (!problems.empty()) return Error(Code::kFailedPrecondition, problems.front());
  if (cg && cg->available() && !t->config().cgroup.empty()) {
    OUTPOST_RETURN_IF_ERROR(cg->Apply(t->config().cgroup, merged));
  }
  t->record.handle.config.resources = merged;
  return OkStatus();
}

void TaskManager::NriState(std::vector<nri::PodSandbox>* pods, std::vector<nri::Container>* containers) const {
  std::map<std::string, bool> seen;
  for (const auto& [id, t] : tasks_) {
    if (t->starting || t->record.exited) continue;
    const driver::TaskConfig& c = t->config();
    nri::Container ctr = ContainerOf(c, CreatedAt(t->record, t->nri_created_at), nri::ContainerState::kRunning);
    ctr.pid = static_cast<uint32_t>(t->record.handle.pid);
    ctr.started_at = t->record.handle.started_at_unix_nanos;
    containers->push_back(std::move(ctr));
    const std::string pod_id = c.job.empty() ? c.id : c.job;
    if (!seen[pod_id]) {
      seen[pod_id] = true;
      pods->push_back(NriPod(c));
      // A plugin now knows this pod: it gets its Stop and Remove later.
      if (!c.job.empty()) nri_pods_.emplace(pod_id, true);
    }
  }
  // A pod whose tasks are still on their way (waiting for a required
  // plugin, say) or have all ended is a pod until its StopPodSandbox: a
  // plugin connecting now learns it here, not from a RunPodSandbox sent
  // before it was there.
  for (const auto& [job, running] : nri_pods_) {
    if (!running || seen[job]) continue;
    seen[job] = true;
    driver::TaskConfig bare;
    bare.job = job;
    const driver::TaskConfig* of = &bare;
    for (const auto& [id, t] : tasks_) {
      if (t->config().job == job) {
        of = &t->config();  // the job's network namespace is in its tasks' configs
        break;
      }
    }
    pods->push_back(NriPod(*of));
  }
}

}  // namespace outpost::task
