#include "hooks/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "proc/exit_status.h"

namespace outpost::hooks {

namespace {

// How much of a hook's output a one-line message shows (its last bytes).
constexpr size_t kShownTail = 512;
// Room for a message besides the path and the shown tail.
constexpr size_t kMessageSlack = 160;

// Appends to a fixed buffer, cutting what does not fit; always terminated.
// Allocation-free: InChildHooks::Run formats its message with it in the
// task's child, where allocating is not allowed.
class Text {
 public:
  Text(char* buf, size_t cap) : buf_(buf), cap_(cap) { buf_[0] = '\0'; }
  void Add(const char* s, size_t n) {
    n = std::min(n, cap_ - 1 - len_);
    std::memcpy(buf_ + len_, s, n);
    len_ += n;
    buf_[len_] = '\0';
  }
  void Add(const char* s) { Add(s, std::strlen(s)); }
  void Addf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf_ + len_, cap_ - len_, fmt, ap);
    va_end(ap);
    if (n > 0) len_ = std::min(len_ + static_cast<size_t>(n), cap_ - 1);
  }
  size_t size() const { return len_; }

 private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The end of a hook's output as ": <text>" on one line: trimmed, each line
// break (with the blanks after it) as "; ", other control bytes as spaces,
// the last kShownTail bytes at most ("..." in front when cut, never in the
// middle of a UTF-8 character). Nothing for empty output.
void AddTail(Text* t, const char* s, size_t n) {
  size_t b = 0, e = n;
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  if (b == e) return;
  t->Add(": ");
  if (e - b > kShownTail) {
    b = e - kShownTail;
    while (b < e && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) ++b;
    t->Add("...");
  }
  bool line_break = false;
  for (size_t i = b; i < e; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\r') {
      line_break = true;
      continue;
    }
    if (line_break && IsSpace(static_cast<char>(c))) continue;
    if (line_break) t->Add("; ", 2);
    line_break = false;
    char out = c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c);
    t->Add(&out, 1);
  }
}

// What one run came to, in plain C data, so the agent (DescribeRun) and the
// task's child (InChildHooks) word it the same way.
struct Outcome {
  const char* stage = "";
  const char* path = "";
  const char* start_error = nullptr;  // set: it could not be started
  bool timed_out = false;
  int64_t timeout_seconds = 0;
  int exit_code = 0;
  int signal = 0;
  bool core_dumped = false;
  int64_t duration_nanos = 0;
  const char* tail = "";  // the output to quote on failure
  size_t tail_len = 0;
};

void FormatOutcome(const Outcome& o, Text* t) {
  t->Addf("hook %s %s", o.stage, o.path);
  if (o.start_error) {
    t->Addf(": cannot start: %s", o.start_error);
    return;
  }
  if (o.timed_out) {
    t->Addf(" ran past its timeout of %llds", static_cast<long long>(o.timeout_seconds));
    return;
  }
  long long ms = static_cast<long long>(o.duration_nanos / kNanosPerMilli);
  if (o.signal) {
    t->Addf(": killed by %s%s in %lld ms", proc::SignalName(o.signal), o.core_dumped ? ", core dumped" : "", ms);
  } else if (o.exit_code == 0) {
    // A startContainer hook run inside the task's process reports only
    // that it succeeded (its process exec'd the task).
    if (o.duration_nanos < 0) t->Addf(": exit 0 in the task's process");
    else t->Addf(": exit 0 in %lld ms", ms);
    return;
  } else {
    t->Addf(": exit code %d in %lld ms", o.exit_code, ms);
  }
  AddTail(t, o.tail, o.tail_len);
}

std::string Tail(const std::string& s) { return s.size() <= kTailBytes ? s : s.substr(s.size() - kTailBytes); }

}  // namespace

