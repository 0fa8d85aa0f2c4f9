#include "loop/dir_watch.h"

#include <dirent.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/clock.h"
#include "base/log.h"
#include "base/sys.h"

namespace outpost::loop {
namespace {

// Events that say a directory entry may now hold something different.
// IN_MODIFY is left out on purpose: it fires for every partial write, and a
// file is looked at once its writer closes it (IN_CLOSE_WRITE) or moves it
// into place (IN_MOVED_TO). IN_CREATE is needed for entries that never
// produce a close-after-write: sockets, directories, FIFOs, symlinks, hard
// links, files linked in from O_TMPFILE (see OnEntryEvent). IN_ATTRIB makes a
// `chmod` visible. IN_EXCL_UNLINK: no events from files still open after being
// unlinked (a writer's old temp file).
constexpr uint32_t kWatchMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_ATTRIB |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;

// Inotify reads per wakeup; the fd is level-triggered, so a flood of events
// is drained over several turns instead of starving other fds.
constexpr int kMaxReadsPerWakeup = 16;

std::string FormatDuration(int64_t nanos) {
  if (nanos >= kNanosPerSecond && nanos % kNanosPerSecond == 0) {
    return std::to_string(nanos / kNanosPerSecond) + "s";
  }
  return std::to_string(nanos / kNanosPerMilli) + "ms";
}

int64_t Nanos(const struct timespec& ts) { return static_cast<int64_t>(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec; }

DirWatch::Type TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return DirWatch::kRegular;
  if (S_ISDIR(mode)) return DirWatch::kDirectory;
  if (S_ISSOCK(mode)) return DirWatch::kSocket;
  return DirWatch::kOther;
}

enum class Found { kGone, kPresent, kUnknown };

// What is at abs now. real_dir: a directory itself, not a symlink to one.
// kUnknown when it cannot be told (EACCES on the way, say).
Found StatEntry(const std::string& abs, DirWatch::Entry* e, bool* real_dir) {
  struct stat st;
  if (::lstat(abs.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? Found::kGone : Found::kUnknown;
  *real_dir = S_ISDIR(st.st_mode);
  if (S_ISLNK(st.st_mode)) {
    struct stat target;
    if (::stat(abs.c_str(), &target) == 0) st = target;  // else: dangling, kOther
  }
  *e = DirWatch::Entry{TypeOf(st.st_mode), st.st_dev, st.st_ino, st.st_size, Nanos(st.st_mtim), Nanos(st.st_ctim)};
  return Found::kPresent;
}

// path is prefix itself or below it ("" is above everything).
bool Under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  return path.size() >= prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
         (path.size() == prefix.size() || path[prefix.size()] == '/');
}

bool UnderAny(const std::string& path, const std::set<std::string>& prefixes) {
  for (const std::string& p : prefixes) {
    if (Under(path, p)) return true;
  }
  return false;
}

std::string Join(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }

}  // namespace

bool DirWatch::Entry::SameAs(const Entry& o) const {
  return type == o.type && dev == o.dev && ino == o.ino && size == o.size && mtime_nanos == o.mtime_nanos &&
         ctime_nanos == o.ctime_nanos;
}

DirWatch::DirWatch(Loop* loop, Options options, Callback callback)
    : loop_(loop), options_(std::move(options)), callback_(std::move(callback)) {
  while (options_.dir.size() > 1 && options_.dir.back() == '/') options_.dir.pop_back();
}

Result<std::unique_ptr<DirWatch>> DirWatch::Start(Loop* loop, Options options, Callback callback) {
  if (options.dir.empty()) return Error(Code::kInvalidArgument, options.log_name + ": empty path");
  if (options.settle_nanos < 0 || options.retry_nanos <= 0) {
    return Error(Code::kInvalidArgument, options.log_name + ": settle must be >= 0 and retry > 0");
  }
  std::unique_ptr<DirWatch> w(new DirWatch(loop, std::move(options), std::move(callback)));
  w->TryWatch(/*after_loss=*/false);
  return w;
}

DirWatch::~DirWatch() {
  for (auto& [path, p] : pending_) loop_->CancelTimer(p.timer);
  if (watch_timer_) loop_->CancelTimer(watch_timer_);
  if (rescan_timer_) loop_->CancelTimer(rescan_timer_);
}

std::string DirWatch::Abs(const std::string& path) const {
  if (path.empty()) return options_.dir;
  if (options_.dir == "/") return "/" + path;
  return options_.dir + "/" + path;
}

bool DirWatch::Skipped(const std::string& name) const {
  return options_.ignore_dot_names && !name.empty() && name[0] == '.';
}

bool DirWatch::Qualifies(const std::string& path, Type type) const {
  if ((options_.types & type) == 0) return false;
  if (!options_.filter) return true;
  size_t slash = path.rfind('/');
  return options_.filter(slash == std::string::npos ? path : path.substr(slash + 1));
}

Result<int> DirWatch::AddWatch(const std::string& path) {
  std::string abs = Abs(path);
  // Below the root only real directories are watched (Walk decides by
  // lstat; IN_DONT_FOLLOW keeps a swap for a symlink from being followed).
  int wd = ::inotify_add_watch(inotify_.get(), abs.c_str(), kWatchMask | (path.empty() ? 0 : IN_DONT_FOLLOW));
  if (wd >= 0) return wd;
  int err = errno;
  Error e = ErrnoError("cannot watch '" + abs + "'", err);
  // ENOSPC from inotify_add_watch is the per-user watch limit, not a full disk.
  if (err == ENOSPC) e = Error(e.code(), e.message() + " (fs.inotify.max_user_watches reached?)");
  return e;
}

void DirWatch::Register(const std::string& path, int wd) {
  auto old = dirs_.find(path);
  if (old != dirs_.end() && old->second != wd) Unwatch(path);
  // The same directory watched under another path: it was renamed while
  // events were lost, and its old path has no watch any more.
  auto w = wds_.find(wd);
  if (w != wds_.end() && w->second != path) dirs_.erase(w->second);
  wds_[wd] = path;
  dirs_[path] = wd;
}

Status DirWatch::WatchRoot() {
  const std::string& dir = options_.dir;
  if (!inotify_) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return ErrnoError("cannot watch '" + dir + "': inotify_init1");
    auto w = LoopFd::Watch(loop_, UniqueFd(fd), EPOLLIN, [this](uint32_t) { OnInotify(); });
    if (!w.ok()) return w.error().Wrap("cannot watch '" + dir + "'");
    inotify_ = std::move(w.value());
  }
  if (options_.create && !watched_once_) {
    Status st = sys::MkdirAll(dir, 0755);
    if (!st.ok()) return st.error().Wrap("cannot create '" + dir + "'");
  }
  auto wd = AddWatch("");
  if (!wd.ok()) return wd.error();
  Register("", *wd);
  watched_once_ = true;
  return OkStatus();
}

void DirWatch::TryWatch(bool after_loss) {
  Status st = WatchRoot();
  if (st.ok()) {
    if (!problem_.empty()) log::Info(options_.log_name + " watched", {{"dir", options_.dir}});
    problem_.clear();
    if (rescan_on_watch_) {
      rescan_on_watch_ = false;
      Scan();  // last use of this
    }
    return;
  }
  std::string problem = st.error().message() + "; retrying every " + FormatDuration(options_.retry_nanos);
  // Logged when it changes, not every retry.
  if (problem != problem_) {
    log::Warn(options_.log_name + " not watched", {{"dir", options_.dir}, {"error", st.error().message()}});
  }
  problem_ = problem;
  rescan_on_watch_ = true;
  ScheduleWatch(options_.retry_nanos, /*after_loss=*/false);
  // The dir just went away and did not come back: what was in it is gone.
  if (after_loss) Scan();  // last use of this
}

void DirWatch::ScheduleWatch(int64_t delay_nanos, bool after_loss) {
  if (watch_timer_) loop_->CancelTimer(watch_timer_);
  watch_timer_ = loop_->AddTimer(delay_nanos, [this, after_loss] {
    watch_timer_ = 0;
    TryWatch(after_loss);
  });
}

void DirWatch::ScheduleRescan(int64_t delay_nanos, bool restart) {
  if (rescan_timer_) {
    if (!restart) return;
    loop_->CancelTimer(rescan_timer_);
  }
  rescan_timer_ = loop_->AddTimer(delay_nanos, [this] {
    rescan_timer_ = 0;
    Scan();
  });
}

void DirWatch::OnRootLost(const std::string& why) {
  // Closing the inotify fd drops every watch and every event still queued
  // (they describe the old directory).
  inotify_.Reset();
  dirs_.clear();
  wds_.clear();
  rescan_on_watch_ = true;
  problem_ = "'" + options_.dir + "' was " + why + "; watching it again";
  log::Warn(options_.log_name + " lost", {{"dir", options_.dir}, {"reason", why}});
  // Wait one settle time before looking again, so `mv d d.old; mv d.new d`
  // is seen as one swap (differences only) and not as everything removed,
  // then everything added.
  ScheduleWatch(options_.settle_nanos, /*after_loss=*/true);
}

void DirWatch::OnInotify() {
  // Large enough for many events; one event is at most sizeof + NAME_MAX + 1.
  alignas(struct inotify_event) char buf[16384];
  for (int i = 0; i < kMaxReadsPerWakeup && inotify_; i++) {
    ssize_t n = sys::Read(inotify_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log::Warn(options_.log_name + ": inotify read failed",
                  {{"dir", options_.dir}, {"error", ErrnoError("read").message()}});
      }
      return;
    }
    if (n == 0) return;
    Changes changes;
    // Stops early when the root was lost: the rest of the buffer is stale.
    for (char* p = buf; p < buf + n && inotify_;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      // ev->name is NUL-padded to len bytes.
      std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
      OnEvent(ev->wd, ev->mask, ev->cookie, name, &changes);
      p += sizeof(struct inotify_event) + ev->len;
    }
    if (!Deliver(changes)) return;
  }
}

