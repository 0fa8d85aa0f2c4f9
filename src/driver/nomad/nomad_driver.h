// A stock Nomad task-driver plugin as a driver of outpost's
// (docs/nomad-drivers.md). Owns, per plugin binary: its life (launched
// through go-plugin's host, driver/nomad/plugin_process; configured as
// Nomad's client configures it: PluginInfo, API version, ConfigSchema, the
// config validated and msgpack-encoded, SetConfig, Init, TaskConfigSchema,
// Capabilities; its Fingerprint, TaskEvents and stdio streams kept open;
// restarted with backoff when it exits, its tasks then recovered into the
// new process), and the Driver contract over Nomad's driver protocol
// (tasks' configs checked against TaskConfigSchema and encoded for
// StartTask, WaitTask kept open per task and asked again after a restart,
// the rest one call each; a capability the plugin lacks is refused by
// name). Does not own: which binaries there are and their plugin stanzas
// (driver/nomad/plugins), tasks (task/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/json.h"
#include "driver/driver.h"
#include "driver/nomad/hclspec.h"
#include "driver/nomad/plugin_process.h"
#include "driver/nomad/task_config.h"
#include "driver/registry.h"
#include "loop/loop.h"
#include "wire/grpc_client.h"

namespace outpost::driver::nomad {

// A call's error as the user sees it: grpc's UNIMPLEMENTED (a plugin
// without the method) becomes "driver NAME does not support METHOD", with
// the plugin's own words.
Error Unanswered(const std::string& driver, const char* method, const Error& e);

// Nomad's `plugin "<name>" { args = [...]; config { ... } }` as JSON.
struct PluginStanza {
  std::vector<std::string> args;
  bool has_config = false;
  picojson::value config;
  bool operator==(const PluginStanza& o) const {
    return args == o.args && has_config == o.has_config && config.serialize() == o.config.serialize();
  }
  bool operator!=(const PluginStanza& o) const { return !(*this == o); }
};

struct NomadOptions {
  std::string socket_dir;  // where plugins put their sockets (a private dir)
  std::string alloc_root;  // where allocation dirs go (<state_dir>/nomad-alloc)
  NodeInfo node;
  int64_t call_timeout_nanos = 10LL * 1000000000;
  int64_t start_timeout_nanos = 60LL * 1000000000;
  int64_t restart_initial_nanos = 1LL * 1000000000;
  int64_t restart_max_nanos = 120LL * 1000000000;  // Nomad's fingerprint retry cap
  // A plugin that is not back (configured) this long after it went away
  // loses its tasks (their exit is unknown).
  int64_t grace_nanos = 30LL * 1000000000;
  // The stanza for a plugin: by its file name (Nomad's loader), else by
  // the name it reports.
  std::function<const PluginStanza*(const std::string& file, const std::string& name)> stanza;
  // The plugin registered as a driver for the first time; it is back
  // after a restart (its tasks are to be recovered); it stayed away.
  std::function<void(const std::string& name)> added;
  std::function<void(const std::string& name)> changed;
  std::function<void(const std::string& name, const std::string& why)> gone;
};

class NomadPlugin : public Driver {
 public:
  enum class State { kStarting, kReady, kRestarting, kFailed };

  NomadPlugin(Loop* loop, Registry* registry, std::string path, NomadOptions options);
  ~NomadPlugin() override;

  void Start();
  // Agent stop: Driver.Shutdown and GRPCController.Shutdown asked, the
  // process stopped; tasks keep running (recovered by the next agent).
  void Shutdown();

  State state() const { return state_; }
  const std::string& path() const { return path_; }
  // Why it is not ready: a start that failed, a config its schema refused
  // (every error by path), the plugin restarting.
  const std::string& problem() const { return problem_; }
  const std::string& version() const { return version_; }
  pid_t pid() const { return proc_ ? proc_->pid() : 0; }

