// wire/grpc_server and wire/grpc_client together over a unix socket, and
// each against a raw HTTP/2 peer for what the other never sends: the four
// call types, big messages, deadlines and cancellation both ways, GOAWAY,
// a lost connection, limits, and the statuses of every failure.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/sys.h"
#include "h2_test_util.h"
#include "test_util.h"
#include "wire/grpc_client.h"
#include "wire/grpc_server.h"

namespace outpost::wire {
namespace {

using h2test::RawFrame;
using h2test::RawPeer;
using outpost::testing::RunUntil;

class GrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);
    loop_ = outpost::testing::MakeLoop();
    ASSERT_NE(loop_, nullptr);
    dir_ = outpost::testing::MakeTempDir("/tmp", "grpc");
    path_ = dir_ + "/g.sock";
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    (void)sys::RemoveTree(dir_);
    log::SetLevel(log::Level::kInfo);
  }

  void StartServer(GrpcServerOptions o = {}) {
    auto fd = sys::UnixListen(path_, 64);
    ASSERT_TRUE(fd.ok()) << fd.error().message();
    auto s = GrpcServer::Create(loop_.get(), std::move(*fd), o);
    ASSERT_TRUE(s.ok()) << s.error().message();
    server_ = std::move(*s);
    server_->Register("t.Svc", "Echo", [](const GrpcCallContext&, std::string_view req, GrpcResponder r) {
      r.Reply(req);
    });
    server_->Register("t.Svc", "Fail", [](const GrpcCallContext&, std::string_view req, GrpcResponder r) {
      r.Fail(Error(Code::kFailedPrecondition, std::string(req)));
    });
    server_->Register("t.Svc", "Hold", [this](const GrpcCallContext& ctx, std::string_view, GrpcResponder r) {
      held_.push_back(r);
      held_deadline_ = ctx.deadline;
    });
    // Server streaming: the request's size is the count of messages sent.
    server_->RegisterStream("t.Svc", "Count", [this](const GrpcCallContext&, std::shared_ptr<GrpcCall> call) {
      GrpcCall* c = call.get();
      call->OnMessage([c](std::string_view m) {
        for (size_t i = 0; i < m.size(); ++i) (void)c->Write(std::to_string(i));
        c->Finish(OkStatus());
      });
      call->OnDone([this](const Status& st) { server_done_.push_back(st.ok() ? Code::kOk : st.error().code()); });
      server_calls_.push_back(call);
    });
    // Client streaming: the answer is all the messages joined.
    server_->RegisterStream("t.Svc", "Join", [](const GrpcCallContext&, std::shared_ptr<GrpcCall> call) {
      auto joined = std::make_shared<std::string>();
      GrpcCall* c = call.get();
      call->OnMessage([joined](std::string_view m) { *joined += m; });
      call->OnHalfClose([c, joined] {
        (void)c->Write(*joined);
        c->Finish(OkStatus());
      });
    });
    // Bidirectional: each message comes back upper-cased; "end" finishes.
    server_->RegisterStream("t.Svc", "Chat", [this](const GrpcCallContext&, std::shared_ptr<GrpcCall> call) {
      GrpcCall* c = call.get();
      call->OnMessage([c](std::string_view m) {
        if (m == "end") return c->Finish(Error(Code::kAborted, "ended by request"));
        std::string up(m);
        for (char& ch : up) ch = static_cast<char>(toupper(static_cast<unsigned char>(ch)));
        (void)c->Write(up);
      });
      call->OnDone([this](const Status& st) { server_done_.push_back(st.ok() ? Code::kOk : st.error().code()); });
      server_calls_.push_back(call);
    });
  }

  void Connect(GrpcClientOptions o = {}) {
    auto c = GrpcClient::Connect(loop_.get(), path_, o);
    ASSERT_TRUE(c.ok()) << c.error().message();
    client_ = std::move(*c);
  }

  Result<std::string> CallSync(std::string_view method, std::string_view req, int64_t timeout = 0) {
    bool done = false;
    Result<std::string> out = Error(Code::kUnknown, "not done");
    client_->Call("t.Svc", method, req, timeout, [&](Result<std::string> r) {
      out = std::move(r);
      done = true;
    });
    EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
    return out;
  }

  std::unique_ptr<Loop> loop_;
  std::string dir_, path_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GrpcClient> client_;
  std::vector<GrpcResponder> held_;
  int64_t held_deadline_ = 0;
  std::vector<std::shared_ptr<GrpcCall>> server_calls_;
  std::vector<Code> server_done_;
};

