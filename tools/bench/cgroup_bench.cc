// cgroup v2 costs of the agent. Needs usable cgroup v2 and root:
// `make bench` runs it inside the test VM (tools/bench/vm/cgroup_bench.sh
// through tools/vmtest); on a host without cgroup v2 it says so and exits 0.
//
// Two agents run side by side, each in its own temporary dir, and every
// sample alternates between them, so that both see the same machine (under
// QEMU TCG the speed drifts):
//   A "cgroup":   cgroup_root <cgroup2 mount>/outpost-bench-<pid>.slice, so
//                 every task gets its own cgroup (clone3 CLONE_INTO_CGROUP);
//   B "nocgroup": cgroup_root /nonexistent-outpost-bench, not below the
//                 cgroup2 mount: cgroup v2 is unusable for that agent, its
//                 tasks run without a cgroup (found by process group), and
//                 cgroup_allow_without_limits lets it accept (and ignore)
//                 the same limits. Both agents' Status is checked for that.
//
//  1. Task start, through the API, until the helper's first instruction
//     (`test_helper timestamp FILE`, as in agent_bench):
//     - task_start_cgroup: SubmitJob of a one-task job whose task sets
//       memory.max 64MiB and pids.max 64 (so A creates the job and task
//       cgroups, writes the two limits and spawns into the task cgroup);
//       baseline task_start_nocgroup: the same SubmitJob to B. RemoveJob
//       after each sample.
//     - task_start_bare_cgroup: StartTask of a bare task (the task API has
//       no limits: A still gives it a cgroup, without limits); baseline
//       task_start_bare_nocgroup: the same StartTask to B. DestroyTask after.
//  2. Stats:
//     - stats_sample_per_task: one TaskStats call (on an open connection)
//       for a sleeping task of A (its cgroup's files + /proc); baseline
//       stats_sample_proc: the same call for a sleeping task of B (/proc
//       only). Also shown: the raw read of the 7 cgroup files the agent
//       reads, of /proc/<pid>/stat, of every /proc/*/stat, and TaskStats of
//       an exited task (the API round trip without any reading).
//     - stats_sample_<N>_tasks: N sleeping tasks in A, one TaskStats call
//       for each, one after the other on one connection; baseline
//       raw_cgroup_read_<N>: open+read+close of memory.current and cpu.stat
//       of each of the N task cgroups by this process. Best of --rounds.
//
//   cgroup_bench [--outpost PATH] [--helper PATH] [--samples N] [--tasks N] [--rounds N]
// Paths default to ../outpost and ../test_helper next to this binary's dir.
//
// Output:
//   BENCH task_start_cgroup_p50 <us> us baseline=task_start_nocgroup_p50 <us> ratio=<r>
//   BENCH task_start_cgroup_p99 ...       (p99 of --samples, default 100)
//   BENCH task_start_bare_cgroup_p50 ... / _p99 ...
//   BENCH stats_sample_per_task <us> us baseline=stats_sample_proc <us> ratio=<r>
//   BENCH stats_sample_<N>_tasks <ms> ms baseline=raw_cgroup_read_<N> <ms> ratio=<r>
// plus "cgroup_bench:" lines with the detail.
//
// Clean-up: DestroyTask/RemoveJob through the API, SIGTERM to both keepers,
// a /proc sweep for processes carrying OUTPOST_BENCH_RUN=<dir>, rmdir of
// A's cgroup root (and anything left below it, deepest first).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
#include "bench_util.h"
#include "job.pb.h"
#include "loop/loop.h"
#include "task.pb.h"
#include "cgroup/cgroup.h"
#include "proc/procfs.h"
#include "wire/rpc_client.h"

