#include "spec.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <set>

namespace oci_driver {

namespace {

using picojson::array;
using picojson::object;
using picojson::value;

const char* const kKnownCaps[] = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID",
    "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"};

value Strings(const std::vector<std::string>& v) {
  array a;
  for (const std::string& s : v) a.emplace_back(s);
  return value(std::move(a));
}

value Mount(const std::string& dest, const std::string& type, const std::string& source,
            const std::vector<std::string>& options) {
  object o;
  o["destination"] = value(dest);
  o["type"] = value(type);
  o["source"] = value(source);
  if (!options.empty()) o["options"] = Strings(options);
  return value(std::move(o));
}

// What runc's `spec` gives every container.
array StandardMounts() {
  array a;
  a.push_back(Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}));
  a.push_back(Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}));
  a.push_back(Mount("/dev/pts", "devpts", "devpts", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}));
  a.push_back(Mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}));
  a.push_back(Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}));
  a.push_back(Mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}));
  a.push_back(Mount("/sys/fs/cgroup", "cgroup", "cgroup", {"nosuid", "noexec", "nodev", "relatime", "ro"}));
  return a;
}

bool Absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

std::string CapName(std::string c) {
  for (char& ch : c) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
  return c.compare(0, 4, "CAP_") == 0 ? c : "CAP_" + c;
}

// Reads a list of strings at key; problems name config.<key>[i].
bool StringList(const value& v, const std::string& key, std::vector<std::string>* out,
                std::vector<std::string>* problems) {
  if (!v.is<array>()) {
    problems->push_back("config." + key + ": must be a list of strings");
    return false;
  }
  const array& a = v.get<array>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is<std::string>()) {
      problems->push_back("config." + key + "[" + std::to_string(i) + "]: must be a string");
      return false;
    }
    out->push_back(a[i].get<std::string>());
  }
  return true;
}

void ParseMounts(const value& v, TaskOptions* o, std::vector<std::string>* problems) {
  if (!v.is<array>()) return problems->push_back("config.mounts: must be a list of objects");
  const array& a = v.get<array>();
  for (size_t i = 0; i < a.size(); ++i) {
    std::string at = "config.mounts[" + std::to_string(i) + "]";
    if (!a[i].is<object>()) {
      problems->push_back(at + ": must be an object with source, destination, type, options");
      continue;
    }
    MountConfig m;
    bool ok = true;
    for (const auto& [k, f] : a[i].get<object>()) {
      if (k == "source" || k == "destination" || k == "type") {
        if (!f.is<std::string>()) {
          problems->push_back(at + "." + k + ": must be a string");
          ok = false;
          continue;
        }
        (k == "source" ? m.source : k == "destination" ? m.destination : m.type) = f.get<std::string>();
      } else if (k == "options") {
        ok = StringList(f, "mounts[" + std::to_string(i) + "].options", &m.options, problems) && ok;
      } else {
        problems->push_back(at + "." + k + ": unknown field (a mount takes source, destination, type, options)");
        ok = false;
      }
    }
    if (m.type.empty()) m.type = "bind";
    if (!Absolute(m.destination)) {
      problems->push_back(at + ".destination: must be an absolute path, got \"" + m.destination + "\"");
      ok = false;
    }
    if (m.type == "bind") {
      struct stat st;
      if (!Absolute(m.source)) {
        problems->push_back(at + ".source: a bind mount needs an absolute path, got \"" + m.source + "\"");
        ok = false;
      } else if (::stat(m.source.c_str(), &st) != 0) {
        problems->push_back(at + ".source: " + m.source + " does not exist on this node");
        ok = false;
      }
      if (std::find(m.options.begin(), m.options.end(), "bind") == m.options.end() &&
          std::find(m.options.begin(), m.options.end(), "rbind") == m.options.end()) {
        m.options.insert(m.options.begin(), {"rbind", "rprivate"});
      }
    } else if (m.source.empty()) {
      m.source = m.type;
    }
    if (ok) o->mounts.push_back(std::move(m));
  }
}

