// Kubelet device plugins hosted by the agent (issue 43; docs/benchmarks.md,
// "Device plugins"). The plugin is tests/helpers/devices/test_device_plugin.py,
// a device plugin written in Python (grpcio) that registers through
// <device_plugins_dir>/kubelet.sock and watches that dir as NVIDIA's plugin
// does. Python is slow: every figure compares outpost's side with a baseline
// of the same run that contains the same Python work (or measures the
// plugin's own calls directly), so the figures say what outpost costs around
// a plugin, not how fast a Go plugin would be.
//
//  1. Memory: the agent with no device plugin, its worker's settled RSS; then
//     (after 2.) with 10 resources registered, 4 devices each:
//       agent_rss_per_device_resource = (RSS with 10 - RSS with none) / 10
//  2. Registration: K plugins (resources example.com/regI, 4 devices each)
//     started while the agent is down; each serves its socket and waits for
//     kubelet.sock (its calls log says so). Then the agent starts: from the
//     moment kubelet.sock appears (inotify on the dir, IN_CREATE or
//     IN_MOVED_TO) until `outpost --json devices` lists all K resources
//     connected with their 4 devices healthy (asked in a loop; one CLI run
//     takes a few ms, which bounds the resolution). Each plugin restarts its
//     server and calls Register when it sees kubelet.sock made (the agent
//     dials it back inside Register and calls GetDevicePluginOptions, then
//     ListAndWatch). K = 1 and K = 10, --rounds rounds each, medians:
//       device_plugins_register_10 against device_plugins_register_1
//     Info lines split the 10-plugin figure: the plugins' own restart
//     (kubelet.sock seen -> Register sent) and Register's round trip (their
//     calls logs).
//  3. Task start, on the last agent, with one more plugin (resource
//     example.com/bench, 8 devices, no preferred allocation, no pre-start):
//     SubmitJob of a one-task job (`test_helper timestamp FILE`, restart
//     never) on an open API connection -> the helper's first instruction,
//     then RemoveJob; with `"resources": {"devices": {"example.com/bench": 1}}`
//     or without, alternating (which goes first alternates too), and one
//     Allocate round trip made by this process on the plugin's socket
//     (wire::GrpcClient, as the agent's client, after 2 ms idle), each round.
//     Before a start with a device, ListDevices (on the same connection)
//     must show one free (outside the timing). kWarmup rounds, then --samples:
//       device_task_start_budget = p50(no device) + p50(Allocate round trip) + 200 us
//       device_task_start_p50 against it (target ratio <= 1, targets.txt)
//
// Needs /usr/bin/python3 with grpc and grpc_tools (tools/deps.sh bench);
// without them it says so and prints nothing else. Clean-up, also on
// failure: RemoveJob of the job in flight, SIGTERM to the plugins and the
// keeper, a sweep of /proc for processes with the run's marker (the agent,
// its tasks and the plugins carry it), the temp dirs.
//
//   device_bench [--outpost PATH] [--helper PATH] [--plugin PATH]
//                [--samples N] [--rounds K]
// Paths default to ../outpost and ../test_helper next to this binary's dir
// and <repo>/tests/helpers/devices/test_device_plugin.py.
//
// Output:
//   BENCH device_task_start_p50 <us> us baseline=device_task_start_budget <us> ratio=<r>
//   BENCH device_task_start_p99 <us> us baseline=task_start_no_device_p99 <us> ratio=<r>
//   BENCH device_allocate_roundtrip_p50 <us> us baseline=task_start_no_device_p50 <us> ratio=<r>
//   BENCH device_plugins_register_10 <ms> ms baseline=device_plugins_register_1 <ms> ratio=<r>
//   BENCH agent_rss_per_device_resource <KiB> KiB baseline=agent_rss_without_device_plugins <KiB> ratio=<r>
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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "bench_util.h"
#include "devices/codec.h"
#include "devices_status.pb.h"
#include "loop/loop.h"
#include "wire/grpc_client.h"
#include "wire/rpc_client.h"

