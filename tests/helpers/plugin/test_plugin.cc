// A plugin built with the plugin library (include/outpost/plugin.h), for
// the integration and VM tests: registers with the agent as TYPE/NAME and
// prints one line per registration status on stdout ("registered" or
// "refused: <why>"), so a test can wait for it. With --type TaskDriver it
// is a small task driver (proto/driver.proto): it runs a task's command
// itself, with its output on the task's FIFOs and in its cgroup, and
// answers WaitTask, StopTask, DestroyTask, InspectTask, SignalTask and
// RecoverTask.
//
//   test_plugin --type TYPE --name NAME [--dir PLUGINS_DIR] [--versions v1,v2]
//               [--socket-file FILE]   (writes the socket's path there once it exists)
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "driver.pb.h"
#include "outpost/plugin.h"
#include "pb_decode.h"
#include "pb_encode.h"

namespace {

using outpost::plugin_sdk::Code;
using outpost::plugin_sdk::Plugin;
using outpost::plugin_sdk::Reply;

constexpr const char kDriver[] = "outpost.driver.v1.Driver";

std::string Enc(const pb_msgdesc_t* f, const void* m) {
  size_t n = 0;
  pb_get_encoded_size(&n, f, m);
  std::string out(n, '\0');
  pb_ostream_t os = pb_ostream_from_buffer(reinterpret_cast<pb_byte_t*>(&out[0]), n);
  pb_encode(&os, f, m);
  return out;
}

bool Dec(const std::string& in, const pb_msgdesc_t* f, void* m) {
  pb_istream_t is = pb_istream_from_buffer(reinterpret_cast<const pb_byte_t*>(in.data()), in.size());
  return pb_decode(&is, f, m);
}

struct Task {
  pid_t pid = 0;
  bool exited = false;
  int code = 0, sig = 0;
  std::vector<Reply> waiters;
};
std::map<std::string, Task> tasks;

std::string WaitAnswer(const Task& t) {
  outpost_driver_v1_WaitTaskResponse m = outpost_driver_v1_WaitTaskResponse_init_zero;
  m.exited = true;
  m.has_result = true;
  m.result.exit_code = t.sig ? 128 + t.sig : t.code;
  m.result.signal = t.sig;
  return Enc(outpost_driver_v1_WaitTaskResponse_fields, &m);
}

std::string IdOf(const std::string& req) {
  outpost_driver_v1_TaskIdRequest m = outpost_driver_v1_TaskIdRequest_init_zero;
  std::string id;
  if (Dec(req, outpost_driver_v1_TaskIdRequest_fields, &m) && m.id) id = m.id;
  pb_release(outpost_driver_v1_TaskIdRequest_fields, &m);
  return id;
}

// Reaps the tasks (a task driver's children) and answers their waiters.
void Reap(Plugin* p) {
  int st = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
    for (auto& [id, t] : tasks) {
      if (t.pid != pid) continue;
      t.exited = true;
      t.code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
      t.sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
      for (Reply& r : t.waiters) r.Ok(WaitAnswer(t));
      t.waiters.clear();
    }
  }
  p->After(20 * 1000000LL, [p] { Reap(p); });
}

