// The job layer wired into the agent. Owns: JobTaskRunner, which gives the
// job supervisors (job/) the task::TaskManager as their TaskRunner and
// TaskStore,
// and the API handlers for jobs (methods SubmitJob, ListJobs, InspectJob,
// StopJob, RemoveJob, RestartJob on "outpost.v1.Agent", messages in
// proto/job.proto). The work itself is JobManager's.
#pragma once

#include "devices/plugins.h"
#include "job/manager.h"
#include "job/supervisor.h"

namespace outpost {
class Loop;
namespace wire {
class RpcServer;
}
namespace task {
class TaskManager;
class EventLog;
}
namespace cgroup {
class Cgroups;
}
namespace agent {


class JobTaskRunner : public job::TaskRunner, public job::TaskStore {
 public:
  // cgroups: for which limits are enforced (may be null: none known).
  // devices: null when device plugins are off.
  JobTaskRunner(task::TaskManager* tm, const cgroup::Cgroups* cgroups, devices::DevicePlugins* devices)
      : tm_(tm), cgroups_(cgroups), devices_(devices) {}
  void Start(const driver::TaskConfig& config, std::function<void(Status)> started, ExitCallback exited) override;
  Status Watch(const std::string& id, ExitCallback exited) override;
  void Stop(const std::string& id, int64_t timeout_nanos, std::function<void(Status)> done) override;
  void AbortStart(const std::string& id) override;
  void CheckAlive(const std::string& id, std::function<void(bool)> done) override;
  void ExecCheck(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                 driver::Driver::ExecCallback done) override;
  std::string TaskNetns(const std::string& id) const override;
  Status UpdateResources(const std::string& id, const cgroup::Resources& r) override;
  Status ApplyJobResources(const std::string& job, const cgroup::Resources& r) override;
  std::string DriverProblem(const std::string& driver) const override;
  std::string DeviceProblem(const std::string& task_id, const std::vector<devices::Request>& requests) const override;
  void ReleaseDevices(const std::string& task_id) override;
  std::string LimitsNotEnforced(const std::string& job, const std::string& task_id,
                                const cgroup::Resources& r) const override;
  Result<Instance> Lookup(const std::string& task_id) override;
  void Purge(const std::string& task_id, std::function<void(Status)> done) override;
  std::vector<std::pair<std::string, std::string>> EndedJobTasks() override;

 private:
  task::TaskManager* tm_;
  const cgroup::Cgroups* cgroups_;
  devices::DevicePlugins* devices_;
  std::function<void()> devices_freed_;
 public:
  // Devices freed by a task that ended let waiting tasks try again.
  void SetDevicesFreed(std::function<void()> fn) { devices_freed_ = std::move(fn); }
};

// devices: null when device plugins are off.
void RegisterJobApi(Loop* loop, job::JobManager* jobs, task::TaskManager* tasks, const cgroup::Cgroups* cgroups,
                    const devices::DevicePlugins* devices, task::EventLog* events, wire::RpcServer* server);

}  // namespace agent
}  // namespace outpost
