#include "driver/conformance.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <memory>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "cgroup/cgroup.h"
#include "proc/procfs.h"

namespace outpost::driver {
namespace {

constexpr int64_t kSecond = 1000000000;

// One running check: its tasks, its deadline, and the single way it ends.
struct Check : std::enable_shared_from_this<Check> {
  Loop* loop;
  const Registry* drivers;
  std::string name;  // of the driver
  cgroup::Cgroups* cg = nullptr;  // set when cgroup v2 is available
  const proc::UserDb* users = nullptr;
  std::string dir;
  std::string prefix;
  std::string driver_config;  // every task's `config`
  int next_task = 0;
  std::vector<std::string> tasks;
  std::vector<std::string> cgroups;  // made for its tasks
  std::string problem;               // preparing a task failed
  bool over = false;
  Loop::TimerId deadline = 0;
  std::function<void(Check&, CheckOutcome, std::string)> finish;

  std::string Gone() const { return "driver " + name + " went away during the check"; }
  // The driver as registered now; null (and the check failed) once gone.
  Driver* D() {
    Driver* d = drivers->Find(name);
    if (!d) Fail(Gone());
    return d;
  }
  TaskConfig Config(const std::string& script) {
    TaskConfig t;
    t.id = prefix + "-" + std::to_string(next_task++);
    t.name = t.id;
    t.driver = name;
    if (cg) {
      // As the start pipeline does: the task starts in a cgroup of its own.
      auto fd = cg->CreateTask("", t.id, cgroup::Resources());
      if (fd.ok()) t.cgroup = cg->TaskPath("", t.id), cgroups.push_back(t.cgroup);
      else problem = "task cgroup: " + fd.error().message();
    }
    t.command = "/bin/sh";
    t.args = {"-c", script};
    t.driver_config = driver_config;
    t.task_dir = dir + "/" + t.id;
    (void)sys::MkdirAll(t.task_dir, 0700);
    t.stdout_path = t.task_dir + "/stdout";
    t.stderr_path = t.task_dir + "/stderr";
    ::close(::open(t.stdout_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    ::close(::open(t.stderr_path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    return t;
  }
  void Pass() { finish(*this, CheckOutcome::kPass, ""); }
  void Fail(const std::string& why) { finish(*this, CheckOutcome::kFail, why); }
  void Skip(const std::string& why) { finish(*this, CheckOutcome::kSkip, why); }
  // Starts a task; on an error the check fails.
  void Start(const TaskConfig& c, std::function<void(const TaskHandle&)> next) {
    if (!problem.empty()) return Fail(problem);
    Driver* d = D();
    if (!d) return;
    tasks.push_back(c.id);
    d->StartTask(c, [self = shared_from_this(), next](Result<TaskHandle> h) {
      if (self->over) return;
      if (!h.ok()) return self->Fail("start: " + h.error().message());
      next(*h);
    });
  }
  void Wait(const std::string& id, std::function<void(const ExitResult&)> next) {
    Driver* d = D();
    if (d) d->WaitTask(id, [self = shared_from_this(), next](const ExitResult& e) {
      if (!self->over) next(e);
    });
  }
  void Stop(const std::string& id, int64_t timeout, const std::string& sig, std::function<void()> next) {
    Driver* d = D();
    if (d) d->StopTask(id, timeout, sig, [self = shared_from_this(), next](Status st) {
      if (self->over) return;
      if (!st.ok()) return self->Fail("stop: " + st.error().message());
      next();
    });
  }
  // Polls (bounded by the check's deadline) until pred holds.
  void PollUntil(std::function<bool()> pred, std::function<void()> next) {
    if (over) return;
    if (pred()) return next();
    loop->AddTimer(kSecond / 20, [self = shared_from_this(), pred, next] { self->PollUntil(pred, next); });
  }
};

using Body = std::function<void(const std::shared_ptr<Check>&, const Capabilities&)>;
struct Spec {
  const char* name;
  Body body;
};

bool PidGone(pid_t pid) {
  if (pid <= 0) return true;
  auto st = sys::ReadFile(Format("/proc/%d/stat", pid));
  if (!st.ok()) return true;
  size_t p = st->rfind(')');
  return p != std::string::npos && p + 2 < st->size() && (*st)[p + 2] == 'Z';
}

// A task that runs until stopped, ready once it has written <task_dir>/ready.
constexpr const char* kSleeper = "exec sleep 600";

std::vector<Spec> Specs() {
  return {
      {"start-wait",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         auto cfg = c->Config("cat /proc/self/cgroup");
         c->Start(cfg, [c, id = cfg.id](const TaskHandle&) {
           c->Wait(id, [c, id](const ExitResult& e) {
             if (!e.Successful()) return c->Fail("wait result " + DescribeExit(e) + ", expected exit code 0");
             if (Driver* d = c->D()) d->DestroyTask(id, true, [c](Status st) {
               if (c->over) return;
               if (!st.ok()) return c->Fail("destroy(force) after exit: " + st.error().message());
               c->Pass();
             });
           });
         });
       }},
      {"stop-sigint",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         auto cfg = c->Config("echo hi; exec sleep 600");
         c->Start(cfg, [c, id = cfg.id](const TaskHandle&) {
           c->Stop(id, 2 * kSecond, "SIGINT", [] {});
           c->Wait(id, [c](const ExitResult& e) {
             if (e.Successful()) return c->Fail("wait result successful after a stop");
             c->Pass();
           });
         });
       }},
      {"stop-sigkill",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         auto cfg = c->Config(kSleeper);
         c->Start(cfg, [c, id = cfg.id](const TaskHandle&) {
           c->Stop(id, 5 * kSecond, "SIGKILL", [] {});
           c->Wait(id, [c](const ExitResult& e) {
             if (e.signal != SIGKILL) return c->Fail(Format("wait result signal %d, expected 9", e.signal));
             c->Pass();
           });
         });
       }},
      {"stop-timeout-0",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         // Two tasks that ignore SIGTERM (kept across exec): A stopped with
         // timeout 0, then B with 5 s (Nomad's default kill_timeout). A must
         // end first: a driver that gives timeout 0 a grace period ends it
         // after B. An order, not a time limit: both kills wait for the
         // same (maybe loaded) machine.
         const char* script = "trap '' TERM; : > ready; exec sleep 600";
         auto a = c->Config(script), b = c->Config(script);
         a.workdir = a.task_dir;
         b.workdir = b.task_dir;
         std::string ready_a = a.task_dir + "/ready", ready_b = b.task_dir + "/ready";
         c->Start(a, [c, b, a_id = a.id, ready_a, ready_b](const TaskHandle&) {
           c->Start(b, [c, a_id, b_id = b.id, ready_a, ready_b](const TaskHandle&) {
             auto both = [ready_a, ready_b] {
               return ::access(ready_a.c_str(), F_OK) == 0 && ::access(ready_b.c_str(), F_OK) == 0;
             };
             c->PollUntil(both, [c, a_id, b_id] {
               c->Stop(a_id, 0, "SIGTERM", [] {});
               c->Stop(b_id, 5 * kSecond, "SIGTERM", [] {});
               c->Wait(b_id, [c](const ExitResult&) {
                 c->Fail("the task stopped with timeout 0 had not ended when the one with a 5 s grace was killed");
               });
               c->Wait(a_id, [c](const ExitResult& e) {
                 if (e.Successful()) return c->Fail("wait result successful after a stop");
                 c->Pass();
               });
             });
           });
         });
       }},
      {"signal",
       [](const std::shared_ptr<Check>& c, const Capabilities& caps) {
         if (!caps.send_signals) return c->Skip("driver " + c->name + " cannot signal tasks");
         auto cfg = c->Config("trap 'exit 3' USR1; : > ready; while :; do sleep 0.1; done");
         cfg.workdir = cfg.task_dir;
         std::string ready = cfg.task_dir + "/ready";
         c->Start(cfg, [c, id = cfg.id, ready](const TaskHandle&) {
           c->PollUntil([ready] { return ::access(ready.c_str(), F_OK) == 0; }, [c, id] {
             if (Driver* d = c->D()) d->SignalTask(id, "SIGUSR1", [c, id](Status st) {
               if (c->over) return;
               if (!st.ok()) return c->Fail("signal: " + st.error().message());
               c->Wait(id, [c](const ExitResult& e) {
                 if (e.exit_code != 3) return c->Fail("wait result " + DescribeExit(e) + ", expected exit code 3");
                 c->Pass();
               });
             });
           });
         });
       }},
      {"recover-idempotent",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         c->Start(c->Config(kSleeper), [c](const TaskHandle& h) {
           if (Driver* d = c->D()) d->RecoverTask(h, [c, id = h.config.id](Status st) {
             if (c->over) return;
             if (!st.ok()) return c->Fail("recover of a tracked task: " + st.error().message());
             if (Driver* d2 = c->D()) d2->InspectTask(id, [c](Result<TaskStatus> s) {
               if (c->over) return;
               if (!s.ok()) return c->Fail("inspect after recover: " + s.error().message());
               if (s->state != TaskState::kRunning) return c->Fail(std::string("state after recover ") + TaskStateName(s->state));
               c->Pass();
             });
           });
         });
       }},
      {"destroy-running",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         c->Start(c->Config(kSleeper), [c](const TaskHandle& h) {
           if (Driver* d = c->D()) d->DestroyTask(h.config.id, false, [c](Status st) {
             if (c->over) return;
             if (st.ok()) return c->Fail("destroy without force of a running task succeeded");
             if (st.error().message().find("cannot destroy running task") == std::string::npos)
               return c->Fail("error \"" + st.error().message() + "\", expected \"cannot destroy running task\"");
             c->Pass();
           });
         });
       }},
      {"destroy-kills-all",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         // Without a cgroup nothing says which processes are the task's.
         if (!c->cg) return c->Skip("no cgroup v2 on this node");
         // $$ too: a driver that gives tasks a pid namespace of their own
         // (oci) makes the written pids the namespace's, naming unrelated
         // processes here (2 is kthreadd).
         auto cfg = c->Config("echo $$ > main.pid; sleep 3600 & echo $! > bg.pid");
         cfg.workdir = cfg.task_dir;
         std::string dir = cfg.task_dir;
         c->Start(cfg, [c, id = cfg.id, dir, cgroup = cfg.cgroup](const TaskHandle& h) {
           c->Wait(id, [c, id, dir, cgroup, main_pid = h.pid](const ExitResult&) {
             auto s = sys::ReadFile(dir + "/bg.pid");
             auto m = sys::ReadFile(dir + "/main.pid");
             pid_t pid = s.ok() ? static_cast<pid_t>(std::atoi(s->c_str())) : 0;
             pid_t seen = m.ok() ? static_cast<pid_t>(std::atoi(m->c_str())) : 0;
             if (pid <= 0 || seen <= 0) return c->Fail("the task wrote no background pid");
             // The task saw its pid as the driver reports it: the written
             // pid is the background process here. Else (a pid namespace)
             // the task's processes are those left in its cgroup.
             std::vector<pid_t> watch = {pid};
             if (seen != main_pid) watch = c->cg->Pids(cgroup);
             if (Driver* d = c->D()) d->DestroyTask(id, true, [c, watch, cgroup](Status st) {
               if (c->over) return;
               if (!st.ok()) return c->Fail("destroy(force): " + st.error().message());
               // Then, as the task layer does, cgroup.kill of the task's
               // cgroup: it reaches what the driver started in it.
               (void)c->cg->Kill(cgroup);
               auto all_gone = [watch] {
                 for (pid_t p : watch) {
                   if (!PidGone(p)) return false;
                 }
                 return true;
               };
               int64_t until = MonotonicNanos() + 5 * kSecond;
               c->PollUntil([all_gone, until] { return all_gone() || MonotonicNanos() > until; }, [c, watch] {
                 for (pid_t p : watch) {
                   if (PidGone(p)) continue;
                   for (pid_t q : watch) ::kill(q, SIGKILL);  // the check leaves nothing behind either way
                   return c->Fail(Format("background process %d alive 5 s after destroy(force) and cgroup.kill", p));
                 }
                 c->Pass();
               });
             });
           });
         });
       }},
      {"bad-command",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         auto cfg = c->Config("");
         cfg.command = c->dir + "/no-such-command";
         cfg.args.clear();
         c->tasks.push_back(cfg.id);
         if (Driver* d = c->D()) d->StartTask(cfg, [c](Result<TaskHandle> h) {
           if (c->over) return;
           if (h.ok()) return c->Fail("start of a missing command succeeded");
           c->Pass();
         });
       }},
      {"bad-user",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         auto cfg = c->Config(kSleeper);
         cfg.user = "outpost-conformance-no-such-user";
         c->tasks.push_back(cfg.id);
         // As the start pipeline does: the user is resolved before the
         // driver is asked; a name that does not resolve never starts.
         auto who = proc::ResolveCredentials(cfg.user, "", *c->users);
         auto left = [c, id = cfg.id](const Error& e) {
           if (e.message().find("outpost-conformance-no-such-user") == std::string::npos)
             return c->Fail("start error \"" + e.message() + "\" does not name the user");
           if (!proc::ProcessesWithEnv("OUTPOST_TASK_ID=" + id).empty()) return c->Fail("a process of the failed start is left");
           if (Driver* d = c->D()) d->InspectTask(id, [c](Result<TaskStatus> s) {
             if (c->over) return;
             if (s.ok() && s->state == TaskState::kRunning) return c->Fail("the driver shows the failed start running");
             c->Pass();
           });
         };
         if (!who.ok()) return left(who.error());
         cfg.identity = Identity{true, who->uid, who->gid, who->groups, who->name, who->home};
         if (Driver* d = c->D()) d->StartTask(cfg, [c, left](Result<TaskHandle> h) {
           if (c->over) return;
           if (h.ok()) return c->Fail("start as a missing user succeeded");
           left(h.error());
         });
       }},
      {"stats",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         c->Start(c->Config(kSleeper), [c](const TaskHandle& h) {
           if (Driver* d = c->D()) d->TaskStats(h.config.id, [c](Result<TaskStats> s) {
             if (c->over) return;
             if (!s.ok()) return c->Fail("stats: " + s.error().message());
             if (s->measured.empty()) return c->Fail("first sample measured nothing");
             int64_t skew = WallNanos() - s->timestamp_unix_nanos;
             if (skew > kSecond || skew < -kSecond) return c->Fail("sample timestamp more than 1 s from now");
             c->Pass();
           });
         });
       }},
      {"inspect",
       [](const std::shared_ptr<Check>& c, const Capabilities&) {
         c->Start(c->Config(kSleeper), [c](const TaskHandle& h) {
           std::string id = h.config.id;
           if (Driver* d = c->D()) d->InspectTask(id, [c, id](Result<TaskStatus> s) {
             if (c->over) return;
             if (!s.ok()) return c->Fail("inspect: " + s.error().message());
             if (s->state != TaskState::kRunning) return c->Fail(std::string("state ") + TaskStateName(s->state) + ", expected running");
             c->Stop(id, 0, "SIGKILL", [] {});
             c->Wait(id, [c, id](const ExitResult&) {
               if (Driver* d2 = c->D()) d2->InspectTask(id, [c](Result<TaskStatus> s2) {
                 if (c->over) return;
                 if (!s2.ok()) return c->Fail("inspect after exit: " + s2.error().message());
                 if (s2->state != TaskState::kExited) return c->Fail(std::string("state after exit ") + TaskStateName(s2->state) + ", expected exited");
                 c->Pass();
               });
             });
           });
         });
       }},
      {"exec",
       [](const std::shared_ptr<Check>& c, const Capabilities& caps) {
         if (!caps.exec) return c->Skip("driver " + c->name + " cannot exec in tasks");
         c->Start(c->Config(kSleeper), [c](const TaskHandle& h) {
           if (Driver* d = c->D()) d->ExecTask(h.config.id, {"/bin/sh", "-c", "echo conformance"}, 5 * kSecond, [c](Result<ExecResult> r) {
             if (c->over) return;
             if (!r.ok()) return c->Fail("exec: " + r.error().message());
             if (r->exit_code != 0 || r->output.find("conformance") == std::string::npos)
               return c->Fail(Format("exec exit code %d, output \"%s\"", r->exit_code, r->output.c_str()));
             c->Pass();
           });
         });
       }},
  };
}

