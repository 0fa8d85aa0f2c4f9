// The plugin library's task-driver side (include/outpost/driver.h). Owns:
// decoding and encoding outpost.driver.v1.Driver's messages, the tasks the
// driver started (pid, exit, pending WaitTask calls), the default
// stop/signal/destroy/inspect on a task's process group, and the TaskEvents
// ring. Built into liboutpost-plugin.a from base, loop and wire only (the
// driver/ layer's codec is the agent's, not the library's).
#include "outpost/driver.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>

#include "base/clock.h"
#include "base/pb.h"
#include "driver.pb.h"

namespace outpost::plugin_sdk {

namespace {

constexpr const char kService[] = "outpost.driver.v1.Driver";

// Strings a message points into while it is encoded.
struct Keep {
  std::deque<std::string> strings;
  std::deque<std::vector<outpost_driver_v1_KeyValue>> kvs;
  char* S(const std::string& s) { return PbStr(strings.emplace_back(s)); }
  outpost_driver_v1_KeyValue* Map(const std::map<std::string, std::string>& m, pb_size_t* count) {
    auto& l = kvs.emplace_back();
    for (const auto& kv : m) l.push_back({S(kv.first), S(kv.second)});
    *count = static_cast<pb_size_t>(l.size());
    return l.data();
  }
};

std::map<std::string, std::string> MapOf(const outpost_driver_v1_KeyValue* kv, pb_size_t n) {
  std::map<std::string, std::string> m;
  for (pb_size_t i = 0; i < n; ++i) m[PbString(kv[i].key)] = PbString(kv[i].value);
  return m;
}

TaskConfig ConfigOf(const outpost_driver_v1_TaskConfig& m) {
  TaskConfig c;
  c.id = PbString(m.id);
  c.job = PbString(m.job);
  c.name = PbString(m.name);
  c.command = PbString(m.command);
  for (pb_size_t i = 0; i < m.args_count; ++i) c.args.push_back(PbString(m.args[i]));
  c.env = MapOf(m.env, m.env_count);
  c.cwd = PbString(m.workdir);
  c.switch_user = m.identity.switch_user;
  c.uid = m.identity.uid;
  c.gid = m.identity.gid;
  for (pb_size_t i = 0; i < m.identity.groups_count; ++i) c.groups.push_back(m.identity.groups[i]);
  c.user = PbString(m.identity.name);
  c.home = PbString(m.identity.home);
  for (pb_size_t i = 0; i < m.rlimits_count; ++i) {
    c.rlimits.push_back({PbString(m.rlimits[i].name), m.rlimits[i].soft, m.rlimits[i].hard});
  }
  c.kill_signal = PbString(m.kill_signal);
  c.kill_timeout_nanos = m.kill_timeout_nanos;
  c.task_dir = PbString(m.task_dir);
  c.stdout_path = PbString(m.stdout_path);
  c.stderr_path = PbString(m.stderr_path);
  c.cgroup = PbString(m.cgroup);
  c.config_json = PbString(m.driver_config);
  return c;
}

void FillExit(const ExitResult& e, Keep* k, outpost_driver_v1_ExitResult* m) {
  m->exit_code = e.exit_code;
  m->signal = e.signal;
  m->oom_killed = e.oom_killed;
  m->error = k->S(e.error);
}

template <typename T>
std::string Enc(const pb_msgdesc_t* fields, const T& m) {
  auto r = PbEncode(fields, &m, "reply");
  return r.ok() ? *r : std::string();
}

ExitResult ExitOfStatus(int status) {
  ExitResult e;
  if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
    e.exit_code = 128 + e.signal;
  } else {
    e.exit_code = WEXITSTATUS(status);
  }
  return e;
}

}  // namespace

int SignalNumber(const std::string& name) {
  static const std::pair<const char*, int> kSignals[] = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL}, {"USR1", SIGUSR1},
      {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"WINCH", SIGWINCH}};
  if (name.empty()) return 0;
  if (name[0] >= '0' && name[0] <= '9') {
    int n = std::atoi(name.c_str());
    return n > 0 && n < 65 ? n : 0;
  }
  std::string n = name.compare(0, 3, "SIG") == 0 ? name.substr(3) : name;
  for (const auto& s : kSignals) {
    if (n == s.first) return s.second;
  }
  return 0;
}

