// libFuzzer target: the protobuf payloads of every API request the agent
// decodes (nanopb, PB_ENABLE_MALLOC). Decoding arbitrary bytes must never
// crash or leak (PbOwned releases what nanopb allocated).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent.pb.h"
#include "base/pb.h"
#include "job.pb.h"
#include "task.pb.h"

namespace {

template <typename T>
void Try(std::string_view bytes, const pb_msgdesc_t* fields) {
  outpost::PbOwned<T> msg(fields);
  (void)msg.Decode(bytes, "fuzz");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view b(reinterpret_cast<const char*>(data), size);
  Try<outpost_v1_StatusRequest>(b, outpost_v1_StatusRequest_fields);
  Try<outpost_v1_StatusResponse>(b, outpost_v1_StatusResponse_fields);
  Try<outpost_v1_StartTaskRequest>(b, outpost_v1_StartTaskRequest_fields);
  Try<outpost_v1_TaskIdRequest>(b, outpost_v1_TaskIdRequest_fields);
  Try<outpost_v1_StopTaskRequest>(b, outpost_v1_StopTaskRequest_fields);
  Try<outpost_v1_DestroyTaskRequest>(b, outpost_v1_DestroyTaskRequest_fields);
  Try<outpost_v1_SignalTaskRequest>(b, outpost_v1_SignalTaskRequest_fields);
  Try<outpost_v1_ExecTaskRequest>(b, outpost_v1_ExecTaskRequest_fields);
  Try<outpost_v1_ReadLogsRequest>(b, outpost_v1_ReadLogsRequest_fields);
  Try<outpost_v1_WatchEventsRequest>(b, outpost_v1_WatchEventsRequest_fields);
  Try<outpost_v1_ListTasksResponse>(b, outpost_v1_ListTasksResponse_fields);
  Try<outpost_v1_ReadLogsResponse>(b, outpost_v1_ReadLogsResponse_fields);
  Try<outpost_v1_WatchEventsResponse>(b, outpost_v1_WatchEventsResponse_fields);
  Try<outpost_v1_SubmitJobRequest>(b, outpost_v1_SubmitJobRequest_fields);
  Try<outpost_v1_JobIdRequest>(b, outpost_v1_JobIdRequest_fields);
  Try<outpost_v1_StopJobRequest>(b, outpost_v1_StopJobRequest_fields);
  Try<outpost_v1_RestartJobRequest>(b, outpost_v1_RestartJobRequest_fields);
  Try<outpost_v1_JobInfo>(b, outpost_v1_JobInfo_fields);
  Try<outpost_v1_ListJobsResponse>(b, outpost_v1_ListJobsResponse_fields);
  Try<outpost_v1_SubmitJobResponse>(b, outpost_v1_SubmitJobResponse_fields);
  return 0;
}
