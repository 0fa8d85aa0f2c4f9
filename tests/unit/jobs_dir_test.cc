// JobsDir: which names count, one `changed` per editor save pattern,
// debouncing, size/type/permission errors, FIFOs never blocking, a missing,
// deleted, moved or replaced directory, queue overflow, Rescan semantics, and
// teardown from inside a callback. Every test synchronises on callbacks
// (RunUntil) and only then checks a short quiet period for stray ones.
#include "job/jobs_dir.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/sys.h"
#include "test_util.h"

namespace outpost::job {
namespace {

using outpost::testing::MakeLoop;
using outpost::testing::RunUntil;

constexpr int64_t kDebounce = 20 * kNanosPerMilli;

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

struct Event {
  char kind;  // 'c' changed, 'r' removed, 'e' error
  std::string path;
  std::string data;  // content or error
};

class JobsDirTest : public ::testing::Test {
 protected:
  JobsDirTest() : loop_(MakeLoop()) {
    tmp_ = outpost::testing::MakeTempDir("/tmp", "jobsdir");
    dir_ = tmp_ + "/jobs.d";
  }
  ~JobsDirTest() override {
    jd_.reset();
    RemoveTree(tmp_);
    if (!shm_.empty()) RemoveTree(shm_);
  }

  // For tests that rewrite files thousands of times: on ext4, truncating a
  // file that has data makes close() start writeback (auto_da_alloc), which
  // turns a second of writes into twenty.
  void UseTmpfs() {
    if (::access("/dev/shm", W_OK) != 0) return;
    shm_ = outpost::testing::MakeTempDir("/dev/shm", "jobsdir");
    ASSERT_FALSE(shm_.empty());
    dir_ = shm_ + "/jobs.d";
  }

  JobsDir::Options Opts() {
    JobsDir::Options o;
    o.dir = dir_;
    o.debounce_nanos = kDebounce;
    o.retry_nanos = 50 * kNanosPerMilli;
    return o;
  }

  void Start(JobsDir::Options o) {
    JobsDir::Callbacks cb;
    cb.changed = [this](const std::string& p, const std::string& c) { events_.push_back({'c', p, c}); };
    cb.removed = [this](const std::string& p) { events_.push_back({'r', p, ""}); };
    cb.error = [this](const std::string& p, const std::string& e) { events_.push_back({'e', p, e}); };
    auto r = JobsDir::Create(loop_.get(), std::move(o), std::move(cb));
    ASSERT_TRUE(r.ok()) << r.error().message();
    jd_ = std::move(r.value());
  }
  void Start() { Start(Opts()); }

  std::string P(const std::string& name) const { return dir_ + "/" + name; }

  bool WaitEvents(size_t n) { return RunUntil(loop_.get(), [&] { return events_.size() >= n; }); }
  // After the awaited callbacks: nothing else arrives within a few debounce periods.
  void Settle(int64_t nanos = 5 * kDebounce) { RunUntil(loop_.get(), [] { return false; }, nanos); }

  std::unique_ptr<Loop> loop_;
  std::string tmp_, dir_, shm_;
  std::unique_ptr<JobsDir> jd_;
  std::vector<Event> events_;
};

TEST(JobsDirNames, WhichNamesAreJobFiles) {
  for (const char* ok : {"web.json", "a.json", "#x.json", "x y.json", "a.b.json", "\x01\xff.json"}) {
    EXPECT_TRUE(JobsDir::IsJobFileName(ok)) << ok;
  }
  for (const char* no : {"", ".json", ".web.json", "web.json~", ".web.json.swp", ".web.json.swx", "web.json.swp",
                         "web.json.tmp", "#web.json#", ".#web.json", "web.JSON", "web.yaml", "web", "4913",
                         "web.json.bak", "json"}) {
    EXPECT_FALSE(JobsDir::IsJobFileName(no)) << no;
  }
}

TEST_F(JobsDirTest, CreateModifyDelete) {
  Start();
  jd_->Rescan({});
  EXPECT_TRUE(events_.empty());

  Write(P("web.json"), "{\"v\":1}");
  ASSERT_TRUE(WaitEvents(1));
  Settle();
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, 'c');
  EXPECT_EQ(events_[0].path, P("web.json"));
  EXPECT_EQ(events_[0].data, "{\"v\":1}");

