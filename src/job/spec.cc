#include "job/spec.h"

#include <algorithm>

#include "base/json.h"
#include "base/strings.h"
#include "proc/spawn.h"

namespace outpost::job {

namespace {

using json::Errors;
using json::ObjectReader;

constexpr int64_t kSecond = 1000000000LL;
constexpr int64_t kHour = 3600 * kSecond;
constexpr int64_t kMaxKillTimeout = kHour;
// 0 = at once; the supervisor still starts a task at most once a second.
constexpr int64_t kMinRestartDelay = 0;
constexpr int64_t kMaxRestartDelay = kHour;
constexpr int64_t kMinRestartInterval = kSecond;
constexpr int64_t kMaxRestartInterval = 24 * kHour;
constexpr int64_t kMaxRestartAttempts = 1000000;
constexpr int64_t kMaxMinHealthyTime = kHour;
constexpr int64_t kMaxLogFiles = 1000;
constexpr uint64_t kMinLogFileSize = 4096;

const char* const kNotYet = "not supported yet by this version of outpost";

// A string as it appears in messages: JSON-quoted, control bytes escaped,
// long ones cut.
std::string Quote(const std::string& s) { return json::Preview(picojson::value(s)); }

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Path of a map entry: "tasks[0].env" + "PATH" -> "tasks[0].env.PATH"; keys
// that are not plain words are quoted: tasks[0].env["A B"].
std::string KeyPath(const std::string& path, const std::string& key) {
  bool plain = !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), IsWordChar);
  if (plain) return path.empty() ? key : path + "." + key;
  return path + "[" + Quote(key) + "]";
}

bool ValidEnvName(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!IsWordChar(c) || c == '-') return false;
  }
  return true;
}

// Byte limit and NUL check for any string taken from the document (NUL
// cannot cross execve, and would silently cut a path or an argument).
bool CheckString(const std::string& path, const std::string& s, size_t limit, Errors* errors) {
  if (s.size() > limit) {
    errors->push_back(Format("%s: is %zu bytes, more than the limit of %zu bytes", path.c_str(), s.size(), limit));
    return false;
  }
  if (s.find('\0') != std::string::npos) {
    errors->push_back(path + ": must not contain NUL bytes");
    return false;
  }
  return true;
}

// Records "<path>.<key>: required" when key is absent.
bool Required(ObjectReader& r, const std::string& key) {
  if (r.Has(key)) return true;
  r.Known(key);
  r.Fail(key, "required");
  return false;
}

// The typed readers below return true when the key is present and its value
// valid (and only then store it), so callers can tell "absent" from "bad".
bool ReadString(ObjectReader& r, Errors* errors, const std::string& key, std::string* out,
                bool allow_empty = true) {
  size_t before = errors->size();
  std::string v;
  r.String(key, &v, allow_empty);
  if (!r.Has(key) || errors->size() != before) return false;
  if (!CheckString(r.PathOf(key), v, kMaxStringBytes, errors)) return false;
  *out = std::move(v);
  return true;
}

bool ReadDuration(ObjectReader& r, Errors* errors, const std::string& key, int64_t min, int64_t max,
                  int64_t* out) {
  size_t before = errors->size();
  int64_t v = 0;
  r.Duration(key, &v);
  if (!r.Has(key) || errors->size() != before) return false;
  if (v < min || v > max) {
    r.Fail(key, "must be between " + FormatDuration(min) + " and " + FormatDuration(max) + ", got " +
                    FormatDuration(v));
    return false;
  }
  *out = v;
  return true;
}

