#include "agent/config.h"

#include "driver/nomad/plugins.h"

#include "base/json.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost {

namespace {

constexpr size_t kMaxConfigBytes = 1 << 20;

// Checks a path key and cleans it (CleanPath). False if it is unusable.
bool CheckAbsolute(json::ObjectReader* r, const char* key, std::string* value, json::Errors* errors) {
  if (!r->Has(key)) return true;
  const char* why = nullptr;
  if (value->empty() || (*value)[0] != '/') {
    why = "must be an absolute path";
  } else if (value->find('\0') != std::string::npos) {
    errors->push_back(Format("%s: must not contain NUL bytes", key));
    return false;
  } else if (!CleanPath(value)) {
    why = "must not contain \"..\"";
  }
  if (why) errors->push_back(Format("%s: %s, got \"%s\"", key, why, value->c_str()));
  return why == nullptr;
}

// The "nri" object (docs/nri.md), its errors named by path ("nri.socket").
void ParseNri(const picojson::value& v, Config::Nri* n, json::Errors* errors) {
  json::ObjectReader r(v, "nri", errors);
  if (!r.ok()) return;
  n->enable = true;
  r.Bool("enable", &n->enable);
  r.String("socket", &n->socket);
  r.String("plugin_dir", &n->plugin_dir);
  r.String("plugin_config_dir", &n->plugin_config_dir);
  r.Duration("registration_timeout", &n->registration_timeout_nanos);
  r.Duration("request_timeout", &n->request_timeout_nanos);
  r.StringList("required_plugins", &n->required_plugins);
  if (const picojson::value* plugins = r.Get("plugins")) {
    if (!plugins->is<picojson::object>()) {
      errors->push_back("nri.plugins: must be an object of plugin name -> settings");
    } else {
      for (const auto& [name, pv] : plugins->get<picojson::object>()) {
        Config::Nri::Plugin p;
        json::ObjectReader pr(pv, "nri.plugins." + name, errors);
        if (!pr.ok()) continue;
        pr.Duration("request_timeout", &p.request_timeout_nanos);
        std::string policy = "ignore";
        pr.String("fail_policy", &policy);
        if (policy == "fail" || policy == "ignore") {
          p.fail = policy == "fail";
        } else {
          pr.Fail("fail_policy", "expected \"ignore\" (a plugin that is closed or times out is skipped, as "
                                 "upstream) or \"fail\" (the task's start fails), got \"" + policy + "\"");
        }
        if (pr.Has("request_timeout") && (p.request_timeout_nanos < 1000000LL ||
                                          p.request_timeout_nanos > 3600 * 1000000000LL)) {
          pr.Fail("request_timeout", "must be between 1ms and 1h");
        }
        pr.RejectUnknown();
        n->plugins[name] = p;
      }
    }
  }
  r.RejectUnknown();
  for (const char* key : {"socket", "plugin_dir", "plugin_config_dir"}) {
    const std::string& value = std::string(key) == "socket" ? n->socket
                               : std::string(key) == "plugin_dir" ? n->plugin_dir : n->plugin_config_dir;
    if (!value.empty() && value[0] != '/') {
      errors->push_back(Format("nri.%s: must be an absolute path (or \"\" for none), got \"%s\"", key,
                               value.c_str()));
    }
  }
  if (n->socket.size() > 107) errors->push_back("nri.socket: longer than the 107 bytes a unix socket allows");
  if (n->registration_timeout_nanos < 1000000LL || n->registration_timeout_nanos > 3600 * 1000000000LL) {
    errors->push_back("nri.registration_timeout: must be between 1ms and 1h");
  }
  if (n->request_timeout_nanos < 1000000LL || n->request_timeout_nanos > 3600 * 1000000000LL) {
    errors->push_back("nri.request_timeout: must be between 1ms and 1h");
  }
}

}  // namespace

