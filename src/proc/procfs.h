// Reading processes from /proc. Owns: parsing /proc/<pid>/stat, finding the
// members of a process group, and finding processes that carry a task's
// marker in their environment (the no-cgroup way to find a task's
// daemonised descendants, which leave its process group).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace outpost::proc {

struct ProcStat {
  pid_t pid = 0;
  char state = '?';
  pid_t ppid = 0;
  pid_t pgrp = 0;
  uint64_t utime_ticks = 0;
  uint64_t stime_ticks = 0;
  uint64_t start_ticks = 0;
  uint64_t rss_pages = 0;
};

// Parses the text of /proc/<pid>/stat (comm may contain spaces and ')').
bool ParseProcStat(const std::string& text, ProcStat* out);
bool ReadProcStat(pid_t pid, ProcStat* out);

// Pids of every process whose stat says pgrp == pgid.
std::vector<pid_t> ProcessGroupMembers(pid_t pgid);
// Pids whose environment contains the exact entry `marker` ("K=V").
std::vector<pid_t> ProcessesWithEnv(const std::string& marker);
// Pids whose environment has an entry starting with `prefix`, and in *rest
// (same order) the remainder of that entry.
std::vector<pid_t> ProcessesWithEnvPrefix(const std::string& prefix, std::vector<std::string>* rest);
// Whether pid's environment contains the exact entry `marker`.
bool HasEnv(pid_t pid, const std::string& marker);
// The children of pid (of its main thread: /proc/PID/task/PID/children).
// False where the kernel has no such file (CONFIG_PROC_CHILDREN off) or pid
// is gone; then *out is empty.
bool ChildrenOf(pid_t pid, std::vector<pid_t>* out);
// Every process under root: the children of each of its threads (a child
// forked by any thread of a multi-threaded process), theirs, and so on.
// Empty where the kernel has no children files.
std::vector<pid_t> DescendantsOf(pid_t root);

// /proc/sys/kernel/random/boot_id (read once; "" where missing).
const std::string& CurrentBootId();
long ClockTicksPerSecond();
long PageSize();

}  // namespace outpost::proc
