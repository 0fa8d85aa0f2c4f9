// JobStore: records survive a save/load round trip field by field; a save
// replaces the old file in one rename (an open reader keeps the complete old
// content, no temp file is left, a temp file left by a crash is ignored);
// every unreadable record is moved aside as <id>.json.bad with an error that
// names it while the other records still load; Remove.
#include "job/store.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::job {
namespace {

JobSpec Spec(const std::string& id, const std::string& command = "/bin/true") {
  auto spec = ParseJobSpec(R"({"id": ")" + id + R"(", "tasks": [{"name": "a", "command": ")" + command + R"("}]})");
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  return spec.ok() ? *spec : JobSpec();
}

StoredJob Stored(const std::string& id, const std::string& command = "/bin/true") {
  StoredJob j;
  j.spec = Spec(id, command);
  j.submitted_unix_nanos = 1700000000123456789;
  return j;
}

void Write(const std::string& path, const std::string& data) {
  auto fd = sys::Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(fd.ok()) << fd.error().message();
  ASSERT_TRUE(sys::WriteAll(fd->get(), data.data(), data.size(), "write").ok());
}

std::string Read(const std::string& path) {
  auto text = sys::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.error().message();
  return text.ok() ? *text : "";
}

std::string Lines(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::string MakeTempDir() {
  char tmpl[] = "/tmp/outpost-store-XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl), nullptr);
  return tmpl;
}

class JobStoreTest : public ::testing::Test {
 protected:
  JobStoreTest() : tmp_(MakeTempDir()), state_(tmp_ + "/state"), store(state_) { EXPECT_TRUE(store.Init().ok()); }
  ~JobStoreTest() override { EXPECT_TRUE(sys::RemoveTree(tmp_).ok()); }

  std::vector<std::string> Names() {
    auto names = sys::ListDir(store.dir());
    EXPECT_TRUE(names.ok()) << names.error().message();
    return names.ok() ? *names : std::vector<std::string>();
  }
  std::string Path(const std::string& name) const { return store.dir() + "/" + name; }

  std::string tmp_;
  std::string state_;
  JobStore store;
};

TEST_F(JobStoreTest, InitCreatesAPrivateDirectory) {
  EXPECT_EQ(store.dir(), state_ + "/jobs");
  struct stat st;
  ASSERT_EQ(::stat(store.dir().c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(store.Init().ok());  // again: nothing to do
  std::vector<std::string> errors;
  EXPECT_TRUE(store.LoadAll(&errors).empty());
  EXPECT_TRUE(errors.empty());
}

TEST_F(JobStoreTest, RecordsRoundTripFieldByField) {
  StoredJob api = Stored("web", "/usr/bin/web");
  api.version = 7;
  StoredJob file = Stored("batch");
  file.source = Source::kFile;
  file.file = "/etc/outpost/jobs.d/batch.json";
  file.running = false;
  file.submitted_unix_nanos = 0;
  ASSERT_TRUE(store.Save(api).ok());
  ASSERT_TRUE(store.Save(file).ok());

  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  ASSERT_EQ(loaded.size(), 2u);
  // In name order.
  const StoredJob& b = loaded[0];
  const StoredJob& w = loaded[1];
  EXPECT_EQ(b.spec.id, "batch");
  EXPECT_EQ(b.source, Source::kFile);
  EXPECT_EQ(b.file, "/etc/outpost/jobs.d/batch.json");
  EXPECT_FALSE(b.running);
  EXPECT_EQ(b.version, 1);
  EXPECT_EQ(b.submitted_unix_nanos, 0);
  EXPECT_EQ(w.spec.id, "web");
  EXPECT_EQ(w.source, Source::kApi);
  EXPECT_EQ(w.file, "");
  EXPECT_TRUE(w.running);
  EXPECT_EQ(w.version, 7);
  EXPECT_EQ(w.submitted_unix_nanos, 1700000000123456789);
  ASSERT_EQ(w.spec.tasks.size(), 1u);
  EXPECT_EQ(w.spec.tasks[0].command, "/usr/bin/web");
  EXPECT_EQ(JobSpecToJson(w.spec).serialize(), JobSpecToJson(api.spec).serialize());
  EXPECT_EQ(JobStore::Encode(w), JobStore::Encode(api));
  EXPECT_EQ(JobStore::Encode(b), JobStore::Encode(file));
}

TEST_F(JobStoreTest, FailedTasksRoundTripAndAreWrittenOnlyWhenThereAreAny) {
  StoredJob j = Stored("web", "/usr/bin/web");
  EXPECT_EQ(JobStore::Encode(j).find("\"failed\""), std::string::npos);
  j.failed["api"] = "failed: exit code 1; restart limit reached (5 restarts within 5m)";
  ASSERT_TRUE(store.Save(j).ok());
  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].failed, j.failed);
  auto bad = JobStore::Decode(R"({"version": 1, "source": "api", "file": "", "desired": "running", "job_version": 1,
      "submitted_at_ns": 0, "spec": {"id": "x", "tasks": [{"name": "t", "command": "/bin/true"}]},
      "failed": {"t": 3}})", "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("failed.t: expected a string"), std::string::npos) << bad.error().message();
}

