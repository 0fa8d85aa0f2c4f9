#include "cli/cli.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/agent.h"
#include "base/strings.h"

namespace outpost::cli {

namespace {

const char kAgentHelp[] =
    "Usage: outpost agent [--config FILE] [--check] [--no-keeper]\n"
    "\n"
    "Runs the outpost agent in the foreground (busybox init, runit or a shell\n"
    "start it; it does not daemonise). It serves the API on a unix socket and\n"
    "logs one line per event to stderr.\n"
    "\n"
    "The process started is the keeper: a tiny parent of every task that\n"
    "starts the worker (the same binary, doing all the work) and restarts it\n"
    "with backoff if it dies; tasks and their exit statuses survive a worker\n"
    "crash. See docs/process-model.md.\n"
    "\n"
    "Options:\n"
    "  --config FILE   JSON configuration (docs/config.md). Default:\n"
    "                  /etc/outpost/config.json if it exists, else built-in defaults.\n"
    "  --check         validate the configuration, print the effective values and exit\n"
    "  --no-keeper     run the worker alone (debugging): tasks are orphaned to init\n"
    "                  when it stops and their exit codes are lost\n"
    "\n"
    "Signals (to the keeper): SIGTERM/SIGINT stop the agent (tasks keep running\n"
    "for the next agent); SIGHUP reloads the configuration (a bad new\n"
    "configuration is reported and the old one kept); SIGUSR2 upgrades in\n"
    "place: the worker stops and the binary at the same path is executed again,\n"
    "keeping the keeper's pid.\n"
    "\n"
    "Examples:\n"
    "  outpost agent\n"
    "  outpost agent --config ./run/config.json\n"
    "  outpost agent --config /etc/outpost/config.json --check\n"
    "\n"
    "/etc/inittab line for busybox init:\n"
    "  ::respawn:/usr/bin/outpost agent --config /etc/outpost/config.json\n";

const char kStatusHelp[] =
    "Usage: outpost status [--json] [--socket PATH]\n"
    "\n"
    "Asks the running agent for its version, pid, uptime, configuration and\n"
    "which features are enabled. Exits 3 when no agent answers on the socket.\n"
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

const char kLogsHelp[] =
    "Usage: outpost logs [-f] [--stderr] [--tail N] JOB/TASK|TASK_ID\n"
    "\n"
    "Prints a task's output from its log files (stdout unless --stderr).\n"
    "A job's task keeps one log across its restarts.\n"
    "Without options: the whole active log file. --tail N: the last N lines\n"
    "(across rotated files). -f: keep printing new output until the task\n"
    "exits (starts with the last 10 lines unless --tail is given).\n"
    "\n"
    "Examples:\n"
    "  outpost logs web/api\n"
    "  outpost logs -f --tail 100 web/api\n"
    "  outpost logs --stderr mytask\n";

const char kEventsHelp[] =
    "Usage: outpost events [-f] [JOB | JOB/TASK | TASK_ID]\n"
    "\n"
    "Prints recent events, oldest first; -f keeps printing new ones. Task\n"
    "events: started, exited, signalled, restarting (with the reason and the\n"
    "backoff), failed (restart limit reached), stopping, stopped, recovered,\n"
    "error. Job events: job-submitted, job-updated, job-stopping,\n"
    "job-restarting, job-removed. With --json, one JSON object per line.\n"
    "\n"
    "Examples:\n"
    "  outpost events\n"
    "  outpost events -f web\n"
    "  outpost events web/api\n";

const char kRunHelp[] =
    "Usage: outpost run -f FILE|- [--detach] [--timeout DUR]\n"
    "\n"
    "Submits a job spec (JSON, docs/job-spec.md) to the agent: a new job is\n"
    "started; an existing one (same id) is updated, restarting only the tasks\n"
    "whose spec changed. The spec is validated first: every problem is listed\n"
    "with its JSON path and nothing changes. Then waits until the job's tasks\n"
    "run (or it completes or fails) and prints them.\n"
    "\n"
    "Options:\n"
    "  -f FILE         the job spec; - reads it from stdin\n"
    "  --detach, -d    return once the spec is accepted\n"
    "  --timeout DUR   how long to wait for the tasks (default 60s)\n"
    "\n"
    "Exit codes: 0 running/complete; 1 a task failed, not running in time,\n"
    "or refused (max_jobs reached, the id belongs to a jobs.d file); 2 invalid\n"
    "spec or usage; 3 no agent.\n"
    "\n"
    "Examples:\n"
    "  outpost run -f examples/hello.json\n"
    "  outpost run -f web.json --detach\n"
    "  generate-spec | outpost run -f -\n";

const char kPsHelp[] =
    "Usage: outpost ps [--json]\n"
    "\n"
    "Lists jobs: status (pending, running, degraded, failed, complete,\n"
    "stopping, stopped), running/total tasks, restarts, where the job came\n"
    "from (api or a jobs.d file), spec version and age. Job files in jobs.d\n"
    "that are invalid are listed below the table with their errors.\n"
    "\n"
    "Examples:\n"
    "  outpost ps\n"
    "  outpost ps --json | jq '.jobs[] | select(.status != \"running\") | .id'\n";

const char kInspectHelp[] =
    "Usage: outpost inspect JOB[/TASK] [--json]\n"
    "\n"
    "Shows a job (status, source, version, labels, and each task's state,\n"
    "pid, restarts and why it is not running), or one task of it in detail.\n"
    "--json adds the job's full canonical spec (every default filled in).\n"
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
    "\n"
    "Examples:\n"
    "  outpost stop web\n"
    "  outpost stop web --timeout 30s\n";

const char kRmHelp[] =
    "Usage: outpost rm JOB\n"
    "\n"
    "Stops the job and removes it with its tasks' private dirs and logs.\n"
    "A job that comes from a jobs.d file is removed by removing the file.\n"
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

const char kStatsHelp[] =
    "Usage: outpost stats [-f] [--interval DUR] [JOB[/TASK]]\n"
    "\n"
    "Shows CPU and memory use of running tasks (all jobs, one job or one\n"
    "task) as one table. -f keeps sampling every --interval (default 1s): on\n"
    "a terminal the table is redrawn in place; otherwise one line per task\n"
    "per sample: TIME JOB/TASK pid=N cpu=N% rss=BYTES.\n"
    "--json prints one JSON object per task per sample.\n"
    "\n"
    "Examples:\n"
    "  outpost stats\n"
    "  outpost stats -f web\n"
    "  outpost stats --json -f --interval 5s > stats.jsonl\n";

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
    "\n"
    "Examples:\n"
    "  outpost update web/api --memory-max 256MiB\n"
    "  outpost update web/api --cpu-max 0.5 --pids-max 100\n"
    "  outpost update web --memory-max 1GiB\n";

const char kHelpHelp[] =
    "Usage: outpost help [COMMAND]\n"
    "\n"
    "Lists the commands, or shows the help of one command.\n"
    "\n"
    "Examples:\n"
    "  outpost help\n"
    "  outpost help status\n";

int RunAgentCommand(const GlobalOptions&, const std::vector<std::string>& args) { return agent::Main(args); }
int RunHelp(const GlobalOptions& opts, const std::vector<std::string>& args);

const Command kCommands[] = {
    {"agent", "run the agent (the node daemon) in the foreground", kAgentHelp, RunAgentCommand},
    {"run", "submit a job (create or update) and wait for its tasks", kRunHelp, RunRun},
    {"ps", "list jobs", kPsHelp, RunPs},
    {"inspect", "show a job or one of its tasks", kInspectHelp, RunInspect},
    {"stop", "stop a job's tasks (the job stays, stopped)", kStopHelp, RunStop},
    {"rm", "stop and remove a job", kRmHelp, RunRm},
    {"restart", "restart a job or one task", kRestartHelp, RunRestart},
    {"logs", "print a task's output", kLogsHelp, RunLogs},
    {"exec", "run a command in a task's context", kExecHelp, RunExec},
    {"signal", "send a signal to a task", kSignalHelp, RunSignal},
    {"events", "print job and task events", kEventsHelp, RunEvents},
    {"stats", "CPU and memory use of tasks", kStatsHelp, RunStats},
    {"update", "change a task's or job's resource limits live", kUpdateHelp, RunUpdate},
    {"status", "show the running agent's status", kStatusHelp, RunStatus},
    {"task", "run and manage bare tasks (run, ls, inspect, stop, rm, signal, exec, stats)", kTaskHelp, RunTask},
    {"version", "print the version of this binary", kVersionHelp, RunVersion},
    {"help", "show help for a command", kHelpHelp, RunHelp},
};

const Command* FindCommand(const std::string& name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

void PrintUsage(FILE* out) {
  std::fputs(
      "outpost turns a small Linux board into a self-sufficient workload node.\n"
      "\n"
      "Usage: outpost [--socket PATH] [--json] COMMAND [ARGS...]\n"
      "\n"
      "Commands:\n",
      out);
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fputs(
      "\n"
      "Global options:\n"
      "  --socket PATH   agent API socket (default $OUTPOST_SOCKET or /run/outpost/outpost.sock)\n"
      "  --json          machine-readable output\n"
      "  -h, --help      help (also: outpost COMMAND --help)\n"
      "\n"
      "Exit codes: 0 ok, 1 failed, 2 usage or configuration error, 3 no agent running.\n",
      out);
}

int RunHelp(const GlobalOptions&, const std::vector<std::string>& args) {
  if (args.empty()) {
    PrintUsage(stdout);
    return kExitOk;
  }
  const Command* c = FindCommand(args[0]);
  if (!c) return Fail(kExitUsage, "unknown command \"" + args[0] + "\"; run `outpost help` for the list");
  std::fputs(c->help, stdout);
  return kExitOk;
}

std::string SuggestCommand(const std::string& name) {
  // Every command at the smallest distance (<= 2): "staus" is as close to
  // "stats" as to "status", and guessing one would mislead half the time.
  size_t best = 3;
  std::vector<const char*> found;
  for (const Command& c : kCommands) {
    size_t d = EditDistance(name, c.name);
    if (d < best) {
      best = d;
      found.clear();
    }
    if (d == best) found.push_back(c.name);
  }
  if (found.empty()) return "";
  std::string out = " (did you mean";
  for (size_t i = 0; i < found.size(); i++) {
    out += std::string(i == 0 ? " \"" : (i + 1 == found.size() ? " or \"" : ", \"")) + found[i] + "\"";
  }
  return out + "?)";
}

}  // namespace

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "outpost: %s\n", msg.c_str());
  return code;
}

