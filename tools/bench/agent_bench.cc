// Agent footprint and recovery, through the real agent binary:
//
//  1. RSS (VmRSS of /proc/<pid>/status) of the worker and the keeper, idle
//     and with N (default 1,000) sleeping tasks started through the API;
//     baseline: one idle static helper process (`test_helper sleep`).
//     Before the N tasks, and again with them, 21 tasks `test_helper
//     timestamp FILE` are started and removed one by one through the API:
//     the time from sending StartTask to the helper's first instruction,
//     against a bare fork + exec of the same helper alternating with them.
//     (The first removal also puts the worker's allocator in the state of an
//     agent that has been running for a while; see docs/benchmarks.md.)
//  2. Recovery: with the N tasks running the worker is killed with SIGKILL;
//     the keeper starts a new one. The figure is the time between the
//     keeper's "worker started pid=<new>" log line (right after its fork) and
//     the new worker's "tasks recovered count=N" line (every handle read,
//     every process checked, every log pipe reopened). Baseline: reading
//     /proc/<pid>/stat of the N task pids once, the floor of any recovery.
//
// Everything lives in a temporary dir (config, state, runtime dir, socket,
// agent log); tasks carry OUTPOST_BENCH_RUN=<that dir> in their environment
// so that any leftover can be found and killed. Clean-up: DestroyTask(force)
// for every task through the API, SIGTERM to the keeper, then a sweep of
// /proc for leftovers (killed and reported).
//
//   agent_bench [--outpost PATH] [--helper PATH] [--tasks N]
// Paths default to ../outpost and ../test_helper next to this binary's dir.
//
// Output (values in KiB, ms or us):
//   BENCH task_start_api_idle_p50 <us> us baseline=fork_exec_p50 <us> ratio=<r>
//   BENCH task_start_api_1000_tasks_p50 <us> us baseline=fork_exec_p50 <us> ratio=<r>
//   BENCH task_start_api_burst_1000 <us per start> us baseline=target_1000_per_s 1000 ratio=<r>
//   BENCH worker_fds_per_task <fds> fds baseline=target_per_task 3 ratio=<r>
//   BENCH remove_1000_tasks <ms> ms baseline=target 1000 ratio=<r>   (clean-up, when every removal succeeded)
//   BENCH worker_rss_idle <KiB> KiB baseline=static_helper_rss <KiB> ratio=<r>
//   BENCH worker_rss_1000_tasks ...       BENCH worker_rss_per_task <KiB> KiB baseline=target_per_task 8 ratio=<r>
//   BENCH keeper_rss_idle ...             BENCH keeper_rss_1000_tasks ...
//   BENCH recovery_1000_tasks <ms> ms baseline=proc_stat_1000 <ms> ratio=<r>
//   TARGETS name<=limit:PASS|FAIL ...
// plus "agent_bench:" lines with the detail (RSS split, fds per task, smaps).
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "agent.pb.h"
#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "task.pb.h"
#include "proc/procfs.h"
#include "wire/rpc_client.h"
#include "bench_util.h"

