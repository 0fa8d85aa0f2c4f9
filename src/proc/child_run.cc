#include "proc/child_run.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/clock.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "proc/spawn.h"

namespace outpost::proc {

struct ChildRun::State {
  Loop* loop = nullptr;
  size_t limit = 0;
  std::string stdin_data;
  size_t stdin_off = 0;
  LoopFd in, out, err;
  Loop::TimerId timer = 0;
  bool exited = false;
  bool finished = false;
  int64_t started_mono = 0;
  ChildRunResult result;
  Done done;

  void Read(LoopFd* fd, std::string* into, uint64_t* dropped);
  void Write();
  void MaybeFinish(const std::shared_ptr<State>& self);
};

namespace {

ssize_t WriteNoSigpipe(int fd, const char* data, size_t len);

Result<UniqueFd> OpenCgroup(const std::string& dir) {
  return sys::Open(dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace

void ChildRun::State::Read(LoopFd* fd, std::string* into, uint64_t* dropped) {
  char buf[16384];
  for (;;) {
    ssize_t n = sys::Read(fd->get(), buf, sizeof buf);
    if (n > 0) {
      size_t room = limit > into->size() ? limit - into->size() : 0;
      size_t keep = std::min(room, static_cast<size_t>(n));
      into->append(buf, keep);
      *dropped += static_cast<size_t>(n) - keep;
      continue;
    }
    if (n < 0 && errno == EAGAIN) return;
    fd->Reset();  // EOF or error: nothing more from this stream
    return;
  }
}

namespace {

// write(2) to a pipe whose reader is gone raises SIGPIPE, which would kill
// a process that does not ignore it: block it around the write and discard
// one that became pending (EPIPE tells us instead).
ssize_t WriteNoSigpipe(int fd, const char* data, size_t len) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  ssize_t n = ::write(fd, data, len);
  int err = errno;
  if (n < 0 && err == EPIPE && !was_pending) {
    const timespec zero = {0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

}  // namespace

void ChildRun::State::Write() {
  while (stdin_off < stdin_data.size()) {
    ssize_t n = WriteNoSigpipe(in.get(), stdin_data.data() + stdin_off, stdin_data.size() - stdin_off);
    if (n > 0) {
      stdin_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    break;  // EPIPE: the child does not read its stdin
  }
  in.Reset();  // all written (or refused): the child sees EOF
  stdin_data.clear();
}

void ChildRun::State::MaybeFinish(const std::shared_ptr<State>& self) {
  if (!exited || finished) return;
  // The child is gone: everything it wrote is in the pipes. Drain them and
  // finish, whether or not a descendant still holds them open.
  if (out) Read(&out, &result.out, &result.out_dropped);
  if (err) Read(&err, &result.err, &result.err_dropped);
  out.Reset();
  err.Reset();
  in.Reset();
  if (timer) loop->CancelTimer(timer);
  timer = 0;
  finished = true;
  result.duration_nanos = MonotonicNanos() - started_mono;
  Done cb = std::move(done);
  done = nullptr;
  (void)self;  // keeps this state alive while cb runs (cb may destroy the ChildRun)
  if (cb) cb(result);
}

Result<std::unique_ptr<ChildRun>> ChildRun::Start(Loop* loop, ChildRunRequest req, Done done) {
  auto s = std::make_shared<State>();
  s->loop = loop;
  s->limit = req.output_limit;
  s->done = std::move(done);

  int inp[2], outp[2], errp[2] = {-1, -1};
  if (::pipe2(inp, O_CLOEXEC) != 0) return ErrnoError("pipe");
  UniqueFd in_r(inp[0]), in_w(inp[1]);
  if (::pipe2(outp, O_CLOEXEC) != 0) return ErrnoError("pipe");
  UniqueFd out_r(outp[0]), out_w(outp[1]);
  UniqueFd err_r, err_w;
  if (!req.merge_stderr) {
    if (::pipe2(errp, O_CLOEXEC) != 0) return ErrnoError("pipe");
    err_r.Reset(errp[0]);
    err_w.Reset(errp[1]);
  }
  // Only our ends are non-blocking: the child's stdio block as any program
  // expects.
  for (int fd : {in_w.get(), out_r.get(), err_r.get()}) {
    if (fd >= 0) OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(fd, true));
  }
  UniqueFd cgroup_fd, procs_fd;
  if (!req.cgroup.empty()) {
    auto fd = OpenCgroup(req.cgroup);
    if (!fd.ok()) return fd.error().Wrap("start in cgroup");
    cgroup_fd = std::move(*fd);
    auto procs = sys::Open(req.cgroup + "/cgroup.procs", O_WRONLY);
    if (procs.ok()) procs_fd = std::move(*procs);
  }

  SpawnRequest sr;
  sr.path = req.path;
  sr.argv = std::move(req.argv);
  sr.env = std::move(req.env);
  sr.workdir = req.workdir;
  sr.stdin_fd = in_r.get();
  sr.stdout_fd = out_w.get();
  sr.stderr_fd = req.merge_stderr ? out_w.get() : err_w.get();
  sr.set_credentials = req.set_credentials;
  sr.creds = req.creds;
  sr.rlimits = req.rlimits;
  sr.new_process_group = true;
  sr.cgroup_fd = cgroup_fd.get();
  sr.cgroup_procs_fd = procs_fd.get();
  sr.netns_fd = req.netns_fd;
  sr.hostname = req.hostname;
  s->started_mono = MonotonicNanos();
  auto spawned = Spawn(sr);
  if (!spawned.ok()) return spawned.error();
  pid_t pid = spawned->pid;
  s->result.pid = pid;
  in_r.Reset();
  out_w.Reset();
  err_w.Reset();

  std::weak_ptr<State> weak = s;
  std::unique_ptr<ChildRun> run(new ChildRun(s));  // from here its destructor cleans up
  auto w = LoopFd::Watch(loop, std::move(out_r), EPOLLIN, [weak](uint32_t) {
    if (auto st = weak.lock(); st && st->out) st->Read(&st->out, &st->result.out, &st->result.out_dropped);
  });
  if (!w.ok()) return w.error();
  s->out = std::move(*w);
  if (err_r) {
    auto e = LoopFd::Watch(loop, std::move(err_r), EPOLLIN, [weak](uint32_t) {
      if (auto st = weak.lock(); st && st->err) st->Read(&st->err, &st->result.err, &st->result.err_dropped);
    });
    if (!e.ok()) return e.error();
    s->err = std::move(*e);
  }
  s->stdin_data = std::move(req.stdin_data);
  if (s->stdin_data.empty()) {
    in_w.Reset();  // EOF at once
  } else {
    auto i = LoopFd::Watch(loop, std::move(in_w), EPOLLOUT, [weak](uint32_t) {
      if (auto st = weak.lock(); st && st->in) st->Write();
    });
    if (!i.ok()) return i.error();
    s->in = std::move(*i);
  }
  OUTPOST_RETURN_IF_ERROR(loop->WatchChild(pid, [weak](pid_t, int status) {
    auto st = weak.lock();
    if (!st) return;
    st->exited = true;
    st->result.wait_status = status;
    st->result.exit = DecodeWaitStatus(status);
    st->MaybeFinish(st);
  }));
  if (req.timeout_nanos > 0) {
    s->timer = loop->AddTimer(req.timeout_nanos, [weak, pid] {
      auto st = weak.lock();
      if (!st || st->exited) return;
      st->timer = 0;
      st->result.timed_out = true;
      ::kill(-pid, SIGKILL);
    });
  }
  return run;
}

ChildRun::~ChildRun() {
  State* s = state_.get();
  if (!s->exited) {
    ::kill(-s->result.pid, SIGKILL);
    // Still reaped by the loop, with nobody to tell.
    s->loop->UnwatchChild(s->result.pid);
    (void)s->loop->WatchChild(s->result.pid, [](pid_t, int) {});
  }
  if (s->timer) s->loop->CancelTimer(s->timer);
  s->in.Reset();
  s->out.Reset();
  s->err.Reset();
  s->done = nullptr;
}

pid_t ChildRun::pid() const { return state_->result.pid; }

}  // namespace outpost::proc