// Labels and annotations: string -> string, bounded in count and size.
void ReadLabels(ObjectReader& r, Errors* errors, const std::string& key, std::map<std::string, std::string>* out) {
  const picojson::value* v = r.Get(key);
  if (!v) return;
  std::string path = r.PathOf(key);
  if (!v->is<picojson::object>()) {
    errors->push_back(path + ": expected an object of strings, got " + json::TypeName(*v));
    return;
  }
  const auto& obj = v->get<picojson::object>();
  if (obj.size() > kMaxLabels) {
    errors->push_back(Format("%s: %zu entries, more than the limit of %zu", path.c_str(), obj.size(), kMaxLabels));
    return;
  }
  for (const auto& [k, val] : obj) {
    std::string item = KeyPath(path, k);
    if (k.empty()) {
      errors->push_back(path + ": keys must not be empty");
    } else if (k.size() > kMaxLabelBytes) {
      errors->push_back(Format("%s: key %s is %zu bytes, more than the limit of %zu bytes", path.c_str(),
                               Quote(k).c_str(), k.size(), kMaxLabelBytes));
    } else if (k.find('\0') != std::string::npos) {
      errors->push_back(item + ": keys must not contain NUL bytes");
    } else if (!val.is<std::string>()) {
      errors->push_back(item + ": expected a string, got " + json::TypeName(val));
    } else if (CheckString(item, val.get<std::string>(), kMaxLabelBytes, errors)) {
      (*out)[k] = val.get<std::string>();
    }
  }
}

void ReadEnv(ObjectReader& r, Errors* errors, std::map<std::string, std::string>* out) {
  const picojson::value* v = r.Get("env");
  if (!v) return;
  std::string path = r.PathOf("env");
  if (!v->is<picojson::object>()) {
    errors->push_back(path + ": expected an object of strings, got " + json::TypeName(*v));
    return;
  }
  size_t total = 0;
  for (const auto& [k, val] : v->get<picojson::object>()) {
    std::string item = KeyPath(path, k);
    if (!ValidEnvName(k)) {
      errors->push_back(item + ": not a valid variable name (letters, digits and '_', not starting with a digit)");
    } else if (!val.is<std::string>()) {
      errors->push_back(item + ": expected a string, got " + json::TypeName(val));
    } else if (CheckString(item, val.get<std::string>(), kMaxStringBytes, errors)) {
      (*out)[k] = val.get<std::string>();
    }
    total += k.size() + 1 + (val.is<std::string>() ? val.get<std::string>().size() : 0);
  }
  if (total > kMaxEnvBytes) {
    errors->push_back(Format("%s: %zu bytes in total (name=value), more than the limit of %zu bytes", path.c_str(),
                             total, kMaxEnvBytes));
  }
}

// One rlimit value: a whole number >= 0 or "unlimited".
bool ReadRlimitValue(const picojson::value& v, const std::string& path, const char* expected, uint64_t* out,
                     Errors* errors) {
  if (v.is<std::string>() && v.get<std::string>() == "unlimited") {
    *out = kRlimitUnlimited;
    return true;
  }
  if (v.is<int64_t>()) {
    int64_t n = v.get<int64_t>();
    if (n < 0) {
      errors->push_back(Format("%s: must not be negative, got %lld", path.c_str(), static_cast<long long>(n)));
      return false;
    }
    *out = static_cast<uint64_t>(n);
    return true;
  }
  errors->push_back(path + ": expected " + expected + ", got " + json::Preview(v));
  return false;
}

std::string RlimitValueText(uint64_t v) {
  return v == kRlimitUnlimited ? "unlimited" : Format("%llu", static_cast<unsigned long long>(v));
}

// "NOFILE", "rlimit_nofile" -> "nofile" (the name proc::Rlimit carries).
std::string RlimitKey(const std::string& raw) {
  std::string name;
  for (char c : raw) name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (StartsWith(name, "rlimit_")) name = name.substr(7);
  return name;
}

