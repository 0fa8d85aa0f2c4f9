// The job layer wired into the agent. Owns: JobTaskRunner, which gives the
// job supervisors (job/) the TaskManager as their TaskRunner and TaskStore,
// and the API handlers for jobs (methods SubmitJob, ListJobs, InspectJob,
// StopJob, RemoveJob, RestartJob on "outpost.v1.Agent", messages in
// proto/job.proto). The work itself is JobManager's.
#pragma once

#include "job/manager.h"
#include "job/supervisor.h"

namespace outpost {
class Loop;
namespace wire {
class RpcServer;
}
namespace agent {

class TaskManager;

class JobTaskRunner : public job::TaskRunner, public job::TaskStore {
 public:
  explicit JobTaskRunner(TaskManager* tm) : tm_(tm) {}
  void Start(const task::TaskConfig& config, std::function<void(Status)> done) override;
  Status Wait(const std::string& id, std::function<void(const task::ExitResult&)> done) override;
  void Stop(const std::string& id, int64_t timeout_nanos, std::function<void(Status)> done) override;
  void Event(const task::TaskEvent& ev) override;
  Status UpdateResources(const std::string& id, const task::Resources& r) override;
  Status ApplyJobResources(const std::string& job, const task::Resources& r) override;
  Result<Instance> Lookup(const std::string& task_id) override;
  void Purge(const std::string& task_id, std::function<void(Status)> done) override;

 private:
  TaskManager* tm_;
};

void RegisterJobApi(job::JobManager* jobs, TaskManager* tasks, wire::RpcServer* server);

}  // namespace agent
}  // namespace outpost
