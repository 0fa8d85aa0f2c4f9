// The networks of jobs on this node (docs/networking.md). Owns: each job's
// network namespace (pinned at <netns_dir>/outpost-<job>), its CNI
// attachment (ADD through the plugins, the result cached before the job's
// tasks may start, DEL from the cache before the namespace goes), the one
// queue that runs these operations one at a time per node (as Nomad
// serialises them: the plugins' iptables work contends anyway), the
// built-in bridge network and its admin chain, the CNI config directory,
// the plugins' VERSION probes, and recovery after an agent restart: pinned
// namespaces and cache entries of jobs that no longer want them are torn
// down; those of running jobs are looked at (net/link_check: interfaces and
// addresses in place) and CHECKed where CHECK can run, kept when in place
// whatever CHECK says, and re-created once, with their address, when
// broken.
//
// Does not own jobs or tasks: the task start pipeline asks Attach for the
// job's namespace and address (task/lifecycle.cc), the job layer calls
// Release when a job stops or is removed. Events go through the callback.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/loop.h"
#include "net/bridge.h"
#include "net/cni_cache.h"
#include "net/cni_config.h"
#include "net/cni_exec.h"
#include "net/spec.h"

namespace outpost::proc {
class ChildRun;
}

namespace outpost::net {

// A job's network as the start pipeline uses it.
struct JobNetwork {
  std::string job;
  std::string mode;      // none, bridge, cni/<name>
  std::string network;   // the CNI network's name ("" for none)
  std::string netns;     // the pinned namespace
  std::string ip;        // the job's address ("" for none)
  std::string cidr;
  std::vector<PortMapping> ports;
  std::vector<PluginTiming> timings;  // of the ADD that wired it (empty when recovered)
  int64_t add_nanos = 0;
};

// One plugin a network needs, as `outpost networks` shows it.
struct PluginView {
  std::string type;
  std::string binary;                      // "" = not found
  std::vector<std::string> versions;       // from VERSION (empty until probed)
  std::string problem;                     // not found / VERSION failed / too old for the config
};
struct NetworkView {
  std::string name;
  std::string mode;   // "bridge" or "cni/<name>"
  std::string file;   // "" for the built-in
  std::string cni_version;
  bool disable_check = false;
  std::vector<PluginView> plugins;
  std::vector<std::string> jobs;  // attached now
};

class Networks {
 public:
  struct Options {
    std::string netns_dir = "/run/netns";
    std::string config_dir = "/etc/cni/net.d";
    std::string cache_dir;  // the result cache (<runtime_dir>/cni)
    PluginEnv plugins;      // search path, per-call timeout
    BridgeOptions bridge;
    // (job, type, message): "network" events of a job.
    std::function<void(const std::string&, const std::string&, const std::string&)> event;
  };
  using AttachDone = std::function<void(Result<JobNetwork>)>;
  using Done = std::function<void(Status)>;

  // Invalid bridge options → InvalidArgument naming the config key.
  static Result<std::unique_ptr<Networks>> Create(Loop* loop, Options options);
  ~Networks();

  // What this node cannot do for a job's network, one line per problem
  // starting with the spec path ("network.mode: ..."): a cni/<name> whose
  // config is missing (with the networks the node has), ports on a
  // network without a portMappings plugin.
  Status Check(const NetworkSpec& spec) const;

  // The job's namespace, wired for spec: at once when it is already (with
  // an equal spec), else queued. Concurrent calls for one job share the
  // work. A failed ADD is undone whole (DEL in reverse, namespace removed)
  // and its error names the network and the plugin.
  void Attach(const std::string& job, std::shared_ptr<const NetworkSpec> spec, AttachDone done);
  // CNI DEL from the cache, then the namespace unpinned and the cache entry
  // removed; queued. Idempotent (nothing to do is OK). A DEL that fails
  // leaves the pin and the entry, so a later Release or the next agent's
  // recovery tries again.
  void Release(const std::string& job, Done done);
  // Call once at start, with the jobs that want a network now. Operations
  // asked for before (Attach, Release) wait until recovery is done.
  void Recover(const std::map<std::string, std::shared_ptr<const NetworkSpec>>& wanted);
  bool recovered() const { return recovered_; }

  const JobNetwork* Find(const std::string& job) const;
  std::vector<const JobNetwork*> Attached() const;  // by job id
  std::vector<NetworkView> List() const;
  // The conflist a network uses ("bridge", "cni/<name>" or a name).
  Result<std::string> ShowConfig(const std::string& name) const;
  // Config files that are not used, and why; why the config dir is not
  // watched ("" = it is; a missing dir is watched for, and only the
  // built-in bridge network is there meanwhile).
  std::map<std::string, std::string> ConfigProblems() const;
  std::string ConfigDirProblem() const;
  const Options& options() const { return options_; }
  // VERSION of every plugin of every network not probed yet, in the
  // background (List shows the answers once they are in).
  void ProbeAll();
  size_t queued() const { return queue_.size() + (running_ ? 1 : 0); }