  Write(P("web.json"), "{\"v\":2}");  // truncate + write in place
  ASSERT_TRUE(WaitEvents(2));
  Settle();
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].kind, 'c');
  EXPECT_EQ(events_[1].data, "{\"v\":2}");

  ASSERT_EQ(0, ::unlink(P("web.json").c_str()));
  ASSERT_TRUE(WaitEvents(3));
  Settle();
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_EQ(events_[2].kind, 'r');
  EXPECT_EQ(events_[2].path, P("web.json"));
}

TEST_F(JobsDirTest, RenameOverIsOneChange) {
  Start();
  Write(P("web.json"), "old");
  ASSERT_TRUE(WaitEvents(1));
  // sed -i / mv tmp x.json: a temp name that is not a job file, renamed over.
  Write(P(".web.json.tmp"), "new");
  Write(P("sedAbC12"), "ignored");
  Rename(P(".web.json.tmp"), P("web.json"));
  ASSERT_TRUE(WaitEvents(2));
  Settle();
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].kind, 'c');
  EXPECT_EQ(events_[1].data, "new");
}

TEST_F(JobsDirTest, VimStyleSaveIsOneChangeNoRemove) {
  Start();
  Write(P("web.json"), "v1");
  ASSERT_TRUE(WaitEvents(1));
  // vim with backupcopy=no: probe file, rename to backup, write anew, drop backup.
  Write(P("4913"), "");
  ASSERT_EQ(0, ::unlink(P("4913").c_str()));
  Rename(P("web.json"), P("web.json~"));
  Write(P("web.json"), "v2");
  ASSERT_EQ(0, ::unlink(P("web.json~").c_str()));
  ASSERT_TRUE(WaitEvents(2));
  Settle();
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].kind, 'c');
  EXPECT_EQ(events_[1].data, "v2");
}

TEST_F(JobsDirTest, CopyOverAndCopyNew) {
  Start();
  Write(tmp_ + "/src.json", "copied");
  // Like cp: open O_CREAT|O_TRUNC, write, close.
  Write(P("a.json"), "copied");
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_EQ(events_[0].data, "copied");
  // A hard link produces only IN_CREATE.
  ASSERT_EQ(0, ::link((tmp_ + "/src.json").c_str(), P("b.json").c_str()));
  ASSERT_TRUE(WaitEvents(2));
  Settle();
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].path, P("b.json"));
  EXPECT_EQ(events_[1].data, "copied");
}

TEST_F(JobsDirTest, RenameBetweenJobNamesRemovesThenAdds) {
  Start();
  Write(P("a.json"), "x");
  ASSERT_TRUE(WaitEvents(1));
  Rename(P("a.json"), P("b.json"));
  ASSERT_TRUE(WaitEvents(3));
  Settle();
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_EQ(events_[1].kind, 'r');
  EXPECT_EQ(events_[1].path, P("a.json"));
  EXPECT_EQ(events_[2].kind, 'c');
  EXPECT_EQ(events_[2].path, P("b.json"));
}

TEST_F(JobsDirTest, IgnoredNamesAreSilent) {
  Start();
  for (const char* name : {".x.json", "x.json~", ".x.json.swp", "x.json.swx", "x.txt", "#x.json#", "x.json.tmp"}) {
    Write(P(name), "garbage");
  }
  ASSERT_EQ(0, ::mkdir(P(".hidden.json").c_str(), 0755));
  ASSERT_EQ(0, ::mkfifo(P("fifo.json~").c_str(), 0644));
  Write(P("ok.json"), "ok");  // sentinel: its callback comes after any for earlier events
  ASSERT_TRUE(WaitEvents(1));
  Settle();
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].path, P("ok.json"));
  jd_->Rescan({});
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].path, P("ok.json"));
  EXPECT_TRUE(jd_->problems().empty());
}

