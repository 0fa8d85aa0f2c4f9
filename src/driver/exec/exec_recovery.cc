// The exec driver's recovery: tasks of an earlier worker re-attached from
// their handles (the keeper's children, or foreign ones watched through a
// pidfd), and those whose exit the keeper's journal did not have.
#include "driver/exec/exec_driver.h"
#include "driver/exec/task.h"

#include <cerrno>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "proc/procfs.h"

namespace outpost::driver {

void ExecDriver::WatchForeignProcess(Task* t, UniqueFd pidfd) {
  // Not our child and not the keeper's: its pidfd tells us when it ends,
  // but nobody can tell us how. The pidfd was opened before the process
  // was found alive, so an exit at any moment since is seen.
  std::string id = t->config.id;
  if (pidfd) {
    auto w = LoopFd::Watch(loop_, std::move(pidfd), EPOLLIN, [this, id](uint32_t) {
      if (Task* task = Find(id)) ForeignEnded(task);
    });
    if (w.ok()) {
      t->foreign_watch = std::move(*w);
      return;
    }
    log::WarnIfError(w.error(), "cannot watch a recovered task's pidfd; polling it instead", {{"task", id}});
  }
  PollForeignProcess(id);
}

// Without a pidfd to watch (none could be opened or registered): the
// process is looked at once a second until it is gone or its pid is
// another process's.
void ExecDriver::PollForeignProcess(const std::string& id) {
  Task* t = Find(id);
  if (!t || t->run_state == TaskState::kExited) return;
  t->foreign_poll = loop_->AddTimer(kNanosPerSecond, [this, id] {
    Task* task = Find(id);
    if (!task || task->run_state == TaskState::kExited) return;
    task->foreign_poll = 0;
    proc::ProcStat ps;
    bool alive = proc::ReadProcStat(task->pid, &ps) && ps.state != 'Z' &&
                 (task->start_ticks == 0 || ps.start_ticks == task->start_ticks);
    if (alive) return PollForeignProcess(id);
    ForeignEnded(task);
  });
}

// Nobody can tell how a foreign task ended, only that it did.
void ExecDriver::ForeignEnded(Task* t) {
  ExitResult r;
  r.exit_code = -1;
  r.error = "exit status unknown: the task was adopted by another process while no keeper ran";
  Finish(t, r, WallNanos());
}

void ExecDriver::RecoverTask(const TaskHandle& handle, DoneCallback done) {
  const std::string& id = handle.config.id;
  if (Find(id)) return done(OkStatus());  // already tracked: no-op
  auto state = DecodeState(handle.version, handle.driver_state);
  if (!state.ok()) return done(state.error().Wrap("recover task " + id + ": driver state"));
  auto t = std::make_unique<Task>();
  t->config = KeptConfig(handle.config);
  const State& s = *state;
  t->pid = s.pid;
  t->start_ticks = s.start_ticks;
  t->instance = s.instance;
  t->parent = s.parent == "agent" ? "agent" : "keeper";
  t->started_at = handle.started_at_unix_nanos;
  bool same_boot = s.boot_id.empty() || proc::CurrentBootId().empty() || s.boot_id == proc::CurrentBootId();
  // The pidfd first, then /proc: a process that ends between the two is
  // seen to end (its pidfd turns readable), never taken for alive with
  // nothing watching it; and a pid reused before the pidfd was opened shows
  // in the start time read after it.
  UniqueFd pidfd;
  int pidfd_errno = 0;
  if (same_boot && s.pid > 0) {
    pidfd.Reset(sys::PidfdOpen(s.pid));
    if (!pidfd) pidfd_errno = errno;
  }
  proc::ProcStat ps;
  bool alive = same_boot && s.pid > 0 && pidfd_errno != ESRCH && proc::ReadProcStat(s.pid, &ps) &&
               ps.state != 'Z' && (s.start_ticks == 0 || ps.start_ticks == s.start_ticks);
  if (!same_boot) log::Info("task from before a reboot: its process is gone", {{"task", id}});
  Task* raw = Add(std::move(t));
  if (alive && options_.recovered_alive_for_test) options_.recovered_alive_for_test(s.pid);
  if (alive) {
    raw->run_state = TaskState::kRunning;
    if (options_.keeper_is_parent && ps.ppid == options_.keeper_pid) {
      // The keeper reaps it and reports the exit; the pidfd is kept for
      // liveness checks only.
      raw->pidfd = std::move(pidfd);
    } else {
      raw->foreign_parent = true;
      WatchForeignProcess(raw, std::move(pidfd));
    }
    log::Info("task recovered", {{"task", id}, {"pid", std::to_string(s.pid)}});
    Emit(*raw, "recovered", Format("reattached to pid %d", s.pid));
  } else {
    // Gone (or pid reused). Its exit may be in the keeper's journal.
    raw->awaiting_journal = true;
    if (journal_replayed_) JournalReplayed();
  }
  done(OkStatus());
}

void ExecDriver::JournalReplayed() {
  journal_replayed_ = true;
  std::vector<Task*> unknown;
  for (auto& [id, t] : tasks_) {
    if (t->awaiting_journal && t->run_state != TaskState::kExited) unknown.push_back(t.get());
  }
  for (Task* t : unknown) {
    ExitResult r;
    r.exit_code = -1;
    r.error = "exit status unknown: the process ended while no agent was running";
    Finish(t, r, WallNanos());
  }
}

}  // namespace outpost::driver
