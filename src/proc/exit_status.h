// Exit statuses and signals. Owns: the one decoding of a waitpid() status
// into a shell-style exit code (128+signo for a signal death) and the one
// wording of it ("exit code 3", "killed by SIGKILL"), signal names and their
// parsing. Allocation-free where the keeper uses it (DecodeWaitStatus,
// DescribeExitStatus, SignalName).
#pragma once

#include <cstddef>
#include <string>

#include "base/error.h"

namespace outpost::proc {

struct ExitStatus {
  int exit_code = 0;  // the process's status, or 128+signo
  int signal = 0;     // the signal that killed it, 0 if it exited
  bool core_dumped = false;
};

ExitStatus DecodeWaitStatus(int wait_status);

// "exit code 3" or "killed by SIGKILL" (", core dumped" when it did) into
// buf; returns buf.
const char* DescribeExitStatus(const ExitStatus& s, char* buf, size_t len);
std::string DescribeExitStatus(const ExitStatus& s);

// "SIGTERM"; "SIG?" for a number without a name.
const char* SignalName(int signo);
// "SIGTERM", "TERM", "term" or a number. Unknown → InvalidArgument.
Result<int> ParseSignal(const std::string& name);

}  // namespace outpost::proc
