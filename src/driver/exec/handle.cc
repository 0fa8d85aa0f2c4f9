// Encoding of persisted task handles (<state_dir>/tasks/<id>.json).
// Versioned JSON so a newer binary can read what an older one wrote.
#include <picojson.h>

#include "base/json.h"
#include "driver/exec/exec_driver.h"

namespace outpost::driver {

namespace {

constexpr int kHandleVersion = 1;

picojson::value Str(const std::string& s) { return picojson::value(s); }
picojson::value Num(int64_t n) { return picojson::value(n); }

}  // namespace

std::string ExecDriver::EncodeHandle(const TaskHandle& h, const ExitResult* exit, int64_t completed_at) {
  const TaskConfig& c = h.config;
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

  picojson::object o;
  o["version"] = Num(kHandleVersion);
  o["driver"] = Str("exec");
  o["pid"] = Num(h.pid);
  o["start_ticks"] = Num(static_cast<int64_t>(h.start_ticks));
  o["started_at_ns"] = Num(h.started_at_unix_nanos);
  o["driver_state"] = Str(h.driver_state);
  o["instance"] = Str(h.instance);
  if (!h.boot_id.empty()) o["boot_id"] = Str(h.boot_id);
  if (!h.cgroup.empty()) {
    o["cgroup"] = Str(h.cgroup);
    o["oom_kills_at_start"] = Num(static_cast<int64_t>(h.oom_kills_at_start));
  }
  o["config"] = picojson::value(cfg);
  if (exit) {
    picojson::object e;
    e["exit_code"] = Num(exit->exit_code);
    e["signal"] = Num(exit->signal);
    e["oom_killed"] = picojson::value(exit->oom_killed);
    e["error"] = Str(exit->error);
    e["completed_at_ns"] = Num(completed_at);
    o["exit"] = picojson::value(e);
  }
  return picojson::value(o).serialize(true);
}

Result<TaskHandle> ExecDriver::DecodeHandle(const std::string& text, ExitResult* exit, int64_t* completed_at,
                                            bool* has_exit) {
  auto doc = json::Parse(text, json::ParseLimits{4 << 20, 16});
  if (!doc.ok()) return doc.error();
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  TaskHandle h;
  int64_t version = 0, pid = 0, ticks = 0;
  r.Int("version", 1, 1000, &version);
  std::string driver;
  r.String("driver", &driver);
  r.Int("pid", 0, INT32_MAX, &pid);
  r.Int("start_ticks", 0, INT64_MAX, &ticks);
  r.Int("started_at_ns", 0, INT64_MAX, &h.started_at_unix_nanos);
  r.String("driver_state", &h.driver_state);
  r.String("instance", &h.instance);
  r.String("boot_id", &h.boot_id);
  r.String("cgroup", &h.cgroup);
  int64_t oom_base = 0;
  r.Int("oom_kills_at_start", 0, INT64_MAX, &oom_base);
  h.oom_kills_at_start = static_cast<uint64_t>(oom_base);
  if (version > kHandleVersion) {
    return Error(Code::kFailedPrecondition,
                 "handle version " + std::to_string(version) + " is newer than this binary understands");
  }
  h.version = static_cast<int>(version);
  h.pid = static_cast<pid_t>(pid);
  h.start_ticks = static_cast<uint64_t>(ticks);
  TaskConfig& c = h.config;
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
    int64_t max_files = c.log_max_files, max_size = static_cast<int64_t>(c.log_max_file_size);
    cr.Int("log_max_files", 1, 1000, &max_files);
    cr.Int("log_max_file_size", 1, INT64_MAX, &max_size);
    c.log_max_files = static_cast<int>(max_files);
    c.log_max_file_size = static_cast<uint64_t>(max_size);
  } else {
    errors.push_back("config: missing");
  }
  *has_exit = false;
  if (const picojson::value* ev = r.Get("exit")) {
    json::ObjectReader er(*ev, "exit", &errors);
    int64_t code = 0, sig = 0;
    er.Int("exit_code", INT32_MIN, INT32_MAX, &code);
    er.Int("signal", 0, 128, &sig);
    er.Bool("oom_killed", &exit->oom_killed);
    er.String("error", &exit->error);
    er.Int("completed_at_ns", 0, INT64_MAX, completed_at);
    exit->exit_code = static_cast<int>(code);
    exit->signal = static_cast<int>(sig);
    *has_exit = true;
  }
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  if (c.id.empty()) return Error(Code::kInvalidArgument, "config.id: missing");
  return h;
}

}  // namespace outpost::driver
