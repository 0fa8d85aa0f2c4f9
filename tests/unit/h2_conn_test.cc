// wire/h2_conn at the frame level: a Conn (server or client) on one end of a
// socketpair, a raw peer writing hand-made frames on the other. Every rule
// of RFC 9113 the connection enforces, and how it sends.
#include "wire/h2_conn.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>

#include "base/log.h"
#include "h2_test_util.h"
#include "test_util.h"

namespace outpost::wire::h2 {
namespace {

using h2test::Be32;
using h2test::RawFrame;
using h2test::RawPeer;
using h2test::Setting;
using outpost::testing::RunUntil;

struct Event {
  Event(std::string w, uint32_t s) : what(std::move(w)), stream(s) {}
  std::string what;  // headers, data, reset, writable, goaway
  uint32_t stream = 0;
  std::string data;
  bool end = false;
  bool initial = false;
  uint32_t code = 0;
  bool local = false;
  hpack::HeaderList headers;
};

class Recorder : public Handler {
 public:
  void OnHeaders(uint32_t stream, hpack::HeaderList* headers, bool initial, bool end_stream) override {
    Event e{"headers", stream};
    e.initial = initial;
    e.end = end_stream;
    e.headers = *headers;
    events.push_back(e);
    if (on_headers) on_headers(stream);
  }
  void OnData(uint32_t stream, std::string_view data, bool end_stream) override {
    Event e{"data", stream};
    e.data = std::string(data);
    e.end = end_stream;
    events.push_back(e);
    received[stream] += data;
  }
  void OnStreamReset(uint32_t stream, uint32_t code, bool local) override {
    Event e{"reset", stream};
    e.code = code;
    e.local = local;
    events.push_back(e);
  }
  void OnStreamWritable(uint32_t stream) override { events.push_back(Event{"writable", stream}); }
  void OnGoaway(uint32_t last, uint32_t code, std::string_view) override {
    Event e{"goaway", last};
    e.code = code;
    events.push_back(e);
  }
  void OnClosed(const Error& why) override {
    closed = true;
    close_reason = why.message();
  }
  int Count(const std::string& what) const {
    int n = 0;
    for (const auto& e : events) n += e.what == what;
    return n;
  }
  const Event* Last(const std::string& what) const {
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
      if (it->what == what) return &*it;
    }
    return nullptr;
  }

  std::vector<Event> events;
  std::map<uint32_t, std::string> received;
  std::function<void(uint32_t)> on_headers;
  bool closed = false;
  std::string close_reason;
};

class H2ConnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = outpost::testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
  }
  void TearDown() override {
    conn_.reset();
    log::SetLevel(log::Level::kInfo);
  }

  // A server Conn; the peer has sent its preface and SETTINGS and read the
  // server's SETTINGS (*settings) and the connection WINDOW_UPDATE.
  void StartServer(ConnOptions o = {}, std::string_view client_settings = {}) {
    UniqueFd other;
    ASSERT_TRUE(peer_.Open(&other));
    o.client = false;
    auto c = Conn::Create(loop_.get(), std::move(other), o, &rec_);
    ASSERT_TRUE(c.ok()) << c.error().message();
    conn_ = std::move(*c);
    RawFrame f;
    ASSERT_TRUE(peer_.Next(loop_.get(), &f));
    ASSERT_EQ(f.type, kSettings);
    server_settings_ = f.payload;
    if (o.connection_window > kDefaultWindow) {
      ASSERT_TRUE(peer_.Next(loop_.get(), &f));
      ASSERT_EQ(f.type, kWindowUpdate);
      EXPECT_EQ(f.u32(), o.connection_window - kDefaultWindow);
    }
    peer_.SendClientStart(client_settings);
    ASSERT_TRUE(peer_.Next(loop_.get(), &f));
    ASSERT_EQ(f.type, kSettings);
    ASSERT_EQ(f.flags, kFlagAck);
  }

  // Expects the connection to end with GOAWAY(code).
  void ExpectGoaway(uint32_t code) {
    RawFrame f;
    ASSERT_TRUE(peer_.NextOfType(loop_.get(), kGoaway, &f)) << "no GOAWAY";
    EXPECT_EQ(f.code(), code) << ErrorCodeName(f.code()) << " " << f.payload.substr(8);
    EXPECT_TRUE(peer_.WaitClosed(loop_.get()));
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return rec_.closed; }));
  }
  void ExpectRst(uint32_t stream, uint32_t code) {
    RawFrame f;
    ASSERT_TRUE(peer_.NextOfType(loop_.get(), kRstStream, &f)) << "no RST_STREAM";
    EXPECT_EQ(f.stream, stream);
    EXPECT_EQ(f.code(), code) << ErrorCodeName(f.code());
  }
  // The connection still answers: a PING comes back.
  void ExpectAlive() {
    peer_.SendFrame(kPing, 0, 0, "alive?!!");
    RawFrame f;
    ASSERT_TRUE(peer_.NextOfType(loop_.get(), kPing, &f));
    EXPECT_EQ(f.payload, "alive?!!");
    EXPECT_FALSE(rec_.closed);
  }
  void OpenStream(uint32_t id, bool end = false) {
    peer_.SendHeaders(id, h2test::RequestHeaders("/s/m"), end);
    ASSERT_TRUE(RunUntil(loop_.get(), [&] {
      for (auto& e : rec_.events) {
        if (e.what == "headers" && e.stream == id) return true;
      }
      return false;
    }));
  }

  std::unique_ptr<Loop> loop_;
  RawPeer peer_;
  Recorder rec_;
  std::unique_ptr<Conn> conn_;
  std::string server_settings_;
};

