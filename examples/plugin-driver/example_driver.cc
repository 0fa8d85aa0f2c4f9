// An outpost task driver in C++ on the plugin library (include/outpost/driver.h).
// It runs a task's command as a child, in the task's cgroup, with its output
// on the task's stdout/stderr paths. The library reaps the child and reports
// its exit, answers WaitTask, stops a task (its kill signal, then SIGKILL
// after the timeout), signals, inspects and destroys it.
//
//   build: make build/example_driver
//   run:   example_driver [PLUGINS_DIR]   (default $OUTPOST_PLUGINS_DIR or /run/outpost/plugins)
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "outpost/driver.h"

using namespace outpost::plugin_sdk;

class ExampleDriver : public TaskDriver {
 public:
  Fingerprint GetFingerprint() override {
    Fingerprint f;
    f.attributes["driver.example.version"] = "1";
    return f;
  }

  Answer StartTask(const TaskConfig& c, TaskHandle* handle) override {
    // Everything the child needs is made before fork: after it, only
    // async-signal-safe calls.
    std::vector<char*> argv{const_cast<char*>(c.command.c_str())};
    for (const std::string& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : c.env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(&e[0]);
    envp.push_back(nullptr);
    std::string procs = c.cgroup.empty() ? "" : c.cgroup + "/cgroup.procs";
    int out = ::open(c.stdout_path.empty() ? "/dev/null" : c.stdout_path.c_str(), O_WRONLY | O_CLOEXEC);
    int err = ::open(c.stderr_path.empty() ? "/dev/null" : c.stderr_path.c_str(), O_WRONLY | O_CLOEXEC);
    if (out < 0 || err < 0) {
      if (out >= 0) ::close(out);
      if (err >= 0) ::close(err);
      return Answer::Fail(Code::kInternal, "cannot open the task's output");
    }
    int report[2];  // the child's errno if it cannot exec; closed by a successful exec
    if (::pipe2(report, O_CLOEXEC) != 0) report[0] = report[1] = -1;
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = procs.empty() ? 0 : ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);  // "0": this process
      bool ok = fd >= 0 && (procs.empty() || ::write(fd, "0", 1) == 1);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::setsid();  // its own process group: stop signals the whole group
      if (ok && (c.cwd.empty() || ::chdir(c.cwd.c_str()) == 0)) ::execve(argv[0], argv.data(), envp.data());
      int e = errno;
      if (::write(report[1], &e, sizeof e) < 0) ::_exit(127);
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
    ::close(report[1]);
    int e = 0;  // waits for the exec (brief), so a bad command fails the start
    ssize_t n = pid < 0 ? 0 : ::read(report[0], &e, sizeof e);
    ::close(report[0]);
    if (n == static_cast<ssize_t>(sizeof e)) {
      ::waitpid(pid, nullptr, 0);
      return Answer::Fail(Code::kInvalidArgument, "cannot run " + c.command + ": " + std::strerror(e));
    }
    if (pid < 0) return Answer::Fail(Code::kInternal, "fork failed");
    handle->pid = pid;  // the library watches this child and reports its exit
    EmitEvent({c.id, 0, "started", "pid " + std::to_string(pid), {}});
    return Answer::Ok();
  }
};

int main(int argc, char** argv) {
  Options options;
  options.name = "example";
  if (argc > 1) options.plugins_dir = argv[1];
  ExampleDriver driver;
  return RunTaskDriver(options, driver);  // until SIGTERM or SIGINT
}
