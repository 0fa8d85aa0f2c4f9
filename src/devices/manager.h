// The device manager: the kubelet's ManagerImpl without its sockets
// (docs/devices.md). Owns: the resources (name -> the plugin endpoint
// serving it, its options, its devices with health and NUMA topology), what
// ListAndWatch updates and a stream's end do to them, the grace period
// after which a resource whose plugin is gone is dropped (a Loop timer),
// the allocations (task id -> resource -> device IDs, with the plugin's
// ContainerAllocateResponse once Allocate answered), choosing devices as
// the kubelet does, the reason a task must wait, and persisting through the
// checkpoint after every change that the file records.
// Does not own: sockets, gRPC calls and the registration sequences (their
// handlers call Connect, Update, Disconnect), the order of a task's start
// and the calls to the plugin it needs (task/ calls WaitReason, Begin,
// Reserve, Commit or Unreserve, then Release when the task ends for good),
// or what a grant does to a task (apply.h, the drivers).
//
// A task's start, per requested resource:
//   Begin -> reuse (it holds the devices: no Allocate, its stored response
//   applies), or: [GetPreferredAllocation(plan.preferred) if plan.ask] ->
//   Reserve(answer) -> Allocate(ids) -> Commit(response) | Unreserve.
// Reserved devices count as taken from Reserve on, so two starts in flight
// never get the same device; Reserve chooses again from the state at that
// moment (the plugin's answer is only a preference), so a change between
// Begin and Reserve cannot make it give a device twice or fewer than asked.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "devices/checkpoint.h"
#include "devices/codec.h"
#include "devices/validate.h"
#include "loop/loop.h"

namespace outpost::devices {

// How long a resource whose plugin went away stays (its devices unhealthy)
// before it is dropped: the kubelet's endpointStopGracePeriod.
constexpr int64_t kDefaultGraceNanos = 5 * 60 * 1000000000LL;

// A resource as the manager knows it.
struct ResourceState {
  std::string name;
  std::string endpoint;  // the plugin's socket; "" when restored from the checkpoint until it registers
  PluginOptions options;
  bool connected = false;       // registered, its ListAndWatch stream open
  int64_t disconnected_at = 0;  // monotonic; when it last lost its plugin (or was restored)
  std::vector<Device> devices;  // the plugin's last list, in its order
  Loop::TimerId expiry = 0;     // the grace period's timer while disconnected
};

// Devices a task holds (or has reserved) of one resource.
struct Allocation {
  std::string task;
  std::string resource;
  std::vector<std::string> devices;  // in the order they were chosen (and sent in Allocate)
  bool committed = false;            // Allocate answered: response is the plugin's
  ContainerAllocateResponse response;
};

// What a task's start does for one resource (Begin).
struct Plan {
  bool reuse = false;  // the task holds its devices: no Allocate, its stored response applies
  bool ask = false;    // call GetPreferredAllocation with preferred first (the plugin offers it)
  PreferredRequest preferred;
};

// Something the agent tells as an event (`outpost events`).
struct DeviceEvent {
  enum Kind { kAdded, kRemoved, kHealthChanged, kDisconnected, kExpired } kind;
  std::string resource;
  std::string device;    // kAdded, kRemoved, kHealthChanged
  bool healthy = false;  // kAdded, kHealthChanged: the new health
};

class Manager {
 public:
  using EventFn = std::function<void(const DeviceEvent&)>;

  // checkpoint may be null (nothing persisted: tests).
  Manager(Loop* loop, CheckpointFile* checkpoint, int64_t grace_nanos = kDefaultGraceNanos);
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  void SetEventFn(EventFn fn) { on_event_ = std::move(fn); }

  // At the agent's start, before any Connect: the checkpoint's resources
  // come back disconnected with no devices, each with a grace period from
  // now (as the kubelet's stopped endpoints), and its allocations stay with
  // their tasks. Unless the node rebooted since it was written (boot ids
  // differ, both known): then no task that held devices runs, and its
  // allocations are dropped (a task allocates anew at its next start).
  // boot_id is the one written with every later checkpoint.
  void Restore(const CheckpointData& data, const std::string& boot_id);
  // The checkpoint's content now.
  CheckpointData Snapshot() const;

  // ---- the plugins' side -------------------------------------------------

  // A plugin for resource registered (Register, or a DevicePlugin found in
  // kubelet_plugins_dir) and answered GetDevicePluginOptions: it replaces
  // any earlier endpoint of the resource, as with the kubelet. A grace
  // period running stops. Its devices stay as they were (unhealthy after a
  // stream's end) until its first ListAndWatch message.
  void Connect(const std::string& resource, const std::string& endpoint, const PluginOptions& options);
  // A ListAndWatch message from endpoint: the resource's complete list.
  // Ignored (false) unless endpoint is the resource's current one: a
  // replaced instance's stream no longer speaks for it.
  bool Update(const std::string& resource, const std::string& endpoint, std::vector<Device> devices);
  // endpoint's stream ended, or its plugin was deregistered: the devices
  // turn unhealthy and the grace period starts (one already running keeps
  // its deadline). Ignored (false) unless endpoint is the resource's current
  // one: an old instance going away does not stop a newer one
  // (kubernetes#121994).
  bool Disconnect(const std::string& resource, const std::string& endpoint);

