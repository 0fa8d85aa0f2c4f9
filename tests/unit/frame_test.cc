// wire/frame and wire/codec: golden bytes written out by hand from the ttRPC
// wire format (containerd/ttrpc), incremental reassembly (byte by byte, split
// at every offset), truncation, oversize frames, random input and malformed
// protobuf.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/fd.h"
#include "wire/codec.h"
#include "wire/frame.h"

namespace outpost::wire {
namespace {

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

std::string RequestFrame(uint32_t id, const Request& req) {
  std::string out;
  EXPECT_TRUE(AppendRequestFrame(id, req, &out).ok());
  return out;
}

std::string ResponseFrame(uint32_t id, const Response& resp) {
  std::string out;
  EXPECT_TRUE(AppendResponseFrame(id, resp, &out).ok());
  return out;
}

// Feeds data to a reader in the given chunk sizes and collects every event.
struct Collected {
  std::vector<FrameHeader> headers;
  std::vector<std::string> payloads;
  std::vector<FrameReader::Event> events;
};

void Drain(FrameReader* r, Collected* c) {
  Frame f;
  for (;;) {
    FrameReader::Event e = r->Next(&f);
    if (e == FrameReader::Event::kNeedMore) return;
    c->events.push_back(e);
    c->headers.push_back(f.header);
    c->payloads.emplace_back(f.payload);
  }
}

TEST(FrameHeader, GoldenBigEndian) {
  FrameHeader h;
  h.length = 0x01020304;
  h.stream_id = 0x0a0b0c0d;
  h.type = 2;
  h.flags = 4;
  uint8_t out[kFrameHeaderSize];
  EncodeFrameHeader(h, out);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(out), sizeof out),
            Bytes({0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b, 0x0c, 0x0d, 0x02, 0x04}));
  FrameHeader back = DecodeFrameHeader(out);
  EXPECT_EQ(back.length, h.length);
  EXPECT_EQ(back.stream_id, h.stream_id);
  EXPECT_EQ(back.type, 2);
  EXPECT_EQ(back.flags, 4);
}

TEST(Codec, GoldenRequestFrame) {
  Request req;
  req.service = "a";
  req.method = "b";
  req.payload = "c";
  EXPECT_EQ(RequestFrame(1, req), Bytes({0x00, 0x00, 0x00, 0x09,  // length 9
                                         0x00, 0x00, 0x00, 0x01,  // stream 1
                                         0x01, 0x00,              // Request, no flags
                                         0x0a, 0x01, 'a',         // service
                                         0x12, 0x01, 'b',         // method
                                         0x1a, 0x01, 'c'}));      // payload
}

TEST(Codec, GoldenRequestWithTimeoutAndMetadata) {
  Request req;
  req.service = "s";
  req.method = "m";
  req.timeout_nano = 2000000000;  // 2 s
  req.metadata.push_back({"x", "y"});
  EXPECT_EQ(Encode(req), Bytes({0x0a, 0x01, 's', 0x12, 0x01, 'm',                 // no payload field: empty
                                0x20, 0x80, 0xa8, 0xd6, 0xb9, 0x07,               // timeout_nano varint
                                0x2a, 0x06, 0x0a, 0x01, 'x', 0x12, 0x01, 'y'}));  // KeyValue
}

TEST(Codec, GoldenResponses) {
  Response ok;
  ok.payload = "ok";
  EXPECT_EQ(ResponseFrame(3, ok), Bytes({0, 0, 0, 4, 0, 0, 0, 3, 0x02, 0x00, 0x12, 0x02, 'o', 'k'}));
  // Success with an empty payload: an empty body (status omitted).
  EXPECT_EQ(ResponseFrame(5, Response()), Bytes({0, 0, 0, 0, 0, 0, 0, 5, 0x02, 0x00}));
  Error err(Code::kUnimplemented, "service x");
  std::string expected = Bytes({0, 0, 0, 15, 0, 0, 0, 7, 0x02, 0x00,  //
                                0x0a, 13,                            // status, 13 bytes
                                0x08, 12,                            // code 12
                                0x12, 9}) +                          // message
                         "service x";
  EXPECT_EQ(ResponseFrame(7, ErrorResponse(err)), expected);
}