TEST_F(GrpcTest, UnaryEchoAndEmptyMessages) {
  StartServer();
  Connect();
  auto r = CallSync("Echo", "hello");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(*r, "hello");
  r = CallSync("Echo", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "");
  EXPECT_EQ(server_->stats().calls, 2u);
}

TEST_F(GrpcTest, ErrorsCarryTheirCodeAndMessage) {
  StartServer();
  Connect();
  auto r = CallSync("Fail", "100% wrong: \xc3\xbc\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(r.error().message(), "100% wrong: \xc3\xbc\n");
  r = CallSync("Nope", "x");
  EXPECT_EQ(r.error().code(), Code::kUnimplemented);
  EXPECT_EQ(r.error().message(), "unknown method Nope for service t.Svc");
  bool done = false;
  client_->Call("t.Other", "M", "x", 0, [&](Result<std::string> res) {
    EXPECT_EQ(res.error().code(), Code::kUnimplemented);
    EXPECT_EQ(res.error().message(), "unknown service t.Other");
    done = true;
  });
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
}

TEST_F(GrpcTest, ThreeMegabyteMessagesBothWays) {
  StartServer();
  Connect();
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + (i >> 12));
  auto r = CallSync("Echo", big);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(*r == big);
}

TEST_F(GrpcTest, MessagesOverTheLimitAreRefused) {
  GrpcServerOptions o;
  o.max_message_bytes = 1000;
  StartServer(o);
  Connect();
  auto r = CallSync("Echo", std::string(1001, 'x'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(r.error().message(), "grpc: received message larger than max (1001 vs. 1000)");
  // The client's own limit applies to answers.
  GrpcClientOptions co;
  co.max_message_bytes = 10;
  client_.reset();
  Connect(co);
  r = CallSync("Echo", std::string(11, 'x'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
}

TEST_F(GrpcTest, ServerStreaming) {
  StartServer();
  Connect();
  auto call = client_->StartCall("t.Svc", "Count", 0);
  std::vector<std::string> got;
  bool done = false;
  Status status;
  call->OnMessage([&](std::string_view m) { got.emplace_back(m); });
  call->OnDone([&](const Status& st) {
    status = st;
    done = true;
  });
  ASSERT_TRUE(call->Write(std::string(500, 'n')).ok());
  call->CloseSend();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  EXPECT_TRUE(status.ok());
  ASSERT_EQ(got.size(), 500u);
  EXPECT_EQ(got[499], "499");
}

TEST_F(GrpcTest, ClientStreaming) {
  StartServer();
  Connect();
  auto call = client_->StartCall("t.Svc", "Join", 0);
  std::string answer;
  bool done = false;
  call->OnMessage([&](std::string_view m) { answer = std::string(m); });
  call->OnDone([&](const Status& st) {
    EXPECT_TRUE(st.ok());
    done = true;
  });
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(call->Write(std::to_string(i % 10)).ok());
  call->CloseSend();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  ASSERT_EQ(answer.size(), 100u);
  EXPECT_EQ(answer.substr(0, 12), "012345678901");
}

TEST_F(GrpcTest, BidirectionalAndAServerThatEndsTheCall) {
  StartServer();
  Connect();
  auto call = client_->StartCall("t.Svc", "Chat", 0);
  std::vector<std::string> got;
  bool done = false;
  Status status;
  call->OnMessage([&](std::string_view m) {
    got.emplace_back(m);
    if (got.size() == 1) (void)call->Write("second");
    if (got.size() == 2) (void)call->Write("end");
  });
  call->OnDone([&](const Status& st) {
    status = st;
    done = true;
  });
  ASSERT_TRUE(call->Write("first").ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done; }));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "FIRST");
  EXPECT_EQ(got[1], "SECOND");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code(), Code::kAborted);
  EXPECT_EQ(status.error().message(), "ended by request");
  EXPECT_TRUE(call->done());
  EXPECT_EQ(call->Write("late").error().code(), Code::kFailedPrecondition);
}

