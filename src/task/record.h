// What the task layer persists per task: <state_dir>/tasks/<id>.json.
// Owns: the record (the driver's TaskHandle with the config the task was
// started with, the driver's name, the task's cgroup and its OOM-kill count
// at start, the identity it runs as, and, once it has ended, its exit) and
// its versioned JSON encoding. Reads records of the first on-disk format
// (version 1, written by the exec driver itself) so an upgrade keeps its
// tasks.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "driver/driver.h"

namespace outpost::task {

struct TaskRecord {
  driver::TaskHandle handle;  // handle.config is the task's config
  uint64_t oom_kills_at_start = 0;
  bool exited = false;
  driver::ExitResult exit;
  int64_t completed_at_unix_nanos = 0;

  const driver::TaskConfig& config() const { return handle.config; }
  const std::string& driver() const { return handle.config.driver; }
};

std::string EncodeTaskRecord(const TaskRecord& r);
// Errors name the field; a version newer than this binary's is refused.
Result<TaskRecord> DecodeTaskRecord(const std::string& text);

}  // namespace outpost::task
