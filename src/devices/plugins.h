// The kubelet's device plugins, hosted (docs/devices.md). Owns: the
// `DevicePlugin` plugin type on outpost's registration engine (found in
// kubelet_plugins_dir, spoken to over gRPC), the `v1beta1.Registration`
// server on <device_plugins_dir>/kubelet.sock (a plugin's Register, checked
// as the kubelet checks it, goes through the same engine), each resource's
// GetDevicePluginOptions and ListAndWatch stream, the calls a task's start
// makes (GetPreferredAllocation, Allocate, PreStartContainer), the device
// manager (devices/manager) and its checkpoint, and the events. Does not
// own: where in a task's start allocation happens (task/), how a driver
// applies what a task gets (driver/), registration itself (plugin/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "devices/apply.h"
#include "devices/checkpoint.h"
#include "devices/manager.h"
#include "loop/loop.h"
#include "plugin/registry.h"
#include "wire/grpc_server.h"

namespace outpost::devices {


struct DevicePluginsOptions {
  std::string dir;         // device_plugins_dir ("" = no kubelet.sock)
  std::string state_dir;   // the checkpoint's
  std::string boot_id;
  int64_t grace_nanos = kDefaultGraceNanos;
  int64_t call_timeout_nanos = 10LL * 1000000000;  // the kubelet dials for 10 s
  // An event for `outpost events`: type and message.
  std::function<void(const std::string& type, const std::string& message,
                     const std::map<std::string, std::string>& annotations)>
      on_event;
  // Devices came or turned healthy: tasks waiting for them may start.
  std::function<void()> on_devices_changed;
};

class DevicePlugins : public plugin::Handler {
 public:
  DevicePlugins(Loop* loop, plugin::Registry* registry, DevicePluginsOptions options);
  ~DevicePlugins() override;
  DevicePlugins(const DevicePlugins&) = delete;
  DevicePlugins& operator=(const DevicePlugins&) = delete;

  // Loads the checkpoint; then, with a dir, removes the sockets in it (the
  // kubelet's signal to plugins that a new kubelet is up) and serves
  // kubelet.sock. A problem with the checkpoint is logged, not fatal.
  Status Start();
  // After the tasks were recovered: allocations of tasks that are gone go.
  void Retain(const std::vector<std::string>& live_tasks) { manager_.Retain(live_tasks); }

  // ---- a task's start ------------------------------------------------------
  // Why the task cannot have its devices now ("" = it can): it then waits.
  std::string WaitReason(const std::string& task, const std::vector<Request>& requests) const {
    return manager_.WaitReason(task, requests);
  }
  // Chooses and allocates every requested resource (or reuses what the
  // task holds), calls PreStartContainer where a plugin asks for it, and
  // merges the responses into what the task gets. Unavailable: the devices
  // are not there now (the task waits); other errors fail the start.
  void Allocate(const std::string& task, const std::vector<Request>& requests, const std::string& cpuset_mems,
                std::function<void(Result<Grant>)> done);
  // The task ended for good: its devices are free.
  void Release(const std::string& task) { manager_.Release(task); }
  // What the task holds: resource -> device ids.
  std::vector<std::pair<std::string, std::vector<std::string>>> HeldBy(const std::string& task) const;

  const Manager& manager() const { return manager_; }
  // The plugin serving a resource now ("" = none).
  std::string EndpointOf(const std::string& resource) const;
  const std::string& problem() const { return problem_; }

  // plugin::Handler
  const char* type() const override { return kPluginType; }
  Result<std::string> Validate(const plugin::Info& info) override;
  void Register(const plugin::Instance& instance, std::function<void(Status)> done) override;
  void Deregister(const plugin::Instance& instance) override;
  void Changed(const std::string& name) override;
  void Expired(const std::string& name) override;
  int64_t GraceNanos() const override { return opts_.grace_nanos; }

 private:
  struct Stream;

  void OnRegisterCall(std::string_view request, wire::GrpcResponder responder);
  void Watch(const plugin::Instance& instance);
  void StopWatching(const std::string& resource);
  void AllocateNext(std::shared_ptr<struct AllocateOp> op);
  void ReserveAndAllocate(std::shared_ptr<struct AllocateOp> op, wire::GrpcClient* client,
                          std::vector<std::string> preferred);
  void Failed(const struct AllocateOp& op, const char* rpc, const Error& e);
  void PreStart(std::shared_ptr<struct AllocateOp> op, size_t i);
  wire::GrpcClient* ClientFor(const std::string& resource) const;
  void Event(const std::string& type, const std::string& message, const std::string& resource);

  Loop* loop_;
  plugin::Registry* registry_;
  DevicePluginsOptions opts_;
  CheckpointFile checkpoint_;
  Manager manager_;
  std::unique_ptr<wire::GrpcServer> server_;
  std::map<std::string, std::unique_ptr<Stream>> streams_;  // by resource
  std::string problem_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::devices