TEST_F(JobsDirTest, OversizedFileIsAnErrorUntilFixed) {
  Start();
  Write(P("big.json"), std::string((1 << 20) + 1, 'x'));
  ASSERT_TRUE(WaitEvents(1));
  Settle();
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, 'e');
  EXPECT_EQ(events_[0].data, P("big.json") + ": file is 1048577 bytes; the limit is 1 MiB");
  ASSERT_EQ(jd_->problems().count(P("big.json")), 1u);

  // Rewriting it, still too big: the same problem is not reported again.
  Write(P("big.json"), std::string((1 << 20) + 1, 'y'));
  Write(P("sentinel.json"), "s");
  ASSERT_TRUE(WaitEvents(2));
  Settle();
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].path, P("sentinel.json"));

  Write(P("big.json"), "small");
  ASSERT_TRUE(WaitEvents(3));
  EXPECT_EQ(events_[2].kind, 'c');
  EXPECT_EQ(events_[2].data, "small");
  EXPECT_TRUE(jd_->problems().empty());
}

TEST_F(JobsDirTest, OversizedKeepsPreviousContentAndRecoversToSame) {
  JobsDir::Options o = Opts();
  o.max_file_bytes = 100;
  Start(o);
  Write(P("a.json"), "good");
  ASSERT_TRUE(WaitEvents(1));
  Write(P("a.json"), std::string(101, 'x'));
  ASSERT_TRUE(WaitEvents(2));
  EXPECT_EQ(events_[1].kind, 'e');
  EXPECT_EQ(events_[1].data, P("a.json") + ": file is 101 bytes; the limit is 100 bytes");
  // Back to the content last reported: reported again so the owner clears the problem.
  Write(P("a.json"), "good");
  ASSERT_TRUE(WaitEvents(3));
  EXPECT_EQ(events_[2].kind, 'c');
  EXPECT_EQ(events_[2].data, "good");
  EXPECT_TRUE(jd_->problems().empty());
}

TEST_F(JobsDirTest, DirectoryNamedLikeAJobIsAnError) {
  Start();
  ASSERT_EQ(0, ::mkdir(P("x.json").c_str(), 0755));
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_EQ(events_[0].kind, 'e');
  EXPECT_NE(events_[0].data.find("is a directory"), std::string::npos) << events_[0].data;
  EXPECT_EQ(jd_->problems().count(P("x.json")), 1u);
  ASSERT_EQ(0, ::rmdir(P("x.json").c_str()));
  ASSERT_TRUE(WaitEvents(2));
  EXPECT_EQ(events_[1].kind, 'r');
  EXPECT_TRUE(jd_->problems().empty());
}

TEST_F(JobsDirTest, FifoIsAnErrorAndNeverBlocks) {
  Start();
  ASSERT_EQ(0, ::mkfifo(P("x.json").c_str(), 0644));
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_EQ(events_[0].kind, 'e');
  EXPECT_NE(events_[0].data.find("FIFO"), std::string::npos) << events_[0].data;
  int64_t t0 = MonotonicNanos();
  jd_->Rescan({});  // reported again by Rescan, without opening the FIFO
  EXPECT_LT(MonotonicNanos() - t0, kNanosPerSecond);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].kind, 'e');
}

TEST_F(JobsDirTest, SymlinkIsFollowed) {
  Start();
  Write(tmp_ + "/target", "via link");
  ASSERT_EQ(0, ::symlink((tmp_ + "/target").c_str(), P("l.json").c_str()));
  ASSERT_TRUE(WaitEvents(1));
  EXPECT_EQ(events_[0].kind, 'c');
  EXPECT_EQ(events_[0].data, "via link");
  ASSERT_EQ(0, ::symlink((tmp_ + "/nowhere").c_str(), P("dangling.json").c_str()));
  ASSERT_TRUE(WaitEvents(2));
  EXPECT_EQ(events_[1].kind, 'e');
  EXPECT_NE(events_[1].data.find("symbolic link to a missing file"), std::string::npos) << events_[1].data;
}

