// `outpost task ...`: bare tasks by id; `outpost exec` and `outpost signal`,
// which address a job's task as JOB/TASK through the same task API.
#include <cstdio>

#include "base/clock.h"
#include "base/json.h"
#include "base/pb.h"
#include "base/strings.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "cli/util.h"
#include "task.pb.h"

namespace outpost::cli {

const char kTaskHelp[] =
    "Usage: outpost task COMMAND [ARGS...]\n"
    "\n"
    "Bare tasks, addressed by id, outside any job (no restart policy; see\n"
    "`outpost help run` for jobs).\n"
    "\n"
    "Commands:\n"
    "  run [OPTIONS] [--] CMD [ARGS...]   start a task; prints its id\n"
    "      --id ID             task id (default: generated)\n"
    "      --name NAME         task name, used for log file names (default: the id)\n"
    "      --user USER         user name or uid (default: the agent's user)\n"
    "      --group GROUP       group name or gid (default: the user's group)\n"
    "      --workdir DIR       absolute working dir (default: the task's private dir)\n"
    "      --env NAME=VALUE    environment variable (repeatable)\n"
    "      --rlimit NAME=SOFT[:HARD]  resource limit, e.g. nofile=1024 (repeatable)\n"
    "      --kill-signal SIG   signal sent by stop (default SIGTERM)\n"
    "      --kill-timeout DUR  wait before SIGKILL on stop (default 5s)\n"
    "      --max-files N       log files kept per stream (default 10)\n"
    "      --max-file-size SZ  size of one log file (default 10MiB)\n"
    "  ls                                  list tasks\n"
    "  inspect ID                          details and exit result\n"
    "  stop ID [--timeout DUR] [--signal SIG]   signal, wait, then SIGKILL\n"
    "  rm ID [--force]                     forget a task (--force kills a running one)\n"
    "  signal ID SIG                       send a signal to the task's process group\n"
    "  exec ID [--timeout DUR] [--] CMD... run a command as the task (same user, env, dir);\n"
    "                                      exits with the command's exit code\n"
    "  stats ID                            memory and CPU use\n"
    "\n"
    "Examples:\n"
    "  outpost task run --id web -- /usr/bin/httpd -f -p 8080\n"
    "  outpost task stop web --timeout 10s\n"
    "  outpost task exec web -- cat /proc/self/status\n"
    "  outpost --json task ls\n";

const char kExecHelp[] =
    "Usage: outpost exec [--timeout DUR] JOB/TASK -- CMD [ARGS...]\n"
    "\n"
    "Runs a command as the task runs (same user, environment and working\n"
    "dir) and prints its output; exits with the command's exit code. With\n"
    "--json it prints {exit_code, output, truncated} and exits 0 once the\n"
    "command ran.\n"
    "\n"
    "Examples:\n"
    "  outpost exec web/api -- cat /proc/self/status\n"
    "  outpost exec --timeout 5s web/api -- /bin/sh -c 'ls -l'\n";

const char kSignalHelp[] =
    "Usage: outpost signal JOB/TASK SIGNAL\n"
    "\n"
    "Sends a signal (a name such as HUP or SIGHUP, or a number) to the\n"
    "task's process group. What the task does then is up to it (and to its\n"
    "restart policy if it exits).\n"
    "\n"
    "Examples:\n"
    "  outpost signal web/api HUP\n"
    "  outpost signal web/api SIGUSR1\n";

namespace {

std::string ExitText(const outpost_v1_TaskInfo& t) {
  if (std::string(t.state ? t.state : "") != "exited") return "";
  if (t.error && *t.error) return t.error;
  if (t.signal) return Format("signal %d (exit %d)", t.signal, t.exit_code);
  return Format("exit %d", t.exit_code);
}

template <typename Msg>
Result<std::string> Encode(const pb_msgdesc_t* fields, const Msg& m, const char* what) {
  return PbEncode(fields, &m, what);
}

int TaskRun(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--id", "--name", "--job", "--user", "--group", "--workdir", "--env", "--kill-signal",
                          "--kill-timeout", "--max-files", "--max-file-size", "--rlimit"},
                     {}, true);
  if (!a.ok()) return UsageError(a.error().message(), "task run");
  std::vector<std::string> cmd = a->pos;
  cmd.insert(cmd.end(), a->after_dashdash.begin(), a->after_dashdash.end());
  if (cmd.empty()) return UsageError("task run needs a command", "task run");

