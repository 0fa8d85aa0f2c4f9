// Events of tasks and jobs. Owns: the EventSink every producer publishes to
// (drivers through the task layer, the task layer's pipelines, job
// supervision; later steps such as hooks, networks and NRI publish here
// too), and the EventLog behind `outpost events`: a bounded history with
// sequence numbers, filtered reads and one-shot notifications for
// long-polling readers.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
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

class EventLog : public EventSink {
 public:
  explicit EventLog(size_t capacity = 1000) : capacity_(capacity) {}

  void Publish(const driver::TaskEvent& ev) override;

  // Events with seq > after_seq (task_id / job "" = all).
  std::vector<EventRecord> After(uint64_t after_seq, const std::string& task_id = "",
                                 const std::string& job = "") const;
  uint64_t last_seq() const { return next_seq_ - 1; }
  // Runs cb once, after the next event is recorded (long-poll).
  uint64_t NotifyOnEvent(std::function<void()> cb);
  void CancelNotify(uint64_t id) { notify_.erase(id); }

 private:
  size_t capacity_;
  std::deque<EventRecord> events_;
  uint64_t next_seq_ = 1;
  std::map<uint64_t, std::function<void()>> notify_;
  uint64_t next_notify_ = 1;
};

}  // namespace outpost::task
