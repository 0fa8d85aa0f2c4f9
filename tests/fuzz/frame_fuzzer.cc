// libFuzzer target for wire/frame + wire/codec: the input is cut into
// chunks (sizes taken from the input itself), fed to two FrameReaders (the
// real 4 MiB limit, and a tiny one so the oversize-skip path runs on small
// inputs) through both Feed() and Prepare()/Commit(), and every complete
// frame is decoded as a Request and as a Response. Invariants checked:
// payload length within the limit, buffered bytes bounded, and for every
// decodable envelope Decode(Encode(Decode(x))) == Decode(x).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "wire/codec.h"
#include "wire/frame.h"

namespace {

using outpost::wire::Frame;
using outpost::wire::FrameReader;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckRequest(std::string_view payload) {
  outpost::wire::Request req;
  if (!outpost::wire::DecodeRequest(payload, &req).ok()) return;
  std::string again = outpost::wire::Encode(req);
  Check(again.size() == outpost::wire::EncodedSize(req));
  outpost::wire::Request back;
  Check(outpost::wire::DecodeRequest(again, &back).ok());
  Check(back.service == req.service && back.method == req.method && back.payload == req.payload &&
        back.timeout_nano == req.timeout_nano && back.metadata.size() == req.metadata.size());
  for (size_t i = 0; i < req.metadata.size(); ++i) {
    Check(back.metadata[i].key == req.metadata[i].key && back.metadata[i].value == req.metadata[i].value);
  }
  Check(outpost::wire::Encode(back) == again);
}

void CheckResponse(std::string_view payload) {
  outpost::wire::Response resp;
  if (!outpost::wire::DecodeResponse(payload, &resp).ok()) return;
  std::string again = outpost::wire::Encode(resp);
  outpost::wire::Response back;
  Check(outpost::wire::DecodeResponse(again, &back).ok());
  Check(back.has_status == resp.has_status && back.code == resp.code && back.message == resp.message &&
        back.payload == resp.payload);
  (void)outpost::wire::ResponseToResult(back);
}

void Drain(FrameReader* r, uint32_t limit) {
  Frame f;
  for (;;) {
    FrameReader::Event ev = r->Next(&f);
    if (ev == FrameReader::Event::kNeedMore) break;
    if (ev == FrameReader::Event::kOversize) {
      Check(f.header.length > limit && f.payload.empty());
      continue;
    }
    Check(f.payload.size() == f.header.length && f.header.length <= limit);
    CheckRequest(f.payload);
    CheckResponse(f.payload);
  }
  Check(r->buffered() <= static_cast<size_t>(limit) + outpost::wire::kFrameHeaderSize + (64u << 10));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // First byte: chunking pattern. The rest: the byte stream.
  const uint8_t pattern = data[0];
  const uint8_t* p = data + 1;
  size_t left = size - 1;
  constexpr uint32_t kTinyLimit = 64;
  FrameReader big;
  FrameReader tiny(kTinyLimit);
  size_t i = 0;
  while (left > 0) {
    size_t chunk = 1 + ((pattern >> (i % 8)) & 1 ? (i * 7 + pattern) % 97 : (pattern % 13));
    if (chunk > left) chunk = left;
    big.Feed(p, chunk);
    // The tiny reader gets the same bytes through Prepare/Commit.
    size_t done = 0;
    while (done < chunk) {
      size_t avail;
      char* dst = tiny.Prepare(&avail);
      Check(avail > 0);
      size_t n = chunk - done < avail ? chunk - done : avail;
      std::memcpy(dst, p + done, n);
      tiny.Commit(n);
      done += n;
      Drain(&tiny, kTinyLimit);
    }
    Drain(&big, outpost::wire::kMaxFramePayload);
    p += chunk;
    left -= chunk;
    ++i;
  }
  return 0;
}