  // Driver
  std::string Name() const override { return name_; }
  std::string Unreachable() const override;
  Capabilities GetCapabilities() const override { return caps_; }
  Status CheckConfig(const std::string& config_json) const override;
  Fingerprint GetFingerprint() override { return fingerprint_; }
  void StartTask(const TaskConfig& config, StartCallback done) override;
  void RecoverTask(const TaskHandle& handle, DoneCallback done) override;
  void WaitTask(const std::string& id, WaitCallback done) override;
  void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal, DoneCallback done) override;
  void DestroyTask(const std::string& id, bool force, DoneCallback done) override;
  void InspectTask(const std::string& id, InspectCallback done) override;
  void SignalTask(const std::string& id, const std::string& signal, DoneCallback done) override;
  void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                ExecCallback done) override;
  void TaskStats(const std::string& id, StatsCallback done) override;
  Status RemoveTaskData(const TaskConfig& config) override;
  uint64_t SubscribeEvents(EventCallback cb) override;
  void UnsubscribeEvents(uint64_t id) override;

 private:
  static constexpr int kPidLookups = 20;  // 25 ms apart: half a second
  void FindPid(const std::string& id, const std::string& instance, std::shared_ptr<TaskHandle> h, int tries,
               StartCallback done);
  using Reply = std::function<void(Result<std::string>)>;

  void Launch();
  void OnConnected(Result<std::unique_ptr<wire::GrpcClient>> client);
  void OnExited(int wait_status);
  void Configure();
  void AfterSchema(Result<std::string> reply);
  void AfterSetConfig();
  void AfterCapabilities(Result<std::string> reply);
  void Ready();
  void Fail(const std::string& why, bool retry);
  void Lost(const std::string& why);
  void OpenStdio();
  void OpenStreams();
  void OnFingerprint(std::string_view message);
  void OnTaskEvent(std::string_view message);
  // A unary call to service/method on the plugin.
  void Call(const char* service, const char* method, Result<std::string> request, int64_t timeout_nanos, Reply done);
  void CallDriver(const char* method, Result<std::string> request, int64_t timeout_nanos, Reply done) {
    Call(kDriverService, method, std::move(request), timeout_nanos, std::move(done));
  }
  void AskWait(const std::string& id);
  Error Unsupported(const char* what) const;

  static constexpr const char* kBaseService = "hashicorp.nomad.plugins.base.proto.BasePlugin";
  static constexpr const char* kDriverService = "hashicorp.nomad.plugins.drivers.proto.Driver";

  struct Wait {
    std::vector<WaitCallback> callbacks;
    bool asking = false;
  };

  Loop* loop_;
  Registry* registry_;
  std::string path_;
  std::string file_;  // the binary's file name
  NomadOptions opts_;
  std::string name_;  // the PluginInfo name once known, the file name before
  std::string version_;
  std::string api_version_;
  State state_ = State::kStarting;
  std::string problem_;
  bool registered_ = false;  // in the driver registry under name_
  std::unique_ptr<PluginProcess> proc_;
  std::unique_ptr<wire::GrpcClient> client_;
  std::shared_ptr<wire::GrpcCall> fingerprint_call_, events_call_, stdio_call_;
  Schema task_schema_;
  FsIsolation fs_isolation_ = FsIsolation::kNone;
  Capabilities caps_;
  Fingerprint fingerprint_;
  std::map<std::string, Wait> waits_;
  // outpost's task id -> the id Nomad's protocol knows it by (new per
  // start), and back.
  std::map<std::string, std::string> nomad_ids_;
  std::map<std::string, std::string> outpost_ids_;
  const std::string& NomadId(const std::string& id) const {
    auto it = nomad_ids_.find(id);
    return it == nomad_ids_.end() ? id : it->second;
  }
  void Remember(const std::string& id, const std::string& nomad_id) {
    nomad_ids_[id] = nomad_id;
    outpost_ids_[nomad_id] = id;
  }
  void Forget(const std::string& id);
  void EmitEvent(const std::string& task, const std::string& type, const std::string& message);
  // Starts the plugin died in: the task id and that start's instance marker.
  std::map<std::string, std::string> destroy_when_back_;
  std::map<uint64_t, EventCallback> subscribers_;
  uint64_t next_subscriber_ = 1;
  int64_t backoff_nanos_ = 0;
  int64_t ready_mono_ = 0;
  Loop::TimerId restart_timer_ = 0;
  Loop::TimerId grace_timer_ = 0;
  bool shutting_down_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::driver::nomad
