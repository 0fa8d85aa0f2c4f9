// Task start through an external task-driver plugin against the built-in
// exec driver, same agent, same run (issue 15; docs/benchmarks.md, "External
// task driver start"). Target: external <= 1.2 x exec + 1 RPC round trip.
//
//  1. The real agent binary in a temp dir (state on $TMPDIR, runtime dir and
//     plugins dir on tmpfs when /dev/shm is one; jobs_dir "", a cgroup root
//     outside any cgroup2 mount), then `test_plugin --type TaskDriver --name
//     benchdrv --dir <plugins dir>`. Ready when ListPlugins shows benchdrv
//     with a connected instance (the agent's own state, asked in a loop).
//  2. Task start latency: SubmitJob of a one-task job `test_helper timestamp
//     FILE` (restart never) on an open API connection -> the helper's first
//     instruction (its CLOCK_MONOTONIC in FILE). The task's "driver" is
//     "exec" or "benchdrv", alternating (which goes first alternates too),
//     each followed by RemoveJob; kWarmup rounds, then kSamples of each.
//     Baseline of the exec figure: a bare fork+exec of the same helper
//     (test_helper floor), interleaved.
//  3. The RPC round trip: one ttRPC call (Driver.Capabilities) on an open
//     connection to the plugin's socket, the call the agent makes once per
//     task start (StartTask) on the same kind of socket.
//
// Clean-up, also on failure: RemoveJob of the job in flight, SIGTERM to the
// plugin and the keeper, then a sweep of /proc for processes with the run's
// marker (the plugin and so its tasks carry it), and the temp dirs.
//
//   driver_bench [--outpost PATH] [--helper PATH] [--plugin PATH] [--samples N]
// Paths default to ../outpost, ../test_helper, ../test_plugin next to this binary's dir.
//
// Output:
//   BENCH task_start_exec_driver_p50 <us> us baseline=fork_exec_p50 <us> ratio=<r>
//   BENCH task_start_exec_driver_p99 <us> us baseline=fork_exec_p99 <us> ratio=<r>
//   BENCH task_start_external_driver_p50 <us> us baseline=task_start_exec_driver_p50 <us> ratio=<r>
//   BENCH task_start_external_driver_p99 <us> us baseline=task_start_exec_driver_p99 <us> ratio=<r>
//   BENCH driver_rpc_round_trip_p50 <us> us baseline=connect_call_p50 <us> ratio=<r>
//   BENCH task_start_external_driver_vs_target_p50 <us> us baseline=exec_x1.2_plus_rpc <us> ratio=<r>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <picojson.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent.pb.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "bench_util.h"
#include "plugin.pb.h"
#include "wire/rpc_client.h"

