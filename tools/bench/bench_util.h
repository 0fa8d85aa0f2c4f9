// What every benchmark under tools/bench needs: failing loudly, the BENCH
// line (shared/design.md §7), percentiles of latency samples, and removing a
// scratch tree. Header-only: each benchmark is one .cc file.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::bench {

// Set by each benchmark's main, for messages.
inline const char*& Name() {
  static const char* name = "bench";
  return name;
}

[[noreturn]] inline void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s: %s\n", Name(), what, detail.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(Result<T> r, const char* what) {
  if (!r.ok()) Die(what, r.error().message());
  return std::move(*r);
}

// BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
inline void Print(const char* name, double value, const char* unit, const char* base_name, double base) {
  std::printf("BENCH %s %.1f %s baseline=%s %.1f ratio=%.2f\n", name, value, unit, base_name, base,
              base > 0 ? value / base : 0.0);
  std::fflush(stdout);
}

// The q-quantile (0..1) of nanosecond samples, in microseconds.
inline double PercentileMicros(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return static_cast<double>(v[i]) / 1000.0;
}

inline int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
inline void RemoveTree(const std::string& dir) { ::nftw(dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

// Starts a process in its own session (a Ctrl-C of the bench does not reach
// it), stdio on /dev/null (stderr to stderr_path when given).
inline pid_t SpawnDetached(const std::vector<std::string>& args, const std::string& stderr_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setsid();  // a Ctrl-C for the bench must not stop the agent behind its back
    int null = ::open("/dev/null", O_RDWR);
    int err = stderr_path.empty() ? null : ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err < 0 ? null : err, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Every process whose environment holds marker ("K=V"): the tasks a
// bench started, for clean-up.
inline std::vector<pid_t> PidsWithEnv(const std::string& marker) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    auto env = sys::ReadFile(Format("/proc/%d/environ", pid), 1 << 20);
    if (!env.ok()) continue;
    for (const std::string& kv : Split(*env, '\0')) {
      if (kv == marker) {
        out.push_back(pid);
        break;
      }
    }
  }
  ::closedir(d);
  return out;
}

// A "Name:  value kB" field of /proc/<pid>/status or smaps_rollup, in KiB; -1 if absent.
inline long ProcKiB(pid_t pid, const char* file, const char* field) {
  auto text = sys::ReadFile(Format("/proc/%d/%s", pid, file), 1 << 16);
  if (!text.ok()) return -1;
  std::string key = std::string("\n") + field + ":";
  std::string all = "\n" + *text;
  size_t at = all.find(key);
  if (at == std::string::npos) return -1;
  return std::strtol(all.c_str() + at + key.size(), nullptr, 10);
}
inline long RssKiB(pid_t pid) { return ProcKiB(pid, "status", "VmRSS"); }

// Open fds of a process; -1 if unreadable.
inline int CountFds(pid_t pid) {
  DIR* d = ::opendir(Format("/proc/%d/fd", pid).c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

}  // namespace outpost::bench
