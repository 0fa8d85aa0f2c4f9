// The gRPC client (see grpc_client.h): one client session (wire/grpc_session).
#include "wire/grpc_client.h"

#include "base/sys.h"
#include "wire/grpc_session.h"

namespace outpost::wire {

GrpcClient::GrpcClient(std::unique_ptr<GrpcSession> session) : session_(std::move(session)) {}

GrpcClient::~GrpcClient() = default;

Result<std::unique_ptr<GrpcClient>> GrpcClient::Create(Loop* loop, UniqueFd fd, GrpcClientOptions options) {
  auto session = GrpcSession::Create(loop, std::move(fd), options, nullptr, options.authority);
  if (!session.ok()) return session.error();
  std::unique_ptr<GrpcClient> c(new GrpcClient(std::move(*session)));
  GrpcClient* self = c.get();
  c->session_->SetClosedCallback([self](const Error& why) {
    if (self->on_close_) {
      auto fn = std::move(self->on_close_);
      self->on_close_ = nullptr;
      fn(why);
    }
  });
  return c;
}

Result<std::unique_ptr<GrpcClient>> GrpcClient::Connect(Loop* loop, const std::string& socket_path,
                                                        GrpcClientOptions options) {
  auto fd = sys::UnixConnect(socket_path, true);
  if (!fd.ok()) return fd.error();
  return Create(loop, std::move(*fd), std::move(options));
}

void GrpcClient::Call(std::string_view service, std::string_view method, std::string_view request,
                      int64_t timeout_nanos, Callback done) {
  session_->Unary(service, method, request, timeout_nanos, std::move(done));
}

std::shared_ptr<GrpcCall> GrpcClient::StartCall(std::string_view service, std::string_view method,
                                                int64_t timeout_nanos) {
  return session_->StartCall(service, method, timeout_nanos, nullptr);
}

std::shared_ptr<GrpcCall> GrpcClient::StartCall(std::string_view service, std::string_view method,
                                                int64_t timeout_nanos, const hpack::HeaderList& metadata) {
  return session_->StartCall(service, method, timeout_nanos, &metadata);
}

void GrpcClient::Close() { session_->Close(Error(Code::kUnavailable, "grpc: the client closed the connection")); }

bool GrpcClient::connected() const { return !session_->closed(); }
bool GrpcClient::accepting_calls() const { return session_->accepting_calls(); }
size_t GrpcClient::open_calls() const { return session_->open_calls(); }
size_t GrpcClient::queued_bytes() const { return session_->queued_bytes(); }

}  // namespace outpost::wire
