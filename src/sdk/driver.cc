// The plugin library's task-driver side (include/outpost/driver.h). Owns:
// serving outpost.driver.v1.Driver's methods, the tasks the driver started
// (pid, exit, pending WaitTask calls), the default stop/signal/destroy/
// inspect on a task's process group, and the TaskEvents ring. Does not own:
// the messages' encoding (driverproto/plugin_codec, shared with the agent's
// tests; the agent's own direction is driver/remote_codec). Built into
// liboutpost-plugin.a from base, loop, wire and driverproto only.
#include "outpost/driver.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "driverproto/common.h"
#include "driverproto/plugin_codec.h"

namespace outpost::plugin_sdk {

namespace {

using driverproto::kService;

// A reply's bytes; "" if it cannot be encoded.
std::string Enc(Result<std::string> r) { return r.ok() ? *r : std::string(); }

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
  Plugin* plugin;
  TaskDriver* driver;
  DriverOptions options;
  std::map<std::string, Task> tasks;
  std::deque<driverproto::SequencedEvent> events;
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
    std::string answer = Enc(driverproto::EncodeWaitTask(true, r));
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
    std::vector<driverproto::SequencedEvent> out;
    for (const driverproto::SequencedEvent& s : events) {
      if (s.sequence > after && out.size() < driverproto::kMaxEventsPerReply) out.push_back(s);
    }
    if (out.empty()) return false;
    p.reply.Ok(Enc(driverproto::EncodeTaskEventsResponse(out, out.back().sequence)));
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
  auto id = driverproto::DecodeTaskId(req);
  return id.ok() ? *id : std::string();
}

}  // namespace