namespace outpost {
namespace {

using bench::DestroyRequest;
using bench::Die;
using bench::g_interrupted;
using bench::Info;
using bench::JobIdRequest;
using bench::kAgentService;
using bench::kMarkerVar;
using bench::Print;
using bench::ReapWithin;

constexpr int64_t kCallTimeout = 60 * kNanosPerSecond;

struct Agent {
  const char* name = "";
  bool cgroups = false;
  std::string dir, config, socket, log;
  pid_t keeper = 0;
  pid_t worker = 0;
  std::unique_ptr<wire::BlockingClient> client;
  std::vector<std::string> tasks;  // bare tasks to destroy at the end
  std::vector<std::string> jobs;   // jobs to remove at the end
};

struct Run {
  std::string outpost, helper, dir, marker, tag;
  std::string cg_mount, cg_root;  // A's cgroup root
  Agent a, b;
  bool failed = false;
};

Run* g_run = nullptr;
void Cleanup(Run* run);

[[noreturn]] void Fatal(const std::string& what) {
  std::fprintf(stderr, "cgroup_bench: %s\n", what.c_str());
  if (g_run) {
    for (Agent* ag : {&g_run->a, &g_run->b}) {
      auto text = sys::ReadFile(ag->log, 64 << 20);
      if (!text.ok()) continue;
      std::vector<std::string> lines = Split(*text, '\n');
      size_t from = lines.size() > 10 ? lines.size() - 10 : 0;
      std::fprintf(stderr, "cgroup_bench: last lines of agent %s's log:\n", ag->name);
      for (size_t i = from; i < lines.size(); ++i) std::fprintf(stderr, "  %s\n", lines[i].c_str());
    }
    Cleanup(g_run);
  }
  std::exit(1);
}

Result<std::string> Call(Agent* ag, const char* method, const std::string& payload) {
  return ag->client->Call(kAgentService, method, payload, kCallTimeout);
}

std::string CallOrDie(Agent* ag, const char* method, const std::string& payload, const std::string& what) {
  auto r = Call(ag, method, payload);
  if (!r.ok()) Fatal(Format("%s (agent %s): %s: %s", method, ag->name, what.c_str(), r.error().message().c_str()));
  return std::move(*r);
}

std::string IdRequest(const std::string& id) {
  outpost_v1_TaskIdRequest req = outpost_v1_TaskIdRequest_init_zero;
  req.id = PbStr(id);
  auto out = PbEncode(outpost_v1_TaskIdRequest_fields, &req, "TaskIdRequest");
  return out.ok() ? *out : std::string();
}

// A bare task running `test_helper ARG1 ARG2`.
std::string StartRequest(const Run& run, const std::string& id, const std::string& arg1, const std::string& arg2) {
  return bench::StartRequest(run.helper, run.dir, id, arg1, arg2);
}

// A one-task job `test_helper timestamp STAMP` with memory.max and pids.max.
std::string SubmitRequest(const Run& run, const std::string& job, const std::string& stamp) {
  std::string spec = "{\"id\": \"" + job + "\", \"tasks\": [{\"name\": \"t\", \"command\": \"" + run.helper +
                     "\", \"args\": [\"timestamp\", \"" + stamp + "\"], \"env\": {\"" + kMarkerVar + "\": \"" +
                     run.dir +
                     "\"}, \"restart\": {\"policy\": \"never\"}, \"resources\": {\"memory\": {\"max\": \"64MiB\"}, "
                     "\"pids\": {\"max\": 64}}}]}";
  return bench::SubmitJobRequest(spec);
}

// StartTask; returns the task's pid.
pid_t StartTask(Run* run, Agent* ag, const std::string& id, const std::string& a1, const std::string& a2) {
  ag->tasks.push_back(id);
  std::string reply = CallOrDie(ag, "StartTask", StartRequest(*run, id, a1, a2), id);
  PbOwned<outpost_v1_StartTaskResponse> resp(outpost_v1_StartTaskResponse_fields);
  if (!resp.Decode(reply, "StartTaskResponse").ok()) Fatal("bad StartTaskResponse");
  return resp->task.pid;
}

void DestroyTask(Agent* ag, const std::string& id) {
  CallOrDie(ag, "DestroyTask", DestroyRequest(id), id);
  ag->tasks.erase(std::remove(ag->tasks.begin(), ag->tasks.end(), id), ag->tasks.end());
}

// Starts an agent; waits for its worker to answer Status and checks that
// cgroup v2 is usable (A) or not (B) for it.
void StartAgent(Run* run, Agent* ag, const char* name, bool cgroups) {
  ag->name = name;
  ag->cgroups = cgroups;
  ag->dir = run->dir + "/" + name;
  if (::mkdir(ag->dir.c_str(), 0700) != 0) Fatal("mkdir " + ag->dir + ": " + std::strerror(errno));
  ag->config = ag->dir + "/config.json";
  ag->socket = ag->dir + "/run/outpost.sock";
  ag->log = ag->dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": \"" + ag->dir + "/state\", \"runtime_dir\": \"" + ag->dir +
                       "/run\", \"log_file\": \"" + ag->log + "\", \"log_level\": \"info\", " +
                       // Agent B's connection idles while the many-task stats
                       // run on A only (85 s in the aarch64 VM): past the default
                       // 60 s the agent closes it and the clean-up calls fail.
                       "\"api_idle_timeout\": \"10m\", " +
                       "\"jobs_dir\": \"" + ag->dir + "/jobs.d\", \"cgroup_root\": \"" +
                       (cgroups ? run->cg_root : std::string("/nonexistent-outpost-bench")) + "\"" +
                       (cgroups ? "" : ", \"cgroup_allow_without_limits\": true") + "}\n";
  Status wst = sys::WriteFileAtomic(ag->config, config, 0600);
  if (!wst.ok()) Fatal(wst.error().message());
  ag->keeper = bench::SpawnDetached({run->outpost, "agent", "--config", ag->config}, ag->dir + "/agent.stderr");
  if (ag->keeper < 0) Fatal("fork failed");
  int64_t end = MonotonicNanos() + 30 * kNanosPerSecond;
  std::string detail;
  bool enabled = false;
  while (MonotonicNanos() < end && !g_interrupted) {
    auto c = wire::BlockingClient::Connect(ag->socket, kNanosPerSecond);
    if (c.ok()) {
      auto reply = c->Call(kAgentService, "Status", "", 5 * kNanosPerSecond);
      PbOwned<outpost_v1_StatusResponse> resp(outpost_v1_StatusResponse_fields);
      if (reply.ok() && resp.Decode(*reply, "StatusResponse").ok() && resp->pid > 0) {
        ag->worker = resp->pid;
        for (pb_size_t i = 0; i < resp->features_count; ++i) {
          if (PbString(resp->features[i].name) == "cgroup2") {
            enabled = resp->features[i].enabled;
            detail = PbString(resp->features[i].detail);
          }
        }
        ag->client = std::make_unique<wire::BlockingClient>(std::move(*c));
        break;
      }
    }
    ::usleep(50000);
  }
  if (!ag->client) {
    auto err = sys::ReadFile(ag->dir + "/agent.stderr", 4096);
    Fatal(Format("agent %s did not answer Status within 30s%s%s", name, err.ok() ? ": " : "",
                 err.ok() ? err->c_str() : ""));
  }
  if (enabled != cgroups) {
    Fatal(Format("agent %s: cgroup2 feature is %s, expected %s: %s", name, enabled ? "on" : "off",
                 cgroups ? "on" : "off", detail.c_str()));
  }
  Info("agent %s: worker %d, cgroup2 %s: %s", name, ag->worker, enabled ? "on" : "off", detail.c_str());
}

// ---- raw reads (the physical baselines) -------------------------------------

// open + read + close; bytes read, -1 on error.
ssize_t RawRead(const char* path) {
  char buf[8192];
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t total = 0, n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) total += n;
  ::close(fd);
  return n < 0 ? -1 : total;
}

// Nanoseconds to read each of files once (all must be readable; the ones
// that are not are dropped from *files the first time).
int64_t TimeRawReads(std::vector<std::string>* files) {
  int64_t t0 = MonotonicNanos();
  for (auto it = files->begin(); it != files->end();) {
    if (RawRead(it->c_str()) < 0) {
      it = files->erase(it);
    } else {
      ++it;
    }
  }
  return MonotonicNanos() - t0;
}

// Reading /proc/<pid>/stat of every process, as the driver's process-group
// lookup does on every TaskStats call; returns the process count.
int ScanProc() {
  int n = 0;
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    if (RawRead(path) > 0) ++n;
  }
  ::closedir(d);
  return n;
}

