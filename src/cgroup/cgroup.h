// cgroup v2 for jobs and tasks. Owns: finding the cgroup2 mount
// (/proc/self/mountinfo), the agent's subtree (default
// /sys/fs/cgroup/outpost.slice) with the controllers it can enable, one
// cgroup per job (the NRI pod cgroup parent) and one per task below it,
// writing limits (cgroup::Resources) to the controller files, reading stats,
// killing everything in a cgroup (cgroup.kill, or freeze + SIGKILL of each
// pid on kernels without it), removing cgroups (rmdir only, never a
// recursive delete), watching memory.events for OOM kills, and cleaning
// leftover cgroups of unknown tasks at start. It never touches anything
// outside its subtree, and on a host without usable cgroup v2 it reports
// why instead of failing.
//
// Layout: <root>/<job>/<task_id>   (task_id = "<job>.<task>"; bare tasks
// without a job: <root>/_tasks/<task_id>)
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
#include "base/fd.h"
#include "cgroup/resources.h"

namespace outpost {
class Loop;
}

namespace outpost::cgroup {

struct CgroupStats {
  int64_t timestamp_unix_nanos = 0;
  uint64_t memory_current = 0;
  uint64_t memory_swap_current = 0;
  std::map<std::string, uint64_t> memory_stat;    // memory.stat: anon, file, kernel, ...
  std::map<std::string, uint64_t> memory_events;  // memory.events: low, high, max, oom, oom_kill, ...
  uint64_t cpu_usage_usec = 0;                    // cpu.stat
  uint64_t cpu_user_usec = 0;
  uint64_t cpu_system_usec = 0;
  uint64_t cpu_nr_periods = 0;
  uint64_t cpu_nr_throttled = 0;
  uint64_t cpu_throttled_usec = 0;
  uint64_t pids_current = 0;
  std::map<std::string, std::map<std::string, uint64_t>> io_stat;  // "MAJ:MIN" -> rbytes, wbytes, rios, wios, ...
  std::vector<std::string> measured;  // names of the files actually read ("memory.current", "cpu.stat", ...)
};

// One limit of a task or a job as this node holds it (inspect, update,
// events): the cgroup file, the value written to it, and why the kernel
// does not enforce it ("" = it does).
struct LimitState {
  std::string file;          // "memory.max"
  std::string value;         // as written: "67108864"
  std::string not_enforced;  // "cgroup v2 is not usable on this node (...)"
};

class Cgroups {
 public:
  struct Options {
    std::string root = "/sys/fs/cgroup/outpost.slice";
    // For tests: where cgroup2 is mounted ("" = /sys/fs/cgroup if it is a
    // cgroup2 mount, else the one /proc/self/mountinfo names).
    std::string mount_point;
  };

  // Never fails: without usable cgroup v2, available() is false and
  // reason() says why (no cgroup2 mount; no controllers because they are on
  // v1; root not writable; ...). When available, reason() is "" or says
  // which controllers could not be enabled and why (e.g. EBUSY because a
  // cgroup on the way down holds processes).
  static std::unique_ptr<Cgroups> Setup(Options options);

  bool available() const { return available_; }
  const std::string& reason() const { return reason_; }
  // Controllers enabled for jobs and tasks (subset of cpu memory pids io cpuset).
  const std::set<std::string>& controllers() const { return controllers_; }
  const std::string& root() const { return options_.root; }
  const std::string& mount_point() const { return mount_point_; }
  // CPUs / memory nodes tasks may use (root's cpuset.cpus.effective /
  // cpuset.mems.effective), for validating cpuset values; "" if unknown.
  const std::string& effective_cpus() const { return effective_cpus_; }
  const std::string& effective_mems() const { return effective_mems_; }

  std::string JobPath(const std::string& job) const;
  std::string TaskPath(const std::string& job, const std::string& task_id) const;

  // The admission check of limits, wherever they come from (a submitted
  // spec, a task start, a live update): the problems that make r impossible
  // here (a controller it needs is missing, cpuset outside effective_cpus,
  // unknown device, memory below the minimum), one message per problem
  // naming the field; empty if fine. Without usable cgroup v2: one problem
  // saying why and what to do. allow_without_limits (the config's
  // cgroup_allow_without_limits) lets through what this node cannot
  // enforce: every limit without cgroup v2, a limit whose controller is not
  // enabled (Enforcement then says so, and Apply skips it); values are
  // still checked where they can be.
  std::vector<std::string> Check(const Resources& r, bool allow_without_limits = false) const;
  // Each limit r sets, in the order Apply writes them, for a cgroup at
  // path ("" = the task runs in none): enforced, or why not (cgroup v2 not
  // usable here, the task outside a cgroup, its controller not enabled).
  std::vector<LimitState> Enforcement(const Resources& r, const std::string& path) const;