TEST_F(H2ConnTest, ServerSendsItsSettingsFirstAndAcksThePeers) {
  ConnOptions o;
  o.max_concurrent_streams = 7;
  StartServer(o);
  // MAX_CONCURRENT_STREAMS 7, INITIAL_WINDOW_SIZE, MAX_HEADER_LIST_SIZE.
  EXPECT_NE(server_settings_.find(Setting(kSettingMaxConcurrentStreams, 7)), std::string::npos);
  EXPECT_NE(server_settings_.find(Setting(kSettingInitialWindowSize, o.stream_window)), std::string::npos);
  ExpectAlive();
}

TEST_F(H2ConnTest, ClientSendsPrefaceSettingsWithoutPushAndOpensOddStreams) {
  UniqueFd other;
  ASSERT_TRUE(peer_.Open(&other));
  ConnOptions o;
  o.client = true;
  auto c = Conn::Create(loop_.get(), std::move(other), o, &rec_);
  ASSERT_TRUE(c.ok());
  conn_ = std::move(*c);
  std::string got;
  ASSERT_TRUE(RunUntil(loop_.get(), [&] {
    char buf[256];
    ssize_t n = ::recv(peer_.fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    return got.size() >= 24 + 9;
  }));
  EXPECT_EQ(got.substr(0, 24), std::string(kClientPreface, 24));
  EXPECT_EQ(static_cast<uint8_t>(got[24 + 3]), kSettings);
  EXPECT_NE(got.find(Setting(kSettingEnablePush, 0)), std::string::npos);
  EXPECT_EQ(conn_->OpenStream(h2test::RequestHeaders("/a/b"), true), 1u);
  EXPECT_EQ(conn_->OpenStream(h2test::RequestHeaders("/a/b"), true), 3u);
}

TEST_F(H2ConnTest, ABadPrefaceIsAProtocolError) {
  UniqueFd other;
  ASSERT_TRUE(peer_.Open(&other));
  auto c = Conn::Create(loop_.get(), std::move(other), {}, &rec_);
  ASSERT_TRUE(c.ok());
  conn_ = std::move(*c);
  peer_.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, TheFirstFrameMustBeSettings) {
  UniqueFd other;
  ASSERT_TRUE(peer_.Open(&other));
  auto c = Conn::Create(loop_.get(), std::move(other), {}, &rec_);
  ASSERT_TRUE(c.ok());
  conn_ = std::move(*c);
  peer_.Send(std::string(kClientPreface, 24));
  peer_.SendFrame(kPing, 0, 0, "12345678");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, SettingsRules) {
  struct Case {
    uint8_t flags;
    uint32_t stream;
    std::string payload;
    uint32_t code;
  };
  const Case cases[] = {
      {0, 0, "12345", kFrameSizeError},                                    // not a multiple of 6
      {kFlagAck, 0, Setting(kSettingEnablePush, 0), kFrameSizeError},      // ACK with a payload
      {0, 1, Setting(kSettingEnablePush, 0), kProtocolError},              // on a stream
      {0, 0, Setting(kSettingEnablePush, 2), kProtocolError},              // ENABLE_PUSH out of range
      {0, 0, Setting(kSettingInitialWindowSize, 0x80000000u), kFlowControlError},
      {0, 0, Setting(kSettingMaxFrameSize, 16383), kProtocolError},
      {0, 0, Setting(kSettingMaxFrameSize, 16777216), kProtocolError},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ErrorCodeName(c.code));
    rec_ = Recorder();
    peer_ = RawPeer();
    StartServer();
    peer_.SendFrame(kSettings, c.flags, c.stream, c.payload);
    ExpectGoaway(c.code);
    conn_.reset();
  }
}

