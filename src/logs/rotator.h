// The file side of one log stream (logs/log_pipe): the active log file, its
// rotated predecessors (<log>.1 newest .. <log>.N-1) and the cursor file,
// whose one record lets a new worker finish what a killed one was doing (a
// rotation step, or a copy-mode write). Owns the active file's fd and the
// cursor file's fd. Does not own the FIFO or decide what goes into the files:
// LogPipe writes through active() and records its copy-mode writes with
// WriteRecord. How a rotation survives a kill at any instant: see the comment
// at the top of rotator.cc.
//
// Files and fds exist only while needed: the active file (and its
// directory) is created when the first byte is written, the cursor file
// only when a rotation or a copy-mode write records something, and both fds
// are closed again after each burst (Release), so an idle task costs the
// worker no fd here and a silent one no inode.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"
#include "base/fd.h"

namespace outpost::logs {

struct RotationPolicy {
  uint64_t max_file_size = 10 << 20;
  int max_files = 10;  // counts the active file too; 1 = no rotated files kept
};

enum class LogPipeStep;  // logs/log_pipe.h: the test seams' crash points
class LogPipe;
class LogPaths;

// The cursor file's record.
struct CursorRecord {
  enum State : uint32_t { kIdle = 0, kRotating = 1, kCopyPending = 2, kCopyWritten = 3 };
  uint32_t state = kIdle;
  uint32_t keep = 0;  // rotated files kept, at the time of the rotation
  uint32_t step = 0;
  uint64_t inode = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

class Rotator {
 public:
  // The active file. fd is valid only when the files are ready for writing
  // (no rotation or recovery pending); the writer advances size and mid_line.
  struct Active {
    UniqueFd fd;
    uint64_t inode = 0;
    uint64_t size = 0;
    bool mid_line = false;  // the file ends inside a line
  };

  // owner: the pipe whose crash points (test seams, LogPipe::Crash) the
  // rotator checks (nullptr: none); once one fires the rotator stops where
  // it is, as if the process had been killed.
  Rotator(const LogPaths* paths, RotationPolicy policy, LogPipe* owner);

  Active& active() { return active_; }
  bool ready() const { return active_.fd.valid(); }
  // Closes the active file's and the cursor file's fds. When the files were
  // ready (no rotation or recovery pending), Reopen makes them ready again
  // without reading the cursor file.
  void Release();
  bool released() const { return released_; }
  // Opens (or creates) the active file again after Release: a file replaced
  // or truncated meanwhile (by hand, or by another program) is taken as it
  // is now.
  Status Reopen();
  std::string log_path() const;
  const RotationPolicy& policy() const { return policy_; }
  uint64_t rotations() const { return rotations_; }  // completed ones

  // Reads the cursor file's record; a missing file, or a damaged or short
  // record (with a warning), reads as idle.
  Result<CursorRecord> ReadRecord();
  Status WriteRecord(const CursorRecord& r);
  // Opens or creates the active file (and its directory); its size counts
  // toward the limit.
  Status OpenActive();
  // Cuts the active file back to size bytes.
  Status Truncate(uint64_t size);
  // Finishes the rotation r (state kRotating) from its recorded step.
  Status Resume(const CursorRecord& r);
  // The active file becomes .1, .1 becomes .2 and so on, the oldest beyond
  // max_files is deleted and a new active file is created. Not ready() until
  // it completes; after a failure the record still names the step, so
  // recovery (ReadRecord, Resume) finishes it.
  Status Rotate();
  // Deletes the oldest rotated file (the highest .N) to make room on a full
  // disk; false if there is none. Only while ready() (no rotation pending).
  bool DeleteOldest();

  // The time index (logs/log_index.h): before bytes are written at the end
  // of the active file during second now_sec, an entry for that offset
  // unless the last entry has that second (the common case: one compare).
  // false when the file's index is full: the caller rotates at the next line
  // end. An index that cannot be written costs the times, never the logs.
  bool Mark(uint32_t now_sec) { return (index_.marked && index_.last_sec == now_sec) || MarkSlow(now_sec); }

 private:
  Status OpenFile();
  Status LoadTail();
  Status OpenCursor();
  void ScanRotated(int keep);
  Status Run(int keep, int first_step);
  bool Crash(LogPipeStep step);
  bool MarkSlow(uint32_t now_sec);
  Status LoadIndex();
  void ForgetIndex();

  const LogPaths* paths_;  // the owner's
  RotationPolicy policy_;
  LogPipe* owner_;
  bool stopped_ = false;
  bool released_ = false;  // closed by Release while ready

  UniqueFd cursor_fd_;
  Active active_;
  // The active file's index: open only while writing, like the file.
  struct IndexState {
    UniqueFd fd;
    uint64_t entries = 0;
    uint64_t last_offset = 0;
    uint32_t last_sec = 0;
    bool marked = false;  // last_sec holds the second of the last Mark
  } index_;
  int highest_rotated_ = -1;  // highest existing .N (-1: not known, ScanRotated)
  uint64_t rotations_ = 0;
};

}  // namespace outpost::logs
