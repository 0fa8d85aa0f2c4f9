// wire/rpc_server on a real Loop over unix sockets, checked byte by byte
// with a raw peer, and through an RpcClient where bytes do not matter
// (fixture in rpc_test_util.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "unit/rpc_test_util.h"
#include "wire/codec.h"
#include "wire/frame.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost::wire {
namespace {

using rpctest::Bytes;
using rpctest::GotFrame;
using rpctest::kWait;
using rpctest::RequestFrame;
using rpctest::RpcTest;

// ---- server, byte level ------------------------------------------------------

TEST_F(RpcTest, GoldenRequestAndResponseOnTheWire) {
  StartServer();
  server_->Register("a", "b", [](const CallContext&, std::string_view p, Responder r) {
    EXPECT_EQ(p, "c");
    r.Reply("d");
  });
  UniqueFd fd = RawConnect();
  RawSend(fd.get(), Bytes({0, 0, 0, 9, 0, 0, 0, 1, 1, 0, 0x0a, 1, 'a', 0x12, 1, 'b', 0x1a, 1, 'c'}));
  std::string want = Bytes({0, 0, 0, 3, 0, 0, 0, 1, 2, 0, 0x12, 1, 'd'});
  std::string got;
  ASSERT_TRUE(RunUntil([&] {
    char buf[64];
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    return got.size() >= want.size();
  }));
  EXPECT_EQ(got, want);
}

TEST_F(RpcTest, UnknownServiceAndMethod) {
  StartServer();
  UniqueFd fd = RawConnect();
  FrameReader reader;
  RawSend(fd.get(), RequestFrame(1, "nope", "Echo", "") + RequestFrame(3, "svc", "Nope", ""));
  GotFrame g;
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 1u);
  EXPECT_EQ(g.header.type, 2);
  // Exact bytes: status {code 12, message "service nope"}.
  EXPECT_EQ(g.payload, Bytes({0x0a, 16, 0x08, 12, 0x12, 12}) + "service nope");
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 3u);
  EXPECT_EQ(g.resp().code, 12);
  EXPECT_EQ(g.resp().message, "method Nope");
}

TEST_F(RpcTest, StreamIdRules) {
  StartServer();
  UniqueFd fd = RawConnect();
  FrameReader reader;
  GotFrame g;
  RawSend(fd.get(), RequestFrame(2, "svc", "Echo", "x"));
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 2u);
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kInvalidArgument));
  EXPECT_EQ(g.resp().message, "StreamID must be odd for client initiated streams");

  RawSend(fd.get(), RequestFrame(5, "svc", "Echo", "five") + RequestFrame(3, "svc", "Echo", "three") +
                        RequestFrame(5, "svc", "Echo", "again") + RequestFrame(7, "svc", "Echo", "seven"));
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 5u);
  EXPECT_EQ(g.resp().payload, "five");
  for (uint32_t id : {3u, 5u}) {
    ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
    EXPECT_EQ(g.header.stream_id, id);
    EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kInvalidArgument));
    EXPECT_EQ(g.resp().message, "StreamID cannot be re-used and must increment");
  }
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 7u);
  EXPECT_EQ(g.resp().payload, "seven");
}

TEST_F(RpcTest, DataAndResponseFramesAreRejectedCleanly) {
  StartServer();
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd fd = RawConnect();
  FrameReader reader;
  GotFrame g;
  std::string frames;
  AppendFrame(&frames, 9, FrameType::kData, 0, "stray");
  AppendFrame(&frames, 11, FrameType::kResponse, 0, "");  // ignored
  AppendFrame(&frames, 13, static_cast<FrameType>(77), 0, "");  // ignored
  frames += RequestFrame(15, "svc", "Hold", "");
  AppendFrame(&frames, 15, FrameType::kData, 0, "more");
  frames += RequestFrame(17, "svc", "Echo", "after");
  RawSend(fd.get(), frames);
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 9u);
  EXPECT_EQ(g.resp().message, "StreamID is no longer active");
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 15u);
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kInvalidArgument));
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 17u);
  EXPECT_EQ(g.resp().payload, "after");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(held[0].pending());
  held[0].Reply("late");  // dropped: the call already failed
  Spin(3);
  EXPECT_TRUE(NothingToRead(fd.get()));
}

