// The agent process. Owns: start-up (config, directories, the single-agent
// lock, stale-socket replacement, the API socket), signal handling (SIGTERM
// and SIGINT stop, SIGHUP reloads), and wiring the subsystems onto the one
// event loop. The API handlers live in agent/api.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent/config.h"
#include "agent/dir_claims.h"
#include "agent/watchdog.h"
#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "cgroup/cgroup.h"
#include "devices/plugins.h"
#include "driver/nomad/plugins.h"
#include "driver/registry.h"
#include "task/events.h"
#include "keeper/link.h"

namespace outpost {
namespace wire {
class RpcServer;
}
namespace job {
class JobManager;
}
namespace task {
class TaskManager;
}
namespace driver {
class ExecDriver;
class TaskDriverHandler;
}
namespace proc {
class UidPool;
}
namespace hooks {
class Catalog;
}
namespace nri {
class Adaptation;
struct PodSandbox;
}
namespace net {
class Networks;
}
namespace plugin {
class Registry;
class Watcher;
}

namespace agent {

class JobTaskRunner;

// `outpost agent [--config FILE] [--check] [--no-keeper]`; returns the exit
// code. Without --no-keeper this process becomes the keeper (task/keeper) and
// the Agent below runs in the worker it starts (docs/process-model.md).
int Main(const std::vector<std::string>& args);
// Fixed malloc thresholds for a process that runs for years (agent_memory.cc).
void TuneMalloc();

constexpr const char* kDefaultConfigPath = "/etc/outpost/config.json";

class Agent {
 public:
  // Takes the lock, prepares directories and binds the API socket.
  // keeper_fd: the worker's end of the keeper socket (--worker); invalid with
  // --no-keeper. The link is attached last, so the keeper's "worker is up"
  // hello means everything above succeeded. keeper_empty (--keeper-empty):
  // the keeper has no exit to replay, so jobs recover at once.
  static Result<std::unique_ptr<Agent>> Start(Config config, UniqueFd keeper_fd = UniqueFd(),
                                              bool keeper_empty = false);
  ~Agent();

  Status Run();       // until SIGTERM/SIGINT (or Stop())
  void Stop();
  void Reload();      // what SIGHUP does

  const Config& config() const { return config_; }
  Loop* loop() { return loop_.get(); }
  int64_t started_mono() const { return started_mono_; }
  int64_t started_wall() const { return started_wall_; }
  int64_t config_loaded_wall() const { return config_loaded_wall_; }
  size_t api_connections() const;
  // The worker's link to the keeper; null with --no-keeper. Whoever records
  // task exits installs its handler with keeper_link()->SetExitHandler.
  keeper::KeeperLink* keeper_link() { return keeper_link_.get(); }
  task::TaskManager* tasks() { return tasks_.get(); }
  hooks::Catalog* hook_catalog() { return hooks_.get(); }
  net::Networks* networks() { return networks_.get(); }  // null when unavailable (networks_problem())
  nri::Adaptation* nri() { return nri_.get(); }  // null when NRI is off
  const std::string& networks_problem() const { return networks_problem_; }
  task::EventLog* events() { return &events_; }
  driver::Registry* drivers() { return &drivers_; }
  job::JobManager* jobs() { return jobs_.get(); }
  cgroup::Cgroups* cgroups() { return cgroups_.get(); }
  Watchdog* watchdog() { return &watchdog_; }
  plugin::Registry* plugins() { return plugins_.get(); }
  plugin::Watcher* plugin_watcher() { return plugin_watcher_.get(); }
  // Null when kubelet_plugins_dir is off.
  plugin::Watcher* kubelet_watcher() { return kubelet_watcher_.get(); }
  driver::nomad::Plugins* nomad_plugins() { return nomad_.get(); }
  devices::DevicePlugins* device_plugins() { return devices_.get(); }
  // Drivers whose conformance checks are running (CheckDriver: one run per
  // driver at a time).
  std::set<std::string>* drivers_being_checked() { return &drivers_being_checked_; }

 private:
  Agent() = default;
  Status Setup();
  Status BindApiSocket();
  Status AttachKeeper(UniqueFd fd, bool keeper_empty);
  Status StartTasks();
  Status StartNetworks();
  // agent_nri.cc: NRI (docs/nri.md), when the config enables it; created
  // before the tasks (their pipelines call it), started once they are
  // recovered (a plugin's Synchronize lists them).
  class NriHost;
  Status CreateNri();
  Status StartNri();
  void FillNriPod(const std::string& job, nri::PodSandbox* pod) const;
  // The job layer's recovery, then the networks' (which need to know the
  // jobs that want one); once the tasks' fates are known.
  void RecoverJobs();
  Status StartRegistry();  // plugin_api.cc
  void PublishPluginEvent(const plugin::Event& e);
  Status StartPlugins();  // plugin_api.cc
  void StartNomadPlugins();  // plugin_api.cc
  void ApplyRuntimeSettings();
  void TrimAfterActivity();
  void TrimWhenQuiet(uint64_t seen);

  Config config_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<wire::RpcServer> api_;
  std::unique_ptr<cgroup::Cgroups> cgroups_;
  std::unique_ptr<cgroup::OomWatcher> oom_;
  std::unique_ptr<proc::UidPool> uids_;
  task::EventLog events_;
  Loop::TimerId trim_timer_ = 0;
  static constexpr uint64_t kNeverTrimmed = ~uint64_t{0};
  uint64_t trimmed_at_seq_ = kNeverTrimmed;  // events_.last_seq() at the last malloc_trim
  driver::Registry drivers_;
  std::unique_ptr<driver::ExecDriver> exec_;
  std::unique_ptr<hooks::Catalog> hooks_;  // hooks.d and the per-stage hook directories
  std::unique_ptr<net::Networks> networks_;
  std::string networks_problem_;
  std::unique_ptr<task::TaskManager> tasks_;
  std::unique_ptr<JobTaskRunner> job_runner_;
  std::unique_ptr<job::JobManager> jobs_;
  std::unique_ptr<plugin::Registry> plugins_;
  std::unique_ptr<plugin::Watcher> plugin_watcher_;
  std::unique_ptr<plugin::Watcher> kubelet_watcher_;  // kubelet_plugins_dir, over gRPC
  std::unique_ptr<driver::TaskDriverHandler> driver_plugins_;  // the TaskDriver plugin type
  std::unique_ptr<driver::nomad::Plugins> nomad_;              // Nomad's driver plugins
  std::unique_ptr<devices::DevicePlugins> devices_;            // the DevicePlugin type; null: off
  std::set<std::string> drivers_being_checked_;
  UniqueFd lock_fd_;
  DirClaims claims_;  // only what no keeper holds for us
  std::string bound_socket_;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  int64_t started_mono_ = 0;
  int64_t started_wall_ = 0;
  int64_t config_loaded_wall_ = 0;
  pid_t keeper_pid_ = 0;  // set when a keeper is the parent of our tasks
  Watchdog watchdog_;
  // After the tasks and jobs: destroyed first (plugins closed while the
  // state they were told about is still there).
  std::unique_ptr<NriHost> nri_host_;
  std::unique_ptr<nri::Adaptation> nri_;
  std::unique_ptr<keeper::KeeperLink> keeper_link_;  // declared after loop_: destroyed before it
};

}  // namespace agent
}  // namespace outpost