int Main(int argc, char** argv) {
  GlobalOptions opts;
  if (const char* env = std::getenv("OUTPOST_SOCKET"); env && *env) opts.socket = env;
  std::vector<std::string> args(argv + 1, argv + argc);

  // Global options before the command.
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--socket") {
      if (i + 1 >= args.size()) return Fail(kExitUsage, "--socket needs a path");
      opts.socket = args[++i];
    } else if (StartsWith(a, "--socket=")) {
      opts.socket = a.substr(9);
    } else if (a == "--json") {
      opts.json = true;
    } else if (a == "-h" || a == "--help") {
      PrintUsage(stdout);
      return kExitOk;
    } else if (StartsWith(a, "-")) {
      return Fail(kExitUsage, "unknown option \"" + a + "\"; run `outpost help`");
    } else {
      break;
    }
  }
  if (i == args.size()) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  const Command* cmd = FindCommand(args[i]);
  if (!cmd) {
    return Fail(kExitUsage, "unknown command \"" + args[i] + "\"" + SuggestCommand(args[i]) +
                                "; run `outpost help` for the list");
  }
  std::vector<std::string> rest;
  for (size_t k = i + 1; k < args.size(); ++k) {
    const std::string& a = args[k];
    if (a == "-h" || a == "--help") {
      std::fputs(cmd->help, stdout);
      return kExitOk;
    }
    // `agent` has its own options; client commands share --socket/--json.
    if (std::strcmp(cmd->name, "agent") != 0) {
      if (a == "--json") { opts.json = true; continue; }
      if (a == "--socket") {
        if (k + 1 >= args.size()) return Fail(kExitUsage, "--socket needs a path");
        opts.socket = args[++k];
        continue;
      }
      if (StartsWith(a, "--socket=")) { opts.socket = a.substr(9); continue; }
    }
    rest.push_back(a);
  }
  if (opts.socket.empty()) opts.socket = kDefaultSocket;
  return cmd->run(opts, rest);
}

}  // namespace outpost::cli