TEST_F(H2ConnTest, UnknownSettingsAndFrameTypesAreIgnored) {
  StartServer();
  peer_.SendFrame(kSettings, 0, 0, Setting(0xfe03, 1) + Setting(0x9, 1));
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kSettings, &f));
  EXPECT_EQ(f.flags, kFlagAck);
  peer_.SendFrame(0x0a, 0, 0, "altsvc");
  peer_.SendFrame(0xfa, 0xff, 3, "whatever");
  ExpectAlive();
}

TEST_F(H2ConnTest, PingIsEchoedAndItsAckIsNot) {
  StartServer();
  peer_.SendFrame(kPing, kFlagAck, 0, "ackackac");
  peer_.SendFrame(kPing, 0, 0, std::string("\x01\x06\x01\x08\x00\x03\x03\x09", 8));
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kPing, &f));
  EXPECT_EQ(f.flags, kFlagAck);
  EXPECT_EQ(f.payload, std::string("\x01\x06\x01\x08\x00\x03\x03\x09", 8));
  // Many pings in a row (keepalive, BDP) never close the connection.
  for (int i = 0; i < 50; ++i) peer_.SendFrame(kPing, 0, 0, "keepaliv");
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(peer_.NextOfType(loop_.get(), kPing, &f));
  ExpectAlive();
}

TEST_F(H2ConnTest, PingOfTheWrongSizeOrOnAStreamIsAnError) {
  StartServer();
  peer_.SendFrame(kPing, 0, 0, "1234567");
  ExpectGoaway(kFrameSizeError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  peer_.SendFrame(kPing, 0, 1, "12345678");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, AFrameOverTheMaximumSizeIsRefusedBeforeItsPayload) {
  StartServer();
  std::string header;
  AppendFrameHeader(&header, kMaxFrameSize + 1, kData, 0, 1);
  peer_.Send(header);  // no payload follows: the header alone is enough
  ExpectGoaway(kFrameSizeError);
}

TEST_F(H2ConnTest, HeadersSplitOverContinuations) {
  StartServer();
  std::string block = peer_.EncodeBlock(h2test::RequestHeaders("/pkg.Svc/Method", {{"x-long", std::string(40, 'v')}}));
  size_t third = block.size() / 3;
  peer_.SendFrame(kHeaders, kFlagEndStream, 1, block.substr(0, third));
  peer_.SendFrame(kContinuation, 0, 1, block.substr(third, third));
  peer_.SendFrame(kContinuation, kFlagEndHeaders, 1, block.substr(2 * third));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.Count("headers") == 1; }));
  const Event* e = rec_.Last("headers");
  EXPECT_TRUE(e->initial);
  EXPECT_TRUE(e->end);
  EXPECT_EQ(e->headers[2].value, "/pkg.Svc/Method");
  EXPECT_EQ(e->headers.back().value, std::string(40, 'v'));
}

