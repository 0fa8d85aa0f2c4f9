// The jobs.d drop-in directory (default /etc/outpost/jobs.d). Owns: the
// inotify watch on the directory, deciding which names are job files
// (`*.json`, not dot-files, editor backups `~`, `.swp`/`.swx`, `#…#`, temp
// files), debouncing bursts of events per file (editors save by rename,
// backup-then-write, truncate-then-write), reading each file whole with a
// size limit, and recovering when the directory is missing, removed or
// recreated, or the inotify queue overflows. It reports what files say; it
// does not parse or apply them (job/manager does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "base/error.h"
#include "base/fd.h"
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
  const std::string& dir_problem() const { return dir_problem_; }
  // Current per-file problems, path -> error (for `outpost status`).
  const std::map<std::string, std::string>& problems() const { return problems_; }
  const std::string& dir() const { return options_.dir; }

  // Whether a directory entry name is a job file (exposed for tests/docs).
  static bool IsJobFileName(const std::string& name);

 private:
  JobsDir(Loop* loop, Options options, Callbacks callbacks);

  // What was last reported through `changed` for a path: a 64-bit FNV-1a of
  // the content and its size, not the content itself (a jobs.d of thousands
  // of large files must not be held in memory twice; job/manager keeps the
  // parsed specs).
  struct Seen {
    uint64_t hash;
    size_t size;
  };

  // Ensures the inotify fd exists and watches the dir (creating it when
  // options.create). On failure sets dir_problem_ and schedules a retry.
  void TryWatch(bool after_loss);
  Status AddWatch();
  void ScheduleWatch(int64_t delay_nanos, bool after_loss);
  void OnWatchLost(const std::string& why, bool remove_watch);
  void OnInotify();
  void OnEvent(int wd, uint32_t mask, const std::string& name);
  void Arm(const std::string& path);
  // The Scan/Check/Emit functions call the owner's callbacks, which may
  // destroy this object: they return false when it is gone, and then the
  // caller must return without touching members.
  bool Scan(std::set<std::string> known, bool force);
  bool Check(const std::string& path, bool force);
  bool Gone(const std::string& path, bool force);
  bool Fail(const std::string& path, const std::string& error, bool force);
  bool Report(const std::string& path, const std::string& content, bool force);
  std::set<std::string> ReportedPaths() const;
  bool OwnsPath(const std::string& path) const;

  Loop* loop_;
  Options options_;
  Callbacks callbacks_;
  UniqueFd inotify_;                                // registered on loop_ while valid
  int wd_ = -1;                                     // watch on options_.dir, -1 when not watched
  bool rescan_on_watch_ = false;                    // the dir was unwatched: rescan once watched
  bool watched_once_ = false;                       // options_.create no longer applies
  Loop::TimerId watch_timer_ = 0;                   // retry / rewatch; 0 = none
  Loop::TimerId rescan_timer_ = 0;                  // after IN_Q_OVERFLOW; 0 = none
  std::map<std::string, Loop::TimerId> pending_;    // path -> debounce timer
  std::map<std::string, Seen> reported_;            // path -> last content reported via changed
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // expires with this object
  std::string dir_problem_;
  std::map<std::string, std::string> problems_;
};

}  // namespace outpost::job
