// The oci task driver (examples/plugins/oci-driver, docs/oci-driver.md):
// a container's start through the agent against the same container started
// by hand with crun, and the driver's memory idle and with 100 containers
// (docs/benchmarks.md, "OCI task driver").
//
// Setup, in a temp dir: a busybox root file system (busybox-static copied,
// every applet a relative symlink in /bin, plus a copy of test_helper as
// /bin/test_helper for the start signal), the real agent (runtime dir and
// plugins dir on tmpfs when /dev/shm is one, jobs_dir "", an empty hooks
// dir, a cgroup root outside any cgroup2 mount), build/outpost-oci-driver
// and build/example_driver registered with it.
//
// The namespace helper. This host has cgroup v2 without controllers next to
// v1, which crun refuses; so the driver and every hand-run crun live in one
// private mount namespace whose /sys/fs/cgroup is an empty tmpfs (as
// `unshare -m --propagation slave sh -c 'mount -t tmpfs none /sys/fs/cgroup
// && exec "$@"'`; the host's mounts are not touched). The bench forks a
// small helper first thing, which makes that namespace, becomes a subreaper,
// and then runs commands for the bench one at a time over a pipe: spawn the
// driver, run one crun command to its exit (reporting the CLOCK_MONOTONIC
// time just before its fork), stop the driver.
//
// 1. oci_task_start_p50: SubmitJob (on an open API connection) of a job with
//    one oci task `/bin/test_helper stamp-exec /stamp /bin/sleep 1000` in
//    that rootfs -> the task's first instruction in the container (its
//    CLOCK_MONOTONIC in <rootfs>/stamp, the signal every start benchmark
//    uses; the bench waits for it asleep on an inotify watch, not looking
//    every 200 us: on 2 cores that would take CPU from crun in the oci
//    start, while the bench waits for the hand-run crun blocked). Then RemoveJob (kill_signal SIGKILL) and, before the next round,
//    the driver's bundle and crun's state of the container gone.
//    Baseline crun_run_p50: the config.json the driver wrote for the first
//    (warm-up) start, copied to a bundle of the bench's own, started with
//    `crun --root=R --cgroup-manager=disabled run --detach --bundle B ID` by
//    the namespace helper -> the same stamp; then `crun delete --force`.
//    Rounds alternate which of the two goes first; warm-up rounds dropped.
// 2. Memory (VmRSS once settled, bench_util's SettledRssKiB):
//    oci_driver_rss_idle against example_driver_rss_idle: both registered,
//    no task yet; the example driver is the plugin library's own sample
//    driver (plain fork+exec), so the ratio is what the OCI parts add.
//    oci_driver_rss_100_containers against example_driver_rss_100_tasks:
//    100 oci tasks `/bin/sleep 1000` running (2 jobs of 50), then 100 of the
//    same through the example driver (host's sleep). Per container: the
//    driver's growth over idle / 100, against the agent's worker's growth
//    per task for the same 100 oci tasks (oci_driver_rss_per_container,
//    baseline worker_rss_per_oci_task).
// 3. Clean-up, also on failure and SIGINT/SIGTERM: RemoveJob of every job;
//    the driver's bundles dir and both crun state dirs must be empty (a
//    container left is deleted and the run fails); the drivers, the keeper
//    and the namespace helper stopped; a /proc sweep of the run's marker
//    (every task, container and plugin carries OUTPOST_BENCH_RUN=<dir>); the
//    temp dirs removed.
//
//   oci_bench [--outpost P] [--helper P] [--driver P] [--example P] [--starts N] [--containers N]
// Paths default to ../outpost, ../test_helper, ../outpost-oci-driver,
// ../example_driver next to this binary's dir; N starts of each kind
// (default 41, at least 20) after 3 warm-up rounds; 100 containers.
// Output: BENCH lines (docs/benchmarks.md) and detail lines.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <picojson.h>

#include "calls_log.h"

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
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "bench_util.h"
#include "job.pb.h"
#include "plugin.pb.h"
#include "wire/rpc_client.h"

