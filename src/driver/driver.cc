#include "driver/driver.h"

#include <signal.h>

#include <algorithm>

#include "base/strings.h"

namespace outpost::driver {

const hooks::HookSet& TaskConfig::Hooks() const {
  static const hooks::HookSet kNone;
  return oci ? oci->hooks : kNone;
}

const std::map<std::string, std::string>& TaskConfig::Annotations() const {
  static const std::map<std::string, std::string> kNone;
  return oci ? oci->annotations : kNone;
}

const std::string& TaskConfig::Netns() const {
  static const std::string kNone;
  return net ? net->netns : kNone;
}

const std::string& TaskConfig::Hostname() const {
  static const std::string kNone;
  return net ? net->hostname : kNone;
}

void TaskConfig::SetJoined(const std::string& netns, const std::string& hostname) {
  if (netns.empty() && hostname.empty() && (!net || !net->spec)) {
    net.reset();
    return;
  }
  auto n = std::make_shared<TaskNetwork>();
  if (net) n->spec = net->spec;
  n->netns = netns;
  n->hostname = hostname;
  net = std::move(n);
}

ExitResult ExitFromWaitStatus(int wait_status) {
  proc::ExitStatus s = proc::DecodeWaitStatus(wait_status);
  ExitResult r;
  r.exit_code = s.exit_code;
  r.signal = s.signal;
  return r;
}

std::string DescribeExit(const ExitResult& e) {
  if (!e.error.empty()) return e.error;
  if (e.oom_killed) return "OOM killed";
  proc::ExitStatus s;
  s.exit_code = e.exit_code;
  s.signal = e.signal;
  return proc::DescribeExitStatus(s);
}

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

bool Capabilities::JoinsJobNetworks() const {
  return network_isolation.empty() ||
         std::find(network_isolation.begin(), network_isolation.end(), "group") != network_isolation.end();
}

}  // namespace outpost::driver