void ReadRlimits(ObjectReader& r, Errors* errors, std::vector<proc::Rlimit>* out) {
  const picojson::value* v = r.Get("rlimits");
  if (!v) return;
  std::string path = r.PathOf("rlimits");
  if (!v->is<picojson::object>()) {
    errors->push_back(path + ": expected an object, got " + json::TypeName(*v));
    return;
  }
  std::map<std::string, proc::Rlimit> by_name;  // sorted by canonical name
  for (const auto& [k, val] : v->get<picojson::object>()) {
    std::string item = KeyPath(path, k);
    auto res = proc::ParseRlimitName(k);
    if (!res.ok()) {
      errors->push_back(item + ": " + res.error().message());
      continue;
    }
    proc::Rlimit lim;
    lim.name = RlimitKey(k);
    if (val.is<picojson::object>()) {
      size_t before = errors->size();
      ObjectReader lr(val, item, errors);
      const picojson::value* soft = lr.Get("soft");
      const picojson::value* hard = lr.Get("hard");
      if (!soft) lr.Fail("soft", "required");
      if (!hard) lr.Fail("hard", "required");
      const char* expected = "a number or \"unlimited\"";
      if (soft) ReadRlimitValue(*soft, lr.PathOf("soft"), expected, &lim.soft, errors);
      if (hard) ReadRlimitValue(*hard, lr.PathOf("hard"), expected, &lim.hard, errors);
      lr.RejectUnknown();
      if (errors->size() != before) continue;
    } else {
      if (!ReadRlimitValue(val, item, "a number, \"unlimited\" or {\"soft\": ..., \"hard\": ...}", &lim.soft,
                           errors)) {
        continue;
      }
      lim.hard = lim.soft;
    }
    if (lim.soft > lim.hard) {
      errors->push_back(item + ": soft limit " + RlimitValueText(lim.soft) + " is more than the hard limit " +
                        RlimitValueText(lim.hard));
      continue;
    }
    if (by_name.count(lim.name)) {
      errors->push_back(item + ": \"" + lim.name + "\" is set twice");
      continue;
    }
    by_name[lim.name] = lim;
  }
  for (auto& [name, lim] : by_name) out->push_back(lim);
}

void ReadLogs(ObjectReader& r, Errors* errors, TaskSpec* t) {
  const picojson::value* v = r.Get("logs");
  if (!v) return;
  ObjectReader lr(*v, r.PathOf("logs"), errors);
  if (!lr.ok()) return;
  int64_t files = t->log_max_files;
  lr.Int("max_files", 1, kMaxLogFiles, &files);
  t->log_max_files = static_cast<int>(files);
  size_t before = errors->size();
  uint64_t size = t->log_max_file_size;
  lr.Size("max_file_size", &size);
  if (lr.Has("max_file_size") && errors->size() == before) {
    if (size < kMinLogFileSize) {
      lr.Fail("max_file_size", Format("must be at least 4KiB (4096 bytes), got %llu",
                                      static_cast<unsigned long long>(size)));
    } else {
      t->log_max_file_size = size;
    }
  }
  lr.RejectUnknown();
}

// Restart settings as they are inherited: built-in defaults, overlaid by the
// job's `restart`, overlaid by the task's.
struct RestartInput {
  Restart restart;
  bool max_delay_set = false;  // else max_delay follows delay (see below)
};

void ReadRestart(const picojson::value& v, const std::string& path, RestartInput* in, Errors* errors) {
  ObjectReader r(v, path, errors);
  if (!r.ok()) return;
  Restart& rs = in->restart;
  std::string policy;
  if (ReadString(r, errors, "policy", &policy)) {
    if (policy == "always") rs.policy = RestartPolicy::kAlways;
    else if (policy == "on-failure") rs.policy = RestartPolicy::kOnFailure;
    else if (policy == "never") rs.policy = RestartPolicy::kNever;
    else r.Fail("policy", "expected one of always, on-failure, never, got " + Quote(policy));
  }
  bool delay_set = ReadDuration(r, errors, "delay", kMinRestartDelay, kMaxRestartDelay, &rs.delay_nanos);
  bool max_set = ReadDuration(r, errors, "max_delay", kMinRestartDelay, kMaxRestartDelay, &rs.max_delay_nanos);
  r.Int("attempts", 0, kMaxRestartAttempts, &rs.attempts);
  ReadDuration(r, errors, "interval", kMinRestartInterval, kMaxRestartInterval, &rs.interval_nanos);
  r.RejectUnknown();
  in->max_delay_set |= max_set;
  if (!in->max_delay_set) {
    // Unset max_delay is the default, raised to delay when delay is longer:
    // `"delay": "2m"` alone is not an error.
    rs.max_delay_nanos = std::max(Restart().max_delay_nanos, rs.delay_nanos);
  } else if (rs.max_delay_nanos < rs.delay_nanos) {
    if (max_set) {
      r.Fail("max_delay", "must be at least delay (" + FormatDuration(rs.delay_nanos) + "), got " +
                              FormatDuration(rs.max_delay_nanos));
    } else if (delay_set) {
      r.Fail("delay", "must be at most max_delay (" + FormatDuration(rs.max_delay_nanos) + "), got " +
                          FormatDuration(rs.delay_nanos));
    }
  }
}

