// LogPipe: byte-exact delivery through a real FIFO, rotation boundaries,
// partial-line holding, write errors, and exactly-once across crashes (at
// every step through the test seam, and with real SIGKILLs).
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/sys.h"
#include "logs/log_files.h"
#include "logs/log_pipe.h"
#include "test_util.h"

namespace outpost::logs {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;
using Step = LogPipe::Step;

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

void RemoveTree(const std::string& path) { ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

class TempDir {
 public:
  // The crash tests create and rename thousands of small files: they ask for
  // tmpfs (/dev/shm) when there is one.
  explicit TempDir(bool prefer_tmpfs = false) {
    std::string base = prefer_tmpfs && ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string tmpl = base + "/outpost-logpipe-XXXXXX";
    EXPECT_NE(::mkdtemp(&tmpl[0]), nullptr);
    path_ = tmpl;
  }
  ~TempDir() { RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Paths {
  explicit Paths(const std::string& d)
      : dir(d), fifo(d + "/.web.stdout.fifo"), log(d + "/web.stdout"), cursor(d + "/.web.stdout.cursor") {}
  std::string dir, fifo, log, cursor;
};

std::string ReadOrEmpty(const std::string& path) {
  auto r = sys::ReadFile(path, 64 << 20);
  return r.ok() ? *r : std::string();
}

// Every log file in dir (dotfiles are the FIFO and the cursor): name -> content.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    out[e->d_name] = ReadOrEmpty(dir + "/" + e->d_name);
  }
  ::closedir(d);
  return out;
}

// The stream as the files hold it: oldest rotated file first, active last.
std::string Concat(const std::string& log, int max_files) {
  std::string s;
  for (int k = max_files - 1; k >= 0; --k) s += ReadOrEmpty(logfiles::RotatedPath(log, k));
  return s;
}

uint64_t PipeBytes(int fd) {
  int n = 0;
  EXPECT_EQ(0, ::ioctl(fd, FIONREAD, &n));
  return static_cast<uint64_t>(n);
}

void WriteAll(int fd, const std::string& s) {
  ASSERT_TRUE(sys::WriteAll(fd, s.data(), s.size(), "write fifo").ok());
}

std::string NumberedLines(int from, int to) {
  std::string s;
  for (int i = from; i <= to; ++i) s += std::to_string(i) + "\n";
  return s;
}

// A line of exactly len bytes (newline included) that names its number.
std::string FixedLine(int n, size_t len) {
  std::string s = "line-" + std::to_string(n) + "-";
  while (s.size() + 1 < len) s += static_cast<char>('a' + s.size() % 26);
  return s + "\n";
}

// Writes s in pseudo-random slices (so lines arrive in pieces), pausing
// briefly now and then when pause_every > 0. For forked writer children.
void WriteSliced(int fd, const std::string& s, unsigned seed, size_t max_slice, size_t pause_every) {
  std::mt19937 rng(seed);
  size_t pos = 0, since_pause = 0;
  while (pos < s.size()) {
    size_t n = std::min<size_t>(s.size() - pos, 1 + rng() % max_slice);
    if (!sys::WriteAll(fd, s.data() + pos, n, "write").ok()) ::_exit(9);
    pos += n;
    since_pause += n;
    if (pause_every > 0 && since_pause >= pause_every) {
      since_pause = 0;
      struct timespec ts = {0, 1000000};
      ::nanosleep(&ts, nullptr);
    }
  }
}

class LogPipeTest : public ::testing::Test {
 protected:
  LogPipeTest() : paths_(dir_.path()) {}

  std::unique_ptr<LogPipe> Open(RotationPolicy policy = {}, LogPipe::TestHooks hooks = {}) {
    auto p = LogPipe::Open(loop_.get(), paths_.fifo, paths_.log, paths_.cursor, policy, ::getuid(), ::getgid(),
                           [this](const std::string& e, uint64_t dropped) { Notice(e, dropped); }, std::move(hooks));
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message());
    return p.ok() ? std::move(*p) : nullptr;
  }

  UniqueFd WriteEnd(LogPipe* p) {
    auto fd = p->OpenWriteEnd();
    EXPECT_TRUE(fd.ok()) << (fd.ok() ? "" : fd.error().message());
    return fd.ok() ? std::move(*fd) : UniqueFd();
  }

  // Runs the loop until the FIFO (seen through fd) holds at most `left` bytes.
  bool RunUntilFifoHolds(int fd, uint64_t left) {
    return RunUntil(loop_.get(), [&] { return PipeBytes(fd) <= left; });
  }

  // Writes s as the task would, running the loop whenever the FIFO is full
  // (more than its default 64 KiB would otherwise block the test).
  void Feed(int fd, const std::string& s) {
    int flags = ::fcntl(fd, F_GETFL);
    ASSERT_EQ(0, ::fcntl(fd, F_SETFL, flags | O_NONBLOCK));
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::write(fd, s.data() + off, s.size() - off);
      if (n > 0) {
        off += static_cast<size_t>(n);
      } else {
        ASSERT_TRUE(n < 0 && errno == EAGAIN) << std::strerror(errno);
        ASSERT_TRUE(loop_->RunOnce(kNanosPerSecond).ok());
      }
    }
    ASSERT_EQ(0, ::fcntl(fd, F_SETFL, flags));
  }

