#include "cli/client.h"

#include <cerrno>

#include "agent/api.h"
#include "cli/cli.h"
#include "wire/rpc_client.h"

namespace outpost::cli {

namespace {

// Where to look next, for an answer naming a driver plugin.
std::string DriverHint(const std::string& message) {
  return message.find("driver ") == std::string::npos ? "" : " (see `outpost plugins`)";
}

}  // namespace

// Connects, or says why not (exit code 3).
static Result<wire::BlockingClient> ConnectAgent(const GlobalOptions& opts, int* exit_code, int64_t timeout_nanos) {
  auto client = wire::BlockingClient::Connect(opts.socket, timeout_nanos);
  if (!client.ok()) {
    const Error& e = client.error();
    std::string why;
    if (e.code() == Code::kNotFound || e.code() == Code::kUnavailable) {
      why = "no agent is running at " + opts.socket + " (start one with `outpost agent`, or pass --socket PATH)";
    } else if (e.code() == Code::kPermissionDenied) {
      why = "permission denied on " + opts.socket + " (the API is for root and the agent's user; try sudo)";
    } else {
      why = "cannot reach the agent at " + opts.socket + ": " + e.message();
    }
    *exit_code = Fail(kExitNoAgent, why);
    return e;
  }
  return client;
}

namespace {

Result<std::string> CallOn(const GlobalOptions& opts, wire::BlockingClient* client, std::string_view method,
                           const std::string& request, int* exit_code, int64_t timeout_nanos, bool quiet) {
  auto reply = client->Call(agent::kAgentService, method, request, timeout_nanos);
  if (!reply.ok()) {
    const Error& e = reply.error();
    if (!client->answered() && e.code() == Code::kUnavailable) {
      *exit_code = Fail(kExitNoAgent, "the agent at " + opts.socket + " closed the connection: " + e.message());
    } else if (client->answered() && e.code() == Code::kUnavailable) {
      *exit_code = quiet ? kExitDriverUnavailable : Fail(kExitDriverUnavailable, e.message() + DriverHint(e.message()));
    } else {
      *exit_code = quiet ? kExitFailure : Fail(kExitFailure, e.message());
    }
    return e;
  }
  *exit_code = kExitOk;
  return reply;
}

Result<std::string> Call(const GlobalOptions& opts, std::string_view method, const std::string& request,
                         int* exit_code, int64_t timeout_nanos, bool quiet) {
  auto client = ConnectAgent(opts, exit_code, timeout_nanos);
  if (!client.ok()) return client.error();
  return CallOn(opts, &*client, method, request, exit_code, timeout_nanos, quiet);
}

}  // namespace

Session::Session(const GlobalOptions& opts) : opts_(opts) {}
Session::~Session() = default;

Result<std::string> Session::Call(std::string_view method, const std::string& request, int* exit_code,
                                  int64_t timeout_nanos, bool quiet) {
  if (!client_) {
    auto c = ConnectAgent(opts_, exit_code, timeout_nanos);
    if (!c.ok()) return c.error();
    client_ = std::make_unique<wire::BlockingClient>(std::move(*c));
  }
  auto reply = CallOn(opts_, client_.get(), method, request, exit_code, timeout_nanos, quiet);
  // A connection that failed (not an answer) is not used again.
  if (!reply.ok() && !client_->answered()) client_.reset();
  return reply;
}

Result<std::string> CallAgent(const GlobalOptions& opts, std::string_view method, const std::string& request,
                              int* exit_code, int64_t timeout_nanos) {
  return Call(opts, method, request, exit_code, timeout_nanos, false);
}

Result<std::string> CallAgentQuiet(const GlobalOptions& opts, std::string_view method, const std::string& request,
                                   int* exit_code, int64_t timeout_nanos) {
  return Call(opts, method, request, exit_code, timeout_nanos, true);
}

}  // namespace outpost::cli