void ReadLifecycle(ObjectReader& r, Errors* errors, Lifecycle* out) {
  const picojson::value* v = r.Get("lifecycle");
  if (!v) return;
  ObjectReader lr(*v, r.PathOf("lifecycle"), errors);
  if (!lr.ok()) return;
  std::string hook;
  bool hook_ok = false;
  if (Required(lr, "hook") && ReadString(lr, errors, "hook", &hook)) {
    hook_ok = true;
    if (hook == "prestart") out->hook = Hook::kPrestart;
    else if (hook == "poststart") out->hook = Hook::kPoststart;
    else if (hook == "main") out->hook = Hook::kMain;  // the canonical form spells out the default
    else if (hook == "poststop") {
      lr.Fail("hook", std::string("\"poststop\" is ") + kNotYet + " (only prestart and poststart are)");
      hook_ok = false;
    } else {
      lr.Fail("hook", "expected one of prestart, poststart, main, got " + Quote(hook));
      hook_ok = false;
    }
  }
  lr.Bool("sidecar", &out->sidecar);
  lr.RejectUnknown();
  if (hook_ok && out->hook == Hook::kMain && out->sidecar) {
    lr.Fail("sidecar", "only prestart and poststart tasks can be sidecars (a main task runs as long as the job)");
  }
}

void ReadResources(ObjectReader& r, Errors* errors, cgroup::Resources* out,
                   std::vector<devices::Request>* devices = nullptr) {
  if (const picojson::value* v = r.Get("resources")) {
    *out = ResourcesFromJson(*v, r.PathOf("resources"), errors, devices);
  }
}

