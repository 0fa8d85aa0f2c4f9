// The cost of OCI lifecycle hooks (docs/hooks.md) on a task's start, through
// the real agent binary (keeper + worker):
//
// Rounds of three, alternating (which goes first rotates each round):
//  (a) SubmitJob of a job with one task `test_helper stamp-exec FILE
//      test_helper sleep 1000` and no hooks;
//  (b) the same job with one no-op hook in each of the six stages
//      (prestart, createRuntime, createContainer, startContainer, poststart,
//      poststop): `test_helper exit 0` by its absolute path, args
//      ["test_helper", "exit", "0"], no env;
//  (f) the floor probe (`test_helper floor`, a small separate static
//      process): `run 4 <test_helper> test_helper exit 0`, the median of 4
//      raw fork + execve + waitpid of the same hook program with a 200-byte
//      state on a stdin pipe and its stdout/stderr drained, as the agent
//      runs a hook.
//
// The figure is the time from sending SubmitJob (on an open API connection)
// to the task's first instruction: `stamp-exec` writes CLOCK_MONOTONIC to
// FILE at the start of its main, then execs `test_helper sleep 1000` so the
// task keeps running (its poststart hook then runs against a live task and
// the job settles in "running"). Four of the six hooks run inside that
// interval, one after the other: prestart, createRuntime, createContainer
// (by the agent, on its loop) and startContainer (inside the task's new
// process, before its exec). poststart runs once the task's command runs,
// poststop at its exit: neither delays the first instruction. So
//   hook_added_per_hook_p50 = (p50 with hooks - p50 without) / 4,
// against the floor's p50 (target: 1.2x, tools/bench/targets.txt).
//
// The same starts also give, as an info line, the start up to the point the
// poststart hook has finished (its "hook" event, followed with WatchEvents
// long-polls on the job) against the no-hook job's "started" event: five
// hooks, (p50 with - p50 without) / 5 per hook. Event delivery adds its own
// latency to both, so this is a cross-check, not the figure.
//
// Between starts the job is removed with RemoveJob, which answers once the
// task has been stopped, its poststop hooks have run and the job is gone; the
// bench then waits until the worker has no child left (a hook still running
// would be one), so nothing of one start overlaps the next measurement. Each
// start is checked with InspectJob (the task "running" with a pid) outside
// the timing; every hook run is checked in the agent's log at the end.
//
// Everything lives in a temporary dir (config, state, agent log; the runtime
// dir on tmpfs as on a node, MakeRuntimeDir); hooks_dirs and hook_path point
// at empty dirs in it, so no hook of the host applies. Tasks carry
// OUTPOST_BENCH_RUN=<that dir> so that leftovers can be found and killed.
// Clean-up, also on failure and on SIGINT/SIGTERM: RemoveJob through the
// API, SIGTERM to the keeper, then a sweep of /proc for leftovers.
//
//   hook_bench [--outpost PATH] [--helper PATH] [--starts N]
// N timed rounds (default 41) after 3 warm-up rounds. Paths default to
// ../outpost and ../test_helper next to this binary's dir.
//
// Output:
//   BENCH task_start_hooks_p50 <us> us baseline=task_start_nohooks_p50 <us> ratio=<r>
//   BENCH hook_added_per_hook_p50 <us> us baseline=hook_fork_exec_wait_p50 <us> ratio=<r>
// plus "hook_bench:" lines with the absolute values and sample counts.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <picojson.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "agent.pb.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "job.pb.h"
#include "proc/procfs.h"
#include "task.pb.h"
#include "wire/rpc_client.h"
#include "bench_util.h"

namespace outpost {
namespace {

using bench::g_interrupted;
using bench::Info;
using bench::JobIdRequest;
using bench::kAgentService;
using bench::kMarkerVar;
using bench::Outcome;
using bench::PidsWithEnv;
using bench::Pipeline;
using bench::Print;
using bench::ReapWithin;
using bench::SpawnDetached;
using bench::WaitForWorker;

constexpr int kWarmup = 3;
constexpr int kFloorRuns = 4;   // per round: as many as hooks before the task's main
constexpr int kHooksBeforeMain = 4;
constexpr int kHooksBeforeRunning = 5;
constexpr const char* kStages[] = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
                                   "poststop"};

struct Run {
  std::string outpost, helper, dir, rundir, tag, config, socket, log, marker;
  pid_t keeper = 0;
  pid_t worker = 0;
  std::set<std::string> jobs;  // submitted, not removed yet
  bench::FloorProbe floor;
  bool failed = false;
  bool cleaned = false;
};

void Cleanup(Run* run);

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "hook_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log, sys::Dirname(run->dir) + "/outpost-hook-bench-failed.log");
  Cleanup(run);
  std::exit(1);
}

