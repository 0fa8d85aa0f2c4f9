// libFuzzer target: everything outpost reads from CNI plugins and from the
// CNI directories is untrusted bytes: ADD results (and the address picked
// from them), VERSION answers, error output, result cache entries and
// network configs. None of it may crash, hang or leak; a decoded cache entry
// must encode and decode back to the same entry, and base64 that decodes
// must be the canonical encoding of what it decodes to.
#include <cstddef>
#include <cstdint>
#include <string>

#include "net/cni_cache.h"
#include "net/cni_config.h"
#include "net/cni_result.h"

using namespace outpost::net;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);

  for (const char* version : {"", "0.4.0"}) {
    auto r = ParseCniResult(text, version);
    if (!r.ok()) continue;
    std::string ip, cidr;
    if (PickAddress(*r, &ip, &cidr).ok() && cidr.compare(0, ip.size(), ip) != 0) __builtin_trap();
    (void)r->raw.serialize();
  }
  (void)ParseVersionAnswer(text);
  // Split the input into stdout and stderr at the first NUL, as a plugin
  // could print anything on both.
  size_t nul = text.find('\0');
  CniError e = nul == std::string::npos ? ParseCniError(text, "")
                                         : ParseCniError(text.substr(0, nul), text.substr(nul + 1));
  if (DescribeCniError(e).empty()) __builtin_trap();
  (void)ParseCniError("", text);

  auto entry = DecodeCacheEntry(text);
  if (entry.ok()) {
    // The first encoding may still change picojson numbers ("-0.0" is
    // written "-0" and read back as the integer 0); the second is stable.
    auto again = DecodeCacheEntry(EncodeCacheEntry(*entry));
    if (!again.ok() || again->network != entry->network || again->container_id != entry->container_id ||
        again->ifname != entry->ifname || again->netns != entry->netns || again->config != entry->config ||
        again->cni_args != entry->cni_args || again->HasResult() != entry->HasResult()) {
      __builtin_trap();
    }
    std::string twice = EncodeCacheEntry(*again);
    auto third = DecodeCacheEntry(twice);
    if (!third.ok() || EncodeCacheEntry(*third) != twice) __builtin_trap();
  }
  auto bytes = Base64Decode(text);
  if (bytes.ok() && Base64Encode(*bytes) != text) __builtin_trap();

  for (bool conflist : {true, false}) {
    auto list = ParseNetworkList(text, conflist, "fuzz.conflist");
    if (list.ok() && (list->plugins.empty() || CompareVersions(list->cni_version, kMaxCniVersion) > 0)) {
      __builtin_trap();
    }
  }
  return 0;
}
