#include "proc/exit_status.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>

#include "base/strings.h"

namespace outpost::proc {

ExitStatus DecodeWaitStatus(int wait_status) {
  ExitStatus s;
  if (WIFEXITED(wait_status)) {
    s.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    s.signal = WTERMSIG(wait_status);
    s.exit_code = 128 + s.signal;
    s.core_dumped = WCOREDUMP(wait_status);
  }
  return s;
}

const char* DescribeExitStatus(const ExitStatus& s, char* buf, size_t len) {
  if (s.signal) {
    std::snprintf(buf, len, "killed by %s%s", SignalName(s.signal), s.core_dumped ? ", core dumped" : "");
  } else {
    std::snprintf(buf, len, "exit code %d", s.exit_code);
  }
  return buf;
}

std::string DescribeExitStatus(const ExitStatus& s) {
  char buf[48];
  return DescribeExitStatus(s, buf, sizeof buf);
}

namespace {

struct SigName {
  const char* name;
  int signo;
};

const SigName kSignals[] = {
    {"SIGHUP", SIGHUP},   {"SIGINT", SIGINT},     {"SIGQUIT", SIGQUIT},   {"SIGILL", SIGILL},
    {"SIGTRAP", SIGTRAP}, {"SIGABRT", SIGABRT},   {"SIGBUS", SIGBUS},     {"SIGFPE", SIGFPE},
    {"SIGKILL", SIGKILL}, {"SIGUSR1", SIGUSR1},   {"SIGSEGV", SIGSEGV},   {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE}, {"SIGALRM", SIGALRM},   {"SIGTERM", SIGTERM},   {"SIGCHLD", SIGCHLD},
    {"SIGCONT", SIGCONT}, {"SIGSTOP", SIGSTOP},   {"SIGTSTP", SIGTSTP},   {"SIGTTIN", SIGTTIN},
    {"SIGTTOU", SIGTTOU}, {"SIGURG", SIGURG},     {"SIGXCPU", SIGXCPU},   {"SIGXFSZ", SIGXFSZ},
    {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF}, {"SIGWINCH", SIGWINCH}, {"SIGIO", SIGIO},
    {"SIGPWR", SIGPWR},   {"SIGSYS", SIGSYS},
};

}  // namespace

Result<int> ParseSignal(const std::string& raw) {
  if (raw.empty()) return Error(Code::kInvalidArgument, "signal name is empty");
  if (raw[0] >= '0' && raw[0] <= '9') {
    auto n = ParseInt(raw, 1, NSIG - 1);
    if (!n.ok()) return Error(Code::kInvalidArgument, "unknown signal \"" + raw + "\" (use a name such as TERM, HUP, USR1, KILL, or a number)");
    return static_cast<int>(*n);
  }
  std::string name;
  for (char c : raw) name += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  if (!StartsWith(name, "SIG")) name = "SIG" + name;
  for (const SigName& s : kSignals) {
    if (name == s.name) return s.signo;
  }
  return Error(Code::kInvalidArgument, "unknown signal \"" + raw + "\" (use a name such as TERM, HUP, USR1, KILL, or a number)");
}

const char* SignalName(int signo) {
  for (const SigName& s : kSignals) {
    if (s.signo == signo) return s.name;
  }
  return "SIG?";
}

}  // namespace outpost::proc