TEST_F(GrpcTest, AClientDeadlineEndsTheCallAndTellsTheServer) {
  StartServer();
  Connect();
  int64_t before = MonotonicNanos();
  auto r = CallSync("Hold", "x", 200 * kNanosPerMilli);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kDeadlineExceeded);
  EXPECT_GE(MonotonicNanos() - before, 200 * kNanosPerMilli);
  ASSERT_EQ(held_.size(), 1u);
  // The server learnt the deadline from grpc-timeout and drops the call.
  EXPECT_GT(held_deadline_, before);
  EXPECT_LE(held_deadline_, before + 200 * kNanosPerMilli + 50 * kNanosPerMilli);
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return !held_[0].pending(); }));
  held_[0].Reply("too late");  // dropped, no crash
  // The connection goes on.
  auto again = CallSync("Echo", "still here");
  ASSERT_TRUE(again.ok());
}

TEST_F(GrpcTest, CancellationBothWays) {
  StartServer();
  Connect();
  // Client cancels: the server's handler is told (Canceled).
  auto call = client_->StartCall("t.Svc", "Chat", 0);
  bool client_done = false;
  Code client_code = Code::kOk;
  call->OnDone([&](const Status& st) {
    client_done = true;
    client_code = st.ok() ? Code::kOk : st.error().code();
  });
  ASSERT_TRUE(call->Write("hi").ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return server_calls_.size() == 1; }));
  call->Cancel();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return server_done_.size() == 1; }));
  EXPECT_EQ(server_done_[0], Code::kCanceled);
  EXPECT_TRUE(client_done);  // this side ended it: OnDone ran after Cancel returned
  EXPECT_EQ(client_code, Code::kCanceled);
  // Server cancels: the client sees Canceled.
  auto call2 = client_->StartCall("t.Svc", "Chat", 0);
  Status st2;
  bool done2 = false;
  call2->OnDone([&](const Status& st) {
    st2 = st;
    done2 = true;
  });
  ASSERT_TRUE(call2->Write("hi").ok());
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return server_calls_.size() == 2; }));
  server_calls_[1]->Cancel();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done2; }));
  EXPECT_EQ(st2.error().code(), Code::kCanceled);
}

TEST_F(GrpcTest, ManyConcurrentCallsOnOneConnectionBeyondTheStreamLimit) {
  GrpcServerOptions o;
  o.max_concurrent_streams = 16;
  StartServer(o);
  Connect();
  // Let the server's SETTINGS (16 streams) arrive first.
  ASSERT_TRUE(CallSync("Echo", "warm").ok());
  int ok = 0, done = 0;
  for (int i = 0; i < 300; ++i) {
    client_->Call("t.Svc", "Echo", std::to_string(i), 0, [&, i](Result<std::string> r) {
      ++done;
      if (r.ok() && *r == std::to_string(i)) ++ok;
    });
  }
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done == 300; }));
  EXPECT_EQ(ok, 300);
}

TEST_F(GrpcTest, DrainLetsCallsInFlightFinishAndRefusesNewOnes) {
  StartServer();
  Connect();
  bool held_done = false;
  Result<std::string> held_result = Error(Code::kUnknown, "");
  client_->Call("t.Svc", "Hold", "x", 0, [&](Result<std::string> r) {
    held_result = std::move(r);
    held_done = true;
  });
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return held_.size() == 1; }));
  server_->Drain();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return !client_->accepting_calls(); }));
  auto refused = CallSync("Echo", "new");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kUnavailable);
  held_[0].Reply("finished");
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return held_done; }));
  ASSERT_TRUE(held_result.ok());
  EXPECT_EQ(*held_result, "finished");
  EXPECT_TRUE(RunUntil(loop_.get(), [&] { return !client_->connected(); }));
}

TEST_F(GrpcTest, ALostConnectionEndsEveryCall) {
  StartServer();
  Connect();
  bool closed = false;
  client_->SetCloseCallback([&](const Error&) { closed = true; });
  int unavailable = 0;
  for (int i = 0; i < 3; ++i) {
    client_->Call("t.Svc", "Hold", "x", 0, [&](Result<std::string> r) {
      if (!r.ok() && r.error().code() == Code::kUnavailable) ++unavailable;
    });
  }
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return held_.size() == 3; }));
  server_.reset();
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return closed; }));
  EXPECT_EQ(unavailable, 3);
  auto r = CallSync("Echo", "x");
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
}

