// The task-driver plugin API's messages (proto/driver.proto) to and from
// the driver contract's types (driver/driver.h). Owns: every conversion,
// and the checks on what a driver plugin answers (untrusted bytes: sizes,
// ranges; errors name the message and field). Does not own: the calls
// (driver/remote).
#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "driver/driver.h"

namespace outpost::driver::remote {

inline constexpr const char kService[] = "outpost.driver.v1.Driver";
inline constexpr const char kPluginType[] = "TaskDriver";
inline constexpr const char kApiVersion[] = "v1";

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
Result<Capabilities> DecodeCapabilities(std::string_view bytes);
Result<Fingerprint> DecodeFingerprint(std::string_view bytes);
// A ConfigSchema: (name, type, required) per field. Names must be unique
// and types one of string, number, bool, list, object.
struct SchemaField {
  std::string name;
  std::string type;
  bool required = false;
};
Result<std::vector<SchemaField>> DecodeConfigSchema(std::string_view bytes);
Result<std::string> EncodeConfigSchema(const std::vector<SchemaField>& fields);

// TaskEvents: a driver's own events, each with its sequence number, and
// the cursor to ask with next. A reply holds at most kMaxEventsPerReply
// events with strictly growing sequences, each with a type.
inline constexpr size_t kMaxEventsPerReply = 256;
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

// The plugin side (the plugin library and tests): the reverse directions.
Result<TaskConfig> DecodeStartTask(std::string_view bytes);
Result<std::string> EncodeStartTaskResponse(const TaskHandle& handle);
Result<std::string> EncodeWaitTask(bool exited, const ExitResult& result);
Result<std::string> EncodeCapabilities(const Capabilities& caps);
Result<std::string> EncodeFingerprint(const Fingerprint& fp);
Result<std::string> EncodeTaskStatus(const TaskStatus& status);
Result<std::string> DecodeTaskId(std::string_view bytes);
Result<uint64_t> DecodeTaskEvents(std::string_view bytes);
Result<std::string> EncodeTaskEventsResponse(const EventBatch& batch);

}  // namespace outpost::driver::remote
