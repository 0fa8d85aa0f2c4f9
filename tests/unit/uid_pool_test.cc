// UidPool: lowest-free allocation and reuse, idempotent Acquire, persistence
// across Open, exhaustion, corrupt files moved aside, Reconcile, entries left
// outside a changed range, Restore, and that the file on disk is complete
// JSON naming every held uid after each operation.
#include "proc/uid_pool.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/json.h"
#include "base/sys.h"
#include "test_util.h"

namespace outpost::proc {
namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

class UidPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "uid_pool_XXXXXX";
    ASSERT_NE(::mkdtemp(&tmpl[0]), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/dynamic-users.json";
  }
  void TearDown() override { ::nftw(dir_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS); }

  std::unique_ptr<UidPool> OpenOrFail(uint32_t first = 80000, uint32_t last = 89999) {
    auto pool = UidPool::Open(path_, first, last);
    EXPECT_TRUE(pool.ok()) << pool.error().message();
    if (!pool.ok()) return nullptr;
    return std::move(pool.value());
  }

  uint32_t AcquireOrFail(UidPool* pool, const std::string& owner) {
    auto uid = pool->Acquire(owner);
    EXPECT_TRUE(uid.ok()) << uid.error().message();
    return uid.ok() ? *uid : 0;
  }

  void WriteRaw(const std::string& data) { ASSERT_TRUE(sys::WriteFileAtomic(path_, data, 0600).ok()); }

  // The file as another process would read it right now.
  std::map<std::string, uint32_t> OnDisk() {
    auto text = sys::ReadFile(path_);
    EXPECT_TRUE(text.ok()) << text.error().message();
    if (!text.ok()) return {};
    auto doc = json::Parse(*text);
    EXPECT_TRUE(doc.ok()) << "not complete JSON: " << *text;
    auto entries = UidPool::Decode(*text);
    EXPECT_TRUE(entries.ok()) << entries.error().message();
    return entries.ok() ? *entries : std::map<std::string, uint32_t>{};
  }

  std::string dir_;
  std::string path_;
};

TEST_F(UidPoolTest, AllocatesLowestFree) {
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  EXPECT_EQ(0u, pool->in_use());
  EXPECT_EQ(80000u, AcquireOrFail(pool.get(), "a"));
  EXPECT_EQ(80001u, AcquireOrFail(pool.get(), "b"));
  EXPECT_EQ(80002u, AcquireOrFail(pool.get(), "c"));
  EXPECT_EQ(3u, pool->in_use());
  EXPECT_EQ(80001u, pool->Lookup("b").value_or(0));
  EXPECT_FALSE(pool->Lookup("d").has_value());
}

TEST_F(UidPoolTest, ReusesReleasedUids) {
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  for (const char* o : {"a", "b", "c", "d"}) AcquireOrFail(pool.get(), o);
  pool->Release("b");
  pool->Release("c");
  EXPECT_FALSE(pool->Lookup("b").has_value());
  EXPECT_EQ(2u, pool->in_use());
  // Lowest first: the hole at 80001 before 80002, then past the end.
  EXPECT_EQ(80001u, AcquireOrFail(pool.get(), "e"));
  EXPECT_EQ(80002u, AcquireOrFail(pool.get(), "f"));
  EXPECT_EQ(80004u, AcquireOrFail(pool.get(), "g"));
  pool->Release("nobody-holds-this");  // no-op
  EXPECT_EQ(5u, pool->in_use());
}

TEST_F(UidPoolTest, AcquireIsIdempotent) {
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  uint32_t a = AcquireOrFail(pool.get(), "a");
  AcquireOrFail(pool.get(), "b");
  EXPECT_EQ(a, AcquireOrFail(pool.get(), "a"));
  EXPECT_EQ(2u, pool->in_use());
  // Released in between: a new uid, which may differ.
  pool->Release("a");
  AcquireOrFail(pool.get(), "c");
  EXPECT_NE(a, AcquireOrFail(pool.get(), "a"));
}

