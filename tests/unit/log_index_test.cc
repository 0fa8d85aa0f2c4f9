// The time index of a log file (logs/log_index): written by a LogPipe at
// most once a second, rotated with its file, read back by Times and Since;
// the reader takes any bytes; both streams merged by time (logs/log_merge).
#include <fcntl.h>
#include <ftw.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/sys.h"
#include "logs/log_files.h"
#include "logs/log_index.h"
#include "logs/log_merge.h"
#include "logs/log_pipe.h"
#include "test_util.h"

namespace outpost::logs {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

uint64_t Inode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(0, ::stat(path.c_str(), &st));
  return static_cast<uint64_t>(st.st_ino);
}

class LogIndexTest : public ::testing::Test {
 protected:
  LogIndexTest() {
    char tmpl[] = "/tmp/outpost-logindex-XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    log_ = dir_ + "/web.stdout";
  }
  ~LogIndexTest() override { ::nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

  // A pipe whose clock is now_.
  std::unique_ptr<LogPipe> Open(RotationPolicy policy = {}) {
    LogPipe::TestHooks hooks;
    hooks.now_sec = [this] { return now_; };
    auto p = LogPipe::Open(loop_.get(), dir_ + "/.web.fifo", log_, dir_ + "/.web.cursor", policy, ::getuid(),
                           ::getgid(), nullptr, std::move(hooks));
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message());
    return p.ok() ? std::move(*p) : nullptr;
  }
  // Writes s into the pipe and waits until it is in the files.
  void Write(LogPipe* p, int fd, const std::string& s) {
    ASSERT_TRUE(sys::WriteAll(fd, s.data(), s.size(), "write").ok());
    ASSERT_TRUE(RunUntil(loop_.get(), [&] { return p->stats().bytes_written >= written_ + s.size(); }));
    written_ += s.size();
  }

  std::string dir_, log_;
  std::unique_ptr<Loop> loop_ = MakeLoop();
  uint32_t now_ = 1800000000;
  uint64_t written_ = 0;
};

TEST_F(LogIndexTest, OneEntryPerSecondWithDataAndTheLogFileUnchanged) {
  auto p = Open();
  auto w = p->OpenWriteEnd();
  ASSERT_TRUE(w.ok());
  Write(p.get(), w->get(), "a1\n");
  Write(p.get(), w->get(), "a2\n");  // same second: no entry
  now_ += 5;
  Write(p.get(), w->get(), "b1\n");
  auto text = sys::ReadFile(log_);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "a1\na2\nb1\n");
  logindex::Reader r = logindex::Reader::Open(log_, Inode(log_));
  ASSERT_TRUE(r.valid());
  EXPECT_EQ(r.count(), 2u);
  auto tail = logfiles::Tail(log_, 10, 10);
  ASSERT_TRUE(tail.ok());
  auto times = logfiles::Times(log_, *tail);
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[0].length, 6u);
  EXPECT_EQ(times[0].unix_seconds, 1800000000);
  EXPECT_EQ(times[1].length, 3u);
  EXPECT_EQ(times[1].unix_seconds, 1800000005);
  uint64_t off = 0;
  EXPECT_TRUE(r.FirstAtOrAfter(1800000001, &off));
  EXPECT_EQ(off, 6u);
  auto since = logfiles::Since(log_, 10, 1800000001);
  ASSERT_TRUE(since.ok());
  EXPECT_EQ(since->inode, Inode(log_));
  EXPECT_EQ(since->offset, 6u);
}

TEST_F(LogIndexTest, TheIndexRotatesWithItsFileAndAFullIndexRotatesAtALineEnd) {
  RotationPolicy policy;
  policy.max_file_size = 4096;  // MaxEntries: 42
  policy.max_files = 3;
  ASSERT_EQ(logindex::MaxEntries(4096), 42u);
  auto p = Open(policy);
  auto w = p->OpenWriteEnd();
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 43; ++i, ++now_) Write(p.get(), w->get(), "l" + std::to_string(i) + "\n");
  // The 43rd second found the index full: a new file for its line.
  EXPECT_EQ(p->stats().rotations, 1u);
  auto active = sys::ReadFile(log_);
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(*active, "l42\n");
  std::string rotated = logfiles::RotatedPath(log_, 1);
  logindex::Reader r1 = logindex::Reader::Open(rotated, Inode(rotated));
  ASSERT_TRUE(r1.valid());
  EXPECT_EQ(r1.count(), 42u);
  logindex::Reader r0 = logindex::Reader::Open(log_, Inode(log_));
  ASSERT_TRUE(r0.valid());
  EXPECT_EQ(r0.count(), 1u);
  auto since = logfiles::Since(log_, 3, 1800000040);
  ASSERT_TRUE(since.ok());
  EXPECT_EQ(since->inode, Inode(rotated));
  auto chunk = logfiles::ReadFrom(log_, *since, 1 << 20);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->data, "l40\nl41\nl42\n");
  auto times = logfiles::Times(log_, *chunk);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[2].unix_seconds, 1800000042);
}

