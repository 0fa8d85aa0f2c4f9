// Dynamic workload users (`user: "dynamic"`). Owns: the pool of uids (a task
// gets uid N and gid N) in the configured range, which owner (task id) holds
// which uid, and its persistence in one JSON file written atomically on every
// change, so a restarted agent never hands out a uid a live task still runs
// as. Does not own: deciding when a task's uid is released (the caller
// releases on destroy, and calls Reconcile once tasks are recovered), the
// ownership of task dirs and log files (task/), or the config key.
//
// Not thread-safe: the agent is single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "base/error.h"

namespace outpost::proc {

// 2^31-2: the largest uid that is neither (uid_t)-1 nor negative as an int,
// which some tools (and the kernel's overflowuid handling) choke on.
constexpr uint32_t kMaxDynamicUid = 2147483646;
constexpr uint32_t kDefaultDynamicFirst = 80000;
constexpr uint32_t kDefaultDynamicLast = 89999;

class UidPool {
 public:
  // Loads path (a missing file is an empty pool). A file that cannot be
  // parsed is renamed to <path>.bad and the pool starts empty; warning() then
  // says what was wrong and where the file went. Fails for a bad range
  // (must be within 1..2147483646 and first <= last), an unreadable file, or
  // a corrupt file that cannot be moved aside. Entries outside [first, last]
  // (the range was changed) stay held by their owners but are never handed
  // out again once released.
  static Result<std::unique_ptr<UidPool>> Open(const std::string& path, uint32_t first, uint32_t last);

  // The uid the owner already holds, else the lowest free uid in the range,
  // persisted before it is returned. ResourceExhausted when every uid in
  // the range is held; an error from the write leaves the pool unchanged.
  Result<uint32_t> Acquire(const std::string& owner);
  // Marks uid as held by owner without choosing it: for a recovered task
  // whose handle records the uid it runs as (e.g. after the pool file was
  // found corrupt). Out-of-range uids are accepted, like loaded entries.
  // AlreadyExists if another owner holds uid; FailedPrecondition if owner
  // holds a different uid.
  Status Restore(const std::string& owner, uint32_t uid);
  // Frees the owner's uid; no-op for an owner without one. A failed write is
  // logged: the stale entry names a dead owner, which the next start's
  // Reconcile releases, and the next successful write drops anyway.
  void Release(const std::string& owner);
  // Releases every entry whose owner is not in live_owners (call once at
  // agent start, after tasks are recovered). Returns what it released.
  std::map<std::string, uint32_t> Reconcile(const std::set<std::string>& live_owners);

  std::optional<uint32_t> Lookup(const std::string& owner) const;
  size_t in_use() const { return by_owner_.size(); }
  const std::map<std::string, uint32_t>& entries() const { return by_owner_; }
  uint32_t first() const { return first_; }
  uint32_t last() const { return last_; }
  const std::string& path() const { return path_; }
  // "" unless Open moved a corrupt file aside.
  const std::string& warning() const { return warning_; }

  // "80000-89999"
  std::string RangeString() const;

  // The persisted document, and its parser (exposed for tests and fuzzing).
  // Parse errors say what is wrong without naming the file.
  std::string Encode() const;
  static Result<std::map<std::string, uint32_t>> Decode(const std::string& text);

 private:
  UidPool(std::string path, uint32_t first, uint32_t last) : path_(std::move(path)), first_(first), last_(last) {}

  Status Save() const;

  std::string path_;
  uint32_t first_;
  uint32_t last_;
  std::string warning_;
  std::map<std::string, uint32_t> by_owner_;
  std::set<uint32_t> used_;
};

}  // namespace outpost::proc
