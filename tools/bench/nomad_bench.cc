// Nomad task-driver plugins hosted by the agent (issue 44; docs/benchmarks.md,
// "Nomad task drivers"). The plugin is build/nomad_exec_driver
// (tests/helpers/nomad/nomad_exec_driver.cc): a go-plugin driver in C++ that
// starts a task the way outpost's own ttRPC test driver does (fork, cgroup,
// FIFOs, setsid, exec), copied into the agent's nomad_plugin_dir; every
// figure compares outpost's hosting of it with a baseline of the same run.
// --driver tests/helpers/nomad/test_nomad_driver.py runs the same with the
// Python driver of the integration tests (its own StartTask takes 25-40 ms).
//
//  1. Memory: the agent with an empty nomad_plugin_dir, then with N plugins
//     (copies named benchnd1..N), each until every driver is fingerprinted;
//     the worker's settled RSS each time.
//  2. Plugin start to fingerprinted: K agent starts with one plugin
//     (benchnd); from the first instruction of the first process the agent
//     launches (the plugin's calls log: its CLOCK_MONOTONIC as it starts) to
//     the agent's Status showing driver.benchnd enabled (asked every 2 ms).
//     Baseline, in each round on the same agent: outpost's own ttRPC driver
//     plugin (test_plugin --type TaskDriver) from the bench's fork of it to
//     ListPlugins showing it connected (asked every 2 ms).
//  3. Task start: the last of those agents, plus `test_plugin --type
//     TaskDriver --name benchdrv` (outpost's own ttRPC driver plugin) in its
//     plugins_dir. SubmitJob of a one-task job (`test_helper timestamp
//     FILE`, restart never) on an open API connection until the helper's
//     first instruction, then RemoveJob; the task's driver is benchnd (its
//     config {command, args, greeting ""}) or benchdrv (the same command),
//     alternating (which goes first alternates too); kWarmup rounds, then
//     --samples of each. The plugin's own time in StartTask (its calls log,
//     handler entry to return, the fork included) is subtracted in the
//     `_less_plugin` figure: what is left is outpost's side, the gRPC
//     transport and the task's exec.
//
// With a Python driver it needs /usr/bin/python3 with grpc, grpc_tools and
// msgpack (tools/deps.sh bench); without them it says so and prints nothing
// else. Clean-up, also on failure: RemoveJob of the job in flight, SIGTERM to
// the plugin and the keeper, then a sweep of /proc for processes with the
// run's marker (the agent, so its plugins, and the tasks carry it), and the
// temp dirs.
//
//   nomad_bench [--outpost PATH] [--helper PATH] [--plugin PATH] [--driver PATH]
//               [--samples N] [--rounds K] [--plugins N]
// Paths default to ../outpost, ../test_helper, ../test_plugin and
// ../nomad_exec_driver next to this binary's dir.
//
// Output:
//   BENCH agent_rss_per_nomad_plugin <KiB> KiB baseline=agent_rss_without_nomad_plugins <KiB> ratio=<r>
//   BENCH nomad_plugin_start_to_fingerprinted <ms> ms baseline=ttrpc_plugin_start_to_registered <ms> ratio=<r>
//   BENCH nomad_driver_task_start_p50 <us> us baseline=task_start_external_driver_p50 <us> ratio=<r>
//   BENCH nomad_driver_task_start_p99 <us> us baseline=task_start_external_driver_p99 <us> ratio=<r>
//   BENCH nomad_driver_task_start_less_plugin_p50 <us> us baseline=task_start_external_driver_p50 <us> ratio=<r>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <picojson.h>

#include "calls_log.h"

#include <algorithm>
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

constexpr int kWarmup = 3;
constexpr const char* kPython = "/usr/bin/python3";

struct Run {
  std::string outpost, helper, plugin, driver, proto;
  std::string dir, rundir, socket, log, plugins, nomad_plugins, stubs, marker, calls;
  pid_t keeper = 0, plugin_pid = 0;
  std::string job;  // in flight
};

void StopPid(pid_t* p) {
  if (*p <= 0) return;
  ::kill(*p, SIGTERM);
  if (!bench::ReapWithin(*p, 10 * kNanosPerSecond)) {
    ::kill(*p, SIGKILL);
    bench::ReapWithin(*p, 5 * kNanosPerSecond);
  }
  *p = 0;
}

void Cleanup(Run* run) {
  if (!run->job.empty() && !run->socket.empty()) {
    (void)bench::CallOnce(run->socket, "RemoveJob", bench::JobIdRequest(run->job), 15 * kNanosPerSecond);
  }
  StopPid(&run->plugin_pid);
  StopPid(&run->keeper);
  (void)bench::SweepMarker(run->marker);
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "nomad_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log);
  Cleanup(run);
  std::exit(1);
}