// The kernel's part of a task cgroup, done by this process: mkdir of a job
// cgroup + enabling the controllers for its children, mkdir of a task
// cgroup + memory.max + pids.max + open(O_DIRECTORY) (what the agent does
// before clone3), then rmdir of both. p50s in us into *create, *remove.
void RawCgroupCost(const std::string& root, int samples, double* create, double* remove) {
  std::string ctl;
  auto text = sys::ReadFile(root + "/cgroup.subtree_control", 4096);
  if (text.ok()) ctl = *text;
  std::vector<std::string> controllers = Split(ctl.substr(0, ctl.find('\n')), ' ');
  std::vector<int64_t> c, r;
  auto write = [](const std::string& file, const std::string& v) {
    int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
    if (fd >= 0) ::close(fd);
    if (!ok) Fatal("write " + v + " to " + file + ": " + std::strerror(errno));
  };
  for (int i = 0; i < samples; ++i) {
    std::string job = root + "/rawjob", task = job + "/rawjob.t";
    int64_t t0 = MonotonicNanos();
    if (::mkdir(job.c_str(), 0755) != 0) Fatal("mkdir " + job + ": " + std::strerror(errno));
    for (const std::string& ctrl : controllers) {
      if (!ctrl.empty()) write(job + "/cgroup.subtree_control", "+" + ctrl);
    }
    if (::mkdir(task.c_str(), 0755) != 0) Fatal("mkdir " + task + ": " + std::strerror(errno));
    write(task + "/memory.max", "67108864");
    write(task + "/pids.max", "64");
    int fd = ::open(task.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    int64_t t1 = MonotonicNanos();
    if (::rmdir(task.c_str()) != 0 || ::rmdir(job.c_str()) != 0) Fatal(std::string("rmdir: ") + std::strerror(errno));
    int64_t t2 = MonotonicNanos();
    c.push_back(t1 - t0);
    r.push_back(t2 - t1);
  }
  *create = bench::PercentileMicros(c, 0.5);
  *remove = bench::PercentileMicros(r, 0.5);
}

// ---- clean-up ---------------------------------------------------------------


// rmdir of dir and every directory below it, deepest first (cgroupfs: rmdir only).
void RmdirCgroups(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> subs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_type == DT_DIR && std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      subs.push_back(dir + "/" + e->d_name);
    }
  }
  ::closedir(d);
  for (const std::string& s : subs) RmdirCgroups(s);
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) {
    std::fprintf(stderr, "cgroup_bench: rmdir %s: %s\n", dir.c_str(), std::strerror(errno));
  }
}