namespace outpost {
namespace {

using bench::CallOnce;
using bench::CountFds;
using bench::DescribeMemory;
using bench::DestroyRequest;
using bench::Die;
using bench::g_interrupted;
using bench::Info;
using bench::kAgentService;
using bench::kMarkerVar;
using bench::OrDie;
using bench::Outcome;
using bench::PidsWithEnv;
using bench::Pipeline;
using bench::Print;
using bench::ReapWithin;
using bench::SettledRssKiB;
using bench::SpawnDetached;
using bench::Verdict;
using bench::WaitForWorker;

constexpr double kWorkerBaseKiB = 2048;  // target: worker <= 2 MiB + 4 KiB per task
constexpr double kPerTaskKiB = 4.0;
constexpr double kKeeperKiB = 256;
constexpr double kRecoveryMs = 500;

// ---- the agent -------------------------------------------------------------------

struct Run {
  std::string outpost, helper, dir, rundir, config, socket, log, marker;
  pid_t keeper = 0;
  pid_t worker = 0;
  std::vector<std::string> ids;
  std::vector<pid_t> pids;
  bool failed = false;
  double remove_ms = -1;  // DestroyTask(force) of every task, when all succeeded
  bench::FloorProbe floor;  // measures the fork+exec floor (exits when we do)
};

[[noreturn]] void Fatal(Run* run, const std::string& what);
void Cleanup(Run* run);

// A task running `test_helper ARG1 ARG2` (default: sleep 600).
std::string StartRequest(const Run& run, const std::string& id, const std::string& arg1 = "sleep",
                         const std::string& arg2 = "600") {
  return bench::StartRequest(run.helper, run.dir, id, arg1, arg2);
}

// Milliseconds since the epoch of a log line's "2026-11-22T19:25:20.123Z" prefix; -1 if none.
int64_t LineMillis(const std::string& line) {
  struct tm tm;
  std::memset(&tm, 0, sizeof tm);
  int ms = 0;
  if (std::sscanf(line.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &ms) != 7) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm)) * 1000 + ms;
}

