// Plugin registration benchmark: the time from a plugin socket appearing in
// the plugins dir (renamed into place, as the plugin library does) to the
// agent side having it registered (plugin/watcher + plugin/registry: the
// inotify event, connect and peer check, GetInfo, Validate, the monitored
// connection, Register, NotifyRegistrationStatus). Measured one plugin at a
// time (p50) and with 100 plugins appearing at once (p50, p99 over the 100).
// Baseline, in the same run: one connect + one ttRPC call to the same kind
// of socket (the protocol's smallest step; registration takes three calls
// and two connects).
//
// The plugins run in a forked process with one Loop serving every socket;
// this process is the agent side. Output:
//   BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/sys.h"
#include "bench_util.h"
#include "loop/loop.h"
#include "plugin/registry.h"
#include "plugin/watcher.h"
#include "pluginregistration.pb.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"

namespace outpost {
namespace {

using bench::Die;
using bench::OrDie;
using bench::Print;

constexpr int kPlugins = 100;
constexpr int kSequential = 30;

// ---- the plugins' process ----------------------------------------------------

// Serves the registration service on every socket it makes. Commands on
// cmd_fd: 'o' = make one socket, 'b' = make kPlugins at once; for each
// socket it writes the CLOCK_MONOTONIC time of its rename into place to
// stamp_fd (8 bytes). Exits when cmd_fd closes.
void RunPlugins(const std::string& dir, const std::string& scratch, int cmd_fd, int stamp_fd) {
  log::SetLevel(log::Level::kError);
  auto loop = OrDie(Loop::Create(), "loop");
  std::vector<std::unique_ptr<wire::RpcServer>> servers;
  int n = 0;
  auto make = [&]() {
    std::string name = "p" + std::to_string(n++);
    std::string tmp = scratch + "/" + name + ".sock", path = dir + "/" + name + ".sock";
    auto fd = OrDie(sys::UnixListen(tmp, 128), "listen");
    wire::ServerOptions o;
    o.idle_timeout_nanos = 0;
    auto srv = OrDie(wire::RpcServer::Create(loop.get(), std::move(fd), o), "server");
    srv->Register(plugin::kRegistrationService, "GetInfo",
                  [name](const wire::CallContext&, std::string_view, wire::Responder r) {
                    static char v1[] = "v1";
                    char* versions[] = {v1};
                    pluginregistration_PluginInfo m = pluginregistration_PluginInfo_init_zero;
                    m.type = const_cast<char*>("Bench");
                    m.name = PbStr(name);
                    m.supported_versions_count = 1;
                    m.supported_versions = versions;
                    r.Finish(PbEncode(pluginregistration_PluginInfo_fields, &m, "PluginInfo"));
                  });
    srv->Register(plugin::kRegistrationService, "NotifyRegistrationStatus",
                  [](const wire::CallContext&, std::string_view, wire::Responder r) { r.Reply(""); });
    servers.push_back(std::move(srv));
    int64_t t = MonotonicNanos();
    if (::rename(tmp.c_str(), path.c_str()) != 0) Die("rename", path);
    if (::write(stamp_fd, &t, sizeof t) != sizeof t) Die("write", "stamp");
  };
  auto cmd = OrDie(LoopFd::Watch(loop.get(), UniqueFd(::dup(cmd_fd)), EPOLLIN, [&](uint32_t) {
                     char c = 0;
                     ssize_t r = ::read(cmd_fd, &c, 1);
                     if (r <= 0) return loop->Stop();
                     if (c == 'o') make();
                     if (c == 'b') {
                       for (int i = 0; i < kPlugins; ++i) make();
                     }
                   }),
                   "watch");
  (void)loop->Run();
  ::_exit(0);
}

// ---- the agent side -------------------------------------------------------------

class AcceptAll : public plugin::Handler {
 public:
  const char* type() const override { return "Bench"; }
  Result<std::string> Validate(const plugin::Info&) override { return std::string("v1"); }
  void Register(const plugin::Instance&, std::function<void(Status)> done) override { done(OkStatus()); }
};

int64_t ReadStamp(int fd) {
  int64_t t = 0;
  if (::read(fd, &t, sizeof t) != sizeof t) Die("read", "stamp");
  return t;
}

}  // namespace
}  // namespace outpost

