// The ReadLogs method of the task API (`outpost logs`, and the log tails of
// `inspect`): a task's stdout, stderr or both merged by time, its last lines,
// from a second on (the time index), with the times of its parts, and the
// long poll of `logs -f`. Reading is logs/log_files'; this decodes, polls
// and encodes.
#pragma once

#include <string_view>

#include "wire/rpc_server.h"

namespace outpost {
class Loop;
namespace task {
class TaskManager;
}
namespace agent {

void ServeReadLogs(task::TaskManager* tm, Loop* loop, std::string_view payload, wire::Responder r);

}  // namespace agent
}  // namespace outpost
