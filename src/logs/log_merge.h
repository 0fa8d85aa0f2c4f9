// Both streams of a task in one order (`outpost logs` shows stdout and
// stderr together): pieces read from each stream's files (logs/log_files)
// with their times (the time index), merged by the second they were
// written in. Within one second stdout's bytes come first: the index's
// resolution is one second, so the order inside a second is not known.
// Owns only this arithmetic; reading is log_files', serving it agent/'s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "logs/log_files.h"

namespace outpost::logs::logfiles {

// What was read of one stream: full when the read stopped at its byte limit
// (more is there).
struct StreamRead {
  Chunk chunk;
  std::vector<TimedPart> times;  // Times(chunk)
  bool full = false;
};

struct MergedPart {
  int stream = 0;  // index into the reads
  uint64_t length = 0;
  int64_t unix_seconds = 0;
};

struct Merged {
  std::string data;
  std::vector<MergedPart> parts;
  std::vector<Cursor> next;  // per stream: where its next read continues
};

// The cursor of byte pos of chunk's data (pos == size: chunk.next).
Cursor CursorAt(const Chunk& chunk, size_t pos);

// Merges the reads by time. A stream cut by its limit has more bytes after
// its last time: the others give back (their cursors stay before) what they
// read after that time, so the next read continues in order.
Merged Merge(std::vector<StreamRead> reads);

// Keeps the last n lines of m (a trailing newline ends the last line).
void KeepLastLines(Merged* m, size_t n);

}  // namespace outpost::logs::logfiles
