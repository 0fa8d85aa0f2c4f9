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

Result<std::string> Call(const GlobalOptions& opts, std::string_view method, const std::string& request,
                         int* exit_code, int64_t timeout_nanos, bool quiet) {
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

}  // namespace

Result<std::string> CallAgent(const GlobalOptions& opts, std::string_view method, const std::string& request,
                              int* exit_code, int64_t timeout_nanos) {
  return Call(opts, method, request, exit_code, timeout_nanos, false);
}

Result<std::string> CallAgentQuiet(const GlobalOptions& opts, std::string_view method, const std::string& request,
                                   int* exit_code, int64_t timeout_nanos) {
  return Call(opts, method, request, exit_code, timeout_nanos, true);
}

}  // namespace outpost::cli
