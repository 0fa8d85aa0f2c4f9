// Agent configuration. Owns: the Config struct with its edge-node defaults,
// loading it from a JSON file with every error reported at once (key and
// file named), and the checks that make a config usable. Does not apply it:
// agent/agent.cc decides what a reload may change.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "driver/nomad/nomad_driver.h"
#include "base/log.h"

namespace outpost {

struct Config {
  std::string path;  // file it came from; "" = built-in defaults
  // What the file has that is taken but is likely a mistake, each naming the
  // file and where ("config F: nri.socket: given twice (lines 3 and 9); the
  // last is used"): logged at start and reload, printed by --check.
  std::vector<std::string> warnings;

  std::string state_dir = "/var/lib/outpost";
  std::string runtime_dir = "/run/outpost";
  std::string api_socket;  // "" = <runtime_dir>/outpost.sock
  log::Level log_level = log::Level::kInfo;
  std::string log_file;  // "" = stderr only

  // API server limits (see docs/config.md).
  std::vector<int64_t> api_allowed_uids;  // in addition to 0 and the agent's own uid
  int64_t api_max_connections = 256;
  int64_t api_max_connections_per_uid = 128;           // root included
  int64_t api_idle_timeout_nanos = 60LL * 1000000000;  // close idle API connections
  int64_t api_frame_timeout_nanos = 10LL * 1000000000; // a started frame must complete
  uint64_t api_max_write_queue = 1u << 20;             // per-connection unsent bytes
  uint64_t api_max_read_buffers = 16u << 20;           // all connections' partial frames

  // Jobs (docs/job-spec.md, docs/jobs-dir.md).
  std::string jobs_dir = "/etc/outpost/jobs.d";  // "" = no drop-in directory
  int64_t max_jobs = 1000;

  // cgroup v2 (docs/cgroups.md).
  std::string cgroup_root = "/sys/fs/cgroup/outpost.slice";
  bool cgroup_allow_without_limits = false;  // run jobs with limits where cgroup v2 is missing
  // Dynamic workload users (docs/dynamic-users.md): uids first..last.
  int64_t dynamic_uid_first = 80000;
  int64_t dynamic_uid_last = 89999;

  // Plugins (docs/plugins.md): the directory plugins put their sockets in
  // ("" = <runtime_dir>/plugins), and how long a plugin may have no
  // connected instance before what depends on it is cleaned up.
  std::string plugins_dir;
  int64_t plugin_grace_period_nanos = 30LL * 1000000000;
  // Deadlines of the calls to task-driver plugins: StartTask (which may
  // pull an image), and every other call (StopTask and ExecTask get theirs
  // on top of their own timeout; WaitTask and TaskEvents are long polls).
  int64_t driver_call_timeout_nanos = 10LL * 1000000000;
  int64_t driver_start_timeout_nanos = 60LL * 1000000000;

  // kubelet's plugins (docs/devices.md), as the kubelet lays them out: the
  // directory kubelet plugins put their registration sockets in (spoken
  // to over gRPC), and the device-plugin directory, where the agent serves
  // kubelet.sock (v1beta1.Registration). "" turns either off.
  std::string kubelet_plugins_dir = "/var/lib/kubelet/plugins_registry";
  std::string device_plugins_dir = "/var/lib/kubelet/device-plugins";

  // Nomad's task driver plugins (docs/nomad-drivers.md): the directory of
  // plugin binaries (missing = none), and Nomad's `plugin "<name>"`
  // stanzas as JSON: {"<name>": {"args": [...], "config": {...}}}.
  std::string nomad_plugin_dir = "/opt/outpost/nomad-plugins";
  std::map<std::string, driver::nomad::PluginStanza> nomad_plugins;

  // OCI hooks (docs/hooks.md): hooks.d directories (a later one masks a
  // same-named file in an earlier one), the per-stage hook directories
  // ("" = none), the timeout of a hook that sets none, and what a failed
  // poststart hook does: "stop" the task (runtime-spec 1.3) or "warn".
  std::vector<std::string> hooks_dirs = {"/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"};
  std::string hook_path = "/etc/outpost/hooks";
  int64_t hook_timeout_nanos = 10LL * 1000000000;
  bool poststart_failure_stops = true;

