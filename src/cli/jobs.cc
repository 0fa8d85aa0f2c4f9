// Job-level commands: ps, inspect, stop, rm, restart.
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
    "Usage: outpost ps [--json]\n"
    "\n"
    "Lists jobs: status (pending, running, degraded, backoff, failed, complete,\n"
    "stopping, stopped), running/total tasks, restarts, where the job came\n"
    "from (api or a jobs.d file), spec version and age. Job files in jobs.d\n"
    "that are invalid are listed below the table with their errors.\n"
    "\n"
    "Examples:\n"
    "  outpost ps\n"
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

const char kStopHelp[] =
    "Usage: outpost stop JOB [--timeout DUR]\n"
    "\n"
    "Stops every task of the job (main and poststart tasks first, prestart\n"
    "sidecars last): each gets its kill_signal, then SIGKILL after its\n"
    "kill_timeout (or DUR). The job stays, marked stopped, also across agent\n"
    "restarts and reboots; `outpost run` or `outpost restart` starts it again.\n"
    "Returns once every task has stopped. A task whose driver is away cannot\n"
    "be stopped yet: after waiting DUR (default 10s) for it, the command says\n"
    "the stop is pending and why, and fails; the agent stops the task as soon\n"
    "as its driver is back.\n"
    "\n"
    "Examples:\n"
    "  outpost stop web\n"
    "  outpost stop web --timeout 30s\n";

const char kRmHelp[] =
    "Usage: outpost rm JOB [--timeout DUR]\n"
    "\n"
    "Stops the job and removes it with its tasks' private dirs and logs.\n"
    "A job that comes from a jobs.d file is removed by removing the file.\n"
    "Returns once the job is gone. While a task's driver is away the job\n"
    "cannot be removed (the driver still has the task): after waiting DUR\n"
    "(default 10s) the command says the removal is pending and why, and\n"
    "fails; the job shows as removing, and the agent removes it as soon as\n"
    "the driver is back.\n"
    "\n"
    "Examples:\n"
    "  outpost rm web\n";

const char kRestartHelp[] =
    "Usage: outpost restart JOB[/TASK]\n"
    "\n"
    "Restarts one task, or the whole job (stopped, then started again in\n"
    "lifecycle order). The restart-policy window starts afresh; a failed task\n"
    "is given a new chance; a stopped job is started.\n"
    "\n"
    "Examples:\n"
    "  outpost restart web/api\n"
    "  outpost restart web\n";