TEST_F(JobStoreTest, RecordsArePrivateAndReadable) {
  StoredJob j = Stored("web");
  ASSERT_TRUE(store.Save(j).ok());
  struct stat st;
  ASSERT_EQ(::stat(Path("web.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string text = Read(Path("web.json"));
  EXPECT_EQ(text, JobStore::Encode(j));
  EXPECT_NE(text.find("\"version\": 1"), std::string::npos) << text;  // the record format's version
  EXPECT_NE(text.find("\"desired\": \"running\""), std::string::npos) << text;
}

TEST_F(JobStoreTest, SaveReplacesTheRecordInOneStep) {
  StoredJob v1 = Stored("web", "/bin/old");
  ASSERT_TRUE(store.Save(v1).ok());
  std::string old_text = JobStore::Encode(v1);
  // A reader that opened the record before the save...
  auto reader = sys::Open(Path("web.json"), O_RDONLY);
  ASSERT_TRUE(reader.ok()) << reader.error().message();
  struct stat before;
  ASSERT_EQ(::fstat(reader->get(), &before), 0);

  StoredJob v2 = Stored("web", "/bin/" + std::string(4000, 'n'));  // longer: a torn write would show
  v2.version = 2;
  ASSERT_TRUE(store.Save(v2).ok());

  // ...still reads the whole old record: the new one is a different file
  // renamed over it, never the old file rewritten in place.
  std::string seen(old_text.size() + 1, '\0');
  ssize_t n = ::pread(reader->get(), &seen[0], seen.size(), 0);
  ASSERT_GE(n, 0);
  seen.resize(static_cast<size_t>(n));
  EXPECT_EQ(seen, old_text);
  struct stat after;
  ASSERT_EQ(::stat(Path("web.json").c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
  EXPECT_EQ(Read(Path("web.json")), JobStore::Encode(v2));
  EXPECT_EQ(Names(), std::vector<std::string>{"web.json"});  // no temp file left

  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].version, 2);
  EXPECT_EQ(loaded[0].spec.tasks[0].command, v2.spec.tasks[0].command);
}

TEST_F(JobStoreTest, ManySavesLeaveOnlyTheRecords) {
  for (int i = 0; i < 20; ++i) {
    StoredJob j = Stored(i % 2 ? "a" : "b", Format("/bin/v%d", i));
    j.version = i + 1;
    ASSERT_TRUE(store.Save(j).ok());
  }
  EXPECT_EQ(Names(), (std::vector<std::string>{"a.json", "b.json"}));
  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].spec.tasks[0].command, "/bin/v19");
  EXPECT_EQ(loaded[1].spec.tasks[0].command, "/bin/v18");
}

TEST_F(JobStoreTest, ATempFileLeftByACrashIsIgnoredAndReplaced) {
  StoredJob j = Stored("web", "/bin/old");
  ASSERT_TRUE(store.Save(j).ok());
  // A power cut after the temp file was written, before the rename.
  Write(Path("web.json.tmp"), "{\"version\": 1, \"spec\": {\"id\": \"we");
  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].spec.tasks[0].command, "/bin/old");
  EXPECT_TRUE(Exists(Path("web.json.tmp")));  // not a record: not touched, not moved aside

  StoredJob next = Stored("web", "/bin/new");
  ASSERT_TRUE(store.Save(next).ok());
  EXPECT_EQ(Names(), std::vector<std::string>{"web.json"});
  EXPECT_EQ(Read(Path("web.json")), JobStore::Encode(next));
}

TEST_F(JobStoreTest, SaveWithoutTheDirectoryFailsAndWritesNothing) {
  ASSERT_TRUE(sys::RemoveTree(store.dir()).ok());
  Status st = store.Save(Stored("web"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find(store.dir()), std::string::npos) << st.error().message();
  EXPECT_FALSE(Exists(store.dir()));
  std::vector<std::string> errors;
  EXPECT_TRUE(store.LoadAll(&errors).empty());
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find(store.dir()), std::string::npos) << errors[0];
}

