// loop::DirWatch: entries found at start, what is reported at once and what
// after the settle time, removal by delete and by rename away, dot-names,
// sockets (also in subdirectories made later), the directory removed, moved
// and recreated, rescans and queue overflow, and teardown from a callback.
// Every test synchronises on callbacks (RunUntil) and only then checks a
// short quiet period for stray ones. "At once" is shown with a settle time
// far longer than the wait.
#include "loop/dir_watch.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/sys.h"
#include "test_util.h"

namespace outpost::loop {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;
using Kind = DirWatch::Kind;

constexpr int64_t kSettle = 20 * kNanosPerMilli;
constexpr int64_t kLongSettle = 60 * kNanosPerSecond;  // never reached by a test

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }
void RemoveTree(const std::string& path) { ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

void Write(const std::string& path, const std::string& data) {
  auto fd = sys::Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.error().message();
  ASSERT_TRUE(sys::WriteAll(fd->get(), data.data(), data.size(), "write").ok());
}

void Rename(const std::string& from, const std::string& to) {
  ASSERT_EQ(0, ::rename(from.c_str(), to.c_str())) << from << " -> " << to << ": " << std::strerror(errno);
}

void Mkdir(const std::string& path) { ASSERT_EQ(0, ::mkdir(path.c_str(), 0755)) << path << ": " << std::strerror(errno); }

// A listening unix socket's file; the socket itself is closed at once (the
// file stays, as when a plugin dies without cleaning up).
void Bind(const std::string& path) {
  auto fd = sys::UnixListen(path, 1);
  ASSERT_TRUE(fd.ok()) << fd.error().message();
}

std::string Str(const DirWatch::Change& c) {
  const char* k = c.kind == Kind::kAdded ? "+" : c.kind == Kind::kChanged ? "~" : "-";
  return k + c.path;
}

class DirWatchTest : public ::testing::Test {
 protected:
  DirWatchTest() : loop_(MakeLoop()) {
    tmp_ = outpost::testing::MakeTempDir("/tmp", "dirwatch");
    dir_ = tmp_ + "/d";
  }
  ~DirWatchTest() override {
    w_.reset();
    RemoveTree(tmp_);
    if (!shm_.empty()) RemoveTree(shm_);
  }

  // For the overflow test: many rewrites are slow on ext4 (see jobs_dir_test).
  void UseTmpfs() {
    if (::access("/dev/shm", W_OK) != 0) return;
    shm_ = outpost::testing::MakeTempDir("/dev/shm", "dirwatch");
    ASSERT_FALSE(shm_.empty());
    dir_ = shm_ + "/d";
  }

  DirWatch::Options Opts(int64_t settle = kSettle) {
    DirWatch::Options o;
    o.dir = dir_;
    o.settle_nanos = settle;
    o.retry_nanos = 50 * kNanosPerMilli;
    return o;
  }
  // Sockets anywhere below dir_, like a plugin registry.
  DirWatch::Options SocketOpts(int64_t settle = kLongSettle) {
    DirWatch::Options o = Opts(settle);
    o.recursive = true;
    o.types = DirWatch::kSocket;
    return o;
  }

  void Start(DirWatch::Options o, bool rescan = true) {
    auto r = DirWatch::Start(loop_.get(), std::move(o), [this](const std::vector<DirWatch::Change>& changes) {
      batches_++;
      for (const auto& c : changes) {
        events_.push_back(Str(c));
        types_[c.path] = c.type;
        if (c.kind == Kind::kChanged) replaced_.push_back(c.replaced);
      }
    });
    ASSERT_TRUE(r.ok()) << r.error().message();
    w_ = std::move(r.value());
    if (rescan) w_->Rescan();
  }

  std::string P(const std::string& name) const { return dir_ + "/" + name; }

  bool WaitEvents(size_t n) { return RunUntil(loop_.get(), [&] { return events_.size() >= n; }); }
  // After the awaited callbacks: nothing else arrives within a few settle times.
  void Quiet(int64_t nanos = 5 * kSettle) { RunUntil(loop_.get(), [] { return false; }, nanos); }
  std::vector<std::string> Since(size_t i) const { return {events_.begin() + static_cast<long>(i), events_.end()}; }

  std::unique_ptr<Loop> loop_;
  std::string tmp_, dir_, shm_;
  std::unique_ptr<DirWatch> w_;
  std::vector<std::string> events_;  // "+path", "~path", "-path"
  std::map<std::string, DirWatch::Type> types_;
  std::vector<bool> replaced_;  // of each kChanged, in order
  int batches_ = 0;
};

using V = std::vector<std::string>;

TEST_F(DirWatchTest, EntriesPresentAtStartComeWithRescan) {
  Mkdir(dir_);
  Write(P("b"), "b");
  Write(P("a"), "a");
  Mkdir(P("sub"));
  Bind(P("sub/x.sock"));
  Start(Opts(), /*rescan=*/false);
  EXPECT_TRUE(events_.empty()) << "Start reports nothing by itself";
  w_->Rescan();
  EXPECT_EQ(events_, (V{"+a", "+b", "+sub"}));  // not recursive: sub is an entry, not descended
  EXPECT_EQ(batches_, 1);
  EXPECT_EQ(types_["a"], DirWatch::kRegular);
  EXPECT_EQ(types_["sub"], DirWatch::kDirectory);
  w_->Rescan();
  EXPECT_EQ(events_.size(), 3u) << "a rescan reports differences only";
  Quiet();
  EXPECT_EQ(events_.size(), 3u);
}

TEST_F(DirWatchTest, InPlaceWritesWaitForTheSettleTime) {
  Mkdir(dir_);
  constexpr int64_t kWide = 300 * kNanosPerMilli;
  Start(Opts(kWide));
  int64_t t0 = MonotonicNanos();
  for (int i = 0; i < 5; i++) {
    Write(P("f"), "v" + std::to_string(i));
    ASSERT_TRUE(loop_->RunOnce(2 * kNanosPerMilli).ok());  // events are seen between writes
  }
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_GE(MonotonicNanos() - t0, kWide);
  Write(P("f"), "again");
  ASSERT_TRUE(WaitEvents(2));
  Quiet(2 * kWide);
  EXPECT_EQ(events_, (V{"+f", "~f"}));
}

TEST_F(DirWatchTest, RenameInIsImmediateAndRenameOverIsAChange) {
  Mkdir(dir_);
  Start(Opts(kLongSettle));
  Write(tmp_ + "/staged", "x");
  Rename(tmp_ + "/staged", P("f"));
  ASSERT_TRUE(WaitEvents(1));
  Write(P("f.tmp"), "y");  // write-to-temp + rename: the temp file never settles here
  Rename(P("f.tmp"), P("f"));
  ASSERT_TRUE(WaitEvents(2));
  Quiet();
  EXPECT_EQ(events_, (V{"+f", "~f"}));
  EXPECT_EQ(w_->entries().count("f.tmp"), 0u);
}

TEST_F(DirWatchTest, DeleteAndRenameAwayAreImmediateRemovals) {
  Mkdir(dir_);
  Write(P("a"), "a");
  Write(P("b"), "b");
  Start(Opts(kLongSettle));
  ASSERT_EQ(events_, (V{"+a", "+b"}));
  ASSERT_EQ(0, ::unlink(P("a").c_str()));
  ASSERT_TRUE(WaitEvents(3));
  Rename(P("b"), tmp_ + "/b");
  ASSERT_TRUE(WaitEvents(4));
  EXPECT_EQ(Since(2), (V{"-a", "-b"}));
  EXPECT_TRUE(w_->entries().empty());
}

TEST_F(DirWatchTest, SettleAllEventsMakesABackupSaveOneChange) {
  Mkdir(dir_);
  Write(P("x"), "v1");
  DirWatch::Options o = Opts();
  o.settle_all_events = true;
  o.filter = [](const std::string& name) { return name.back() != '~'; };
  Start(o);
  // vim with backupcopy=no: rename to backup, write anew, drop the backup.
  Rename(P("x"), P("x~"));
  Write(P("x"), "v2");
  ASSERT_EQ(0, ::unlink(P("x~").c_str()));
  Write(P("zz"), "sentinel");
  ASSERT_TRUE(WaitEvents(3));
  Quiet();
  EXPECT_EQ(events_, (V{"+x", "~x", "+zz"}));
}

TEST_F(DirWatchTest, MovedInAtOnceAppliesRenamesInButSettlesRenamesBetweenSeenNames) {
  Mkdir(dir_);
  Write(P("a.json"), "a");
  DirWatch::Options o = Opts(kLongSettle);
  o.settle_all_events = true;
  o.moved_in_at_once = true;
  o.filter = [](const std::string& n) { return n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0; };
  Start(o);
  ASSERT_EQ(events_, (V{"+a.json"}));
  // From outside the tree: at once (the settle time is never reached here).
  Write(tmp_ + "/staged", "b");
  Rename(tmp_ + "/staged", P("b.json"));
  ASSERT_TRUE(WaitEvents(2));
  // From a name the owner does not see (a partial file in the dir): at once.
  Write(P("c.json.part"), "c");
  Rename(P("c.json.part"), P("c.json"));
  ASSERT_TRUE(WaitEvents(3));
  // From one seen name to another: both sides wait for the settle time, so
  // nothing of it comes before the rename in that follows it.
  Rename(P("a.json"), P("d.json"));
  Write(tmp_ + "/staged", "e");
  Rename(tmp_ + "/staged", P("e.json"));
  ASSERT_TRUE(WaitEvents(4));
  Quiet();
  EXPECT_EQ(events_, (V{"+a.json", "+b.json", "+c.json", "+e.json"}));
}

TEST_F(DirWatchTest, DotNamesAndFilteredNamesAreIgnored) {
  Mkdir(dir_);
  DirWatch::Options o = SocketOpts();
  o.types = DirWatch::kSocket | DirWatch::kRegular;
  o.filter = [](const std::string& name) { return name != "skip.sock"; };
  Start(o);
  Bind(P(".hidden.sock"));
  Bind(P("skip.sock"));
  Mkdir(P(".dotdir"));
  Bind(P(".dotdir/in.sock"));
  Write(tmp_ + "/f", "f");
  Rename(tmp_ + "/f", P(".f"));
  Bind(P("ok.sock"));  // sentinel: reported after any of the above would be
  ASSERT_TRUE(WaitEvents(1));
  Quiet();
  EXPECT_EQ(events_, (V{"+ok.sock"}));
  w_->Rescan();
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(DirWatchTest, RegularFilesOnly) {
  Mkdir(dir_);
  DirWatch::Options o = Opts(kLongSettle);
  o.types = DirWatch::kRegular;
  Start(o);
  ASSERT_EQ(0, ::mkfifo(P("fifo").c_str(), 0644));
  Bind(P("s.sock"));
  Mkdir(P("sub"));
  ASSERT_EQ(0, ::symlink((tmp_ + "/nowhere").c_str(), P("dangling").c_str()));
  Write(tmp_ + "/conf", "c");
  Rename(tmp_ + "/conf", P("conf"));
  ASSERT_TRUE(WaitEvents(1));
  Quiet();
  EXPECT_EQ(events_, (V{"+conf"}));
  w_->Rescan();
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(DirWatchTest, SocketsComeAndGoAtOnce) {
  Mkdir(dir_);
  Start(SocketOpts());
  Write(P("plain"), "not a socket");
  Bind(P("a.sock"));
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_EQ(types_["a.sock"], DirWatch::kSocket);
  ASSERT_EQ(0, ::unlink(P("a.sock").c_str()));
  ASSERT_TRUE(WaitEvents(2));
  // A plugin restarting: a new socket under the same name, then moving it
  // away (kubelet: a rename away is a removal too).
  Bind(P("b.sock"));
  ASSERT_TRUE(WaitEvents(3));
  Bind(tmp_ + "/new.sock");
  Rename(tmp_ + "/new.sock", P("b.sock"));
  ASSERT_TRUE(WaitEvents(4));
  Rename(P("b.sock"), P(".b.sock.old"));
  ASSERT_TRUE(WaitEvents(5));
  EXPECT_EQ(events_, (V{"+a.sock", "-a.sock", "+b.sock", "~b.sock", "-b.sock"}));
  // A regular file renamed over a socket's name: no longer a socket.
  Bind(P("c.sock"));
  ASSERT_TRUE(WaitEvents(6));
  Rename(P("plain"), P("c.sock"));
  ASSERT_TRUE(WaitEvents(7));
  EXPECT_EQ(Since(5), (V{"+c.sock", "-c.sock"}));
}

// A socket deleted and made again under its name is another entry, even
// when it gets the same inode number within one timestamp tick; a chmod of
// the same socket is a change that is not a replacement; and an entry a
// rescan reported before its creation event was read is not reported twice.
TEST_F(DirWatchTest, ReplacedSaysWhetherItIsAnotherEntry) {
  Mkdir(dir_);
  Start(SocketOpts(kSettle), false);
  Bind(P("a.sock"));
  w_->Rescan();  // sees it before its IN_CREATE is read
  ASSERT_TRUE(WaitEvents(1));
  Quiet();
  ASSERT_EQ(events_, (V{"+a.sock"}));
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(0, ::unlink(P("a.sock").c_str()));
    Bind(P("a.sock"));  // often the same inode number again
    ASSERT_TRUE(WaitEvents(events_.size() + 1));
    Quiet();
  }
  ASSERT_EQ(0, ::chmod(P("a.sock").c_str(), 0600));
  ASSERT_TRUE(WaitEvents(events_.size() + 1));
  Quiet();
  // Each re-creation is one change (or a removal and an addition, when the
  // removal was looked at before the new socket existed).
  size_t changes = 0, readds = 0;
  for (size_t i = 1; i < events_.size(); ++i) {
    if (events_[i] == "~a.sock") ++changes;
    if (events_[i] == "+a.sock") ++readds;
  }
  EXPECT_EQ(changes + readds, 6u) << ::testing::PrintToString(events_);
  ASSERT_FALSE(replaced_.empty());
  EXPECT_FALSE(replaced_.back());  // the chmod
  for (size_t i = 0; i + 1 < replaced_.size(); ++i) EXPECT_TRUE(replaced_[i]) << i;
}

TEST_F(DirWatchTest, SubdirectoriesMadeLaterAreWatched) {
  Mkdir(dir_);
  Start(SocketOpts());
  Mkdir(P("p1"));
  Bind(P("p1/a.sock"));
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_EQ(events_, (V{"+p1/a.sock"}));
  // Made several levels at once, with a socket in it already, before the
  // watch can be added: found by listing the new directory.
  std::string staged = tmp_ + "/staged";
  Mkdir(staged);
  Mkdir(staged + "/deep");
  Bind(staged + "/deep/b.sock");
  Rename(staged, P("p2"));
  ASSERT_TRUE(WaitEvents(2));
  Bind(P("p2/deep/c.sock"));  // the nested directory is watched too
  ASSERT_TRUE(WaitEvents(3));
  EXPECT_EQ(Since(1), (V{"+p2/deep/b.sock", "+p2/deep/c.sock"}));

  // A subdirectory moved away: its sockets are gone, later changes in it unseen.
  Rename(P("p2"), tmp_ + "/p2.old");
  ASSERT_TRUE(WaitEvents(5));
  EXPECT_EQ(Since(3), (V{"-p2/deep/b.sock", "-p2/deep/c.sock"}));
  Bind(tmp_ + "/p2.old/deep/d.sock");
  // Removed: the same.
  RemoveTree(P("p1"));
  ASSERT_TRUE(WaitEvents(6));
  EXPECT_EQ(events_.back(), "-p1/a.sock");
  Mkdir(P("p1"));  // the same name again, a new directory
  Bind(P("p1/e.sock"));
  ASSERT_TRUE(WaitEvents(7));
  EXPECT_EQ(events_.back(), "+p1/e.sock");
  Quiet();
  EXPECT_EQ(events_.size(), 7u);
  EXPECT_EQ(w_->entries().size(), 1u);
}

TEST_F(DirWatchTest, SocketsInSubdirectoriesAtStart) {
  Mkdir(dir_);
  Mkdir(P("a"));
  Mkdir(P("a/b"));
  Bind(P("a/b/x.sock"));
  Bind(P("top.sock"));
  ASSERT_EQ(0, ::symlink(P("a").c_str(), P("link").c_str()));  // not descended
  Start(SocketOpts());
  EXPECT_EQ(events_, (V{"+a/b/x.sock", "+top.sock"}));
  Bind(P("a/b/y.sock"));  // watched from the start
  ASSERT_TRUE(WaitEvents(3));
  EXPECT_EQ(events_.back(), "+a/b/y.sock");
}

TEST_F(DirWatchTest, DirectoryRemovedAndRecreated) {
  Mkdir(dir_);
  Mkdir(P("sub"));
  Bind(P("a.sock"));
  Bind(P("sub/b.sock"));
  Start(SocketOpts(kSettle));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(w_->problem(), "");
  RemoveTree(dir_);
  ASSERT_TRUE(WaitEvents(4));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return w_->problem().find("retrying every 50ms") != std::string::npos; }));
  EXPECT_NE(w_->problem().find("cannot watch '" + dir_ + "': No such file or directory"), std::string::npos)
      << w_->problem();
  EXPECT_TRUE(w_->entries().empty());
  EXPECT_NE(::access(dir_.c_str(), F_OK), 0) << "not recreated by the watch";

  // Back, with a subdirectory and a socket in it already.
  Mkdir(dir_);
  Mkdir(P("sub"));
  Bind(P("sub/c.sock"));
  ASSERT_TRUE(WaitEvents(5));
  EXPECT_EQ(w_->problem(), "");
  Bind(P("sub/d.sock"));
  ASSERT_TRUE(WaitEvents(6));
  Quiet();
  std::vector<std::string> removed(events_.begin(), events_.begin() + 4);
  std::sort(removed.begin() + 2, removed.end());
  EXPECT_EQ(removed, (V{"+a.sock", "+sub/b.sock", "-a.sock", "-sub/b.sock"}));
  EXPECT_EQ(Since(4), (V{"+sub/c.sock", "+sub/d.sock"}));
}

