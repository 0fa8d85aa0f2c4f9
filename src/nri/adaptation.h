// The NRI runtime side (containerd/nri's "adaptation"): outpost as the
// runtime that stock NRI plugins talk to, a job being a pod sandbox and a
// task instance a container (docs/nri.md). Owns: the external plugin socket
// and the connections made to it, the plugins launched from the plugin dir
// (nri/launcher), each plugin's registration, Configure and Synchronize, the
// ordered list of ready plugins, one queue that serialises every event,
// synchronization and unsolicited update (so a plugin's Synchronize never
// sees a half-applied event, and an UpdateContainers that arrives during an
// event is applied after it), calling plugins one at a time in index order
// with per-plugin timeouts and fail policies, the StateChange fallback for
// old plugins, merging answers (nri/merge) and validators.
//
// Does not own: building pods and containers from jobs and tasks or applying
// adjustments and updates to them (the task layer, through Host), or the
// config file (agent/config).
//
// Error classes follow upstream: a plugin that closes, times out or answers
// bytes that do not decode is closed and treated as having answered
// nothing (a launched one is killed, and restarted by the launcher); an
// error the plugin returns fails the operation. Unlike upstream, a plugin
// whose fail policy is "fail" also fails the operation when it is closed or
// times out, and the outcome of every call (adjusted what, skipped why) is
// reported for `outpost inspect` and events.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/loop.h"
#include "nri/merge.h"
#include "outpost/nri_api.h"

namespace outpost::wire {
class RpcServer;
}

namespace outpost::nri {

class Launcher;
class PluginConn;

enum class FailPolicy { kIgnore, kFail };

struct PluginPolicy {
  int64_t request_timeout_ms = 0;  // 0 = the global one
  FailPolicy fail_policy = FailPolicy::kIgnore;
};

struct Config {
  bool enabled = false;
  std::string socket_path = "/var/run/nri/nri.sock";  // "" = no external plugins
  std::string plugin_dir = "/opt/nri/plugins";        // "" = none launched
  std::string plugin_config_dir = "/etc/nri/conf.d";
  int64_t registration_timeout_ms = 5000;
  int64_t request_timeout_ms = 2000;
  std::map<std::string, PluginPolicy> plugins;  // by plugin name
  std::vector<std::string> required_plugins;    // names
  std::string runtime_name = "outpost";
  std::string runtime_version;
  // Restart backoff of launched plugins that die.
  int64_t restart_initial_ms = 500;
  int64_t restart_max_ms = 60000;
};

// The NRI API version this runtime implements (sent in Configure).
inline constexpr const char kNriVersion[] = "v0.12.2";

// One plugin, for `outpost nri`.
struct PluginInfo {
  std::string index;
  std::string name;
  std::string source;  // "launched" or "external"
  std::string state;   // registering, configuring, synchronizing, ready, closed
  uint32_t events = 0;
  pid_t pid = 0;  // launched: the process; external: the peer's (SO_PEERCRED)
  std::string nri_version;
  bool state_change = false;  // an old plugin: notifications through StateChange
  int64_t connected_unix_nanos = 0;  // of its current (or last) connection
  // Connections after its first: launches again, reconnects. requests and
  // failures count over all of them.
  uint64_t restarts = 0;
  uint64_t requests = 0;
  uint64_t failures = 0;
  std::string last_error;
  int64_t request_timeout_ms = 0;
  std::string fail_policy;  // "ignore" or "fail"
  bool required = false;
};

// What one plugin did with one event, for the task's events and inspect.
struct PluginOutcome {
  std::string plugin;  // "10-logger"
  std::string result;  // "adjusted env FOO, MemLimit", "no change", "skipped: closed: timed out after 2s"
};

// A CreateContainer's outcome: what to apply to the task, or that its
// start must wait for required plugins.
struct CreateOutcome {
  std::optional<ContainerAdjustment> adjust;  // merged; none when no plugin adjusted
  std::vector<Claim> claims;                  // who set what
  std::vector<PluginOutcome> plugins;         // one line per consulted plugin
  // Not "": a required plugin is not ready (it closed during this start's
  // events, or before they ran); nothing is to be applied and the start
  // waits for these (MissingRequired()) before it asks again.
  std::string wait_for;
  // With wait_for: CreateContainer reached some plugins, which are to be
  // told the container is gone (StopContainer, RemoveContainer).
  bool undo = false;
};

// What the adaptation needs from the rest of the agent.
class Host {
 public:
  virtual ~Host() = default;
  // Every pod (job with tasks) and container (running task instance), for
  // Synchronize.
  virtual void ListState(std::vector<PodSandbox>* pods, std::vector<Container>* containers) = 0;
  // A live resource update of a running container; the error is returned
  // to the plugin (as a failed update).
  virtual Status ApplyUpdate(const std::string& plugin, const ContainerUpdate& update) = 0;
  // Stops a container a plugin evicted, with the plugin's reason.
  virtual void Evict(const std::string& plugin, const ContainerEviction& eviction) = 0;
  // The set of ready plugins changed (a required plugin may have come).
  virtual void PluginsChanged() = 0;
};

class Adaptation {
 public:
  static Result<std::unique_ptr<Adaptation>> Create(Loop* loop, Config config, Host* host);
  ~Adaptation();
  Adaptation(const Adaptation&) = delete;
  Adaptation& operator=(const Adaptation&) = delete;