  // Lets the loop run for a while with nothing expected to happen (shorter
  // than the hold time).
  void Idle(int64_t nanos) {
    int64_t until = MonotonicNanos() + nanos;
    while (MonotonicNanos() < until) ASSERT_TRUE(loop_->RunOnce(until - MonotonicNanos()).ok());
  }

  TempDir dir_;
  Paths paths_;
  std::unique_ptr<Loop> loop_ = MakeLoop();
  void Notice(const std::string& e, uint64_t dropped) {
    if (e.empty()) {
      resumed_.push_back(dropped);
    } else {
      errors_.push_back(e);
    }
  }

  std::vector<std::string> errors_;
  std::vector<uint64_t> resumed_;  // one per "writing again", with the bytes dropped meanwhile
};

// ---- delivery and rotation ------------------------------------------------

TEST_F(LogPipeTest, ManyLinesFromAChildArriveByteExact) {
  auto p = Open();
  ASSERT_TRUE(p);
  UniqueFd w = WriteEnd(p.get());
  std::string expected = NumberedLines(1, 300000);  // ~2 MB: many chunks, lines split across writes
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    WriteSliced(w.get(), expected, 7, 70000, 0);
    ::_exit(0);
  }
  w.Reset();
  bool exited = false;
  ASSERT_TRUE(loop_->WatchChild(pid, [&](pid_t, int) { exited = true; }).ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return exited; }, 30 * kNanosPerSecond));
  p->Drain();
  std::string got = ReadOrEmpty(paths_.log);
  EXPECT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "content differs";
  EXPECT_EQ(p->stats().bytes_written, expected.size());
  EXPECT_EQ(p->stats().bytes_dropped, 0u);
  EXPECT_EQ(p->stats().rotations, 0u);
  EXPECT_TRUE(errors_.empty());
}

// Every pipe of a process peeks through the one scratch pipe: a second pipe
// costs its FIFO, cursor and log file only, and interleaved output of two
// tasks reaches each one's file and nothing of it the other's.
bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST_F(LogPipeTest, PipesShareOneScratchPipeAndKeepTheirOutputApart) {
  auto open_fds = [] {
    int n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) return -1;
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
    return n;
  };
  auto a = Open();
  ASSERT_TRUE(a);
  int before = open_fds();
  Paths pb(dir_.path() + "/b");
  ASSERT_TRUE(sys::MkdirAll(pb.dir, 0700).ok());
  auto b = LogPipe::Open(loop_.get(), pb.fifo, pb.log, pb.cursor, {}, ::getuid(), ::getgid(), nullptr);
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(open_fds() - before, 1) << "the FIFO read end only: no scratch pipe of its own, no file before data";
  EXPECT_FALSE(Exists(pb.log)) << "the log file is made by the first write";
  UniqueFd wa = WriteEnd(a.get()), wb = WriteEnd(b->get());
  std::string ea, eb;
  for (int i = 0; i < 2000; i++) {
    std::string la = "a" + std::to_string(i) + "\n", lb = "b" + std::to_string(i) + "\n";
    ASSERT_TRUE(sys::WriteAll(wa.get(), la.data(), la.size(), "write").ok());
    ASSERT_TRUE(sys::WriteAll(wb.get(), lb.data(), lb.size(), "write").ok());
    ea += la;
    eb += lb;
    if (i % 100 == 0) {
      ASSERT_TRUE(loop_->RunOnce(0).ok());  // peeks of both, interleaved
    }
  }
  ASSERT_TRUE(RunUntilFifoHolds(wa.get(), 0));
  ASSERT_TRUE(RunUntilFifoHolds(wb.get(), 0));
  EXPECT_EQ(open_fds() - before, 3) << "the FIFO read end, and the write end this test holds; the files are "
                                       "closed after each burst";
  EXPECT_FALSE(Exists(pb.cursor)) << "nothing was recorded: no cursor file";
  a->Drain();
  (*b)->Drain();
  EXPECT_TRUE(ReadOrEmpty(paths_.log) == ea) << "a's file holds a's lines, exactly";
  EXPECT_TRUE(ReadOrEmpty(pb.log) == eb) << "b's file holds b's lines, exactly";
}

