// `outpost status` and `outpost version`.
#include <cstdio>

#include "agent.pb.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "job.pb.h"

namespace outpost::cli {

const char kStatusHelp[] =
    "Usage: outpost status [--json] [--socket PATH]\n"
    "\n"
    "Asks the running agent for its version, pid, uptime, configuration and\n"
    "which features are enabled, and how many jobs and tasks it has in each\n"
    "status and state (jobs: the statuses of `outpost ps`; tasks: pending,\n"
    "starting, running, backoff, stopping, dead). Exits 3 when no agent\n"
    "answers on the socket.\n"
    "\n"
    "Examples:\n"
    "  outpost status\n"
    "  outpost status --json | jq .pid\n"
    "  outpost --socket ./run/outpost.sock status\n";

const char kVersionHelp[] =
    "Usage: outpost version [--json]\n"
    "\n"
    "Prints the version of this binary (it does not contact the agent;\n"
    "`outpost status` shows the running agent's version).\n";

namespace {

std::string HumanUptime(int64_t nanos) {
  int64_t s = nanos / kNanosPerSecond;
  if (s < 60) return Format("%llds", static_cast<long long>(s));
  if (s < 3600) return Format("%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  if (s < 86400) {
    return Format("%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>((s % 3600) / 60));
  }
  return Format("%lldd%02lldh", static_cast<long long>(s / 86400), static_cast<long long>((s % 86400) / 3600));
}

// The counts of jobs by status and of tasks by state, of a ListJobs reply.
struct Counts {
  size_t jobs = 0, tasks = 0;
  std::vector<std::pair<std::string, int>> by_status, by_state;
};

Counts CountJobs(const outpost_v1_ListJobsResponse& r) {
  std::vector<std::string> statuses, states;
  for (pb_size_t i = 0; i < r.jobs_count; i++) {
    statuses.push_back(PbString(r.jobs[i].status));
    for (pb_size_t t = 0; t < r.jobs[i].tasks_count; t++) states.push_back(PbString(r.jobs[i].tasks[t].state));
  }
  Counts c;
  c.jobs = statuses.size();
  c.tasks = states.size();
  c.by_status = CountWords(statuses, JobStatusWords());
  c.by_state = CountWords(states, {"pending", "starting", "running", "backoff", "stopping", "dead"});
  return c;
}

picojson::value CountsJson(size_t total, const std::vector<std::pair<std::string, int>>& counts) {
  picojson::object o;
  o["total"] = picojson::value(static_cast<int64_t>(total));
  for (const auto& [word, n] : counts) o[word] = picojson::value(static_cast<int64_t>(n));
  return picojson::value(o);
}

}  // namespace

int RunStatus(const GlobalOptions& opts, const std::vector<std::string>& args) {
  if (!args.empty()) return Fail(kExitUsage, "status takes no arguments; see `outpost status --help`");
  int code = 0;
  Session s(opts);
  auto reply = s.Call("Status", "", &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_StatusResponse> resp(outpost_v1_StatusResponse_fields);
  Status st = resp.Decode(*reply, "StatusResponse");
  if (!st.ok()) return Fail(kExitFailure, "bad reply from the agent: " + st.error().message());
  // The counts, unless the jobs cannot be listed (yet): said instead.
  auto list = s.Call("ListJobs", "", &code, kDefaultCallTimeoutNanos, true);
  if (!list.ok() && code == kExitNoAgent) return code;
  PbOwned<outpost_v1_ListJobsResponse> jobs(outpost_v1_ListJobsResponse_fields);
  std::string no_counts = list.ok() ? "" : list.error().message();
  if (list.ok() && !jobs.Decode(*list, "ListJobsResponse").ok()) no_counts = "bad reply from the agent";
  const Counts counts = no_counts.empty() ? CountJobs(*jobs) : Counts{};

  std::string config = PbString(resp->config_path);
  if (opts.json) {
    picojson::object o;
    o["version"] = picojson::value(PbString(resp->version));
    o["pid"] = picojson::value(static_cast<int64_t>(resp->pid));
    o["keeper_pid"] = picojson::value(static_cast<int64_t>(resp->keeper_pid));
    o["uptime_seconds"] = picojson::value(static_cast<double>(resp->uptime_nanos) / kNanosPerSecond);
    o["started_at"] = picojson::value(FormatWallTime(resp->started_at_unix_nanos));
    o["config_path"] = JsonText(config);
    o["config_loaded_at"] = picojson::value(FormatWallTime(resp->config_loaded_unix_nanos));
    o["api_socket"] = picojson::value(PbString(resp->api_socket));
    o["api_connections"] = picojson::value(static_cast<int64_t>(resp->api_connections));
    o["state_dir"] = picojson::value(PbString(resp->state_dir));
    o["runtime_dir"] = picojson::value(PbString(resp->runtime_dir));
    o["arch"] = picojson::value(PbString(resp->arch));
    picojson::object features;
    for (pb_size_t i = 0; i < resp->features_count; ++i) {
      picojson::object f;
      f["enabled"] = picojson::value(resp->features[i].enabled);
      f["detail"] = JsonText(resp->features[i].detail);
      features[PbString(resp->features[i].name)] = picojson::value(f);
    }
    o["features"] = picojson::value(features);
    o["jobs"] = no_counts.empty() ? CountsJson(counts.jobs, counts.by_status) : picojson::value();
    o["tasks"] = no_counts.empty() ? CountsJson(counts.tasks, counts.by_state) : picojson::value();
    if (!no_counts.empty()) o["jobs_error"] = picojson::value(no_counts);
    PrintJson(picojson::value(o));
    return kExitOk;
  }
  std::string pids = resp->keeper_pid > 0 ? Format("keeper pid %d, worker pid %d", resp->keeper_pid, resp->pid)
                                          : Format("agent pid %d (no keeper)", resp->pid);
  std::printf("outpost %s (%s), %s, up %s\n", PbString(resp->version).c_str(), PbString(resp->arch).c_str(),
              pids.c_str(), HumanUptime(resp->uptime_nanos).c_str());
  std::printf("  config:       %s (loaded %s)\n", config.empty() ? "(built-in defaults)" : config.c_str(),
              FormatWallTime(resp->config_loaded_unix_nanos).c_str());
  std::printf("  api socket:   %s (%d connection%s)\n", PbString(resp->api_socket).c_str(), resp->api_connections,
              resp->api_connections == 1 ? "" : "s");
  std::printf("  state dir:    %s\n", PbString(resp->state_dir).c_str());
  std::printf("  runtime dir:  %s\n", PbString(resp->runtime_dir).c_str());
  if (no_counts.empty()) {
    std::printf("  jobs:         %zu (%s)\n", counts.jobs, CountsText(counts.by_status).c_str());
    std::printf("  tasks:        %zu (%s)\n", counts.tasks, CountsText(counts.by_state).c_str());
  } else {
    std::printf("  jobs:         unavailable: %s\n", no_counts.c_str());
  }
  std::printf("  features:\n");
  for (pb_size_t i = 0; i < resp->features_count; ++i) {
    std::printf("    %-12s %-4s %s\n", PbString(resp->features[i].name).c_str(),
                resp->features[i].enabled ? "on" : "off", PbString(resp->features[i].detail).c_str());
  }
  return kExitOk;
}

int RunVersion(const GlobalOptions& opts, const std::vector<std::string>& args) {
  if (!args.empty()) return Fail(kExitUsage, "version takes no arguments");
  if (opts.json) {
    PrintJson(JsonObject1("version", OUTPOST_VERSION));
  } else {
    std::printf("outpost %s\n", OUTPOST_VERSION);
  }
  return kExitOk;
}

}  // namespace outpost::cli