TEST_F(LogIndexTest, AReplacedLogFileStartsItsIndexAnew) {
  auto p = Open();
  auto w = p->OpenWriteEnd();
  ASSERT_TRUE(w.ok());
  Write(p.get(), w->get(), "old\n");
  ASSERT_EQ(0, ::unlink(log_.c_str()));  // by hand, between two bursts
  now_ += 2;
  Write(p.get(), w->get(), "new\n");
  logindex::Reader r = logindex::Reader::Open(log_, Inode(log_));
  ASSERT_TRUE(r.valid());
  EXPECT_EQ(r.count(), 1u);
  auto c = r.Cover(0, 4);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].unix_seconds, 1800000002);
}

// Any bytes: every prefix of a real index, a wrong inode, garbage entries.
TEST(LogIndexReaderTest, TakesTruncatedAndDamagedIndexesWithoutReadingPastThem) {
  std::string file(logindex::kHeaderSize, '\0');
  logindex::EncodeHeader(77, reinterpret_cast<unsigned char*>(&file[0]));
  for (uint64_t i = 0; i < 10; ++i) {
    unsigned char e[logindex::kEntrySize];
    logindex::EncodeEntry(logindex::Entry{i * 10, static_cast<int64_t>(100 + i)}, e);
    file.append(reinterpret_cast<char*>(e), sizeof e);
  }
  for (size_t len = 0; len <= file.size(); ++len) {
    int fd = ::memfd_create("idx", 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(static_cast<ssize_t>(len), ::write(fd, file.data(), len));
    logindex::Reader r = logindex::Reader::FromFd(UniqueFd(fd), 77);
    EXPECT_EQ(r.valid(), len >= logindex::kHeaderSize) << len;
    uint64_t whole = len >= logindex::kHeaderSize ? (len - logindex::kHeaderSize) / logindex::kEntrySize : 0;
    EXPECT_EQ(r.count(), whole);
    auto c = r.Cover(35, 200);
    ASSERT_FALSE(c.empty());
    EXPECT_EQ(c[0].offset, 35u);
    EXPECT_EQ(c[0].unix_seconds, whole >= 4 ? 103 : (whole > 0 ? static_cast<int64_t>(99 + whole) : 0)) << len;
  }
  int fd = ::memfd_create("idx", 0);
  ASSERT_EQ(static_cast<ssize_t>(file.size()), ::write(fd, file.data(), file.size()));
  EXPECT_FALSE(logindex::Reader::FromFd(UniqueFd(fd), 78).valid());  // another file's
  std::string garbage = file.substr(0, logindex::kHeaderSize) + std::string(200, '\xff');
  fd = ::memfd_create("idx", 0);
  ASSERT_EQ(static_cast<ssize_t>(garbage.size()), ::write(fd, garbage.data(), garbage.size()));
  logindex::Reader g = logindex::Reader::FromFd(UniqueFd(fd), 77);
  ASSERT_TRUE(g.valid());
  auto c = g.Cover(0, 100);
  EXPECT_EQ(c.size(), 1u);  // no entry inside: only the start, time unknown
  EXPECT_EQ(c[0].unix_seconds, 0);
}

logfiles::StreamRead Read(const std::string& data, std::vector<logfiles::TimedPart> times, bool full = false) {
  logfiles::StreamRead r;
  r.chunk.data = data;
  r.chunk.spans.push_back(logfiles::Span{1, 0, data.size(), 0});
  r.chunk.next = logfiles::Cursor{1, data.size()};
  r.times = std::move(times);
  r.full = full;
  return r;
}

TEST(LogMergeTest, BothStreamsInTimeOrderStdoutFirstWithinASecond) {
  auto m = logfiles::Merge({Read("o1\no2\n", {{3, 10}, {3, 12}}), Read("e1\ne2\n", {{3, 10}, {3, 11}})});
  EXPECT_EQ(m.data, "o1\ne1\ne2\no2\n");
  ASSERT_EQ(m.parts.size(), 4u);
  EXPECT_EQ(m.parts[1].stream, 1);
  EXPECT_EQ(m.parts[3].unix_seconds, 12);
  logfiles::KeepLastLines(&m, 2);
  EXPECT_EQ(m.data, "e2\no2\n");
  ASSERT_EQ(m.parts.size(), 2u);
  EXPECT_EQ(m.parts[0].length, 3u);
}

TEST(LogMergeTest, AStreamCutByItsLimitHoldsTheOtherBack) {
  auto m = logfiles::Merge({Read("o1\n", {{3, 10}}, true), Read("e1\ne2\n", {{3, 10}, {3, 11}})});
  EXPECT_EQ(m.data, "o1\ne1\n");
  EXPECT_EQ(m.next[1].offset, 3u);  // e2 comes in the next read
}

}  // namespace
}  // namespace outpost::logs