namespace outpost {
namespace {

using bench::g_interrupted;
using bench::Info;
using bench::kAgentService;
using bench::kMarkerVar;

constexpr int kWarmup = 3;
constexpr int kTasksPerJob = 50;  // the job spec allows 64 tasks per job

using bench::Json;

// ---- the namespace helper ----------------------------------------------------
// Requests (one line, words separated by single spaces; no word holds one):
//   spawn LOG ARGV...  -> "<pid>"             started, stdout+stderr to LOG
//   run ARGV...        -> "<t0> <t1> <status>" t0 before the fork, t1 after its exit
//   stop PID           -> "0"                 SIGTERM, reaped (SIGKILL after 10 s)
// EOF: what it spawned gets SIGTERM, every child is reaped, it exits.

[[noreturn]] void NsHelper(int in_fd, int out_fd, const std::string& marker_dir) {
  ::signal(SIGINT, SIG_IGN);  // the bench's Ctrl-C handling closes the pipe instead
  ::signal(SIGTERM, SIG_DFL);
  FILE* in = ::fdopen(in_fd, "r");
  FILE* out = ::fdopen(out_fd, "w");
  auto fail = [&](const char* what) {
    std::fprintf(out, "error %s: %s\n", what, std::strerror(errno));
    std::fflush(out);
    ::_exit(1);
  };
  if (::unshare(CLONE_NEWNS) != 0) fail("unshare(CLONE_NEWNS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) fail("mount --make-rslave /");
  if (::mount("none", "/sys/fs/cgroup", "tmpfs", 0, nullptr) != 0) fail("mount tmpfs /sys/fs/cgroup");
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) fail("PR_SET_CHILD_SUBREAPER");
  ::setenv(kMarkerVar, marker_dir.c_str(), 1);
  std::fprintf(out, "ready\n");
  std::fflush(out);
  std::set<pid_t> spawned;
  auto start = [](const std::vector<std::string>& args, const std::string& log) -> pid_t {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();
      int null = ::open("/dev/null", O_RDWR);
      int o = log.empty() ? null : ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(null, 0), ::dup2(o < 0 ? null : o, 1), ::dup2(o < 0 ? null : o, 2);
      ::signal(SIGINT, SIG_DFL);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  };
  char line[8192];
  while (std::fgets(line, sizeof line, in)) {
    line[std::strcspn(line, "\n")] = '\0';
    std::vector<std::string> w = Split(line, ' ');
    if (w.size() >= 3 && w[0] == "spawn") {
      pid_t pid = start(std::vector<std::string>(w.begin() + 2, w.end()), w[1]);
      if (pid > 0) spawned.insert(pid);
      std::fprintf(out, "%d\n", pid);
    } else if (w.size() >= 2 && w[0] == "run") {
      int64_t t0 = MonotonicNanos();
      pid_t pid = start(std::vector<std::string>(w.begin() + 1, w.end()), "");
      int st = -1;
      while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
      std::fprintf(out, "%lld %lld %d\n", static_cast<long long>(t0), static_cast<long long>(MonotonicNanos()), st);
    } else if (w.size() == 2 && w[0] == "stop") {
      pid_t pid = static_cast<pid_t>(std::atoi(w[1].c_str()));
      if (spawned.count(pid)) {
        ::kill(pid, SIGTERM);
        if (!bench::ReapWithin(pid, 10 * kNanosPerSecond)) ::kill(pid, SIGKILL), bench::ReapWithin(pid, 5 * kNanosPerSecond);
        spawned.erase(pid);
      }
      std::fprintf(out, "0\n");
    } else {
      std::fprintf(out, "error bad request\n");
    }
    std::fflush(out);
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {  // containers' inits after their delete
    }
  }
  for (pid_t p : spawned) ::kill(p, SIGTERM);
  int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;
  for (;;) {
    pid_t r = ::waitpid(-1, nullptr, WNOHANG);
    if (r < 0 && errno == ECHILD) break;
    if (r == 0 && MonotonicNanos() > end) {
      for (pid_t p : spawned) ::kill(p, SIGKILL);
      r = ::waitpid(-1, nullptr, 0);
    }
    if (r == 0) ::usleep(10000);
  }
  ::_exit(0);
}

struct Run {
  std::string outpost, helper, driver, example, crun, busybox;
  std::string dir, rundir, plugins, config, socket, log, marker, tag;
  std::string rootfs, state, driver_root, base_bundle, base_root;
  bench::StampWatch stamps;  // rootfs
  pid_t keeper = 0, worker = 0, ns = 0, driver_pid = 0, example_pid = 0;
  int ns_to = -1;
  FILE* ns_from = nullptr;
  std::set<std::string> jobs, base_containers;
  std::unique_ptr<wire::BlockingClient> client;
  bool failed = false, cleaned = false;
};

// One line from the namespace helper.
std::string NsRead(Run* run) {
  char buf[512];
  if (!run->ns_from || !std::fgets(buf, sizeof buf, run->ns_from)) return "error the namespace helper exited";
  buf[std::strcspn(buf, "\n")] = '\0';
  return buf;
}
std::string NsAsk(Run* run, const std::string& request) {
  std::string l = request + "\n";
  if (run->ns_to < 0 || !sys::WriteAll(run->ns_to, l.data(), l.size(), "ns helper").ok()) return "error write";
  return NsRead(run);
}

struct CrunRun {
  int64_t t0 = 0, t1 = 0;
  bool ok = false;
};
CrunRun Crun(Run* run, const std::string& root, const std::string& args) {
  std::string r = NsAsk(run, "run " + run->crun + " --root=" + root + " --cgroup-manager=disabled " + args);
  CrunRun out;
  long long t0 = 0, t1 = 0;
  int st = -1;
  if (std::sscanf(r.c_str(), "%lld %lld %d", &t0, &t1, &st) == 3) {
    out.t0 = t0, out.t1 = t1, out.ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return out;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

void Cleanup(Run* run) {
  if (run->cleaned) return;
  run->cleaned = true;
  run->client.reset();
  if (run->keeper > 0 && !bench::RemoveJobsForCleanup(run->socket, &run->jobs, 60 * kNanosPerSecond)) {
    run->failed = true;
  }
  // The driver deletes a container at its task's removal: nothing of them
  // may be left in its bundles dir or crun's state dir.
  if (!run->state.empty()) {
    for (int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;
         !ListDir(run->state + "/bundles").empty() && MonotonicNanos() < end;) {
      ::usleep(5000);
    }
    std::vector<std::string> left = ListDir(run->state + "/bundles"), crun_left = ListDir(run->driver_root);
    if (!left.empty() || !crun_left.empty()) {
      std::fprintf(stderr, "oci_bench: after the removal of every job, %zu bundles and %zu crun containers left by "
                   "the driver\n", left.size(), crun_left.size());
      run->failed = true;
      for (const std::string& id : crun_left) (void)Crun(run, run->driver_root, "delete --force " + id);
    }
  }
  for (const std::string& id : run->base_containers) (void)Crun(run, run->base_root, "delete --force " + id);
  run->base_containers.clear();
  if (!run->base_root.empty() && !ListDir(run->base_root).empty()) {
    std::fprintf(stderr, "oci_bench: crun containers left in %s\n", run->base_root.c_str());
    run->failed = true;
  }
  if (run->driver_pid > 0) NsAsk(run, Format("stop %d", run->driver_pid)), run->driver_pid = 0;
  if (run->example_pid > 0) {
    ::kill(run->example_pid, SIGTERM);
    if (!bench::ReapWithin(run->example_pid, 10 * kNanosPerSecond)) {
      ::kill(run->example_pid, SIGKILL), bench::ReapWithin(run->example_pid, 5 * kNanosPerSecond), run->failed = true;
    }
    run->example_pid = 0;
  }
  if (!bench::StopKeeper(&run->keeper)) run->failed = true;
  bench::KillOwnWorker(run->worker, run->config);
  if (run->ns_to >= 0) ::close(run->ns_to), run->ns_to = -1;  // EOF: the helper stops what is left and exits
  if (run->ns_from) std::fclose(run->ns_from), run->ns_from = nullptr;
  if (run->ns > 0 && !bench::ReapWithin(run->ns, 20 * kNanosPerSecond)) {
    ::kill(run->ns, SIGKILL), bench::ReapWithin(run->ns, 5 * kNanosPerSecond), run->failed = true;
  }
  if (!bench::SweepMarker(run->marker)) run->failed = true;
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) {
    bench::RemoveTree(run->dir);
    struct stat st;
    if (::lstat(run->dir.c_str(), &st) == 0) {
      std::fprintf(stderr, "oci_bench: %s could not be removed\n", run->dir.c_str());
      run->failed = true;
    }
  }
}

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "oci_bench: %s\n", what.c_str());
  if (!run->log.empty()) bench::ReportAgentLog(run->log, sys::Dirname(run->dir) + "/outpost-oci-bench-failed.log");
  auto dl = sys::ReadFile(run->dir + "/driver.log", 1 << 16);
  if (dl.ok() && !dl->empty()) std::fprintf(stderr, "oci_bench: driver log:\n%s\n", dl->c_str());
  Cleanup(run);
  std::exit(1);
}

void CheckInterrupt(Run* run) {
  if (g_interrupted) Fatal(run, "interrupted");
}

void CopyFile(Run* run, const std::string& from, const std::string& to, mode_t mode) {
  auto data = sys::ReadFile(from, 256 << 20);
  if (!data.ok()) Fatal(run, "read " + from + ": " + data.error().message());
  Status st = sys::WriteFileAtomic(to, *data, mode);
  if (!st.ok()) Fatal(run, "write " + to + ": " + st.error().message());
}

void MakeRootfs(Run* run) {
  const std::string& r = run->rootfs;
  for (const std::string& d : {r, r + "/bin", r + "/etc", r + "/tmp"}) {
    if (::mkdir(d.c_str(), 0755) != 0) Fatal(run, "mkdir " + d + ": " + std::strerror(errno));
  }
  CopyFile(run, run->busybox, r + "/bin/busybox", 0755);
  CopyFile(run, run->helper, r + "/bin/test_helper", 0755);
  FILE* p = ::popen((run->busybox + " --list").c_str(), "r");
  if (!p) Fatal(run, "popen busybox --list");
  char name[256];
  int applets = 0;
  while (std::fgets(name, sizeof name, p)) {
    name[std::strcspn(name, "\n")] = '\0';
    if (!*name || !std::strcmp(name, "busybox")) continue;
    std::string link = r + "/bin/" + name;
    if (::symlink("busybox", link.c_str()) != 0 && errno != EEXIST) Fatal(run, "symlink " + link);
    ++applets;
  }
  if (::pclose(p) != 0 || applets == 0) Fatal(run, run->busybox + " --list failed");
  for (const char* a : {"sh", "sleep"}) {
    if (::access((r + "/bin/" + a).c_str(), X_OK) != 0) Fatal(run, std::string("no ") + a + " applet in " + run->busybox);
  }
  Status st = sys::WriteFileAtomic(r + "/etc/passwd", "root:x:0:0:root:/:/bin/sh\n", 0644);
  if (!st.ok()) Fatal(run, st.error().message());
  Info("rootfs %s: %s with %d applets, test_helper", r.c_str(), run->busybox.c_str(), applets);
}

// True once ListPlugins shows the TaskDriver `name` with a connected instance.
bool Registered(Run* run, const std::string& name) {
  auto reply = bench::CallOnce(run->socket, "ListPlugins", "", kNanosPerSecond);
  if (!reply.ok()) return false;
  PbOwned<outpost_v1_ListPluginsResponse> resp(outpost_v1_ListPluginsResponse_fields);
  if (!resp.Decode(*reply, "ListPluginsResponse").ok()) return false;
  for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
    const outpost_v1_PluginEntry& e = resp->plugins[i];
    if (PbString(e.type) != "TaskDriver" || PbString(e.name) != name) continue;
    for (pb_size_t j = 0; j < e.instances_count; ++j) {
      if (e.instances[j].connected) return true;
    }
  }
  return false;
}
void WaitRegistered(Run* run, const std::string& name) {
  for (int64_t end = MonotonicNanos() + 20 * kNanosPerSecond; !Registered(run, name); ::usleep(5000)) {
    CheckInterrupt(run);
    if (MonotonicNanos() > end) Fatal(run, "driver " + name + " not registered within 20 s");
  }
}

