#include "job/jobs_dir.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <string_view>

#include "base/log.h"
#include "base/sys.h"

namespace outpost::job {
namespace {

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

}  // namespace

bool JobsDir::IsJobFileName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;             // dot-files, vim swap, .#emacs locks
  if (name.front() == '#' && name.back() == '#') return false;  // emacs auto-save
  if (EndsWith(name, "~") || EndsWith(name, ".swp") || EndsWith(name, ".swx") || EndsWith(name, ".tmp")) {
    return false;
  }
  return EndsWith(name, ".json") && name.size() > 5;
}

JobsDir::JobsDir(Options options, Callbacks callbacks) : options_(std::move(options)), callbacks_(std::move(callbacks)) {
  while (options_.dir.size() > 1 && options_.dir.back() == '/') options_.dir.pop_back();
}

Result<std::unique_ptr<JobsDir>> JobsDir::Create(Loop* loop, Options options, Callbacks callbacks) {
  if (options.dir.empty()) return Error(Code::kInvalidArgument, "jobs dir: empty path");
  if (options.debounce_nanos < 0 || options.retry_nanos <= 0) {
    return Error(Code::kInvalidArgument, "jobs dir: debounce must be >= 0 and retry > 0");
  }
  std::unique_ptr<JobsDir> d(new JobsDir(std::move(options), std::move(callbacks)));
  loop::DirWatch::Options w;
  w.dir = d->options_.dir;
  w.filter = IsJobFileName;
  w.types = loop::DirWatch::kAnyType;  // anything else under a job file name is an error
  // Every event settles: vim's save (x renamed to x~, x written anew) is one
  // change, not a removal and an addition; a rename a.json -> b.json reports
  // the removal first.
  w.settle_nanos = d->options_.debounce_nanos;
  w.settle_all_events = true;
  // A file renamed in from elsewhere (the atomic way to install one) is
  // applied at once.
  w.moved_in_at_once = true;
  // Internal rescans read every file again (contents are compared here).
  w.rescan_reports_unchanged = true;
  w.retry_nanos = d->options_.retry_nanos;
  w.create = d->options_.create;
  w.log_name = "jobs dir";
  JobsDir* raw = d.get();
  // A jobs.d that cannot be watched is not fatal: dir_problem() says why and
  // a timer retries. No rescan here; the owner calls Rescan(known) itself.
  auto watch = loop::DirWatch::Start(loop, std::move(w), [raw](const std::vector<loop::DirWatch::Change>& changes) {
    raw->OnChanges(changes);
  });
  if (!watch.ok()) return watch.error();
  d->watch_ = std::move(watch.value());
  return d;
}

JobsDir::~JobsDir() = default;

void JobsDir::OnChanges(const std::vector<loop::DirWatch::Change>& changes) {
  if (absorbing_) return;
  for (const loop::DirWatch::Change& c : changes) {
    std::string path = options_.dir + "/" + c.path;
    bool alive = c.kind == loop::DirWatch::Kind::kRemoved ? Gone(path, /*force=*/false) : Check(path, /*force=*/false);
    if (!alive) return;
  }
}

void JobsDir::Rescan(const std::set<std::string>& known) {
  std::set<std::string> all = known;
  for (const std::string& p : ReportedPaths()) all.insert(p);
  // Bring the watch's list up to date; what it reports is covered below,
  // where every file is read.
  absorbing_ = true;
  watch_->Rescan();
  absorbing_ = false;
  // When the dir cannot be listed the list is what it was, and each known
  // path is checked on its own below.
  std::vector<std::string> present;
  for (const auto& [name, entry] : watch_->entries()) present.push_back(options_.dir + "/" + name);
  for (const std::string& path : present) {
    all.erase(path);
    if (!Check(path, /*force=*/true)) return;
  }
  for (const std::string& path : all) {
    if (!Check(path, /*force=*/true)) return;
  }
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
