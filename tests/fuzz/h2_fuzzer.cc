// libFuzzer target for wire/h2_conn and the gRPC session over it: the input
// is what a peer sends after the connection preface, handed to the side
// under test in chunks (sizes taken from the input), as if read from its
// socket. Byte 0 picks the side and the chunking:
//   bit 0-1  0: a server h2::Conn, 1: a client h2::Conn with three streams
//            open, 2-3: a gRPC server (unary, streaming and holding methods)
//            through its real socket
//   bit 2-7  chunking pattern
// Invariants: nothing crashes or leaks; the connection's unsent bytes stay
// within the write queue bound plus one frame's answer; a closed connection
// is closed once and calls nothing after.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "loop/loop.h"
#include "wire/grpc_server.h"
#include "wire/h2_conn.h"

namespace {

using namespace outpost;
using namespace outpost::wire;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

class Sink : public h2::Handler {
 public:
  void OnHeaders(uint32_t, hpack::HeaderList* h, bool, bool) override {
    Check(!closed);
    for (const auto& f : *h) Check(!f.name.empty());
  }
  void OnData(uint32_t, std::string_view, bool) override { Check(!closed); }
  void OnStreamReset(uint32_t, uint32_t, bool) override { Check(!closed); }
  void OnStreamWritable(uint32_t) override { Check(!closed); }
  void OnGoaway(uint32_t, uint32_t, std::string_view) override { Check(!closed); }
  void OnClosed(const Error&) override {
    Check(!closed);
    closed = true;
  }
  bool closed = false;
};

Loop* TheLoop() {
  static Loop* loop = [] {
    log::SetLevel(log::Level::kError);
    return Loop::Create().value().release();
  }();
  return loop;
}

std::string Start(bool client_side) {
  std::string s;
  if (!client_side) s.append(h2::kClientPreface, sizeof h2::kClientPreface);
  h2::AppendFrameHeader(&s, 0, h2::kSettings, 0, 0);
  return s;
}

void FeedConn(bool client, uint8_t pattern, const uint8_t* p, size_t n) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return;
  UniqueFd keep(sv[0]);
  Sink sink;
  h2::ConnOptions o;
  o.client = client;
  o.write_queue_bytes = 64 << 10;
  auto c = h2::Conn::Create(TheLoop(), UniqueFd(sv[1]), o, &sink);
  if (!c.ok()) return;
  std::unique_ptr<h2::Conn> conn = std::move(*c);
  if (client) {
    for (int i = 0; i < 3; ++i) (void)conn->OpenStream({{":method", "POST"}, {":path", "/a/b"}}, i == 2);
  }
  std::string start = Start(client);
  conn->FeedForTest(start);
  size_t i = 0;
  while (n > 0 && !sink.closed) {
    size_t chunk = 1 + ((pattern >> (i % 6)) & 1 ? (i * 7 + pattern) % 211 : pattern % 17);
    if (chunk > n) chunk = n;
    conn->FeedForTest(std::string_view(reinterpret_cast<const char*>(p), chunk));
    if (!sink.closed) {
      Check(conn->queued_bytes() <= size_t{(64 << 10) + (1 << 20) * 3 + 64 * 1024});
      if (client && i % 3 == 0) conn->SendData(1, "xy", "z", false);
    }
    p += chunk;
    n -= chunk;
    ++i;
  }
  conn.reset();
  (void)TheLoop()->RunOnce(0);
}

// One gRPC server for every input (its methods registered once); each
// input is a new connection to it.
GrpcServer* TheServer(std::vector<GrpcResponder>** held_out) {
  static std::vector<GrpcResponder> held;
  static GrpcServer* server = [] {
    GrpcServerOptions o;
    o.max_message_bytes = 4096;
    o.max_concurrent_streams = 8;
    GrpcServer* s = GrpcServer::Create(TheLoop(), UniqueFd(), o).value().release();
    s->Register("s", "echo", [](const GrpcCallContext&, std::string_view m, GrpcResponder r) { r.Reply(m); });
    s->Register("s", "fail", [](const GrpcCallContext&, std::string_view, GrpcResponder r) {
      r.Fail(Error(Code::kNotFound, "no\n%"));
    });
    s->Register("s", "hold", [](const GrpcCallContext&, std::string_view, GrpcResponder r) { held.push_back(r); });
    s->RegisterStream("s", "bidi", [](const GrpcCallContext&, std::shared_ptr<GrpcCall> call) {
      GrpcCall* c = call.get();
      call->OnMessage([c](std::string_view m) {
        if (m.empty()) return c->Finish(OkStatus());
        (void)c->Write(m);
      });
    });
    return s;
  }();
  *held_out = &held;
  return server;
}

void FeedServer(uint8_t pattern, const uint8_t* p, size_t n) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) return;
  UniqueFd peer(sv[0]);
  std::vector<GrpcResponder>* held = nullptr;
  GrpcServer* server = TheServer(&held);
  auto id = server->AddConnection(UniqueFd(sv[1]));
  if (!id.ok()) return;
  server->FeedForTest(*id, Start(false));
  size_t i = 0;
  while (n > 0) {
    size_t chunk = 1 + ((pattern >> (i % 6)) & 1 ? (i * 13 + pattern) % 997 : pattern % 29);
    if (chunk > n) chunk = n;
    server->FeedForTest(*id, std::string_view(reinterpret_cast<const char*>(p), chunk));
    p += chunk;
    n -= chunk;
    ++i;
  }
  for (auto& r : *held) r.Reply("late");
  held->clear();
  // The peer hangs up: the connection closes on the next turn of the loop.
  peer.Reset();
  for (int turn = 0; turn < 10 && server->stats().connections != 0; ++turn) (void)TheLoop()->RunOnce(0);
  Check(server->stats().connections == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] & 3;
  const auto pattern = static_cast<uint8_t>(data[0] >> 2);
  if (mode >= 2) {
    FeedServer(pattern, data + 1, size - 1);
  } else {
    FeedConn(mode == 1, pattern, data + 1, size - 1);
  }
  return 0;
}
