// The agent's paths: their lexical form, which of them may share a
// directory, and whether an existing directory is safe to use. The
// rules and their reasons are in docs/config.md ("Paths") and
// docs/security.md.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "agent/config.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost {

namespace {

// a is b or below it.
bool Inside(const std::string& a, const std::string& b) {
  return a == b || b == "/" || (StartsWith(a, b) && a[b.size()] == '/');
}

constexpr const char* kWhyStateOwn =
    "the state dir is the agent's alone: it names entries there after tasks, and tasks' users own their task "
    "dirs in it";
constexpr const char* kWhyRuntimeOwn = "the runtime dir is the agent's alone: it names the log FIFOs there after tasks";

}  // namespace

__attribute__((noinline)) bool CleanPath(std::string* path) {
  const std::string& p = *path;
  std::string out;
  for (size_t i = 0, j; i < p.size(); i = j + 1) {
    j = p.find('/', i);
    if (j == std::string::npos) j = p.size();
    size_t n = j - i;
    if (n == 2 && p[i] == '.' && p[i + 1] == '.') return false;
    if (n == 0 || (n == 1 && p[i] == '.')) continue;
    out += '/';
    out.append(p, i, n);
  }
  *path = out.empty() ? "/" : out;
  return true;
}

__attribute__((noinline)) void CheckPathConflicts(const Config& c, std::vector<std::string>* errors) {
  // "<k1> "<p1>" <rel> <k2> "<p2>": <why>[; keep <k1><keep>]"
  auto say = [errors](const char* k1, const std::string& p1, const char* rel, const char* k2, const std::string& p2,
                      const char* why, const char* keep = nullptr) {
    errors->push_back(Format("%s \"%s\" %s %s \"%s\": %s%s%s%s", k1, p1.c_str(), rel, k2, p2.c_str(), why,
                             keep ? "; keep " : "", keep ? k1 : "", keep ? keep : ""));
  };
  const std::string& state = c.state_dir;
  const std::string& run = c.runtime_dir;
  if (state == run) {
    say("state_dir", state, "is the same directory as", "runtime_dir", run,
        "the state dir must stay searchable by tasks' users (0711) and the runtime dir private (0700); give each a "
        "directory of its own");
  } else if (Inside(run, state)) {
    say("runtime_dir", run, "is inside", "state_dir", state,
        "tasks' users can search the state dir and own their task dirs in it; the runtime dir (log FIFOs, API "
        "socket) must be outside it");
  } else if (Inside(state, run)) {
    say("state_dir", state, "is inside", "runtime_dir", run,
        "the runtime dir is private (0700), so tasks running as other users could not reach their task dirs");
  }

  const char* const keys[] = {"api_socket", "log_file", "jobs_dir", "plugins_dir"};
  const std::string socket = c.ApiSocket();
  // (A default plugins_dir is inside runtime_dir, whose own conflicts say
  // all there is to say.)
  const std::string* const paths[] = {&socket, &c.log_file, &c.jobs_dir, &c.plugins_dir};
  constexpr size_t kPaths = 4;
  const std::string fifo_dir = run + "/fifo";
  for (size_t i = 0; i < kPaths; ++i) {
    const std::string& p = *paths[i];
    if (p.empty()) continue;
    if (Inside(p, state)) {
      say(keys[i], p, p == state ? "is the same path as" : "is inside", "state_dir", state, kWhyStateOwn,
          " outside it");
    } else if (Inside(p, run) && (i == 1 || i == 2 || p == run || Inside(p, fifo_dir))) {
      // The API socket's and the plugins dir's usual place is the runtime
      // dir (their default), but not the FIFOs' dir.
      say(keys[i], p, p == run ? "is the same path as" : "is inside", "runtime_dir", run, kWhyRuntimeOwn,
          i == 0 || i == 3 ? " out of its fifo/ dir" : " outside it");
    }
    for (size_t j = i + 1; j < kPaths; ++j) {
      if (p == *paths[j]) say(keys[i], p, "is the same path as", keys[j], p, "each needs a path of its own");
    }
  }
}

Status CheckExistingDir(const char* key, const std::string& dir, bool sticky_ok) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return PathError("stat", dir);
  const char* why = nullptr;
  if (!S_ISDIR(st.st_mode)) {
    why = "is not a directory";
  } else if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    why = "is owned by a user other than root and the agent's: that user could replace what the agent keeps "
          "there; chown it or choose another directory";
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (!sticky_ok || (st.st_mode & S_ISVTX) == 0)) {
    why = sticky_ok ? "is writable by other users without the sticky bit: they could replace what the agent keeps "
                      "there; remove their write permission (chmod go-w)"
                    : "is writable by other users: they could add files the agent acts on as its user; remove "
                      "their write permission (chmod go-w)";
  }
  if (!why) return OkStatus();
  return Error(Code::kInvalidArgument, Format("%s: '%s' (mode %04o, owner %u) %s", key, dir.c_str(),
                                              static_cast<unsigned>(st.st_mode & 07777),
                                              static_cast<unsigned>(st.st_uid), why));
}

Status CheckExistingDirs(const Config& c) {
  std::string socket_dir = sys::Dirname(c.ApiSocket());
  std::string plugins_dir = c.PluginsDir();
  const char* const keys[] = {"state_dir", "runtime_dir", "api_socket", "jobs_dir", "plugins_dir"};
  const std::string* const dirs[] = {&c.state_dir, &c.runtime_dir, &socket_dir, &c.jobs_dir, &plugins_dir};
  std::string all;
  for (int i = 0; i < 5; ++i) {
    const std::string& d = *dirs[i];
    // Missing ones are created at start.
    if (d.empty() || (i == 2 && (d == c.state_dir || d == c.runtime_dir)) || ::access(d.c_str(), F_OK) != 0) continue;
    Status s = CheckExistingDir(keys[i], d, i < 3);
    if (s.ok()) continue;
    if (!all.empty()) all += '\n';
    all += s.error().message();
  }
  if (all.empty()) return OkStatus();
  return Error(Code::kInvalidArgument, all);
}

}  // namespace outpost
