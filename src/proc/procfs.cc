#include "proc/procfs.h"

#include <algorithm>

#include <dirent.h>
#include <unistd.h>

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::proc {

bool ParseProcStat(const std::string& text, ProcStat* out) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= text.size()) return false;
  auto pid = ParseInt(text.substr(0, open - 1), 1, INT32_MAX);
  if (!pid.ok()) return false;
  std::vector<std::string> f = Split(text.substr(close + 2), ' ');
  // f[0] = field 3 (state) ... f[k] = field k+3.
  if (f.size() < 22 || f[0].empty()) return false;
  auto num = [&](size_t field) -> uint64_t {
    auto v = ParseInt(f[field - 3], INT64_MIN, INT64_MAX);
    return v.ok() && *v > 0 ? static_cast<uint64_t>(*v) : 0;
  };
  out->pid = static_cast<pid_t>(*pid);
  out->state = f[0][0];
  out->ppid = static_cast<pid_t>(num(4));
  out->pgrp = static_cast<pid_t>(num(5));
  out->utime_ticks = num(14);
  out->stime_ticks = num(15);
  out->start_ticks = num(22);
  out->rss_pages = num(24);
  return true;
}

bool ReadProcStat(pid_t pid, ProcStat* out) {
  auto text = sys::ReadFile(Format("/proc/%d/stat", pid), 4096);
  return text.ok() && ParseProcStat(*text, out);
}

template <typename Fn>
static void ForEachPid(Fn fn) {
  DIR* d = ::opendir("/proc");
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    auto pid = ParseInt(e->d_name, 1, INT32_MAX);
    if (pid.ok()) fn(static_cast<pid_t>(*pid));
  }
  ::closedir(d);
}

std::vector<pid_t> ProcessGroupMembers(pid_t pgid) {
  std::vector<pid_t> out;
  ForEachPid([&](pid_t pid) {
    ProcStat st;
    if (ReadProcStat(pid, &st) && st.pgrp == pgid && st.state != 'Z') out.push_back(pid);
  });
  return out;
}

namespace {
// Whether pid's environment has the entry (or, with prefix, an entry
// starting with it); *rest gets the remainder of that entry.
bool EnvMatch(pid_t pid, const std::string& entry, bool prefix, std::string* rest) {
  auto env = sys::ReadFile(Format("/proc/%d/environ", pid), 1 << 20);
  if (!env.ok()) return false;
  size_t start = 0;
  while (start < env->size()) {
    size_t end = env->find('\0', start);
    if (end == std::string::npos) end = env->size();
    size_t len = prefix ? std::min(end - start, entry.size()) : end - start;
    if ((!prefix || end - start >= entry.size()) && env->compare(start, len, entry) == 0) {
      if (rest) *rest = env->substr(start + entry.size(), end - start - entry.size());
      return true;
    }
    start = end + 1;
  }
  return false;
}

std::vector<pid_t> WithEnv(const std::string& entry, bool prefix, std::vector<std::string>* rest) {
  std::vector<pid_t> out;
  ForEachPid([&](pid_t pid) {
    std::string r;
    if (!EnvMatch(pid, entry, prefix, rest ? &r : nullptr)) return;
    out.push_back(pid);
    if (rest) rest->push_back(std::move(r));
  });
  return out;
}
}  // namespace

bool HasEnv(pid_t pid, const std::string& marker) { return EnvMatch(pid, marker, false, nullptr); }

namespace {

// The pids of one /proc/PID/task/TID/children file, appended to *out.
bool AppendChildren(const std::string& path, std::vector<pid_t>* out) {
  auto text = sys::ReadFile(path, 1 << 20);
  if (!text.ok()) return false;
  for (const std::string& f : Split(*text, ' ')) {
    auto p = ParseInt(f, 1, INT32_MAX);
    if (p.ok()) out->push_back(static_cast<pid_t>(*p));
  }
  return true;
}

}  // namespace

bool ChildrenOf(pid_t pid, std::vector<pid_t>* out) {
  out->clear();
  return AppendChildren(Format("/proc/%d/task/%d/children", pid, pid), out);
}

std::vector<pid_t> DescendantsOf(pid_t root) {
  std::vector<pid_t> out, queue{root};
  for (size_t i = 0; i < queue.size() && queue.size() < 4096; ++i) {
    const std::string dir = Format("/proc/%d/task", queue[i]);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    size_t before = out.size();
    while (struct dirent* e = ::readdir(d)) {
      if (e->d_name[0] >= '0' && e->d_name[0] <= '9') (void)AppendChildren(dir + "/" + e->d_name + "/children", &out);
    }
    ::closedir(d);
    queue.insert(queue.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
  }
  return out;
}

std::vector<pid_t> ProcessesWithEnv(const std::string& marker) { return WithEnv(marker, false, nullptr); }

std::vector<pid_t> ProcessesWithEnvPrefix(const std::string& prefix, std::vector<std::string>* rest) {
  return WithEnv(prefix, true, rest);
}

const std::string& CurrentBootId() {
  static const std::string id = [] {
    auto text = sys::ReadFile("/proc/sys/kernel/random/boot_id", 128);
    std::string s = text.ok() ? *text : std::string();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }();
  return id;
}

long ClockTicksPerSecond() {
  static long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? ticks : 100;
}

long PageSize() {
  static long size = ::sysconf(_SC_PAGESIZE);
  return size > 0 ? size : 4096;
}

}  // namespace outpost::proc
