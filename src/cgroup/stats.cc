// Cgroups: reading stats of a cgroup and watching memory.events for OOM
// kills (OomWatcher).
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "cgroup/cgroup.h"

namespace outpost::cgroup {
namespace {

// Whole-string unsigned decimal (cgroup counters are u64).
bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = v;
  return true;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  for (const std::string& f : Split(line, ' ')) {
    if (!f.empty()) out.push_back(f);
  }
  return out;
}

// "8:0 rbytes=1 wbytes=2 rios=3 ..." lines.
std::map<std::string, std::map<std::string, uint64_t>> ParseIoStat(const std::string& text) {
  std::map<std::string, std::map<std::string, uint64_t>> out;
  for (const std::string& line : Split(text, '\n')) {
    std::vector<std::string> f = Fields(line);
    if (f.empty()) continue;
    auto& dev = out[f[0]];
    for (size_t i = 1; i < f.size(); ++i) {
      size_t eq = f[i].find('=');
      uint64_t v;
      if (eq != std::string::npos && ParseU64(f[i].substr(eq + 1), &v)) dev[f[i].substr(0, eq)] = v;
    }
  }
  return out;
}

// A single-value file ("123\n").
bool FirstU64(const std::string& text, uint64_t* out) {
  std::vector<std::string> f = Fields(text.substr(0, text.find('\n')));
  return f.size() == 1 && ParseU64(f[0], out);
}

uint64_t Get(const std::map<std::string, uint64_t>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

std::map<std::string, uint64_t> ParseFlatKeyed(const std::string& text) {
  std::map<std::string, uint64_t> out;
  for (const std::string& line : Split(text, '\n')) {
    std::vector<std::string> f = Fields(line);
    uint64_t v;
    if (f.size() == 2 && ParseU64(f[1], &v)) out[f[0]] = v;
  }
  return out;
}

Result<CgroupStats> Cgroups::Stats(const std::string& path) const {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError("stats of cgroup " + path);
  CgroupStats s;
  s.timestamp_unix_nanos = WallNanos();
  // Each file is optional: a controller not enabled (or a kernel without
  // swap accounting) simply leaves its figures out of `measured`.
  auto read = [&](const char* name) -> Result<std::string> {
    auto text = sys::ReadFile(path + "/" + name, 1 << 20);
    if (text.ok()) s.measured.push_back(name);
    return text;
  };
  if (auto t = read("memory.current"); t.ok()) FirstU64(*t, &s.memory_current);
  if (auto t = read("memory.swap.current"); t.ok()) FirstU64(*t, &s.memory_swap_current);
  if (auto t = read("memory.stat"); t.ok()) s.memory_stat = ParseFlatKeyed(*t);
  if (auto t = read("memory.events"); t.ok()) s.memory_events = ParseFlatKeyed(*t);
  if (auto t = read("cpu.stat"); t.ok()) {
    auto m = ParseFlatKeyed(*t);
    s.cpu_usage_usec = Get(m, "usage_usec");
    s.cpu_user_usec = Get(m, "user_usec");
    s.cpu_system_usec = Get(m, "system_usec");
    s.cpu_nr_periods = Get(m, "nr_periods");
    s.cpu_nr_throttled = Get(m, "nr_throttled");
    s.cpu_throttled_usec = Get(m, "throttled_usec");
  }
  if (auto t = read("pids.current"); t.ok()) FirstU64(*t, &s.pids_current);
  if (auto t = read("io.stat"); t.ok()) s.io_stat = ParseIoStat(*t);
  return s;
}

// ---- OomWatcher ----

struct OomWatcher::Impl {
  struct Watch {
    std::string path;
    uint64_t last = 0;
    std::function<void(uint64_t)> cb;
  };
  LoopFd fd;  // the inotify instance, registered with the loop
  std::map<int, Watch> by_wd;
  std::map<std::string, int> wd_by_path;
  // Cleared by the destructor so a callback that destroys the watcher does
  // not make OnReadable touch freed memory.
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

  void OnReadable();
};

namespace {

Result<uint64_t> ReadOomKills(const std::string& cgroup_path) {
  auto text = sys::ReadFile(cgroup_path + "/memory.events", 64 << 10);
  if (!text.ok()) return text.error();
  auto m = ParseFlatKeyed(*text);
  return Get(m, "oom_kill");
}

}  // namespace

void OomWatcher::Impl::OnReadable() {
  // Drain the queue first, then deliver: a callback may Unwatch (or destroy
  // the watcher), so each delivery looks its watch up again.
  std::set<int> changed;
  std::vector<int> gone;
  alignas(struct inotify_event) char buf[4096];
  for (;;) {
    ssize_t n = sys::Read(fd.get(), buf, sizeof buf);
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(struct inotify_event)) <= n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(buf + off);
      if (ev->mask & IN_MODIFY) changed.insert(ev->wd);
      // IN_IGNORED: the file went away (cgroup removed); the kernel has
      // dropped the watch already.
      if (ev->mask & IN_IGNORED) gone.push_back(ev->wd);
      off += static_cast<ssize_t>(sizeof(struct inotify_event)) + ev->len;
    }
  }
  std::weak_ptr<bool> guard = alive;
  for (int wd : changed) {
    auto it = by_wd.find(wd);
    if (it == by_wd.end()) continue;
    auto count = ReadOomKills(it->second.path);
    if (!count.ok() || *count <= it->second.last) continue;
    it->second.last = *count;
    auto cb = it->second.cb;  // the callback may Unwatch itself
    cb(*count);
    if (guard.expired()) return;
  }
  for (int wd : gone) {
    auto it = by_wd.find(wd);
    if (it == by_wd.end()) continue;
    wd_by_path.erase(it->second.path);
    by_wd.erase(it);
  }
}