int main() {
  using namespace outpost;
  bench::Name() = "plugin_bench";
  log::SetLevel(log::Level::kError);
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmp = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/outpost-plugin-bench-XXXXXX";
  if (!::mkdtemp(&tmp[0])) Die("mkdtemp", tmp);
  // Where the plugins dir is on a node: the runtime dir (tmpfs).
  std::string root = bench::MakeRuntimeDir(tmp);
  std::string dir = root + "/plugins", scratch = root + "/scratch";
  if (::mkdir(dir.c_str(), 0700) != 0 || ::mkdir(scratch.c_str(), 0700) != 0) Die("mkdir", root);
  int cmd[2], stamps[2];
  if (::pipe2(cmd, O_CLOEXEC) != 0 || ::pipe2(stamps, O_CLOEXEC) != 0) Die("pipe", "");
  pid_t child = ::fork();
  if (child == 0) {
    ::close(cmd[1]);
    ::close(stamps[0]);
    RunPlugins(dir, scratch, cmd[0], stamps[1]);
  }
  ::close(cmd[0]);
  ::close(stamps[1]);

  auto loop = OrDie(Loop::Create(), "loop");
  std::map<std::string, int64_t> registered;  // socket -> monotonic time
  plugin::RegistryOptions ro;
  ro.on_event = [&](const plugin::Event& e) {
    if (e.kind == "registered") registered[e.socket] = MonotonicNanos();
  };
  plugin::Registry registry(loop.get(), ro);
  AcceptAll handler;
  if (!registry.AddHandler(&handler).ok()) Die("handler", "");
  plugin::WatcherOptions wo;
  wo.dir = dir;
  auto watcher = OrDie(plugin::Watcher::Start(loop.get(), &registry, wo), "watcher");
  auto run_until = [&](size_t n) {
    int64_t deadline = MonotonicNanos() + 30 * kNanosPerSecond;
    while (registered.size() < n) {
      if (MonotonicNanos() > deadline) Die("timeout", "plugins not registered");
      (void)loop->RunOnce(10 * kNanosPerMilli);
    }
  };

  // One at a time.
  std::vector<int64_t> one;
  for (int i = 0; i < kSequential; ++i) {
    if (::write(cmd[1], "o", 1) != 1) Die("write", "cmd");
    int64_t made = ReadStamp(stamps[0]);
    run_until(registered.size() + 1);
    int64_t done = 0;
    for (const auto& [path, t] : registered) done = std::max(done, t);
    one.push_back(done - made);
  }
  // The baseline: connect + one call, to the last socket made.
  std::string last = dir + "/p" + std::to_string(kSequential - 1) + ".sock";
  std::vector<int64_t> base;
  for (int i = 0; i < kSequential; ++i) {
    int64_t t0 = MonotonicNanos();
    auto client = OrDie(wire::BlockingClient::Connect(last, kNanosPerSecond), "connect");
    auto r = client.Call(plugin::kRegistrationService, "GetInfo", "", kNanosPerSecond);
    if (!r.ok()) Die("GetInfo", r.error().message());
    base.push_back(MonotonicNanos() - t0);
  }
  // 100 at once.
  size_t before = registered.size();
  if (::write(cmd[1], "b", 1) != 1) Die("write", "cmd");
  std::map<std::string, int64_t> made;
  for (int i = 0; i < kPlugins; ++i) made[dir + "/p" + std::to_string(kSequential + i) + ".sock"] = ReadStamp(stamps[0]);
  run_until(before + kPlugins);
  std::vector<int64_t> burst;
  for (const auto& [path, t] : made) burst.push_back(registered.at(path) - t);
  // Its baseline: one connect + one call to each of those 100 sockets, one
  // after the other (the agent makes two connects and three calls each).
  int64_t t100 = MonotonicNanos();
  for (const auto& [path, t] : made) {
    auto client = OrDie(wire::BlockingClient::Connect(path, kNanosPerSecond), "connect");
    auto r = client.Call(plugin::kRegistrationService, "GetInfo", "", kNanosPerSecond);
    if (!r.ok()) Die("GetInfo", r.error().message());
  }
  double base_100 = static_cast<double>(MonotonicNanos() - t100) / 1000.0;

  double base_p50 = bench::PercentileMicros(base, 0.5);
  Print("plugin_register_p50", bench::PercentileMicros(one, 0.5), "us", "connect_call_p50", base_p50);
  Print("plugin_register_100_at_once_p50", bench::PercentileMicros(burst, 0.5), "us", "connect_call_100", base_100);
  Print("plugin_register_100_at_once_p99", bench::PercentileMicros(burst, 0.99), "us", "connect_call_100", base_100);

  ::close(cmd[1]);
  int st = 0;
  ::waitpid(child, &st, 0);
  watcher.reset();
  bench::RemoveTree(root);
  bench::RemoveTree(tmp);
  return 0;
}