TaskSpec ReadTask(const picojson::value& v, const std::string& path, const RestartInput& job_restart,
                  Errors* errors) {
  TaskSpec t;
  ObjectReader r(v, path, errors);
  if (!r.ok()) return t;
  if (Required(r, "name") && ReadString(r, errors, "name", &t.name)) {
    Status st = ValidateName(t.name, "task name");
    if (!st.ok()) r.Fail("name", st.error().message());
  }
  // Whether the node has this driver is decided at submission (job/manager),
  // against the drivers registered then.
  if (ReadString(r, errors, "driver", &t.driver)) {
    Status st = ValidateName(t.driver, "driver name");
    if (!st.ok()) r.Fail("driver", st.error().message());
  }
  if (const picojson::value* cfg = r.Get("config")) {
    if (!cfg->is<picojson::object>()) {
      r.Fail("config", "must be an object (the task's settings for its driver)");
    } else if (!cfg->get<picojson::object>().empty() && t.driver == "exec") {
      r.Fail("config", "the exec driver takes no config (its settings are the task's own fields)");
    } else if (!cfg->get<picojson::object>().empty()) {
      t.driver_config = cfg->serialize();
      if (t.driver_config.size() > kMaxDriverConfigBytes) {
        r.Fail("config", Format("is %zu bytes as JSON, more than the limit of %zu", t.driver_config.size(),
                                kMaxDriverConfigBytes));
      }
    }
  }
  // The exec driver runs the task's command; other drivers may take what
  // to run from their config (a Nomad driver's `config.command`, an
  // image's entrypoint) and say so when it is missing.
  if (t.driver == "exec" ? Required(r, "command") : r.Has("command")) {
    ReadString(r, errors, "command", &t.command, t.driver != "exec");
  }

  size_t before = errors->size();
  std::vector<std::string> args;
  r.StringList("args", &args);
  if (errors->size() == before) {
    if (args.size() > kMaxArgs) {
      r.Fail("args", Format("%zu arguments, more than the limit of %zu", args.size(), kMaxArgs));
    } else {
      bool good = true;
      for (size_t i = 0; i < args.size(); ++i) {
        good &= CheckString(Format("%s[%zu]", r.PathOf("args").c_str(), i), args[i], kMaxStringBytes, errors);
      }
      if (good) t.args = std::move(args);
    }
  }
  ReadEnv(r, errors, &t.env);
  ReadString(r, errors, "user", &t.user);
  ReadString(r, errors, "group", &t.group);
  std::string workdir;
  if (ReadString(r, errors, "workdir", &workdir)) {
    if (!workdir.empty() && workdir[0] != '/') r.Fail("workdir", "must be an absolute path, got " + Quote(workdir));
    else t.workdir = workdir;
  }
  ReadRlimits(r, errors, &t.rlimits);
  ReadLogs(r, errors, &t);
  std::string sig;
  if (ReadString(r, errors, "kill_signal", &sig)) {
    auto signo = proc::ParseSignal(sig);
    if (!signo.ok()) {
      r.Fail("kill_signal", signo.error().message());
    } else {
      // Canonical spelling, so "TERM", "15" and "SIGTERM" fingerprint alike.
      std::string name = proc::SignalName(*signo);
      t.kill_signal = name == "SIG?" ? std::to_string(*signo) : name;
    }
  }
  ReadDuration(r, errors, "kill_timeout", 0, kMaxKillTimeout, &t.kill_timeout_nanos);
  RestartInput restart = job_restart;
  if (const picojson::value* rv = r.Get("restart")) ReadRestart(*rv, r.PathOf("restart"), &restart, errors);
  t.restart = restart.restart;
  ReadLifecycle(r, errors, &t.lifecycle);
  cgroup::Resources resources;
  ReadResources(r, errors, &resources, &t.devices);
  t.resources = resources;
  if (const picojson::value* hv = r.Get("hooks")) {
    t.hooks = hooks::HooksFromJson(*hv, r.PathOf("hooks"), "job spec", errors);
    if (t.hooks.size() > kMaxTaskHooks) {
      r.Fail("hooks", Format("%zu hooks, more than the limit of %zu", t.hooks.size(), kMaxTaskHooks));
    }
  }
  ReadLabels(r, errors, "annotations", &t.annotations);
  if (const picojson::value* cv = r.Get("checks")) t.checks = ChecksFromJson(*cv, r.PathOf("checks"), errors);
  r.RejectUnknown();
  return t;
}

void ReadTasks(const picojson::value& v, const RestartInput& job_restart, Errors* errors, JobSpec* spec) {
  if (!v.is<picojson::array>()) {
    errors->push_back(std::string("tasks: expected an array of tasks, got ") + json::TypeName(v));
    return;
  }
  const auto& arr = v.get<picojson::array>();
  if (arr.empty()) {
    errors->push_back("tasks: must have at least one task");
    return;
  }
  if (arr.size() > kMaxTasks) {
    errors->push_back(Format("tasks: %zu tasks, more than the limit of %zu", arr.size(), kMaxTasks));
    return;
  }
  std::map<std::string, size_t> seen;
  bool has_main = false;
  for (size_t i = 0; i < arr.size(); ++i) {
    std::string path = Format("tasks[%zu]", i);
    TaskSpec t = ReadTask(arr[i], path, job_restart, errors);
    has_main |= t.lifecycle.hook == Hook::kMain;
    if (!t.name.empty()) {
      auto [it, inserted] = seen.emplace(t.name, i);
      if (!inserted) {
        errors->push_back(Format("%s.name: duplicate task name %s (also tasks[%zu])", path.c_str(),
                                 Quote(t.name).c_str(), it->second));
      }
    }
    spec->tasks.push_back(std::move(t));
  }
  if (!has_main) {
    errors->push_back(
        "tasks: no main task: every task has a prestart or poststart hook; a job needs at least one task "
        "without \"lifecycle\"");
  }
}

