// libFuzzer target for the ttRPC envelope codec alone (wire/codec): the
// whole input is one protobuf body, decoded as a Request and as a Response.
// For every decodable input, re-encoding and decoding again must give the
// same message and the same bytes (the encoding is canonical), and the
// framed form must parse back through a FrameReader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "wire/codec.h"
#include "wire/frame.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace outpost::wire;
  std::string_view in(reinterpret_cast<const char*>(data), size);

  Request req;
  if (DecodeRequest(in, &req).ok()) {
    std::string enc = Encode(req);
    Check(enc.size() <= size + 16 * (req.metadata.size() + 1));  // canonical form is never much longer
    Request back;
    Check(DecodeRequest(enc, &back).ok());
    Check(Encode(back) == enc);
    std::string framed;
    Check(AppendRequestFrame(7, back, &framed).ok());
    FrameReader r;
    r.Feed(framed.data(), framed.size());
    Frame f;
    Check(r.Next(&f) == FrameReader::Event::kFrame);
    Check(f.header.stream_id == 7 && f.header.type == 1 && f.payload == enc);
  }

  Response resp;
  if (DecodeResponse(in, &resp).ok()) {
    std::string enc = Encode(resp);
    Response back;
    Check(DecodeResponse(enc, &back).ok());
    Check(Encode(back) == enc);
    auto result = ResponseToResult(back);
    Check(result.ok() == (!back.has_status || back.code == 0));
  }
  return 0;
}