TEST_F(RpcTest, OversizeFrameAnsweredAndSkipped) {
  StartServer();
  UniqueFd fd = RawConnect();
  FrameReader reader;
  GotFrame g;
  std::string big;
  AppendFrame(&big, 21, FrameType::kRequest, 0, std::string(kMaxFramePayload + 1, 'x'));
  big += RequestFrame(23, "svc", "Echo", "still here");
  RawSend(fd.get(), big);
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 21u);
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kResourceExhausted));
  EXPECT_EQ(g.resp().message, "message length 4194305 exceed maximum message size of 4194304");
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 23u);
  EXPECT_EQ(g.resp().payload, "still here");
}

TEST_F(RpcTest, OversizeReplyBecomesResourceExhausted) {
  StartServer();
  const std::string huge(kMaxFramePayload, 'h');  // the envelope adds 5 bytes
  server_->Register("svc", "Huge", [&](const CallContext&, std::string_view, Responder r) { r.Reply(huge); });
  UniqueFd fd = RawConnect();
  FrameReader reader;
  GotFrame g;
  RawSend(fd.get(), RequestFrame(1, "svc", "Huge", "") + RequestFrame(3, "svc", "Echo", "still here"));
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 1u);
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kResourceExhausted));
  EXPECT_EQ(g.resp().message, "message length 4194309 exceed maximum message size of 4194304");
  EXPECT_TRUE(g.resp().payload.empty());
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 3u);
  EXPECT_EQ(g.resp().payload, "still here");
}

TEST_F(RpcTest, MalformedRequestGetsInvalidArgument) {
  StartServer();
  UniqueFd fd = RawConnect();
  FrameReader reader;
  GotFrame g;
  std::string frame;
  AppendFrame(&frame, 1, FrameType::kRequest, 0, Bytes({0x0a, 0x7f, 'a'}));
  RawSend(fd.get(), frame);
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kInvalidArgument));
  EXPECT_EQ(g.resp().message.rfind("unmarshal request error: decode ttrpc.Request field 1", 0), 0u)
      << g.resp().message;
}

TEST_F(RpcTest, HandlerSeesContext) {
  StartServer();
  CallContext seen;
  std::vector<std::pair<std::string, std::string>> md;
  server_->Register("svc", "Ctx", [&](const CallContext& ctx, std::string_view, Responder r) {
    seen = ctx;
    for (const auto& kv : *ctx.metadata) md.emplace_back(kv.key, kv.value);
    r.Reply("");
  });
  auto client = RpcClient::Connect(loop_.get(), path_);
  ASSERT_TRUE(client.ok());
  bool done = false;
  int64_t before = MonotonicNanos();
  (*client)->Call("svc", "Ctx", "", 3 * kNanosPerSecond, {{"k", "v"}}, [&](Result<std::string> r) {
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(*r, "");
    done = true;
  });
  ASSERT_TRUE(RunUntil([&] { return done; }));
  EXPECT_EQ(seen.stream_id, 1u);
  EXPECT_EQ(seen.peer.uid, ::getuid());
  EXPECT_EQ(seen.peer.pid, ::getpid());
  EXPECT_GE(seen.deadline, before + 3 * kNanosPerSecond);
  EXPECT_LE(seen.deadline, MonotonicNanos() + 3 * kNanosPerSecond);
  ASSERT_EQ(md.size(), 1u);
  EXPECT_EQ(md[0].first, "k");
  EXPECT_EQ(md[0].second, "v");
}

// ---- async replies, deadlines, lifetimes --------------------------------------