void ReadJob(ObjectReader& r, Errors* errors, JobSpec* spec) {
  if (Required(r, "id") && ReadString(r, errors, "id", &spec->id)) {
    Status st = ValidateName(spec->id, "job id");
    if (!st.ok()) r.Fail("id", st.error().message());
  }
  ReadLabels(r, errors, "labels", &spec->labels);
  ReadLabels(r, errors, "annotations", &spec->annotations);
  if (const picojson::value* v = r.Get("network")) spec->network = net::NetworkSpecFromJson(*v, "network", errors);
  if (r.Get("hooks")) {
    r.Fail("hooks", "hooks are set per task: move this list into each task that needs it (tasks[i].hooks; "
                    "docs/job-spec.md)");
  }
  ReadResources(r, errors, &spec->resources);
  if (r.Has("min_healthy_time")) {
    int64_t d = spec->min_healthy_time_nanos;
    size_t before = errors->size();
    r.Duration("min_healthy_time", &d);
    if (errors->size() == before && (d < 0 || d > kMaxMinHealthyTime)) {
      r.Fail("min_healthy_time", "must be between 0s and 1h");
    } else if (errors->size() == before) {
      spec->min_healthy_time_nanos = d;
    }
  }
  RestartInput job_restart;
  if (const picojson::value* v = r.Get("restart")) ReadRestart(*v, "restart", &job_restart, errors);
  const picojson::value* tasks = r.Get("tasks");
  if (!tasks) r.Fail("tasks", "required");
  r.RejectUnknown();
  if (tasks) ReadTasks(*tasks, job_restart, errors, spec);
  if (!spec->annotations.empty()) {
    auto shared = std::make_shared<const std::map<std::string, std::string>>(spec->annotations);
    for (TaskSpec& t : spec->tasks) t.job_annotations = shared;
  }
  if (spec->network.Isolated()) {
    auto shared = std::make_shared<const net::NetworkSpec>(spec->network);
    for (TaskSpec& t : spec->tasks) t.network = shared;
  }
}

}  // namespace

const char* RestartPolicyName(RestartPolicy p) {
  switch (p) {
    case RestartPolicy::kAlways: return "always";
    case RestartPolicy::kNever: return "never";
    case RestartPolicy::kOnFailure: break;
  }
  return "on-failure";
}

const char* HookName(Hook h) {
  switch (h) {
    case Hook::kPrestart: return "prestart";
    case Hook::kPoststart: return "poststart";
    case Hook::kMain: break;
  }
  return "main";
}

Status ValidateName(const std::string& name, const char* what) {
  if (name.empty()) return Error(Code::kInvalidArgument, std::string(what) + " must not be empty");
  if (name.size() > kMaxIdLength) {
    return Error(Code::kInvalidArgument,
                 Format("%s is %zu bytes, more than the limit of %zu", what, name.size(), kMaxIdLength));
  }
  if (!std::all_of(name.begin(), name.end(), IsWordChar)) {
    return Error(Code::kInvalidArgument,
                 Format("%s %s may only contain letters, digits, '-' and '_'", what, Quote(name).c_str()));
  }
  if (name[0] == '-' || name[0] == '_') {
    return Error(Code::kInvalidArgument,
                 Format("%s %s must start with a letter or digit", what, Quote(name).c_str()));
  }
  return OkStatus();
}

Result<JobSpec> ParseJobSpec(const std::string& text, const std::string& source) {
  std::string prefix = source.empty() ? "" : source + ": ";
  // An empty file is common (an editor truncates before writing); picojson
  // would call it a syntax error "near: " nothing.
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return Error(Code::kInvalidArgument, prefix + "document is empty");
  }
  auto doc = json::Parse(text, json::ParseLimits{kMaxSpecBytes, kMaxSpecDepth, true});
  if (!doc.ok()) return Error(Code::kInvalidArgument, prefix + doc.error().message());
  return JobSpecFromJson(*doc, source);
}

Result<JobSpec> JobSpecFromJson(const picojson::value& doc, const std::string& source) {
  JobSpec spec;
  Errors errors;
  ObjectReader r(doc, "", &errors);
  if (r.ok()) ReadJob(r, &errors, &spec);
  if (errors.empty()) return spec;
  if (!source.empty()) {
    for (std::string& e : errors) e = source + ": " + e;
  }
  return Error(Code::kInvalidArgument, json::JoinErrors(errors));
}

}  // namespace outpost::job
