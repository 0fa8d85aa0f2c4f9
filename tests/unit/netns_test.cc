// net/netns: pinned network namespaces. The tests that pin run as root only,
// each in a forked child with a private mount namespace (netns_test_util.h).
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "base/fd.h"
#include "base/sys.h"
#include "net/netns.h"
#include "netns_test_util.h"
#include "test_util.h"

namespace outpost {
namespace {

using testing::NsInode;
using testing::RunInMountNsChild;

// Whether lo is up in the namespace of fd, looked at from inside it; the
// calling thread returns to own_fd afterwards. "" = up.
std::string CheckLoopbackUpIn(int fd, int own_fd) {
  if (::setns(fd, CLONE_NEWNET) != 0) return std::string("setns into the pin: ") + std::strerror(errno);
  std::string msg;
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (s < 0 || ::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
    msg = std::string("SIOCGIFFLAGS lo: ") + std::strerror(errno);
  } else if (!(ifr.ifr_flags & IFF_UP)) {
    msg = "lo is down in the pinned namespace";
  }
  if (s >= 0) ::close(s);
  if (::setns(own_fd, CLONE_NEWNET) != 0) msg += std::string(" / setns back: ") + std::strerror(errno);
  return msg;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::NetnsTestSkipReason();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = testing::MakeTempDir("/tmp", "netns");
    ASSERT_FALSE(dir_.empty());
    dir_ += "/pins";
  }
  void TearDown() override {
    if (!dir_.empty()) (void)sys::RemoveTree(sys::Dirname(dir_));
  }
  std::string dir_;
};

TEST_F(NetnsTest, PinHoldsANewNamespaceWithLoopbackUp) {
  const std::string dir = dir_;
  std::string err = RunInMountNsChild([dir]() -> std::string {
    ino_t own_before = NsInode("/proc/self/ns/net");
    Status st = net::PinNewNetns(dir, "job-a");
    if (!st.ok()) return "pin: " + st.error().message();
    const std::string pin = dir + "/job-a";
    if (!net::IsPinnedNetns(pin)) return "the pin is not an nsfs mount";
    ino_t own_after = NsInode("/proc/self/ns/net");
    if (own_after != own_before) return "the caller did not return to its own network namespace";
    ino_t pinned = NsInode(pin);
    if (pinned == 0 || pinned == own_after) return "the pin does not hold a namespace of its own";
    auto fd = net::OpenNetns(pin);
    if (!fd.ok()) return fd.error().message();
    int own = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (own < 0) return "open own netns";
    UniqueFd own_fd(own);
    std::string lo = CheckLoopbackUpIn(fd->get(), own_fd.get());
    if (!lo.empty()) return lo;
    st = net::UnpinNetns(pin);
    if (!st.ok()) return "unpin: " + st.error().message();
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST_F(NetnsTest, SecondPinOfTheSameNameIsAlreadyExists) {
  const std::string dir = dir_;
  std::string err = RunInMountNsChild([dir]() -> std::string {
    Status st = net::PinNewNetns(dir, "job-b");
    if (!st.ok()) return "pin: " + st.error().message();
    ino_t first = NsInode(dir + "/job-b");
    st = net::PinNewNetns(dir, "job-b");
    if (st.ok()) return "a second pin of the same name succeeded";
    if (st.error().code() != Code::kAlreadyExists) return "second pin: " + st.error().message();
    if (NsInode(dir + "/job-b") != first) return "the first pin was replaced";
    // Another name next to it is another namespace.
    st = net::PinNewNetns(dir, "job-c");
    if (!st.ok()) return "pin job-c: " + st.error().message();
    if (NsInode(dir + "/job-c") == first) return "two pins share a namespace";
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST_F(NetnsTest, PlainFileOfTheNameIsReplaced) {
  const std::string dir = dir_;
  std::string err = RunInMountNsChild([dir]() -> std::string {
    Status st = sys::MkdirAll(dir, 0755);
    if (!st.ok()) return st.error().message();
    st = sys::WriteFileAtomic(dir + "/job-d", "left by a crash", 0444, sys::Durability::kProcessCrash);
    if (!st.ok()) return st.error().message();
    if (net::IsPinnedNetns(dir + "/job-d")) return "a plain file counts as a pin";
    st = net::PinNewNetns(dir, "job-d");
    if (!st.ok()) return "pin over a plain file: " + st.error().message();
    if (!net::IsPinnedNetns(dir + "/job-d")) return "the plain file was not replaced by a pin";
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST_F(NetnsTest, UnpinRemovesThePinAndASecondUnpinIsFine) {
  const std::string dir = dir_;
  std::string err = RunInMountNsChild([dir]() -> std::string {
    Status st = net::PinNewNetns(dir, "job-e");
    if (!st.ok()) return "pin: " + st.error().message();
    const std::string pin = dir + "/job-e";
    st = net::UnpinNetns(pin);
    if (!st.ok()) return "unpin: " + st.error().message();
    struct stat sb;
    if (::lstat(pin.c_str(), &sb) == 0) return "the pin file is still there";
    if (net::IsPinnedNetns(pin)) return "still pinned";
    st = net::UnpinNetns(pin);
    if (!st.ok()) return "second unpin: " + st.error().message();
    // A name can be pinned again after an unpin.
    st = net::PinNewNetns(dir, "job-e");
    if (!st.ok()) return "pin again: " + st.error().message();
    return "";
  });
  EXPECT_EQ(err, "");
}

TEST_F(NetnsTest, BadNamesAreRefused) {
  for (const char* name : {"", "a/b", ".", ".."}) {
    Status st = net::PinNewNetns(dir_, name);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_EQ(st.error().code(), Code::kInvalidArgument) << name;
  }
}

// No root needed below.
TEST(NetnsOpen, ErrorNamesThePath) {
  auto fd = net::OpenNetns("/nonexistent-outpost/netns/job");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.error().message().find("'/nonexistent-outpost/netns/job'"), std::string::npos)
      << fd.error().message();
  EXPECT_FALSE(net::IsPinnedNetns("/nonexistent-outpost/netns/job"));
  EXPECT_FALSE(net::IsPinnedNetns("/proc/self/status"));
  EXPECT_TRUE(net::UnpinNetns("/nonexistent-outpost/netns/job").ok());
}

}  // namespace
}  // namespace outpost
