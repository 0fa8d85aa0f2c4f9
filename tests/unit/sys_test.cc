// base/sys: directories the agent creates and removes.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "base/fd.h"
#include "base/sys.h"
#include "test_util.h"

namespace outpost {
namespace {

class SysDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("/tmp", "sys");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { (void)sys::RemoveTree(dir_); }
  mode_t ModeOf(const std::string& p) {
    struct stat st;
    return ::lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  }
  std::string dir_;
};

// Task records are rewritten at every start and exit: in place where they
// fit (no inode created and deleted each time), always whole.
TEST_F(SysDirs, OverwriteFileWritesInPlaceWhenItFitsAndAtomicallyOtherwise) {
  std::string path = dir_ + "/rec.json";
  auto inode = [&] {
    struct stat st;
    EXPECT_EQ(0, ::stat(path.c_str(), &st));
    return std::make_pair(st.st_ino, static_cast<size_t>(st.st_size));
  };
  ASSERT_TRUE(sys::OverwriteFile(path, "{\"a\": 1}", 0600).ok());
  auto first = inode();
  EXPECT_EQ(first.second, 512u) << "a new file is padded so later writes fit";
  const std::string a = "{\"a\": 1}";
  EXPECT_EQ(*sys::ReadFile(path), a + std::string(512 - a.size() - 1, ' ') + "\n");

  ASSERT_TRUE(sys::OverwriteFile(path, "{\"b\": 22}", 0600).ok());
  EXPECT_EQ(inode(), first) << "rewritten in place";
  EXPECT_EQ(sys::ReadFile(path)->substr(0, 10), "{\"b\": 22} ");

  std::string big = "{\"c\": \"" + std::string(600, 'x') + "\"}";
  ASSERT_TRUE(sys::OverwriteFile(path, big, 0600).ok());
  auto grown = inode();
  EXPECT_NE(grown.first, first.first) << "longer than the file: a new file, renamed over it";
  EXPECT_EQ(grown.second, 1024u);
  EXPECT_EQ(sys::ReadFile(path)->substr(0, big.size() + 1), big + " ");

  std::string huge = "{\"d\": \"" + std::string(5000, 'y') + "\"}";
  ASSERT_TRUE(sys::OverwriteFile(path, huge, 0600).ok());
  ASSERT_TRUE(sys::OverwriteFile(path, "{}", 0600).ok());
  EXPECT_EQ(inode().second, 512u) << "beyond a page nothing is written in place (one write of a page is whole)";
  EXPECT_EQ(sys::ReadFile(path)->substr(0, 3), "{} ");
}

// A new record is one inode: created under its own name and written, with
// no temp file renamed over it (two more directory operations per start).
TEST_F(SysDirs, OverwriteFileMakesANewFileWithoutATempFile) {
  UniqueFd in(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  ASSERT_TRUE(in.valid());
  ASSERT_GE(::inotify_add_watch(in.get(), dir_.c_str(), IN_CREATE | IN_MOVED_TO), 0);
  ASSERT_TRUE(sys::OverwriteFile(dir_ + "/new.json", "{\"a\": 1}", 0640).ok());
  alignas(struct inotify_event) char buf[4096];
  ssize_t n = ::read(in.get(), buf, sizeof buf);
  ASSERT_GT(n, 0);
  std::vector<std::string> seen;
  for (char* p = buf; p < buf + n;) {
    auto* ev = reinterpret_cast<struct inotify_event*>(p);
    seen.push_back(std::string(ev->mask & IN_CREATE ? "create " : "moved_to ") + ev->name);
    p += sizeof(struct inotify_event) + ev->len;
  }
  EXPECT_EQ(seen, std::vector<std::string>{"create new.json"});
  struct stat st;
  ASSERT_EQ(0, ::stat((dir_ + "/new.json").c_str(), &st));
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(sys::ReadFile(dir_ + "/new.json")->substr(0, 9), "{\"a\": 1} ");
}

TEST_F(SysDirs, MkdirAllGivesExactModesWhateverTheUmask) {
  mode_t old = ::umask(077);
  Status st = sys::MkdirAll(dir_ + "/a/b/state/", 0711);
  ::umask(old);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(ModeOf(dir_ + "/a"), 0755u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b"), 0755u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b/state"), 0711u);
}

TEST_F(SysDirs, MkdirAllLeavesAnExistingDirAlone) {
  ASSERT_EQ(0, ::chmod(dir_.c_str(), 0750));
  ASSERT_TRUE(sys::MkdirAll(dir_, 0700).ok());
  EXPECT_EQ(ModeOf(dir_), 0750u);
  ASSERT_TRUE(sys::WriteFileAtomic(dir_ + "/f", "", 0600).ok());
  Status st = sys::MkdirAll(dir_ + "/f", 0700);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "'" + dir_ + "/f' is not a directory");
}

TEST_F(SysDirs, RemoveTreeRemovesLinksNotWhatTheyPointTo) {
  std::string outside = dir_ + "/outside";
  ASSERT_TRUE(sys::MkdirAll(outside + "/keep", 0755).ok());
  ASSERT_TRUE(sys::WriteFileAtomic(outside + "/keep/file", "x", 0644).ok());
  std::string tree = dir_ + "/tree";
  ASSERT_TRUE(sys::MkdirAll(tree + "/sub/deeper", 0700).ok());
  ASSERT_EQ(0, ::symlink(outside.c_str(), (tree + "/sub/link").c_str()));
  ASSERT_EQ(0, ::symlink((outside + "/keep/file").c_str(), (tree + "/filelink").c_str()));
  ASSERT_TRUE(sys::RemoveTree(tree).ok());
  EXPECT_NE(0, ::access(tree.c_str(), F_OK));
  EXPECT_EQ(0, ::access((outside + "/keep/file").c_str(), F_OK));
  // The tree itself given as a link: the link goes, not its target.
  ASSERT_EQ(0, ::symlink(outside.c_str(), tree.c_str()));
  ASSERT_TRUE(sys::RemoveTree(tree).ok());
  EXPECT_EQ(0, ::access((outside + "/keep/file").c_str(), F_OK));
}

}  // namespace
}  // namespace outpost