TEST_F(H2ConnTest, AnotherFrameInsideAHeaderBlockIsAnError) {
  StartServer();
  std::string block = peer_.EncodeBlock(h2test::RequestHeaders("/a/b"));
  peer_.SendFrame(kHeaders, 0, 1, block.substr(0, 3));
  peer_.SendFrame(kPing, 0, 0, "12345678");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, ContinuationWithoutHeadersOrForAnotherStreamIsAnError) {
  StartServer();
  peer_.SendFrame(kContinuation, kFlagEndHeaders, 1, "\x82");
  ExpectGoaway(kProtocolError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  std::string block = peer_.EncodeBlock(h2test::RequestHeaders("/a/b"));
  peer_.SendFrame(kHeaders, 0, 1, block.substr(0, 3));
  peer_.SendFrame(kContinuation, kFlagEndHeaders, 3, block.substr(3));
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, StreamIdsMustBeOddAndIncreasing) {
  StartServer();
  peer_.SendHeaders(2, h2test::RequestHeaders("/a/b"), true);
  ExpectGoaway(kProtocolError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  OpenStream(5, true);
  peer_.SendHeaders(3, h2test::RequestHeaders("/a/b"), true);
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, MalformedRequestsAreResetWithProtocolError) {
  StartServer();
  const hpack::HeaderList bad[] = {
      {{":method", "POST"}, {"x", "1"}, {":path", "/a/b"}},           // pseudo after regular
      {{":method", "POST"}, {":path", "/a/b"}, {"X-Upper", "1"}},     // upper-case name
      {{":method", "POST"}, {":path", "/a/b"}, {"connection", "x"}},  // connection-specific
      {{":method", "POST"}, {":path", "/a/b"}, {"te", "gzip"}},       // te other than trailers
      {{":method", "POST"}, {":method", "POST"}},                     // duplicate pseudo
      {{":status", "200"}},                                           // response pseudo in a request
  };
  uint32_t id = 1;
  for (const auto& list : bad) {
    peer_.SendHeaders(id, list, true);
    ExpectRst(id, kProtocolError);
    id += 2;
  }
  EXPECT_EQ(rec_.Count("headers"), 0);
  ExpectAlive();
}

TEST_F(H2ConnTest, StreamsOverTheLimitAreRefused) {
  ConnOptions o;
  o.max_concurrent_streams = 2;
  StartServer(o);
  OpenStream(1);
  OpenStream(3);
  peer_.SendHeaders(5, h2test::RequestHeaders("/a/b"), false);
  ExpectRst(5, kRefusedStream);
  EXPECT_EQ(rec_.Count("headers"), 2);
  // Once one ends, a new one is taken.
  conn_->SendHeaders(1, {{":status", "200"}}, true);  // server ends its side: RST(NO_ERROR) follows
  ExpectRst(1, kNoError);
  OpenStream(7);
}

TEST_F(H2ConnTest, DataIsDeliveredWithoutPaddingAndCreditReturned) {
  ConnOptions o;
  o.stream_window = 4096;
  o.connection_window = 65535;
  StartServer(o);
  OpenStream(1);
  // Padded: pad length 3, "abc", 3 octets of padding.
  peer_.SendFrame(kData, kFlagPadded, 1, std::string("\x03", 1) + "abc" + std::string(3, '\0'));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.received[1] == "abc"; }));
  // A quarter of the stream window used (7 + 1100 > 1024) brings credit back.
  peer_.SendFrame(kData, 0, 1, std::string(1100, 'd'));
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kWindowUpdate, &f));
  EXPECT_EQ(f.stream, 1u);
  EXPECT_EQ(f.u32(), 7u + 1100u);
}

