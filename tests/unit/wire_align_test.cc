// wire/frame, wire/codec, wire/rpc_client (and the server they talk to) with
// the bytes at every alignment. Frame headers are 10 bytes, so in a read
// buffer a frame's header and envelope start at any offset; an access that
// assumes alignment (a cast of a byte pointer to a wider type, which the
// compiler may turn into LDRD/LDM/VLDR on ARMv7) faults with SIGBUS under
// qemu-arm and on ARM boards that do not fix alignment traps up, and is
// reported by UBSan's alignment check in the sanitized build. Every check
// here runs for each offset 0..15 from a 16-byte aligned address.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "test_util.h"
#include "wire/codec.h"
#include "wire/frame.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::wire {
namespace {

constexpr size_t kOffsets = 16;

// A buffer whose base() is 16-byte aligned, with room for `size` bytes at
// any offset below kOffsets.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t size) : raw_(size + 2 * kOffsets) {
    auto addr = reinterpret_cast<uintptr_t>(raw_.data());
    base_ = raw_.data() + (kOffsets - addr % kOffsets) % kOffsets;
  }
  char* base() { return base_; }
  // Copies bytes to base() + offset and returns a view of the copy.
  std::string_view Place(size_t offset, std::string_view bytes) {
    std::memcpy(base_ + offset, bytes.data(), bytes.size());
    return std::string_view(base_ + offset, bytes.size());
  }

 private:
  std::vector<char> raw_;
  char* base_;
};

// A Request that uses every field, with a timeout whose eight bytes all
// differ (a 64-bit value read or written at the wrong place shows).
struct SampleRequest {
  std::vector<MetadataEntry> metadata = {{"k1", "v1"}, {"", "empty key"}, {"k3", ""}};
  Request req;
  SampleRequest() {
    req.service = "containerd.task.v2.Task";
    req.method = "Start";
    req.payload = "\x0a\x03" "abc";
    req.timeout_nano = 0x0102030405060708;
    req.metadata = metadata;
  }
};

void ExpectSameRequest(const Request& got, const Request& want) {
  EXPECT_EQ(got.service, want.service);
  EXPECT_EQ(got.method, want.method);
  EXPECT_EQ(got.payload, want.payload);
  EXPECT_EQ(got.timeout_nano, want.timeout_nano);
  ASSERT_EQ(got.metadata.size(), want.metadata.size());
  for (size_t i = 0; i < got.metadata.size(); ++i) {
    EXPECT_EQ(got.metadata[i].key, want.metadata[i].key);
    EXPECT_EQ(got.metadata[i].value, want.metadata[i].value);
  }
}

TEST(WireAlign, FrameHeaderAtEveryOffset) {
  FrameHeader h;
  h.length = 0x01020304;
  h.stream_id = 0x0a0b0c0d;
  h.type = 2;
  h.flags = kFlagRemoteClosed;
  const std::string golden("\x01\x02\x03\x04\x0a\x0b\x0c\x0d\x02\x01", kFrameHeaderSize);
  AlignedBuffer buf(kFrameHeaderSize);
  for (size_t off = 0; off < kOffsets; ++off) {
    SCOPED_TRACE(off);
    auto* p = reinterpret_cast<uint8_t*>(buf.base() + off);
    EncodeFrameHeader(h, p);
    EXPECT_EQ(std::string(buf.base() + off, kFrameHeaderSize), golden);
    FrameHeader got = DecodeFrameHeader(p);
    EXPECT_EQ(got.length, h.length);
    EXPECT_EQ(got.stream_id, h.stream_id);
    EXPECT_EQ(got.type, h.type);
    EXPECT_EQ(got.flags, h.flags);
  }
}

TEST(WireAlign, RequestDecodesAtEveryOffset) {
  SampleRequest sample;
  const std::string bytes = Encode(sample.req);
  AlignedBuffer buf(bytes.size());
  Request got;  // reused, as the server does
  for (size_t off = 0; off < kOffsets; ++off) {
    SCOPED_TRACE(off);
    std::string_view placed = buf.Place(off, bytes);
    ASSERT_TRUE(DecodeRequest(placed, &got).ok());
    ExpectSameRequest(got, sample.req);
    // The views point into the placed bytes, not into a copy.
    EXPECT_GE(got.service.data(), placed.data());
    EXPECT_LE(got.payload.data() + got.payload.size(), placed.data() + placed.size());
  }
}

