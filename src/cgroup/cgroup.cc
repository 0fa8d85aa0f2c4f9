// Cgroups: finding cgroup2, setting up the agent's subtree, creating,
// killing and removing job and task cgroups, cleaning leftovers. Limits
// (Apply, Check) live in cgroup_limits.cc; stats and the OOM watcher in
// cgroup_stats.cc.
#include "cgroup/cgroup.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::cgroup {
namespace {

// The controllers outpost uses, in the kernel's order (which is also the
// order of the writes to cgroup.subtree_control).
const char* const kControllers[] = {"cpuset", "cpu", "io", "memory", "pids"};

// Bounds on walking cgroup trees (a task cannot create cgroups below its
// own unless delegated, so real trees are 2-3 levels deep).
constexpr int kMaxDepth = 16;

std::set<std::string> Words(const std::string& text) {
  std::set<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t') {
      if (!cur.empty()) out.insert(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.insert(cur);
  return out;
}

std::string JoinSet(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& w : s) out += (out.empty() ? "" : " ") + w;
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
        s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string StripTrailingSlashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Whether what path resolves to is a cgroup2 filesystem (the top mount
// there, as any open of a file below it would see).
bool IsCgroup2(const char* path) {
  struct statfs fs;
  if (sys::RetryEintr([&] { return ::statfs(path, &fs); }) != 0) return false;
  return static_cast<unsigned long>(fs.f_type) == CGROUP2_SUPER_MAGIC;
}

// Subdirectories (child cgroups) of dir; files are the kernel's interface
// files and are skipped, symlinks too (cgroupfs has none).
std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> out;
  auto names = sys::ListDir(dir);
  if (!names.ok()) return out;
  for (const std::string& n : *names) {
    if (IsDir(dir + "/" + n)) out.push_back(n);
  }
  return out;
}

// A job or task name as a single path component that cannot escape the
// parent or land on one of the kernel's interface files ("memory.max").
bool ValidName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  if (name.find('/') != std::string::npos || name.find('\0') != std::string::npos) return false;
  if (StartsWith(name, "cgroup.")) return false;
  for (const char* c : kControllers) {
    if (StartsWith(name, std::string(c) + ".")) return false;
  }
  return true;
}

// mkdir; an existing directory is fine. Returns whether it was created.
Result<bool> MakeCgroupDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return true;
  int err = errno;
  if (err == EEXIST && IsDir(path)) return false;
  return ErrnoError("create cgroup " + path, err);
}

// The agent's own cgroup ("/system.slice/x.service"), relative to the
// cgroup2 mount, from /proc/self/cgroup ("0::/path"); "" if unknown.
std::string OwnCgroup() {
  auto text = sys::ReadFile("/proc/self/cgroup", 64 << 10);
  if (!text.ok()) return "";
  for (const std::string& line : Split(*text, '\n')) {
    if (StartsWith(line, "0::")) return line.substr(3);
  }
  return "";
}

// Controllers bound to cgroup v1 hierarchies (/proc/cgroups: hierarchy id
// != 0 and enabled), for explaining why cgroup2 has none.
std::set<std::string> V1Controllers() {
  std::set<std::string> out;
  auto text = sys::ReadFile("/proc/cgroups", 64 << 10);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    for (const std::string& w : Split(line, '\t')) {
      if (!w.empty()) f.push_back(w);
    }
    if (f.size() < 4 || f[1] == "0" || f[3] != "1") continue;
    std::string name = f[0] == "blkio" ? "io" : f[0];  // v1's name for io
    for (const char* c : kControllers) {
      if (name == c) out.insert(name);
    }
  }
  return out;
}

// " (cpu, memory are on cgroup v1)", or "" if none are.
std::string V1Hint() {
  std::set<std::string> v1 = V1Controllers();
  if (v1.empty()) return "";
  std::string list;
  for (const std::string& c : v1) list += (list.empty() ? "" : ", ") + c;
  return " (" + list + (v1.size() == 1 ? " is" : " are") + " on cgroup v1)";
}

int WriteRaw(const std::string& file, const std::string& value) {
  int fd = sys::RetryEintr([&] { return ::open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC); });
  if (fd < 0) return errno;
  UniqueFd owned(fd);
  // One write(2): cgroup files parse each write as a whole value.
  ssize_t n = sys::Write(fd, value.data(), value.size());
  if (n < 0) return errno;
  if (static_cast<size_t>(n) != value.size()) return EIO;
  return 0;
}

