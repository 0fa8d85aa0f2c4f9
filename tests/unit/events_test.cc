// The event history behind `outpost events` (task/events): packed records,
// bounded by count and by bytes, filtered reads.
#include <gtest/gtest.h>

#include <string>

#include "task/events.h"
#include "base/sys.h"
#include "test_util.h"

#include <sys/stat.h>
#include <unistd.h>

namespace outpost::task {
namespace {

driver::TaskEvent Ev(const std::string& task, const std::string& job, const std::string& type,
                     const std::string& message = "") {
  driver::TaskEvent e;
  e.task_id = task;
  e.task_name = task + "-name";
  e.job = job;
  e.type = type;
  e.message = message;
  e.timestamp_unix_nanos = 1700000000123456789LL;
  return e;
}

TEST(EventLogTest, EveryFieldComesBackAsPublished) {
  EventLog log;
  driver::TaskEvent e = Ev("web.1", "web", "started", "task started (pid 42)");
  e.annotations["exit_code"] = "3";
  e.annotations["empty"] = "";
  e.annotations[std::string("nul\0key", 7)] = std::string("a\0b", 3);
  log.Publish(e);
  auto got = log.After(0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].seq, 1u);
  EXPECT_EQ(got[0].event.task_id, "web.1");
  EXPECT_EQ(got[0].event.task_name, "web.1-name");
  EXPECT_EQ(got[0].event.job, "web");
  EXPECT_EQ(got[0].event.type, "started");
  EXPECT_EQ(got[0].event.message, "task started (pid 42)");
  EXPECT_EQ(got[0].event.timestamp_unix_nanos, 1700000000123456789LL);
  EXPECT_EQ(got[0].event.annotations, e.annotations);
}

// A driver's events replayed to a new worker are recognised by task, time,
// type and message; anything differing in one of them is a new event.
TEST(EventLogTest, HoldsFindsAnEventOfTheSameTaskTimeTypeAndMessage) {
  EventLog log;
  log.Publish(Ev("a", "j", "forked", "pid 7"));
  log.Publish(Ev("b", "j", "started"));
  EXPECT_TRUE(log.Holds(Ev("a", "j", "forked", "pid 7")));
  EXPECT_FALSE(log.Holds(Ev("b", "j", "forked", "pid 7")));
  EXPECT_FALSE(log.Holds(Ev("a", "j", "forked", "pid 8")));
  EXPECT_FALSE(log.Holds(Ev("a", "j", "exited", "pid 7")));
  driver::TaskEvent later = Ev("a", "j", "forked", "pid 7");
  later.timestamp_unix_nanos += 1;
  EXPECT_FALSE(log.Holds(later));
  EventSink* sink = &log;
  EXPECT_TRUE(sink->Holds(Ev("b", "j", "started")));
}

TEST(EventLogTest, ReadsFilterBySeqTaskAndJob) {
  EventLog log;
  log.Publish(Ev("a", "j1", "started"));
  log.Publish(Ev("b", "j2", "started"));
  log.Publish(Ev("a", "j1", "exited"));
  log.Publish(Ev("c", "", "started"));
  EXPECT_EQ(log.last_seq(), 4u);
  EXPECT_EQ(log.After(0).size(), 4u);
  auto a = log.After(0, "a");
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].seq, 1u);
  EXPECT_EQ(a[1].seq, 3u);
  EXPECT_EQ(a[1].event.type, "exited");
  auto after = log.After(1, "a");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].seq, 3u);
  auto j2 = log.After(0, "", "j2");
  ASSERT_EQ(j2.size(), 1u);
  EXPECT_EQ(j2[0].event.task_id, "b");
  EXPECT_TRUE(log.After(0, "a", "j2").empty());
  // A task id that is a prefix of another's is not the other.
  EXPECT_TRUE(log.After(0, "web").empty());
  EXPECT_TRUE(log.AnyAfter(2, "a"));
  EXPECT_FALSE(log.AnyAfter(3, "a"));
  EXPECT_FALSE(log.AnyAfter(4));
  EXPECT_TRUE(log.AnyAfter(0, "", "j1"));
}

