// logfiles: Tail across rotated files, and the follow cursor across
// rotations (by hand and behind a real LogPipe).
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/sys.h"
#include "logs/log_files.h"
#include "logs/log_pipe.h"
#include "test_util.h"

namespace outpost::logs {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

class LogFilesTest : public ::testing::Test {
 protected:
  LogFilesTest() {
    char tmpl[] = "/tmp/outpost-logfiles-XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    log_ = dir_ + "/web.stdout";
  }
  ~LogFilesTest() override { ::nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

  void Put(int index, const std::string& content) {
    ASSERT_TRUE(sys::WriteFileAtomic(logfiles::RotatedPath(log_, index), content, 0640).ok());
  }
  void Append(const std::string& content) {
    auto fd = sys::Open(log_, O_WRONLY | O_CREAT | O_APPEND, 0640);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(sys::WriteAll(fd->get(), content.data(), content.size(), "append").ok());
  }
  // What a LogPipe rotation does with two files: active -> .1, new active.
  void RotateByHand() {
    if (::rename((log_ + ".1").c_str(), (log_ + ".2").c_str()) != 0) {
      ASSERT_EQ(errno, ENOENT);
    }
    ASSERT_EQ(0, ::rename(log_.c_str(), (log_ + ".1").c_str()));
    Put(0, "");
  }
  uint64_t Inode(const std::string& path) {
    struct stat st;
    EXPECT_EQ(0, ::stat(path.c_str(), &st));
    return static_cast<uint64_t>(st.st_ino);
  }
  // Follows from cursor in calls of max_bytes until caught up.
  std::string Follow(logfiles::Cursor* cursor, size_t max_bytes, bool* skipped = nullptr) {
    std::string out;
    for (int i = 0; i < 100000; ++i) {
      auto c = logfiles::ReadFrom(log_, *cursor, max_bytes);
      EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message());
      if (!c.ok()) break;
      EXPECT_LE(c->data.size(), max_bytes);
      if (skipped && c->skipped) *skipped = true;
      *cursor = c->next;
      if (c->data.empty()) break;
      out += c->data;
    }
    return out;
  }

  std::string dir_, log_;
};

TEST_F(LogFilesTest, RotatedPathNames) {
  EXPECT_EQ(logfiles::RotatedPath("/d/web.stdout", 0), "/d/web.stdout");
  EXPECT_EQ(logfiles::RotatedPath("/d/web.stdout", 1), "/d/web.stdout.1");
  EXPECT_EQ(logfiles::RotatedPath("/d/web.stdout", 12), "/d/web.stdout.12");
}

TEST_F(LogFilesTest, TailSpansRotatedFilesOldestFirst) {
  Put(2, "1\n2\n");
  Put(1, "3\n4\n");
  Put(0, "5\n6");  // trailing line without newline counts
  auto t = logfiles::Tail(log_, 10, 3);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->data, "4\n5\n6");
  EXPECT_EQ(t->next.inode, Inode(log_));
  EXPECT_EQ(t->next.offset, 3u);
  EXPECT_EQ(logfiles::Tail(log_, 10, 100)->data, "1\n2\n3\n4\n5\n6");
  EXPECT_EQ(logfiles::Tail(log_, 2, 100)->data, "3\n4\n5\n6") << "max_files limits the files read";
  EXPECT_EQ(logfiles::Tail(log_, 10, 0)->data, "");
  EXPECT_EQ(logfiles::Tail(log_, 10, 1)->data, "6");
  Put(0, "5\n6\n");
  EXPECT_EQ(logfiles::Tail(log_, 10, 1)->data, "6\n");
  EXPECT_EQ(logfiles::Tail(log_, 10, 2)->data, "5\n6\n");
}

TEST_F(LogFilesTest, TailLineStartingExactlyAtAFileBoundary) {
  Put(1, "a\nb\n");
  Put(0, "c\n");
  EXPECT_EQ(logfiles::Tail(log_, 10, 2)->data, "b\nc\n");
  Put(0, "");
  EXPECT_EQ(logfiles::Tail(log_, 10, 1)->data, "b\n");
}

TEST_F(LogFilesTest, TailIsBoundedByMaxBytes) {
  Put(1, "1\n2\n3\n");
  Put(0, "4\n5\n6");
  // The last 5 bytes start on a line: "4\n5\n6".
  EXPECT_EQ(logfiles::Tail(log_, 10, 100, 5)->data, "4\n5\n6");
  // The last 4 are "\n5\n6": begin at the first line start inside them.
  EXPECT_EQ(logfiles::Tail(log_, 10, 100, 4)->data, "5\n6");
  Put(0, std::string(50, 'x'));
  EXPECT_EQ(logfiles::Tail(log_, 10, 1, 10)->data, std::string(10, 'x')) << "one long line: cut raw";
}