TEST_F(DirWatchTest, DirectoryMovedAwayAndSwapped) {
  Mkdir(dir_);
  Write(P("same"), "s");
  Write(P("old"), "o");
  Start(Opts());
  ASSERT_EQ(events_.size(), 2u);
  // Swapped for a new directory: differences only.
  std::string next = tmp_ + "/next";
  Mkdir(next);
  ASSERT_EQ(0, ::link(P("same").c_str(), (next + "/same").c_str()));  // the same file
  Write(next + "/new", "n");
  Rename(dir_, tmp_ + "/prev");
  Rename(next, dir_);
  ASSERT_TRUE(WaitEvents(5));
  Quiet();
  // Removals first; the hard link changed the file's ctime, so `same` reads
  // as changed, not as removed and added.
  EXPECT_EQ(Since(2), (V{"-old", "+new", "~same"}));
  EXPECT_EQ(w_->problem(), "");
  // Moved away for good.
  Rename(dir_, tmp_ + "/gone");
  ASSERT_TRUE(WaitEvents(7));
  EXPECT_EQ(Since(5), (V{"-new", "-same"}));
  EXPECT_NE(w_->problem(), "");
  Write(tmp_ + "/gone/more", "elsewhere");
  Quiet();
  EXPECT_EQ(events_.size(), 7u);
}

