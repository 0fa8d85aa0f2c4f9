// One gRPC call as either side sees it: the message stream in each
// direction, half-close, cancellation and the final status. Owns: the
// call's callbacks and what the application may do with an open call.
// Does not own: the HTTP/2 stream under it (wire/h2_conn), the framing of
// messages (wire/grpc_codec) or who made the call (wire/grpc_server,
// wire/grpc_client).
//
// A GrpcCall is handed out as a shared_ptr. The connection keeps its own
// reference while the call is open and drops it when the call ends; the
// application may keep one as long as it likes: every method is safe on a
// call that has ended (writes fail, the rest does nothing). Callbacks run
// from loop callbacks, never from inside a method of the call itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "wire/hpack.h"

namespace outpost::wire {

class H2Conn;

class GrpcCall {
 public:
  using MessageFn = std::function<void(std::string_view message)>;
  using EventFn = std::function<void()>;
  using DoneFn = std::function<void(const Status& status)>;

  // Incoming messages, one at a time, whole (reassembled from DATA frames).
  // The view is valid only during the callback.
  void OnMessage(MessageFn fn) { on_message_ = std::move(fn); }
  // The peer will send no more messages (END_STREAM): a client half-closed
  // its side, or, on the client, the response's messages are all in.
  void OnHalfClose(EventFn fn) { on_half_close_ = std::move(fn); }
  // The call is over, once: on the client with the server's status (or
  // the local reason: deadline, cancellation, connection lost); on the
  // server when the status was sent (ok) or the call was cancelled, timed
  // out or lost its connection (not ok; the status says which).
  void OnDone(DoneFn fn) { on_done_ = std::move(fn); }
  // The write queue went from over the limit back under it.
  void OnWritable(EventFn fn) { on_writable_ = std::move(fn); }

  // Queues one message. Fails with FailedPrecondition on a call that has
  // ended or whose send side is closed, and with ResourceExhausted when
  // the queue already holds more than the connection's per-stream limit
  // (one message always fits into an empty queue): wait for OnWritable.
  // Messages leave as the peer's flow-control windows allow.
  Status Write(std::string_view message);
  // Client: no more messages (END_STREAM after what is queued).
  void CloseSend();
  // Server: ends the call with this status (trailers, after the queued
  // messages; trailers-only when nothing was sent). The message of a
  // failed status goes out as grpc-message, percent-encoded.
  void Finish(const Status& status);
  // Either side: abandons the call (RST_STREAM CANCEL); OnDone runs with
  // Canceled ("call cancelled").
  void Cancel();

  bool done() const { return done_; }
  bool send_closed() const { return send_closed_; }
  size_t queued_bytes() const;
  uint32_t stream_id() const { return stream_id_; }
  // Server: the request headers (metadata included). Client: the response
  // headers, then the trailers appended when they arrive.
  const hpack::HeaderList& headers() const { return headers_; }
  // Monotonic nanoseconds; 0 = none.
  int64_t deadline() const { return deadline_; }

  // For wire/ only.
  GrpcCall(H2Conn* conn, uint32_t stream_id, bool client) : conn_(conn), stream_id_(stream_id), client_(client) {}
  GrpcCall(const GrpcCall&) = delete;
  GrpcCall& operator=(const GrpcCall&) = delete;

 private:
  friend class GrpcSession;
  friend class GrpcServerCore;
  friend class GrpcClient;

  H2Conn* conn_;  // null once the call has ended or its connection is gone
  uint32_t stream_id_;
  bool client_;
  bool done_ = false;
  bool send_closed_ = false;
  bool recv_closed_ = false;
  bool headers_sent_ = false;  // server: response headers went out
  bool got_headers_ = false;   // client: response headers arrived
  bool over_limit_ = false;    // Write refused; OnWritable owed
  int64_t deadline_ = 0;
  hpack::HeaderList headers_;
  std::string partial_;  // an incoming message not yet complete
  MessageFn on_message_;
  EventFn on_half_close_;
  DoneFn on_done_;
  EventFn on_writable_;
};

}  // namespace outpost::wire
