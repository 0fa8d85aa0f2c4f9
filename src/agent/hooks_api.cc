// ListHooks: the OCI hooks the node would run (hooks.d files, per-stage
// directories) and its invalid files, or, for one task, what applies to it
// and why (`outpost hooks [--task JOB/TASK]`, docs/hooks.md).
#include <algorithm>

#include "agent/agent.h"
#include "agent/api.h"
#include "agent/api_util.h"
#include "base/strings.h"
#include "hooks.pb.h"
#include "hooks/catalog.h"
#include "job/manager.h"
#include "job/supervisor.h"
#include "task/manager.h"

namespace outpost::agent {

namespace {

// A hooks.d file's `when`, as its JSON reads.
std::string Conditions(const hooks::HooksDFile& f) {
  std::vector<std::string> parts;
  if (f.always) parts.push_back("always");
  for (const auto& [k, v] : f.annotations) parts.push_back("annotation " + k + "=" + v);
  for (const std::string& c : f.commands) parts.push_back("command " + c);
  if (f.has_bind_mounts_set) parts.push_back(f.has_bind_mounts ? "hasBindMounts" : "no bind mounts");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : f.or_conditions ? " or " : " and ") + p;
  return "when " + (out.empty() ? std::string("always") : out) + " (" + f.name + ", schema " + f.schema + ")";
}

struct Entry {
  hooks::Stage stage;
  hooks::Hook hook;
  std::string why;
};

void FillEntry(const Entry& e, Arena* a, outpost_v1_HookEntry* out) {
  *out = outpost_v1_HookEntry_init_zero;
  out->stage = a->Str(hooks::StageName(e.stage));
  out->path = a->Str(e.hook.path);
  std::vector<std::string> argv = e.hook.Argv();
  out->args_count = static_cast<pb_size_t>(argv.size());
  out->args = a->StrArray(argv);
  out->timeout_seconds = e.hook.timeout_seconds;
  out->source = a->Str(e.hook.source);
  out->why = a->Str(e.why);
  out->env_count = static_cast<int32_t>(e.hook.env.size());
}

char** Strings(Arena* a, const std::vector<std::string>& v, pb_size_t* count) {
  *count = static_cast<pb_size_t>(v.size());
  return a->StrArray(v);
}

void HandleListHooks(Agent* agent, std::string_view payload, const wire::Responder& r) {
  PbOwned<outpost_v1_ListHooksRequest> req(outpost_v1_ListHooksRequest_fields);
  if (!DecodeOrFail(payload, &req, "ListHooksRequest", r)) return;
  hooks::Catalog* catalog = agent->hook_catalog();
  if (!catalog || !agent->tasks()) return r.Fail(Error(Code::kFailedPrecondition, "the agent is still starting"));
  const Config& config = agent->config();
  std::vector<Entry> entries;
  std::vector<std::string> skipped;
  std::string task_id;
  const std::string ref = PbString(req->task);
  if (ref.empty()) {
    for (const hooks::HooksDFile& f : catalog->files()) {
      for (hooks::Stage s : f.stages) entries.push_back({s, f.hook, Conditions(f)});
    }
    for (hooks::Stage s : hooks::kAllStages) {
      for (const hooks::Hook& h : catalog->stage_dir_hooks().at(s)) entries.push_back({s, h, "every task"});
    }
  } else {
    size_t slash = ref.find('/');
    if (slash == std::string::npos) {
      return r.Fail(Error(Code::kInvalidArgument, "--task takes JOB/TASK, got \"" + ref + "\""));
    }
    std::string job = ref.substr(0, slash), task = ref.substr(slash + 1);
    auto view = agent->jobs() ? agent->jobs()->Inspect(job) : Result<job::JobView>(Error(Code::kNotFound, "no jobs"));
    if (!view.ok()) return r.Fail(view.error());
    auto spec = std::find_if(view->spec.tasks.begin(), view->spec.tasks.end(),
                             [&](const job::TaskSpec& t) { return t.name == task; });
    if (spec == view->spec.tasks.end()) {
      return r.Fail(Error(Code::kNotFound, "job \"" + job + "\" has no task \"" + task + "\""));
    }
    driver::TaskConfig c = job::TaskConfigFor(job, *spec);
    task_id = c.id;
    std::vector<hooks::ResolvedHook> why;
    agent->tasks()->ResolveHooks(c, &why, &skipped);
    for (const hooks::ResolvedHook& h : why) entries.push_back({h.stage, h.hook, h.why});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.stage < b.stage; });

  Arena a;
  outpost_v1_ListHooksResponse resp = outpost_v1_ListHooksResponse_init_zero;
  auto* list = a.Array<outpost_v1_HookEntry>(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) FillEntry(entries[i], &a, &list[i]);
  resp.hooks = list;
  resp.hooks_count = static_cast<pb_size_t>(entries.size());
  resp.problems = Strings(&a, catalog->Problems(), &resp.problems_count);
  resp.masked = Strings(&a, catalog->Masked(), &resp.masked_count);
  resp.skipped = Strings(&a, skipped, &resp.skipped_count);
  std::vector<std::string> dirs;
  for (const std::string& d : config.hooks_dirs) dirs.push_back("hooks.d " + d);
  if (!config.hook_path.empty()) dirs.push_back("hook_path " + config.hook_path);
  resp.dirs = Strings(&a, dirs, &resp.dirs_count);
  resp.task_id = a.Str(task_id);
  resp.default_timeout_seconds = config.hook_timeout_nanos / 1000000000LL;
  resp.poststart_failure = a.Str(config.poststart_failure_stops ? "stop" : "warn");
  r.Finish(PbEncode(outpost_v1_ListHooksResponse_fields, &resp, "ListHooksResponse"));
}

}  // namespace

std::string HooksSummary(Agent* agent, bool* ok) {
  hooks::Catalog* catalog = agent->hook_catalog();
  if (!catalog) return "not set up";
  size_t stage_hooks = catalog->stage_dir_hooks().size();
  std::string out = Format("%zu hooks.d files, %zu per-stage hooks", catalog->files().size(), stage_hooks);
  std::vector<std::string> problems = catalog->Problems();
  *ok = problems.empty();
  for (const std::string& p : problems) out += "; invalid: " + p;
  return out;
}

void RegisterHooksApi(Agent* agent, wire::RpcServer* server) {
  server->Register(kAgentService, "ListHooks",
                   [agent](const wire::CallContext&, std::string_view payload, wire::Responder responder) {
                     HandleListHooks(agent, payload, responder);
                   });
}

}  // namespace outpost::agent
