// ROTATION ACROSS A KILL AT ANY INSTANT
//
// Rotation is the one multi-step change to the log files, so it is the one
// thing recorded. Before each step the cursor file gets {rotating, keep,
// step}, and each step is idempotent given only whether its source still
// exists:
//   step 0             unlink .keep (the active file when keep == 0)
//   step s in 1..keep  rename .(keep-s) -> .(keep-s+1)          (.0 = active)
//   step keep+1        create the active file (open it if it exists)
// then {idle}. Recovery re-runs the recorded step and the rest. A step whose
// source is gone has already happened; a rename never replaces a file that
// must survive, because the previous step vacated its target. A rotation
// starts at the first step whose source exists (fewer files than max_files:
// at the rename of the highest index), which changes none of this.
//
// Each step does the same to the file's time index (logs/log_index.h),
// after the log file: the index follows its file, and an index left behind
// by a kill between the two is moved by the step's rerun (the log file's
// source is gone by then, the index's not). A reader never takes a wrong
// index: it names its file's inode.
//
// The record is one 64-byte pwrite at offset 0, inside one page: a killed
// writer leaves the old record or the new one (a checksum double-checks).
// Nothing is fsync'd: this protects against process death, not power loss.
#include "logs/rotator.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/sys.h"
#include "logs/log_files.h"
#include "logs/log_index.h"
#include "logs/log_pipe.h"

