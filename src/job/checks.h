// Health checks of one running task instance (docs/supervision.md
// "Health checks"). Owns: each check's schedule (grace after the start,
// then one attempt every interval, never two of one check at once), the
// attempt itself (exec through the task's driver, http and tcp through
// job/check_probe), the thresholds (consecutive failures before a check
// fails, successes before it passes again) and the task's health derived
// from its checks. Tells its owner (the task's supervisor) when the task
// turns healthy or unhealthy; restarting is the owner's decision.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "job/spec.h"
#include "loop/loop.h"

namespace outpost::job {

class TaskRunner;
class NetProbe;

enum class CheckVerdict { kPending, kPassing, kFailing };
const char* CheckVerdictName(CheckVerdict v);  // "pending", "passing", "failing"

// One check's results so far.
struct CheckState {
  CheckVerdict verdict = CheckVerdict::kPending;
  int successes = 0;  // consecutive
  int failures = 0;   // consecutive
  uint64_t runs = 0;
  bool last_ok = false;
  std::string output;          // of the last attempt, bounded (kCheckOutputBytes)
  int64_t last_unix_nanos = 0; // when the last attempt ended; 0 = none yet
};

constexpr size_t kCheckOutputBytes = 256;

// Records one attempt's outcome in s; true when the verdict changed.
// Pending turns passing after success_threshold successes in a row, or
// failing after failure_threshold failures; passing and failing turn into
// each other the same way.
bool RecordCheckResult(const CheckSpec& spec, CheckState* s, bool ok);

// The task's health from its checks' verdicts: "healthy" when all pass,
// "unhealthy" when one fails, else "starting".
enum class TaskHealth { kStarting, kHealthy, kUnhealthy };
const char* TaskHealthName(TaskHealth h);
TaskHealth HealthOf(const std::vector<CheckState>& states);

// What `inspect` shows of one check.
struct CheckView {
  std::string label;
  CheckType type = CheckType::kTcp;
  CheckState state;
};

class TaskChecks {
 public:
  // The task's health changed: healthy (or not), and the message for the
  // event ("check http /healthz: 503 Service Unavailable (3 of 3)"); restart:
  // a failing check asks for the task to be restarted (on_unhealthy).
  using OnHealth = std::function<void(TaskHealth health, const std::string& message, bool restart)>;
  TaskChecks(Loop* loop, TaskRunner* runner, std::string task_id, std::shared_ptr<const TaskSpec> spec,
             OnHealth on_health);
  ~TaskChecks();
  TaskChecks(const TaskChecks&) = delete;
  TaskChecks& operator=(const TaskChecks&) = delete;

  // No attempt starts or reports after this (the owner frees it later).
  void Stop();
  TaskHealth health() const { return health_; }
  std::vector<CheckView> Views() const;

 private:
  struct Slot;
  void Schedule(size_t i, int64_t delay);
  void Run(size_t i);
  void Done(size_t i, bool ok, std::string output);

  Loop* loop_;
  TaskRunner* runner_;
  std::string task_id_;
  std::shared_ptr<const TaskSpec> spec_;
  OnHealth on_health_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<CheckState> states_;
  TaskHealth health_ = TaskHealth::kStarting;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::job
