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
//  1. Peek: tee(2) the FIFO into the scratch pipe and read that copy.
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
#include <ctime>

#include "base/log.h"
#include "base/sys.h"

namespace outpost::logs {

namespace {

// Work per readiness event before yielding to other fds.
constexpr uint64_t kPumpBudget = 4 << 20;
constexpr size_t kDiscardSize = 64 << 10;
constexpr uint32_t kEvents = EPOLLIN | EPOLLET;

}  // namespace
const LogPipe::TestHooks& LogPipe::hooks() const {
  static const TestHooks kNone;
  return hooks_ ? *hooks_ : kNone;
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
    if (n >= fifo_size_ / 2 && fifo_size_ < kBigFifo) Grow();
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
  // The files' fds are held only during a burst: a worker with thousands of
  // tasks holds no fd for an idle one beyond its FIFO's read end.
  if (!dead_) files_.Release();
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
  ssize_t n = sys::RetryEintr([&] { return ::tee(fifo_.get(), scratch_w_, buf_cap_, SPLICE_F_NONBLOCK); });
  if (n <= 0) {
    // EAGAIN: empty; 0: empty and no writer.
    if (n < 0 && errno != EAGAIN) Fail(ErrnoError("tee '" + paths_->Fifo() + "'"));
    return 0;
  }
  size_t got = 0;
  while (got < static_cast<size_t>(n)) {
    ssize_t r = sys::Read(scratch_r_, buf + got, static_cast<size_t>(n) - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (got < static_cast<size_t>(n)) {
    // Cannot happen (nothing else reads it); never let a stale copy linger
    // into the next pipe's peek.
    Fail(ErrnoError("read scratch pipe"));
    char sink[256];
    while (sys::Read(scratch_r_, sink, sizeof sink) > 0) {
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
  // The second these bytes are written in, for the time index (a coarse
  // clock: the index's resolution is one second).
  timespec now;
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  const uint32_t now_sec = hooks_ && hooks_->now_sec ? hooks_->now_sec() : static_cast<uint32_t>(now.tv_sec);
  while (len > 0 && !dead_) {
    if (!EnsureSink()) {
      if (!dead_) Drop(len);
      return;
    }
    if (!files_.Mark(now_sec) && file.size > 0 && !file.mid_line) {
      // The file's index is full: a new file at this line end.
      if (!Rotate()) {
        if (!dead_) Drop(len);
        return;
      }
      continue;
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

bool LogPipe::Crash(Step step) {
  if (!dead_ && hooks().crash_at && hooks().crash_at(step)) dead_ = true;
  return dead_;
}

}  // namespace outpost::logs
