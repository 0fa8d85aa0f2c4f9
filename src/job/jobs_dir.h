// The jobs.d drop-in directory (default /etc/outpost/jobs.d). Owns:
// deciding which names are job files (`*.json`, not dot-files, editor backups
// `~`, `.swp`/`.swx`, `#…#`, temp files), reading each file whole with a size
// limit, and telling real content changes from rewrites of the same content.
// Watching is done by loop::DirWatch with every event settled for the
// debounce time (editors save by rename, backup-then-write,
// truncate-then-write), which also recovers when the directory is missing,
// removed or recreated, or the inotify queue overflows. It reports what files
// say; it does not parse or apply them (job/manager does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "loop/dir_watch.h"
#include "loop/loop.h"

namespace outpost::job {

class JobsDir {
 public:
  // Callbacks run from the loop; each may destroy this JobsDir (nothing of
  // it is touched after a callback that did). Paths are absolute:
  // options.dir + "/" + name.
  struct Callbacks {
    // A job file appeared or its content changed since it was last reported
    // here. Also called with unchanged content by Rescan(known), and when a
    // file with a problem becomes usable again (so the owner can clear it).
    std::function<void(const std::string& path, const std::string& content)> changed;
    // A path reported before (through `changed` or `error`), or named in
    // Rescan's `known`, is gone: no entry, or the directory itself is gone.
    std::function<void(const std::string& path)> removed;
    // A job file cannot be used as it is: unreadable, not a regular file,
    // over the size limit. The file's previous content (if any) stays in
    // effect; the problem is also kept in problems() until the file is fine
    // again or removed. The same error is not reported twice in a row except
    // by Rescan(known).
    std::function<void(const std::string& path, const std::string& error)> error;
  };
  struct Options {
    std::string dir;
    size_t max_file_bytes = 1 << 20;
    int64_t debounce_nanos = 100LL * 1000000;   // quiet time before a file is read
    int64_t retry_nanos = 5LL * 1000000000;     // re-try a missing/unwatchable dir
    // mkdir -p the dir when missing, until it has been watched once. A dir
    // removed or moved away later is not recreated: a script replacing it
    // (`rm -rf jobs.d; cp -r new jobs.d`) would race our mkdir and end up
    // nested inside it. Its return is noticed by the retry timer.
    bool create = true;
  };

  static Result<std::unique_ptr<JobsDir>> Create(Loop* loop, Options options, Callbacks callbacks);
  ~JobsDir();

  // Reads every job file now, in name order, and reports each through
  // `changed` (even if unchanged) or `error`, then reports `removed` for each
  // path in `known` (or reported before) that is not there. The owner calls
  // it once at start with the paths of the file jobs it already has, and on
  // SIGHUP. Internal rescans (after IN_Q_OVERFLOW, and when the directory
  // is watched again after being missing, removed or moved) use the paths
  // reported so far and report only differences: a file whose content is
  // what was last reported gets no call.
  void Rescan(const std::set<std::string>& known);

  // "" when the directory is watched; else why not (e.g. "cannot create
  // '/etc/outpost/jobs.d': Read-only file system; retrying every 5s").
  const std::string& dir_problem() const { return watch_->problem(); }
  // Current per-file problems, path -> error (for `outpost status`).
  const std::map<std::string, std::string>& problems() const { return problems_; }
  const std::string& dir() const { return options_.dir; }

  // Whether a directory entry name is a job file (exposed for tests/docs).
  static bool IsJobFileName(const std::string& name);

 private:
  JobsDir(Options options, Callbacks callbacks);

  // What was last reported through `changed` for a path: a 64-bit FNV-1a of
  // the content and its size, not the content itself (a jobs.d of thousands
  // of large files must not be held in memory twice; job/manager keeps the
  // parsed specs).
  struct Seen {
    uint64_t hash;
    size_t size;
  };

  void OnChanges(const std::vector<loop::DirWatch::Change>& changes);
  // The Check/Gone/Fail/Report functions call the owner's callbacks, which
  // may destroy this object: they return false when it is gone, and then the
  // caller must return without touching members.
  bool Check(const std::string& path, bool force);
  bool Gone(const std::string& path, bool force);
  bool Fail(const std::string& path, const std::string& error, bool force);
  bool Report(const std::string& path, const std::string& content, bool force);
  std::set<std::string> ReportedPaths() const;
  bool OwnsPath(const std::string& path) const;

  Options options_;
  Callbacks callbacks_;
  std::map<std::string, Seen> reported_;            // path -> last content reported via changed
  std::map<std::string, std::string> problems_;
  bool absorbing_ = false;                          // in Rescan: the watch's reports are ignored
  std::unique_ptr<loop::DirWatch> watch_;           // its callback points to this
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // expires with this object
};

}  // namespace outpost::job