namespace outpost::logs {

namespace {

constexpr size_t kRecordSize = 64;
constexpr size_t kChecksumAt = kRecordSize - 4;
constexpr char kMagic[8] = {'O', 'P', 'L', 'O', 'G', 'C', 'R', '1'};

uint32_t Fnv1a(const unsigned char* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

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

// Native byte order: the file never leaves the machine.
void Encode(const CursorRecord& r, unsigned char* out) {
  std::memset(out, 0, kRecordSize);
  std::memcpy(out, kMagic, sizeof kMagic);
  Put(out, 8, r.state);
  Put(out, 12, r.keep);
  Put(out, 16, r.step);
  Put(out, 24, r.inode);
  Put(out, 32, r.offset);
  Put(out, 40, r.length);
  Put(out, kChecksumAt, Fnv1a(out, kChecksumAt));
}

bool Decode(const unsigned char* in, CursorRecord* r) {
  if (std::memcmp(in, kMagic, sizeof kMagic) != 0) return false;
  if (Get<uint32_t>(in, kChecksumAt) != Fnv1a(in, kChecksumAt)) return false;
  r->state = Get<uint32_t>(in, 8);
  r->keep = Get<uint32_t>(in, 12);
  r->step = Get<uint32_t>(in, 16);
  r->inode = Get<uint64_t>(in, 24);
  r->offset = Get<uint64_t>(in, 32);
  r->length = Get<uint64_t>(in, 40);
  return r->state <= CursorRecord::kCopyWritten && r->step <= r->keep + 1;
}

}  // namespace

Rotator::Rotator(const LogPaths* paths, RotationPolicy policy, LogPipe* owner)
    : paths_(paths), policy_(policy), owner_(owner) {}

std::string Rotator::log_path() const { return paths_->Log(); }

bool Rotator::Crash(LogPipeStep step) {
  if (!stopped_ && owner_ && owner_->Crash(step)) stopped_ = true;
  return stopped_;
}

Status Rotator::OpenCursor() {
  if (cursor_fd_) return OkStatus();
  auto fd = sys::Open(paths_->Cursor(), O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW, 0600);
  if (!fd.ok()) return fd.error();
  cursor_fd_ = std::move(*fd);
  return OkStatus();
}

Result<CursorRecord> Rotator::ReadRecord() {
  const std::string cursor = paths_->Cursor();
  CursorRecord r;
  if (!cursor_fd_) {
    // Never created: nothing was ever recorded (most streams never rotate).
    auto fd = sys::Open(cursor, O_RDWR | O_NONBLOCK | O_NOFOLLOW);
    if (!fd.ok()) {
      if (fd.error().code() == Code::kNotFound) return r;
      return fd.error();
    }
    cursor_fd_ = std::move(*fd);
  }
  unsigned char b[kRecordSize];
  ssize_t n = sys::RetryEintr([&] { return ::pread(cursor_fd_.get(), b, sizeof b, 0); });
  if (n < 0) return ErrnoError("read '" + cursor + "'");
  if (n == static_cast<ssize_t>(kRecordSize)) {
    if (!Decode(b, &r)) {
      log::Warn("log files: ignoring a damaged cursor record", {{"cursor", cursor}});
      r = CursorRecord{};
    }
  } else if (n != 0) {
    log::Warn("log files: ignoring a short cursor record", {{"cursor", cursor}});
  }
  return r;
}

Status Rotator::WriteRecord(const CursorRecord& r) {
  OUTPOST_RETURN_IF_ERROR(OpenCursor());
  unsigned char b[kRecordSize];
  Encode(r, b);
  ssize_t n = sys::RetryEintr([&] { return ::pwrite(cursor_fd_.get(), b, sizeof b, 0); });
  if (n != static_cast<ssize_t>(sizeof b)) {
    return ErrnoError("write '" + paths_->Cursor() + "'", n < 0 ? errno : EIO);
  }
  return OkStatus();
}

namespace {

// O_RDWR: LoadTail reads the last byte back. Never O_APPEND: splice refuses
// it, and every write goes to an explicit offset anyway. The log directory
// is made with the first file (a task that never writes has none).
Result<UniqueFd> OpenLogFile(const std::string& path) {
  constexpr int kFlags = O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW;
  auto fd = sys::Open(path, kFlags, 0640);
  if (!fd.ok() && fd.error().code() == Code::kNotFound) {
    OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(sys::Dirname(path), 0755));
    fd = sys::Open(path, kFlags, 0640);
  }
  return fd;
}

}  // namespace

// Opens (or creates) the active file and takes its inode and size.
Status Rotator::OpenFile() {
  const std::string path = paths_->Log();
  auto fd = OpenLogFile(path);
  if (!fd.ok()) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("stat '" + path + "'");
  if (!S_ISREG(st.st_mode)) return Error(Code::kFailedPrecondition, "'" + path + "' is not a regular file");
  active_.fd = std::move(*fd);
  uint64_t inode = static_cast<uint64_t>(st.st_ino), size = static_cast<uint64_t>(st.st_size);
  if (inode != active_.inode || size != active_.size) ForgetIndex();
  active_.inode = inode;
  active_.size = size;
  return OkStatus();
}

void Rotator::ForgetIndex() { index_ = IndexState(); }

// Opens (or makes) the active file's index. One that names another file, or
// an offset past the file's end (replaced or truncated by hand), starts over;
// a torn last entry (a killed writer) is cut off.
Status Rotator::LoadIndex() {
  const std::string path = logindex::PathFor(paths_->Log());
  auto fd = sys::Open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_NOFOLLOW, 0640);
  if (!fd.ok()) return fd.error();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError("stat '" + path + "'");
  if (!S_ISREG(st.st_mode)) return Error(Code::kFailedPrecondition, "'" + path + "' is not a regular file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  IndexState ix;
  bool ok = false;
  if (size >= logindex::kHeaderSize) {
    auto r = logindex::Reader::FromFd(UniqueFd(::dup(fd->get())), active_.inode);
    ok = r.valid();
    ix.entries = r.count();
    if (ok && ix.entries > 0) {
      unsigned char b[logindex::kEntrySize];
      off_t at = static_cast<off_t>(logindex::kHeaderSize + (ix.entries - 1) * logindex::kEntrySize);
      ok = sys::RetryEintr([&] { return ::pread(fd->get(), b, sizeof b, at); }) == static_cast<ssize_t>(sizeof b);
      uint64_t off;
      uint32_t sec;
      std::memcpy(&off, b, sizeof off);
      std::memcpy(&sec, b + 8, sizeof sec);
      ok = ok && off <= active_.size;
      ix.last_offset = off;
      ix.last_sec = sec;
    }
  }
  uint64_t want = ok ? logindex::kHeaderSize + ix.entries * logindex::kEntrySize : 0;
  if (size != want && ::ftruncate(fd->get(), static_cast<off_t>(want)) != 0) return ErrnoError("truncate '" + path + "'");
  if (!ok) {
    unsigned char h[logindex::kHeaderSize];
    logindex::EncodeHeader(active_.inode, h);
    if (sys::RetryEintr([&] { return ::pwrite(fd->get(), h, sizeof h, 0); }) != static_cast<ssize_t>(sizeof h)) {
      return ErrnoError("write '" + path + "'");
    }
    ix = IndexState();
  }
  ix.fd = std::move(*fd);
  index_ = std::move(ix);
  return OkStatus();
}

bool Rotator::MarkSlow(uint32_t now_sec) {
  if (!index_.fd.valid() && !LoadIndex().ok()) {
    index_.marked = true;  // no times for this second; the log goes on
    index_.last_sec = now_sec;
    return true;
  }
  const uint64_t off = active_.size;
  uint64_t slot = index_.entries;
  if (slot > 0 && index_.last_offset == off) {
    --slot;  // nothing written since the last entry (or a killed writer's): it gets this second
  } else if (slot >= logindex::MaxEntries(policy_.max_file_size)) {
    return false;
  }
  unsigned char b[logindex::kEntrySize];
  logindex::EncodeEntry(logindex::Entry{off, now_sec}, b);
  off_t at = static_cast<off_t>(logindex::kHeaderSize + slot * logindex::kEntrySize);
  if (sys::RetryEintr([&] { return ::pwrite(index_.fd.get(), b, sizeof b, at); }) == static_cast<ssize_t>(sizeof b)) {
    index_.entries = slot + 1;
    index_.last_offset = off;
  }
  index_.marked = true;
  index_.last_sec = now_sec;
  return true;
}

Status Rotator::OpenActive() {
  OUTPOST_RETURN_IF_ERROR(OpenFile());
  return LoadTail();
}

void Rotator::Release() {
  released_ = ready();
  active_.fd.Reset();
  cursor_fd_.Reset();
  index_.fd.Reset();
}

Status Rotator::Reopen() {
  const uint64_t inode = active_.inode, size = active_.size;
  const bool mid_line = active_.mid_line;
  OUTPOST_RETURN_IF_ERROR(OpenFile());
  released_ = false;
  if (active_.inode == inode && active_.size == size) {
    active_.mid_line = mid_line;
    return OkStatus();
  }
  Status st = LoadTail();
  if (!st.ok()) active_.fd.Reset();
  return st;
}

Status Rotator::LoadTail() {
  active_.mid_line = false;
  if (active_.size == 0) return OkStatus();
  char last;
  ssize_t n = sys::RetryEintr(
      [&] { return ::pread(active_.fd.get(), &last, 1, static_cast<off_t>(active_.size - 1)); });
  if (n != 1) return ErrnoError("read '" + paths_->Log() + "'", n < 0 ? errno : EIO);
  active_.mid_line = last != '\n';
  return OkStatus();
}

Status Rotator::Truncate(uint64_t size) {
  if (::ftruncate(active_.fd.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoError("truncate '" + paths_->Log() + "'");
  }
  active_.size = size;
  return LoadTail();
}

Status Rotator::Resume(const CursorRecord& r) {
  highest_rotated_ = -1;  // rescan at the next rotation
  return Run(static_cast<int>(r.keep), static_cast<int>(r.step));
}

// Lists the rotated files once per Rotator (at its first rotation, or after
// a rotation resumed by recovery): deletes those with an index above keep
// (left by a run with a larger max_files) and notes the highest index left,
// so a rotation only renames files that exist.
void Rotator::ScanRotated(int keep) {
  const std::string path = paths_->Log();
  std::string dir = sys::Dirname(path);
  std::string prefix = sys::Basename(path) + ".";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;  // the rotation reports the real error
  std::vector<std::string> victims;
  int highest = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    std::string_view digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) continue;
    int index = std::stoi(std::string(digits));
    if (index > keep) {
      victims.push_back(dir + "/" + std::string(name));
    } else {
      highest = std::max(highest, index);
    }
  }
  ::closedir(d);
  for (const auto& v : victims) {
    (void)::unlink(v.c_str());
    (void)::unlink(logindex::PathFor(v).c_str());
  }
  highest_rotated_ = highest;
}