void DriverServer::Serve() {
  DriverServer* s = this;
  TaskDriver* d = driver;
  Handle("Capabilities", [d](const std::string&, Reply r) {
    r.Ok(Enc(driverproto::EncodeCapabilities(d->GetCapabilities())));
  });
  Handle("Fingerprint", [d](const std::string&, Reply r) {
    r.Ok(Enc(driverproto::EncodeFingerprint(d->GetFingerprint())));
  });
  Handle("ConfigSchema", [d](const std::string&, Reply r) {
    r.Ok(Enc(driverproto::EncodeConfigSchema(d->ConfigSchema())));
  });
  Handle("StartTask", [s, d](const std::string& req, Reply r) {
    auto config = driverproto::DecodeStartTask(req);
    if (!config.ok()) return r.Fail(Code::kInvalidArgument, "bad StartTaskRequest");
    const TaskConfig& c = *config;
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
      s->plugin->WatchChild(h.pid, [s, d, id](int status) {
        ExitResult e = ExitOfStatus(status);
        d->TaskExited(id, &e);
        s->Exited(id, e);
      });
    }
    r.Ok(Enc(driverproto::EncodeStartTaskResponse(h)));
  });
  Handle("RecoverTask", [s, d](const std::string& req, Reply r) {
    auto handle = driverproto::DecodeRecoverTask(req);
    if (!handle.ok()) return r.Fail(Code::kInvalidArgument, "bad RecoverTaskRequest");
    const TaskHandle& h = *handle;
    if (s->tasks.count(h.config.id)) return r.Ok("");  // this instance's own
    Answer a = d->RecoverTask(h);
    if (a.ok) s->tasks[h.config.id].handle = h;
    Send(r, a);
  });
  Handle("WaitTask", [s](const std::string& req, Reply r) {
    auto it = s->tasks.find(IdOf(req));
    if (it == s->tasks.end()) return r.Fail(Code::kNotFound, "task not found for given id");
    if (!it->second.exited) return it->second.waiters.push_back(r);
    r.Ok(Enc(driverproto::EncodeWaitTask(true, it->second.exit)));
  });
  Handle("StopTask", [d](const std::string& req, Reply r) {
    auto m = driverproto::DecodeStopTask(req);
    if (!m.ok()) return r.Fail(Code::kInvalidArgument, "bad StopTaskRequest");
    d->StopTask(m->id, m->timeout_nanos, m->signal, [r](Answer a) { Send(r, a); });
  });
  Handle("DestroyTask", [d](const std::string& req, Reply r) {
    auto m = driverproto::DecodeDestroyTask(req);
    if (!m.ok()) return r.Fail(Code::kInvalidArgument, "bad DestroyTaskRequest");
    Send(r, d->DestroyTask(m->id, m->force));
  });
  Handle("SignalTask", [d](const std::string& req, Reply r) {
    auto m = driverproto::DecodeSignalTask(req);
    if (!m.ok()) return r.Fail(Code::kInvalidArgument, "bad SignalTaskRequest");
    Send(r, d->SignalTask(m->id, m->signal));
  });
  Handle("InspectTask", [d](const std::string& req, Reply r) {
    TaskStatus st;
    Answer a = d->InspectTask(IdOf(req), &st);
    if (!a.ok) return Send(r, a);
    r.Ok(Enc(driverproto::EncodeTaskStatus(st)));
  });
  Handle("TaskStats", [d](const std::string& req, Reply r) {
    TaskStats st;
    Answer a = d->GetTaskStats(IdOf(req), &st);
    if (!a.ok) return Send(r, a);
    if (!st.timestamp_unix_nanos) st.timestamp_unix_nanos = WallNanos();
    r.Ok(Enc(driverproto::EncodeTaskStats(st)));
  });
  Handle("ExecTask", [d](const std::string& req, Reply r) {
    auto m = driverproto::DecodeExecTask(req);
    if (!m.ok()) return r.Fail(Code::kInvalidArgument, "bad ExecTaskRequest");
    d->ExecTask(m->id, m->cmd, m->timeout_nanos, [r](Answer a, ExecResult e) {
      if (!a.ok) return Send(r, a);
      r.Ok(Enc(driverproto::EncodeExecTask(e)));
    });
  });
  Handle("ListTasks", [d](const std::string&, Reply r) { r.Ok(Enc(driverproto::EncodeTaskIds(d->ListTasks()))); });
  Handle("TaskEvents", [s](const std::string& req, Reply r) {
    auto after = driverproto::DecodeTaskEvents(req);
    if (!after.ok()) return r.Fail(Code::kInvalidArgument, "bad TaskEventsRequest");
    EventPoll p{*after, r};
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

Answer TaskDriver::DefaultGetTaskStats(const std::string& id, TaskStats* s) {
  auto it = server_->tasks.find(id);
  if (it == server_->tasks.end()) return Answer::Fail(Code::kNotFound, "task not found for given id");
  int pid = it->second.handle.pid;
  if (it->second.exited || pid <= 0) return Answer::Fail(Code::kFailedPrecondition, "task " + id + " is not running");
  std::string proc = "/proc/" + std::to_string(pid);
  auto stat = sys::ReadFile(proc + "/stat", 4096);
  auto statm = sys::ReadFile(proc + "/statm", 4096);
  size_t paren = stat.ok() ? stat->rfind(')') : std::string::npos;
  if (paren == std::string::npos || !statm.ok()) {
    return Answer::Fail(Code::kNotFound, "task " + id + ": process " + std::to_string(pid) + " is gone");
  }
  // After "(comm)": state is field 3; utime and stime are fields 14 and 15.
  std::vector<std::string> f = Split(stat->substr(paren + 2), ' ');
  std::vector<std::string> m = Split(*statm, ' ');
  if (f.size() < 13 || m.size() < 2) return Answer::Fail(Code::kInternal, "cannot parse " + proc + "/stat");
  const uint64_t tick_nanos = 1000000000ULL / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK));
  s->timestamp_unix_nanos = WallNanos();
  s->cpu_user_nanos = std::strtoull(f[11].c_str(), nullptr, 10) * tick_nanos;
  s->cpu_system_nanos = std::strtoull(f[12].c_str(), nullptr, 10) * tick_nanos;
  s->rss_bytes = std::strtoull(m[1].c_str(), nullptr, 10) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  s->measured = {"RSS", "User Mode", "System Mode"};
  return Answer::Ok();
}

std::vector<std::string> TaskDriver::DefaultListTasks() const {
  std::vector<std::string> ids;
  if (server_) {
    for (const auto& [id, t] : server_->tasks) ids.push_back(id);
  }
  return ids;
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
  options.type = driverproto::kPluginType;
  if (options.versions.empty()) options.versions = {driverproto::kApiVersion};
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
