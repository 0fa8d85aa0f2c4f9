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

const char kHelpHelp[] =
    "Usage: outpost help [COMMAND] [--man]\n"
    "\n"
    "Lists the commands, or shows the help of one command.\n"
    "\n"
    "Options:\n"
    "  --man   print the manual page outpost(1) in roff, built from every\n"
    "          command's help (`make install` installs it)\n"
    "\n"
    "Examples:\n"
    "  outpost help\n"
    "  outpost help status\n"
    "  outpost help --man | man -l -\n";

int RunAgentCommand(const GlobalOptions&, const std::vector<std::string>& args) { return agent::Main(args); }
int RunHelp(const GlobalOptions& opts, const std::vector<std::string>& args);

const Command kCommands[] = {
    {"agent", "run the agent (the node daemon) in the foreground", kAgentHelp, RunAgentCommand},
    {"run", "submit a job (create or update) and wait for its tasks", kRunHelp, RunRun},
    {"ps", "list jobs", kPsHelp, RunPs},
    {"inspect", "show a job or one of its tasks", kInspectHelp, RunInspect},
    {"start", "start stopped jobs again", kStartHelp, RunStart},
    {"stop", "stop jobs' tasks (the jobs stay, stopped)", kStopHelp, RunStop},
    {"rm", "stop and remove jobs", kRmHelp, RunRm},
    {"restart", "restart jobs or tasks", kRestartHelp, RunRestart},
    {"logs", "print a task's output", kLogsHelp, RunLogs},
    {"exec", "run a command in a task's context", kExecHelp, RunExec},
    {"signal", "send a signal to a task", kSignalHelp, RunSignal},
    {"events", "print job and task events", kEventsHelp, RunEvents},
    {"stats", "CPU and memory use of tasks", kStatsHelp, RunStats},
    {"update", "change a task's or job's resource limits live", kUpdateHelp, RunUpdate},
    {"status", "show the running agent's status", kStatusHelp, RunStatus},
    {"plugins", "list registered plugins and plugin sockets", kPluginsHelp, RunPlugins},
    {"networks", "list the networks jobs can use, their plugins, and attached jobs", kNetworksHelp, RunNetworks},
    {"nri", "list the NRI plugins, their subscriptions and failures", kNriHelp, RunNri},
    {"devices", "list device plugin resources, their devices and holders", kDevicesHelp, RunDevices},
    {"hooks", "list the OCI hooks that apply, and invalid hook files", kHooksHelp, RunHooks},
    {"task", "run and manage bare tasks (run, ls, inspect, stop, rm, signal, exec, stats)", kTaskHelp, RunTask},
    {"version", "print the version of this binary", kVersionHelp, RunVersion},
    {"completion", "print the bash completion script", kCompletionHelp, RunCompletion},
    {"help", "show help for a command", kHelpHelp, RunHelp},
};

const Command* FindCommand(const std::string& name) {
  for (const Command& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

void PrintUsage(FILE* out) {
  std::fputs(kUsageHead, out);
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fputs(kUsageTail, out);
}

int RunHelp(const GlobalOptions&, const std::vector<std::string>& args) {
  if (args.size() == 1 && args[0] == "--man") {
    std::fputs(ManPage().c_str(), stdout);
    return kExitOk;
  }
  if (args.size() > 1) return Fail(kExitUsage, "help takes one COMMAND or --man; see `outpost help help`");
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

const char kUsageHead[] =
    "outpost turns a small Linux board into a self-sufficient workload node.\n"
    "\n"
    "Usage: outpost [--socket PATH] [--json] COMMAND [ARGS...]\n"
    "\n"
    "Commands:\n";
const char kUsageTail[] =
    "\n"
    "Global options:\n"
    "  --socket PATH   agent API socket (default $OUTPOST_SOCKET or /run/outpost/outpost.sock)\n"
    "  --json          machine-readable output (docs/cli-json.md)\n"
    "  -h, --help      help (also: outpost COMMAND --help)\n"
    "\n"
    "Exit codes: 0 ok, 1 failed, 2 usage or configuration error, 3 no agent running.\n";

const Command* Commands(size_t* n) {
  *n = sizeof kCommands / sizeof kCommands[0];
  return kCommands;
}

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
