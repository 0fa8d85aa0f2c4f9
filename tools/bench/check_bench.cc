// Health checks through the real agent binary (docs/supervision.md "Health
// checks"):
//
//  1. Agent CPU per exec check: 100 tasks (`test_helper sleep 1000`, two
//     jobs of 50) each with an exec check `/bin/true` every 1 s. Once
//     every task is healthy, the CPU time (utime + stime of the worker and
//     the keeper, /proc/<pid>/stat) over --seconds, divided by the checks run
//     in that time (the checks' run counters from ListJobs). Baseline: the
//     CPU time this process spends on one fork + execve + waitpid of the
//     same command (the parent's side, as the agent's figure is).
//  2. Agent CPU per http check: the same with 100 tasks of busybox httpd,
//     each with an http check every 1 s. Baseline: one non-blocking-free
//     connect + GET + read of the whole response from this process, against
//     the same servers. Skipped (with a message) without busybox.
//  3. Time to healthy of a one-task job: SubmitJob until InspectJob says
//     healthy, with an exec check (grace 0: the first check runs right after
//     the start) against without checks (min_healthy_time 0s: healthy once
//     started and seen alive). 20 rounds, p50.
//
//   check_bench [--outpost PATH] [--helper PATH] [--seconds N]
//
// Output:
//   BENCH check_exec_cpu_per_check <us> us baseline=fork_exec_wait_cpu <us> ratio=<r>
//   BENCH check_http_cpu_per_check <us> us baseline=connect_get_cpu <us> ratio=<r>
//   BENCH task_healthy_with_check_p50 <us> us baseline=task_healthy_without_checks_p50 <us> ratio=<r>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <picojson.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/log.h"
#include "base/pb.h"
#include "base/strings.h"
#include "base/sys.h"
#include "bench_util.h"
#include "job.pb.h"
#include "proc/procfs.h"

namespace outpost {
namespace {

using bench::CallOnce;
using bench::g_interrupted;
using bench::Info;
using bench::kMarkerVar;
using bench::Print;

struct Run {
  std::string outpost, helper, dir, rundir, config, socket, log;
  pid_t keeper = 0, worker = 0;
  std::vector<std::string> jobs;
};

void Cleanup(Run* run) {
  for (const std::string& j : run->jobs) (void)CallOnce(run->socket, "RemoveJob", bench::JobIdRequest(j), 30 * kNanosPerSecond);
  run->jobs.clear();
  if (run->keeper > 0) bench::StopKeeper(&run->keeper);
  bench::SweepMarker(std::string(kMarkerVar) + "=" + run->dir);
  if (!run->dir.empty()) bench::RemoveTree(run->dir);
}

[[noreturn]] void Fatal(Run* run, const std::string& what) {
  std::fprintf(stderr, "check_bench: %s\n", what.c_str());
  bench::ReportAgentLog(run->log);
  Cleanup(run);
  std::exit(1);
}

std::string J(const std::string& s) { return picojson::value(s).serialize(); }

double CpuSecondsOf(pid_t pid) {
  proc::ProcStat st;
  if (!proc::ReadProcStat(pid, &st)) return 0;
  return static_cast<double>(st.utime_ticks + st.stime_ticks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}
double AgentCpu(const Run& run) { return CpuSecondsOf(run.worker) + CpuSecondsOf(run.keeper); }

double SelfCpu() {
  rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Healthy tasks and the sum of the first check's runs over the jobs.
struct Census {
  int healthy = 0;
  uint64_t runs = 0;
};
Census Count(Run* run) {
  Census c;
  auto r = CallOnce(run->socket, "ListJobs", "", 10 * kNanosPerSecond);
  if (!r.ok()) Fatal(run, "ListJobs: " + r.error().message());
  PbOwned<outpost_v1_ListJobsResponse> l(outpost_v1_ListJobsResponse_fields);
  if (!l.Decode(*r, "ListJobsResponse").ok()) Fatal(run, "bad ListJobs reply");
  for (pb_size_t i = 0; i < l->jobs_count; i++) {
    for (pb_size_t t = 0; t < l->jobs[i].tasks_count; t++) {
      const auto& task = l->jobs[i].tasks[t];
      c.healthy += task.healthy;
      for (pb_size_t k = 0; k < task.checks_count; k++) c.runs += task.checks[k].runs;
    }
  }
  return c;
}

void Submit(Run* run, const std::string& id, const std::string& doc) {
  auto r = CallOnce(run->socket, "SubmitJob", bench::SubmitJobRequest(doc), 30 * kNanosPerSecond);
  if (!r.ok()) Fatal(run, "SubmitJob " + id + ": " + r.error().message());
  run->jobs.push_back(id);
}

void RemoveAll(Run* run) {
  for (const std::string& j : run->jobs) {
    auto r = CallOnce(run->socket, "RemoveJob", bench::JobIdRequest(j), 60 * kNanosPerSecond);
    if (!r.ok()) Fatal(run, "RemoveJob " + j + ": " + r.error().message());
  }
  run->jobs.clear();
}

// The agent's CPU per check run over `seconds`, once all `tasks` are healthy.
double CpuPerCheck(Run* run, int tasks, int seconds, const char* what) {
  for (int64_t end = MonotonicNanos() + 120 * kNanosPerSecond; Count(run).healthy < tasks;) {
    if (MonotonicNanos() > end || g_interrupted) Fatal(run, std::string(what) + ": not all tasks healthy within 120 s");
    ::usleep(200000);
  }
  Census a = Count(run);
  double cpu0 = AgentCpu(*run);
  for (int i = 0; i < seconds * 10 && !g_interrupted; i++) ::usleep(100000);
  double cpu1 = AgentCpu(*run);
  Census b = Count(run);
  uint64_t runs = b.runs - a.runs;
  if (runs == 0) Fatal(run, std::string(what) + ": no check ran");
  Info("%s: %d tasks, %llu checks in %d s (%.1f/s), agent CPU %.3f s (%.1f%% of one CPU)", what, tasks,
       static_cast<unsigned long long>(runs), seconds, static_cast<double>(runs) / seconds, cpu1 - cpu0,
       100.0 * (cpu1 - cpu0) / seconds);
  return (cpu1 - cpu0) * 1e6 / static_cast<double>(runs);
}

std::string Task(const Run& run, const std::string& name, const std::string& cmd, const std::string& args,
                 const std::string& check) {
  return "{\"name\": " + J(name) + ", \"command\": " + J(cmd) + ", \"args\": [" + args + "], \"env\": {" + J(kMarkerVar) +
         ": " + J(run.dir) + "}" + (check.empty() ? "" : ", \"checks\": [" + check + "]") + "}";
}

double ForkExecCpu(const std::string& helper, int n) {
  double c0 = SelfCpu();
  for (int i = 0; i < n; i++) {
    pid_t p = ::fork();
    if (p == 0) {
      ::execl(helper.c_str(), helper.c_str(), nullptr);
      ::_exit(127);
    }
    int st;
    ::waitpid(p, &st, 0);
  }
  return (SelfCpu() - c0) * 1e6 / n;
}

double ConnectGetCpu(int port0, int ports, int n) {
  double c0 = SelfCpu();
  std::string req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (int i = 0; i < n; i++) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port0 + i % ports));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      (void)::send(s, req.data(), req.size(), MSG_NOSIGNAL);
      char buf[4096];
      while (::recv(s, buf, sizeof buf, 0) > 0) {
      }
    }
    ::close(s);
  }
  return (SelfCpu() - c0) * 1e6 / n;
}

