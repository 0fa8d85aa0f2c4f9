// The canonical form of a job spec (what is persisted and shown by
// `inspect --json`) and the fingerprints derived from it.
#include <picojson.h>

#include "base/json.h"
#include "base/strings.h"
#include "job/spec.h"

namespace outpost::job {

namespace {

// Exact text for a duration: FormatDuration's short form when it reads back
// to the same value ("1m30s", "1.5s"), else whole nanoseconds.
std::string CanonicalDuration(int64_t ns) {
  std::string s = FormatDuration(ns);
  auto back = ParseDuration(s);
  if (back.ok() && *back == ns) return s;
  return Format("%lldns", static_cast<long long>(ns));
}

picojson::value Int(int64_t n) { return picojson::value(n); }

picojson::value RlimitValueJson(uint64_t v) {
  if (v == kRlimitUnlimited) return picojson::value("unlimited");
  return Int(static_cast<int64_t>(v));
}

picojson::value StringMap(const std::map<std::string, std::string>& m) {
  picojson::object o;
  for (const auto& [k, v] : m) o[k] = picojson::value(v);
  return picojson::value(std::move(o));
}

// FNV-1a 64 of the serialisation: picojson writes object keys in sorted
// order, so the text depends only on the values.
std::string Fnv64Hex(const picojson::value& v) {
  std::string text = v.serialize();
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return Format("%016llx", static_cast<unsigned long long>(h));
}

}  // namespace

picojson::value ChecksToJson(const std::vector<CheckSpec>& checks) {
  picojson::array a;
  for (const CheckSpec& c : checks) {
    picojson::object o;
    o["type"] = picojson::value(CheckTypeName(c.type));
    if (!c.name.empty()) o["name"] = picojson::value(c.name);
    if (c.type == CheckType::kExec) {
      picojson::array cmd;
      for (const std::string& w : c.command) cmd.emplace_back(w);
      o["command"] = picojson::value(std::move(cmd));
    } else {
      o["port"] = Int(c.port);
      o["address"] = picojson::value(c.address);
    }
    if (c.type == CheckType::kHttp) o["path"] = picojson::value(c.path);
    o["interval"] = picojson::value(CanonicalDuration(c.interval_nanos));
    o["timeout"] = picojson::value(CanonicalDuration(c.timeout_nanos));
    o["grace"] = picojson::value(CanonicalDuration(c.grace_nanos));
    o["failure_threshold"] = Int(c.failure_threshold);
    o["success_threshold"] = Int(c.success_threshold);
    o["on_unhealthy"] = picojson::value(OnUnhealthyName(c.on_unhealthy));
    a.emplace_back(std::move(o));
  }
  return picojson::value(std::move(a));
}

picojson::value TaskSpecToJson(const TaskSpec& t) {
  picojson::object o;
  o["name"] = picojson::value(t.name);
  o["driver"] = picojson::value(t.driver);
  if (!t.driver_config.empty()) {
    auto cfg = json::Parse(t.driver_config);
    if (cfg.ok()) o["config"] = std::move(*cfg);
  }
  o["command"] = picojson::value(t.command);
  picojson::array args;
  for (const std::string& a : t.args) args.emplace_back(a);
  o["args"] = picojson::value(std::move(args));
  o["env"] = StringMap(t.env);
  o["user"] = picojson::value(t.user);
  o["group"] = picojson::value(t.group);
  o["workdir"] = picojson::value(t.workdir);
  picojson::object rlimits;
  for (const proc::Rlimit& l : t.rlimits) {
    picojson::object lim;
    lim["soft"] = RlimitValueJson(l.soft);
    lim["hard"] = RlimitValueJson(l.hard);
    rlimits[l.name] = picojson::value(std::move(lim));
  }
  o["rlimits"] = picojson::value(std::move(rlimits));
  picojson::object logs;
  logs["max_files"] = Int(t.log_max_files);
  logs["max_file_size"] = Int(static_cast<int64_t>(t.log_max_file_size));
  o["logs"] = picojson::value(std::move(logs));
  o["kill_signal"] = picojson::value(t.kill_signal);
  o["kill_timeout"] = picojson::value(CanonicalDuration(t.kill_timeout_nanos));
  picojson::object restart;
  restart["policy"] = picojson::value(RestartPolicyName(t.restart.policy));
  restart["delay"] = picojson::value(CanonicalDuration(t.restart.delay_nanos));
  restart["max_delay"] = picojson::value(CanonicalDuration(t.restart.max_delay_nanos));
  restart["attempts"] = Int(t.restart.attempts);
  restart["interval"] = picojson::value(CanonicalDuration(t.restart.interval_nanos));
  o["restart"] = picojson::value(std::move(restart));
  picojson::object lifecycle;
  lifecycle["hook"] = picojson::value(HookName(t.lifecycle.hook));
  lifecycle["sidecar"] = picojson::value(t.lifecycle.sidecar);
  o["lifecycle"] = picojson::value(std::move(lifecycle));
  o["resources"] = ResourcesToJson(t.resources);
  if (!t.devices.empty()) o["resources"].get<picojson::object>()["devices"] = DevicesToJson(t.devices);
  // Left out when empty, so tasks without them keep their fingerprint.
  if (!t.hooks.empty()) o["hooks"] = hooks::HooksToJson(t.hooks);
  if (!t.annotations.empty()) o["annotations"] = StringMap(t.annotations);
  if (!t.checks.empty()) o["checks"] = ChecksToJson(t.checks);
  return picojson::value(std::move(o));
}

picojson::value JobSpecToJson(const JobSpec& spec) {
  picojson::object o;
  o["id"] = picojson::value(spec.id);
  o["labels"] = StringMap(spec.labels);
  o["annotations"] = StringMap(spec.annotations);
  // Left out when unset, so the canonical form of jobs without job-level
  // limits is what it was before they existed.
  if (spec.resources.Any()) o["resources"] = ResourcesToJson(spec.resources);
  if (spec.network.Isolated()) o["network"] = net::NetworkSpecToJson(spec.network);
  o["min_healthy_time"] = picojson::value(CanonicalDuration(spec.min_healthy_time_nanos));
  picojson::array tasks;
  for (const TaskSpec& t : spec.tasks) tasks.push_back(TaskSpecToJson(t));
  o["tasks"] = picojson::value(std::move(tasks));
  return picojson::value(std::move(o));
}

std::string TaskFingerprint(const TaskSpec& spec) {
  // The canonical encoding with `resources` as if no limit were set: limits
  // change live, and a task without limits keeps the fingerprint it had
  // before they existed (no restart of every task when the agent is
  // upgraded).
  picojson::value v = TaskSpecToJson(spec);
  // Device requests count: devices are given at a start (their env,
  // mounts, nodes), so a changed request restarts the task. (Tasks without
  // them keep their fingerprint.)
  picojson::object kept;
  if (!spec.devices.empty()) kept["devices"] = DevicesToJson(spec.devices);
  v.get<picojson::object>()["resources"] = picojson::value(std::move(kept));
  // The job's network is the task's too (left out for "host", so tasks of
  // such jobs keep the fingerprint they had before networks existed).
  if (spec.network) v.get<picojson::object>()["network"] = net::NetworkSpecToJson(*spec.network);
  // "attempts": 0 (no limit, the default) hashes as 5, the default before
  // restarts were unlimited: a task whose jobs.d file sets no limit keeps
  // the fingerprint it had, and an agent upgrade restarts nothing. The
  // policy itself is applied by the supervisor from the current spec.
  if (spec.restart.attempts == 0) {
    v.get<picojson::object>()["restart"].get<picojson::object>()["attempts"] = picojson::value(int64_t{5});
  }
  return Fnv64Hex(v);
}

std::string ResourcesFingerprint(const cgroup::Resources& r) { return Fnv64Hex(ResourcesToJson(r)); }

}  // namespace outpost::job
