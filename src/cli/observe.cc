// Watching what tasks do: `outpost logs`, `outpost events`, `outpost stats`.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/clock.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/job_view.h"
#include "cli/log_view.h"
#include "cli/util.h"
#include "job.pb.h"
#include "task.pb.h"

namespace outpost::cli {

const char kLogsHelp[] =
    "Usage: outpost logs [-f] [-t] [--stdout|--stderr] [--tail N | --since T] JOB[/TASK]|TASK_ID\n"
    "\n"
    "Prints a task's output from its log files: stdout and stderr merged in\n"
    "the order they were written (to the second), stdout's lines on stdout\n"
    "and stderr's on stderr. A job's name stands for its task when it has\n"
    "one. A job's task keeps one log across its restarts.\n"
    "Without options: the whole active log files.\n"
    "\n"
    "Options:\n"
    "  -f, --follow       keep printing new output until the task exits\n"
    "                     (starts with the last 10 lines unless --tail or\n"
    "                     --since is given)\n"
    "  -t, --timestamps   the second each line was written, before it\n"
    "                     (2026-12-02T07:00:05Z; - when not known)\n"
    "      --stdout       only stdout\n"
    "      --stderr       only stderr\n"
    "      --all          both (the default)\n"
    "  -n, --tail N       the last N lines (across rotated files)\n"
    "      --since T      what was written since T: a duration back from now\n"
    "                     (10m, 2h) or an RFC 3339 time (2026-12-02T07:00:00Z)\n"
    "\n"
    "Examples:\n"
    "  outpost logs web\n"
    "  outpost logs -f --tail 100 web/api\n"
    "  outpost logs -t --since 10m web/api\n"
    "  outpost logs --stderr mytask\n";

const char kEventsHelp[] =
    "Usage: outpost events [-f] [JOB | JOB/TASK | TASK_ID]\n"
    "\n"
    "Prints recent events, oldest first; -f keeps printing new ones. Task\n"
    "events: started, healthy (up for the job's min_healthy_time), exited,\n"
    "signalled, restarting (with the reason and the backoff), failed (restart\n"
    "limit reached), stopping, stopped, recovered, log-dropping and\n"
    "log-resumed (disk full), error. Job events: job-submitted, job-updated,\n"
    "job-stopping, job-restarting, job-removing, job-removed.\n"
    "The history (the newest 1,000 events) survives restarts and upgrades\n"
    "of the agent, and a removed job's events stay until they age out.\n"
    "-f JOB waits for a job that does not exist yet (saying so on stderr);\n"
    "without -f a name that has no job, task or events is an error.\n"
    "With --json, one JSON object per line.\n"
    "\n"
    "Examples:\n"
    "  outpost events\n"
    "  outpost events -f web\n"
    "  outpost events web/api\n";

const char kStatsHelp[] =
    "Usage: outpost stats [-f] [--interval DUR] [JOB[/TASK]]\n"
    "\n"
    "Shows CPU and memory use of running tasks (all jobs, one job or one\n"
    "task) as one table. -f keeps sampling every --interval (default 1s): on\n"
    "a terminal the table is redrawn in place; otherwise one line per task\n"
    "per sample: TIME JOB/TASK pid=N cpu=N% rss=BYTES.\n"
    "--json prints one JSON object per task per sample. A task that cannot\n"
    "be measured shows dashes and why below the table; exit code 4 when that\n"
    "is because its driver plugin is away (disconnected or not registered).\n"
    "\n"
    "Examples:\n"
    "  outpost stats\n"
    "  outpost stats -f web\n"
    "  outpost stats --json -f --interval 5s > stats.jsonl\n";

namespace {

struct Sample {
  std::string ref;  // JOB/TASK
  int pid = 0;
  bool ok = false;
  uint64_t rss = 0;
  double cpu = 0;
  double user_s = 0, system_s = 0;
  std::string measured;
  std::map<std::string, uint64_t> cgroup;
  std::string why;  // not ok: why it could not be had
  int code = 0;     // not ok: the exit code that gives (kExitDriverUnavailable for a driver that is away)
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
        PbOwned<outpost_v1_TaskStatsResponse> st(outpost_v1_TaskStatsResponse_fields);
        if (TaskStatsOf(g, t, true, &st, &s.why, &s.code)) {
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
  bool header = false;
  for (const Sample& s : v) {
    if (s.ok || s.why.empty()) continue;
    if (!header) std::printf("\nnot measured:\n");
    header = true;
    std::printf("  %s: %s\n", s.ref.c_str(), s.why.c_str());
  }
}

// A sample that could not be had because a driver is away makes stats
// exit kExitDriverUnavailable; other gaps (a task that ended meanwhile) are
// shown and do not.
int SampleCode(const std::vector<Sample>& v) {
  for (const Sample& s : v) {
    if (!s.ok && s.code == kExitDriverUnavailable) return kExitDriverUnavailable;
  }
  return kExitOk;
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
        if (!s.ok && !s.why.empty()) o["error"] = picojson::value(s.why);
        if (!s.cgroup.empty()) {
          picojson::object cg;
          for (const auto& [name, value] : s.cgroup) cg[name] = picojson::value(static_cast<int64_t>(value));
          o["cgroup"] = picojson::value(cg);
        }
        PrintJsonLine(picojson::value(o));
      }
    } else if (follow && tty) {
      std::printf("\033[H\033[2J%s  (every %s; Ctrl-C to quit)\n\n", FormatWallTime(WallNanos()).c_str(),
                  FormatDuration(interval).c_str());
      PrintStatsTable(*v);
    } else if (follow) {
      std::string t = FormatWallTime(WallNanos());
      for (const Sample& s : *v) {
        if (!s.ok && !s.why.empty()) {
          std::printf("%s %s pid=%d not measured: %s\n", t.c_str(), s.ref.c_str(), s.pid, s.why.c_str());
          continue;
        }
        std::printf("%s %s pid=%d cpu=%.1f%% rss=%llu\n", t.c_str(), s.ref.c_str(), s.pid, s.cpu,
                    static_cast<unsigned long long>(s.rss));
      }
    } else {
      PrintStatsTable(*v);
    }
    std::fflush(stdout);
    if (!follow) return SampleCode(*v);
  }
}

}  // namespace

