// gRPC client on the Loop, over one HTTP/2 connection (prior knowledge, a
// unix socket). Owns: client stream ids, the calls in flight on the
// connection (many at once, multiplexed), their deadlines (sent as
// grpc-timeout and enforced here: RST_STREAM(CANCEL), DeadlineExceeded),
// and turning what the server sent into a status as grpc-go does (a
// trailers-only answer, a missing grpc-status, a non-200 :status, a reset
// stream, GOAWAY, a lost connection). Does not own: HTTP/2 framing
// (wire/h2_conn), what the messages mean, or reconnecting (a closed client
// stays closed; make a new one) — the same contract as the ttRPC client
// (wire/rpc_client).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "wire/grpc_call.h"
#include "wire/grpc_server.h"

namespace outpost::wire {

class GrpcSession;

struct GrpcClientOptions : GrpcLimits {
  GrpcClientOptions() {
    name = "grpc";
    idle_timeout_nanos = 0;  // a client's connection stays until closed
  }
  // The :authority sent with every call. kubelet sends "localhost" to
  // device plugins; grpc-go servers accept anything.
  std::string authority = "localhost";
};

class GrpcClient {
 public:
  // Success: the one response message. Failure: the server's status as an
  // Error (code and grpc-message), DeadlineExceeded, Canceled, Unavailable
  // (connection lost or GOAWAY before the server took the call)...
  using Callback = std::function<void(Result<std::string> reply)>;
  using CloseCallback = std::function<void(const Error& why)>;

  // fd: a connected stream socket (made nonblocking here). The preface and
  // SETTINGS are sent at once; calls may start before the server's
  // SETTINGS arrive.
  static Result<std::unique_ptr<GrpcClient>> Create(Loop* loop, UniqueFd fd, GrpcClientOptions options = {});
  static Result<std::unique_ptr<GrpcClient>> Connect(Loop* loop, const std::string& socket_path,
                                                     GrpcClientOptions options = {});
  // Calls still open end without their callbacks running.
  ~GrpcClient();
  GrpcClient(const GrpcClient&) = delete;
  GrpcClient& operator=(const GrpcClient&) = delete;

  // A unary call to /service/method. timeout_nanos > 0 sets a deadline; 0
  // means none. done runs exactly once, from a loop callback, never inside
  // Call itself.
  void Call(std::string_view service, std::string_view method, std::string_view request, int64_t timeout_nanos,
            Callback done);

  // A streaming call (any of the three kinds). Set the call's callbacks,
  // then Write and CloseSend; OnDone always runs once (also when the call
  // could not be started: the connection is closed, or the server's stream
  // limit is reached and stays so until the deadline).
  std::shared_ptr<GrpcCall> StartCall(std::string_view service, std::string_view method, int64_t timeout_nanos);
  std::shared_ptr<GrpcCall> StartCall(std::string_view service, std::string_view method, int64_t timeout_nanos,
                                      const hpack::HeaderList& metadata);

  // GOAWAY(NO_ERROR) and close; open calls end with Unavailable (their
  // callbacks run before Close returns), then the close callback runs.
  void Close();
  // Runs once when the connection closes for any reason (not on
  // destruction), after the open calls have ended.
  void SetCloseCallback(CloseCallback cb) { on_close_ = std::move(cb); }

  bool connected() const;
  // False once the server sent GOAWAY: new calls fail with Unavailable.
  bool accepting_calls() const;
  size_t open_calls() const;
  size_t queued_bytes() const;

 private:
  explicit GrpcClient(std::unique_ptr<GrpcSession> session);
  std::unique_ptr<GrpcSession> session_;
  CloseCallback on_close_;
};

}  // namespace outpost::wire