void ParseDevices(const value& v, TaskOptions* o, std::vector<std::string>* problems) {
  std::vector<std::string> list;
  if (!StringList(v, "devices", &list, problems)) return;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string at = "config.devices[" + std::to_string(i) + "]";
    DeviceConfig d;
    size_t colon = list[i].find(':');
    d.host_path = list[i].substr(0, colon);
    d.container_path = colon == std::string::npos ? d.host_path : list[i].substr(colon + 1);
    struct stat st;
    if (!Absolute(d.host_path) || !Absolute(d.container_path)) {
      problems->push_back(at + ": \"" + list[i] + "\" is not HOST_PATH or HOST_PATH:CONTAINER_PATH (absolute paths)");
    } else if (::stat(d.host_path.c_str(), &st) != 0) {
      problems->push_back(at + ": " + d.host_path + " does not exist on this node");
    } else if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
      problems->push_back(at + ": " + d.host_path + " is not a character or block device");
    } else {
      o->devices.push_back(d);
    }
  }
}

// The device node of a configured device, as the node has it.
value DeviceNode(const DeviceConfig& d, object* rule) {
  struct stat st {};
  (void)::stat(d.host_path.c_str(), &st);  // checked when parsed
  std::string type = S_ISBLK(st.st_mode) ? "b" : "c";
  object o;
  o["path"] = value(d.container_path);
  o["type"] = value(type);
  o["major"] = value(static_cast<int64_t>(major(st.st_rdev)));
  o["minor"] = value(static_cast<int64_t>(minor(st.st_rdev)));
  o["fileMode"] = value(static_cast<int64_t>(st.st_mode & 07777));
  o["uid"] = value(static_cast<int64_t>(st.st_uid));
  o["gid"] = value(static_cast<int64_t>(st.st_gid));
  (*rule)["allow"] = value(true);
  (*rule)["type"] = value(type);
  (*rule)["major"] = o["major"];
  (*rule)["minor"] = o["minor"];
  (*rule)["access"] = value("rwm");
  return value(std::move(o));
}

value DeviceRule(bool allow, const char* type, int64_t major, int64_t minor, const char* access) {
  object o;
  o["allow"] = value(allow);
  if (type) o["type"] = value(type);
  if (major >= 0) o["major"] = value(major);
  if (minor >= 0) o["minor"] = value(minor);
  o["access"] = value(access);
  return value(std::move(o));
}

// Deny all, then what runc allows every container: mknod of any, the
// standard character devices, ptys.
array DefaultDeviceRules() {
  array a;
  a.push_back(DeviceRule(false, nullptr, -1, -1, "rwm"));
  a.push_back(DeviceRule(true, "c", -1, -1, "m"));
  a.push_back(DeviceRule(true, "b", -1, -1, "m"));
  const int64_t chars[][2] = {{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 1}, {5, 2}, {10, 200}};
  for (const auto& c : chars) a.push_back(DeviceRule(true, "c", c[0], c[1], "rwm"));
  a.push_back(DeviceRule(true, "c", 136, -1, "rwm"));
  return a;
}

object& ObjectAt(object& parent, const char* key) {
  value& v = parent[key];
  if (!v.is<object>()) v = value(object());
  return v.get<object>();
}

array& ArrayAt(object& parent, const char* key) {
  value& v = parent[key];
  if (!v.is<array>()) v = value(array());
  return v.get<array>();
}

}  // namespace

std::string ParseJson(picojson::value* out, const std::string& text) {
  try {
    return picojson::parse(*out, text);
  } catch (const std::exception& e) {
    *out = picojson::value();
    return std::string("bad JSON: ") + e.what();
  }
}

