// The CLI's connection to the agent. Owns: connecting to the API socket,
// turning "nobody there" into one clear line (exit code 3), and making a
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
// and sets *exit_code: 3 when the agent cannot be reached, else 1.
Result<std::string> CallAgent(const GlobalOptions& opts, std::string_view method, const std::string& request,
                              int* exit_code, int64_t timeout_nanos = kDefaultCallTimeoutNanos);
// Same, but an error reply of the agent is not printed (only "no agent").
Result<std::string> CallAgentQuiet(const GlobalOptions& opts, std::string_view method, const std::string& request,
                                   int* exit_code, int64_t timeout_nanos = kDefaultCallTimeoutNanos);

}  // namespace outpost::cli
