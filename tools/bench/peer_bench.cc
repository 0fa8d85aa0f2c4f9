// outpost next to its peers s6 (s6-svscan / s6-supervise / s6-log) and runit
// (runsvdir / runsv / svlogd), on the same work in the same run. Skips (exit 0,
// with a message) when s6 or runit is not installed (tools/deps.sh bench).
//
// Every service, whoever supervises it, is the same static program: a service
// dir's `run` is a symlink to test_helper, which reads its steps from
// ./run.args (`service stamp FILE sleep 1000`, ...; tests/helpers). outpost
// runs that same `run` (command = <svcdir>/run, workdir = <svcdir>), one job
// per service, with outpost's default restart policy (the crash loop alone
// sets "delay": "0s", for the peers' one start per second). s6
// and runit services have a logger (log/run: `exec s6-log n10 s10485760
// ./main` / `exec svlogd ./main` with s10485760 n10), as outpost keeps every
// task's output in rotated files (10 x 10 MiB by default).
//
// Each supervisor tree runs under a wrapper process of ours (a fork of this
// bench, in its own session, a child subreaper): it starts the supervisor,
// and when told to stop (or when this bench dies: its pipe closes) it sends
// the supervisor its stop signal (outpost: SIGTERM, s6-svscan: SIGTERM,
// runsvdir: SIGHUP), then SIGKILLs whatever is left below it, reaps
// everything and reports getrusage(RUSAGE_CHILDREN): the CPU of the whole
// tree, services included. Nothing outlives the bench, also on SIGINT.
//
// Figures (PEER lines; a BENCH line each for outpost against the better peer):
//  1. start of one service: outpost: the job file renamed into jobs.d; s6: the
//     service dir renamed into the scan dir, then `s6-svscanctl -a`; runit:
//     renamed into the scan dir (runsvdir looks every 5 s) -> the service's
//     first instruction of main. p50. Floor: fork+exec of the same program.
//  2. start of 100 services at once: the 100 renames (+ one s6-svscanctl -a)
//     -> the last of the 100 mains. p50 of a few, each in a fresh tree.
//     Floor: 100 fork+exec (2 x 50, from test_helper floor).
//  3. restart after kill -9 of a service up for 1.2 s -> first instruction
//     of the new instance's main. p50 of 2 x reps + 1 rounds; the three
//     trees side by side, each round killing one service in each, in an
//     order that rotates.
//  4. CPU of a crash loop (a service that exits 1 at once): the tree's CPU
//     over N whole restarts (just after a start to just after the N-th start
//     after it; start-up and shut-down left out) per second, minus that of
//     the same tree with a sleeping service per second; the three trees side
//     by side, in three rounds that rotate their order; starts per second
//     alongside.
//  5. memory per service: VmRSS (and Pss) of every supervisor and logger
//     process (not the services), at 1, 100 and 1,000 services; slope per
//     service; kernel memory estimated from the processes' page tables and
//     kernel stacks; pipes counted.
//  6. log throughput: a service prints N numbered lines at full speed; from its
//     main to all N lines in the log files (polled every 1 ms); every line
//     checked to be there exactly once (the bench fails otherwise).
//     Floor: the same program writing to a regular file.
//  7. installed size: the files each needs (binaries and their non-libc
//     shared libraries) against outpost's stripped static binary.
//
//   peer_bench [--outpost PATH] [--helper PATH] [--reps N] [--lines N] [--quick]
//              [--only start|restart|crash|memory|log|size]
//
// Split by concern over peer_bench*.cc; which file holds what: peer_bench.h.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "peer_bench.h"

