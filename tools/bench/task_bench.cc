// Task start latency: the time from ExecDriver::StartTask being called to the
// first instruction of the task's main() (`test_helper timestamp FILE` reads
// CLOCK_MONOTONIC first thing and writes it to FILE), against a raw
// fork + execve of the same helper measured the same way in the same run.
//
// The driver runs in this process on a Loop, without RPC and without a
// keeper (the bench process reaps). Its stdout and stderr are FIFOs drained by
// LogPipes into rotating files, as in the agent; the LogPipes are opened
// before the clock starts (TaskManager does that before StartTask), so the
// figure covers what StartTask does: credentials, environment, PATH lookup,
// opening both FIFOs, clone3 and the child's set-up up to execve. A third
// mode (stdout/stderr /dev/null) shows what the FIFOs cost.
//
// The three modes alternate start by start, so background load hits them
// alike. Each start waits for the task's exit and removes it before the next.
//
//   task_bench [--helper PATH] [--starts N]
// The helper defaults to ../test_helper next to this binary's directory.
//
// Output:
//   BENCH task_start_p50 <us> us baseline=fork_exec_p50 <us> ratio=<r>
//   BENCH task_start_p99 <us> us baseline=fork_exec_p99 <us> ratio=<r>
//   BENCH task_start_devnull_p50 <us> us baseline=fork_exec_p50 <us> ratio=<r>
//   TARGETS task_start_p50<=1.5x:PASS|FAIL task_start_p99<=1.5x:PASS|FAIL
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "driver/exec/exec_driver.h"
#include "logs/log_pipe.h"
#include "bench_util.h"

namespace outpost {
namespace {

using bench::Die;
using bench::OrDie;
using bench::Print;

constexpr double kTargetRatio = 1.5;

// The helper's CLOCK_MONOTONIC at its start, from the file it wrote.
int64_t ReadStamp(const std::string& path) {
  auto text = sys::ReadFile(path, 64);
  if (!text.ok() || text->empty()) Die("helper timestamp", path + " missing or empty: did the helper run?");
  ::unlink(path.c_str());
  return std::strtoll(text->c_str(), nullptr, 10);
}

class Bench {
 public:
  Bench(std::string helper, std::string dir) : helper_(std::move(helper)), dir_(std::move(dir)) {
    loop_ = OrDie(Loop::Create(), "loop");
    driver::ExecDriver::Options o;
    driver_ = OrDie(driver::ExecDriver::Create(loop_.get(), o), "exec driver");
    if (::mkdir((dir_ + "/task").c_str(), 0700) != 0) Die("mkdir", dir_ + "/task");
    if (::mkdir((dir_ + "/logs").c_str(), 0700) != 0) Die("mkdir", dir_ + "/logs");
    stamp_ = dir_ + "/stamp";
    // The floor's children get an environment of the same size as a task's.
    for (const char* kv : {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                           "USER=root", "LOGNAME=root", "OUTPOST_JOB=", "OUTPOST_TASK=bench",
                           "OUTPOST_TASK_DIR=/tmp/x", "OUTPOST_TASK_ID=bench"}) {
      base_env_.push_back(kv);
    }
    std::string probe = floor_.Start(helper_, base_env_);
    if (!probe.empty()) Die("floor probe", probe);
  }

  // fork + execve, nothing else: the physical limit, measured by a small
  // separate process (bench_util.h FloorProbe).
  int64_t ForkExec() {
    auto took = floor_.Stamp(dir_ + "/floor-stamp");
    if (!took.ok()) Die("floor probe", took.error().message());
    return *took;
  }