struct Run {
  Loop* loop;
  const Registry* drivers;
  std::string name;
  ConformanceOptions opts;
  std::vector<Spec> specs = Specs();
  size_t at = 0;
  std::vector<CheckResult> results;
  std::shared_ptr<Check> check;
  std::function<void(std::vector<CheckResult>)> done;
};

// Kills and removes the check's cgroups, as the task layer does after a
// destroy. rmdir fails (EBUSY) until the killed processes have exited: it
// is retried every 50 ms for 2 s.
void RemoveCgroups(std::shared_ptr<Run> run, size_t i, int attempt, std::function<void()> next) {
  Check& c = *run->check;
  if (i >= c.cgroups.size()) {
    if (c.cg) (void)c.cg->RemoveJobIfEmpty("");
    return next();
  }
  if (attempt == 0) (void)c.cg->Kill(c.cgroups[i]);
  Status st = c.cg->Remove(c.cgroups[i]);
  if (!st.ok() && st.error().sys_errno() == EBUSY && attempt < 40) {
    run->loop->AddTimer(kSecond / 20, [run, i, attempt, next] { RemoveCgroups(run, i, attempt + 1, next); });
    return;
  }
  RemoveCgroups(run, i + 1, 0, next);
}

// Destroys the check's tasks one after the other (through the driver as
// registered now: none once it is gone), then removes their cgroups.
void Cleanup(std::shared_ptr<Run> run, size_t i, std::function<void()> next) {
  Driver* d = run->drivers->Find(run->name);
  if (!d || i >= run->check->tasks.size()) return RemoveCgroups(run, 0, 0, next);
  d->DestroyTask(run->check->tasks[i], true, [run, i, next](Status) {
    run->loop->Defer([run, i, next] { Cleanup(run, i + 1, next); });
  });
}