TEST_F(LogPipeTest, RotationKeepsLinesWholeFilesUnderLimitAndNewestIsDotOne) {
  RotationPolicy pol;
  pol.max_file_size = 100;
  pol.max_files = 4;
  auto p = Open(pol);
  UniqueFd w = WriteEnd(p.get());
  std::string all;
  for (int i = 1; i <= 20; ++i) all += FixedLine(i, 30);
  WriteAll(w.get(), all);
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  // 3 lines (90 bytes) fit in a file: lines 1-3, 4-6, ... 19-20; 4 files kept.
  auto lines = [](int from, int to) {
    std::string s;
    for (int i = from; i <= to; ++i) s += FixedLine(i, 30);
    return s;
  };
  EXPECT_EQ(ReadOrEmpty(paths_.log), lines(19, 20));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".1"), lines(16, 18));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".2"), lines(13, 15));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".3"), lines(10, 12));
  EXPECT_FALSE(Exists(paths_.log + ".4"));
  EXPECT_EQ(Snapshot(paths_.dir).size(), 4u);
  EXPECT_EQ(p->stats().rotations, 6u);
  EXPECT_EQ(p->stats().bytes_written, all.size());
}

TEST_F(LogPipeTest, LineLongerThanAFileIsCutAtTheLimit) {
  RotationPolicy pol;
  pol.max_file_size = 100;
  auto p = Open(pol);
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "a\n" + std::string(250, 'x') + "\nb\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".3"), "a\n");
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".2"), std::string(100, 'x'));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".1"), std::string(100, 'x'));
  EXPECT_EQ(ReadOrEmpty(paths_.log), std::string(50, 'x') + "\nb\n");
}

TEST_F(LogPipeTest, MaxFilesOneKeepsOnlyTheActiveFile) {
  RotationPolicy pol;
  pol.max_file_size = 10;
  pol.max_files = 1;
  auto p = Open(pol);
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "L001\nL002\nL003\nL004\nL005\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "L005\n");
  EXPECT_EQ(Snapshot(paths_.dir).size(), 1u);
  EXPECT_EQ(p->stats().rotations, 2u);
}

TEST_F(LogPipeTest, ExistingActiveFileSizeCountsAndExtraOldFilesGo) {
  ASSERT_TRUE(sys::WriteFileAtomic(paths_.log, std::string(79, 'o') + "\n", 0640).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(paths_.log + ".5", "from a larger max_files\n", 0640).ok());
  RotationPolicy pol;
  pol.max_file_size = 100;
  pol.max_files = 3;
  auto p = Open(pol);
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), FixedLine(1, 30));
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".1"), std::string(79, 'o') + "\n");
  EXPECT_EQ(ReadOrEmpty(paths_.log), FixedLine(1, 30));
  EXPECT_FALSE(Exists(paths_.log + ".5"));
}

TEST_F(LogPipeTest, ReusesAnExistingFifoWithUnreadData) {
  ASSERT_EQ(0, ::mkfifo(paths_.fifo.c_str(), 0600));
  // The task's end, as after a worker restart: data written while nobody read.
  UniqueFd w(::open(paths_.fifo.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(w);
  WriteAll(w.get(), "written while the worker was down\n");
  auto p = Open();
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "written while the worker was down\n");
}

TEST_F(LogPipeTest, RefusesSomethingElseAtTheFifoPath) {
  ASSERT_TRUE(sys::WriteFileAtomic(paths_.fifo, "not a fifo", 0600).ok());
  auto p = LogPipe::Open(loop_.get(), paths_.fifo, paths_.log, paths_.cursor, {}, ::getuid(), ::getgid(), nullptr);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message().find("is not a FIFO"), std::string::npos) << p.error().message();
  RotationPolicy bad;
  bad.max_files = 0;
  EXPECT_FALSE(LogPipe::Open(loop_.get(), paths_.fifo + "2", paths_.log, paths_.cursor, bad, 0, 0, nullptr).ok());
}

TEST_F(LogPipeTest, WriteEndIsReadWriteBlockingAndCloseOnExec) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  int fl = ::fcntl(w.get(), F_GETFL);
  EXPECT_EQ(fl & O_ACCMODE, O_RDWR);
  EXPECT_EQ(fl & O_NONBLOCK, 0);
  EXPECT_TRUE(::fcntl(w.get(), F_GETFD) & FD_CLOEXEC);
  struct stat st;
  ASSERT_EQ(0, ::stat(paths_.fifo.c_str(), &st));
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Nobody but the task holds it and the LogPipe is gone: writing still works
  // (no SIGPIPE), the bytes wait in the pipe.
  p.reset();
  EXPECT_EQ(::write(w.get(), "x\n", 2), 2);
}