 private:
  // One queued operation; Attach's state between its steps.
  struct Op {
    enum Kind { kAttach, kRelease, kRecover } kind = kAttach;
    std::string job;
    std::shared_ptr<const NetworkSpec> spec;
    std::vector<AttachDone> attach_done;
    std::vector<Done> release_done;
    NetworkList list;
    Attachment att;
    // Recovery re-creating a broken network: the address it had ("IP/prefix"),
    // asked of the IPAM plugin again (CNI_ARGS IP, capability ips); cleared
    // when an ADD asking for it fails (then a new one is taken).
    std::string keep_cidr;
    bool pinned_here = false;  // this op created the pin (undone on failure)
    bool add_started = false;  // a failure after it needs a DEL
    int64_t started_mono = 0;
  };
  static std::string Ms(int64_t nanos);
  static constexpr int64_t kProbeDelayNanos = 2LL * 1000000000;
  Networks(Loop* loop, Options options);

  void Enqueue(std::unique_ptr<Op> op, bool front = false);
  void RunNext();
  void Finish(Status st);
  // The steps of one Attach, each continuing with the next.
  void RunAttach(Op* op);
  void AttachResolved(Op* op);
  void AttachPinned(Op* op);
  void AttachAdmin(Op* op);
  void AttachAdd(Op* op);
  void AttachAdded(Op* op, ListOutcome out);
  void RunRelease(Op* op);
  void ReleaseDeleted(Op* op, Status st);
  void RunRecoverCheck(Op* op);
  // CHECK of a recovered network whose cached result is usable (intact:
  // its interfaces and addresses were found in place), where CHECK can
  // run; then the network kept (n), or re-created when CHECK failed and
  // nothing could be looked at.
  void CheckRecovered(Op* op, std::shared_ptr<NetworkList> list, Attachment att, picojson::value cached, bool intact,
                      JobNetwork n);
  void RecreateAfterRecovery(Op* op);

  // The network list a spec uses (null + error when it has none).
  Result<NetworkList> ListFor(const NetworkSpec& spec) const;
  Attachment AttachmentFor(const std::string& job, const NetworkSpec& spec) const;
  std::string NetnsPath(const std::string& job) const;
  static std::string ContainerId(const std::string& job) { return "outpost-" + job; }
  // The list's bytes as a conflist (a .conf is wrapped), for the cache.
  static std::string ListBytes(const NetworkList& list);
  // What the cache keeps of an Attach (without the result).
  static CacheEntry CacheEntryFor(const Op& op);
  // DEL of whatever the cache entry of job's network says (or, without
  // one, of list); then `then` with the first error.
  void DeleteAttachment(const std::string& job, const NetworkList* list, std::function<void(Status)> then);
  // VERSION of every plugin of list not probed yet, then `then`.
  void ProbePlugins(const NetworkList& list, std::function<void()> then);
  Status CheckVersions(const NetworkList& list) const;
  // "plugin x reports no CHECK support (versions ...)": a plugin of list
  // whose VERSION answer has no version from 0.4.0 on; "" when none.
  std::string PluginWithoutCheck(const NetworkList& list) const;
  // A "network" event of job, and a log line (a warning when warn).
  void Emit(const std::string& job, const std::string& message, bool warn = false);
  // Asks att's IPAM for the address cidr ("IP/prefix"), as the CNI
  // conventions have it: CNI_ARGS IP=<ip> (host-local, static) and the
  // `ips` capability (for plugins declaring it).
  static void RequestAddress(const std::string& cidr, Attachment* att);
  // A failed step of an Attach: DEL of the whole list, the pin removed when
  // this Attach made it, and the error (why, prefixed with the network).
  void FailAttach(Op* op, const std::string& why);
  void RemoveCacheEntries(const std::string& job);
  // One helper command (iptables) with the agent's environment.
  void RunCommand(std::vector<std::string> argv, std::function<void(Status)> then);

  Loop* loop_;
  Options options_;
  std::unique_ptr<ConfigDir> configs_;
  NetworkList bridge_list_;  // the built-in network, built once from the options
  std::map<std::string, JobNetwork> attached_;
  std::map<std::string, std::shared_ptr<const NetworkSpec>> specs_;  // of attached_
  std::deque<std::unique_ptr<Op>> queue_;
  std::unique_ptr<Op> running_;
  std::unique_ptr<ListOp> list_op_;
  std::unique_ptr<proc::ChildRun> command_;
  // VERSION answers by binary path ("" entry = probe failed: problem text).
  std::map<std::string, Result<std::vector<std::string>>> versions_;
  std::shared_ptr<NetworkList> probe_all_;  // what ProbeAll walks
  bool admin_chain_ready_ = false;
  bool recovered_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::net
