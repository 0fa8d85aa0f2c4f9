// Job-level commands: run, ps, inspect, stop, rm, restart, stats (and exec /
// signal, which address a job's task as JOB/TASK through the task API).
#include <unistd.h>

#include <cstdio>
#include <map>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "job.pb.h"
#include "job/spec.h"

namespace outpost::cli {

namespace {

using JobInfo = outpost_v1_JobInfo;

picojson::value Pairs(const outpost_v1_EnvVar* v, pb_size_t n) {
  picojson::object o;
  for (pb_size_t i = 0; i < n; i++) o[PbString(v[i].name)] = picojson::value(PbString(v[i].value));
  return picojson::value(o);
}

picojson::value TaskJson(const outpost_v1_JobTaskInfo& t) {
  picojson::object o;
  o["name"] = picojson::value(PbString(t.name));
  o["task_id"] = picojson::value(PbString(t.task_id));
  o["state"] = picojson::value(PbString(t.state));
  o["lifecycle"] = picojson::value(PbString(t.lifecycle));
  o["sidecar"] = picojson::value(t.sidecar);
  o["pid"] = picojson::value(static_cast<int64_t>(t.pid));
  o["started_at"] = picojson::value(Time(t.started_at_unix_nanos));
  o["restarts"] = picojson::value(static_cast<int64_t>(t.restarts));
  o["failed"] = picojson::value(t.failed);
  o["completed"] = picojson::value(t.completed);
  o["reason"] = picojson::value(PbString(t.reason));
  o["last_exit"] = picojson::value(PbString(t.last_exit));
  o["next_start_at"] = picojson::value(Time(t.next_start_unix_nanos));
  if (t.has_task) o["task"] = InfoJson(t.task);
  return picojson::value(o);
}

picojson::value JobJson(const JobInfo& j) {
  picojson::object o;
  o["id"] = picojson::value(PbString(j.id));
  o["status"] = picojson::value(PbString(j.status));
  o["desired"] = picojson::value(PbString(j.desired));
  o["source"] = picojson::value(PbString(j.source));
  o["file"] = picojson::value(PbString(j.file));
  o["version"] = picojson::value(j.version);
  o["submitted_at"] = picojson::value(Time(j.submitted_at_unix_nanos));
  o["labels"] = Pairs(j.labels, j.labels_count);
  o["annotations"] = Pairs(j.annotations, j.annotations_count);
  picojson::array tasks;
  for (pb_size_t i = 0; i < j.tasks_count; i++) tasks.push_back(TaskJson(j.tasks[i]));
  o["tasks"] = picojson::value(tasks);
  if (j.spec_json && *j.spec_json) {
    picojson::value spec;
    std::string err = picojson::parse(spec, std::string(j.spec_json));
    if (err.empty()) o["spec"] = spec;
  }
  return picojson::value(o);
}

// Splits JOB/TASK; task is "" for JOB.
void SplitRef(const std::string& ref, std::string* job, std::string* task) {
  size_t slash = ref.find('/');
  *job = ref.substr(0, slash);
  *task = slash == std::string::npos ? "" : ref.substr(slash + 1);
}

Result<std::string> IdRequest(const std::string& id) {
  outpost_v1_JobIdRequest req = outpost_v1_JobIdRequest_init_zero;
  req.id = PbStr(id);
  return PbEncode(outpost_v1_JobIdRequest_fields, &req, "JobIdRequest");
}

// InspectJob; on failure the error is printed and *code set.
bool Inspect(const GlobalOptions& g, const std::string& id, PbOwned<JobInfo>* out, int* code) {
  auto reply = CallAgent(g, "InspectJob", *IdRequest(id), code);
  if (!reply.ok()) return false;
  if (!out->Decode(*reply, "JobInfo").ok()) {
    *code = Fail(kExitFailure, "bad reply from the agent");
    return false;
  }
  return true;
}

int RunningTasks(const JobInfo& j) {
  int n = 0;
  for (pb_size_t i = 0; i < j.tasks_count; i++) n += std::strcmp(j.tasks[i].state, "running") == 0;
  return n;
}

uint64_t Restarts(const JobInfo& j) {
  uint64_t n = 0;
  for (pb_size_t i = 0; i < j.tasks_count; i++) n += j.tasks[i].restarts;
  return n;
}

std::string TaskNote(const outpost_v1_JobTaskInfo& t) {
  std::string r = PbString(t.reason);
  if (r.empty() && t.last_exit && *t.last_exit) r = "last: " + PbString(t.last_exit);
  return r.empty() ? "-" : r;
}

void PrintTaskTable(const JobInfo& j, const char* indent) {
  std::printf("%s%-16s %-9s %-7s %-8s %-10s %s\n", indent, "TASK", "STATE", "PID", "RESTARTS", "LIFECYCLE", "NOTE");
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    std::string life = PbString(t.lifecycle) + (t.sidecar ? "+sidecar" : "");
    std::string pid = t.pid ? std::to_string(t.pid) : "-";
    std::printf("%s%-16s %-9s %-7s %-8llu %-10s %s\n", indent, PbString(t.name).c_str(), PbString(t.state).c_str(),
                pid.c_str(), static_cast<unsigned long long>(t.restarts), life.c_str(), TaskNote(t).c_str());
  }
}

// No task is on its way to another state: each runs or has ended for good.
bool Settled(const JobInfo& j) {
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    std::string st = PbString(j.tasks[i].state);
    if (st != "running" && st != "dead") return false;
  }
  return j.tasks_count > 0;
}

