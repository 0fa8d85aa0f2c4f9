#include "logs/log_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "base/fd.h"
#include "base/sys.h"
#include "logs/log_index.h"

namespace outpost::logs::logfiles {

namespace {

constexpr size_t kScanBlock = 64 << 10;
// ReadFrom does not know max_files: it scans rotated indices until it has
// seen this many missing in a row (a rotation in progress leaves one hole).
constexpr int kMissingRun = 2;
constexpr int kMaxIndex = 100000;
constexpr int kTailAttempts = 5;

struct OpenFile {
  UniqueFd fd;
  uint64_t inode = 0;
  uint64_t size = 0;
  int index = 0;  // its rotation index
};

// Opens path read-only (never following a symlink planted in the log dir).
// kNotFound when it does not exist.
Result<OpenFile> OpenRead(const std::string& path) {
  auto fd = sys::Open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
  if (!fd.ok()) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("stat '" + path + "'");
  if (!S_ISREG(st.st_mode)) return Error(Code::kFailedPrecondition, "'" + path + "' is not a regular file");
  OpenFile f;
  f.fd = std::move(*fd);
  f.inode = static_cast<uint64_t>(st.st_ino);
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

bool IsNotFound(const Error& e) { return e.code() == Code::kNotFound; }

// Appends up to len bytes of fd at off to out; returns how many (short at EOF).
Result<size_t> AppendRange(int fd, uint64_t off, size_t len, std::string* out, const std::string& path);

// The same into a chunk, noting where the bytes came from.
Result<size_t> AppendFrom(const OpenFile& f, uint64_t off, size_t len, Chunk* out, const std::string& log_path) {
  auto got = AppendRange(f.fd.get(), off, len, &out->data, RotatedPath(log_path, f.index));
  if (got.ok() && *got > 0) {
    Span* last = out->spans.empty() ? nullptr : &out->spans.back();
    if (last && last->inode == f.inode && last->offset + last->length == off) {
      last->length += *got;
    } else {
      out->spans.push_back(Span{f.inode, off, *got, f.index});
    }
  }
  return got;
}

Result<size_t> AppendRange(int fd, uint64_t off, size_t len, std::string* out, const std::string& path) {
  size_t start = out->size();
  out->resize(start + len);
  size_t got = 0;
  while (got < len) {
    ssize_t n = sys::RetryEintr([&] { return ::pread(fd, &(*out)[start + got], len - got, static_cast<off_t>(off + got)); });
    if (n < 0) {
      out->resize(start);
      return ErrnoError("read '" + path + "'");
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(start + got);
  return got;
}

// Open files newest first: [0] is the active file when it exists. Retries
// when a rotation shifted names while we were opening them (seen as the same
// inode under two names).
Result<std::vector<OpenFile>> OpenAll(const std::string& log_path, int max_files, bool* active_present) {
  for (int attempt = 0; attempt < kTailAttempts; ++attempt) {
    std::vector<OpenFile> files;
    bool dup = false;
    *active_present = false;
    for (int i = 0; i < std::max(max_files, 1) && !dup; ++i) {
      auto f = OpenRead(RotatedPath(log_path, i));
      if (!f.ok()) {
        if (IsNotFound(f.error())) continue;
        return f.error();
      }
      for (const auto& o : files) dup = dup || o.inode == f->inode;
      if (i == 0) *active_present = true;
      f->index = i;
      files.push_back(std::move(*f));
    }
    if (!dup) return files;
  }
  return Error(Code::kUnavailable, "read logs '" + log_path + "': files keep rotating, try again");
}

}  // namespace

std::string RotatedPath(const std::string& log_path, int index) {
  return index == 0 ? log_path : log_path + "." + std::to_string(index);
}

Result<Cursor> End(const std::string& log_path) {
  auto f = OpenRead(log_path);
  if (!f.ok()) {
    if (IsNotFound(f.error())) return Cursor{};
    return f.error();
  }
  return Cursor{f->inode, f->size};
}

Result<Chunk> Tail(const std::string& log_path, int max_files, size_t n_lines, size_t max_bytes) {
  bool active_present = false;
  auto opened = OpenAll(log_path, max_files, &active_present);
  if (!opened.ok()) return opened.error();
  std::vector<OpenFile>& files = *opened;
  Chunk out;
  if (active_present) out.next = Cursor{files[0].inode, files[0].size};
  if (n_lines == 0 || max_bytes == 0 || files.empty()) return out;

  // Walk backwards from the end of the stream. The stream's last byte, when
  // it is a newline, ends the last line and is not a separator. Positions are
  // (file index, offset); `dist` is the number of bytes from there to the end.
  size_t start_file = files.size() - 1;  // default: the whole stream
  uint64_t start_off = 0;
  bool have_line_start_in_limit = false;
  size_t limit_file = 0;
  uint64_t limit_off = 0;
  uint64_t dist = 0;
  size_t lines = 0;
  bool first_byte = true;
  bool done = false;
  std::string block;
  block.resize(kScanBlock);
  for (size_t fi = 0; fi < files.size() && !done; ++fi) {
    uint64_t pos = files[fi].size;
    while (pos > 0 && !done) {
      size_t len = static_cast<size_t>(std::min<uint64_t>(kScanBlock, pos));
      ssize_t n = sys::RetryEintr([&] { return ::pread(files[fi].fd.get(), &block[0], len, static_cast<off_t>(pos - len)); });
      if (n < 0) return ErrnoError("read '" + RotatedPath(log_path, static_cast<int>(fi)) + "'");
      if (static_cast<size_t>(n) != len) {
        // Shrunk under us: only a redo after an agent crash does that.
        return Error(Code::kUnavailable, "read logs '" + log_path + "': file shrank while reading, try again");
      }
      for (size_t i = len; i-- > 0;) {
        uint64_t at = pos - len + i;  // offset of this byte in the file
        if (first_byte) {
          first_byte = false;
          if (block[i] == '\n') {
            ++dist;
            continue;
          }
        }
        if (block[i] == '\n') {
          // A line starts right after this newline, `dist` bytes before the end.
          if (dist <= max_bytes) {
            have_line_start_in_limit = true;
            limit_file = fi;
            limit_off = at + 1;
          }
          if (++lines == n_lines) {
            start_file = fi;
            start_off = at + 1;
            done = true;
            break;
          }
        }
        ++dist;
        if (dist > max_bytes) {
          // More than max_bytes before n lines: start at the earliest line
          // start inside the limit, or cut the one long line raw.
          if (have_line_start_in_limit) {
            start_file = limit_file;
            start_off = limit_off;
          } else {
            start_file = fi;
            start_off = at + 1;
          }
          done = true;
          break;
        }
      }
      pos -= len;
    }
  }

  // Forward read of [start, end of stream).
  for (size_t fi = start_file + 1; fi-- > 0;) {
    uint64_t from = fi == start_file ? start_off : 0;
    if (from >= files[fi].size) continue;
    size_t len = static_cast<size_t>(std::min<uint64_t>(files[fi].size - from, max_bytes - out.data.size()));
    auto got = AppendFrom(files[fi], from, len, &out, log_path);
    if (!got.ok()) return got.error();
    if (out.data.size() >= max_bytes) break;
  }
  return out;
}

Result<Chunk> ReadFrom(const std::string& log_path, const Cursor& cursor, size_t max_bytes) {
  Chunk out;
  out.next = cursor;
  Cursor& cur = out.next;
  // Each pass either reads, moves the cursor to a newer file, or stops; the
  // bound only protects against a directory that rotates faster than we read.
  for (int pass = 0; pass < 64 && out.data.size() < max_bytes; ++pass) {
    size_t room = max_bytes - out.data.size();
    auto active = OpenRead(log_path);
    if (!active.ok()) {
      if (IsNotFound(active.error())) break;  // not created yet, or mid-rotation
      return active.error();
    }
    if (cur.inode == 0) cur = Cursor{active->inode, 0};
    if (cur.inode == active->inode) {
      if (cur.offset < active->size) {
        size_t len = static_cast<size_t>(std::min<uint64_t>(active->size - cur.offset, room));
        auto got = AppendFrom(*active, cur.offset, len, &out, log_path);
        if (!got.ok()) return got.error();
        cur.offset += *got;
      }
      break;
    }

    // The cursor's file was rotated: find it by inode.
    OpenFile mine;
    int mine_index = 0;
    int oldest_index = 0;
    uint64_t oldest_inode = 0;
    int missing = 0;
    for (int k = 1; k < kMaxIndex && missing < kMissingRun; ++k) {
      auto f = OpenRead(RotatedPath(log_path, k));
      if (!f.ok()) {
        if (!IsNotFound(f.error())) return f.error();
        ++missing;
        continue;
      }
      missing = 0;
      f->index = k;
      oldest_index = k;
      oldest_inode = f->inode;
      if (f->inode == cur.inode) {
        mine = std::move(*f);
        mine_index = k;
        break;
      }
    }
    if (mine_index == 0) {
      // Rotated off (or deleted): continue with the oldest file still there.
      out.skipped = true;
      cur = oldest_index > 0 ? Cursor{oldest_inode, 0} : Cursor{active->inode, 0};
      continue;
    }
    if (cur.offset < mine.size) {
      size_t len = static_cast<size_t>(std::min<uint64_t>(mine.size - cur.offset, room));
      auto got = AppendFrom(mine, cur.offset, len, &out, log_path);
      if (!got.ok()) return got.error();
      cur.offset += *got;
      if (cur.offset < mine.size) break;  // out of room
    }
    // Finished a rotated file (the writer never appends to one). Its
    // successor is one index newer, unless a rotation shifted the names since
    // we looked: check that ours is still where we found it.
    auto next = OpenRead(RotatedPath(log_path, mine_index - 1));
    if (!next.ok()) {
      if (IsNotFound(next.error())) break;  // mid-rotation: the next call continues
      return next.error();
    }
    struct stat st;
    if (::stat(RotatedPath(log_path, mine_index).c_str(), &st) != 0 || static_cast<uint64_t>(st.st_ino) != cur.inode) {
      continue;  // shifted: look again
    }
    cur = Cursor{next->inode, 0};
  }
  return out;
}

std::vector<TimedPart> Times(const std::string& log_path, const Chunk& chunk) {
  std::vector<TimedPart> out;
  for (const Span& s : chunk.spans) {
    // A rotation since the read moved the file (and its index) one up.
    logindex::Reader r = logindex::Reader::Open(RotatedPath(log_path, s.index), s.inode);
    if (!r.valid()) r = logindex::Reader::Open(RotatedPath(log_path, s.index + 1), s.inode);
    std::vector<logindex::Entry> cover = r.Cover(s.offset, s.offset + s.length);
    for (size_t i = 0; i < cover.size(); ++i) {
      uint64_t end = i + 1 < cover.size() ? cover[i + 1].offset : s.offset + s.length;
      TimedPart p{end - cover[i].offset, cover[i].unix_seconds};
      if (!out.empty() && out.back().unix_seconds == p.unix_seconds) {
        out.back().length += p.length;
      } else {
        out.push_back(p);
      }
    }
  }
  return out;
}

Result<Cursor> Since(const std::string& log_path, int max_files, int64_t t) {
  for (int k = std::max(max_files, 1) - 1; k >= 0; --k) {
    auto f = OpenRead(RotatedPath(log_path, k));
    if (!f.ok()) {
      if (IsNotFound(f.error())) continue;
      return f.error();
    }
    uint64_t off = 0;
    if (logindex::Reader::Open(RotatedPath(log_path, k), f->inode).FirstAtOrAfter(t, &off)) {
      return Cursor{f->inode, std::min(off, f->size)};
    }
  }
  return End(log_path);
}

}  // namespace outpost::logs::logfiles
