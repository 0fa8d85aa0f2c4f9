// `outpost run` (submit a job spec and wait for its tasks) and
// `outpost update` (change live limits through the job's spec).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/job_view.h"
#include "cli/util.h"
#include "job.pb.h"
#include "job/spec.h"
#include "task.pb.h"

namespace outpost::cli {

const char kRunHelp[] =
    "Usage: outpost run -f FILE|- [--detach] [--progress] [--timeout DUR]\n"
    "                   [--min-healthy-time DUR]\n"
    "\n"
    "Submits a job spec (JSON, docs/job-spec.md) to the agent: a new job is\n"
    "started; an existing one (same id) is updated, restarting only the tasks\n"
    "whose spec changed; the same spec again leaves a stopped job stopped\n"
    "(`outpost start JOB` starts it). The spec is validated first: every\n"
    "problem is listed with its JSON path and nothing changes. Then follows\n"
    "the job's events until it is running with every main task and sidecar\n"
    "healthy (up for the job's min_healthy_time; a task with checks: its\n"
    "checks pass), or it completes or fails, and prints its tasks.\n"
    "A task that exits right away is never reported as running.\n"
    "On a terminal (stderr is a tty; or with --progress; never with --json)\n"
    "each task's state is shown as it changes: \"web/server: starting\",\n"
    "\"web/server: running\", \"web/server: healthy\".\n"
    "A start that retrying cannot heal fails the command at once, not after\n"
    "--timeout: the command does not exist (exit 127) or is not executable\n"
    "(exit 126), as a shell says it, or the user is unknown or the driver\n"
    "refused the task's config (exit 1). The agent goes on retrying by the\n"
    "task's restart policy (the file may appear); `outpost stop JOB` ends it.\n"
    "\n"
    "Options:\n"
    "  -f FILE         the job spec; - reads it from stdin\n"
    "  --detach, -d    return once the spec is accepted\n"
    "  --progress      show each task's state as it changes also when stderr\n"
    "                  is not a terminal\n"
    "  --timeout DUR   how long to wait for the tasks (default 60s)\n"
    "  --min-healthy-time DUR\n"
    "                  sets the spec's min_healthy_time: how long a task must\n"
    "                  stay up to count as healthy (default 1s; 0s: once started)\n"
    "\n"
    "Exit codes: 0 running/complete; 1 a task failed, not running in time,\n"
    "or refused (max_jobs reached, the id belongs to a jobs.d file); 2 invalid\n"
    "spec or usage; 3 no agent; 126 a task's command is not executable; 127\n"
    "a task's command does not exist.\n"
    "\n"
    "Examples:\n"
    "  outpost run -f examples/hello.json\n"
    "  outpost run -f web.json --detach\n"
    "  outpost run -f web.json --min-healthy-time 10s\n"
    "  generate-spec | outpost run -f -\n";

const char kUpdateHelp[] =
    "Usage: outpost update JOB[/TASK] [--memory-max SIZE] [--memory-high SIZE]\n"
    "                      [--memory-low SIZE] [--swap-max SIZE] [--cpu-max CPUS|\"QUOTA PERIOD\"]\n"
    "                      [--cpu-weight N] [--pids-max N] [--io-weight N]\n"
    "\n"
    "Changes the cgroup limits of a running task (or, with JOB alone, of the\n"
    "job's own cgroup) without restarting it. The new values are written to\n"
    "the job's spec (a new version, persisted), so they survive restarts and\n"
    "reboots. Removing a limit (\"max\" for a memory value) restarts the task\n"
    "in a fresh cgroup. Jobs from jobs.d files are updated by editing the file.\n"
    "A limit this node does not enforce (no usable cgroup v2 and the agent's\n"
    "cgroup_allow_without_limits set, or its controller not enabled) is\n"
    "stored all the same and reported as \"not enforced\" with the reason.\n"
    "\n"
    "Examples:\n"
    "  outpost update web/api --memory-max 256MiB\n"
    "  outpost update web/api --cpu-max 0.5 --pids-max 100\n"
    "  outpost update web --memory-max 1GiB\n";

namespace {

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

// The spec text with the job's min_healthy_time set to value. A text that
// is not a JSON object (or gives a member twice, which writing it again
// would drop) goes to the agent unchanged: its error names the problem the
// way it does without the flag.
std::string WithMinHealthyTime(const std::string& text, const std::string& value) {
  json::ParseLimits limits;
  limits.unique_members = true;
  auto doc = json::Parse(text, limits);
  if (!doc.ok() || !doc->is<picojson::object>()) return text;
  doc->get<picojson::object>()["min_healthy_time"] = picojson::value(value);
  return doc->serialize();
}

enum class Outcome { kWaiting, kUp, kFailed };

// The first task whose last start failed for good (retrying cannot heal
// it), or null.
const outpost_v1_JobTaskInfo* PermanentStartFailure(const JobInfo& j) {
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    if (j.tasks[i].start_error_permanent) return &j.tasks[i];
  }
  return nullptr;
}

// A task that is meant to keep running: a main task or a sidecar.
bool LongRunning(const outpost_v1_JobTaskInfo& t) {
  return t.sidecar || std::strcmp(t.lifecycle ? t.lifecycle : "", "main") == 0;
}

// Up: the job completed, or it runs and each long-running task is healthy
// (up for min_healthy_time; a main task that completed counts too). A task
// that exits at once is never healthy, so it is never taken as running.
// Failed: the job failed, a task failed for good, or the job was stopped.
Outcome Judge(const JobInfo& j, bool saw_failed) {
  std::string status = PbString(j.status);
  if (status == "complete") return Outcome::kUp;
  if (status == "failed" || saw_failed || PbString(j.desired) == "stopped") return Outcome::kFailed;
  if (PermanentStartFailure(j)) return Outcome::kFailed;
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    if (j.tasks[i].failed) return Outcome::kFailed;
  }
  if (status != "running") return Outcome::kWaiting;
  for (pb_size_t i = 0; i < j.tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = j.tasks[i];
    if (LongRunning(t) && !t.healthy && !(t.completed && !t.sidecar)) return Outcome::kWaiting;
  }
  return Outcome::kUp;
}

