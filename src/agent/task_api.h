// API handlers for tasks (methods StartTask ... WatchEvents on the
// "outpost.v1.Agent" service, messages in proto/task.proto). Owns decoding
// requests, long-polls for logs and events, and encoding replies. The work
// itself is task::TaskManager's.
#pragma once

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

// cgroups: for whether each task's limits are enforced (TaskInfo.limits).
void RegisterTaskApi(task::TaskManager* tasks, const cgroup::Cgroups* cgroups, task::EventLog* events, Loop* loop,
                     wire::RpcServer* server);

}  // namespace agent
}  // namespace outpost