void ServeDriver(Plugin* p) {
  p->Handle(kDriver, "Capabilities", [](const std::string&, Reply r) {
    outpost_driver_v1_Capabilities m = outpost_driver_v1_Capabilities_init_zero;
    m.send_signals = true;
    m.exec = false;
    m.fs_isolation = const_cast<char*>("none");
    r.Ok(Enc(outpost_driver_v1_Capabilities_fields, &m));
  });
  p->Handle(kDriver, "Fingerprint", [](const std::string&, Reply r) {
    outpost_driver_v1_Fingerprint m = outpost_driver_v1_Fingerprint_init_zero;
    m.health = 2;
    m.description = const_cast<char*>("Healthy");
    r.Ok(Enc(outpost_driver_v1_Fingerprint_fields, &m));
  });
  p->Handle(kDriver, "ConfigSchema", [](const std::string&, Reply r) {
    outpost_driver_v1_ConfigField note = outpost_driver_v1_ConfigField_init_zero;
    note.name = const_cast<char*>("note");
    note.type = const_cast<char*>("string");
    outpost_driver_v1_ConfigSchema m = outpost_driver_v1_ConfigSchema_init_zero;
    m.fields_count = 1;
    m.fields = &note;
    r.Ok(Enc(outpost_driver_v1_ConfigSchema_fields, &m));
  });
  p->Handle(kDriver, "StartTask", [](const std::string& req, Reply r) {
    outpost_driver_v1_StartTaskRequest m = outpost_driver_v1_StartTaskRequest_init_zero;
    if (!Dec(req, outpost_driver_v1_StartTaskRequest_fields, &m)) return r.Fail(Code::kInvalidArgument, "bad request");
    const auto& c = m.config;
    std::string id = c.id ? c.id : "";
    if (tasks.count(id) && !tasks[id].exited) {
      pb_release(outpost_driver_v1_StartTaskRequest_fields, &m);
      return r.Fail(Code::kAlreadyExists, "task with ID \"" + id + "\" already started");
    }
    std::vector<char*> argv{c.command};
    for (pb_size_t i = 0; i < c.args_count; ++i) argv.push_back(c.args[i]);
    argv.push_back(nullptr);
    int out = c.stdout_path && *c.stdout_path ? ::open(c.stdout_path, O_RDWR | O_CLOEXEC) : -1;
    int err = c.stderr_path && *c.stderr_path ? ::open(c.stderr_path, O_RDWR | O_CLOEXEC) : -1;
    std::string procs = c.cgroup && *c.cgroup ? std::string(c.cgroup) + "/cgroup.procs" : "";
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
    pb_release(outpost_driver_v1_StartTaskRequest_fields, &m);
    if (pid < 0) return r.Fail(Code::kInternal, "fork failed");
    tasks[id] = Task{};
    tasks[id].pid = pid;
    outpost_driver_v1_StartTaskResponse resp = outpost_driver_v1_StartTaskResponse_init_zero;
    resp.has_handle = true;
    resp.handle.version = 1;
    resp.handle.pid = pid;
    r.Ok(Enc(outpost_driver_v1_StartTaskResponse_fields, &resp));
  });
  p->Handle(kDriver, "RecoverTask", [](const std::string& req, Reply r) {
    outpost_driver_v1_RecoverTaskRequest m = outpost_driver_v1_RecoverTaskRequest_init_zero;
    if (!Dec(req, outpost_driver_v1_RecoverTaskRequest_fields, &m)) return r.Fail(Code::kInvalidArgument, "bad request");
    std::string id = m.handle.config.id ? m.handle.config.id : "";
    pb_release(outpost_driver_v1_RecoverTaskRequest_fields, &m);
    if (!tasks.count(id)) return r.Fail(Code::kNotFound, "task " + id + " is not this instance's");
    r.Ok("");
  });
  p->Handle(kDriver, "WaitTask", [](const std::string& req, Reply r) {
    auto it = tasks.find(IdOf(req));
    if (it == tasks.end()) return r.Fail(Code::kNotFound, "task not found for given id");
    if (it->second.exited) return r.Ok(WaitAnswer(it->second));
    it->second.waiters.push_back(r);
  });
  auto signal = [](const std::string& id, int sig) {
    auto it = tasks.find(id);
    if (it != tasks.end() && !it->second.exited) ::kill(-it->second.pid, sig);
  };
  p->Handle(kDriver, "StopTask", [signal](const std::string& req, Reply r) {
    outpost_driver_v1_StopTaskRequest m = outpost_driver_v1_StopTaskRequest_init_zero;
    if (!Dec(req, outpost_driver_v1_StopTaskRequest_fields, &m)) return r.Fail(Code::kInvalidArgument, "bad request");
    std::string id = m.id ? m.id : "";
    pb_release(outpost_driver_v1_StopTaskRequest_fields, &m);
    signal(id, SIGKILL);  // a test driver: no grace
    r.Ok("");
  });
  p->Handle(kDriver, "SignalTask", [signal](const std::string& req, Reply r) {
    outpost_driver_v1_SignalTaskRequest m = outpost_driver_v1_SignalTaskRequest_init_zero;
    if (!Dec(req, outpost_driver_v1_SignalTaskRequest_fields, &m)) return r.Fail(Code::kInvalidArgument, "bad request");
    std::string id = m.id ? m.id : "";
    pb_release(outpost_driver_v1_SignalTaskRequest_fields, &m);
    signal(id, SIGHUP);
    r.Ok("");
  });
  p->Handle(kDriver, "DestroyTask", [](const std::string& req, Reply r) {
    outpost_driver_v1_DestroyTaskRequest m = outpost_driver_v1_DestroyTaskRequest_init_zero;
    if (!Dec(req, outpost_driver_v1_DestroyTaskRequest_fields, &m)) return r.Fail(Code::kInvalidArgument, "bad request");
    std::string id = m.id ? m.id : "";
    bool force = m.force;
    pb_release(outpost_driver_v1_DestroyTaskRequest_fields, &m);
    auto it = tasks.find(id);
    if (it == tasks.end()) return r.Ok("");
    if (!it->second.exited && !force) return r.Fail(Code::kFailedPrecondition, "cannot destroy running task");
    if (!it->second.exited) ::kill(-it->second.pid, SIGKILL);
    tasks.erase(it);
    r.Ok("");
  });
}

int Usage() {
  std::fprintf(stderr,
               "usage: test_plugin --type TYPE --name NAME [--dir DIR] [--versions v1,v2] [--socket-file FILE]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  outpost::plugin_sdk::Options o;
  std::string socket_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
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
  outpost::plugin_sdk::Plugin plugin(o);
  if (o.type == "TaskDriver") {
    ServeDriver(&plugin);
    plugin.After(0, [&plugin] { Reap(&plugin); });
  }
  if (!socket_file.empty()) {
    plugin.After(0, [&plugin, socket_file] {
      FILE* f = std::fopen(socket_file.c_str(), "w");
      if (!f) return;
      std::fprintf(f, "%s\n", plugin.socket_path().c_str());
      std::fclose(f);
    });
  }
  return plugin.Run();
}