// Never calls the callback (it collects into out and arms timers), so it may
// touch members freely.
void DirWatch::OnEvent(int wd, uint32_t mask, uint32_t cookie, const std::string& name, Changes* out) {
  if (mask & IN_Q_OVERFLOW) {
    // Events were dropped: compare everything with what was reported, once
    // the burst that overflowed the queue has had a settle time to end.
    log::Warn(options_.log_name + ": inotify queue overflowed; rescanning", {{"dir", options_.dir}});
    ScheduleRescan(options_.settle_nanos, /*restart=*/true);
    return;
  }
  auto w = wds_.find(wd);
  if (w == wds_.end()) return;  // of a watch dropped earlier
  const std::string dir = w->second;
  if (dir.empty()) {
    if (mask & IN_MOVE_SELF) return OnRootLost("moved away");
    if (mask & (IN_DELETE_SELF | IN_IGNORED | IN_UNMOUNT)) return OnRootLost("removed");
  } else if (mask & IN_IGNORED) {
    // The kernel dropped the watch of a subdirectory: deleted (the parent's
    // event says so too) or its file system unmounted (the mount point is
    // there again, with other entries).
    wds_.erase(w);
    auto d = dirs_.find(dir);
    if (d != dirs_.end() && d->second == wd) dirs_.erase(d);
    DropSubtree(dir, out);
    Entry e;
    bool real_dir = false;
    if (StatEntry(Abs(dir), &e, &real_dir) == Found::kPresent && real_dir) WatchSubtree(dir, out);
    return;
  }
  // IN_DELETE_SELF / IN_MOVE_SELF of a subdirectory: its parent reports it.
  if (name.empty() || Skipped(name)) return;
  std::string path = Join(dir, name);
  if (options_.recursive && (mask & IN_ISDIR)) {
    if (mask & (IN_CREATE | IN_MOVED_TO)) WatchSubtree(path, out);
    if (mask & (IN_DELETE | IN_MOVED_FROM)) DropSubtree(path, out);
  } else if (options_.filter && !options_.filter(name)) {
    return;
  }
  // A rename from an entry the owner sees pairs a removal with this
  // addition; one from a skipped or filtered name (`mv .x.tmp x`) does not.
  if (mask & IN_MOVED_FROM) last_moved_from_cookie_ = cookie;
  const bool renamed_within = (mask & IN_MOVED_TO) && cookie != 0 && cookie == last_moved_from_cookie_;
  OnEntryEvent(path, mask, renamed_within, out);
}