void Cleanup(Run* run) {
  static bool done = false;
  if (done) return;
  done = true;
  for (Agent* ag : {&run->a, &run->b}) {
    if (!ag->client) continue;
    int64_t t0 = MonotonicNanos();
    size_t n = ag->tasks.size() + ag->jobs.size(), bad = 0;
    for (const std::string& j : ag->jobs) {
      if (!Call(ag, "RemoveJob", JobIdRequest(j)).ok()) ++bad;
    }
    for (const std::string& t : ag->tasks) {
      if (!Call(ag, "DestroyTask", DestroyRequest(t)).ok()) ++bad;
    }
    if (n) {
      Info("clean-up: agent %s: %zu tasks/jobs removed through the API in %.2f s%s", ag->name, n,
           static_cast<double>(MonotonicNanos() - t0) / 1e9, bad ? " (some failed)" : "");
    }
    if (bad) run->failed = true;
    ag->client.reset();
  }
  for (Agent* ag : {&run->a, &run->b}) {
    if (ag->keeper <= 0) continue;
    ::kill(ag->keeper, SIGTERM);
    if (!ReapWithin(ag->keeper, 15 * kNanosPerSecond)) {
      std::fprintf(stderr, "cgroup_bench: agent %s's keeper did not stop on SIGTERM; killing it\n", ag->name);
      run->failed = true;
      ::kill(ag->keeper, SIGKILL);
      ReapWithin(ag->keeper, 5 * kNanosPerSecond);
    }
    ag->keeper = 0;
  }
  if (!run->marker.empty()) {
    size_t killed = 0;
    for (int i = 0; i < 40; ++i) {
      std::vector<pid_t> strays = bench::PidsWithEnv(run->marker);
      if (strays.empty()) break;
      if (i >= 10) {
        for (pid_t p : strays) killed += ::kill(p, SIGKILL) == 0;
      }
      ::usleep(50000);
    }
    if (killed) {
      Info("clean-up: %zu stray processes killed by the /proc sweep", killed);
      run->failed = true;
    }
  }
  if (!run->cg_root.empty()) RmdirCgroups(run->cg_root);
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

// ---- the measurements ---------------------------------------------------------

struct StartSamples {
  std::vector<int64_t> first_instr;  // request sent -> helper's first instruction
  std::vector<int64_t> reply;        // request sent -> reply
  std::vector<int64_t> remove;       // RemoveJob / DestroyTask
};

// One start through the API on ag: a job with limits (SubmitJob) or a bare
// task (StartTask), `test_helper timestamp STAMP`; then removed again.
void OneStart(Run* run, Agent* ag, bool job, int i, StartSamples* out) {
  const std::string stamp = ag->dir + "/stamp";
  std::string id = Format("%s%c%c%03d", run->tag.c_str(), ag->cgroups ? 'a' : 'b', job ? 'j' : 't', i);
  int64_t t0 = MonotonicNanos();
  if (job) {
    ag->jobs.push_back(id);
    CallOrDie(ag, "SubmitJob", SubmitRequest(*run, id, stamp), id);
  } else {
    ag->tasks.push_back(id);
    CallOrDie(ag, "StartTask", StartRequest(*run, id, "timestamp", stamp), id);
  }
  int64_t t1 = MonotonicNanos();
  int64_t ts = bench::WaitStamp(stamp, 30 * kNanosPerSecond);
  if (ts < 0) Fatal(Format("agent %s: the helper of %s did not write its timestamp", ag->name, id.c_str()));
  out->first_instr.push_back(ts - t0);
  out->reply.push_back(t1 - t0);
  int64_t t2 = MonotonicNanos();
  if (job) {
    CallOrDie(ag, "RemoveJob", JobIdRequest(id), id);
    ag->jobs.erase(std::remove(ag->jobs.begin(), ag->jobs.end(), id), ag->jobs.end());
  } else {
    DestroyTask(ag, id);
  }
  out->remove.push_back(MonotonicNanos() - t2);
}

void StartLatency(Run* run, bool job, int samples) {
  StartSamples a, b;
  const int warmup = 3;
  for (int i = 0; i < samples + warmup && !g_interrupted; ++i) {
    // Alternate which agent goes first.
    StartSamples* first = i % 2 ? &b : &a;
    StartSamples* second = i % 2 ? &a : &b;
    OneStart(run, i % 2 ? &run->b : &run->a, job, i, first);
    OneStart(run, i % 2 ? &run->a : &run->b, job, i, second);
    if (i + 1 == warmup) a = b = StartSamples();
  }
  if (g_interrupted) Fatal("interrupted");
  const char* kind = job ? "" : "bare_";
  const char* what = job ? "SubmitJob (memory.max + pids.max)" : "StartTask (no limits)";
  auto us = [](const std::vector<int64_t>& v, double q) { return bench::PercentileMicros(v, q); };
  // (Short lines: the VM's runner cuts output lines at 300 characters.)
  Info("%s, %d samples each (+%d warm-up), p50/p99 in us:", what, samples, warmup);
  Info("  first instruction: cgroup %.0f/%.0f, nocgroup %.0f/%.0f", us(a.first_instr, 0.5), us(a.first_instr, 0.99),
       us(b.first_instr, 0.5), us(b.first_instr, 0.99));
  Info("  reply: cgroup %.0f/%.0f, nocgroup %.0f/%.0f", us(a.reply, 0.5), us(a.reply, 0.99), us(b.reply, 0.5),
       us(b.reply, 0.99));
  Info("  %s: cgroup %.0f/%.0f, nocgroup %.0f/%.0f", job ? "RemoveJob" : "DestroyTask", us(a.remove, 0.5),
       us(a.remove, 0.99), us(b.remove, 0.5), us(b.remove, 0.99));
  Print(Format("task_start_%scgroup_p50", kind).c_str(), us(a.first_instr, 0.5), "us",
        Format("task_start_%snocgroup_p50", kind).c_str(), us(b.first_instr, 0.5));
  Print(Format("task_start_%scgroup_p99", kind).c_str(), us(a.first_instr, 0.99), "us",
        Format("task_start_%snocgroup_p99", kind).c_str(), us(b.first_instr, 0.99));
}

// TaskStats of id on ag; checks that a cgroup task reports cgroup values and
// a task without one does not. Returns nanoseconds.
int64_t TimedStats(Agent* ag, const std::string& id, bool check, bool want_cgroup) {
  std::string req = IdRequest(id);
  int64_t t0 = MonotonicNanos();
  std::string reply = CallOrDie(ag, "TaskStats", req, id);
  int64_t dt = MonotonicNanos() - t0;
  if (check) {
    PbOwned<outpost_v1_TaskStatsResponse> resp(outpost_v1_TaskStatsResponse_fields);
    if (!resp.Decode(reply, "TaskStatsResponse").ok()) Fatal("bad TaskStatsResponse");
    if ((resp->cgroup_count > 0) != want_cgroup) {
      Fatal(Format("TaskStats %s on agent %s: %u cgroup values, expected %s", id.c_str(), ag->name,
                   static_cast<unsigned>(resp->cgroup_count), want_cgroup ? "some" : "none"));
    }
    std::string measured;
    for (pb_size_t i = 0; i < resp->measured_count; ++i) measured += std::string(i ? " " : "") + resp->measured[i];
    Info("TaskStats of a task of agent %s: %u cgroup values, measured: %s", ag->name,
         static_cast<unsigned>(resp->cgroup_count), measured.c_str());
  }
  return dt;
}

std::string TaskCgroup(const Run& run, const std::string& id) { return run.cg_root + "/_tasks/" + id; }

void StatsPerTask(Run* run, int samples) {
  std::string ida = run->tag + "as", idb = run->tag + "bs", ide = run->tag + "ae";
  pid_t pa = StartTask(run, &run->a, ida, "sleep", "600");
  pid_t pb = StartTask(run, &run->b, idb, "sleep", "600");
  StartTask(run, &run->a, ide, "exit", "0");
  // Wait until the exited task is seen as exited (TaskStats then returns at once).
  int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;
  for (;;) {
    std::string reply = CallOrDie(&run->a, "InspectTask", IdRequest(ide), ide);
    PbOwned<outpost_v1_TaskInfo> info(outpost_v1_TaskInfo_fields);
    if (info.Decode(reply, "TaskInfo").ok() && PbString(info->state) == "exited") break;
    if (MonotonicNanos() > end) Fatal("the task `test_helper exit 0` did not exit within 10s");
    ::usleep(20000);
  }
  std::string cg = TaskCgroup(*run, ida);
  struct stat st;
  if (::stat(cg.c_str(), &st) != 0) Fatal("the task's cgroup " + cg + " does not exist");
  TimedStats(&run->a, ida, true, true);
  TimedStats(&run->b, idb, true, false);
  std::vector<std::string> files;
  for (const char* f : {"memory.current", "memory.swap.current", "memory.stat", "memory.events", "cpu.stat",
                        "pids.current", "io.stat"}) {
    files.push_back(cg + "/" + f);
  }
  std::vector<std::string> proc_stat = {Format("/proc/%d/stat", pa)};
  std::vector<int64_t> sa, sb, se, raw_cg, raw_proc, scan;
  int nproc = 0;
  for (int i = 0; i < samples && !g_interrupted; ++i) {
    sa.push_back(TimedStats(&run->a, ida, false, true));
    sb.push_back(TimedStats(&run->b, idb, false, false));
    se.push_back(TimedStats(&run->a, ide, false, false));
    raw_cg.push_back(TimeRawReads(&files));
    raw_proc.push_back(TimeRawReads(&proc_stat));
    if (i % 10 == 0) {
      int64_t t0 = MonotonicNanos();
      nproc = ScanProc();
      scan.push_back(MonotonicNanos() - t0);
    }
  }
  (void)pb;
  if (g_interrupted) Fatal("interrupted");
  DestroyTask(&run->a, ide);
  double a50 = bench::PercentileMicros(sa, 0.5), b50 = bench::PercentileMicros(sb, 0.5);
  Info("TaskStats, %d calls each on an open connection, p50 (p99) in us:", samples);
  Info("  cgroup task %.0f (%.0f), task without cgroup %.0f (%.0f), exited task (API round trip, no reading) "
       "%.0f (%.0f)",
       a50, bench::PercentileMicros(sa, 0.99), b50, bench::PercentileMicros(sb, 0.99),
       bench::PercentileMicros(se, 0.5), bench::PercentileMicros(se, 0.99));
  Info("  raw open+read+close by this process: the %zu cgroup files %.0f (%.0f), /proc/<pid>/stat %.0f (%.0f), "
       "/proc/*/stat of all %d processes %.0f",
       files.size(), bench::PercentileMicros(raw_cg, 0.5), bench::PercentileMicros(raw_cg, 0.99),
       bench::PercentileMicros(raw_proc, 0.5), bench::PercentileMicros(raw_proc, 0.99), nproc,
       bench::PercentileMicros(scan, 0.5));
  Print("stats_sample_per_task", a50, "us", "stats_sample_proc", b50);
}

// Calls method once per payload on ag's socket (a new connection), at most
// window in flight; Fatal on any failure.
void Pipeline(Agent* ag, const char* method, const std::vector<std::string>& payloads, size_t window) {
  std::vector<bench::Outcome> out = bench::Pipeline(ag->socket, method, payloads, window, kCallTimeout, true);
  if (g_interrupted) Fatal("interrupted");
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].ok) {
      Fatal(Format("agent %s: %s %zu: %s", ag->name, method, i, out[i].done ? out[i].reply.c_str() : "not sent"));
    }
  }
}

