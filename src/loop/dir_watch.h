// A directory watched on the loop: reports its entries (and, when recursive,
// those of its subdirectories) appearing, changing and going away. Users:
// jobs.d (job/jobs_dir), plugin socket directories, hooks.d, CNI configs.
//
// How to use it:
//   DirWatch::Options o;
//   o.dir = "/var/lib/kubelet/plugins_registry";
//   o.recursive = true;
//   o.types = DirWatch::kSocket;
//   auto w = DirWatch::Start(loop, o, [](const std::vector<DirWatch::Change>& changes) { ... });
//   (*w)->Rescan();  // reports what is there now, each as kAdded
// Start reports nothing itself; the owner calls Rescan() once right after it
// (and may call it again at any time, e.g. on SIGHUP).
//
// What is reported. Paths are relative to options.dir ("a.json",
// "sub/x.sock"). An entry is reported when its type is in options.types and
// its name passes options.filter; names starting with '.' are skipped at
// every level when options.ignore_dot_names (so a dot-directory is not
// descended either). Types come from stat(), so a symlink counts as what it
// points to and a dangling one as kOther; subdirectories are descended only
// when they are real directories. Reports come in batches, each delivered in
// the order the kernel reported the events:
//   kAdded    an entry not reported before is there;
//   kChanged  a reported entry was written in place, chmod-ed, touched, or
//             replaced (renamed over, recreated) — for a socket: a new
//             listener under the same name;
//   kRemoved  a reported entry is gone: deleted, renamed away, replaced by an
//             entry that does not qualify, or its directory went away.
//
// When. Renames into the directory and entries created complete (sockets,
// FIFOs, directories, symlinks, hard links) are looked at at once, and so are
// deletions and renames away. A regular file written in place is looked at
// once its writer closed it and settle_nanos passed with no further event on
// that path (truncate-then-write, several writes in a row). With
// settle_all_events, every event waits for the settle time (needed where a
// save by an editor through a backup name must read as one change rather than
// a removal and an addition: vim renames x to x~ and writes x anew), except,
// with moved_in_at_once, an entry renamed in from outside the watched tree or
// from a name the owner does not see (skipped or filtered: `mv .x.tmp x`): a
// rename delivers a whole file, and no removal pairs with it. A rename from
// one seen name to another (the kernel's IN_MOVED_FROM and IN_MOVED_TO with
// the same cookie, one right after the other) still settles on both sides.
//
// Rescans. Rescan() lists the whole tree and reports how it differs from what
// was reported: new entries, gone entries, and entries whose stat (inode,
// type, size, mtime, ctime) differs. Removals come first, then additions and
// changes in path order. Besides the owner's calls, rescans run after the
// inotify queue overflowed (one settle time after the overflow) and when the
// directory is watched again after being missing. A change made within the
// same file-system timestamp tick as the previous look and whose events were
// lost to an overflow is not seen by a rescan, unless
// rescan_reports_unchanged.
//
// The directory itself going away (deleted, moved, unmounted): one settle
// time later (so `mv d d.old; mv d.new d` reads as a swap, differences only)
// it is looked for again; if it is not there, everything is reported removed.
// A missing directory is looked for again by a timer every retry_nanos (a
// timer rather than a watch on the parent, which may itself be missing or be
// replaced); problem() says why it is not watched meanwhile. A subdirectory
// that cannot be watched (inotify watch limit) is listed again every
// retry_nanos until it can be.
//
// The callback may destroy the DirWatch; nothing of it is touched afterwards.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/loop.h"

namespace outpost::loop {

class DirWatch {
 public:
  // Entry types, also used as a mask in Options::types.
  enum Type : uint32_t {
    kRegular = 1u << 0,
    kDirectory = 1u << 1,
    kSocket = 1u << 2,
    kOther = 1u << 3,  // FIFO, device, dangling symlink
  };
  static constexpr uint32_t kAnyType = kRegular | kDirectory | kSocket | kOther;

  enum class Kind { kAdded, kChanged, kRemoved };
  struct Change {
    Kind kind;
    std::string path;  // relative to options.dir
    Type type;         // for kRemoved: the type it was reported with
    // kChanged: another entry under the name (a new inode, or the old one
    // was deleted or renamed away first), not the same one written,
    // chmod-ed or touched.
    bool replaced = false;
  };
  using Callback = std::function<void(const std::vector<Change>& changes)>;