  // Listens on the socket (its directory created 0700 if missing, a stale
  // socket removed, the socket 0600) and launches the plugin dir's plugins.
  // A badly named plugin file is reported (logged, listed) and skipped.
  Status Start();
  // Closes every connection and kills launched plugins (upstream never
  // calls Shutdown either: plugins see the connection drop).
  void Stop();

  // ---- events; each queued and run one at a time, in call order ----
  using CreateDone = std::function<void(Result<CreateOutcome>)>;
  // A start's events: RunPodSandbox first when run_pod (the pod's first
  // start), then CreateContainer, merged and validated. The fail policies
  // and the required plugins apply to both: a plugin with fail_policy
  // "fail" that is closed or times out fails the start; a required one
  // that is not ready when CreateContainer is due, or closes during it,
  // makes the outcome wait_for it.
  void CreateContainer(const PodSandbox& pod, const Container& ctr, CreateDone done, bool run_pod = false);
  // UpdateContainer: done gets the resources to apply to the container
  // (requested, changed by plugins); updates of other containers and
  // evictions are applied through Host. PostUpdateContainer follows.
  void UpdateContainer(const PodSandbox& pod, const Container& ctr, const Resources& requested,
                       std::function<void(Result<Resources>)> done);
  // StopContainer (updates of other containers applied), and the
  // notification events (RunPodSandbox, StopPodSandbox, RemovePodSandbox,
  // PostUpdatePodSandbox, PostCreateContainer, StartContainer,
  // PostStartContainer, PostUpdateContainer, RemoveContainer). Errors are
  // logged, never fatal to the task. done (optional) runs when every
  // plugin answered.
  void Notify(Event event, const PodSandbox& pod, const std::optional<Container>& ctr,
              std::function<void()> done = nullptr);
  void UpdatePodSandbox(const PodSandbox& pod, const Resources& resources, std::function<void()> done = nullptr);

  // Required plugins that are not ready now, by name ("" = none missing).
  std::string MissingRequired() const;
  // Runs cb once no required plugin is missing (at once, deferred, if none
  // is); the returned id cancels it.
  uint64_t WaitForRequired(std::function<void()> cb);
  void CancelWait(uint64_t id);

  std::vector<PluginInfo> List() const;
  // Plugin files the plugin dir has but that are not launched, with why.
  std::vector<std::string> Problems() const;
  // Whether any plugin is connected or required: callers skip building
  // pods and containers when not.
  bool active() const;
  // Whether a ready plugin subscribed to e: callers skip building the pod
  // and container of an event nobody is told of.
  bool Wants(Event e) const;
  const Config& config() const { return config_; }

