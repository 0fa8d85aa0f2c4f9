// Internal to the task layer (task/manager.cc and task/lifecycle.cc): what
// the TaskManager keeps per task, and the state of one start on its way
// through the start pipeline.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "logs/log_pipe.h"
#include "task/manager.h"

namespace outpost::task {

struct TaskManager::Task {
  TaskRecord record;           // what is persisted; record.exited once it ended
  bool starting = false;       // in the start pipeline: no process (yet)
  bool stop_requested = false; // the exit was asked for (event "stopped")
  bool has_user = false;       // holds a dynamic user
  bool waiting = false;        // its exit was asked of its driver (WaitForExit)
  bool oom_reported = false;   // its "oom-killed" event was emitted (ReportOom)
  uint8_t derived_paths = 0;   // paths left empty in record (TaskManager::DropDerivedPaths)
  std::vector<ExitCallback> on_exit;
  // Ended, its poststop hooks still running: stops and destroys wait for
  // them (TaskManager::after_poststop_).
  bool poststop_running = false;
  std::unique_ptr<logs::LogPipe> out;
  std::unique_ptr<logs::LogPipe> err;
  bool fifos_held = false;  // the keeper holds this task's FIFOs (HoldFifos)
  // NRI: StopContainer sent (once per instance); what plugins did at its
  // CreateContainer (for inspect), and when that was (every later event's
  // created_at).
  bool nri_stopped = false;
  std::string nri_report;
  int64_t nri_created_at = 0;
  // CPU percent from the cgroup's usage deltas.
  uint64_t last_cg_usage_ns = 0;
  int64_t last_cg_sample_mono = 0;

  const driver::TaskConfig& config() const { return record.handle.config; }
  const std::string& id() const { return record.handle.config.id; }
};

struct TaskManager::StartOp {
  driver::TaskConfig config;
  StartedCallback started;
  ExitCallback exited;
  size_t step = 0;        // the pipeline step running now
  bool replaced = false;  // an ended instance with this id made way
  bool inserted = false;  // Prepare added the entry (and so may remove it)
  std::string cgroup;     // created by CreateCgroup
  uint64_t oom_base = 0;
  driver::TaskHandle handle;
  driver::Driver* driver = nullptr;
  bool bundle_written = false;  // poststop hooks run even when the start fails after it
  bool nri_created = false;     // NRI CreateContainer succeeded (undone by Stop + Remove)
  int64_t nri_created_at = 0;   // its created_at
};

}  // namespace outpost::task
