// The built-in `exec` driver. Owns: every task process it started or
// recovered (pid, pidfd, process group), their exit results, stop/kill
// escalation, `outpost exec` sessions (proc/child_run), /proc-based stats,
// fingerprinting, and the format of its driver state (pid, start time,
// instance marker, boot id, who reaps).
//
// Who reaps: with a keeper (the normal case) tasks are spawned with
// CLONE_PARENT, the keeper reaps them and the agent wires its reports to
// OnProcessExit / JournalReplayed (the only calls from outside the Driver
// contract); without one the driver reaps its own children through the
// loop. A recovered task whose parent is neither (the whole agent died and
// init adopted it) is watched through a pidfd and ends with "exit status
// unknown".
//
// Does not own: the task's cgroup (created by the task layer, given as
// TaskConfig::cgroup: tasks are cloned straight into it), log FIFOs, task
// dirs, persisting handles, OOM detection, restart policy.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "driver/driver.h"
#include "loop/loop.h"
#include "proc/child_run.h"

namespace outpost::driver {

class ExecDriver : public Driver {
 public:
  struct Options {
    bool keeper_is_parent = false;
    pid_t keeper_pid = 0;
    int64_t fingerprint_period_nanos = 30LL * 1000000000;
    size_t exec_output_limit = 64 << 10;
    // For the fingerprint (Nomad's resources attributes): the cgroup v2
    // controllers tasks get, or why there are none.
    std::string cgroup_controllers;
    std::string cgroup_root;
    std::string cgroup_unavailable;
    // Tests only: called by RecoverTask right after it found a task's
    // process alive (to end the process at that very moment).
    std::function<void(pid_t)> recovered_alive_for_test;
  };

  // The driver state of a task, as persisted in TaskHandle::driver_state.
  struct State {
    pid_t pid = 0;
    uint64_t start_ticks = 0;  // field 22 of /proc/<pid>/stat: detects pid reuse
    // Unique per start, in the task's environment: finds its processes (no
    // cgroup) without confusing them with another agent's same-named task.
    std::string instance;
    // The boot it started in: after a reboot the pid is someone else's.
    // Persisted, and checked by RecoverTask; not kept per task.
    std::string boot_id;
    std::string parent;  // "keeper" or "agent": who reaps it
  };
  static constexpr int kStateVersion = 2;
  static std::string EncodeState(const State& s);
  // version 2: EncodeState's format; version 0: a whole handle file of the
  // first on-disk format, which kept these fields at its top level.
  static Result<State> DecodeState(int version, const std::string& text);

  static Result<std::unique_ptr<ExecDriver>> Create(Loop* loop, Options options);
  ~ExecDriver() override;

  std::string Name() const override { return "exec"; }
  Capabilities GetCapabilities() const override;
  bool RunsStartContainerHooks() const override { return true; }
  Fingerprint GetFingerprint() override;
  void StartTask(const TaskConfig& config, StartCallback done) override;
  void RecoverTask(const TaskHandle& handle, DoneCallback done) override;
  void WaitTask(const std::string& id, WaitCallback done) override;
  void StopTask(const std::string& id, int64_t timeout_nanos, const std::string& signal, DoneCallback done) override;
  void DestroyTask(const std::string& id, bool force, DoneCallback done) override;
  void InspectTask(const std::string& id, InspectCallback done) override;
  void SignalTask(const std::string& id, const std::string& signal, DoneCallback done) override;
  void ExecTask(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                ExecCallback done) override;
  void TaskStats(const std::string& id, StatsCallback done) override;
  uint64_t SubscribeEvents(EventCallback cb) override;
  void UnsubscribeEvents(uint64_t id) override;

  // A process exited (reported by the keeper). Waiters have run when it
  // returns, so the caller may then acknowledge the exit to the keeper.
  void OnProcessExit(pid_t pid, int wait_status, int64_t unix_nanos);
  // The keeper has resent every exit it held: a recovered task whose
  // process was gone and whose exit did not come ended while no keeper ran.
  // Without a keeper this holds from the start.
  void JournalReplayed();

 private:
  // What the driver keeps of a task's config: what signal and exec use
  // (the task layer holds the whole config, and fills in the job and task
  // names of the events the driver publishes).
  struct KeptConfig {
    std::string id;
    std::string exec_dir;  // the working dir exec uses: workdir, else task_dir
    bool switch_user = false;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    std::vector<proc::Rlimit> rlimits;
    std::string cgroup;
    // The pinned namespace exec sessions join too, and the hostname they
    // get (null for most tasks: one pointer, shared with the task's config).
    std::shared_ptr<const TaskNetwork> net;

    explicit KeptConfig(const TaskConfig& c)
        : id(c.id),
          exec_dir(c.workdir.empty() ? c.task_dir : c.workdir),
          switch_user(c.identity.switch_user),
          uid(c.identity.uid),
          gid(c.identity.gid),
          groups(c.identity.switch_user ? c.identity.groups : std::vector<gid_t>()),
          rlimits(c.rlimits),
          cgroup(c.cgroup),
          net(c.Netns().empty() && c.Hostname().empty() ? nullptr : c.net) {}
    KeptConfig() = default;
  };
  struct Task;

  ExecDriver(Loop* loop, Options options);

  Task* Find(const std::string& id);
  Task* FindByPid(pid_t pid);
  // The one way into tasks_ (the id is not there yet: callers check), and
  // into by_pid_ (a task's pid is set before and never changes after).
  Task* Add(std::unique_ptr<Task> t);
  // The end of a successful start: logged, the "started" event, done.
  void Started(Task* t, const TaskConfig& cfg, const std::string& path, const StartCallback& done);
  // Out of by_pid_: when the task's exit is recorded, or it is erased.
  void Unindex(Task* t);
  void Finish(Task* t, const ExitResult& result, int64_t unix_nanos);
  void KillEverything(Task* t);
  bool SweepKeeperChildren(Task* t, const std::string& marker);
  void ExecTaskTry(const std::string& id, const std::vector<std::string>& cmd, int64_t timeout_nanos,
                   ExecCallback done, int attempt);
  void Emit(const Task& t, const std::string& type, const std::string& message);
  void RefreshFingerprint();
  void WatchForeignProcess(Task* t, UniqueFd pidfd);
  void PollForeignProcess(const std::string& id);
  void ForeignEnded(Task* t);
  TaskHandle HandleOf(const Task& t, const TaskConfig& config) const;

  Loop* loop_;
  Options options_;
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  // The tasks not exited yet, by pid: every exit is looked up here (a scan
  // of tasks_ would cost O(tasks) per exit). A multimap because two of them
  // can share a pid: a recovered task whose process is gone, awaiting its
  // exit from the keeper's journal, and a later one that got the pid again.
  std::unordered_multimap<pid_t, Task*> by_pid_;
  std::map<uint64_t, EventCallback> subscribers_;
  uint64_t next_subscriber_ = 1;
  Fingerprint fingerprint_;
  Loop::TimerId fingerprint_timer_ = 0;
  bool journal_replayed_ = false;
  std::map<uint64_t, std::unique_ptr<proc::ChildRun>> sessions_;  // `outpost exec` runs
  uint64_t next_session_ = 1;
  std::set<Loop::TimerId> exec_retries_;  // ExecTaskTry waiting for the environment
};

}  // namespace outpost::driver