  struct Options {
    std::string dir;
    bool recursive = false;
    uint32_t types = kAnyType;
    bool ignore_dot_names = true;
    // Called with an entry's base name; null takes every name. Not applied
    // when deciding whether to descend into a subdirectory.
    std::function<bool(const std::string& name)> filter;
    int64_t settle_nanos = 100LL * 1000000;
    bool settle_all_events = false;
    bool moved_in_at_once = false;  // with settle_all_events; see "When" above
    int64_t retry_nanos = 5LL * 1000000000;
    // Rescans report every entry still there as kChanged, not only those
    // whose stat differs: for owners that compare contents themselves and
    // must not miss a change made within one timestamp tick.
    bool rescan_reports_unchanged = false;
    // mkdir -p the dir when missing, until it has been watched once. A dir
    // removed or moved away later is not recreated: a script replacing it
    // (`rm -rf d; cp -r new d`) would race our mkdir and end up nested inside.
    bool create = false;
    // Start of the log messages ("jobs dir lost", "directory lost").
    std::string log_name = "directory";
  };

  // Fails only for invalid options. A directory that cannot be watched is
  // not an error: problem() says why and a timer retries.
  static Result<std::unique_ptr<DirWatch>> Start(Loop* loop, Options options, Callback callback);
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // Lists the whole tree now and reports how it differs from what was
  // reported (see "Rescans" above). Also watches subdirectories not yet
  // watched.
  void Rescan();

  // What an entry was when last looked at.
  struct Entry {
    Type type;
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_nanos;
    int64_t ctime_nanos;
    bool SameAs(const Entry& o) const;
  };
  // The entries as reported so far, by relative path.
  const std::map<std::string, Entry>& entries() const { return entries_; }
  // "" when the directory is watched; else why not (e.g. "cannot watch
  // '/x': No such file or directory; retrying every 5s").
  const std::string& problem() const { return problem_; }
  const std::string& dir() const { return options_.dir; }
  // options.dir + "/" + path.
  std::string Abs(const std::string& path) const;

 private:
  DirWatch(Loop* loop, Options options, Callback callback);

  using Changes = std::vector<Change>;

  // Root watch: (re)creates the inotify fd and watches options_.dir.
  Status WatchRoot();
  void TryWatch(bool after_loss);
  void ScheduleWatch(int64_t delay_nanos, bool after_loss);
  // restart: a pending rescan is pushed back to delay_nanos from now.
  void ScheduleRescan(int64_t delay_nanos, bool restart);
  Result<int> AddWatch(const std::string& path);
  void Register(const std::string& path, int wd);
  void OnRootLost(const std::string& why);
  void OnInotify();
  void OnEvent(int wd, uint32_t mask, uint32_t cookie, const std::string& name, Changes* out);
  void OnEntryEvent(const std::string& path, uint32_t mask, bool renamed_within, Changes* out);
  // Subdirectory watches (recursive only).
  bool WatchDir(const std::string& path);
  void Unwatch(const std::string& path);
  void WatchSubtree(const std::string& path, Changes* out);
  void DropSubtree(const std::string& path, Changes* out);
  // Looks at one path now (or after settle_nanos) and records what changed.
  // force: report kChanged even when its stat looks the same (an event said
  // it was written).
  void Look(const std::string& path, bool force, Changes* out);
  void LookLater(const std::string& path, bool force);
  void LookNow(const std::string& path, bool force, Changes* out);
  bool Qualifies(const std::string& path, Type type) const;
  bool Skipped(const std::string& name) const;
  // Lists path (a directory) and below into found; dirs whose listing
  // failed go to unlisted (their known entries are kept).
  void Walk(const std::string& path, std::map<std::string, Entry>* found, std::set<std::string>* walked,
            std::set<std::string>* unlisted);
  // Rescan's body and Deliver return false when the callback destroyed this
  // object; the caller must then return without touching members.
  bool Scan();
  bool Deliver(const Changes& changes);

  struct Pending {
    Loop::TimerId timer;
    bool force;
  };

  Loop* loop_;
  Options options_;
  Callback callback_;
  LoopFd inotify_;
  std::map<std::string, int> dirs_;  // watched dir path ("" = options_.dir) -> wd
  std::map<int, std::string> wds_;   // wd -> watched dir path
  bool rescan_on_watch_ = false;     // the dir was unwatched: rescan once watched
  bool watched_once_ = false;        // options_.create no longer applies
  Loop::TimerId watch_timer_ = 0;    // retry / rewatch of the root; 0 = none
  Loop::TimerId rescan_timer_ = 0;   // after IN_Q_OVERFLOW or a failed subdir watch; 0 = none
  uint32_t last_moved_from_cookie_ = 0;  // of the latest IN_MOVED_FROM of a seen name
  std::map<std::string, Pending> pending_;  // path -> settle timer
  // Names whose entry was deleted or renamed away since last looked at and
  // found gone: a creation under such a name is a new entry.
  std::set<std::string> unlinked_;
  std::map<std::string, Entry> entries_;
  std::string problem_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // expires with this object
};

}  // namespace outpost::loop
