// An outpost task driver in C++ on the plugin library (include/outpost/driver.h).
// It runs a task's command as a child, in the task's cgroup, with its output
// on the task's stdout/stderr paths. The library reaps the child and reports
// its exit, answers WaitTask, stops a task (its kill signal, then SIGKILL
// after the timeout), signals, inspects and destroys it.
//
//   build: make build/example_driver
//   run:   example_driver [PLUGINS_DIR]   (default $OUTPOST_PLUGINS_DIR or /run/outpost/plugins)
#include <fcntl.h>
#include <unistd.h>

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
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!procs.empty()) {  // "0": the writing process itself
        int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(125);
      }
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::setsid();  // its own process group: stop signals the whole group
      if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) != 0) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
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
