// The cost of a job network (docs/networking.md) on a job's start and
// removal, through the real agent binary (keeper + worker) and the real CNI
// plugins of Debian's containernetworking-plugins (/usr/lib/cni), against
// the same plugins run directly by a minimal runner in the same run.
//
// Isolation: the bench first moves itself into a network namespace and a
// mount namespace of its own (unshare(CLONE_NEWNET | CLONE_NEWNS), "/" made
// private, loopback up), so the agent it starts, the plugins and every
// iptables rule, bridge and veth they make live there and go with it: the
// host's network is never touched.
//
// Rounds of three, alternating (which goes first rotates each round):
//  (a) SubmitJob of a host-mode job with one task `test_helper stamp-exec
//      FILE test_helper sleep 1000`, then RemoveJob;
//  (b) the same job with "network": {"mode": "bridge", "ports": [{"label":
//      "p", "static": 18080, "to": 80}]}, then RemoveJob;
//  (r) the minimal runner, in this process: a namespace pinned as the agent
//      pins one (net::PinNewNetns in the agent's netns_dir), then each
//      plugin of the built-in bridge conflist (net::BridgeNetworkListOrDie
//      with the options the agent uses: network "outpost", bridge outpost0,
//      subnet 10.46.0.0/20, admin chain OUTPOST-ADMIN, host-local's dataDir
//      the agent's own, <runtime_dir>/cni/networks) exec'd with plain fork +
//      execve + pipes, no loop: the same environment (net::PluginEnvironment)
//      and the same stdin (net::PluginStdin: prevResult chained from the
//      previous plugin's stdout, runtimeConfig.portMappings as the agent
//      sends them), ADD in order; then DEL in reverse with the final result,
//      and the namespace unpinned. Its container id differs from the jobs'
//      ("outpost-c<tag>-rNNN" against "outpost-c<tag>-bNNN"), so host-local
//      reservations never clash; nothing overlaps, the three run one after
//      the other.
//
// Job start is the time from sending SubmitJob (on an open API connection)
// to the task's first instruction: `stamp-exec` writes CLOCK_MONOTONIC to
// FILE at the start of its main, then execs the sleep; the bench waits for
// FILE asleep in poll on an inotify watch, so that during a start it takes
// no CPU from the agent and the plugins (a look every 200 us, as
// bench::WaitStamp does, would: the runner's plugins would not pay it, and
// this machine has 2 cores). For the bridge job
// that includes pinning the namespace, the plugins' VERSION answers (cached
// after the first start), the result cache written before and after ADD,
// the ADD itself and the task joining the namespace before its exec.
// Removal is RemoveJob sent -> its reply, which comes once the task has
// stopped and, for the bridge job, CNI DEL has run and the namespace is
// unpinned. The runner's ADD is pin + the four plugin ADDs, its DEL the four
// plugin DELs + unpin: what any runtime must do for such a job, so the
// difference is what outpost adds. The figures:
//   cni_bridge_job_start_p50 against p50 host job start + p50 direct ADD
//     (target 1.05: outpost adds at most 5%);
//   cni_add_p50 = p50 bridge start - p50 host start, against the direct
//     ADD's p50; cni_add_p99 = p99 of the per-round differences (bridge start
//     - host start of the same round), against the direct ADD's p99;
//   cni_del_p50 / cni_del_p99 the same with RemoveJob and the direct DEL;
//   cni_bridge_vs_host_job_start_p50: what a bridge network costs a start.
// The agent's own measure of its ADD (its "network bridge ready: ... in N
// ms (plugin N ms, ...)" event, whole milliseconds) is given as an info
// line next to the runner's per plugin, to tell plugins that run slower
// under the agent from overhead around them.
//
// The agent runs `iptables -N/-C` for its admin chain once per agent run,
// before its first bridge ADD, and probes each plugin's VERSION once: the 2
// warm-up rounds take both out of the timed ones. Between rounds each start
// is checked outside the timing (InspectJob: the task running with a pid;
// for the bridge job, the task in the job's pinned namespace, and the
// namespace gone after RemoveJob), and the bench waits until the worker has
// no child left (a plugin or a task still running would be one).
//
// Everything lives in a temporary dir (config, state, agent log, netns_dir,
// an empty cni_config_dir; the runtime dir on tmpfs as on a node,
// MakeRuntimeDir); hooks_dirs and hook_path point at empty dirs in it, so no
// hook of the host applies. Tasks carry OUTPOST_BENCH_RUN=<that dir> so that
// leftovers can be found and killed. Clean-up, also on failure and on
// SIGINT/SIGTERM: the runner's attachment DEL'd and unpinned, RemoveJob
// through the API, SIGTERM to the keeper, then a sweep of /proc for
// leftovers.
//
// Needs root, the plugins loopback, bridge, firewall, portmap and host-local
// in /usr/lib/cni and iptables in PATH; without them it says why on stderr
// ("cni_bench: skipped: ...") and exits 0.
//
//   cni_bench [--outpost PATH] [--helper PATH] [--rounds N]
// N timed rounds (default 21) after 2 warm-up rounds. Paths default to
// ../outpost and ../test_helper next to this binary's dir.
//
// Output:
//   BENCH cni_bridge_job_start_p50 <us> us baseline=cni_direct_add_plus_host_job_start_p50 <us> ratio=<r>
//   BENCH cni_add_p50 <us> us baseline=cni_direct_add_p50 <us> ratio=<r>
//   BENCH cni_add_p99 <us> us baseline=cni_direct_add_p99 <us> ratio=<r>
//   BENCH cni_del_p50 <us> us baseline=cni_direct_del_p50 <us> ratio=<r>
//   BENCH cni_del_p99 <us> us baseline=cni_direct_del_p99 <us> ratio=<r>
//   BENCH cni_bridge_vs_host_job_start_p50 <us> us baseline=host_job_start_p50 <us> ratio=<r>
// plus "cni_bench:" lines with the absolute values and sample counts.
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <picojson.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent.pb.h"
#include "base/clock.h"
#include "base/fd.h"
#include "base/json.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "job.pb.h"
#include "net/bridge.h"
#include "net/cni_config.h"
#include "net/cni_exec.h"
#include "net/netns.h"
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