std::string DescribeRun(const HookRun& r) {
  const char* stage = StageName(r.stage);
  if (r.exit_code < 0) {
    return r.error.empty() ? Format("hook %s %s: cannot start", stage, r.hook.path.c_str()) : r.error;
  }
  Outcome o;
  o.stage = stage;
  o.path = r.hook.path.c_str();
  o.timed_out = r.timed_out;
  o.timeout_seconds = r.timeout_seconds;
  o.exit_code = r.exit_code;
  o.signal = r.signal;
  o.duration_nanos = r.duration_nanos;
  // stderr is where a program says what went wrong; stdout when it did not.
  const std::string& tail = r.err_tail.find_first_not_of(" \t\r\n") != std::string::npos ? r.err_tail : r.out_tail;
  o.tail = tail.data();
  o.tail_len = tail.size();
  std::string buf(r.hook.path.size() + kShownTail * 2 + kMessageSlack, '\0');
  Text t(&buf[0], buf.size());
  FormatOutcome(o, &t);
  buf.resize(t.size());
  return buf;
}

// ---- StageRun --------------------------------------------------------------

struct StageRun::Impl {
  Loop* loop = nullptr;
  Stage stage = Stage::kPrestart;
  std::vector<Hook> hooks;
  std::string state_json;
  StageOptions options;
  Each each;
  Done done;
  size_t next = 0;
  bool stopped = false;  // finished, or the StageRun is gone: call nothing more
  std::unique_ptr<proc::ChildRun> child;
  Status first_failure;

  static void RunNext(const std::shared_ptr<Impl>& self);
  static void OnRun(const std::shared_ptr<Impl>& self, HookRun run, Code code);
};

namespace {

void LogRun(const HookRun& r) {
  const std::string text = DescribeRun(r);
  if (r.ok()) {
    // What a hook that succeeded wrote is kept too (its last bytes).
    if (r.out_tail.empty() && r.err_tail.empty()) return log::Info(text, {{"source", r.hook.source}});
    log::Info(text, {{"source", r.hook.source}, {"stdout", r.out_tail}, {"stderr", r.err_tail}});
    return;
  }
  log::Warn(text, {{"source", r.hook.source}, {"stdout", r.out_tail}, {"stderr", r.err_tail}});
}

}  // namespace

void StageRun::Impl::OnRun(const std::shared_ptr<Impl>& self, HookRun run, Code code) {
  if (!run.ok() && self->first_failure.ok()) self->first_failure = Error(code, run.error);
  LogRun(run);
  // A copy: each may destroy the StageRun, which clears self->each.
  Each each = self->each;
  if (each) each(run);
  if (self->stopped) return;
  if (!run.ok() && !self->options.continue_after_failure) self->next = self->hooks.size();
  RunNext(self);
}

void StageRun::Impl::RunNext(const std::shared_ptr<Impl>& self) {
  if (self->stopped) return;
  if (self->next >= self->hooks.size()) {
    self->stopped = true;
    self->each = nullptr;
    Done done = std::move(self->done);
    self->done = nullptr;
    if (done) done(self->first_failure);
    return;
  }
  const Hook& hook = self->hooks[self->next++];
  HookRun run;
  run.stage = self->stage;
  run.hook = hook;
  run.timeout_seconds = hook.timeout_seconds > 0 ? hook.timeout_seconds : self->options.default_timeout_seconds;
  run.started_unix_nanos = WallNanos();

  proc::ChildRunRequest req;
  req.path = hook.path;
  req.argv = hook.Argv();
  req.env = hook.env;
  req.stdin_data = self->state_json;
  req.output_limit = self->options.output_limit;
  req.timeout_nanos = run.timeout_seconds > 0 ? run.timeout_seconds * kNanosPerSecond : 0;
  const int64_t started_mono = MonotonicNanos();
  std::weak_ptr<Impl> weak = self;
  auto child = proc::ChildRun::Start(self->loop, std::move(req), [weak, run](const proc::ChildRunResult& r) mutable {
    auto s = weak.lock();
    if (!s || s->stopped) return;
    run.duration_nanos = r.duration_nanos;
    run.exit_code = r.exit.exit_code;
    run.signal = r.exit.signal;
    run.timed_out = r.timed_out;
    run.out_tail = Tail(r.out);
    run.err_tail = Tail(r.err);
    if (!r.Succeeded()) run.error = DescribeRun(run);
    OnRun(s, std::move(run), r.timed_out ? Code::kDeadlineExceeded : Code::kFailedPrecondition);
  });
  if (!child.ok()) {
    // Not started (no such program, not executable, no fds): a failed hook
    // like any other, reported from here (we run from the loop).
    run.duration_nanos = MonotonicNanos() - started_mono;
    run.exit_code = -1;
    Outcome o;
    o.stage = StageName(run.stage);
    o.path = hook.path.c_str();
    o.start_error = child.error().message().c_str();
    std::string buf(hook.path.size() + child.error().message().size() + kMessageSlack, '\0');
    Text t(&buf[0], buf.size());
    FormatOutcome(o, &t);
    buf.resize(t.size());
    run.error = std::move(buf);
    OnRun(self, std::move(run), child.error().code());
    return;
  }
  self->child = std::move(*child);
}