TEST_F(DirWatchTest, MissingDirectoryIsCreatedWhenAsked) {
  dir_ = tmp_ + "/a/b/d";
  DirWatch::Options o = Opts();
  o.create = true;
  Start(o);
  EXPECT_EQ(w_->problem(), "");
  struct stat st;
  ASSERT_EQ(0, ::stat(dir_.c_str(), &st));
  Write(P("f"), "x");
  ASSERT_TRUE(WaitEvents(1));
}

TEST_F(DirWatchTest, RescanReportsWhatChangedUnseen) {
  Mkdir(dir_);
  Write(P("keep"), "k");
  Write(P("edit"), "1");
  Write(P("gone"), "g");
  Start(Opts(kLongSettle));
  ASSERT_EQ(events_.size(), 3u);
  // Changed while the loop does not run, then rescanned: what a rescan after
  // IN_Q_OVERFLOW sees.
  Write(P("edit"), "two");
  ASSERT_EQ(0, ::unlink(P("gone").c_str()));
  Bind(P("new.sock"));
  w_->Rescan();
  EXPECT_EQ(Since(3), (V{"-gone", "~edit", "+new.sock"}));
  EXPECT_EQ(types_["new.sock"], DirWatch::kSocket);
}

TEST_F(DirWatchTest, RescanMayReportUnchangedEntries) {
  Mkdir(dir_);
  Write(P("a"), "a");
  Write(P("b"), "b");
  DirWatch::Options o = Opts(kLongSettle);
  o.rescan_reports_unchanged = true;
  Start(o);
  ASSERT_EQ(0, ::unlink(P("b").c_str()));
  w_->Rescan();
  EXPECT_EQ(events_, (V{"+a", "+b", "-b", "~a"}));
}