void RunNext(std::shared_ptr<Run> run) {
  if (run->at >= run->specs.size()) {
    run->check.reset();
    return run->done(std::move(run->results));
  }
  const Spec& spec = run->specs[run->at++];
  run->check = std::make_shared<Check>();
  Check& c = *run->check;
  c.loop = run->loop;
  c.drivers = run->drivers;
  c.name = run->name;
  c.users = &run->opts.users;
  cgroup::Cgroups* cg = run->opts.cgroups;
  if (cg && cg->available()) c.cg = cg;
  c.dir = run->opts.work_dir;
  c.driver_config = run->opts.driver_config;
  c.prefix = Format("conformance-%zu-%lld", run->at, (long long)(WallNanos() % 1000000));
  int64_t t0 = MonotonicNanos();
  std::string name = spec.name;
  c.finish = [run, name, t0](Check& ch, CheckOutcome o, std::string detail) {
    if (ch.over) return;
    // Whatever the check saw after the driver went (a call cut short, the
    // deadline) is its going.
    if (!ch.drivers->Find(ch.name)) o = CheckOutcome::kFail, detail = ch.Gone();
    ch.over = true;
    run->loop->CancelTimer(ch.deadline);
    run->results.push_back({name, o, std::move(detail), MonotonicNanos() - t0});
    // Late driver callbacks hold the check (shared) and find it over.
    run->loop->Defer([run] { Cleanup(run, 0, [run] { RunNext(run); }); });
  };
  c.deadline = run->loop->AddTimer(run->opts.check_timeout_nanos, [run] {
    run->check->Fail(Format("timed out after %lld s", (long long)(run->opts.check_timeout_nanos / kSecond)));
  });
  Driver* d = c.D();
  if (!d) return;
  if (!d->Unreachable().empty()) return c.Fail(d->Unreachable());
  spec.body(run->check, d->GetCapabilities());
}

}  // namespace

const char* CheckOutcomeName(CheckOutcome o) {
  return o == CheckOutcome::kPass ? "pass" : o == CheckOutcome::kFail ? "fail" : "skip";
}

void RunConformance(Loop& loop, const Registry& drivers, const std::string& name, const ConformanceOptions& opts,
                    std::function<void(std::vector<CheckResult>)> done) {
  auto run = std::make_shared<Run>();
  run->loop = &loop;
  run->drivers = &drivers;
  run->name = name;
  run->opts = opts;
  run->done = std::move(done);
  loop.Defer([run] { RunNext(run); });
}

}  // namespace outpost::driver