  // ---- the tasks' side ---------------------------------------------------

  // "" when every request can be served now, else why not, one clause per
  // resource joined by "; ": `no device plugin for resource
  // vendor.example/camera`, `resource vendor.example/camera: its device
  // plugin is not connected`, `resource vendor.example/camera: 1 of 2
  // healthy devices free, 2 needed`. Devices the task holds count as its.
  std::string WaitReason(const std::string& task, const std::vector<Request>& requests) const;
  // Step 1 for one resource. numa: the task's NUMA nodes (NumaNodes of its
  // cpuset.mems; empty: no preference). Drops what the task holds of the
  // resource if it is not count committed devices (its request changed, or
  // a start failed half-way). Fails with Code kUnavailable and the
  // kubelet's words when the devices are not there:
  //   cannot allocate unregistered device vendor.example/camera
  //   no healthy devices present; cannot allocate unhealthy devices vendor.example/camera
  //   requested number of devices unavailable for vendor.example/camera. Requested: 2, Available: 1
  Result<Plan> Begin(const std::string& task, const std::string& resource, int64_t count,
                     const std::vector<int64_t>& numa = {});
  // Step 2: chooses count devices and reserves them for the task (the same
  // checks and errors as Begin). preferred: the plugin's answer, if asked;
  // only the IDs that are free and healthy count, the rest is filled as the
  // kubelet does. Returns the devices to send in Allocate.
  Result<std::vector<std::string>> Reserve(const std::string& task, const std::string& resource, int64_t count,
                                           const std::vector<std::string>& preferred = {},
                                           const std::vector<int64_t>& numa = {});
  // Step 3: Allocate answered; the reservation becomes the task's, with the
  // response it gets at every start. Persisted. NotFound without one.
  Status Commit(const std::string& task, const std::string& resource, ContainerAllocateResponse response);
  // Allocate failed (or the start was given up): the reservation is freed.
  void Unreserve(const std::string& task, const std::string& resource);
  // Before a start: frees what the task holds that requests (its spec's)
  // no longer ask for, a resource left out or a changed count.
  void Trim(const std::string& task, const std::vector<Request>& requests);
  // The task ended for good (not a restart): everything it holds is freed.
  void Release(const std::string& task);
  // After recovery: frees what tasks not in live (sorted) hold.
  void Retain(const std::vector<std::string>& live);

  // The committed responses of a task, by resource name (what apply.h
  // merges). The pointers stay valid until the manager next changes.
  std::vector<std::pair<std::string, const ContainerAllocateResponse*>> ResponsesOf(const std::string& task) const;
  // What the task holds of resource (committed or not); null if nothing.
  const Allocation* Held(const std::string& task, const std::string& resource) const;
  const ResourceState* Find(const std::string& resource) const;
  const std::vector<ResourceState>& resources() const { return resources_; }       // by name
  const std::vector<Allocation>& allocations() const { return allocations_; }      // by task, then resource

 private:
  // Candidates of a resource for a task, split by NUMA affinity.
  struct Candidates {
    std::vector<const Device*> aligned, unaligned, none;  // the plugin's order within each
    size_t available = 0;
  };
  Result<Candidates> Check(const std::string& task, const std::string& resource, int64_t count,
                           const std::vector<int64_t>& numa) const;
  std::vector<std::string> InUse(const std::string& resource, const std::string& except_task) const;
  ResourceState* FindMutable(const std::string& resource);
  std::vector<Allocation>::iterator Lower(const std::string& task, const std::string& resource);
  void Erase(std::vector<Allocation>::iterator it);  // persists when it was committed
  void StartGrace(ResourceState* r);
  void Expire(const std::string& resource);
  void Emit(DeviceEvent::Kind kind, const std::string& resource, const std::string& device = "", bool healthy = false);
  void Persist();

  Loop* loop_;
  CheckpointFile* checkpoint_;
  int64_t grace_nanos_;
  EventFn on_event_;
  std::vector<ResourceState> resources_;  // sorted by name
  std::vector<Allocation> allocations_;   // sorted by (task, resource)
  std::string boot_id_;                   // written with the checkpoint (Restore's)
};

// The NUMA nodes of a cpuset list ("0-1,3" -> 0 1 3); empty for "" or a
// list that does not parse (the job spec checked it).
std::vector<int64_t> NumaNodes(const std::string& list);

}  // namespace outpost::devices