// Waits for the job to be up or to fail, deciding after each batch of its
// events (long-polled from events_seq, the last event before the
// submission) from the job's state; prints the job and returns the exit code.
int WaitForJob(const GlobalOptions& g, const std::string& id, uint64_t events_seq, int64_t timeout, bool progress) {
  int64_t deadline = MonotonicNanos() + timeout;
  uint64_t after = events_seq;
  std::string failed_event;  // "task t failed: ...", from the first `failed` event
  std::vector<std::string> shown;  // each task's progress line as last shown
  for (;;) {
    int code = 0;
    PbOwned<JobInfo> j(outpost_v1_JobInfo_fields);
    if (!InspectJob(g, id, &j, &code)) return code;
    if (progress) {
      for (const std::string& line : ProgressLines(*j, &shown)) std::fprintf(stderr, "%s\n", line.c_str());
    }
    Outcome outcome = Judge(*j, !failed_event.empty());
    int64_t left = deadline - MonotonicNanos();
    if (outcome != Outcome::kWaiting || left <= 0) {
      std::string status = PbString(j->status);
      if (g.json) {
        PrintJson(JobJson(*j));
      } else {
        std::printf("job %s %s %s\n", id.c_str(), status == "failed" ? "has" : "is", status.c_str());
        PrintTaskTable(*j, "  ");
      }
      if (outcome == Outcome::kUp) return kExitOk;
      std::string see = "; see `outpost inspect " + id + "` and `outpost events " + id + "`";
      if (const outpost_v1_JobTaskInfo* t = PermanentStartFailure(*j)) {
        std::fflush(stdout);
        int exit = t->start_exit_code == 126 || t->start_exit_code == 127 ? t->start_exit_code : kExitFailure;
        // The task is named once.
        std::string why = WithoutTaskPrefix(PbString(t->last_exit), *t);
        return Fail(exit, id + "/" + PbString(t->name) + ": " + why +
                              " (retrying cannot fix this; the agent retries by the restart policy until `outpost stop " +
                              id + "`)" + see);
      }
      std::string failed = FailedTasks(*j);
      if (failed.empty()) failed = failed_event;
      if (!failed.empty()) return Fail(kExitFailure, "job " + id + " " + status + ": " + failed + see);
      if (outcome == Outcome::kFailed) return Fail(kExitFailure, "job " + id + " was stopped while waiting" + see);
      std::string health = JobHealth(*j);  // a task whose checks do not pass (yet)
      if (health == "unhealthy" || health == "starting") {
        return Fail(kExitFailure, "job " + id + " is not healthy after " + FormatDuration(timeout) + " (status " +
                                      status + ", health " + health + ")" + see);
      }
      return Fail(kExitFailure, "job " + id + " is not running after " + FormatDuration(timeout) + " (status " +
                                    status + ")" + see);
    }
    // Nothing changes without an event of the job: wait for the next ones.
    outpost_v1_WatchEventsRequest req = outpost_v1_WatchEventsRequest_init_zero;
    req.after_seq = after;
    req.job = PbStr(id);
    req.wait_nanos = std::min<int64_t>(left, 30 * kNanosPerSecond);
    auto reply = CallAgent(g, "WatchEvents", *PbEncode(outpost_v1_WatchEventsRequest_fields, &req, "WatchEventsRequest"),
                           &code, req.wait_nanos + kDefaultCallTimeoutNanos);
    if (!reply.ok()) return code;
    PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
    if (!resp.Decode(*reply, "WatchEventsResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
    for (pb_size_t i = 0; i < resp->events_count; i++) {
      const outpost_v1_TaskEvent& e = resp->events[i];
      if (failed_event.empty() && PbString(e.type) == "failed") {
        failed_event = "task " + PbString(e.task_name) + " " + PbString(e.message);
      }
      after = std::max(after, e.seq);
    }
    // No event of this job up to last_seq: the next wait starts there.
    if (resp->events_count == 0) after = std::max(after, resp->last_seq);
  }
}

int Run(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"-f", "--file", "--timeout", "--min-healthy-time"}, {"--detach", "-d", "--progress"});
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
  const std::string* min_healthy = a->Get("--min-healthy-time");
  if (min_healthy) {
    auto d = ParseDuration(*min_healthy);
    if (!d.ok()) return UsageError("--min-healthy-time: " + d.error().message(), "run");
    if (*d < 0 || *d > 3600 * kNanosPerSecond) return UsageError("--min-healthy-time: must be between 0s and 1h", "run");
  }
  auto text = ReadSpec(*file);
  if (!text.ok()) return Fail(kExitUsage, text.error().message());
  if (min_healthy) *text = WithMinHealthyTime(*text, *min_healthy);
  outpost_v1_SubmitJobRequest req = outpost_v1_SubmitJobRequest_init_zero;
  req.spec_json = PbStr(*text);
  int code = 0;
  auto reply =
      CallAgentQuiet(g, "SubmitJob", *PbEncode(outpost_v1_SubmitJobRequest_fields, &req, "SubmitJobRequest"), &code);
  if (!reply.ok()) {
    if (code == kExitNoAgent) return code;  // already reported
    const Error& e = reply.error();
    if (e.code() != Code::kInvalidArgument) return Fail(code, e.message());
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
    } else if (resp->unchanged && PbString(resp->job.desired) == "stopped") {
      std::printf("job %s unchanged (version %lld) and stopped; `outpost start %s` starts it\n", id.c_str(),
                  static_cast<long long>(resp->job.version), id.c_str());
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
  // Said even with --json (on stderr): a misspelt driver name waits too.
  for (pb_size_t i = 0; i < resp->waiting_count; i++) {
    std::fprintf(stderr, "outpost: %s; it starts once the driver is available\n", PbString(resp->waiting[i]).c_str());
  }
  // An unchanged job that was stopped stays so: nothing to wait for.
  bool left_stopped = resp->unchanged && PbString(resp->job.desired) == "stopped";
  if (a->Has("--detach") || a->Has("-d") || left_stopped) {
    if (g.json) PrintJson(JobJson(resp->job));
    return kExitOk;
  }
  std::fflush(stdout);
  bool progress = !g.json && (a->Has("--progress") || ::isatty(2));
  return WaitForJob(g, id, resp->events_seq, timeout, progress);
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

}  // namespace

std::string UpdateErrorText(const std::string& agent_error,
                            const std::vector<std::pair<std::string, std::string>>& paths, const std::string& ref) {
  std::string out;
  for (const std::string& line : Split(agent_error, '\n')) {
    std::string l = line;
    for (const auto& [path, flag] : paths) {
      if (StartsWith(l, path + ":")) l = flag + l.substr(path.size());
    }
    out += (out.empty() ? "" : "\n") + l;
  }
  return "update " + ref + ": " + out + " (nothing was changed)";
}

namespace {

int UpdateCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  static const struct {
    const char* flag;
    const char* group;
    const char* key;
    const char* file;  // the cgroup file it writes
  } kFlags[] = {
      {"--memory-max", "memory", "max", "memory.max"},
      {"--memory-high", "memory", "high", "memory.high"},
      {"--memory-low", "memory", "low", "memory.low"},
      {"--swap-max", "memory", "swap_max", "memory.swap.max"},
      {"--cpu-max", "cpu", "max", "cpu.max"},
      {"--cpu-weight", "cpu", "weight", "cpu.weight"},
      {"--pids-max", "pids", "max", "pids.max"},
      {"--io-weight", "io", "weight", "io.weight"},
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
  if (!InspectJob(g, job, &j, &code)) return code;
  auto parsed = json::Parse(PbString(j->spec_json), kAgentJsonLimits);
  if (!parsed.ok() || !parsed->is<picojson::object>()) {
    return Fail(kExitFailure, "bad spec from the agent: " + (parsed.ok() ? "not an object" : parsed.error().message()));
  }
  picojson::value spec = std::move(*parsed);
  // The job's own limits, or one task's.
  picojson::object* target = &spec.get<picojson::object>();
  std::string where;  // the JSON path of the target: "" or "tasks[N]."
  if (!task.empty()) {
    target = nullptr;
    auto& tasks = spec.get<picojson::object>()["tasks"];
    if (tasks.is<picojson::array>()) {
      size_t n = 0;
      for (auto& t : tasks.get<picojson::array>()) {
        if (t.is<picojson::object>() && t.get<picojson::object>()["name"].to_str() == task) {
          target = &t.get<picojson::object>();
          where = Format("tasks[%zu].", n);
        }
        n++;
      }
    }
    if (!target) return Fail(kExitFailure, "job \"" + job + "\" has no task \"" + task + "\"");
  }
  picojson::value& res = (*target)["resources"];
  if (!res.is<picojson::object>()) res = picojson::value(picojson::object());
  std::string what;
  std::vector<std::string> files;
  std::vector<std::pair<std::string, std::string>> paths;  // JSON path -> flag, for the agent's errors
  for (const auto& [flag, value] : a->opts) {
    for (const auto& f : kFlags) {
      if (flag != f.flag) continue;
      paths.push_back({where + "resources." + f.group + "." + f.key, f.flag});
      picojson::value& grp = res.get<picojson::object>()[f.group];
      if (!grp.is<picojson::object>()) grp = picojson::value(picojson::object());
      grp.get<picojson::object>()[f.key] = SpecValue(value);
      what += std::string(what.empty() ? "" : ", ") + f.group + "." + f.key + " " + value;
      files.push_back(f.file);
    }
  }
  std::string text = spec.serialize();
  outpost_v1_SubmitJobRequest req = outpost_v1_SubmitJobRequest_init_zero;
  req.spec_json = PbStr(text);
  auto reply =
      CallAgentQuiet(g, "SubmitJob", *PbEncode(outpost_v1_SubmitJobRequest_fields, &req, "SubmitJobRequest"), &code);
  if (!reply.ok()) {
    if (code == kExitNoAgent) return code;
    const Error& e = reply.error();
    if (e.code() != Code::kInvalidArgument) return Fail(code, e.message());
    return Fail(kExitUsage, UpdateErrorText(e.message(), paths, a->pos[0]));
  }
  PbOwned<outpost_v1_SubmitJobResponse> resp(outpost_v1_SubmitJobResponse_fields);
  if (!resp.Decode(*reply, "SubmitJobResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  bool restarted = resp->restarted_count > 0;
  // Written is not enforced: which of the new limits this node leaves
  // unenforced, as the agent holds them now.
  std::string unenforced;
  PbOwned<JobInfo> now(outpost_v1_JobInfo_fields);
  if (!InspectJob(g, job, &now, &code)) return code;
  if (task.empty()) unenforced = NotEnforcedText(now->limits, now->limits_count, files);
  for (pb_size_t i = 0; i < now->tasks_count; i++) {
    const outpost_v1_JobTaskInfo& t = now->tasks[i];
    if (!task.empty() && PbString(t.name) == task && t.has_task) {
      unenforced = NotEnforcedText(t.task.limits, t.task.limits_count, files);
    }
  }
  if (g.json) {
    picojson::object o;
    o["updated"] = picojson::value(a->pos[0]);
    o["limits"] = picojson::value(what);
    o["restarted"] = picojson::value(restarted);
    o["version"] = picojson::value(resp->job.version);
    o["enforced"] = picojson::value(unenforced.empty());
    if (!unenforced.empty()) o["not_enforced"] = picojson::value(unenforced);
    PrintJson(picojson::value(o));
  } else {
    std::printf("updated %s: %s (%s; job version %lld)%s%s\n", a->pos[0].c_str(), what.c_str(),
                restarted ? "the task was restarted: a limit was removed" : "live, no restart",
                static_cast<long long>(resp->job.version), unenforced.empty() ? "" : "; ", unenforced.c_str());
  }
  return kExitOk;
}

}  // namespace

int RunRun(const GlobalOptions& g, const std::vector<std::string>& a) { return Run(g, a); }
int RunUpdate(const GlobalOptions& g, const std::vector<std::string>& a) { return UpdateCmd(g, a); }

}  // namespace outpost::cli
