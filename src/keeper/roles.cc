// The keeper's decisions that need no process: which role the command line
// asks for (keeper, worker, no keeper), the worker restart back-off, and what
// a worker's exit means. Kept apart from the keeper's loop (keeper.cc) so
// they are tested as plain functions.
#include <sys/wait.h>

#include <climits>
#include <cstring>

#include "base/strings.h"
#include "keeper/keeper.h"
#include "proc/exit_status.h"

namespace outpost::keeper {

// ---- command-line roles ------------------------------------------------------

namespace {

Result<int> ParseFdFlag(const std::string& arg, const char* prefix) {
  auto n = ParseInt(std::string_view(arg).substr(std::strlen(prefix)), 0, INT_MAX);
  if (!n.ok()) return Error(Code::kInvalidArgument, arg + ": " + n.error().message());
  return static_cast<int>(*n);
}

}  // namespace

Result<KeeperFlags> TakeKeeperFlags(std::vector<std::string>* args) {
  KeeperFlags f;
  bool worker = false, no_keeper = false;
  std::vector<std::string> rest;
  for (const std::string& a : *args) {
    if (a == kNoKeeperFlag) {
      no_keeper = true;
    } else if (a == kWorkerFlag) {
      worker = true;
    } else if (StartsWith(a, kKeeperFdFlag)) {
      auto fd = ParseFdFlag(a, kKeeperFdFlag);
      if (!fd.ok()) return fd.error();
      f.keeper_fd = *fd;
    } else if (a == kKeeperEmptyFlag) {
      f.keeper_empty = true;
    } else if (StartsWith(a, kLockFdFlag)) {
      auto fd = ParseFdFlag(a, kLockFdFlag);
      if (!fd.ok()) return fd.error();
      f.lock_fds.push_back(*fd);
    } else if (StartsWith(a, kJournalFdFlag)) {
      auto fd = ParseFdFlag(a, kJournalFdFlag);
      if (!fd.ok()) return fd.error();
      f.journal_fd = *fd;
    } else {
      rest.push_back(a);
    }
  }
  if (worker && no_keeper) return Error(Code::kInvalidArgument, "--worker and --no-keeper exclude each other");
  if (worker && f.keeper_fd < 0) return Error(Code::kInvalidArgument, "--worker needs --keeper-fd=N");
  if (!worker && f.keeper_fd >= 0) return Error(Code::kInvalidArgument, "--keeper-fd is only for --worker");
  if (!worker && f.keeper_empty) return Error(Code::kInvalidArgument, "--keeper-empty is only for --worker");
  if (f.journal_fd >= 0 && (worker || no_keeper)) {
    return Error(Code::kInvalidArgument, "--keeper-journal-fd is only for the keeper");
  }
  if (!f.lock_fds.empty() && f.journal_fd < 0) {
    return Error(Code::kInvalidArgument, "--keeper-lock-fd is only for a keeper re-executed by an upgrade");
  }
  f.role = worker ? AgentRole::kWorker : no_keeper ? AgentRole::kNoKeeper : AgentRole::kKeeper;
  *args = std::move(rest);
  return f;
}

// ---- restart policy --------------------------------------------------------

int64_t RestartBackoff::NextDelay(int64_t uptime_nanos) {
  if (uptime_nanos >= kResetAfterNanos) next_ = 0;
  int64_t d = next_;
  next_ = next_ == 0 ? kInitialNanos : next_ * 2 > kMaxNanos ? kMaxNanos : next_ * 2;
  return d;
}

WorkerExitDecision DecideOnWorkerExit(StopRequest stop, bool may_have_tasks, int wait_status) {
  if (stop == StopRequest::kStop) {
    bool clean = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
    return {WorkerExitDecision::kExitKeeper, clean ? 0 : 1};
  }
  if (stop == StopRequest::kUpgrade) return {WorkerExitDecision::kExecUpgrade, 0};
  if (!may_have_tasks) {
    // 128+signo for a signal death; 0 (nothing to report) becomes 1.
    const int code = proc::DecodeWaitStatus(wait_status).exit_code;
    return {WorkerExitDecision::kExitKeeper, code == 0 ? 1 : code};
  }
  return {WorkerExitDecision::kRestart, 0};
}

}  // namespace outpost::keeper