int RunStats(const GlobalOptions& g, const std::vector<std::string>& a) { return StatsCmd(g, a); }

namespace {

// A job's name stands for its task when it has one ("web" for "web/web"),
// as JOB/TASK; with several the error lists them. Anything else is passed
// on as it is (JOB/TASK, or a bare task's id). false: *code says why.
bool ResolveLogRef(const GlobalOptions& g, const std::string& ref, std::string* id, int* code) {
  *id = ref;
  if (ref.find('/') != std::string::npos) return true;
  auto req = EncodeJobId(ref);
  if (!req.ok()) return true;
  auto reply = CallAgentQuiet(g, "InspectJob", *req, code);
  if (!reply.ok()) {
    if (*code == kExitNoAgent) return false;
    return true;  // not a job: a bare task's id
  }
  PbOwned<JobInfo> j(outpost_v1_JobInfo_fields);
  if (!j.Decode(*reply, "JobInfo").ok()) {
    *code = Fail(kExitFailure, "bad reply from the agent");
    return false;
  }
  if (j->tasks_count == 1) {
    *id = ref + "/" + PbString(j->tasks[0].name);
    return true;
  }
  std::string names;
  for (pb_size_t i = 0; i < j->tasks_count; ++i) names += (i ? ", " : "") + ref + "/" + PbString(j->tasks[i].name);
  *code = Fail(kExitFailure, Format("job \"%s\" has %u tasks, name one: %s", ref.c_str(),
                                    static_cast<unsigned>(j->tasks_count), names.c_str()));
  return false;
}

}  // namespace

