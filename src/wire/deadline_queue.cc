#include "wire/deadline_queue.h"

#include "base/clock.h"

namespace outpost::wire {

DeadlineQueue::DeadlineQueue(Loop* loop, OnDue on_due) : loop_(loop), on_due_(std::move(on_due)) {}

DeadlineQueue::~DeadlineQueue() {
  *alive_ = false;
  if (timer_ != 0) loop_->CancelTimer(timer_);
}

void DeadlineQueue::Push(const DeadlineEntry& entry) {
  heap_.push_back(entry);
  std::push_heap(heap_.begin(), heap_.end(), Later);
  if (in_timer_) return;  // OnTimer re-arms when it is done
  if (timer_ == 0 || entry.deadline < armed_at_) Rearm();
}

void DeadlineQueue::Clear() {
  heap_.clear();
  Rearm();
}

void DeadlineQueue::Rearm() {
  if (timer_ != 0) {
    loop_->CancelTimer(timer_);
    timer_ = 0;
  }
  if (heap_.empty()) return;
  armed_at_ = heap_.front().deadline;
  timer_ = loop_->AddTimerAt(armed_at_, [this] { OnTimer(); });
}

void DeadlineQueue::OnTimer() {
  timer_ = 0;
  std::shared_ptr<bool> alive = alive_;
  in_timer_ = true;
  int64_t now = MonotonicNanos();
  while (!heap_.empty() && heap_.front().deadline <= now) {
    std::pop_heap(heap_.begin(), heap_.end(), Later);
    DeadlineEntry e = heap_.back();
    heap_.pop_back();
    on_due_(e);
    if (!*alive) return;
  }
  in_timer_ = false;
  Rearm();
}

}  // namespace outpost::wire
