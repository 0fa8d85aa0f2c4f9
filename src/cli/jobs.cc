// Job-level commands: ps and inspect (start, stop, rm and restart: job_ctl.cc).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/job_view.h"
#include "cli/util.h"
#include "job.pb.h"

namespace outpost::cli {

const char kPsHelp[] =
    "Usage: outpost ps [PATTERN...] [--status WORD[,WORD...]] [--json]\n"
    "\n"
    "Lists jobs: status (pending, running, degraded, backoff, failed, complete,\n"
    "stopping, stopped, restarting, removing: docs/supervision.md), running/total\n"
    "tasks, health, restarts, where the job came from (api or a jobs.d file),\n"
    "spec version and age (45s, 2m, 3h, 5d). Job files in jobs.d that are\n"
    "invalid are listed below the table with their errors.\n"
    "\n"
    "Options:\n"
    "  PATTERN         only jobs whose name matches one of these shell globs\n"
    "                  (quote them: 'web*')\n"
    "  --status WORD   only jobs with this status (repeat it, or WORD,WORD)\n"
    "\n"
    "Examples:\n"
    "  outpost ps\n"
    "  outpost ps 'web*'\n"
    "  outpost ps --status failed,backoff\n"
    "  outpost ps --json | jq '.jobs[] | select(.status != \"running\") | .id'\n";

const char kInspectHelp[] =
    "Usage: outpost inspect JOB[/TASK] [--lines N] [--json]\n"
    "\n"
    "Shows a job (status, source, version, labels, and each task's state,\n"
    "pid, restarts and why it is not running, and the cgroup limits of the\n"
    "job and its tasks, each enforced or why not), or one task of it in\n"
    "detail: why its last run ended and the last N lines (default 10) of\n"
    "its stderr and stdout. --json adds the job's full canonical spec (every\n"
    "default filled in). A task whose driver plugin is away shows state\n"
    "unknown and why.\n"
    "\n"
    "Examples:\n"
    "  outpost inspect web\n"
    "  outpost inspect web/api\n"
    "  outpost inspect web --json | jq .spec\n";

namespace {

uint64_t Restarts(const JobInfo& j) {
  uint64_t n = 0;
  for (pb_size_t i = 0; i < j.tasks_count; i++) n += j.tasks[i].restarts;
  return n;
}

// ---- ps / inspect ---------------------------------------------------------------

int Ps(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--status"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "ps");
  std::vector<std::string> statuses;
  for (const auto& [k, v] : a->opts) {
    for (const std::string& w : Split(v, ',')) {
      const auto& known = JobStatusWords();
      if (std::find(known.begin(), known.end(), w) == known.end()) {
        std::string list;
        for (const std::string& k2 : known) list += (list.empty() ? "" : ", ") + k2;
        return UsageError("--status: unknown status \"" + w + "\" (one of: " + list + ")", "ps");
      }
      statuses.push_back(w);
    }
  }
  const std::vector<std::string>& globs = a->pos;
  int code = 0;
  auto reply = CallAgent(g, "ListJobs", "", &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListJobsResponse> r(outpost_v1_ListJobsResponse_fields);
  if (!r.Decode(*reply, "ListJobsResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  std::vector<const JobInfo*> shown;
  for (pb_size_t i = 0; i < r->jobs_count; i++) {
    if (JobMatches(PbString(r->jobs[i].id), PbString(r->jobs[i].status), globs, statuses)) shown.push_back(&r->jobs[i]);
  }
  if (g.json) {
    picojson::object o;
    picojson::array jobs, problems;
    for (const JobInfo* j : shown) jobs.push_back(JobJson(*j));
    for (pb_size_t i = 0; i < r->problems_count; i++) {
      picojson::object p;
      p["file"] = picojson::value(PbString(r->problems[i].path));
      p["error"] = picojson::value(PbString(r->problems[i].error));
      problems.push_back(picojson::value(p));
    }
    o["jobs"] = picojson::value(jobs);
    o["invalid_files"] = picojson::value(problems);
    o["jobs_dir"] = JsonText(r->jobs_dir);
    o["jobs_dir_problem"] = JsonText(r->jobs_dir_problem);
    PrintJson(picojson::value(o));
    return kExitOk;
  }
  // RUNNING: tasks running now / tasks meant to run (RunningCount).
  std::printf("%-20s %-10s %-8s %-9s %-8s %-7s %-7s %-5s %s\n", "JOB", "STATUS", "RUNNING", "HEALTH", "RESTARTS",
              "SOURCE", "VERSION", "AGE", "NOTE");
  const int64_t now = WallNanos();
  for (const JobInfo* jp : shown) {
    const JobInfo& j = *jp;
    std::printf("%-20s %-10s %-8s %-9s %-8llu %-7s %-7lld %-5s %s\n", PbString(j.id).c_str(), PbString(j.status).c_str(),
                RunningCount(j).c_str(), JobHealth(j).c_str(), static_cast<unsigned long long>(Restarts(j)),
                PbString(j.source).c_str(), static_cast<long long>(j.version), Age(j.submitted_at_unix_nanos).c_str(),
                JobNote(j, now).c_str());
  }
  bool head = false;
  for (const JobInfo* jp : shown) {
    const JobInfo& j = *jp;
    if (!j.pending || !*j.pending) continue;
    if (!head) std::printf("\nPending (carried out as soon as it can be):\n");
    head = true;
    std::printf("  %s %s: %s\n", PbString(j.id).c_str(), PbString(j.status).c_str(), j.pending);
  }
  if (r->jobs_dir_problem && *r->jobs_dir_problem) std::printf("\njobs dir: %s\n", r->jobs_dir_problem);
  if (r->problems_count) {
    std::printf("\nInvalid job files (not applied; fix or remove them):\n");
    for (pb_size_t i = 0; i < r->problems_count; i++) {
      std::string err = PbString(r->problems[i].error);
      std::string path = PbString(r->problems[i].path);
      // Multi-line errors already name the file on every line.
      for (const std::string& line : Split(err, '\n')) {
        std::printf("  %s\n", StartsWith(line, path) ? line.c_str() : (path + ": " + line).c_str());
      }
    }
  }
  return kExitOk;
}

// One stats sample of a running task, as JSON (null when not running, or
// when it cannot be had: *why says why, e.g. its driver is away).
picojson::value UsageJson(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t, std::string* why) {
  if (!t.pid) return picojson::value();
  PbOwned<outpost_v1_TaskStatsResponse> st(outpost_v1_TaskStatsResponse_fields);
  if (!TaskStatsOf(g, t, true, &st, why)) return picojson::value();
  picojson::object o;
  o["memory_bytes"] = picojson::value(static_cast<int64_t>(st->rss_bytes));
  o["cpu_user_seconds"] = picojson::value(static_cast<double>(st->cpu_user_nanos) / 1e9);
  o["cpu_system_seconds"] = picojson::value(static_cast<double>(st->cpu_system_nanos) / 1e9);
  picojson::array measured;
  for (pb_size_t m = 0; m < st->measured_count; m++) measured.push_back(picojson::value(PbString(st->measured[m])));
  o["measured"] = picojson::value(measured);
  picojson::object cg;
  for (pb_size_t m = 0; m < st->cgroup_count; m++) {
    cg[PbString(st->cgroup[m].name)] = picojson::value(static_cast<int64_t>(st->cgroup[m].value));
  }
  if (!cg.empty()) o["cgroup"] = picojson::value(cg);
  return picojson::value(o);
}

// The last lines of the task's stderr and stdout, as "stderr"/"stdout" in
// JSON, or printed.
void LogTails(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t, int lines, picojson::object* json) {
  if (!t.has_task || lines <= 0) return;  // never started: no logs
  for (bool err : {true, false}) {
    const char* name = err ? "stderr" : "stdout";
    auto tail = LogTail(g, t, err, lines);
    if (json) {
      picojson::array a;
      if (tail.ok()) {
        for (const std::string& l : *tail) a.push_back(picojson::value(l));
      }
      (*json)[std::string(name) + "_tail"] = tail.ok() ? picojson::value(a) : picojson::value();
      continue;
    }
    if (!tail.ok()) {
      std::printf("%s:     unavailable: %s\n", name, tail.error().message().c_str());
    } else if (tail->empty()) {
      std::printf("%s:     (empty)\n", name);
    } else {
      std::printf("%s (last %d lines):\n", name, lines);
      for (const std::string& l : *tail) std::printf("  %s\n", l.c_str());
    }
  }
}

int InspectTaskOfJob(const GlobalOptions& g, const JobInfo& j, const std::string& task, int lines) {
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    if (PbString(t.name) != task) continue;
    std::string no_usage;
    picojson::value usage = UsageJson(g, t, &no_usage);
    if (g.json) {
      picojson::value v = TaskJson(t);
      v.get<picojson::object>()["usage"] = usage;
      if (!no_usage.empty()) v.get<picojson::object>()["usage_error"] = picojson::value(no_usage);
      LogTails(g, t, lines, &v.get<picojson::object>());
      PrintJson(v);
      return kExitOk;
    }
    std::printf("task:       %s/%s\n", PbString(j.id).c_str(), task.c_str());
    std::printf("state:      %s\n", PbString(t.state).c_str());
    std::printf("lifecycle:  %s%s\n", PbString(t.lifecycle).c_str(), t.sidecar ? " (sidecar)" : "");
    std::printf("pid:        %s\n", t.pid ? std::to_string(t.pid).c_str() : "-");
    std::string up = t.pid && t.started_at_unix_nanos ? " (up " + Age(t.started_at_unix_nanos) + ")" : "";
    std::printf("started:    %s%s\n", Time(t.started_at_unix_nanos).c_str(), up.c_str());
    std::printf("restarts:   %llu\n", static_cast<unsigned long long>(t.restarts));
    if (t.last_exit && *t.last_exit) std::printf("last exit:  %s\n", t.last_exit);
    if (!t.pid && t.has_task && t.task.completed_at_unix_nanos) {
      std::printf("ended:      %s\n", Time(t.task.completed_at_unix_nanos).c_str());
    }
    if (t.reason && *t.reason) std::printf("reason:     %s\n", t.reason);
    if (t.next_start_unix_nanos) std::printf("next start: %s\n", Time(t.next_start_unix_nanos).c_str());
    if (t.has_task) PrintNetwork(t.task);
    for (pb_size_t k = 0; k < t.devices_count; k++) {
      std::string ids;
      for (pb_size_t n = 0; n < t.devices[k].ids_count; n++) ids += (n ? ", " : "") + PbString(t.devices[k].ids[n]);
      std::printf("%-12s%s: %s\n", k ? "" : "devices:", PbString(t.devices[k].resource).c_str(), ids.c_str());
    }
    for (pb_size_t k = 0; k < t.device_annotations_count; k++) {
      std::printf("%-12sannotation %s=%s\n", "", PbString(t.device_annotations[k].name).c_str(),
                  PbString(t.device_annotations[k].value).c_str());
    }
    PrintTaskChecks(t);
    if (usage.is<picojson::object>()) {
      const picojson::object& u = usage.get<picojson::object>();
      std::string line = Format("memory %.1f MiB", static_cast<double>(u.at("memory_bytes").get<int64_t>()) / (1 << 20));
      auto c = u.find("cgroup");
      if (c != u.end()) {
        const picojson::object& cg = c->second.get<picojson::object>();
        auto num = [&](const char* k) {
          auto it = cg.find(k);
          return it == cg.end() ? int64_t{-1} : it->second.get<int64_t>();
        };
        if (num("pids.current") >= 0) line += Format(", pids %lld", static_cast<long long>(num("pids.current")));
        if (num("cpu.stat.nr_throttled") >= 0) {
          line += Format(", throttled %lld times", static_cast<long long>(num("cpu.stat.nr_throttled")));
        }
        if (num("memory.events.oom_kill") > 0) {
          line += Format(", OOM kills %lld", static_cast<long long>(num("memory.events.oom_kill")));
        }
      }
      std::string measured;
      for (const auto& m : u.at("measured").get<picojson::array>()) measured += (measured.empty() ? "" : ", ") + m.to_str();
      std::printf("usage:      %s (measured: %s)\n", line.c_str(), measured.c_str());
    } else if (!no_usage.empty()) {
      std::printf("usage:      unavailable: %s\n", no_usage.c_str());
    }
    if (t.has_task) {
      std::printf("command:    %s\n", CommandText(t.task.command, t.task.args, t.task.args_count).c_str());
      std::printf("user:       %s\n", t.task.user && *t.task.user ? t.task.user : "(agent's user)");
      std::printf("workdir:    %s\n", PbString(t.task.workdir).c_str());
      std::printf("logs:       %s (%llu bytes written", PbString(t.task.log_dir).c_str(),
                  static_cast<unsigned long long>(t.task.log_bytes));
      if (t.task.log_dropped_bytes) {
        std::printf(", %llu dropped", static_cast<unsigned long long>(t.task.log_dropped_bytes));
      }
      std::printf(")\n");
      if (t.task.log_error && *t.task.log_error) std::printf("log error:  %s\n", t.task.log_error);
      PrintLimits(t.task.limits, t.task.limits_count);
      PrintHookRuns(t.task);
    }
    LogTails(g, t, lines, nullptr);
    return kExitOk;
  }
  std::string names;
  for (pb_size_t i = 0; i < j.tasks_count; i++) names += (i ? ", " : "") + PbString(j.tasks[i].name);
  return Fail(kExitFailure, "job \"" + PbString(j.id) + "\" has no task \"" + task + "\" (tasks: " + names + ")");
}

int InspectCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--lines"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "inspect");
  if (a->pos.size() != 1) return UsageError("inspect needs one JOB or JOB/TASK", "inspect");
  int lines = 10;
  if (const std::string* n = a->Get("--lines")) {
    auto v = ParseInt(*n, 0, 1000);
    if (!v.ok()) return UsageError("--lines: " + v.error().message(), "inspect");
    lines = static_cast<int>(*v);
  }
  std::string id, task;
  SplitRef(a->pos[0], &id, &task);
  int code = 0;
  PbOwned<JobInfo> j(outpost_v1_JobInfo_fields);
  if (!InspectJob(g, id, &j, &code)) return code;
  if (!task.empty()) return InspectTaskOfJob(g, *j, task, lines);
  if (g.json) {
    PrintJson(JobJson(*j));
    return kExitOk;
  }
  std::printf("job:        %s\n", PbString(j->id).c_str());
  std::printf("status:     %s\n", PbString(j->status).c_str());
  if (j->pending && *j->pending) std::printf("pending:    %s\n", j->pending);
  std::printf("desired:    %s\n", PbString(j->desired).c_str());
  std::printf("source:     %s%s%s\n", PbString(j->source).c_str(), j->file && *j->file ? " " : "",
              PbString(j->file).c_str());
  std::printf("version:    %lld (submitted %s)\n", static_cast<long long>(j->version),
              Time(j->submitted_at_unix_nanos).c_str());
  if (j->labels_count) {
    std::string l;
    for (pb_size_t i = 0; i < j->labels_count; i++) {
      l += (i ? " " : "") + PbString(j->labels[i].name) + "=" + QuoteIfNeeded(PbString(j->labels[i].value));
    }
    std::printf("labels:     %s\n", l.c_str());
  }
  std::printf("tasks:\n");
  PrintTaskTable(*j, "  ");
  PrintJobLimits(*j);
  return kExitOk;
}

}  // namespace

int RunPs(const GlobalOptions& g, const std::vector<std::string>& a) { return Ps(g, a); }
int RunInspect(const GlobalOptions& g, const std::vector<std::string>& a) { return InspectCmd(g, a); }

}  // namespace outpost::cli
