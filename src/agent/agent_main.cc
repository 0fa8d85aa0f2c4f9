// `outpost agent`: the command line (flags, --check, --print-config), the
// process set-up every role needs (file limit, malloc), and which process
// this is: the keeper, the worker, or both in one without a keeper.
#include "agent/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include "agent/agent_nri.h"
#include "agent/api.h"
#include "agent/boot_id.h"
#include "agent/dir_claims.h"
#include "agent/job_api.h"
#include "agent/task_api.h"
#include "agent/watchdog.h"
#include "driver/exec/exec_driver.h"
#include "driver/remote.h"
#include "hooks/catalog.h"
#include "net/networks.h"
#include "task/manager.h"
#include "job/manager.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "keeper/keeper.h"
#include "proc/uid_pool.h"
#include "proc/procfs.h"
#include "proc/spawn.h"
#include "keeper/link.h"
#include "keeper/proto.h"
#include "plugin/registry.h"
#include "plugin/watcher.h"
#include "wire/rpc_server.h"

namespace outpost::agent {

namespace {

void PrintErrorLines(const Error& e) {
  for (const std::string& line : Split(e.message(), '\n')) std::fprintf(stderr, "outpost: %s\n", line.c_str());
}

void PrintEffectiveConfig(const Config& c) {
  std::string uids;
  for (int64_t u : c.api_allowed_uids) uids += (uids.empty() ? "" : ", ") + std::to_string(u);
  // As the file spells it (the log writes it in capitals), so the output
  // can be used as a config file.
  std::string level = log::LevelName(c.log_level);
  for (char& ch : level) ch = static_cast<char>(ch | 0x20);
  std::printf(
      "{\n  \"state_dir\": \"%s\",\n  \"runtime_dir\": \"%s\",\n  \"api_socket\": \"%s\",\n"
      "  \"log_level\": \"%s\",\n  \"log_file\": \"%s\",\n  \"api_allowed_uids\": [%s],\n"
      "  \"api_max_connections\": %lld,\n  \"api_max_connections_per_uid\": %lld,\n"
      "  \"api_idle_timeout\": \"%s\",\n  \"api_frame_timeout\": \"%s\",\n"
      "  \"api_max_write_queue\": %llu,\n  \"api_max_read_buffers\": %llu\n}\n",
      c.state_dir.c_str(), c.runtime_dir.c_str(), c.ApiSocket().c_str(), level.c_str(),
      c.log_file.c_str(), uids.c_str(), static_cast<long long>(c.api_max_connections),
      static_cast<long long>(c.api_max_connections_per_uid),
      FormatDuration(c.api_idle_timeout_nanos).c_str(), FormatDuration(c.api_frame_timeout_nanos).c_str(),
      static_cast<unsigned long long>(c.api_max_write_queue), static_cast<unsigned long long>(c.api_max_read_buffers));
}

}  // namespace

// Each task costs the worker about 7 fds (FIFOs, log and cursor files,
// pidfd) and the keeper 2; busybox's usual soft limit of 1024 would stop the
// node at about 140 tasks. Raise the soft limit to the hard one
// (and, as root, the hard one to the kernel's nr_open).
static void RaiseFileLimit() {
  rlimit lim;
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  // Tasks get the limit the agent was started with, not the raised one.
  proc::SetTaskDefaultNofile(lim);
  if (::geteuid() == 0) {
    auto nr_open = sys::ReadFile("/proc/sys/fs/nr_open", 64);
    if (nr_open.ok()) {
      auto n = ParseInt(Split(*nr_open, '\n')[0], 1024, INT32_MAX);
      if (n.ok() && static_cast<rlim_t>(*n) > lim.rlim_max) {
        rlimit raised{static_cast<rlim_t>(*n), static_cast<rlim_t>(*n)};
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return;
      }
    }
  }
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &lim);
  }
}

