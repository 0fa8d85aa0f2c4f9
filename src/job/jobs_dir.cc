#include "job/jobs_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <string_view>

#include "base/clock.h"
#include "base/log.h"
#include "base/sys.h"

namespace outpost::job {
namespace {

// Events that say a directory entry may now hold something different.
// IN_MODIFY is left out on purpose: it fires for every partial write, and the
// file is read once the writer closes it (IN_CLOSE_WRITE) or moves it into
// place (IN_MOVED_TO). IN_CREATE is needed for entries that never produce a
// close-after-write: directories, FIFOs, symlinks, hard links, files linked
// in from O_TMPFILE (see OnEvent). IN_ATTRIB makes `chmod` of an unreadable
// file take effect without rewriting it. IN_EXCL_UNLINK: no events from files
// still open after being unlinked (a writer's old temp file).
constexpr uint32_t kWatchMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_ATTRIB |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;

// Inotify reads per wakeup; the fd is level-triggered, so a flood of events
// is drained over several turns instead of starving other fds.
constexpr int kMaxReadsPerWakeup = 16;

bool EndsWith(const std::string& s, const char* suffix) {
  std::string_view suf(suffix);
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

uint64_t Fnv1a64(const std::string& data) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string FormatSize(uint64_t bytes) {
  constexpr uint64_t kKiB = 1024, kMiB = 1024 * 1024;
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " bytes";
}

std::string FormatDuration(int64_t nanos) {
  if (nanos >= kNanosPerSecond && nanos % kNanosPerSecond == 0) {
    return std::to_string(nanos / kNanosPerSecond) + "s";
  }
  return std::to_string(nanos / kNanosPerMilli) + "ms";
}

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string TooBig(const std::string& path, const std::string& size, size_t limit) {
  return path + ": file is " + size + "; the limit is " + FormatSize(limit);
}

// Job file entries in dir, as absolute paths in name order. A missing dir
// has none.
Result<std::set<std::string>> ListJobFiles(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = ::opendir(dir.c_str());  // O_CLOEXEC in glibc
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) return out;
    return ErrnoError("list '" + dir + "'");
  }
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (!e) break;
    std::string name = e->d_name;
    if (JobsDir::IsJobFileName(name)) out.insert(dir + "/" + name);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoError("list '" + dir + "'", err);
  return out;
}

}  // namespace

bool JobsDir::IsJobFileName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;             // dot-files, vim swap, .#emacs locks
  if (name.front() == '#' && name.back() == '#') return false;  // emacs auto-save
  if (EndsWith(name, "~") || EndsWith(name, ".swp") || EndsWith(name, ".swx") || EndsWith(name, ".tmp")) {
    return false;
  }
  return EndsWith(name, ".json") && name.size() > 5;
}

JobsDir::JobsDir(Loop* loop, Options options, Callbacks callbacks)
    : loop_(loop), options_(std::move(options)), callbacks_(std::move(callbacks)) {
  while (options_.dir.size() > 1 && options_.dir.back() == '/') options_.dir.pop_back();
}

Result<std::unique_ptr<JobsDir>> JobsDir::Create(Loop* loop, Options options, Callbacks callbacks) {
  if (options.dir.empty()) return Error(Code::kInvalidArgument, "jobs dir: empty path");
  if (options.debounce_nanos < 0 || options.retry_nanos <= 0) {
    return Error(Code::kInvalidArgument, "jobs dir: debounce must be >= 0 and retry > 0");
  }
  std::unique_ptr<JobsDir> d(new JobsDir(loop, std::move(options), std::move(callbacks)));
  // A jobs.d that cannot be watched is not fatal: dir_problem() says why and
  // a timer retries. No rescan here; the owner calls Rescan(known) itself.
  d->TryWatch(/*after_loss=*/false);
  return d;
}

JobsDir::~JobsDir() {
  for (auto& [path, id] : pending_) loop_->CancelTimer(id);
  if (watch_timer_) loop_->CancelTimer(watch_timer_);
  if (rescan_timer_) loop_->CancelTimer(rescan_timer_);
  if (inotify_) loop_->RemoveFd(inotify_.get());
}

Status JobsDir::AddWatch() {
  const std::string& dir = options_.dir;
  if (!inotify_) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return ErrnoError("cannot watch '" + dir + "': inotify_init1");
    inotify_.Reset(fd);
    Status st = loop_->AddFd(fd, EPOLLIN, [this](uint32_t) { OnInotify(); });
    if (!st.ok()) {
      inotify_.Reset();
      return st.error().Wrap("cannot watch '" + dir + "'");
    }
  }
  if (options_.create && !watched_once_) {
    Status st = sys::MkdirAll(dir, 0755);
    if (!st.ok()) return st.error().Wrap("cannot create '" + dir + "'");
  }
  int wd = ::inotify_add_watch(inotify_.get(), dir.c_str(), kWatchMask);
  if (wd < 0) {
    int err = errno;
    Error e = ErrnoError("cannot watch '" + dir + "'", err);
    // ENOSPC from inotify_add_watch is the per-user watch limit, not a full disk.
    if (err == ENOSPC) e = Error(e.code(), e.message() + " (fs.inotify.max_user_watches reached?)");
    return e;
  }
  wd_ = wd;
  watched_once_ = true;
  return OkStatus();
}