TEST_F(LogFilesTest, TailOfNothing) {
  auto t = logfiles::Tail(log_, 10, 5);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data, "");
  EXPECT_EQ(t->next.inode, 0u);
  auto e = logfiles::End(log_);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->inode, 0u);
}

TEST_F(LogFilesTest, TailThenFollowContinuesWithoutGapOrOverlap) {
  Put(0, "a\nb\n");
  auto t = logfiles::Tail(log_, 10, 1);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data, "b\n");
  logfiles::Cursor c = t->next;
  EXPECT_EQ(Follow(&c, 100), "");
  Append("c\n");
  EXPECT_EQ(Follow(&c, 100), "c\n");
  EXPECT_EQ(Follow(&c, 100), "");
}

TEST_F(LogFilesTest, FollowFinishesTheRotatedFileThenTheNewActive) {
  Put(0, "abc");
  logfiles::Cursor c{Inode(log_), 1};
  RotateByHand();
  Append("def");
  auto r = logfiles::ReadFrom(log_, c, 100);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->data, "bcdef");
  EXPECT_EQ(r->next.inode, Inode(log_));
  EXPECT_EQ(r->next.offset, 3u);
  EXPECT_FALSE(r->skipped);
}

TEST_F(LogFilesTest, FollowAcrossSeveralRotationsInSmallReads) {
  Put(0, "1\n");
  logfiles::Cursor c = *logfiles::End(log_);
  Append("2\n");
  RotateByHand();
  Append("3\n");
  RotateByHand();
  Append("4\n5\n");
  EXPECT_EQ(Follow(&c, 1), "2\n3\n4\n5\n");
}

TEST_F(LogFilesTest, FollowFromTheStartOfTheActiveFile) {
  Put(0, "hello\n");
  logfiles::Cursor c;  // {0, 0}
  EXPECT_EQ(Follow(&c, 4), "hello\n");
  EXPECT_EQ(c.inode, Inode(log_));
}

TEST_F(LogFilesTest, FollowWhenTheFileWasRotatedOffSkipsToTheOldest) {
  Put(0, "old\n");
  logfiles::Cursor c{Inode(log_), 0};
  // Gone, as when it falls off the end. (Created before the old one goes, so
  // that the filesystem cannot hand its inode number to them.)
  Put(1, "x\n");
  Put(0, "y\n");
  bool skipped = false;
  EXPECT_EQ(Follow(&c, 100, &skipped), "x\ny\n");
  EXPECT_TRUE(skipped);
}

TEST_F(LogFilesTest, FollowWaitsWhileTheActiveFileIsShorterThanTheCursor) {
  Put(0, "abcdef");
  logfiles::Cursor c{Inode(log_), 4};
  ASSERT_EQ(0, ::truncate(log_.c_str(), 2));
  auto r = logfiles::ReadFrom(log_, c, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(r->next.offset, 4u);
  Append("cdefgh");
  EXPECT_EQ(logfiles::ReadFrom(log_, c, 100)->data, "efgh");
}

// Behind a real LogPipe with tiny files: a follower that reads in small
// pieces between writes sees every byte once, in order, across rotations.
TEST_F(LogFilesTest, FollowBehindALogPipeSeesEveryByteOnce) {
  auto loop = MakeLoop();
  logs::RotationPolicy pol;
  pol.max_file_size = 50;
  pol.max_files = 5;
  auto p = logs::LogPipe::Open(loop.get(), dir_ + "/.fifo", log_, dir_ + "/.cursor", pol, ::getuid(), ::getgid(),
                               nullptr);
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto w = (*p)->OpenWriteEnd();
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(sys::WriteAll(w->get(), "before\n", 7, "write").ok());
  ASSERT_TRUE(RunUntil(loop.get(), [&] { return (*p)->stats().bytes_written == 7; }));
  logfiles::Cursor c = *logfiles::End(log_);
  std::string want, got;
  for (int i = 0; i < 60; ++i) {
    std::string line = "line " + std::to_string(i) + "\n";
    want += line;
    ASSERT_TRUE(sys::WriteAll(w->get(), line.data(), line.size(), "write").ok());
    uint64_t target = 7 + want.size();
    ASSERT_TRUE(RunUntil(loop.get(), [&] { return (*p)->stats().bytes_written == target; }));
    if (i % 3 == 0) got += Follow(&c, 7);  // fewer reads than rotations: at most 4 rotated files behind
  }
  got += Follow(&c, 7);
  EXPECT_EQ(got, want);
  EXPECT_GT((*p)->stats().rotations, 5u);
  auto tail = logfiles::Tail(log_, pol.max_files, 3);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->data, "line 57\nline 58\nline 59\n");
}

}  // namespace
}  // namespace outpost::logs
