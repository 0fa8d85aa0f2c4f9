// The time index of one log file: which second the bytes from an offset on
// were written in, so that `outpost logs -t` and `--since` can tell when a
// line was written without changing the log file itself (what `tail -F` and
// log shippers read stays the task's bytes exactly).
//
// Owns: the index file's format, its name and the reader. The writer is the
// log pipe's Rotator (logs/rotator.cc), which appends an entry before a
// write whose second differs from the last entry's (so at most one entry per
// second while data flows, none while the task is quiet) and renames and
// deletes the index together with its log file.
//
// Layout of <dir>/.<log file name>.idx (hidden: a shipper's `*.stdout*` glob
// does not pick it up), native byte order (the file never leaves the
// machine):
//   header  16 bytes: magic "OPLIDX1\n", the log file's inode (u64)
//   entry   12 bytes: offset in the log file (u64), unix seconds (u32)
// An entry (offset, t) says: the bytes from offset up to the next entry's
// offset were written during second t or later in the same second run (a
// line's time is the time of the entry at or before its first byte; the
// resolution is one second). At most MaxEntries(max_file_size) entries:
// when a file's index is full the file is rotated at its next line end, so
// the index adds at most an eighth to a stream's disk use.
//
// The index is untrusted on read (a killed writer, a file truncated or
// replaced by hand, another program's bytes): the reader takes any bytes
// without reading past them; an index whose header does not name the log
// file's inode is ignored (no times).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"

namespace outpost::logs::logindex {

constexpr char kMagic[8] = {'O', 'P', 'L', 'I', 'D', 'X', '1', '\n'};
constexpr size_t kHeaderSize = 16;
constexpr size_t kEntrySize = 12;

struct Entry {
  uint64_t offset = 0;
  int64_t unix_seconds = 0;
};

// The index of the log file at log_file (a rotated one too): dir/.NAME.idx.
std::string PathFor(const std::string& log_file);
// Entries one log file's index may hold: max_file_size / 96 (its index at
// most an eighth of the file), at least 16.
uint64_t MaxEntries(uint64_t max_file_size);

void EncodeHeader(uint64_t inode, unsigned char out[kHeaderSize]);
void EncodeEntry(const Entry& e, unsigned char out[kEntrySize]);

class Reader {
 public:
  Reader() = default;
  // Opens the index of the log file whose inode is given; !valid() when
  // there is none or it belongs to another file.
  static Reader Open(const std::string& log_file, uint64_t inode);
  // The same over an open fd (tests, the fuzzer).
  static Reader FromFd(UniqueFd fd, uint64_t inode);

  bool valid() const { return fd_.valid(); }
  uint64_t count() const { return count_; }
  // The times of [from, to): first {from, time of the last entry at or
  // before from (0 = not known)}, then each entry inside the range in file
  // order (at most max_entries in all). Never empty when from < to.
  std::vector<Entry> Cover(uint64_t from, uint64_t to, size_t max_entries = size_t{1} << 20) const;
  // The offset of the first entry whose time is at or after t; false if none.
  bool FirstAtOrAfter(int64_t t, uint64_t* offset) const;

 private:
  bool Read(uint64_t i, Entry* e) const;  // entry i; false past the end or on a read error
  UniqueFd fd_;
  uint64_t count_ = 0;
};

}  // namespace outpost::logs::logindex