  // One task through ExecDriver::StartTask, with FIFOs + LogPipes or /dev/null.
  int64_t DriverStart(bool fifos) {
    std::string id = "b" + std::to_string(++n_);
    driver::TaskConfig c;
    c.id = id;
    c.name = id;
    c.command = helper_;
    c.args = {"timestamp", stamp_};
    c.task_dir = dir_ + "/task";
    std::unique_ptr<logs::LogPipe> out, err;
    if (fifos) {
      c.stdout_path = dir_ + "/" + id + ".stdout.fifo";
      c.stderr_path = dir_ + "/" + id + ".stderr.fifo";
      logs::RotationPolicy pol;
      auto on_error = [](const std::string& e, uint64_t) {
        if (!e.empty()) Die("LogPipe", e);
      };
      out = OrDie(logs::LogPipe::Open(loop_.get(), c.stdout_path, dir_ + "/logs/" + id + ".stdout",
                                      c.stdout_path + ".cursor", pol, ::getuid(), ::getgid(), on_error),
                  "LogPipe stdout");
      err = OrDie(logs::LogPipe::Open(loop_.get(), c.stderr_path, dir_ + "/logs/" + id + ".stderr",
                                      c.stderr_path + ".cursor", pol, ::getuid(), ::getgid(), on_error),
                  "LogPipe stderr");
    }
    bool started = false, exited = false;
    int64_t t0 = MonotonicNanos();
    driver_->StartTask(c, [&](Result<driver::TaskHandle> h) {
      if (!h.ok()) Die("StartTask", h.error().message());
      started = true;
    });
    if (!started) Die("StartTask", "did not complete synchronously");
    driver_->WaitTask(id, [&](const driver::ExitResult& r) {
      if (!r.Successful()) Die("task", "did not exit 0: " + r.error);
      exited = true;
    });
    while (!exited) {
      Status s = loop_->RunOnce(-1);
      if (!s.ok()) Die("loop", s.error().message());
    }
    int64_t latency = ReadStamp(stamp_) - t0;
    bool destroyed = false;
    driver_->DestroyTask(id, false, [&](Status s) {
      if (!s.ok()) Die("DestroyTask", s.error().message());
      destroyed = true;
    });
    while (!destroyed) (void)loop_->RunOnce(10 * kNanosPerMilli);
    if (fifos) {
      out->Drain();
      err->Drain();
      out.reset();
      err.reset();
      for (const std::string& p : {c.stdout_path, c.stderr_path}) {
        ::unlink(p.c_str());
        ::unlink((p + ".cursor").c_str());
      }
      ::unlink((dir_ + "/logs/" + id + ".stdout").c_str());
      ::unlink((dir_ + "/logs/" + id + ".stderr").c_str());
    }
    return latency;
  }

 private:
  std::string helper_;
  std::string dir_;
  std::string stamp_;
  std::vector<std::string> base_env_;
  bench::FloorProbe floor_;
  std::unique_ptr<Loop> loop_;
  std::unique_ptr<driver::ExecDriver> driver_;
  int n_ = 0;
};

int Main(int argc, char** argv) {
  bench::Name() = "task_bench";
  std::string helper;
  int starts = 200;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--helper" && i + 1 < argc) {
      helper = argv[++i];
    } else if (a == "--starts" && i + 1 < argc) {
      starts = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: task_bench [--helper PATH] [--starts N]\n");
      return 2;
    }
  }
  if (starts < 10) starts = 10;
  if (helper.empty()) {
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) Die("readlink", "/proc/self/exe");
    self[n] = '\0';
    helper = sys::Dirname(sys::Dirname(self)) + "/test_helper";
  }
  if (::access(helper.c_str(), X_OK) != 0) Die("helper not found (build it: make build/test_helper)", helper);
  log::SetLevel(log::Level::kError);

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-task-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Die("mkdtemp", tmpl);

  std::vector<int64_t> base, fifo, devnull;
  {
    Bench b(helper, tmpl);
    for (int i = 0; i < 10; ++i) {  // warm-up: page cache, the loop's maps, the driver's first-use paths
      b.ForkExec();
      b.DriverStart(true);
      b.DriverStart(false);
    }
    for (int i = 0; i < starts; ++i) {
      // Rotate which mode goes first so none always follows the same one.
      switch (i % 3) {
        case 0:
          base.push_back(b.ForkExec());
          fifo.push_back(b.DriverStart(true));
          devnull.push_back(b.DriverStart(false));
          break;
        case 1:
          fifo.push_back(b.DriverStart(true));
          devnull.push_back(b.DriverStart(false));
          base.push_back(b.ForkExec());
          break;
        default:
          devnull.push_back(b.DriverStart(false));
          base.push_back(b.ForkExec());
          fifo.push_back(b.DriverStart(true));
          break;
      }
    }
  }
  bench::RemoveTree(tmpl);

  // Latency under CPU contention mostly measures the scheduler: say how busy
  // the machine was, so that a run on a loaded machine is read as such.
  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  std::printf("task_bench: load average %.2f on %ld CPUs at the end of the run\n", load[0],
              ::sysconf(_SC_NPROCESSORS_ONLN));
  double b50 = bench::PercentileMicros(base, 0.50), b99 = bench::PercentileMicros(base, 0.99);
  double f50 = bench::PercentileMicros(fifo, 0.50), f99 = bench::PercentileMicros(fifo, 0.99);
  double d50 = bench::PercentileMicros(devnull, 0.50);
  Print("task_start_p50", f50, "us", "fork_exec_p50", b50);
  Print("task_start_p99", f99, "us", "fork_exec_p99", b99);
  Print("task_start_devnull_p50", d50, "us", "fork_exec_p50", b50);
  auto verdict = [](double v, double b) { return v <= kTargetRatio * b ? "PASS" : "FAIL"; };
  std::printf("TARGETS task_start_p50<=%.1fx:%s task_start_p99<=%.1fx:%s (%d starts each, FIFOs+LogPipes)\n",
              kTargetRatio, verdict(f50, b50), kTargetRatio, verdict(f99, b99), starts);
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
