// The plugin side of outpost.driver.v1.Driver: decoding the agent's
// requests and encoding the replies, over the public types of
// include/outpost/driver.h. Used by the plugin library (sdk/driver.cc) and
// by the agent's tests and fuzz targets to play a driver plugin; the agent
// itself speaks the other direction (driver/remote_codec). Errors name the
// message. Does not own: what a driver answers (sdk/driver.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "outpost/driver.h"

namespace outpost::driverproto {

// Requests.
Result<plugin_sdk::TaskConfig> DecodeStartTask(std::string_view bytes);
Result<plugin_sdk::TaskHandle> DecodeRecoverTask(std::string_view bytes);
// TaskIdRequest: WaitTask, InspectTask, TaskStats.
Result<std::string> DecodeTaskId(std::string_view bytes);
struct StopTaskRequest {
  std::string id;
  int64_t timeout_nanos = 0;
  std::string signal;
};
Result<StopTaskRequest> DecodeStopTask(std::string_view bytes);
struct DestroyTaskRequest {
  std::string id;
  bool force = false;
};
Result<DestroyTaskRequest> DecodeDestroyTask(std::string_view bytes);
struct SignalTaskRequest {
  std::string id;
  std::string signal;
};
Result<SignalTaskRequest> DecodeSignalTask(std::string_view bytes);
struct ExecTaskRequest {
  std::string id;
  std::vector<std::string> cmd;
  int64_t timeout_nanos = 0;
};
Result<ExecTaskRequest> DecodeExecTask(std::string_view bytes);
// TaskEventsRequest: the cursor (events after it).
Result<uint64_t> DecodeTaskEvents(std::string_view bytes);

// Replies.
Result<std::string> EncodeCapabilities(const plugin_sdk::Capabilities& caps);
Result<std::string> EncodeFingerprint(const plugin_sdk::Fingerprint& fp);
Result<std::string> EncodeConfigSchema(const std::vector<plugin_sdk::ConfigField>& fields);
// The handle without its config (outpost keeps its own); driver_state is
// sent when not empty, and refused when larger than kMaxBytesField.
Result<std::string> EncodeStartTaskResponse(const plugin_sdk::TaskHandle& handle);
// exited false: the long poll ran out (no result).
Result<std::string> EncodeWaitTask(bool exited, const plugin_sdk::ExitResult& result);
Result<std::string> EncodeTaskStatus(const plugin_sdk::TaskStatus& status);
Result<std::string> EncodeTaskStats(const plugin_sdk::TaskStats& stats);
// Output beyond kMaxExecOutput is cut off (and truncated set).
Result<std::string> EncodeExecTask(const plugin_sdk::ExecResult& result);
struct SequencedEvent {
  uint64_t sequence = 0;
  plugin_sdk::TaskEvent event;
};
// events in order of sequence, at most kMaxEventsPerReply; next: the
// cursor to ask with next.
Result<std::string> EncodeTaskIds(const std::vector<std::string>& ids);
Result<std::string> EncodeTaskEventsResponse(const std::vector<SequencedEvent>& events, uint64_t next);

}  // namespace outpost::driverproto