// ---- partial lines ----------------------------------------------------------

TEST_F(LogPipeTest, PartialLineIsHeldUntilItsNewline) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "first\nhello wor");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ReadOrEmpty(paths_.log) == "first\n"; }));
  Idle(40 * kNanosPerMilli);
  EXPECT_EQ(ReadOrEmpty(paths_.log), "first\n") << "a partial line must wait for its newline";
  EXPECT_EQ(PipeBytes(w.get()), 9u) << "the held bytes stay in the FIFO";
  WriteAll(w.get(), "ld\nnext");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ReadOrEmpty(paths_.log) == "first\nhello world\n"; }));
  EXPECT_EQ(PipeBytes(w.get()), 4u);
}

TEST_F(LogPipeTest, LineArrivingInTwoPiecesIsNotSplitByRotation) {
  RotationPolicy pol;
  pol.max_file_size = 20;
  auto p = Open(pol);
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "aaaaaaaaaa\nbbbbbbb");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ReadOrEmpty(paths_.log) == "aaaaaaaaaa\n"; }));
  Idle(20 * kNanosPerMilli);
  WriteAll(w.get(), "bbbbbbbbb\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".1"), "aaaaaaaaaa\n");
  EXPECT_EQ(ReadOrEmpty(paths_.log), "bbbbbbbbbbbbbbbb\n");
}

TEST_F(LogPipeTest, PartialLineIsFlushedByDrain) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "done\nno newline at exit");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ReadOrEmpty(paths_.log) == "done\n"; }));
  p->Drain();
  EXPECT_EQ(ReadOrEmpty(paths_.log), "done\nno newline at exit");
  EXPECT_EQ(PipeBytes(w.get()), 0u);
}

TEST_F(LogPipeTest, PartialLineIsFlushedByTheTimerWhenNoMoreDataComes) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  int64_t start = MonotonicNanos();
  WriteAll(w.get(), "prompt> ");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return ReadOrEmpty(paths_.log) == "prompt> "; }));
  EXPECT_GE(MonotonicNanos() - start, LogPipe::kHoldNanos);
}

// A FIFO costs kernel memory by its size: it keeps the kernel's default
// until a peek finds it half full, then grows to kBigFifo.
TEST_F(LogPipeTest, AFifoGrowsOnlyForATaskThatWritesInBursts) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  const int initial = ::fcntl(w.get(), F_GETPIPE_SZ);
  ASSERT_GT(initial, 0);
  ASSERT_LT(static_cast<size_t>(initial), LogPipe::kBigFifo) << "starts at the default size";
  for (int i = 0; i < 100; ++i) {
    WriteAll(w.get(), "a short line\n");
    ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  }
  EXPECT_EQ(::fcntl(w.get(), F_GETPIPE_SZ), initial) << "a task writing little keeps the small FIFO";
  std::string burst = NumberedLines(1, 20000);  // far more than the small FIFO holds
  ASSERT_GT(burst.size(), static_cast<size_t>(initial));
  Feed(w.get(), burst);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return p->stats().bytes_written == 100 * 13 + burst.size(); }));
  EXPECT_EQ(::fcntl(w.get(), F_GETPIPE_SZ), static_cast<int>(LogPipe::kBigFifo));
  std::string all = ReadOrEmpty(paths_.log);
  EXPECT_EQ(all.substr(100 * 13), burst) << "every line once, in order, across the growth";
}

TEST_F(LogPipeTest, LongPartialLineIsWrittenAtTheHoldCap) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  std::string big(LogPipe::kMaxHold + 1000, 'z');
  int64_t start = MonotonicNanos();
  Feed(w.get(), big);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return p->stats().bytes_written == big.size(); }));
  EXPECT_LT(MonotonicNanos() - start, LogPipe::kHoldNanos) << "must not wait for the hold timer";
}

// ---- write errors -------------------------------------------------------------