TEST(Codec, NegativeCodeIsTenByteVarint) {
  Response r;
  r.has_status = true;
  r.code = -1;
  EXPECT_EQ(Encode(r), Bytes({0x0a, 11, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  Response back;
  ASSERT_TRUE(DecodeResponse(Encode(r), &back).ok());
  EXPECT_EQ(back.code, -1);
}

TEST(Codec, RequestRoundTrip) {
  std::string big(70000, 'p');  // beyond the 16-bit pb_size_t limit of non-callback fields
  Request req;
  req.service = "nri.pkg.api.v1alpha1.Plugin";
  req.method = "CreateContainer";
  req.payload = big;
  req.timeout_nano = -5;
  req.metadata.push_back({"k1", "v1"});
  req.metadata.push_back({"", ""});
  std::string bytes = Encode(req);
  EXPECT_EQ(bytes.size(), EncodedSize(req));
  Request back;
  ASSERT_TRUE(DecodeRequest(bytes, &back).ok());
  EXPECT_EQ(back.service, req.service);
  EXPECT_EQ(back.method, req.method);
  EXPECT_EQ(back.payload, big);
  EXPECT_EQ(back.timeout_nano, -5);
  ASSERT_EQ(back.metadata.size(), 2u);
  EXPECT_EQ(back.metadata[0].key, "k1");
  EXPECT_EQ(back.metadata[0].value, "v1");
  EXPECT_EQ(back.metadata[1].key, "");
  // Zero-copy: the views point into the encoded bytes.
  EXPECT_GE(back.payload.data(), bytes.data());
  EXPECT_LE(back.payload.data() + back.payload.size(), bytes.data() + bytes.size());
  EXPECT_GE(back.metadata[0].key.data(), bytes.data());
  EXPECT_LE(back.metadata[0].key.data() + 2, bytes.data() + bytes.size());
}

TEST(Codec, RepeatedFieldsLastWinsAndStatusMerges) {
  const std::string req_body = Bytes({0x0a, 0x01, 'a', 0x0a, 0x01, 'b', 0x20, 0x01, 0x20, 0x02});
  Request req;
  ASSERT_TRUE(DecodeRequest(req_body, &req).ok());
  EXPECT_EQ(req.service, "b");
  EXPECT_EQ(req.timeout_nano, 2);
  // Two status fields merge: code from the first, message from the second.
  const std::string resp_body = Bytes({0x0a, 0x02, 0x08, 0x05, 0x0a, 0x03, 0x12, 0x01, 'm'});
  Response resp;
  ASSERT_TRUE(DecodeResponse(resp_body, &resp).ok());
  EXPECT_TRUE(resp.has_status);
  EXPECT_EQ(resp.code, 5);
  EXPECT_EQ(resp.message, "m");
}

TEST(Codec, ResponseMissingStatusIsOk) {
  Response back;
  const std::string body = Bytes({0x12, 0x01, 'z'});  // decoded views point into it
  ASSERT_TRUE(DecodeResponse(body, &back).ok());
  EXPECT_FALSE(back.has_status);
  auto r = ResponseToResult(back);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "z");
  ASSERT_TRUE(DecodeResponse("", &back).ok());
  EXPECT_TRUE(ResponseToResult(back).ok());
  // An empty status (code 0) is success too.
  ASSERT_TRUE(DecodeResponse(Bytes({0x0a, 0x00}), &back).ok());
  EXPECT_TRUE(back.has_status);
  EXPECT_TRUE(ResponseToResult(back).ok());
}

TEST(Codec, ErrorStatusBecomesError) {
  Response back;
  // Status with code 4, message "t", and a details entry (field 3) to skip.
  std::string body = Bytes({0x0a, 0x09, 0x08, 0x04, 0x12, 0x01, 't', 0x1a, 0x02, 0x0a, 0x00, 0x12, 0x01, 'p'});
  ASSERT_TRUE(DecodeResponse(body, &back).ok());
  auto r = ResponseToResult(back);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(r.error().message(), "t");
}

TEST(Codec, OkCodeErrorIsSentAsUnknown) {
  Error e(Code::kOk, "odd");
  Response r = ErrorResponse(e);
  EXPECT_EQ(r.code, static_cast<int32_t>(Code::kUnknown));
}

TEST(Codec, UnknownFieldsSkipped) {
  std::string body = Bytes({0x0a, 0x01, 'a',                    // service
                            0x30, 0x96, 0x01,                    // field 6 varint
                            0x39, 1, 2, 3, 4, 5, 6, 7, 8,        // field 7 fixed64
                            0x45, 1, 2, 3, 4,                    // field 8 fixed32
                            0x4a, 0x02, 'z', 'z',                // field 9 bytes
                            0x12, 0x01, 'b'});                   // method
  Request back;
  ASSERT_TRUE(DecodeRequest(body, &back).ok());
  EXPECT_EQ(back.service, "a");
  EXPECT_EQ(back.method, "b");
}

TEST(Codec, MalformedInputsFailCleanly) {
  // Reasons are nanopb's; the field is the one whose tag precedes the fault.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Bytes({0x0a}), "field 1: end-of-stream"},
      {Bytes({0x0a, 0x05, 'a'}), "field 1: parent stream too short"},
      {Bytes({0x0a, 0x80}), "field 1: end-of-stream"},
      {Bytes({0x08, 0x01}), "field 1: wrong wire type"},              // varint for a string
      {Bytes({0x0d, 1, 2, 3, 4}), "field 1: wrong wire type"},        // fixed32 for a string
      {Bytes({0x2d, 1, 2, 3, 4}), "field 5: wrong wire type"},        // fixed32 for a message
      {Bytes({0x20, 0x01, 0x02}), "Request: zero tag"},
      {Bytes({0x80}), "Request: end-of-stream"},
      {Bytes({0x00}), "Request: zero tag"},
      {Bytes({0x4b}), "field 9: invalid wire_type"},
      {Bytes({0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}), "field 4: varint overflow"},
      {Bytes({0x21, 1, 2, 3}), "field 4: wrong wire type"},
      {Bytes({0x0a, 0x01, 'a', 0x39, 1, 2, 3}), "field 7: end-of-stream"},
      {Bytes({0x2a, 0x02, 0x0a, 0x05}), "decode ttrpc.KeyValue field 1: parent stream too short"},
      {Bytes({0x2a, 0x02, 0x10, 0x01}), "decode ttrpc.KeyValue field 2: wrong wire type"},
  };
  for (const auto& c : cases) {
    Request back;
    Status st = DecodeRequest(c.first, &back);
    ASSERT_FALSE(st.ok()) << c.second;
    EXPECT_EQ(st.error().code(), Code::kInvalidArgument);
    EXPECT_NE(st.error().message().find(c.second), std::string::npos) << st.error().message();
    EXPECT_EQ(st.error().message().rfind("decode ttrpc.", 0), 0u) << st.error().message();
  }
  const std::vector<std::pair<std::string, std::string>> response_cases = {
      {Bytes({0x0a, 0x01, 0x08}), "decode google.rpc.Status field 1: end-of-stream"},
      {Bytes({0x0a, 0x02, 0x12, 0x05}), "decode google.rpc.Status field 2: parent stream too short"},
      {Bytes({0x0a, 0x02, 0x0a, 0x00}), "decode google.rpc.Status field 1: wrong wire type"},
      {Bytes({0x08, 0x01}), "decode ttrpc.Response field 1: wrong wire type"},
      {Bytes({0x12, 0x01, 'p', 0x10, 0x01}), "decode ttrpc.Response field 2: wrong wire type"},
  };
  for (const auto& c : response_cases) {
    Response resp;
    Status st = DecodeResponse(c.first, &resp);
    ASSERT_FALSE(st.ok()) << c.second;
    EXPECT_EQ(st.error().code(), Code::kInvalidArgument);
    EXPECT_EQ(st.error().message(), c.second);
  }
}

TEST(Codec, OversizeRequestRefused) {
  std::string payload(kMaxFramePayload, 'x');
  Request req;
  req.service = "s";
  req.payload = payload;
  std::string out = "keep";
  Status st = AppendRequestFrame(1, req, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(st.error().message(),
            "message length " + std::to_string(EncodedSize(req)) + " exceed maximum message size of 4194304");
  EXPECT_EQ(out, "keep");
}

// A stream of frames of assorted sizes, reassembled from chunks of every size.
std::string SampleStream(std::vector<std::string>* payloads) {
  std::string stream;
  for (size_t n : {0u, 1u, 9u, 10u, 11u, 300u, 20000u}) {
    std::string p(n, '\0');
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(i * 7 + n);
    payloads->push_back(p);
    AppendFrame(&stream, static_cast<uint32_t>(2 * payloads->size() - 1), FrameType::kRequest, 0, p);
  }
  return stream;
}

TEST(FrameReader, OneByteAtATime) {
  std::vector<std::string> payloads;
  std::string stream = SampleStream(&payloads);
  FrameReader r;
  Collected c;
  for (char ch : stream) {
    r.Feed(&ch, 1);
    Drain(&r, &c);
  }
  ASSERT_EQ(c.payloads, payloads);
  for (size_t i = 0; i < payloads.size(); ++i) EXPECT_EQ(c.headers[i].stream_id, 2 * i + 1);
  EXPECT_FALSE(r.MidFrame());
}

TEST(FrameReader, SplitAtEveryOffset) {
  std::vector<std::string> payloads;
  std::string stream = SampleStream(&payloads);
  stream.resize(stream.size() - 20000 - kFrameHeaderSize);  // keep the loop quick
  payloads.pop_back();
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameReader r;
    Collected c;
    r.Feed(stream.data(), cut);
    Drain(&r, &c);
    r.Feed(stream.data() + cut, stream.size() - cut);
    Drain(&r, &c);
    ASSERT_EQ(c.payloads, payloads) << "cut at " << cut;
  }
}

TEST(FrameReader, PrepareCommitPath) {
  std::vector<std::string> payloads;
  std::string stream = SampleStream(&payloads);
  FrameReader r;
  Collected c;
  size_t pos = 0;
  size_t step = 1;
  while (pos < stream.size()) {
    size_t avail;
    char* p = r.Prepare(&avail);
    ASSERT_GT(avail, 0u);
    size_t n = std::min({avail, step, stream.size() - pos});
    std::memcpy(p, stream.data() + pos, n);
    r.Commit(n);
    pos += n;
    step = step * 3 + 1;
    Drain(&r, &c);
  }
  EXPECT_EQ(c.payloads, payloads);
}

TEST(FrameReader, BufferGrowsWithReceivedBytesNotAnnouncedLength) {
  std::string frame;
  AppendFrame(&frame, 1, FrameType::kRequest, 0, std::string(kMaxFramePayload, 'g'));
  FrameReader r;
  size_t pos = 0;
  // Only the header: a claim of 4 MiB must not allocate 4 MiB.
  size_t avail;
  char* p = r.Prepare(&avail);
  std::memcpy(p, frame.data(), kFrameHeaderSize);
  r.Commit(kFrameHeaderSize);
  pos = kFrameHeaderSize;
  Frame f;
  EXPECT_EQ(r.Next(&f), FrameReader::Event::kNeedMore);
  p = r.Prepare(&avail);
  EXPECT_LE(r.capacity(), 64u << 10);
  while (pos < frame.size()) {
    size_t n = std::min(avail, frame.size() - pos);
    std::memcpy(p, frame.data() + pos, n);
    r.Commit(n);
    pos += n;
    if (pos < frame.size()) {
      ASSERT_EQ(r.Next(&f), FrameReader::Event::kNeedMore);
      p = r.Prepare(&avail);
      EXPECT_LE(r.capacity(), std::max<size_t>(2 * pos + (16 << 10), 32 << 10));
    }
  }
  ASSERT_EQ(r.Next(&f), FrameReader::Event::kFrame);
  EXPECT_EQ(f.payload.size(), kMaxFramePayload);
  EXPECT_LE(r.capacity(), 2 * frame.size());
}

TEST(FrameReader, TruncatedFrameIsNotDelivered) {
  std::string frame;
  AppendFrame(&frame, 1, FrameType::kRequest, 0, "hello");
  for (size_t n = 0; n < frame.size(); ++n) {
    FrameReader r;
    r.Feed(frame.data(), n);
    Frame f;
    EXPECT_EQ(r.Next(&f), FrameReader::Event::kNeedMore);
    EXPECT_EQ(r.MidFrame(), n > 0);
  }
}

TEST(FrameReader, ExactlyMaxIsAllowed) {
  std::string payload(kMaxFramePayload, 'm');
  std::string frame;
  AppendFrame(&frame, 9, FrameType::kRequest, 0, payload);
  FrameReader r;
  r.Feed(frame.data(), frame.size());
  Frame f;
  ASSERT_EQ(r.Next(&f), FrameReader::Event::kFrame);
  EXPECT_EQ(f.payload.size(), kMaxFramePayload);
  EXPECT_EQ(f.header.stream_id, 9u);
}

TEST(FrameReader, OversizeIsSkippedWithoutBuffering) {
  const uint32_t len = kMaxFramePayload + 1;
  uint8_t hdr[kFrameHeaderSize];
  FrameHeader h;
  h.length = len;
  h.stream_id = 11;
  h.type = 1;
  EncodeFrameHeader(h, hdr);
  FrameReader r;
  r.Feed(hdr, sizeof hdr);
  Frame f;
  EXPECT_EQ(r.Next(&f), FrameReader::Event::kNeedMore);
  EXPECT_TRUE(r.MidFrame());
  std::string chunk(8192, 'z');
  size_t sent = 0;
  while (sent + chunk.size() < len) {
    r.Feed(chunk.data(), chunk.size());
    sent += chunk.size();
    ASSERT_EQ(r.Next(&f), FrameReader::Event::kNeedMore);
    ASSERT_LE(r.capacity(), 64u << 10) << "oversize bytes must not be buffered";
  }
  // The rest of the oversize body and a normal frame in one chunk.
  std::string tail(len - sent, 'z');
  AppendFrame(&tail, 13, FrameType::kRequest, 0, "next");
  r.Feed(tail.data(), tail.size());
  ASSERT_EQ(r.Next(&f), FrameReader::Event::kOversize);
  EXPECT_EQ(f.header.stream_id, 11u);
  EXPECT_EQ(f.header.length, len);
  EXPECT_TRUE(f.payload.empty());
  ASSERT_EQ(r.Next(&f), FrameReader::Event::kFrame);
  EXPECT_EQ(f.payload, "next");
  EXPECT_EQ(f.header.stream_id, 13u);
  EXPECT_EQ(r.Next(&f), FrameReader::Event::kNeedMore);
  EXPECT_EQ(OversizeError(len).message(), "message length 4194305 exceed maximum message size of 4194304");
}

TEST(FrameReader, SmallLimit) {
  FrameReader r(4);
  std::string s;
  AppendFrame(&s, 1, FrameType::kRequest, 0, "12345");
  AppendFrame(&s, 3, FrameType::kRequest, 0, "1234");
  Collected c;
  for (char ch : s) {
    r.Feed(&ch, 1);
    Drain(&r, &c);
  }
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0], FrameReader::Event::kOversize);
  EXPECT_EQ(c.events[1], FrameReader::Event::kFrame);
  EXPECT_EQ(c.payloads[1], "1234");
}

