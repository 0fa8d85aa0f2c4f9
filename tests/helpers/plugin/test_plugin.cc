// A plugin built with the plugin library (include/outpost/plugin.h and,
// as a task driver, include/outpost/driver.h), for the integration and VM
// tests: registers with the agent as TYPE/NAME and prints one line per
// registration status on stdout ("registered" or "refused: <why>"), so a
// test can wait for it. With --type TaskDriver it is a small task driver
// on the library's TaskDriver: it runs a task's command itself (in its
// workdir), with its output on the task's FIFOs and in its cgroup; stop, signal, destroy,
// inspect and WaitTask are the library's defaults.
//
//   test_plugin --type TYPE --name NAME [--dir PLUGINS_DIR] [--versions v1,v2]
//               [--socket-file FILE]   (writes the socket's path there once it exists)
//               [--reject REASON]      (StartTask fails with REASON)
//               [--hang METHOD]        (never answers that Driver method)
//               [--slow-ms N]          (answers every Driver call after N ms)
//               [--crash-after-start]  (exits 70 just after answering a StartTask)
//               [--exec]               (has the exec capability: ExecTask runs a command in the
//                                       task's workdir and prints "exec ID CMD" when it does)
//               [--adopt]              (RecoverTask takes over a live task of an earlier instance)
//               [--state-dir DIR]      (keeps "pid start" of each task it started in DIR/<id>, as a
//                                       container runtime keeps its state: ListTasks reports them
//                                       and DestroyTask kills and forgets them, also for a task of
//                                       an earlier instance)
//
// A task's config may hold "refuse": "TEXT": its StartTask then fails with
// InvalidArgument and TEXT, as a driver refuses a config it cannot run.
//
// --slow-ms prints "slow METHOD" when a call arrives and "answering METHOD"
// when it is run, so a test can tell a call is in flight. RecoverTask of a
// task this instance did not start prints "recovered JOB/NAME (ID) pid N"
// (--adopt) or "not recovering JOB/NAME (ID) pid N" (the library's default:
// NotFound).
//
// --adopt: the library can only watch its own children, and a task started
// by an earlier instance (one that was killed, or that is being replaced)
// is not one. Its handle's driver_state holds the process's start time
// (/proc/PID/stat field 22), so a pid reused by another process is not
// taken; once adopted, the process is polled (every 20 ms, through
// /proc) and its exit reported with an unknown status: only a parent
// learns that.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "outpost/driver.h"

namespace {

using namespace outpost::plugin_sdk;

// The state letter and start time (clock ticks since boot) of a process;
// false when there is none.
bool ProcStat(int pid, char* state, std::string* start) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  size_t paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream rest(line.substr(paren + 1));
  std::string field;
  // Field 3 is the state; field 22 the start time.
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3) *state = field[0];
    if (i == 22) *start = field;
  }
  return !start->empty();
}

bool SameLiveProcess(int pid, const std::string& start) {
  char state = 0;
  std::string now;
  return pid > 0 && ProcStat(pid, &state, &now) && now == start && state != 'Z' && state != 'X';
}

// The string value of "key" in a flat JSON object (no escapes in it: a
// test helper's config), or "" without one.
std::string JsonStringField(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos) return "";
  at = json.find(':', at);
  size_t open = at == std::string::npos ? at : json.find('"', at);
  size_t close = open == std::string::npos ? open : json.find('"', open + 1);
  return close == std::string::npos ? "" : json.substr(open + 1, close - open - 1);
}

struct TestDriver : TaskDriver {
  std::string reject;
  bool crash_after_start = false;
  bool adopt = false;
  bool exec = false;
  std::string state_dir;
  std::map<std::string, std::string> workdirs;  // task id -> its cwd, for ExecTask

  Capabilities GetCapabilities() override {
    Capabilities c;
    c.exec = exec;
    return c;
  }

