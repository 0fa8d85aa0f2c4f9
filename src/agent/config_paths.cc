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

bool CleanPath(std::string* path) {
  std::string out;
  for (const std::string& part : Split(*path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return false;
    out += "/" + part;
  }
  *path = out.empty() ? "/" : out;
  return true;
}

void CheckPathConflicts(const Config& c, std::vector<std::string>* errors) {
  auto say = [errors](const char* k1, const std::string& p1, const char* rel, const char* k2, const std::string& p2,
                      const std::string& why) {
    errors->push_back(std::string(k1) + " \"" + p1 + "\" " + rel + " " + k2 + " \"" + p2 + "\": " + why);
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

  struct Named {
    const char* key;
    std::string path;
  };
  const Named others[] = {{"api_socket", c.ApiSocket()}, {"log_file", c.log_file}, {"jobs_dir", c.jobs_dir}};
  for (size_t i = 0; i < 3; ++i) {
    const Named& o = others[i];
    if (o.path.empty()) continue;
    const char* rel_state = o.path == state ? "is the same path as" : "is inside";
    const char* rel_run = o.path == run ? "is the same path as" : "is inside";
    // The API socket's usual place is the runtime dir (its default), but
    // not the FIFOs' dir.
    bool socket = i == 0;
    bool socket_ok_in_run = socket && o.path != run && !Inside(o.path, run + "/fifo");
    if (Inside(o.path, state)) {
      say(o.key, o.path, rel_state, "state_dir", state, std::string(kWhyStateOwn) + "; keep " + o.key + " outside it");
    } else if (Inside(o.path, run) && !socket_ok_in_run) {
      say(o.key, o.path, rel_run, "runtime_dir", run,
          std::string(kWhyRuntimeOwn) + "; keep " + o.key + (socket ? " out of its fifo/ dir" : " outside it"));
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    for (size_t j = i + 1; j < 3; ++j) {
      if (!others[i].path.empty() && others[i].path == others[j].path) {
        say(others[i].key, others[i].path, "is the same path as", others[j].key, others[j].path,
            "each needs a path of its own");
      }
    }
  }
}

Status CheckExistingDir(const char* key, const std::string& dir, bool sticky_ok) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError(std::string(key) + ": stat '" + dir + "'");
  if (!S_ISDIR(st.st_mode)) return Error(Code::kInvalidArgument, std::string(key) + ": '" + dir + "' is not a directory");
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return Error(Code::kInvalidArgument,
                 Format("%s: directory '%s' is owned by uid %u, neither root nor the agent's user: that user could "
                        "replace what the agent keeps there; chown it or choose another directory",
                        key, dir.c_str(), static_cast<unsigned>(st.st_uid)));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (!sticky_ok || (st.st_mode & S_ISVTX) == 0)) {
    return Error(Code::kInvalidArgument,
                 Format("%s: directory '%s' (mode %04o) is writable by other users%s: they could %s; remove their "
                        "write permission (chmod go-w)",
                        key, dir.c_str(), static_cast<unsigned>(st.st_mode & 07777),
                        sticky_ok ? " without the sticky bit" : "",
                        sticky_ok ? "replace what the agent keeps there" : "add files the agent acts on as its user"));
  }
  return OkStatus();
}

Status CheckExistingDirs(const Config& c) {
  std::vector<std::string> errors;
  std::string socket_dir = sys::Dirname(c.ApiSocket());
  const std::pair<const char*, std::string> dirs[] = {{"state_dir", c.state_dir},
                                                      {"runtime_dir", c.runtime_dir},
                                                      {"api_socket", socket_dir},
                                                      {"jobs_dir", c.jobs_dir}};
  for (const auto& [key, dir] : dirs) {
    if (key == dirs[2].first && (dir == c.state_dir || dir == c.runtime_dir)) continue;
    struct stat st;
    if (dir.empty() || (::stat(dir.c_str(), &st) != 0 && errno == ENOENT)) continue;  // created at start
    Status s = CheckExistingDir(key, dir, key != dirs[3].first);
    if (!s.ok()) errors.push_back(s.error().message());
  }
  if (errors.empty()) return OkStatus();
  std::string all;
  for (const std::string& e : errors) all += (all.empty() ? "" : "\n") + e;
  return Error(Code::kInvalidArgument, all);
}

}  // namespace outpost