TEST(WireAlign, ResponseDecodesAtEveryOffset) {
  Response failed;
  failed.has_status = true;
  failed.code = -5;  // a ten-byte varint
  failed.message = "negative code";
  Response ok;
  ok.payload = std::string_view("\x00\x01\x02\x03\x04\x05\x06\x07\x08", 9);
  for (const Response& want : {failed, ok}) {
    const std::string bytes = Encode(want);
    AlignedBuffer buf(bytes.size());
    for (size_t off = 0; off < kOffsets; ++off) {
      SCOPED_TRACE(off);
      Response got;
      ASSERT_TRUE(DecodeResponse(buf.Place(off, bytes), &got).ok());
      EXPECT_EQ(got.has_status, want.has_status);
      EXPECT_EQ(got.code, want.code);
      EXPECT_EQ(got.message, want.message);
      EXPECT_EQ(got.payload, want.payload);
    }
  }
}

TEST(WireAlign, FramesAppendedAtEveryOffset) {
  SampleRequest sample;
  const std::string request = Encode(sample.req);
  Response resp;
  resp.payload = "reply";
  const std::string response = Encode(resp);
  for (size_t off = 0; off < kOffsets; ++off) {
    SCOPED_TRACE(off);
    std::string out(off, 'x');
    ASSERT_TRUE(AppendRequestFrame(7, sample.req, &out).ok());
    ASSERT_TRUE(AppendResponseFrame(9, resp, &out).ok());
    AppendFrame(&out, 11, FrameType::kData, kFlagNoData, "");
    ASSERT_EQ(out.size(), off + 3 * kFrameHeaderSize + request.size() + response.size());
    const auto* p = reinterpret_cast<const uint8_t*>(out.data() + off);
    FrameHeader h = DecodeFrameHeader(p);
    EXPECT_EQ(h.length, request.size());
    EXPECT_EQ(h.stream_id, 7u);
    EXPECT_EQ(h.type, static_cast<uint8_t>(FrameType::kRequest));
    EXPECT_EQ(out.substr(off + kFrameHeaderSize, request.size()), request);
    p += kFrameHeaderSize + request.size();
    h = DecodeFrameHeader(p);
    EXPECT_EQ(h.length, response.size());
    EXPECT_EQ(h.stream_id, 9u);
    EXPECT_EQ(h.type, static_cast<uint8_t>(FrameType::kResponse));
    p += kFrameHeaderSize + response.size();
    h = DecodeFrameHeader(p);
    EXPECT_EQ(h.length, 0u);
    EXPECT_EQ(h.stream_id, 11u);
    EXPECT_EQ(h.flags, kFlagNoData);
  }
}

// Response frames whose envelopes are 0..2*kOffsets bytes longer than the
// first, so that, back to back in a reader's buffer, they start at every
// offset. Stream ids are 1, 3, 5, ...; every other one is an error.
std::string ShiftingResponses(std::vector<Response>* sent, std::vector<std::string>* storage) {
  storage->clear();
  for (size_t i = 0; i < 2 * kOffsets; ++i) storage->push_back(std::string(i, static_cast<char>('a' + i % 26)));
  std::string stream;
  for (size_t i = 0; i < storage->size(); ++i) {
    Response r;
    if (i % 2 == 1) {
      r.has_status = true;
      r.code = static_cast<int32_t>(Code::kNotFound);
      r.message = (*storage)[i];
    } else {
      r.payload = (*storage)[i];
    }
    sent->push_back(r);
    EXPECT_TRUE(AppendResponseFrame(static_cast<uint32_t>(2 * i + 1), r, &stream).ok());
  }
  return stream;
}