TEST_F(LogPipeTest, WriteErrorsDropCountReportOncePerEpisodeAndRecover) {
  int fail_with = 0;
  LogPipe::TestHooks hooks;
  hooks.fail_write = [&] { return fail_with; };
  auto p = Open({}, hooks);
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "kept 1\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));

  fail_with = ENOSPC;
  std::string lost;
  for (int i = 0; i < 5; ++i) {
    lost += "lost " + std::to_string(i) + "\n";
    WriteAll(w.get(), "lost " + std::to_string(i) + "\n");
    ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0)) << "dropped data must still be consumed";
  }
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !errors_.empty(); }));
  Idle(10 * kNanosPerMilli);
  ASSERT_EQ(errors_.size(), 1u) << "one on_error per episode, not per chunk";
  EXPECT_NE(errors_[0].find("No space left on device"), std::string::npos) << errors_[0];
  EXPECT_EQ(p->stats().bytes_dropped, lost.size());
  EXPECT_EQ(p->stats().last_error, errors_[0]);

  EXPECT_TRUE(resumed_.empty());

  fail_with = 0;
  WriteAll(w.get(), "kept 2\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "kept 1\nkept 2\n");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !resumed_.empty(); })) << "the end of the episode is reported";
  EXPECT_EQ(resumed_, std::vector<uint64_t>{lost.size()}) << "with the bytes dropped in it";
  EXPECT_EQ(p->stats().last_error, "") << "no current error once writing works again";
  EXPECT_EQ(p->stats().bytes_dropped, lost.size()) << "the total stays";

  fail_with = EIO;  // a new episode is reported again
  WriteAll(w.get(), "lost again\n");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return errors_.size() == 2; }));
  EXPECT_NE(errors_[1].find("Input/output error"), std::string::npos) << errors_[1];
}

// Out of space: the oldest rotated file is deleted and the write tried once
// more, so nothing is dropped while older output can make room.
TEST_F(LogPipeTest, NoSpaceDeletesTheOldestRotatedFileAndRetries) {
  int fail_next = 0;
  LogPipe::TestHooks hooks;
  hooks.fail_write = [&] { return fail_next-- > 0 ? ENOSPC : 0; };
  RotationPolicy pol;
  pol.max_file_size = 8;
  pol.max_files = 4;
  auto p = Open(pol, hooks);
  UniqueFd w = WriteEnd(p.get());
  for (const char* l : {"one 01\n", "two 02\n", "three\n", "four\n"}) {
    WriteAll(w.get(), l);
    ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  }
  ASSERT_EQ(ReadOrEmpty(paths_.log + ".3"), "one 01\n");
  ASSERT_EQ(ReadOrEmpty(paths_.log + ".2"), "two 02\n");

  fail_next = 1;  // the write fails once, as on a full disk
  WriteAll(w.get(), "ok\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "four\nok\n");
  EXPECT_FALSE(Exists(paths_.log + ".3")) << "the oldest rotated file made room";
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".2"), "two 02\n") << "only the oldest goes";
  EXPECT_EQ(p->stats().bytes_dropped, 0u);
  Idle(10 * kNanosPerMilli);
  EXPECT_TRUE(errors_.empty());

  // A rotation (.2 -> .3, ...) first, then the write fails, the oldest file
  // ("two 02") goes, and the retry fails too: dropped and reported.
  fail_next = 2;
  WriteAll(w.get(), "gone\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(p->stats().bytes_dropped, 5u);
  EXPECT_FALSE(Exists(paths_.log + ".3"));
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".2"), "three\n");
  EXPECT_EQ(ReadOrEmpty(paths_.log + ".1"), "four\nok\n");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return errors_.size() == 1; }));
}

// A real "disk full": RLIMIT_FSIZE makes writes past the limit fail with
// EFBIG, for root too. A child writes far more than the pipe holds: it must
// never block while the log cannot be written.
TEST_F(LogPipeTest, FileSizeLimitDropsWithoutBlockingTheWriterThenRecovers) {
  auto p = Open();
  UniqueFd w = WriteEnd(p.get());
  struct rlimit old;
  ASSERT_EQ(0, ::getrlimit(RLIMIT_FSIZE, &old));
  struct sigaction ign = {}, old_xfsz;
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(0, ::sigaction(SIGXFSZ, &ign, &old_xfsz));
  struct Restore {
    struct rlimit lim;
    struct sigaction sa;
    ~Restore() {
      ::setrlimit(RLIMIT_FSIZE, &lim);
      ::sigaction(SIGXFSZ, &sa, nullptr);
    }
  } restore{old, old_xfsz};
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(0, ::setrlimit(RLIMIT_FSIZE, &small));

  std::string flood = NumberedLines(1, 600000);  // ~4.5 MB, several pipefuls
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    WriteSliced(w.get(), flood, 3, 100000, 0);
    ::_exit(0);
  }
  bool exited = false;
  ASSERT_TRUE(loop_->WatchChild(pid, [&](pid_t, int) { exited = true; }).ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return exited && PipeBytes(w.get()) == 0; }, 30 * kNanosPerSecond))
      << "the writer blocked";
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !errors_.empty(); }));
  EXPECT_EQ(errors_.size(), 1u);
  EXPECT_NE(p->stats().last_error.find("File too large"), std::string::npos) << p->stats().last_error;
  EXPECT_EQ(p->stats().bytes_written, 4096u);
  EXPECT_EQ(p->stats().bytes_written + p->stats().bytes_dropped, flood.size());
  EXPECT_EQ(ReadOrEmpty(paths_.log), flood.substr(0, 4096));

  ASSERT_EQ(0, ::setrlimit(RLIMIT_FSIZE, &old));  // space is back
  WriteAll(w.get(), "\nafter\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), flood.substr(0, 4096) + "\nafter\n");
  EXPECT_EQ(errors_.size(), 1u);
}

