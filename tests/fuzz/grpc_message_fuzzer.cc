// libFuzzer target for wire/grpc_codec: the input (after byte 0, the
// chunking pattern and the message limit) is a DATA stream handed to a
// MessageReader in chunks. Invariants: the messages handed out, framed
// again, are exactly the bytes consumed; nothing over the limit is handed
// out or buffered; an error stops the reader. The same bytes also go
// through grpc-timeout, grpc-status and percent decoding, which never fail
// on anything and round-trip what they produce.
#include <cstddef>
#include <cstdint>
#include <string>

#include "wire/grpc_codec.h"

namespace {

using namespace outpost::wire::grpc;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t pattern = data[0];
  const size_t limit = size_t{1} << (pattern & 15);
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);

  MessageReader reader(limit);
  std::string reframed;
  size_t consumed = 0;
  bool failed = false;
  size_t i = 0;
  std::string_view rest = in;
  while (!rest.empty() && !failed) {
    size_t chunk = 1 + ((pattern >> (i % 4)) & 1 ? (i * 11 + pattern) % 61 : pattern % 7);
    if (chunk > rest.size()) chunk = rest.size();
    auto st = reader.Feed(rest.substr(0, chunk), "", [&](std::string_view m) {
      Check(m.size() <= limit);
      char p[kMessagePrefixBytes];
      MessagePrefix(m.size(), p);
      reframed.append(p, sizeof p).append(m);
      return true;
    });
    if (!st.ok()) {
      failed = true;
      break;
    }
    consumed += chunk;
    Check(reader.partial() <= limit + kMessagePrefixBytes);
    rest.remove_prefix(chunk);
    ++i;
  }
  if (!failed) {
    reframed.append(in.substr(consumed - reader.partial(), reader.partial()));
    Check(reframed == in.substr(0, consumed));
  }

  int64_t nanos = 0;
  if (ParseTimeout(in, &nanos)) {
    Check(nanos >= 0);
    if (nanos > 0 && nanos < (int64_t{1} << 60)) {
      int64_t back = 0;
      Check(ParseTimeout(EncodeTimeout(nanos), &back));
      Check(back >= nanos);
    }
  }
  int32_t code = 0;
  if (ParseStatus(in, &code)) Check(code >= 0 && std::to_string(code) == in);
  std::string decoded = PercentDecode(in);
  Check(decoded.size() <= in.size());
  Check(PercentDecode(PercentEncode(in)) == in);
  return 0;
}
