// driver/nomad/task_config: the allocation dir Nomad's client lays out,
// made at every start: Nomad's modes whatever the umask, repaired when they
// drifted, the task's own dirs owned by the user it runs as, and a file in
// the way named in the error, a symlink in the way not followed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/sys.h"
#include "driver/nomad/task_config.h"
#include "test_util.h"

namespace outpost::driver::nomad {
namespace {

class NomadAllocDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = outpost::testing::MakeTempDir("/tmp", "nomadalloc");
    old_umask_ = ::umask(077);  // narrower than any mode of the layout
  }
  void TearDown() override {
    ::umask(old_umask_);
    (void)sys::RemoveTree(root_);
  }
  static mode_t Mode(const std::string& p) {
    struct stat st;
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  static uid_t Owner(const std::string& p) {
    struct stat st;
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_uid;
  }
  std::string root_;
  mode_t old_umask_ = 0;
};

TEST_F(NomadAllocDirTest, NomadsModesWhateverTheUmaskAndAgainAfterTheyDrifted) {
  AllocLayout l = Layout(root_ + "/nomad-alloc", "web", "server");  // the root is made too
  const struct {
    std::string path;
    mode_t mode;
  } want[] = {
      {l.alloc_dir, 0755},          {l.shared_dir, 0755},         {l.shared_dir + "/data", 0777},
      {l.shared_dir + "/logs", 0777}, {l.shared_dir + "/tmp", 0777}, {l.task_dir, 0777},
      {l.local_dir, 0777},          {l.secrets_dir, 0700},        {l.task_dir + "/private", 0700},
      {l.tmp_dir, 01777},
  };
  ASSERT_TRUE(MakeAllocDirs(l, Identity{}).ok());
  for (const auto& w : want) EXPECT_EQ(Mode(w.path), w.mode) << w.path;
  // Someone changed them between two starts: the next start puts them back.
  for (const auto& w : want) ASSERT_EQ(::chmod(w.path.c_str(), 0711), 0) << w.path;
  ASSERT_TRUE(MakeAllocDirs(l, Identity{}).ok());
  for (const auto& w : want) EXPECT_EQ(Mode(w.path), w.mode) << w.path;
}

TEST_F(NomadAllocDirTest, TheTasksOwnDirsBelongToTheUserItRunsAs) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give dirs away";
  AllocLayout l = Layout(root_, "web", "server");
  Identity nobody;
  nobody.switch_user = true;
  nobody.uid = 65534;
  nobody.gid = 65534;
  ASSERT_TRUE(MakeAllocDirs(l, nobody).ok());
  for (const std::string& p : {l.task_dir, l.local_dir, l.secrets_dir, l.task_dir + "/private", l.tmp_dir}) {
    EXPECT_EQ(Owner(p), 65534u) << p;
  }
  for (const std::string& p : {l.alloc_dir, l.shared_dir, l.shared_dir + "/data"}) EXPECT_EQ(Owner(p), 0u) << p;
  // Given back to root between two starts: the next start as nobody takes
  // them again.
  ASSERT_EQ(::chown(l.local_dir.c_str(), 0, 0), 0);
  ASSERT_TRUE(MakeAllocDirs(l, nobody).ok());
  EXPECT_EQ(Owner(l.local_dir), 65534u);
}

TEST_F(NomadAllocDirTest, AFileInTheWayIsNamed) {
  AllocLayout l = Layout(root_, "web", "server");
  ASSERT_TRUE(sys::MkdirAll(l.task_dir, 0755).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(l.local_dir, "not a dir", 0644).ok());
  Status st = MakeAllocDirs(l, Identity{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find(l.local_dir), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("not a directory"), std::string::npos) << st.error().message();
}

// The task's user may write its task dir, so it can put a symlink where
// local/ was: the root agent must not chmod or chown what it points at.
TEST_F(NomadAllocDirTest, ASymlinkInPlaceOfADirIsNotFollowed) {
  AllocLayout l = Layout(root_, "web", "server");
  ASSERT_TRUE(MakeAllocDirs(l, Identity{}).ok());
  const std::string target = root_ + "/elsewhere";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(target.c_str(), 0700), 0);
  for (const std::string& p : {l.local_dir, l.tmp_dir}) {
    ASSERT_TRUE(sys::RemoveTree(p).ok()) << p;
    ASSERT_EQ(::symlink(target.c_str(), p.c_str()), 0) << p;
    Identity nobody;
    nobody.switch_user = ::geteuid() == 0;
    nobody.uid = 65534;
    nobody.gid = 65534;
    Status st = MakeAllocDirs(l, nobody);
    ASSERT_FALSE(st.ok()) << p;
    EXPECT_NE(st.error().message().find(p), std::string::npos) << st.error().message();
    EXPECT_NE(st.error().message().find("symlink"), std::string::npos) << st.error().message();
    EXPECT_EQ(Mode(target), 0700u) << "followed " << p;
    EXPECT_EQ(Owner(target), ::geteuid()) << "followed " << p;
    ASSERT_EQ(::unlink(p.c_str()), 0);
    ASSERT_TRUE(MakeAllocDirs(l, Identity{}).ok());  // a dir again: fine
  }
}

// A task gone for good takes its task dir; the allocation goes with the
// job's last task; what a task left in its dirs (a symlink out of them
// included) is removed, never followed.
TEST_F(NomadAllocDirTest, RemovedTaskByTaskAndWithTheLastOne) {
  AllocLayout a = Layout(root_ + "/nomad-alloc", "web", "a");
  AllocLayout b = Layout(root_ + "/nomad-alloc", "web", "b");
  ASSERT_TRUE(MakeAllocDirs(a, Identity{}).ok());
  ASSERT_TRUE(MakeAllocDirs(b, Identity{}).ok());
  const std::string outside = root_ + "/outside";
  ASSERT_TRUE(sys::MkdirAll(outside, 0755).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(outside + "/keep", "x", 0644, sys::Durability::kProcessCrash).ok());
  ASSERT_EQ(::symlink(outside.c_str(), (b.local_dir + "/link").c_str()), 0);
  ASSERT_TRUE(sys::WriteFileAtomic(a.shared_dir + "/data/f", "x", 0644, sys::Durability::kProcessCrash).ok());

  ASSERT_TRUE(RemoveAllocDirs(b).ok());
  EXPECT_NE(::access(b.task_dir.c_str(), F_OK), 0);
  EXPECT_EQ(::access((outside + "/keep").c_str(), F_OK), 0) << "a symlink was followed";
  EXPECT_EQ(::access((a.shared_dir + "/data/f").c_str(), F_OK), 0) << "the allocation went with a task still in it";
  EXPECT_EQ(::access(a.local_dir.c_str(), F_OK), 0);

  ASSERT_TRUE(RemoveAllocDirs(a).ok());
  EXPECT_NE(::access(a.alloc_dir.c_str(), F_OK), 0) << "the allocation outlived its last task";
  EXPECT_EQ(::access((root_ + "/nomad-alloc").c_str(), F_OK), 0);
  // Nothing left to remove is not an error.
  EXPECT_TRUE(RemoveAllocDirs(a).ok());
}

}  // namespace
}  // namespace outpost::driver::nomad
