// `outpost hooks`: the OCI hooks the node runs, per stage, where each comes
// from, and the invalid hook files; `--task JOB/TASK`: which apply to that
// task and why (docs/hooks.md).
#include <cstdio>

#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "hooks.pb.h"

namespace outpost::cli {

const char kHooksHelp[] =
    "Usage: outpost hooks [--task JOB/TASK] [--json]\n"
    "\n"
    "Lists the OCI hooks of this node, stage by stage (prestart, createRuntime,\n"
    "createContainer, startContainer, poststart, poststop): the hooks.d files\n"
    "(config hooks_dirs) with their `when` conditions and the executables of the\n"
    "per-stage directories (config hook_path), then the hook files that are\n"
    "invalid (skipped, with their errors) and those masked by a same-named file in\n"
    "a later directory.\n"
    "\n"
    "With --task JOB/TASK: the hooks a start of that task would run, in order\n"
    "(job spec, hooks.d, per-stage directories), why each applies, and why each\n"
    "other hooks.d file does not. See docs/hooks.md.\n";

namespace {

picojson::value StringsJson(char** v, pb_size_t n) {
  picojson::array a;
  for (pb_size_t i = 0; i < n; ++i) a.emplace_back(PbString(v[i]));
  return picojson::value(std::move(a));
}

}  // namespace

int RunHooks(const GlobalOptions& opts, const std::vector<std::string>& args) {
  auto a = ParseArgs(args, {"--task"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "hooks");
  if (!a->pos.empty()) return UsageError("hooks takes no positional arguments (use --task JOB/TASK)", "hooks");
  std::string task = a->Get("--task") ? *a->Get("--task") : "";
  outpost_v1_ListHooksRequest req = outpost_v1_ListHooksRequest_init_zero;
  req.task = PbStr(task);
  auto payload = PbEncode(outpost_v1_ListHooksRequest_fields, &req, "ListHooksRequest");
  if (!payload.ok()) return Fail(kExitFailure, payload.error().message());
  int code = 0;
  auto reply = CallAgent(opts, "ListHooks", *payload, &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListHooksResponse> resp(outpost_v1_ListHooksResponse_fields);
  Status st = resp.Decode(*reply, "ListHooksResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());

  if (opts.json) {
    picojson::object o;
    picojson::array hooks;
    for (pb_size_t i = 0; i < resp->hooks_count; ++i) {
      const auto& h = resp->hooks[i];
      picojson::object e;
      e["stage"] = picojson::value(PbString(h.stage));
      e["path"] = picojson::value(PbString(h.path));
      e["args"] = StringsJson(h.args, h.args_count);
      e["timeout"] = picojson::value(h.timeout_seconds);
      e["source"] = picojson::value(PbString(h.source));
      e["why"] = JsonText(h.why);
      e["env_count"] = picojson::value(static_cast<int64_t>(h.env_count));
      hooks.emplace_back(std::move(e));
    }
    o["hooks"] = picojson::value(std::move(hooks));
    o["problems"] = StringsJson(resp->problems, resp->problems_count);
    o["masked"] = StringsJson(resp->masked, resp->masked_count);
    o["dirs"] = StringsJson(resp->dirs, resp->dirs_count);
    if (!task.empty()) {
      o["task"] = picojson::value(task);
      o["task_id"] = picojson::value(PbString(resp->task_id));
      o["not_matching"] = StringsJson(resp->skipped, resp->skipped_count);
    }
    o["hook_timeout"] = picojson::value(resp->default_timeout_seconds);
    o["poststart_failure"] = picojson::value(PbString(resp->poststart_failure));
    PrintJson(picojson::value(std::move(o)));
    return kExitOk;
  }
  std::string dirs;
  for (pb_size_t i = 0; i < resp->dirs_count; ++i) dirs += (i ? ", " : "") + PbString(resp->dirs[i]);
  std::printf("from: %s (hook_timeout %llds, poststart_failure %s)\n", dirs.c_str(),
              static_cast<long long>(resp->default_timeout_seconds), PbString(resp->poststart_failure).c_str());
  if (!task.empty()) std::printf("task %s (%s):\n", task.c_str(), PbString(resp->task_id).c_str());
  if (resp->hooks_count == 0) std::printf("no hooks%s\n", task.empty() ? "" : " apply");
  std::string stage;
  for (pb_size_t i = 0; i < resp->hooks_count; ++i) {
    const auto& h = resp->hooks[i];
    if (PbString(h.stage) != stage) {
      stage = PbString(h.stage);
      std::printf("%s:\n", stage.c_str());
    }
    std::string argv;
    for (pb_size_t k = 0; k < h.args_count; ++k) argv += " " + QuoteIfNeeded(PbString(h.args[k]));
    std::printf("  %s  [argv:%s]", PbString(h.path).c_str(), argv.c_str());
    if (h.timeout_seconds) std::printf(" timeout %llds", static_cast<long long>(h.timeout_seconds));
    if (h.env_count) std::printf(" env %d vars", h.env_count);
    std::printf("\n    from %s: %s\n", PbString(h.source).c_str(), PbString(h.why).c_str());
  }
  for (pb_size_t i = 0; i < resp->skipped_count; ++i) std::printf("not matching: %s\n", resp->skipped[i]);
  for (pb_size_t i = 0; i < resp->masked_count; ++i) std::printf("masked: %s\n", resp->masked[i]);
  for (pb_size_t i = 0; i < resp->problems_count; ++i) std::printf("invalid: %s\n", resp->problems[i]);
  return kExitOk;
}

}  // namespace outpost::cli