TEST_F(RpcTest, OutOfOrderRepliesMatchByStreamId) {
  StartServer();
  std::vector<std::pair<Responder, std::string>> held;
  server_->Register("svc", "Later", [&](const CallContext&, std::string_view p, Responder r) {
    held.emplace_back(r, std::string(p));
  });
  auto client = RpcClient::Connect(loop_.get(), path_);
  ASSERT_TRUE(client.ok());
  constexpr int kCalls = 50;
  std::vector<std::string> results(kCalls);
  int done = 0;
  for (int i = 0; i < kCalls; ++i) {
    (*client)->Call("svc", "Later", "p" + std::to_string(i), kWait, [&, i](Result<std::string> r) {
      ASSERT_TRUE(r.ok()) << r.error().message();
      results[i] = *r;
      ++done;
    });
  }
  EXPECT_EQ((*client)->pending_calls(), static_cast<size_t>(kCalls));
  ASSERT_TRUE(RunUntil([&] { return held.size() == kCalls; }));
  EXPECT_EQ(server_->stats().pending_calls, static_cast<size_t>(kCalls));
  // Reply in reverse and in a scrambled order, some twice.
  for (int i = kCalls - 1; i >= 0; i -= 2) held[i].first.Reply("r" + held[i].second.substr(1));
  for (int i = 0; i < kCalls; i += 2) held[i].first.Reply("r" + held[i].second.substr(1));
  for (auto& h : held) h.first.Reply("duplicate");  // ignored: first reply wins
  ASSERT_TRUE(RunUntil([&] { return done == kCalls; }));
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(results[i], "r" + std::to_string(i));
  EXPECT_EQ(server_->stats().pending_calls, 0u);
}

TEST_F(RpcTest, ServerDeadlineRepliesAndIgnoresLateReply) {
  StartServer();
  std::vector<Responder> held;
  server_->Register("svc", "Never", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd fd = RawConnect();
  FrameReader reader;
  GotFrame g;
  int64_t start = MonotonicNanos();
  RawSend(fd.get(), RequestFrame(1, "svc", "Never", "", 50 * kNanosPerMilli));
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_GE(MonotonicNanos() - start, 50 * kNanosPerMilli);
  EXPECT_EQ(g.header.stream_id, 1u);
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kDeadlineExceeded));
  ASSERT_EQ(held.size(), 1u);
  EXPECT_FALSE(held[0].pending());
  held[0].Reply("too late");
  Spin(3);
  EXPECT_TRUE(NothingToRead(fd.get()));
  // A negative timeout (deadline already passed) expires at once.
  RawSend(fd.get(), RequestFrame(3, "svc", "Never", "", -1));
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.header.stream_id, 3u);
  EXPECT_EQ(g.resp().code, static_cast<int32_t>(Code::kDeadlineExceeded));
}

TEST_F(RpcTest, ReplyAfterConnectionOrServerIsGoneIsDropped) {
  StartServer();
  std::vector<Responder> held;
  server_->Register("svc", "Never", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  {
    UniqueFd fd = RawConnect();
    RawSend(fd.get(), RequestFrame(1, "svc", "Never", "") + RequestFrame(3, "svc", "Never", ""));
    ASSERT_TRUE(RunUntil([&] { return held.size() == 2; }));
  }
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 0; }));
  EXPECT_FALSE(held[0].pending());
  held[0].Reply("nobody listens");
  held[1].Fail(Error(Code::kInternal, "nor here"));
  UniqueFd fd2 = RawConnect();
  RawSend(fd2.get(), RequestFrame(1, "svc", "Never", ""));
  ASSERT_TRUE(RunUntil([&] { return held.size() == 3; }));
  server_.reset();
  held[2].Reply("server gone");
  EXPECT_FALSE(held[2].pending());
  Responder().Reply("detached");
}

TEST_F(RpcTest, HandlerMayCloseOrDestroyTheServer) {
  StartServer();
  server_->Register("svc", "Destroy", [&](const CallContext&, std::string_view, Responder r) {
    server_.reset();
    r.Reply("dropped");
  });
  UniqueFd fd = RawConnect();
  RawSend(fd.get(), RequestFrame(1, "svc", "Destroy", "") + RequestFrame(3, "svc", "Echo", ""));
  ASSERT_TRUE(RunUntil([&] { return server_ == nullptr; }));
  EXPECT_TRUE(WaitClosed(fd.get()));
}

