// gRPC server on the Loop, over HTTP/2 with prior knowledge on unix sockets
// (what gRPC uses there: no TLS, no ALPN). Owns: accepting connections on
// an already-listening socket, the peer-credential allow-list, the limits
// (connections, concurrent streams, message size, idle and half-frame
// timeouts, write queues), dispatch of calls by :path to registered
// handlers, grpc-timeout deadlines, and the gRPC status of every answer.
// Does not own: creating or binding the socket (the caller does), HTTP/2
// framing (wire/h2_conn), the services.
//
// The API mirrors the ttRPC server's (wire/rpc_server): a unary handler
// gets the request and a Responder to answer with, now or later, once; a
// streaming handler gets the call (wire/grpc_call) to read and write
// messages on and to finish. What a client sees, as grpc-go answers it:
// an unknown service is Unimplemented "unknown service S", an unknown
// method Unimplemented "unknown method M for service S", a unary call with
// no or two request messages Internal "cardinality violation: ...", a
// message over the limit ResourceExhausted "grpc: received message larger
// than max (N vs. M)", a compressed message Unimplemented or Internal, a
// deadline that passes RST_STREAM(CANCEL).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "wire/grpc_call.h"

namespace outpost::wire {

struct GrpcLimits {
  std::string name = "grpc";  // in log lines: server=<name> / client=<name>
  // The largest message accepted (grpc-go's and C-core's default).
  size_t max_message_bytes = 4 << 20;
  // Streams the peer may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS
  // of a server; beyond it: RST_STREAM(REFUSED_STREAM)).
  uint32_t max_concurrent_streams = 100;
  // The largest header list accepted (SETTINGS_MAX_HEADER_LIST_SIZE).
  uint32_t max_header_list_bytes = 16 << 10;
  // A connection with no open stream that moves no bytes for this long is
  // closed (GOAWAY first). 0 = never.
  int64_t idle_timeout_nanos = 60LL * 1000000000;
  // A frame that has started to arrive must be whole within this
  // (slowloris guard); so must a header block (HEADERS + CONTINUATION).
  // 0 = never.
  int64_t frame_timeout_nanos = 10LL * 1000000000;
  // Unsent bytes of one stream (messages waiting for the peer's window)
  // past which Write refuses more (one message always fits).
  size_t stream_queue_bytes = 1 << 20;
  // Unsent bytes of the connection (frames the socket has not taken):
  // above half of it reading pauses until it drains; a peer that takes
  // none of it for idle_timeout is closed.
  size_t write_queue_bytes = 1 << 20;
};

struct GrpcCallContext {
  uint64_t connection_id = 0;
  uint32_t stream_id = 0;
  sys::PeerCred peer{};
  int64_t deadline = 0;  // monotonic nanoseconds; 0 = none
  std::string_view service;  // "pkg.Service"
  std::string_view method;
  const hpack::HeaderList* headers = nullptr;  // the request's, metadata included
};

class GrpcServerCore;

// Where a unary handler sends its one answer. Cheap to copy; only the first
// answer counts; answers after the call ended are dropped.
class GrpcResponder {
 public:
  GrpcResponder() = default;
  explicit GrpcResponder(std::shared_ptr<GrpcCall> call) : call_(std::move(call)) {}
  void Reply(std::string_view message) const;
  // A kOk code is sent as Unknown: an error never reads as success.
  void Fail(const Error& error) const;
  void Finish(const Result<std::string>& result) const;
  bool pending() const { return call_ != nullptr && !call_->done(); }

 private:
  std::shared_ptr<GrpcCall> call_;
};

// request is valid only during the call.
using GrpcUnaryHandler =
    std::function<void(const GrpcCallContext& ctx, std::string_view request, GrpcResponder responder)>;
// Runs when a call's request headers have arrived; messages follow through
// call->OnMessage (set it before returning). Server streaming: one message
// then half-close; client streaming and bidirectional: any number.
using GrpcStreamHandler = std::function<void(const GrpcCallContext& ctx, std::shared_ptr<GrpcCall> call)>;

struct GrpcServerOptions : GrpcLimits {
  GrpcServerOptions() { name = "grpc"; }
  size_t max_connections = 64;
  // Peers whose SO_PEERCRED uid is not listed are logged and closed.
  std::vector<uid_t> allowed_uids = {0, ::getuid()};
  bool allow_any_uid = false;
};

struct GrpcServerStats {
  size_t connections = 0;
  size_t open_calls = 0;
  uint64_t accepted = 0;
  uint64_t refused = 0;
  uint64_t calls = 0;
};

class GrpcServer {
 public:
  // listen_fd: a listening unix stream socket, or an invalid fd for a server
  // that only serves sockets given to AddConnection.
  static Result<std::unique_ptr<GrpcServer>> Create(Loop* loop, UniqueFd listen_fd, GrpcServerOptions options = {});
  // Closes every connection; the handlers of open calls are not told, and
  // their answers are dropped.
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Adds or replaces the handler for /service/method.
  void Register(std::string service, std::string method, GrpcUnaryHandler handler);
  void RegisterStream(std::string service, std::string method, GrpcStreamHandler handler);

  // Serves an already-connected stream socket. Returns the connection id.
  Result<uint64_t> AddConnection(UniqueFd fd);

  // Graceful stop: every connection gets GOAWAY (calls in flight finish,
  // new ones are refused), and closes once its calls are done.
  void Drain();

  GrpcServerStats stats() const;

  // For tests and fuzzers: handles bytes as if read from the connection.
  void FeedForTest(uint64_t connection_id, std::string_view bytes);

 private:
  explicit GrpcServer(std::shared_ptr<GrpcServerCore> core) : core_(std::move(core)) {}
  std::shared_ptr<GrpcServerCore> core_;
};

}  // namespace outpost::wire
