// The optional hardware watchdog (config key watchdog_device, see
// docs/supervision.md). Owns: the open device, petting it from a loop timer
// (so pets stop when the worker's loop stops), and the magic close on a
// clean stop.
//
// Does not own: deciding what a clean stop is (agent/agent) or the heartbeat
// the keeper watches (keeper/link).
//
// The worker holds the device, not the keeper: what a pet proves is then the
// loop that does the work, and the keeper stays a poll loop without device
// I/O or timers of its own. The price: a worker restart closes the device
// without the magic character, so the kernel keeps counting, and the next
// worker must open it again within the device's timeout.
//
// Destruction closes without the magic character: the device keeps counting
// (the next worker pets it, or the node reboots). Destroy only once the loop
// no longer runs (the pet timer may be pending).
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"

namespace outpost::agent {

class Watchdog {
 public:
  // Opens path (opening a watchdog starts it), pets it once and then every
  // third of its timeout (WDIOC_GETTIMEOUT; every second for a device that
  // does not report one) from a timer on loop.
  Status Open(Loop* loop, const std::string& path);
  // Clean stop: writes the magic 'V' and closes, which stops the watchdog
  // unless the kernel was built or loaded with nowayout.
  void Disarm();

 private:
  void Pet();

  Loop* loop_ = nullptr;
  std::string path_;
  UniqueFd fd_;
  int64_t interval_nanos_ = 0;
  Loop::TimerId timer_ = 0;
  bool warned_ = false;
};

}  // namespace outpost::agent