void StatsManyTasks(Run* run, int tasks, int rounds) {
  Agent* a = &run->a;
  std::vector<std::string> ids, reqs;
  for (int i = 0; i < tasks; ++i) {
    ids.push_back(Format("%sm%04d", run->tag.c_str(), i));
    reqs.push_back(StartRequest(*run, ids.back(), "sleep", "600"));
  }
  a->tasks.insert(a->tasks.end(), ids.begin(), ids.end());
  int64_t t0 = MonotonicNanos();
  Pipeline(a, "StartTask", reqs, 8);
  double start_s = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  Info("started %d sleeping tasks in agent %s in %.2f s (%.1f ms each, 8 in flight)", tasks, a->name, start_s,
       start_s * 1000 / tasks);
  std::vector<std::string> files;
  for (const std::string& id : ids) {
    files.push_back(TaskCgroup(*run, id) + "/memory.current");
    files.push_back(TaskCgroup(*run, id) + "/cpu.stat");
  }
  size_t want = files.size();
  std::vector<double> api_ms, raw_ms;
  for (int r = 0; r < rounds && !g_interrupted; ++r) {
    int64_t s0 = MonotonicNanos();
    for (const std::string& id : ids) TimedStats(a, id, false, true);
    api_ms.push_back(static_cast<double>(MonotonicNanos() - s0) / 1e6);
    raw_ms.push_back(static_cast<double>(TimeRawReads(&files)) / 1e6);
    if (files.size() != want) Fatal(Format("only %zu of %zu cgroup files readable", files.size(), want));
  }
  if (g_interrupted) Fatal("interrupted");
  int64_t s0 = MonotonicNanos();
  int nproc = ScanProc();
  double scan_ms = static_cast<double>(MonotonicNanos() - s0) / 1e6;
  std::string all_api, all_raw;
  for (double v : api_ms) all_api += Format(" %.0f", v);
  for (double v : raw_ms) all_raw += Format(" %.1f", v);
  double api = *std::min_element(api_ms.begin(), api_ms.end());
  double raw = *std::min_element(raw_ms.begin(), raw_ms.end());
  Info("%d TaskStats calls one after the other, ms per round:%s (%.2f ms per call at best)", tasks,
       all_api.c_str(), api / tasks);
  Info("  raw memory.current + cpu.stat of the %d cgroups, ms per round:%s", tasks, all_raw.c_str());
  Info("  one read of /proc/*/stat of all %d processes: %.1f ms", nproc, scan_ms);
  std::string nt = std::to_string(tasks);
  Print(("stats_sample_" + nt + "_tasks").c_str(), api, "ms", ("raw_cgroup_read_" + nt).c_str(), raw);
  t0 = MonotonicNanos();
  Pipeline(a, "DestroyTask", [&] {
    std::vector<std::string> d;
    for (const std::string& id : ids) d.push_back(DestroyRequest(id));
    return d;
  }(), 8);
  for (const std::string& id : ids) a->tasks.erase(std::remove(a->tasks.begin(), a->tasks.end(), id), a->tasks.end());
  Info("destroyed the %d tasks in %.2f s", tasks, static_cast<double>(MonotonicNanos() - t0) / 1e9);
}

