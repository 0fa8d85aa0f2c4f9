// Jobs through the real agent binary (keeper + worker):
//
//  1. Job start latency: a job of 10 tasks `test_helper sleep 1000` is sent
//     with SubmitJob on an open API connection; the time until the agent has
//     reported all 10 tasks started (exec done: the driver's "started"
//     event, which it sends once its exec-status pipe reports the exec),
//     followed with WatchEvents long-polls filtered on the job, as a careful
//     client would. Each start is then checked with InspectJob (all 10
//     "running" with a pid, outside the timing) and the job is removed with
//     RemoveJob. Baseline: 10 bare fork + execve of the same helper command,
//     each with a CLOEXEC exec-status pipe, until all 10 pipes report EOF
//     (= all 10 exec'd). The two alternate round by round (which goes first
//     alternates too), 3 warm-up rounds then 30 timed ones; p50 and p99 (with
//     30 samples the p99 is the slowest).
//  2. RSS (VmRSS of /proc/<pid>/status) of the worker and the keeper, idle
//     (right after start-up, before 1.) and with 100 jobs of 10 sleeping
//     tasks each submitted through the API and all running. Baseline: one
//     idle static helper; the per-task figure (with-jobs - idle) / 1000 has
//     the target 8 KiB per task of agent_bench's worker_rss_per_task.
//
// Everything lives in a temporary dir (config, state, runtime dir, socket,
// agent log; jobs_dir is "", no drop-in directory); tasks carry
// OUTPOST_BENCH_RUN=<that dir> in their environment so that any leftover can
// be found and killed. Job ids are unique per run (the driver finds a task's
// stray descendants machine-wide by its task id). Clean-up, also on failure
// and on SIGINT/SIGTERM: RemoveJob of every job through the API, SIGTERM to
// the keeper, then a sweep of /proc for leftovers (killed and reported).
//
//   job_bench [--outpost PATH] [--helper PATH] [--jobs N] [--rounds N]
// Paths default to ../outpost and ../test_helper next to this binary's dir.
//
// Output:
//   BENCH job_start_10_tasks_p50 <us> us baseline=fork_exec_10_p50 <us> ratio=<r>
//   BENCH job_start_10_tasks_p99 <us> us baseline=fork_exec_10_p99 <us> ratio=<r>
//   BENCH agent_rss_100_jobs_1000_tasks <KiB> KiB baseline=static_helper_rss <KiB> ratio=<r>
//   BENCH agent_rss_per_job_task <KiB> KiB baseline=target_per_task 8.0 ratio=<r>
//   BENCH keeper_rss_100_jobs_1000_tasks <KiB> KiB baseline=static_helper_rss <KiB> ratio=<r>
//   TARGETS name<=limit:PASS|FAIL ...
// plus "job_bench:" lines with the detail (RSS split, fds, timings).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <picojson.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "agent.pb.h"
#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "job.pb.h"
#include "loop/loop.h"
#include "task.pb.h"
#include "proc/procfs.h"
#include "wire/rpc_client.h"
#include "bench_util.h"


extern char** environ;

