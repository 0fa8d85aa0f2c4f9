// One gRPC call as either side sees it: the message stream in each
// direction, half-close, cancellation and the final status. Owns: the
// call's callbacks and what the application may do with an open call.
// Does not own: the HTTP/2 stream under it (wire/h2_conn), the framing of
// messages (wire/grpc_codec) or the connection's calls (wire/grpc_session).
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
#include "wire/grpc_codec.h"
#include "wire/hpack.h"

namespace outpost::wire {

class GrpcSession;
struct GrpcMethod;

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
  // The call is over: runs exactly once, however it ended. On the client
  // with the server's status or the local reason (deadline, Cancel,
  // connection lost, GOAWAY); on the server with the status this side
  // finished with, or why the call ended without it (the client cancelled:
  // Canceled; the deadline passed: DeadlineExceeded; the connection was
  // lost: Canceled). When this side ended the call (Finish, Cancel), it
  // runs after the current loop callback.
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
  // Either side: abandons the call (RST_STREAM CANCEL).
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
  GrpcCall(GrpcSession* session, bool client) : session_(session), client_(client) {}
  GrpcCall(const GrpcCall&) = delete;
  GrpcCall& operator=(const GrpcCall&) = delete;

 private:
  friend class GrpcSession;

  GrpcSession* session_;  // null once the call has ended
  uint32_t stream_id_ = 0;  // 0 on a client call still waiting for a stream
  bool client_;
  bool done_ = false;
  bool send_closed_ = false;
  bool headers_sent_ = false;  // server: the response headers went out
  bool got_headers_ = false;   // client: the response headers arrived
  int64_t deadline_ = 0;
  uint64_t deadline_timer_ = 0;  // a Loop timer
  hpack::HeaderList headers_;
  grpc::MessageReader reader_{0};
  std::string encoding_;  // the peer's grpc-encoding
  std::string waiting_;   // client: messages written before the stream opened
  // Unary calls: the one message and where the answer goes.
  std::string unary_message_;
  int unary_count_ = 0;
  std::function<void(Result<std::string>)> unary_done_;
  std::shared_ptr<const GrpcMethod> method_;    // server: the handler
  std::string service_, method_name_;                // server: from :path
  MessageFn on_message_;
  EventFn on_half_close_;
  DoneFn on_done_;
  EventFn on_writable_;
};

}  // namespace outpost::wire