// The lines at or after offset in the agent's log that contain needle.
std::vector<std::string> FindLogLines(const Run& run, size_t offset, const std::string& needle) {
  std::vector<std::string> out;
  auto text = sys::ReadFile(run.log, 256 << 20);
  if (!text.ok() || text->size() <= offset) return out;
  for (const std::string& line : Split(text->substr(offset), '\n')) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::string FindLogLine(const Run& run, size_t offset, const std::string& needle) {
  std::vector<std::string> lines = FindLogLines(run, offset, needle);
  return lines.empty() ? "" : lines.front();
}

size_t LogSize(const Run& run) {
  struct stat st;
  return ::stat(run.log.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

// The floor of recovery: open + read + close of /proc/<pid>/stat for every task.
double ProcStatMillis(const std::vector<pid_t>& pids) {
  double best = 1e18;
  for (int round = 0; round < 5; ++round) {
    int64_t t0 = MonotonicNanos();
    for (pid_t pid : pids) {
      char path[64], buf[1024];
      std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
      int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      (void)!::read(fd, buf, sizeof buf);
      ::close(fd);
    }
    best = std::min(best, static_cast<double>(MonotonicNanos() - t0) / 1e6);
  }
  return best;
}

void Cleanup(Run* run) {
  // 1. Through the API, as a user would: force-destroy every task.
  if (run->keeper > 0 && !run->ids.empty()) {
    std::vector<std::string> reqs;
    for (const std::string& id : run->ids) reqs.push_back(DestroyRequest(id));
    int64_t t0 = MonotonicNanos();
    std::vector<Outcome> res = Pipeline(run->socket, "DestroyTask", reqs, 32, 20 * kNanosPerSecond, false);
    double secs = static_cast<double>(MonotonicNanos() - t0) / 1e9;
    size_t ok = 0, failed = 0, skipped = 0;
    std::string first_error;
    for (const Outcome& o : res) {
      if (!o.done) ++skipped;
      else if (o.ok || o.code == Code::kNotFound) ++ok;
      else {
        ++failed;
        if (first_error.empty()) first_error = o.reply;
      }
    }
    Info("clean-up: DestroyTask(force) of %zu tasks: %zu ok, %zu failed, %zu not attempted, %.2f s (%.1f ms/task)%s%s",
         res.size(), ok, failed, skipped, secs, ok ? secs * 1000 / static_cast<double>(ok) : 0.0,
         first_error.empty() ? "" : "; first error: ", first_error.c_str());
    if (!failed && !skipped) run->remove_ms = secs * 1000;
    if (failed || skipped) {
      run->failed = true;
      std::fprintf(stderr, "agent_bench: DestroyTask did not remove every task; killing the rest directly\n");
    }
  }
  // 2. Whatever the API left: the task pids we know, if they still belong to the keeper.
  for (pid_t pid : run->pids) {
    proc::ProcStat ps;
    if (pid > 0 && proc::ReadProcStat(pid, &ps) && ps.state != 'Z' && ps.ppid == run->keeper) ::kill(pid, SIGKILL);
  }
  // 3. The agent: the keeper stops its worker and exits.
  if (!bench::StopKeeper(&run->keeper)) run->failed = true;
  bench::KillOwnWorker(run->worker, run->config);
  // 4. Anything else carrying our marker.
  if (!run->marker.empty()) {
    // Killed processes may take a moment to be reaped: look again a few
    // times before killing what is left.
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
    if (!left.empty()) std::fprintf(stderr, "agent_bench: %zu processes with %s survive!\n", left.size(),
                                    run->marker.c_str());
  }
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "agent_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log, sys::Dirname(run->dir) + "/outpost-agent-bench-failed.log");
  Cleanup(run);
  std::exit(1);
}

// Task start latency through the whole agent: StartTask sent on an open API
// connection -> first instruction of the helper's main(), n times, each
// alternating with a bare fork + exec of the same helper timed the same way.
// p50s in microseconds. The tasks are removed again. tag: one letter, for ids.
void ApiStartLatency(Run* run, int n, char tag, double* api_p50, double* fork_p50) {
  auto client = wire::BlockingClient::Connect(run->socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(run, "connect: " + client.error().message());
  const std::string stamp = run->dir + "/stamp";
  std::vector<int64_t> api, forked;
  for (int i = 0; i < n; ++i) {
    auto floor = run->floor.Stamp(run->dir + "/floor-stamp");
    if (!floor.ok()) Fatal(run, floor.error().message());
    forked.push_back(*floor);

    std::string id = Format("s%s-%c%03d", sys::Basename(run->dir).substr(20).c_str(), tag, i);
    std::string req = StartRequest(*run, id, "timestamp", stamp);
    int64_t t0 = MonotonicNanos();
    auto reply = client->Call(kAgentService, "StartTask", req, 30 * kNanosPerSecond);
    if (!reply.ok()) Fatal(run, "StartTask " + id + ": " + reply.error().message());
    int64_t ts = bench::WaitStamp(stamp, 10 * kNanosPerSecond);
    if (ts < 0) Fatal(run, "the helper did not write its timestamp (task " + id + ")");
    api.push_back(ts - t0);
    auto gone = client->Call(kAgentService, "DestroyTask", DestroyRequest(id), 30 * kNanosPerSecond);
    if (!gone.ok()) Fatal(run, "DestroyTask " + id + ": " + gone.error().message());
  }
  *api_p50 = bench::PercentileMicros(api, 0.5);
  *fork_p50 = bench::PercentileMicros(forked, 0.5);
}

// Every task must still run: one that ended was killed from outside (the
// figures would be wrong), and the message says which and how.
void CheckAllRunning(Run* run, const char* when) {
  auto list = CallOnce(run->socket, "ListTasks", "", 30 * kNanosPerSecond);
  if (!list.ok()) Fatal(run, std::string("ListTasks ") + when + ": " + list.error().message());
  PbOwned<outpost_v1_ListTasksResponse> lr(outpost_v1_ListTasksResponse_fields);
  if (!lr.Decode(*list, "ListTasksResponse").ok()) Fatal(run, "bad ListTasksResponse");
  size_t running = 0;
  std::string first;
  for (pb_size_t i = 0; i < lr->tasks_count; ++i) {
    const outpost_v1_TaskInfo& t = lr->tasks[i];
    if (PbString(t.state) == "running") {
      ++running;
    } else if (first.empty()) {
      first = Format("%s (pid %d) %s: exit code %d, signal %d %s", PbString(t.id).c_str(), t.pid,
                     PbString(t.state).c_str(), t.exit_code, t.signal, PbString(t.error).c_str());
    }
  }
  if (running != run->ids.size()) {
    Fatal(run, Format("%s only %zu of %zu tasks are running; the first that is not: %s. Something outside the "
                      "bench killed them (another agent or test on this machine?)",
                      when, running, run->ids.size(), first.c_str()));
  }
}

int Main(int argc, char** argv) {
  bench::Name() = "agent_bench";
  Run run;
  int tasks = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) {
      run.outpost = argv[++i];
    } else if (a == "--helper" && i + 1 < argc) {
      run.helper = argv[++i];
    } else if (a == "--tasks" && i + 1 < argc) {
      tasks = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: agent_bench [--outpost PATH] [--helper PATH] [--tasks N]\n");
      return 2;
    }
  }
  if (tasks < 1) tasks = 1;
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();

  // Each task costs the worker about 7 fds (FIFO ends, log and cursor files,
  // pidfd; measured below): a soft RLIMIT_NOFILE of 1024 stops the agent at
  // about 140 tasks. The agent inherits our limits: raise
  // the soft one to the hard one, and the hard one too if it is short and we
  // may (root, CAP_SYS_RESOURCE).
  bench::RaiseNofile(static_cast<rlim_t>(tasks) * 16 + 1024);

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-agent-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.marker = std::string(kMarkerVar) + "=" + run.dir;
  run.config = run.dir + "/config.json";
  run.rundir = bench::MakeRuntimeDir(run.dir);
  Info("state dir %s/state, runtime dir %s", run.dir.c_str(), run.rundir.c_str());
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": \"" + run.dir + "/state\", \"runtime_dir\": \"" + run.rundir +
                       "\", \"log_file\": \"" + run.log +
                       // No jobs.d, and a cgroup root outside any cgroup2 mount: the
                       // benchmark never touches the host's /etc or cgroups.
                       "\", \"log_level\": \"info\", \"jobs_dir\": \"\", \"cgroup_root\": \"" + run.dir +
                       "/no-cgroup\"}\n";
  Status wst = sys::WriteFileAtomic(run.config, config, 0600);
  if (!wst.ok()) Fatal(&run, wst.error().message());

  std::string probe = run.floor.Start(run.helper);
  if (!probe.empty()) Fatal(&run, "floor probe: " + probe);

  // ---- baseline: one idle static helper ----
  pid_t helper = SpawnDetached({run.helper, "sleep", "600"}, "");
  if (helper < 0) Fatal(&run, "fork failed");
  long helper_rss = SettledRssKiB(helper);
  DescribeMemory("static helper (sleep)", helper);
  ::kill(helper, SIGKILL);
  ReapWithin(helper, 5 * kNanosPerSecond);
  if (helper_rss <= 0) Fatal(&run, "could not read the helper's RSS");

  // ---- the agent, idle ----
  run.keeper = SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  if (run.keeper < 0) Fatal(&run, "fork failed");
  run.worker = WaitForWorker(run.socket, 10 * kNanosPerSecond);
  if (run.worker <= 0) Fatal(&run, "the agent did not answer Status within 10s");
  proc::ProcStat wps;
  if (!proc::ReadProcStat(run.worker, &wps) || wps.ppid != run.keeper) {
    Fatal(&run, Format("worker %d is not a child of the keeper %d (is the keeper in this build?)", run.worker,
                       run.keeper));
  }
  long worker_idle = SettledRssKiB(run.worker, 3000);
  long keeper_idle = SettledRssKiB(run.keeper, 1500);
  int worker_fds_idle = CountFds(run.worker), keeper_fds_idle = CountFds(run.keeper);
  DescribeMemory("worker idle", run.worker);
  DescribeMemory("keeper idle", run.keeper);

  double api_idle = 0, fork_idle = 0;
  ApiStartLatency(&run, 21, 'i', &api_idle, &fork_idle);

  // ---- N sleeping tasks ----
  std::vector<std::string> reqs;
  for (int i = 0; i < tasks; ++i) {
    // Unique per run: the driver finds a task's stray descendants by the
    // OUTPOST_TASK_ID in their environment, machine-wide, so two agents with
    // the same task id would kill each other's processes.
    // At most 15 characters, like generated ids (std::string stores those inline).
    run.ids.push_back(Format("b%s-%04d", sys::Basename(run.dir).substr(20).c_str(), i));
    reqs.push_back(StartRequest(run, run.ids.back()));
  }
  int64_t t0 = MonotonicNanos();
  std::vector<Outcome> started = Pipeline(run.socket, "StartTask", reqs, 8, 30 * kNanosPerSecond, true);
  double start_secs = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  for (const Outcome& o : started) {  // every pid first, so that clean-up knows them all
    PbOwned<outpost_v1_StartTaskResponse> resp(outpost_v1_StartTaskResponse_fields);
    if (o.ok && resp.Decode(o.reply, "StartTaskResponse").ok()) run.pids.push_back(resp->task.pid);
  }
  for (size_t i = 0; i < started.size(); ++i) {
    const Outcome& o = started[i];
    if (!o.done) Fatal(&run, Format("StartTask %zu of %d was not attempted (interrupted or agent stuck)", i, tasks));
    if (!o.ok) Fatal(&run, Format("StartTask %zu of %d failed: %s", i, tasks, o.reply.c_str()));
  }
  if (run.pids.size() != started.size()) Fatal(&run, "bad StartTaskResponse");
  CheckAllRunning(&run, "after the starts");
  // Starts get slower as tasks accumulate: show the first and the last tenth.
  size_t tenth = std::max<size_t>(1, started.size() / 10);
  auto span_ms = [&](size_t from, size_t to) {
    int64_t begin = from == 0 ? t0 : started[from - 1].done_nanos;
    return static_cast<double>(started[to - 1].done_nanos - begin) / 1e6 / static_cast<double>(to - from);
  };
  Info("started %d tasks through the API in %.2f s (%.0f starts/s, 8 calls in flight); %.2f ms per start for the "
       "first %zu, %.2f ms for the last %zu",
       tasks, start_secs, tasks / start_secs, span_ms(0, tenth), tenth, span_ms(started.size() - tenth, started.size()),
       tenth);
  if (g_interrupted) Fatal(&run, "interrupted");
  ::usleep(300000);
  long worker_full = SettledRssKiB(run.worker, 3000);
  long keeper_full = SettledRssKiB(run.keeper, 1500);
  int worker_fds_full = CountFds(run.worker), keeper_fds_full = CountFds(run.keeper);
  DescribeMemory(Format("worker with %d tasks", tasks).c_str(), run.worker);
  DescribeMemory(Format("keeper with %d tasks", tasks).c_str(), run.keeper);
  double per_task = static_cast<double>(worker_full - worker_idle) / tasks;
  double fds_per_task = static_cast<double>(worker_fds_full - worker_fds_idle) / tasks;
  Info("fds: worker %d idle, %d with %d tasks (%.2f per task); keeper %d idle, %d with %d tasks (%.2f per task); "
       "a soft RLIMIT_NOFILE of 1024 allows about %.0f tasks",
       worker_fds_idle, worker_fds_full, tasks, fds_per_task, keeper_fds_idle, keeper_fds_full, tasks,
       static_cast<double>(keeper_fds_full - keeper_fds_idle) / tasks,
       fds_per_task > 0 ? (1024 - worker_fds_idle) / fds_per_task : 0.0);

  std::string nt = std::to_string(tasks);
  double api_full = 0, fork_full = 0;
  ApiStartLatency(&run, 21, 'f', &api_full, &fork_full);
  Print("task_start_api_idle_p50", api_idle, "us", "fork_exec_p50", fork_idle);
  // The burst above, per start (8 in flight): at least 1,000 starts/s.
  Print(("task_start_api_burst_" + nt).c_str(), start_secs * 1e6 / tasks, "us", "target_1000_per_s", 1000.0);
  Print("worker_fds_per_task", fds_per_task, "fds", "target_per_task", 3.0);
  Print(("task_start_api_" + nt + "_tasks_p50").c_str(), api_full, "us", "fork_exec_p50", fork_full);
  Print("worker_rss_idle", worker_idle, "KiB", "static_helper_rss", helper_rss);
  Print(("worker_rss_" + nt + "_tasks").c_str(), worker_full, "KiB", "static_helper_rss", helper_rss);
  Print("worker_rss_per_task", per_task, "KiB", "target_per_task", kPerTaskKiB);
  Print("keeper_rss_idle", keeper_idle, "KiB", "static_helper_rss", helper_rss);
  Print(("keeper_rss_" + nt + "_tasks").c_str(), keeper_full, "KiB", "static_helper_rss", helper_rss);

  // ---- recovery: kill -9 the worker ----
  double floor_ms = ProcStatMillis(run.pids);
  size_t offset = LogSize(run);
  pid_t old_worker = run.worker;
  int64_t killed_at_ms = WallNanos() / kNanosPerMilli;
  ::kill(old_worker, SIGKILL);
  std::string recovered_line, started_line;
  int64_t deadline = MonotonicNanos() + 60 * kNanosPerSecond;
  while (recovered_line.empty() && MonotonicNanos() < deadline && !g_interrupted) {
    ::usleep(20000);
    started_line = FindLogLine(run, offset, " worker started pid=");
    if (!started_line.empty()) recovered_line = FindLogLine(run, offset, " tasks recovered count=");
  }
  if (recovered_line.empty()) Fatal(&run, "no \"tasks recovered\" line within 60s of killing the worker");
  run.worker = WaitForWorker(run.socket, 30 * kNanosPerSecond);
  if (run.worker <= 0 || run.worker == old_worker) Fatal(&run, "no new worker answers the API");
  double recovery_ms = static_cast<double>(LineMillis(recovered_line) - LineMillis(started_line));
  std::string count = recovered_line.substr(recovered_line.find("count=") + 6);
  if (std::atoi(count.c_str()) != tasks) {
    Fatal(&run, "the new worker recovered " + count + " tasks, expected " + nt + ": " + recovered_line);
  }
  CheckAllRunning(&run, "after recovery");
  Print(("recovery_" + nt + "_tasks").c_str(), recovery_ms, "ms", ("proc_stat_" + nt).c_str(), floor_ms);
  // Where the time goes, from the per-task "task recovered" lines that the
  // driver logs as it is handed each task (after the task layer has read
  // every record and reopened every log pipe).
  std::vector<std::string> each = FindLogLines(run, offset, " task recovered task=");
  if (!each.empty()) {
    int64_t s0 = LineMillis(started_line), h0 = LineMillis(each.front()), h1 = LineMillis(each.back());
    Info("recovery: %lld ms from the worker's start (exec, config, API socket, reading the records, reopening the "
         "log pipes) until the first task reached its driver, %lld ms for the driver to check %zu processes, %lld ms "
         "after; kill -9 to \"worker started\" %lld ms",
         static_cast<long long>(h0 - s0), static_cast<long long>(h1 - h0), each.size(),
         static_cast<long long>(LineMillis(recovered_line) - h1),
         static_cast<long long>(s0 - killed_at_ms));
  }
  ::usleep(300000);
  DescribeMemory(Format("recovered worker with %d tasks", tasks).c_str(), run.worker);

  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));
  double worker_limit = kWorkerBaseKiB + kPerTaskKiB * tasks;
  std::printf("TARGETS %s %s %s %s %s %s\n", Verdict("worker_rss_idle", worker_idle, kWorkerBaseKiB, "KiB").c_str(),
              Verdict(("worker_rss_" + nt + "_tasks").c_str(), worker_full, worker_limit, "KiB").c_str(),
              Verdict("worker_rss_per_task", per_task, kPerTaskKiB, "KiB").c_str(),
              Verdict("keeper_rss_idle", keeper_idle, kKeeperKiB, "KiB").c_str(),
              Verdict(("keeper_rss_" + nt + "_tasks").c_str(), keeper_full, kKeeperKiB, "KiB").c_str(),
              Verdict(("recovery_" + nt + "_tasks").c_str(), recovery_ms, kRecoveryMs, "ms").c_str());
  std::fflush(stdout);

  Cleanup(&run);
  if (run.remove_ms >= 0) {
    Print(("remove_" + nt + "_tasks").c_str(), run.remove_ms, "ms", "target", 1000.0);
  }
  if (run.failed) {
    std::fprintf(stderr, "agent_bench: clean-up needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