namespace outpost {
namespace {

using bench::Die;
using bench::Print;

constexpr int kWarmup = 5;
constexpr const char* kDriverService = "outpost.driver.v1.Driver";

struct Run {
  std::string outpost, helper, plugin, dir, rundir, config, socket, log, plugins, marker;
  pid_t keeper = 0, plugin_pid = 0;
  std::string job;  // in flight
  bench::FloorProbe floor;
};

void Cleanup(Run* run) {
  if (!run->job.empty() && !run->socket.empty()) {
    (void)bench::CallOnce(run->socket, "RemoveJob", bench::JobIdRequest(run->job), 15 * kNanosPerSecond);
  }
  for (pid_t* p : {&run->plugin_pid, &run->keeper}) {
    if (*p > 0) {
      ::kill(*p, SIGTERM);
      if (!bench::ReapWithin(*p, 10 * kNanosPerSecond)) {
        ::kill(*p, SIGKILL);
        bench::ReapWithin(*p, 5 * kNanosPerSecond);
      }
      *p = 0;
    }
  }
  if (!run->marker.empty()) {
    for (int i = 0; i < 40; ++i) {
      std::vector<pid_t> left = bench::PidsWithEnv(run->marker);
      if (left.empty()) break;
      if (i >= 10) {
        for (pid_t p : left) ::kill(p, SIGKILL);
      }
      ::usleep(50000);
    }
    size_t left = bench::PidsWithEnv(run->marker).size();
    if (left) std::fprintf(stderr, "driver_bench: %zu processes with %s survive!\n", left, run->marker.c_str());
  }
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "driver_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log);
  Cleanup(run);
  std::exit(1);
}

std::string JsonString(const std::string& s) { return picojson::value(s).serialize(); }

std::string JobSpec(const Run& run, const std::string& id, const std::string& driver, const std::string& stamp) {
  return "{\"id\": " + JsonString(id) + ", \"restart\": {\"policy\": \"never\"}, \"tasks\": [{\"name\": \"t\", " +
         "\"driver\": " + JsonString(driver) + ", \"command\": " + JsonString(run.helper) +
         ", \"args\": [\"timestamp\", " + JsonString(stamp) + "], \"env\": {" + JsonString(bench::kMarkerVar) +
         ": " + JsonString(run.dir) + "}}]}";
}

// The plugin's socket once ListPlugins shows benchdrv with a connected
// instance; "" after timeout.
std::string WaitRegistered(Run* run, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  while (MonotonicNanos() < end && !bench::g_interrupted) {
    auto reply = bench::CallOnce(run->socket, "ListPlugins", "", kNanosPerSecond);
    if (reply.ok()) {
      PbOwned<outpost_v1_ListPluginsResponse> resp(outpost_v1_ListPluginsResponse_fields);
      if (resp.Decode(*reply, "ListPluginsResponse").ok()) {
        for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
          const outpost_v1_PluginEntry& e = resp->plugins[i];
          if (PbString(e.type) != "TaskDriver" || PbString(e.name) != "benchdrv") continue;
          for (pb_size_t j = 0; j < e.instances_count; ++j) {
            if (e.instances[j].connected) {
              std::string ep = PbString(e.instances[j].endpoint);
              return ep.empty() ? PbString(e.instances[j].socket) : ep;
            }
          }
        }
      }
    }
    ::usleep(2000);
  }
  return "";
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) {
  using namespace outpost;
  bench::Name() = "driver_bench";
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  Run run;
  int samples = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--outpost") run.outpost = v;
    else if (a == "--helper") run.helper = v;
    else if (a == "--plugin") run.plugin = v;
    else if (a == "--samples") samples = std::max(1, std::atoi(v.c_str()));
    else Die("usage", "driver_bench [--outpost PATH] [--helper PATH] [--plugin PATH] [--samples N]");
  }
  std::string found = bench::FindBinaries(&run.outpost, &run.helper);
  if (!found.empty()) Die("binaries", found);
  if (run.plugin.empty()) run.plugin = sys::Dirname(run.helper) + "/test_plugin";
  if (::access(run.plugin.c_str(), X_OK) != 0) Die("binaries", run.plugin + " not found (make build/test_plugin)");

  const char* tmpdir = std::getenv("TMPDIR");
  run.dir = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/outpost-driver-bench-XXXXXX";
  if (!::mkdtemp(&run.dir[0])) Die("mkdtemp", run.dir);
  run.marker = std::string(bench::kMarkerVar) + "=" + run.dir;
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.plugins = run.rundir + "/plugins";
  if (::mkdir(run.plugins.c_str(), 0700) != 0) Fatal(&run, "mkdir " + run.plugins);
  run.config = run.dir + "/agent.json";
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + JsonString(run.dir + "/state") +
                       ", \"runtime_dir\": " + JsonString(run.rundir) + ", \"plugins_dir\": " +
                       JsonString(run.plugins) + ", \"log_file\": " + JsonString(run.log) +
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"api_idle_timeout\": \"10m\", "
                       "\"cgroup_root\": " + JsonString(run.dir + "/no-cgroup") + "}\n";
  Status wst = sys::WriteFileAtomic(run.config, config, 0600);
  if (!wst.ok()) Fatal(&run, wst.error().message());
  std::string probe = run.floor.Start(run.helper);
  if (!probe.empty()) Fatal(&run, "floor probe: " + probe);

  run.keeper = bench::SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  if (run.keeper < 0) Fatal(&run, "fork failed");
  if (bench::WaitForWorker(run.socket, 10 * kNanosPerSecond) <= 0) Fatal(&run, "the agent did not answer Status");
  // The plugin (and so every task it forks) carries the marker.
  ::setenv(bench::kMarkerVar, run.dir.c_str(), 1);
  run.plugin_pid = bench::SpawnDetached(
      {run.plugin, "--type", "TaskDriver", "--name", "benchdrv", "--dir", run.plugins, "--versions", "v1"},
      run.dir + "/plugin.stderr");
  ::unsetenv(bench::kMarkerVar);
  if (run.plugin_pid < 0) Fatal(&run, "fork failed");
  int64_t t_reg = MonotonicNanos();
  std::string plugin_socket = WaitRegistered(&run, 10 * kNanosPerSecond);
  if (plugin_socket.empty()) Fatal(&run, "benchdrv not registered within 10 s");
  bench::Info("benchdrv registered after %.1f ms (from its spawn), socket %s",
              static_cast<double>(MonotonicNanos() - t_reg) / 1e6, plugin_socket.c_str());