  // Creates the job's cgroup (if missing), enables the controllers for its
  // children and writes the job-level limits.
  Status EnsureJob(const std::string& job, const Resources& r);
  // Creates the task's cgroup with its limits and returns an O_DIRECTORY
  // fd of it for clone3(CLONE_INTO_CGROUP). An existing one (a restart) is
  // refused while it holds processes, else recreated (so no limit of the
  // earlier run stays) or, if it cannot be removed, reused.
  Result<UniqueFd> CreateTask(const std::string& job, const std::string& task_id, const Resources& r);
  // Writes r to an existing cgroup (live update). Only the fields r sets,
  // and none of a controller that is not enabled (Check refuses those
  // unless the config allows limits it cannot enforce).
  Status Apply(const std::string& path, const Resources& r);
  // Every process in the cgroup (and below) gets SIGKILL: cgroup.kill, or
  // freeze + kill each pid + thaw where the kernel has no cgroup.kill.
  Status Kill(const std::string& path);
  // rmdir; EBUSY (processes left) is an error, a missing dir is not.
  Status Remove(const std::string& path);
  // Removes the job's cgroup if it has no task cgroups left.
  Status RemoveJobIfEmpty(const std::string& job);
  // Pids in the cgroup (cgroup.procs).
  std::vector<pid_t> Pids(const std::string& path) const;
  Result<CgroupStats> Stats(const std::string& path) const;

  // At start: kills and removes every cgroup under the root that is not a
  // known task (keep: TaskPath() of each task recovered alive) or the job
  // of one. Never removes the root.
  // Returns the paths removed (for the log).
  std::vector<std::string> CleanLeftovers(const std::set<std::string>& keep_task_paths);

 private:
  explicit Cgroups(Options options) : options_(std::move(options)) {}
  void Init();
  // Enables each of `wanted` in dir/cgroup.subtree_control, one write per
  // controller; returns those now enabled and appends failures to *errors.
  std::set<std::string> EnableControllers(const std::string& dir, const std::set<std::string>& wanted,
                                          std::vector<std::string>* errors) const;
  Status KillByFreeze(const std::string& path);
  bool UnderRoot(const std::string& path) const;
  // rmdir of path and every cgroup below it, deepest first.
  Status RemoveBelow(const std::string& path, std::vector<std::string>* removed);

  Options options_;
  std::string mount_point_;
  bool available_ = false;
  std::string reason_;
  std::set<std::string> controllers_;
  std::string effective_cpus_;
  std::string effective_mems_;
};

// Watches memory.events of task cgroups with inotify and calls back when
// oom_kill grows.
class OomWatcher {
 public:
  static Result<std::unique_ptr<OomWatcher>> Create(Loop* loop);
  ~OomWatcher();
  // cb(count) each time memory.events' oom_kill counter increases.
  Status Watch(const std::string& cgroup_path, std::function<void(uint64_t oom_kills)> cb);
  void Unwatch(const std::string& cgroup_path);

 private:
  struct Impl;
  OomWatcher();
  std::unique_ptr<Impl> impl_;
};

// "memory.max, pids.max not enforced: <why>", one such part per reason,
// "; "-separated; "" when every limit is enforced.
std::string NotEnforcedSummary(const std::vector<LimitState>& limits);

// The mount point of the cgroup2 filesystem in /proc/self/mountinfo text
// ("" if none); /sys/fs/cgroup wins when there are several. Unescapes
// mountinfo's octal escapes (\040 for a space).
std::string FindCgroup2Mount(const std::string& mountinfo);

// Writes value to a cgroup file in one write(2) (O_WRONLY|O_TRUNC, never
// O_CREAT: a missing file means a controller is not enabled). The error
// names the value and the file: write "268435456" to .../memory.max: ...
Status WriteCgroupFile(const std::string& file, const std::string& value);

// Parsing helpers (exposed for tests): "a 1\nb 2\n" -> {a:1, b:2}.
std::map<std::string, uint64_t> ParseFlatKeyed(const std::string& text);
// "0-3,5" -> {0,1,2,3,5}; false on bad syntax.
bool ParseCpuList(const std::string& text, std::set<int>* out);

}  // namespace outpost::cgroup
