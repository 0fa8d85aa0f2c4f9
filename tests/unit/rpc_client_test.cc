// wire/rpc_client (RpcClient, BlockingClient) against a raw peer and against
// wire/rpc_server, on a real Loop over unix sockets (fixture in
// rpc_test_util.h).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "unit/rpc_test_util.h"
#include "wire/codec.h"
#include "wire/frame.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::wire {
namespace {

using rpctest::GotFrame;
using rpctest::kWait;
using rpctest::RpcTest;

// ---- RpcClient ------------------------------------------------------------------

class ClientTest : public RpcTest {
 protected:
  // An RpcClient on one end of a socketpair; the test plays server on raw_.
  void MakePair() {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    raw_.Reset(sv[1]);
    auto c = RpcClient::Create(loop_.get(), UniqueFd(sv[0]));
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  // Next request the client sent.
  bool NextRequest(uint32_t* stream, std::string* body) {
    return RunUntil([&] {
      Frame f;
      for (;;) {
        if (reader_.Next(&f) == FrameReader::Event::kFrame) {
          *stream = f.header.stream_id;
          *body = std::string(f.payload);
          return true;
        }
        size_t avail;
        char* p = reader_.Prepare(&avail);
        ssize_t n = ::recv(raw_.get(), p, avail, MSG_DONTWAIT);
        if (n <= 0) return false;
        reader_.Commit(static_cast<size_t>(n));
      }
    });
  }
  std::unique_ptr<RpcClient> client_;
  UniqueFd raw_;
  FrameReader reader_;
};

TEST_F(ClientTest, OddIncreasingIdsAndTimeoutSent) {
  MakePair();
  for (int i = 0; i < 3; ++i) client_->Call("s", "m", "p", (i + 1) * kNanosPerSecond, [](Result<std::string>) {});
  for (uint32_t i = 0; i < 3; ++i) {
    uint32_t stream;
    std::string body;
    ASSERT_TRUE(NextRequest(&stream, &body));
    EXPECT_EQ(stream, 2 * i + 1);
    Request req;
    ASSERT_TRUE(DecodeRequest(body, &req).ok());
    EXPECT_EQ(req.service, "s");
    EXPECT_EQ(req.method, "m");
    EXPECT_EQ(req.payload, "p");
    EXPECT_EQ(req.timeout_nano, static_cast<int64_t>(i + 1) * kNanosPerSecond);
  }
}

TEST_F(ClientTest, RepliesStatusesAndLocalDeadline) {
  MakePair();
  std::vector<Result<std::string>> got;
  auto keep = [&](Result<std::string> r) { got.push_back(std::move(r)); };
  client_->Call("s", "ok", "", 0, keep);
  client_->Call("s", "err", "", 0, keep);
  client_->Call("s", "slow", "", 50 * kNanosPerMilli, keep);
  std::string replies;
  Response ok;
  ok.payload = "fine";
  ASSERT_TRUE(AppendResponseFrame(1, ok, &replies).ok());
  Error e(Code::kNotFound, "no such job");
  ASSERT_TRUE(AppendResponseFrame(3, ErrorResponse(e), &replies).ok());
  RawSend(raw_.get(), replies);
  ASSERT_TRUE(RunUntil([&] { return got.size() == 3; }));
  ASSERT_TRUE(got[0].ok());
  EXPECT_EQ(*got[0], "fine");
  ASSERT_FALSE(got[1].ok());
  EXPECT_EQ(got[1].error().code(), Code::kNotFound);
  EXPECT_EQ(got[1].error().message(), "no such job");
  ASSERT_FALSE(got[2].ok());
  EXPECT_EQ(got[2].error().code(), Code::kDeadlineExceeded);
  // The late reply to the timed-out call is ignored.
  std::string late;
  ASSERT_TRUE(AppendResponseFrame(5, ok, &late).ok());
  RawSend(raw_.get(), late);
  Spin(3);
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(client_->pending_calls(), 0u);
}

TEST_F(ClientTest, PendingCallsFailWhenConnectionCloses) {
  MakePair();
  std::vector<Code> codes;
  bool closed = false;
  client_->SetCloseCallback([&](const Error& e) {
    EXPECT_EQ(codes.size(), 3u);  // calls fail first
    closed = e.code() == Code::kUnavailable;
  });
  for (int i = 0; i < 3; ++i) client_->Call("s", "m", "", 0, [&](Result<std::string> r) { codes.push_back(r.error().code()); });
  Spin(2);
  raw_.Reset();
  ASSERT_TRUE(RunUntil([&] { return closed; }));
  EXPECT_EQ(codes, std::vector<Code>(3, Code::kUnavailable));
  EXPECT_FALSE(client_->connected());
  bool after = false;
  client_->Call("s", "m", "", 0, [&](Result<std::string> r) { after = r.error().code() == Code::kUnavailable; });
  EXPECT_FALSE(after);  // never inside Call
  Spin(1);
  EXPECT_TRUE(after);
}

TEST_F(ClientTest, RefusesOversizeRequestLocally) {
  MakePair();
  bool failed = false;
  client_->Call("s", "m", std::string(kMaxFramePayload, 'x'), 0, [&](Result<std::string> r) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
    EXPECT_NE(r.error().message().find("exceed maximum message size of 4194304"), std::string::npos);
    failed = true;
  });
  EXPECT_FALSE(failed);
  Spin(2);
  EXPECT_TRUE(failed);
  EXPECT_TRUE(NothingToRead(raw_.get()));
  // The next call uses stream id 1: the refused one consumed nothing.
  client_->Call("s", "m", "", 0, [](Result<std::string>) {});
  uint32_t stream;
  std::string body;
  ASSERT_TRUE(NextRequest(&stream, &body));
  EXPECT_EQ(stream, 1u);
}

TEST_F(ClientTest, CallbackMayDestroyClient) {
  MakePair();
  int calls = 0;
  for (int i = 0; i < 3; ++i) {
    client_->Call("s", "m", "", 0, [&](Result<std::string>) {
      ++calls;
      client_.reset();
    });
  }
  std::string replies;
  for (uint32_t id : {1u, 3u, 5u}) ASSERT_TRUE(AppendResponseFrame(id, Response(), &replies).ok());
  RawSend(raw_.get(), replies);
  ASSERT_TRUE(RunUntil([&] { return client_ == nullptr; }));
  Spin(2);
  EXPECT_EQ(calls, 1);
}

TEST_F(RpcTest, ManyCallsInFlightEndToEnd) {
  StartServer();
  auto client = RpcClient::Connect(loop_.get(), path_);
  ASSERT_TRUE(client.ok());
  constexpr int kCalls = 2000;
  int ok = 0;
  for (int i = 0; i < kCalls; ++i) {
    std::string p = std::to_string(i);
    (*client)->Call("svc", "Echo", p, kWait, [&ok, p](Result<std::string> r) { ok += r.ok() && *r == p; });
  }
  ASSERT_TRUE(RunUntil([&] { return ok == kCalls; }));
  // Large payloads both ways, beyond the 16-bit pb_size_t limit of non-callback nanopb fields.
  std::string big(3 << 20, 'b');
  bool big_ok = false;
  (*client)->Call("svc", "Echo", big, kWait, [&](Result<std::string> r) { big_ok = r.ok() && *r == big; });
  ASSERT_TRUE(RunUntil([&] { return big_ok; }));
}

// ---- BlockingClient (server on its own thread) ----------------------------------

TEST_F(RpcTest, BlockingClient) {
  StartServer();
  server_->Register("svc", "Slow", [this](const CallContext&, std::string_view, Responder r) {
    loop_->AddTimer(200 * kNanosPerMilli, [r] { r.Reply("slow"); });
  });
  std::atomic<bool> stop{false};
  std::thread server_thread([&] {
    while (!stop) (void)loop_->RunOnce(10 * kNanosPerMilli);
  });
  {
    auto c = BlockingClient::Connect(path_, kWait);
    ASSERT_TRUE(c.ok()) << c.error().message();
    auto r = c->Call("svc", "Echo", "one", kWait);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(*r, "one");
    r = c->Call("svc", "Slow", "", 30 * kNanosPerMilli);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
    r = c->Call("svc", "Missing", "", kWait);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kUnimplemented);
    r = c->Call("svc", "Echo", "after timeout", kWait);
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(*r, "after timeout");
    r = c->Call("svc", "Echo", std::string(kMaxFramePayload, 'x'), kWait);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
  }
  stop = true;
  server_thread.join();
  auto missing = BlockingClient::Connect(dir_ + "/none.sock", kNanosPerSecond);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
}

// A server's own Unavailable status is an answer; a peer that hangs up is
// not (the CLI tells "the driver is unavailable" from "no agent" by it).
TEST(BlockingClientAnswered, ServerStatusVersusClosedConnection) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd peer(sv[1]);
  BlockingClient client{UniqueFd(sv[0])};
  EXPECT_FALSE(client.answered());
  // The reply is written before the call: the client skips nothing (stream 1).
  Response resp;
  resp.has_status = true;
  resp.code = static_cast<int32_t>(Code::kUnavailable);
  resp.message = "driver x is disconnected";
  std::string frame;
  ASSERT_TRUE(AppendResponseFrame(1, resp, &frame).ok());
  ASSERT_EQ(::write(peer.get(), frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  auto r = client.Call("svc", "m", "", kWait);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_EQ(r.error().message(), "driver x is disconnected");
  EXPECT_TRUE(client.answered());
  ::shutdown(peer.get(), SHUT_WR);
  r = client.Call("svc", "m", "", kWait);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
  EXPECT_FALSE(client.answered());
}

}  // namespace
}  // namespace outpost::wire
