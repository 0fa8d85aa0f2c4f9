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
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"

namespace outpost::agent {

class Watchdog {
 public:
  // Opens path (opening a watchdog starts it), pets it once and then every
  // third of its timeout (WDIOC_GETTIMEOUT; every second for a device that
  // does not report one). heartbeat_timeout_nanos only serves a warning when
  // the device would reboot the node before the keeper replaces a hung worker.
  [[gnu::noinline]] static Result<std::unique_ptr<Watchdog>> Open(Loop* loop, const std::string& path, int64_t heartbeat_timeout_nanos);
  // Closes without the magic character: the device keeps counting (the next
  // worker pets it, or the node reboots).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Clean stop: writes the magic 'V' and closes, which stops the watchdog
  // unless the kernel was built or loaded with nowayout.
  void Disarm();

 private:
  Watchdog(Loop* loop, std::string path, UniqueFd fd) : loop_(loop), path_(std::move(path)), fd_(std::move(fd)) {}
  void Pet();

  Loop* loop_;
  std::string path_;
  UniqueFd fd_;
  int64_t interval_nanos_ = 0;
  Loop::TimerId timer_ = 0;
  bool warned_ = false;
};

}  // namespace outpost::agent
