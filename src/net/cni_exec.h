// Running CNI plugins (spec section 2, libcni pkg/invoke), and the ADD, DEL
// and CHECK of a whole network list. Owns: finding a plugin binary in the
// search path (the first regular file `<dir>/<type>`), the environment (the
// agent's own, as libcni passes it: plugins need PATH to find iptables,
// plus CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS with
// IgnoreUnknown=1 whenever there are args, and CNI_PATH, always), one
// plugin's stdin built from the list (libcni buildOneConfig: the plugin
// object as written, `name` and `cniVersion` of the list, `prevResult`,
// `runtimeConfig` with the capability args the plugin declares), the run
// itself through proc/child_run (stdin written and closed, stdout and
// stderr read without deadlock, a deadline after which the plugin's process
// group is killed, ETXTBSY retried 5 times 1 s apart), and turning a
// failure into "plugin portmap: [code 7] msg: details".
//
// List operations: ADD in list order, each plugin given the previous
// result; DEL in reverse order, every plugin given the cached final result;
// CHECK in order with the cached result. ADD stops at the first failure
// (the caller DELs the whole list); DEL goes on past failures (best effort,
// every plugin gets its chance to clean up) and reports the first one; a
// plugin binary that is not installed is skipped by DEL (logged), since it
// can clean up nothing and would otherwise keep the attachment forever.
// Each call's duration is kept for events and `outpost networks`.
//
// Does not own the cache, the namespace, or serialising operations (net/
// networks runs one list operation at a time per node).
#pragma once

#include <picojson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "net/cni_config.h"
#include "net/cni_result.h"

namespace outpost {
class Loop;
}

namespace outpost::net {

// Where plugins are found and how long one may run.
struct PluginEnv {
  std::vector<std::string> path;          // cni_path, searched in order
  int64_t timeout_nanos = 60LL * 1000000000;  // per plugin call
  // Between ETXTBSY retries (1 s as libcni); tests shorten it.
  int64_t busy_retry_nanos = 1000000000;
};

// Who is being wired: the CNI_* values of one attachment.
struct Attachment {
  std::string container_id;  // ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$
  std::string netns;         // path of the pinned namespace
  std::string ifname = "eth0";
  std::vector<std::pair<std::string, std::string>> cni_args;  // without IgnoreUnknown
  picojson::object capability_args;  // e.g. {"portMappings":[{hostPort,containerPort,protocol,hostIP}]}
};

// Invalid attachment values, checked before any plugin runs (the plugins'
// own rules: container id regex, ifname <= 15 and no '/', ':' or space,
// no ';' or '=' in arg keys, no ';' in values).
Status ValidateAttachment(const Attachment& a);

// The first regular file <dir>/<type> over path; NotFound
// `failed to find plugin "x" in path [/opt/cni/bin /usr/lib/cni]`.
Result<std::string> FindPlugin(const std::vector<std::string>& path, const std::string& type);

// The stdin of plugin i of list for an operation ("ADD", "DEL", "CHECK").
// prev_result: null for none.
std::string PluginStdin(const NetworkList& list, size_t i, const picojson::value& prev_result,
                        const picojson::object& capability_args);
// The environment of a call (the agent's environ plus the CNI_* values;
// later duplicates win).
std::vector<std::string> PluginEnvironment(const std::string& command, const Attachment& a,
                                           const std::vector<std::string>& path);

struct PluginTiming {
  std::string type;
  int64_t nanos = 0;
};

struct ListOutcome {
  Status status;                      // the first failure, "plugin bridge: [code 999] ..."
  picojson::value result;             // ADD: the final result (null otherwise)
  std::vector<PluginTiming> timings;  // every call made, in order
  int64_t nanos = 0;                  // the whole operation
};

// One list operation running on the loop. Destroying it kills a plugin
// still running (its process group) and done never runs.
class ListOp {
 public:
  using Done = std::function<void(ListOutcome)>;
  // command: "ADD", "DEL" or "CHECK". cached: the final ADD result for DEL
  // and CHECK (null = none: DEL then runs without prevResult). done runs
  // once, from the loop, never from inside Start. What is wrong before any
  // plugin runs comes through done as well, with no timings: an unknown
  // command, ValidateAttachment's error, an empty netns for ADD or CHECK
  // (DEL may have none), CHECK with a list older than 0.4.0. An empty list
  // succeeds with a null result.
  static std::unique_ptr<ListOp> Start(Loop* loop, const PluginEnv& env, const NetworkList& list,
                                       const std::string& command, const Attachment& a,
                                       const picojson::value& cached, Done done);
  ~ListOp();

 private:
  struct State;
  explicit ListOp(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

// VERSION of one plugin: its supportedVersions. Run with the dummy
// CNI_NETNS / CNI_IFNAME / CNI_PATH libcni sets; "unknown CNI_COMMAND:
// VERSION" means ["0.1.0"].
void ProbeVersion(Loop* loop, const PluginEnv& env, const std::string& binary,
                  std::function<void(Result<std::vector<std::string>>)> done);

}  // namespace outpost::net
