#include "agent/dir_claims.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::agent {

namespace {

constexpr const char kLockName[] = "agent.lock";

struct Target {
  const char* key;    // the config key, for messages
  std::string dir;    // the directory claimed
  std::string path;   // what is locked: dir/agent.lock, or dir itself
  bool lock_file;
};

// "pid N\nsocket PATH\n": who holds the lock, for the next agent's message.
void WriteHolder(int fd, pid_t pid, const std::string& socket) {
  std::string text = Format("pid %d\nsocket %s\n", static_cast<int>(pid), socket.c_str());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    log::Warn("cannot write the holder into a lock file (the lock itself holds)", {{"error", std::strerror(errno)}});
  }
}

// The socket a lock file names, "" if none.
std::string SocketIn(const std::string& lock_file) {
  auto text = sys::ReadFile(lock_file, 4096);
  if (!text.ok()) return "";
  for (const std::string& line : Split(*text, '\n')) {
    if (StartsWith(line, "socket ")) return line.substr(7);
  }
  return "";
}

// The socket of the agent whose process pid holds an agent.lock open (a
// keeper holds its state dir's), "" if it cannot be told.
std::string SocketOfHolder(pid_t pid) {
  std::string fd_dir = Format("/proc/%d/fd", static_cast<int>(pid));
  auto names = sys::ListDir(fd_dir);
  if (!names.ok()) return "";
  for (const std::string& n : *names) {
    char buf[4096];
    ssize_t len = ::readlink((fd_dir + "/" + n).c_str(), buf, sizeof buf - 1);
    if (len <= 0) continue;
    std::string target(buf, static_cast<size_t>(len));
    if (EndsWith(target, std::string("/") + kLockName)) {
      std::string s = SocketIn(target);
      if (!s.empty()) return s;
    }
  }
  return "";
}

Error Refusal(const Target& t, pid_t holder) {
  std::string who;
  if (holder > 0) {
    std::string socket = t.lock_file ? SocketIn(t.path) : "";
    if (socket.empty()) socket = SocketOfHolder(holder);
    who = Format("pid %d", static_cast<int>(holder));
    if (!socket.empty()) who += ", serving " + socket;
  } else {
    who = "its pid could not be read from /proc/locks";
  }
  return Error(Code::kFailedPrecondition,
               Format("%s '%s' is in use by another agent (%s): only one agent may use it; stop that agent or give "
                      "this one its own %s",
                      t.key, t.dir.c_str(), who.c_str(), t.key));
}

}  // namespace

pid_t FlockHolder(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return 0;
  auto text = sys::ReadFile("/proc/locks", 4 << 20);
  if (!text.ok()) return 0;
  // "1: FLOCK  ADVISORY  WRITE 212 fd:01:131090 0 EOF"; waiters are marked
  // "1: -> FLOCK ...". The device is the filesystem's (hex major:minor),
  // which on some filesystems (btrfs subvolumes) is not what stat says: an
  // inode number that only one lock has is taken then.
  pid_t by_ino = 0;
  int ino_matches = 0;
  for (const std::string& line : Split(*text, '\n')) {
    std::vector<std::string> f;
    for (const std::string& w : Split(line, ' ')) {
      if (!w.empty()) f.push_back(w);
    }
    if (f.size() < 6 || f[1] != "FLOCK") continue;
    std::vector<std::string> id = Split(f[5], ':');
    if (id.size() != 3) continue;
    char* end = nullptr;
    unsigned long long ino = std::strtoull(id[2].c_str(), &end, 10);
    if (*end != '\0' || ino != static_cast<unsigned long long>(st.st_ino)) continue;
    auto pid = ParseInt(f[4], 1, INT32_MAX);
    if (!pid.ok()) continue;
    unsigned long maj = std::strtoul(id[0].c_str(), nullptr, 16), min = std::strtoul(id[1].c_str(), nullptr, 16);
    if (maj == major(st.st_dev) && min == minor(st.st_dev)) return static_cast<pid_t>(*pid);
    by_ino = static_cast<pid_t>(*pid);
    ++ino_matches;
  }
  return ino_matches == 1 ? by_ino : 0;
}

DirClaims DirClaims::Adopt(const std::vector<int>& fds) {
  DirClaims claims;
  for (int fd : fds) {
    (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
    claims.held_.emplace_back(fd);
  }
  return claims;
}

Result<DirClaims> DirClaims::Take(const Config& config, pid_t holder_ok) {
  OUTPOST_RETURN_IF_ERROR(CheckExistingDirs(config));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(config.state_dir, 0711));
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(config.runtime_dir, 0700));
  std::vector<Target> targets = {
      {"state_dir", config.state_dir, config.state_dir + "/" + kLockName, true},
      {"runtime_dir", config.runtime_dir, config.runtime_dir + "/" + kLockName, true},
  };
  if (!config.jobs_dir.empty()) {
    // Created here as the jobs dir watch would (it may not be creatable: a
    // read-only /etc; then there is nothing to claim yet).
    (void)sys::MkdirAll(config.jobs_dir, 0755);
    struct stat st;
    if (::stat(config.jobs_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      targets.push_back({"jobs_dir", config.jobs_dir, config.jobs_dir, false});
    }
  }

  DirClaims claims;
  for (const Target& t : targets) {
    auto fd = t.lock_file ? sys::Open(t.path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600)
                          : sys::Open(t.path, O_RDONLY | O_DIRECTORY);
    if (!fd.ok()) return fd.error().Wrap(Format("claim %s", t.key));
    if (sys::RetryEintr([&] { return ::flock(fd->get(), LOCK_EX | LOCK_NB); }) == 0) {
      if (t.lock_file) WriteHolder(fd->get(), ::getpid(), config.ApiSocket());
      claims.held_.push_back(std::move(*fd));
      continue;
    }
    if (errno != EWOULDBLOCK) return PathError("lock", t.path);
    const pid_t holder = FlockHolder(fd->get());
    if (holder > 0 && (holder == holder_ok || holder == ::getpid())) {
      // Ours already (the keeper's, for its worker): the file names the
      // socket this configuration serves.
      if (t.lock_file) WriteHolder(fd->get(), holder, config.ApiSocket());
      continue;
    }
    return Refusal(t, holder);
  }
  return claims;
}

std::vector<int> DirClaims::fds() const {
  std::vector<int> v;
  for (const UniqueFd& fd : held_) v.push_back(fd.get());
  return v;
}

void DirClaims::SetCloseOnExec(bool on) const {
  for (const UniqueFd& fd : held_) (void)::fcntl(fd.get(), F_SETFD, on ? FD_CLOEXEC : 0);
}

}  // namespace outpost::agent
