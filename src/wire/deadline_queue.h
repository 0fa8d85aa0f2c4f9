// Per-call deadlines for the RPC server and client. Owns: a min-heap of
// (deadline, connection, stream) entries and the single Loop timer armed for
// the earliest one. Does not own: the calls themselves; entries are not
// removed when a call completes (lazy deletion), so the owner checks on
// expiry whether the call is still pending, and calls Compact() when the
// heap holds far more entries than there are live calls.
//
// One heap and one timer instead of a Loop timer per call: a call then costs
// a push onto a vector (no std::function, no map node, usually no timerfd
// re-arm, since later deadlines do not move the armed one).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "loop/loop.h"

namespace outpost::wire {

struct DeadlineEntry {
  int64_t deadline;  // monotonic nanoseconds
  uint64_t conn;
  uint32_t stream;
};

class DeadlineQueue {
 public:
  // on_due runs once for each entry whose deadline has passed, in deadline
  // order. It may push entries, and may destroy the queue's owner (and the
  // queue): the queue notices and stops touching itself.
  using OnDue = std::function<void(const DeadlineEntry& entry)>;

  DeadlineQueue(Loop* loop, OnDue on_due);
  ~DeadlineQueue();
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;

  void Push(const DeadlineEntry& entry);
  size_t size() const { return heap_.size(); }

  // Drops the entries for which live(entry) is false, when the heap has
  // grown past twice `live_count` (plus slack). O(n), amortised over the
  // pushes that created the garbage.
  template <typename IsLive>
  void MaybeCompact(size_t live_count, IsLive live) {
    if (heap_.size() < 2 * live_count + kCompactSlack) return;
    heap_.erase(std::remove_if(heap_.begin(), heap_.end(), [&](const DeadlineEntry& e) { return !live(e); }),
                heap_.end());
    std::make_heap(heap_.begin(), heap_.end(), Later);
    Rearm();
  }

  void Clear();

 private:
  static constexpr size_t kCompactSlack = 1024;
  static bool Later(const DeadlineEntry& a, const DeadlineEntry& b) { return a.deadline > b.deadline; }
  void OnTimer();
  void Rearm();

  Loop* loop_;
  OnDue on_due_;
  std::vector<DeadlineEntry> heap_;
  Loop::TimerId timer_ = 0;
  int64_t armed_at_ = 0;
  bool in_timer_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::wire