TEST_F(DirWatchTest, QueueOverflowRescansTheTree) {
  UseTmpfs();
  Mkdir(dir_);
  Bind(P("a.sock"));
  Start(SocketOpts(kSettle));
  ASSERT_EQ(events_, (V{"+a.sock"}));
  // More events than the inotify queue holds, without the loop reading any:
  // alternating names so the kernel cannot merge them.
  int queue = 16384;
  auto max = sys::ReadFile("/proc/sys/fs/inotify/max_queued_events");
  if (max.ok()) queue = std::atoi(max->c_str());
  ASSERT_LT(queue, 1 << 20) << "a queue this long takes too long to overflow";
  for (int i = 0; i < queue / 2 + 1000; i++) {
    Write(P("x"), std::to_string(i));
    Write(P("y"), std::to_string(i));
  }
  // Lost in the overflow: found by the rescan.
  Mkdir(P("sub"));
  Bind(P("sub/b.sock"));
  ASSERT_EQ(0, ::unlink(P("a.sock").c_str()));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return events_.size() >= 3; }, 20 * kNanosPerSecond));
  EXPECT_EQ(Since(1), (V{"-a.sock", "+sub/b.sock"}));
  Bind(P("sub/c.sock"));  // the rescan watched the new subdirectory
  ASSERT_TRUE(WaitEvents(4));
  EXPECT_EQ(events_.back(), "+sub/c.sock");
}