Result<std::string> Call(Run* run, const char* method, const std::string& payload) {
  return run->client->Call(kAgentService, method, payload, 120 * kNanosPerSecond);
}

std::string TaskJson(const Run& run, const std::string& name, const std::string& driver,
                     const std::vector<std::string>& cmd) {
  std::string args;
  for (size_t i = 1; i < cmd.size(); ++i) args += (args.empty() ? "" : ", ") + Json(cmd[i]);
  std::string t = "{\"name\": " + Json(name) + ", \"driver\": " + Json(driver) + ", \"command\": " + Json(cmd[0]) +
                  ", \"args\": [" + args + "], \"env\": {" + Json(kMarkerVar) + ": " + Json(run.dir) +
                  "}, \"kill_signal\": \"SIGKILL\", \"restart\": {\"policy\": \"never\"}";
  if (driver == "oci") t += ", \"config\": {\"rootfs\": " + Json(run.rootfs) + "}";
  return t + "}";
}

// InspectJob of id: how many of its tasks run with a pid.
int RunningTasks(Run* run, const std::string& id) {
  auto reply = Call(run, "InspectJob", bench::JobIdRequest(id));
  if (!reply.ok()) Fatal(run, "InspectJob " + id + ": " + reply.error().message());
  PbOwned<outpost_v1_JobInfo> info(outpost_v1_JobInfo_fields);
  if (!info.Decode(*reply, "JobInfo").ok()) Fatal(run, "bad JobInfo");
  int n = 0;
  for (pb_size_t i = 0; i < info->tasks_count; ++i) {
    n += PbString(info->tasks[i].state) == "running" && info->tasks[i].pid > 0;
  }
  return n;
}