// Runs in a child that is not root (root reads mode-000 files): returns 0,
// or the number of the step that went wrong.
int UnreadableScenario(const std::string& dir) {
  auto loop = Loop::Create();
  if (!loop.ok()) return 10;
  std::vector<Event> events;
  JobsDir::Callbacks cb;
  cb.changed = [&](const std::string& p, const std::string& c) { events.push_back({'c', p, c}); };
  cb.removed = [&](const std::string& p) { events.push_back({'r', p, ""}); };
  cb.error = [&](const std::string& p, const std::string& e) { events.push_back({'e', p, e}); };
  JobsDir::Options o;
  o.dir = dir;
  o.debounce_nanos = kDebounce;
  auto jd = JobsDir::Create(loop->get(), o, cb);
  if (!jd.ok()) return 11;
  std::string path = dir + "/a.json";
  auto wait = [&](size_t n) { return RunUntil(loop->get(), [&] { return events.size() >= n; }); };
  if (!sys::WriteFileAtomic(path, "x", 0644).ok() || !wait(1)) return 12;
  if (::chmod(path.c_str(), 0) != 0 || !wait(2)) return 13;  // seen through IN_ATTRIB
  if (events[1].kind != 'e' || events[1].data.find("Permission denied") == std::string::npos) return 14;
  if ((*jd)->problems().count(path) != 1) return 15;
  if (::chmod(path.c_str(), 0644) != 0 || !wait(3)) return 16;
  if (events[2].kind != 'c' || events[2].data != "x" || !(*jd)->problems().empty()) return 17;
  return 0;
}

TEST_F(JobsDirTest, UnreadableIsAnErrorUntilChmod) {
  if (::geteuid() == 0) {
    ASSERT_EQ(0, ::chown(tmp_.c_str(), 65534, 65534));
  }
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(2);
    ::_exit(UnreadableScenario(dir_));
  }
  int st = 0;
  ASSERT_EQ(pid, ::waitpid(pid, &st, 0));
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "failed at step " << WEXITSTATUS(st);
}

TEST_F(JobsDirTest, DebounceCoalescesRapidWrites) {
  JobsDir::Options o = Opts();
  o.debounce_nanos = 200 * kNanosPerMilli;  // wide, so a loaded machine does not split the burst
  Start(o);
  for (int i = 0; i < 10; i++) {
    Write(P("a.json"), "version " + std::to_string(i));
    ASSERT_TRUE(loop_->RunOnce(2 * kNanosPerMilli).ok());  // events are seen between writes
  }
  ASSERT_TRUE(WaitEvents(1));
  Settle(500 * kNanosPerMilli);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].data, "version 9");
}

TEST_F(JobsDirTest, UnchangedRewriteIsSilent) {
  Start();
  Write(P("a.json"), "same");
  ASSERT_TRUE(WaitEvents(1));
  Write(P("a.json"), "same");
  ASSERT_EQ(0, ::utimensat(AT_FDCWD, P("a.json").c_str(), nullptr, 0));  // touch: IN_ATTRIB
  Write(P("z.json"), "sentinel");
  ASSERT_TRUE(WaitEvents(2));
  Settle();
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].path, P("z.json"));
}

TEST_F(JobsDirTest, MissingDirIsCreated) {
  dir_ = tmp_ + "/a/b/jobs.d";
  Start();
  struct stat st;
  ASSERT_EQ(0, ::stat(dir_.c_str(), &st));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(jd_->dir_problem(), "");
  Write(P("a.json"), "x");
  ASSERT_TRUE(WaitEvents(1));
}

TEST_F(JobsDirTest, UncreatableDirIsRetried) {
  Write(tmp_ + "/blocker", "a file where a directory should be");
  dir_ = tmp_ + "/blocker/jobs.d";
  Start();  // succeeds all the same
  EXPECT_NE(jd_->dir_problem().find("cannot create '" + dir_ + "'"), std::string::npos) << jd_->dir_problem();
  EXPECT_NE(jd_->dir_problem().find("Not a directory"), std::string::npos) << jd_->dir_problem();
  EXPECT_NE(jd_->dir_problem().find("retrying every 50ms"), std::string::npos) << jd_->dir_problem();
  jd_->Rescan({dir_ + "/old.json"});  // the dir is not there: neither is old.json
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, 'r');

  ASSERT_EQ(0, ::unlink((tmp_ + "/blocker").c_str()));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return jd_->dir_problem().empty(); }));
  Write(P("a.json"), "x");
  ASSERT_TRUE(WaitEvents(2));
  EXPECT_EQ(events_[1].path, P("a.json"));
}