std::unique_ptr<StageRun> StageRun::Start(Loop* loop, Stage stage, std::vector<Hook> hooks, std::string state_json,
                                          StageOptions options, Each each, Done done) {
  std::unique_ptr<StageRun> run(new StageRun());
  run->impl_ = std::make_shared<Impl>();
  Impl& m = *run->impl_;
  m.loop = loop;
  m.stage = stage;
  m.hooks = std::move(hooks);
  m.state_json = std::move(state_json);
  m.options = options;
  m.each = std::move(each);
  m.done = std::move(done);
  // The first hook starts from the loop, so that nothing is ever called
  // from inside Start (an empty stage included).
  std::weak_ptr<Impl> weak = run->impl_;
  loop->Defer([weak] {
    if (auto s = weak.lock()) Impl::RunNext(s);
  });
  return run;
}

StageRun::~StageRun() {
  if (!impl_) return;
  impl_->stopped = true;
  impl_->child.reset();  // kills a hook still running, with its process group
  impl_->each = nullptr;
  impl_->done = nullptr;
}

// ---- InChildHooks ----------------------------------------------------------

namespace {

// The merged stdout+stderr a hook in the child keeps: its last bytes.
constexpr size_t kChildOutput = 2 * kTailBytes;
// Without a pidfd (kernels before 5.3) the hook's exit is noticed by polling
// waitpid at this interval.
constexpr int kExitPollMillis = 20;

struct ChildHook {
  std::string path;
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;  // into argv_s, env_s; null-terminated
  int64_t timeout_seconds = 0;
};

std::vector<char*> CStrings(std::vector<std::string>* v) {
  std::vector<char*> out;
  out.reserve(v->size() + 1);
  for (std::string& s : *v) out.push_back(&s[0]);
  out.push_back(nullptr);
  return out;
}

// strerror without its locale machinery (which may allocate).
const char* ErrText(int err) {
  const char* s = strerrordesc_np(err);
  return s ? s : "unknown error";
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// In the hook's process, between clone and exec: async-signal-safe calls
// only. An exec failure goes back as an errno over report_w (close-on-exec,
// so it reads EOF when the exec worked).
[[noreturn]] void ExecHook(const ChildHook& h, int in_r, int out_w, int report_w) {
  ::setpgid(0, 0);
  // Sources above 2 first, so that no dup2 into 0..2 clobbers a source.
  int in = ::fcntl(in_r, F_DUPFD_CLOEXEC, 3), out = ::fcntl(out_w, F_DUPFD_CLOEXEC, 3);
  int err = 0;
  if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0) {
    err = errno;
  } else {
    // A clean slate as any exec'd program expects (we ignore SIGPIPE while
    // hooks run, and an ignored signal would stay ignored across exec).
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) {
      if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(h.path.c_str(), h.argv.data(), h.envp.data());
    err = errno;
  }
  ssize_t r;
  do {
    r = ::write(report_w, &err, sizeof err);
  } while (r < 0 && errno == EINTR);
  ::_exit(err == ENOENT ? 127 : 126);
}

}  // namespace

struct InChildHooks::Impl {
  Stage stage = Stage::kPrestart;
  std::vector<ChildHook> hooks;
  // The state with the child's own pid, assembled by Run (no allocation):
  // state_head + pid digits + state_tail into state_buf.
  std::string state_head, state_tail;
  std::vector<char> state_buf;
  size_t state_len = 0;
  char output[kChildOutput];  // a ring: the last bytes of the current hook's output
  uint64_t output_total = 0;
  char linear[kChildOutput];  // the ring in order, for the message
  std::vector<char> message;  // sized in Prepare for the longest path