TEST_F(DirWatchTest, CallbackMayDestroyIt) {
  Mkdir(dir_);
  int calls = 0;
  auto r = DirWatch::Start(loop_.get(), SocketOpts(), [&](const std::vector<DirWatch::Change>&) {
    calls++;
    w_.reset();
  });
  ASSERT_TRUE(r.ok());
  w_ = std::move(r.value());
  Bind(P("a.sock"));
  Bind(P("b.sock"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return calls > 0; }));
  EXPECT_EQ(w_, nullptr);
  Bind(P("c.sock"));
  Quiet();
  EXPECT_EQ(calls, 1);
}

TEST_F(DirWatchTest, DestructorCancelsTimers) {
  Mkdir(dir_);
  size_t timers_before = loop_->PendingTimers();
  Start(Opts());
  Write(P("f"), "x");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return loop_->PendingTimers() > timers_before; }));
  w_.reset();
  EXPECT_EQ(loop_->PendingTimers(), timers_before);
  Quiet();
  EXPECT_TRUE(events_.empty());
}

TEST_F(DirWatchTest, InvalidOptions) {
  DirWatch::Options o = Opts();
  o.dir = "";
  EXPECT_FALSE(DirWatch::Start(loop_.get(), o, nullptr).ok());
  o = Opts();
  o.retry_nanos = 0;
  EXPECT_FALSE(DirWatch::Start(loop_.get(), o, nullptr).ok());
}

}  // namespace
}  // namespace outpost::loop
