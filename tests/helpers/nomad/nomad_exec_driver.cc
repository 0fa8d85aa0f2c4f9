// A Nomad task-driver plugin in C++ for the benchmarks: a go-plugin gRPC
// server (outpost's wire::GrpcServer) doing what outpost's own ttRPC test
// driver (tests/helpers/plugin/test_plugin --type TaskDriver) does at a
// start: fork, join the task's cgroup, the task's FIFOs on fd 1 and 2, a
// session of its own, the task dir, exec. With it `make bench` compares the
// hosting of a Nomad driver with the hosting of a ttRPC driver doing the
// same work (tools/bench/nomad_bench.cc); tests/helpers/nomad/
// test_nomad_driver.py is the Python driver the integration tests use, whose
// own StartTask takes 25-40 ms.
//
// Towards its host it behaves as go-plugin does: the magic cookie checked
// (go-plugin's text and exit 1 without it), the socket in
// PLUGIN_UNIX_SOCKET_DIR (else $TMPDIR or /tmp), the handshake line
// `1|2|unix|<socket>|grpc|` on stdout. Services: BasePlugin (PluginInfo,
// ConfigSchema without a schema, SetConfig), Driver (Init left
// Unimplemented as before Nomad 1.11, TaskConfigSchema {command (required),
// args list(string), greeting string = ""}, Capabilities (signals, no exec,
// no fs isolation), Fingerprint and TaskEvents streams kept open,
// StartTask, WaitTask, StopTask, DestroyTask, InspectTask, RecoverTask of a
// task this process started, SignalTask), plugin.GRPCStdio (kept open,
// nothing sent), plugin.GRPCController Shutdown.
//
//   nomad_exec_driver [--name NAME] [--calls FILE]
// --calls appends one JSON line per launch, handshake and StartTask to FILE,
// as test_nomad_driver.py writes them: {"event": "launch", "pid", "t0_ns"},
// {"event": "handshake", "pid", "mono_ns"}, {"event": "call", "rpc":
// "Fingerprint", "pid"}, {"event": "call", "rpc": "StartTask", "pid",
// "took_ns"} (monotonic nanoseconds).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "driver/nomad/cty_msgpack.h"
#include "driver/nomad/plugin_process.h"
#include "loop/loop.h"
#include "nomad_base.pb.h"
#include "nomad_driver.pb.h"
#include "proc/exit_status.h"
#include "wire/grpc_server.h"

extern char** environ;