void RemoveJob(Run* run, const std::string& id) {
  auto gone = Call(run, "RemoveJob", bench::JobIdRequest(id));
  if (!gone.ok()) Fatal(run, "RemoveJob " + id + ": " + gone.error().message());
  run->jobs.erase(id);
}

// Until the driver's bundle of container cid and crun's state of it are gone.
void WaitContainerGone(Run* run, const std::string& cid) {
  struct stat st;
  for (int64_t end = MonotonicNanos() + 20 * kNanosPerSecond;
       ::lstat((run->state + "/bundles/" + cid).c_str(), &st) == 0 ||
       ::lstat((run->driver_root + "/" + cid).c_str(), &st) == 0;
       ::usleep(1000)) {
    if (MonotonicNanos() > end) Fatal(run, "container " + cid + " still there 20 s after RemoveJob");
  }
}

const char* kStampInside = "/stamp";

// One oci task's start through the agent: SubmitJob -> its first
// instruction in the container. The first one's config.json becomes the
// baseline's bundle.
int64_t OciStart(Run* run, int seq) {
  std::string id = Format("o%s-%03d", run->tag.c_str(), seq), cid = id + ".t";
  std::string stamp = run->rootfs + kStampInside;
  ::unlink(stamp.c_str());
  run->stamps.Drain();
  std::string req = bench::SubmitJobRequest(
      "{\"id\": " + Json(id) + ", \"tasks\": [" +
      TaskJson(*run, "t", "oci", {"/bin/test_helper", "stamp-exec", kStampInside, "/bin/sleep", "1000"}) + "]}");
  run->jobs.insert(id);
  int64_t t0 = MonotonicNanos();
  auto reply = Call(run, "SubmitJob", req);
  if (!reply.ok()) Fatal(run, "SubmitJob " + id + ": " + reply.error().message());
  int64_t ts = run->stamps.Wait(stamp, MonotonicNanos() + 30 * kNanosPerSecond);
  if (ts < 0) Fatal(run, "job " + id + ": the container did not write its timestamp within 30 s");
  if (run->base_bundle.empty()) {
    run->base_bundle = run->dir + "/base-bundle";
    if (::mkdir(run->base_bundle.c_str(), 0700) != 0) Fatal(run, "mkdir " + run->base_bundle);
    CopyFile(run, run->state + "/bundles/" + cid + "/config.json", run->base_bundle + "/config.json", 0600);
    // The container runs before crun start returns, so before the driver
    // answers StartTask: the agent lists the task running a little later.
    for (int64_t end = MonotonicNanos() + 10 * kNanosPerSecond; RunningTasks(run, id) != 1; ::usleep(1000)) {
      if (MonotonicNanos() > end) Fatal(run, "job " + id + ": its task is not listed running 10 s after its start");
    }
  }
  RemoveJob(run, id);
  WaitContainerGone(run, cid);
  return ts - t0;
}