namespace outpost {
namespace {

using bench::Die;
using bench::Print;

constexpr int kWarmup = 3;
constexpr int kDevicesPerResource = 4;
constexpr int kBenchDevices = 8;
constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kBenchResource = "example.com/bench";
constexpr double kBudgetMicros = 200;  // what outpost may add to one Allocate round trip

struct Run {
  std::string outpost, helper, plugin, proto;
  std::string dir, rundir, socket, log, plugins, kubelet, dp_dir, reg_dir, stubs, stamps, marker;
  pid_t keeper = 0;
  std::vector<pid_t> plugin_pids;
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

void StopPlugins(Run* run) {
  for (pid_t p : run->plugin_pids) ::kill(p, SIGTERM);
  for (pid_t& p : run->plugin_pids) StopPid(&p);
  run->plugin_pids.clear();
}

void Cleanup(Run* run) {
  if (!run->job.empty() && !run->socket.empty()) {
    (void)bench::CallOnce(run->socket, "RemoveJob", bench::JobIdRequest(run->job), 15 * kNanosPerSecond);
  }
  StopPlugins(run);
  StopPid(&run->keeper);
  (void)bench::SweepMarker(run->marker);
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "device_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log);
  Cleanup(run);
  std::exit(1);
}

using bench::Json;
using bench::ShellQuote;

// The agent's config: the kubelet dirs under the run's dir, no Nomad
// plugins, no jobs dir.
void WriteConfig(Run* run) {
  std::string config = "{\"kubelet_plugins_dir\": " + Json(run->reg_dir) + ", \"device_plugins_dir\": " +
                       Json(run->dp_dir) + ", \"nomad_plugin_dir\": \"\", \"state_dir\": " +
                       Json(run->dir + "/state") + ", \"runtime_dir\": " + Json(run->rundir) +
                       ", \"plugins_dir\": " + Json(run->plugins) + ", \"log_file\": " + Json(run->log) +
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"api_idle_timeout\": \"10m\", "
                       "\"cgroup_root\": " + Json(run->dir + "/no-cgroup") + "}\n";
  Status st = sys::WriteFileAtomic(run->dir + "/agent.json", config, 0600);
  if (!st.ok()) Fatal(run, st.error().message());
}

// Starts the keeper (it, the worker and the tasks carry the run's marker).
void SpawnAgent(Run* run) {
  ::setenv(bench::kMarkerVar, run->dir.c_str(), 1);
  run->keeper = bench::SpawnDetached({run->outpost, "agent", "--config", run->dir + "/agent.json"},
                                     run->dir + "/agent.stderr");
  ::unsetenv(bench::kMarkerVar);
  if (run->keeper < 0) Fatal(run, "fork failed");
}

// The worker's pid once it answers Status.
pid_t WaitWorker(Run* run) {
  pid_t worker = bench::WaitForWorker(run->socket, 10 * kNanosPerSecond);
  if (worker <= 0) {
    auto err = sys::ReadFile(run->dir + "/agent.stderr", 1 << 16);
    Fatal(run, "the agent did not answer Status" + (err.ok() && !err->empty() ? ": " + *err : std::string()));
  }
  return worker;
}

std::string DeviceList(const char* prefix, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += Format("%s%s%d", out.empty() ? "" : ",", prefix, i);
  return out;
}

// A plugin registering through kubelet.sock; its calls log dir/NAME.calls
// (removed first).
void LaunchPlugin(Run* run, const std::string& name, const std::string& resource, const std::string& devices) {
  std::string calls = run->dir + "/" + name + ".calls";
  ::unlink(calls.c_str());
  ::setenv(bench::kMarkerVar, run->dir.c_str(), 1);
  pid_t pid = bench::SpawnDetached({kPython, run->plugin, "--dir", run->dp_dir, "--registry-dir", run->reg_dir,
                                    "--socket", name + ".sock", "--resource", resource, "--devices", devices,
                                    "--calls", calls, "--stubs", run->stubs, "--proto-dir", run->proto},
                                   run->dir + "/" + name + ".stderr");
  ::unsetenv(bench::kMarkerVar);
  if (pid < 0) Fatal(run, "fork failed");
  run->plugin_pids.push_back(pid);
}

using bench::Calls;
using bench::Num;
using bench::Str;
bool Logged(const std::string& path, const std::string& event) {
  for (const auto& c : Calls(path)) {
    if (Str(c, "event") == event) return true;
  }
  return false;
}

// What `outpost --json devices` says of one resource.
struct ResourceView {
  bool connected = false;
  int healthy = 0, free = 0;
};

// `outpost --json devices`, by resource name; an error with the CLI's
// output when it fails (an agent without device plugins has no such command).
Result<std::map<std::string, ResourceView>> Devices(const Run& run) {
  std::string cmd = ShellQuote(run.outpost) + " --socket " + ShellQuote(run.socket) + " --json devices 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return Error(Code::kInternal, std::string("popen: ") + std::strerror(errno));
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  if (st != 0) return Error(Code::kUnavailable, "outpost devices: " + out);
  picojson::value v;
  std::string err = picojson::parse(v, out);
  if (!err.empty() || !v.is<picojson::object>() || !v.get("resources").is<picojson::array>()) {
    return Error(Code::kInternal, "outpost --json devices: not the documented JSON: " + out.substr(0, 300));
  }
  std::map<std::string, ResourceView> res;
  for (const picojson::value& r : v.get("resources").get<picojson::array>()) {
    if (!r.get("name").is<std::string>()) continue;
    ResourceView view;
    view.connected = r.get("connected").is<bool>() && r.get("connected").get<bool>();
    if (r.get("devices").is<picojson::array>()) {
      for (const picojson::value& d : r.get("devices").get<picojson::array>()) {
        bool healthy = d.get("health").is<std::string>() && d.get("health").get<std::string>() == "healthy";
        const picojson::value& task = d.get("task");
        bool held = task.is<std::string>() && !task.get<std::string>().empty() && task.get<std::string>() != "-";
        view.healthy += healthy;
        view.free += healthy && !held;
      }
    }
    res[r.get("name").get<std::string>()] = view;
  }
  return res;
}

// Free healthy devices of resource, asked with ListDevices on the bench's
// open API connection (no CLI process is spawned just before a timed start);
// -1 when the call fails.
int FreeDevices(wire::BlockingClient* client, const std::string& resource) {
  auto reply = client->Call(bench::kAgentService, "ListDevices", "", 10 * kNanosPerSecond);
  if (!reply.ok()) return -1;
  PbOwned<outpost_v1_ListDevicesResponse> resp(outpost_v1_ListDevicesResponse_fields);
  if (!resp.Decode(*reply, "ListDevicesResponse").ok()) return -1;
  int free = 0;
  for (pb_size_t i = 0; i < resp->resources_count; ++i) {
    const outpost_v1_DeviceResource& r = resp->resources[i];
    if (PbString(r.name) != resource) continue;
    for (pb_size_t j = 0; j < r.devices_count; ++j) free += r.devices[j].healthy && PbString(r.devices[j].task).empty();
  }
  return free;
}

// Until every resource of names is connected with `healthy` healthy
// devices; the time then.
int64_t WaitListed(Run* run, const std::vector<std::string>& names, int healthy, int64_t timeout_nanos) {
  int64_t end = MonotonicNanos() + timeout_nanos;
  std::string last = "nothing asked";
  while (!bench::g_interrupted && MonotonicNanos() < end) {
    auto d = Devices(*run);
    if (!d.ok()) {
      last = d.error().message();
    } else {
      size_t n = 0;
      for (const std::string& name : names) {
        auto it = d->find(name);
        n += it != d->end() && it->second.connected && it->second.healthy == healthy;
      }
      if (n == names.size()) return MonotonicNanos();
      last = Format("%zu of %zu resources listed", n, names.size());
    }
    ::usleep(2000);
  }
  Fatal(run, bench::g_interrupted ? "interrupted"
                                  : "the device plugins were not listed within " +
                                        std::to_string(timeout_nanos / kNanosPerSecond) +
                                        " s (does this agent host device plugins? issue 43): " + last);
}

// Until the plugin's calls log says it serves and waits for kubelet.sock.
void WaitWaiting(Run* run, const std::string& name) {
  std::string calls = run->dir + "/" + name + ".calls";
  int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;
  while (!bench::g_interrupted && MonotonicNanos() < end) {
    if (Logged(calls, "waiting_for_kubelet")) return;
    ::usleep(20000);
  }
  Fatal(run, "plugin " + name + " did not get to wait for kubelet.sock within 60 s (its log: " + run->dir + "/" +
                 name + ".stderr)");
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct RegisterRound {
  double ms = 0;
  std::vector<double> own_us, register_us;  // per plugin
};

// K plugins waiting, then the agent: kubelet.sock appears -> all K listed.
// The agent is left running.
RegisterRound Register(Run* run, int k) {
  std::string ksock = run->dp_dir + "/kubelet.sock";
  ::unlink(ksock.c_str());  // a stale one from the last agent: the plugins wait for a new one
  std::vector<std::string> names, resources;
  for (int i = 1; i <= k; ++i) {
    names.push_back(Format("reg%d", i));
    resources.push_back(Format("example.com/reg%d", i));
    LaunchPlugin(run, names.back(), resources.back(), DeviceList("d", kDevicesPerResource));
  }
  for (const std::string& n : names) WaitWaiting(run, n);
  UniqueFd in(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (in.get() < 0 || ::inotify_add_watch(in.get(), run->dp_dir.c_str(), IN_CREATE | IN_MOVED_TO) < 0) {
    Fatal(run, "inotify on " + run->dp_dir + ": " + std::strerror(errno));
  }
  SpawnAgent(run);
  int64_t t0 = -1, end = MonotonicNanos() + 10 * kNanosPerSecond;
  while (t0 < 0 && !bench::g_interrupted && MonotonicNanos() < end) {
    pollfd p = {in.get(), POLLIN, 0};
    (void)::poll(&p, 1, 100);
    char buf[4096] __attribute__((aligned(alignof(inotify_event))));
    ssize_t len = ::read(in.get(), buf, sizeof buf);
    int64_t now = MonotonicNanos();
    for (ssize_t i = 0; len > 0 && i < len;) {
      auto* e = reinterpret_cast<inotify_event*>(buf + i);
      if (e->len && std::strcmp(e->name, "kubelet.sock") == 0) t0 = now;
      i += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  if (t0 < 0) Fatal(run, "the agent did not make " + ksock + " within 10 s");
  int64_t t1 = WaitListed(run, resources, kDevicesPerResource, 60 * kNanosPerSecond);
  RegisterRound r;
  r.ms = static_cast<double>(t1 - t0) / 1e6;
  for (const std::string& n : names) {
    int64_t seen = -1, sent = -1, took = -1;
    for (const auto& c : Calls(run->dir + "/" + n + ".calls")) {
      if (Str(c, "event") == "restart" && Str(c, "why") == "kubelet.sock created" && Num(c, "mono_ns") >= t0 &&
          seen < 0) {
        seen = Num(c, "mono_ns");
      }
      auto ok = c.find("ok");
      if (Str(c, "event") == "register" && ok != c.end() && ok->second.is<bool>() && ok->second.get<bool>() &&
          seen >= 0 && sent < 0) {
        took = Num(c, "took_ns");
        sent = Num(c, "mono_ns") - took;
      }
    }
    if (seen >= 0 && sent >= 0) {
      r.own_us.push_back(static_cast<double>(sent - seen) / 1e3);
      r.register_us.push_back(static_cast<double>(took) / 1e3);
    }
  }
  return r;
}

// Allocate on a plugin's socket through outpost's gRPC client, as the
// agent calls it: the round trip, or an error.
class AllocateProbe {
 public:
  std::string Connect(const std::string& socket) {
    auto loop = Loop::Create();
    if (!loop.ok()) return loop.error().message();
    loop_ = std::move(*loop);
    auto c = wire::GrpcClient::Connect(loop_.get(), socket);
    if (!c.ok()) return c.error().message();
    client_ = std::move(*c);
    return "";
  }
  Result<int64_t> Once(const std::string& device) {
    std::string req = devices::EncodeAllocateRequest({device});
    bool done = false;
    Result<std::string> reply = Error(Code::kInternal, "no reply");
    int64_t t0 = MonotonicNanos(), t1 = 0;
    client_->Call("v1beta1.DevicePlugin", "Allocate", req, 10 * kNanosPerSecond, [&](Result<std::string> r) {
      t1 = MonotonicNanos();
      reply = std::move(r);
      done = true;
    });
    while (!done) (void)loop_->RunOnce(100 * kNanosPerMilli);
    if (!reply.ok()) return reply.error();
    auto resp = devices::DecodeAllocateResponse(*reply);
    if (!resp.ok()) return resp.error();
    return t1 - t0;
  }

 private:
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<wire::GrpcClient> client_;
};

std::string JobSpec(const Run& run, const std::string& id, bool device, const std::string& stamp) {
  std::string task = "{\"name\": \"t\", \"command\": " + Json(run.helper) + ", \"args\": [\"timestamp\", " +
                     Json(stamp) + "], \"env\": {" + Json(bench::kMarkerVar) + ": " + Json(run.dir) + "}";
  if (device) task += ", \"resources\": {\"devices\": {" + Json(kBenchResource) + ": 1}}";
  return "{\"id\": " + Json(id) + ", \"restart\": {\"policy\": \"never\"}, \"tasks\": [" + task + "}]}";
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) {
  using namespace outpost;
  bench::Name() = "device_bench";
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  Run run;
  int samples = 40, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--outpost") run.outpost = v;
    else if (a == "--helper") run.helper = v;
    else if (a == "--plugin") run.plugin = v;
    else if (a == "--samples") samples = std::max(1, std::atoi(v.c_str()));
    else if (a == "--rounds") rounds = std::max(1, std::atoi(v.c_str()));
    else Die("usage", "device_bench [--outpost PATH] [--helper PATH] [--plugin PATH] [--samples N] [--rounds K]");
  }
  std::string found = bench::FindBinaries(&run.outpost, &run.helper);
  if (!found.empty()) Die("binaries", found);
  std::string root = sys::Dirname(sys::Dirname(run.helper));  // build/test_helper -> the repository
  if (run.plugin.empty()) run.plugin = root + "/tests/helpers/devices/test_device_plugin.py";
  run.proto = sys::Dirname(sys::Dirname(sys::Dirname(sys::Dirname(run.plugin)))) + "/proto";
  if (::access(run.plugin.c_str(), R_OK) != 0) Die("binaries", run.plugin + " not found (--plugin PATH)");
  std::string probe = std::string(kPython) + " -c 'import grpc, grpc_tools.protoc' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    bench::Info("skipped: %s cannot import grpc and grpc_tools (python3-grpcio, python3-grpc-tools: "
                "tools/deps.sh bench)", kPython);
    return 0;
  }

  const char* tmpdir = std::getenv("TMPDIR");
  run.dir = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/outpost-device-bench-XXXXXX";
  if (!::mkdtemp(&run.dir[0])) Die("mkdtemp", run.dir);
  run.marker = std::string(bench::kMarkerVar) + "=" + run.dir;
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.plugins = run.rundir + "/plugins";
  run.kubelet = run.dir + "/kubelet";
  run.dp_dir = run.kubelet + "/device-plugins";
  run.reg_dir = run.kubelet + "/plugins_registry";
  run.stubs = run.dir + "/stubs";
  run.stamps = run.dir + "/stamps";
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  if (::mkdir(run.plugins.c_str(), 0700) != 0 || ::mkdir(run.stamps.c_str(), 0700) != 0) Fatal(&run, "mkdir");
  // The stubs, generated once: the plugins take them from there.
  std::string gen = std::string(kPython) + " -m grpc_tools.protoc -I" + ShellQuote(run.proto) + " --python_out=" +
                    ShellQuote(run.stubs) + " --grpc_python_out=" + ShellQuote(run.stubs) + " " +
                    ShellQuote(run.proto + "/deviceplugin.proto") + " " + ShellQuote(run.proto + "/pluginregistration.proto");
  if (::mkdir(run.stubs.c_str(), 0755) != 0 || std::system((gen + " >/dev/null 2>&1").c_str()) != 0) {
    Fatal(&run, "generating the stubs failed: " + gen);
  }
  WriteConfig(&run);

  // 1. Memory without device plugins (the agent makes the kubelet dirs).
  SpawnAgent(&run);
  pid_t worker = WaitWorker(&run);
  if (auto d = Devices(run); !d.ok()) Fatal(&run, d.error().message() + " (does this agent host device plugins? issue 43)");
  long rss0 = bench::SettledRssKiB(worker, 3000);
  bench::DescribeMemory("worker, no device plugin", worker);
  StopPid(&run.keeper);

  // 2. Registration of 1 and of 10 plugins, started while the agent is down.
  std::vector<double> one, ten, own, reg;
  for (int r = 0; r < rounds; ++r) {
    for (int k : {1, 10}) {
      RegisterRound rr = Register(&run, k);
      (k == 1 ? one : ten).push_back(rr.ms);
      if (k == 10) {
        own.insert(own.end(), rr.own_us.begin(), rr.own_us.end());
        reg.insert(reg.end(), rr.register_us.begin(), rr.register_us.end());
      }
      bench::Info("round %d: %d plugin%s registered and listed in %.1f ms after kubelet.sock appeared", r + 1, k,
                  k == 1 ? "" : "s", rr.ms);
      if (r + 1 == rounds && k == 10) break;  // the last agent, with 10 resources, stays
      StopPlugins(&run);
      StopPid(&run.keeper);
    }
  }
  worker = WaitWorker(&run);
  long rss10 = bench::SettledRssKiB(worker, 3000);
  bench::DescribeMemory("worker, 10 device plugin resources", worker);

  // 3. Task start with one device and without, on that agent.
  LaunchPlugin(&run, "bench", kBenchResource, DeviceList("b", kBenchDevices));
  WaitListed(&run, {kBenchResource}, kBenchDevices, 60 * kNanosPerSecond);
  AllocateProbe allocate;
  std::string err = allocate.Connect(run.dp_dir + "/bench.sock");
  if (!err.empty()) Fatal(&run, "connect to the plugin: " + err);
  auto client = wire::BlockingClient::Connect(run.socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(&run, "connect: " + client.error().message());
  bench::StampWatch watch;
  if (std::string w = watch.Watch(run.stamps); !w.empty()) Fatal(&run, w);
  std::string tag = sys::Basename(run.dir).substr(21);
  std::vector<int64_t> dev_ns, none_ns, rtt_ns;
  int seq = 0;
  auto start_one = [&](bool device) -> int64_t {
    if (device) {  // a free device (the last task's is freed when it is removed)
      int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;
      for (;;) {
        if (FreeDevices(&*client, kBenchResource) >= 1) break;
        if (MonotonicNanos() > end) Fatal(&run, "no free device 10 s after the last task was removed");
        ::usleep(2000);
      }
    }
    std::string id = Format("d%s-%s-%04d", tag.c_str(), device ? "d" : "n", seq);
    std::string stamp = run.stamps + Format("/stamp-%d", seq++);
    auto req = bench::SubmitJobRequest(JobSpec(run, id, device, stamp));
    run.job = id;
    watch.Drain();
    int64_t t0 = MonotonicNanos();
    auto reply = client->Call(bench::kAgentService, "SubmitJob", req, 30 * kNanosPerSecond);
    if (!reply.ok()) Fatal(&run, "SubmitJob " + id + ": " + reply.error().message());
    int64_t ts = watch.Wait(stamp, MonotonicNanos() + 20 * kNanosPerSecond);
    if (ts < 0) Fatal(&run, "the helper did not write its timestamp (job " + id + (device ? ", with a device)" : ")"));
    auto gone = client->Call(bench::kAgentService, "RemoveJob", bench::JobIdRequest(id), 30 * kNanosPerSecond);
    if (!gone.ok()) Fatal(&run, "RemoveJob " + id + ": " + gone.error().message());
    run.job.clear();
    return ts - t0;
  };
  for (int i = 0; i < kWarmup + samples; ++i) {
    if (bench::g_interrupted) Fatal(&run, "interrupted");
    bool device_first = i % 2 == 0;
    int64_t a = start_one(device_first);
    int64_t b = start_one(!device_first);
    ::usleep(2000);  // the plugin idle, as between two starts
    auto rtt = allocate.Once(Format("b%d", kBenchDevices - 1));
    if (!rtt.ok()) Fatal(&run, "Allocate on the plugin: " + rtt.error().message());
    if (i < kWarmup) continue;
    dev_ns.push_back(device_first ? a : b);
    none_ns.push_back(device_first ? b : a);
    rtt_ns.push_back(*rtt);
  }

  double none50 = bench::PercentileMicros(none_ns, 0.5), rtt50 = bench::PercentileMicros(rtt_ns, 0.5);
  double budget = none50 + rtt50 + kBudgetMicros;
  Print("device_task_start_p50", bench::PercentileMicros(dev_ns, 0.5), "us", "device_task_start_budget", budget);
  Print("device_task_start_p99", bench::PercentileMicros(dev_ns, 0.99), "us", "task_start_no_device_p99",
        bench::PercentileMicros(none_ns, 0.99));
  Print("device_allocate_roundtrip_p50", rtt50, "us", "task_start_no_device_p50", none50);
  Print("device_plugins_register_10", Median(ten), "ms", "device_plugins_register_1", Median(one));
  Print("agent_rss_per_device_resource", static_cast<double>(rss10 - rss0) / 10, "KiB",
        "agent_rss_without_device_plugins", static_cast<double>(rss0));
  bench::Info("budget = task_start_no_device_p50 %.1f us + Allocate round trip p50 %.1f us + %.0f us", none50, rtt50,
              kBudgetMicros);
  if (!own.empty()) {
    bench::Info("10 plugins: a plugin's own restart (kubelet.sock seen -> Register sent) p50 %.1f ms; Register's "
                "round trip (the agent dials back, GetDevicePluginOptions) p50 %.1f ms",
                Median(own) / 1e3, Median(reg) / 1e3);
  }
  bench::Info("%d samples each; worker RSS %ld KiB without device plugins, %ld KiB with 10 resources of %d devices; "
              "%d rounds of registration", samples, rss0, rss10, kDevicesPerResource, rounds);
  Cleanup(&run);
  return 0;
}