OomWatcher::OomWatcher() : impl_(std::make_unique<Impl>()) {}

Result<std::unique_ptr<OomWatcher>> OomWatcher::Create(Loop* loop) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return ErrnoError("inotify_init1");
  std::unique_ptr<OomWatcher> w(new OomWatcher());
  Impl* impl = w->impl_.get();
  auto watched = LoopFd::Watch(loop, UniqueFd(fd), EPOLLIN, [impl](uint32_t) { impl->OnReadable(); });
  if (!watched.ok()) return watched.error();
  impl->fd = std::move(*watched);
  return w;
}

OomWatcher::~OomWatcher() {
  impl_->fd.Reset();
  impl_->alive.reset();
}

Status OomWatcher::Watch(const std::string& cgroup_path, std::function<void(uint64_t oom_kills)> cb) {
  auto initial = ReadOomKills(cgroup_path);
  if (!initial.ok()) return initial.error().Wrap("watch for OOM kills");
  std::string file = cgroup_path + "/memory.events";
  // memory.events of a cgroup raises IN_MODIFY when a counter changes
  // (the kernel calls cgroup_file_notify), the documented way to wait on it.
  int wd = ::inotify_add_watch(impl_->fd.get(), file.c_str(), IN_MODIFY);
  if (wd < 0) return ErrnoError("inotify watch " + file);
  auto old = impl_->wd_by_path.find(cgroup_path);
  if (old != impl_->wd_by_path.end() && old->second != wd) {
    ::inotify_rm_watch(impl_->fd.get(), old->second);  // a cgroup recreated under the same path
    impl_->by_wd.erase(old->second);
  }
  impl_->wd_by_path[cgroup_path] = wd;
  impl_->by_wd[wd] = Impl::Watch{cgroup_path, *initial, std::move(cb)};
  return OkStatus();
}

void OomWatcher::Unwatch(const std::string& cgroup_path) {
  auto it = impl_->wd_by_path.find(cgroup_path);
  if (it == impl_->wd_by_path.end()) return;
  // EINVAL when the kernel already dropped it (cgroup removed): fine.
  ::inotify_rm_watch(impl_->fd.get(), it->second);
  impl_->by_wd.erase(it->second);
  impl_->wd_by_path.erase(it);
}

}  // namespace outpost::cgroup