  int RunOne(const ChildHook& h);
  void Keep(const char* data, size_t n);
  bool Drain(int fd);
  int Fail(const ChildHook& h, Outcome o, int code);
};

void InChildHooks::Impl::Keep(const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) output[(output_total + i) % kChildOutput] = data[i];
  output_total += n;
}

// Reads what is there; false at EOF or on an error (the stream is done).
bool InChildHooks::Impl::Drain(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      Keep(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

int InChildHooks::Impl::Fail(const ChildHook& h, Outcome o, int code) {
  o.stage = StageName(stage);
  o.path = h.path.c_str();
  size_t n = static_cast<size_t>(std::min<uint64_t>(output_total, kChildOutput));
  size_t start = output_total > kChildOutput ? static_cast<size_t>(output_total % kChildOutput) : 0;
  for (size_t i = 0; i < n; ++i) linear[i] = output[(start + i) % kChildOutput];
  o.tail = linear;
  o.tail_len = n;
  Text t(message.data(), message.size());
  FormatOutcome(o, &t);
  return code;
}

int InChildHooks::Impl::RunOne(const ChildHook& h) {
  output_total = 0;
  Outcome o;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, report[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    int err = errno;
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &report[0], &report[1]}) CloseFd(fd);
    o.start_error = ErrText(err);
    return Fail(h, o, err);
  }
  const int64_t started = MonotonicNanos();
  // A raw fork: libc's fork() would run atfork handlers, which may allocate.
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (pid == 0) ExecHook(h, in[0], out[1], report[1]);
  int clone_err = errno;
  CloseFd(&in[0]);
  CloseFd(&out[1]);
  CloseFd(&report[1]);
  if (pid < 0) {
    for (int* fd : {&in[1], &out[0], &report[0]}) CloseFd(fd);
    o.start_error = ErrText(clone_err);
    return Fail(h, o, clone_err);
  }
  // The hook does this too; whichever runs first, kill(-pid) finds the group.
  ::setpgid(pid, pid);
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  int pidfd = sys::PidfdOpen(pid);
  const int64_t deadline = h.timeout_seconds > 0 ? started + h.timeout_seconds * kNanosPerSecond : 0;
  size_t written = 0;
  if (state_len == 0) CloseFd(&in[1]);
  int status = 0;
  bool exited = false;
  while (!exited) {
    pollfd fds[3];
    nfds_t n = 0;
    if (in[1] >= 0) fds[n++] = {in[1], POLLOUT, 0};
    if (out[0] >= 0) fds[n++] = {out[0], POLLIN, 0};
    if (pidfd >= 0) fds[n++] = {pidfd, POLLIN, 0};
    int wait_ms = pidfd >= 0 ? -1 : kExitPollMillis;
    if (deadline) {
      int64_t left = deadline - MonotonicNanos();
      if (left <= 0) {
        o.timed_out = true;
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);  // in case it never got its own group
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      int left_ms = static_cast<int>(std::min<int64_t>((left + kNanosPerMilli - 1) / kNanosPerMilli, 60000));
      wait_ms = wait_ms < 0 ? left_ms : std::min(wait_ms, left_ms);
    }
    ::poll(fds, n, wait_ms);  // EINTR: just look again
    if (in[1] >= 0) {
      ssize_t w = ::write(in[1], state_buf.data() + written, state_len - written);
      if (w > 0) written += static_cast<size_t>(w);
      // All written, or refused (EPIPE: it does not read its stdin): EOF.
      if (written == state_len || (w < 0 && errno != EAGAIN && errno != EINTR)) CloseFd(&in[1]);
    }
    if (out[0] >= 0 && !Drain(out[0])) CloseFd(&out[0]);
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
  }
  // Everything the hook wrote is in the pipe now; a descendant still
  // holding it open cannot hold us up (the read is non-blocking).
  if (out[0] >= 0) Drain(out[0]);
  int exec_err = 0;
  bool exec_failed = ::read(report[0], &exec_err, sizeof exec_err) == static_cast<ssize_t>(sizeof exec_err);
  for (int* fd : {&in[1], &out[0], &report[0], &pidfd}) CloseFd(fd);
  o.duration_nanos = MonotonicNanos() - started;
  o.timeout_seconds = h.timeout_seconds;
  if (o.timed_out) return Fail(h, o, ETIMEDOUT);
  if (exec_failed) {
    o.start_error = ErrText(exec_err);
    return Fail(h, o, exec_err ? exec_err : ENOEXEC);
  }
  proc::ExitStatus st = proc::DecodeWaitStatus(status);
  if (st.exit_code == 0 && st.signal == 0) return 0;
  o.exit_code = st.exit_code;
  o.signal = st.signal;
  o.core_dumped = st.core_dumped;
  return Fail(h, o, ECANCELED);
}

