// EXACTLY ONCE ACROSS A KILL AT ANY INSTANT
//
// What survives a killed worker: the FIFO's buffer (the task holds the FIFO
// open O_RDWR), the log files and the cursor file. A killed process loses
// nothing it already handed to the kernel, so nothing here is fsync'd: we
// protect against process death, not power loss.
//
// Invariant: the log files hold exactly the bytes consumed from the FIFO, in
// order, and the FIFO holds the rest.
//
// Data path ("splice mode", the normal case), per chunk:
//  1. Peek: tee(2) the FIFO into a private scratch pipe and read that copy.
//     The FIFO is unchanged. Decide how many bytes to move (whole lines, the
//     rotation boundary, a held partial line).
//  2. Move: splice(2) exactly that many bytes from the FIFO to the active
//     file at its current size. iter_file_splice_write() writes the pipe
//     buffers into the page cache and then releases from the pipe exactly the
//     bytes the write accepted, all under the pipe lock. A fatal signal is
//     only acted on between pages and becomes a short count, so after any
//     kill "written" equals "consumed" byte for byte. Short counts just loop.
// So the invariant holds after every syscall without any record, and on
// restart the active file's size is where writing resumes. The bytes of a
// move cut short by a kill are still at the head of the FIFO and the next
// worker moves them into the same file (they fitted there before).
//
// Rotation is the one multi-step change, so it is the one thing recorded in
// the cursor file, step by step; see the comment at the top of rotator.cc.
// The record is one 64-byte pwrite: a killed writer leaves the old record or
// the new one.
//
// Copy mode is the fallback where the log file's filesystem cannot take a
// splice (EINVAL). Per chunk: record {pending, inode, off, len}; pwrite;
// record {written}; consume len from the FIFO with read(); record {idle}.
// Recovery: {pending} with size >= off+len means the write landed and the
// FIFO was not touched yet: go through {written} and consume len. {pending}
// with less: truncate to off (the bytes are still in the FIFO). {written}:
// whether the consuming read happened cannot be known, so keep the file and
// do not consume. Copy mode is therefore at-least-once: a kill inside that
// one syscall duplicates one chunk instead of losing it.
#include "logs/log_pipe.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "base/sys.h"