// The same bundle by hand: crun run --detach -> the same stamp.
int64_t CrunStart(Run* run, int seq, std::vector<int64_t>* exits) {
  std::string cid = Format("b%s-%03d", run->tag.c_str(), seq);
  std::string stamp = run->rootfs + kStampInside;
  ::unlink(stamp.c_str());
  run->stamps.Drain();
  run->base_containers.insert(cid);
  CrunRun r = Crun(run, run->base_root, "run --detach --bundle " + run->base_bundle + " " + cid);
  if (!r.ok) Fatal(run, "crun run --detach " + cid + " failed (as the namespace helper ran it)");
  int64_t ts = run->stamps.Wait(stamp, MonotonicNanos() + 30 * kNanosPerSecond);
  if (ts < 0) Fatal(run, "crun container " + cid + " did not write its timestamp within 30 s");
  exits->push_back(r.t1 - r.t0);
  if (!Crun(run, run->base_root, "delete --force " + cid).ok) Fatal(run, "crun delete --force " + cid + " failed");
  run->base_containers.erase(cid);
  return ts - r.t0;
}

// n tasks `cmd` through driver, in jobs of kTasksPerJob, until all run.
void StartMany(Run* run, const std::string& driver, int n, const std::vector<std::string>& cmd) {
  int64_t t0 = MonotonicNanos();
  std::vector<std::string> ids;
  for (int j = 0; j * kTasksPerJob < n; ++j) {
    std::string id = Format("m%s-%s-%d", run->tag.c_str(), driver.c_str(), j), tasks;
    for (int t = j * kTasksPerJob; t < std::min(n, (j + 1) * kTasksPerJob); ++t) {
      tasks += (tasks.empty() ? "" : ", ") + TaskJson(*run, Format("t%03d", t), driver, cmd);
    }
    run->jobs.insert(id);
    auto reply = Call(run, "SubmitJob", bench::SubmitJobRequest("{\"id\": " + Json(id) + ", \"tasks\": [" + tasks + "]}"));
    if (!reply.ok()) Fatal(run, "SubmitJob " + id + ": " + reply.error().message());
    ids.push_back(id);
  }
  int running = 0;
  for (int64_t end = MonotonicNanos() + 120 * kNanosPerSecond;; ::usleep(20000)) {
    CheckInterrupt(run);
    running = 0;
    for (const std::string& id : ids) running += RunningTasks(run, id);
    if (running == n) break;
    if (MonotonicNanos() > end) Fatal(run, Format("%d of %d %s tasks running after 120 s", running, n, driver.c_str()));
  }
  Info("%d %s tasks running after %.2f s (%zu jobs)", n, driver.c_str(),
       static_cast<double>(MonotonicNanos() - t0) / kNanosPerSecond, ids.size());
}