void JobsDir::TryWatch(bool after_loss) {
  Status st = AddWatch();
  if (st.ok()) {
    if (!dir_problem_.empty()) log::Info("jobs dir watched", {{"dir", options_.dir}});
    dir_problem_.clear();
    if (rescan_on_watch_) {
      rescan_on_watch_ = false;
      Scan(ReportedPaths(), /*force=*/false);  // last use of this
    }
    return;
  }
  std::string problem = st.error().message() + "; retrying every " + FormatDuration(options_.retry_nanos);
  // Logged when it changes, not every retry.
  if (problem != dir_problem_) {
    log::Warn("jobs dir not watched", {{"dir", options_.dir}, {"error", st.error().message()}});
  }
  dir_problem_ = problem;
  rescan_on_watch_ = true;
  ScheduleWatch(options_.retry_nanos, /*after_loss=*/false);
  // The dir just went away and did not come back: the files in it are gone
  // (Scan reports nothing removed when the dir exists but cannot be listed).
  if (after_loss) Scan(ReportedPaths(), /*force=*/false);  // last use of this
}

void JobsDir::ScheduleWatch(int64_t delay_nanos, bool after_loss) {
  if (watch_timer_) loop_->CancelTimer(watch_timer_);
  watch_timer_ = loop_->AddTimer(delay_nanos, [this, after_loss] {
    watch_timer_ = 0;
    TryWatch(after_loss);
  });
}

void JobsDir::OnWatchLost(const std::string& why, bool remove_watch) {
  // After IN_MOVE_SELF the watch follows the moved directory: drop it. After
  // IN_DELETE_SELF/IN_IGNORED the kernel has dropped it already.
  if (remove_watch) ::inotify_rm_watch(inotify_.get(), wd_);
  wd_ = -1;
  rescan_on_watch_ = true;
  dir_problem_ = "'" + options_.dir + "' was " + why + "; watching it again";
  log::Warn("jobs dir lost", {{"dir", options_.dir}, {"reason", why}});
  // Wait one debounce period before looking again, so `mv jobs.d jobs.old;
  // mv jobs.new jobs.d` is seen as one swap (differences only) and not as
  // everything removed, then everything added.
  ScheduleWatch(options_.debounce_nanos, /*after_loss=*/true);
}

void JobsDir::OnInotify() {
  // Large enough for many events; one event is at most sizeof + NAME_MAX + 1.
  alignas(struct inotify_event) char buf[16384];
  for (int i = 0; i < kMaxReadsPerWakeup && inotify_; i++) {
    ssize_t n = sys::Read(inotify_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log::Warn("jobs dir: inotify read failed", {{"dir", options_.dir}, {"error", ErrnoError("read").message()}});
      }
      return;
    }
    if (n == 0) return;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      // ev->name is NUL-padded to len bytes.
      std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
      OnEvent(ev->wd, ev->mask, name);
      p += sizeof(struct inotify_event) + ev->len;
    }
  }
}

// Never calls the owner's callbacks (it only arms timers), so it may touch
// members freely.
void JobsDir::OnEvent(int wd, uint32_t mask, const std::string& name) {
  if (mask & IN_Q_OVERFLOW) {
    // Events were dropped: compare everything with what was reported, once
    // the burst that overflowed the queue has had a debounce period to settle.
    log::Warn("jobs dir: inotify queue overflowed; rescanning", {{"dir", options_.dir}});
    if (rescan_timer_) loop_->CancelTimer(rescan_timer_);
    rescan_timer_ = loop_->AddTimer(options_.debounce_nanos, [this] {
      rescan_timer_ = 0;
      Scan(ReportedPaths(), /*force=*/false);
    });
    return;
  }
  // Events of an earlier watch (the dir was replaced) are stale.
  if (wd_ < 0 || wd != wd_) return;
  if (mask & IN_MOVE_SELF) return OnWatchLost("moved away", /*remove_watch=*/true);
  if (mask & (IN_DELETE_SELF | IN_IGNORED | IN_UNMOUNT)) return OnWatchLost("removed", /*remove_watch=*/false);
  if (name.empty() || !IsJobFileName(name)) return;
  std::string path = options_.dir + "/" + name;
  if ((mask & IN_CREATE) && !(mask & IN_ISDIR)) {
    // open(O_CREAT) of a new file: IN_CLOSE_WRITE follows when the writer is
    // done, and reading now could see half a file. Everything else created
    // here (FIFO, symlink, hard link, a complete file linked in from
    // O_TMPFILE, whose close is reported under its "#<inode>" name) gets no
    // IN_CLOSE_WRITE under this name and must be looked at on IN_CREATE.
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_size == 0) return;
  }
  Arm(path);
}

void JobsDir::Arm(const std::string& path) {
  auto it = pending_.find(path);
  if (it != pending_.end()) loop_->CancelTimer(it->second);
  pending_[path] = loop_->AddTimer(options_.debounce_nanos, [this, path] {
    pending_.erase(path);
    Check(path, /*force=*/false);
  });
}

