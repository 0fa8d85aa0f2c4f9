// A plugin built with the plugin library (include/outpost/plugin.h and,
// as a task driver, include/outpost/driver.h), for the integration and VM
// tests: registers with the agent as TYPE/NAME and prints one line per
// registration status on stdout ("registered" or "refused: <why>"), so a
// test can wait for it. With --type TaskDriver it is a small task driver
// on the library's TaskDriver: it runs a task's command itself, with its
// output on the task's FIFOs and in its cgroup; stop, signal, destroy,
// inspect and WaitTask are the library's defaults.
//
//   test_plugin --type TYPE --name NAME [--dir PLUGINS_DIR] [--versions v1,v2]
//               [--socket-file FILE]   (writes the socket's path there once it exists)
//               [--reject REASON]      (StartTask fails with REASON)
//               [--hang METHOD]        (never answers that Driver method)
//               [--slow-ms N]          (answers every Driver call after N ms)
//               [--crash-after-start]  (exits 70 just after answering a StartTask)
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "outpost/driver.h"

namespace {

using namespace outpost::plugin_sdk;

struct TestDriver : TaskDriver {
  std::string reject;
  bool crash_after_start = false;

  std::vector<ConfigField> ConfigSchema() override { return {{"note", "string", false, "ignored"}}; }

  Answer StartTask(const TaskConfig& c, TaskHandle* h) override {
    if (!reject.empty()) return Answer::Fail(Code::kFailedPrecondition, reject);
    std::vector<char*> argv{const_cast<char*>(c.command.c_str())};
    for (const std::string& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int out = c.stdout_path.empty() ? -1 : ::open(c.stdout_path.c_str(), O_RDWR | O_CLOEXEC);
    int err = c.stderr_path.empty() ? -1 : ::open(c.stderr_path.c_str(), O_RDWR | O_CLOEXEC);
    std::string procs = c.cgroup.empty() ? "" : c.cgroup + "/cgroup.procs";
    pid_t pid = ::fork();
    if (pid == 0) {
      if (!procs.empty()) {
        int fd = ::open(procs.c_str(), O_WRONLY);
        if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(125);
      }
      if (out >= 0) ::dup2(out, 1);
      if (err >= 0) ::dup2(err, 2);
      ::setsid();
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    if (pid < 0) return Answer::Fail(Code::kInternal, "fork failed");
    h->pid = pid;
    EmitEvent({c.id, 0, "forked", "pid " + std::to_string(pid), {}});
    if (crash_after_start) plugin()->After(50 * 1000000LL, [] { ::_exit(70); });
    return Answer::Ok();
  }
};

int Usage() {
  std::fprintf(stderr,
               "usage: test_plugin --type TYPE --name NAME [--dir DIR] [--versions v1,v2] [--socket-file FILE]\n"
               "                   [--reject REASON] [--hang METHOD] [--slow-ms N] [--crash-after-start]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string socket_file, hang;
  long slow_ms = 0;
  TestDriver driver;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--crash-after-start") {
      driver.crash_after_start = true;
      continue;
    }
    if (i + 1 >= argc) return Usage();
    std::string v = argv[++i];
    if (a == "--type") {
      o.type = v;
    } else if (a == "--name") {
      o.name = v;
    } else if (a == "--dir") {
      o.plugins_dir = v;
    } else if (a == "--versions") {
      for (size_t start = 0; start <= v.size();) {
        size_t comma = v.find(',', start);
        if (comma == std::string::npos) comma = v.size();
        o.versions.push_back(v.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (a == "--socket-file") {
      socket_file = v;
    } else if (a == "--reject") {
      driver.reject = v;
    } else if (a == "--hang") {
      hang = v;
    } else if (a == "--slow-ms") {
      slow_ms = std::atol(v.c_str());
    } else {
      return Usage();
    }
  }
  o.on_registration = [](bool ok, const std::string& error) {
    if (ok) {
      std::printf("registered\n");
    } else {
      std::printf("refused: %s\n", error.c_str());
    }
    std::fflush(stdout);
  };
  auto write_socket_file = [socket_file](Plugin* p) {
    if (socket_file.empty()) return;
    p->After(0, [p, socket_file] {
      FILE* f = std::fopen(socket_file.c_str(), "w");
      if (!f) return;
      std::fprintf(f, "%s\n", p->socket_path().c_str());
      std::fclose(f);
    });
  };
  if (o.type != "TaskDriver") {
    Plugin plugin(o);
    write_socket_file(&plugin);
    return plugin.Run();
  }
  DriverOptions d;
  d.before_call = [&driver, hang, slow_ms](const std::string& method, std::function<void()> run) {
    if (method == hang) {  // never answered: the caller's deadline passes
      std::printf("hanging %s\n", method.c_str());  // tests wait for this line
      std::fflush(stdout);
      return;
    }
    if (slow_ms <= 0) return run();
    driver.plugin()->After(slow_ms * 1000000LL, std::move(run));
  };
  d.on_start = write_socket_file;
  return RunTaskDriver(o, driver, d);
}
