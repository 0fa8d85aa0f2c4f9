// One task output stream (stdout or stderr) from its FIFO into rotating log
// files. Owns: the FIFO's read end (and its loop registration), the hold
// timer and a Rotator (logs/rotator), which opens the active log file and
// the cursor file (a small crash-recovery record) while it writes, and does
// the rotation. Does not own: the task's end of the FIFO (OpenWriteEnd hands it to
// the spawner), the log directory, reading the logs back (logs/log_files), or
// deleting files when a job goes away.
//
// The hard requirement: the agent worker can be killed (-9) at any instant,
// and a new worker that opens a LogPipe on the same paths continues so that
// every byte the task wrote reaches the log files exactly once and in order.
// The FIFO itself is the durable queue: the task's fd 1/2 is the FIFO opened
// O_RDWR, so its buffer outlives the worker and the task never sees EPIPE.
// A byte leaves the FIFO only in the same kernel operation that puts it in a
// log file (splice), so a crash can never separate "consumed" from
// "written"; see the comments at the top of log_pipe.cc and rotator.cc for
// the whole argument.
//
// Behaviour in brief (users' view in docs/logs.md):
//  - Rotation: the active file keeps its name (<task>.stdout), older files
//    are .1 (newest) .. .N-1; no file ever exceeds max_file_size; a line is
//    only split across files when it alone is longer than max_file_size.
//  - A trailing partial line is left in the FIFO until its newline arrives,
//    the task exits (Drain), it reaches the hold cap, or no new data arrived
//    for kHoldNanos.
//  - Write errors (disk full, read-only or missing dir, EIO, ...) never block
//    the loop or the task: the data is consumed and dropped, counted in
//    bytes_dropped, on_error is called once when the episode starts and once
//    when a write succeeds again (with the bytes dropped meanwhile), and
//    every new chunk tries to write again. A write that fails for lack of
//    space (ENOSPC, EDQUOT) first deletes the oldest rotated file of this
//    stream and is retried once.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "base/fd.h"
#include "logs/rotator.h"
#include "loop/loop.h"

namespace outpost::logs {

// Where one stream's files are: its FIFO, its active log file (rotated
// ones add .1, .2, ...) and its cursor file. Asked for whenever a file is
// opened, so an implementation may derive them (the task layer does, from
// the task id: three paths kept in every pipe of every task cost about
// 0.3 KiB per stream).
class LogPaths {
 public:
  virtual ~LogPaths() = default;
  virtual std::string Fifo() const = 0;
  virtual std::string Log() const = 0;
  virtual std::string Cursor() const = 0;
};

// The three paths given in full (tests, tools).
class FixedLogPaths final : public LogPaths {
 public:
  FixedLogPaths(std::string fifo, std::string log, std::string cursor)
      : fifo_(std::move(fifo)), log_(std::move(log)), cursor_(std::move(cursor)) {}
  // Out of line: the vtable lives in the library's objects alone.
  std::string Fifo() const override;
  std::string Log() const override;
  std::string Cursor() const override;

 private:
  std::string fifo_, log_, cursor_;
};

struct LogPipeStats {
  uint64_t bytes_written = 0;
  uint64_t bytes_dropped = 0;
  uint64_t rotations = 0;
  std::string last_error;
};

// Test seams. Each step is a point between two state changes; when crash_at
// returns true the LogPipe stops dead there, as if the process had been
// killed: no further syscalls on the FIFO or files until it is destroyed.
enum class LogPipeStep {
  kPeeked,          // data copied out of the scratch pipe, nothing changed yet
  kBeforeMove,      // before one splice/pwrite of (part of) a segment
  kAfterMove,       // a segment moved, before the next decision
  kRotateRecorded,  // rotation step recorded in the cursor file, not done
  kRotateStepDone,  // rotation step done, next not recorded
  kCopyIntent,      // copy mode: intent recorded, nothing written
  kCopyWritten,     // copy mode: bytes written, intent not yet marked
  kCopyMarked,      // copy mode: marked written, FIFO not consumed
  kCopyConsumed,    // copy mode: consumed, record not yet idle
};
struct LogPipeTestHooks {
  std::function<bool(LogPipeStep)> crash_at;
  size_t max_move = 0;      // split every move into pieces of at most this (0 = no limit)
  bool force_copy = false;  // use the pwrite fallback instead of splice
  // Returns an errno to fail the next file write with (0 = do the write).
  std::function<int()> fail_write;
  // The unix second a write happens in, for the time index (unset: the clock).
  std::function<uint32_t()> now_sec;
};

class LogPipe {
 public:
  // error non-empty: writing failed, output is dropped from now on.
  // error empty: writing works again; dropped = bytes dropped meanwhile.
  using ErrorCallback = std::function<void(const std::string& error, uint64_t dropped)>;

  // How long a partial line may wait for its newline with no new data.
  static constexpr int64_t kHoldNanos = 150 * kNanosPerMilli;
  // A partial line at least this long (or half the pipe, if smaller) is
  // written without waiting.
  static constexpr size_t kMaxHold = 256 << 10;
  // A FIFO starts at the kernel's default size and grows to this once a
  // peek finds it half full (a task that writes in bursts).
  static constexpr size_t kBigFifo = 1 << 20;