namespace outpost {
namespace {

using bench::CallOnce;
using bench::CountFds;
using bench::DescribeMemory;
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
using bench::SettledRssKiB;
using bench::SpawnDetached;
using bench::Verdict;
using bench::WaitForWorker;

constexpr int kTasksPerJob = 10;
constexpr double kWorkerBaseKiB = 2048;  // target: worker <= 2 MiB + 8 KiB per task
constexpr double kPerTaskKiB = 8;
constexpr double kKeeperKiB = 256;

// ---- the agent -------------------------------------------------------------------

struct Run {
  std::string outpost, helper, dir, rundir, tag, config, socket, log, marker;
  pid_t keeper = 0;
  pid_t worker = 0;
  std::set<std::string> jobs;        // submitted, not removed yet
  std::vector<pid_t> task_pids;      // of the 100 jobs' tasks, for the fallback
  std::vector<pid_t> baseline_pids;  // baseline children not reaped yet
  bench::FloorProbe floor;           // measures the fork+exec floor (exits when we do)
  bool failed = false;
  bool cleaned = false;
};

void Cleanup(Run* run);

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "job_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log, sys::Dirname(run->dir) + "/outpost-job-bench-failed.log");
  Cleanup(run);
  std::exit(1);
}

std::string JsonString(const std::string& s) { return picojson::value(s).serialize(); }

// A job of `tasks` tasks t0..tN-1, each `test_helper sleep 1000` with the marker.
std::string JobSpec(const Run& run, const std::string& id, int tasks) {
  std::string s = "{\"id\": " + JsonString(id) + ", \"tasks\": [";
  for (int i = 0; i < tasks; ++i) {
    if (i) s += ", ";
    s += Format("{\"name\": \"t%d\", \"command\": %s, \"args\": [\"sleep\", \"1000\"], \"env\": {%s: %s}}", i,
                JsonString(run.helper).c_str(), JsonString(kMarkerVar).c_str(), JsonString(run.dir).c_str());
  }
  return s + "]}";
}

std::string SubmitRequest(const Run& run, const std::string& id, int tasks) {
  return bench::SubmitJobRequest(JobSpec(run, id, tasks));
}

std::string WatchRequest(uint64_t after, int64_t wait_nanos, const std::string& job) {
  outpost_v1_WatchEventsRequest req = outpost_v1_WatchEventsRequest_init_zero;
  req.after_seq = after;
  req.wait_nanos = wait_nanos;
  req.job = PbStr(job);
  auto out = PbEncode(outpost_v1_WatchEventsRequest_fields, &req, "WatchEventsRequest");
  return out.ok() ? *out : std::string();
}

void Cleanup(Run* run) {
  if (run->cleaned) return;
  run->cleaned = true;
  // 0. Baseline children (ours).
  for (pid_t pid : run->baseline_pids) {
    ::kill(pid, SIGKILL);
    ReapWithin(pid, 2 * kNanosPerSecond);
  }
  run->baseline_pids.clear();
  // 1. Through the API, as a user would: remove every job.
  if (run->keeper > 0 && !run->jobs.empty()) {
    std::vector<std::string> reqs;
    for (const std::string& id : run->jobs) reqs.push_back(JobIdRequest(id));
    int64_t t0 = MonotonicNanos();
    std::vector<Outcome> res = Pipeline(run->socket, "RemoveJob", reqs, 16, 30 * kNanosPerSecond, false);
    double secs = static_cast<double>(MonotonicNanos() - t0) / 1e9;
    size_t ok = 0, failed = 0, skipped = 0;
    std::string first_error;
    for (const Outcome& o : res) {
      if (!o.done) {
        ++skipped;
      } else if (o.ok || o.code == Code::kNotFound) {
        ++ok;
      } else {
        ++failed;
        if (first_error.empty()) first_error = o.reply;
      }
    }
    Info("clean-up: RemoveJob of %zu jobs: %zu ok, %zu failed, %zu not attempted, %.2f s (%.1f ms/job)%s%s",
         res.size(), ok, failed, skipped, secs, ok ? secs * 1000 / static_cast<double>(ok) : 0.0,
         first_error.empty() ? "" : "; first error: ", first_error.c_str());
    if (failed || skipped) {
      run->failed = true;
      std::fprintf(stderr, "job_bench: RemoveJob did not remove every job; killing the rest directly\n");
    }
    run->jobs.clear();
  }
  // 2. Whatever the API left: the task pids we know, if they still belong to the keeper.
  for (pid_t pid : run->task_pids) {
    proc::ProcStat ps;
    if (pid > 0 && proc::ReadProcStat(pid, &ps) && ps.state != 'Z' && ps.ppid == run->keeper) ::kill(pid, SIGKILL);
  }
  // 3. The agent: the keeper stops its worker and exits.
  if (!bench::StopKeeper(&run->keeper)) run->failed = true;
  bench::KillOwnWorker(run->worker, run->config);
  // 4. Anything else carrying our marker (killed processes may take a moment to be reaped).
  if (!run->marker.empty()) {
    size_t found = 0, killed = 0;
    for (int i = 0; i < 60; ++i) {
      std::vector<pid_t> strays = PidsWithEnv(run->marker);
      if (strays.empty()) break;
      found = std::max(found, strays.size());
      if (i >= 10) {
        for (pid_t p : strays) {
          if (::kill(p, SIGKILL) == 0) ++killed;
        }
      }
      ::usleep(50000);
    }
    std::vector<pid_t> left = PidsWithEnv(run->marker);
    Info("clean-up: %zu stray processes%s", killed ? found : 0, killed ? " killed by the /proc sweep" : "");
    if (killed) run->failed = true;
    if (!left.empty()) {
      std::fprintf(stderr, "job_bench: %zu processes with %s survive!\n", left.size(), run->marker.c_str());
    }
  }
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

// ---- 1. job start latency --------------------------------------------------------

// 10 fork + execve of `helper sleep 1000` by the floor probe (a small
// separate process): nanoseconds until all 10 have exec'd.
int64_t ForkExec10(Run* run) {
  auto took = run->floor.Exec(kTasksPerJob);
  if (!took.ok()) Fatal(run, took.error().message());
  return *took;
}

Result<std::string> Call(wire::BlockingClient* c, const char* method, const std::string& payload,
                         int64_t timeout = 30 * kNanosPerSecond) {
  return c->Call(kAgentService, method, payload, timeout);
}

// The agent's current last event seq.
uint64_t LastSeq(Run* run, wire::BlockingClient* c) {
  auto reply = Call(c, "WatchEvents", WatchRequest(~0ull >> 1, 0, ""));
  if (!reply.ok()) Fatal(run, "WatchEvents: " + reply.error().message());
  PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
  if (!resp.Decode(*reply, "WatchEventsResponse").ok()) Fatal(run, "bad WatchEventsResponse");
  return resp->last_seq;
}

struct JobStart {
  int64_t nanos = 0;  // SubmitJob sent -> 10th "started" event received
  int64_t submit_nanos = 0;  // SubmitJob sent -> its reply
  int polls = 0;      // WatchEvents calls needed
};

// Submits a 10-task job and follows its events until all 10 tasks started.
JobStart StartJob(Run* run, wire::BlockingClient* c, const std::string& id) {
  uint64_t cursor = LastSeq(run, c);
  std::string submit = SubmitRequest(*run, id, kTasksPerJob);
  JobStart out;
  std::set<std::string> started;
  int64_t t0 = MonotonicNanos();
  auto reply = Call(c, "SubmitJob", submit);
  out.submit_nanos = MonotonicNanos() - t0;
  if (!reply.ok()) Fatal(run, "SubmitJob " + id + ": " + reply.error().message());
  run->jobs.insert(id);
  int64_t deadline = t0 + 20 * kNanosPerSecond;
  while (started.size() < static_cast<size_t>(kTasksPerJob)) {
    if (MonotonicNanos() > deadline) Fatal(run, Format("job %s: only %zu of 10 tasks started within 20 s", id.c_str(),
                                                       started.size()));
    if (g_interrupted) Fatal(run, "interrupted");
    auto ev = Call(c, "WatchEvents", WatchRequest(cursor, 5 * kNanosPerSecond, id));
    ++out.polls;
    if (!ev.ok()) Fatal(run, "WatchEvents: " + ev.error().message());
    PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
    if (!resp.Decode(*ev, "WatchEventsResponse").ok()) Fatal(run, "bad WatchEventsResponse");
    for (pb_size_t i = 0; i < resp->events_count; ++i) {
      const outpost_v1_TaskEvent& e = resp->events[i];
      cursor = std::max<uint64_t>(cursor, e.seq);
      std::string type = PbString(e.type);
      if (type == "started") {
        started.insert(PbString(e.task_id));
      } else if (type == "exited" || type == "signalled" || type == "error" || type == "failed" ||
                 type == "restarting") {
        Fatal(run, Format("job %s: task %s: %s: %s", id.c_str(), PbString(e.task_id).c_str(), type.c_str(),
                          PbString(e.message).c_str()));
      }
    }
  }
  out.nanos = MonotonicNanos() - t0;
  return out;
}

// InspectJob: every task running with a pid (the event said so; this is the check).
void CheckJobRunning(Run* run, wire::BlockingClient* c, const std::string& id) {
  auto reply = Call(c, "InspectJob", JobIdRequest(id));
  if (!reply.ok()) Fatal(run, "InspectJob " + id + ": " + reply.error().message());
  PbOwned<outpost_v1_JobInfo> info(outpost_v1_JobInfo_fields);
  if (!info.Decode(*reply, "JobInfo").ok()) Fatal(run, "bad JobInfo");
  size_t running = 0;
  for (pb_size_t i = 0; i < info->tasks_count; ++i) {
    if (PbString(info->tasks[i].state) == "running" && info->tasks[i].pid > 0) ++running;
  }
  if (info->tasks_count != kTasksPerJob || running != static_cast<size_t>(kTasksPerJob)) {
    Fatal(run, Format("job %s: %zu of %u tasks running with a pid after all 10 \"started\" events (status %s)",
                      id.c_str(), running, static_cast<unsigned>(info->tasks_count), PbString(info->status).c_str()));
  }
}

void JobStartLatency(Run* run, int warmup, int rounds, std::vector<int64_t>* job, std::vector<int64_t>* forked) {
  auto client = wire::BlockingClient::Connect(run->socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(run, "connect: " + client.error().message());
  std::vector<int64_t> submit, remove;
  int polls = 0;
  for (int r = 0; r < warmup + rounds; ++r) {
    if (g_interrupted) Fatal(run, "interrupted");
    std::string id = Format("l%s-%02d", run->tag.c_str(), r);
    int64_t fe = 0;
    JobStart js;
    if (r % 2 == 0) {
      fe = ForkExec10(run);
      js = StartJob(run, &*client, id);
    } else {
      js = StartJob(run, &*client, id);
      fe = ForkExec10(run);
    }
    CheckJobRunning(run, &*client, id);
    int64_t t0 = MonotonicNanos();
    auto gone = Call(&*client, "RemoveJob", JobIdRequest(id));
    if (!gone.ok()) Fatal(run, "RemoveJob " + id + ": " + gone.error().message());
    run->jobs.erase(id);
    if (r < warmup) continue;
    remove.push_back(MonotonicNanos() - t0);
    job->push_back(js.nanos);
    submit.push_back(js.submit_nanos);
    forked->push_back(fe);
    polls += js.polls;
  }
  Info("job start: %d rounds (+%d warm-up); SubmitJob reply p50 %.0f us; %.1f WatchEvents calls per start; "
       "RemoveJob of a 10-task job p50 %.1f ms, max %.1f ms",
       rounds, warmup, bench::PercentileMicros(submit, 0.5), static_cast<double>(polls) / rounds,
       bench::PercentileMicros(remove, 0.5) / 1000, bench::PercentileMicros(remove, 1.0) / 1000);
}

// ---- 2. 100 jobs -----------------------------------------------------------------

struct Census {
  size_t jobs = 0, tasks = 0, running = 0;
  std::vector<pid_t> pids;
  std::string first_bad;
};

Census ListAll(Run* run) {
  auto list = CallOnce(run->socket, "ListJobs", "", 30 * kNanosPerSecond);
  if (!list.ok()) Fatal(run, "ListJobs: " + list.error().message());
  PbOwned<outpost_v1_ListJobsResponse> lr(outpost_v1_ListJobsResponse_fields);
  if (!lr.Decode(*list, "ListJobsResponse").ok()) Fatal(run, "bad ListJobsResponse");
  Census c;
  c.jobs = lr->jobs_count;
  for (pb_size_t j = 0; j < lr->jobs_count; ++j) {
    const outpost_v1_JobInfo& job = lr->jobs[j];
    for (pb_size_t i = 0; i < job.tasks_count; ++i) {
      const outpost_v1_JobTaskInfo& t = job.tasks[i];
      ++c.tasks;
      if (t.pid > 0) c.pids.push_back(t.pid);
      if (PbString(t.state) == "running" && t.pid > 0) {
        ++c.running;
      } else if (c.first_bad.empty()) {
        c.first_bad = Format("%s %s (%s; last exit: %s)", PbString(t.task_id).c_str(), PbString(t.state).c_str(),
                             PbString(t.reason).c_str(), PbString(t.last_exit).c_str());
      }
    }
  }
  return c;
}

int Main(int argc, char** argv) {
  bench::Name() = "job_bench";
  Run run;
  int njobs = 100, rounds = 30;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) {
      run.outpost = argv[++i];
    } else if (a == "--helper" && i + 1 < argc) {
      run.helper = argv[++i];
    } else if (a == "--jobs" && i + 1 < argc) {
      njobs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: job_bench [--outpost PATH] [--helper PATH] [--jobs N] [--rounds N]\n");
      return 2;
    }
  }
  const int ntasks = njobs * kTasksPerJob;
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  const int64_t begun = MonotonicNanos();

  // About 7 fds per task in the worker (agent_bench): raise the soft
  // RLIMIT_NOFILE to the hard one (and the hard one if short and we may);
  // the agent inherits it.
  bench::RaiseNofile(static_cast<rlim_t>(ntasks) * 16 + 1024);

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-job-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.tag = run.dir.substr(run.dir.size() - 6);  // [A-Za-z0-9]: valid in job ids
  run.marker = std::string(kMarkerVar) + "=" + run.dir;
  run.config = run.dir + "/config.json";
  run.rundir = bench::MakeRuntimeDir(run.dir);
  Info("state dir %s/state, runtime dir %s", run.dir.c_str(), run.rundir.c_str());
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + JsonString(run.dir + "/state") +
                       ", \"runtime_dir\": " + JsonString(run.rundir) + ", \"log_file\": " +
                       JsonString(run.log) + ", \"cgroup_root\": " + JsonString(run.dir + "/no-cgroup") +
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"max_jobs\": " +
                       std::to_string(njobs + 10) + "}\n";
  Status wst = sys::WriteFileAtomic(run.config, config, 0600);
  if (!wst.ok()) Fatal(&run, wst.error().message());

  std::string probe = run.floor.Start(run.helper);
  if (!probe.empty()) Fatal(&run, "floor probe: " + probe);

  // ---- baseline: one idle static helper ----
  pid_t helper = SpawnDetached({run.helper, "sleep", "600"}, "");
  if (helper < 0) Fatal(&run, "fork failed");
  run.baseline_pids.push_back(helper);
  long helper_rss = SettledRssKiB(helper);
  ::kill(helper, SIGKILL);
  ReapWithin(helper, 5 * kNanosPerSecond);
  run.baseline_pids.clear();
  if (helper_rss <= 0) Fatal(&run, "could not read the helper's RSS");

  // ---- the agent, idle ----
  run.keeper = SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  if (run.keeper < 0) Fatal(&run, "fork failed");
  run.worker = WaitForWorker(run.socket, 10 * kNanosPerSecond);
  if (run.worker <= 0) Fatal(&run, "the agent did not answer Status within 10s");
  proc::ProcStat wps;
  if (!proc::ReadProcStat(run.worker, &wps) || wps.ppid != run.keeper) {
    Fatal(&run, Format("worker %d is not a child of the keeper %d", run.worker, run.keeper));
  }
  // Job calls are refused (Unavailable) until the job manager has recovered.
  for (int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;;) {
    auto r = CallOnce(run.socket, "InspectJob", JobIdRequest("no-such-job"), kNanosPerSecond);
    if (r.ok() || r.error().code() != Code::kUnavailable) break;
    if (MonotonicNanos() > end || g_interrupted) Fatal(&run, "the job manager did not become ready within 10 s");
    ::usleep(20000);
  }
  long worker_idle = SettledRssKiB(run.worker, 3000);
  long keeper_idle = SettledRssKiB(run.keeper, 1500);
  int worker_fds_idle = CountFds(run.worker);
  DescribeMemory("worker idle", run.worker);
  DescribeMemory("keeper idle", run.keeper);

  // ---- 1. job start latency ----
  std::vector<int64_t> job_ns, fork_ns;
  JobStartLatency(&run, 3, rounds, &job_ns, &fork_ns);
  long worker_after_rounds = SettledRssKiB(run.worker, 3000);
  Info("worker after %d job starts and removals: VmRSS %ld KiB (idle %ld)", rounds + 3, worker_after_rounds,
       worker_idle);

  // ---- 2. njobs x 10 sleeping tasks ----
  std::vector<std::string> reqs, ids;
  for (int j = 0; j < njobs; ++j) {
    // "j<run>-042": task ids "j<run>-042.t3" stay within 15 characters, as in agent_bench.
    ids.push_back(Format("j%s-%03d", run.tag.c_str(), j));
    reqs.push_back(SubmitRequest(run, ids.back(), kTasksPerJob));
  }
  int64_t t0 = MonotonicNanos();
  for (const std::string& id : ids) run.jobs.insert(id);  // clean-up removes them (NotFound is fine)
  std::vector<Outcome> submitted = Pipeline(run.socket, "SubmitJob", reqs, 8, 30 * kNanosPerSecond, true);
  double submit_secs = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  for (size_t i = 0; i < submitted.size(); ++i) {
    const Outcome& o = submitted[i];
    if (!o.done) Fatal(&run, Format("SubmitJob %zu of %d was not attempted (interrupted or agent stuck)", i, njobs));
    if (!o.ok) Fatal(&run, Format("SubmitJob %s failed: %s", ids[i].c_str(), o.reply.c_str()));
  }
  Census c;
  for (int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;;) {
    c = ListAll(&run);
    run.task_pids = c.pids;
    if (c.running == static_cast<size_t>(ntasks)) break;
    if (MonotonicNanos() > end) {
      Fatal(&run, Format("only %zu of %d tasks running 60 s after the submissions; first not running: %s", c.running,
                         ntasks, c.first_bad.c_str()));
    }
    if (g_interrupted) Fatal(&run, "interrupted");
    ::usleep(100000);
  }
  double all_secs = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  Info("%d jobs x %d tasks: SubmitJob replies after %.2f s (8 in flight), all %d tasks running after %.2f s "
       "(%.0f task starts/s)",
       njobs, kTasksPerJob, submit_secs, ntasks, all_secs, ntasks / all_secs);
  ::usleep(300000);
  long worker_full = SettledRssKiB(run.worker, 3000);
  long keeper_full = SettledRssKiB(run.keeper, 1500);
  int worker_fds_full = CountFds(run.worker);
  DescribeMemory(Format("worker with %d jobs, %d tasks", njobs, ntasks).c_str(), run.worker);
  DescribeMemory(Format("keeper with %d jobs, %d tasks", njobs, ntasks).c_str(), run.keeper);
  Info("worker fds: %d idle, %d with %d tasks (%.2f per task)", worker_fds_idle, worker_fds_full, ntasks,
       static_cast<double>(worker_fds_full - worker_fds_idle) / ntasks);
  c = ListAll(&run);
  if (c.running != static_cast<size_t>(ntasks)) {
    Fatal(&run, Format("after the RSS readings only %zu of %d tasks run; the first that does not: %s. Something "
                       "outside the bench killed them?",
                       c.running, ntasks, c.first_bad.c_str()));
  }
  double per_task = static_cast<double>(worker_full - worker_idle) / ntasks;

  std::string nj = std::to_string(njobs), nt = std::to_string(ntasks);
  double job_p50 = bench::PercentileMicros(job_ns, 0.5), job_p99 = bench::PercentileMicros(job_ns, 0.99);
  double fe_p50 = bench::PercentileMicros(fork_ns, 0.5), fe_p99 = bench::PercentileMicros(fork_ns, 0.99);
  Print("job_start_10_tasks_p50", job_p50, "us", "fork_exec_10_p50", fe_p50);
  Print("job_start_10_tasks_p99", job_p99, "us", "fork_exec_10_p99", fe_p99);
  Print(("agent_rss_" + nj + "_jobs_" + nt + "_tasks").c_str(), worker_full, "KiB", "static_helper_rss", helper_rss);
  Print("agent_rss_per_job_task", per_task, "KiB", "target_per_task", kPerTaskKiB);
  Print(("keeper_rss_" + nj + "_jobs_" + nt + "_tasks").c_str(), keeper_full, "KiB", "static_helper_rss",
        helper_rss);
  Info("worker idle %ld KiB, keeper idle %ld KiB", worker_idle, keeper_idle);
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("TARGETS %s %s %s\n",
              Verdict("agent_rss_" + nj + "_jobs_" + nt + "_tasks", worker_full, kWorkerBaseKiB + kPerTaskKiB * ntasks,
                      "KiB").c_str(),
              Verdict("agent_rss_per_job_task", per_task, kPerTaskKiB, "KiB").c_str(),
              Verdict("keeper_rss_" + nj + "_jobs_" + nt + "_tasks", keeper_full, kKeeperKiB, "KiB").c_str());
  std::fflush(stdout);

  Cleanup(&run);
  Info("total %.1f s", static_cast<double>(MonotonicNanos() - begun) / 1e9);
  if (run.failed) {
    std::fprintf(stderr, "job_bench: clean-up needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