struct DriverServer {
  struct Task {
    TaskHandle handle;
    bool exited = false;
    ExitResult exit;
    int64_t completed_at = 0;
    std::vector<Reply> waiters;
    std::vector<std::function<void(Answer)>> stopping;
  };
  struct Sequenced {
    uint64_t sequence;
    TaskEvent event;
  };
  Plugin* plugin;
  TaskDriver* driver;
  DriverOptions options;
  std::map<std::string, Task> tasks;
  std::deque<Sequenced> events;
  uint64_t last_sequence = 0;
  struct EventPoll {
    uint64_t after;
    Reply reply;
  };
  std::vector<EventPoll> polls;

  void Exited(const std::string& id, const ExitResult& r) {
    auto it = tasks.find(id);
    if (it == tasks.end() || it->second.exited) return;
    Task& t = it->second;
    t.exited = true;
    t.exit = r;
    t.completed_at = WallNanos();
    outpost_driver_v1_WaitTaskResponse m = outpost_driver_v1_WaitTaskResponse_init_zero;
    Keep k;
    m.exited = true;
    m.has_result = true;
    FillExit(r, &k, &m.result);
    std::string answer = Enc(outpost_driver_v1_WaitTaskResponse_fields, m);
    for (Reply& w : t.waiters) w.Ok(answer);
    t.waiters.clear();
    auto stopping = std::move(t.stopping);
    for (auto& done : stopping) done(Answer::Ok());
  }

  void FlushEvents() {
    std::vector<EventPoll> still;
    for (EventPoll& p : polls) {
      if (!p.reply.pending()) continue;
      if (!AnswerPoll(p)) still.push_back(p);
    }
    polls = std::move(still);
  }

  // Answers a TaskEvents poll when it has events to get; false if not yet.
  bool AnswerPoll(const EventPoll& p) {
    // A cursor above the newest is an earlier process's: from the start.
    uint64_t after = p.after > last_sequence ? 0 : p.after;
    Keep k;
    std::vector<outpost_driver_v1_TaskEvent> out;
    for (const Sequenced& s : events) {
      if (s.sequence <= after || out.size() >= 256) continue;
      outpost_driver_v1_TaskEvent e = outpost_driver_v1_TaskEvent_init_zero;
      e.sequence = s.sequence;
      e.task_id = k.S(s.event.task_id);
      e.timestamp_unix_nanos = s.event.timestamp_unix_nanos;
      e.type = k.S(s.event.type);
      e.message = k.S(s.event.message);
      e.annotations = k.Map(s.event.annotations, &e.annotations_count);
      out.push_back(e);
    }
    if (out.empty()) return false;
    outpost_driver_v1_TaskEventsResponse m = outpost_driver_v1_TaskEventsResponse_init_zero;
    m.events_count = static_cast<pb_size_t>(out.size());
    m.events = out.data();
    m.next = out.back().sequence;
    p.reply.Ok(Enc(outpost_driver_v1_TaskEventsResponse_fields, m));
    return true;
  }

  void Handle(const char* method, std::function<void(const std::string&, Reply)> fn) {
    DriverServer* self = this;
    std::string name = method;
    plugin->Handle(kService, method, [self, name, fn](const std::string& req, Reply r) {
      if (!self->options.before_call) return fn(req, r);
      self->options.before_call(name, [fn, req, r] { fn(req, r); });
    });
  }

  void Serve();
  static void Attach(TaskDriver& d, Plugin* p, DriverServer* s) {
    d.plugin_ = p;
    d.server_ = s;
  }
};

namespace {

void Send(const Reply& r, const Answer& a, const std::string& ok_payload = "") {
  if (a.ok) return r.Ok(ok_payload);
  r.Fail(a.code, a.message);
}

std::string IdOf(const std::string& req) {
  PbOwned<outpost_driver_v1_TaskIdRequest> m(outpost_driver_v1_TaskIdRequest_fields);
  return m.Decode(req, "TaskIdRequest").ok() ? PbString(m->id) : std::string();
}

}  // namespace