Result<std::unique_ptr<InChildHooks>> InChildHooks::Prepare(Stage stage, const std::vector<Hook>& hooks,
                                                            const State& state,
                                                            int64_t default_timeout_seconds) {
  std::unique_ptr<InChildHooks> p(new InChildHooks());
  p->impl_ = std::make_unique<Impl>();
  Impl& m = *p->impl_;
  m.stage = stage;
  // The state with a pid of 1, split around it: Run puts its own in.
  State with_pid = state;
  with_pid.pid = 1;
  std::string json = StateJson(with_pid);
  const std::string marker = "\"pid\":1,";
  size_t at = json.find(marker);
  if (at == std::string::npos) return Error(Code::kInternal, "hook state without a pid: " + json);
  m.state_head = json.substr(0, at + marker.size() - 2);  // up to and including "pid":
  m.state_tail = json.substr(at + marker.size() - 1);     // from the comma on
  m.state_buf.assign(m.state_head.size() + m.state_tail.size() + 24, '\0');
  // Sized first: the char* arrays point into the strings, which must not move.
  m.hooks.resize(hooks.size());
  size_t longest = 0;
  for (size_t i = 0; i < hooks.size(); ++i) {
    const Hook& h = hooks[i];
    if (h.path.empty() || h.path[0] != '/') {
      return Error(Code::kInvalidArgument, Format("hook %s #%zu: path \"%s\" is not absolute", StageName(stage), i,
                                                  h.path.c_str()));
    }
    ChildHook& c = m.hooks[i];
    c.path = h.path;
    c.argv_s = h.Argv();
    c.env_s = h.env;
    c.argv = CStrings(&c.argv_s);
    c.envp = CStrings(&c.env_s);
    c.timeout_seconds = h.timeout_seconds > 0 ? h.timeout_seconds : default_timeout_seconds;
    longest = std::max(longest, h.path.size());
  }
  m.message.assign(longest + kShownTail * 2 + kMessageSlack, '\0');
  return p;
}

InChildHooks::~InChildHooks() = default;

int InChildHooks::Run() {
  Impl& m = *impl_;
  // A hook that does not read its stdin must not kill us with SIGPIPE (the
  // write gets EPIPE instead); and SIGCHLD must not be ignored, or the
  // kernel would reap the hook before we can wait for it.
  struct sigaction ign, dfl, old_pipe, old_chld;
  std::memset(&ign, 0, sizeof ign);
  std::memset(&dfl, 0, sizeof dfl);
  ign.sa_handler = SIG_IGN;
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &ign, &old_pipe);
  ::sigaction(SIGCHLD, &dfl, &old_chld);
  // The state, with our pid (the task's: this process execs the task next).
  char digits[24];
  size_t nd = 0;
  for (unsigned long v = static_cast<unsigned long>(::getpid()); v > 0 || nd == 0; v /= 10) {
    digits[nd++] = static_cast<char>('0' + v % 10);
  }
  char* out = m.state_buf.data();
  std::memcpy(out, m.state_head.data(), m.state_head.size());
  size_t len = m.state_head.size();
  while (nd > 0) out[len++] = digits[--nd];
  std::memcpy(out + len, m.state_tail.data(), m.state_tail.size());
  m.state_len = len + m.state_tail.size();
  int rc = 0;
  for (const ChildHook& h : m.hooks) {
    rc = m.RunOne(h);
    if (rc != 0) break;
  }
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::sigaction(SIGCHLD, &old_chld, nullptr);
  return rc;
}

const char* InChildHooks::message() const { return impl_->message.data(); }

bool InChildHooks::empty() const { return impl_->hooks.empty(); }

}  // namespace outpost::hooks
