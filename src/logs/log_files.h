// Reading a task's log files back (`outpost logs`, `outpost logs -f`).
// Owns: the naming of the rotated files (shared with task/log_pipe, which
// writes them) and the read side: the last N lines across the active and the
// rotated files, and a follow cursor that survives rotation.
// Does not own: writing, rotating or deleting files (task/log_pipe), nor the
// API or CLI around these calls.
//
// Layout, for the active file <dir>/<task>.stdout and max_files = N:
//   <task>.stdout        active file, fixed name (tail -F friendly)
//   <task>.stdout.1      newest rotated file
//   ...
//   <task>.stdout.<N-1>  oldest
// Rotation renames .k -> .k+1 from the oldest down and then active -> .1, so a
// file keeps its inode for its whole life. The follow cursor therefore names
// a file by inode, not by name: after a rotation the reader finds its file
// under the next index, finishes it, and moves on to the next newer one.
//
// Every call uses memory bounded by its max_bytes argument.
//
// Limit: a reader more than max_files rotations behind has lost data anyway
// (skipped); if the filesystem reused its file's inode number for a newer
// file, it continues there instead of noticing the skip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace outpost::logs::logfiles {

// Position in the stream of one task stream's files. inode 0 means "the
// start of whatever the active file is when ReadFrom is called".
struct Cursor {
  uint64_t inode = 0;
  uint64_t offset = 0;
};

// Where a run of a chunk's bytes came from: the file (by inode, and the
// rotation index it had when read) and the offset in it.
struct Span {
  uint64_t inode = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  int index = 0;
};

struct Chunk {
  std::string data;
  Cursor next;             // where the next ReadFrom continues
  bool skipped = false;    // the cursor's file was gone (rotated off or deleted): data was skipped
  std::vector<Span> spans;  // data's bytes in order, for Times
};

// A run of a chunk's bytes written in one second (unix_seconds 0: not
// known, the file has no time index or none that far back).
struct TimedPart {
  uint64_t length = 0;
  int64_t unix_seconds = 0;
};

// The times of chunk's bytes, from each file's time index
// (logs/log_index.h): parts that add up to chunk.data.size(), in order.
std::vector<TimedPart> Times(const std::string& log_path, const Chunk& chunk);

// Where the first bytes written at or after unix second t are, across the
// rotated files and the active one (oldest first); the end of the active
// file when there are none. Files without a time index are passed over.
Result<Cursor> Since(const std::string& log_path, int max_files, int64_t t);

// index 0: the active file itself; k >= 1: "<log_path>.k".
std::string RotatedPath(const std::string& log_path, int index);

// The last n_lines lines of the stream (oldest rotated file first, active
// file last). A trailing line without a newline counts as a line. At most
// max_bytes are returned (then from the first line start inside the last
// max_bytes, or the raw last max_bytes when one line is longer). next is the
// end of the active file as read, for continuing with ReadFrom.
// A missing active file is not an error: empty data, next = {0, 0}.
Result<Chunk> Tail(const std::string& log_path, int max_files, size_t n_lines, size_t max_bytes = 1 << 20);

// The current end of the active file ({0, 0} when it does not exist yet):
// the starting point for `logs -f` without history.
Result<Cursor> End(const std::string& log_path);

// Up to max_bytes of the stream after cursor, continuing across rotations:
// the rest of the cursor's file (wherever rotation moved it), then the next
// newer files, ending in the active file. Returns empty data when caught up.
// If the active file is shorter than the cursor's offset (a write is being
// redone after an agent crash) it waits for the file to grow back.
Result<Chunk> ReadFrom(const std::string& log_path, const Cursor& cursor, size_t max_bytes);

}  // namespace outpost::logs::logfiles
