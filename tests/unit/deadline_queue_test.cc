// DeadlineQueue: entries come due in deadline order, never before their
// deadline, each exactly once, same-deadline entries included; an earlier
// push re-arms the timer; Clear and MaybeCompact drop entries so they never
// come due; on_due may push more entries or destroy the queue.
#include "wire/deadline_queue.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "base/clock.h"
#include "test_util.h"

namespace outpost::wire {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

constexpr int64_t kHour = 3600 * kNanosPerSecond;

struct Due {
  DeadlineEntry entry;
  int64_t at;  // when on_due ran
};

class DeadlineQueueTest : public ::testing::Test {
 protected:
  DeadlineQueueTest()
      : loop_(MakeLoop()),
        queue_(std::make_unique<DeadlineQueue>(loop_.get(), [this](const DeadlineEntry& e) { OnDue(e); })) {}

  virtual void OnDue(const DeadlineEntry& e) { due_.push_back({e, MonotonicNanos()}); }

  std::vector<uint64_t> DueConns() const {
    std::vector<uint64_t> out;
    for (const Due& d : due_) out.push_back(d.entry.conn);
    return out;
  }

  // Runs the loop until n entries have come due.
  bool RunUntilDue(size_t n) {
    return RunUntil(loop_.get(), [&] { return due_.size() >= n; });
  }