TEST_F(UidPoolTest, TwoOwnersNeverShare) {
  auto pool = OpenOrFail(100, 129);
  ASSERT_TRUE(pool);
  std::set<uint32_t> seen;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 30; ++i) {
      std::string owner = "t" + std::to_string(i);
      if ((i + round) % 3 == 0) {
        pool->Release(owner);
      } else {
        AcquireOrFail(pool.get(), owner);
      }
    }
    seen.clear();
    for (const auto& [owner, uid] : pool->entries()) {
      EXPECT_TRUE(seen.insert(uid).second) << "uid " << uid << " shared, round " << round;
      EXPECT_GE(uid, 100u);
      EXPECT_LE(uid, 129u);
    }
  }
  EXPECT_EQ(pool->entries(), OnDisk());
}

TEST_F(UidPoolTest, PersistsAcrossOpen) {
  std::map<std::string, uint32_t> before;
  {
    auto pool = OpenOrFail();
    ASSERT_TRUE(pool);
    for (const char* o : {"web/api", "web/db", "batch-7"}) before[o] = AcquireOrFail(pool.get(), o);
    pool->Release("web/db");
    before.erase("web/db");
  }
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  EXPECT_TRUE(pool->warning().empty()) << pool->warning();
  EXPECT_EQ(before, pool->entries());
  EXPECT_EQ(before["web/api"], AcquireOrFail(pool.get(), "web/api"));
  EXPECT_EQ(before["batch-7"], AcquireOrFail(pool.get(), "batch-7"));
  // The released uid is free again after the restart; the held ones are not.
  EXPECT_EQ(80001u, AcquireOrFail(pool.get(), "new"));
  EXPECT_EQ(80003u, AcquireOrFail(pool.get(), "newer"));
}

TEST_F(UidPoolTest, ExhaustionNamesTheRangeAndConfig) {
  auto pool = OpenOrFail(10, 12);
  ASSERT_TRUE(pool);
  EXPECT_EQ(10u, AcquireOrFail(pool.get(), "a"));
  EXPECT_EQ(11u, AcquireOrFail(pool.get(), "b"));
  EXPECT_EQ(12u, AcquireOrFail(pool.get(), "c"));
  auto d = pool->Acquire("d");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(Code::kResourceExhausted, d.error().code());
  EXPECT_EQ("no free dynamic user: all 3 uids of 10-12 are in use (config dynamic_users)", d.error().message());
  EXPECT_FALSE(pool->Lookup("d").has_value());
  EXPECT_EQ(3u, OnDisk().size());
  // Holders are unaffected, and a release makes room.
  EXPECT_EQ(11u, AcquireOrFail(pool.get(), "b"));
  pool->Release("b");
  EXPECT_EQ(11u, AcquireOrFail(pool.get(), "d"));

  {
    // A one-uid range reads as one.
    ::unlink(path_.c_str());
    auto one = OpenOrFail(7, 7);
    ASSERT_TRUE(one);
    AcquireOrFail(one.get(), "x");
    auto y = one->Acquire("y");
    ASSERT_FALSE(y.ok());
    EXPECT_EQ("no free dynamic user: the only uid of 7-7 is in use (config dynamic_users)", y.error().message());
  }
}

TEST_F(UidPoolTest, DefaultRangeMessage) {
  // Fill the default pool through the file rather than 10000 fsyncs.
  std::string users;
  for (uint32_t uid = 80000; uid <= 89999; ++uid) {
    users += (users.empty() ? "" : ",") + ("\"t" + std::to_string(uid) + "\":" + std::to_string(uid));
  }
  WriteRaw("{\"version\":1,\"users\":{" + users + "}}");
  auto pool = OpenOrFail(kDefaultDynamicFirst, kDefaultDynamicLast);
  ASSERT_TRUE(pool);
  EXPECT_EQ(10000u, pool->in_use());
  auto r = pool->Acquire("one-more");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ("no free dynamic user: all 10000 uids of 80000-89999 are in use (config dynamic_users)",
            r.error().message());
}

