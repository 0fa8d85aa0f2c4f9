// Files that could not be written because their filesystem was full, kept in
// memory until there is room. Owns: the pending contents (path -> data) and
// one retry timer. Write goes through sys::WriteFileAtomic (with the
// durability given at construction, or with the write), or sys::OverwriteFile
// for Durability::kProcessCrash; when it fails with
// ENOSPC or EDQUOT the data is kept and written again every kRetryNanos and
// after any later Write that succeeds. Users: the job store and the task
// records (docs/supervision.md, "When the disk is full").
#pragma once

#include <map>
#include <string>

#include "base/error.h"
#include "base/sys.h"
#include "loop/loop.h"

namespace outpost {

class PendingWrites {
 public:
  static constexpr int64_t kRetryNanos = 2000LL * 1000000;

  PendingWrites(Loop* loop, sys::Durability durability) : loop_(loop), durability_(durability) {}
  // One last try for what is pending; what still fails is logged as lost.
  ~PendingWrites();
  PendingWrites(const PendingWrites&) = delete;
  PendingWrites& operator=(const PendingWrites&) = delete;

  // Writes data to path atomically. A full disk is not an error: the data is
  // kept for later, *kept is set, and OK is returned. Other errors are
  // returned (and nothing is kept).
  Status Write(const std::string& path, const std::string& data, bool* kept) {
    return Write(path, data, kept, durability_);
  }
  // The same with a durability of its own for this write (and its retries).
  Status Write(const std::string& path, const std::string& data, bool* kept, sys::Durability durability);
  // The file is being removed: drop what is pending for it.
  void Forget(const std::string& path) { pending_.erase(path); }
  size_t pending() const { return pending_.size(); }

 private:
  void Retry();
  void Arm();

  struct Pending {
    std::string data;
    sys::Durability durability;
  };
  static Status WriteNow(const std::string& path, const Pending& p) {
    return p.durability == sys::Durability::kProcessCrash ? sys::OverwriteFile(path, p.data, 0600)
                                                          : sys::WriteFileAtomic(path, p.data, 0600, p.durability);
  }

  Loop* loop_;
  sys::Durability durability_;
  std::map<std::string, Pending> pending_;
  Loop::TimerId timer_ = 0;
};

}  // namespace outpost
