#include "loop/pending_writes.h"

#include <cerrno>

#include "base/log.h"
#include "base/sys.h"

namespace outpost {

namespace {
bool DiskFull(const Status& st) { return st.error().sys_errno() == ENOSPC || st.error().sys_errno() == EDQUOT; }
}  // namespace

PendingWrites::~PendingWrites() {
  if (timer_ != 0) loop_->CancelTimer(timer_);
  for (const auto& [path, p] : pending_) {
    Status st = WriteNow(path, p);
    if (!st.ok()) log::Error("state not written: the change is lost", {{"file", path}, {"error", st.error().message()}});
  }
}

Status PendingWrites::Write(const std::string& path, const std::string& data, bool* kept,
                            sys::Durability durability) {
  *kept = false;
  Pending p{data, durability};
  Status st = WriteNow(path, p);
  if (st.ok()) {
    pending_.erase(path);
    if (!pending_.empty()) Retry();  // there is room again: the rest too
    return st;
  }
  if (!DiskFull(st)) return st;
  log::Warn("disk full: state kept in memory until there is room", {{"error", st.error().message()}});
  pending_[path] = std::move(p);
  *kept = true;
  Arm();
  return OkStatus();
}

void PendingWrites::Retry() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!WriteNow(it->first, it->second).ok()) {
      ++it;
      continue;
    }
    log::Info("state written now that the disk has room", {{"file", it->first}});
    it = pending_.erase(it);
  }
  if (!pending_.empty()) Arm();
}

void PendingWrites::Arm() {
  if (timer_ != 0) return;
  timer_ = loop_->AddTimer(kRetryNanos, [this] {
    timer_ = 0;
    Retry();
  });
}

}  // namespace outpost