TEST_F(GrpcTest, ASlowReaderBoundsTheServersQueueAndIsToldWhenToWriteAgain) {
  GrpcServerOptions o;
  o.stream_queue_bytes = 64 << 10;
  StartServer(o);
  std::shared_ptr<GrpcCall> server_call;
  int writable = 0;
  size_t refused_at = 0;
  server_->RegisterStream("t.Svc", "Flood", [&](const GrpcCallContext&, std::shared_ptr<GrpcCall> call) {
    server_call = call;
    call->OnWritable([&] { ++writable; });
    std::string chunk(8 << 10, 'f');
    for (size_t i = 0; i < 1000; ++i) {
      if (!call->Write(chunk).ok()) {
        refused_at = i;
        break;
      }
    }
  });
  // A raw client that never returns credit: the server stops at the
  // windows (64 KiB) plus its queue limit.
  RawPeer peer;
  UniqueFd other;
  ASSERT_TRUE(peer.Open(&other));
  ASSERT_TRUE(server_->AddConnection(std::move(other)).ok());
  peer.SendClientStart();
  peer.SendHeaders(1, h2test::RequestHeaders("/t.Svc/Flood"), false);
  ASSERT_TRUE(RunUntil(loop_.get(), [&] { return server_call != nullptr; }));
  EXPECT_GT(refused_at, 0u);
  EXPECT_LT(refused_at, 20u);  // 64 KiB window + 64 KiB queue, in 8 KiB messages
  EXPECT_LE(server_call->queued_bytes(), size_t{(64 << 10) + (8 << 10) + 5});
  // Credit comes back: the server is told it may write again.
  peer.SendFrame(h2::kWindowUpdate, 0, 1, h2test::Be32(1 << 20));
  peer.SendFrame(h2::kWindowUpdate, 0, 0, h2test::Be32(1 << 20));
  RawFrame f;
  ASSERT_TRUE(RunUntil(loop_.get(), [&] {
    (void)peer.Next(loop_.get(), &f, 10 * kNanosPerMilli);
    return writable > 0;
  }));
}

TEST_F(GrpcTest, RawRequestsGetGrpcGosAnswers) {
  StartServer();
  RawPeer peer;
  UniqueFd other;
  ASSERT_TRUE(peer.Open(&other));
  ASSERT_TRUE(server_->AddConnection(std::move(other)).ok());
  peer.SendClientStart();
  RawFrame f;
  // Wrong content-type: 415 and InvalidArgument, trailers-only.
  peer.SendHeaders(1, {{":method", "POST"}, {":scheme", "http"}, {":path", "/t.Svc/Echo"}, {"content-type", "text/plain"}},
                   true);
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header(":status"), "415");
  EXPECT_EQ(f.header("grpc-status"), "3");
  EXPECT_TRUE(f.flags & h2::kFlagEndStream);
  // A malformed grpc-timeout: 400 and Internal.
  peer.SendHeaders(3, h2test::RequestHeaders("/t.Svc/Echo", {{"grpc-timeout", "5s"}}), true);
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header(":status"), "400");
  EXPECT_EQ(f.header("grpc-status"), "13");
  // A malformed path.
  peer.SendHeaders(5, h2test::RequestHeaders("nonsense"), true);
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header("grpc-status"), "12");
  EXPECT_EQ(f.header("grpc-message"), "malformed method name: \"nonsense\"");
  // A unary call without its message, and one with two.
  peer.SendHeaders(7, h2test::RequestHeaders("/t.Svc/Echo"), true);
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header("grpc-status"), "13");
  EXPECT_NE(f.header("grpc-message").find("cardinality violation"), std::string_view::npos);
  peer.SendHeaders(9, h2test::RequestHeaders("/t.Svc/Echo"), false);
  peer.SendFrame(h2::kData, h2::kFlagEndStream, 9, h2test::GrpcMessage("a") + h2test::GrpcMessage("b"));
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header("grpc-status"), "13");
  // A compressed message without grpc-encoding.
  peer.SendHeaders(11, h2test::RequestHeaders("/t.Svc/Echo"), false);
  peer.SendFrame(h2::kData, h2::kFlagEndStream, 11, std::string("\x01\0\0\0\x01z", 6));
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header("grpc-status"), "13");
  // A message split over many DATA frames, ending in an empty END_STREAM.
  peer.SendHeaders(13, h2test::RequestHeaders("/t.Svc/Echo"), false);
  std::string m = h2test::GrpcMessage("split message");
  for (char c : m) peer.SendFrame(h2::kData, 0, 13, std::string(1, c));
  peer.SendFrame(h2::kData, h2::kFlagEndStream, 13, "");
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header(":status"), "200");
  EXPECT_FALSE(f.flags & h2::kFlagEndStream);
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kData, &f));
  EXPECT_EQ(f.payload, m);
  ASSERT_TRUE(peer.NextOfType(loop_.get(), h2::kHeaders, &f));
  EXPECT_EQ(f.header("grpc-status"), "0");
  EXPECT_TRUE(f.flags & h2::kFlagEndStream);
}