using bench::Json;
using bench::ShellQuote;

// The plugin copied into nomad_plugin_dir as name (a plugin is an
// executable dropped there; its file name is its name).
void Install(Run* run, const std::string& name) {
  auto text = sys::ReadFile(run->driver, 64 << 20);
  if (!text.ok()) Fatal(run, "read " + run->driver + ": " + text.error().message());
  Status st = sys::WriteFileAtomic(run->nomad_plugins + "/" + name, *text, 0755);
  if (!st.ok()) Fatal(run, st.error().message());
}

// The agent's config: Nomad plugins names (each with its calls log) in
// nomad_plugin_dir, the ttRPC plugins dir, everything under the run's dirs.
void WriteConfig(Run* run, const std::vector<std::string>& names) {
  std::string entries;
  for (const std::string& n : names) {
    entries += std::string(entries.empty() ? "" : ", ") + Json(n) + ": {\"args\": [\"--name\", " + Json(n) +
               ", \"--calls\", " + Json(run->dir + "/" + n + ".calls") + "]}";
  }
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"state_dir\": " +
                       Json(run->dir + "/state") + ", \"runtime_dir\": " + Json(run->rundir) +
                       ", \"plugins_dir\": " + Json(run->plugins) + ", \"log_file\": " + Json(run->log) +
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"api_idle_timeout\": \"10m\", "
                       "\"cgroup_root\": " + Json(run->dir + "/no-cgroup") + ", \"nomad_plugin_dir\": " +
                       Json(run->nomad_plugins) + ", \"nomad_plugins\": {" + entries + "}}\n";
  Status st = sys::WriteFileAtomic(run->dir + "/agent.json", config, 0600);
  if (!st.ok()) Fatal(run, st.error().message());
}

// Starts the agent (it and so its plugins carry the run's marker); the
// worker's pid once it answers Status.
pid_t StartAgent(Run* run) {
  ::setenv(bench::kMarkerVar, run->dir.c_str(), 1);
  run->keeper = bench::SpawnDetached({run->outpost, "agent", "--config", run->dir + "/agent.json"},
                                     run->dir + "/agent.stderr");
  ::unsetenv(bench::kMarkerVar);
  if (run->keeper < 0) Fatal(run, "fork failed");
  pid_t worker = bench::WaitForWorker(run->socket, 10 * kNanosPerSecond);
  if (worker <= 0) {
    auto err = sys::ReadFile(run->dir + "/agent.stderr", 1 << 16);
    Fatal(run, "the agent did not answer Status" + (err.ok() && !err->empty() ? ": " + *err : std::string()));
  }
  return worker;
}

// The features driver.<name> of Status that are enabled.
size_t EnabledDrivers(const Run& run, const std::vector<std::string>& names) {
  auto reply = bench::CallOnce(run.socket, "Status", "", kNanosPerSecond);
  if (!reply.ok()) return 0;
  PbOwned<outpost_v1_StatusResponse> resp(outpost_v1_StatusResponse_fields);
  if (!resp.Decode(*reply, "StatusResponse").ok()) return 0;
  size_t n = 0;
  for (pb_size_t i = 0; i < resp->features_count; ++i) {
    for (const std::string& name : names) {
      if (PbString(resp->features[i].name) == "driver." + name && resp->features[i].enabled) ++n;
    }
  }
  return n;
}

// Until every one of names is fingerprinted (enabled in Status); the time then.
int64_t WaitFingerprinted(Run* run, const std::vector<std::string>& names, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  while (!bench::g_interrupted && MonotonicNanos() < end) {
    if (EnabledDrivers(*run, names) == names.size()) return MonotonicNanos();
    ::usleep(2000);
  }
  Fatal(run, bench::g_interrupted ? "interrupted"
                                  : "the Nomad driver plugins were not fingerprinted within " +
                                        std::to_string(timeout_nanos / kNanosPerSecond) +
                                        " s (does this agent host Nomad plugins? issue 44)");
}

using bench::Calls;
using bench::Num;
using bench::Str;