// "task b failed (exit code 3; ...)", for each task that failed for good.
std::string FailedTasks(const JobInfo& j) {
  std::string out;
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    if (!t.failed) continue;
    if (!out.empty()) out += ", ";
    out += "task " + PbString(t.name) + " failed";
    if (t.last_exit && *t.last_exit) out += " (" + PbString(t.last_exit) + ")";
  }
  return out;
}

// ---- run ----------------------------------------------------------------------

Result<std::string> ReadSpec(const std::string& path) {
  if (path == "-") {
    std::string text;
    char buf[65536];
    for (;;) {
      ssize_t n = sys::Read(0, buf, sizeof buf);
      if (n < 0) return ErrnoError("read the job spec from stdin");
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (text.size() > job::kMaxSpecBytes) {
        return Error(Code::kInvalidArgument, "stdin: the job spec is larger than the 1 MiB limit");
      }
    }
    return text;
  }
  auto text = sys::ReadFile(path, job::kMaxSpecBytes);
  if (!text.ok() && text.error().code() == Code::kResourceExhausted) {
    return Error(Code::kInvalidArgument, path + ": the job spec is larger than the 1 MiB limit");
  }
  if (!text.ok()) return Error(text.error().code(), path + ": " + text.error().message());
  return text;
}

int Run(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"-f", "--file", "--timeout"}, {"--detach", "-d"});
  if (!a.ok()) return UsageError(a.error().message(), "run");
  const std::string* file = a->Get("-f") ? a->Get("-f") : a->Get("--file");
  if (!file && a->pos.size() == 1) file = &a->pos[0];
  else if (!a->pos.empty()) return UsageError("run takes one job file (-f FILE, or - for stdin)", "run");
  if (!file) return UsageError("run needs a job file: -f FILE (or -f - for stdin)", "run");
  int64_t timeout = 60 * kNanosPerSecond;
  if (const std::string* t = a->Get("--timeout")) {
    auto d = ParseDuration(*t);
    if (!d.ok()) return UsageError("--timeout: " + d.error().message(), "run");
    timeout = *d;
  }
  auto text = ReadSpec(*file);
  if (!text.ok()) return Fail(kExitUsage, text.error().message());
  outpost_v1_SubmitJobRequest req = outpost_v1_SubmitJobRequest_init_zero;
  req.spec_json = PbStr(*text);
  int code = 0;
  auto reply =
      CallAgentQuiet(g, "SubmitJob", *PbEncode(outpost_v1_SubmitJobRequest_fields, &req, "SubmitJobRequest"), &code);
  if (!reply.ok()) {
    if (code != kExitFailure) return code;  // no agent: already reported
    const Error& e = reply.error();
    if (e.code() != Code::kInvalidArgument) return Fail(kExitFailure, e.message());
    // The agent lists every problem, one per line, by JSON path.
    std::string where = *file == "-" ? "from stdin" : "in " + *file;
    std::string msg = "invalid job spec " + where + " (nothing was changed):";
    for (const std::string& line : Split(e.message(), '\n')) msg += "\n  " + line;
    return Fail(kExitUsage, msg);
  }
  PbOwned<outpost_v1_SubmitJobResponse> resp(outpost_v1_SubmitJobResponse_fields);
  if (!resp.Decode(*reply, "SubmitJobResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  std::string id = PbString(resp->job.id);
  if (!g.json) {
    if (resp->created) {
      std::printf("job %s created\n", id.c_str());
    } else if (resp->unchanged) {
      std::printf("job %s unchanged (version %lld)\n", id.c_str(), static_cast<long long>(resp->job.version));
    } else {
      std::string what;
      auto list = [&](const char* label, char** v, pb_size_t n) {
        if (!n) return;
        what += std::string("; ") + label + ":";
        for (pb_size_t i = 0; i < n; i++) what += (i ? ", " : " ") + PbString(v[i]);
      };
      list("restarting", resp->restarted, resp->restarted_count);
      list("added", resp->added, resp->added_count);
      list("removed", resp->removed, resp->removed_count);
      std::printf("job %s updated to version %lld%s\n", id.c_str(), static_cast<long long>(resp->job.version),
                  what.c_str());
    }
  }
  if (a->Has("--detach") || a->Has("-d")) {
    if (g.json) PrintJson(JobJson(resp->job));
    return kExitOk;
  }
  // Wait until the job runs (or completes), fails, or the timeout passes.
  int64_t deadline = MonotonicNanos() + timeout;
  for (;;) {
    PbOwned<JobInfo> j(outpost_v1_JobInfo_fields);
    if (!Inspect(g, id, &j, &code)) return code;
    std::string status = PbString(j->status);
    bool ok = status == "running" || status == "complete";
    if (ok || status == "failed" || Settled(*j) || MonotonicNanos() >= deadline) {
      if (g.json) {
        PrintJson(JobJson(*j));
      } else {
        std::printf("job %s %s %s\n", id.c_str(), status == "failed" ? "has" : "is", status.c_str());
        PrintTaskTable(*j, "  ");
      }
      if (ok) return kExitOk;
      std::string see = "; see `outpost inspect " + id + "` and `outpost events " + id + "`";
      std::string failed = FailedTasks(*j);
      if (!failed.empty()) return Fail(kExitFailure, "job " + id + " " + status + ": " + failed + see);
      return Fail(kExitFailure, "job " + id + " is not running after " + FormatDuration(timeout) + " (status " +
                                    status + ")" + see);
    }
    usleep(100000);
  }
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
    o["jobs_dir"] = picojson::value(PbString(r->jobs_dir));
    o["jobs_dir_problem"] = picojson::value(PbString(r->jobs_dir_problem));
    PrintJson(picojson::value(o));
    return kExitOk;
  }
  // RUNNING: tasks running now / all tasks (finished prestart tasks count
  // as not running).
  std::printf("%-20s %-10s %-8s %-8s %-7s %-7s %s\n", "JOB", "STATUS", "RUNNING", "RESTARTS", "SOURCE", "VERSION",
              "AGE");
  for (pb_size_t i = 0; i < r->jobs_count; i++) {
    const JobInfo& j = r->jobs[i];
    std::string tasks = Format("%d/%d", RunningTasks(j), static_cast<int>(j.tasks_count));
    std::printf("%-20s %-10s %-8s %-8llu %-7s %-7lld %s\n", PbString(j.id).c_str(), PbString(j.status).c_str(),
                tasks.c_str(), static_cast<unsigned long long>(Restarts(j)), PbString(j.source).c_str(),
                static_cast<long long>(j.version), Age(j.submitted_at_unix_nanos).c_str());
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

// One stats sample of a running task, as JSON (null when not running).
picojson::value UsageJson(const GlobalOptions& g, const outpost_v1_JobTaskInfo& t) {
  if (!t.pid) return picojson::value();
  outpost_v1_TaskIdRequest req = outpost_v1_TaskIdRequest_init_zero;
  std::string tid = PbString(t.task_id);
  req.id = PbStr(tid);
  int code = 0;
  auto r = CallAgentQuiet(g, "TaskStats", *PbEncode(outpost_v1_TaskIdRequest_fields, &req, "TaskIdRequest"), &code);
  PbOwned<outpost_v1_TaskStatsResponse> st(outpost_v1_TaskStatsResponse_fields);
  if (!r.ok() || !st.Decode(*r, "TaskStatsResponse").ok()) return picojson::value();
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

int InspectTaskOfJob(const GlobalOptions& g, const JobInfo& j, const std::string& task) {
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    if (PbString(t.name) != task) continue;
    picojson::value usage = UsageJson(g, t);
    if (g.json) {
      picojson::value v = TaskJson(t);
      v.get<picojson::object>()["usage"] = usage;
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
    if (t.reason && *t.reason) std::printf("reason:     %s\n", t.reason);
    if (t.next_start_unix_nanos) std::printf("next start: %s\n", Time(t.next_start_unix_nanos).c_str());
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
    }
    return kExitOk;
  }
  std::string names;
  for (pb_size_t i = 0; i < j.tasks_count; i++) names += (i ? ", " : "") + PbString(j.tasks[i].name);
  return Fail(kExitFailure, "job \"" + PbString(j.id) + "\" has no task \"" + task + "\" (tasks: " + names + ")");
}

int InspectCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  if (in.size() != 1) return UsageError("inspect needs one JOB or JOB/TASK", "inspect");
  std::string id, task;
  SplitRef(in[0], &id, &task);
  int code = 0;
  PbOwned<JobInfo> j(outpost_v1_JobInfo_fields);
  if (!Inspect(g, id, &j, &code)) return code;
  if (!task.empty()) return InspectTaskOfJob(g, *j, task);
  if (g.json) {
    PrintJson(JobJson(*j));
    return kExitOk;
  }
  std::printf("job:        %s\n", PbString(j->id).c_str());
  std::printf("status:     %s\n", PbString(j->status).c_str());
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
  if (in.size() != 1 || in[0].empty() || in[0][0] == '-') return UsageError("rm needs one JOB", "rm");
  int code = 0;
  auto reply = CallAgent(g, "RemoveJob", *IdRequest(in[0]), &code, kDefaultCallTimeoutNanos + 120 * kNanosPerSecond);
  if (!reply.ok()) return code;
  if (g.json) std::printf("{\"removed\": \"%s\"}\n", in[0].c_str());
  else std::printf("job %s removed\n", in[0].c_str());
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

// ---- stats ----------------------------------------------------------------------

struct Sample {
  std::string ref;  // JOB/TASK
  int pid = 0;
  bool ok = false;
  uint64_t rss = 0;
  double cpu = 0;
  double user_s = 0, system_s = 0;
  std::string measured;
  std::map<std::string, uint64_t> cgroup;
};

Result<std::vector<Sample>> SampleAll(const GlobalOptions& g, const std::string& only_job,
                                      const std::string& only_task, int* code) {
  std::vector<std::pair<std::string, JobInfo>> jobs;
  PbOwned<outpost_v1_ListJobsResponse> list(outpost_v1_ListJobsResponse_fields);
  auto reply = CallAgent(g, "ListJobs", "", code);
  if (!reply.ok()) return Error(Code::kUnavailable, "");
  if (!list.Decode(*reply, "ListJobsResponse").ok()) return Error(Code::kInternal, "bad reply from the agent");
  std::vector<Sample> out;
  bool found = only_job.empty();
  for (pb_size_t i = 0; i < list->jobs_count; i++) {
    const JobInfo& j = list->jobs[i];
    if (!only_job.empty() && PbString(j.id) != only_job) continue;
    found = true;
    for (pb_size_t k = 0; k < j.tasks_count; k++) {
      const outpost_v1_JobTaskInfo& t = j.tasks[k];
      if (!only_task.empty() && PbString(t.name) != only_task) continue;
      Sample s;
      s.ref = PbString(j.id) + "/" + PbString(t.name);
      s.pid = t.pid;
      if (t.pid) {
        outpost_v1_TaskIdRequest req = outpost_v1_TaskIdRequest_init_zero;
        std::string tid = PbString(t.task_id);
        req.id = PbStr(tid);
        int c = 0;
        auto r = CallAgent(g, "TaskStats", *PbEncode(outpost_v1_TaskIdRequest_fields, &req, "TaskIdRequest"), &c);
        PbOwned<outpost_v1_TaskStatsResponse> st(outpost_v1_TaskStatsResponse_fields);
        if (r.ok() && st.Decode(*r, "TaskStatsResponse").ok()) {
          s.ok = true;
          s.rss = st->rss_bytes;
          s.cpu = st->cpu_percent;
          s.user_s = static_cast<double>(st->cpu_user_nanos) / 1e9;
          s.system_s = static_cast<double>(st->cpu_system_nanos) / 1e9;
          for (pb_size_t m = 0; m < st->measured_count; m++) s.measured += (m ? "," : "") + PbString(st->measured[m]);
          for (pb_size_t m = 0; m < st->cgroup_count; m++) s.cgroup[PbString(st->cgroup[m].name)] = st->cgroup[m].value;
        }
      }
      out.push_back(std::move(s));
    }
  }
  if (!found) {
    *code = Fail(kExitFailure, "job \"" + only_job + "\" not found");
    return Error(Code::kNotFound, "");
  }
  return out;
}

void PrintStatsTable(const std::vector<Sample>& v) {
  std::printf("%-28s %-7s %6s %10s %9s %9s\n", "TASK", "PID", "CPU%", "MEMORY", "USER", "SYSTEM");
  for (const Sample& s : v) {
    if (!s.ok) {
      std::printf("%-28s %-7s %6s %10s %9s %9s\n", s.ref.c_str(), "-", "-", "-", "-", "-");
      continue;
    }
    std::printf("%-28s %-7d %6.1f %10s %8.2fs %8.2fs\n", s.ref.c_str(), s.pid, s.cpu,
                Format("%.1fMiB", static_cast<double>(s.rss) / (1 << 20)).c_str(), s.user_s, s.system_s);
  }
}

int StatsCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--interval"}, {"-f", "--follow"});
  if (!a.ok()) return UsageError(a.error().message(), "stats");
  if (a->pos.size() > 1) return UsageError("stats takes at most one JOB or JOB/TASK", "stats");
  bool follow = a->Has("-f") || a->Has("--follow");
  int64_t interval = kNanosPerSecond;
  if (const std::string* t = a->Get("--interval")) {
    auto d = ParseDuration(*t);
    if (!d.ok() || *d < 100 * kNanosPerMilli) return UsageError("--interval: expected a duration of at least 100ms", "stats");
    interval = *d;
  }
  std::string job, task;
  if (!a->pos.empty()) SplitRef(a->pos[0], &job, &task);
  bool tty = ::isatty(1) == 1 && !g.json;
  int code = kExitFailure;
  // CPU percent comes from the difference to the previous sample: the first
  // sample primes it.
  auto first = SampleAll(g, job, task, &code);
  if (!first.ok()) return code;
  for (int n = 0;; n++) {
    usleep(static_cast<useconds_t>(std::min<int64_t>(interval, 500 * kNanosPerMilli) / 1000));
    if (n > 0) usleep(static_cast<useconds_t>((interval - std::min<int64_t>(interval, 500 * kNanosPerMilli)) / 1000));
    auto v = SampleAll(g, job, task, &code);
    if (!v.ok()) return code;
    if (g.json) {
      for (const Sample& s : *v) {
        picojson::object o;
        o["time"] = picojson::value(FormatWallTime(WallNanos()));
        o["task"] = picojson::value(s.ref);
        o["pid"] = picojson::value(static_cast<int64_t>(s.pid));
        o["measured"] = picojson::value(s.ok);
        o["cpu_percent"] = picojson::value(s.cpu);
        o["rss_bytes"] = picojson::value(static_cast<int64_t>(s.rss));
        o["cpu_user_seconds"] = picojson::value(s.user_s);
        o["cpu_system_seconds"] = picojson::value(s.system_s);
        o["fields"] = picojson::value(s.measured);
        if (!s.cgroup.empty()) {
          picojson::object cg;
          for (const auto& [name, value] : s.cgroup) cg[name] = picojson::value(static_cast<int64_t>(value));
          o["cgroup"] = picojson::value(cg);
        }
        std::printf("%s\n", picojson::value(o).serialize().c_str());
      }
    } else if (follow && tty) {
      std::printf("\033[H\033[2J%s  (every %s; Ctrl-C to quit)\n\n", FormatWallTime(WallNanos()).c_str(),
                  FormatDuration(interval).c_str());
      PrintStatsTable(*v);
    } else if (follow) {
      std::string t = FormatWallTime(WallNanos());
      for (const Sample& s : *v) {
        std::printf("%s %s pid=%d cpu=%.1f%% rss=%llu\n", t.c_str(), s.ref.c_str(), s.pid, s.cpu,
                    static_cast<unsigned long long>(s.rss));
      }
    } else {
      PrintStatsTable(*v);
    }
    std::fflush(stdout);
    if (!follow) return kExitOk;
  }
}

// ---- update (live limits) -----------------------------------------------------

// A flag's value as the spec writes it: a number when it is one.
picojson::value SpecValue(const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (!v.empty() && end && *end == '\0') {
    if (v.find('.') == std::string::npos) return picojson::value(static_cast<int64_t>(d));
    return picojson::value(d);
  }
  return picojson::value(v);
}

int UpdateCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  static const struct {
    const char* flag;
    const char* group;
    const char* key;
  } kFlags[] = {
      {"--memory-max", "memory", "max"}, {"--memory-high", "memory", "high"}, {"--memory-low", "memory", "low"},
      {"--swap-max", "memory", "swap_max"}, {"--cpu-max", "cpu", "max"},     {"--cpu-weight", "cpu", "weight"},
      {"--pids-max", "pids", "max"},       {"--io-weight", "io", "weight"},
  };
  std::vector<std::string> valued;
  for (const auto& f : kFlags) valued.push_back(f.flag);
  auto a = ParseArgs(in, valued, {});
  if (!a.ok()) return UsageError(a.error().message(), "update");
  if (a->pos.size() != 1) return UsageError("update needs one JOB/TASK (or JOB for the job's own limits)", "update");
  if (a->opts.empty()) return UsageError("update needs at least one limit, e.g. --memory-max 256MiB", "update");
  std::string job, task;
  SplitRef(a->pos[0], &job, &task);
  int code = 0;
  PbOwned<JobInfo> j(outpost_v1_JobInfo_fields);
  if (!Inspect(g, job, &j, &code)) return code;
  picojson::value spec;
  std::string err = picojson::parse(spec, PbString(j->spec_json));
  if (!err.empty() || !spec.is<picojson::object>()) return Fail(kExitFailure, "bad spec from the agent: " + err);
  // The job's own limits, or one task's.
  picojson::object* target = &spec.get<picojson::object>();
  if (!task.empty()) {
    target = nullptr;
    auto& tasks = spec.get<picojson::object>()["tasks"];
    if (tasks.is<picojson::array>()) {
      for (auto& t : tasks.get<picojson::array>()) {
        if (t.is<picojson::object>() && t.get<picojson::object>()["name"].to_str() == task) {
          target = &t.get<picojson::object>();
        }
      }
    }
    if (!target) return Fail(kExitFailure, "job \"" + job + "\" has no task \"" + task + "\"");
  }
  picojson::value& res = (*target)["resources"];
  if (!res.is<picojson::object>()) res = picojson::value(picojson::object());
  std::string what;
  for (const auto& [flag, value] : a->opts) {
    for (const auto& f : kFlags) {
      if (flag != f.flag) continue;
      picojson::value& grp = res.get<picojson::object>()[f.group];
      if (!grp.is<picojson::object>()) grp = picojson::value(picojson::object());
      grp.get<picojson::object>()[f.key] = SpecValue(value);
      what += std::string(what.empty() ? "" : ", ") + f.group + "." + f.key + " " + value;
    }
  }
  std::string text = spec.serialize();
  outpost_v1_SubmitJobRequest req = outpost_v1_SubmitJobRequest_init_zero;
  req.spec_json = PbStr(text);
  auto reply = CallAgent(g, "SubmitJob", *PbEncode(outpost_v1_SubmitJobRequest_fields, &req, "SubmitJobRequest"), &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_SubmitJobResponse> resp(outpost_v1_SubmitJobResponse_fields);
  if (!resp.Decode(*reply, "SubmitJobResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  bool restarted = resp->restarted_count > 0;
  if (g.json) {
    picojson::object o;
    o["updated"] = picojson::value(a->pos[0]);
    o["limits"] = picojson::value(what);
    o["restarted"] = picojson::value(restarted);
    o["version"] = picojson::value(resp->job.version);
    PrintJson(picojson::value(o));
  } else {
    std::printf("updated %s: %s (%s; job version %lld)\n", a->pos[0].c_str(), what.c_str(),
                restarted ? "the task was restarted: a limit was removed" : "live, no restart",
                static_cast<long long>(resp->job.version));
  }
  return kExitOk;
}

}  // namespace

int RunUpdate(const GlobalOptions& g, const std::vector<std::string>& a) { return UpdateCmd(g, a); }
int RunRun(const GlobalOptions& g, const std::vector<std::string>& a) { return Run(g, a); }
int RunPs(const GlobalOptions& g, const std::vector<std::string>& a) { return Ps(g, a); }
int RunInspect(const GlobalOptions& g, const std::vector<std::string>& a) { return InspectCmd(g, a); }
int RunStop(const GlobalOptions& g, const std::vector<std::string>& a) { return StopCmd(g, a); }
int RunRm(const GlobalOptions& g, const std::vector<std::string>& a) { return RmCmd(g, a); }
int RunRestart(const GlobalOptions& g, const std::vector<std::string>& a) { return RestartCmd(g, a); }
int RunStats(const GlobalOptions& g, const std::vector<std::string>& a) { return StatsCmd(g, a); }
int RunExec(const GlobalOptions& g, const std::vector<std::string>& a) { return TaskExec(g, a, "exec"); }
int RunSignal(const GlobalOptions& g, const std::vector<std::string>& a) {
  int code = TaskSignal(g, a, "signal");
  if (code == kExitOk && a.size() == 2) {
    if (g.json) PrintJson(picojson::value(picojson::object{{"signalled", picojson::value(a[0])},
                                                           {"signal", picojson::value(a[1])}}));
    else std::printf("sent %s to %s\n", a[1].c_str(), a[0].c_str());
  }
  return code;
}

}  // namespace outpost::cli
