#include "net/link_check.h"

#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "base/fd.h"
#include "base/strings.h"
#include "net/netns.h"

namespace outpost::net {

namespace {

// An answer the kernel has ready at once; the bound only keeps a kernel
// that never answers from holding the loop.
constexpr int kReplyTimeoutMs = 2000;
constexpr size_t kDatagramBytes = 64 << 10;

size_t Align4(size_t n) { return (n + 3) & ~static_cast<size_t>(3); }

template <typename T>
T Load(const std::string& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// The attributes in [off, end): (type without the nested/byte-order
// flags, payload offset, payload length), each checked to fit.
struct Attr {
  uint16_t type;
  size_t off;
  size_t len;
};
Status ForEachAttr(const std::string& b, size_t off, size_t end, std::vector<Attr>* out) {
  while (off + sizeof(rtattr) <= end) {
    uint16_t len = Load<uint16_t>(b, off);
    uint16_t type = Load<uint16_t>(b, off + 2);
    if (len < sizeof(rtattr) || off + len > end) {
      return Error(Code::kInvalidArgument, Format("rtnetlink: attribute at byte %zu overruns its message", off));
    }
    out->push_back({static_cast<uint16_t>(type & NLA_TYPE_MASK), off + sizeof(rtattr), len - sizeof(rtattr)});
    off += Align4(len);
  }
  return OkStatus();
}

std::string AttrString(const std::string& b, const Attr& a) {
  std::string s = b.substr(a.off, a.len);
  size_t nul = s.find('\0');
  return nul == std::string::npos ? s : s.substr(0, nul);
}

Status ParseLink(const std::string& b, size_t off, size_t end, LinkTable* table) {
  if (off + sizeof(ifinfomsg) > end) return Error(Code::kInvalidArgument, "rtnetlink: short RTM_NEWLINK");
  ifinfomsg ifi = Load<ifinfomsg>(b, off);
  LinkInfo l;
  l.index = ifi.ifi_index;
  l.flags = ifi.ifi_flags;
  std::vector<Attr> attrs;
  OUTPOST_RETURN_IF_ERROR(ForEachAttr(b, off + Align4(sizeof(ifinfomsg)), end, &attrs));
  for (const Attr& a : attrs) {
    if (a.type == IFLA_IFNAME) {
      l.name = AttrString(b, a);
    } else if (a.type == IFLA_MASTER && a.len >= 4) {
      l.master = static_cast<int>(Load<uint32_t>(b, a.off));
    } else if (a.type == IFLA_LINKINFO) {
      std::vector<Attr> info;
      OUTPOST_RETURN_IF_ERROR(ForEachAttr(b, a.off, a.off + a.len, &info));
      for (const Attr& i : info) {
        if (i.type == IFLA_INFO_KIND) l.kind = AttrString(b, i);
      }
    }
  }
  table->links.push_back(std::move(l));
  return OkStatus();
}

Status ParseAddr(const std::string& b, size_t off, size_t end, LinkTable* table) {
  if (off + sizeof(ifaddrmsg) > end) return Error(Code::kInvalidArgument, "rtnetlink: short RTM_NEWADDR");
  ifaddrmsg ifa = Load<ifaddrmsg>(b, off);
  std::vector<Attr> attrs;
  OUTPOST_RETURN_IF_ERROR(ForEachAttr(b, off + Align4(sizeof(ifaddrmsg)), end, &attrs));
  size_t want = ifa.ifa_family == AF_INET ? 4 : ifa.ifa_family == AF_INET6 ? 16 : 0;
  if (want == 0) return OkStatus();
  if (ifa.ifa_prefixlen > want * 8) {
    return Error(Code::kInvalidArgument,
                 Format("rtnetlink: address prefix /%u longer than the address", ifa.ifa_prefixlen));
  }
  // IPv4: IFA_LOCAL is the interface's own address (IFA_ADDRESS the peer's
  // on a point-to-point link); IPv6 has IFA_ADDRESS only.
  const Attr* pick = nullptr;
  for (const Attr& a : attrs) {
    if (a.len != want) continue;
    if (a.type == IFA_LOCAL || (a.type == IFA_ADDRESS && pick == nullptr)) pick = &a;
  }
  if (pick == nullptr) return OkStatus();
  char text[INET6_ADDRSTRLEN];
  if (::inet_ntop(ifa.ifa_family, b.data() + pick->off, text, sizeof text) == nullptr) return OkStatus();
  table->addrs.push_back({static_cast<int>(ifa.ifa_index), Format("%s/%u", text, ifa.ifa_prefixlen)});
  return OkStatus();
}

// One request on a NETLINK_ROUTE socket, its answers added to *table.
Status Request(int fd, uint16_t type, uint16_t flags, const std::string& body, uint32_t seq, LinkTable* table) {
  std::string msg(sizeof(nlmsghdr), '\0');
  msg += body;
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(msg.size());
  h.nlmsg_type = type;
  h.nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
  h.nlmsg_seq = seq;
  std::memcpy(&msg[0], &h, sizeof h);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    return ErrnoError("rtnetlink: send");
  }
  std::string buf(kDatagramBytes, '\0');
  bool done = false;
  while (!done) {
    // MSG_TRUNC: the datagram's whole length, to tell a cut one.
    ssize_t n = ::recv(fd, &buf[0], buf.size(), MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno == EAGAIN ? "rtnetlink: no answer" : "rtnetlink: receive");
    if (n == 0) return Error(Code::kUnavailable, "rtnetlink: socket closed");
    if (static_cast<size_t>(n) > buf.size()) return Error(Code::kInternal, "rtnetlink: answer larger than 64 KiB");
    OUTPOST_RETURN_IF_ERROR(ParseRtnl(buf.substr(0, static_cast<size_t>(n)), seq, table, &done));
  }
  return OkStatus();
}

// A NETLINK_ROUTE socket of the agent's own namespace (netns "") or of the
// namespace pinned at netns.
Result<UniqueFd> RouteSocket(const std::string& netns) {
  UniqueFd fd;
  if (netns.empty()) {
    int s = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (s < 0) return ErrnoError("rtnetlink: socket");
    fd = UniqueFd(s);
  } else {
    auto in = SocketInNetns(netns, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    if (!in.ok()) return in.error();
    fd = std::move(*in);
  }
  timeval tv{kReplyTimeoutMs / 1000, (kReplyTimeoutMs % 1000) * 1000};
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) return ErrnoError("rtnetlink: timeout");
  return fd;
}

// The host-side links of the result, by name (the host may have thousands).
Status ReadHostLinks(const CniResult& r, LinkTable* host) {
  auto fd = RouteSocket("");
  if (!fd.ok()) return fd.error();
  uint32_t seq = 1;
  for (const CniInterface& i : r.interfaces) {
    if (!i.sandbox.empty() || i.name.empty() || i.name.size() >= IFNAMSIZ || host->Find(i.name)) continue;
    std::string body(Align4(sizeof(ifinfomsg)), '\0');
    ifinfomsg ifi{};
    ifi.ifi_family = AF_UNSPEC;
    std::memcpy(&body[0], &ifi, sizeof ifi);
    rtattr a{};
    a.rta_len = static_cast<unsigned short>(sizeof(rtattr) + i.name.size() + 1);
    a.rta_type = IFLA_IFNAME;
    std::string attr(sizeof a, '\0');
    std::memcpy(&attr[0], &a, sizeof a);
    attr += i.name;
    attr.push_back('\0');
    attr.resize(Align4(attr.size()), '\0');
    Status st = Request(fd->get(), RTM_GETLINK, NLM_F_ACK, body + attr, ++seq, host);
    if (!st.ok() && st.error().code() != Code::kNotFound) return st.error().Wrap("host interface " + i.name);
  }
  return OkStatus();
}

Status ReadInside(const std::string& netns, LinkTable* inside) {
  auto fd = RouteSocket(netns);
  if (!fd.ok()) return fd.error();
  std::string link(Align4(sizeof(ifinfomsg)), '\0');
  OUTPOST_RETURN_IF_ERROR(Request(fd->get(), RTM_GETLINK, NLM_F_DUMP, link, 1, inside));
  std::string addr(Align4(sizeof(ifaddrmsg)), '\0');
  return Request(fd->get(), RTM_GETADDR, NLM_F_DUMP, addr, 2, inside);
}

}  // namespace

const LinkInfo* LinkTable::Find(const std::string& name) const {
  for (const LinkInfo& l : links) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

Status ParseRtnl(const std::string& bytes, uint32_t seq, LinkTable* table, bool* done) {
  size_t off = 0;
  while (off + sizeof(nlmsghdr) <= bytes.size()) {
    nlmsghdr h = Load<nlmsghdr>(bytes, off);
    if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > bytes.size() - off) {
      return Error(Code::kInvalidArgument, Format("rtnetlink: message at byte %zu overruns the answer", off));
    }
    size_t body = off + sizeof(nlmsghdr), end = off + h.nlmsg_len;
    off += Align4(h.nlmsg_len);
    if (h.nlmsg_seq != seq) continue;  // a late answer to an earlier request
    if (h.nlmsg_type == NLMSG_DONE) {
      *done = true;
    } else if (h.nlmsg_type == NLMSG_ERROR) {
      *done = true;
      if (body + sizeof(int32_t) > end) return Error(Code::kInvalidArgument, "rtnetlink: short NLMSG_ERROR");
      // The kernel sends -errno; anything else (INT32_MIN cannot even be
      // negated) is named as it came.
      int64_t err = -static_cast<int64_t>(Load<int32_t>(bytes, body));
      if (err == ENODEV) return Error(Code::kNotFound, "no such interface");
      if (err > 0 && err < 4096) return ErrnoError("rtnetlink", static_cast<int>(err));
      if (err != 0) return Error(Code::kInternal, Format("rtnetlink: error code %lld", static_cast<long long>(-err)));
    } else if (h.nlmsg_type == RTM_NEWLINK) {
      OUTPOST_RETURN_IF_ERROR(ParseLink(bytes, body, end, table));
    } else if (h.nlmsg_type == RTM_NEWADDR) {
      OUTPOST_RETURN_IF_ERROR(ParseAddr(bytes, body, end, table));
    }
  }
  return OkStatus();
}

std::string CanonicalCidr(const std::string& s) {
  size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('\0') != std::string::npos) return "";
  std::string ip = s.substr(0, slash);
  unsigned char raw[16];
  int family = ::inet_pton(AF_INET, ip.c_str(), raw) == 1 ? AF_INET
               : ::inet_pton(AF_INET6, ip.c_str(), raw) == 1 ? AF_INET6 : 0;
  if (family == 0) return "";
  auto prefix = ParseInt(std::string_view(s).substr(slash + 1), 0, family == AF_INET ? 32 : 128);
  if (!prefix.ok()) return "";
  char text[INET6_ADDRSTRLEN];
  if (::inet_ntop(family, raw, text, sizeof text) == nullptr) return "";
  return Format("%s/%lld", text, static_cast<long long>(*prefix));
}