TEST_F(H2ConnTest, PaddingLongerThanTheFrameIsAnError) {
  StartServer();
  OpenStream(1);
  peer_.SendFrame(kData, kFlagPadded, 1, std::string("\x05", 1) + "abcd");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, DataOnStreamZeroOrAnIdleStreamIsAnError) {
  StartServer();
  peer_.SendFrame(kData, 0, 0, "x");
  ExpectGoaway(kProtocolError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  peer_.SendFrame(kData, 0, 9, "x");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, DataAfterEndStreamIsStreamClosed) {
  StartServer();
  OpenStream(1, true);
  peer_.SendFrame(kData, 0, 1, "late");
  ExpectRst(1, kStreamClosed);
  ExpectAlive();
}

TEST_F(H2ConnTest, OverrunningAStreamWindowResetsTheStream) {
  ConnOptions o;
  o.stream_window = 100;
  StartServer(o);
  OpenStream(1);
  peer_.SendFrame(kData, 0, 1, std::string(101, 'x'));
  ExpectRst(1, kFlowControlError);
  ExpectAlive();
}

TEST_F(H2ConnTest, WindowUpdateRules) {
  StartServer();
  peer_.SendFrame(kWindowUpdate, 0, 0, Be32(0));
  ExpectGoaway(kProtocolError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  peer_.SendFrame(kWindowUpdate, 0, 0, Be32(0x7fffffff));
  ExpectGoaway(kFlowControlError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  peer_.SendFrame(kWindowUpdate, 0, 0, "abc");
  ExpectGoaway(kFrameSizeError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  OpenStream(1);
  peer_.SendFrame(kWindowUpdate, 0, 1, Be32(0));
  ExpectRst(1, kProtocolError);
  OpenStream(3);
  peer_.SendFrame(kWindowUpdate, 0, 3, Be32(0x7fffffff));
  ExpectRst(3, kFlowControlError);
  ExpectAlive();
}

TEST_F(H2ConnTest, PriorityIsParsedAndIgnored) {
  StartServer();
  peer_.SendFrame(kPriority, 0, 3, std::string(5, '\0'));  // an idle stream: allowed
  std::string block = peer_.EncodeBlock(h2test::RequestHeaders("/a/b"));
  peer_.SendFrame(kHeaders, kFlagEndHeaders | kFlagPriority | kFlagPadded, 1,
                  std::string("\x02", 1) + std::string(5, '\0') + block + std::string(2, '\0'));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.Count("headers") == 1; }));
  peer_.SendFrame(kPriority, 0, 1, "1234");
  ExpectRst(1, kFrameSizeError);
  peer_.SendFrame(kPriority, 0, 0, std::string(5, '\0'));
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, RstStreamRules) {
  StartServer();
  OpenStream(1);
  peer_.SendFrame(kRstStream, 0, 1, Be32(kCancel));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.Count("reset") == 1; }));
  EXPECT_EQ(rec_.Last("reset")->code, kCancel);
  EXPECT_FALSE(rec_.Last("reset")->local);
  // Frames for the reset stream are ignored (its DATA still counts).
  peer_.SendFrame(kData, 0, 1, "late");
  ExpectAlive();
  peer_.SendFrame(kRstStream, 0, 1, "12");
  ExpectGoaway(kFrameSizeError);
  conn_.reset();
  rec_ = Recorder();
  peer_ = RawPeer();
  StartServer();
  peer_.SendFrame(kRstStream, 0, 7, Be32(kCancel));
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, PushPromiseIsAnError) {
  StartServer();
  peer_.SendFrame(kPushPromise, kFlagEndHeaders, 1, Be32(2) + "\x82");
  ExpectGoaway(kProtocolError);
}

TEST_F(H2ConnTest, AHeaderBlockHpackCannotDecodeIsACompressionError) {
  StartServer();
  peer_.SendFrame(kHeaders, kFlagEndHeaders, 1, "\x80");  // index 0
  ExpectGoaway(kCompressionError);
}