TEST(EventLogTest, TheOldestGoFirstOnceTheCountIsReached) {
  EventLog log(3);
  for (int i = 1; i <= 5; ++i) log.Publish(Ev("t" + std::to_string(i), "j", "started"));
  EXPECT_EQ(log.size(), 3u);
  auto all = log.After(0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].seq, 3u);
  EXPECT_EQ(all[0].event.task_id, "t3");
  EXPECT_EQ(all[2].seq, 5u);
  EXPECT_EQ(all[2].event.task_id, "t5");
  EXPECT_EQ(log.After(4).size(), 1u);
  // Reads index into what is left: by seq, with filters, past the end.
  auto t4 = log.After(3, "t4");
  ASSERT_EQ(t4.size(), 1u);
  EXPECT_EQ(t4[0].seq, 4u);
  EXPECT_TRUE(log.After(0, "t2").empty());  // dropped
  EXPECT_TRUE(log.After(5).empty());
  EXPECT_TRUE(log.After(99).empty());
  EXPECT_TRUE(log.AnyAfter(4, "t5"));
  EXPECT_FALSE(log.AnyAfter(4, "t4"));
}

TEST(EventLogTest, LongMessagesAreBoundedByBytesAndTheNewestIsAlwaysKept) {
  EventLog log(1000, 4096);
  const std::string big(1500, 'x');
  for (int i = 1; i <= 10; ++i) log.Publish(Ev("t" + std::to_string(i), "j", "error", big));
  EXPECT_LE(log.bytes(), 4096u);
  EXPECT_EQ(log.size(), 2u);  // two records of ~1.5 KB fit, three do not
  auto all = log.After(0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].seq, 9u);
  EXPECT_EQ(all[1].seq, 10u);
  EXPECT_EQ(all[1].event.message, big);

  // One event bigger than the whole budget still replaces the others.
  log.Publish(Ev("huge", "j", "error", std::string(10000, 'y')));
  auto last = log.After(0);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].seq, 11u);
  EXPECT_EQ(last[0].event.message.size(), 10000u);
  // And small ones push it out again.
  log.Publish(Ev("small", "j", "started"));
  EXPECT_EQ(log.size(), 1u);
  EXPECT_EQ(log.After(0)[0].event.task_id, "small");
}

TEST(EventLogTest, ALongRunKeepsTheNewestInOrderThroughEveryCompaction) {
  EventLog log(100);
  for (int i = 1; i <= 5000; ++i) {
    log.Publish(Ev("t" + std::to_string(i), "j" + std::to_string(i % 3), "started",
                   std::string(static_cast<size_t>(i % 200), 'm')));
    if (i % 997 == 0) {  // reads in between, at any point of the buffer's life
      auto some = log.After(static_cast<uint64_t>(i - 2));
      ASSERT_EQ(some.size(), 2u);
      EXPECT_EQ(some[1].event.task_id, "t" + std::to_string(i));
    }
  }
  auto all = log.After(0);
  ASSERT_EQ(all.size(), 100u);
  for (size_t k = 0; k < all.size(); ++k) {
    int i = 4901 + static_cast<int>(k);
    EXPECT_EQ(all[k].seq, static_cast<uint64_t>(i));
    EXPECT_EQ(all[k].event.task_id, "t" + std::to_string(i));
    EXPECT_EQ(all[k].event.message.size(), static_cast<size_t>(i % 200));
  }
  EXPECT_EQ(log.After(0, "", "j1").size(), 33u);
  EXPECT_LT(log.bytes(), 100u * 260);
}

TEST(EventLogTest, TypicalEventsTakeLittleRoom) {
  EventLog log;
  for (int i = 0; i < 1000; ++i) {
    log.Publish(Ev("bench-" + std::to_string(i), "", "started", "task started (pid 12345)"));
  }
  EXPECT_EQ(log.size(), 1000u);
  // At most 68 bytes each packed (8 of time, 6 of lengths, 54 of text); a
  // TaskEvent alone is 216 bytes before its strings.
  EXPECT_LE(log.bytes(), 68u * 1000);
}