void Cleanup(Run* run) {
  if (run->cleaned) return;
  run->cleaned = true;
  if (run->keeper > 0 && !bench::RemoveJobsForCleanup(run->socket, &run->jobs, 30 * kNanosPerSecond)) run->failed = true;
  if (!bench::StopKeeper(&run->keeper)) run->failed = true;
  bench::KillOwnWorker(run->worker, run->config);
  if (!bench::SweepMarker(run->marker)) run->failed = true;
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

std::string JsonString(const std::string& s) { return picojson::value(s).serialize(); }

// The job: one task that stamps its first instruction into stamp, then
// sleeps; with_hooks: one `test_helper exit 0` per stage, or with
// record_dir, `test_helper hook <record_dir>/<stage>` (the check that every
// stage runs).
std::string JobSpec(const Run& run, const std::string& id, const std::string& stamp, bool with_hooks,
                    const std::string& record_dir = "") {
  std::string hooks;
  if (with_hooks) {
    for (const char* stage : kStages) {
      std::string args = record_dir.empty() ? "[\"test_helper\", \"exit\", \"0\"]"
                                            : "[\"test_helper\", \"hook\", " + JsonString(record_dir + "/" + stage) + "]";
      hooks += std::string(hooks.empty() ? "" : ", ") + "\"" + stage + "\": [{\"path\": " + JsonString(run.helper) +
               ", \"args\": " + args + "}]";
    }
    hooks = ", \"hooks\": {" + hooks + "}";
  }
  return "{\"id\": " + JsonString(id) + ", \"tasks\": [{\"name\": \"t\", \"command\": " + JsonString(run.helper) +
         ", \"args\": [\"stamp-exec\", " + JsonString(stamp) + ", " + JsonString(run.helper) +
         ", \"sleep\", \"1000\"], \"env\": {" + JsonString(kMarkerVar) + ": " + JsonString(run.dir) +
         "}, \"restart\": {\"policy\": \"never\"}" + hooks + "}]}";
}

Result<std::string> Call(wire::BlockingClient* c, const char* method, const std::string& payload,
                         int64_t timeout = 30 * kNanosPerSecond) {
  return c->Call(kAgentService, method, payload, timeout);
}

std::string WatchRequest(uint64_t after, int64_t wait_nanos, const std::string& job) {
  outpost_v1_WatchEventsRequest req = outpost_v1_WatchEventsRequest_init_zero;
  req.after_seq = after;
  req.wait_nanos = wait_nanos;
  req.job = PbStr(job);
  auto out = PbEncode(outpost_v1_WatchEventsRequest_fields, &req, "WatchEventsRequest");
  return out.ok() ? *out : std::string();
}

uint64_t LastSeq(Run* run, wire::BlockingClient* c) {
  auto reply = Call(c, "WatchEvents", WatchRequest(~0ull >> 1, 0, ""));
  if (!reply.ok()) Fatal(run, "WatchEvents: " + reply.error().message());
  PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
  if (!resp.Decode(*reply, "WatchEventsResponse").ok()) Fatal(run, "bad WatchEventsResponse");
  return resp->last_seq;
}

// The worker's children right now ("" when it has none; "?" when the kernel
// does not tell: no CONFIG_PROC_CHILDREN).
std::string WorkerChildren(const Run& run) {
  auto text = sys::ReadFile(Format("/proc/%d/task/%d/children", run.worker, run.worker), 4096);
  if (!text.ok()) return "?";
  std::string s = *text;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

struct Start {
  int64_t to_main = 0;     // SubmitJob sent -> the task's first instruction
  int64_t to_running = 0;  // SubmitJob sent -> "started" event (no hooks) / poststart's "hook" event
  int64_t submit = 0;      // SubmitJob sent -> its reply
  int64_t remove = 0;      // RemoveJob sent -> its reply
  int hook_events = 0;     // "hook" events seen up to to_running
  bool busy_after_remove = false;  // the worker still had a child when RemoveJob answered
};

// One start of a job (with or without hooks), timed, checked and removed.
Start OneStart(Run* run, wire::BlockingClient* c, const std::string& id, bool with_hooks,
               const std::string& record_dir = "") {
  const std::string stamp = run->dir + "/stamp";
  ::unlink(stamp.c_str());
  uint64_t cursor = LastSeq(run, c);
  std::string submit = bench::SubmitJobRequest(JobSpec(*run, id, stamp, with_hooks, record_dir));
  Start out;
  int64_t t0 = MonotonicNanos();
  auto reply = Call(c, "SubmitJob", submit);
  out.submit = MonotonicNanos() - t0;
  if (!reply.ok()) Fatal(run, "SubmitJob " + id + ": " + reply.error().message());
  run->jobs.insert(id);
  // Follow the job's events until the start is complete.
  const int64_t deadline = t0 + 20 * kNanosPerSecond;
  bool done = false;
  while (!done) {
    if (MonotonicNanos() > deadline) Fatal(run, "job " + id + ": not started within 20 s");
    if (g_interrupted) Fatal(run, "interrupted");
    auto ev = Call(c, "WatchEvents", WatchRequest(cursor, 5 * kNanosPerSecond, id));
    if (!ev.ok()) Fatal(run, "WatchEvents: " + ev.error().message());
    int64_t now = MonotonicNanos();
    PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
    if (!resp.Decode(*ev, "WatchEventsResponse").ok()) Fatal(run, "bad WatchEventsResponse");
    for (pb_size_t i = 0; i < resp->events_count; ++i) {
      const outpost_v1_TaskEvent& e = resp->events[i];
      cursor = std::max<uint64_t>(cursor, e.seq);
      std::string type = PbString(e.type), msg = PbString(e.message);
      if (type == "hook") {
        ++out.hook_events;
        if (msg.find(": exit 0 ") == std::string::npos) Fatal(run, "job " + id + ": a hook failed: " + msg);
        if (msg.compare(0, 15, "hook poststart ") == 0 && !done) {
          out.to_running = now - t0;
          done = true;
        }
      } else if (type == "started" && !with_hooks && !done) {
        out.to_running = now - t0;
        done = true;
      } else if (type == "exited" || type == "signalled" || type == "error" || type == "failed" ||
                 type == "restarting") {
        Fatal(run, Format("job %s: task %s: %s: %s", id.c_str(), PbString(e.task_id).c_str(), type.c_str(),
                          msg.c_str()));
      }
    }
  }
  int64_t ts = bench::WaitStamp(stamp, 10 * kNanosPerSecond);
  if (ts < 0) Fatal(run, "job " + id + ": the task did not write its timestamp");
  out.to_main = ts - t0;
  // The check, outside the timing: the task runs, with a pid.
  auto info_reply = Call(c, "InspectJob", JobIdRequest(id));
  if (!info_reply.ok()) Fatal(run, "InspectJob " + id + ": " + info_reply.error().message());
  PbOwned<outpost_v1_JobInfo> info(outpost_v1_JobInfo_fields);
  if (!info.Decode(*info_reply, "JobInfo").ok()) Fatal(run, "bad JobInfo");
  if (info->tasks_count != 1 || PbString(info->tasks[0].state) != "running" || info->tasks[0].pid <= 0) {
    Fatal(run, Format("job %s: its task is not running with a pid after its start (job status %s)", id.c_str(),
                      PbString(info->status).c_str()));
  }
  // Removal: stop, poststop hooks, job gone; then no hook left running.
  int64_t r0 = MonotonicNanos();
  auto gone = Call(c, "RemoveJob", JobIdRequest(id));
  out.remove = MonotonicNanos() - r0;
  if (!gone.ok()) Fatal(run, "RemoveJob " + id + ": " + gone.error().message());
  run->jobs.erase(id);
  int64_t quiet_by = MonotonicNanos() + 5 * kNanosPerSecond;
  std::string kids = WorkerChildren(*run);
  out.busy_after_remove = !kids.empty() && kids != "?";
  while (!(kids = WorkerChildren(*run)).empty() && kids != "?") {
    if (MonotonicNanos() > quiet_by) Fatal(run, "job " + id + ": the worker still has children 5 s after RemoveJob: " + kids);
    ::usleep(1000);
  }
  return out;
}

int64_t FloorRun(Run* run) {
  auto took = run->floor.Run(kFloorRuns, run->helper, {"test_helper", "exit", "0"});
  if (!took.ok()) Fatal(run, took.error().message());
  return *took;
}

double Median(const std::vector<int64_t>& v) { return bench::PercentileMicros(v, 0.5); }

// The runner's log lines of successful runs of stage's hook.
size_t HookLines(const Run& run, const char* stage) {
  auto text = sys::ReadFile(run.log, 256 << 20);
  if (!text.ok()) return 0;
  size_t n = 0;
  std::string needle = std::string("hook ") + stage + " " + run.helper + ": exit 0";
  for (const std::string& line : Split(*text, '\n')) {
    if (line.find(" INFO " + needle) != std::string::npos) ++n;
  }
  return n;
}

int Main(int argc, char** argv) {
  bench::Name() = "hook_bench";
  Run run;
  int starts = 41;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) {
      run.outpost = argv[++i];
    } else if (a == "--helper" && i + 1 < argc) {
      run.helper = argv[++i];
    } else if (a == "--starts" && i + 1 < argc) {
      starts = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: hook_bench [--outpost PATH] [--helper PATH] [--starts N]\n");
      return 2;
    }
  }
  if (starts < 1) starts = 1;
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  if (run.helper.find(' ') != std::string::npos) Fatal(&run, "the floor probe cannot take a helper path with spaces");
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-hook-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.tag = sys::Basename(run.dir).substr(19);  // the mkdtemp suffix: ids unique per run
  run.marker = std::string(kMarkerVar) + "=" + run.dir;
  run.config = run.dir + "/config.json";
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  for (const char* d : {"/hooks.d", "/hooks"}) {
    if (::mkdir((run.dir + d).c_str(), 0700) != 0) Fatal(&run, std::string("mkdir ") + d + ": " + std::strerror(errno));
  }
  Info("state dir %s/state, runtime dir %s, hooks_dirs and hook_path empty dirs in the state's parent", run.dir.c_str(),
       run.rundir.c_str());
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + JsonString(run.dir + "/state") +
                       ", \"runtime_dir\": " + JsonString(run.rundir) + ", \"log_file\": " + JsonString(run.log) +
                       // No jobs.d, a cgroup root outside any cgroup2 mount, and
                       // hook directories of our own: nothing of the host's applies.
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"cgroup_root\": " +
                       JsonString(run.dir + "/no-cgroup") + ", \"hooks_dirs\": [" + JsonString(run.dir + "/hooks.d") +
                       "], \"hook_path\": " + JsonString(run.dir + "/hooks") + "}\n";
  Status wst = sys::WriteFileAtomic(run.config, config, 0600);
  if (!wst.ok()) Fatal(&run, wst.error().message());

  std::string probe = run.floor.Start(run.helper);
  if (!probe.empty()) Fatal(&run, "floor probe: " + probe);

  run.keeper = SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  if (run.keeper < 0) Fatal(&run, "fork failed");
  run.worker = WaitForWorker(run.socket, 10 * kNanosPerSecond);
  if (run.worker <= 0) Fatal(&run, "the agent did not answer Status within 10s");
  if (WorkerChildren(run) == "?") {
    Info("no /proc/PID/task/PID/children here: removal is trusted to include the poststop hooks");
  }

  auto client = wire::BlockingClient::Connect(run.socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(&run, "connect: " + client.error().message());
  std::vector<int64_t> main_a, main_b, run_a, run_b, floor, diff, submit_a, submit_b, remove_a, remove_b;
  int hook_events = 0, busy_a = 0, busy_b = 0;
  for (int r = 0; r < kWarmup + starts; ++r) {
    if (g_interrupted) Fatal(&run, "interrupted");
    Start a, b;
    int64_t f = 0;
    for (int k = 0; k < 3; ++k) {  // a, b, f rotated: each goes first in a third of the rounds
      switch ((r + k) % 3) {
        case 0: a = OneStart(&run, &*client, Format("h%s-a%03d", run.tag.c_str(), r), false); break;
        case 1: b = OneStart(&run, &*client, Format("h%s-b%03d", run.tag.c_str(), r), true); break;
        default: f = FloorRun(&run); break;
      }
    }
    if (r < kWarmup) continue;
    main_a.push_back(a.to_main);
    main_b.push_back(b.to_main);
    run_a.push_back(a.to_running);
    run_b.push_back(b.to_running);
    floor.push_back(f);
    diff.push_back(b.to_main - a.to_main);
    submit_a.push_back(a.submit);
    submit_b.push_back(b.submit);
    remove_a.push_back(a.remove);
    remove_b.push_back(b.remove);
    hook_events += b.hook_events;
    busy_a += a.busy_after_remove;
    busy_b += b.busy_after_remove;
  }

  // The check that every stage's hook runs (startContainer runs inside the
  // task's process: the agent logs its run only when it fails), outside the
  // timing: one more start with a recording hook per stage.
  const std::string record_dir = run.dir + "/ran";
  if (::mkdir(record_dir.c_str(), 0700) != 0) Fatal(&run, "mkdir " + record_dir + ": " + std::strerror(errno));
  OneStart(&run, &*client, Format("h%s-check", run.tag.c_str()), true, record_dir);
  std::string not_run;
  for (const char* stage : kStages) {
    auto rec = sys::ReadFile(record_dir + "/" + stage, 1 << 20);
    if (!rec.ok() || rec->find("\\\"status\\\":") == std::string::npos) not_run += std::string(" ") + stage;
  }
  if (!not_run.empty()) Fatal(&run, "the recording hooks of these stages did not run:" + not_run);

  const double with = Median(main_b), without = Median(main_a), fl = Median(floor);
  const double per_hook = (with - without) / kHooksBeforeMain;
  const double full_with = Median(run_b), full_without = Median(run_a);
  const size_t n = main_a.size();
  Info("%zu rounds (+%d warm-up) of: a job without hooks, the same job with one no-op hook per stage, the floor "
       "probe's median of %d hook runs",
       n, kWarmup, kFloorRuns);
  Info("SubmitJob -> task's first instruction: p50 %.1f us without hooks (p90 %.1f), %.1f us with 4 hooks before it "
       "(p90 %.1f); per hook (p50 with - p50 without) / 4 = %.1f us; median of the paired per-round differences / 4 = "
       "%.1f us",
       without, bench::PercentileMicros(main_a, 0.9), with, bench::PercentileMicros(main_b, 0.9), per_hook,
       Median(diff) / kHooksBeforeMain);
  Info("hook floor (test_helper floor `run %d`: fork + execve + state on stdin + stdout/stderr drained + waitpid of "
       "`test_helper exit 0`): p50 %.1f us, p90 %.1f us over %zu medians of %d",
       kFloorRuns, fl, bench::PercentileMicros(floor, 0.9), floor.size(), kFloorRuns);
  Info("SubmitJob -> start complete (event seen: \"started\" without hooks, poststart's \"hook\" with them; 5 hooks): "
       "p50 %.1f us without, %.1f us with; per hook %.1f us (%.2fx the floor)",
       full_without, full_with, (full_with - full_without) / kHooksBeforeRunning,
       fl > 0 ? (full_with - full_without) / kHooksBeforeRunning / fl : 0.0);
  Info("SubmitJob reply p50 %.1f us without hooks, %.1f us with; RemoveJob p50 %.1f ms without hooks, %.1f ms with; "
       "the worker still had a child (a poststop hook) when RemoveJob answered in %d of %zu removals with hooks "
       "(%d of %zu without); %d hook events in %zu timed starts with hooks",
       Median(submit_a), Median(submit_b), Median(remove_a) / 1000, Median(remove_b) / 1000, busy_b, n, busy_a, n,
       hook_events, n);
  // Every start with hooks (warm-up, timed, the check) ran each of the
  // agent's stages once; startContainer was checked above.
  size_t per_stage_expected = static_cast<size_t>(kWarmup + starts + 1);
  std::string ran;
  bool all = true;
  for (const char* stage : kStages) {
    if (std::strcmp(stage, "startContainer") == 0) continue;
    size_t c = HookLines(run, stage);
    ran += Format(" %s=%zu", stage, c);
    if (c != per_stage_expected) all = false;
  }
  Info("hook log lines in the agent log per stage run by the agent (expected %zu each):%s; startContainer: ran "
       "in the check start", per_stage_expected, ran.c_str());
  if (!all) Fatal(&run, "not every hook ran once per start with hooks (see the line above)");
  // A hook's fork copies its parent's page tables: the worker's (or the
  // task's new process, a copy of the worker) against the floor probe's.
  bench::DescribeMemory("worker (forks the agent's hooks)", run.worker);
  bench::DescribeMemory("floor probe (forks the floor's hooks)", run.floor.pid());
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));

  Print("task_start_hooks_p50", with, "us", "task_start_nohooks_p50", without);
  Print("hook_added_per_hook_p50", per_hook, "us", "hook_fork_exec_wait_p50", fl);

  Cleanup(&run);
  if (run.failed) {
    std::fprintf(stderr, "hook_bench: clean-up needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