  auto client = wire::BlockingClient::Connect(run.socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(&run, "connect: " + client.error().message());
  std::string tag = sys::Basename(run.dir).substr(21);
  std::vector<int64_t> exec_ns, ext_ns, floor_ns;
  int seq = 0;
  auto start_one = [&](const std::string& driver) -> int64_t {
    std::string id = Format("d%s-%s-%04d", tag.c_str(), driver == "exec" ? "e" : "x", seq);
    std::string stamp = run.dir + Format("/stamp-%d", seq++);
    auto req = bench::SubmitJobRequest(JobSpec(run, id, driver, stamp));
    run.job = id;
    int64_t t0 = MonotonicNanos();
    auto reply = client->Call(bench::kAgentService, "SubmitJob", req, 30 * kNanosPerSecond);
    if (!reply.ok()) Fatal(&run, "SubmitJob " + id + " (" + driver + "): " + reply.error().message());
    int64_t ts = bench::WaitStamp(stamp, 10 * kNanosPerSecond);
    if (ts < 0) Fatal(&run, "the helper did not write its timestamp (job " + id + ", driver " + driver + ")");
    auto gone = client->Call(bench::kAgentService, "RemoveJob", bench::JobIdRequest(id), 30 * kNanosPerSecond);
    if (!gone.ok()) Fatal(&run, "RemoveJob " + id + ": " + gone.error().message());
    run.job.clear();
    return ts - t0;
  };
  for (int i = 0; i < kWarmup + samples; ++i) {
    if (bench::g_interrupted) Fatal(&run, "interrupted");
    bool exec_first = i % 2 == 0;
    int64_t a = start_one(exec_first ? "exec" : "benchdrv");
    int64_t b = start_one(exec_first ? "benchdrv" : "exec");
    auto f = run.floor.Stamp(run.dir + "/floor-stamp");
    if (!f.ok()) Fatal(&run, f.error().message());
    if (i < kWarmup) continue;
    exec_ns.push_back(exec_first ? a : b);
    ext_ns.push_back(exec_first ? b : a);
    floor_ns.push_back(*f);
  }

  // The round trip: Capabilities on an open connection to the plugin; and
  // its baseline, a connect + the same call (plugin_bench's connect_call).
  std::vector<int64_t> rtt, connect_call;
  {
    auto pc = wire::BlockingClient::Connect(plugin_socket, 10 * kNanosPerSecond);
    if (!pc.ok()) Fatal(&run, "connect " + plugin_socket + ": " + pc.error().message());
    for (int i = 0; i < kWarmup + samples; ++i) {
      int64_t t0 = MonotonicNanos();
      auto r = pc->Call(kDriverService, "Capabilities", "", 10 * kNanosPerSecond);
      if (!r.ok()) Fatal(&run, "Capabilities: " + r.error().message());
      if (i >= kWarmup) rtt.push_back(MonotonicNanos() - t0);
      t0 = MonotonicNanos();
      auto c = wire::BlockingClient::Connect(plugin_socket, 10 * kNanosPerSecond);
      if (!c.ok()) Fatal(&run, "connect " + plugin_socket + ": " + c.error().message());
      auto r2 = c->Call(kDriverService, "Capabilities", "", 10 * kNanosPerSecond);
      if (!r2.ok()) Fatal(&run, "Capabilities: " + r2.error().message());
      if (i >= kWarmup) connect_call.push_back(MonotonicNanos() - t0);
    }
  }

  double exec50 = bench::PercentileMicros(exec_ns, 0.5), exec99 = bench::PercentileMicros(exec_ns, 0.99);
  double ext50 = bench::PercentileMicros(ext_ns, 0.5), ext99 = bench::PercentileMicros(ext_ns, 0.99);
  double rtt50 = bench::PercentileMicros(rtt, 0.5);
  Print("task_start_exec_driver_p50", exec50, "us", "fork_exec_p50", bench::PercentileMicros(floor_ns, 0.5));
  Print("task_start_exec_driver_p99", exec99, "us", "fork_exec_p99", bench::PercentileMicros(floor_ns, 0.99));
  Print("task_start_external_driver_p50", ext50, "us", "task_start_exec_driver_p50", exec50);
  Print("task_start_external_driver_p99", ext99, "us", "task_start_exec_driver_p99", exec99);
  Print("driver_rpc_round_trip_p50", rtt50, "us", "connect_call_p50", bench::PercentileMicros(connect_call, 0.5));
  Print("task_start_external_driver_vs_target_p50", ext50, "us", "exec_x1.2_plus_rpc", 1.2 * exec50 + rtt50);
  bench::Info("%d samples each; external - exec: p50 %.1f us, p99 %.1f us; one RPC round trip %.1f us", samples,
              ext50 - exec50, ext99 - exec99, rtt50);

  Cleanup(&run);
  return 0;
}
