#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace oci_driver {

namespace {

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(&s[0]);
  out.push_back(nullptr);
  return out;
}

// In the child: stdin from /dev/null, stdout and stderr as given, every
// other fd closed on exec (they are all O_CLOEXEC but the three).
[[noreturn]] void ExecChild(std::vector<char*>& argv, int out_fd, int err_fd) {
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0 && null != 0) {
    ::dup2(null, 0);
    ::close(null);
  }
  if (out_fd >= 0 && out_fd != 1) ::dup2(out_fd, 1);
  if (err_fd >= 0 && err_fd != 2) ::dup2(err_fd, 2);
  ::execv(argv[0], argv.data());
  const char* msg = "cannot exec the OCI runtime\n";
  if (::write(2, msg, std::strlen(msg)) < 0) ::_exit(127);
  ::_exit(127);
}

}  // namespace

bool RunResult::ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string FindExecutable(const std::string& name) {
  if (name.empty()) return "";
  if (name[0] == '/') return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* env = std::getenv("PATH");
  std::string path = env && *env ? env : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

std::string ReadSmallFile(const std::string& path, size_t max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while (out.size() < max && (n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (out.size() > max) out.resize(max);
  return out;
}

bool MkdirAll(const std::string& dir, mode_t mode) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      std::string part = dir.substr(0, i);
      if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST) return false;
    }
  }
  return true;
}

bool WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  return ok && ::rename(tmp.c_str(), path.c_str()) == 0;
}

void RemoveBundle(const std::string& dir) {
  for (const char* f : {"config.json", "pid", "runtime.log", "config.json.tmp", kBundleRuntimeFile, "runtime.json.tmp"}) {
    ::unlink((dir + "/" + f).c_str());
  }
  ::rmdir(dir.c_str());
}

std::string LastLine(const std::string& path) {
  std::string text = ReadSmallFile(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  size_t nl = text.rfind('\n');
  std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  return line.size() > 512 ? line.substr(line.size() - 512) : line;
}

Runtime::Runtime(const std::string& name, const std::string& root)
    : name_(name), path_(FindExecutable(name)), root_(root) {}

bool Runtime::is_crun() const {
  size_t slash = path_.rfind('/');
  std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  return base.compare(0, 4, "crun") == 0;
}

std::string Runtime::Probe(std::string* version) const {
  if (path_.empty()) {
    return name_[0] == '/' ? "OCI runtime " + name_ + " is not an executable file"
                           : "OCI runtime " + name_ + " not found on PATH";
  }
  RunResult r = Run({"--version"}, false, "");
  if (!r.ok()) return "OCI runtime " + path_ + " does not run: " + (r.error.empty() ? r.output : r.error);
  size_t nl = r.output.find('\n');
  *version = r.output.substr(0, nl);
  return "";
}

std::vector<std::string> Runtime::Argv(const std::vector<std::string>& command, bool no_cgroups,
                                       const std::string& log) const {
  std::vector<std::string> argv = {path_};
  if (command.empty() || command[0] != "--version") {
    argv.push_back("--root=" + root_);
    if (!log.empty()) argv.push_back("--log=" + log);
    // Without a cgroup from outpost (no cgroup v2 on the node): crun runs
    // the container in the driver's; runc has no such mode (docs).
    if (no_cgroups && is_crun()) argv.push_back("--cgroup-manager=disabled");
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

RunResult Runtime::Run(const std::vector<std::string>& command, bool no_cgroups, const std::string& log, int out_fd,
                       int err_fd, size_t max_output) const {
  RunResult result;
  if (path_.empty()) {
    result.error = "OCI runtime " + name_ + " not found";
    return result;
  }
  int pipe_fds[2] = {-1, -1};
  bool capture = out_fd < 0 || err_fd < 0;
  if (capture && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  std::vector<std::string> args = Argv(command, no_cgroups, log);
  std::vector<char*> argv = CStrings(args);
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(argv, out_fd >= 0 ? out_fd : pipe_fds[1], err_fd >= 0 ? err_fd : pipe_fds[1]);
  if (capture) ::close(pipe_fds[1]);
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    if (capture) ::close(pipe_fds[0]);
    return result;
  }
  if (capture) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buf, sizeof buf)) != 0) {
      if (n < 0) {
        if (errno == EINTR) continue;
        break;
      }
      size_t room = max_output - std::min(max_output, result.output.size());
      result.output.append(buf, std::min(room, static_cast<size_t>(n)));
      result.truncated = result.truncated || static_cast<size_t>(n) > room;
    }
    ::close(pipe_fds[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = status;
  if (!result.ok()) {
    std::string line = log.empty() ? "" : LastLine(log);
    if (line.empty()) {
      std::string out = result.output;
      while (!out.empty() && out.back() == '\n') out.pop_back();
      size_t nl = out.rfind('\n');
      line = nl == std::string::npos ? out : out.substr(nl + 1);
    }
    result.error = line.empty() ? "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))
                                : line;
  }
  return result;
}

pid_t Runtime::Spawn(const std::vector<std::string>& command, bool no_cgroups, int capture_fd,
                     std::string* error) const {
  std::vector<std::string> args = Argv(command, no_cgroups, "");
  std::vector<char*> argv = CStrings(args);
  pid_t pid = ::fork();
  if (pid == 0) ExecChild(argv, capture_fd, capture_fd);
  if (pid < 0) *error = std::string("fork: ") + std::strerror(errno);
  return pid;
}

}  // namespace oci_driver