  // Lets the loop run expired timers without waiting: a timer already due
  // fires in this turn.
  void RunDueTimers() { ASSERT_TRUE(loop_->RunOnce(0).ok()); }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<DeadlineQueue> queue_;
  std::vector<Due> due_;
};

TEST_F(DeadlineQueueTest, PastEntriesComeDueInDeadlineOrder) {
  int64_t now = MonotonicNanos();
  for (uint64_t conn : {4, 1, 5, 3, 2}) queue_->Push({now - 100 + static_cast<int64_t>(conn), conn, 0});
  EXPECT_EQ(queue_->size(), 5u);
  EXPECT_EQ(loop_->PendingTimers(), 1u);  // one timer for the whole queue
  ASSERT_TRUE(RunUntilDue(5));
  EXPECT_EQ(DueConns(), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(queue_->size(), 0u);
  EXPECT_EQ(loop_->PendingTimers(), 0u);
}

TEST_F(DeadlineQueueTest, FutureEntriesComeDueInOrderAndNotBeforeTheirDeadline) {
  int64_t now = MonotonicNanos();
  std::vector<int64_t> deadlines = {now + 40 * kNanosPerMilli, now + 10 * kNanosPerMilli, now + 25 * kNanosPerMilli};
  for (size_t i = 0; i < deadlines.size(); ++i) queue_->Push({deadlines[i], i, static_cast<uint32_t>(i)});
  ASSERT_TRUE(RunUntilDue(3));
  EXPECT_EQ(DueConns(), (std::vector<uint64_t>{1, 2, 0}));
  for (const Due& d : due_) {
    EXPECT_GE(d.at, d.entry.deadline) << "conn " << d.entry.conn << " came due early";
    EXPECT_EQ(d.entry.stream, d.entry.conn);  // the entry is handed back as pushed
  }
}

TEST_F(DeadlineQueueTest, OnlyTheExpiredEntriesComeDue) {
  int64_t now = MonotonicNanos();
  queue_->Push({now + kHour, 1, 0});
  queue_->Push({now - 1, 2, 0});
  queue_->Push({now + 2 * kHour, 3, 0});
  ASSERT_TRUE(RunUntilDue(1));
  RunDueTimers();
  EXPECT_EQ(DueConns(), std::vector<uint64_t>{2});
  EXPECT_EQ(queue_->size(), 2u);
  EXPECT_EQ(loop_->PendingTimers(), 1u);  // re-armed for the next one
}

TEST_F(DeadlineQueueTest, EntriesWithTheSameDeadlineAllComeDueOnce) {
  int64_t now = MonotonicNanos();
  int64_t same = now - 10;
  queue_->Push({now - 20, 100, 0});
  for (uint64_t conn = 1; conn <= 50; ++conn) queue_->Push({same, conn, static_cast<uint32_t>(conn)});
  queue_->Push({now - 5, 200, 0});
  queue_->Push({same, 7, 7});  // the same call twice: two entries, two calls
  ASSERT_TRUE(RunUntilDue(53));
  RunDueTimers();
  ASSERT_EQ(due_.size(), 53u);
  EXPECT_EQ(due_.front().entry.conn, 100u);
  EXPECT_EQ(due_.back().entry.conn, 200u);
  std::vector<uint64_t> middle;
  for (size_t i = 1; i + 1 < due_.size(); ++i) {
    EXPECT_EQ(due_[i].entry.deadline, same);
    middle.push_back(due_[i].entry.conn);
  }
  std::sort(middle.begin(), middle.end());
  std::vector<uint64_t> want;
  for (uint64_t conn = 1; conn <= 50; ++conn) {
    want.push_back(conn);
    if (conn == 7) want.push_back(7);
  }
  EXPECT_EQ(middle, want);
}

TEST_F(DeadlineQueueTest, AnEarlierPushRearmsTheTimer) {
  int64_t now = MonotonicNanos();
  queue_->Push({now + kHour, 1, 0});
  queue_->Push({now + 5 * kNanosPerMilli, 2, 0});
  // Were the timer still armed for the hour, this would time out.
  ASSERT_TRUE(RunUntilDue(1));
  EXPECT_EQ(DueConns(), std::vector<uint64_t>{2});
  // A later push leaves the armed timer alone, and still comes due in turn.
  queue_->Push({MonotonicNanos() + 2 * kHour, 3, 0});
  queue_->Push({MonotonicNanos() - 1, 4, 0});
  ASSERT_TRUE(RunUntilDue(2));
  EXPECT_EQ(DueConns(), (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(queue_->size(), 2u);
  EXPECT_EQ(loop_->PendingTimers(), 1u);
}

TEST_F(DeadlineQueueTest, ClearDropsEveryEntryAndTheTimer) {
  int64_t now = MonotonicNanos();
  for (uint64_t conn = 1; conn <= 5; ++conn) queue_->Push({now - 1, conn, 0});
  queue_->Clear();
  EXPECT_EQ(queue_->size(), 0u);
  EXPECT_EQ(loop_->PendingTimers(), 0u);
  // A later entry comes due alone: the cleared ones are gone for good.
  queue_->Push({MonotonicNanos() - 1, 9, 0});
  ASSERT_TRUE(RunUntilDue(1));
  RunDueTimers();
  EXPECT_EQ(DueConns(), std::vector<uint64_t>{9});
}

TEST_F(DeadlineQueueTest, CompactionDropsCancelledEntries) {
  int64_t now = MonotonicNanos();
  // Calls 1..1200 completed (their entries linger, lazily deleted); call
  // 5000 is still pending and overdue, call 5001 pending with time left.
  for (uint64_t conn = 1; conn <= 1200; ++conn) queue_->Push({now - 2000 + static_cast<int64_t>(conn), conn, 0});
  queue_->Push({now - 1, 5000, 0});
  queue_->Push({now + kHour, 5001, 0});
  auto live = [](const DeadlineEntry& e) { return e.conn >= 5000; };
  queue_->MaybeCompact(2, live);
  EXPECT_EQ(queue_->size(), 2u);
  ASSERT_TRUE(RunUntilDue(1));
  RunDueTimers();
  EXPECT_EQ(DueConns(), std::vector<uint64_t>{5000});  // no cancelled call came due
  EXPECT_EQ(queue_->size(), 1u);
}

TEST_F(DeadlineQueueTest, CompactionWaitsUntilTheGarbageOutweighsTheLiveCalls) {
  int64_t now = MonotonicNanos();
  for (uint64_t conn = 1; conn <= 100; ++conn) queue_->Push({now + kHour, conn, 0});
  auto none_live = [](const DeadlineEntry&) { return false; };
  queue_->MaybeCompact(0, none_live);  // 100 entries: below the slack, left alone
  EXPECT_EQ(queue_->size(), 100u);
  for (uint64_t conn = 101; conn <= 3000; ++conn) queue_->Push({now + kHour, conn, 0});
  auto some_live = [](const DeadlineEntry& e) { return e.conn % 2 == 0; };
  queue_->MaybeCompact(1000, some_live);  // 3000 < 2 * 1000 + slack (1024): left alone
  EXPECT_EQ(queue_->size(), 3000u);
  queue_->MaybeCompact(900, some_live);  // 3000 >= 2 * 900 + slack: compacted
  EXPECT_EQ(queue_->size(), 1500u);
  queue_->MaybeCompact(1000, none_live);  // 1500 < 2 * 1000 + slack: left alone
  EXPECT_EQ(queue_->size(), 1500u);
  // Nothing live: everything goes, and the timer with it.
  EXPECT_EQ(loop_->PendingTimers(), 1u);
  queue_->MaybeCompact(0, none_live);
  EXPECT_EQ(queue_->size(), 0u);
  EXPECT_EQ(loop_->PendingTimers(), 0u);
}

class PushingQueueTest : public DeadlineQueueTest {
 protected:
  void OnDue(const DeadlineEntry& e) override {
    DeadlineQueueTest::OnDue(e);
    // Each of the first entries pushes a follow-up: one already due, one
    // later.
    if (e.conn == 1) queue_->Push({MonotonicNanos() - 1, 10, 0});
    if (e.conn == 2) queue_->Push({MonotonicNanos() + 5 * kNanosPerMilli, 20, 0});
  }
};

TEST_F(PushingQueueTest, OnDueMayPushEntries) {
  int64_t now = MonotonicNanos();
  queue_->Push({now - 3, 1, 0});
  queue_->Push({now - 2, 2, 0});
  ASSERT_TRUE(RunUntilDue(4));
  EXPECT_EQ(DueConns(), (std::vector<uint64_t>{1, 2, 10, 20}));
  EXPECT_EQ(queue_->size(), 0u);
  EXPECT_EQ(loop_->PendingTimers(), 0u);
}

class DestroyingQueueTest : public DeadlineQueueTest {
 protected:
  void OnDue(const DeadlineEntry& e) override {
    DeadlineQueueTest::OnDue(e);
    queue_.reset();  // the owner goes away from inside the callback
  }
};

TEST_F(DestroyingQueueTest, OnDueMayDestroyTheQueue) {
  int64_t now = MonotonicNanos();
  queue_->Push({now - 3, 1, 0});
  queue_->Push({now - 2, 2, 0});
  queue_->Push({now + kHour, 3, 0});
  ASSERT_TRUE(RunUntilDue(1));
  RunDueTimers();
  EXPECT_EQ(queue_, nullptr);
  EXPECT_EQ(DueConns(), std::vector<uint64_t>{1});  // nothing after the queue is gone
  EXPECT_EQ(loop_->PendingTimers(), 0u);
}

TEST_F(DeadlineQueueTest, DestroyingTheQueueCancelsItsTimer) {
  queue_->Push({MonotonicNanos() - 1, 1, 0});
  EXPECT_EQ(loop_->PendingTimers(), 1u);
  queue_.reset();
  EXPECT_EQ(loop_->PendingTimers(), 0u);
  RunDueTimers();
  EXPECT_TRUE(due_.empty());
}

}  // namespace
}  // namespace outpost::wire