TEST_F(UidPoolTest, CorruptFileIsMovedAside) {
  WriteRaw("{\"version\":1,\"users\":{\"a\":80000,");
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  EXPECT_EQ(0u, pool->in_use());
  EXPECT_NE(std::string::npos, pool->warning().find(path_ + "' is corrupt")) << pool->warning();
  EXPECT_NE(std::string::npos, pool->warning().find("moved to '" + path_ + ".bad'")) << pool->warning();
  EXPECT_NE(std::string::npos, pool->warning().find("line 1")) << pool->warning();
  struct stat st;
  EXPECT_EQ(0, ::stat((path_ + ".bad").c_str(), &st));
  EXPECT_NE(0, ::stat(path_.c_str(), &st));
  EXPECT_EQ(80000u, AcquireOrFail(pool.get(), "b"));
  // The next Open reads the fresh file without a warning.
  pool = OpenOrFail();
  ASSERT_TRUE(pool);
  EXPECT_TRUE(pool->warning().empty()) << pool->warning();
  EXPECT_EQ(80000u, pool->Lookup("b").value_or(0));
}

TEST_F(UidPoolTest, CorruptContentSaysWhatIsWrong) {
  struct Case {
    std::string text;
    std::string want;
  };
  const Case cases[] = {
      {"", "unexpected end"},
      {"[]", "not a JSON object"},
      {"{\"users\":{}}", "version: missing"},
      {"{\"version\":1}", "users: missing"},
      {"{\"version\":1,\"users\":[]}", "users: expected an object"},
      {"{\"version\":1,\"users\":{\"a\":0}}", "users.a: must be between 1 and 2147483646, got 0"},
      {"{\"version\":1,\"users\":{\"a\":\"80000\"}}", "users.a: expected a number"},
      {"{\"version\":1,\"users\":{\"a\":80000,\"b\":80000}}", "uid 80000 is held by both \"a\" and \"b\""},
      {"{\"version\":1,\"users\":{\"\":80000}}", "empty task id"},
      {"{\"version\":1,\"users\":{},\"extra\":1}", "extra"},
  };
  for (const Case& c : cases) {
    ::unlink((path_ + ".bad").c_str());
    WriteRaw(c.text);
    auto pool = OpenOrFail();
    ASSERT_TRUE(pool) << c.text;
    EXPECT_EQ(0u, pool->in_use()) << c.text;
    EXPECT_NE(std::string::npos, pool->warning().find(c.want)) << c.text << " -> " << pool->warning();
  }
}

TEST_F(UidPoolTest, NewerVersionIsAnErrorNotMovedAside) {
  WriteRaw("{\"version\":2,\"users\":{\"a\":80000}}");
  auto pool = UidPool::Open(path_, 80000, 89999);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(std::string::npos, pool.error().message().find("newer outpost")) << pool.error().message();
  EXPECT_NE(std::string::npos, pool.error().message().find(path_)) << pool.error().message();
  struct stat st;
  EXPECT_EQ(0, ::stat(path_.c_str(), &st));
}

TEST_F(UidPoolTest, ReconcileReleasesDeadOwners) {
  {
    auto pool = OpenOrFail();
    ASSERT_TRUE(pool);
    for (const char* o : {"a", "b", "c", "d"}) AcquireOrFail(pool.get(), o);
  }
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  auto released = pool->Reconcile({"b", "d", "not-in-pool"});
  EXPECT_EQ((std::map<std::string, uint32_t>{{"a", 80000}, {"c", 80002}}), released);
  EXPECT_EQ((std::map<std::string, uint32_t>{{"b", 80001}, {"d", 80003}}), pool->entries());
  EXPECT_EQ(pool->entries(), OnDisk());
  EXPECT_TRUE(pool->Reconcile({"b", "d"}).empty());
  EXPECT_EQ(80000u, AcquireOrFail(pool.get(), "e"));
}

TEST_F(UidPoolTest, OutOfRangeEntriesAfterRangeChange) {
  {
    auto pool = OpenOrFail(100, 109);
    ASSERT_TRUE(pool);
    for (const char* o : {"a", "b", "c"}) AcquireOrFail(pool.get(), o);  // 100, 101, 102
  }
  // The operator moved the range so that 100 and 101 fall outside it.
  auto pool = OpenOrFail(102, 104);
  ASSERT_TRUE(pool);
  EXPECT_EQ(3u, pool->in_use());
  EXPECT_EQ(100u, AcquireOrFail(pool.get(), "a"));  // still held by its live task
  EXPECT_EQ(103u, AcquireOrFail(pool.get(), "d"));  // 102 is held by c
  pool->Release("a");
  pool->Release("b");
  EXPECT_EQ(104u, AcquireOrFail(pool.get(), "e"));
  auto f = pool->Acquire("f");  // 100 and 101 are free but outside the range
  ASSERT_FALSE(f.ok());
  EXPECT_EQ("no free dynamic user: all 3 uids of 102-104 are in use (config dynamic_users)", f.error().message());
  EXPECT_EQ((std::map<std::string, uint32_t>{{"c", 102}, {"d", 103}, {"e", 104}}), OnDisk());
}

