// What a spawn is given, worked out before it (proc/spawn.h declares
// these): a command looked up in PATH as a shell does, and a task's rlimits
// resolved by name with the agent's default RLIMIT_NOFILE.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cctype>
#include <string>
#include <vector>

#include "base/strings.h"
#include "proc/spawn.h"

namespace outpost::proc {

Result<std::string> ResolveCommand(const std::string& cmd, const std::string& path_var, int* exit_code) {
  *exit_code = 0;
  auto check = [&](const std::string& p) -> int {  // 0 ok, else errno
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (::access(p.c_str(), X_OK) != 0) return errno;
    return 0;
  };
  if (cmd.empty()) {
    *exit_code = 127;
    return Error(Code::kInvalidArgument, "command is empty");
  }
  if (cmd.find('/') != std::string::npos) {
    int err = check(cmd);
    if (err == 0) return cmd;
    *exit_code = err == ENOENT || err == ENOTDIR ? 127 : 126;
    return Error(*exit_code == 127 ? Code::kNotFound : Code::kPermissionDenied,
                 ErrnoError("command '" + cmd + "'", err).message() + Format(" (exit status %d)", *exit_code));
  }
  std::string first_denied;
  int denied_err = 0;
  for (const std::string& dir : Split(path_var, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/" + cmd;
    int err = check(p);
    if (err == 0) return p;
    if (err != ENOENT && err != ENOTDIR && first_denied.empty()) {
      first_denied = p;
      denied_err = err;
    }
  }
  if (!first_denied.empty()) {
    *exit_code = 126;
    return Error(Code::kPermissionDenied, ErrnoError("command '" + first_denied + "'", denied_err).message() +
                                              " (exit status 126)");
  }
  *exit_code = 127;
  return Error(Code::kNotFound, "command \"" + cmd + "\" not found in PATH=" + path_var + " (exit status 127)");
}

namespace {
rlimit g_task_nofile;
bool g_task_nofile_set = false;
}  // namespace

void SetTaskDefaultNofile(const rlimit& lim) {
  g_task_nofile = lim;
  g_task_nofile_set = true;
}

bool TaskDefaultNofile(rlimit* out) {
  if (g_task_nofile_set) *out = g_task_nofile;
  return g_task_nofile_set;
}

Result<std::vector<std::pair<int, rlimit>>> TaskRlimits(const std::vector<Rlimit>& limits) {
  std::vector<std::pair<int, rlimit>> out;
  bool has_nofile = false;
  for (const Rlimit& r : limits) {
    auto res = ParseRlimitName(r.name);
    if (!res.ok()) return res.error();
    if (r.soft > r.hard) {
      return Error(Code::kInvalidArgument, "rlimit " + r.name + ": soft limit is above the hard limit");
    }
    out.push_back({*res, rlimit{static_cast<rlim_t>(r.soft), static_cast<rlim_t>(r.hard)}});
    has_nofile |= *res == RLIMIT_NOFILE;
  }
  rlimit nofile;
  if (!has_nofile && TaskDefaultNofile(&nofile)) out.push_back({RLIMIT_NOFILE, nofile});
  return out;
}

Result<int> ParseRlimitName(const std::string& raw) {
  std::string name;
  for (char c : raw) name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (StartsWith(name, "rlimit_")) name = name.substr(7);
  static const struct { const char* name; int res; } kNames[] = {
      {"as", RLIMIT_AS}, {"core", RLIMIT_CORE}, {"cpu", RLIMIT_CPU}, {"data", RLIMIT_DATA},
      {"fsize", RLIMIT_FSIZE}, {"locks", RLIMIT_LOCKS}, {"memlock", RLIMIT_MEMLOCK},
      {"msgqueue", RLIMIT_MSGQUEUE}, {"nice", RLIMIT_NICE}, {"nofile", RLIMIT_NOFILE}, {"nproc", RLIMIT_NPROC},
      {"rss", RLIMIT_RSS}, {"rtprio", RLIMIT_RTPRIO}, {"rttime", RLIMIT_RTTIME},
      {"sigpending", RLIMIT_SIGPENDING}, {"stack", RLIMIT_STACK}};
  for (const auto& k : kNames) {
    if (name == k.name) return k.res;
  }
  return Error(Code::kInvalidArgument, "unknown rlimit \"" + raw + "\" (known: as, core, cpu, data, fsize, locks, "
                                       "memlock, msgqueue, nice, nofile, nproc, rss, rtprio, rttime, sigpending, "
                                       "stack)");
}

}  // namespace outpost::proc
