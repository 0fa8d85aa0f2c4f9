// The CLI's connection to the agent. Owns: connecting to the API socket,
// turning "nobody there" into one clear line (exit code 3), an answer that
// the task's driver is unavailable into its own (exit code 4), and making a
// unary call with a deadline.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"

namespace outpost::wire {
class BlockingClient;
}

namespace outpost::cli {

struct GlobalOptions;

constexpr int64_t kDefaultCallTimeoutNanos = 10LL * 1000000000;

// Calls outpost.v1.Agent/<method>. On failure prints the error (one line)
// and sets *exit_code: kExitNoAgent (3) when the agent cannot be reached
// (no socket, or the connection failed before an answer came),
// kExitDriverUnavailable (4) when the agent answered UNAVAILABLE (the one
// status it gives for a driver it cannot reach), else kExitFailure (1).
Result<std::string> CallAgent(const GlobalOptions& opts, std::string_view method, const std::string& request,
                              int* exit_code, int64_t timeout_nanos = kDefaultCallTimeoutNanos);
// Same, but an error answer of the agent is not printed (only "no agent");
// *exit_code is set the same way.
Result<std::string> CallAgentQuiet(const GlobalOptions& opts, std::string_view method, const std::string& request,
                                   int* exit_code, int64_t timeout_nanos = kDefaultCallTimeoutNanos);

// Many calls on one connection (a command acting on many jobs): connects at
// the first call, and again after a call whose connection failed. Errors
// are reported as CallAgent's (quiet: as CallAgentQuiet's).
class Session {
 public:
  explicit Session(const GlobalOptions& opts);
  ~Session();
  Result<std::string> Call(std::string_view method, const std::string& request, int* exit_code,
                           int64_t timeout_nanos = kDefaultCallTimeoutNanos, bool quiet = false);

 private:
  const GlobalOptions& opts_;
  std::unique_ptr<wire::BlockingClient> client_;
};

}  // namespace outpost::cli