TEST_F(RpcTest, HalfCloseStillGetsReplies) {
  StartServer();
  UniqueFd fd = RawConnect();
  RawSend(fd.get(), RequestFrame(1, "svc", "Echo", "bye"));
  ASSERT_EQ(::shutdown(fd.get(), SHUT_WR), 0);
  FrameReader reader;
  GotFrame g;
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.resp().payload, "bye");
  EXPECT_TRUE(WaitClosed(fd.get()));
  EXPECT_TRUE(RunUntil([&] { return server_->connection_count() == 0; }));
}

// ---- limits -------------------------------------------------------------------

TEST_F(RpcTest, ClientThatStopsReadingStaysBounded) {
  ServerOptions opts;
  opts.write_queue_pause_bytes = 256 << 10;
  opts.write_queue_max_bytes = 1 << 20;
  StartServer(opts);
  const std::string reply(64 << 10, 'r');
  server_->Register("svc", "Big", [&](const CallContext&, std::string_view, Responder r) { r.Reply(reply); });
  UniqueFd slow = RawConnect();
  uint32_t stream = 1;
  size_t sent_calls = 0;
  int blocked = 0;
  size_t max_queued = 0;
  int64_t deadline = MonotonicNanos() + kWait;
  // Keep writing requests until the server has stopped reading: our writes
  // then block although the loop keeps running.
  while (blocked < 200) {
    ASSERT_LT(MonotonicNanos(), deadline) << "server never stopped reading";
    std::string one = RequestFrame(stream, "svc", "Big", "");
    ssize_t n = ::send(slow.get(), one.data(), one.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(one.size())) {
      stream += 2;
      ++sent_calls;
      blocked = 0;
    } else {
      ASSERT_TRUE(n < 0 && errno == EAGAIN) << "partial write of a tiny frame";
      ++blocked;
    }
    ASSERT_TRUE(loop_->RunOnce(0).ok());  // the server gets a turn after every attempt
    max_queued = std::max(max_queued, server_->stats().max_queued_bytes);
  }
  EXPECT_GT(sent_calls, 10u);
  EXPECT_LE(max_queued, opts.write_queue_pause_bytes + reply.size() + 64);
  EXPECT_EQ(server_->connection_count(), 1u);
  // Another client is still served promptly.
  auto client = RpcClient::Connect(loop_.get(), path_);
  ASSERT_TRUE(client.ok());
  bool ok = false;
  (*client)->Call("svc", "Echo", "hi", kWait, [&](Result<std::string> r) { ok = r.ok() && *r == "hi"; });
  ASSERT_TRUE(RunUntil([&] { return ok; }));
  EXPECT_LE(server_->stats().max_queued_bytes, opts.write_queue_pause_bytes + reply.size() + 64);
}

TEST_F(RpcTest, WriteQueueHardCapDropsConnection) {
  ServerOptions opts;
  opts.write_queue_pause_bytes = 64 << 10;
  opts.write_queue_max_bytes = 512 << 10;
  StartServer(opts);
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd fd = RawConnect();
  std::string reqs;
  for (uint32_t i = 0; i < 64; ++i) reqs += RequestFrame(2 * i + 1, "svc", "Hold", "");
  RawSend(fd.get(), reqs);
  ASSERT_TRUE(RunUntil([&] { return held.size() == 64; }));
  const std::string reply(64 << 10, 'r');
  for (auto& r : held) r.Reply(reply);  // 4 MiB of replies nobody reads
  EXPECT_EQ(server_->connection_count(), 0u);
  EXPECT_TRUE(WaitClosed(fd.get()));
}