TEST_F(UidPoolTest, RejectsBadRanges) {
  struct Case {
    uint32_t first, last;
  };
  for (Case c : {Case{0, 10}, Case{0, 0}, Case{20, 10}, Case{1, 2147483647}, Case{4294967295u, 4294967295u}}) {
    auto pool = UidPool::Open(path_, c.first, c.last);
    ASSERT_FALSE(pool.ok()) << c.first << "-" << c.last;
    EXPECT_EQ(Code::kInvalidArgument, pool.error().code());
    EXPECT_NE(std::string::npos, pool.error().message().find("1 <= first <= last <= 2147483646"))
        << pool.error().message();
    EXPECT_NE(std::string::npos, pool.error().message().find("uid 0")) << pool.error().message();
  }
  EXPECT_TRUE(UidPool::Open(path_, 1, 1).ok());
  EXPECT_TRUE(UidPool::Open(path_, 1, kMaxDynamicUid).ok());
}

TEST_F(UidPoolTest, RestoreMarksRecoveredUids) {
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  ASSERT_TRUE(pool->Restore("a", 80001).ok());
  ASSERT_TRUE(pool->Restore("a", 80001).ok());    // idempotent
  ASSERT_TRUE(pool->Restore("old", 70000).ok());  // outside the range: kept
  EXPECT_EQ(80000u, AcquireOrFail(pool.get(), "b"));
  EXPECT_EQ(80002u, AcquireOrFail(pool.get(), "c"));
  Status taken = pool->Restore("x", 80001);
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(Code::kAlreadyExists, taken.error().code());
  EXPECT_NE(std::string::npos, taken.error().message().find("task a holds it")) << taken.error().message();
  Status other = pool->Restore("a", 80005);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(Code::kFailedPrecondition, other.error().code());
  EXPECT_FALSE(pool->Restore("y", 0).ok());
  EXPECT_EQ(pool->entries(), OnDisk());
  EXPECT_EQ(4u, OnDisk().size());
}

TEST_F(UidPoolTest, FileIsCompleteAfterEveryOperation) {
  auto pool = OpenOrFail(1000, 1004);
  ASSERT_TRUE(pool);
  for (int i = 0; i < 6; ++i) {
    (void)pool->Acquire("t" + std::to_string(i));  // the sixth fails: exhausted
    EXPECT_EQ(pool->entries(), OnDisk()) << "after acquire " << i;
  }
  pool->Release("t2");
  EXPECT_EQ(pool->entries(), OnDisk());
  pool->Reconcile({"t0", "t4"});
  EXPECT_EQ(pool->entries(), OnDisk());
  EXPECT_EQ(2u, OnDisk().size());
  // No temp file left behind by the atomic writes, and the file is private.
  struct stat st;
  EXPECT_NE(0, ::stat((path_ + ".tmp").c_str(), &st));
  ASSERT_EQ(0, ::stat(path_.c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 0777);
}

TEST_F(UidPoolTest, FailedWriteHandsNothingOut) {
  auto pool = OpenOrFail();
  ASSERT_TRUE(pool);
  EXPECT_EQ(80000u, AcquireOrFail(pool.get(), "a"));
  // A directory where the temp file would go makes the write fail.
  ASSERT_EQ(0, ::mkdir((path_ + ".tmp").c_str(), 0700));
  auto b = pool->Acquire("b");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(std::string::npos, b.error().message().find("acquire uid for task b")) << b.error().message();
  EXPECT_FALSE(pool->Lookup("b").has_value());
  EXPECT_EQ(1u, pool->in_use());
  ASSERT_EQ(0, ::rmdir((path_ + ".tmp").c_str()));
  EXPECT_EQ(80001u, AcquireOrFail(pool.get(), "b"));
}

}  // namespace
}  // namespace outpost::proc
