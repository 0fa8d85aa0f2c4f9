// libFuzzer target for what a driver plugin answers (driver/remote_codec):
// the input is tried as every reply the agent decodes (StartTask, WaitTask,
// InspectTask, TaskStats, ExecTask, Capabilities, Fingerprint,
// ConfigSchema, TaskEvents, ListTasks) and as every request a plugin decodes
// (driverproto/plugin_codec). Each decodes or gives an
// error; what decodes keeps the ranges the agent relies on.
#include <cstddef>
#include <cstdint>
#include <string>

#include "driver/remote_codec.h"
#include "driverproto/plugin_codec.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace outpost::driver;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  TaskConfig config;
  config.id = "j.t";
  if (auto h = remote::DecodeStartTaskResponse(in, config); h.ok()) {
    Check(h->version > 0 && h->pid >= 0 && h->config.id == "j.t");
  }
  ExitResult exit;
  if (auto w = remote::DecodeWaitTask(in, &exit); w.ok() && *w) {
    Check(exit.exit_code >= -1 && exit.exit_code <= 255 && exit.signal >= 0 && exit.signal <= 64);
  }
  if (auto s = remote::DecodeTaskStatus(in); s.ok()) {
    Check(s->state == TaskState::kUnknown || s->state == TaskState::kRunning || s->state == TaskState::kExited);
  }
  (void)remote::DecodeTaskStats(in);
  if (auto e = remote::DecodeExecTask(in); e.ok()) Check(e->output.size() <= 4096);
  (void)remote::DecodeCapabilities(in);
  if (auto schema = remote::DecodeConfigSchema(in); schema.ok()) {
    for (const auto& f : *schema) Check(!f.name.empty() && !f.type.empty());
  }
  if (auto f = remote::DecodeFingerprint(in); f.ok()) {
    Check(f->health == Health::kUndetected || f->health == Health::kUnhealthy || f->health == Health::kHealthy);
  }
  if (auto b = remote::DecodeTaskEventsResponse(in); b.ok()) {
    Check(b->events.size() <= remote::kMaxEventsPerReply);
    uint64_t last = 0;
    for (const auto& e : b->events) {
      Check(e.sequence > last && !e.event.type.empty());
      last = e.sequence;
    }
    Check(b->events.empty() || b->next >= last);
  }
  if (auto ids = remote::DecodeTaskIds(in); ids.ok()) {
    for (const std::string& id : *ids) Check(!id.empty() && id.size() <= 255 && id.find('/') == std::string::npos);
  }
  namespace proto = outpost::driverproto;
  (void)proto::DecodeTaskEvents(in);
  (void)proto::DecodeStartTask(in);
  (void)proto::DecodeRecoverTask(in);
  (void)proto::DecodeTaskId(in);
  (void)proto::DecodeStopTask(in);
  (void)proto::DecodeDestroyTask(in);
  (void)proto::DecodeSignalTask(in);
  (void)proto::DecodeExecTask(in);
  return 0;
}
