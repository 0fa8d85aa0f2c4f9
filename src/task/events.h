// Events of tasks and jobs. Owns: the EventSink every producer publishes to
// (drivers through the task layer, the task layer's pipelines, job
// supervision; later steps such as hooks, networks and NRI publish here
// too), and the EventLog behind `outpost events`: a bounded history with
// sequence numbers, filtered reads and one-shot notifications for
// long-polling readers.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "driver/driver.h"

namespace outpost::task {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Publish(const driver::TaskEvent& ev) = 0;
};

struct EventRecord {
  uint64_t seq = 0;
  driver::TaskEvent event;
};

// The history behind `outpost events`: the newest events, at most
// `capacity` of them in at most `max_bytes` of packed records (whichever
// binds first; the newest event is always kept). Each event is packed into
// one byte buffer (its strings length-prefixed, no allocation of its own):
// about 70 bytes for a typical event instead of about 260 as a TaskEvent in
// a deque, and a bound on the history's memory whatever its messages'
// lengths.
class EventLog : public EventSink {
 public:
  static constexpr size_t kDefaultCapacity = 1000;
  static constexpr size_t kDefaultMaxBytes = 128 << 10;
  explicit EventLog(size_t capacity = kDefaultCapacity, size_t max_bytes = kDefaultMaxBytes)
      : capacity_(capacity), max_bytes_(max_bytes) {}

  void Publish(const driver::TaskEvent& ev) override;

  // Events with seq > after_seq (task_id / job "" = all).
  std::vector<EventRecord> After(uint64_t after_seq, const std::string& task_id = "",
                                 const std::string& job = "") const;
  // Whether After() would return any (without unpacking them).
  bool AnyAfter(uint64_t after_seq, const std::string& task_id = "", const std::string& job = "") const;
  uint64_t last_seq() const { return next_seq_ - 1; }
  size_t size() const { return count_; }          // events held
  size_t bytes() const { return packed_.size() - head_; }  // their packed size
  // Runs cb once, after the next event is recorded (long-poll).
  uint64_t NotifyOnEvent(std::function<void()> cb);
  void CancelNotify(uint64_t id) { notify_.erase(id); }

 private:
  // Calls fn(seq, record) for each held event with seq > after_seq whose
  // task id and job match, with its packed record, until fn returns false.
  template <typename Fn>
  void Scan(uint64_t after_seq, const std::string& task_id, const std::string& job, Fn fn) const;
  std::string_view Record(size_t i) const;  // the i-th held event's packed record
  void DropOldest();

  size_t capacity_;
  size_t max_bytes_;
  // Records back to back, oldest first, from packed_[head_]; the bytes
  // before head_ are dropped records, cut off once they are a quarter of
  // the buffer (so the buffer is at most a third bigger than the history).
  std::string packed_;
  size_t head_ = 0;
  // Where each held event's record starts in packed_ (from starts_[first_];
  // it ends where the next starts): reads start at the first event they
  // want instead of walking the history.
  std::vector<uint32_t> starts_;
  size_t first_ = 0;
  size_t count_ = 0;
  uint64_t first_seq_ = 1;  // seq of the oldest held event
  uint64_t next_seq_ = 1;
  std::map<uint64_t, std::function<void()>> notify_;
  uint64_t next_notify_ = 1;
};

}  // namespace outpost::task