namespace outpost::nomad_exec {
namespace {

using wire::GrpcCall;
using wire::GrpcCallContext;
using wire::GrpcResponder;

constexpr const char* kBase = "hashicorp.nomad.plugins.base.proto.BasePlugin";
constexpr const char* kDriver = "hashicorp.nomad.plugins.drivers.proto.Driver";

std::string g_calls;

void Record(const std::string& fields) {
  if (g_calls.empty()) return;
  std::string line = "{" + fields + ", \"pid\": " + std::to_string(::getpid()) + "}\n";
  int fd = ::open(g_calls.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, line.data(), line.size());
  ::close(fd);
}

// Protobuf by hand for the schema (a tree the nanopb types hold as pointers).
std::string Varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
  return s;
}
std::string Field(int number, const std::string& bytes) {
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string Attr(const std::string& name, const std::string& type, bool required) {
  std::string a = Field(1, name) + Field(2, type);
  if (required) a += Varint(3 << 3) + Varint(1);
  return Field(3, a);  // Spec.Attr
}
std::string Entry(const std::string& key, const std::string& spec) { return Field(1, Field(1, key) + Field(2, spec)); }
std::string TaskSchema() {
  std::string greeting = Field(9, Field(1, Attr("greeting", "string", false)) + Field(2, Field(10, Field(1, "\"\""))));
  std::string object = Entry("command", Attr("command", "string", true)) +
                       Entry("args", Attr("args", "list(string)", false)) + Entry("greeting", greeting);
  return Field(1, Field(1, object));  // TaskConfigSchemaResponse.spec = Spec{object}
}

struct Task {
  pid_t pid = 0;
  bool exited = false;
  int status = 0;
  int64_t started_unix = 0, completed_unix = 0;
  std::string name;
  std::vector<GrpcResponder> waiters;
  Loop::TimerId kill_timer = 0;
  bool destroyed = false;  // forced while running: forgotten once it exits
};

class Driver {
 public:
  Driver(Loop* loop, std::string name) : loop_(loop), name_(std::move(name)) {}

  void Register(wire::GrpcServer* s) {
    auto unary = [this, s](const char* service, const char* method,
                           void (Driver::*fn)(std::string_view, GrpcResponder)) {
      s->Register(service, method, [this, fn](const GrpcCallContext&, std::string_view req, GrpcResponder r) {
        (this->*fn)(req, std::move(r));
      });
    };
    unary(kBase, "PluginInfo", &Driver::PluginInfo);
    unary(kBase, "ConfigSchema", &Driver::Empty);
    unary(kBase, "SetConfig", &Driver::Empty);
    unary(kDriver, "TaskConfigSchema", &Driver::TaskConfigSchema);
    unary(kDriver, "Capabilities", &Driver::Capabilities);
    unary(kDriver, "StartTask", &Driver::StartTask);
    unary(kDriver, "WaitTask", &Driver::WaitTask);
    unary(kDriver, "StopTask", &Driver::StopTask);
    unary(kDriver, "DestroyTask", &Driver::DestroyTask);
    unary(kDriver, "InspectTask", &Driver::InspectTask);
    unary(kDriver, "RecoverTask", &Driver::RecoverTask);
    unary(kDriver, "SignalTask", &Driver::SignalTask);
    s->Register("plugin.GRPCController", "Shutdown", [this](const GrpcCallContext&, std::string_view, GrpcResponder r) {
      r.Reply("");
      loop_->AddTimer(10 * kNanosPerMilli, [this] { loop_->Stop(); });
    });
    auto hold = [this](const GrpcCallContext&, std::shared_ptr<GrpcCall> c) { streams_.push_back(c); };
    s->RegisterStream("plugin.GRPCStdio", "StreamStdio", hold);
    s->RegisterStream(kDriver, "TaskEvents", hold);
    s->RegisterStream(kDriver, "Fingerprint", [this](const GrpcCallContext&, std::shared_ptr<GrpcCall> c) {
      streams_.push_back(c);
      Record("\"event\": \"call\", \"rpc\": \"Fingerprint\"");
      hashicorp_nomad_plugins_drivers_proto_FingerprintResponse m =
          hashicorp_nomad_plugins_drivers_proto_FingerprintResponse_init_zero;
      m.health = hashicorp_nomad_plugins_drivers_proto_FingerprintResponse_HealthState_HEALTHY;
      std::string desc = "Healthy";
      m.health_description = PbStr(desc);
      auto bytes = PbEncode(hashicorp_nomad_plugins_drivers_proto_FingerprintResponse_fields, &m, "Fingerprint");
      if (bytes.ok()) (void)c->Write(*bytes);
    });
  }

 private:
  void Empty(std::string_view, GrpcResponder r) { r.Reply(""); }

  void PluginInfo(std::string_view, GrpcResponder r) {
    hashicorp_nomad_plugins_base_proto_PluginInfoResponse m = hashicorp_nomad_plugins_base_proto_PluginInfoResponse_init_zero;
    m.type = hashicorp_nomad_plugins_base_proto_PluginType_DRIVER;
    std::string version = "v0.1.0", plugin_version = "0.1.0";
    char* versions[] = {PbStr(version)};
    m.plugin_api_versions = versions;
    m.plugin_api_versions_count = 1;
    m.plugin_version = PbStr(plugin_version);
    m.name = PbStr(name_);
    r.Finish(PbEncode(hashicorp_nomad_plugins_base_proto_PluginInfoResponse_fields, &m, "PluginInfo"));
  }

  void TaskConfigSchema(std::string_view, GrpcResponder r) { r.Reply(TaskSchema()); }

  void Capabilities(std::string_view, GrpcResponder r) {
    hashicorp_nomad_plugins_drivers_proto_CapabilitiesResponse m =
        hashicorp_nomad_plugins_drivers_proto_CapabilitiesResponse_init_zero;
    m.has_capabilities = true;
    m.capabilities.send_signals = true;
    m.capabilities.fs_isolation = hashicorp_nomad_plugins_drivers_proto_DriverCapabilities_FSIsolation_NONE;
    r.Finish(PbEncode(hashicorp_nomad_plugins_drivers_proto_CapabilitiesResponse_fields, &m, "Capabilities"));
  }

  static Error Fail(const std::string& what) { return Error(Code::kUnknown, what); }

  void StartTask(std::string_view req, GrpcResponder r) {
    int64_t t_in = MonotonicNanos();
    // Not PbOwned: its Decode clears the callback set for the config.
    hashicorp_nomad_plugins_drivers_proto_StartTaskRequest m = hashicorp_nomad_plugins_drivers_proto_StartTaskRequest_init_zero;
    std::string config;
    m.task.msgpack_driver_config = PbBytesIn(&config);
    Status st = PbDecode(req, hashicorp_nomad_plugins_drivers_proto_StartTaskRequest_fields, &m, "StartTaskRequest");
    if (!st.ok()) return r.Fail(st.error());
    struct Release {
      void* m;
      ~Release() { pb_release(hashicorp_nomad_plugins_drivers_proto_StartTaskRequest_fields, m); }
    } release{&m};
    const auto& c = m.task;
    const std::string id = PbString(c.id);
    if (tasks_.count(id) != 0) return r.Fail(Fail("task with ID \"" + id + "\" already started"));
    auto v = driver::nomad::MsgpackDecodeImplied(config);
    if (!v.ok()) return r.Fail(Fail("failed to decode driver config: " + v.error().message()));
    std::vector<std::string> argv;
    std::string greeting;
    for (size_t i = 0; i < v->keys.size() && i < v->elems.size(); ++i) {
      const auto& e = v->elems[i];
      if (v->keys[i] == "command") argv.insert(argv.begin(), e.s);
      if (v->keys[i] == "greeting") greeting = e.s;
      if (v->keys[i] == "args") {
        for (const auto& a : e.elems) argv.push_back(a.s);
      }
    }
    if (argv.empty() || argv[0].empty()) return r.Fail(Fail("config: command is required"));
    std::vector<std::string> env;
    for (pb_size_t i = 0; i < c.env_count; ++i) env.push_back(PbString(c.env[i].key) + "=" + PbString(c.env[i].value));
    std::string cwd = PbString(c.alloc_dir);
    if (!cwd.empty()) cwd += "/" + PbString(c.name);
    std::string procs;
    if (c.has_resources && c.resources.has_linux_resources && c.resources.linux_resources.cpuset_cgroup != nullptr &&
        *c.resources.linux_resources.cpuset_cgroup != '\0') {
      procs = PbString(c.resources.linux_resources.cpuset_cgroup) + "/cgroup.procs";
    }
    std::string out_path = PbString(c.stdout_path), err_path = PbString(c.stderr_path);
    int out = ::open(out_path.empty() ? "/dev/null" : out_path.c_str(), O_WRONLY | O_CLOEXEC);
    int err = ::open(err_path.empty() ? "/dev/null" : err_path.c_str(), O_WRONLY | O_CLOEXEC);
    if (out < 0 || err < 0) {
      int e = errno;
      if (out >= 0) ::close(out);
      if (err >= 0) ::close(err);
      return r.Fail(Fail(std::string("failed to open the task's output: ") + std::strerror(e)));
    }
    if (!greeting.empty()) (void)!::write(out, (greeting + "\n").data(), greeting.size() + 1);
    std::vector<char*> args, envp;
    for (std::string& a : argv) args.push_back(&a[0]);
    args.push_back(nullptr);
    for (std::string& e : env) envp.push_back(&e[0]);
    envp.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      if (!procs.empty()) {
        int fd = ::open(procs.c_str(), O_WRONLY);
        if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(125);
      }
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::dup2(out, 1);
      ::dup2(err, 2);
      ::setsid();
      if (!cwd.empty() && ::chdir(cwd.c_str()) != 0 && ::chdir("/") != 0) ::_exit(126);
      ::execve(args[0], args.data(), env.empty() ? environ : envp.data());
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
    if (pid < 0) return r.Fail(Fail(std::string("fork: ") + std::strerror(errno)));
    Task& t = tasks_[id];
    t.pid = pid;
    t.name = PbString(c.name);
    t.started_unix = WallNanos();
    (void)loop_->WatchChild(pid, [this, id](pid_t, int status) { Exited(id, status); });

    hashicorp_nomad_plugins_drivers_proto_StartTaskResponse resp = hashicorp_nomad_plugins_drivers_proto_StartTaskResponse_init_zero;
    resp.has_handle = true;
    resp.handle.version = 1;
    resp.handle.state = hashicorp_nomad_plugins_drivers_proto_TaskState_RUNNING;
    resp.handle.has_config = true;
    resp.handle.config = c;  // pointers into m, alive until the encode
    std::string state = std::to_string(pid);
    std::string_view state_view(state);
    resp.handle.driver_state = PbBytesOut(&state_view);
    std::string_view config_view(config);
    resp.handle.config.msgpack_driver_config = PbBytesOut(&config_view);
    auto bytes = PbEncode(hashicorp_nomad_plugins_drivers_proto_StartTaskResponse_fields, &resp, "StartTaskResponse");
    Record("\"event\": \"call\", \"rpc\": \"StartTask\", \"took_ns\": " + std::to_string(MonotonicNanos() - t_in));
    r.Finish(bytes);
  }

  void Exited(const std::string& id, int status) {
    auto it = tasks_.find(id);
    if (it == tasks_.end()) return;
    Task& t = it->second;
    t.exited = true;
    t.status = status;
    t.completed_unix = WallNanos();
    if (t.kill_timer != 0) loop_->CancelTimer(t.kill_timer);
    t.kill_timer = 0;
    std::vector<GrpcResponder> waiters = std::move(t.waiters);
    for (GrpcResponder& w : waiters) AnswerWait(t, w);
    if (t.destroyed) tasks_.erase(it);
  }

  static void FillResult(const Task& t, hashicorp_nomad_plugins_drivers_proto_ExitResult* e) {
    e->exit_code = WIFEXITED(t.status) ? WEXITSTATUS(t.status) : 0;
    e->signal = WIFSIGNALED(t.status) ? WTERMSIG(t.status) : 0;
  }

  static void AnswerWait(const Task& t, const GrpcResponder& r) {
    hashicorp_nomad_plugins_drivers_proto_WaitTaskResponse m = hashicorp_nomad_plugins_drivers_proto_WaitTaskResponse_init_zero;
    m.has_result = true;
    FillResult(t, &m.result);
    r.Finish(PbEncode(hashicorp_nomad_plugins_drivers_proto_WaitTaskResponse_fields, &m, "WaitTaskResponse"));
  }

  // The task a request names by its task_id.
  template <typename T>
  Task* Find(std::string_view req, PbOwned<T>* m, const GrpcResponder& r) {
    Status st = m->Decode(req, "request");
    if (!st.ok()) return r.Fail(st.error()), nullptr;
    auto it = tasks_.find(PbString((*m)->task_id));
    if (it == tasks_.end()) return r.Fail(Fail("task not found for given id")), nullptr;
    return &it->second;
  }

  void WaitTask(std::string_view req, GrpcResponder r) {
    PbOwned<hashicorp_nomad_plugins_drivers_proto_WaitTaskRequest> m(hashicorp_nomad_plugins_drivers_proto_WaitTaskRequest_fields);
    Task* t = Find(req, &m, r);
    if (t == nullptr) return;
    if (t->exited) return AnswerWait(*t, r);
    t->waiters.push_back(std::move(r));
  }

  void StopTask(std::string_view req, GrpcResponder r) {
    PbOwned<hashicorp_nomad_plugins_drivers_proto_StopTaskRequest> m(hashicorp_nomad_plugins_drivers_proto_StopTaskRequest_fields);
    Task* t = Find(req, &m, r);
    if (t == nullptr) return;
    if (!t->exited) {
      auto sig = proc::ParseSignal(PbString(m->signal));
      ::kill(-t->pid, sig.ok() ? *sig : SIGTERM);
      int64_t timeout = m->has_timeout ? m->timeout.seconds * kNanosPerSecond + m->timeout.nanos : 5 * kNanosPerSecond;
      pid_t pid = t->pid;
      t->kill_timer = loop_->AddTimer(timeout, [pid] { ::kill(-pid, SIGKILL); });
    }
    r.Reply("");
  }

  void DestroyTask(std::string_view req, GrpcResponder r) {
    PbOwned<hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest> m(
        hashicorp_nomad_plugins_drivers_proto_DestroyTaskRequest_fields);
    Task* t = Find(req, &m, r);
    if (t == nullptr) return;
    if (!t->exited && !m->force) return r.Fail(Fail("cannot destroy running task"));
    if (!t->exited) {
      ::kill(-t->pid, SIGKILL);
      t->destroyed = true;
    } else {
      tasks_.erase(PbString(m->task_id));
    }
    r.Reply("");
  }

  void InspectTask(std::string_view req, GrpcResponder r) {
    PbOwned<hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest> m(
        hashicorp_nomad_plugins_drivers_proto_InspectTaskRequest_fields);
    Task* t = Find(req, &m, r);
    if (t == nullptr) return;
    hashicorp_nomad_plugins_drivers_proto_InspectTaskResponse a = hashicorp_nomad_plugins_drivers_proto_InspectTaskResponse_init_zero;
    a.has_task = true;
    a.task.id = m->task_id;
    a.task.name = PbStr(t->name);
    a.task.state = t->exited ? hashicorp_nomad_plugins_drivers_proto_TaskState_EXITED
                             : hashicorp_nomad_plugins_drivers_proto_TaskState_RUNNING;
    a.task.has_started_at = true;
    a.task.started_at.seconds = t->started_unix / kNanosPerSecond;
    a.task.started_at.nanos = static_cast<int32_t>(t->started_unix % kNanosPerSecond);
    if (t->exited) {
      a.task.has_completed_at = true;
      a.task.completed_at.seconds = t->completed_unix / kNanosPerSecond;
      a.task.completed_at.nanos = static_cast<int32_t>(t->completed_unix % kNanosPerSecond);
      a.task.has_result = true;
      FillResult(*t, &a.task.result);
    }
    r.Finish(PbEncode(hashicorp_nomad_plugins_drivers_proto_InspectTaskResponse_fields, &a, "InspectTaskResponse"));
  }

  void RecoverTask(std::string_view req, GrpcResponder r) {
    PbOwned<hashicorp_nomad_plugins_drivers_proto_RecoverTaskRequest> m(
        hashicorp_nomad_plugins_drivers_proto_RecoverTaskRequest_fields);
    Task* t = Find(req, &m, r);
    if (t != nullptr) r.Reply("");
  }

  void SignalTask(std::string_view req, GrpcResponder r) {
    PbOwned<hashicorp_nomad_plugins_drivers_proto_SignalTaskRequest> m(
        hashicorp_nomad_plugins_drivers_proto_SignalTaskRequest_fields);
    Task* t = Find(req, &m, r);
    if (t == nullptr) return;
    auto sig = proc::ParseSignal(PbString(m->signal));
    if (!sig.ok()) return r.Fail(sig.error());
    if (!t->exited) ::kill(t->pid, *sig);
    r.Reply("");
  }

  Loop* loop_;
  std::string name_;
  std::map<std::string, Task> tasks_;
  std::vector<std::shared_ptr<GrpcCall>> streams_;
};

int Main(int argc, char** argv) {
  int64_t t0 = MonotonicNanos();
  std::string name = "cdriver";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--name") name = argv[i + 1];
    else if (a == "--calls") g_calls = argv[i + 1];
  }
  Record("\"event\": \"launch\", \"t0_ns\": " + std::to_string(t0));
  const char* cookie = std::getenv(driver::nomad::kMagicCookieKey);
  if (cookie == nullptr || std::strcmp(cookie, driver::nomad::kMagicCookieValue) != 0) {
    std::fprintf(stderr,
                 "This binary is a plugin. These are not meant to be executed directly.\n"
                 "Please execute the program that consumes these plugins, which will\n"
                 "load any plugins automatically\n");
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  log::SetLevel(log::Level::kError);
  const char* dir = std::getenv("PLUGIN_UNIX_SOCKET_DIR");
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : tmp && *tmp ? tmp : "/tmp") +
                     Format("/plugin%d-%llx", ::getpid(), static_cast<unsigned long long>(WallNanos()));
  auto loop = Loop::Create();
  if (!loop.ok()) return std::fprintf(stderr, "%s\n", loop.error().message().c_str()), 1;
  auto fd = sys::UnixListen(path, 16);
  if (!fd.ok()) return std::fprintf(stderr, "%s\n", fd.error().message().c_str()), 1;
  wire::GrpcServerOptions opts;
  opts.name = name;
  opts.idle_timeout_nanos = 0;
  auto server = wire::GrpcServer::Create(loop->get(), std::move(*fd), opts);
  if (!server.ok()) return std::fprintf(stderr, "%s\n", server.error().message().c_str()), 1;
  Driver driver(loop->get(), name);
  driver.Register(server->get());
  std::printf("1|2|unix|%s|grpc|\n", path.c_str());
  std::fflush(stdout);
  Record("\"event\": \"handshake\", \"mono_ns\": " + std::to_string(MonotonicNanos()));
  Status st = (*loop)->Run();
  ::unlink(path.c_str());
  return st.ok() ? 0 : 1;
}

}  // namespace
}  // namespace outpost::nomad_exec

int main(int argc, char** argv) { return outpost::nomad_exec::Main(argc, argv); }