namespace {

uint64_t Restarts(const JobInfo& j) {
  uint64_t n = 0;
  for (pb_size_t i = 0; i < j.tasks_count; i++) n += j.tasks[i].restarts;
  return n;
}

// ---- ps / inspect ---------------------------------------------------------------

int Ps(const GlobalOptions& g, const std::vector<std::string>& in) {
  if (!in.empty()) return UsageError("ps takes no arguments", "ps");
  int code = 0;
  auto reply = CallAgent(g, "ListJobs", "", &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListJobsResponse> r(outpost_v1_ListJobsResponse_fields);
  if (!r.Decode(*reply, "ListJobsResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  if (g.json) {
    picojson::object o;
    picojson::array jobs, problems;
    for (pb_size_t i = 0; i < r->jobs_count; i++) jobs.push_back(JobJson(r->jobs[i]));
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
  for (pb_size_t i = 0; i < r->jobs_count; i++) {
    const JobInfo& j = r->jobs[i];
    std::printf("%-20s %-10s %-8s %-9s %-8llu %-7s %-7lld %-5s %s\n", PbString(j.id).c_str(), PbString(j.status).c_str(),
                RunningCount(j).c_str(), JobHealth(j).c_str(), static_cast<unsigned long long>(Restarts(j)),
                PbString(j.source).c_str(), static_cast<long long>(j.version), Age(j.submitted_at_unix_nanos).c_str(),
                JobNote(j, now).c_str());
  }
  bool head = false;
  for (pb_size_t i = 0; i < r->jobs_count; i++) {
    const JobInfo& j = r->jobs[i];
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
    std::printf("started:    %s\n", Time(t.started_at_unix_nanos).c_str());
    std::printf("restarts:   %llu\n", static_cast<unsigned long long>(t.restarts));
    if (t.last_exit && *t.last_exit) std::printf("last exit:  %s\n", t.last_exit);
    if (!t.pid && t.has_task && t.task.completed_at_unix_nanos) {
      std::printf("ended:      %s\n", Time(t.task.completed_at_unix_nanos).c_str());
    }
    if (t.reason && *t.reason) std::printf("reason:     %s\n", t.reason);
    if (t.next_start_unix_nanos) std::printf("next start: %s\n", Time(t.next_start_unix_nanos).c_str());
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
      std::string args;
      for (pb_size_t k = 0; k < t.task.args_count; ++k) args += " " + QuoteIfNeeded(PbString(t.task.args[k]));
      std::printf("command:    %s%s\n", PbString(t.task.command).c_str(), args.c_str());
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

// ---- stop / rm / restart ------------------------------------------------------------

int StopCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--timeout"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "stop");
  if (a->pos.size() != 1) return UsageError("stop needs one JOB", "stop");
  std::string id = a->pos[0];
  if (id.find('/') != std::string::npos) {
    return UsageError("stop takes a whole job; to stop one task for good, remove it from the job's spec", "stop");
  }
  outpost_v1_StopJobRequest req = outpost_v1_StopJobRequest_init_zero;
  req.id = PbStr(id);
  req.timeout_nanos = -1;
  int64_t wait = kDefaultCallTimeoutNanos + 120 * kNanosPerSecond;
  if (const std::string* t = a->Get("--timeout")) {
    auto d = ParseDuration(*t);
    if (!d.ok()) return UsageError("--timeout: " + d.error().message(), "stop");
    req.timeout_nanos = *d;
    req.wait_nanos = *d;
    wait = kDefaultCallTimeoutNanos + 2 * *d;
  }
  int code = 0;
  auto reply = CallAgent(g, "StopJob", *PbEncode(outpost_v1_StopJobRequest_fields, &req, "StopJobRequest"), &code, wait);
  if (!reply.ok()) return code;
  if (g.json) std::printf("{\"stopped\": \"%s\"}\n", id.c_str());
  else std::printf("job %s stopped\n", id.c_str());
  return kExitOk;
}

int RmCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--timeout"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "rm");
  if (a->pos.size() != 1 || a->pos[0].empty()) return UsageError("rm needs one JOB", "rm");
  const std::string& id = a->pos[0];
  outpost_v1_RemoveJobRequest req = outpost_v1_RemoveJobRequest_init_zero;
  req.id = PbStr(id);
  int64_t wait = kDefaultCallTimeoutNanos + 120 * kNanosPerSecond;
  if (const std::string* t = a->Get("--timeout")) {
    auto d = ParseDuration(*t);
    if (!d.ok()) return UsageError("--timeout: " + d.error().message(), "rm");
    req.wait_nanos = *d;
    wait += *d;
  }
  int code = 0;
  auto reply =
      CallAgent(g, "RemoveJob", *PbEncode(outpost_v1_RemoveJobRequest_fields, &req, "RemoveJobRequest"), &code, wait);
  if (!reply.ok()) return code;
  if (g.json) std::printf("{\"removed\": \"%s\"}\n", id.c_str());
  else std::printf("job %s removed\n", id.c_str());
  return kExitOk;
}

int RestartCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  if (in.size() != 1 || in[0].empty() || in[0][0] == '-') return UsageError("restart needs one JOB or JOB/TASK", "restart");
  std::string id, task;
  SplitRef(in[0], &id, &task);
  outpost_v1_RestartJobRequest req = outpost_v1_RestartJobRequest_init_zero;
  req.id = PbStr(id);
  req.task = PbStr(task);
  int code = 0;
  auto reply =
      CallAgent(g, "RestartJob", *PbEncode(outpost_v1_RestartJobRequest_fields, &req, "RestartJobRequest"), &code);
  if (!reply.ok()) return code;
  if (g.json) std::printf("{\"restarting\": \"%s\"}\n", in[0].c_str());
  else std::printf("restarting %s\n", in[0].c_str());
  return kExitOk;
}

}  // namespace

int RunPs(const GlobalOptions& g, const std::vector<std::string>& a) { return Ps(g, a); }
int RunInspect(const GlobalOptions& g, const std::vector<std::string>& a) { return InspectCmd(g, a); }
int RunStop(const GlobalOptions& g, const std::vector<std::string>& a) { return StopCmd(g, a); }
int RunRm(const GlobalOptions& g, const std::vector<std::string>& a) { return RmCmd(g, a); }
int RunRestart(const GlobalOptions& g, const std::vector<std::string>& a) { return RestartCmd(g, a); }

}  // namespace outpost::cli
