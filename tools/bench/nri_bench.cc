// The cost of NRI plugins (docs/nri.md) on a task's start, and of a
// plugin's Synchronize with 1,000 running tasks, through the real agent
// binary and real external plugins (build/test_nri_plugin, the C++ plugin
// library's test plugin).
//
// Task start. Four agents with NRI on (own socket, plugin_dir "": none
// launched), started once and kept for every round: (a) no plugin connected
// (the task layer then skips NRI); (b) one plugin subscribed to
// CreateContainer, adjusting nothing; (c) four such plugins (indices
// 10..13); (d) four plugins each adjusting one field (-adjust-env
// NRI_BENCH_Ki=v). Each round starts one job per agent and takes one
// round-trip sample (below), in an order that rotates each round. The
// figure: SubmitJob sent (on an open API connection) -> the task's first
// instruction (`test_helper stamp-exec FILE test_helper sleep 1000`, as in
// hook_bench). CreateContainer goes through every subscribed plugin in turn
// before the task's process exists; notifications are queued and do not hold
// the start. Checked outside the timing: InspectJob (running, a pid); in (d)
// the task's environment holds all four NRI_BENCH_K*. The job is then
// removed and the worker left with no child.
//
// The target ("<= 4 plugin round trips + 100 us over no plugins"): a plugin
// round trip is measured in this process, same rounds: an nri::Adaptation
// (the agent's runtime side) on a socket of its own with one more
// test_nri_plugin subscribed to CreateContainer, adjusting nothing;
// Adaptation::CreateContainer of the bench's task as the agent builds it
// (nri::ToContainer), timed to its callback, each call after the plugin was
// idle for 2 ms (as between two starts in the agent: a start takes about
// 2 ms here); a sample is the median of 4.
//   nri_task_start_budget_4 = p50(a) + 4 x p50(round trip) + 100 us
// and p50(c) must stay under it (ratio <= 1, tools/bench/targets.txt). An
// info line: the same through a second adaptation with 4 plugins (4
// processes in turn, as in (c)), against (c) - (a).
//
// Synchronize. Two more agents: one with 1,000 running tasks (20 jobs of 50
// `test_helper sleep 1000`, started before any plugin connects), one with
// none; rounds alternate between them. A plugin (subscribed to
// RunPodSandbox only: nothing else reaches it) starts with -log FILE, which
// the bench follows with inotify for the "Configure ..." and "Synchronize
// pods=N containers=M" lines (written as each request arrives). The figure:
// process start -> Synchronize received (exec, connect, registration,
// Configure, the agent listing its tasks and sending them). M is checked,
// the agent must list the plugin "ready" (ListNriPlugins), then the plugin
// is stopped and the agent must list none open before the next round.
//
// Everything lives in a temporary dir (runtime dirs on tmpfs); tasks and
// plugins carry OUTPOST_BENCH_RUN=<that dir>. Clean-up, also on failure and
// SIGINT/SIGTERM: plugins, RemoveJob, keepers, a /proc sweep for leftovers.
//
//   nri_bench [--outpost P] [--helper P] [--plugin P] [--starts N] [--syncs N]
// Paths default to ../outpost, ../test_helper, ../test_nri_plugin next to this
// binary's dir. N timed rounds (default 121; syncs 9) after 3 (syncs 1) warm-up.
// Output: BENCH lines (docs/benchmarks.md) and detail lines.
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
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

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "bench_util.h"
#include "job.pb.h"
#include "nri/adaptation.h"
#include "nri/convert.h"
#include "nri_status.pb.h"
#include "wire/rpc_client.h"