TEST_F(H2ConnTest, DataWaitsForTheWindowAndResumesExactlyOnUpdates) {
  StartServer({}, Setting(kSettingInitialWindowSize, 10));
  OpenStream(1);
  conn_->SendHeaders(1, {{":status", "200"}}, false);
  conn_->SendData(1, std::string(15, 'a'), std::string(10, 'b'), true);
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kData, &f));
  EXPECT_EQ(f.payload, std::string(10, 'a'));
  EXPECT_FALSE(f.flags & kFlagEndStream);
  EXPECT_EQ(conn_->StreamQueued(1), 15u);
  peer_.SendFrame(kWindowUpdate, 0, 1, Be32(5));
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kData, &f));
  EXPECT_EQ(f.payload, std::string(5, 'a'));
  // A lowered INITIAL_WINDOW_SIZE takes the window negative: nothing moves
  // until the updates bring it above zero again.
  peer_.SendFrame(kSettings, 0, 0, Setting(kSettingInitialWindowSize, 0));
  peer_.SendFrame(kWindowUpdate, 0, 1, Be32(10));  // -10 + 10 = 0
  ExpectAlive();
  EXPECT_EQ(conn_->StreamQueued(1), 10u);
  peer_.SendFrame(kWindowUpdate, 0, 1, Be32(100));
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kData, &f));
  EXPECT_EQ(f.payload, std::string(10, 'b'));
  EXPECT_TRUE(f.flags & kFlagEndStream);
}

TEST_F(H2ConnTest, TrailersWaitForStagedData) {
  StartServer({}, Setting(kSettingInitialWindowSize, 4));
  OpenStream(1, true);
  conn_->SendHeaders(1, {{":status", "200"}}, false);
  conn_->SendData(1, "abcdefgh", {}, false);
  conn_->SendHeaders(1, {{"grpc-status", "0"}}, true);
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kData, &f));
  EXPECT_EQ(f.payload, "abcd");
  peer_.SendFrame(kWindowUpdate, 0, 1, Be32(4));
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kData, &f));
  EXPECT_EQ(f.payload, "efgh");
  ASSERT_TRUE(peer_.Next(loop_.get(), &f));
  EXPECT_EQ(f.type, kHeaders);
  EXPECT_TRUE(f.flags & kFlagEndStream);
  EXPECT_EQ(f.header("grpc-status"), "0");
}

TEST_F(H2ConnTest, AStreamOverItsQueueLimitIsToldWhenItDrains) {
  ConnOptions o;
  o.stream_queue_bytes = 100;
  StartServer(o, Setting(kSettingInitialWindowSize, 0));
  OpenStream(1);
  conn_->SendHeaders(1, {{":status", "200"}}, false);
  EXPECT_TRUE(conn_->StreamWritable(1));
  conn_->SendData(1, std::string(150, 'x'), {}, false);
  EXPECT_FALSE(conn_->StreamWritable(1));
  peer_.SendFrame(kWindowUpdate, 0, 1, Be32(60));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.Count("writable") == 1; }));
  EXPECT_TRUE(conn_->StreamWritable(1));
}

TEST_F(H2ConnTest, LargeDataIsSentInFramesOfAtMost16KiB) {
  StartServer({}, Setting(kSettingInitialWindowSize, 1 << 20));
  peer_.SendFrame(kWindowUpdate, 0, 0, Be32(1 << 20));
  OpenStream(1);
  conn_->SendHeaders(1, {{":status", "200"}}, false);
  conn_->SendData(1, std::string(40000, 'x'), {}, true);
  size_t got = 0;
  RawFrame f;
  while (got < 40000) {
    ASSERT_TRUE(peer_.NextOfType(loop_.get(), kData, &f));
    EXPECT_LE(f.payload.size(), kMaxFrameSize);
    got += f.payload.size();
  }
  EXPECT_EQ(got, 40000u);
  EXPECT_TRUE(f.flags & kFlagEndStream);
}

TEST_F(H2ConnTest, GoawayLetsOpenStreamsFinishThenCloses) {
  StartServer();
  OpenStream(1);
  conn_->Goaway(kNoError, "drain");
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kGoaway, &f));
  EXPECT_EQ(f.u32() & 0x7fffffff, 1u);
  EXPECT_EQ(f.code(), kNoError);
  // A stream above the last one is refused.
  peer_.SendHeaders(3, h2test::RequestHeaders("/a/b"), true);
  ExpectRst(3, kRefusedStream);
  EXPECT_FALSE(rec_.closed);
  peer_.SendFrame(kData, kFlagEndStream, 1, "");
  conn_->SendHeaders(1, {{":status", "200"}}, true);
  EXPECT_TRUE(peer_.WaitClosed(loop_.get()));
  EXPECT_TRUE(rec_.closed);
}

