#include "logs/log_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/sys.h"

namespace outpost::logs::logindex {

namespace {

template <typename T>
void Put(unsigned char* out, size_t at, T v) {
  std::memcpy(out + at, &v, sizeof v);
}

template <typename T>
T Get(const unsigned char* in, size_t at) {
  T v;
  std::memcpy(&v, in + at, sizeof v);
  return v;
}

// Reads in blocks of this many entries.
constexpr size_t kBlockEntries = 4096;

}  // namespace

std::string PathFor(const std::string& log_file) {
  return sys::Dirname(log_file) + "/." + sys::Basename(log_file) + ".idx";
}

uint64_t MaxEntries(uint64_t max_file_size) { return std::max<uint64_t>(16, max_file_size / (8 * kEntrySize)); }

void EncodeHeader(uint64_t inode, unsigned char out[kHeaderSize]) {
  std::memcpy(out, kMagic, sizeof kMagic);
  Put(out, 8, inode);
}

void EncodeEntry(const Entry& e, unsigned char out[kEntrySize]) {
  Put(out, 0, e.offset);
  Put(out, 8, static_cast<uint32_t>(e.unix_seconds));
}

Reader Reader::Open(const std::string& log_file, uint64_t inode) {
  auto fd = sys::Open(PathFor(log_file), O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
  if (!fd.ok()) return Reader();
  return FromFd(std::move(*fd), inode);
}

Reader Reader::FromFd(UniqueFd fd, uint64_t inode) {
  Reader r;
  struct stat st;
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return r;
  unsigned char h[kHeaderSize];
  ssize_t n = sys::RetryEintr([&] { return ::pread(fd.get(), h, sizeof h, 0); });
  if (n != static_cast<ssize_t>(sizeof h) || std::memcmp(h, kMagic, sizeof kMagic) != 0 ||
      Get<uint64_t>(h, 8) != inode) {
    return r;
  }
  r.count_ = (static_cast<uint64_t>(st.st_size) - kHeaderSize) / kEntrySize;
  r.fd_ = std::move(fd);
  return r;
}

bool Reader::Read(uint64_t i, Entry* e) const {
  if (i >= count_) return false;
  unsigned char b[kEntrySize];
  off_t at = static_cast<off_t>(kHeaderSize + i * kEntrySize);
  ssize_t n = sys::RetryEintr([&] { return ::pread(fd_.get(), b, sizeof b, at); });
  if (n != static_cast<ssize_t>(sizeof b)) return false;  // shrank since Open
  e->offset = Get<uint64_t>(b, 0);
  e->unix_seconds = Get<uint32_t>(b, 8);
  return true;
}

std::vector<Entry> Reader::Cover(uint64_t from, uint64_t to, size_t max_entries) const {
  std::vector<Entry> out;
  if (from >= to) return out;
  out.push_back(Entry{from, 0});
  if (!valid()) return out;
  // The last entry at or before from. Entries are in offset order as
  // written; in a damaged index the search still ends, at some entry.
  uint64_t lo = 0, hi = count_;  // first entry with offset > from is in [lo, hi]
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    Entry e;
    if (!Read(mid, &e)) {
      hi = mid;
      continue;
    }
    if (e.offset <= from) lo = mid + 1;
    else hi = mid;
  }
  Entry e;
  if (lo > 0 && Read(lo - 1, &e) && e.offset <= from) out[0].unix_seconds = e.unix_seconds;
  for (uint64_t i = lo; out.size() < std::max<size_t>(max_entries, 1) && Read(i, &e); ++i) {
    if (e.offset >= to) break;
    if (e.offset <= out.back().offset) continue;  // damaged: not after the previous one
    out.push_back(e);
  }
  return out;
}

bool Reader::FirstAtOrAfter(int64_t t, uint64_t* offset) const {
  if (!valid()) return false;
  std::vector<unsigned char> block(kBlockEntries * kEntrySize);
  for (uint64_t i = 0; i < count_; i += kBlockEntries) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(kBlockEntries, count_ - i)) * kEntrySize;
    off_t at = static_cast<off_t>(kHeaderSize + i * kEntrySize);
    ssize_t n = sys::RetryEintr([&] { return ::pread(fd_.get(), block.data(), want, at); });
    if (n <= 0) return false;
    for (size_t k = 0; k + kEntrySize <= static_cast<size_t>(n); k += kEntrySize) {
      if (static_cast<int64_t>(Get<uint32_t>(block.data(), k + 8)) >= t) {
        *offset = Get<uint64_t>(block.data(), k);
        return true;
      }
    }
    if (static_cast<size_t>(n) < want) return false;
  }
  return false;
}

}  // namespace outpost::logs::logindex
