// The keeper: the tiny process `outpost agent` runs as, so that tasks, their
// exit statuses and (later) their log FIFOs outlive a crash, kill -9 or
// upgrade of the worker. See docs/process-model.md.
//
//   busybox init ── outpost agent                    (keeper, child subreaper)
//                     ├── outpost agent --worker ... (worker: loop and logic)
//                     └── tasks                      (spawned by the worker with
//                                                     CLONE_PARENT: our children)
//
// Owns: the keeper's flags, starting the worker (fork + execve of the agent
// binary, resolved once from /proc/self/exe so a binary replaced on disk is
// picked up), restarting it with backoff, reaping every child, forwarding
// signals, and the in-place upgrade (SIGUSR2: stop the worker, execve the
// binary again with the journal in a memfd, keeping the keeper's pid and so
// the parenthood of every task).
//
// Does not own: the journal of task exits not yet acknowledged by a worker
// (keeper/journal), the keeper's end of the worker socket (keeper/channel),
// anything the worker does (agent/), the worker side of the socket
// (keeper/link), the message encoding (keeper/proto.h).
//
// Rules: after start-up the keeper does not allocate on its hot path (a task
// exit is a waitpid, a copy into a fixed ring and a send); it must not exit
// while it may have tasks, except when told to stop. Its log lines (rare
// events) go through base/log.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace outpost::keeper {

// ---- command-line roles ------------------------------------------------------

enum class AgentRole {
  kKeeper,    // `outpost agent`: run the keeper, which starts the worker
  kWorker,    // internal: `--worker --keeper-fd=N`, started by the keeper
  kNoKeeper,  // `--no-keeper`: run the worker logic directly (debugging)
};

struct KeeperFlags {
  AgentRole role = AgentRole::kKeeper;
  int keeper_fd = -1;   // kWorker: our end of the keeper socketpair
  int journal_fd = -1;  // kKeeper after an upgrade exec: the carried journal
  // kKeeper after an upgrade exec: the fds its directory locks are held
  // through (agent/dir_claims), carried across the execve.
  std::vector<int> lock_fds;
  // kWorker: when the keeper started us it had no child and held no exit,
  // so it has nothing to replay and no task of an earlier worker can exit
  // through it (see KeeperLink::Attach).
  bool keeper_empty = false;
};

constexpr const char* kNoKeeperFlag = "--no-keeper";
constexpr const char* kWorkerFlag = "--worker";              // internal
constexpr const char* kKeeperFdFlag = "--keeper-fd=";        // internal
constexpr const char* kJournalFdFlag = "--keeper-journal-fd=";  // internal
constexpr const char* kKeeperEmptyFlag = "--keeper-empty";      // internal
constexpr const char* kLockFdFlag = "--keeper-lock-fd=";        // internal, repeated

// Removes the keeper flags from *args (leaving the user's agent arguments)
// and returns what they asked for. Malformed or contradictory flags are an
// InvalidArgument error (exit 2).
Result<KeeperFlags> TakeKeeperFlags(std::vector<std::string>* args);

// Runs the keeper until it is told to stop; returns the process exit code.
// agent_args: the user's `outpost agent` arguments without keeper flags (the
// worker gets them plus --worker --keeper-fd=N, and --keeper-empty when the
// keeper has no child and no exit to hand it; an upgrade exec gets them plus
// --keeper-journal-fd=N). journal_fd: from an upgrade exec, or -1.
// lock_fds: the fds the agent's directory locks are held through; they stay
// open for the keeper's life and an upgrade's execve carries them (as
// --keeper-lock-fd=N each).
int RunKeeper(const std::vector<std::string>& agent_args, int journal_fd, const std::vector<int>& lock_fds);

// ---- restart policy --------------------------------------------------------

// Worker restart delay: none for the first restart (the tasks' exits and
// output wait while no worker runs), then 0.5 s doubling to 30 s; back to
// none once a worker stayed up for 60 s.
class RestartBackoff {
 public:
  static constexpr int64_t kInitialNanos = 500LL * 1000000;
  static constexpr int64_t kMaxNanos = 30LL * 1000000000;
  static constexpr int64_t kResetAfterNanos = 60LL * 1000000000;

  // The delay before starting the next worker after one that ran uptime_nanos.
  int64_t NextDelay(int64_t uptime_nanos);

 private:
  int64_t next_ = 0;
};

enum class StopRequest { kNone, kStop, kUpgrade };

struct WorkerExitDecision {
  enum Action { kRestart, kExitKeeper, kExecUpgrade } action;
  int exit_code;  // for kExitKeeper
};

// What the keeper does when its worker exits with wait_status:
// - after a stop request: exit 0 (1 if the worker did not exit 0);
// - after an upgrade request: exec the new binary;
// - if there cannot be tasks yet (no worker ever became ready, no child and
//   no journaled exit: the first start failed on a bad config, another agent
//   running, a socket path taken...): exit with the worker's code (128+signo
//   for a signal; 1 for 0), like the agent did before the keeper, instead of
//   retrying forever;
// - otherwise restart it with backoff. Once tasks may exist the keeper is
//   their parent, so it never gives up on its own.
WorkerExitDecision DecideOnWorkerExit(StopRequest stop, bool may_have_tasks, int wait_status);

}  // namespace outpost::keeper