std::vector<std::string> AttachmentProblems(const CniResult& r, const std::string& netns, const LinkTable& host,
                                            const LinkTable& inside) {
  std::vector<std::string> out;
  std::vector<const LinkInfo*> bridges, veths;
  for (const CniInterface& i : r.interfaces) {
    bool in_ns = !i.sandbox.empty();
    const LinkInfo* l = (in_ns ? inside : host).Find(i.name);
    std::string what = in_ns ? i.name + " in " + netns : "host interface " + i.name;
    if (l == nullptr) {
      out.push_back(in_ns ? i.name + " is not in " + netns : what + " is gone");
      continue;
    }
    if (!(l->flags & IFF_UP)) out.push_back(what + " is down");
    if (!in_ns && l->kind == "bridge") bridges.push_back(l);
    if (!in_ns && l->kind == "veth") veths.push_back(l);
  }
  for (const LinkInfo* v : veths) {
    if (bridges.empty()) break;
    bool on = false;
    for (const LinkInfo* b : bridges) on = on || v->master == b->index;
    if (!on) out.push_back("host interface " + v->name + " is not on bridge " + bridges.front()->name);
  }
  for (const CniIp& ip : r.ips) {
    std::string want = CanonicalCidr(ip.address);
    bool indexed = ip.interface >= 0 && static_cast<size_t>(ip.interface) < r.interfaces.size();
    if (indexed && r.interfaces[ip.interface].sandbox.empty()) continue;  // the host's own: not the job's
    const LinkInfo* l = indexed ? inside.Find(r.interfaces[ip.interface].name) : nullptr;
    if (indexed && l == nullptr) continue;  // said above
    bool found = false;
    for (const AddrInfo& a : inside.addrs) found = found || (a.address == want && (!l || a.index == l->index));
    if (found) continue;
    out.push_back(l ? l->name + " in " + netns + " lacks " + ip.address : netns + " lacks " + ip.address);
  }
  return out;
}

Result<std::vector<std::string>> InspectAttachment(const CniResult& r, const std::string& netns) {
  LinkTable host, inside;
  Status st = ReadHostLinks(r, &host);
  if (!st.ok()) return st.error();
  st = ReadInside(netns, &inside);
  if (!st.ok()) return st.error().Wrap("network namespace " + netns);
  return AttachmentProblems(r, netns, host, inside);
}

}  // namespace outpost::net
