#include "driver/driver.h"

#include <signal.h>

#include "base/strings.h"

namespace outpost::driver {

const char* TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kRunning: return "running";
    case TaskState::kExited: return "exited";
    case TaskState::kUnknown: break;
  }
  return "unknown";
}

const char* HealthName(Health h) {
  switch (h) {
    case Health::kHealthy: return "healthy";
    case Health::kUnhealthy: return "unhealthy";
    case Health::kUndetected: break;
  }
  return "undetected";
}

}  // namespace outpost::driver
