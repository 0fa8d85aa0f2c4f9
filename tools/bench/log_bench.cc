// Log throughput benchmark: the test helper printing numbered lines at full
// speed (`test_helper lines N`), measured two ways in the same run:
//   baseline  its stdout is a regular file (`helper > file`: the limit)
//   measured  its stdout is a FIFO opened O_RDWR, drained by a LogPipe on
//             this process's Loop into rotating 10 MiB files
// Time runs from fork to the last byte in the files (for the LogPipe: the
// child's exit and a Drain). Best of a few runs each.
//
//   log_bench [--helper PATH] [--lines N] [--runs N]
// The helper defaults to ../test_helper next to this binary's directory
// ($(BUILD)/bench/log_bench -> $(BUILD)/test_helper).
//
// Output:
//   BENCH log_throughput <MB/s> MB/s baseline=cat_to_file <MB/s> ratio=<r>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/fd.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "logs/log_pipe.h"
#include "bench_util.h"

namespace outpost {
namespace {

using bench::Die;
using bench::OrDie;
using bench::Print;

// fork + exec helper with stdout = out_fd. The child only dup2s and execs.
pid_t Spawn(const std::string& helper, const std::string& lines, int out_fd) {
  const char* argv[] = {helper.c_str(), "lines", lines.c_str(), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) Die("fork", std::strerror(errno));
  if (pid == 0) {
    if (::dup2(out_fd, 1) < 0) ::_exit(126);
    ::execv(argv[0], const_cast<char* const*>(argv));
    ::_exit(127);
  }
  return pid;
}

void WaitOk(pid_t pid) {
  int st = 0;
  if (sys::RetryEintr([&] { return ::waitpid(pid, &st, 0); }) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    Die("helper", "did not exit 0 (status " + std::to_string(st) + ")");
  }
}

struct Run {
  uint64_t bytes;
  int64_t nanos;
};

Run Baseline(const std::string& helper, const std::string& lines, const std::string& dir) {
  std::string path = dir + "/baseline.out";
  UniqueFd fd = OrDie(sys::Open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), "open baseline file");
  int64_t start = MonotonicNanos();
  WaitOk(Spawn(helper, lines, fd.get()));
  int64_t nanos = MonotonicNanos() - start;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) Die("stat", path);
  ::unlink(path.c_str());
  return {static_cast<uint64_t>(st.st_size), nanos};
}

Run ThroughLogPipe(const std::string& helper, const std::string& lines, const std::string& dir, int i) {
  std::string sub = dir + "/pipe" + std::to_string(i);
  if (::mkdir(sub.c_str(), 0755) != 0) Die("mkdir", sub);
  auto loop = OrDie(Loop::Create(), "loop");
  logs::RotationPolicy pol;  // 10 MiB files, 10 of them
  std::string error;
  auto lp = OrDie(logs::LogPipe::Open(loop.get(), sub + "/.task.stdout.fifo", sub + "/task.stdout",
                                      sub + "/.task.stdout.cursor", pol, ::getuid(), ::getgid(),
                                      [&](const std::string& e, uint64_t) { if (!e.empty()) error = e; }),
                  "LogPipe::Open");
  int64_t start = MonotonicNanos();
  pid_t pid;
  {
    UniqueFd w = OrDie(lp->OpenWriteEnd(), "OpenWriteEnd");
    pid = Spawn(helper, lines, w.get());
  }
  bool exited = false;
  int status = 0;
  if (!loop->WatchChild(pid, [&](pid_t, int st) {
        exited = true;
        status = st;
      }).ok()) {
    Die("watch", "helper");
  }
  while (!exited) {
    Status st = loop->RunOnce(-1);
    if (!st.ok()) Die("loop", st.error().message());
  }
  lp->Drain();
  int64_t nanos = MonotonicNanos() - start;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) Die("helper", "did not exit 0");
  if (!error.empty() || lp->stats().bytes_dropped != 0) Die("LogPipe", "dropped data: " + error);
  Run r{lp->stats().bytes_written, nanos};
  lp.reset();
  bench::RemoveTree(sub);
  return r;
}

double MBps(const Run& r) { return static_cast<double>(r.bytes) / 1e6 / (static_cast<double>(r.nanos) / 1e9); }

int Main(int argc, char** argv) {
  bench::Name() = "log_bench";
  std::string helper;
  std::string lines = "10000000";
  int runs = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--helper" && i + 1 < argc) {
      helper = argv[++i];
    } else if (a == "--lines" && i + 1 < argc) {
      lines = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: log_bench [--helper PATH] [--lines N] [--runs N]\n");
      return 2;
    }
  }
  if (helper.empty()) {
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) Die("readlink", "/proc/self/exe");
    self[n] = '\0';
    helper = sys::Dirname(sys::Dirname(self)) + "/test_helper";
  }
  if (::access(helper.c_str(), X_OK) != 0) Die("helper not found (build it: make build/test_helper)", helper);

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-log-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Die("mkdtemp", tmpl);

  Run best_base{0, 0}, best_pipe{0, 0};
  for (int i = 0; i < runs; ++i) {
    // Alternate, so a change in machine load hits both sides alike.
    Run b = Baseline(helper, lines, tmpl);
    Run p = ThroughLogPipe(helper, lines, tmpl, i);
    if (p.bytes != b.bytes) {
      Die("LogPipe", "wrote " + std::to_string(p.bytes) + " bytes, the helper printed " + std::to_string(b.bytes));
    }
    if (best_base.nanos == 0 || b.nanos < best_base.nanos) best_base = b;
    if (best_pipe.nanos == 0 || p.nanos < best_pipe.nanos) best_pipe = p;
  }
  bench::RemoveTree(tmpl);
  double base = MBps(best_base), pipe = MBps(best_pipe);
  std::printf("BENCH log_throughput %.1f MB/s baseline=cat_to_file %.1f MB/s ratio=%.2f\n", pipe, base, pipe / base);
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