int RunLogs(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--tail", "-n", "--since"},
                     {"-f", "--follow", "--stderr", "--stdout", "--all", "-t", "--timestamps"});
  if (!a.ok()) return UsageError(a.error().message(), "logs");
  if (a->pos.size() != 1) return UsageError("logs needs one JOB, JOB/TASK or the id of a bare task", "logs");
  bool follow = a->Has("-f") || a->Has("--follow");
  bool timestamps = a->Has("-t") || a->Has("--timestamps");
  bool only_out = a->Has("--stdout"), only_err = a->Has("--stderr");
  bool all = a->Has("--all") || only_out == only_err;
  int32_t tail = follow ? 10 : -1;
  const std::string* t = a->Get("--tail") ? a->Get("--tail") : a->Get("-n");
  if (t) {
    auto n = ParseInt(*t, 0, 1000000);
    if (!n.ok()) return UsageError("--tail: " + n.error().message(), "logs");
    tail = static_cast<int32_t>(*n);
  }
  int64_t since = 0;
  if (const std::string* v = a->Get("--since")) {
    auto s = ParseSince(*v, WallNanos() / kNanosPerSecond);
    if (!s.ok()) return UsageError("--since: " + s.error().message(), "logs");
    since = std::max<int64_t>(*s, 1);
    if (!t) tail = -1;
    if (t) return UsageError("--since and --tail: give one of them", "logs");
  }
  std::string id;
  int code = 0;
  if (!ResolveLogRef(g, a->pos[0], &id, &code)) return code;
  outpost_v1_ReadLogsRequest req = outpost_v1_ReadLogsRequest_init_zero;
  req.id = PbStr(id);
  req.stderr = only_err && !all;
  req.all = all;
  req.timestamps = timestamps;
  req.since_unix_seconds = since;
  req.tail_lines = tail;
  LogPrinter print(stdout, stderr, timestamps);
  for (;;) {
    auto reply = CallAgent(g, "ReadLogs", *PbEncode(outpost_v1_ReadLogsRequest_fields, &req, "ReadLogsRequest"), &code,
                           40 * kNanosPerSecond);
    if (!reply.ok()) return code;
    PbOwned<outpost_v1_ReadLogsResponse> resp(outpost_v1_ReadLogsResponse_fields);
    if (!resp.Decode(*reply, "ReadLogsResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
    bool more = resp->data && resp->data->size > 0;
    if (more) {
      std::string_view data(reinterpret_cast<const char*>(resp->data->bytes), resp->data->size);
      if (resp->parts_count == 0) {
        if (!print.Print(req.stderr, 0, data)) return kExitFailure;
      }
      size_t at = 0;
      for (pb_size_t i = 0; i < resp->parts_count && at < data.size(); ++i) {
        const outpost_v1_LogPart& p = resp->parts[i];
        size_t n = std::min<size_t>(p.length, data.size() - at);
        if (!print.Print(p.stderr, p.unix_seconds, data.substr(at, n))) return kExitFailure;
        at += n;
      }
      std::fflush(stdout);
      std::fflush(stderr);
    }
    bool continuing = req.has_cursor;
    req.has_cursor = true;
    req.cursor = resp->cursor;
    req.has_stderr_cursor = resp->has_stderr_cursor;
    req.stderr_cursor = resp->stderr_cursor;
    if (!follow) {
      // Without -f: keep reading until the end of what is there now.
      if (!more) return kExitOk;
      req.wait_nanos = 0;
      continue;
    }
    if (resp->task_exited && !more && continuing) return kExitOk;
    req.wait_nanos = 30 * kNanosPerSecond;
  }
}

int RunEvents(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {}, {"-f", "--follow"});
  if (!a.ok()) return UsageError(a.error().message(), "events");
  if (a->pos.size() > 1) return UsageError("events takes at most one JOB, JOB/TASK or task id", "events");
  bool follow = a->Has("-f") || a->Has("--follow");
  std::string ref = a->pos.empty() ? "" : a->pos[0];
  outpost_v1_WatchEventsRequest req = outpost_v1_WatchEventsRequest_init_zero;
  req.ref = PbStr(ref);
  // Without -f, a name that nothing has (no job, no task, no events) is an
  // error; -f waits for it (a job submitted later is followed).
  req.must_exist = !ref.empty() && !follow;
  if (req.must_exist && ref.find('/') == std::string::npos) {
    // A job whose events all aged out exists all the same.
    auto jr = EncodeJobId(ref);
    int code = 0;
    if (jr.ok()) {
      auto reply = CallAgentQuiet(g, "InspectJob", *jr, &code);
      if (reply.ok()) req.must_exist = false;
      else if (code == kExitNoAgent) return code;
    }
  }
  for (;;) {
    int code = 0;
    auto reply = CallAgent(g, "WatchEvents",
                           *PbEncode(outpost_v1_WatchEventsRequest_fields, &req, "WatchEventsRequest"), &code,
                           40 * kNanosPerSecond);
    if (!reply.ok()) return code;
    PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
    if (!resp.Decode(*reply, "WatchEventsResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
    for (pb_size_t i = 0; i < resp->events_count; ++i) {
      const outpost_v1_TaskEvent& e = resp->events[i];
      if (g.json) {
        picojson::object o;
        o["seq"] = picojson::value(static_cast<int64_t>(e.seq));
        o["time"] = picojson::value(FormatWallTime(e.time_unix_nanos));
        o["task_id"] = JsonText(e.task_id);
        o["job"] = JsonText(e.job);
        o["task"] = JsonText(e.task_name);
        o["type"] = picojson::value(PbString(e.type));
        o["message"] = picojson::value(PbString(e.message));
        PrintJsonLine(picojson::value(o));
      } else {
        std::string who = e.task_name && *e.task_name && e.job && *e.job
                              ? PbString(e.job) + "/" + PbString(e.task_name)
                              : (e.task_id && *e.task_id ? PbString(e.task_id) : PbString(e.job));
        std::printf("%s %-20s %-14s %s\n", FormatWallTime(e.time_unix_nanos).c_str(), who.c_str(),
                    PbString(e.type).c_str(), PbString(e.message).c_str());
      }
      if (e.seq > req.after_seq) req.after_seq = e.seq;
    }
    std::fflush(stdout);
    if (!follow) return kExitOk;
    if (req.wait_nanos == 0 && resp->events_count == 0 && !ref.empty()) {
      // Nothing of it yet (a job to be submitted): say that it waits. The
      // cursor stays at 0, so what comes before the next call is not missed.
      std::fprintf(stderr, "outpost: no events of \"%s\" yet; waiting for them\n", ref.c_str());
    }
    req.wait_nanos = 30 * kNanosPerSecond;
  }
}

}  // namespace outpost::cli
