// A connection to a plugin over either of its transports: ttRPC (outpost's
// plugins dir) or gRPC (kubelet's plugins_registry). Owns: the one client
// of the connection and the few things the registration engine
// (plugin/watcher, plugin/registry) does with it whatever the transport:
// unary calls, closing, being told it closed. Does not own: what the
// calls mean (the handlers use the client of their transport directly:
// ttrpc() or grpc()).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "wire/grpc_client.h"
#include "wire/rpc_client.h"

namespace outpost::plugin {

enum class Transport { kTtrpc, kGrpc };
const char* TransportName(Transport t);

class PluginConn {
 public:
  using Callback = std::function<void(Result<std::string>)>;

  // fd: a connected unix socket. name: for log lines.
  static Result<std::unique_ptr<PluginConn>> Create(Loop* loop, UniqueFd fd, Transport transport,
                                                    const std::string& name);
  PluginConn(const PluginConn&) = delete;
  PluginConn& operator=(const PluginConn&) = delete;

  // A unary call; done runs exactly once, from a loop callback.
  void Call(std::string_view service, std::string_view method, std::string_view request, int64_t timeout_nanos,
            Callback done);
  // Calls in flight fail with Unavailable, then the close callback runs.
  void Close();
  // Runs once when the connection closes, for any reason.
  void SetCloseCallback(std::function<void(const Error&)> cb);
  bool connected() const;

  Transport transport() const { return ttrpc_ ? Transport::kTtrpc : Transport::kGrpc; }
  wire::RpcClient* ttrpc() const { return ttrpc_.get(); }
  wire::GrpcClient* grpc() const { return grpc_.get(); }

 private:
  PluginConn() = default;
  std::unique_ptr<wire::RpcClient> ttrpc_;
  std::unique_ptr<wire::GrpcClient> grpc_;
};

}  // namespace outpost::plugin
