// The agent's side of the task-driver plugin API (proto/driver.proto):
// requests from the driver contract's types (driver/driver.h), answers back
// into them. Owns: those conversions, and the checks on what a driver
// plugin answers (untrusted bytes: sizes, ranges; errors name the message
// and field). Does not own: the calls (driver/remote), the nanopb plumbing
// and limits shared with the plugin library (driverproto/common), the
// plugin's direction (driverproto/plugin_codec).
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "driver/driver.h"
#include "driverproto/common.h"

namespace outpost::driver::remote {

using driverproto::kApiVersion;
using driverproto::kMaxEventsPerReply;
using driverproto::kPluginType;
using driverproto::kService;

Result<std::string> EncodeStartTask(const TaskConfig& config);
Result<TaskHandle> DecodeStartTaskResponse(std::string_view bytes, const TaskConfig& config);
Result<std::string> EncodeRecoverTask(const TaskHandle& handle);
Result<std::string> EncodeTaskId(const std::string& id);
// exited false: the long poll ran out, ask again.
Result<bool> DecodeWaitTask(std::string_view bytes, ExitResult* result);
Result<std::string> EncodeStopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal);
Result<std::string> EncodeDestroyTask(const std::string& id, bool force);
Result<std::string> EncodeSignalTask(const std::string& id, const std::string& signal);
Result<std::string> EncodeExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos);
Result<ExecResult> DecodeExecTask(std::string_view bytes);
Result<TaskStatus> DecodeTaskStatus(std::string_view bytes);
Result<TaskStats> DecodeTaskStats(std::string_view bytes);
// ListTasks: the ids a driver reports (each a valid task id).
Result<std::vector<std::string>> DecodeTaskIds(std::string_view bytes);
Result<Capabilities> DecodeCapabilities(std::string_view bytes);
Result<Fingerprint> DecodeFingerprint(std::string_view bytes);
// A ConfigSchema: (name, type, required) per field. Names must be unique
// and types one of string, number, bool, list, object.
struct SchemaField {
  std::string name;
  std::string type;
  bool required = false;
  std::vector<SchemaField> fields;  // an object's, or each item's of a list of objects
  std::string format;               // "absolute_path" or ""
};
Result<std::vector<SchemaField>> DecodeConfigSchema(std::string_view bytes);

// TaskEvents: a driver's own events, each with its sequence number, and
// the cursor to ask with next. A reply holds at most kMaxEventsPerReply
// events with strictly growing sequences, each with a type.
struct SequencedEvent {
  uint64_t sequence = 0;
  TaskEvent event;
};
struct EventBatch {
  std::vector<SequencedEvent> events;
  uint64_t next = 0;
};
Result<std::string> EncodeTaskEvents(uint64_t after);
Result<EventBatch> DecodeTaskEventsResponse(std::string_view bytes);

}  // namespace outpost::driver::remote
