// Whether a job's network is still wired the way its cached ADD result
// says, looked at in the kernel (rtnetlink) rather than asked of the
// plugins: after an agent restart, CHECK cannot be trusted to tell (portmap
// 1.1.1's CHECK fails on every healthy attachment), and re-creating a
// network that is intact moves the job to a new address under its running
// tasks and drops their connections.
//
// "Intact" (AttachmentProblems):
//   - every interface the result puts in the job's namespace (a `sandbox`)
//     is there and up, with every address the result gives it;
//   - every host-side interface it names (the bridge, the host end of a
//     veth) is there and up, and where it names a bridge, the host-side
//     veths it names are ports of that bridge.
// Routes and the plugins' iptables rules are left to CHECK.
//
// Owns: the rtnetlink requests (links by name on the host, a dump of links
// and addresses inside the job's namespace, through a socket opened in it),
// decoding their answers (ParseRtnl: bytes from the kernel, decoded with
// every length checked all the same; tests/fuzz/netlink_fuzzer.cc), and the
// verdict. Synchronous and short: a few requests per job, at recovery only.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "net/cni_result.h"

namespace outpost::net {

struct LinkInfo {
  int index = 0;
  std::string name;
  unsigned flags = 0;  // IFF_*
  int master = 0;      // ifindex of the bridge (or bond) it is a port of; 0 = none
  std::string kind;    // IFLA_INFO_KIND: "veth", "bridge", ... ("" = none given)
};
struct AddrInfo {
  int index = 0;        // of the link it is on
  std::string address;  // "172.26.64.2/20", as inet_ntop writes it
};
// What one namespace has, as far as it was asked.
struct LinkTable {
  std::vector<LinkInfo> links;
  std::vector<AddrInfo> addrs;
  const LinkInfo* Find(const std::string& name) const;
};

// Appends what one datagram of rtnetlink answers holds (RTM_NEWLINK,
// RTM_NEWADDR; anything else is skipped) to *table. *done is set at
// NLMSG_DONE and at NLMSG_ERROR; an NLMSG_ERROR with an error returns it
// (ENODEV as NotFound). seq: only messages of that request count.
// Malformed bytes are InvalidArgument naming the offset.
Status ParseRtnl(const std::string& bytes, uint32_t seq, LinkTable* table, bool* done);

// "172.26.64.2/20" as AddrInfo writes it; "" when s is no address/prefix.
std::string CanonicalCidr(const std::string& s);

// What is not in place, one line each ("eth0 is not in /run/netns/x",
// "host interface veth1234 is not on bridge nomad"); empty = intact.
// host: the host-side interfaces the result names (links only); inside:
// the namespace's links and addresses.
std::vector<std::string> AttachmentProblems(const CniResult& result, const std::string& netns,
                                            const LinkTable& host, const LinkTable& inside);

// Reads both tables for result from the kernel and gives
// AttachmentProblems. An error means it could not look (no netlink socket,
// the namespace cannot be entered), not that the network is broken.
Result<std::vector<std::string>> InspectAttachment(const CniResult& result, const std::string& netns);

}  // namespace outpost::net