namespace outpost {
namespace {

using bench::g_interrupted;
using bench::Info;
using bench::kAgentService;
using bench::kMarkerVar;

constexpr int kWarmup = 3;
constexpr int kRttCalls = 4;      // per round: as many as plugins in (c)
constexpr int64_t kRttIdleNanos = 2 * kNanosPerMilli;  // the plugin idle before each call
constexpr int kSyncJobs = 20;     // x kSyncTasks = 1,000 running tasks
constexpr int kSyncTasks = 50;    // the job spec allows 64 tasks per job
constexpr double kSlackMicros = 100;

struct Agent {
  std::string name, dir, rundir, config, socket, log, nri;
  pid_t keeper = 0, worker = 0;
  std::set<std::string> jobs;
  std::unique_ptr<wire::BlockingClient> client;
};

class RttHost : public nri::Host {  // no pods, no containers, nothing applied
 public:
  void ListState(std::vector<nri::PodSandbox>*, std::vector<nri::Container>*) override {}
  Status ApplyUpdate(const std::string&, const nri::ContainerUpdate&) override { return OkStatus(); }
  void Evict(const std::string&, const nri::ContainerEviction&) override {}
  void PluginsChanged() override {}
};

struct Run {
  std::string outpost, helper, plugin, dir, tag, marker;
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<pid_t> plugins;  // every plugin started, for clean-up
  std::unique_ptr<Loop> loop;
  RttHost host;
  std::unique_ptr<nri::Adaptation> rtt[2];  // with 1 plugin, with 4
  bool failed = false, cleaned = false;
};

void Cleanup(Run* run) {
  if (run->cleaned) return;
  run->cleaned = true;
  for (pid_t p : run->plugins) {
    if (::kill(p, SIGTERM) == 0 && !bench::ReapWithin(p, 5 * kNanosPerSecond)) {
      ::kill(p, SIGKILL), bench::ReapWithin(p, 2 * kNanosPerSecond), run->failed = true;
    }
  }
  for (auto& r : run->rtt) r ? r->Stop() : void();
  run->rtt[0].reset(), run->rtt[1].reset(), run->loop.reset();
  for (auto& a : run->agents) {
    a->client.reset();
    if (a->keeper > 0 && !bench::RemoveJobsForCleanup(a->socket, &a->jobs, 60 * kNanosPerSecond)) run->failed = true;
    if (!bench::StopKeeper(&a->keeper)) run->failed = true;
    bench::KillOwnWorker(a->worker, a->config);
    if (!a->rundir.empty() && a->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
      bench::RemoveTree(a->rundir);
    }
  }
  if (!bench::SweepMarker(run->marker)) run->failed = true;
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

[[noreturn]] void Fatal(Run* run, const std::string& what, const Agent* agent = nullptr) {
  std::fprintf(stderr, "nri_bench: %s\n", what.c_str());
  if (agent) bench::ReportAgentLog(agent->log, sys::Dirname(run->dir) + "/outpost-nri-bench-failed.log");
  Cleanup(run);
  std::exit(1);
}

using bench::Json;

void CheckInterrupt(Run* run) { if (g_interrupted) Fatal(run, "interrupted"); }

// A plugin process, marked for the sweep; stderr to a file in the scratch dir.
pid_t StartPlugin(Run* run, const std::vector<std::string>& args, const std::string& stderr_path) {
  std::vector<std::string> argv = {run->plugin};
  argv.insert(argv.end(), args.begin(), args.end());
  ::setenv(kMarkerVar, run->dir.c_str(), 1);
  pid_t pid = bench::SpawnDetached(argv, stderr_path);
  ::unsetenv(kMarkerVar);
  if (pid < 0) Fatal(run, "fork failed");
  run->plugins.push_back(pid);
  return pid;
}

void StopPlugin(Run* run, pid_t pid) {
  ::kill(pid, SIGTERM);
  if (!bench::ReapWithin(pid, 10 * kNanosPerSecond)) Fatal(run, Format("plugin %d did not stop on SIGTERM", pid));
  run->plugins.erase(std::remove(run->plugins.begin(), run->plugins.end(), pid), run->plugins.end());
}

Agent* StartAgent(Run* run, const std::string& name) {
  auto a = std::make_unique<Agent>();
  a->name = name;
  a->dir = run->dir + "/" + name;
  for (const char* d : {"", "/hooks.d", "/hooks"}) {
    if (::mkdir((a->dir + d).c_str(), 0700) != 0) Fatal(run, "mkdir " + a->dir + d + ": " + std::strerror(errno));
  }
  a->rundir = bench::MakeRuntimeDir(a->dir);
  a->socket = a->rundir + "/outpost.sock";
  a->nri = a->rundir + "/nri.sock";
  a->config = a->dir + "/config.json";
  a->log = a->dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + Json(a->dir + "/state") + ", \"runtime_dir\": " + Json(a->rundir) +
                       ", \"log_file\": " + Json(a->log) +
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"cgroup_root\": " +
                       Json(a->dir + "/no-cgroup") + ", \"hooks_dirs\": [" + Json(a->dir + "/hooks.d") +
                       "], \"hook_path\": " + Json(a->dir + "/hooks") + ", \"nri\": {\"socket\": " + Json(a->nri) +
                       ", \"plugin_dir\": \"\", \"plugin_config_dir\": \"\"}}\n";
  Status wst = sys::WriteFileAtomic(a->config, config, 0600);
  if (!wst.ok()) Fatal(run, wst.error().message());
  Agent* raw = a.get();
  run->agents.push_back(std::move(a));
  raw->keeper = bench::SpawnDetached({run->outpost, "agent", "--config", raw->config}, raw->dir + "/agent.stderr");
  if (raw->keeper < 0) Fatal(run, "fork failed");
  raw->worker = bench::WaitForWorker(raw->socket, 30 * kNanosPerSecond);
  if (raw->worker <= 0) Fatal(run, "agent " + name + " did not answer Status within 30 s", raw);
  auto client = wire::BlockingClient::Connect(raw->socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(run, "connect " + name + ": " + client.error().message(), raw);
  raw->client = std::make_unique<wire::BlockingClient>(std::move(*client));
  return raw;
}

Result<std::string> Call(Agent* a, const char* method, const std::string& payload) {
  return a->client->Call(kAgentService, method, payload, 60 * kNanosPerSecond);
}

struct Listed {  // one of the agent's plugins
  std::string name, state;
  uint64_t requests;
};
std::vector<Listed> ListPlugins(Run* run, Agent* a) {
  auto reply = Call(a, "ListNriPlugins", "");
  if (!reply.ok()) Fatal(run, "ListNriPlugins: " + reply.error().message(), a);
  PbOwned<outpost_v1_ListNriPluginsResponse> resp(outpost_v1_ListNriPluginsResponse_fields);
  if (!resp.Decode(*reply, "ListNriPluginsResponse").ok()) Fatal(run, "bad ListNriPluginsResponse", a);
  std::vector<Listed> out;
  for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
    out.push_back({PbString(resp->plugins[i].name), PbString(resp->plugins[i].state), resp->plugins[i].requests});
  }
  return out;
}

// Waits until the agent lists exactly n plugins that are not closed, all
// ready (n = 0: none left; closed ones stay listed a while, with why).
void WaitPlugins(Run* run, Agent* a, size_t n) {
  int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;
  for (;;) {
    CheckInterrupt(run);
    size_t open = 0, ready = 0;
    for (const Listed& p : ListPlugins(run, a)) {
      open += p.state != "closed";
      ready += p.state == "ready";
    }
    if (open == n && ready == n) return;
    if (MonotonicNanos() > end) Fatal(run, Format("%s: %zu plugins open, %zu ready", a->name.c_str(), open, ready), a);
    ::usleep(2000);
  }
}

bool WorkerBusy(const Agent& a) {  // a child now (false when the kernel does not tell)
  auto text = sys::ReadFile(Format("/proc/%d/task/%d/children", a.worker, a.worker), 4096);
  return text.ok() && text->find_first_not_of(" \n") != std::string::npos;
}

std::string TaskJson(const Run& run, const std::string& name, const std::vector<std::string>& args) {
  std::string a;
  for (const std::string& s : args) a += (a.empty() ? "" : ", ") + Json(s);
  return "{\"name\": " + Json(name) + ", \"command\": " + Json(run.helper) + ", \"args\": [" + a + "], \"env\": {" +
         Json(kMarkerVar) + ": " + Json(run.dir) + "}, \"restart\": {\"policy\": \"never\"}}";
}

// InspectJob of id: how many of its tasks run with a pid; *pid: the first one's.
int RunningTasks(Run* run, Agent* a, const std::string& id, pid_t* pid = nullptr) {
  auto reply = Call(a, "InspectJob", bench::JobIdRequest(id));
  if (!reply.ok()) Fatal(run, "InspectJob " + id + ": " + reply.error().message(), a);
  PbOwned<outpost_v1_JobInfo> info(outpost_v1_JobInfo_fields);
  if (!info.Decode(*reply, "JobInfo").ok()) Fatal(run, "bad JobInfo", a);
  int n = 0;
  for (pb_size_t i = 0; i < info->tasks_count; ++i) {
    n += PbString(info->tasks[i].state) == "running" && info->tasks[i].pid > 0;
  }
  if (pid && info->tasks_count > 0) *pid = info->tasks[0].pid;
  return n;
}

// One start on agent a, timed (SubmitJob -> first instruction), checked, removed.
int64_t OneStart(Run* run, Agent* a, const std::string& id, int adjusted_envs) {
  const std::string stamp = a->dir + "/stamp";
  ::unlink(stamp.c_str());
  std::string task = TaskJson(*run, "t", {"stamp-exec", stamp, run->helper, "sleep", "1000"});
  std::string req = bench::SubmitJobRequest("{\"id\": " + Json(id) + ", \"tasks\": [" + task + "]}");
  int64_t t0 = MonotonicNanos();
  auto reply = Call(a, "SubmitJob", req);
  if (!reply.ok()) Fatal(run, "SubmitJob " + id + ": " + reply.error().message(), a);
  a->jobs.insert(id);
  int64_t ts = bench::WaitStamp(stamp, 30 * kNanosPerSecond);
  if (ts < 0) Fatal(run, "job " + id + " on agent " + a->name + ": the task did not write its timestamp", a);
  int64_t took = ts - t0;
  pid_t pid = 0;
  if (RunningTasks(run, a, id, &pid) != 1) Fatal(run, "job " + id + ": its task is not running after its start", a);
  if (adjusted_envs > 0) {
    // Read once the task is not inside its exec of the sleep (the new image
    // has no environment yet): the marker, which the spec sets, is there.
    std::vector<std::string> kv;
    for (int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;; ::usleep(1000)) {
      auto env = sys::ReadFile(Format("/proc/%d/environ", pid), 1 << 20);
      kv = env.ok() ? Split(*env, '\0') : std::vector<std::string>();
      if (std::find(kv.begin(), kv.end(), run->marker) != kv.end()) break;
      if (MonotonicNanos() > end) Fatal(run, "job " + id + ": cannot read its task's environment", a);
    }
    for (int i = 0; i < adjusted_envs; ++i) {
      if (std::find(kv.begin(), kv.end(), Format("NRI_BENCH_K%d=v", i)) == kv.end()) {
        Fatal(run, Format("job %s: its task's environment lacks NRI_BENCH_K%d (an adjustment)", id.c_str(), i), a);
      }
    }
  }
  auto gone = Call(a, "RemoveJob", bench::JobIdRequest(id));
  if (!gone.ok()) Fatal(run, "RemoveJob " + id + ": " + gone.error().message(), a);
  a->jobs.erase(id);
  for (int64_t end = MonotonicNanos() + 10 * kNanosPerSecond; WorkerBusy(*a); ::usleep(1000)) {
    if (MonotonicNanos() > end) Fatal(run, "job " + id + ": the worker still has children 10 s after RemoveJob", a);
  }
  return took;
}

// ---- the plugin round trip, in this process --------------------------------

nri::Container RttContainer(const Run& run, int i) {
  driver::TaskConfig c;
  c.id = Format("rtt-%d.t", i);
  c.job = Format("rtt-%d", i);
  c.name = "t";
  c.command = run.helper;
  c.args = {"stamp-exec", run.dir + "/stamp", run.helper, "sleep", "1000"};
  c.env[kMarkerVar] = run.dir;
  nri::Container ctr = nri::ToContainer(c, nri::ContainerState::kUnknown);
  ctr.created_at = WallNanos();
  return ctr;
}

// An in-process adaptation k (0: 1 plugin, 1: 4 plugins) with its plugins ready.
void StartRtt(Run* run, int k) {
  if (!run->loop) {
    auto loop = Loop::Create();
    if (!loop.ok()) Fatal(run, "loop: " + loop.error().message());
    run->loop = std::move(*loop);
  }
  nri::Config nc;
  nc.enabled = true;
  nc.socket_path = run->dir + Format("/rtt%d-nri.sock", k);
  nc.plugin_dir = nc.plugin_config_dir = "";
  nc.runtime_version = "bench";
  auto a = nri::Adaptation::Create(run->loop.get(), nc, &run->host);
  if (!a.ok()) Fatal(run, "adaptation: " + a.error().message());
  run->rtt[k] = std::move(*a);
  Status st = run->rtt[k]->Start();
  if (!st.ok()) Fatal(run, "adaptation start: " + st.error().message());
  const size_t n = k ? 4 : 1;
  for (size_t i = 0; i < n; ++i) {
    std::string f = run->dir + Format("/rtt%d-plugin%zu", k, i);
    StartPlugin(run, {"-idx", std::to_string(10 + i), "-name", Format("p%zu", i), "-socket-path", nc.socket_path,
                      "-events", "CreateContainer", "-log", f + ".log"}, f + ".stderr");
  }
  for (int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;; (void)run->loop->RunOnce(10 * kNanosPerMilli)) {
    CheckInterrupt(run);
    size_t ready = 0;
    for (const nri::PluginInfo& p : run->rtt[k]->List()) ready += p.state == "ready";
    if (ready == n) break;
    if (MonotonicNanos() > end) Fatal(run, "the round-trip plugin did not become ready within 60 s");
  }
}

// The median of kRttCalls CreateContainer calls through adaptation k's plugins.
int64_t RttSample(Run* run, int k, int round) {
  std::vector<int64_t> took;
  nri::PodSandbox pod;
  for (int i = 0; i < kRttCalls; ++i) {
    nri::Container ctr = RttContainer(*run, (round * kRttCalls + i) * 2 + k);
    pod.id = pod.name = pod.uid = ctr.pod_sandbox_id;
    bool idle = false;  // the plugin idle first, as between two starts in the agent
    run->loop->AddTimer(kRttIdleNanos, [&idle] { idle = true; });
    while (!idle) (void)run->loop->RunOnce(kNanosPerSecond);
    bool done = false;
    std::string err;
    int64_t t0 = MonotonicNanos(), t1 = 0;
    run->rtt[k]->CreateContainer(pod, ctr, [&](Result<nri::CreateOutcome> r) {
      t1 = MonotonicNanos();
      done = true;
      if (!r.ok()) return (void)(err = r.error().message());
      if (r->plugins.size() != (k ? 4u : 1u)) err = Format("%zu plugins consulted", r->plugins.size());
      for (const nri::PluginOutcome& p : r->plugins) {
        if (p.result.find("skipped") != std::string::npos) err = p.plugin + ": " + p.result;
      }
    });
    for (int64_t end = t0 + 30 * kNanosPerSecond; !done; (void)run->loop->RunOnce(kNanosPerSecond)) {
      if (MonotonicNanos() > end) Fatal(run, "round trip: no answer within 30 s");
    }
    if (!err.empty()) Fatal(run, "round trip: " + err);
    took.push_back(t1 - t0);
  }
  std::sort(took.begin(), took.end());
  return (took[kRttCalls / 2 - 1] + took[kRttCalls / 2]) / 2;
}

// ---- Synchronize ------------------------------------------------------------

// 1,000 running tasks on a: kSyncJobs jobs of kSyncTasks `test_helper sleep 1000`.
void FillAgent(Run* run, Agent* a) {
  std::vector<std::string> reqs, ids;
  for (int j = 0; j < kSyncJobs; ++j) {
    std::string id = Format("s%s-%02d", run->tag.c_str(), j), tasks;
    for (int t = 0; t < kSyncTasks; ++t) {
      tasks += (tasks.empty() ? "" : ", ") + TaskJson(*run, Format("t%02d", t), {"sleep", "1000"});
    }
    reqs.push_back(bench::SubmitJobRequest("{\"id\": " + Json(id) + ", \"tasks\": [" + tasks + "]}"));
    ids.push_back(id);
  }
  int64_t t0 = MonotonicNanos();
  a->jobs.insert(ids.begin(), ids.end());  // for the clean-up, which takes "not found" as gone
  std::vector<bench::Outcome> res = bench::Pipeline(a->socket, "SubmitJob", reqs, 4, 120 * kNanosPerSecond, true);
  CheckInterrupt(run);
  for (size_t i = 0; i < res.size(); ++i) {
    if (!res[i].done || !res[i].ok) {
      Fatal(run, "SubmitJob " + ids[i] + ": " + (res[i].done ? res[i].reply : "not attempted"), a);
    }
  }
  int64_t end = MonotonicNanos() + 300 * kNanosPerSecond;
  for (const std::string& id : ids) {
    for (int running; (running = RunningTasks(run, a, id)) < kSyncTasks; ::usleep(20000)) {
      CheckInterrupt(run);
      if (MonotonicNanos() > end) Fatal(run, Format("job %s: %d tasks running after 300 s", id.c_str(), running), a);
    }
  }
  Info("%d tasks running on agent %s (%d jobs of %d) in %.2f s", kSyncJobs * kSyncTasks, a->name.c_str(), kSyncJobs,
       kSyncTasks, static_cast<double>(MonotonicNanos() - t0) / kNanosPerSecond);
}

struct Sync {  // from the plugin's process start
  int64_t to_configure = 0, to_sync = 0, to_ready = 0;
};
// The monotonic time at which the line starting with `word` is in file,
// following it with inotify (fd watches it); -1 on timeout.
int64_t WaitLine(Run* run, int fd, const std::string& file, const std::string& word, std::string* line,
                 int64_t deadline) {
  for (;;) {
    CheckInterrupt(run);
    auto text = sys::ReadFile(file, 1 << 20);
    int64_t now = MonotonicNanos();
    if (text.ok()) {
      for (const std::string& l : Split(*text, '\n')) {
        if (l.compare(0, word.size() + 1, word + " ") == 0) {
          *line = l;
          return now;
        }
      }
    }
    if (now > deadline) return -1;
    pollfd p = {fd, POLLIN, 0};
    char buf[4096];
    if (::poll(&p, 1, 100) > 0 && ::read(fd, buf, sizeof buf) < 0 && errno != EAGAIN) return -1;
  }
}

Sync OneSync(Run* run, Agent* a, int round, size_t containers) {
  const std::string log = a->dir + Format("/sync-%02d.log", round);
  Status st = sys::WriteFileAtomic(log, "", 0600);
  if (!st.ok()) Fatal(run, st.error().message());
  int fd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (fd < 0 || ::inotify_add_watch(fd, log.c_str(), IN_MODIFY) < 0) {
    Fatal(run, std::string("inotify: ") + std::strerror(errno));
  }
  int64_t t0 = MonotonicNanos();
  pid_t pid = StartPlugin(run, {"-idx", "50", "-name", Format("sync%02d", round), "-socket-path", a->nri, "-events",
                                "RunPodSandbox", "-log", log},
                          a->dir + Format("/sync-%02d.stderr", round));
  const int64_t deadline = t0 + 120 * kNanosPerSecond;
  std::string conf, sync;
  int64_t tc = WaitLine(run, fd, log, "Configure", &conf, deadline);
  int64_t ts = tc < 0 ? -1 : WaitLine(run, fd, log, "Synchronize", &sync, deadline);
  ::close(fd);
  if (ts < 0) Fatal(run, "agent " + a->name + ": no Synchronize reached the plugin within 120 s", a);
  if ((sync + " ").find(Format("containers=%zu ", containers)) == std::string::npos) Fatal(run, "got " + sync, a);
  WaitPlugins(run, a, 1);
  Sync out{tc - t0, ts - t0, MonotonicNanos() - t0};
  StopPlugin(run, pid);
  WaitPlugins(run, a, 0);
  return out;
}

double Median(const std::vector<int64_t>& v) { return bench::PercentileMicros(v, 0.5); }

int Main(int argc, char** argv) {
  bench::Name() = "nri_bench";
  Run run;
  int starts = 121, syncs = 9;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) run.outpost = argv[++i];
    else if (a == "--helper" && i + 1 < argc) run.helper = argv[++i];
    else if (a == "--plugin" && i + 1 < argc) run.plugin = argv[++i];
    else if (a == "--starts" && i + 1 < argc) starts = std::atoi(argv[++i]);
    else if (a == "--syncs" && i + 1 < argc) syncs = std::atoi(argv[++i]);
    else return std::fprintf(stderr, "usage: nri_bench [--outpost|--helper|--plugin P] [--starts|--syncs N]\n"), 2;
  }
  starts = std::max(starts, 1), syncs = std::max(syncs, 1);
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  if (run.plugin.empty()) run.plugin = sys::Dirname(run.outpost) + "/test_nri_plugin";
  if (::access(run.plugin.c_str(), X_OK) != 0) Fatal(&run, run.plugin + " not found (make nri-plugins)");
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  bench::RaiseNofile(16384);
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-nri-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.tag = sys::Basename(run.dir).substr(18);
  run.marker = std::string(kMarkerVar) + "=" + run.dir;
  Info("scratch dir %s; agents' runtime dirs on tmpfs when /dev/shm is one", run.dir.c_str());
  // The four start variants: plugins per agent, and whether they adjust.
  const char* names[] = {"none", "one", "four", "adjusting"};
  const int counts[] = {0, 1, 4, 4};
  Agent* starters[4];
  for (int v = 0; v < 4; ++v) {
    starters[v] = StartAgent(&run, names[v]);
    for (int i = 0; i < counts[v]; ++i) {
      std::vector<std::string> args = {"-idx", std::to_string(10 + i), "-name", Format("p%d", i), "-socket-path",
                                       starters[v]->nri, "-events", "CreateContainer",
                                       "-log", starters[v]->dir + Format("/plugin-%d.log", i)};
      if (v == 3) args.insert(args.end(), {"-adjust-env", Format("NRI_BENCH_K%d=v", i)});
      StartPlugin(&run, args, starters[v]->dir + Format("/plugin-%d.stderr", i));
    }
    WaitPlugins(&run, starters[v], counts[v]);
  }
  StartRtt(&run, 0), StartRtt(&run, 1);
  std::vector<int64_t> t[4], diff[4], rtt, rtt4;
  for (int r = 0; r < kWarmup + starts; ++r) {
    CheckInterrupt(&run);
    int64_t s[6];
    for (int k = 0; k < 6; ++k) {  // each variant and round-trip kind goes first in a sixth of the rounds
      int v = (r + k) % 6;
      if (v >= 4) s[v] = RttSample(&run, v - 4, r);
      else s[v] = OneStart(&run, starters[v], Format("n%s-%c%03d", run.tag.c_str(), 'a' + v, r), v == 3 ? 4 : 0);
    }
    if (r < kWarmup) continue;
    for (int v = 0; v < 4; ++v) t[v].push_back(s[v]), diff[v].push_back(s[v] - s[0]);
    rtt.push_back(s[4]), rtt4.push_back(s[5]);
  }
  // Every plugin was asked on every start (warm-up included).
  for (int v = 1; v < 4; ++v) {
    for (const Listed& p : ListPlugins(&run, starters[v])) {
      if (p.requests < static_cast<uint64_t>(kWarmup + starts)) {
        Fatal(&run, Format("agent %s: plugin %s answered %llu requests for %d starts", names[v], p.name.c_str(),
                           static_cast<unsigned long long>(p.requests), kWarmup + starts), starters[v]);
      }
    }
  }

