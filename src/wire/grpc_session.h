// The gRPC calls of one HTTP/2 connection, either side: what the server
// (wire/grpc_server) and the client (wire/grpc_client) share. Owns: the
// h2::Conn, the calls on it by stream id, reading and checking request and
// response headers and trailers, messages in and out (wire/grpc_codec),
// deadlines (one loop timer per call that has one), the statuses of calls
// that end abnormally (reset, GOAWAY, lost connection), the dispatch of a
// server's calls to its handlers, and a client's calls waiting for the
// server's stream limit. Not for use outside wire/grpc_*.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "wire/grpc_call.h"
#include "wire/grpc_server.h"
#include "wire/h2_conn.h"

namespace outpost::wire {

struct GrpcMethod {
  GrpcUnaryHandler unary;    // set for unary methods
  GrpcStreamHandler stream;  // set for streaming ones
};

// A server's methods by service and name.
class GrpcServices {
 public:
  void Add(std::string service, std::string method, GrpcMethod m);
  // Null when unknown; *service_known says whether the service is known.
  std::shared_ptr<const GrpcMethod> Find(std::string_view service, std::string_view method,
                                         bool* service_known) const;

 private:
  std::map<std::string, std::map<std::string, std::shared_ptr<const GrpcMethod>, std::less<>>, std::less<>>
      services_;
};

class GrpcSession : public h2::Handler {
 public:
  using ClosedFn = std::function<void(const Error& why)>;
  using UnaryDone = std::function<void(Result<std::string>)>;

  // services: the server's (null for a client session).
  static Result<std::unique_ptr<GrpcSession>> Create(Loop* loop, UniqueFd fd, const GrpcLimits& limits,
                                                     const GrpcServices* services, std::string authority);
  ~GrpcSession() override;

  // Client.
  std::shared_ptr<GrpcCall> StartCall(std::string_view service, std::string_view method, int64_t timeout_nanos,
                                      const hpack::HeaderList* metadata);
  void Unary(std::string_view service, std::string_view method, std::string_view request, int64_t timeout_nanos,
             UnaryDone done);

  // From GrpcCall.
  Status Write(GrpcCall* call, std::string_view message);
  void CloseSend(GrpcCall* call);
  void Finish(GrpcCall* call, const Status& status);
  void Cancel(GrpcCall* call);
  size_t Queued(const GrpcCall* call) const;

  // GOAWAY: calls in flight finish, new ones are refused; closes when done.
  void Drain();
  // Every open call ends (client: Unavailable; server: Canceled), then
  // the closed callback runs.
  void Close(const Error& why);
  // Runs once when the connection is closed, for any reason.
  void SetClosedCallback(ClosedFn fn) { on_closed_ = std::move(fn); }

  bool closed() const { return conn_ == nullptr || conn_->closed(); }
  bool accepting_calls() const { return !closed() && !conn_->goaway_received(); }
  size_t open_calls() const { return calls_.size() + waiting_.size(); }
  size_t queued_bytes() const { return closed() ? 0 : conn_->queued_bytes(); }
  uint64_t calls_started() const { return calls_started_; }
  uint64_t id() const { return id_; }
  void set_id(uint64_t id) { id_ = id; }
  const sys::PeerCred& peer() const { return peer_; }
  void set_peer(const sys::PeerCred& p) { peer_ = p; }

  void FeedForTest(std::string_view bytes) {
    if (!closed()) conn_->FeedForTest(bytes);
  }

  // h2::Handler
  void OnHeaders(uint32_t stream, hpack::HeaderList* headers, bool initial, bool end_stream) override;
  void OnData(uint32_t stream, std::string_view data, bool end_stream) override;
  void OnStreamReset(uint32_t stream, uint32_t code, bool local) override;
  void OnStreamWritable(uint32_t stream) override;
  void OnGoaway(uint32_t last_stream, uint32_t code, std::string_view debug) override;
  void OnClosed(const Error& why) override;

 private:
  GrpcSession(Loop* loop, const GrpcLimits& limits, const GrpcServices* services, std::string authority);

  bool client() const { return services_ == nullptr; }
  GrpcCall* Find(uint32_t stream) const;
  // Ends the call: removes it, cancels its timer, and tells the
  // application (a unary client call's done, or OnDone): at once, or, when
  // this side ended it (!notify: Finish, Cancel), after the current loop
  // callback.
  void EndCall(const std::shared_ptr<GrpcCall>& call, const Status& status, bool notify);
  // Runs the call's done callback (a unary client call's, or OnDone).
  static void Notify(GrpcCall* call, const Status& status);
  void ArmDeadline(const std::shared_ptr<GrpcCall>& call);
  void OnDeadline(const std::shared_ptr<GrpcCall>& call);
  bool Open(const std::shared_ptr<GrpcCall>& call);
  void OpenWaiting();
  void SendMessage(GrpcCall* call, std::string_view message, bool end);
  // Server.
  void NewServerCall(uint32_t stream, hpack::HeaderList* headers, bool end_stream);
  void TrailersOnly(uint32_t stream, const Error& error, const char* http_status);
  void ServerMessage(const std::shared_ptr<GrpcCall>& call, std::string_view message);
  void ServerHalfClose(const std::shared_ptr<GrpcCall>& call);
  // Client.
  void ClientHeaders(const std::shared_ptr<GrpcCall>& call, hpack::HeaderList* headers, bool initial, bool end);
  void ClientMessage(const std::shared_ptr<GrpcCall>& call, std::string_view message);
  void ClientEnd(const std::shared_ptr<GrpcCall>& call, Status status);

  Loop* loop_;
  GrpcLimits limits_;
  const GrpcServices* services_;
  std::string authority_;
  std::unique_ptr<h2::Conn> conn_;
  uint64_t id_ = 0;
  uint64_t calls_started_ = 0;
  sys::PeerCred peer_{};
  std::unordered_map<uint32_t, std::shared_ptr<GrpcCall>> calls_;
  std::vector<std::shared_ptr<GrpcCall>> waiting_;  // client: for a stream, oldest first
  ClosedFn on_closed_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::wire
