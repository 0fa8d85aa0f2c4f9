// libFuzzer target: a log file's time index (logs/log_index) as the reader
// takes it from disk, where a killed writer, a truncated file or another
// program may have left anything. The first 8 bytes pick the inode the
// index must name and two offsets; the rest is the index file. Nothing may
// crash or read past the bytes; Cover's parts start at the range's start,
// stay inside it and go forward.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "logs/log_index.h"

using namespace outpost;
using namespace outpost::logs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint16_t from, len;
  std::memcpy(&from, data, 2);
  std::memcpy(&len, data + 2, 2);
  const uint8_t* file = data + 8;
  size_t n = size - 8;
  // The header's inode when the file has one, so most inputs are taken.
  uint64_t inode = 0;
  if (n >= logindex::kHeaderSize) std::memcpy(&inode, file + 8, 8);
  if (data[4] & 1) inode ^= 1;  // sometimes another file's index
  int fd = ::memfd_create("idx", 0);
  if (fd < 0) return 0;
  if (n > 0 && ::write(fd, file, n) != static_cast<ssize_t>(n)) {
    ::close(fd);
    return 0;
  }
  logindex::Reader r = logindex::Reader::FromFd(UniqueFd(fd), inode);
  auto cover = r.Cover(from, static_cast<uint64_t>(from) + len, 64);
  if (len > 0 && (cover.empty() || cover[0].offset != from)) __builtin_trap();
  for (size_t i = 1; i < cover.size(); ++i) {
    if (cover[i].offset <= cover[i - 1].offset || cover[i].offset >= static_cast<uint64_t>(from) + len) __builtin_trap();
  }
  uint64_t off = 0;
  (void)r.FirstAtOrAfter(static_cast<int64_t>(data[5]) << 24, &off);
  return 0;
}