Result<Config> ParseConfig(const std::string& text, const std::string& source) {
  auto doc = json::Parse(text, json::ParseLimits{kMaxConfigBytes, 16});
  if (!doc.ok()) return Error(Code::kInvalidArgument, "config " + source + ": " + doc.error().message());

  Config c;
  c.path = source;
  // Refusing it would stop an agent that booted with the file before; the
  // value used is the one picojson kept, the last.
  std::string twice = json::FindDuplicateMember(text);
  if (!twice.empty()) c.warnings.push_back("config " + source + ": " + twice + "; the last is used");
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  r.String("state_dir", &c.state_dir, false);
  r.String("runtime_dir", &c.runtime_dir, false);
  r.String("api_socket", &c.api_socket, false);
  std::string level;
  r.String("log_level", &level);
  if (r.Has("log_level") && !level.empty()) {
    auto l = log::ParseLevel(level);
    if (l.ok()) c.log_level = *l;
    else r.Fail("log_level", l.error().message());
  }
  r.String("log_file", &c.log_file);
  r.IntList("api_allowed_uids", 0, 0xfffffffe, &c.api_allowed_uids);
  r.Int("api_max_connections", 1, 65536, &c.api_max_connections);
  r.Int("api_max_connections_per_uid", 1, 65536, &c.api_max_connections_per_uid);
  r.Duration("api_idle_timeout", &c.api_idle_timeout_nanos);
  r.Duration("api_frame_timeout", &c.api_frame_timeout_nanos);
  r.Size("api_max_write_queue", &c.api_max_write_queue);
  r.Size("api_max_read_buffers", &c.api_max_read_buffers);
  r.String("jobs_dir", &c.jobs_dir);
  r.Int("max_jobs", 1, 10000, &c.max_jobs);
  r.String("cgroup_root", &c.cgroup_root, false);
  r.Bool("cgroup_allow_without_limits", &c.cgroup_allow_without_limits);
  std::string uids;
  r.String("dynamic_users", &uids, false);
  if (r.Has("dynamic_users")) {
    // "FIRST-LAST"
    size_t dash = uids.find('-');
    auto first = ParseInt(uids.substr(0, dash), 1, 2147483646);
    auto last = dash == std::string::npos ? first : ParseInt(uids.substr(dash + 1), 1, 2147483646);
    if (dash == std::string::npos || !first.ok() || !last.ok() || *first > *last) {
      r.Fail("dynamic_users", "expected a uid range like \"80000-89999\" (1-2147483646), got \"" + uids + "\"");
    } else {
      c.dynamic_uid_first = *first;
      c.dynamic_uid_last = *last;
    }
  }
  r.String("plugins_dir", &c.plugins_dir, false);
  r.Duration("plugin_grace_period", &c.plugin_grace_period_nanos);
  r.Duration("driver_call_timeout", &c.driver_call_timeout_nanos);
  r.Duration("driver_start_timeout", &c.driver_start_timeout_nanos);
  r.String("kubelet_plugins_dir", &c.kubelet_plugins_dir);
  r.String("device_plugins_dir", &c.device_plugins_dir);
  r.String("nomad_plugin_dir", &c.nomad_plugin_dir);
  if (const picojson::value* v = r.Get("nomad_plugins")) {
    auto stanzas = driver::nomad::ParseStanzas(*v);
    if (stanzas.ok()) {
      c.nomad_plugins = std::move(*stanzas);
    } else {
      for (const std::string& line : Split(stanzas.error().message(), '\n')) errors.push_back(line);
    }
  }
  r.Duration("heartbeat_timeout", &c.heartbeat_timeout_nanos);
  r.String("watchdog_device", &c.watchdog_device);
  r.StringList("hooks_dirs", &c.hooks_dirs);
  r.String("hook_path", &c.hook_path);
  r.Duration("hook_timeout", &c.hook_timeout_nanos);
  Config::Network& n = c.network;
  r.String("netns_dir", &n.netns_dir, false);
  r.String("cni_config_dir", &n.cni_config_dir, false);
  r.StringList("cni_path", &n.cni_path);
  r.String("cni_cache_dir", &n.cni_cache_dir);
  r.Duration("cni_timeout", &n.cni_timeout_nanos);
  r.String("bridge_network_name", &n.bridge_name, false);
  r.String("bridge_network_bridge", &n.bridge_interface, false);
  r.String("bridge_network_subnet", &n.bridge_subnet, false);
  r.String("bridge_network_admin_chain", &n.bridge_admin_chain, false);
  std::string poststart;
  r.String("poststart_failure", &poststart);
  if (r.Has("poststart_failure")) {
    if (poststart == "stop" || poststart == "warn") {
      c.poststart_failure_stops = poststart == "stop";
    } else {
      r.Fail("poststart_failure", "expected \"stop\" (runtime-spec 1.3: the task is stopped) or \"warn\" (before "
                                  "1.3: logged, the task keeps running), got \"" + poststart + "\"");
    }
  }
  if (const picojson::value* v = r.Get("nri")) ParseNri(*v, &c.nri, &errors);
  r.RejectUnknown();

  bool paths_ok = CheckAbsolute(&r, "state_dir", &c.state_dir, &errors);
  paths_ok &= CheckAbsolute(&r, "runtime_dir", &c.runtime_dir, &errors);
  paths_ok &= CheckAbsolute(&r, "api_socket", &c.api_socket, &errors);
  if (!c.log_file.empty()) paths_ok &= CheckAbsolute(&r, "log_file", &c.log_file, &errors);
  if (!c.jobs_dir.empty()) paths_ok &= CheckAbsolute(&r, "jobs_dir", &c.jobs_dir, &errors);
  if (r.Has("plugins_dir")) paths_ok &= CheckAbsolute(&r, "plugins_dir", &c.plugins_dir, &errors);
  if (!c.kubelet_plugins_dir.empty()) {
    paths_ok &= CheckAbsolute(&r, "kubelet_plugins_dir", &c.kubelet_plugins_dir, &errors);
  }
  if (!c.device_plugins_dir.empty()) {
    paths_ok &= CheckAbsolute(&r, "device_plugins_dir", &c.device_plugins_dir, &errors);
  }
  if (!c.nomad_plugin_dir.empty()) CheckAbsolute(&r, "nomad_plugin_dir", &c.nomad_plugin_dir, &errors);
  CheckAbsolute(&r, "cgroup_root", &c.cgroup_root, &errors);
  // Conflicts between paths mean something only once every path is usable.
  if (paths_ok) CheckPathConflicts(c, &errors);
  for (int64_t uid : c.api_allowed_uids) {
    if (uid >= c.dynamic_uid_first && uid <= c.dynamic_uid_last) {
      errors.push_back(Format("api_allowed_uids: uid %lld is in dynamic_users %lld-%lld: a task running as that "
                              "dynamic user could drive the agent's API",
                              static_cast<long long>(uid), static_cast<long long>(c.dynamic_uid_first),
                              static_cast<long long>(c.dynamic_uid_last)));
    }
  }
  if (!c.watchdog_device.empty()) CheckAbsolute(&r, "watchdog_device", &c.watchdog_device, &errors);
  for (size_t i = 0; i < c.hooks_dirs.size(); ++i) {
    if (c.hooks_dirs[i].empty() || c.hooks_dirs[i][0] != '/') {
      errors.push_back(Format("hooks_dirs[%zu]: must be an absolute path, got \"%s\"", i, c.hooks_dirs[i].c_str()));
    }
  }
  if (!c.hook_path.empty()) CheckAbsolute(&r, "hook_path", &c.hook_path, &errors);
  if (c.hook_timeout_nanos < 1000000000LL || c.hook_timeout_nanos > 3600 * 1000000000LL ||
      c.hook_timeout_nanos % 1000000000LL != 0) {
    errors.push_back("hook_timeout: must be whole seconds between 1s and 1h");
  }
  CheckAbsolute(&r, "netns_dir", &n.netns_dir, &errors);
  CheckAbsolute(&r, "cni_config_dir", &n.cni_config_dir, &errors);
  if (!n.cni_cache_dir.empty()) CheckAbsolute(&r, "cni_cache_dir", &n.cni_cache_dir, &errors);
  for (size_t i = 0; i < n.cni_path.size(); ++i) {
    if (n.cni_path[i].empty() || n.cni_path[i][0] != '/' || n.cni_path[i].find(':') != std::string::npos) {
      errors.push_back(Format("cni_path[%zu]: must be an absolute path without ':', got \"%s\"", i,
                              n.cni_path[i].c_str()));
    }
  }
  if (n.cni_timeout_nanos < 1000000000LL || n.cni_timeout_nanos > 3600 * 1000000000LL) {
    errors.push_back("cni_timeout: must be between 1s and 1h");
  }
  if (r.Has("heartbeat_timeout") && c.heartbeat_timeout_nanos != 0 && c.heartbeat_timeout_nanos < 1000000000LL) {
    errors.push_back("heartbeat_timeout: must be \"0s\" (off) or at least 1s");
  }
  if (c.ApiSocket().size() > 107) {
    errors.push_back("api_socket: path \"" + c.ApiSocket() + "\" is longer than the 107 bytes a unix socket allows");
  }
  if (r.Has("plugin_grace_period") && c.plugin_grace_period_nanos > 24 * 3600 * 1000000000LL) {
    errors.push_back("plugin_grace_period: must be at most 24h");
  }
  if (c.driver_call_timeout_nanos < 1000000000LL || c.driver_call_timeout_nanos > 600 * 1000000000LL) {
    errors.push_back("driver_call_timeout: must be between 1s and 10m");
  }
  if (c.driver_start_timeout_nanos < 1000000000LL || c.driver_start_timeout_nanos > 3600 * 1000000000LL) {
    errors.push_back("driver_start_timeout: must be between 1s and 1h");
  }
  if (c.PluginsDir().size() > 90) {
    errors.push_back("plugins_dir: path \"" + c.PluginsDir() +
                     "\" is longer than 90 bytes, too long for the plugins' socket paths (107 bytes at most)");
  }
  // Plugins put their sockets below these (kubelet's own layout).
  for (const auto& [key, dir] : {std::pair<const char*, const std::string*>{"kubelet_plugins_dir", &c.kubelet_plugins_dir},
                                 {"device_plugins_dir", &c.device_plugins_dir}}) {
    if (dir->size() > 90) {
      errors.push_back(Format("%s: path \"%s\" is longer than 90 bytes, too long for the plugins' socket paths "
                              "(107 bytes at most)",
                              key, dir->c_str()));
    }
  }
  if (r.Has("api_idle_timeout") && c.api_idle_timeout_nanos < 1000000000LL) {
    errors.push_back("api_idle_timeout: must be at least 1s");
  }
  if (r.Has("api_frame_timeout") && c.api_frame_timeout_nanos < 100000000LL) {
    errors.push_back("api_frame_timeout: must be at least 100ms");
  }
  if (r.Has("api_max_write_queue") && (c.api_max_write_queue < (64u << 10) || c.api_max_write_queue > (256u << 20))) {
    errors.push_back("api_max_write_queue: must be between 64KiB and 256MiB");
  }
  if (r.Has("api_max_read_buffers") && (c.api_max_read_buffers < (8u << 20) || c.api_max_read_buffers > (1u << 30))) {
    errors.push_back("api_max_read_buffers: must be between 8MiB and 1GiB (a request frame may be 4 MiB)");
  }
  if (!errors.empty()) {
    json::Errors prefixed;
    for (const std::string& e : errors) prefixed.push_back("config " + source + ": " + e);
    return Error(Code::kInvalidArgument, json::JoinErrors(prefixed));
  }
  return c;
}