TEST(FrameReader, RandomInputNeverOverflows) {
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    FrameReader r(1 << 16);
    std::string data(1 + rng() % 4096, '\0');
    for (char& ch : data) ch = static_cast<char>(rng());
    // Small lengths now and then so that some frames complete.
    if (round % 2) data[0] = data[1] = 0;
    size_t pos = 0;
    while (pos < data.size()) {
      size_t n = std::min<size_t>(1 + rng() % 64, data.size() - pos);
      r.Feed(data.data() + pos, n);
      pos += n;
      Frame f;
      FrameReader::Event e;
      while ((e = r.Next(&f)) != FrameReader::Event::kNeedMore) {
        if (e == FrameReader::Event::kFrame) {
          ASSERT_LE(f.payload.size(), 1u << 16);
          Request req;
          Response resp;
          (void)DecodeRequest(f.payload, &req);
          (void)DecodeResponse(f.payload, &resp);
        }
      }
      ASSERT_LE(r.buffered(), (1u << 16) + kFrameHeaderSize + 64);
    }
  }
}

TEST(WriteQueue, FlushesAcrossEagain) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
  UniqueFd a(sv[0]), b(sv[1]);
  WriteQueue q;
  std::string big(1 << 20, 'q');
  AppendFrame(q.buffer(), 1, FrameType::kResponse, 0, big);
  const size_t total = q.size();
  ASSERT_TRUE(q.Flush(a.get()));
  EXPECT_GT(q.size(), 0u) << "a socket buffer should not take 1 MiB at once";
  std::string got;
  char buf[65536];
  while (got.size() < total) {
    ssize_t n = ::read(b.get(), buf, sizeof buf);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    ASSERT_TRUE(q.Flush(a.get()));
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(got.substr(kFrameHeaderSize), big);
  b.Reset();
  AppendFrame(q.buffer(), 3, FrameType::kResponse, 0, "x");
  EXPECT_FALSE(q.Flush(a.get()));  // EPIPE, and no SIGPIPE
  EXPECT_EQ(errno, EPIPE);
}

}  // namespace
}  // namespace outpost::wire