double Median(const std::vector<int64_t>& v) { return bench::PercentileMicros(v, 0.5); }

int Main(int argc, char** argv) {
  bench::Name() = "oci_bench";
  Run run;
  int starts = 41, containers = 100;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) run.outpost = argv[++i];
    else if (a == "--helper" && i + 1 < argc) run.helper = argv[++i];
    else if (a == "--driver" && i + 1 < argc) run.driver = argv[++i];
    else if (a == "--example" && i + 1 < argc) run.example = argv[++i];
    else if (a == "--starts" && i + 1 < argc) starts = std::atoi(argv[++i]);
    else if (a == "--containers" && i + 1 < argc) containers = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: oci_bench [--outpost|--helper|--driver|--example P] [--starts N] [--containers N]\n");
      return 2;
    }
  }
  starts = std::max(starts, 20), containers = std::max(containers, 1);
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  std::string build = sys::Dirname(run.outpost);
  if (run.driver.empty()) run.driver = build + "/outpost-oci-driver";
  if (run.example.empty()) run.example = build + "/example_driver";
  if (::access(run.driver.c_str(), X_OK) != 0) Fatal(&run, run.driver + " not found (make oci-driver)");
  if (::access(run.example.c_str(), X_OK) != 0) Fatal(&run, run.example + " not found (make build/example_driver)");
  for (auto [name, path] : {std::make_pair("crun", &run.crun), std::make_pair("busybox", &run.busybox)}) {
    for (const char* d : {"/usr/bin/", "/bin/", "/usr/sbin/", "/usr/local/bin/"}) {
      if (path->empty() && ::access((std::string(d) + name).c_str(), X_OK) == 0) *path = std::string(d) + name;
    }
    if (path->empty()) Fatal(&run, std::string(name) + " not found (tools/deps.sh bench)");
  }
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-oci-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.tag = sys::Basename(run.dir).substr(18);
  run.marker = std::string(kMarkerVar) + "=" + run.dir;

  // The namespace helper first, while this process is small.
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) Fatal(&run, "pipe2");
  run.ns = ::fork();
  if (run.ns < 0) Fatal(&run, "fork");
  if (run.ns == 0) {
    ::close(to[1]), ::close(from[0]);
    NsHelper(to[0], from[1], run.dir);
  }
  ::close(to[0]), ::close(from[1]);
  run.ns_to = to[1];
  run.ns_from = ::fdopen(from[0], "r");
  std::string ready = NsRead(&run);  // "ready" once its namespace is made
  if (ready != "ready") Fatal(&run, "namespace helper: " + ready);

  run.rootfs = run.dir + "/rootfs";
  MakeRootfs(&run);
  std::string watch = run.stamps.Watch(run.rootfs);
  if (!watch.empty()) Fatal(&run, watch);
  run.state = run.dir + "/oci";
  run.driver_root = run.state + "/crun";
  run.base_root = run.dir + "/crun-base";
  if (::mkdir(run.base_root.c_str(), 0700) != 0 || ::mkdir((run.dir + "/hooks.d").c_str(), 0700) != 0) {
    Fatal(&run, std::string("mkdir: ") + std::strerror(errno));
  }
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.plugins = run.rundir + "/plugins";
  if (::mkdir(run.plugins.c_str(), 0700) != 0) Fatal(&run, "mkdir " + run.plugins);
  run.config = run.dir + "/agent.json";
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + Json(run.dir + "/state") + ", \"runtime_dir\": " + Json(run.rundir) +
                       ", \"plugins_dir\": " + Json(run.plugins) + ", \"log_file\": " + Json(run.log) +
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"api_idle_timeout\": \"10m\", "
                       "\"hooks_dirs\": [" + Json(run.dir + "/hooks.d") + "], \"cgroup_root\": " +
                       Json(run.dir + "/no-cgroup") + "}\n";
  Status wst = sys::WriteFileAtomic(run.config, config, 0600);
  if (!wst.ok()) Fatal(&run, wst.error().message());
  Info("scratch dir %s, runtime dir %s; %s, %s", run.dir.c_str(), run.rundir.c_str(), run.crun.c_str(),
       run.driver.c_str());
  run.keeper = bench::SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  if (run.keeper < 0) Fatal(&run, "fork failed");
  run.worker = bench::WaitForWorker(run.socket, 30 * kNanosPerSecond);
  if (run.worker <= 0) Fatal(&run, "the agent did not answer Status within 30 s");
  auto client = wire::BlockingClient::Connect(run.socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(&run, "connect: " + client.error().message());
  run.client = std::make_unique<wire::BlockingClient>(std::move(*client));

  std::string pid = NsAsk(&run, "spawn " + run.dir + "/driver.log " + run.driver + " --plugins-dir " + run.plugins +
                                    " --state-dir " + run.state);
  run.driver_pid = static_cast<pid_t>(std::atoi(pid.c_str()));
  if (run.driver_pid <= 0) Fatal(&run, "spawn the driver: " + pid);
  ::setenv(kMarkerVar, run.dir.c_str(), 1);
  run.example_pid = bench::SpawnDetached({run.example, run.plugins}, run.dir + "/example.log");
  ::unsetenv(kMarkerVar);
  if (run.example_pid < 0) Fatal(&run, "fork failed");
  WaitRegistered(&run, "oci");
  WaitRegistered(&run, "example");

  // Idle memory, before any task.
  const long oci_idle = bench::SettledRssKiB(run.driver_pid), ex_idle = bench::SettledRssKiB(run.example_pid);
  bench::DescribeMemory("oci driver, idle", run.driver_pid);
  bench::DescribeMemory("example driver, idle", run.example_pid);

  // Starts, alternating which goes first.
  std::vector<int64_t> oci, base, crun_exit, ratio_permille;
  for (int r = 0; r < kWarmup + starts; ++r) {
    CheckInterrupt(&run);
    int64_t o, b;
    std::vector<int64_t> exits;
    if (r % 2 == 0 || run.base_bundle.empty()) {
      o = OciStart(&run, r), b = CrunStart(&run, r, &exits);
    } else {
      b = CrunStart(&run, r, &exits), o = OciStart(&run, r);
    }
    if (r < kWarmup) continue;
    oci.push_back(o), base.push_back(b), crun_exit.push_back(exits[0]);
    ratio_permille.push_back(b > 0 ? o * 1000 / b : 0);  // the same round's pair: less exposed to load swings
  }
  const long oci_after_starts = bench::SettledRssKiB(run.driver_pid);

  // 100 containers; the worker's growth for the same tasks.
  const long worker_idle = bench::SettledRssKiB(run.worker, 3000);
  StartMany(&run, "oci", containers, {"/bin/sleep", "1000"});
  const long oci_full = bench::SettledRssKiB(run.driver_pid), worker_full = bench::SettledRssKiB(run.worker, 3000);
  bench::DescribeMemory(Format("oci driver, %d containers", containers).c_str(), run.driver_pid);
  if (ListDir(run.driver_root).size() != static_cast<size_t>(containers)) {
    Fatal(&run, Format("%zu containers in crun's state dir, %d expected", ListDir(run.driver_root).size(), containers));
  }
  std::string sleep_bin = ::access("/bin/sleep", X_OK) == 0 ? "/bin/sleep" : "/usr/bin/sleep";
  StartMany(&run, "example", containers, {sleep_bin, "1000"});
  const long ex_full = bench::SettledRssKiB(run.example_pid);
  bench::DescribeMemory(Format("example driver, %d tasks", containers).c_str(), run.example_pid);

  const double o50 = Median(oci), b50 = Median(base);
  Info("%zu starts of each (+%d warm-up), alternating which goes first; SubmitJob -> first instruction in the "
       "container: p50 %.1f us, p90 %.1f us; crun run --detach -> the same: p50 %.1f us, p90 %.1f us; crun run "
       "--detach to its exit: p50 %.1f us; difference %.1f us",
       oci.size(), kWarmup, o50, bench::PercentileMicros(oci, 0.9), b50, bench::PercentileMicros(base, 0.9),
       Median(crun_exit), o50 - b50);
  Info("median of the per-round ratios oci start / crun run: %.2f (p10 %.2f, p90 %.2f)",
       Median(ratio_permille), bench::PercentileMicros(ratio_permille, 0.1),
       bench::PercentileMicros(ratio_permille, 0.9));
  const double per_ctr = static_cast<double>(oci_full - oci_idle) / containers;
  const double per_worker = static_cast<double>(worker_full - worker_idle) / containers;
  const double per_ex = static_cast<double>(ex_full - ex_idle) / containers;
  Info("VmRSS KiB: oci driver idle %ld, after the %d starts %ld, with %d containers %ld (%.1f per container); "
       "example driver idle %ld, with %d tasks %ld (%.1f per task); agent worker %ld -> %ld (%.1f per oci task)",
       oci_idle, kWarmup + starts, oci_after_starts, containers, oci_full, per_ctr, ex_idle, containers, ex_full,
       per_ex, worker_idle, worker_full, per_worker);
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));
  bench::Print("oci_task_start_p50", o50, "us", "crun_run_p50", b50);
  bench::Print("oci_task_start_p90", bench::PercentileMicros(oci, 0.9), "us", "crun_run_p90",
               bench::PercentileMicros(base, 0.9));
  bench::Print("oci_driver_rss_idle", static_cast<double>(oci_idle), "KiB", "example_driver_rss_idle",
               static_cast<double>(ex_idle));
  bench::Print(Format("oci_driver_rss_%d_containers", containers).c_str(), static_cast<double>(oci_full), "KiB",
               Format("example_driver_rss_%d_tasks", containers).c_str(), static_cast<double>(ex_full));
  bench::Print("oci_driver_rss_per_container", per_ctr, "KiB", "worker_rss_per_oci_task", per_worker);
  Cleanup(&run);
  if (run.failed) {
    std::fprintf(stderr, "oci_bench: clean-up found leftovers or needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