  std::vector<std::string> keep;  // storage for FT_POINTER strings
  keep.reserve(64 + cmd.size() + a->opts.size() * 2);
  auto str = [&](const std::string& s) { keep.push_back(s); return PbStr(keep.back()); };
  outpost_v1_StartTaskRequest req = outpost_v1_StartTaskRequest_init_zero;
  req.has_spec = true;
  outpost_v1_TaskSpec& s = req.spec;
  auto opt = [&](const char* name) { const std::string* v = a->Get(name); return v ? *v : std::string(); };
  s.id = str(opt("--id"));
  s.name = str(opt("--name"));
  s.job = str(opt("--job"));
  s.user = str(opt("--user"));
  s.group = str(opt("--group"));
  s.workdir = str(opt("--workdir"));
  s.kill_signal = str(opt("--kill-signal"));
  s.command = str(cmd[0]);
  std::vector<char*> args;
  for (size_t i = 1; i < cmd.size(); ++i) args.push_back(str(cmd[i]));
  s.args_count = static_cast<pb_size_t>(args.size());
  s.args = args.data();
  std::vector<outpost_v1_EnvVar> env;
  std::vector<outpost_v1_Rlimit> rlimits;
  for (const auto& [k, v] : a->opts) {
    if (k == "--env") {
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) return UsageError("--env needs NAME=VALUE, got \"" + v + "\"", "task run");
      env.push_back({str(v.substr(0, eq)), str(v.substr(eq + 1))});
    } else if (k == "--rlimit") {
      // nofile=1024 or nofile=1024:4096
      std::vector<std::string> p = Split(v, '=');
      if (p.size() != 2) return UsageError("--rlimit needs NAME=SOFT[:HARD], got \"" + v + "\"", "task run");
      std::vector<std::string> lim = Split(p[1], ':');
      auto soft = ParseInt(lim[0], 0, INT64_MAX);
      auto hard = lim.size() > 1 ? ParseInt(lim[1], 0, INT64_MAX) : soft;
      if (!soft.ok() || !hard.ok() || lim.size() > 2) {
        return UsageError("--rlimit needs NAME=SOFT[:HARD] with numbers, got \"" + v + "\"", "task run");
      }
      rlimits.push_back({str(p[0]), static_cast<uint64_t>(*soft), static_cast<uint64_t>(*hard)});
    }
  }
  s.env_count = static_cast<pb_size_t>(env.size());
  s.env = env.data();
  s.rlimits_count = static_cast<pb_size_t>(rlimits.size());
  s.rlimits = rlimits.data();
  if (a->Has("--kill-timeout")) {
    auto d = ParseDuration(opt("--kill-timeout"));
    if (!d.ok()) return UsageError("--kill-timeout: " + d.error().message(), "task run");
    s.kill_timeout_nanos = *d;
  }
  if (a->Has("--max-files")) {
    auto n = ParseInt(opt("--max-files"), 1, 1000);
    if (!n.ok()) return UsageError("--max-files: " + n.error().message(), "task run");
    s.log_max_files = static_cast<int32_t>(*n);
  }
  if (a->Has("--max-file-size")) {
    auto n = ParseSize(opt("--max-file-size"));
    if (!n.ok()) return UsageError("--max-file-size: " + n.error().message(), "task run");
    s.log_max_file_size = *n;
  }
  auto payload = Encode(outpost_v1_StartTaskRequest_fields, req, "StartTaskRequest");
  if (!payload.ok()) return Fail(kExitFailure, payload.error().message());
  int code = 0;
  auto reply = CallAgent(g, "StartTask", *payload, &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_StartTaskResponse> resp(outpost_v1_StartTaskResponse_fields);
  if (!resp.Decode(*reply, "StartTaskResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  if (g.json) PrintJson(InfoJson(resp->task));
  else std::printf("%s\n", PbString(resp->task.id).c_str());
  return kExitOk;
}

int TaskList(const GlobalOptions& g, const std::vector<std::string>& in) {
  if (!in.empty()) return UsageError("task ls takes no arguments", "task");
  int code = 0;
  auto reply = CallAgent(g, "ListTasks", "", &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ListTasksResponse> resp(outpost_v1_ListTasksResponse_fields);
  if (!resp.Decode(*reply, "ListTasksResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  if (g.json) {
    picojson::array arr;
    for (pb_size_t i = 0; i < resp->tasks_count; ++i) arr.push_back(InfoJson(resp->tasks[i]));
    PrintJson(picojson::value(arr));
    return kExitOk;
  }
  std::printf("%-24s %-8s %-7s %-24s %s\n", "ID", "STATE", "PID", "STARTED", "COMMAND / RESULT");
  for (pb_size_t i = 0; i < resp->tasks_count; ++i) {
    const outpost_v1_TaskInfo& t = resp->tasks[i];
    std::string what = PbString(t.command);
    std::string result = ExitText(t);
    if (!result.empty()) what += "  (" + result + ")";
    std::printf("%-24s %-8s %-7d %-24s %s\n", PbString(t.id).c_str(), PbString(t.state).c_str(), t.pid,
                Time(t.started_at_unix_nanos).c_str(), what.c_str());
  }
  return kExitOk;
}

Result<std::string> IdRequest(const std::string& id) {
  outpost_v1_TaskIdRequest req = outpost_v1_TaskIdRequest_init_zero;
  req.id = PbStr(id);
  return PbEncode(outpost_v1_TaskIdRequest_fields, &req, "TaskIdRequest");
}

int TaskInspect(const GlobalOptions& g, const std::vector<std::string>& in) {
  if (in.size() != 1) return UsageError("task inspect needs exactly one task id", "task");
  int code = 0;
  auto reply = CallAgent(g, "InspectTask", *IdRequest(in[0]), &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_TaskInfo> t(outpost_v1_TaskInfo_fields);
  if (!t.Decode(*reply, "TaskInfo").ok()) return Fail(kExitFailure, "bad reply from the agent");
  if (g.json) {
    PrintJson(InfoJson(*t));
    return kExitOk;
  }
  std::printf("id:         %s\n", PbString(t->id).c_str());
  std::printf("name:       %s\n", PbString(t->name).c_str());
  std::printf("state:      %s\n", PbString(t->state).c_str());
  std::printf("pid:        %d\n", t->pid);
  std::printf("command:    %s\n", CommandText(t->command, t->args, t->args_count).c_str());
  std::printf("user:       %s\n", t->user && *t->user ? t->user : "(agent's user)");
  std::printf("workdir:    %s\n", PbString(t->workdir).c_str());
  std::printf("started:    %s\n", Time(t->started_at_unix_nanos).c_str());
  std::printf("completed:  %s\n", Time(t->completed_at_unix_nanos).c_str());
  std::string result = ExitText(*t);
  if (!result.empty()) std::printf("result:     %s\n", result.c_str());
  if (PbString(t->state) == "unknown" && t->error && *t->error) std::printf("reason:     %s\n", t->error);
  std::printf("logs:       %s (%llu bytes written", PbString(t->log_dir).c_str(),
              static_cast<unsigned long long>(t->log_bytes));
  if (t->log_dropped_bytes) std::printf(", %llu dropped", static_cast<unsigned long long>(t->log_dropped_bytes));
  std::printf(")\n");
  if (t->log_error && *t->log_error) std::printf("log error:  %s\n", t->log_error);
  PrintNetwork(*t);
  PrintLimits(t->limits, t->limits_count);
  PrintHookRuns(*t);
  return kExitOk;
}

int TaskStop(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {"--timeout", "--signal"}, {});
  if (!a.ok()) return UsageError(a.error().message(), "task");
  if (a->pos.size() != 1) return UsageError("task stop needs exactly one task id", "task");
  std::string id = a->pos[0], sig = a->Get("--signal") ? *a->Get("--signal") : "";
  outpost_v1_StopTaskRequest req = outpost_v1_StopTaskRequest_init_zero;
  req.id = PbStr(id);
  req.signal = PbStr(sig);
  req.timeout_nanos = -1;
  int64_t wait = kDefaultCallTimeoutNanos;
  if (const std::string* t = a->Get("--timeout")) {
    auto d = ParseDuration(*t);
    if (!d.ok()) return UsageError("--timeout: " + d.error().message(), "task");
    req.timeout_nanos = *d;
    wait += *d;
  } else {
    wait += 60 * kNanosPerSecond;  // the task's own kill_timeout applies
  }
  int code = 0;
  auto reply = CallAgent(g, "StopTask", *PbEncode(outpost_v1_StopTaskRequest_fields, &req, "StopTaskRequest"), &code,
                         wait);
  if (!reply.ok()) return code;
  if (!g.json) std::printf("stopped %s\n", id.c_str());
  else PrintJson(JsonObject1("stopped", id));
  return kExitOk;
}

int TaskRemove(const GlobalOptions& g, const std::vector<std::string>& in) {
  auto a = ParseArgs(in, {}, {"--force", "-f"});
  if (!a.ok()) return UsageError(a.error().message(), "task");
  if (a->pos.size() != 1) return UsageError("task rm needs exactly one task id", "task");
  std::string id = a->pos[0];
  outpost_v1_DestroyTaskRequest req = outpost_v1_DestroyTaskRequest_init_zero;
  req.id = PbStr(id);
  req.force = a->Has("--force") || a->Has("-f");
  int code = 0;
  auto reply = CallAgent(g, "DestroyTask", *PbEncode(outpost_v1_DestroyTaskRequest_fields, &req, "DestroyTaskRequest"),
                         &code);
  if (!reply.ok()) {
    return code;
  }
  if (!g.json) std::printf("removed %s\n", id.c_str());
  else PrintJson(JsonObject1("removed", id));
  return kExitOk;
}


int TaskSignal(const GlobalOptions& g, const std::vector<std::string>& in, const char* name) {
  if (in.size() != 2) return UsageError(std::string(name) + " needs a task and a signal", name);
  outpost_v1_SignalTaskRequest req = outpost_v1_SignalTaskRequest_init_zero;
  req.id = PbStr(in[0]);
  req.signal = PbStr(in[1]);
  int code = 0;
  auto reply = CallAgent(g, "SignalTask", *PbEncode(outpost_v1_SignalTaskRequest_fields, &req, "SignalTaskRequest"),
                         &code);
  if (!reply.ok()) return code;
  if (g.json) {
    PrintJson(picojson::value(picojson::object{{"signalled", picojson::value(in[0])}, {"signal", picojson::value(in[1])}}));
  } else {
    std::printf("sent %s to %s\n", in[1].c_str(), in[0].c_str());
  }
  return kExitOk;
}

int TaskExec(const GlobalOptions& g, const std::vector<std::string>& in, const char* name) {
  auto a = ParseArgs(in, {"--timeout"}, {}, true);
  if (!a.ok()) return UsageError(a.error().message(), name);
  if (a->pos.empty()) return UsageError(std::string(name) + " needs a task and a command", name);
  std::vector<std::string> cmd(a->pos.begin() + 1, a->pos.end());
  cmd.insert(cmd.end(), a->after_dashdash.begin(), a->after_dashdash.end());
  if (cmd.empty()) return UsageError(std::string(name) + " needs a command after the task", name);
  outpost_v1_ExecTaskRequest req = outpost_v1_ExecTaskRequest_init_zero;
  std::string id = a->pos[0];
  req.id = PbStr(id);
  std::vector<char*> argv;
  for (const std::string& c : cmd) argv.push_back(PbStr(c));
  req.cmd_count = static_cast<pb_size_t>(argv.size());
  req.cmd = argv.data();
  req.timeout_nanos = 60 * kNanosPerSecond;
  if (const std::string* t = a->Get("--timeout")) {
    auto d = ParseDuration(*t);
    if (!d.ok()) return UsageError("--timeout: " + d.error().message(), name);
    req.timeout_nanos = *d;
  }
  int code = 0;
  auto reply = CallAgent(g, "ExecTask", *PbEncode(outpost_v1_ExecTaskRequest_fields, &req, "ExecTaskRequest"), &code,
                         req.timeout_nanos + kDefaultCallTimeoutNanos);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_ExecTaskResponse> resp(outpost_v1_ExecTaskResponse_fields);
  if (!resp.Decode(*reply, "ExecTaskResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  std::string out = resp->output ? std::string(reinterpret_cast<const char*>(resp->output->bytes), resp->output->size)
                                 : std::string();
  if (g.json) {
    picojson::object o;
    o["exit_code"] = picojson::value(static_cast<int64_t>(resp->exit_code));
    o["output"] = picojson::value(out);
    o["truncated"] = picojson::value(resp->truncated);
    PrintJson(picojson::value(o));
    return kExitOk;
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (resp->truncated) std::fprintf(stderr, "outpost: output truncated\n");
  // Like ssh or docker exec: the command's exit code is ours.
  return resp->exit_code;
}

int TaskStatsCmd(const GlobalOptions& g, const std::vector<std::string>& in) {
  if (in.size() != 1) return UsageError("task stats needs exactly one task id", "task");
  int code = 0;
  auto reply = CallAgent(g, "TaskStats", *IdRequest(in[0]), &code);
  if (!reply.ok()) return code;
  PbOwned<outpost_v1_TaskStatsResponse> s(outpost_v1_TaskStatsResponse_fields);
  if (!s.Decode(*reply, "TaskStatsResponse").ok()) return Fail(kExitFailure, "bad reply from the agent");
  std::string measured;
  for (pb_size_t i = 0; i < s->measured_count; ++i) measured += (i ? ", " : "") + PbString(s->measured[i]);
  if (g.json) {
    picojson::object o;
    o["rss_bytes"] = picojson::value(static_cast<int64_t>(s->rss_bytes));
    o["cpu_user_seconds"] = picojson::value(static_cast<double>(s->cpu_user_nanos) / 1e9);
    o["cpu_system_seconds"] = picojson::value(static_cast<double>(s->cpu_system_nanos) / 1e9);
    o["cpu_percent"] = picojson::value(s->cpu_percent);
    o["measured"] = picojson::value(measured);
    PrintJson(picojson::value(o));
    return kExitOk;
  }
  std::printf("rss %.1f MiB, cpu user %.2fs system %.2fs (%.1f%%); measured: %s\n",
              static_cast<double>(s->rss_bytes) / (1 << 20), static_cast<double>(s->cpu_user_nanos) / 1e9,
              static_cast<double>(s->cpu_system_nanos) / 1e9, s->cpu_percent, measured.c_str());
  return kExitOk;
}

}  // namespace

int RunTask(const GlobalOptions& g, const std::vector<std::string>& args) {
  if (args.empty()) return UsageError("task needs a subcommand", "task");
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& sub = args[0];
  if (sub == "run") return TaskRun(g, rest);
  if (sub == "ls" || sub == "ps") return TaskList(g, rest);
  if (sub == "inspect") return TaskInspect(g, rest);
  if (sub == "stop") return TaskStop(g, rest);
  if (sub == "rm") return TaskRemove(g, rest);
  if (sub == "signal") return TaskSignal(g, rest, "task signal");
  if (sub == "exec") return TaskExec(g, rest, "task exec");
  if (sub == "stats") return TaskStatsCmd(g, rest);
  return UsageError("unknown task subcommand \"" + sub + "\"", "task");
}

int RunExec(const GlobalOptions& g, const std::vector<std::string>& a) { return TaskExec(g, a, "exec"); }
int RunSignal(const GlobalOptions& g, const std::vector<std::string>& a) { return TaskSignal(g, a, "signal"); }

}  // namespace outpost::cli
