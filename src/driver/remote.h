// Task drivers in other processes: the `TaskDriver` plugin type. Owns: the
// plugin handler (validating a driver plugin, asking its capabilities and
// fingerprint, putting a RemoteDriver for it into the driver registry) and
// RemoteDriver, the Driver contract over ttRPC (proto/driver.proto) to the
// plugin's active instance: every call with a deadline, WaitTask as a long
// poll asked again across deadlines and reconnections, the fingerprint
// polled. A hung driver costs a deadline, never the loop. Does not own:
// registration and connections (plugin/), what a task is (task/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/driver.h"
#include "driver/registry.h"
#include "driver/remote_codec.h"
#include "loop/loop.h"
#include "plugin/registry.h"

namespace outpost::driver {

struct RemoteOptions {
  int64_t call_timeout_nanos = 10LL * 1000000000;       // every call but the ones below
  int64_t start_timeout_nanos = 60LL * 1000000000;      // StartTask (pulling an image may take a while)
  int64_t wait_poll_nanos = 30LL * 1000000000;          // one WaitTask long poll
  int64_t fingerprint_every_nanos = 30LL * 1000000000;  // Fingerprint polled this often
  int64_t events_poll_nanos = 30LL * 1000000000;        // one TaskEvents long poll
  int64_t events_retry_nanos = 1LL * 1000000000;        // after a bad or too quick empty TaskEvents answer
};

class RemoteDriver : public Driver {
 public:
  RemoteDriver(Loop* loop, plugin::Registry* plugins, std::string name, RemoteOptions options);
  ~RemoteDriver() override;

  std::string Name() const override { return name_; }
  std::string Unreachable() const override;
  Capabilities GetCapabilities() const override { return caps_; }
  Fingerprint GetFingerprint() override;
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
  void ListTasks(ListCallback done) override;
  uint64_t SubscribeEvents(EventCallback cb) override;
  void UnsubscribeEvents(uint64_t id) override;

  Status CheckConfig(const std::string& config_json) const override;

  // From the handler: what the instance said when it registered. A driver
  // without ConfigSchema (Unimplemented) takes any config.
  void SetSchema(bool has_schema, std::vector<remote::SchemaField> fields) {
    has_schema_ = has_schema;
    schema_ = std::move(fields);
  }
  void SetCapabilities(const Capabilities& caps) { caps_ = caps; }
  void SetFingerprint(const Fingerprint& fp) { fingerprint_ = fp; }
  // The active instance changed or reconnected: (re)starts the TaskEvents
  // long poll. Waits cut off by a dropped connection are asked again once
  // the task is recovered (RecoverTask) on the instance that has it now.
  void OnInstanceChanged();
  size_t pending_waits() const { return waits_.size(); }
  bool polling_events() const { return events_asking_ || events_timer_ != 0; }

 private:
  struct Wait {
    std::string id;
    std::vector<WaitCallback> callbacks;
    bool asking = false;  // a WaitTask call is in flight
  };

  // Calls method on the instance that has `task` (below), or on the
  // active instance (no task, or its instance is gone); Unavailable
  // "driver X is disconnected" when there is none.
  void Call(const char* method, Result<std::string> payload, int64_t timeout_nanos,
            std::function<void(Result<std::string>)> done, const std::string& task = std::string());
  void Done(const char* method, const std::string& task, Result<std::string> payload, DoneCallback done);
  const plugin::Instance* InstanceFor(const std::string& task) const;
  void AskWait(const std::string& id);
  void PollFingerprint();
  // One TaskEvents long poll at a time while an instance is active; stops
  // for good (until the instance changes) when the driver answers
  // Unimplemented.
  void AskEvents();

  Loop* loop_;
  plugin::Registry* plugins_;
  std::string name_;
  RemoteOptions options_;
  Capabilities caps_;
  Fingerprint fingerprint_;
  bool has_schema_ = false;
  std::vector<remote::SchemaField> schema_;
  std::map<std::string, Wait> waits_;  // by task id
  // The instance that started or recovered each task: its calls go there
  // while it is connected, so a newer instance (an upgrade) takes new
  // starts and takes over a task only when the task's own instance goes.
  std::map<std::string, uint64_t> owners_;
  Loop::TimerId fingerprint_timer_ = 0;
  std::map<uint64_t, EventCallback> subscribers_;
  uint64_t next_subscriber_ = 1;
  uint64_t events_cursor_ = 0;
  bool events_asking_ = false;
  bool events_unimplemented_ = false;
  Loop::TimerId events_timer_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The plugin handler of type "TaskDriver", API version "v1". A driver
// registers under its plugin name, which must not be a built-in driver's.
class TaskDriverHandler : public plugin::Handler {
 public:
  // added(name): a driver of that name is in the driver registry now (jobs
  // that named it may be valid now); changed(name): the driver's active
  // instance changed (tasks to recover); expired(name): no instance for the
  // grace period (its tasks are lost).
  struct Hooks {
    std::function<void(const std::string& name)> added;
    std::function<void(const std::string& name)> changed;
    std::function<void(const std::string& name)> expired;
  };
  TaskDriverHandler(Loop* loop, plugin::Registry* plugins, Registry* drivers, RemoteOptions options, Hooks hooks);
  ~TaskDriverHandler() override;

  const char* type() const override;
  Result<std::string> Validate(const plugin::Info& info) override;
  void Register(const plugin::Instance& instance, std::function<void(Status)> done) override;
  void Changed(const std::string& name) override;
  void Expired(const std::string& name) override;

  RemoteDriver* Find(const std::string& name) const;

 private:
  // The last step of Register: the driver's ConfigSchema, then the driver
  // goes into the registry.
  void AskSchema(const std::string& name, wire::RpcClient* client, const Capabilities& c, const Fingerprint& fp,
                 std::function<void(Status)> done);
  Loop* loop_;
  plugin::Registry* plugins_;
  Registry* drivers_;
  RemoteOptions options_;
  Hooks hooks_;
  std::map<std::string, std::unique_ptr<RemoteDriver>> remotes_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::driver