TEST(EventLogTest, NotifyRunsOnceAfterTheNextEvent) {
  EventLog log;
  int runs = 0;
  log.NotifyOnEvent([&] { ++runs; });
  uint64_t cancelled = log.NotifyOnEvent([&] { runs += 100; });
  log.CancelNotify(cancelled);
  log.Publish(Ev("a", "", "started"));
  log.Publish(Ev("a", "", "exited"));
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace outpost::task

namespace outpost::task {
namespace {

std::string TempFile() {
  char tmpl[] = "/tmp/outpost-events-XXXXXX";
  int fd = ::mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  ::close(fd);
  ::unlink(tmpl);
  return tmpl;
}

TEST(EventHistoryTest, ANewWorkerGoesOnFromTheHistoryOnDisk) {
  auto loop = outpost::testing::MakeLoop();
  std::string path = TempFile();
  {
    EventLog log;
    ASSERT_TRUE(log.Persist(loop.get(), path).ok());
    log.Publish(Ev("a", "j1", "started", "one"));
    log.Publish(Ev("b", "j2", "exited", "two"));
  }
  EventLog next;
  ASSERT_TRUE(next.Persist(loop.get(), path).ok());
  auto got = next.After(0);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, 1u);
  EXPECT_EQ(got[1].event.message, "two");
  next.Publish(Ev("a", "j1", "stopped"));
  EXPECT_EQ(next.last_seq(), 3u);  // the numbers go on
  EXPECT_EQ(next.AfterRef(0, "j1").size(), 2u);
  EXPECT_EQ(next.AfterRef(0, "j1/a-name").size(), 2u);
  EXPECT_EQ(next.AfterRef(0, "b").size(), 1u);  // a task id
  EXPECT_FALSE(next.AnyOf("nosuch"));
  ::unlink(path.c_str());
}

TEST(EventHistoryTest, TheFileStaysUnderTwiceTheBound) {
  auto loop = outpost::testing::MakeLoop();
  std::string path = TempFile();
  EventLog log(1000, 4096);
  ASSERT_TRUE(log.Persist(loop.get(), path).ok());
  for (int i = 0; i < 2000; ++i) {
    log.Publish(Ev("t" + std::to_string(i), "j", "started", std::string(40, 'x')));
    struct stat st;
    ASSERT_EQ(0, ::stat(path.c_str(), &st));
    ASSERT_LT(static_cast<uint64_t>(st.st_size), 2 * 4096u + 200u) << i;
  }
  EventLog next(1000, 4096);
  ASSERT_TRUE(next.Persist(loop.get(), path).ok());
  EXPECT_EQ(next.last_seq(), 2000u);
  EXPECT_EQ(next.After(0).size(), log.After(0).size());
  ::unlink(path.c_str());
}

TEST(EventHistoryTest, ATruncatedOrDamagedFileGivesWhatIsWholeInIt) {
  auto loop = outpost::testing::MakeLoop();
  std::string path = TempFile();
  {
    EventLog log;
    ASSERT_TRUE(log.Persist(loop.get(), path).ok());
    for (int i = 0; i < 5; ++i) log.Publish(Ev("a", "j", "started", std::to_string(i)));
  }
  auto whole = sys::ReadFile(path);
  ASSERT_TRUE(whole.ok());
  size_t last = 0;
  for (size_t len = 0; len <= whole->size(); ++len) {
    size_t n = 0;
    uint64_t prev = 0;
    ReadHistory(std::string_view(*whole).substr(0, len), [&](uint64_t seq, std::string_view) {
      if (n > 0) {
        EXPECT_EQ(seq, prev + 1);
      }
      prev = seq;
      ++n;
    });
    EXPECT_GE(n, last) << len;  // a longer prefix never gives fewer
    last = n;
  }
  EXPECT_EQ(last, 5u);
  std::string bad = *whole;
  bad[bad.size() / 2] ^= 0x5a;
  ReadHistory(bad, [](uint64_t, std::string_view) {});  // anything; no read past it (ASan)
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace outpost::task
