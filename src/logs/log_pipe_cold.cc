// The cold half of logs/log_pipe (the data path is in log_pipe.cc, built for
// speed): opening, recovery after a killed worker, rotation, the copy-mode
// fallback and error reporting, which run per task start, per rotated file or
// per error episode and are built for size. The argument for exactly-once
// delivery is at the top of log_pipe.cc.
#include "logs/log_pipe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "base/sys.h"

namespace outpost::logs {

namespace {

constexpr int kPipeSize = static_cast<int>(LogPipe::kBigFifo);
constexpr uint32_t kEvents = EPOLLIN | EPOLLET;

}  // namespace

std::string FixedLogPaths::Fifo() const { return fifo_; }
std::string FixedLogPaths::Log() const { return log_; }
std::string FixedLogPaths::Cursor() const { return cursor_; }

Result<std::unique_ptr<LogPipe>> LogPipe::Open(Loop* loop, const std::string& fifo_path, const std::string& log_path,
                                               const std::string& cursor_path, RotationPolicy policy, uid_t uid,
                                               gid_t gid, ErrorCallback on_error, TestHooks hooks) {
  return Open(loop, std::make_unique<FixedLogPaths>(fifo_path, log_path, cursor_path), policy, uid, gid,
              std::move(on_error), std::move(hooks));
}

Result<LogPipe::Scratch> LogPipe::SharedScratch() {
  static Scratch s;
  static pid_t owner = 0;
  if (owner == ::getpid()) return s;
  if (owner != 0) {  // inherited from the process we were forked from: not ours to share
    ::close(s.r);
    ::close(s.w);
    s = Scratch();
    owner = 0;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError("log pipe: scratch pipe");
  (void)::fcntl(fds[1], F_SETPIPE_SZ, kPipeSize);
  int size = ::fcntl(fds[1], F_GETPIPE_SZ);
  if (size <= 0) {
    Error e = ErrnoError("log pipe: F_GETPIPE_SZ");
    ::close(fds[0]);
    ::close(fds[1]);
    return e;
  }
  s.r = fds[0];
  s.w = fds[1];
  s.cap = static_cast<size_t>(size);
  owner = ::getpid();
  return s;
}

LogPipe::LogPipe(Loop* loop, std::unique_ptr<const LogPaths> paths, RotationPolicy policy, ErrorCallback on_error,
                 TestHooks hooks)
    : loop_(loop),
      paths_(std::move(paths)),
      on_error_(std::move(on_error)),
      hooks_(hooks.crash_at || hooks.fail_write || hooks.max_move || hooks.force_copy || hooks.now_sec
                 ? std::make_unique<TestHooks>(std::move(hooks))
                 : nullptr),
      files_(paths_.get(), policy, this) {}

LogPipe::~LogPipe() {
  if (hold_timer_ != 0) loop_->CancelTimer(hold_timer_);
}

Result<std::unique_ptr<LogPipe>> LogPipe::Open(Loop* loop, std::unique_ptr<const LogPaths> paths,
                                               RotationPolicy policy, uid_t uid, gid_t gid, ErrorCallback on_error,
                                               TestHooks hooks) {
  if (policy.max_file_size < 1 || policy.max_files < 1) {
    return Error(Code::kInvalidArgument, "log rotation: max_file_size and max_files must be at least 1");
  }
  std::unique_ptr<LogPipe> p(
      new LogPipe(loop, std::move(paths), policy, std::move(on_error), std::move(hooks)));
  bool made = false;
  auto fifo = p->OpenFifo(uid, gid, &made);
  if (!fifo.ok()) return fifo.error();
  LogPipe* raw = p.get();
  // Edge-triggered: a held partial line stays in the FIFO, and level
  // triggering would report it forever. With EPOLLET every new write by the
  // task wakes us (pipe_write wakes epoll readers on each write since 5.15,
  // as before 5.5); the hold timer re-checks in any case. No callback runs
  // before Open returns.
  auto watched = LoopFd::Watch(loop, std::move(*fifo), kEvents, [raw](uint32_t ev) { raw->OnEvent(ev); });
  if (!watched.ok()) return watched.error();
  p->fifo_ = std::move(*watched);

  auto scratch = SharedScratch();
  if (!scratch.ok()) return scratch.error();
  p->scratch_r_ = scratch->r;
  p->scratch_w_ = scratch->w;
  p->scratch_cap_ = static_cast<uint32_t>(scratch->cap);
  p->SetCaps();

  // The log file is made when the task first writes. Only a rotation or a
  // copy-mode write that a killed worker left half done is finished now, so
  // that readers see whole files (a FIFO just made had no worker reading it).
  if (!made) {
    auto record = p->files_.ReadRecord();
    if (!record.ok() || record->state != CursorRecord::kIdle) {
      (void)p->EnsureSink();  // a failure is an error episode; retried on data
    }
    p->files_.Release();
  }
  return p;
}

Result<UniqueFd> LogPipe::OpenFifo(uid_t uid, gid_t gid, bool* made) {
  const std::string fifo = paths_->Fifo();
  struct stat st;
  if (::lstat(fifo.c_str(), &st) == 0) {
    if (!S_ISFIFO(st.st_mode)) {
      return Error(Code::kFailedPrecondition, "log FIFO '" + fifo + "' exists and is not a FIFO");
    }
  } else if (errno == ENOENT) {
    if (::mkfifo(fifo.c_str(), 0600) == 0) {
      *made = true;
    } else if (errno != EEXIST) {
      return ErrnoError("mkfifo '" + fifo + "'");
    }
  } else {
    return ErrnoError("stat '" + fifo + "'");
  }
  // O_NOFOLLOW and the fstat check close the window between lstat and open.
  auto fd = sys::Open(fifo, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
  if (!fd.ok()) return fd.error().Wrap("log FIFO");
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("stat '" + fifo + "'");
  if (!S_ISFIFO(st.st_mode)) {
    return Error(Code::kFailedPrecondition, "log FIFO '" + fifo + "' exists and is not a FIFO");
  }
  if (::fchown(fd->get(), uid, gid) != 0) return ErrnoError("chown '" + fifo + "'");
  // The kernel's default size (64 KiB) until the task writes enough to need
  // more (Grow): most tasks log little, and every 1 MiB FIFO costs 10 KiB of
  // kernel memory for its ring however little it holds.
  return std::move(*fd);
}

void LogPipe::SetCaps() {
  int fifo_size = ::fcntl(fifo_.get(), F_GETPIPE_SZ);
  fifo_size_ = fifo_size > 0 ? static_cast<uint32_t>(fifo_size) : 0;
  // A peek returns at most what the FIFO holds and what the scratch pipe
  // takes; a scratch smaller than the FIFO only costs an extra round.
  buf_cap_ = fifo_size_ > 0 ? std::min(scratch_cap_, fifo_size_) : scratch_cap_;
  hold_cap_ = static_cast<uint32_t>(std::max<size_t>(1, std::min<size_t>(kMaxHold, buf_cap_ / 2)));
}

// A peek found the FIFO at least half full: this task writes in bursts, so
// it gets the big FIFO (bigger chunks, fewer system calls, room for a second
// or so of output while no worker reads). Beyond /proc/sys/fs/pipe-max-size
// or the user's pipe quota (unprivileged) the kernel refuses: it keeps the
// size it has, and the next half-full peek tries again.
void LogPipe::Grow() {
  if (fifo_size_ >= static_cast<size_t>(kPipeSize)) return;
  if (::fcntl(fifo_.get(), F_SETPIPE_SZ, kPipeSize) > 0) SetCaps();
}

Result<UniqueFd> LogPipe::OpenWriteEnd() {
  // Not O_NONBLOCK: this becomes the task's stdout/stderr, and programs
  // expect blocking writes. Opening a FIFO O_RDWR never blocks on Linux.
  const std::string fifo = paths_->Fifo();
  auto fd = sys::Open(fifo, O_RDWR | O_NOFOLLOW);
  if (!fd.ok()) return fd.error().Wrap("log FIFO");
  struct stat mine, theirs;
  if (::fstat(fd->get(), &theirs) != 0 || ::fstat(fifo_.get(), &mine) != 0) {
    return ErrnoError("stat '" + fifo + "'");
  }
  if (theirs.st_dev != mine.st_dev || theirs.st_ino != mine.st_ino) {
    return Error(Code::kFailedPrecondition, "log FIFO '" + fifo + "' was replaced");
  }
  return std::move(*fd);
}

// ---- writing: the fallback and error reporting ---------------------------

size_t LogPipe::MoveCopy(const char* data, size_t len, bool* failed) {
  Rotator::Active& file = files_.active();
  CursorRecord r;
  r.state = CursorRecord::kCopyPending;
  r.inode = file.inode;
  r.offset = file.size;
  r.length = len;
  // Undoes a write that cannot be completed, so the file matches the FIFO.
  auto give_up = [&](const Error& e) {
    (void)::ftruncate(file.fd.get(), static_cast<off_t>(file.size));
    (void)files_.WriteRecord(CursorRecord{});
    Fail(e);
    *failed = true;
    return size_t{0};
  };
  Status st = files_.WriteRecord(r);
  if (!st.ok()) {
    Fail(st.error());
    *failed = true;
    return 0;
  }
  if (Crash(Step::kCopyIntent)) return 0;
  size_t written = 0;
  bool retried = false;
  while (written < len) {
    size_t want = len - written;
    if (hooks().max_move > 0) want = std::min(want, hooks().max_move);
    if (written > 0 && Crash(Step::kBeforeMove)) return 0;
    int injected = hooks().fail_write ? hooks().fail_write() : 0;
    ssize_t n;
    if (injected != 0) {
      errno = injected;
      n = -1;
    } else {
      n = sys::RetryEintr(
          [&] { return ::pwrite(file.fd.get(), data + written, want, static_cast<off_t>(file.size + written)); });
    }
    if (n <= 0) {
      int err = n < 0 ? errno : ENOSPC;
      if (MakeRoom(err, &retried)) continue;
      return give_up(ErrnoError("write '" + files_.log_path() + "'", err));
    }
    written += static_cast<size_t>(n);
  }
  if (Crash(Step::kCopyWritten)) return 0;
  r.state = CursorRecord::kCopyWritten;
  st = files_.WriteRecord(r);
  if (!st.ok()) return give_up(st.error());
  if (Crash(Step::kCopyMarked)) return 0;
  (void)Consume(len);
  if (Crash(Step::kCopyConsumed)) return 0;
  file.size += len;
  stats_.bytes_written += len;
  st = files_.WriteRecord(CursorRecord{});
  if (!st.ok()) {
    Fail(st.error());  // the bytes are written; {written} makes recovery keep them
  } else {
    Written();
  }
  (void)Crash(Step::kAfterMove);
  return len;
}

void LogPipe::Fail(const Error& e) {
  stats_.last_error = e.message();
  if (in_error_) return;
  in_error_ = true;
  dropped_before_ = stats_.bytes_dropped;
  Notify(e.message(), 0);
}

void LogPipe::Written() {
  if (!in_error_) return;
  in_error_ = false;
  stats_.last_error.clear();
  Notify("", stats_.bytes_dropped - dropped_before_);
}

void LogPipe::Notify(std::string error, uint64_t dropped) {
  if (!on_error_) return;
  // Deferred: the callback may destroy this LogPipe, and Open may not even
  // have returned it yet. The guard is made on first use: most pipes never
  // report anything.
  if (!alive_) alive_ = std::make_shared<bool>(true);
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([alive, cb = on_error_, msg = std::move(error), dropped] {
    if (!alive.expired()) cb(msg, dropped);
  });
}

// Out of space: the oldest rotated file of this stream goes first, and the
// write is tried once more (per move) before the data is dropped.
bool LogPipe::MakeRoom(int err, bool* retried) {
  if ((err != ENOSPC && err != EDQUOT) || *retried) return false;
  *retried = true;
  return files_.DeleteOldest();
}

// ---- files, recovery, rotation ---------------------------------------------

bool LogPipe::EnsureSink() {
  if (files_.ready()) return true;
  Status st = files_.released() ? files_.Reopen() : Recover();
  if (dead_) return false;
  if (!st.ok()) {
    files_.active().fd.Reset();
    Fail(st.error());
    return false;
  }
  return true;
}

Status LogPipe::Recover() {
  auto record = files_.ReadRecord();
  if (!record.ok()) return record.error();
  CursorRecord r = *record;
  if (r.state == CursorRecord::kRotating) {
    Status st = files_.Resume(r);
    stats_.rotations = files_.rotations();
    return st;
  }
  OUTPOST_RETURN_IF_ERROR(files_.OpenActive());
  if (r.state == CursorRecord::kIdle) return OkStatus();
  const Rotator::Active& file = files_.active();
  if (r.inode == file.inode) {
    if (r.state == CursorRecord::kCopyPending && file.size >= r.offset + r.length) {
      // Written in full, FIFO untouched: finish the way a live run would.
      r.state = CursorRecord::kCopyWritten;
      OUTPOST_RETURN_IF_ERROR(files_.WriteRecord(r));
      if (Consume(r.length) != r.length) return Error(Code::kInternal, "log FIFO '" + paths_->Fifo() + "' is short");
    } else if (r.state == CursorRecord::kCopyPending) {
      OUTPOST_RETURN_IF_ERROR(files_.Truncate(r.offset));
    }
  }
  return files_.WriteRecord(CursorRecord{});
}

bool LogPipe::Rotate() {
  Status st = files_.Rotate();
  stats_.rotations = files_.rotations();
  if (dead_) return false;
  if (!st.ok()) {
    Fail(st.error().Wrap("rotate '" + files_.log_path() + "'"));
    return false;
  }
  return true;
}

}  // namespace outpost::logs
