#include "task/events.h"

namespace outpost::task {

void EventLog::Publish(const driver::TaskEvent& ev) {
  events_.push_back({next_seq_++, ev});
  while (events_.size() > capacity_) events_.pop_front();
  if (notify_.empty()) return;
  auto pending = std::move(notify_);
  notify_.clear();
  for (auto& [id, cb] : pending) cb();
}

std::vector<EventRecord> EventLog::After(uint64_t after_seq, const std::string& task_id,
                                         const std::string& job) const {
  std::vector<EventRecord> out;
  for (const EventRecord& r : events_) {
    if (r.seq <= after_seq) continue;
    if (!task_id.empty() && r.event.task_id != task_id) continue;
    if (!job.empty() && r.event.job != job) continue;
    out.push_back(r);
  }
  return out;
}

uint64_t EventLog::NotifyOnEvent(std::function<void()> cb) {
  uint64_t id = next_notify_++;
  notify_[id] = std::move(cb);
  return id;
}

}  // namespace outpost::task