void DriverServer::Serve() {
  DriverServer* s = this;
  TaskDriver* d = driver;
  Handle("Capabilities", [d](const std::string&, Reply r) {
    Capabilities c = d->GetCapabilities();
    outpost_driver_v1_Capabilities m = outpost_driver_v1_Capabilities_init_zero;
    m.send_signals = c.send_signals;
    m.exec = c.exec;
    m.fs_isolation = PbStr(c.fs_isolation);
    m.dynamic_workload_users = c.dynamic_workload_users;
    r.Ok(Enc(outpost_driver_v1_Capabilities_fields, m));
  });
  Handle("Fingerprint", [d](const std::string&, Reply r) {
    Fingerprint f = d->GetFingerprint();
    Keep k;
    outpost_driver_v1_Fingerprint m = outpost_driver_v1_Fingerprint_init_zero;
    m.health = f.health;
    m.description = k.S(f.description);
    m.attributes = k.Map(f.attributes, &m.attributes_count);
    r.Ok(Enc(outpost_driver_v1_Fingerprint_fields, m));
  });
  Handle("ConfigSchema", [d](const std::string&, Reply r) {
    std::vector<ConfigField> fields = d->ConfigSchema();
    Keep k;
    std::vector<outpost_driver_v1_ConfigField> out;
    for (const ConfigField& f : fields) {
      out.push_back({k.S(f.name), k.S(f.type), f.required, k.S(f.description)});
    }
    outpost_driver_v1_ConfigSchema m = outpost_driver_v1_ConfigSchema_init_zero;
    m.fields_count = static_cast<pb_size_t>(out.size());
    m.fields = out.data();
    r.Ok(Enc(outpost_driver_v1_ConfigSchema_fields, m));
  });
  Handle("StartTask", [s, d](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_StartTaskRequest> m(outpost_driver_v1_StartTaskRequest_fields);
    if (!m.Decode(req, "StartTaskRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad StartTaskRequest");
    TaskConfig c = ConfigOf(m->config);
    auto it = s->tasks.find(c.id);
    if (it != s->tasks.end() && !it->second.exited) {
      return r.Fail(Code::kAlreadyExists, "task with ID \"" + c.id + "\" already started");
    }
    TaskHandle h;
    h.config = c;
    Answer a = d->StartTask(c, &h);
    if (!a.ok) return r.Fail(a.code, a.message);
    if (!h.started_at_unix_nanos) h.started_at_unix_nanos = WallNanos();
    s->tasks[c.id] = Task{};
    s->tasks[c.id].handle = h;
    std::string id = c.id;
    if (h.pid > 0) {
      s->plugin->WatchChild(h.pid, [s, id](int status) { s->Exited(id, ExitOfStatus(status)); });
    }
    outpost_driver_v1_StartTaskResponse resp = outpost_driver_v1_StartTaskResponse_init_zero;
    resp.has_handle = true;
    resp.handle.version = h.version;
    resp.handle.pid = h.pid;
    resp.handle.started_at_unix_nanos = h.started_at_unix_nanos;
    std::vector<pb_byte_t> state(PB_BYTES_ARRAY_T_ALLOCSIZE(h.driver_state.size()));
    auto* bytes = reinterpret_cast<pb_bytes_array_t*>(state.data());
    bytes->size = static_cast<pb_size_t>(h.driver_state.size());
    std::copy(h.driver_state.begin(), h.driver_state.end(), bytes->bytes);
    if (!h.driver_state.empty()) resp.handle.driver_state = bytes;
    r.Ok(Enc(outpost_driver_v1_StartTaskResponse_fields, resp));
  });
  Handle("RecoverTask", [s, d](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_RecoverTaskRequest> m(outpost_driver_v1_RecoverTaskRequest_fields);
    if (!m.Decode(req, "RecoverTaskRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad RecoverTaskRequest");
    TaskHandle h;
    h.version = m->handle.version;
    h.config = ConfigOf(m->handle.config);
    h.pid = m->handle.pid;
    h.started_at_unix_nanos = m->handle.started_at_unix_nanos;
    if (m->handle.driver_state) {
      h.driver_state.assign(reinterpret_cast<const char*>(m->handle.driver_state->bytes), m->handle.driver_state->size);
    }
    if (s->tasks.count(h.config.id)) return r.Ok("");  // this instance's own
    Answer a = d->RecoverTask(h);
    if (a.ok) s->tasks[h.config.id].handle = h;
    Send(r, a);
  });
  Handle("WaitTask", [s](const std::string& req, Reply r) {
    auto it = s->tasks.find(IdOf(req));
    if (it == s->tasks.end()) return r.Fail(Code::kNotFound, "task not found for given id");
    if (!it->second.exited) return it->second.waiters.push_back(r);
    Keep k;
    outpost_driver_v1_WaitTaskResponse m = outpost_driver_v1_WaitTaskResponse_init_zero;
    m.exited = true;
    m.has_result = true;
    FillExit(it->second.exit, &k, &m.result);
    r.Ok(Enc(outpost_driver_v1_WaitTaskResponse_fields, m));
  });
  Handle("StopTask", [d](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_StopTaskRequest> m(outpost_driver_v1_StopTaskRequest_fields);
    if (!m.Decode(req, "StopTaskRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad StopTaskRequest");
    d->StopTask(PbString(m->id), m->timeout_nanos, PbString(m->signal), [r](Answer a) { Send(r, a); });
  });
  Handle("DestroyTask", [d](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_DestroyTaskRequest> m(outpost_driver_v1_DestroyTaskRequest_fields);
    if (!m.Decode(req, "DestroyTaskRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad DestroyTaskRequest");
    Send(r, d->DestroyTask(PbString(m->id), m->force));
  });
  Handle("SignalTask", [d](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_SignalTaskRequest> m(outpost_driver_v1_SignalTaskRequest_fields);
    if (!m.Decode(req, "SignalTaskRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad SignalTaskRequest");
    Send(r, d->SignalTask(PbString(m->id), PbString(m->signal)));
  });
  Handle("InspectTask", [d](const std::string& req, Reply r) {
    TaskStatus st;
    Answer a = d->InspectTask(IdOf(req), &st);
    if (!a.ok) return Send(r, a);
    Keep k;
    outpost_driver_v1_TaskStatus m = outpost_driver_v1_TaskStatus_init_zero;
    m.id = k.S(st.id);
    m.name = k.S(st.name);
    m.state = st.state;
    m.pid = st.pid;
    m.started_at_unix_nanos = st.started_at_unix_nanos;
    m.completed_at_unix_nanos = st.completed_at_unix_nanos;
    m.has_exit = st.state == TaskStatus::kExited;
    FillExit(st.exit, &k, &m.exit);
    m.attributes = k.Map(st.attributes, &m.attributes_count);
    r.Ok(Enc(outpost_driver_v1_TaskStatus_fields, m));
  });
  Handle("TaskStats", [d](const std::string& req, Reply r) {
    TaskStats st;
    Answer a = d->GetTaskStats(IdOf(req), &st);
    if (!a.ok) return Send(r, a);
    Keep k;
    std::vector<char*> measured;
    for (const std::string& x : st.measured) measured.push_back(k.S(x));
    std::vector<outpost_driver_v1_StatValue> cg;
    for (const auto& kv : st.cgroup) cg.push_back({k.S(kv.first), kv.second});
    outpost_driver_v1_TaskStatsResponse m = outpost_driver_v1_TaskStatsResponse_init_zero;
    m.timestamp_unix_nanos = st.timestamp_unix_nanos ? st.timestamp_unix_nanos : WallNanos();
    m.rss_bytes = st.rss_bytes;
    m.cpu_user_nanos = st.cpu_user_nanos;
    m.cpu_system_nanos = st.cpu_system_nanos;
    m.cpu_percent = st.cpu_percent;
    m.measured_count = static_cast<pb_size_t>(measured.size());
    m.measured = measured.data();
    m.cgroup_count = static_cast<pb_size_t>(cg.size());
    m.cgroup = cg.data();
    r.Ok(Enc(outpost_driver_v1_TaskStatsResponse_fields, m));
  });
  Handle("ExecTask", [d](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_ExecTaskRequest> m(outpost_driver_v1_ExecTaskRequest_fields);
    if (!m.Decode(req, "ExecTaskRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad ExecTaskRequest");
    std::vector<std::string> cmd;
    for (pb_size_t i = 0; i < m->cmd_count; ++i) cmd.push_back(PbString(m->cmd[i]));
    d->ExecTask(PbString(m->id), cmd, m->timeout_nanos, [r](Answer a, ExecResult e) {
      if (!a.ok) return Send(r, a);
      if (e.output.size() > 4096) {
        e.output.resize(4096);
        e.truncated = true;
      }
      std::vector<pb_byte_t> buf(PB_BYTES_ARRAY_T_ALLOCSIZE(e.output.size()));
      auto* bytes = reinterpret_cast<pb_bytes_array_t*>(buf.data());
      bytes->size = static_cast<pb_size_t>(e.output.size());
      std::copy(e.output.begin(), e.output.end(), bytes->bytes);
      outpost_driver_v1_ExecTaskResponse resp = outpost_driver_v1_ExecTaskResponse_init_zero;
      resp.exit_code = e.exit_code;
      resp.output = bytes;
      resp.truncated = e.truncated;
      r.Ok(Enc(outpost_driver_v1_ExecTaskResponse_fields, resp));
    });
  });
  Handle("TaskEvents", [s](const std::string& req, Reply r) {
    PbOwned<outpost_driver_v1_TaskEventsRequest> m(outpost_driver_v1_TaskEventsRequest_fields);
    if (!m.Decode(req, "TaskEventsRequest").ok()) return r.Fail(Code::kInvalidArgument, "bad TaskEventsRequest");
    EventPoll p{m->after, r};
    if (!s->AnswerPoll(p)) s->polls.push_back(p);  // answered by EmitEvent, or the caller's deadline passes
  });
}

Answer TaskDriver::DefaultRecoverTask(const TaskHandle& h) {
  return Answer::Fail(Code::kNotFound, "task " + h.config.id + " is not this instance's");
}

void TaskDriver::DefaultStopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal,
                                 std::function<void(Answer)> done) {
  auto it = server_->tasks.find(id);
  if (it == server_->tasks.end() || it->second.exited || it->second.handle.pid <= 0) return done(Answer::Ok());
  int pid = it->second.handle.pid;
  int sig = SignalNumber(signal.empty() ? it->second.handle.config.kill_signal : signal);
  if (::kill(-pid, sig ? sig : SIGTERM) != 0) ::kill(pid, sig ? sig : SIGTERM);
  it->second.stopping.push_back(std::move(done));
  DriverServer* s = server_;
  plugin_->After(timeout_nanos > 0 ? timeout_nanos : 0, [s, id, pid] {
    auto t = s->tasks.find(id);
    if (t == s->tasks.end() || t->second.exited || t->second.handle.pid != pid) return;
    if (::kill(-pid, SIGKILL) != 0) ::kill(pid, SIGKILL);
  });
}

Answer TaskDriver::DefaultDestroyTask(const std::string& id, bool force) {
  auto it = server_->tasks.find(id);
  if (it == server_->tasks.end()) return Answer::Ok();
  if (!it->second.exited && !force) return Answer::Fail(Code::kFailedPrecondition, "cannot destroy running task");
  int pid = it->second.handle.pid;
  if (!it->second.exited && pid > 0 && ::kill(-pid, SIGKILL) != 0) ::kill(pid, SIGKILL);
  for (Reply& w : it->second.waiters) w.Fail(Code::kNotFound, "task " + id + " was destroyed");
  server_->tasks.erase(it);
  return Answer::Ok();
}

Answer TaskDriver::DefaultInspectTask(const std::string& id, TaskStatus* st) {
  auto it = server_->tasks.find(id);
  if (it == server_->tasks.end()) return Answer::Fail(Code::kNotFound, "task not found for given id");
  const DriverServer::Task& t = it->second;
  st->id = id;
  st->name = t.handle.config.name;
  st->state = t.exited ? TaskStatus::kExited : TaskStatus::kRunning;
  st->pid = t.handle.pid;
  st->started_at_unix_nanos = t.handle.started_at_unix_nanos;
  st->completed_at_unix_nanos = t.completed_at;
  st->exit = t.exit;
  return Answer::Ok();
}

Answer TaskDriver::DefaultSignalTask(const std::string& id, const std::string& signal) {
  auto it = server_->tasks.find(id);
  if (it == server_->tasks.end()) return Answer::Fail(Code::kNotFound, "task not found for given id");
  int sig = SignalNumber(signal);
  if (!sig) return Answer::Fail(Code::kInvalidArgument, "unknown signal \"" + signal + "\"");
  int pid = it->second.handle.pid;
  if (it->second.exited || pid <= 0) return Answer::Fail(Code::kFailedPrecondition, "task " + id + " is not running");
  if (::kill(-pid, sig) != 0 && ::kill(pid, sig) != 0) return Answer::Fail(Code::kInternal, "kill failed");
  return Answer::Ok();
}

void TaskDriver::ReportExit(const std::string& id, const ExitResult& result) {
  if (server_) server_->Exited(id, result);
}

void TaskDriver::EmitEvent(TaskEvent event) {
  if (!server_) return;
  if (!event.timestamp_unix_nanos) event.timestamp_unix_nanos = WallNanos();
  server_->events.push_back({++server_->last_sequence, std::move(event)});
  while (server_->events.size() > server_->options.events_kept) server_->events.pop_front();
  server_->FlushEvents();
}

int RunTaskDriver(Options options, TaskDriver& driver, DriverOptions driver_options) {
  options.type = "TaskDriver";
  if (options.versions.empty()) options.versions = {"v1"};
  Plugin plugin(options);
  DriverServer server;
  server.plugin = &plugin;
  server.driver = &driver;
  server.options = std::move(driver_options);
  if (server.options.events_kept == 0) server.options.events_kept = 1;
  DriverServer::Attach(driver, &plugin, &server);
  server.Serve();
  if (server.options.on_start) server.options.on_start(&plugin);
  int rc = plugin.Run();
  DriverServer::Attach(driver, nullptr, nullptr);
  return rc;
}

}  // namespace outpost::plugin_sdk
