// The OCI hook steps of the start and exit pipelines (docs/hooks.md), around
// the driver like the other steps (task/lifecycle.cc has the order):
//   bundle                 the task's hooks resolved (job spec, hooks.d,
//                          per-stage directories) and its bundle written
//   prestart hooks         prestart, then createRuntime (after the cgroup)
//   createContainer hooks  right before the spawn
//   (spawn: startContainer inside the new process, by drivers that can;
//    else here, right before the driver is asked)
//   poststart hooks        once the task runs; a failure stops it unless
//                          the node's poststart_failure is "warn"
// and, when an instance has ended (or its start failed after its bundle was
// written), poststop: every hook runs, failures are logged.
#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "cgroup/cgroup.h"
#include "hooks/bundle.h"
#include "hooks/catalog.h"
#include "hooks/runner.h"
#include "proc/spawn.h"
#include "task/entry.h"

namespace outpost::task {

namespace {

std::vector<std::string> EnvList(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

std::string TaskManager::BundlePath(const std::string& id) const {
  return options_.runtime_dir + "/bundles/" + id;
}

hooks::HookSet TaskManager::ResolveHooks(const driver::TaskConfig& c, std::vector<hooks::ResolvedHook>* why,
                                         std::vector<std::string>* skipped) const {
  // (c.Hooks() are the job spec's and, once NRI adjusted the task, its
  // plugins'; the catalog adds the node's.)
  if (!options_.hooks) return hooks::OncePerSource(c.Hooks());
  hooks::MatchInput in;
  in.annotations = c.Annotations();
  in.command = c.command;
  return options_.hooks->Resolve(c.Hooks(), in, why, skipped);
}

// ---- bundle ---------------------------------------------------------------

hooks::BundleInput TaskManager::BundleInputOf(const driver::TaskConfig& c, hooks::HookSet merged) const {
  hooks::BundleInput in;
  in.id = c.id;
  in.args.push_back(c.command);
  in.args.insert(in.args.end(), c.args.begin(), c.args.end());
  in.env = EnvList(c.env);
  in.cwd = c.workdir.empty() ? c.task_dir : c.workdir;
  in.uid = c.identity.switch_user ? c.identity.uid : ::geteuid();
  in.gid = c.identity.switch_user ? c.identity.gid : ::getegid();
  in.additional_gids = c.identity.groups;
  in.rlimits = c.rlimits;
  // As runtimes write it: the path below the cgroup2 mount ("/outpost.slice/j/j.t").
  if (!c.cgroup.empty() && options_.cgroups) {
    const std::string& mount = options_.cgroups->mount_point();
    in.cgroup_path = !mount.empty() && StartsWith(c.cgroup, mount + "/") ? c.cgroup.substr(mount.size()) : c.cgroup;
  }
  in.resources = c.resources;
  // The job's namespace, joined (createRuntime hooks run after it is wired).
  if (!c.Netns().empty()) in.namespace_paths["network"] = c.Netns();
  if (!c.Hostname().empty()) {
    in.hostname = c.Hostname();
    in.namespaces.push_back("uts");
  }
  in.bind_mounts = c.mounts;
  in.devices = c.devices;
  in.oom_score_adj = c.oom_score_adj;
  in.hooks = std::move(merged);
  in.annotations = c.Annotations();
  return in;
}

bool TaskManager::RuntimeRunsHooks(const driver::TaskConfig& c) const {
  driver::Driver* d = options_.drivers ? options_.drivers->Find(c.driver) : nullptr;
  return d && d->GetCapabilities().oci_runtime;
}

void TaskManager::WriteBundle(StartOp* op, DoneCallback done) {
  driver::TaskConfig& c = op->config;
  hooks::HookSet merged = ResolveHooks(c, nullptr, nullptr);
  Task* t = Find(c.id);
  if (op->driver->GetCapabilities().oci_runtime) {
    // The driver's OCI runtime writes its own bundle and runs the hooks
    // from the spec it is given: no bundle here, and no hook run by the
    // agent (the hook steps and poststop skip this driver's tasks).
    auto spec = hooks::BundleText(BundleInputOf(c, merged), false);
    if (!spec.ok()) return done(spec.error().Wrap("OCI spec"));
    c.oci_spec = std::move(*spec);
    if (!merged.empty()) {
      auto oci = std::make_shared<driver::TaskHooks>();
      oci->hooks = std::move(merged);
      oci->annotations = c.Annotations();
      oci->timeout_seconds = options_.hook_timeout_seconds;
      c.oci = std::move(oci);
    }
    return done(OkStatus());
  }
  if (merged.empty()) {
    // No hook applies: no bundle (nothing would read it, and each would be
    // a file on the runtime dir's tmpfs), and nothing kept for hooks. One
    // left by an earlier instance would hand its hooks to a later poststop.
    // With NRI on, the annotations stay (with no hook in them): every NRI
    // event describes the task as its CreateContainer left it.
    if (!options_.nri || c.Annotations().empty()) {
      c.oci = nullptr;
      if (t) t->record.handle.config.oci = nullptr;
    }
    if (::access(BundlePath(c.id).c_str(), F_OK) == 0) (void)sys::RemoveTree(BundlePath(c.id));
    return done(OkStatus());
  }
  auto oci = std::make_shared<driver::TaskHooks>();
  oci->hooks = merged;
  oci->annotations = c.Annotations();
  oci->bundle = BundlePath(c.id);
  oci->timeout_seconds = options_.hook_timeout_seconds;
  c.oci = oci;
  hooks::BundleInput in = BundleInputOf(c, std::move(merged));
  OUTPOST_RETURN_IF_ERROR_CB(sys::MkdirAll(options_.runtime_dir + "/bundles", 0700), done);
  Status st = hooks::WriteBundle(oci->bundle, in);
  if (!st.ok()) return done(st.error().Wrap("bundle"));
  op->bundle_written = true;
  if (t) t->record.handle.config.oci = oci;
  done(OkStatus());
}

// ---- running a stage --------------------------------------------------------

void TaskManager::RunHooks(const driver::TaskConfig& c, std::vector<hooks::Stage> stages, pid_t pid,
                           bool continue_after_failure, DoneCallback done) {
  // Skip stages without hooks, without a round through the loop.
  while (!stages.empty() && c.Hooks().at(stages.front()).empty()) stages.erase(stages.begin());
  if (stages.empty()) return done(OkStatus());
  hooks::Stage stage = stages.front();
  stages.erase(stages.begin());
  hooks::State state;
  state.id = c.id;
  state.stage = stage;
  state.pid = stage == hooks::Stage::kPoststop ? 0 : pid;
  state.bundle = c.oci->bundle;
  state.annotations = c.oci->annotations;
  hooks::StageOptions opts;
  opts.default_timeout_seconds = c.oci->timeout_seconds > 0 ? c.oci->timeout_seconds : options_.hook_timeout_seconds;
  opts.continue_after_failure = continue_after_failure;
  const std::string id = c.id;
  std::weak_ptr<bool> alive = alive_;
  // Kept in the map until it is done; a key per run, so a poststop of an
  // ended instance and the start of the next never share one.
  uint64_t key = ++hook_runs_started_;
  driver::TaskConfig copy = c;
  auto run = hooks::StageRun::Start(
      loop_, stage, c.oci->hooks.at(stage), hooks::StateJson(state), opts,
      [this, alive, copy](const hooks::HookRun& r) {
        if (!alive.lock()) return;
        RecordHookRun(copy, r);
      },
      [this, alive, key, copy, stages, pid, continue_after_failure, done](Status st) {
        if (!alive.lock()) return;
        loop_->Defer([this, alive, key] {
          if (alive.lock()) running_hooks_.erase(key);
        });
        if (!st.ok() && !continue_after_failure) return done(st);
        RunHooks(copy, stages, pid, continue_after_failure, [st, done](Status rest) {
          done(!st.ok() ? st : rest);  // the first failure
        });
      });
  running_hooks_[key] = std::move(run);
}

void TaskManager::RecordHookRun(const driver::TaskConfig& c, const hooks::HookRun& r) {
  // (The runner has logged it, with its output on a failure.)
  Emit(c, "hook", hooks::DescribeRun(r));
  // Kept by task id, not per instance: `inspect` shows the last run of each
  // hook, a failed start's and the ended instance's poststop included.
  std::vector<hooks::HookRun>& runs = hook_runs_[c.id];
  for (hooks::HookRun& old : runs) {
    if (old.stage == r.stage && old.hook.path == r.hook.path && old.hook.args == r.hook.args) {
      old = r;
      return;
    }
  }
  runs.push_back(r);
}

void TaskManager::RecordInChildHooks(const driver::TaskConfig& c) {
  for (const hooks::Hook& h : c.Hooks().at(hooks::Stage::kStartContainer)) {
    hooks::HookRun r;
    r.stage = hooks::Stage::kStartContainer;
    r.hook = h;
    r.started_unix_nanos = WallNanos();
    r.duration_nanos = -1;
    RecordHookRun(c, r);
  }
}

// ---- start steps ------------------------------------------------------------

// A driver whose OCI runtime runs the hooks (Capabilities::oci_runtime)
// gets them in its spec: the agent runs no stage for its tasks.
void TaskManager::RunCreateHooks(StartOp* op, DoneCallback done) {
  if (op->driver->GetCapabilities().oci_runtime) return done(OkStatus());
  RunHooks(op->config, {hooks::Stage::kPrestart, hooks::Stage::kCreateRuntime}, 0, false, std::move(done));
}

void TaskManager::RunCreateContainerHooks(StartOp* op, DoneCallback done) {
  if (op->driver->GetCapabilities().oci_runtime) return done(OkStatus());
  RunHooks(op->config, {hooks::Stage::kCreateContainer}, 0, false, std::move(done));
}

// Drivers that cannot run startContainer in the task's process: the agent
// runs it right before asking them (no pid yet).
void TaskManager::RunStartContainerForDriver(StartOp* op, DoneCallback done) {
  if (op->driver->RunsStartContainerHooks() || op->driver->GetCapabilities().oci_runtime) return done(OkStatus());
  RunHooks(op->config, {hooks::Stage::kStartContainer}, 0, false, std::move(done));
}

void TaskManager::RunPoststartHooks(StartOp* op, DoneCallback done) {
  if (op->config.Hooks().at(hooks::Stage::kPoststart).empty() || op->driver->GetCapabilities().oci_runtime) {
    return done(OkStatus());
  }
  const bool warn = !options_.poststart_failure_stops;
  const driver::TaskConfig& c = op->config;
  RunHooks(c, {hooks::Stage::kPoststart}, op->handle.pid, false, [warn, c, done](Status st) {
    if (st.ok() || !warn) return done(st);
    // runtime-spec before 1.3: warn and go on.
    log::Warn("poststart hook failed; the task keeps running (poststart_failure: warn)",
              {{"task", c.id}, {"error", st.error().message()}});
    done(OkStatus());
  });
}

// ---- poststop -----------------------------------------------------------------

void TaskManager::RunPoststop(const driver::TaskConfig& config, std::function<void()> then) {
  if (RuntimeRunsHooks(config)) return then();  // the runtime runs them at its delete
  std::shared_ptr<const driver::TaskHooks> oci = config.oci;
  if (!oci || oci->bundle.empty()) {
    // A task recovered after an agent restart keeps its hooks in its
    // bundle (its record, its annotations only); a task no hook applies to
    // has none.
    std::string bundle = BundlePath(config.id);
    if (::access((bundle + "/config.json").c_str(), F_OK) != 0) return then();
    auto loaded = LoadBundleHooks(config.id, bundle);
    if (!loaded) return then();
    oci = std::move(loaded);
  }
  if (oci->hooks.at(hooks::Stage::kPoststop).empty()) return then();
  driver::TaskConfig c = config;
  c.oci = std::move(oci);
  RunHooks(c, {hooks::Stage::kPoststop}, 0, true, [then](Status) { then(); });
}

std::shared_ptr<const driver::TaskHooks> TaskManager::LoadBundleHooks(const std::string& id,
                                                                       const std::string& bundle) const {
  auto oci = std::make_shared<driver::TaskHooks>();
  oci->bundle = bundle;
  oci->timeout_seconds = options_.hook_timeout_seconds;
  auto text = sys::ReadFile(bundle + "/config.json", 1 << 20);
  picojson::value doc;
  std::string perr;
  if (!text.ok()) {
    perr = text.error().message();
  } else if (auto parsed = json::Parse(*text)) {
    doc = std::move(*parsed);
  } else {
    perr = parsed.error().message();
  }
  std::vector<std::string> errors;
  if (perr.empty() && doc.is<picojson::object>() && doc.contains("hooks")) {
    oci->hooks = hooks::HooksFromJson(doc.get("hooks"), "hooks", "bundle " + bundle, &errors);
  }
  if (!perr.empty() || !errors.empty()) {
    log::Warn("cannot read the hooks of a recovered task from its bundle; its poststop hooks do not run",
              {{"task", id}, {"error", perr.empty() ? json::JoinErrors(errors) : perr}});
    return nullptr;
  }
  if (doc.contains("annotations") && doc.get("annotations").is<picojson::object>()) {
    for (const auto& [k, v] : doc.get("annotations").get<picojson::object>()) {
      if (v.is<std::string>()) oci->annotations[k] = v.get<std::string>();
    }
  }
  return oci;
}

}  // namespace outpost::task