TEST(WireAlign, FrameReaderAndDecodeAtEveryOffset) {
  std::vector<Response> sent;
  std::vector<std::string> storage;
  const std::string stream = ShiftingResponses(&sent, &storage);
  // Fed whole, then through Prepare/Commit in odd-sized pieces, after a
  // lead-in of 0..kOffsets-1 bytes of an earlier frame.
  for (size_t lead = 0; lead < kOffsets; ++lead) {
    for (bool prepare : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "lead " << lead << (prepare ? " prepare/commit" : " feed"));
      std::string input;
      AppendFrame(&input, 0, FrameType::kData, 0, std::string(lead, 'L'));
      input += stream;
      FrameReader reader;
      if (prepare) {
        for (size_t pos = 0, step = 1; pos < input.size(); step = step % 13 + 2) {
          size_t avail;
          char* p = reader.Prepare(&avail);
          size_t n = std::min({avail, step, input.size() - pos});
          std::memcpy(p, input.data() + pos, n);
          reader.Commit(n);
          pos += n;
        }
      } else {
        reader.Feed(input.data(), input.size());
      }
      Frame f;
      ASSERT_EQ(reader.Next(&f), FrameReader::Event::kFrame);
      EXPECT_EQ(f.header.type, static_cast<uint8_t>(FrameType::kData));
      for (size_t i = 0; i < sent.size(); ++i) {
        ASSERT_EQ(reader.Next(&f), FrameReader::Event::kFrame) << i;
        EXPECT_EQ(f.header.stream_id, 2 * i + 1);
        Response got;
        ASSERT_TRUE(DecodeResponse(f.payload, &got).ok());
        EXPECT_EQ(got.has_status, sent[i].has_status);
        EXPECT_EQ(got.code, sent[i].code);
        EXPECT_EQ(got.message, sent[i].message);
        EXPECT_EQ(got.payload, sent[i].payload);
      }
      EXPECT_EQ(reader.Next(&f), FrameReader::Event::kNeedMore);
    }
  }
}

// An RpcClient on a socketpair whose other end the test plays.
class WireAlignClient : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_ = testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    peer_.Reset(sv[1]);
    auto c = RpcClient::Create(loop_.get(), UniqueFd(sv[0]));
    ASSERT_TRUE(c.ok()) << c.error().message();
    client_ = std::move(*c);
  }

  // Sends all of data to the client, running the loop while the socket is full.
  void Send(const std::string& data) {
    size_t off = 0;
    ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] {
      while (off < data.size()) {
        ssize_t n = ::send(peer_.get(), data.data() + off, data.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
      }
      return true;
    }));
  }

  std::unique_ptr<Loop> loop_;
  UniqueFd peer_;
  std::unique_ptr<RpcClient> client_;
};

// The replies arrive in one burst, so the client's reader holds them at
// every offset; half the calls carry a deadline, one of which expires
// before its (then late and ignored) reply.
TEST_F(WireAlignClient, RepliesAtEveryOffsetWithDeadlines) {
  std::vector<Response> sent;
  std::vector<std::string> storage;
  const std::string replies = ShiftingResponses(&sent, &storage);
  std::vector<std::vector<Result<std::string>>> got(sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    int64_t timeout = i % 2 == 0 ? 60 * kNanosPerSecond : 0;
    client_->Call("s", "m", storage[i], timeout, [&got, i](Result<std::string> r) { got[i].push_back(std::move(r)); });
  }
  bool expired = false;
  client_->Call("s", "expires", "", 1, [&](Result<std::string> r) {
    expired = !r.ok() && r.error().code() == Code::kDeadlineExceeded;
  });
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return expired; }));
  std::string late;
  Response r;
  r.payload = "late";
  ASSERT_TRUE(AppendResponseFrame(static_cast<uint32_t>(2 * sent.size() + 1), r, &late).ok());
  Send(late + replies);
  ASSERT_TRUE(testing::RunUntil(loop_.get(), [&] { return client_->pending_calls() == 0; }));
  for (size_t i = 0; i < sent.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(got[i].size(), 1u);
    const Result<std::string>& res = got[i][0];
    if (sent[i].has_status) {
      ASSERT_FALSE(res.ok());
      EXPECT_EQ(res.error().code(), Code::kNotFound);
      EXPECT_EQ(res.error().message(), storage[i]);
    } else {
      ASSERT_TRUE(res.ok()) << res.error().message();
      EXPECT_EQ(*res, storage[i]);
    }
  }
  // The requests reached the peer intact, whatever their offsets there.
  FrameReader reader;
  char chunk[4096];
  ssize_t n;
  while ((n = ::recv(peer_.get(), chunk, sizeof chunk, MSG_DONTWAIT)) > 0) reader.Feed(chunk, static_cast<size_t>(n));
  Frame f;
  for (size_t i = 0; i <= sent.size(); ++i) {
    ASSERT_EQ(reader.Next(&f), FrameReader::Event::kFrame) << i;
    Request req;
    ASSERT_TRUE(DecodeRequest(f.payload, &req).ok());
    EXPECT_EQ(f.header.stream_id, 2 * i + 1);
    if (i < sent.size()) {
      EXPECT_EQ(req.payload, storage[i]);
      EXPECT_EQ(req.timeout_nano, i % 2 == 0 ? 60 * kNanosPerSecond : 0);
    } else {
      EXPECT_EQ(req.method, "expires");
      EXPECT_EQ(req.timeout_nano, 1);
    }
  }
}

