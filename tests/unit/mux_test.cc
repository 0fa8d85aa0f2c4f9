// wire/mux: the NRI multiplexer against a raw peer on a socketpair (frame
// parsing, reassembly, dropping, the sending rule, closing, backpressure),
// and RpcClient/RpcServer running over its links.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "loop/loop.h"
#include "unit/rpc_test_util.h"
#include "unit/test_util.h"
#include "wire/codec.h"
#include "wire/frame.h"
#include "wire/mux.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::wire {
namespace {

using rpctest::RequestFrame;

std::string MuxFrame(uint32_t conn, std::string_view payload) {
  std::string out;
  for (uint32_t v : {conn, static_cast<uint32_t>(payload.size())}) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
  }
  out.append(payload.data(), payload.size());
  return out;
}

uint32_t Be32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// A ttRPC frame of exactly total bytes (header included).
std::string TtrpcFrame(uint32_t stream, size_t total) {
  std::string payload(total - kFrameHeaderSize, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
  std::string out;
  AppendFrame(&out, stream, FrameType::kData, 0, payload);
  return out;
}

// What a link received, reframed as ttRPC frames.
struct Sink {
  FrameReader reader;
  std::vector<std::string> frames;  // header + payload
  std::vector<std::string> closes;
  void Attach(const std::shared_ptr<ByteLink>& link, std::vector<std::string>* order = nullptr, int tag = 0) {
    link->SetReceiver(
        [this](std::string_view b) {
          reader.Feed(b.data(), b.size());
          Frame f;
          while (reader.Next(&f) == FrameReader::Event::kFrame) {
            std::string whole(kFrameHeaderSize, '\0');
            EncodeFrameHeader(f.header, reinterpret_cast<uint8_t*>(&whole[0]));
            frames.push_back(whole + std::string(f.payload));
          }
        },
        [this, order, tag](const Error& why) {
          closes.push_back(why.message());
          if (order) order->push_back("link" + std::to_string(tag));
        });
  }
};

class MuxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    local_.Reset(sv[0]);
    raw_.Reset(sv[1]);
  }
  void TearDown() override { log::SetLevel(log::Level::kInfo); }

  void MakeTrunk(MuxOptions opts = {}) {
    auto t = MuxTrunk::Create(loop_.get(), std::move(local_), std::move(opts));
    ASSERT_TRUE(t.ok()) << t.error().message();
    trunk_ = std::move(*t);
    trunk_->SetCloseCallback([this](const Error& why) {
      trunk_closes_.push_back(why);
      order_.push_back("trunk");
    });
  }
  bool RunUntil(const std::function<bool()>& pred) { return testing::RunUntil(loop_.get(), pred); }

  // Writes all of data to the raw end, letting the loop run meanwhile.
  void RawSend(const std::string& data) {
    size_t off = 0;
    ASSERT_TRUE(RunUntil([&] {
      while (off < data.size()) {
        ssize_t n = ::send(raw_.get(), data.data() + off, data.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
      }
      return true;
    }));
  }
  // The next count mux frames the trunk wrote: (conn id, payload).
  std::vector<std::pair<uint32_t, std::string>> RawFrames(size_t count) {
    std::vector<std::pair<uint32_t, std::string>> got;
    EXPECT_TRUE(RunUntil([&] {
      char buf[65536];
      ssize_t n;
      while ((n = ::recv(raw_.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0) raw_in_.append(buf, static_cast<size_t>(n));
      while (got.size() < count && raw_in_.size() >= kMuxHeaderSize) {
        uint32_t len = Be32(raw_in_, 4);
        if (raw_in_.size() < kMuxHeaderSize + len) break;
        got.emplace_back(Be32(raw_in_, 0), raw_in_.substr(kMuxHeaderSize, len));
        raw_in_.erase(0, kMuxHeaderSize + len);
      }
      return got.size() >= count;
    }));
    return got;
  }
  bool RawQuiet() {
    char c;
    return raw_in_.empty() && ::recv(raw_.get(), &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
  }

  std::unique_ptr<Loop> loop_;
  UniqueFd local_;
  UniqueFd raw_;
  std::string raw_in_;
  std::unique_ptr<MuxTrunk> trunk_;
  std::vector<Error> trunk_closes_;
  std::vector<std::string> order_;
};

// ---- receiving ------------------------------------------------------------------

TEST_F(MuxTest, ReassemblesAtEverySplitPoint) {
  MakeTrunk();
  Sink sink;
  sink.Attach(trunk_->Open(1));
  ASSERT_TRUE(trunk_->Start().ok());
  const std::string msg = RequestFrame(1, "nri.pkg.api.v1alpha1.Plugin", "Configure", std::string(300, 'x'));
  for (size_t k = 0; k <= msg.size(); ++k) {
    RawSend(MuxFrame(1, msg.substr(0, k)) + MuxFrame(1, msg.substr(k)));
    ASSERT_TRUE(RunUntil([&] { return sink.frames.size() == k + 1; })) << "split at " << k;
    ASSERT_EQ(sink.frames.back(), msg) << "split at " << k;
  }
  // Three pieces, each mux frame written a byte at a time (headers split too).
  const std::string stream = MuxFrame(1, msg.substr(0, 7)) + MuxFrame(1, msg.substr(7, 100)) + MuxFrame(1, msg.substr(107));
  for (char c : stream) {
    RawSend(std::string(1, c));
    ASSERT_TRUE(loop_->RunOnce(0).ok());
  }
  ASSERT_TRUE(RunUntil([&] { return sink.frames.size() == msg.size() + 2; }));
  EXPECT_EQ(sink.frames.back(), msg);
  EXPECT_EQ(trunk_->stats().dropped_frames, 0u);
  EXPECT_FALSE(trunk_->closed());
}

TEST_F(MuxTest, FramesForUnknownIdsAreDroppedAndTheStreamContinues) {
  MakeTrunk();
  Sink one;
  Sink two;
  one.Attach(trunk_->Open(1));
  two.Attach(trunk_->Open(2));
  ASSERT_TRUE(trunk_->Start().ok());
  const std::string a = RequestFrame(1, "s", "A", "payload-a");
  const std::string b = RequestFrame(3, "s", "B", std::string(5000, 'b'));
  RawSend(MuxFrame(1, a.substr(0, 5)) + MuxFrame(7, std::string(3000, 'z')) + MuxFrame(0, "zero") +
          MuxFrame(2, b.substr(0, 4096)) + MuxFrame(99, "") + MuxFrame(1, a.substr(5)) + MuxFrame(2, b.substr(4096)));
  ASSERT_TRUE(RunUntil([&] { return one.frames.size() == 1 && two.frames.size() == 1; }));
  EXPECT_EQ(one.frames[0], a);
  EXPECT_EQ(two.frames[0], b);
  MuxStats st = trunk_->stats();
  EXPECT_EQ(st.frames_in, 7u);
  EXPECT_EQ(st.dropped_frames, 3u);
  EXPECT_FALSE(trunk_->closed());
}

TEST_F(MuxTest, NothingIsReadBeforeStart) {
  MakeTrunk();
  Sink sink;
  sink.Attach(trunk_->Open(1));
  const std::string msg = RequestFrame(1, "s", "m", "early");
  RawSend(MuxFrame(1, msg));
  raw_.Reset();  // and the peer is gone before we start
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_TRUE(sink.frames.empty());
  EXPECT_TRUE(sink.closes.empty());
  ASSERT_TRUE(trunk_->Start().ok());
  ASSERT_TRUE(RunUntil([&] { return !sink.closes.empty(); }));
  ASSERT_EQ(sink.frames.size(), 1u);
  EXPECT_EQ(sink.frames[0], msg);
  EXPECT_NE(sink.closes[0].find("trunk closed by peer"), std::string::npos) << sink.closes[0];
}

TEST_F(MuxTest, ClosedMidFrameClosesLinksInOrderThenTheTrunk) {
  MakeTrunk();
  Sink one;
  Sink two;
  one.Attach(trunk_->Open(2), &order_, 2);  // opened out of order on purpose
  two.Attach(trunk_->Open(1), &order_, 1);
  ASSERT_TRUE(trunk_->Start().ok());
  RawSend(MuxFrame(1, std::string(100, 'q')).substr(0, kMuxHeaderSize + 10));
  raw_.Reset();
  ASSERT_TRUE(RunUntil([&] { return !trunk_closes_.empty(); }));
  ASSERT_EQ(order_, (std::vector<std::string>{"link1", "link2", "trunk"}));
  EXPECT_EQ(trunk_closes_[0].code(), Code::kUnavailable);
  EXPECT_NE(trunk_closes_[0].message().find("trunk closed mid-frame"), std::string::npos)
      << trunk_closes_[0].message();
  ASSERT_EQ(one.closes.size(), 1u);
  EXPECT_NE(one.closes[0].find("trunk closed mid-frame"), std::string::npos);
  EXPECT_TRUE(trunk_->closed());
  EXPECT_FALSE(trunk_->Open(1)->Send(TtrpcFrame(1, 20)));
  EXPECT_EQ(trunk_->fd(), -1);
}

TEST_F(MuxTest, OverLimitLengthClosesOnTheHeaderAlone) {
  MuxOptions opts;
  opts.max_frame = 1000;
  MakeTrunk(opts);
  Sink sink;
  sink.Attach(trunk_->Open(1));
  ASSERT_TRUE(trunk_->Start().ok());
  RawSend(MuxFrame(1, std::string(1000, 'k')));  // exactly the limit is fine
  ASSERT_TRUE(RunUntil([&] { return trunk_->stats().frames_in == 1; }));
  EXPECT_FALSE(trunk_->closed());
  // Only the header of a 1001-byte frame: the trunk closes without waiting
  // for (or making room for) the bytes.
  RawSend(MuxFrame(1, std::string(1001, 'k')).substr(0, kMuxHeaderSize));
  ASSERT_TRUE(RunUntil([&] { return !trunk_closes_.empty(); }));
  EXPECT_EQ(trunk_closes_[0].code(), Code::kResourceExhausted);
  EXPECT_NE(trunk_closes_[0].message().find("1001 bytes"), std::string::npos) << trunk_closes_[0].message();
  EXPECT_NE(trunk_closes_[0].message().find("over the limit"), std::string::npos);
  ASSERT_EQ(sink.closes.size(), 1u);
}

TEST_F(MuxTest, HugeAnnouncedLengthClosesWithDefaultLimit) {
  MakeTrunk();
  Sink sink;
  sink.Attach(trunk_->Open(1));
  ASSERT_TRUE(trunk_->Start().ok());
  RawSend(std::string("\0\0\0\x01\xff\xff\xff\xff", 8));
  ASSERT_TRUE(RunUntil([&] { return !trunk_closes_.empty(); }));
  EXPECT_NE(trunk_closes_[0].message().find("4294967295 bytes"), std::string::npos) << trunk_closes_[0].message();
}

// ---- sending --------------------------------------------------------------------

TEST_F(MuxTest, TenKiBMessageGoesOutAsTwoFrames) {
  MakeTrunk();
  auto link = trunk_->Open(2);
  const std::string msg = TtrpcFrame(1, 10 * 1024);
  ASSERT_TRUE(link->Send(msg));  // before Start: writing works already
  auto frames = RawFrames(2);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].first, 2u);
  EXPECT_EQ(frames[1].first, 2u);
  EXPECT_EQ(frames[0].second.size(), kMuxFirstFrameMax);
  EXPECT_EQ(frames[1].second.size(), 10 * 1024 - kMuxFirstFrameMax);
  EXPECT_EQ(frames[0].second + frames[1].second, msg);
  EXPECT_TRUE(RawQuiet());
  EXPECT_EQ(trunk_->stats().frames_out, 2u);
}

TEST_F(MuxTest, SmallMessagesNeverShareAFrame) {
  MakeTrunk();
  auto link = trunk_->Open(1);
  std::string batch;
  std::vector<std::string> msgs;
  for (int i = 0; i < 50; ++i) {
    msgs.push_back(TtrpcFrame(2 * i + 1, kFrameHeaderSize + static_cast<size_t>(i)));
    batch += msgs.back();
  }
  batch += TtrpcFrame(101, 4096);  // exactly 4096: one frame
  batch += TtrpcFrame(103, 4097);  // one byte more: two
  ASSERT_TRUE(link->Send(batch));
  auto frames = RawFrames(53);
  ASSERT_EQ(frames.size(), 53u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(frames[i].second, msgs[i]) << i;
  EXPECT_EQ(frames[50].second, TtrpcFrame(101, 4096));
  EXPECT_EQ(frames[51].second.size(), 4096u);
  EXPECT_EQ(frames[52].second.size(), 1u);
  for (auto& f : frames) EXPECT_EQ(f.first, 1u);
  EXPECT_TRUE(RawQuiet());
}

TEST_F(MuxTest, PeerNotReadingClosesAtMaxQueuedBytes) {
  MuxOptions opts;
  opts.max_queued_bytes = 256 << 10;
  MakeTrunk(opts);
  Sink sink;
  auto link = trunk_->Open(1);
  sink.Attach(link);
  ASSERT_TRUE(trunk_->Start().ok());
  const std::string msg = TtrpcFrame(1, 64 << 10);
  int sent = 0;
  while (sent < 1000 && link->Send(msg)) ++sent;
  ASSERT_LT(sent, 1000);
  EXPECT_GT(sent, 4);  // the socket buffer took some first
  EXPECT_TRUE(trunk_->closed());
  EXPECT_FALSE(link->Send(msg));
  EXPECT_TRUE(sink.closes.empty());  // never from inside Send
  ASSERT_TRUE(RunUntil([&] { return !trunk_closes_.empty(); }));
  EXPECT_EQ(trunk_closes_[0].code(), Code::kResourceExhausted);
  EXPECT_NE(trunk_closes_[0].message().find("not reading"), std::string::npos) << trunk_closes_[0].message();
  ASSERT_EQ(sink.closes.size(), 1u);
}

TEST_F(MuxTest, QueueDrainsThroughEpollout) {
  MakeTrunk();
  auto link = trunk_->Open(1);
  ASSERT_TRUE(trunk_->Start().ok());
  const std::string msg = TtrpcFrame(1, 64 << 10);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(link->Send(msg));
  EXPECT_GT(link->queued_bytes(), 0u);  // 2.5 MiB do not fit a socket buffer
  auto frames = RawFrames(80);
  ASSERT_EQ(frames.size(), 80u);
  for (size_t i = 0; i < 80; i += 2) EXPECT_EQ(frames[i].second + frames[i + 1].second, msg);
  EXPECT_EQ(trunk_->stats().queued_bytes, 0u);
}

TEST_F(MuxTest, LinksOutliveTheTrunkWithoutCallbacks) {
  MakeTrunk();
  Sink sink;
  auto link = trunk_->Open(1);
  sink.Attach(link);
  EXPECT_EQ(trunk_->Open(1), link);
  auto zero = trunk_->Open(0);
  EXPECT_FALSE(zero->Send(TtrpcFrame(1, 20)));
  ASSERT_TRUE(trunk_->Start().ok());
  trunk_.reset();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_FALSE(link->Send(TtrpcFrame(1, 20)));
  EXPECT_EQ(link->queued_bytes(), 0u);
  link->Close();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_TRUE(sink.closes.empty());
  EXPECT_TRUE(trunk_closes_.empty());
  char c;
  EXPECT_EQ(::recv(raw_.get(), &c, 1, 0), 0);  // the socket was closed
}

TEST_F(MuxTest, LinkCloseClosesTheTrunkAndNotifiesLater) {
  MakeTrunk();
  Sink one;
  Sink two;
  auto l1 = trunk_->Open(1);
  one.Attach(l1, &order_, 1);
  two.Attach(trunk_->Open(2), &order_, 2);
  ASSERT_TRUE(trunk_->Start().ok());
  l1->Close();
  EXPECT_TRUE(trunk_->closed());
  EXPECT_TRUE(order_.empty());
  ASSERT_TRUE(RunUntil([&] { return order_.size() == 3; }));
  EXPECT_EQ(order_, (std::vector<std::string>{"link1", "link2", "trunk"}));
  // A receiver set after the close still hears of it, once.
  Sink late;
  late.Attach(l1);
  ASSERT_TRUE(RunUntil([&] { return late.closes.size() == 1; }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop_->RunOnce(0).ok());
  EXPECT_EQ(late.closes.size(), 1u);
}

// ---- ttRPC over links -----------------------------------------------------------

// Two trunks on a socketpair, as an NRI runtime and a plugin: conn 1 carries
// runtime -> plugin calls, conn 2 plugin -> runtime calls.
class MuxRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    for (int i = 0; i < 2; ++i) {
      MuxOptions opts;
      opts.name = i == 0 ? "runtime" : "plugin";
      auto t = MuxTrunk::Create(loop_.get(), UniqueFd(sv[i]), opts);
      ASSERT_TRUE(t.ok());
      (i == 0 ? runtime_ : plugin_) = std::move(*t);
    }
    peer_ = sys::PeerCred{::getpid(), ::getuid(), ::getgid()};
  }
  void TearDown() override { log::SetLevel(log::Level::kInfo); }

  std::unique_ptr<RpcServer> Server(MuxTrunk* trunk, uint32_t conn, const std::string& service) {
    auto s = RpcServer::Create(loop_.get(), UniqueFd());
    EXPECT_TRUE(s.ok());
    std::unique_ptr<RpcServer> server = std::move(*s);
    server->Register(service, "Echo", [](const CallContext&, std::string_view p, Responder r) { r.Reply(p); });
    server->Register(service, "Later", [this](const CallContext&, std::string_view p, Responder r) {
      held_.push_back({std::string(p), r});
    });
    auto id = server->AddLink(trunk->Open(conn), peer_);
    EXPECT_TRUE(id.ok()) << id.error().message();
    return server;
  }
  std::unique_ptr<RpcClient> Client(MuxTrunk* trunk, uint32_t conn) {
    auto c = RpcClient::CreateOnLink(loop_.get(), trunk->Open(conn));
    EXPECT_TRUE(c.ok());
    return c.ok() ? std::move(*c) : nullptr;
  }
  bool RunUntil(const std::function<bool()>& pred) { return testing::RunUntil(loop_.get(), pred); }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<MuxTrunk> runtime_;
  std::unique_ptr<MuxTrunk> plugin_;
  sys::PeerCred peer_{};
  std::vector<std::pair<std::string, Responder>> held_;
};

TEST_F(MuxRpcTest, RoundTripOverConnection1) {
  auto server = Server(plugin_.get(), 1, "nri.pkg.api.v1alpha1.Plugin");
  auto client = Client(runtime_.get(), 1);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(plugin_->Start().ok());
  const std::string big(1 << 20, 'B');  // a 1 MiB reply: two mux frames each way
  std::vector<Result<std::string>> got;
  for (const std::string& p : {std::string("hello"), big, std::string()}) {
    client->Call("nri.pkg.api.v1alpha1.Plugin", "Echo", p, 2 * kNanosPerSecond,
                 [&](Result<std::string> r) { got.push_back(std::move(r)); });
  }
  client->Call("nri.pkg.api.v1alpha1.Plugin", "Nope", "", 0, [&](Result<std::string> r) { got.push_back(std::move(r)); });
  client->Call("nri.pkg.api.v1alpha1.Runtime", "Echo", "", 0, [&](Result<std::string> r) { got.push_back(std::move(r)); });
  ASSERT_TRUE(RunUntil([&] { return got.size() == 5; }));
  ASSERT_TRUE(got[0].ok());
  EXPECT_EQ(*got[0], "hello");
  ASSERT_TRUE(got[1].ok());
  EXPECT_EQ(*got[1], big);
  ASSERT_TRUE(got[2].ok());
  EXPECT_EQ(*got[2], "");
  EXPECT_EQ(got[3].error().code(), Code::kUnimplemented);
  EXPECT_EQ(got[3].error().message(), "method Nope");
  EXPECT_EQ(got[4].error().code(), Code::kUnimplemented);
  EXPECT_EQ(got[4].error().message(), "service nri.pkg.api.v1alpha1.Runtime");
  EXPECT_EQ(server->stats().calls, 3u);
  EXPECT_EQ(plugin_->stats().dropped_frames, 0u);
  // Each message went out as at most two frames.
  EXPECT_EQ(runtime_->stats().frames_out, 6u);
  EXPECT_EQ(plugin_->stats().frames_out, 6u);
}

TEST_F(MuxRpcTest, BothDirectionsAtOnce) {
  auto plugin_server = Server(plugin_.get(), 1, "nri.pkg.api.v1alpha1.Plugin");
  auto runtime_server = Server(runtime_.get(), 2, "nri.pkg.api.v1alpha1.Runtime");
  auto runtime_client = Client(runtime_.get(), 1);
  auto plugin_client = Client(plugin_.get(), 2);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(plugin_->Start().ok());
  int ok_down = 0;
  int ok_up = 0;
  for (int i = 0; i < 30; ++i) {
    std::string p = std::to_string(i) + std::string(static_cast<size_t>(i) * 700, 'p');
    runtime_client->Call("nri.pkg.api.v1alpha1.Plugin", "Echo", p, 0, [&ok_down, p](Result<std::string> r) {
      ok_down += r.ok() && *r == p;
    });
    plugin_client->Call("nri.pkg.api.v1alpha1.Runtime", "Echo", p, 0, [&ok_up, p](Result<std::string> r) {
      ok_up += r.ok() && *r == p;
    });
  }
  ASSERT_TRUE(RunUntil([&] { return ok_down == 30 && ok_up == 30; })) << ok_down << " " << ok_up;
  EXPECT_EQ(plugin_server->stats().calls, 30u);
  EXPECT_EQ(runtime_server->stats().calls, 30u);
}

TEST_F(MuxRpcTest, PeerGoneFailsPendingCallsAndRemovesConnections) {
  auto server = Server(runtime_.get(), 2, "nri.pkg.api.v1alpha1.Runtime");
  auto client = Client(runtime_.get(), 1);
  ASSERT_TRUE(runtime_->Start().ok());
  std::vector<std::string> events;
  client->SetCloseCallback([&](const Error& why) { events.push_back("client closed: " + why.message()); });
  client->Call("nri.pkg.api.v1alpha1.Plugin", "Configure", "", 0, [&](Result<std::string> r) {
    events.push_back(r.ok() ? "ok" : std::string(CodeName(r.error().code())));
  });
  EXPECT_EQ(server->connection_count(), 1u);
  ASSERT_TRUE(RunUntil([&] { return runtime_->stats().frames_out == 1; }));
  plugin_.reset();  // the plugin dies with a call in flight
  ASSERT_TRUE(RunUntil([&] { return events.size() == 2; }));
  EXPECT_EQ(events[0], std::string(CodeName(Code::kUnavailable)));
  // EOF, or a reset: the plugin left our request unread.
  EXPECT_EQ(events[1].rfind("client closed: runtime: trunk ", 0), 0u) << events[1];
  EXPECT_FALSE(client->connected());
  ASSERT_TRUE(RunUntil([&] { return server->connection_count() == 0; }));
  bool failed = false;
  client->Call("s", "m", "", 0, [&](Result<std::string> r) { failed = !r.ok(); });
  ASSERT_TRUE(RunUntil([&] { return failed; }));
}

TEST_F(MuxRpcTest, ClientRefusesOversizeAndServerAnswersLateReplies) {
  auto server = Server(plugin_.get(), 1, "svc");
  auto client = Client(runtime_.get(), 1);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(plugin_->Start().ok());
  std::vector<Result<std::string>> got;
  client->Call("svc", "Echo", std::string(kMaxFramePayload, 'x'), 0, [&](Result<std::string> r) { got.push_back(r); });
  client->Call("svc", "Later", "one", 0, [&](Result<std::string> r) { got.push_back(r); });
  client->Call("svc", "Later", "two", 0, [&](Result<std::string> r) { got.push_back(r); });
  ASSERT_TRUE(RunUntil([&] { return got.size() == 1 && held_.size() == 2; }));
  EXPECT_EQ(got[0].error().code(), Code::kResourceExhausted);
  EXPECT_EQ(runtime_->stats().frames_out, 2u);  // only the two small requests
  held_[1].second.Reply("second");  // out of order
  held_[0].second.Reply("first");
  ASSERT_TRUE(RunUntil([&] { return got.size() == 3; }));
  EXPECT_EQ(*got[1], "second");
  EXPECT_EQ(*got[2], "first");
}

TEST_F(MuxRpcTest, DestroyingAServerClosesItsTrunk) {
  auto server = Server(plugin_.get(), 1, "svc");
  auto client = Client(runtime_.get(), 1);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(plugin_->Start().ok());
  bool closed = false;
  client->SetCloseCallback([&](const Error&) { closed = true; });
  server.reset();
  EXPECT_TRUE(plugin_->closed());
  ASSERT_TRUE(RunUntil([&] { return closed; }));
}

TEST_F(MuxRpcTest, ReplyAfterTheTrunkClosedIsDropped) {
  auto server = Server(plugin_.get(), 1, "svc");
  auto client = Client(runtime_.get(), 1);
  ASSERT_TRUE(runtime_->Start().ok());
  ASSERT_TRUE(plugin_->Start().ok());
  std::vector<Result<std::string>> got;
  client->Call("svc", "Later", "x", 0, [&](Result<std::string> r) { got.push_back(r); });
  ASSERT_TRUE(RunUntil([&] { return held_.size() == 1; }));
  EXPECT_TRUE(held_[0].second.pending());
  plugin_->Close();
  ASSERT_TRUE(RunUntil([&] { return got.size() == 1 && server->connection_count() == 0; }));
  EXPECT_EQ(got[0].error().code(), Code::kUnavailable);
  EXPECT_FALSE(held_[0].second.pending());
  held_[0].second.Reply("too late");  // dropped, no crash
  EXPECT_EQ(plugin_->stats().frames_out, 0u);
}

TEST(MuxLinkPair, ClientAndServerOverAnInMemoryPair) {
  log::SetLevel(log::Level::kError);
  auto loop = testing::MakeLoop();
  ASSERT_NE(loop, nullptr);
  auto [a, b] = MakeLinkPair(loop.get());
  auto s = RpcServer::Create(loop.get(), UniqueFd());
  ASSERT_TRUE(s.ok());
  (*s)->Register("svc", "Echo", [](const CallContext&, std::string_view p, Responder r) { r.Reply(p); });
  ASSERT_TRUE((*s)->AddLink(b, sys::PeerCred{::getpid(), ::getuid(), ::getgid()}).ok());
  auto c = RpcClient::CreateOnLink(loop.get(), a);
  ASSERT_TRUE(c.ok());
  std::string reply;
  (*c)->Call("svc", "Echo", "ping", 0, [&](Result<std::string> r) { reply = r.ok() ? *r : "error"; });
  EXPECT_EQ(reply, "");  // never from inside Call
  ASSERT_TRUE(testing::RunUntil(loop.get(), [&] { return !reply.empty(); }));
  EXPECT_EQ(reply, "ping");
  (*c)->Close();  // closes the pair: the server drops its connection
  ASSERT_TRUE(testing::RunUntil(loop.get(), [&] { return (*s)->connection_count() == 0; }));
  EXPECT_FALSE(b->Send("x"));
  log::SetLevel(log::Level::kInfo);
}

TEST(MuxLinkPair, DisallowedPeerIsRefused) {
  auto loop = testing::MakeLoop();
  ASSERT_NE(loop, nullptr);
  log::SetLevel(log::Level::kError);
  auto [a, b] = MakeLinkPair(loop.get());
  ServerOptions opts;
  opts.allowed_uids = {0};
  auto s = RpcServer::Create(loop.get(), UniqueFd(), opts);
  ASSERT_TRUE(s.ok());
  auto id = (*s)->AddLink(b, sys::PeerCred{1, 4242, 4242});
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code(), Code::kPermissionDenied);
  log::SetLevel(log::Level::kInfo);
}

}  // namespace
}  // namespace outpost::wire
