// ttRPC server on the Loop (containerd/ttrpc wire format). Owns: accepting
// connections on an already-listening unix socket, the peer-credential
// allow-list, per-connection framing, dispatch of unary calls to registered
// handlers, deadlines, and the limits that keep a misbehaving client from
// costing unbounded memory or starving others (bounded write queue with
// read backpressure, in-flight cap, connection caps in all and per peer uid,
// idle and half-frame timeouts, a spare fd for running out of fds, repeated
// refusals logged as one line per burst).
// Connections come from the listener, from AddConnection (a connected
// socket) or from AddLink (a ByteLink: an NRI mux connection, wire/mux);
// dispatch is the same for all three.
// Does not own: creating or binding the socket (the caller does), the
// services themselves, the links' transport, or streaming calls (Data
// frames are refused).
//
// Wire behaviour follows containerd/ttrpc: unknown service -> Unimplemented
// "service X", unknown method -> Unimplemented "method X"; stream ids must be
// odd and strictly increasing (InvalidArgument otherwise); an oversize frame
// is skipped and answered with ResourceExhausted on its stream id; a
// successful Response carries only the payload.
//
// Handlers are asynchronous: each gets a Responder it may use at once or
// later, from any loop callback, in any order across calls. The first reply
// wins; replies after the deadline, after a connection closed or after the
// server is gone are dropped safely.
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
#include "wire/codec.h"

namespace outpost::wire {

struct ServerOptions {
  std::string name = "rpc";  // in log lines: server=<name>
  // Connections in all and per peer uid (SO_PEERCRED, root included). A new
  // connection over either limit makes room by closing the oldest idle
  // connection (of that uid, for the per-uid limit); with none idle it is
  // refused: closed at once and counted.
  size_t max_connections = 256;
  size_t max_connections_per_uid = 128;
  // Peers whose SO_PEERCRED uid is not listed are logged and closed.
  std::vector<uid_t> allowed_uids = {0, ::getuid()};
  bool allow_any_uid = false;
  // A connection that moves no bytes for this long while it has nothing in
  // flight (or while its replies sit unread) is closed. 0 = never.
  int64_t idle_timeout_nanos = 60LL * 1000000000;
  // A frame that has started to arrive must complete within this (slowloris
  // guard). 0 = never.
  int64_t frame_timeout_nanos = 10LL * 1000000000;
  // Write queue: above pause bytes we stop reading from the connection until
  // it drains to half; a reply that would push a non-empty queue above max
  // bytes closes the connection instead (the peer is not reading). One reply
  // always fits into an empty queue, so a connection holds at most
  // max(max bytes, one frame) of unsent replies.
  size_t write_queue_pause_bytes = 512 << 10;
  size_t write_queue_max_bytes = 1 << 20;
  // Read buffers of all connections together (each grows with the frame it
  // receives, up to one 4 MiB frame): a connection whose buffer grows past
  // 64 KiB while the total is above this is closed, so clients that start
  // big frames and never finish them cannot take more than this (plus one
  // frame). Small requests are never refused by it.
  size_t read_buffers_max_bytes = 16 << 20;
  // Calls a connection may have waiting for a handler; reading pauses there.
  size_t max_inflight_per_connection = 1024;
};

// Everything a handler learns about a call besides its payload. The views
// (service, method, metadata) are valid only during the handler call.
struct CallContext {
  uint64_t connection_id = 0;
  uint32_t stream_id = 0;
  sys::PeerCred peer{};
  int64_t deadline = 0;  // monotonic nanoseconds from timeout_nano; 0 = none
  std::string_view service;
  std::string_view method;
  const std::vector<MetadataEntry>* metadata = nullptr;
};

class RpcServerCore;
class ByteLink;

// Where a handler sends its one reply. Cheap to copy; every copy refers to
// the same call and only the first reply counts. A default-constructed
// Responder is detached and drops replies.
class Responder {
 public:
  Responder() = default;

  void Reply(std::string_view payload) const;
  // A kOk code is sent as Unknown: an error never reads as success.
  void Fail(const Error& error) const;
  void Finish(const Result<std::string>& result) const;

  // False once the call was answered, timed out, or its connection closed:
  // long-running work may stop early.
  bool pending() const;
  uint32_t stream_id() const { return stream_id_; }

 private:
  friend class RpcServerCore;
  Responder(std::weak_ptr<RpcServerCore> core, uint64_t conn, uint32_t stream)
      : core_(std::move(core)), conn_(conn), stream_id_(stream) {}

  std::weak_ptr<RpcServerCore> core_;
  uint64_t conn_ = 0;
  uint32_t stream_id_ = 0;
};

// payload is valid only during the call; copy what outlives it.
using Handler = std::function<void(const CallContext& ctx, std::string_view payload, Responder responder)>;

struct ServerStats {
  size_t connections = 0;
  size_t pending_calls = 0;
  size_t queued_bytes = 0;      // in all write queues
  size_t max_queued_bytes = 0;  // the largest single write queue
  size_t read_buffers = 0;      // all connections' read buffers
  uint64_t accepted = 0;
  uint64_t refused = 0;  // allow-list, connection limits, out of fds
  uint64_t evicted = 0;  // idle connections closed to make room for new ones
  uint64_t calls = 0;
};

class RpcServer {
 public:
  // listen_fd: a listening, nonblocking unix stream socket, or an invalid fd
  // for a server that only serves sockets given to AddConnection.
  static Result<std::unique_ptr<RpcServer>> Create(Loop* loop, UniqueFd listen_fd, ServerOptions options = {});
  // Closes every connection. Pending Responders become detached. Do not
  // destroy the server from inside one of its handlers' synchronous
  // execution unless you must: it is safe, but the current call's reply is
  // dropped.
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // Adds or replaces the handler for service/method.
  void Register(std::string service, std::string method, Handler handler);

  // Serves an already-connected stream socket (a socketpair end, say). The
  // same limits and allow-list apply. Returns the connection id.
  Result<uint64_t> AddConnection(UniqueFd fd);

  // Serves a connection over a link (wire/mux). peer stands for the
  // SO_PEERCRED of the socket under it (a mux trunk's) and goes through the
  // allow-list and connection limits like a socket's. Differences from a
  // socket connection: no idle or frame timeouts (an NRI plugin stays
  // quiet for hours, and the trunk's owner watches the peer); never evicted
  // to make room; replies go to link->Send whole, so write backpressure is
  // the link's (a mux trunk closes when its queue limit is hit) and the
  // write-queue pause never engages; bytes that arrive while the in-flight
  // cap holds calls back are buffered, bounded by read_buffers_max_bytes.
  // The link's close notice removes the connection; closing the
  // connection (server shutdown, allow-list change) closes the link.
  // Returns the connection id.
  Result<uint64_t> AddLink(std::shared_ptr<ByteLink> link, sys::PeerCred peer);

  // Config reload: new limits apply at once; connections whose peer uid is
  // no longer allowed are closed; nothing else is interrupted.
  void SetOptions(ServerOptions options);
  const ServerOptions& options() const;

  size_t connection_count() const;
  ServerStats stats() const;

 private:
  explicit RpcServer(std::shared_ptr<RpcServerCore> core) : core_(std::move(core)) {}
  std::shared_ptr<RpcServerCore> core_;
};

}  // namespace outpost::wire