void SleepMillis(int ms) {
  struct timespec ts = {0, static_cast<long>(ms) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void CollectPids(const std::string& path, int depth, std::vector<pid_t>* out) {
  if (depth > kMaxDepth) return;
  auto text = sys::ReadFile(path + "/cgroup.procs", 4 << 20);
  if (text.ok()) {
    for (const std::string& line : Split(*text, '\n')) {
      auto pid = ParseInt(line, 1, INT32_MAX);
      if (pid.ok()) out->push_back(static_cast<pid_t>(*pid));
    }
  }
  for (const std::string& sub : SubDirs(path)) CollectPids(path + "/" + sub, depth + 1, out);
}

// After SIGKILL the processes take a moment to exit; rmdir fails with
// EBUSY until they have. Waits (bounded) for cgroup.events "populated 0",
// or an empty cgroup.procs where there is no cgroup.events.
void WaitEmpty(const std::string& path, int64_t timeout_nanos) {
  int64_t deadline = MonotonicNanos() + timeout_nanos;
  for (;;) {
    auto ev = sys::ReadFile(path + "/cgroup.events", 4096);
    bool empty;
    if (ev.ok()) {
      empty = ParseFlatKeyed(*ev)["populated"] == 0;
    } else {
      std::vector<pid_t> pids;
      CollectPids(path, 0, &pids);
      empty = pids.empty();
    }
    if (empty || MonotonicNanos() >= deadline) return;
    SleepMillis(5);
  }
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string out;
  for (size_t i = 0; i < pids.size() && i < 10; ++i) out += (i ? " " : "") + std::to_string(pids[i]);
  if (pids.size() > 10) out += Format(" and %zu more", pids.size() - 10);
  return out;
}

}  // namespace

std::string FindCgroup2Mount(const std::string& mountinfo) {
  // "36 35 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw": the mount
  // point is field 5, the fs type the first field after " - " (optional
  // fields come before the separator, so count from there).
  std::string first;
  for (const std::string& line : Split(mountinfo, '\n')) {
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::vector<std::string> pre = Split(line.substr(0, sep), ' ');
    std::vector<std::string> post = Split(line.substr(sep + 3), ' ');
    if (pre.size() < 5 || post.empty() || post[0] != "cgroup2") continue;
    std::string mp = UnescapeMountinfo(pre[4]);
    if (mp == "/sys/fs/cgroup") return mp;
    if (first.empty()) first = mp;
  }
  return first;
}

Status WriteCgroupFile(const std::string& file, const std::string& value) {
  int err = WriteRaw(file, value);
  if (err != 0) return ErrnoError("write \"" + value + "\" to " + file, err);
  return OkStatus();
}

std::unique_ptr<Cgroups> Cgroups::Setup(Options options) {
  std::unique_ptr<Cgroups> cg(new Cgroups(std::move(options)));
  cg->Init();
  return cg;
}

void Cgroups::Init() {
  bool from_mountinfo = options_.mount_point.empty();
  options_.root = StripTrailingSlashes(options_.root);
  if (from_mountinfo && IsCgroup2("/sys/fs/cgroup")) {
    // Where FindCgroup2Mount would look first: one statfs instead of the
    // kernel writing out and us parsing every mount (milliseconds at boot
    // on a slow board: 7-15 ms in the test VM).
    mount_point_ = "/sys/fs/cgroup";
  } else if (from_mountinfo) {
    auto mi = sys::ReadFile("/proc/self/mountinfo", 4 << 20);
    if (!mi.ok()) {
      reason_ = "cannot find the cgroup2 mount: " + mi.error().message();
      return;
    }
    mount_point_ = FindCgroup2Mount(*mi);
    if (mount_point_.empty()) {
      reason_ = "no cgroup2 filesystem is mounted" + V1Hint();
      return;
    }
  } else {
    mount_point_ = options_.mount_point;
  }
  mount_point_ = StripTrailingSlashes(mount_point_);
  auto ctrl = sys::ReadFile(mount_point_ + "/cgroup.controllers", 4096);
  if (!ctrl.ok()) {
    reason_ = Format("cgroup2 at %s is not usable: %s", mount_point_.c_str(), ctrl.error().message().c_str());
    return;
  }
  std::set<std::string> have = Words(*ctrl);
  std::set<std::string> wanted;
  for (const char* c : kControllers) {
    if (have.count(c)) wanted.insert(c);
  }
  if (wanted.empty()) {
    // The hint reads the host's /proc/cgroups, which says nothing about a
    // fake mount given in the options (tests).
    reason_ = Format("cgroup2 at %s has no controllers", mount_point_.c_str()) + (from_mountinfo ? V1Hint() : "");
    return;
  }

  // The default root means "outpost.slice at the cgroup2 mount", wherever
  // that is (/sys/fs/cgroup/unified on a hybrid v1/v2 host).
  if (from_mountinfo && options_.root == Options().root && mount_point_ != "/sys/fs/cgroup") {
    options_.root = mount_point_ + "/outpost.slice";
  }
  const std::string& root = options_.root;
  if (!StartsWith(root, mount_point_ + "/") || root.find("/../") != std::string::npos ||
      root.find("/./") != std::string::npos || EndsWith(root, "/..") || EndsWith(root, "/.")) {
    reason_ = Format("cgroup root %s is not a directory below the cgroup2 mount %s", root.c_str(),
                     mount_point_.c_str());
    return;
  }

  // Walk from the mount point down to the root: each level enables, for its
  // children, the controllers its own parent gave it. cgroup v2's "no
  // internal processes" rule: a non-root cgroup that holds processes itself
  // cannot enable controllers for its children (the write fails with EBUSY,
  // or EOPNOTSUPP; see EnableControllers). The mount's root cgroup is
  // exempt, so an agent running in the root cgroup (as under busybox init)
  // is fine; an agent started by systemd inside e.g.
  // /system.slice/outpost.service must not have its cgroup on the path to
  // the root (choose a root beside it). Only the levels on that path are
  // touched, and a failure is reported, not worked around by moving
  // processes.
  std::vector<std::string> errors;
  std::string level = mount_point_;
  for (const std::string& comp : Split(root.substr(mount_point_.size() + 1), '/')) {
    if (comp.empty()) continue;
    wanted = EnableControllers(level, wanted, &errors);
    level += "/" + comp;
    auto made = MakeCgroupDir(level);
    if (!made.ok()) {
      reason_ = made.error().message();
      return;
    }
  }
  controllers_ = EnableControllers(root, wanted, &errors);
  available_ = true;
  reason_ = JoinStrings(errors, "; ");

  for (const std::string& dir : {root, mount_point_}) {
    auto cpus = sys::ReadFile(dir + "/cpuset.cpus.effective", 4096);
    auto mems = sys::ReadFile(dir + "/cpuset.mems.effective", 4096);
    if (cpus.ok() && mems.ok()) {
      effective_cpus_ = JoinSet(Words(*cpus));
      effective_mems_ = JoinSet(Words(*mems));
      break;
    }
  }
}

std::set<std::string> Cgroups::EnableControllers(const std::string& dir, const std::set<std::string>& wanted,
                                                 std::vector<std::string>* errors) const {
  std::set<std::string> enabled, missing;
  std::string file = dir + "/cgroup.subtree_control";
  auto cur = sys::ReadFile(file, 4096);
  std::set<std::string> already = cur.ok() ? Words(*cur) : std::set<std::string>{};
  for (const char* c : kControllers) {
    if (wanted.count(c)) (already.count(c) ? enabled : missing).insert(c);
  }
  if (missing.empty()) return enabled;

  std::string rel = dir.size() > mount_point_.size() ? dir.substr(mount_point_.size()) : "/";
  std::string agent_here = OwnCgroup() == rel ? ", the agent itself among them" : "";
  // "No internal processes": a non-root cgroup holding processes must not
  // be touched at all. Trying would half work: the threaded controllers
  // (cpuset cpu pids) can be enabled there, which makes it a thread root;
  // memory and io then fail with EOPNOTSUPP (EBUSY if tried first) and its
  // children become invalid domains. The mount's root cgroup is exempt.
  if (dir != mount_point_) {
    std::vector<pid_t> procs = Pids(dir);
    if (!procs.empty()) {
      errors->push_back(Format("cannot enable %s in %s: it holds processes (%s%s), and cgroup v2 lets only a "
                               "cgroup without processes of its own enable controllers for its children",
                               JoinSet(missing).c_str(), dir.c_str(), PidList(procs).c_str(), agent_here.c_str()));
      return enabled;
    }
  }
  for (const std::string& c : missing) {
    // One controller per write: a failing one (cpuset not given to this
    // level, say) does not take the others with it.
    int err = WriteRaw(file, "+" + c);
    if (err == 0) {
      enabled.insert(c);
      continue;
    }
    std::string msg = Format("cannot enable %s in %s: %s", c.c_str(), file.c_str(), std::strerror(err));
    if (err == EBUSY || err == EOPNOTSUPP) {
      msg += " (processes in " + dir + agent_here +
             "? cgroup v2 lets only a cgroup without processes of its own enable controllers for its children)";
    }
    errors->push_back(msg);
  }
  return enabled;
}

std::string Cgroups::JobPath(const std::string& job) const {
  return options_.root + "/" + (job.empty() ? std::string("_tasks") : job);
}

std::string Cgroups::TaskPath(const std::string& job, const std::string& task_id) const {
  return JobPath(job) + "/" + task_id;
}

bool Cgroups::UnderRoot(const std::string& path) const {
  if (!StartsWith(path, options_.root + "/") || path.size() <= options_.root.size() + 1) return false;
  for (const std::string& comp : Split(path.substr(options_.root.size() + 1), '/')) {
    if (comp.empty() || comp == "." || comp == "..") return false;
  }
  return true;
}

Status Cgroups::EnsureJob(const std::string& job, const Resources& r) {
  if (!available_) return Error(Code::kFailedPrecondition, "cgroup v2 is not available: " + reason_);
  if (!job.empty() && !ValidName(job)) return Error(Code::kInvalidArgument, "invalid cgroup name \"" + job + "\"");
  std::string path = JobPath(job);
  auto made = MakeCgroupDir(path);
  if (!made.ok()) return made.error();
  std::vector<std::string> errors;
  EnableControllers(path, controllers_, &errors);
  if (!errors.empty()) return Error(Code::kFailedPrecondition, JoinStrings(errors, "; "));
  return Apply(path, r);
}

Result<UniqueFd> Cgroups::CreateTask(const std::string& job, const std::string& task_id, const Resources& r) {
  if (!available_) return Error(Code::kFailedPrecondition, "cgroup v2 is not available: " + reason_);
  if (!ValidName(task_id)) return Error(Code::kInvalidArgument, "invalid cgroup name \"" + task_id + "\"");
  if (!IsDir(JobPath(job))) OUTPOST_RETURN_IF_ERROR(EnsureJob(job, Resources{}));
  std::string path = TaskPath(job, task_id);
  auto made = MakeCgroupDir(path);
  if (!made.ok()) return made.error();
  bool created = *made;
  if (!created) {
    std::vector<pid_t> left = Pids(path);
    if (!left.empty()) {
      return Error(Code::kFailedPrecondition,
                   Format("cgroup %s still has processes: %s", path.c_str(), PidList(left).c_str()));
    }
    // A restart: start from a fresh cgroup so no limit of the previous run
    // stays behind. If it cannot go (child cgroups), reuse it.
    if (::rmdir(path.c_str()) == 0) {
      made = MakeCgroupDir(path);
      if (!made.ok()) return made.error();
      created = true;
    }
  }
  Status st = Apply(path, r);
  if (!st.ok()) {
    if (created) ::rmdir(path.c_str());
    return st.error();
  }
  auto fd = sys::Open(path, O_RDONLY | O_DIRECTORY);
  if (!fd.ok()) {
    if (created) ::rmdir(path.c_str());
    return fd.error();
  }
  return std::move(fd.value());
}

Status Cgroups::Kill(const std::string& path) {
  if (!UnderRoot(path)) return Error(Code::kInvalidArgument, "refusing to kill " + path + ": not below " + root());
  if (!IsDir(path)) return OkStatus();
  std::string kill_file = path + "/cgroup.kill";
  if (Exists(kill_file)) return WriteCgroupFile(kill_file, "1");
  return KillByFreeze(path);
}

// Kernels before 5.14 have no cgroup.kill. Freezing first (5.2+) keeps
// processes from forking while their pids are collected; v2's freezer lets
// a fatal signal through, so SIGKILL works on frozen processes. Without a
// freezer, repeat kill rounds until the cgroup is empty.
Status Cgroups::KillByFreeze(const std::string& path) {
  std::string freeze = path + "/cgroup.freeze";
  bool frozen = Exists(freeze) && WriteRaw(freeze, "1") == 0;
  if (frozen) {
    int64_t deadline = MonotonicNanos() + 1000 * kNanosPerMilli;
    for (;;) {
      auto ev = sys::ReadFile(path + "/cgroup.events", 4096);
      if (!ev.ok() || ParseFlatKeyed(*ev)["frozen"] == 1 || MonotonicNanos() >= deadline) break;
      SleepMillis(5);
    }
  }
  std::vector<pid_t> pids;
  for (int round = 0; round < 100; ++round) {
    pids.clear();
    CollectPids(path, 0, &pids);
    if (pids.empty()) break;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    if (frozen && round > 0) break;
    SleepMillis(round == 0 ? 1 : 10);
  }
  if (frozen) {
    int err = WriteRaw(freeze, "0");
    if (err != 0) return ErrnoError("write \"0\" to " + freeze, err);
  }
  return OkStatus();
}

Status Cgroups::Remove(const std::string& path) {
  if (!UnderRoot(path)) return Error(Code::kInvalidArgument, "refusing to remove " + path + ": not below " + root());
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return OkStatus();
  int err = errno;
  std::string what = "remove cgroup " + path;
  if (err == EBUSY) {
    std::vector<pid_t> left;
    CollectPids(path, 0, &left);
    if (!left.empty()) what += " (processes left: " + PidList(left) + ")";
    else if (!SubDirs(path).empty()) what += " (child cgroups left)";
  }
  return ErrnoError(what, err);
}

Status Cgroups::RemoveJobIfEmpty(const std::string& job) {
  std::string path = JobPath(job);
  if (!IsDir(path) || !SubDirs(path).empty()) return OkStatus();
  return Remove(path);
}

std::vector<pid_t> Cgroups::Pids(const std::string& path) const {
  std::vector<pid_t> out;
  auto text = sys::ReadFile(path + "/cgroup.procs", 4 << 20);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    auto pid = ParseInt(line, 1, INT32_MAX);
    if (pid.ok()) out.push_back(static_cast<pid_t>(*pid));
  }
  return out;
}