namespace outpost::peer_bench {

Bins g_bins;
std::string g_dir, g_marker;
std::vector<Tree*> g_trees;

namespace {

bool g_cleaned = false;
std::vector<Figure> g_figures;

void Cleanup();

}  // namespace

[[noreturn]] void Fatal(const std::string& what) {
  std::fprintf(stderr, "peer_bench: %s\n", what.c_str());
  std::fflush(stderr);
  Cleanup();
  std::exit(1);
}

void CheckInterrupt() {
  if (g_interrupted) Fatal("interrupted");
}

// ---- the PEER and BENCH lines ------------------------------------------------------

namespace {

std::string Num(double v) {
  if (v < 0) return "-";
  double a = v < 0 ? -v : v;
  if (a >= 1000) return Format("%.0f", v);
  if (a >= 100) return Format("%.1f", v);
  if (a >= 10) return Format("%.2f", v);
  if (a >= 1) return Format("%.3f", v);
  return Format("%.4f", v);
}

void PrintFigure(const Figure& f) {
  std::printf("PEER %s outpost=%s s6=%s runit=%s floor=%s unit=%s\n", f.name.c_str(), Num(f.v[0]).c_str(),
              Num(f.v[1]).c_str(), Num(f.v[2]).c_str(), Num(f.floor).c_str(), f.unit.c_str());
  const double* b = f.higher_better ? f.bench_v : f.v;
  double best = std::min(b[kS6], b[kRunit]);
  std::printf("BENCH %s %s %s baseline=best_peer %s ratio=%.2f\n", f.bench_name.c_str(), Num(b[kOutpost]).c_str(),
              f.bench_unit.c_str(), Num(best).c_str(), best > 0 ? b[kOutpost] / best : 0.0);
  std::fflush(stdout);
}

}  // namespace

void AddFigure(Figure f) {
  if (f.bench_name.empty()) f.bench_name = "peer_" + f.name;
  if (f.bench_unit.empty()) f.bench_unit = f.unit;
  PrintFigure(f);
  g_figures.push_back(f);
}

// ---- clean-up and main -------------------------------------------------------------

namespace {

void Cleanup() {
  if (g_cleaned) return;
  g_cleaned = true;
  std::vector<Tree*> trees = g_trees;
  for (Tree* t : trees) t->Stop();
  if (!g_marker.empty()) {
    std::vector<pid_t> strays = bench::PidsWithEnv(g_marker);
    for (pid_t p : strays) ::kill(p, SIGKILL);
    if (!strays.empty()) std::fprintf(stderr, "peer_bench: killed %zu stray processes\n", strays.size());
  }
  if (!g_dir.empty()) bench::RemoveTree(g_dir);
}

int Main(int argc, char** argv) {
  bench::Name() = "peer_bench";
  int reps = 7;
  long lines = 2000000;
  bool quick = false;
  std::string only;  // one figure (while working on it); the BENCH lines of the others are missing then
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--outpost" && i + 1 < argc) {
      g_bins.outpost = argv[++i];
    } else if (a == "--helper" && i + 1 < argc) {
      g_bins.helper = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--lines" && i + 1 < argc) {
      lines = std::max(1L, std::atol(argv[++i]));
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: peer_bench [--outpost PATH] [--helper PATH] [--reps N] [--lines N] [--quick]"
                           " [--only start|restart|crash|memory|log|size]\n");
      return 2;
    }
  }
  std::string missing = bench::FindBinaries(&g_bins.outpost, &g_bins.helper);
  if (!missing.empty()) Fatal(missing);
  struct {
    const char* name;
    std::string* path;
  } need[] = {{"s6-svscan", &g_bins.svscan},   {"s6-svscanctl", &g_bins.svscanctl}, {"s6-supervise", &g_bins.supervise},
              {"s6-log", &g_bins.s6log},       {"s6-svc", &g_bins.s6svc},           {"runsvdir", &g_bins.runsvdir},
              {"runsv", &g_bins.runsv},        {"svlogd", &g_bins.svlogd},          {"sv", &g_bins.sv}};
  std::string absent;
  for (auto& n : need) {
    *n.path = Which(n.name);
    if (n.path->empty()) absent += std::string(" ") + n.name;
  }
  if (!absent.empty()) {
    std::printf("peer_bench: skipped: not installed:%s (Debian packages s6 and runit: tools/deps.sh bench)\n",
                absent.c_str());
    return 0;
  }
  bench::CatchInterrupts();
  const int64_t begun = MonotonicNanos();
  bench::RaiseNofile(16 * 1024);
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/outpost-peer-bench-XXXXXX";
  if (!::mkdtemp(&tmpl[0])) Fatal("mkdtemp " + tmpl + ": " + std::strerror(errno));
  g_dir = tmpl;
  g_marker = std::string(bench::kMarkerVar) + "=" + g_dir;

  bench::FloorProbe floor;
  std::string err = floor.Start(g_bins.helper);
  if (!err.empty()) Fatal("floor probe: " + err);

  if (quick) reps = std::min(reps, 3);
  Info("outpost %s; s6 %s; runit %s; %d reps; runsvdir looks at its directory every 5 s by design",
       g_bins.outpost.c_str(), g_bins.svscan.c_str(), g_bins.runsvdir.c_str(), reps);
  auto want = [&only](const char* figure) { return only.empty() || only == figure; };
  if (want("start")) StartOne(&floor, reps);
  if (want("start")) StartHundred(&floor, quick ? 1 : 3);
  if (want("restart")) Restart(&floor, quick ? reps : 2 * reps + 1);  // rounds are cheap side by side
  if (want("crash")) CrashLoop(quick ? 3 : 8, quick ? 1 : 3);
  if (want("memory")) Memory(quick ? std::vector<int>{1, 100} : std::vector<int>{1, 100, 1000});
  if (want("log")) LogThroughput(quick ? lines / 4 : lines, quick ? 1 : 2);
  if (want("size")) InstalledSize();

  double load[3] = {0, 0, 0};
  (void)::getloadavg(load, 3);
  Info("load average %.2f on %ld CPUs; total %.1f s", load[0], ::sysconf(_SC_NPROCESSORS_ONLN),
       static_cast<double>(MonotonicNanos() - begun) / 1e9);
  Cleanup();
  return 0;
}

}  // namespace
}  // namespace outpost::peer_bench

int main(int argc, char** argv) { return outpost::peer_bench::Main(argc, argv); }