// Big frames that never finish share one budget: the connection that grows
// its buffer past it is closed; the one within it completes its frame.
TEST_F(RpcTest, IncompleteBigFramesShareOneReadBudget) {
  ServerOptions opts;
  opts.read_buffers_max_bytes = 1536 << 10;
  StartServer(opts);
  const std::string big = RequestFrame(1, "svc", "Echo", std::string(1 << 20, 'x'));
  const std::string part = big.substr(0, 600 << 10);
  UniqueFd a = RawConnect();
  RawSend(a.get(), part);
  ASSERT_TRUE(RunUntil([&] { return server_->stats().read_buffers >= part.size(); }));
  // b starts the same frame; its buffer takes the total over the budget.
  UniqueFd b = RawConnect();
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 2; }));
  size_t off = 0;
  ASSERT_TRUE(RunUntil([&] {
    if (off < part.size()) {
      ssize_t n = ::send(b.get(), part.data() + off, part.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) off += static_cast<size_t>(n);
    }
    return server_->connection_count() == 1;
  }));
  EXPECT_TRUE(WaitClosed(b.get()));
  EXPECT_LE(server_->stats().read_buffers, opts.read_buffers_max_bytes);
  // a, within the budget, finishes its frame and gets its answer.
  RawSend(a.get(), big.substr(part.size()));
  FrameReader reader;
  GotFrame g;
  ASSERT_TRUE(RawRead(a.get(), &reader, &g));
  EXPECT_EQ(g.resp().payload.size(), 1u << 20);
  // Small requests never count against the budget.
  auto client = RpcClient::Connect(loop_.get(), path_);
  ASSERT_TRUE(client.ok());
  bool ok = false;
  (*client)->Call("svc", "Echo", "hi", kWait, [&](Result<std::string> r) { ok = r.ok() && *r == "hi"; });
  ASSERT_TRUE(RunUntil([&] { return ok; }));
}

TEST_F(RpcTest, InflightLimitPausesReading) {
  ServerOptions opts;
  opts.max_inflight_per_connection = 4;
  StartServer(opts);
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd fd = RawConnect();
  std::string reqs;
  for (uint32_t i = 0; i < 10; ++i) reqs += RequestFrame(2 * i + 1, "svc", "Hold", "");
  RawSend(fd.get(), reqs);
  ASSERT_TRUE(RunUntil([&] { return held.size() == 4; }));
  Spin(5);
  EXPECT_EQ(held.size(), 4u);
  // Each reply frees a slot and the buffered requests resume.
  FrameReader reader;
  GotFrame g;
  for (size_t i = 0; i < 10; ++i) {
    ASSERT_TRUE(RunUntil([&] { return held.size() > i; }));
    held[i].Reply("ok");
    ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
    EXPECT_EQ(g.header.stream_id, 2 * i + 1);
  }
}

TEST_F(RpcTest, PeerCredAllowList) {
  ServerOptions opts;
  opts.allowed_uids = {::getuid() + 1};
  StartServer(opts);
  UniqueFd fd = RawConnect();
  EXPECT_TRUE(WaitClosed(fd.get()));
  EXPECT_EQ(server_->connection_count(), 0u);
  EXPECT_EQ(server_->stats().refused, 1u);
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
  UniqueFd mine(sv[0]);
  auto added = server_->AddConnection(UniqueFd(sv[1]));
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.error().code(), Code::kPermissionDenied);
}

TEST_F(RpcTest, ReloadClosesNoLongerAllowedPeers) {
  StartServer();
  UniqueFd fd = RawConnect();
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 1; }));
  ServerOptions opts = server_->options();
  opts.allowed_uids = {::getuid() + 1};
  server_->SetOptions(opts);
  EXPECT_EQ(server_->connection_count(), 0u);
  EXPECT_TRUE(WaitClosed(fd.get()));
}