// The log dir is made with the first file; where it cannot be, the output is
// dropped (one error episode) until it can.
TEST_F(LogPipeTest, LogDirIsMadeByTheFirstWriteAndDropsWhileItCannotBe) {
  std::string blocker = paths_.dir + "/blocker";
  ASSERT_TRUE(sys::WriteFileAtomic(blocker, "not a directory", 0600).ok());
  std::string sub = blocker + "/logs";
  auto p = LogPipe::Open(loop_.get(), paths_.fifo, sub + "/web.stdout", paths_.dir + "/.web.stdout.cursor", {},
                         ::getuid(), ::getgid(), [this](const std::string& e, uint64_t dropped) { Notice(e, dropped); });
  ASSERT_TRUE(p.ok()) << p.error().message();
  UniqueFd w = WriteEnd(p->get());
  WriteAll(w.get(), "nowhere to go\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !errors_.empty(); }));
  EXPECT_EQ(errors_.size(), 1u);
  EXPECT_NE(errors_[0].find(blocker), std::string::npos) << errors_[0];
  EXPECT_EQ((*p)->stats().bytes_dropped, 14u);
  ASSERT_EQ(0, ::unlink(blocker.c_str()));
  WriteAll(w.get(), "arrives\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(sub + "/web.stdout"), "arrives\n");
  EXPECT_EQ((*p)->stats().bytes_dropped, 14u);
}

// Between bursts the pipe holds no file open: a log file replaced or
// truncated meanwhile (by hand, or by another program) is taken as it is.
TEST_F(LogPipeTest, ALogFileReplacedBetweenBurstsIsTakenAsItIs) {
  auto p = Open();
  ASSERT_TRUE(p);
  UniqueFd w = WriteEnd(p.get());
  WriteAll(w.get(), "one\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "one\n");
  ASSERT_EQ(0, ::unlink(paths_.log.c_str()));
  WriteAll(w.get(), "two\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "two\n");
  ASSERT_TRUE(sys::WriteFileAtomic(paths_.log, "partial", 0600).ok());  // replaced: writing goes on at its end
  WriteAll(w.get(), "three\n");
  ASSERT_TRUE(RunUntilFifoHolds(w.get(), 0));
  EXPECT_EQ(ReadOrEmpty(paths_.log), "partialthree\n");
  EXPECT_EQ(p->stats().bytes_written, 14u);
}

// ---- exactly once across crashes ---------------------------------------------

// Lines of varied length, some longer than a file, ending in a partial line.
std::string CrashStream() {
  std::string s;
  for (int i = 0; i < 26; ++i) {
    size_t len = 3 + (static_cast<size_t>(i) * 37) % 40;
    if (i % 11 == 4) len = 150;  // longer than max_file_size
    std::string line = "#" + std::to_string(i) + ":";
    while (line.size() + 1 < len) line += static_cast<char>('a' + (i + line.size()) % 26);
    s += line + "\n";
  }
  return s + "tail-without-newline";
}
constexpr size_t kCrashTail = 20;  // strlen("tail-without-newline")

// One worker life on dir: opens a LogPipe that crashes at its crash_at-th
// step (never if 0), runs it until the FIFO holds at most the final partial
// line, then drains. Returns whether it crashed; counts the steps it passed.
bool Life(Loop* loop, const Paths& p, int writer_fd, RotationPolicy pol, LogPipe::TestHooks hooks, int crash_at,
          int* steps, Step* crashed_step = nullptr) {
  int seen = 0;
  hooks.crash_at = [&](Step s) {
    ++seen;
    if (crash_at > 0 && seen == crash_at) {
      if (crashed_step) *crashed_step = s;
      return true;
    }
    return false;
  };
  auto lp = LogPipe::Open(loop, p.fifo, p.log, p.cursor, pol, ::getuid(), ::getgid(), nullptr, hooks);
  EXPECT_TRUE(lp.ok());
  if (!lp.ok()) return false;
  auto& pipe = *lp;
  bool ok = RunUntil(loop, [&] { return pipe->crashed() || PipeBytes(writer_fd) <= kCrashTail; });
  EXPECT_TRUE(ok);
  if (!pipe->crashed()) pipe->Drain();
  if (steps) *steps = seen;
  return pipe->crashed();  // destroyed here without any cleanup, like a killed process
}

class LogPipeCrashTest : public ::testing::TestWithParam<bool> {};  // param: copy mode

struct Scenario {
  RotationPolicy pol;
  LogPipe::TestHooks hooks;
};

Scenario MakeScenario(bool copy_mode, int max_files) {
  Scenario s;
  s.pol.max_file_size = 64;
  s.pol.max_files = max_files;
  s.hooks.max_move = 16;  // moves in several pieces: kills inside a move
  s.hooks.force_copy = copy_mode;
  return s;
}

// Runs lives on a fresh dir holding the stream: first crashing at crash_points
// in turn, then one clean life. Returns the files.
std::map<std::string, std::string> RunLives(const std::string& base, const Scenario& sc,
                                            const std::vector<int>& crash_points, int* steps = nullptr,
                                            Step* first_crash = nullptr) {
  RemoveTree(base);
  EXPECT_EQ(0, ::mkdir(base.c_str(), 0755));
  Paths p(base);
  EXPECT_EQ(0, ::mkfifo(p.fifo.c_str(), 0600));
  UniqueFd w(::open(p.fifo.c_str(), O_RDWR | O_CLOEXEC));  // the task's end
  std::string stream = CrashStream();
  EXPECT_TRUE(sys::WriteAll(w.get(), stream.data(), stream.size(), "write").ok());
  auto loop = MakeLoop();
  for (size_t i = 0; i < crash_points.size(); ++i) {
    Life(loop.get(), p, w.get(), sc.pol, sc.hooks, crash_points[i], nullptr, i == 0 ? first_crash : nullptr);
  }
  Life(loop.get(), p, w.get(), sc.pol, sc.hooks, 0, steps);
  EXPECT_EQ(PipeBytes(w.get()), 0u);
  return Snapshot(base);
}

std::string Describe(const std::map<std::string, std::string>& files) {
  std::string s;
  for (const auto& [name, content] : files) s += name + "=[" + content + "] ";
  return s;
}

// A crash at each step in turn, then recovery: the files must be exactly
// those of an uninterrupted run (same names, same bytes), so nothing was lost,
// duplicated, reordered or placed differently.
TEST_P(LogPipeCrashTest, CrashAtEveryStepThenRecoverGivesTheUninterruptedFiles) {
  const bool copy_mode = GetParam();
  TempDir dir(true);
  std::string base = dir.path() + "/run";
  for (int max_files : {30, 3}) {
    Scenario sc = MakeScenario(copy_mode, max_files);
    int total = 0;
    auto reference = RunLives(base, sc, {}, &total);
    if (max_files == 30) {
      std::string all;
      for (int k = max_files - 1; k >= 0; --k) {
        auto it = reference.find(k == 0 ? "web.stdout" : "web.stdout." + std::to_string(k));
        if (it != reference.end()) all += it->second;
      }
      ASSERT_EQ(all, CrashStream()) << "the reference run itself must keep every byte";
      ASSERT_LT(reference.size(), 30u);
    }
    for (const auto& [name, content] : reference) EXPECT_LE(content.size(), 64u) << name;
    ASSERT_GT(total, 100);
    int checked = 0;
    for (int k = 1; k <= total; ++k) {
      Step step = Step::kPeeked;
      auto got = RunLives(base, sc, {k}, nullptr, &step);
      if (copy_mode && step == Step::kCopyMarked) {
        // The one ambiguous window of the fallback: at-least-once, so the
        // interrupted chunk appears twice and nothing is missing.
        std::string all;
        for (int i = max_files - 1; i >= 0; --i) {
          auto it = got.find(i == 0 ? "web.stdout" : "web.stdout." + std::to_string(i));
          if (it != got.end()) all += it->second;
        }
        if (max_files == 30) {
          const std::string stream = CrashStream();
          size_t extra = all.size() - stream.size();
          bool one_dup = false;
          for (size_t at = extra; at <= stream.size() && !one_dup && all.size() > stream.size(); ++at) {
            one_dup = all == stream.substr(0, at) + stream.substr(at - extra, extra) + stream.substr(at);
          }
          EXPECT_TRUE(one_dup) << "cut " << k << ": " << Describe(got);
        }
        continue;
      }
      ASSERT_EQ(got, reference) << "crash at step " << k << " of " << total << " (max_files " << max_files
                                << ")\n got: " << Describe(got) << "\nwant: " << Describe(reference);
      ++checked;
    }
    EXPECT_GT(checked, total / 2);
  }
}

// Crashes again while recovering from a crash (e.g. in the middle of
// resuming a rotation), then recovers.
TEST_P(LogPipeCrashTest, CrashDuringRecoveryThenRecoverGivesTheUninterruptedFiles) {
  const bool copy_mode = GetParam();
  TempDir dir(true);
  std::string base = dir.path() + "/run";
  Scenario sc = MakeScenario(copy_mode, 6);
  int total = 0;
  auto reference = RunLives(base, sc, {}, &total);
  for (int k = 1; k <= total; k += 3) {
    for (int again : {1, 2, 4, 9}) {
      Step step = Step::kPeeked;
      auto got = RunLives(base, sc, {k, again, again}, nullptr, &step);
      if (copy_mode) continue;  // duplicates are possible in the fallback; covered above
      ASSERT_EQ(got, reference) << "crash at " << k << " then at " << again << " twice";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LogPipe, LogPipeCrashTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Copy" : "Splice"; });

// The real thing: a child process runs a Loop with a LogPipe while another
// child streams numbered lines; we SIGKILL the reader at random moments and
// start a new one each time. The FIFO is also held open by this process, as
// the keeper would, so its buffer outlives every reader.
TEST(LogPipeKill, SigkillAtRandomMomentsLosesAndDuplicatesNothing) {
  TempDir dir;
  Paths p(dir.path());
  ASSERT_EQ(0, ::mkfifo(p.fifo.c_str(), 0600));
  UniqueFd keeper(::open(p.fifo.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(keeper);
  ASSERT_GE(::fcntl(keeper.get(), F_SETPIPE_SZ, 1 << 20), 0);
  RotationPolicy pol;
  pol.max_file_size = 64 << 10;
  pol.max_files = 200;
  std::string stream;
  for (int i = 1; i <= 400000; ++i) stream += "line " + std::to_string(i) + (i % 7 == 0 ? " with some more text\n" : "\n");

  pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    // Mostly at full speed, so a reader is busy when it is killed, with a
    // few pauses that leave partial lines held.
    WriteSliced(keeper.get(), stream, 11, 20000, 512 << 10);
    ::_exit(0);
  }
  auto start_reader = [&] {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto loop = Loop::Create();
      if (!loop.ok()) ::_exit(2);
      auto lp = LogPipe::Open(loop->get(), p.fifo, p.log, p.cursor, pol, ::getuid(), ::getgid(), nullptr);
      if (!lp.ok()) ::_exit(3);
      (void)(*loop)->Run();
      ::_exit(4);
    }
    return pid;
  };

  auto loop = MakeLoop();
  bool writer_done = false;
  ASSERT_TRUE(loop->WatchChild(writer, [&](pid_t, int st) {
    writer_done = true;
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }).ok());
  std::mt19937 rng(20251122);
  int kills = 0;
  int64_t give_up = MonotonicNanos() + 60 * kNanosPerSecond;
  while (!writer_done || kills < 30) {
    ASSERT_LT(MonotonicNanos(), give_up) << "the writer never finished";
    pid_t reader = start_reader();
    ASSERT_GT(reader, 0);
    int64_t kill_at = MonotonicNanos() + static_cast<int64_t>(rng() % 6000) * 1000;  // a random moment, 0-6 ms
    RunUntil(loop.get(), [&] { return MonotonicNanos() >= kill_at; });
    ASSERT_EQ(0, ::kill(reader, SIGKILL));
    int st = 0;
    ASSERT_EQ(reader, ::waitpid(reader, &st, 0));
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "reader failed on its own: status " << st;
    ++kills;
  }

  // A last reader recovers and drains what is left.
  auto lp = LogPipe::Open(loop.get(), p.fifo, p.log, p.cursor, pol, ::getuid(), ::getgid(), nullptr);
  ASSERT_TRUE(lp.ok()) << lp.error().message();
  (*lp)->Drain();
  EXPECT_EQ(PipeBytes(keeper.get()), 0u);
  std::string got = Concat(p.log, pol.max_files);
  EXPECT_EQ(got.size(), stream.size()) << "after " << kills << " kills";
  EXPECT_TRUE(got == stream) << "content differs after " << kills << " kills";
  for (const auto& [name, content] : Snapshot(p.dir)) {
    EXPECT_LE(content.size(), pol.max_file_size) << name;
  }
  EXPECT_GT(Snapshot(p.dir).size(), 10u) << "expected many rotations";
}

}  // namespace
}  // namespace outpost::logs