  // Job networks (docs/networking.md): where namespaces are pinned, the
  // CNI config dir and plugin search path, the result cache ("" =
  // <runtime_dir>/cni), the deadline of one plugin call, and the built-in
  // bridge network. All take effect at the next agent start.
  struct Network {
    std::string netns_dir = "/run/netns";
    std::string cni_config_dir = "/etc/cni/net.d";
    std::vector<std::string> cni_path = {"/opt/cni/bin", "/usr/lib/cni"};
    std::string cni_cache_dir;
    int64_t cni_timeout_nanos = 60LL * 1000000000;
    std::string bridge_name = "outpost";
    std::string bridge_interface = "outpost0";
    std::string bridge_subnet = "10.46.0.0/20";
    std::string bridge_admin_chain = "OUTPOST-ADMIN";
    bool operator==(const Network& o) const {
      return netns_dir == o.netns_dir && cni_config_dir == o.cni_config_dir && cni_path == o.cni_path &&
             cni_cache_dir == o.cni_cache_dir && cni_timeout_nanos == o.cni_timeout_nanos &&
             bridge_name == o.bridge_name && bridge_interface == o.bridge_interface &&
             bridge_subnet == o.bridge_subnet && bridge_admin_chain == o.bridge_admin_chain;
    }
  } network;

  // NRI (docs/nri.md): the "nri" object. Off unless the object is there
  // (and "enable" is not false).
  struct Nri {
    bool enable = false;
    std::string socket = "/var/run/nri/nri.sock";  // "" = no external plugins
    std::string plugin_dir = "/opt/nri/plugins";
    std::string plugin_config_dir = "/etc/nri/conf.d";
    int64_t registration_timeout_nanos = 5LL * 1000000000;
    int64_t request_timeout_nanos = 2LL * 1000000000;
    std::vector<std::string> required_plugins;
    struct Plugin {
      int64_t request_timeout_nanos = 0;  // 0 = request_timeout
      bool fail = false;                  // fail_policy "fail"
      bool operator==(const Plugin& o) const {
        return request_timeout_nanos == o.request_timeout_nanos && fail == o.fail;
      }
    };
    std::map<std::string, Plugin> plugins;  // by plugin name
    bool operator==(const Nri& o) const {
      return enable == o.enable && socket == o.socket && plugin_dir == o.plugin_dir &&
             plugin_config_dir == o.plugin_config_dir && registration_timeout_nanos == o.registration_timeout_nanos &&
             request_timeout_nanos == o.request_timeout_nanos && required_plugins == o.required_plugins &&
             plugins == o.plugins;
    }
  } nri;

  // Supervision of the worker (docs/supervision.md): the keeper kills a
  // worker whose loop sends no heartbeat for this long (0 = never).
  int64_t heartbeat_timeout_nanos = 30LL * 1000000000;
  // A watchdog device the worker opens and pets while its loop runs ("" = none).
  std::string watchdog_device;

  std::string ApiSocket() const { return api_socket.empty() ? runtime_dir + "/outpost.sock" : api_socket; }
  std::string PluginsDir() const { return plugins_dir.empty() ? runtime_dir + "/plugins" : plugins_dir; }
  std::string CniCacheDir() const { return network.cni_cache_dir.empty() ? runtime_dir + "/cni" : network.cni_cache_dir; }
};

// Loads and validates path. On error the message lists every problem, one
// per line, each starting with "<path>: <key>: ".
Result<Config> LoadConfig(const std::string& path);
// Same for an in-memory document; source names it in messages.
Result<Config> ParseConfig(const std::string& text, const std::string& source);

// Paths (config_paths.cc). CleanPath drops empty and "." components and a
// trailing slash; false if the path has a ".." component (what it names
// would depend on symlinks).
bool CleanPath(std::string* path);
// The configured paths that must not share a directory (state_dir and
// runtime_dir nested, other paths inside them, two keys on one path): one
// line per problem, naming both keys and paths and why.
void CheckPathConflicts(const Config& c, std::vector<std::string>* errors);
// An existing directory the agent keeps files in is used as it is (its mode
// is never changed) if it is a directory that only root or the agent's
// user owns and that others cannot write to (unless sticky_ok and it has
// the sticky bit, like /tmp). key names the config key in the error.
Status CheckExistingDir(const char* key, const std::string& dir, bool sticky_ok = true);
// CheckExistingDir for those of state_dir, runtime_dir, the API socket's
// dir, jobs_dir (whose files are run as jobs) and plugins_dir (whose
// sockets the agent trusts as plugins; neither with the sticky exception)
// that exist; every problem, one per line. At start and for `--check`.
Status CheckExistingDirs(const Config& c);

// Keys whose change takes effect on SIGHUP; the rest need a restart.
bool ReloadChangesRestartOnlyKeys(const Config& old_config, const Config& new_config, std::string* which);

}  // namespace outpost