bool ParseState(const std::string& json, std::string* status, int64_t* pid) {
  status->clear();
  *pid = 0;
  value state;
  if (!ParseJson(&state, json).empty() || !state.is<object>()) return false;
  if (state.get("status").is<std::string>()) *status = state.get("status").get<std::string>();
  if (state.get("pid").is<int64_t>()) *pid = state.get("pid").get<int64_t>();
  return !status->empty();
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

std::vector<outpost::plugin_sdk::ConfigField> Schema() {
  using outpost::plugin_sdk::ConfigField;
  ConfigField mounts{"mounts", "list", false, "more mounts: objects with source, destination, type (bind), options"};
  mounts.fields = {
      {"source", "string", false, "on the node (a bind mount's must exist)"},
      {"destination", "string", true, "in the container", {}, "absolute_path"},
      {"type", "string", false, "bind (default), tmpfs, ..."},
      {"options", "list", false, "mount options, e.g. ro"},
  };
  ConfigField rootfs{"rootfs", "string", true, "the container's root file system: an absolute path to a directory"};
  rootfs.format = "absolute_path";
  ConfigField devices{"devices", "list", false, "node devices to give: \"/dev/x\" or \"/dev/x:/dev/y\""};
  devices.format = "absolute_path";
  return {
      rootfs,
      {"readonly_rootfs", "bool", false, "mount the root file system read-only (default false)"},
      {"args", "list", false, "the process to run (default: the task's command and args)"},
      {"hostname", "string", false, "the container's hostname (default: the task's, else its name)"},
      mounts,
      devices,
      {"capabilities", "list", false, "the capabilities the process keeps (default: runc's set)"},
      {"no_new_privileges", "bool", false, "set no_new_privs (default true)"},
      {"runtime", "string", false, "crun, runc or an absolute path (default: the driver's)"},
  };
}

const std::vector<std::string>& DefaultCapabilities() {
  static const std::vector<std::string> caps = {
      "CAP_CHOWN",  "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",      "CAP_MKNOD",
      "CAP_NET_RAW", "CAP_SETGID",      "CAP_SETUID",           "CAP_SETFCAP",     "CAP_SETPCAP",
      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"};
  return caps;
}

bool ParseOptions(const std::string& config_json, TaskOptions* o, std::vector<std::string>* problems) {
  size_t before = problems->size();
  value doc;
  std::string err = config_json.empty() ? "" : ParseJson(&doc, config_json);
  if (!err.empty() || (!config_json.empty() && !doc.is<object>())) {
    problems->push_back("config: not a JSON object");
    return false;
  }
  object empty;
  const object& cfg = doc.is<object>() ? doc.get<object>() : empty;
  for (const auto& [k, v] : cfg) {
    auto want_string = [&, key = k, val = v](std::string* out) {
      if (val.is<std::string>()) return static_cast<void>(*out = val.get<std::string>());
      problems->push_back("config." + key + ": must be a string");
    };
    auto want_bool = [&, key = k, val = v](bool* out) {
      if (val.is<bool>()) return static_cast<void>(*out = val.get<bool>());
      problems->push_back("config." + key + ": must be true or false");
    };
    if (k == "rootfs") {
      want_string(&o->rootfs);
    } else if (k == "readonly_rootfs") {
      want_bool(&o->readonly_rootfs);
    } else if (k == "args") {
      o->has_args = StringList(v, "args", &o->args, problems);
      if (o->has_args && o->args.empty()) problems->push_back("config.args: must not be empty");
    } else if (k == "hostname") {
      want_string(&o->hostname);
    } else if (k == "mounts") {
      ParseMounts(v, o, problems);
    } else if (k == "devices") {
      ParseDevices(v, o, problems);
    } else if (k == "capabilities") {
      std::vector<std::string> caps;
      o->has_capabilities = StringList(v, "capabilities", &caps, problems);
      for (size_t i = 0; i < caps.size(); ++i) {
        std::string name = CapName(caps[i]);
        if (std::find(std::begin(kKnownCaps), std::end(kKnownCaps), name) == std::end(kKnownCaps)) {
          problems->push_back("config.capabilities[" + std::to_string(i) + "]: unknown capability \"" + caps[i] + "\"");
        } else if (std::find(o->capabilities.begin(), o->capabilities.end(), name) == o->capabilities.end()) {
          o->capabilities.push_back(name);
        }
      }
    } else if (k == "no_new_privileges") {
      want_bool(&o->no_new_privileges);
    } else if (k == "runtime") {
      want_string(&o->runtime);
      if (!o->runtime.empty() && o->runtime != "crun" && o->runtime != "runc" && !Absolute(o->runtime)) {
        problems->push_back("config.runtime: must be crun, runc or an absolute path, got \"" + o->runtime + "\"");
      }
    } else {
      problems->push_back("config." + k + ": unknown field");
    }
  }
  struct stat st;
  if (o->rootfs.empty()) {
    if (!cfg.count("rootfs")) problems->push_back("config.rootfs: required (the container's root file system)");
  } else if (!Absolute(o->rootfs)) {
    problems->push_back("config.rootfs: must be an absolute path, got \"" + o->rootfs + "\"");
  } else if (::stat(o->rootfs.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    problems->push_back("config.rootfs: " + o->rootfs + " is not a directory on this node");
  }
  if (!o->hostname.empty() && o->hostname.size() > 64) problems->push_back("config.hostname: longer than 64 bytes");
  return problems->size() == before;
}

picojson::value BuildSpec(const outpost::plugin_sdk::TaskConfig& task, const TaskOptions& opts,
                          const picojson::value& base) {
  object doc = base.is<object>() ? base.get<object>() : object();
  doc["ociVersion"] = value("1.0.2");

  // process: outpost's (env, user, rlimits, oomScoreAdj), with the
  // container's own args, cwd, capabilities and no_new_privs.
  object& proc = ObjectAt(doc, "process");
  proc["terminal"] = value(false);
  std::vector<std::string> args = opts.args;
  if (!opts.has_args) {
    args = {task.command};
    args.insert(args.end(), task.args.begin(), task.args.end());
  }
  proc["args"] = Strings(args);
  proc["cwd"] = value(task.cwd.empty() ? "/" : task.cwd);
  if (!proc["env"].is<array>()) {
    std::vector<std::string> env;
    for (const auto& [k, v] : task.env) env.push_back(k + "=" + v);
    proc["env"] = Strings(env);
  }
  array& env = proc["env"].get<array>();
  bool has_path = std::any_of(env.begin(), env.end(), [](const value& e) {
    return e.is<std::string>() && e.get<std::string>().compare(0, 5, "PATH=") == 0;
  });
  if (!has_path) env.emplace_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  if (!proc["user"].is<object>()) {
    object user;
    user["uid"] = value(static_cast<int64_t>(task.switch_user ? task.uid : 0));
    user["gid"] = value(static_cast<int64_t>(task.switch_user ? task.gid : 0));
    proc["user"] = value(std::move(user));
  }
  const std::vector<std::string>& caps = opts.has_capabilities ? opts.capabilities : DefaultCapabilities();
  object capset;
  for (const char* set : {"bounding", "effective", "permitted"}) capset[set] = Strings(caps);
  proc["capabilities"] = value(std::move(capset));
  proc["noNewPrivileges"] = value(opts.no_new_privileges);

  object root;
  root["path"] = value(opts.rootfs);
  root["readonly"] = value(opts.readonly_rootfs);
  doc["root"] = value(std::move(root));
  std::string hostname = !opts.hostname.empty() ? opts.hostname : !task.hostname.empty() ? task.hostname : task.name;
  doc["hostname"] = value(hostname.empty() ? task.id : hostname);

  // mounts: the standard set, then the task's, then outpost's bind mounts
  // (NRI); a later mount on the same destination replaces an earlier one.
  array mounts = StandardMounts();
  for (const MountConfig& m : opts.mounts) mounts.push_back(Mount(m.destination, m.type, m.source, m.options));
  if (base.is<object>() && base.contains("mounts") && base.get("mounts").is<array>()) {
    for (const value& m : base.get("mounts").get<array>()) {
      if (m.is<object>() && m.contains("type") && m.get("type").is<std::string>() && m.get("type").get<std::string>() == "bind") {
        mounts.push_back(m);
      }
    }
  }
  array unique;
  std::set<std::string> seen;
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    const value& d = it->get("destination");
    if (d.is<std::string>() && seen.insert(d.get<std::string>()).second) unique.insert(unique.begin(), *it);
  }
  doc["mounts"] = value(std::move(unique));

  object& lx = ObjectAt(doc, "linux");
  // Namespaces of its own, and outpost's network namespace joined by path
  // (none given: the node's network, as for mode "host").
  array ns;
  for (const char* type : {"pid", "ipc", "uts", "mount"}) {
    object o;
    o["type"] = value(type);
    ns.emplace_back(std::move(o));
  }
  if (!task.netns.empty()) {
    object o;
    o["type"] = value("network");
    o["path"] = value(task.netns);
    ns.emplace_back(std::move(o));
  }
  lx["namespaces"] = value(std::move(ns));
  // Devices: outpost's (NRI) then the task's; each allowed after the
  // defaults. (ArrayAt keeps what outpost put there.)
  array& devices = ArrayAt(lx, "devices");
  object& res = ObjectAt(lx, "resources");
  array rules = DefaultDeviceRules();
  if (res.count("devices") && res["devices"].is<array>()) {
    for (const value& r : res["devices"].get<array>()) rules.push_back(r);
  }
  for (const DeviceConfig& d : opts.devices) {
    object rule;
    devices.push_back(DeviceNode(d, &rule));
    rules.emplace_back(std::move(rule));
  }
  if (devices.empty()) lx.erase("devices");
  res["devices"] = value(std::move(rules));
  lx["maskedPaths"] = Strings({"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                               "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
                               "/proc/scsi"});
  lx["readonlyPaths"] = Strings({"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"});
  return value(std::move(doc));
}

}  // namespace oci_driver