Result<Config> LoadConfig(const std::string& path) {
  auto text = sys::ReadFile(path, kMaxConfigBytes);
  if (!text.ok()) return Error(text.error().code(), "config " + path + ": " + text.error().message());
  return ParseConfig(*text, path);
}

bool ReloadChangesRestartOnlyKeys(const Config& a, const Config& b, std::string* which) {
  std::string keys;
  auto check = [&](bool changed, const char* key) {
    if (!changed) return;
    if (!keys.empty()) keys += ", ";
    keys += key;
  };
  check(a.state_dir != b.state_dir, "state_dir");
  check(a.runtime_dir != b.runtime_dir, "runtime_dir");
  check(a.ApiSocket() != b.ApiSocket(), "api_socket");
  check(a.jobs_dir != b.jobs_dir, "jobs_dir");
  check(a.plugins_dir != b.plugins_dir, "plugins_dir");
  check(a.kubelet_plugins_dir != b.kubelet_plugins_dir, "kubelet_plugins_dir");
  check(a.device_plugins_dir != b.device_plugins_dir, "device_plugins_dir");
  check(a.nomad_plugin_dir != b.nomad_plugin_dir, "nomad_plugin_dir");
  check(a.nomad_plugins != b.nomad_plugins, "nomad_plugins");
  check(a.plugin_grace_period_nanos != b.plugin_grace_period_nanos, "plugin_grace_period");
  check(a.driver_call_timeout_nanos != b.driver_call_timeout_nanos, "driver_call_timeout");
  check(a.driver_start_timeout_nanos != b.driver_start_timeout_nanos, "driver_start_timeout");
  check(a.cgroup_root != b.cgroup_root, "cgroup_root");
  check(a.watchdog_device != b.watchdog_device, "watchdog_device");
  check(a.hooks_dirs != b.hooks_dirs, "hooks_dirs");
  check(a.hook_path != b.hook_path, "hook_path");
  check(a.hook_timeout_nanos != b.hook_timeout_nanos, "hook_timeout");
  check(a.poststart_failure_stops != b.poststart_failure_stops, "poststart_failure");
  check(!(a.network == b.network), "netns_dir, cni_* and bridge_network_*");
  check(!(a.nri == b.nri), "nri");
  check(a.dynamic_uid_first != b.dynamic_uid_first || a.dynamic_uid_last != b.dynamic_uid_last, "dynamic_users");
  *which = keys;
  return !keys.empty();
}

}  // namespace outpost