  // Runs cmd in the task's workdir, stdout and stderr into one pipe, read
  // once it has exited (a check's output is small); killed at the timeout.
  void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                std::function<void(Answer, ExecResult)> done) override {
    TaskStatus st;
    if (!DefaultInspectTask(id, &st).ok || st.state != TaskStatus::kRunning) {
      return done(Answer::Fail(Code::kNotFound, "no running task " + id), ExecResult{});
    }
    if (cmd.empty()) return done(Answer::Fail(Code::kInvalidArgument, "no command"), ExecResult{});
    std::printf("exec %s %s\n", id.c_str(), cmd[0].c_str());
    std::fflush(stdout);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return done(Answer::Fail(Code::kInternal, "pipe failed"), ExecResult{});
    std::vector<char*> argv;
    for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::string cwd = workdirs.count(id) ? workdirs[id] : "";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(p[1], 1);
      ::dup2(p[1], 2);
      ::setsid();
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      return done(Answer::Fail(Code::kInternal, "fork failed"), ExecResult{});
    }
    auto over = std::make_shared<bool>(false);
    int fd = p[0];
    bool watched = plugin()->WatchChild(pid, [fd, over, done](int status) {
      *over = true;
      ExecResult r;
      ::fcntl(fd, F_SETFL, O_NONBLOCK);
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) {
        size_t room = r.output.size() < 4096 ? 4096 - r.output.size() : 0;
        r.output.append(buf, std::min<size_t>(room, static_cast<size_t>(n)));
        r.truncated |= static_cast<size_t>(n) > room;
      }
      ::close(fd);
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      done(Answer::Ok(), r);
    });
    if (!watched) {
      ::kill(pid, SIGKILL);
      ::close(fd);
      return done(Answer::Fail(Code::kInternal, "cannot watch the command"), ExecResult{});
    }
    plugin()->After(timeout_nanos, [pid, over] {
      if (!*over) ::kill(-pid, SIGKILL);
    });
  }

  std::vector<std::string> ListTasks() override {
    std::vector<std::string> ids = DefaultListTasks();
    if (state_dir.empty()) return ids;
    DIR* d = ::opendir(state_dir.c_str());
    while (dirent* e = d ? ::readdir(d) : nullptr) {
      std::string n = e->d_name;
      if (n[0] != '.' && std::find(ids.begin(), ids.end(), n) == ids.end()) ids.push_back(n);
    }
    if (d) ::closedir(d);
    return ids;
  }

  Answer DestroyTask(const std::string& id, bool force) override {
    if (state_dir.empty()) return DefaultDestroyTask(id, force);
    TaskStatus st;
    bool tracked = DefaultInspectTask(id, &st).ok;
    std::string file = state_dir + "/" + id;
    if (!tracked) {
      // An earlier instance's: what its state file says is killed.
      std::ifstream f(file);
      int pid = 0;
      std::string start;
      if (f >> pid >> start && force && SameLiveProcess(pid, start)) {
        if (::kill(-pid, SIGKILL) != 0) ::kill(pid, SIGKILL);
        std::printf("destroyed %s pid %d of an earlier instance\n", id.c_str(), pid);
        std::fflush(stdout);
      }
    }
    Answer a = DefaultDestroyTask(id, force);
    if (a.ok) ::unlink(file.c_str());
    return a;
  }

  Answer RecoverTask(const TaskHandle& h) override {
    std::string what = h.config.job + "/" + h.config.name + " (" + h.config.id + ") pid " + std::to_string(h.pid);
    if (!adopt || h.driver_state.empty() || !SameLiveProcess(h.pid, h.driver_state)) {
      std::printf("not recovering %s\n", what.c_str());
      std::fflush(stdout);
      return DefaultRecoverTask(h);
    }
    std::printf("recovered %s\n", what.c_str());
    std::fflush(stdout);
    Poll(h.config.id, h.pid, h.driver_state);
    return Answer::Ok();
  }

  // Reports the exit of an adopted task once its process is gone.
  void Poll(const std::string& id, int pid, const std::string& start) {
    plugin()->After(20 * 1000000LL, [this, id, pid, start] {
      TaskStatus st;
      if (!DefaultInspectTask(id, &st).ok || st.state != TaskStatus::kRunning || st.pid != pid) return;
      if (SameLiveProcess(pid, start)) return Poll(id, pid, start);
      ExitResult e;
      e.exit_code = -1;
      e.error = "exit status unknown: pid " + std::to_string(pid) + " was started by an earlier instance";
      ReportExit(id, e);
    });
  }

  std::vector<ConfigField> ConfigSchema() override {
    return {{"note", "string", false, "ignored"},
            {"refuse", "string", false, "StartTask refuses the config with this text (InvalidArgument)"}};
  }

  Answer StartTask(const TaskConfig& c, TaskHandle* h) override {
    if (!reject.empty()) return Answer::Fail(Code::kFailedPrecondition, reject);
    std::string refuse = JsonStringField(c.config_json, "refuse");
    if (!refuse.empty()) return Answer::Fail(Code::kInvalidArgument, "config.refuse: " + refuse);
    workdirs[c.id] = c.cwd;
    std::vector<char*> argv{const_cast<char*>(c.command.c_str())};
    for (const std::string& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int out = c.stdout_path.empty() ? -1 : ::open(c.stdout_path.c_str(), O_RDWR | O_CLOEXEC);
    int err = c.stderr_path.empty() ? -1 : ::open(c.stderr_path.c_str(), O_RDWR | O_CLOEXEC);
    std::string procs = c.cgroup.empty() ? "" : c.cgroup + "/cgroup.procs";
    pid_t pid = ::fork();
    if (pid == 0) {
      // No signal mask to undo here: the library's fork handler starts the
      // child with no signal blocked and SIGPIPE at its default (the slow
      // driver test's stop ending by SIGTERM shows it).
      if (!procs.empty()) {
        int fd = ::open(procs.c_str(), O_WRONLY);
        if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(125);
      }
      if (out >= 0) ::dup2(out, 1);
      if (err >= 0) ::dup2(err, 2);
      ::setsid();
      if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) != 0) ::_exit(126);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (out >= 0) ::close(out);
    if (err >= 0) ::close(err);
    if (pid < 0) return Answer::Fail(Code::kInternal, "fork failed");
    h->pid = pid;
    char state = 0;
    ProcStat(pid, &state, &h->driver_state);  // for --adopt in a later instance
    if (!state_dir.empty()) {
      std::ofstream f(state_dir + "/" + c.id);
      f << pid << " " << h->driver_state << "\n";
    }
    EmitEvent({c.id, 0, "forked", "pid " + std::to_string(pid), {}});
    if (crash_after_start) plugin()->After(50 * 1000000LL, [] { ::_exit(70); });
    return Answer::Ok();
  }
};

int Usage() {
  std::fprintf(stderr,
               "usage: test_plugin --type TYPE --name NAME [--dir DIR] [--versions v1,v2] [--socket-file FILE]\n"
               "                   [--reject REASON] [--hang METHOD] [--slow-ms N] [--crash-after-start] [--adopt]\n"
               "                   [--exec] [--state-dir DIR]\n");
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
    if (a == "--adopt") {
      driver.adopt = true;
      continue;
    }
    if (a == "--exec") {
      driver.exec = true;
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
    } else if (a == "--state-dir") {
      driver.state_dir = v;
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
    std::printf("slow %s\n", method.c_str());  // tests wait for these lines
    std::fflush(stdout);
    driver.plugin()->After(slow_ms * 1000000LL, [method, run = std::move(run)] {
      std::printf("answering %s\n", method.c_str());
      std::fflush(stdout);
      run();
    });
  };
  d.on_start = write_socket_file;
  return RunTaskDriver(o, driver, d);
}