  // For tests and benchmarks: serves an already-connected socket as an
  // external plugin connection (what accepting on the socket does).
  Status AddConnection(UniqueFd fd, const std::string& source = "external");

 private:
  friend class PluginConn;
  friend class Launcher;
  Adaptation(Loop* loop, Config config, Host* host);

  // adaptation.cc: plugins, registration, synchronization
  void OnAcceptable();
  PluginConn* FindByConnection(uint64_t conn_id) const;
  // fresh has its name and index: a closed connection of the same plugin
  // (same name, index and source) is dropped, its counters carried over
  // (one entry per plugin).
  void TakeOver(PluginConn* fresh);
  bool IsRequired(const std::string& name) const;
  void OnRegister(PluginConn* p, const RegisterPluginRequest& req, std::function<void(Status)> reply);
  void Configure(PluginConn* p);
  void Synchronize(PluginConn* p, std::function<void()> finished);
  void SyncChunk(PluginConn* p, std::shared_ptr<SynchronizeRequest> all, size_t pod_at, size_t ctr_at,
                 double scale, std::function<void()> finished);
  void MakeReady(PluginConn* p);
  void OnPluginClosed(PluginConn* p, const std::string& why);
  void RemoveClosed();
  void OnUpdateContainers(PluginConn* p, const UpdateContainersRequest& req,
                          std::function<void(UpdateContainersResponse)> reply);
  std::vector<PluginConn*> Ordered(Event e) const;
  int64_t TimeoutMs(const std::string& name) const;
  FailPolicy PolicyOf(const std::string& name) const;
  void CheckWaiters();

  // adaptation_events.cc
  using Job = std::function<void(std::function<void()> finished)>;
  void Enqueue(Job job);
  void RunNext();
  // A notification to one plugin, through StateChange for an old one (the
  // switch made at its first Unimplemented answer). req and payload (the
  // dedicated RPC's) must outlive done.
  void NotifyOne(PluginConn* p, Event event, const PodContainerRequest* req, const std::string* payload,
                 std::function<void(Result<std::string>)> done);
  void PodNext(std::shared_ptr<struct CreateRun> run, size_t i);
  void CreateStart(std::shared_ptr<struct CreateRun> run);
  // A plugin the start depends on is closed (why): fails the start for
  // fail_policy "fail", makes it wait when required; false when neither.
  bool ClosedDuringStart(const std::shared_ptr<struct CreateRun>& run, const std::string& id, const std::string& name,
                         const std::string& why);
  void CreateNext(std::shared_ptr<struct CreateRun> run, size_t i);
  void Validate(std::shared_ptr<struct CreateRun> run);
  void NotifyNext(std::shared_ptr<struct NotifyRun> run, size_t i);
  void ApplyOtherUpdates(const std::string& plugin, const std::vector<ContainerUpdate>& updates,
                         std::vector<ContainerUpdate>* failed);
  // Merged updates, each told as coming from the plugin that asked for its
  // container (who: container id -> plugin id).
  void ApplyMerged(const std::vector<ContainerUpdate>& updates, const std::map<std::string, std::string>& who);

  Loop* loop_;
  Config config_;
  Host* host_;
  std::unique_ptr<wire::RpcServer> runtime_server_;  // the Runtime service, over every plugin's conn 2
  LoopFd listen_;
  std::vector<std::unique_ptr<PluginConn>> plugins_;  // every connection, any state
  std::unique_ptr<Launcher> launcher_;
  std::deque<Job> queue_;
  bool busy_ = false;
  std::map<uint64_t, std::function<void()>> waiters_;
  uint64_t next_waiter_ = 1;
  uint64_t next_plugin_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// "10-logger" form parsing, with upstream's errors:
//   invalid plugin name "x", idx-pluginname expected
//   invalid plugin index "1", must be 2 digits
Status ParsePluginFileName(const std::string& file, std::string* index, std::string* name);
Status CheckPluginName(const std::string& name);
Status CheckPluginIndex(const std::string& index);

}  // namespace outpost::nri
