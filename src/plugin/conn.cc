#include "plugin/conn.h"

namespace outpost::plugin {

const char* TransportName(Transport t) { return t == Transport::kTtrpc ? "ttRPC" : "gRPC"; }

Result<std::unique_ptr<PluginConn>> PluginConn::Create(Loop* loop, UniqueFd fd, Transport transport,
                                                       const std::string& name) {
  std::unique_ptr<PluginConn> c(new PluginConn());
  if (transport == Transport::kTtrpc) {
    wire::ClientOptions o;
    o.name = name;
    auto client = wire::RpcClient::Create(loop, std::move(fd), o);
    if (!client.ok()) return client.error();
    c->ttrpc_ = std::move(*client);
  } else {
    wire::GrpcClientOptions o;
    o.name = name;
    auto client = wire::GrpcClient::Create(loop, std::move(fd), o);
    if (!client.ok()) return client.error();
    c->grpc_ = std::move(*client);
  }
  return c;
}

void PluginConn::Call(std::string_view service, std::string_view method, std::string_view request,
                      int64_t timeout_nanos, Callback done) {
  if (ttrpc_) return ttrpc_->Call(service, method, request, timeout_nanos, std::move(done));
  grpc_->Call(service, method, request, timeout_nanos, std::move(done));
}

void PluginConn::Close() {
  if (ttrpc_) return ttrpc_->Close();
  grpc_->Close();
}

void PluginConn::SetCloseCallback(std::function<void(const Error&)> cb) {
  if (ttrpc_) return ttrpc_->SetCloseCallback(std::move(cb));
  grpc_->SetCloseCallback(std::move(cb));
}

bool PluginConn::connected() const { return ttrpc_ ? ttrpc_->connected() : grpc_->connected(); }

}  // namespace outpost::plugin