  using Step = LogPipeStep;
  using TestHooks = LogPipeTestHooks;

  // Creates the FIFO (0600, owned by uid:gid) if missing or reuses it, opens
  // its read end, finishes a rotation or copy-mode write an interrupted run
  // left half done (cursor_path) and registers with loop. The active file
  // log_path (and its directory) is opened or created when the first data
  // arrives (its existing size counts toward the limit), and closed again
  // after each burst. Fails only for FIFO problems (not a FIFO,
  // cannot create or open) or a bad policy; log-file problems are reported
  // through on_error and retried on the next data. on_error runs from the
  // loop (deferred), so it may destroy this LogPipe.
  static Result<std::unique_ptr<LogPipe>> Open(Loop* loop, std::unique_ptr<const LogPaths> paths,
                                               RotationPolicy policy, uid_t uid, gid_t gid, ErrorCallback on_error,
                                               TestHooks hooks = {});
  static Result<std::unique_ptr<LogPipe>> Open(Loop* loop, const std::string& fifo_path, const std::string& log_path,
                                               const std::string& cursor_path, RotationPolicy policy, uid_t uid,
                                               gid_t gid, ErrorCallback on_error, TestHooks hooks = {});
  ~LogPipe();  // unregisters, closes fds; never deletes files
  LogPipe(const LogPipe&) = delete;
  LogPipe& operator=(const LogPipe&) = delete;

  // The FIFO opened O_RDWR|O_CLOEXEC for the spawner to dup2 into the task.
  // Blocking on purpose: it becomes the task's stdout/stderr.
  Result<UniqueFd> OpenWriteEnd();

  // Writes everything buffered in the FIFO now, including a trailing partial
  // line (call when the task has exited). Synchronous; bounded by what was
  // buffered when called.
  void Drain();

  const LogPipeStats& stats() const { return stats_; }
  // For tests: whether a TestHooks crash point stopped this LogPipe.
  bool crashed() const { return dead_; }

 private:
  LogPipe(Loop* loop, std::unique_ptr<const LogPaths> paths, RotationPolicy policy, ErrorCallback on_error,
          TestHooks hooks);

  Result<UniqueFd> OpenFifo(uid_t uid, gid_t gid, bool* made);  // *made: it did not exist
  void OnEvent(uint32_t events);
  void OnHoldTimer();
  void Pump(bool flush, uint64_t budget);
  static char* PeekBuffer(size_t cap);
  size_t Peek(char* buf);  // tee into the scratch pipe, read the copy into buf
  // The process's scratch pipe, shared by every LogPipe: a peek leaves it
  // empty, and the loop runs one peek at a time. Made on first use in each
  // process (a forked child makes its own), never closed.
  struct Scratch {
    int r = -1, w = -1;
    size_t cap = 0;
  };
  static Result<Scratch> SharedScratch();
  void Emit(const char* data, size_t len);
  size_t Move(const char* data, size_t len, bool* failed);
  size_t MoveCopy(const char* data, size_t len, bool* failed);
  void Drop(size_t len);
  size_t Consume(size_t len);
  bool EnsureSink();
  Status Recover();
  bool Rotate();
  void Fail(const Error& e);
  void Written();  // a write succeeded: ends an error episode
  void Notify(std::string error, uint64_t dropped);
  bool MakeRoom(int err, bool* retried);
  friend class Rotator;  // checks the crash points too
  bool Crash(Step step);
  uint64_t FifoBytes() const;
  void SetCaps();
  void Grow();

  Loop* loop_;
  std::unique_ptr<const LogPaths> paths_;
  ErrorCallback on_error_;
  std::unique_ptr<TestHooks> hooks_;  // null unless a test set one
  const TestHooks& hooks() const;
  std::shared_ptr<bool> alive_;  // guards deferred on_error calls (made by the first report)

  LoopFd fifo_;         // read end, O_RDONLY|O_NONBLOCK
  int scratch_r_ = -1;  // the shared scratch pipe (SharedScratch; not owned)
  int scratch_w_ = -1;
  Rotator files_;       // the active file, rotated files, cursor file
  bool copy_mode_ = false;
  bool in_error_ = false;
  bool dead_ = false;

  std::unique_ptr<char[]> discard_;  // target of consuming reads (copy mode, drops)
  // Pipe sizes (at most a few MiB; 32 bits, as every task has two LogPipes).
  uint32_t scratch_cap_ = 0;
  uint32_t fifo_size_ = 0;      // F_GETPIPE_SZ of the FIFO
  uint32_t buf_cap_ = 0;        // most a peek takes
  uint32_t hold_cap_ = 0;       // longest partial line held back
  uint32_t held_ = 0;           // bytes of partial line left in the FIFO
  int64_t last_growth_ = 0;     // when held_ last changed
  Loop::TimerId hold_timer_ = 0;

  uint64_t dropped_before_ = 0;  // bytes_dropped when the error episode began
  LogPipeStats stats_;
};

}  // namespace outpost::logs
