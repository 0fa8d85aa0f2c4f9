// net/link_check: decoding rtnetlink answers (built here byte by byte), the
// verdict on a cached ADD result against what the namespaces have, and the
// whole look at real namespaces: as root only, in a forked child with a
// private mount namespace and a private network namespace of its own as
// "the host" (netns_test_util.h), so nothing reaches the host's network.
#include "net/link_check.h"

#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/strings.h"
#include "base/sys.h"
#include "net/netns.h"
#include "netns_test_util.h"
#include "test_util.h"

namespace outpost::net {
namespace {

using V = std::vector<std::string>;

// ---- rtnetlink bytes ----

std::string Attr(uint16_t type, const std::string& payload) {
  rtattr a{};
  a.rta_len = static_cast<unsigned short>(sizeof a + payload.size());
  a.rta_type = type;
  std::string out(reinterpret_cast<const char*>(&a), sizeof a);
  out += payload;
  out.resize((out.size() + 3) & ~size_t{3}, '\0');
  return out;
}
std::string U32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string Str(const std::string& s) { return s + std::string(1, '\0'); }

std::string Message(uint16_t type, const std::string& body, uint32_t seq = 7) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(sizeof h + body.size());
  h.nlmsg_type = type;
  h.nlmsg_seq = seq;
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += body;
  out.resize((out.size() + 3) & ~size_t{3}, '\0');
  return out;
}

std::string Link(int index, const std::string& name, unsigned flags, int master, const std::string& kind,
                 uint32_t seq = 7) {
  ifinfomsg ifi{};
  ifi.ifi_index = index;
  ifi.ifi_flags = flags;
  std::string body(reinterpret_cast<const char*>(&ifi), sizeof ifi);
  body += Attr(IFLA_IFNAME, Str(name));
  if (master) body += Attr(IFLA_MASTER, U32(static_cast<uint32_t>(master)));
  if (!kind.empty()) body += Attr(IFLA_LINKINFO | NLA_F_NESTED, Attr(IFLA_INFO_KIND, Str(kind)));
  return Message(RTM_NEWLINK, body, seq);
}

std::string Addr4(int index, const std::string& local, const std::string& peer, int prefix) {
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  ifa.ifa_prefixlen = static_cast<unsigned char>(prefix);
  ifa.ifa_index = static_cast<unsigned>(index);
  std::string body(reinterpret_cast<const char*>(&ifa), sizeof ifa);
  auto raw = [](const std::string& ip) {
    unsigned char b[4];
    EXPECT_EQ(::inet_pton(AF_INET, ip.c_str(), b), 1);
    return std::string(reinterpret_cast<const char*>(b), 4);
  };
  body += Attr(IFA_ADDRESS, raw(peer));
  if (!local.empty()) body += Attr(IFA_LOCAL, raw(local));
  return Message(RTM_NEWADDR, body);
}

std::string ErrorMessage(int err, uint32_t seq = 7) {
  int32_t e = -err;
  return Message(NLMSG_ERROR, std::string(reinterpret_cast<const char*>(&e), 4) + std::string(sizeof(nlmsghdr), '\0'),
                 seq);
}

TEST(RtnlParseTest, LinksAddressesAndDone) {
  std::string bytes = Link(3, "nomad", IFF_UP, 0, "bridge") + Link(5, "veth1", IFF_UP, 3, "veth") +
                      Addr4(2, "172.26.64.2", "172.26.64.2", 20) + Addr4(9, "10.0.0.1", "10.0.0.9", 32) +
                      Message(NLMSG_DONE, U32(0));
  LinkTable t;
  bool done = false;
  ASSERT_TRUE(ParseRtnl(bytes, 7, &t, &done).ok());
  EXPECT_TRUE(done);
  ASSERT_EQ(t.links.size(), 2u);
  EXPECT_EQ(t.links[0].name, "nomad");
  EXPECT_EQ(t.links[0].kind, "bridge");
  EXPECT_EQ(t.links[1].master, 3);
  EXPECT_EQ(t.links[1].index, 5);
  EXPECT_TRUE(t.links[1].flags & IFF_UP);
  ASSERT_EQ(t.addrs.size(), 2u);
  EXPECT_EQ(t.addrs[0].address, "172.26.64.2/20");
  EXPECT_EQ(t.addrs[1].address, "10.0.0.1/32");  // IFA_LOCAL, not the peer
  EXPECT_EQ(t.Find("veth1"), &t.links[1]);
  EXPECT_EQ(t.Find("eth0"), nullptr);
}

TEST(RtnlParseTest, OtherRequestsAreSkippedAndErrorsEndTheAnswer) {
  LinkTable t;
  bool done = false;
  ASSERT_TRUE(ParseRtnl(Link(1, "old", 0, 0, "", 6), 7, &t, &done).ok());
  EXPECT_TRUE(t.links.empty());
  EXPECT_FALSE(done);
  ASSERT_TRUE(ParseRtnl(ErrorMessage(0), 7, &t, &done).ok());  // the ACK
  EXPECT_TRUE(done);
  done = false;
  Status st = ParseRtnl(ErrorMessage(ENODEV), 7, &t, &done);
  EXPECT_EQ(st.error().code(), Code::kNotFound);
  EXPECT_TRUE(done);
  st = ParseRtnl(ErrorMessage(EPERM), 7, &t, &done);
  EXPECT_NE(st.error().message().find("Operation not permitted"), std::string::npos) << st.error().message();
}

// The fuzzer's find: an error field of INT32_MIN cannot be negated into an
// errno (signed overflow); codes that are no errno are named as they came.
TEST(RtnlParseTest, ErrorCodesThatAreNoErrnoAreNamed) {
  for (int32_t raw : {INT32_MIN, 5, -100000}) {
    std::string bytes =
        Message(NLMSG_ERROR, std::string(reinterpret_cast<const char*>(&raw), 4) + std::string(sizeof(nlmsghdr), '\0'), 7);
    LinkTable t;
    bool done = false;
    Status st = ParseRtnl(bytes, 7, &t, &done);
    ASSERT_FALSE(st.ok()) << raw;
    EXPECT_TRUE(done);
    EXPECT_NE(st.error().message().find("rtnetlink: error code " + std::to_string(raw)), std::string::npos)
        << st.error().message();
  }
}

TEST(RtnlParseTest, LengthsThatOverrunAreErrorsNotReads) {
  std::string good = Link(3, "nomad", IFF_UP, 0, "bridge");
  LinkTable t;
  bool done = false;
  // The message says it is longer than the answer.
  std::string cut = good.substr(0, good.size() - 8);
  Status st = ParseRtnl(cut, 7, &t, &done);
  EXPECT_EQ(st.error().message(), "rtnetlink: message at byte 0 overruns the answer");
  // An attribute says it is longer than its message.
  std::string bad = good;
  size_t attr = sizeof(nlmsghdr) + sizeof(ifinfomsg);
  uint16_t big = 200;
  std::memcpy(&bad[attr], &big, 2);
  st = ParseRtnl(bad, 7, &t, &done);
  EXPECT_NE(st.error().message().find("overruns its message"), std::string::npos) << st.error().message();
  // A prefix longer than its address (found by tests/fuzz/netlink_fuzzer).
  st = ParseRtnl(Addr4(2, "10.0.0.2", "10.0.0.2", 33), 7, &t, &done);
  EXPECT_EQ(st.error().message(), "rtnetlink: address prefix /33 longer than the address");
  EXPECT_TRUE(t.addrs.empty());
  // Shorter than a header: nothing to read.
  EXPECT_TRUE(ParseRtnl(good.substr(0, 10), 7, &t, &done).ok());
  EXPECT_TRUE(t.links.empty());
}

TEST(CanonicalCidrTest, Forms) {
  EXPECT_EQ(CanonicalCidr("172.26.64.2/20"), "172.26.64.2/20");
  EXPECT_EQ(CanonicalCidr("fd00:0:0::2/64"), "fd00::2/64");
  EXPECT_EQ(CanonicalCidr("172.26.64.2"), "");
  EXPECT_EQ(CanonicalCidr("172.26.64.2/33"), "");
  EXPECT_EQ(CanonicalCidr("x/20"), "");
}

// ---- the verdict ----

// The bridge plugin's result for a job: the bridge and the veth's host end
// on the host, eth0 in the namespace with the job's address.
CniResult BridgeResult() {
  auto r = ParseCniResult(
      "{\"cniVersion\":\"0.4.0\",\"interfaces\":[{\"name\":\"nomad\",\"mac\":\"aa:aa:aa:aa:aa:aa\"},"
      "{\"name\":\"veth1\",\"mac\":\"bb:bb:bb:bb:bb:bb\"},"
      "{\"name\":\"eth0\",\"mac\":\"cc:cc:cc:cc:cc:cc\",\"sandbox\":\"/run/netns/j\"}],"
      "\"ips\":[{\"version\":\"4\",\"interface\":2,\"address\":\"172.26.64.2/20\",\"gateway\":\"172.26.64.1\"}]}",
      "0.4.0");
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : CniResult();
}
LinkTable Host(unsigned veth_flags = IFF_UP, int master = 3) {
  LinkTable t;
  t.links = {{3, "nomad", IFF_UP, 0, "bridge"}, {5, "veth1", veth_flags, master, "veth"}};
  return t;
}
LinkTable Inside(const std::string& addr = "172.26.64.2/20", unsigned flags = IFF_UP) {
  LinkTable t;
  t.links = {{1, "lo", IFF_UP, 0, ""}, {2, "eth0", flags, 0, "veth"}};
  t.addrs = {{1, "127.0.0.1/8"}};
  if (!addr.empty()) t.addrs.push_back({2, addr});
  return t;
}

TEST(AttachmentProblemsTest, IntactIsEmpty) {
  EXPECT_EQ(AttachmentProblems(BridgeResult(), "/run/netns/j", Host(), Inside()), V{});
}

TEST(AttachmentProblemsTest, EachBrokenPartIsNamed) {
  CniResult r = BridgeResult();
  const std::string ns = "/run/netns/j";
  LinkTable no_eth0 = Inside();
  no_eth0.links.pop_back();
  EXPECT_EQ(AttachmentProblems(r, ns, Host(), no_eth0), V{"eth0 is not in /run/netns/j"});
  EXPECT_EQ(AttachmentProblems(r, ns, Host(), Inside("")), V{"eth0 in /run/netns/j lacks 172.26.64.2/20"});
  EXPECT_EQ(AttachmentProblems(r, ns, Host(), Inside("172.26.64.3/20")),
            V{"eth0 in /run/netns/j lacks 172.26.64.2/20"});
  EXPECT_EQ(AttachmentProblems(r, ns, Host(), Inside("172.26.64.2/20", 0)), V{"eth0 in /run/netns/j is down"});
  EXPECT_EQ(AttachmentProblems(r, ns, Host(0), Inside()), V{"host interface veth1 is down"});
  EXPECT_EQ(AttachmentProblems(r, ns, Host(IFF_UP, 0), Inside()), V{"host interface veth1 is not on bridge nomad"});
  LinkTable no_veth = Host();
  no_veth.links.pop_back();
  EXPECT_EQ(AttachmentProblems(r, ns, no_veth, no_eth0),
            (V{"host interface veth1 is gone", "eth0 is not in /run/netns/j"}));
  // The address on another interface of the namespace is not eth0's.
  LinkTable moved = Inside("");
  moved.addrs.push_back({1, "172.26.64.2/20"});
  EXPECT_EQ(AttachmentProblems(r, ns, Host(), moved), V{"eth0 in /run/netns/j lacks 172.26.64.2/20"});
}

TEST(AttachmentProblemsTest, AddressWithoutInterfaceMayBeOnAnyInsideInterface) {
  auto r = ParseCniResult("{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.47.0.5/24\"}]}", "1.0.0");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(AttachmentProblems(*r, "/n", LinkTable(), Inside("10.47.0.5/24")), V{});
  EXPECT_EQ(AttachmentProblems(*r, "/n", LinkTable(), Inside()), V{"/n lacks 10.47.0.5/24"});
}

// ---- real namespaces ----

bool HaveTool(const char* path) { return ::access(path, X_OK) == 0; }

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

TEST(InspectAttachmentTest, RealNamespacesIntactThenBrokenPartByPart) {
  std::string why = testing::NetnsTestSkipReason();
  if (!why.empty()) GTEST_SKIP() << why;
  const char* ip = HaveTool("/usr/sbin/ip") ? "/usr/sbin/ip" : HaveTool("/sbin/ip") ? "/sbin/ip" : nullptr;
  if (!ip || !HaveTool("/usr/bin/nsenter")) GTEST_SKIP() << "needs ip(8) and nsenter(1)";
  std::string dir = outpost::testing::MakeTempDir("/tmp", "linkcheck");
  ASSERT_FALSE(dir.empty());
  const std::string ipcmd = ip;
  std::string err = testing::RunInMountNsChild([dir, ipcmd]() -> std::string {
    // This child's own network namespace plays the host.
    if (::unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
    Status st = PinNewNetns(dir, "j");
    if (!st.ok()) return "pin: " + st.error().message();
    const std::string pin = dir + "/j";
    const std::string in = "/usr/bin/nsenter --net=" + pin + " " + ipcmd;
    std::string setup = in + " link add eth0 type veth peer name veth1 netns " + std::to_string(::getpid()) + " && " +
                        ipcmd + " link add nomad type bridge && " + ipcmd + " link set veth1 master nomad && " +
                        ipcmd + " link set veth1 up && " + ipcmd + " link set nomad up && " + in +
                        " link set eth0 up && " + in + " addr add 172.26.64.2/20 dev eth0";
    if (Sh(setup) != 0) return "set-up failed: " + setup;
    auto r = ParseCniResult(
        "{\"cniVersion\":\"0.4.0\",\"interfaces\":[{\"name\":\"nomad\"},{\"name\":\"veth1\"},"
        "{\"name\":\"eth0\",\"sandbox\":\"" + pin + "\"}],"
        "\"ips\":[{\"interface\":2,\"address\":\"172.26.64.2/20\"}]}",
        "0.4.0");
    if (!r.ok()) return r.error().message();
    auto expect = [&](const V& want, const std::string& step) -> std::string {
      auto got = InspectAttachment(*r, pin);
      if (!got.ok()) return step + ": " + got.error().message();
      if (*got != want) return step + ": got [" + JoinStrings(*got, " | ") + "]";
      return "";
    };
    // Each step breaks one more part; a command that fails fails the test.
    auto step = [&](const std::string& cmd, const V& want, const std::string& name) -> std::string {
      if (Sh(cmd) != 0) return name + ": " + cmd + " failed";
      return expect(want, name);
    };
    std::string e = expect({}, "intact");
    const std::string off = "host interface veth1 is not on bridge nomad";
    if (e.empty()) e = step(ipcmd + " link set veth1 nomaster", {off}, "off the bridge");
    const std::string lacks = "eth0 in " + pin + " lacks 172.26.64.2/20";
    if (e.empty()) e = step(in + " addr flush dev eth0", {off, lacks}, "no address");
    if (e.empty()) {
      e = step(in + " link del eth0", {"host interface veth1 is gone", "eth0 is not in " + pin}, "veth pair gone");
    }
    if (e.empty()) {
      auto gone = InspectAttachment(*r, dir + "/nosuch");
      if (gone.ok()) e = "a missing namespace was looked at";
    }
    return e;
  });
  (void)sys::RemoveTree(dir);
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace outpost::net