void JobsDir::Rescan(const std::set<std::string>& known) {
  std::set<std::string> all = known;
  for (const std::string& p : ReportedPaths()) all.insert(p);
  Scan(std::move(all), /*force=*/true);
}

bool JobsDir::Scan(std::set<std::string> known, bool force) {
  auto listed = ListJobFiles(options_.dir);
  if (!listed.ok()) {
    // Cannot tell what is there: each known path is checked on its own below.
    log::Warn("jobs dir: cannot list", {{"dir", options_.dir}, {"error", listed.error().message()}});
  }
  std::set<std::string> present = listed.ok() ? std::move(listed.value()) : std::set<std::string>();
  for (const std::string& path : present) {
    known.erase(path);
    if (!Check(path, force)) return false;
  }
  for (const std::string& path : known) {
    if (!Check(path, force)) return false;
  }
  return true;
}

std::set<std::string> JobsDir::ReportedPaths() const {
  std::set<std::string> out;
  for (const auto& [path, seen] : reported_) out.insert(path);
  for (const auto& [path, error] : problems_) out.insert(path);
  return out;
}

bool JobsDir::OwnsPath(const std::string& path) const {
  return sys::Dirname(path) == options_.dir && IsJobFileName(sys::Basename(path));
}

bool JobsDir::Check(const std::string& path, bool force) {
  // A path that is not a job file of this dir (the owner's `known` from an
  // older configuration, say) is gone as far as this dir is concerned.
  if (!OwnsPath(path)) return Gone(path, force);
  // stat before open: a FIFO or device is never opened (opening a FIFO
  // blocks until a writer comes; opening some devices has side effects).
  // Symlinks are followed.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      struct stat lst;
      if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
        return Fail(path, path + ": symbolic link to a missing file", force);
      }
      return Gone(path, force);
    }
    if (err == ENOTDIR) return Gone(path, force);  // the dir was replaced by a file
    return Fail(path, ErrnoError("stat '" + path + "'", err).message(), force);
  }
  if (!S_ISREG(st.st_mode)) return Fail(path, path + ": is " + FileTypeName(st.st_mode) + ", not a regular file", force);
  size_t limit = options_.max_file_bytes;
  if (static_cast<uint64_t>(st.st_size) > limit) {
    return Fail(path, TooBig(path, std::to_string(st.st_size) + " bytes", limit), force);
  }
  // O_NONBLOCK: if the entry was swapped for a FIFO since the stat, open must
  // not wait for a writer; fstat below catches the swap.
  auto fd = sys::Open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd.ok()) {
    if (fd.error().code() == Code::kNotFound) return Gone(path, force);
    return Fail(path, fd.error().message(), force);
  }
  if (::fstat(fd->get(), &st) != 0) return Fail(path, ErrnoError("fstat '" + path + "'").message(), force);
  if (!S_ISREG(st.st_mode)) return Fail(path, path + ": is " + FileTypeName(st.st_mode) + ", not a regular file", force);
  // Read at most limit + 1 bytes: the file may have grown since the stat.
  std::string content;
  content.reserve(std::min(static_cast<size_t>(st.st_size), limit) + 1);
  char buf[16384];
  for (;;) {
    size_t want = std::min(sizeof buf, limit + 1 - content.size());
    ssize_t n = sys::Read(fd->get(), buf, want);
    if (n < 0) return Fail(path, ErrnoError("read '" + path + "'").message(), force);
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > limit) return Fail(path, TooBig(path, "more than " + FormatSize(limit), limit), force);
  }
  return Report(path, content, force);
}

bool JobsDir::Gone(const std::string& path, bool force) {
  bool was = reported_.erase(path) > 0;
  was = problems_.erase(path) > 0 || was;
  if (!was && !force) return true;
  log::Info("jobs dir: file removed", {{"path", path}});
  std::weak_ptr<bool> alive = alive_;
  if (callbacks_.removed) callbacks_.removed(path);
  return !alive.expired();
}

bool JobsDir::Fail(const std::string& path, const std::string& error, bool force) {
  auto it = problems_.find(path);
  if (!force && it != problems_.end() && it->second == error) return true;
  problems_[path] = error;
  log::Warn("jobs dir: cannot use file", {{"path", path}, {"error", error}});
  std::weak_ptr<bool> alive = alive_;
  if (callbacks_.error) callbacks_.error(path, error);
  return !alive.expired();
}

bool JobsDir::Report(const std::string& path, const std::string& content, bool force) {
  Seen seen{Fnv1a64(content), content.size()};
  bool had_problem = problems_.erase(path) > 0;
  auto it = reported_.find(path);
  bool same = it != reported_.end() && it->second.hash == seen.hash && it->second.size == seen.size;
  if (same && !force && !had_problem) return true;
  reported_[path] = seen;
  log::Debug("jobs dir: file changed", {{"path", path}, {"bytes", std::to_string(content.size())}});
  std::weak_ptr<bool> alive = alive_;
  if (callbacks_.changed) callbacks_.changed(path, content);
  return !alive.expired();
}

}  // namespace outpost::job