TEST_F(H2ConnTest, ClientFailsStreamsAboveTheServersLastOnGoaway) {
  UniqueFd other;
  ASSERT_TRUE(peer_.Open(&other));
  ConnOptions o;
  o.client = true;
  auto c = Conn::Create(loop_.get(), std::move(other), o, &rec_);
  ASSERT_TRUE(c.ok());
  conn_ = std::move(*c);
  peer_.SendFrame(kSettings, 0, 0, "");
  EXPECT_EQ(conn_->OpenStream(h2test::RequestHeaders("/a/b"), true), 1u);
  EXPECT_EQ(conn_->OpenStream(h2test::RequestHeaders("/a/b"), true), 3u);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return true; }));
  peer_.SendFrame(kGoaway, 0, 0, Be32(1) + Be32(kNoError));
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.Count("goaway") == 1; }));
  ASSERT_EQ(rec_.Count("reset"), 1);
  EXPECT_EQ(rec_.Last("reset")->stream, 3u);
  EXPECT_EQ(rec_.Last("reset")->code, kRefusedStream);
  EXPECT_FALSE(conn_->can_open());
  EXPECT_EQ(conn_->OpenStream(h2test::RequestHeaders("/a/b"), true), 0u);
  // Stream 1 may still finish; then the connection closes.
  peer_.SendHeaders(1, {{":status", "200"}, {"grpc-status", "0"}}, true);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return rec_.closed; }));
}

TEST_F(H2ConnTest, AnIncompleteFrameTimesOut) {
  ConnOptions o;
  o.frame_timeout_nanos = 100 * kNanosPerMilli;
  StartServer(o);
  peer_.Send(h2test::Frame(kPing, 0, 0, "12345678").substr(0, 12));
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return rec_.closed; }));
  EXPECT_NE(rec_.close_reason.find("incomplete frame"), std::string::npos) << rec_.close_reason;
}

TEST_F(H2ConnTest, AnIdleConnectionIsClosedButOneWithAStreamIsNot) {
  ConnOptions o;
  o.idle_timeout_nanos = 100 * kNanosPerMilli;
  StartServer(o);
  OpenStream(1);
  // With a stream open the connection is not idle: wait three timeouts.
  int64_t until = MonotonicNanos() + 300 * kNanosPerMilli;
  RunUntil(loop_.get(), [&] { return rec_.closed || MonotonicNanos() > until; });
  EXPECT_FALSE(rec_.closed);
  peer_.SendFrame(kRstStream, 0, 1, Be32(kCancel));
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return rec_.closed; }));
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), kGoaway, &f));
  EXPECT_EQ(f.code(), kNoError);
}

TEST_F(H2ConnTest, APeerThatDoesNotReadStopsBeingReadThenIsClosed) {
  ConnOptions o;
  o.write_queue_bytes = 64 << 10;
  o.idle_timeout_nanos = 300 * kNanosPerMilli;
  StartServer(o);
  int buf = 4096;
  ASSERT_EQ(::setsockopt(peer_.fd(), SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf), 0);
  // Pings whose answers are never read: the agent stops reading once its
  // queue is over half the limit, so its memory stays bounded.
  std::string pings;
  for (int i = 0; i < 60000; ++i) pings += h2test::Frame(kPing, 0, 0, "pingping");
  size_t off = 0;
  ::fcntl(peer_.fd(), F_SETFL, O_NONBLOCK);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] {
    while (off < pings.size()) {
      ssize_t n = ::send(peer_.fd(), pings.data() + off, pings.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    EXPECT_LE(conn_ ? conn_->queued_bytes() : 0, size_t{64 << 10} + 17 * 1024);
    return rec_.closed;
  }));
  EXPECT_NE(rec_.close_reason.find("not reading"), std::string::npos) << rec_.close_reason;
  EXPECT_LT(off, pings.size());  // the agent stopped reading
}

}  // namespace
}  // namespace outpost::wire::h2
