// Command-line front end of the multi-call binary. Owns: global options,
// the command table, `outpost help` and exit codes; each command family's
// file owns its commands' help texts. `outpost agent` runs the
// agent (agent/agent.h); every other command is a client of the API socket.
//
// Exit codes (README "Exit codes"): 0 success, 1 the operation failed,
// 2 usage or configuration error, 3 no agent reachable on the socket,
// 4 the agent answered that the task's driver is unavailable.
#pragma once

#include <string>
#include <vector>

namespace outpost::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoAgent = 3;
// The agent is there, but the driver the command needs is not (a driver
// plugin disconnected, within its grace period, or not registered yet):
// the agent answered UNAVAILABLE naming the driver. Retrying once the
// driver is back can succeed; nothing was done.
constexpr int kExitDriverUnavailable = 4;

constexpr const char* kDefaultSocket = "/run/outpost/outpost.sock";

// Options every client command understands.
struct GlobalOptions {
  std::string socket;  // --socket, else $OUTPOST_SOCKET, else kDefaultSocket
  bool json = false;   // --json
};

struct Command {
  const char* name;
  const char* summary;  // one line, for `outpost help`
  const char* help;     // full text for `outpost help NAME` / NAME --help
  int (*run)(const GlobalOptions& opts, const std::vector<std::string>& args);
};

int Main(int argc, char** argv);

// The command table (`outpost help`, the man page, shell completion), in
// the order `outpost help` lists it; *n gets its length.
const Command* Commands(size_t* n);
// The usage text of `outpost help` / `outpost --help`.
extern const char kUsageHead[], kUsageTail[];

// Shell completion and the man page (completion.cc), generated from the
// command table, each command's help text and kCommandOptions.
struct CommandOptions {
  const char* command;
  // Its options, space-separated; a trailing '=' marks one that takes a
  // value ("--timeout= --detach").
  const char* options;
  // What its first operand is: "@jobs" (job names, from `outpost ps`),
  // "@commands", "@files", "" (none), or words to complete ("check");
  // "@jobs...": every operand is a job name (start, stop, rm, ...).
  const char* operand;
};
extern const CommandOptions kCommandOptions[];
extern const size_t kCommandOptionsCount;
// The options every client command takes (as CommandOptions::options).
extern const char kGlobalOptions[];
std::string BashCompletion();
std::string ManPage();
extern const char kCompletionHelp[];
int RunCompletion(const GlobalOptions& opts, const std::vector<std::string>& args);

// Help texts, each defined by the file of its command family.
extern const char kRunHelp[], kUpdateHelp[];                                           // run.cc
extern const char kPsHelp[], kInspectHelp[];                                           // jobs.cc
extern const char kStartHelp[], kStopHelp[], kRmHelp[], kRestartHelp[];               // job_ctl.cc
extern const char kTaskHelp[], kExecHelp[], kSignalHelp[];                             // task_cmds.cc
extern const char kLogsHelp[], kEventsHelp[], kStatsHelp[];                            // observe.cc
extern const char kStatusHelp[], kVersionHelp[];                                       // status.cc
extern const char kNetworksHelp[];  // networks.cc
extern const char kNriHelp[];       // nri.cc
extern const char kDevicesHelp[];   // devices.cc
extern const char kHooksHelp[];                                                        // hooks.cc
extern const char kPluginsHelp[];                                                      // plugins.cc

// Commands (one file per family).
int RunStatus(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunVersion(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunTask(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunLogs(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunEvents(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunRun(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunPs(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunInspect(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunStart(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunStop(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunRm(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunRestart(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunStats(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunUpdate(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunExec(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunSignal(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunPlugins(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunHooks(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunNetworks(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunNri(const GlobalOptions& opts, const std::vector<std::string>& args);
int RunDevices(const GlobalOptions& opts, const std::vector<std::string>& args);

// Prints "outpost: <msg>" on stderr, returns code.
int Fail(int code, const std::string& msg);

}  // namespace outpost::cli