Status Rotator::Rotate() {
  active_.fd.Reset();  // not ready again until the rotation is complete
  index_.fd.Reset();
  int keep = policy_.max_files - 1;
  if (highest_rotated_ < 0) ScanRotated(keep);
  // Steps whose source cannot exist are skipped: start with the rename of
  // the highest existing index, or with the unlink when all slots are used.
  int first = highest_rotated_ >= keep ? 0 : keep - std::max(highest_rotated_, 0);
  Status st = Run(keep, first);
  if (stopped_) return OkStatus();
  if (!st.ok()) {
    active_.fd.Reset();
    highest_rotated_ = -1;
    return st;
  }
  highest_rotated_ = std::min(std::max(highest_rotated_, 0) + 1, keep);
  return OkStatus();
}

bool Rotator::DeleteOldest() {
  if (!ready()) return false;
  const std::string path = paths_->Log();
  if (highest_rotated_ < 0) ScanRotated(policy_.max_files - 1);
  while (highest_rotated_ > 0) {
    std::string victim = logfiles::RotatedPath(path, highest_rotated_--);
    if (::unlink(victim.c_str()) == 0) {
      (void)::unlink(logindex::PathFor(victim).c_str());
      log::Warn("log files: disk full, deleted the oldest rotated file", {{"file", victim}});
      return true;
    }
  }
  return false;
}

Status Rotator::Run(int keep, int first_step) {
  const std::string path = paths_->Log();
  for (int s = first_step; s <= keep + 1; ++s) {
    CursorRecord r;
    r.state = CursorRecord::kRotating;
    r.keep = static_cast<uint32_t>(keep);
    r.step = static_cast<uint32_t>(s);
    OUTPOST_RETURN_IF_ERROR(WriteRecord(r));
    if (Crash(LogPipeStep::kRotateRecorded)) return OkStatus();
    if (s == 0) {
      std::string victim = logfiles::RotatedPath(path, keep);
      if (::unlink(victim.c_str()) != 0 && errno != ENOENT) return ErrnoError("unlink '" + victim + "'");
      (void)::unlink(logindex::PathFor(victim).c_str());
    } else if (s <= keep) {
      std::string from = logfiles::RotatedPath(path, keep - s);
      std::string to = logfiles::RotatedPath(path, keep - s + 1);
      if (::rename(from.c_str(), to.c_str()) != 0 && errno != ENOENT) {
        return ErrnoError("rename '" + from + "' to '" + to + "'");
      }
      (void)::rename(logindex::PathFor(from).c_str(), logindex::PathFor(to).c_str());
    } else {
      OUTPOST_RETURN_IF_ERROR(OpenActive());
    }
    if (Crash(LogPipeStep::kRotateStepDone)) return OkStatus();
  }
  OUTPOST_RETURN_IF_ERROR(WriteRecord(CursorRecord{}));
  ++rotations_;
  return OkStatus();
}

}  // namespace outpost::logs