int64_t TimeToHealthy(Run* run, const std::string& id, const std::string& doc) {
  int64_t t0 = MonotonicNanos();
  Submit(run, id, doc);
  for (;;) {
    auto r = CallOnce(run->socket, "InspectJob", bench::JobIdRequest(id), 10 * kNanosPerSecond);
    if (!r.ok()) Fatal(run, "InspectJob: " + r.error().message());
    PbOwned<outpost_v1_JobInfo> j(outpost_v1_JobInfo_fields);
    if (!j.Decode(*r, "JobInfo").ok()) Fatal(run, "bad InspectJob reply");
    if (j->tasks_count == 1 && j->tasks[0].healthy) break;
    if (MonotonicNanos() - t0 > 30 * kNanosPerSecond || g_interrupted) Fatal(run, id + " not healthy within 30 s");
    ::usleep(1000);
  }
  return MonotonicNanos() - t0;
}

int Main(int argc, char** argv) {
  bench::Name() = "check_bench";
  Run run;
  int seconds = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) run.outpost = argv[++i];
    else if (a == "--helper" && i + 1 < argc) run.helper = argv[++i];
    else if (a == "--seconds" && i + 1 < argc) seconds = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: check_bench [--outpost PATH] [--helper PATH] [--seconds N]\n");
      return 2;
    }
  }
  std::string missing = bench::FindBinaries(&run.outpost, &run.helper);
  if (!missing.empty()) Fatal(&run, missing);
  log::SetLevel(log::Level::kError);
  bench::CatchInterrupts();
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-check-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal(&run, "mkdtemp failed");
  run.dir = tmpl;
  run.config = run.dir + "/config.json";
  run.rundir = bench::MakeRuntimeDir(run.dir);
  run.socket = run.rundir + "/outpost.sock";
  run.log = run.dir + "/agent.log";
  std::string config = "{\"kubelet_plugins_dir\": \"\", \"device_plugins_dir\": \"\", \"nomad_plugin_dir\": \"\", \"state_dir\": " + J(run.dir + "/state") + ", \"runtime_dir\": " + J(run.rundir) +
                       ", \"log_file\": " + J(run.log) + ", \"cgroup_root\": " + J(run.dir + "/no-cgroup") +
                       ", \"log_level\": \"warn\", \"jobs_dir\": \"\"}\n";
  if (!sys::WriteFileAtomic(run.config, config, 0600).ok()) Fatal(&run, "cannot write the config");
  bench::RaiseNofile(8192);
  run.keeper = bench::SpawnDetached({run.outpost, "agent", "--config", run.config}, run.dir + "/agent.stderr");
  run.worker = bench::WaitForWorker(run.socket, 10 * kNanosPerSecond);
  if (run.worker <= 0) Fatal(&run, "the agent did not answer Status within 10s");
  for (int64_t end = MonotonicNanos() + 10 * kNanosPerSecond;;) {
    auto r = CallOnce(run.socket, "InspectJob", bench::JobIdRequest("none"), kNanosPerSecond);
    if (r.ok() || r.error().code() != Code::kUnavailable) break;
    if (MonotonicNanos() > end) Fatal(&run, "the job manager did not become ready");
    ::usleep(20000);
  }

  // ---- 1. exec checks ----
  const int kTasks = 100, kPerJob = 50;
  std::string exec_check = "{\"type\": \"exec\", \"command\": [\"/bin/true\"], \"interval\": \"1s\"}";
  for (int j = 0; j < kTasks / kPerJob; j++) {
    std::string id = Format("ex%d", j), tasks;
    for (int t = 0; t < kPerJob; t++) {
      tasks += (t ? ", " : "") + Task(run, Format("t%d", t), run.helper, "\"sleep\", \"1000\"", exec_check);
    }
    Submit(&run, id, "{\"id\": " + J(id) + ", \"tasks\": [" + tasks + "]}");
  }
  double exec_cpu = CpuPerCheck(&run, kTasks, seconds, "exec checks");
  double fork_cpu = ForkExecCpu("/bin/true", 500);
  RemoveAll(&run);
  Print("check_exec_cpu_per_check", exec_cpu, "us", "fork_exec_wait_cpu", fork_cpu);

  // ---- 2. http checks ----
  std::string busybox = ::access("/bin/busybox", X_OK) == 0 ? "/bin/busybox" : ::access("/usr/bin/busybox", X_OK) == 0 ? "/usr/bin/busybox" : "";
  if (busybox.empty()) {
    Info("http checks skipped: no busybox for the servers");
  } else {
    std::string www = run.dir + "/www";
    (void)sys::MkdirAll(www, 0755);
    (void)sys::WriteFileAtomic(www + "/healthz", "ok\n", 0644);
    const int port0 = 20000 + static_cast<int>(::getpid() % 20000);
    for (int j = 0; j < kTasks / kPerJob; j++) {
      std::string id = Format("web%d", j), tasks;
      for (int t = 0; t < kPerJob; t++) {
        int port = port0 + j * kPerJob + t;
        std::string check = Format("{\"type\": \"http\", \"port\": %d, \"path\": \"/healthz\", \"interval\": \"1s\"}", port);
        std::string args = "\"httpd\", \"-f\", \"-p\", " + J(Format("127.0.0.1:%d", port)) + ", \"-h\", " + J(www);
        tasks += (t ? ", " : "") + Task(run, Format("t%d", t), busybox, args, check);
      }
      Submit(&run, id, "{\"id\": " + J(id) + ", \"tasks\": [" + tasks + "]}");
    }
    double http_cpu = CpuPerCheck(&run, kTasks, seconds, "http checks");
    double get_cpu = ConnectGetCpu(port0, kTasks, 500);
    RemoveAll(&run);
    Print("check_http_cpu_per_check", http_cpu, "us", "connect_get_cpu", get_cpu);
  }

  // ---- 3. time to healthy ----
  std::vector<int64_t> with, without;
  std::string quick = "{\"type\": \"exec\", \"command\": [\"/bin/true\"], \"interval\": \"100ms\"}";
  for (int i = 0; i < 20 && !g_interrupted; i++) {
    std::string a = Format("plain%d", i), b = Format("checked%d", i);
    without.push_back(TimeToHealthy(&run, a, "{\"id\": " + J(a) + ", \"min_healthy_time\": \"0s\", \"tasks\": [" +
                                                  Task(run, "t", run.helper, "\"sleep\", \"1000\"", "") + "]}"));
    with.push_back(TimeToHealthy(&run, b, "{\"id\": " + J(b) + ", \"min_healthy_time\": \"0s\", \"tasks\": [" +
                                               Task(run, "t", run.helper, "\"sleep\", \"1000\"", quick) + "]}"));
    RemoveAll(&run);
  }
  Print("task_healthy_with_check_p50", bench::PercentileMicros(with, 0.5), "us", "task_healthy_without_checks_p50",
        bench::PercentileMicros(without, 0.5));
  std::fflush(stdout);
  Cleanup(&run);
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
