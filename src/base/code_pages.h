// The resident pages of the binary's own code, dropped when a process goes
// idle (the keeper's and the worker's loops). Start-up and one-off work
// (config parsing, recovery, a CLI request's handler) touch much more code
// than an idle process runs again, and the kernel maps code in 64 KiB
// "fault-around" windows: without a drop a static process keeps all of it
// in its RSS. MADV_DONTNEED on a private file mapping without private
// copies only unmaps page-cache pages; the next use maps them again from
// the page cache the keeper and the worker share. Writable segments (data,
// RELRO) are never touched.
#pragma once

#include <cstddef>

namespace outpost {

struct CodeRanges {
  struct Range {
    void* start;
    size_t len;
  } r[8];
  int n = 0;
};

// The executable's read-only PT_LOAD segments, page-aligned inward.
CodeRanges FindCodeRanges();

// One madvise(MADV_DONTNEED) per range.
void DropCodePages(const CodeRanges& ranges);

}  // namespace outpost