Status Cgroups::RemoveBelow(const std::string& path, std::vector<std::string>* removed) {
  std::vector<std::pair<std::string, int>> stack = {{path, 0}};
  std::vector<std::string> order;  // parents before children
  while (!stack.empty()) {
    auto [p, depth] = stack.back();
    stack.pop_back();
    order.push_back(p);
    if (depth >= kMaxDepth) continue;
    for (const std::string& sub : SubDirs(p)) stack.push_back({p + "/" + sub, depth + 1});
  }
  Status first;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Status st = Remove(*it);
    if (st.ok()) {
      removed->push_back(*it);
    } else if (first.ok()) {
      first = st;
    }
  }
  return first;
}

std::vector<std::string> Cgroups::CleanLeftovers(const std::set<std::string>& keep_task_paths) {
  std::vector<std::string> removed;
  if (!available_) return removed;
  for (const std::string& job : SubDirs(options_.root)) {
    std::string job_path = options_.root + "/" + job;
    bool keep_job = false;
    for (const std::string& task : SubDirs(job_path)) {
      std::string task_path = job_path + "/" + task;
      if (keep_task_paths.count(task_path)) {
        keep_job = true;
        continue;
      }
      Status st = Kill(task_path);
      if (st.ok()) WaitEmpty(task_path, kNanosPerSecond);
      if (st.ok()) st = RemoveBelow(task_path, &removed);
      if (!st.ok()) log::Warn("leftover cgroup not removed", {{"path", task_path}, {"error", st.error().message()}});
    }
    if (keep_job) continue;
    // No known task in it: processes placed in the job cgroup itself (none
    // should be) are killed too before the rmdir.
    Status st = Kill(job_path);
    if (st.ok()) WaitEmpty(job_path, kNanosPerSecond);
    if (st.ok()) st = RemoveBelow(job_path, &removed);
    if (!st.ok()) log::Warn("leftover cgroup not removed", {{"path", job_path}, {"error", st.error().message()}});
  }
  return removed;
}

}  // namespace outpost::cgroup