constexpr int kWarmup = 2;
constexpr const char* kPluginDir = "/usr/lib/cni";
constexpr const char* kPlugins[] = {"loopback", "bridge", "firewall", "portmap", "host-local"};
constexpr int kHostPort = 18080;
constexpr int kContainerPort = 80;

struct Run {
  std::string outpost, helper, dir, rundir, tag, config, socket, log, marker, netns_dir;
  pid_t keeper = 0;
  pid_t worker = 0;
  std::set<std::string> jobs;  // submitted, not removed yet
  // The runner's: the conflist, how it calls the plugins, its attachment
  // while one exists (the result is null until ADD succeeded).
  net::NetworkList list;
  std::vector<std::string> binaries;  // per plugin of list
  net::Attachment direct;
  picojson::value direct_result;
  bool direct_pinned = false;
  bench::StampWatch stamps;  // <dir>/stamps
  bool failed = false;
  bool cleaned = false;
};

void Cleanup(Run* run);
void DirectDel(Run* run, std::vector<int64_t>* per_plugin, bool fatal);

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "cni_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log, sys::Dirname(run->dir) + "/outpost-cni-bench-failed.log");
  Cleanup(run);
  std::exit(1);
}

void Cleanup(Run* run) {
  if (run->cleaned) return;
  run->cleaned = true;
  if (run->direct_pinned) DirectDel(run, nullptr, false);
  if (run->keeper > 0 && !bench::RemoveJobsForCleanup(run->socket, &run->jobs, 60 * kNanosPerSecond)) run->failed = true;
  if (!bench::StopKeeper(&run->keeper)) run->failed = true;
  bench::KillOwnWorker(run->worker, run->config);
  if (!bench::SweepMarker(run->marker)) run->failed = true;
  // netns_dir is a mount point (PinNewNetns makes it a shared one), with
  // any pin left below it: detached first, or the tree cannot go. Only in
  // our own mount namespace, which goes with this process anyway.
  if (!run->netns_dir.empty()) ::umount2(run->netns_dir.c_str(), MNT_DETACH);
  if (!run->rundir.empty() && run->rundir.compare(0, run->dir.size() + 1, run->dir + "/") != 0) {
    bench::RemoveTree(run->rundir);
  }
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

std::string JsonString(const std::string& s) { return picojson::value(s).serialize(); }

// ---- isolation and prerequisites ---------------------------------------------

// Why this machine cannot run the bench ("" when it can).
std::string Missing() {
  if (::geteuid() != 0) return "needs root (network namespaces, the CNI plugins' work)";
  std::string absent;
  for (const char* p : kPlugins) {
    if (::access((std::string(kPluginDir) + "/" + p).c_str(), X_OK) != 0) absent += std::string(" ") + p;
  }
  if (!absent.empty()) {
    return "CNI plugins not in " + std::string(kPluginDir) + ":" + absent + " (Debian package containernetworking-plugins)";
  }
  const char* path = std::getenv("PATH");
  for (const std::string& d : Split(path ? path : "", ':')) {
    if (!d.empty() && ::access((d + "/iptables").c_str(), X_OK) == 0) return "";
  }
  return "no iptables in PATH (the bridge and portmap plugins need it)";
}

// This process (and so the agent, the plugins, the tasks) into a network
// namespace of its own with loopback up, and a mount namespace whose mounts
// (the pins, netns_dir made shared) stay in it.
std::string Isolate() {
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) return std::string("unshare: ") + std::strerror(errno);
  if (::mount("", "/", nullptr, MS_PRIVATE | MS_REC, nullptr) != 0) {
    return std::string("mount --make-rprivate /: ") + std::strerror(errno);
  }
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return std::string("socket: ") + std::strerror(errno);
  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  int rc = ::ioctl(s, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    rc = ::ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  int err = errno;
  ::close(s);
  return rc == 0 ? "" : std::string("bring up lo: ") + std::strerror(err);
}

// ---- the minimal runner --------------------------------------------------------

// One plugin call: fork + execve of binary with env, stdin written then
// closed, stdout and stderr read to EOF (poll, so a chatty plugin cannot
// block), waitpid. Returns stdout; an error with the plugin's output when it
// does not exit 0.
Result<std::string> ExecPlugin(const std::string& binary, const std::vector<std::string>& env,
                               const std::string& input) {
  std::vector<char*> envp;
  for (const std::string& kv : env) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(binary.c_str()), nullptr};
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  if (::pipe2(err, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoError("fork");
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::signal(SIGPIPE, SIG_DFL);  // the bench ignores it; a plugin starts as from a shell
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  // A stdin of a few KiB fits the pipe: written whole before reading.
  (void)sys::WriteAll(in[1], input.data(), input.size(), "plugin stdin");
  ::close(in[1]);
  std::string text[2];
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        text[i].append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    return Error(Code::kInternal, Format("%s: status %d: %s%s", binary.c_str(), st, text[0].c_str(), text[1].c_str()));
  }
  return text[0];
}

// The runner's ADD for round r: the namespace pinned, then each plugin in
// order with the previous one's result. Nanoseconds of each plugin call in
// per_plugin; the whole, pin included, returned.
int64_t DirectAdd(Run* run, int r, std::vector<int64_t>* per_plugin, int64_t* pin_nanos) {
  const std::string name = Format("outpost-c%s-r%03d", run->tag.c_str(), r);
  run->direct.container_id = name;
  run->direct.netns = run->netns_dir + "/" + name;
  run->direct.cni_args = {{"OUTPOST_JOB_ID", Format("c%s-r%03d", run->tag.c_str(), r)}};
  run->direct_result = picojson::value();
  const int64_t t0 = MonotonicNanos();
  Status pinned = net::PinNewNetns(run->netns_dir, name);
  if (!pinned.ok()) Fatal(run, "runner: " + pinned.error().message());
  run->direct_pinned = true;
  *pin_nanos = MonotonicNanos() - t0;
  picojson::value prev;
  for (size_t i = 0; i < run->list.plugins.size(); ++i) {
    const int64_t p0 = MonotonicNanos();
    std::string input = net::PluginStdin(run->list, i, prev, run->direct.capability_args);
    auto out = ExecPlugin(run->binaries[i], net::PluginEnvironment("ADD", run->direct, {kPluginDir}), input);
    if (!out.ok()) Fatal(run, "runner: ADD " + out.error().message());
    auto parsed = json::Parse(*out);
    if (parsed.ok()) prev = std::move(*parsed);
    if (!parsed.ok() || !prev.is<picojson::object>()) {
      Fatal(run, "runner: ADD " + run->list.plugins[i].type + ": not a result: " + *out);
    }
    per_plugin->push_back(MonotonicNanos() - p0);
  }
  run->direct_result = prev;
  return MonotonicNanos() - t0;
}

// The runner's DEL: each plugin in reverse with the final ADD result, then
// the namespace unpinned. fatal: a failure ends the bench (not in clean-up).
void DirectDel(Run* run, std::vector<int64_t>* per_plugin, bool fatal) {
  std::string first;
  for (size_t k = run->list.plugins.size(); k-- > 0;) {
    const int64_t p0 = MonotonicNanos();
    std::string input = net::PluginStdin(run->list, k, run->direct_result, run->direct.capability_args);
    auto out = ExecPlugin(run->binaries[k], net::PluginEnvironment("DEL", run->direct, {kPluginDir}), input);
    if (!out.ok() && first.empty()) first = "runner: DEL " + out.error().message();
    if (per_plugin) per_plugin->push_back(MonotonicNanos() - p0);
  }
  Status un = net::UnpinNetns(run->direct.netns);
  if (!un.ok() && first.empty()) first = "runner: " + un.error().message();
  run->direct_pinned = false;
  if (first.empty()) return;
  if (fatal) Fatal(run, first);
  std::fprintf(stderr, "cni_bench: clean-up: %s\n", first.c_str());
  run->failed = true;
}

// ---- jobs through the agent ----------------------------------------------------

// The job: one task that stamps its first instruction into stamp, then
// sleeps; bridge: in the built-in bridge network with one port mapping.
std::string JobSpec(const Run& run, const std::string& id, const std::string& stamp, bool bridge) {
  std::string network = bridge ? Format(", \"network\": {\"mode\": \"bridge\", \"ports\": [{\"label\": \"p\", "
                                        "\"static\": %d, \"to\": %d}]}",
                                        kHostPort, kContainerPort)
                               : "";
  return "{\"id\": " + JsonString(id) + network + ", \"tasks\": [{\"name\": \"t\", \"command\": " +
         JsonString(run.helper) + ", \"args\": [\"stamp-exec\", " + JsonString(stamp) + ", " + JsonString(run.helper) +
         ", \"sleep\", \"1000\"], \"env\": {" + JsonString(kMarkerVar) + ": " + JsonString(run.dir) +
         "}, \"restart\": {\"policy\": \"never\"}}]}";
}

Result<std::string> Call(wire::BlockingClient* c, const char* method, const std::string& payload,
                         int64_t timeout = 60 * kNanosPerSecond) {
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

// The inode of a network namespace file ("/proc/PID/ns/net" or a pin); 0 if none.
ino_t NetnsInode(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

struct Start {
  int64_t to_main = 0;  // SubmitJob sent -> the task's first instruction
  int64_t remove = 0;   // RemoveJob sent -> its reply
  // The agent's own account of its ADD (bridge only), from its "network ...
  // ready" event: whole milliseconds, -1 if absent; per plugin type.
  int64_t agent_add_ms = -1;
  std::map<std::string, int64_t> agent_plugin_ms;
};

// "network bridge ready: 10.46.0.2/20 in 152 ms (loopback 6 ms, bridge 41
// ms, ...)" into out.
void ParseReady(const std::string& msg, Start* out) {
  size_t in = msg.find(" in ");
  size_t open = msg.find(" (", in == std::string::npos ? 0 : in);
  if (in == std::string::npos || open == std::string::npos) return;
  out->agent_add_ms = std::strtoll(msg.c_str() + in + 4, nullptr, 10);
  std::string inner = msg.substr(open + 2);
  if (!inner.empty() && inner.back() == ')') inner.pop_back();
  for (std::string part : Split(inner, ',')) {
    while (!part.empty() && part[0] == ' ') part.erase(0, 1);
    size_t sp = part.find(' ');
    if (sp != std::string::npos) out->agent_plugin_ms[part.substr(0, sp)] = std::strtoll(part.c_str() + sp + 1, nullptr, 10);
  }
}

// One start of a job (host mode or bridge), timed, checked and removed.
Start OneStart(Run* run, wire::BlockingClient* c, const std::string& id, bool bridge) {
  const std::string stamp = run->dir + "/stamps/stamp";
  ::unlink(stamp.c_str());
  run->stamps.Drain();
  uint64_t cursor = LastSeq(run, c);
  std::string submit = bench::SubmitJobRequest(JobSpec(*run, id, stamp, bridge));
  Start out;
  int64_t t0 = MonotonicNanos();
  auto reply = Call(c, "SubmitJob", submit);
  if (!reply.ok()) Fatal(run, "SubmitJob " + id + ": " + reply.error().message());
  run->jobs.insert(id);
  int64_t ts = run->stamps.Wait(stamp, t0 + 30 * kNanosPerSecond);
  if (ts < 0) Fatal(run, "job " + id + ": the task did not write its timestamp within 30 s");
  out.to_main = ts - t0;
  // The checks, outside the timing: the task runs, with a pid, in the
  // job's namespace (bridge) or ours (host mode); the agent's ADD event.
  const std::string pin = run->netns_dir + "/outpost-" + id;
  pid_t pid = 0;
  const int64_t check_by = MonotonicNanos() + 10 * kNanosPerSecond;
  for (;;) {
    auto info_reply = Call(c, "InspectJob", JobIdRequest(id));
    if (!info_reply.ok()) Fatal(run, "InspectJob " + id + ": " + info_reply.error().message());
    PbOwned<outpost_v1_JobInfo> info(outpost_v1_JobInfo_fields);
    if (!info.Decode(*info_reply, "JobInfo").ok()) Fatal(run, "bad JobInfo");
    if (info->tasks_count == 1 && PbString(info->tasks[0].state) == "running" && info->tasks[0].pid > 0) {
      pid = static_cast<pid_t>(info->tasks[0].pid);
      break;
    }
    if (MonotonicNanos() > check_by) {
      Fatal(run, Format("job %s: its task is not running with a pid 10 s after its first instruction (job status "
                        "%s)", id.c_str(), PbString(info->status).c_str()));
    }
    ::usleep(2000);
  }
  ino_t task_ns = NetnsInode(Format("/proc/%d/ns/net", pid));
  ino_t want_ns = NetnsInode(bridge ? pin : "/proc/self/ns/net");
  if (task_ns == 0 || task_ns != want_ns) {
    Fatal(run, Format("job %s: task pid %d is not in %s", id.c_str(), pid, bridge ? pin.c_str() : "the bench's namespace"));
  }
  if (bridge) {
    auto ev = Call(c, "WatchEvents", WatchRequest(cursor, 0, id));
    if (!ev.ok()) Fatal(run, "WatchEvents: " + ev.error().message());
    PbOwned<outpost_v1_WatchEventsResponse> resp(outpost_v1_WatchEventsResponse_fields);
    if (!resp.Decode(*ev, "WatchEventsResponse").ok()) Fatal(run, "bad WatchEventsResponse");
    for (pb_size_t i = 0; i < resp->events_count; ++i) {
      std::string msg = PbString(resp->events[i].message);
      if (PbString(resp->events[i].type) == "network" && msg.compare(0, 21, "network bridge ready:") == 0) {
        ParseReady(msg, &out);
      }
    }
    if (out.agent_add_ms < 0) Fatal(run, "job " + id + ": no \"network bridge ready\" event");
  }
  // Removal: the task stopped, CNI DEL, the namespace unpinned, the job
  // gone; then nothing of it left running.
  int64_t r0 = MonotonicNanos();
  auto gone = Call(c, "RemoveJob", JobIdRequest(id));
  out.remove = MonotonicNanos() - r0;
  if (!gone.ok()) Fatal(run, "RemoveJob " + id + ": " + gone.error().message());
  run->jobs.erase(id);
  if (bridge && ::access(pin.c_str(), F_OK) == 0) Fatal(run, "job " + id + ": " + pin + " still there after RemoveJob");
  int64_t quiet_by = MonotonicNanos() + 5 * kNanosPerSecond;
  std::string kids;
  while (!(kids = WorkerChildren(*run)).empty() && kids != "?") {
    if (MonotonicNanos() > quiet_by) Fatal(run, "job " + id + ": the worker still has children 5 s after RemoveJob: " + kids);
    ::usleep(1000);
  }
  return out;
}

double P50(const std::vector<int64_t>& v) { return bench::PercentileMicros(v, 0.5); }
double P99(const std::vector<int64_t>& v) { return bench::PercentileMicros(v, 0.99); }

int Main(int argc, char** argv) {
  bench::Name() = "cni_bench";
  Run run;
  int rounds = 21;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) {
      run.outpost = argv[++i];
    } else if (a == "--helper" && i + 1 < argc) {
      run.helper = argv[++i];
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: cni_bench [--outpost PATH] [--helper PATH] [--rounds N]\n");
      return 2;
    }
  }
  if (rounds < 1) rounds = 1;
  std::string missing = Missing();
  if (!missing.empty()) {
    std::fprintf(stderr, "cni_bench: skipped: %s\n", missing.c_str());
    return 0;
  }
  missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  std::string isolated = Isolate();
  if (!isolated.empty()) Fatal(&run, "a network namespace of our own: " + isolated);
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-cni-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp " + tmpl + ": " + std::strerror(errno));
  run.dir = tmpl;
  run.tag = sys::Basename(run.dir).substr(18);  // the mkdtemp suffix: ids unique per run
  run.marker = std::string(kMarkerVar) + "=" + run.dir;
  run.config = run.dir + "/config.json";
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  run.netns_dir = run.dir + "/netns";
  for (const char* d : {"/hooks.d", "/hooks", "/cni.d", "/stamps"}) {
    if (::mkdir((run.dir + d).c_str(), 0700) != 0) Fatal(&run, std::string("mkdir ") + d + ": " + std::strerror(errno));
  }
  std::string watch = run.stamps.Watch(run.dir + "/stamps");
  if (!watch.empty()) Fatal(&run, watch);
  Info("in a network and mount namespace of its own; state dir %s/state, runtime dir %s, netns_dir %s, "
       "cni_config_dir, hooks_dirs and hook_path empty dirs in the state's parent",
       run.dir.c_str(), run.rundir.c_str(), run.netns_dir.c_str());
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + JsonString(run.dir + "/state") +
                       ", \"runtime_dir\": " + JsonString(run.rundir) + ", \"log_file\": " + JsonString(run.log) +
                       // No jobs.d, a cgroup root outside any cgroup2 mount, and
                       // hook and CNI config directories of our own: nothing of
                       // the host's applies.
                       ", \"log_level\": \"info\", \"jobs_dir\": \"\", \"cgroup_root\": " +
                       JsonString(run.dir + "/no-cgroup") + ", \"hooks_dirs\": [" + JsonString(run.dir + "/hooks.d") +
                       "], \"hook_path\": " + JsonString(run.dir + "/hooks") +
                       ", \"netns_dir\": " + JsonString(run.netns_dir) +
                       ", \"cni_config_dir\": " + JsonString(run.dir + "/cni.d") + ", \"cni_path\": [" +
                       JsonString(kPluginDir) + "]}\n";
  Status wst = sys::WriteFileAtomic(run.config, config, 0600);
  if (!wst.ok()) Fatal(&run, wst.error().message());

  // The runner's network: the agent's built-in one with its default options
  // (agent/agent.cc), host-local's reservations in the same dataDir.
  net::BridgeOptions bo;
  bo.ipam_data_dir = run.rundir + "/cni/networks";
  run.list = net::BridgeNetworkListOrDie(bo);
  for (const net::PluginConf& p : run.list.plugins) {
    auto found = net::FindPlugin({kPluginDir}, p.type);
    if (!found.ok()) Fatal(&run, found.error().message());
    run.binaries.push_back(*found);
  }
  picojson::object map;
  map["hostPort"] = picojson::value(static_cast<int64_t>(kHostPort));
  map["containerPort"] = picojson::value(static_cast<int64_t>(kContainerPort));
  map["protocol"] = picojson::value("tcp");
  run.direct.capability_args["portMappings"] = picojson::value(picojson::array{picojson::value(map)});

  run.keeper = SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  if (run.keeper < 0) Fatal(&run, "fork failed");
  run.worker = WaitForWorker(run.socket, 10 * kNanosPerSecond);
  if (run.worker <= 0) Fatal(&run, "the agent did not answer Status within 10s");
  if (WorkerChildren(run) == "?") {
    Info("no /proc/PID/task/PID/children here: removal is trusted to include CNI DEL");
  }

  auto client = wire::BlockingClient::Connect(run.socket, 10 * kNanosPerSecond);
  if (!client.ok()) Fatal(&run, "connect: " + client.error().message());
  std::vector<int64_t> start_a, start_b, remove_a, remove_b, add_diff, del_diff, direct_add, direct_del, pins,
      agent_add;
  std::map<std::string, std::vector<int64_t>> direct_plugin_add, direct_plugin_del, agent_plugin;
  for (int r = 0; r < kWarmup + rounds; ++r) {
    if (g_interrupted) Fatal(&run, "interrupted");
    Start a, b;
    int64_t add = 0, del = 0, pin = 0;
    std::vector<int64_t> add_each, del_each;
    for (int k = 0; k < 3; ++k) {  // a, b, r rotated: each goes first in a third of the rounds
      switch ((r + k) % 3) {
        case 0: a = OneStart(&run, &*client, Format("c%s-a%03d", run.tag.c_str(), r), false); break;
        case 1: b = OneStart(&run, &*client, Format("c%s-b%03d", run.tag.c_str(), r), true); break;
        default: {
          add = DirectAdd(&run, r, &add_each, &pin);
          const int64_t d0 = MonotonicNanos();
          DirectDel(&run, &del_each, true);
          del = MonotonicNanos() - d0;
          break;
        }
      }
    }
    if (r < kWarmup) continue;
    start_a.push_back(a.to_main);
    start_b.push_back(b.to_main);
    remove_a.push_back(a.remove);
    remove_b.push_back(b.remove);
    add_diff.push_back(b.to_main - a.to_main);
    del_diff.push_back(b.remove - a.remove);
    direct_add.push_back(add);
    direct_del.push_back(del);
    pins.push_back(pin);
    agent_add.push_back(b.agent_add_ms * kNanosPerMilli);
    const size_t n_plugins = run.list.plugins.size();
    for (size_t i = 0; i < n_plugins; ++i) {
      const std::string& type = run.list.plugins[i].type;
      direct_plugin_add[type].push_back(add_each[i]);
      direct_plugin_del[type].push_back(del_each[n_plugins - 1 - i]);
      agent_plugin[type].push_back(b.agent_plugin_ms[type] * kNanosPerMilli);
    }
  }

  const double host = P50(start_a), bridged = P50(start_b), add50 = P50(direct_add), del50 = P50(direct_del);
  const size_t n = start_a.size();
  Info("%zu rounds (+%d warm-up) of: a host-mode job, the same job in bridge mode with one port mapping, the "
       "runner's ADD and DEL of the same conflist",
       n, kWarmup);
  Info("SubmitJob -> task's first instruction: p50 %.1f us host mode (p99 %.1f), %.1f us bridge mode (p99 %.1f); "
       "bridge - host: p50s %.1f us, median of the per-round differences %.1f us",
       host, P99(start_a), bridged, P99(start_b), bridged - host, P50(add_diff));
  Info("RemoveJob: p50 %.1f us host mode (p99 %.1f), %.1f us bridge mode (p99 %.1f); bridge - host: p50s %.1f us, "
       "median of the per-round differences %.1f us",
       P50(remove_a), P99(remove_a), P50(remove_b), P99(remove_b), P50(remove_b) - P50(remove_a), P50(del_diff));
  Info("runner: ADD p50 %.1f us (p99 %.1f) of which the pin p50 %.1f us; DEL p50 %.1f us (p99 %.1f), unpin included",
       add50, P99(direct_add), P50(pins), del50, P99(direct_del));
  std::string per_add, per_del, per_agent;
  for (const net::PluginConf& p : run.list.plugins) {
    per_add += Format(" %s %.1f", p.type.c_str(), P50(direct_plugin_add[p.type]) / 1000);
    per_del += Format(" %s %.1f", p.type.c_str(), P50(direct_plugin_del[p.type]) / 1000);
    per_agent += Format(" %s %.0f", p.type.c_str(), P50(agent_plugin[p.type]) / 1000);
  }
  Info("per plugin p50, ms: runner ADD%s; agent ADD (its event, whole ms)%s; runner DEL%s", per_add.c_str(),
       per_agent.c_str(), per_del.c_str());
  Info("the agent's own ADD (its \"network bridge ready\" event, whole ms): p50 %.0f ms, against the runner's "
       "plugins alone (pin excluded) p50 %.1f ms",
       P50(agent_add) / 1000, (add50 - P50(pins)) / 1000);
  bench::DescribeMemory("worker (forks the agent's plugins)", run.worker);
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs", load[0], ::sysconf(_SC_NPROCESSORS_ONLN));

  Print("cni_bridge_job_start_p50", bridged, "us", "cni_direct_add_plus_host_job_start_p50", host + add50);
  Print("cni_add_p50", bridged - host, "us", "cni_direct_add_p50", add50);
  Print("cni_add_p99", P99(add_diff), "us", "cni_direct_add_p99", P99(direct_add));
  Print("cni_del_p50", P50(remove_b) - P50(remove_a), "us", "cni_direct_del_p50", del50);
  Print("cni_del_p99", P99(del_diff), "us", "cni_direct_del_p99", P99(direct_del));
  Print("cni_bridge_vs_host_job_start_p50", bridged, "us", "host_job_start_p50", host);

  Cleanup(&run);
  if (run.failed) {
    std::fprintf(stderr, "cni_bench: clean-up needed the fallback (see above)\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