namespace outpost::logs {

namespace {

constexpr int kPipeSize = 1 << 20;
// Work per readiness event before yielding to other fds.
constexpr uint64_t kPumpBudget = 4 << 20;
constexpr size_t kDiscardSize = 64 << 10;
constexpr uint32_t kEvents = EPOLLIN | EPOLLET;

}  // namespace

LogPipe::LogPipe(Loop* loop, std::string fifo_path, std::string log_path, std::string cursor_path,
                 RotationPolicy policy, ErrorCallback on_error, TestHooks hooks)
    : loop_(loop),
      fifo_path_(std::move(fifo_path)),
      on_error_(std::move(on_error)),
      hooks_(hooks.crash_at || hooks.fail_write || hooks.max_move || hooks.force_copy
                 ? std::make_unique<TestHooks>(std::move(hooks))
                 : nullptr),
      alive_(std::make_shared<bool>(true)),
      files_(std::move(log_path), std::move(cursor_path), policy, [this](Step step) { return Crash(step); }) {}

const LogPipe::TestHooks& LogPipe::hooks() const {
  static const TestHooks kNone;
  return hooks_ ? *hooks_ : kNone;
}

LogPipe::~LogPipe() {
  if (hold_timer_ != 0) loop_->CancelTimer(hold_timer_);
}

Result<std::unique_ptr<LogPipe>> LogPipe::Open(Loop* loop, const std::string& fifo_path, const std::string& log_path,
                                               const std::string& cursor_path, RotationPolicy policy, uid_t uid,
                                               gid_t gid, ErrorCallback on_error, TestHooks hooks) {
  if (policy.max_file_size < 1 || policy.max_files < 1) {
    return Error(Code::kInvalidArgument, "log rotation: max_file_size and max_files must be at least 1");
  }
  std::unique_ptr<LogPipe> p(
      new LogPipe(loop, fifo_path, log_path, cursor_path, policy, std::move(on_error), std::move(hooks)));
  auto fifo = p->OpenFifo(uid, gid);
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

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError("log pipe: scratch pipe");
  p->scratch_r_.Reset(fds[0]);
  p->scratch_w_.Reset(fds[1]);
  int fifo_size = ::fcntl(p->fifo_.get(), F_GETPIPE_SZ);
  (void)::fcntl(p->scratch_w_.get(), F_SETPIPE_SZ, fifo_size > 0 ? fifo_size : kPipeSize);
  int scratch_size = ::fcntl(p->scratch_w_.get(), F_GETPIPE_SZ);
  if (scratch_size <= 0) return ErrnoError("log pipe: F_GETPIPE_SZ");
  // A peek returns at most the scratch pipe's size; smaller than the FIFO's
  // only costs an extra round.
  p->buf_cap_ = static_cast<size_t>(scratch_size);
  p->hold_cap_ = std::max<size_t>(1, std::min(kMaxHold, p->buf_cap_ / 2));

  (void)p->EnsureSink();  // a failure is an error episode; retried on data
  return p;
}

Result<UniqueFd> LogPipe::OpenFifo(uid_t uid, gid_t gid) {
  struct stat st;
  if (::lstat(fifo_path_.c_str(), &st) == 0) {
    if (!S_ISFIFO(st.st_mode)) {
      return Error(Code::kFailedPrecondition, "log FIFO '" + fifo_path_ + "' exists and is not a FIFO");
    }
  } else if (errno == ENOENT) {
    if (::mkfifo(fifo_path_.c_str(), 0600) != 0 && errno != EEXIST) {
      return ErrnoError("mkfifo '" + fifo_path_ + "'");
    }
  } else {
    return ErrnoError("stat '" + fifo_path_ + "'");
  }
  // O_NOFOLLOW and the fstat check close the window between lstat and open.
  auto fd = sys::Open(fifo_path_, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
  if (!fd.ok()) return fd.error().Wrap("log FIFO");
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("stat '" + fifo_path_ + "'");
  if (!S_ISFIFO(st.st_mode)) {
    return Error(Code::kFailedPrecondition, "log FIFO '" + fifo_path_ + "' exists and is not a FIFO");
  }
  if (::fchown(fd->get(), uid, gid) != 0) return ErrnoError("chown '" + fifo_path_ + "'");
  // Bigger chunks, fewer syscalls, more room while no worker reads. Beyond
  // /proc/sys/fs/pipe-max-size (unprivileged) it fails: keep the default.
  (void)::fcntl(fd->get(), F_SETPIPE_SZ, kPipeSize);
  return std::move(*fd);
}

Result<UniqueFd> LogPipe::OpenWriteEnd() {
  // Not O_NONBLOCK: this becomes the task's stdout/stderr, and programs
  // expect blocking writes. Opening a FIFO O_RDWR never blocks on Linux.
  auto fd = sys::Open(fifo_path_, O_RDWR | O_NOFOLLOW);
  if (!fd.ok()) return fd.error().Wrap("log FIFO");
  struct stat mine, theirs;
  if (::fstat(fd->get(), &theirs) != 0 || ::fstat(fifo_.get(), &mine) != 0) {
    return ErrnoError("stat '" + fifo_path_ + "'");
  }
  if (theirs.st_dev != mine.st_dev || theirs.st_ino != mine.st_ino) {
    return Error(Code::kFailedPrecondition, "log FIFO '" + fifo_path_ + "' was replaced");
  }
  return std::move(*fd);
}

// ---- reading ----------------------------------------------------------------

void LogPipe::OnEvent(uint32_t events) {
  if (dead_) return;
  // EPOLLHUP: the last writer closed. Nothing can complete a partial line now.
  Pump((events & (EPOLLHUP | EPOLLERR)) != 0, kPumpBudget);
}

void LogPipe::Drain() {
  if (dead_) return;
  uint64_t n = FifoBytes();
  if (n > 0) Pump(true, n);
}

uint64_t LogPipe::FifoBytes() const {
  int n = 0;
  if (::ioctl(fifo_.get(), FIONREAD, &n) != 0 || n < 0) return 0;
  return static_cast<uint64_t>(n);
}

void LogPipe::Pump(bool flush, uint64_t budget) {
  uint64_t done = 0;
  while (!dead_) {
    if (done >= budget) {
      // More may be waiting: an edge-triggered MOD re-checks readiness and
      // reports it on the next turn, after other fds had theirs.
      (void)fifo_.Modify(kEvents);
      break;
    }
    char* buf = PeekBuffer(buf_cap_);
    size_t n = Peek(buf);
    if (n == 0) {
      held_ = 0;
      break;
    }
    if (n != held_) last_growth_ = MonotonicNanos();
    const void* nl = ::memrchr(buf, '\n', n);
    size_t complete = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buf) + 1 : 0;
    size_t emit = (flush || n - complete >= hold_cap_) ? n : complete;
    if (emit == 0) {
      held_ = n;  // only a partial line: leave it in the FIFO
      break;
    }
    held_ = 0;
    Emit(buf, emit);
    done += emit;
  }
  if (!dead_ && held_ > 0 && hold_timer_ == 0) {
    hold_timer_ = loop_->AddTimerAt(last_growth_ + kHoldNanos, [this] {
      hold_timer_ = 0;
      OnHoldTimer();
    });
  }
}

void LogPipe::OnHoldTimer() {
  if (dead_ || held_ == 0) return;
  if (MonotonicNanos() < last_growth_ + kHoldNanos) {
    Pump(false, kPumpBudget);  // grew since the timer was set: re-arms for the new deadline
    return;
  }
  // New data the edge did not report is handled normally; otherwise the
  // partial line has waited long enough.
  if (FifoBytes() > held_) {
    Pump(false, kPumpBudget);
  } else {
    Pump(true, held_);
  }
}

// One peek buffer for every LogPipe of the process: the loop is
// single-threaded and a peeked copy is used only within one Pump, so a
// buffer per pipe (1 MiB each, two per task) would only cost memory and make
// every fork copy more page tables.
char* LogPipe::PeekBuffer(size_t cap) {
  static std::unique_ptr<char[]> buf;
  static size_t size = 0;
  if (cap > size) {
    buf.reset(new char[cap]);
    size = cap;
  }
  return buf.get();
}

size_t LogPipe::Peek(char* buf) {
  ssize_t n = sys::RetryEintr([&] { return ::tee(fifo_.get(), scratch_w_.get(), buf_cap_, SPLICE_F_NONBLOCK); });
  if (n <= 0) {
    // EAGAIN: empty; 0: empty and no writer.
    if (n < 0 && errno != EAGAIN) Fail(ErrnoError("tee '" + fifo_path_ + "'"));
    return 0;
  }
  size_t got = 0;
  while (got < static_cast<size_t>(n)) {
    ssize_t r = sys::Read(scratch_r_.get(), buf + got, static_cast<size_t>(n) - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (got < static_cast<size_t>(n)) {
    // Cannot happen with a private pipe; never let a stale copy linger.
    Fail(ErrnoError("read scratch pipe"));
    char sink[256];
    while (sys::Read(scratch_r_.get(), sink, sizeof sink) > 0) {
    }
  }
  if (Crash(Step::kPeeked)) return 0;
  return got;
}

// ---- writing ----------------------------------------------------------------

// Moves len bytes from the head of the FIFO (a copy is at data) into the
// files, rotating as needed, or drops them when the files cannot be written.
void LogPipe::Emit(const char* data, size_t len) {
  const uint64_t max = files_.policy().max_file_size;
  Rotator::Active& file = files_.active();
  while (len > 0 && !dead_) {
    if (!EnsureSink()) {
      if (!dead_) Drop(len);
      return;
    }
    uint64_t room = file.size >= max ? 0 : max - file.size;
    size_t take;
    if (len <= room) {
      take = len;
    } else {
      // Up to the last newline that fits. Else fill the file when the line
      // is longer than a whole file (empty file) or is already split (the
      // file ends inside it: a flushed partial line, or a move cut short by a
      // kill, which this makes end exactly where an uninterrupted run would).
      // Else start a fresh file.
      const void* nl = room > 0 ? ::memrchr(data, '\n', static_cast<size_t>(room)) : nullptr;
      if (nl) {
        take = static_cast<size_t>(static_cast<const char*>(nl) - data) + 1;
      } else if (room > 0 && (file.size == 0 || file.mid_line)) {
        take = static_cast<size_t>(room);
      } else {
        if (!Rotate()) {
          if (!dead_) Drop(len);
          return;
        }
        continue;
      }
    }
    bool failed = false;
    size_t moved = Move(data, take, &failed);
    if (moved > 0) file.mid_line = data[moved - 1] != '\n';
    data += moved;
    len -= moved;
    if (moved < take) {
      // failed: drop the rest of this chunk and try again on the next one.
      // Otherwise the FIFO held less than peeked: the next peek resyncs.
      if (failed && !dead_) Drop(len);
      return;
    }
  }
}

size_t LogPipe::Move(const char* data, size_t len, bool* failed) {
  *failed = false;
  if (copy_mode_ || hooks().force_copy) return MoveCopy(data, len, failed);
  Rotator::Active& file = files_.active();
  size_t moved = 0;
  bool retried = false;
  while (moved < len) {
    size_t want = len - moved;
    if (hooks().max_move > 0) want = std::min(want, hooks().max_move);
    if (Crash(Step::kBeforeMove)) return moved;
    int injected = hooks().fail_write ? hooks().fail_write() : 0;
    loff_t off = static_cast<loff_t>(file.size);
    ssize_t n;
    if (injected != 0) {
      errno = injected;
      n = -1;
    } else {
      n = sys::RetryEintr(
          [&] { return ::splice(fifo_.get(), nullptr, file.fd.get(), &off, want, SPLICE_F_NONBLOCK); });
    }
    if (n < 0) {
      int err = errno;
      if (err == EAGAIN) return moved;
      if (err == EINVAL && injected == 0) {
        // This filesystem has no splice_write (kernels >= 5.10 refuse then).
        log::Warn("log files: splice not supported, using the pwrite fallback (at-least-once on a crash)",
                  {{"log", files_.log_path()}});
        copy_mode_ = true;
        return moved + MoveCopy(data + moved, len - moved, failed);
      }
      if (MakeRoom(err, &retried)) continue;
      Fail(ErrnoError("write '" + files_.log_path() + "'", err));
      *failed = true;
      return moved;
    }
    if (n == 0) return moved;  // empty and no writer: nothing to move
    file.size += static_cast<uint64_t>(n);
    moved += static_cast<size_t>(n);
    stats_.bytes_written += static_cast<uint64_t>(n);
  }
  Written();
  (void)Crash(Step::kAfterMove);
  return moved;
}

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

size_t LogPipe::Consume(size_t len) {
  // The peek buffer may still be in use; discard through a small buffer.
  if (!discard_) discard_.reset(new char[kDiscardSize]);
  size_t done = 0;
  while (done < len) {
    ssize_t n = sys::Read(fifo_.get(), discard_.get(), std::min(len - done, kDiscardSize));
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void LogPipe::Drop(size_t len) { stats_.bytes_dropped += Consume(len); }

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
  // have returned it yet.
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

bool LogPipe::Crash(Step step) {
  if (!dead_ && hooks().crash_at && hooks().crash_at(step)) dead_ = true;
  return dead_;
}

// ---- files, recovery, rotation ---------------------------------------------

bool LogPipe::EnsureSink() {
  if (files_.ready()) return true;
  Status st = Recover();
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
      if (Consume(r.length) != r.length) return Error(Code::kInternal, "log FIFO '" + fifo_path_ + "' is short");
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
