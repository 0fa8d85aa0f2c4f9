#include "task/record.h"

#include <picojson.h>

#include <memory>

#include "base/json.h"

namespace outpost::task {

namespace {

// 1: the exec driver's own handle file (pid, start time, ... at the top).
// 2: the task layer's record; the driver's state is opaque.
constexpr int kRecordVersion = 2;

picojson::value Str(const std::string& s) { return picojson::value(s); }
picojson::value Num(int64_t n) { return picojson::value(n); }

}  // namespace

std::string EncodeTaskRecord(const TaskRecord& rec) {
  const driver::TaskHandle& h = rec.handle;
  const driver::TaskConfig& c = h.config;
  picojson::object cfg;
  cfg["id"] = Str(c.id);
  cfg["job"] = Str(c.job);
  cfg["name"] = Str(c.name);
  cfg["command"] = Str(c.command);
  picojson::array args;
  for (const std::string& a : c.args) args.push_back(Str(a));
  cfg["args"] = picojson::value(args);
  picojson::object env;
  for (const auto& [k, v] : c.env) env[k] = Str(v);
  cfg["env"] = picojson::value(env);
  cfg["workdir"] = Str(c.workdir);
  cfg["user"] = Str(c.user);
  cfg["group"] = Str(c.group);
  picojson::array rl;
  for (const proc::Rlimit& r : c.rlimits) {
    picojson::object o;
    o["name"] = Str(r.name);
    o["soft"] = Num(static_cast<int64_t>(r.soft));
    o["hard"] = Num(static_cast<int64_t>(r.hard));
    rl.push_back(picojson::value(o));
  }
  cfg["rlimits"] = picojson::value(rl);
  cfg["kill_signal"] = Str(c.kill_signal);
  cfg["kill_timeout_ns"] = Num(c.kill_timeout_nanos);
  cfg["task_dir"] = Str(c.task_dir);
  cfg["stdout"] = Str(c.stdout_path);
  cfg["stderr"] = Str(c.stderr_path);
  cfg["log_dir"] = Str(c.log_dir);
  cfg["log_max_files"] = Num(c.log_max_files);
  cfg["log_max_file_size"] = Num(static_cast<int64_t>(c.log_max_file_size));
  if (!c.spec_hash.empty()) cfg["spec_hash"] = Str(c.spec_hash);
  if (c.restarts) {
    picojson::object m;
    m["total"] = Num(static_cast<int64_t>(c.restarts->total));
    picojson::array window;
    for (int64_t t : c.restarts->window_mono) window.push_back(Num(t));
    m["window_mono_ns"] = picojson::value(window);
    m["last_start_mono_ns"] = Num(c.restarts->last_start_mono);
    cfg["restarts"] = picojson::value(m);
  }
  if (!c.Annotations().empty()) {
    // For the NRI events of a task recovered after an agent restart (its
    // hooks are in its bundle, not here).
    picojson::object a;
    for (const auto& [k, v] : c.Annotations()) a[k] = Str(v);
    cfg["annotations"] = picojson::value(a);
  }
  cfg["driver"] = Str(c.driver);
  if (!c.driver_config.empty()) cfg["driver_config"] = Str(c.driver_config);
  if (!c.cgroup.empty()) cfg["cgroup"] = Str(c.cgroup);
  if (!c.Netns().empty()) cfg["netns"] = Str(c.Netns());
  if (!c.Hostname().empty()) cfg["hostname"] = Str(c.Hostname());
  if (c.identity.switch_user) {
    picojson::object who;
    who["uid"] = Num(c.identity.uid);
    who["gid"] = Num(c.identity.gid);
    picojson::array groups;
    for (gid_t g : c.identity.groups) groups.push_back(Num(g));
    who["groups"] = picojson::value(groups);
    who["name"] = Str(c.identity.name);
    who["home"] = Str(c.identity.home);
    cfg["identity"] = picojson::value(who);
  }

  picojson::object o;
  o["version"] = Num(kRecordVersion);
  o["driver"] = Str(rec.driver());
  picojson::object handle;
  handle["version"] = Num(h.version);
  handle["pid"] = Num(h.pid);
  handle["started_at_ns"] = Num(h.started_at_unix_nanos);
  handle["driver_state"] = Str(h.driver_state);
  if (!h.network.empty()) {
    picojson::object net, ports;
    net["address"] = Str(h.network.address);
    for (const auto& [label, port] : h.network.ports) ports[label] = Num(port);
    net["ports"] = picojson::value(ports);
    handle["network"] = picojson::value(net);
  }
  o["handle"] = picojson::value(handle);
  if (!c.cgroup.empty()) o["oom_kills_at_start"] = Num(static_cast<int64_t>(rec.oom_kills_at_start));
  o["config"] = picojson::value(cfg);
  if (rec.exited) {
    picojson::object e;
    e["exit_code"] = Num(rec.exit.exit_code);
    e["signal"] = Num(rec.exit.signal);
    e["oom_killed"] = picojson::value(rec.exit.oom_killed);
    e["error"] = Str(rec.exit.error);
    e["completed_at_ns"] = Num(rec.completed_at_unix_nanos);
    o["exit"] = picojson::value(e);
  }
  return picojson::value(o).serialize(true);
}

Result<TaskRecord> DecodeTaskRecord(const std::string& text) {
  auto doc = json::Parse(text, json::ParseLimits{4 << 20, 16});
  if (!doc.ok()) return doc.error();
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  TaskRecord rec;
  driver::TaskHandle& h = rec.handle;
  int64_t version = 0, pid = 0, oom_base = 0;
  r.Int("version", 1, 1000, &version);
  if (version > kRecordVersion) {
    return Error(Code::kFailedPrecondition,
                 "task record version " + std::to_string(version) + " is newer than this binary understands");
  }
  std::string driver_name = "exec";
  r.String("driver", &driver_name, false);
  r.Int("oom_kills_at_start", 0, INT64_MAX, &oom_base);
  rec.oom_kills_at_start = static_cast<uint64_t>(oom_base);
  std::string legacy_cgroup;
  if (version == 1) {
    // The exec driver's own file: its state is what it kept at the top.
    r.Int("pid", 0, INT32_MAX, &pid);
    r.Int("started_at_ns", 0, INT64_MAX, &h.started_at_unix_nanos);
    r.String("cgroup", &legacy_cgroup);
    h.version = 0;
    h.driver_state = text;
  } else if (const picojson::value* hv = r.Get("handle")) {
    json::ObjectReader hr(*hv, "handle", &errors);
    int64_t hversion = 0;
    hr.Int("version", 0, 1000, &hversion);
    hr.Int("pid", 0, INT32_MAX, &pid);
    hr.Int("started_at_ns", 0, INT64_MAX, &h.started_at_unix_nanos);
    hr.String("driver_state", &h.driver_state);
    h.version = static_cast<int>(hversion);
    // Shown, never acted on: what does not read as written is left out
    // rather than making the task's record unreadable.
    const picojson::value* nv = hr.Get("network");
    if (nv && nv->is<picojson::object>()) {
      const picojson::object& n = nv->get<picojson::object>();
      auto a = n.find("address");
      if (a != n.end() && a->second.is<std::string>()) h.network.address = a->second.get<std::string>();
      auto p = n.find("ports");
      if (p != n.end() && p->second.is<picojson::object>()) {
        for (const auto& [label, port] : p->second.get<picojson::object>()) {
          if (port.is<int64_t>() && port.get<int64_t>() >= 0 && port.get<int64_t>() <= INT32_MAX) {
            h.network.ports[label] = static_cast<int32_t>(port.get<int64_t>());
          }
        }
      }
    }
  } else {
    errors.push_back("handle: missing");
  }
  h.pid = static_cast<pid_t>(pid);
  driver::TaskConfig& c = h.config;
  if (const picojson::value* cv = r.Get("config")) {
    json::ObjectReader cr(*cv, "config", &errors);
    cr.String("id", &c.id);
    cr.String("job", &c.job);
    cr.String("name", &c.name);
    cr.String("command", &c.command);
    cr.StringList("args", &c.args);
    if (const picojson::value* ev = cr.Get("env")) {
      if (ev->is<picojson::object>()) {
        for (const auto& [k, v] : ev->get<picojson::object>()) {
          if (v.is<std::string>()) c.env[k] = v.get<std::string>();
        }
      }
    }
    cr.String("workdir", &c.workdir);
    cr.String("user", &c.user);
    cr.String("group", &c.group);
    if (const picojson::value* rv = cr.Get("rlimits")) {
      if (rv->is<picojson::array>()) {
        for (const picojson::value& item : rv->get<picojson::array>()) {
          json::ObjectReader ir(item, "config.rlimits[]", &errors);
          proc::Rlimit rl;
          int64_t soft = 0, hard = 0;
          ir.String("name", &rl.name);
          ir.Int("soft", 0, INT64_MAX, &soft);
          ir.Int("hard", 0, INT64_MAX, &hard);
          rl.soft = static_cast<uint64_t>(soft);
          rl.hard = static_cast<uint64_t>(hard);
          c.rlimits.push_back(rl);
        }
      }
    }
    cr.String("kill_signal", &c.kill_signal);
    cr.Int("kill_timeout_ns", 0, INT64_MAX, &c.kill_timeout_nanos);
    cr.String("task_dir", &c.task_dir);
    cr.String("stdout", &c.stdout_path);
    cr.String("stderr", &c.stderr_path);
    cr.String("log_dir", &c.log_dir);
    cr.String("spec_hash", &c.spec_hash);
    if (const picojson::value* mv = cr.Get("restarts")) {
      json::ObjectReader mr(*mv, "config.restarts", &errors);
      auto mark = std::make_shared<driver::RestartMark>();
      int64_t total = 0;
      mr.Int("total", 0, INT64_MAX, &total);
      mark->total = static_cast<uint64_t>(total);
      mr.IntList("window_mono_ns", 0, INT64_MAX, &mark->window_mono);
      mr.Int("last_start_mono_ns", 0, INT64_MAX, &mark->last_start_mono);
      c.restarts = std::move(mark);
    }
    if (const picojson::value* av = cr.Get("annotations")) {
      if (av->is<picojson::object>()) {
        auto oci = std::make_shared<driver::TaskHooks>();
        for (const auto& [k, v] : av->get<picojson::object>()) {
          if (v.is<std::string>()) oci->annotations[k] = v.get<std::string>();
        }
        c.oci = std::move(oci);  // no bundle named: hooks are read from it (RunPoststop)
      } else {
        errors.push_back("config.annotations: expected an object");
      }
    }
    cr.String("driver", &c.driver, false);
    cr.String("driver_config", &c.driver_config);
    cr.String("cgroup", &c.cgroup);
    std::string netns, hostname;  // absent in records written before networking: ""
    cr.String("netns", &netns);
    cr.String("hostname", &hostname);
    if (!netns.empty() || !hostname.empty()) c.SetJoined(netns, hostname);
    if (const picojson::value* wv = cr.Get("identity")) {
      json::ObjectReader wr(*wv, "config.identity", &errors);
      int64_t uid = 0, gid = 0;
      std::vector<int64_t> groups;
      wr.Int("uid", 0, UINT32_MAX, &uid);
      wr.Int("gid", 0, UINT32_MAX, &gid);
      wr.IntList("groups", 0, UINT32_MAX, &groups);
      wr.String("name", &c.identity.name);
      wr.String("home", &c.identity.home);
      c.identity.switch_user = true;
      c.identity.uid = static_cast<uid_t>(uid);
      c.identity.gid = static_cast<gid_t>(gid);
      for (int64_t g : groups) c.identity.groups.push_back(static_cast<gid_t>(g));
    }
    int64_t max_files = c.log_max_files, max_size = static_cast<int64_t>(c.log_max_file_size);
    cr.Int("log_max_files", 1, 1000, &max_files);
    cr.Int("log_max_file_size", 1, INT64_MAX, &max_size);
    c.log_max_files = static_cast<int>(max_files);
    c.log_max_file_size = static_cast<uint64_t>(max_size);
  } else {
    errors.push_back("config: missing");
  }
  if (const picojson::value* ev = r.Get("exit")) {
    json::ObjectReader er(*ev, "exit", &errors);
    int64_t code = 0, sig = 0;
    er.Int("exit_code", INT32_MIN, INT32_MAX, &code);
    er.Int("signal", 0, 128, &sig);
    er.Bool("oom_killed", &rec.exit.oom_killed);
    er.String("error", &rec.exit.error);
    er.Int("completed_at_ns", 0, INT64_MAX, &rec.completed_at_unix_nanos);
    rec.exit.exit_code = static_cast<int>(code);
    rec.exit.signal = static_cast<int>(sig);
    rec.exited = true;
  }
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  if (c.id.empty()) return Error(Code::kInvalidArgument, "config.id: missing");
  if (version == 1) c.cgroup = legacy_cgroup;
  c.driver = driver_name;
  return rec;
}

}  // namespace outpost::task