TEST_F(JobStoreTest, EveryBadRecordIsMovedAsideAndTheOthersLoad) {
  ASSERT_TRUE(store.Save(Stored("good")).ok());
  ASSERT_TRUE(store.Save(Stored("zeta")).ok());
  std::string whole = JobStore::Encode(Stored("torn"));
  struct Bad {
    std::string name;
    std::string content;
    std::string error;  // the message, before " (moved to ...)"
  };
  StoredJob other = Stored("other");
  std::string newer = JobStore::Encode(Stored("newer"));
  newer.replace(newer.find("\"version\": 1"), 12, "\"version\": 2");
  std::string weird = JobStore::Encode(Stored("weird"));
  weird.replace(weird.find("\"desired\": \"running\""), 20, "\"desired\": \"paused\"");
  std::vector<Bad> bad = {
      {"torn.json", whole.substr(0, whole.size() / 2), ""},
      {"list.json", "[1, 2]", Path("list.json") + ": not a JSON object"},
      {"mismatch.json", JobStore::Encode(other), Path("mismatch.json") + ": holds job \"other\""},
      {"newer.json", newer, Path("newer.json") + ": version: must be between 1 and 1, got 2"},
      {"weird.json", weird,
       Path("weird.json") + ": desired: expected \"running\" or \"stopped\", got \"paused\""},
  };
  for (const Bad& b : bad) Write(Path(b.name), b.content);

  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].spec.id, "good");
  EXPECT_EQ(loaded[1].spec.id, "zeta");

  // One error per bad record, in name order, each naming the file and where it went.
  std::vector<const Bad*> sorted;
  for (const char* name : {"list.json", "mismatch.json", "newer.json", "torn.json", "weird.json"}) {
    for (const Bad& b : bad) {
      if (b.name == name) sorted.push_back(&b);
    }
  }
  ASSERT_EQ(errors.size(), sorted.size()) << Lines(errors);
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Bad& b = *sorted[i];
    std::string path = Path(b.name);
    const std::string& e = errors[i];
    EXPECT_TRUE(StartsWith(e, path + ": ")) << e;
    EXPECT_TRUE(EndsWith(e, " (moved to " + path + ".bad)")) << e;
    if (!b.error.empty()) {
      EXPECT_EQ(e, b.error + " (moved to " + path + ".bad)");
    }
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    // Kept, byte for byte, for the operator.
    EXPECT_FALSE(Exists(path)) << b.name;
    EXPECT_EQ(Read(path + ".bad"), b.content) << b.name;
  }

  // The next start loads the good records without complaint.
  errors.clear();
  loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  EXPECT_EQ(loaded.size(), 2u);
}

// A jobs.d job's record is not fsync'd: a power cut can leave a new one
// empty or zero-filled. Nothing is in it to keep: it is removed, not moved
// aside, and the others load.
TEST_F(JobStoreTest, ARecordLeftEmptyByAPowerCutIsRemovedWithoutComplaint) {
  ASSERT_TRUE(store.Save(Stored("good")).ok());
  Write(Path("empty.json"), "");
  Write(Path("zeros.json"), std::string(512, '\0'));
  Write(Path("blank.json"), std::string(511, ' ') + "\n");
  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].spec.id, "good");
  EXPECT_EQ(Names(), std::vector<std::string>{"good.json"});
}

TEST_F(JobStoreTest, OnlyJsonFilesAreRecords) {
  ASSERT_TRUE(store.Save(Stored("web")).ok());
  Write(Path("README"), "not a record");
  Write(Path("web.json.bad"), "{");
  Write(Path(".web.json.swp"), "{");
  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  EXPECT_TRUE(errors.empty()) << Lines(errors);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].spec.id, "web");
  EXPECT_EQ(Names(), (std::vector<std::string>{".web.json.swp", "README", "web.json", "web.json.bad"}));
}

TEST_F(JobStoreTest, RemoveDeletesTheRecord) {
  ASSERT_TRUE(store.Save(Stored("web")).ok());
  ASSERT_TRUE(store.Save(Stored("db")).ok());
  ASSERT_TRUE(store.Remove("web").ok());
  EXPECT_EQ(Names(), std::vector<std::string>{"db.json"});
  EXPECT_TRUE(store.Remove("web").ok());  // already gone: not an error
  EXPECT_TRUE(store.Remove("never-saved").ok());
  std::vector<std::string> errors;
  std::vector<StoredJob> loaded = store.LoadAll(&errors);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].spec.id, "db");
}

TEST(JobStoreCodec, DecodeNamesTheSourceAndEveryProblem) {
  StoredJob j = Stored("web");
  auto again = JobStore::Decode(JobStore::Encode(j), "rec");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(JobStore::Encode(*again), JobStore::Encode(j));

  auto bad = JobStore::Decode(R"({"version": 1, "source": "cli", "desired": "up", "job_version": 1})", "rec");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kInvalidArgument);
  const std::string& m = bad.error().message();
  EXPECT_TRUE(StartsWith(m, "rec: ")) << m;
  for (const char* problem : {"source: expected \"api\" or \"file\", got \"cli\"",
                              "desired: expected \"running\" or \"stopped\", got \"up\"", "spec: missing"}) {
    EXPECT_NE(m.find(problem), std::string::npos) << problem << " in " << m;
  }
  bad = JobStore::Decode("{", "rec");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(StartsWith(bad.error().message(), "rec: ")) << bad.error().message();
  EXPECT_STREQ(SourceName(Source::kApi), "api");
  EXPECT_STREQ(SourceName(Source::kFile), "file");
}

}  // namespace
}  // namespace outpost::job