TEST_F(JobsDirTest, DirAppearingLaterIsScanned) {
  JobsDir::Options o = Opts();
  o.create = false;
  Start(o);
  EXPECT_NE(jd_->dir_problem().find("cannot watch '" + dir_ + "': No such file or directory; retrying every 50ms"),
            std::string::npos)
      << jd_->dir_problem();
  // Made elsewhere with its files, then moved into place.
  std::string staging = tmp_ + "/staging";
  ASSERT_EQ(0, ::mkdir(staging.c_str(), 0755));
  Write(staging + "/b.json", "b");
  Write(staging + "/a.json", "a");
  Rename(staging, dir_);
  ASSERT_TRUE(WaitEvents(2));
  EXPECT_EQ(jd_->dir_problem(), "");
  EXPECT_EQ(events_[0].path, P("a.json"));  // name order
  EXPECT_EQ(events_[1].path, P("b.json"));
  Settle();
  EXPECT_EQ(events_.size(), 2u);
}

TEST_F(JobsDirTest, DirDeletedAndRecreated) {
  Start();  // options.create: the dir is made at start only
  Write(P("a.json"), "a");
  Write(P("b.json"), "b");
  ASSERT_TRUE(WaitEvents(2));
  RemoveTree(dir_);
  ASSERT_TRUE(WaitEvents(4));
  EXPECT_EQ(events_[2].kind, 'r');
  EXPECT_EQ(events_[3].kind, 'r');
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return jd_->dir_problem().find("retrying every") != std::string::npos; }));
  Settle();
  EXPECT_NE(::access(dir_.c_str(), F_OK), 0) << "a removed dir is not recreated by the agent";
  EXPECT_TRUE(jd_->problems().empty());

  // Recreated by someone else, with a file already in it, then one more.
  ASSERT_EQ(0, ::mkdir(dir_.c_str(), 0755));
  Write(P("b.json"), "b again");
  ASSERT_TRUE(WaitEvents(5));
  EXPECT_EQ(events_[4].kind, 'c');
  EXPECT_EQ(events_[4].path, P("b.json"));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return jd_->dir_problem().empty(); }));
  Write(P("c.json"), "c");
  ASSERT_TRUE(WaitEvents(6));
  EXPECT_EQ(events_[5].path, P("c.json"));
  Settle();
  EXPECT_EQ(events_.size(), 6u);
}

TEST_F(JobsDirTest, DirMovedAwayReportsRemovedAndSwapIsDifferencesOnly) {
  Start();
  Write(P("a.json"), "a");
  Write(P("b.json"), "b");
  ASSERT_TRUE(WaitEvents(2));

  // Swap in a new directory: same a.json, changed b.json, new c.json, no d.
  std::string next = tmp_ + "/next";
  ASSERT_EQ(0, ::mkdir(next.c_str(), 0755));
  Write(next + "/a.json", "a");
  Write(next + "/b.json", "b2");
  Write(next + "/c.json", "c");
  Rename(dir_, tmp_ + "/old");
  Rename(next, dir_);
  ASSERT_TRUE(WaitEvents(4));
  Settle();
  ASSERT_EQ(events_.size(), 4u);
  EXPECT_EQ(events_[2].kind, 'c');
  EXPECT_EQ(events_[2].path, P("b.json"));
  EXPECT_EQ(events_[2].data, "b2");
  EXPECT_EQ(events_[3].kind, 'c');
  EXPECT_EQ(events_[3].path, P("c.json"));
  EXPECT_EQ(jd_->dir_problem(), "");

  // Moved away for good: its files are gone.
  Rename(dir_, tmp_ + "/gone");
  ASSERT_TRUE(WaitEvents(7));
  for (size_t i = 4; i < 7; i++) EXPECT_EQ(events_[i].kind, 'r') << events_[i].path;
  EXPECT_NE(jd_->dir_problem(), "");
  // Edits in the moved directory are not ours.
  Write(tmp_ + "/gone/a.json", "elsewhere");
  Settle();
  EXPECT_EQ(events_.size(), 7u);
}