// The BlockingClient's reader, skipping frames for other streams, finds its
// reply at every offset.
TEST(WireAlignBlocking, ReplyAtEveryOffset) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd peer(sv[1]);
  BlockingClient client{UniqueFd(sv[0])};
  for (uint32_t i = 0; i < kOffsets; ++i) {
    SCOPED_TRACE(i);
    const uint32_t stream = 2 * i + 1;
    const std::string skipped_payload(i, 's'), reply_payload(i + 1, 'r');
    std::string pre;
    Response skipped;
    skipped.payload = skipped_payload;
    ASSERT_TRUE(AppendResponseFrame(0x7ffffff1, skipped, &pre).ok());  // another call's
    Response reply;
    reply.payload = reply_payload;
    ASSERT_TRUE(AppendResponseFrame(stream, reply, &pre).ok());
    ASSERT_EQ(::send(peer.get(), pre.data(), pre.size(), MSG_NOSIGNAL), static_cast<ssize_t>(pre.size()));
    auto r = client.Call("s", "m", std::string(i, 'q'), 5 * kNanosPerSecond);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(*r, reply_payload);
    char drain[4096];
    while (::recv(peer.get(), drain, sizeof drain, MSG_DONTWAIT) > 0) {
    }
  }
}

// Client and server end to end: pipelined calls whose requests and replies
// sit at every offset on both sides, with deadlines that expire before the
// handler answers (the answer is then dropped). Expiry on either side copies
// the DeadlineExceeded message out of read-only data, which GCC for ARM
// does with LDM when it takes the literal to be word-aligned.
TEST(WireAlignEndToEnd, CallsAndServerDeadlinesAtEveryOffset) {
  auto loop = testing::MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto server = RpcServer::Create(loop.get(), UniqueFd());
  ASSERT_TRUE(server.ok()) << server.error().message();
  (*server)->Register("svc", "Echo", [](const CallContext&, std::string_view p, Responder r) { r.Reply(p); });
  std::vector<Responder> held;
  (*server)->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
  ASSERT_TRUE((*server)->AddConnection(UniqueFd(sv[1])).ok());
  auto client = RpcClient::Create(loop.get(), UniqueFd(sv[0]));
  ASSERT_TRUE(client.ok()) << client.error().message();
  size_t echoed = 0, expired = 0;
  std::vector<std::string> payloads;
  for (size_t i = 0; i < 2 * kOffsets; ++i) payloads.push_back(std::string(i, static_cast<char>('A' + i)));
  for (size_t i = 0; i < payloads.size(); ++i) {
    (*client)->Call("svc", "Echo", payloads[i], 60 * kNanosPerSecond, [&, i](Result<std::string> r) {
      echoed += r.ok() && *r == payloads[i];
    });
    // Never answered in time: the client's deadline or the server's (from
    // timeout_nano) fails the call, and the other side's answer is ignored.
    (*client)->Call("svc", "Hold", payloads[i], 20 * kNanosPerMilli, [&](Result<std::string> r) {
      expired += !r.ok() && r.error().code() == Code::kDeadlineExceeded;
    });
  }
  auto none_pending = [&] {
    return std::none_of(held.begin(), held.end(), [](const Responder& r) { return r.pending(); });
  };
  ASSERT_TRUE(testing::RunUntil(loop.get(), [&] {
    return echoed + expired == 2 * payloads.size() && held.size() == payloads.size() && none_pending();
  }));
  EXPECT_EQ(echoed, payloads.size());
  EXPECT_EQ(expired, payloads.size());
  for (const Responder& r : held) r.Reply("too late");
  (*client)->Call("svc", "Echo", "after", 0, [&](Result<std::string> r) { echoed += r.ok() && *r == "after"; });
  ASSERT_TRUE(testing::RunUntil(loop.get(), [&] { return echoed == payloads.size() + 1; }));
  EXPECT_EQ((*client)->pending_calls(), 0u);
}

}  // namespace
}  // namespace outpost::wire
