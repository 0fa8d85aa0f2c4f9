// libFuzzer target: rtnetlink answers as net/link_check decodes them (links
// and addresses of a job's namespace and of the host, read at recovery to
// tell an intact network from a broken one). The kernel writes them, but
// the decoder checks every length as if anyone had: nothing may crash or
// read past the bytes, every address it keeps is in canonical form, and the
// verdict over what it decoded runs to the end.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "net/cni_result.h"
#include "net/link_check.h"

using namespace outpost::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // The answers count for the request of the first message's sequence
  // number (bytes 8-11 of its header), as they do for a real request.
  uint32_t seq = 0;
  if (size >= 12) std::memcpy(&seq, data + 8, 4);
  LinkTable table;
  bool done = false;
  (void)ParseRtnl(bytes, seq, &table, &done);
  for (const AddrInfo& a : table.addrs) {
    if (CanonicalCidr(a.address) != a.address) __builtin_trap();
  }
  static const CniResult kResult = [] {
    auto r = ParseCniResult(
        "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"br0\"},{\"name\":\"veth0\"},"
        "{\"name\":\"eth0\",\"sandbox\":\"/n\"}],\"ips\":[{\"interface\":2,\"address\":\"10.0.0.2/24\"},"
        "{\"address\":\"fd00::2/64\"}]}",
        "1.0.0");
    return r.ok() ? *r : CniResult();
  }();
  (void)AttachmentProblems(kResult, "/n", table, table);
  (void)CanonicalCidr(bytes);
  return 0;
}
