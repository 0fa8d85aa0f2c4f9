#include "cli/util.h"

#include <cstdio>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"

namespace outpost::cli {

std::string Time(int64_t unix_nanos) { return unix_nanos ? FormatWallTime(unix_nanos) : "-"; }

std::string Age(int64_t unix_nanos) {
  if (unix_nanos <= 0) return "-";
  int64_t s = (WallNanos() - unix_nanos) / kNanosPerSecond;
  if (s < 0) s = 0;
  if (s < 120) return Format("%llds", static_cast<long long>(s));
  if (s < 7200) return Format("%lldm", static_cast<long long>(s / 60));
  if (s < 172800) return Format("%lldh", static_cast<long long>(s / 3600));
  return Format("%lldd", static_cast<long long>(s / 86400));
}

void PrintJson(const picojson::value& v) { std::printf("%s\n", v.serialize(true).c_str()); }

int UsageError(const std::string& msg, const char* cmd) {
  return Fail(kExitUsage, msg + "; see `outpost " + cmd + " --help`");
}

picojson::value InfoJson(const outpost_v1_TaskInfo& t) {
  picojson::object o;
  o["id"] = picojson::value(PbString(t.id));
  o["job"] = picojson::value(PbString(t.job));
  o["name"] = picojson::value(PbString(t.name));
  o["state"] = picojson::value(PbString(t.state));
  o["pid"] = picojson::value(static_cast<int64_t>(t.pid));
  o["started_at"] = picojson::value(Time(t.started_at_unix_nanos));
  o["completed_at"] = picojson::value(Time(t.completed_at_unix_nanos));
  o["exit_code"] = picojson::value(static_cast<int64_t>(t.exit_code));
  o["signal"] = picojson::value(static_cast<int64_t>(t.signal));
  o["oom_killed"] = picojson::value(t.oom_killed);
  o["error"] = picojson::value(PbString(t.error));
  o["command"] = picojson::value(PbString(t.command));
  picojson::array args;
  for (pb_size_t i = 0; i < t.args_count; ++i) args.push_back(picojson::value(PbString(t.args[i])));
  o["args"] = picojson::value(args);
  o["user"] = picojson::value(PbString(t.user));
  o["workdir"] = picojson::value(PbString(t.workdir));
  o["log_dir"] = picojson::value(PbString(t.log_dir));
  o["log_bytes"] = picojson::value(static_cast<int64_t>(t.log_bytes));
  o["log_dropped_bytes"] = picojson::value(static_cast<int64_t>(t.log_dropped_bytes));
  o["log_error"] = picojson::value(PbString(t.log_error));
  if (!PbString(t.nri).empty()) o["nri"] = picojson::value(PbString(t.nri));
  if (t.hook_runs_count) {
    picojson::array runs;
    for (pb_size_t i = 0; i < t.hook_runs_count; ++i) {
      const outpost_v1_HookRunInfo& r = t.hook_runs[i];
      picojson::object h;
      h["stage"] = picojson::value(PbString(r.stage));
      h["path"] = picojson::value(PbString(r.path));
      h["source"] = picojson::value(PbString(r.source));
      h["exit_code"] = picojson::value(static_cast<int64_t>(r.exit_code));
      h["timed_out"] = picojson::value(r.timed_out);
      h["ok"] = picojson::value(r.ok);
      h["started_at"] = picojson::value(Time(r.started_at_unix_nanos));
      h["duration_ms"] = picojson::value(static_cast<double>(r.duration_nanos) / 1e6);
      h["message"] = picojson::value(PbString(r.message));
      h["stderr_tail"] = picojson::value(PbString(r.stderr_tail));
      runs.emplace_back(std::move(h));
    }
    o["hook_runs"] = picojson::value(std::move(runs));
  }
  return picojson::value(o);
}

void PrintHookRuns(const outpost_v1_TaskInfo& t) {
  if (!PbString(t.nri).empty()) std::printf("nri:        %s\n", PbString(t.nri).c_str());
  if (t.hook_runs_count == 0) return;
  std::printf("hooks:      (last run of each)\n");
  for (pb_size_t i = 0; i < t.hook_runs_count; ++i) {
    const outpost_v1_HookRunInfo& r = t.hook_runs[i];
    std::printf("  %s %s: %s\n", Time(r.started_at_unix_nanos).c_str(), r.ok ? "ok" : "FAILED",
                PbString(r.message).c_str());
  }
}

}  // namespace outpost::cli