int Main(const std::vector<std::string>& all_args) {
  RaiseFileLimit();
  TuneMalloc();
  // The keeper flags decide which process this is: keeper, worker, or both in
  // one (--no-keeper). See task/keeper.h and docs/process-model.md.
  std::vector<std::string> args = all_args;
  auto role = keeper::TakeKeeperFlags(&args);
  if (!role.ok()) {
    std::fprintf(stderr, "outpost: agent: %s\n", role.error().message().c_str());
    return 2;
  }
  std::string config_path;
  bool explicit_config = false, check = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--config" || a == "-c") {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "outpost: agent: --config needs a file\n");
        return 2;
      }
      config_path = args[++i];
      explicit_config = true;
    } else if (StartsWith(a, "--config=")) {
      config_path = a.substr(9);
      explicit_config = true;
    } else if (a == "--check") {
      check = true;
    } else {
      std::fprintf(stderr, "outpost: agent: unknown argument \"%s\"; see `outpost agent --help`\n", a.c_str());
      return 2;
    }
  }
  if (!explicit_config && ::access(kDefaultConfigPath, F_OK) == 0) config_path = kDefaultConfigPath;
  if (!config_path.empty() && config_path[0] != '/') {
    // Absolute, so status shows where it is and a reload or an upgrade finds
    // it whatever the working directory is by then.
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) config_path = std::string(cwd) + "/" + config_path;
  }

  Result<Config> config = config_path.empty() ? Result<Config>(Config()) : LoadConfig(config_path);
  if (!config.ok() && role->journal_fd >= 0) {
    // A keeper re-executed by an upgrade is the parent of the tasks: it must
    // not exit. Its worker fails on the same file and is retried with backoff.
    for (const std::string& line : Split(config.error().message(), '\n')) log::Error(line);
    log::Error("keeper: the configuration is invalid after the upgrade; no worker can start until it is fixed");
    config = Config();
  }
  if (!config.ok()) {
    PrintErrorLines(config.error());
    std::fprintf(stderr, "outpost: agent not started: fix the configuration above\n");
    return 2;
  }
  if (check) {
    // Also the directories as they are now (the agent creates missing ones).
    Status dirs = CheckExistingDirs(*config);
    if (!dirs.ok()) {
      PrintErrorLines(dirs.error());
      return 2;
    }
    for (const std::string& w : config->warnings) std::fprintf(stderr, "outpost: warning: %s\n", w.c_str());
    PrintEffectiveConfig(*config);
    return 0;
  }
  if (role->role == keeper::AgentRole::kKeeper) {
    log::SetLevel(config->log_level);
    Status log_st = log::SetFile(config->log_file);
    if (!log_st.ok()) log::Error("cannot open log file; logging to stderr only", {{"error", log_st.error().message()}});
    // The directories are this agent's before any worker runs, for the
    // keeper's whole life (docs/process-model.md, "One agent per directory").
    const bool upgraded = role->journal_fd >= 0;
    DirClaims carried = DirClaims::Adopt(role->lock_fds);
    auto claims = DirClaims::Take(*config, 0);
    if (!claims.ok() && !upgraded) {
      // An unsafe directory is a configuration error (2), as the worker's
      // own check would report it; a directory in use is not (1).
      log::Error("agent not started", {{"error", claims.error().message()}});
      return claims.error().code() == Code::kInvalidArgument ? 2 : 1;
    }
    // A keeper re-executed by an upgrade is the parent of the tasks and keeps
    // what it held; its worker refuses the directories it cannot have.
    if (!claims.ok()) log::Error("keeper: after the upgrade", {{"error", claims.error().message()}});
    std::vector<int> lock_fds = carried.fds();
    if (claims.ok()) {
      for (int fd : claims->fds()) lock_fds.push_back(fd);
    }
    return keeper::RunKeeper(args, role->journal_fd, lock_fds);
  }
  UniqueFd keeper_fd(role->role == keeper::AgentRole::kWorker ? role->keeper_fd : -1);
  auto agent = Agent::Start(std::move(*config), std::move(keeper_fd), role->keeper_empty);
  if (!agent.ok()) {
    log::Error("agent failed to start", {{"error", agent.error().message()}});
    return agent.error().code() == Code::kInvalidArgument ? 2 : 1;
  }
  Status st = (*agent)->Run();
  if (!st.ok()) {
    log::Error("agent loop failed", {{"error", st.error().message()}});
    return 1;
  }
  // Stopped because the keeper went away: not a clean stop, and the watchdog
  // keeps counting (busybox init must bring the agent back in time).
  if ((*agent)->keeper_link() && (*agent)->keeper_link()->lost()) return 1;
  (*agent)->watchdog()->Disarm();  // a stop we were asked for
  return 0;
}

}  // namespace outpost::agent