TEST_F(RpcTest, ConnectionLimitClosesTheOldestIdleConnectionOrRefuses) {
  ServerOptions opts;
  opts.max_connections = 2;
  StartServer(opts);
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd a = RawConnect();
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 1; }));
  UniqueFd b = RawConnect();
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 2; }));
  // Both idle: the oldest (a) makes room for c.
  UniqueFd c = RawConnect();
  EXPECT_TRUE(WaitClosed(a.get()));
  EXPECT_EQ(server_->connection_count(), 2u);
  EXPECT_EQ(server_->stats().evicted, 1u);
  EXPECT_EQ(server_->stats().refused, 0u);
  // b and c busy: nothing to close, so d is refused.
  RawSend(b.get(), RequestFrame(1, "svc", "Hold", ""));
  RawSend(c.get(), RequestFrame(1, "svc", "Hold", ""));
  ASSERT_TRUE(RunUntil([&] { return held.size() == 2; }));
  UniqueFd d = RawConnect();
  EXPECT_TRUE(WaitClosed(d.get()));
  EXPECT_EQ(server_->stats().refused, 1u);
  EXPECT_EQ(server_->connection_count(), 2u);
  // The busy ones still get their replies.
  held[0].Reply("b");
  FrameReader reader;
  GotFrame g;
  ASSERT_TRUE(RawRead(b.get(), &reader, &g));
  EXPECT_EQ(g.resp().payload, "b");
}

TEST_F(RpcTest, PerUidLimitMakesRoomAmongThatUidsConnections) {
  ServerOptions opts;
  opts.max_connections_per_uid = 2;
  StartServer(opts);
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd busy = RawConnect();
  RawSend(busy.get(), RequestFrame(1, "svc", "Hold", ""));
  ASSERT_TRUE(RunUntil([&] { return held.size() == 1; }));
  UniqueFd idle = RawConnect();
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 2; }));
  // Our uid is at its limit: its idle connection goes, the busy one stays.
  UniqueFd next = RawConnect();
  EXPECT_TRUE(WaitClosed(idle.get()));
  EXPECT_EQ(server_->stats().evicted, 1u);
  RawSend(next.get(), RequestFrame(1, "svc", "Hold", ""));
  ASSERT_TRUE(RunUntil([&] { return held.size() == 2; }));
  UniqueFd refused = RawConnect();
  EXPECT_TRUE(WaitClosed(refused.get()));
  EXPECT_EQ(server_->stats().refused, 1u);
  EXPECT_EQ(server_->connection_count(), 2u);
}

TEST_F(RpcTest, RefusalsOfAFloodAreLoggedAsOneLine) {
  char tmpl[] = "/tmp/outpost-rpclog-XXXXXX";
  ASSERT_GE(::mkstemp(tmpl), 0);
  ASSERT_TRUE(log::SetFile(tmpl).ok());
  log::SetLevel(log::Level::kWarn);
  ServerOptions opts;
  opts.allowed_uids = {::getuid() + 1};
  StartServer(opts);
  std::vector<UniqueFd> fds;
  for (int i = 0; i < 50; ++i) fds.push_back(RawConnect());
  for (auto& fd : fds) EXPECT_TRUE(WaitClosed(fd.get()));
  EXPECT_EQ(server_->stats().refused, 50u);
  (void)log::SetFile("");
  log::SetLevel(log::Level::kError);
  auto text = sys::ReadFile(tmpl);
  ::unlink(tmpl);
  ASSERT_TRUE(text.ok());
  // The rest are counted and summarised when the 10 s window ends.
  EXPECT_EQ(std::count(text->begin(), text->end(), '\n'), 1) << *text;
  EXPECT_NE(text->find("rpc connection refused server=rpc reason=\"peer uid"), std::string::npos) << *text;
}