std::string JobSpec(const Run& run, const std::string& id, const std::string& driver, const std::string& stamp) {
  std::string task = "{\"name\": \"t\", \"driver\": " + Json(driver) + ", \"env\": {" + Json(bench::kMarkerVar) +
                     ": " + Json(run.dir) + "}, ";
  if (driver == "benchdrv") {
    task += "\"command\": " + Json(run.helper) + ", \"args\": [\"timestamp\", " + Json(stamp) + "]}";
  } else {  // a Nomad driver takes its command in its config
    task += "\"config\": {\"command\": " + Json(run.helper) + ", \"args\": [\"timestamp\", " + Json(stamp) +
            "], \"greeting\": \"\"}}";
  }
  return "{\"id\": " + Json(id) + ", \"restart\": {\"policy\": \"never\"}, \"tasks\": [" + task + "]}";
}

// The ttRPC plugin's socket once ListPlugins shows benchdrv connected; "" after timeout.
bool TtrpcRegistered(Run* run, const std::string& name, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  while (MonotonicNanos() < end && !bench::g_interrupted) {
    auto reply = bench::CallOnce(run->socket, "ListPlugins", "", kNanosPerSecond);
    if (reply.ok()) {
      PbOwned<outpost_v1_ListPluginsResponse> resp(outpost_v1_ListPluginsResponse_fields);
      if (resp.Decode(*reply, "ListPluginsResponse").ok()) {
        for (pb_size_t i = 0; i < resp->plugins_count; ++i) {
          const outpost_v1_PluginEntry& e = resp->plugins[i];
          if (PbString(e.type) != "TaskDriver" || PbString(e.name) != name) continue;
          for (pb_size_t j = 0; j < e.instances_count; ++j) {
            if (e.instances[j].connected) return true;
          }
        }
      }
    }
    ::usleep(2000);
  }
  return false;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) {
  using namespace outpost;
  bench::Name() = "nomad_bench";
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  Run run;
  int samples = 40, rounds = 5, nplugins = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--outpost") run.outpost = v;
    else if (a == "--helper") run.helper = v;
    else if (a == "--plugin") run.plugin = v;
    else if (a == "--driver") run.driver = v;
    else if (a == "--samples") samples = std::max(1, std::atoi(v.c_str()));
    else if (a == "--rounds") rounds = std::max(1, std::atoi(v.c_str()));
    else if (a == "--plugins") nplugins = std::max(1, std::atoi(v.c_str()));
    else Die("usage", "nomad_bench [--outpost PATH] [--helper PATH] [--plugin PATH] [--driver PATH] [--samples N] [--rounds K] [--plugins N]");
  }
  std::string found = bench::FindBinaries(&run.outpost, &run.helper);
  if (!found.empty()) Die("binaries", found);
  std::string root = sys::Dirname(sys::Dirname(run.helper));  // build/test_helper -> the repository
  if (run.plugin.empty()) run.plugin = sys::Dirname(run.helper) + "/test_plugin";
  if (run.driver.empty()) run.driver = sys::Dirname(run.helper) + "/nomad_exec_driver";
  const bool python = EndsWith(run.driver, ".py");
  run.proto = root + "/proto";
  if (::access(run.plugin.c_str(), X_OK) != 0) Die("binaries", run.plugin + " not found (make build/test_plugin)");
  if (::access(run.driver.c_str(), R_OK) != 0) {
    Die("binaries", run.driver + " not found (make build/nomad_exec_driver, or --driver PATH)");
  }
  std::string probe = std::string(kPython) + " -c 'import grpc, grpc_tools.protoc, msgpack' >/dev/null 2>&1";
  if (python && std::system(probe.c_str()) != 0) {
    bench::Info("skipped: %s cannot import grpc, grpc_tools and msgpack (python3-grpcio, python3-grpc-tools, "
                "python3-msgpack: tools/deps.sh bench)", kPython);
    return 0;
  }

  const char* tmpdir = std::getenv("TMPDIR");
  run.dir = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/outpost-nomad-bench-XXXXXX";
  if (!::mkdtemp(&run.dir[0])) Die("mkdtemp", run.dir);
  run.marker = std::string(bench::kMarkerVar) + "=" + run.dir;
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.plugins = run.rundir + "/plugins";
  run.nomad_plugins = run.dir + "/nomad-plugins";
  run.stubs = run.dir + "/stubs";
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  if (::mkdir(run.plugins.c_str(), 0700) != 0 || ::mkdir(run.nomad_plugins.c_str(), 0755) != 0) {
    Fatal(&run, "mkdir");
  }
  // A Python plugin's stubs, generated once: it takes them from there.
  std::string gen = std::string(kPython) + " -m grpc_tools.protoc -I" + ShellQuote(run.proto) + " --python_out=" +
                    ShellQuote(run.stubs) + " --grpc_python_out=" + ShellQuote(run.stubs);
  for (const char* p : {"google_protobuf", "nomad_hcl_spec", "nomad_structs", "nomad_base", "nomad_driver",
                        "goplugin", "grpc_health"}) {
    gen += " " + ShellQuote(run.proto + "/" + p + ".proto");
  }
  if (python && (::mkdir(run.stubs.c_str(), 0755) != 0 || std::system((gen + " >/dev/null 2>&1").c_str()) != 0)) {
    Fatal(&run, "generating the stubs failed: " + gen);
  }
  ::setenv("OUTPOST_TEST_NOMAD_STUBS", run.stubs.c_str(), 1);
  ::setenv("OUTPOST_TEST_NOMAD_PROTO_DIR", run.proto.c_str(), 1);

  // 1. Memory.
  WriteConfig(&run, {});
  pid_t worker = StartAgent(&run);
  long rss0 = bench::SettledRssKiB(worker, 3000);
  bench::DescribeMemory("worker, no Nomad plugin", worker);
  StopPid(&run.keeper);
  std::vector<std::string> names;
  for (int i = 1; i <= nplugins; ++i) {
    names.push_back("benchnd" + std::to_string(i));
    Install(&run, names.back());
  }
  WriteConfig(&run, names);
  worker = StartAgent(&run);
  WaitFingerprinted(&run, names, 180 * kNanosPerSecond);
  long rssn = bench::SettledRssKiB(worker, 3000);
  bench::DescribeMemory("worker, Nomad plugins", worker);
  StopPid(&run.keeper);
  (void)bench::SweepMarker(run.marker);  // plugins the agent may have left (its stop should stop them)
  for (const std::string& n : names) ::unlink((run.nomad_plugins + "/" + n).c_str());

  // 2. Plugin start to fingerprinted.
  Install(&run, "benchnd");
  WriteConfig(&run, {"benchnd"});
  run.calls = run.dir + "/benchnd.calls";
  std::vector<double> to_fp, to_line, to_reg;
  for (int r = 0; r < rounds; ++r) {
    ::unlink(run.calls.c_str());
    StartAgent(&run);
    int64_t fp = WaitFingerprinted(&run, {"benchnd"}, 120 * kNanosPerSecond);
    int64_t first_t0 = -1, t0 = -1, line = -1, launches = 0, serving = -1;
    std::vector<picojson::object> calls = Calls(run.calls);
    for (const auto& c : calls) {
      if (Str(c, "rpc") == "Fingerprint") serving = Num(c, "pid");
    }
    for (const auto& c : calls) {
      if (Str(c, "event") == "launch") {
        ++launches;
        if (first_t0 < 0) first_t0 = Num(c, "t0_ns");
        if (Num(c, "pid") == serving) t0 = Num(c, "t0_ns");
      }
      if (Str(c, "event") == "handshake" && Num(c, "pid") == serving) line = Num(c, "mono_ns");
    }
    if (first_t0 < 0 || t0 < 0 || line < 0) Fatal(&run, "the plugin's calls log lacks its launch or handshake");
    to_fp.push_back(static_cast<double>(fp - first_t0) / 1e6);
    to_line.push_back(static_cast<double>(line - t0) / 1e6);
    // The baseline: outpost's own driver plugin on the same agent.
    std::string reg_name = "benchreg" + std::to_string(r);
    ::setenv(bench::kMarkerVar, run.dir.c_str(), 1);
    int64_t spawned = MonotonicNanos();
    run.plugin_pid = bench::SpawnDetached(
        {run.plugin, "--type", "TaskDriver", "--name", reg_name, "--dir", run.plugins, "--versions", "v1"},
        run.dir + "/plugin.stderr");
    ::unsetenv(bench::kMarkerVar);
    if (run.plugin_pid < 0) Fatal(&run, "fork failed");
    if (!TtrpcRegistered(&run, reg_name, 10 * kNanosPerSecond)) Fatal(&run, reg_name + " not registered within 10 s");
    to_reg.push_back(static_cast<double>(MonotonicNanos() - spawned) / 1e6);
    StopPid(&run.plugin_pid);
    bench::Info("round %d: %lld launches, first launch to fingerprinted %.1f ms (its handshake line at %.1f ms); "
                "the ttRPC driver plugin's fork to registered %.1f ms", r + 1, static_cast<long long>(launches),
                to_fp.back(), to_line.back(), to_reg.back());
    if (r + 1 < rounds) StopPid(&run.keeper);
  }

  // 3. Task start, on the last agent.
  ::setenv(bench::kMarkerVar, run.dir.c_str(), 1);
  run.plugin_pid = bench::SpawnDetached(
      {run.plugin, "--type", "TaskDriver", "--name", "benchdrv", "--dir", run.plugins, "--versions", "v1"},
      run.dir + "/plugin.stderr");
  ::unsetenv(bench::kMarkerVar);
  if (run.plugin_pid < 0) Fatal(&run, "fork failed");
  if (!TtrpcRegistered(&run, "benchdrv", 10 * kNanosPerSecond)) Fatal(&run, "benchdrv not registered within 10 s");
  size_t starts_before = 0;
  for (const auto& c : Calls(run.calls)) starts_before += Str(c, "rpc") == "StartTask";
  auto client = wire::BlockingClient::Connect(run.socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(&run, "connect: " + client.error().message());
  std::string tag = sys::Basename(run.dir).substr(20);
  std::vector<int64_t> nomad_ns, ext_ns;
  int seq = 0;
  auto start_one = [&](const std::string& driver) -> int64_t {
    std::string id = Format("n%s-%s-%04d", tag.c_str(), driver == "benchdrv" ? "x" : "n", seq);
    std::string stamp = run.dir + Format("/stamp-%d", seq++);
    auto req = bench::SubmitJobRequest(JobSpec(run, id, driver, stamp));
    run.job = id;
    int64_t t0 = MonotonicNanos();
    auto reply = client->Call(bench::kAgentService, "SubmitJob", req, 30 * kNanosPerSecond);
    if (!reply.ok()) Fatal(&run, "SubmitJob " + id + " (" + driver + "): " + reply.error().message());
    int64_t ts = bench::WaitStamp(stamp, 20 * kNanosPerSecond);
    if (ts < 0) Fatal(&run, "the helper did not write its timestamp (job " + id + ", driver " + driver + ")");
    auto gone = client->Call(bench::kAgentService, "RemoveJob", bench::JobIdRequest(id), 30 * kNanosPerSecond);
    if (!gone.ok()) Fatal(&run, "RemoveJob " + id + ": " + gone.error().message());
    run.job.clear();
    return ts - t0;
  };
  for (int i = 0; i < kWarmup + samples; ++i) {
    if (bench::g_interrupted) Fatal(&run, "interrupted");
    bool nomad_first = i % 2 == 0;
    int64_t a = start_one(nomad_first ? "benchnd" : "benchdrv");
    int64_t b = start_one(nomad_first ? "benchdrv" : "benchnd");
    if (i < kWarmup) continue;
    nomad_ns.push_back(nomad_first ? a : b);
    ext_ns.push_back(nomad_first ? b : a);
  }
  // The plugin's own StartTask times, in the order of the starts.
  std::vector<int64_t> took;
  size_t k = 0;
  for (const auto& c : Calls(run.calls)) {
    if (Str(c, "rpc") != "StartTask") continue;
    if (k++ >= starts_before + kWarmup) took.push_back(Num(c, "took_ns"));
  }
  std::vector<int64_t> less;
  if (took.size() == nomad_ns.size()) {
    for (size_t i = 0; i < took.size(); ++i) less.push_back(nomad_ns[i] - took[i]);
  } else {
    bench::Info("%zu StartTask calls in the plugin's log for %zu starts: no _less_plugin figure", took.size(),
                nomad_ns.size());
  }

  double rss_per = static_cast<double>(rssn - rss0) / nplugins;
  Print("agent_rss_per_nomad_plugin", rss_per, "KiB", "agent_rss_without_nomad_plugins", static_cast<double>(rss0));
  Print("nomad_plugin_start_to_fingerprinted", Median(to_fp), "ms", "ttrpc_plugin_start_to_registered",
        Median(to_reg));
  double ext50 = bench::PercentileMicros(ext_ns, 0.5), ext99 = bench::PercentileMicros(ext_ns, 0.99);
  Print("nomad_driver_task_start_p50", bench::PercentileMicros(nomad_ns, 0.5), "us", "task_start_external_driver_p50",
        ext50);
  Print("nomad_driver_task_start_p99", bench::PercentileMicros(nomad_ns, 0.99), "us",
        "task_start_external_driver_p99", ext99);
  if (!less.empty()) {
    Print("nomad_driver_task_start_less_plugin_p50", bench::PercentileMicros(less, 0.5), "us",
          "task_start_external_driver_p50", ext50);
    bench::Info("the plugin's own StartTask: p50 %.1f us", bench::PercentileMicros(took, 0.5));
  }
  bench::Info("%d samples each; worker RSS %ld KiB without Nomad plugins, %ld KiB with %d; %d agent starts",
              samples, rss0, rssn, nplugins, rounds);

  Cleanup(&run);
  return 0;
}