TEST_F(JobsDirTest, RescanReportsEverythingAndRemovesMissingKnown) {
  Start();
  Write(P("b.json"), "b");
  Write(P("a.json"), "a");
  ASSERT_TRUE(WaitEvents(2));
  events_.clear();
  jd_->Rescan({P("a.json"), P("gone.json"), "/elsewhere/old.json"});
  ASSERT_EQ(events_.size(), 4u);
  EXPECT_EQ(events_[0].kind, 'c');
  EXPECT_EQ(events_[0].path, P("a.json"));
  EXPECT_EQ(events_[1].kind, 'c');
  EXPECT_EQ(events_[1].path, P("b.json"));
  EXPECT_EQ(events_[2].kind, 'r');
  EXPECT_EQ(events_[2].path, "/elsewhere/old.json");
  EXPECT_EQ(events_[3].kind, 'r');
  EXPECT_EQ(events_[3].path, P("gone.json"));
  Settle();
  EXPECT_EQ(events_.size(), 4u);
}

TEST_F(JobsDirTest, QueueOverflowRescansDifferencesOnly) {
  UseTmpfs();
  Start();
  Write(P("a.json"), "a0");
  Write(P("same.json"), "same");
  ASSERT_TRUE(WaitEvents(2));
  events_.clear();
  // More events than the inotify queue holds (16384 by default), without
  // the loop reading any: alternating names so the kernel cannot merge them.
  for (int i = 0; i < 9000; i++) {
    Write(P("a.json"), "a" + std::to_string(i));
    Write(P("b.json"), "b" + std::to_string(i));
  }
  Write(P("same.json"), "same");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return events_.size() >= 2; }, 20 * kNanosPerSecond));
  Settle();
  std::map<std::string, std::string> last;
  for (const Event& e : events_) {
    ASSERT_EQ(e.kind, 'c');
    last[e.path] = e.data;
  }
  EXPECT_EQ(last[P("a.json")], "a8999");
  EXPECT_EQ(last[P("b.json")], "b8999");
  EXPECT_EQ(last.count(P("same.json")), 0u);
}

TEST_F(JobsDirTest, ManyGarbageFiles) {
  UseTmpfs();
  Start();
  for (int i = 0; i < 2000; i++) {
    std::string name = std::to_string(i) + (i % 2 ? ".json" : ".junk");
    std::string data(static_cast<size_t>(i % 7) * 100, static_cast<char>(i));
    Write(P(name), data);
  }
  Write(P("\x01\x7f\xfe.json"), std::string("\0\xff", 2));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return events_.size() >= 1001; }, 20 * kNanosPerSecond));
  Settle();
  EXPECT_EQ(events_.size(), 1001u);
  events_.clear();
  jd_->Rescan({});
  EXPECT_EQ(events_.size(), 1001u);
}

TEST_F(JobsDirTest, CallbackMayDestroyIt) {
  Start();
  Write(P("a.json"), "a");
  Write(P("b.json"), "b");
  JobsDir::Callbacks cb;
  int calls = 0;
  cb.changed = [&](const std::string&, const std::string&) {
    calls++;
    jd_.reset();
  };
  auto r = JobsDir::Create(loop_.get(), Opts(), cb);
  ASSERT_TRUE(r.ok());
  jd_ = std::move(r.value());
  jd_->Rescan({});  // two files: stops after the first
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(jd_, nullptr);
  Settle();
  EXPECT_EQ(calls, 1);
}

TEST_F(JobsDirTest, DestructorCancelsTimersAndRemovesFd) {
  size_t timers_before = loop_->PendingTimers();
  Start();
  Write(P("a.json"), "a");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return loop_->PendingTimers() > timers_before; }));
  jd_.reset();
  EXPECT_EQ(loop_->PendingTimers(), timers_before);
  Settle();
  EXPECT_TRUE(events_.empty());
}

}  // namespace
}  // namespace outpost::job