void DirWatch::OnEntryEvent(const std::string& path, uint32_t mask, bool renamed_within, Changes* out) {
  bool later = options_.settle_all_events;
  if (mask & (IN_DELETE | IN_MOVED_FROM)) {
    unlinked_.insert(path);
    later ? LookLater(path, false) : LookNow(path, false, out);
  } else if (mask & IN_MOVED_TO) {
    // Not forced: a replacing rename shows in the inode, and an entry a
    // rescan reported just before its event was read is no change.
    if (options_.moved_in_at_once && !renamed_within) later = false;
    later ? LookLater(path, false) : LookNow(path, false, out);
  } else if (mask & IN_CREATE) {
    // open(O_CREAT) of a new file: IN_CLOSE_WRITE follows when the writer is
    // done, and looking now could see half a file. Everything else created
    // here (socket, FIFO, directory, symlink, hard link) gets no
    // IN_CLOSE_WRITE under this name. A new single-link file with data is
    // either still being written or a complete file linked in from
    // O_TMPFILE (whose close is reported under its "#<inode>" name): it
    // settles, and a close re-arms that.
    struct stat st;
    bool single = ::lstat(Abs(path).c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
    if (single && st.st_size == 0) return;
    // Others are not forced: a name is only created where the old entry
    // was removed, which Look sees (unlinked_), and an entry a rescan
    // reported just before its event was read is no change.
    later || single ? LookLater(path, single) : LookNow(path, false, out);
  } else if (mask & (IN_CLOSE_WRITE | IN_ATTRIB)) {
    LookLater(path, true);
  }
}

bool DirWatch::WatchDir(const std::string& path) {
  if (!inotify_ || !dirs_.count("")) return true;  // nothing is watched now
  auto wd = AddWatch(path);
  if (wd.ok()) {
    Register(path, *wd);
    return true;
  }
  // Gone again already: its parent's event says so.
  if (wd.error().code() == Code::kNotFound || wd.error().sys_errno() == ENOTDIR) return true;
  log::Warn(options_.log_name + ": subdirectory not watched", {{"error", wd.error().message()}});
  return false;
}

void DirWatch::Unwatch(const std::string& path) {
  auto it = dirs_.find(path);
  if (it == dirs_.end()) return;
  int wd = it->second;
  dirs_.erase(it);
  auto w = wds_.find(wd);
  if (w != wds_.end() && w->second == path) {
    wds_.erase(w);
    if (inotify_) ::inotify_rm_watch(inotify_.get(), wd);
  }
}

void DirWatch::WatchSubtree(const std::string& path, Changes* out) {
  // Entries may have been made in it before the watch existed (mkdir -p,
  // a tree moved in): list it after watching.
  std::map<std::string, Entry> found;
  std::set<std::string> walked, unlisted;
  walked.insert(path);
  if (!WatchDir(path)) ScheduleRescan(options_.retry_nanos, /*restart=*/false);
  Walk(path, &found, &walked, &unlisted);
  for (const auto& [p, e] : found) options_.settle_all_events ? LookLater(p, false) : LookNow(p, false, out);
}

void DirWatch::DropSubtree(const std::string& path, Changes* out) {
  std::vector<std::string> dirs, paths;
  for (const auto& [p, wd] : dirs_) {
    if (Under(p, path)) dirs.push_back(p);
  }
  for (const std::string& p : dirs) Unwatch(p);
  for (const auto& [p, e] : entries_) {
    if (p != path && Under(p, path)) paths.push_back(p);
  }
  for (const std::string& p : paths) options_.settle_all_events ? LookLater(p, false) : LookNow(p, false, out);
}

void DirWatch::LookLater(const std::string& path, bool force) {
  auto it = pending_.find(path);
  if (it != pending_.end()) {
    loop_->CancelTimer(it->second.timer);
    force = force || it->second.force;
  }
  Loop::TimerId id = loop_->AddTimer(options_.settle_nanos, [this, path] {
    auto p = pending_.find(path);
    bool forced = p != pending_.end() && p->second.force;
    if (p != pending_.end()) pending_.erase(p);
    Changes changes;
    Look(path, forced, &changes);
    Deliver(changes);  // last use of this
  });
  pending_[path] = Pending{id, force};
}

void DirWatch::LookNow(const std::string& path, bool force, Changes* out) {
  auto it = pending_.find(path);
  if (it != pending_.end()) {
    loop_->CancelTimer(it->second.timer);
    force = force || it->second.force;
    pending_.erase(it);
  }
  Look(path, force, out);
}

void DirWatch::Look(const std::string& path, bool force, Changes* out) {
  Entry e;
  bool real_dir = false;
  Found f = StatEntry(Abs(path), &e, &real_dir);
  if (f == Found::kUnknown) return;
  auto it = entries_.find(path);
  if (f == Found::kGone || !Qualifies(path, e.type)) {
    if (f == Found::kGone) unlinked_.erase(path);
    if (it != entries_.end()) {
      out->push_back(Change{Kind::kRemoved, path, it->second.type});
      entries_.erase(it);
    }
    return;
  }
  // Another entry under a reported name: its inode differs, or the old
  // one's removal was seen (the inode number may be reused at once, within
  // one timestamp tick).
  bool removed = unlinked_.erase(path) > 0;
  if (it == entries_.end()) {
    out->push_back(Change{Kind::kAdded, path, e.type});
  } else {
    bool replaced = removed || it->second.dev != e.dev || it->second.ino != e.ino;
    if (force || replaced || !it->second.SameAs(e)) out->push_back(Change{Kind::kChanged, path, e.type, replaced});
  }
  entries_[path] = e;
}

void DirWatch::Walk(const std::string& path, std::map<std::string, Entry>* found, std::set<std::string>* walked,
                    std::set<std::string>* unlisted) {
  std::string abs = Abs(path);
  DIR* d = ::opendir(abs.c_str());  // O_CLOEXEC in glibc
  if (!d) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return;  // not there: nothing in it
    log::Warn(options_.log_name + ": cannot list", {{"dir", abs}, {"error", ErrnoError("list", err).message()}});
    unlisted->insert(path);
    return;
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    struct dirent* ent = ::readdir(d);
    if (!ent) break;
    if (std::strcmp(ent->d_name, ".") == 0 || std::strcmp(ent->d_name, "..") == 0) continue;
    if (!Skipped(ent->d_name)) names.emplace_back(ent->d_name);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) {
    log::Warn(options_.log_name + ": cannot list", {{"dir", abs}, {"error", ErrnoError("list", err).message()}});
    unlisted->insert(path);
    return;
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string child = Join(path, name);
    Entry e;
    bool real_dir = false;
    Found f = StatEntry(Abs(child), &e, &real_dir);
    if (f == Found::kGone) continue;
    if (f == Found::kUnknown) {
      unlisted->insert(child);  // keep what was known of it
      continue;
    }
    if (real_dir && options_.recursive) {
      walked->insert(child);
      if (!WatchDir(child)) ScheduleRescan(options_.retry_nanos, /*restart=*/false);
      Walk(child, found, walked, unlisted);
    }
    if (Qualifies(child, e.type)) (*found)[child] = e;
  }
}