// The process runs out of fds: the spare fd lets the server take the new
// connection, close the oldest idle one for it, and with none idle refuse
// it; it never stops answering or spins on a readable listener.
TEST_F(RpcTest, OutOfFdsClosesTheOldestIdleConnectionOrRefuses) {
  StartServer();
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  // Client sockets are made before the fd table fills (connect needs none).
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 3; ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(fd, 0);
    clients.emplace_back(fd);
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  auto connect = [&](int fd) {
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  };
  connect(clients[0].get());
  ASSERT_TRUE(RunUntil([&] { return server_->connection_count() == 1; }));
  rlimit old_lim;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old_lim), 0);
  rlimit low = old_lim;
  low.rlim_cur = static_cast<rlim_t>(clients.back().get() + 16);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<UniqueFd> filler;
  for (;;) {
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    filler.emplace_back(fd);
  }
  ASSERT_EQ(errno, EMFILE);
  connect(clients[1].get());
  EXPECT_TRUE(WaitClosed(clients[0].get()));
  EXPECT_EQ(server_->stats().evicted, 1u);
  RawSend(clients[1].get(), RequestFrame(1, "svc", "Hold", ""));
  ASSERT_TRUE(RunUntil([&] { return held.size() == 1; }));
  connect(clients[2].get());
  EXPECT_TRUE(WaitClosed(clients[2].get()));
  EXPECT_EQ(server_->stats().refused, 1u);
  EXPECT_EQ(server_->connection_count(), 1u);
  held[0].Reply("still served");
  FrameReader reader;
  GotFrame g;
  ASSERT_TRUE(RawRead(clients[1].get(), &reader, &g));
  EXPECT_EQ(g.resp().payload, "still served");
  filler.clear();
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old_lim), 0);
}

TEST_F(RpcTest, IdleAndHalfFrameTimeouts) {
  ServerOptions opts;
  opts.idle_timeout_nanos = 100 * kNanosPerMilli;
  opts.frame_timeout_nanos = 10 * kNanosPerSecond;
  StartServer(opts);
  UniqueFd idle = RawConnect();
  int64_t start = MonotonicNanos();
  EXPECT_TRUE(WaitClosed(idle.get()));
  EXPECT_GE(MonotonicNanos() - start, 100 * kNanosPerMilli);

  opts.idle_timeout_nanos = 10 * kNanosPerSecond;
  opts.frame_timeout_nanos = 100 * kNanosPerMilli;
  server_->SetOptions(opts);
  UniqueFd slowloris = RawConnect();
  UniqueFd healthy = RawConnect();
  std::string frame = RequestFrame(1, "svc", "Echo", "x");
  RawSend(slowloris.get(), frame.substr(0, 5));
  start = MonotonicNanos();
  EXPECT_TRUE(WaitClosed(slowloris.get()));
  EXPECT_GE(MonotonicNanos() - start, 100 * kNanosPerMilli);
  EXPECT_EQ(server_->connection_count(), 1u);  // the healthy one has no partial frame
}

TEST_F(RpcTest, IdleTimeoutSparesConnectionsWithCallsInFlight) {
  ServerOptions opts;
  opts.idle_timeout_nanos = 50 * kNanosPerMilli;
  StartServer(opts);
  std::vector<Responder> held;
  server_->Register("svc", "Hold", [&](const CallContext&, std::string_view, Responder r) { held.push_back(r); });
  UniqueFd fd = RawConnect();
  RawSend(fd.get(), RequestFrame(1, "svc", "Hold", ""));
  ASSERT_TRUE(RunUntil([&] { return held.size() == 1; }));
  // Several idle periods pass while the handler works.
  EXPECT_FALSE(RunUntil([&] { return server_->connection_count() == 0; }, 200 * kNanosPerMilli));
  held[0].Reply("done");
  FrameReader reader;
  GotFrame g;
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.resp().payload, "done");
  EXPECT_TRUE(WaitClosed(fd.get()));  // idle again: closed after the timeout
}

TEST_F(RpcTest, RequestTrickledOneByteAtATime) {
  StartServer();
  UniqueFd fd = RawConnect();
  std::string frames = RequestFrame(1, "svc", "Echo", "slow") + RequestFrame(3, "svc", "Echo", "drip");
  for (char ch : frames) {
    RawSend(fd.get(), std::string(1, ch));
    Spin(1);
  }
  FrameReader reader;
  GotFrame g;
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.resp().payload, "slow");
  ASSERT_TRUE(RawRead(fd.get(), &reader, &g));
  EXPECT_EQ(g.resp().payload, "drip");
}

}  // namespace
}  // namespace outpost::wire
