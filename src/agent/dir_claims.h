// The claim of one agent on its directories. Owns: the exclusive locks that
// let only one agent use a state dir, a runtime dir and a jobs dir, what the
// lock files say about their holder (its pid and API socket), and naming the
// holder when a claim is refused (docs/process-model.md, "One agent per
// directory").
//
// The keeper takes the claims before it starts a worker and holds them for
// its whole life (a worker restart leaves them alone; the in-place upgrade
// carries the fds across its execve). The worker checks them at every start
// against the configuration it has just read: a directory its keeper holds
// is fine, one nobody holds (the configuration changed since the keeper
// started) it takes itself, one another agent holds ends its start.
//
// Locks are flock(2)s: on `<state_dir>/agent.lock` and
// `<runtime_dir>/agent.lock` (which also say who holds them), and on the
// jobs dir itself (a directory the agent only reads, which may be on a
// read-only filesystem). The holder of a lock is read from /proc/locks.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "agent/config.h"
#include "base/error.h"
#include "base/fd.h"

namespace outpost::agent {

class DirClaims {
 public:
  // Claims every directory of config for this process. holder_ok: a pid
  // whose hold on a directory counts as this agent's own (the keeper, for
  // its worker; 0 = none); this process's own holds count too. Directories
  // that are missing are created as the agent would create them. A
  // directory another agent holds is a kFailedPrecondition error naming it,
  // the holder's pid and its socket.
  static Result<DirClaims> Take(const Config& config, pid_t holder_ok);
  // The lock fds an upgrade's execve carried (made close-on-exec again).
  static DirClaims Adopt(const std::vector<int>& fds);

  // The fds this process holds locks through (for an upgrade's execve).
  std::vector<int> fds() const;
  // Makes them survive (false) or not survive (true) an execve.
  void SetCloseOnExec(bool on) const;

 private:
  std::vector<UniqueFd> held_;
};

// The pid holding a flock on the file or directory open as fd, from
// /proc/locks; 0 when none (or /proc is not there).
pid_t FlockHolder(int fd);

}  // namespace outpost::agent