  // Synchronize: 1,000 running tasks against none.
  Agent *full = StartAgent(&run, "sync1000"), *empty = StartAgent(&run, "sync0");
  FillAgent(&run, full);
  std::vector<int64_t> sc[2], sy[2], rd[2], cs[2];
  for (int r = 0; r < 1 + syncs; ++r) {
    for (int k = 0; k < 2; ++k) {
      int w = (r + k) % 2;
      Sync s = OneSync(&run, w ? full : empty, r, w ? kSyncJobs * kSyncTasks : 0);
      if (r < 1) continue;
      sc[w].push_back(s.to_configure);
      sy[w].push_back(s.to_sync);
      rd[w].push_back(s.to_ready);
      cs[w].push_back(s.to_sync - s.to_configure);
    }
  }

  const double a = Median(t[0]), one = Median(t[1]), four = Median(t[2]), adj = Median(t[3]), rt = Median(rtt);
  const double budget = a + 4 * rt + kSlackMicros;
  const double per_plugin = (four - a) / 4;
  Info("%zu rounds (+%d warm-up), each in rotating order: one start per agent (no plugin, 1, 4, 4 adjusting), %d "
       "in-process CreateContainer calls through 1 plugin, %d through 4", t[0].size(), kWarmup, kRttCalls, kRttCalls);
  Info("SubmitJob -> task's first instruction, p50 (p90): no plugin %.1f (%.1f) us, 1 plugin %.1f (%.1f) us, 4 plugins "
       "%.1f (%.1f) us, 4 adjusting plugins %.1f (%.1f) us",
       a, bench::PercentileMicros(t[0], 0.9), one, bench::PercentileMicros(t[1], 0.9), four,
       bench::PercentileMicros(t[2], 0.9), adj, bench::PercentileMicros(t[3], 0.9));
  Info("added per plugin: 1 plugin %.1f us, 4 plugins %.1f us each, 4 adjusting %.1f us each; one CreateContainer "
       "round trip (in-process adaptation + test_nri_plugin) p50 %.1f us, p90 %.1f us",
       one - a, per_plugin, (adj - a) / 4, rt, bench::PercentileMicros(rtt, 0.9));
  Info("one in-process CreateContainer through 4 plugins (4 processes, in turn): p50 %.1f us (%.1f per plugin), p90 "
       "%.1f us; the agent's 4 plugins added %.1f us",
       Median(rtt4), Median(rtt4) / 4, bench::PercentileMicros(rtt4, 0.9), four - a);
  Info("medians of the paired per-round differences to no plugin: 1 plugin %.1f us, 4 plugins %.1f us (%.1f each), "
       "4 adjusting %.1f us (%.1f each)",
       Median(diff[1]), Median(diff[2]), Median(diff[2]) / 4, Median(diff[3]), Median(diff[3]) / 4);
  Info("Synchronize, plugin process start -> Configure received: p50 %.2f ms with 0 tasks, %.2f ms with %d; -> "
       "Synchronize received: %.2f / %.2f ms; Configure -> Synchronize received: %.2f / %.2f ms; -> listed ready "
       "(ListNriPlugins polled every 2 ms): %.2f / %.2f ms; %zu rounds (+1 warm-up)",
       Median(sc[0]) / 1000, Median(sc[1]) / 1000, kSyncJobs * kSyncTasks, Median(sy[0]) / 1000, Median(sy[1]) / 1000,
       Median(cs[0]) / 1000, Median(cs[1]) / 1000, Median(rd[0]) / 1000, Median(rd[1]) / 1000, sy[0].size());
  bench::DescribeMemory("worker with 1,000 tasks", full->worker);
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));
  bench::Print("nri_task_start_4_plugins_p50", four, "us", "nri_task_start_budget_4", budget);
  bench::Print("nri_task_start_1_plugin_p50", one, "us", "nri_task_start_no_plugin_p50", a);
  bench::Print("nri_task_start_4_adjusting_p50", adj, "us", "nri_task_start_no_plugin_p50", a);
  bench::Print("nri_added_per_plugin_p50", per_plugin, "us", "nri_plugin_round_trip_p50", rt);
  bench::Print("nri_synchronize_1000_tasks", Median(sy[1]) / 1000, "ms", "nri_synchronize_0_tasks",
               Median(sy[0]) / 1000);
  Cleanup(&run);
  if (run.failed) {
    std::fprintf(stderr, "nri_bench: clean-up needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
