#include "agent/watchdog.h"

#include <fcntl.h>
#include <linux/watchdog.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::agent {

Result<std::unique_ptr<Watchdog>> Watchdog::Open(Loop* loop, const std::string& path, int64_t heartbeat_timeout_nanos) {
  // No O_CREAT: a missing device must be an error, not a new plain file.
  auto fd = sys::Open(path, O_WRONLY | O_CLOEXEC);
  if (!fd.ok()) {
    return Error(Code::kFailedPrecondition, "watchdog_device is configured but unusable: " + fd.error().message());
  }
  std::unique_ptr<Watchdog> w(new Watchdog(loop, path, std::move(*fd)));
  int secs = 0;
  // A device that reports no timeout is petted every second.
  if (::ioctl(w->fd_.get(), WDIOC_GETTIMEOUT, &secs) != 0 || secs <= 0) secs = 3;
  w->interval_nanos_ = secs * kNanosPerSecond / 3;
  log::Info("watchdog armed", {{"device", path}, {"pet_every", FormatDuration(w->interval_nanos_)}});
  if (heartbeat_timeout_nanos >= secs * kNanosPerSecond) {
    log::Warn("the watchdog's timeout is not longer than heartbeat_timeout: a hung worker reboots the node "
              "before the keeper can replace it");
  }
  w->Pet();
  return w;
}

Watchdog::~Watchdog() {
  if (timer_ != 0) loop_->CancelTimer(timer_);
}

void Watchdog::Pet() {
  timer_ = 0;
  // Any byte but 'V' is a pet.
  if (sys::Write(fd_.get(), ".", 1) != 1 && !warned_) {
    warned_ = true;
    log::Warn("cannot pet the watchdog (reported once)", {{"device", path_}, {"error", std::strerror(errno)}});
  }
  timer_ = loop_->AddTimer(interval_nanos_, [this] { Pet(); });
}

void Watchdog::Disarm() {
  if (!fd_) return;
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_ = 0;
  const bool ok = sys::Write(fd_.get(), "V", 1) == 1;
  log::Info(ok ? "watchdog disarmed (magic close)" : "cannot disarm the watchdog; it keeps counting",
            {{"device", path_}});
  fd_.Reset();
}

}  // namespace outpost::agent