void DirWatch::Rescan() { Scan(); }

bool DirWatch::Scan() {
  std::map<std::string, Entry> found;
  std::set<std::string> walked, unlisted;
  walked.insert("");
  Walk("", &found, &walked, &unlisted);
  std::vector<std::string> stale;
  for (const auto& [path, wd] : dirs_) {
    if (!walked.count(path) && !UnderAny(path, unlisted)) stale.push_back(path);
  }
  for (const std::string& path : stale) Unwatch(path);
  Changes changes;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (found.count(it->first) || UnderAny(it->first, unlisted)) {
      ++it;
      continue;
    }
    changes.push_back(Change{Kind::kRemoved, it->first, it->second.type});
    it = entries_.erase(it);
  }
  for (const auto& [path, e] : found) {
    auto it = entries_.find(path);
    if (it == entries_.end()) {
      changes.push_back(Change{Kind::kAdded, path, e.type});
    } else if (options_.rescan_reports_unchanged || !it->second.SameAs(e)) {
      changes.push_back(Change{Kind::kChanged, path, e.type, it->second.dev != e.dev || it->second.ino != e.ino});
    }
    entries_[path] = e;
  }
  return Deliver(changes);
}

bool DirWatch::Deliver(const Changes& changes) {
  if (changes.empty() || !callback_) return true;
  std::weak_ptr<bool> alive = alive_;
  // A copy: the callback may destroy this object, and callback_ with it.
  Callback cb = callback_;
  cb(changes);
  return !alive.expired();
}

}  // namespace outpost::loop
