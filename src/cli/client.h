// The CLI's connection to the agent. Owns: connecting to the API socket,
// turning "nobody there" into one clear line (exit code 3), an answer that
// the task's driver is unavailable into its own (exit code 4), and making a
// unary call with a deadline.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"

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

}  // namespace outpost::cli
