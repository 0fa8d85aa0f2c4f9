#include "agent/watchdog.h"

#include <fcntl.h>
#include <linux/watchdog.h>
#include <sys/ioctl.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/sys.h"

namespace outpost::agent {

Status Watchdog::Open(Loop* loop, const std::string& path) {
  // No O_CREAT: a missing device must be an error, not a new plain file.
  auto fd = sys::Open(path, O_WRONLY | O_CLOEXEC);
  if (!fd.ok()) return fd.error().Wrap("watchdog_device is configured but unusable");
  loop_ = loop;
  path_ = path;
  fd_ = std::move(*fd);
  int secs = 0;
  // A device that reports no timeout is petted every second.
  if (::ioctl(fd_.get(), WDIOC_GETTIMEOUT, &secs) != 0 || secs <= 0) secs = 3;
  interval_nanos_ = secs * kNanosPerSecond / 3;
  log::Info("watchdog armed", {{"device", path}, {"timeout_s", std::to_string(secs)}});
  Pet();
  return OkStatus();
}

void Watchdog::Pet() {
  timer_ = 0;
  // Any byte but 'V' is a pet.
  if (sys::Write(fd_.get(), ".", 1) != 1 && !warned_) {
    warned_ = true;
    log::Warn("cannot pet the watchdog (reported once)", {{"device", path_}});
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