int Main(int argc, char** argv) {
  bench::Name() = "cgroup_bench";
  Run run;
  int samples = 100, tasks = 1000, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--outpost" && i + 1 < argc) {
      run.outpost = argv[++i];
    } else if (arg == "--helper" && i + 1 < argc) {
      run.helper = argv[++i];
    } else if (arg == "--samples" && i + 1 < argc) {
      samples = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--tasks" && i + 1 < argc) {
      tasks = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: cgroup_bench [--outpost PATH] [--helper PATH] [--samples N] [--tasks N] [--rounds N]\n");
      return 2;
    }
  }
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Die("binaries", missing);

  // Without usable cgroup v2 (and root) there is nothing to measure.
  auto mi = sys::ReadFile("/proc/self/mountinfo", 4 << 20);
  run.cg_mount = mi.ok() ? cgroup::FindCgroup2Mount(*mi) : "";
  auto ctrl = sys::ReadFile(run.cg_mount + "/cgroup.controllers", 4096);
  if (run.cg_mount.empty() || !ctrl.ok() || ctrl->find("memory") == std::string::npos ||
      ::access((run.cg_mount + "/cgroup.subtree_control").c_str(), W_OK) != 0) {
    std::printf("cgroup_bench: skipped: no usable cgroup v2 here (%s); make bench runs it in the test VM\n",
                run.cg_mount.empty() ? "no cgroup2 mount"
                                     : ("no memory controller or no write access at " + run.cg_mount).c_str());
    return 0;
  }

  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  // About 7 fds per task in each worker (see agent_bench).
  bench::RaiseNofile(static_cast<rlim_t>(tasks) * 16 + 1024);

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-cgroup-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Die("mkdtemp", tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.marker = std::string(kMarkerVar) + "=" + run.dir;
  // Task ids are unique per run: the driver finds a task's strays by
  // OUTPOST_TASK_ID machine-wide (other agents run on the same machine).
  run.tag = "c" + sys::Basename(run.dir).substr(21);
  run.cg_root = run.cg_mount + "/outpost-bench-" + std::to_string(::getpid()) + ".slice";
  g_run = &run;
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("cgroup2 at %s (controllers: %s), %ld CPUs, load %.2f; agent cgroup root %s", run.cg_mount.c_str(),
       ctrl->substr(0, ctrl->find('\n')).c_str(), ::sysconf(_SC_NPROCESSORS_ONLN), load[0], run.cg_root.c_str());

  StartAgent(&run, &run.a, "cgroup", true);
  StartAgent(&run, &run.b, "nocgroup", false);

  double raw_create = 0, raw_remove = 0;
  RawCgroupCost(run.cg_root, 20, &raw_create, &raw_remove);
  Info("raw cgroup cost (this process, p50 of 20): job + task cgroup with memory.max and pids.max created in %.0f us, "
       "removed in %.0f us",
       raw_create, raw_remove);
  int64_t t0 = MonotonicNanos();
  StartLatency(&run, true, samples);
  StartLatency(&run, false, samples);
  Info("start latencies took %.1f s", static_cast<double>(MonotonicNanos() - t0) / 1e9);
  t0 = MonotonicNanos();
  StatsPerTask(&run, samples);
  StatsManyTasks(&run, tasks, rounds);
  Info("stats took %.1f s", static_cast<double>(MonotonicNanos() - t0) / 1e9);

  Cleanup(&run);
  if (run.failed) {
    std::fprintf(stderr, "cgroup_bench: clean-up needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
