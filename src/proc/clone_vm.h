// clone3(2) with a child stack: the one way to start a process that shares
// the caller's memory until it execs (CLONE_VM | CLONE_VFORK), so the cost of
// a spawn does not grow with the caller's address space, while keeping
// clone3's CLONE_INTO_CGROUP and CLONE_PIDFD. Used by proc/spawn only.
#pragma once

#include <cstdint>

namespace outpost::proc {

// The kernel's struct clone_args (version 2, with cgroup).
struct CloneArgs {
  uint64_t flags;
  uint64_t pidfd;
  uint64_t child_tid;
  uint64_t parent_tid;
  uint64_t exit_signal;
  uint64_t stack;
  uint64_t stack_size;
  uint64_t tls;
  uint64_t set_tid;
  uint64_t set_tid_size;
  uint64_t cgroup;
};

// clone3 with args; the child runs fn(arg) on args->stack and exits with
// its return value (fn normally ends in execve or _exit). Returns the
// child's pid in the caller, or -1 with errno (ENOSYS where this
// architecture has no implementation here or the kernel no clone3).
long RawClone3(CloneArgs* args, int (*fn)(void*), void* arg);

}  // namespace outpost::proc