// The client against a raw server: what grpc-go's and C-core's servers may
// send.
class GrpcClientRawTest : public GrpcTest {
 protected:
  void SetUp() override {
    GrpcTest::SetUp();
    UniqueFd other;
    ASSERT_TRUE(peer_.Open(&other));
    peer_.ExpectClientPreface();
    auto c = GrpcClient::Create(loop_.get(), std::move(other), {});
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    peer_.SendFrame(h2::kSettings, 0, 0, "");
  }
  // Starts a unary call and reads its request up to END_STREAM.
  void StartUnary(int64_t timeout = 0) {
    client_->Call("t.Svc", "M", "req", timeout, [this](Result<std::string> r) {
      result_ = std::move(r);
      done_ = true;
    });
    RawFrame f;
    ASSERT_TRUE(peer_.NextOfType(loop_.get(), h2::kHeaders, &f));
    request_ = f;
    ASSERT_TRUE(peer_.NextOfType(loop_.get(), h2::kData, &f));
    EXPECT_TRUE(f.flags & h2::kFlagEndStream);
    EXPECT_EQ(f.payload, h2test::GrpcMessage("req"));
  }
  void Wait() { ASSERT_TRUE(RunUntil(loop_.get(), [&] { return done_; })); }

  RawPeer peer_;
  RawFrame request_;
  bool done_ = false;
  Result<std::string> result_ = Error(Code::kUnknown, "");
};

TEST_F(GrpcClientRawTest, SendsTheRequestHeadersGrpcExpects) {
  StartUnary(5 * kNanosPerSecond);
  EXPECT_EQ(request_.header(":method"), "POST");
  EXPECT_EQ(request_.header(":scheme"), "http");
  EXPECT_EQ(request_.header(":path"), "/t.Svc/M");
  EXPECT_EQ(request_.header(":authority"), "localhost");
  EXPECT_EQ(request_.header("content-type"), "application/grpc");
  EXPECT_EQ(request_.header("te"), "trailers");
  int64_t t = 0;
  ASSERT_TRUE(grpc::ParseTimeout(request_.header("grpc-timeout"), &t));
  EXPECT_LE(t, 5 * kNanosPerSecond);
  EXPECT_GT(t, 4 * kNanosPerSecond);
}

TEST_F(GrpcClientRawTest, ATrailersOnlyAnswer) {
  StartUnary();
  peer_.SendHeaders(1, {{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-status", "5"},
                        {"grpc-message", "no %E2%9C%93 here"}},
                    true);
  Wait();
  ASSERT_FALSE(result_.ok());
  EXPECT_EQ(result_.error().code(), Code::kNotFound);
  EXPECT_EQ(result_.error().message(), "no \xe2\x9c\x93 here");
}

TEST_F(GrpcClientRawTest, HeadersMessageTrailersAndAResetAfterThem) {
  StartUnary();
  peer_.SendHeaders(1, {{":status", "200"}, {"content-type", "application/grpc+proto"}}, false);
  peer_.SendFrame(h2::kData, 0, 1, h2test::GrpcMessage("answer"));
  peer_.SendHeaders(1, {{"grpc-status", "0"}}, true);
  peer_.SendFrame(h2::kRstStream, 0, 1, h2test::Be32(h2::kNoError));
  Wait();
  ASSERT_TRUE(result_.ok()) << result_.error().message();
  EXPECT_EQ(*result_, "answer");
}

TEST_F(GrpcClientRawTest, EndOfStreamWithoutTrailersIsInternal) {
  StartUnary();
  peer_.SendHeaders(1, {{":status", "200"}, {"content-type", "application/grpc"}}, false);
  peer_.SendFrame(h2::kData, h2::kFlagEndStream, 1, h2test::GrpcMessage("answer"));
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kInternal);
  EXPECT_EQ(result_.error().message(), "server closed the stream without sending trailers");
}

TEST_F(GrpcClientRawTest, NonGrpcAnswersAndBadStatuses) {
  StartUnary();
  peer_.SendHeaders(1, {{":status", "503"}}, true);
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kUnavailable);
  done_ = false;
  StartUnary();
  peer_.SendHeaders(3, {{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-status", "x1"}}, true);
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kUnknown);
  EXPECT_EQ(result_.error().message(), "transport: malformed grpc-status: x1");
  done_ = false;
  StartUnary();
  peer_.SendHeaders(5, {{":status", "200"}, {"content-type", "application/grpc"}}, false);
  peer_.SendFrame(h2::kData, 0, 5, h2test::GrpcMessage("a") + h2test::GrpcMessage("b"));
  peer_.SendHeaders(5, {{"grpc-status", "0"}}, true);
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kInternal);
}

TEST_F(GrpcClientRawTest, ResetsMapToStatuses) {
  StartUnary();
  peer_.SendFrame(h2::kRstStream, 0, 1, h2test::Be32(h2::kRefusedStream));
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kUnavailable);
  done_ = false;
  StartUnary();
  peer_.SendFrame(h2::kRstStream, 0, 3, h2test::Be32(h2::kCancel));
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kCanceled);
}

TEST_F(GrpcClientRawTest, ADeadlineResetsTheStreamWithCancel) {
  StartUnary(100 * kNanosPerMilli);
  RawFrame f;
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), h2::kRstStream, &f));
  EXPECT_EQ(f.stream, 1u);
  EXPECT_EQ(f.code(), h2::kCancel);
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kDeadlineExceeded);
  // A late answer for the reset stream is ignored.
  peer_.SendHeaders(1, {{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-status", "0"}}, true);
  peer_.SendFrame(h2::kPing, 0, 0, "stillok?");
  ASSERT_TRUE(peer_.NextOfType(loop_.get(), h2::kPing, &f));
  EXPECT_TRUE(client_->connected());
}

TEST_F(GrpcClientRawTest, GoawayFailsCallsTheServerDidNotTakeAsUnavailable) {
  StartUnary();
  peer_.SendFrame(h2::kGoaway, 0, 0, h2test::Be32(0) + h2test::Be32(h2::kNoError));
  Wait();
  EXPECT_EQ(result_.error().code(), Code::kUnavailable);
  EXPECT_FALSE(client_->accepting_calls());
}

TEST_F(GrpcClientRawTest, AServersHuffmanCodedHeadersAreRead) {
  StartUnary();
  // grpc-go's response headers and trailers, from its encoder.
  peer_.SendFrame(h2::kHeaders, h2::kFlagEndHeaders, 1,
                  std::string("\x88\x5f\x8b\x1d\x75\xd0\x62\x0d\x26\x3d\x4c\x4d\x65\x64", 14));
  peer_.SendFrame(h2::kData, 0, 1, h2test::GrpcMessage("ok"));
  peer_.SendFrame(h2::kHeaders, h2::kFlagEndHeaders | h2::kFlagEndStream, 1,
                  std::string("\x40\x88\x9a\xca\xc8\xb2\x12\x34\xda\x8f\x01\x30\x40\x89\x9a\xca\xc8\xb5\x25\x42\x07"
                              "\x31\x7f\x00",
                              24));
  Wait();
  ASSERT_TRUE(result_.ok()) << result_.error().message();
  EXPECT_EQ(*result_, "ok");
}

}  // namespace
}  // namespace outpost::wire
