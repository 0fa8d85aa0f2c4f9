// peer_bench: figures 1-4, 6 and 7 (start of one and of 100 services,
// restart after kill -9, crash loop CPU, log throughput, installed size;
// what each measures is at the top of peer_bench.cc).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "peer_bench.h"

namespace outpost::peer_bench {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

int g_tree_seq = 0;

}  // namespace

std::string TreeName(Peer p, const char* what) { return Format("%s-%s-%d", kPeerName[p], what, g_tree_seq++); }

std::vector<std::string> StampSleep(const Tree& t, const std::string& name) {
  return {"service", "stamp", t.StampPath(name), "sleep", "100000"};
}

// ---- start and restart -------------------------------------------------------------

namespace {

// The floor of figures 1 and 3: fork+exec of the service's program to its
// stamp, the median of reps.
double FloorStampMedian(bench::FloorProbe* floor, int reps) {
  std::vector<double> fl;
  for (int r = 0; r < reps; ++r) {
    auto ns = floor->Stamp(g_dir + "/floor-stamp");
    if (!ns.ok()) Fatal(ns.error().message());
    fl.push_back(Ms(*ns));
  }
  return Median(fl);
}

}  // namespace

// 1. One service, reps times (after a warm-up), in one tree per peer;
// against the floor, fork+exec of the same program to its stamp.
void StartOne(bench::FloorProbe* floor, int reps) {
  Figure f{"start_1_service_p50", "ms"};
  for (int p = 0; p < kPeers; ++p) {
    Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "start1"));
    t.Start(reps + 1);
    std::vector<double> ms;
    for (int r = 0; r <= reps; ++r) {  // the first is a warm-up
      std::string n = Format("a%02d", r);
      t.Prepare({n, StampSleep(t, n)});
      int64_t t0 = MonotonicNanos();
      t.Activate({n});
      auto st = t.WaitStamps({n}, 30 * kNanosPerSecond);
      if (r > 0) ms.push_back(Ms(st[n].ns - t0));
    }
    t.Stop();
    f.v[p] = Median(ms);
    std::sort(ms.begin(), ms.end());
    Info("start of 1 service, %s: p50 %.3f ms, min %.3f, max %.3f ms (%d reps)", kPeerName[p], f.v[p], ms.front(),
         ms.back(), reps);
  }
  f.floor = FloorStampMedian(floor, reps);
  AddFigure(f);
}

// 2. 100 services at once, in a fresh tree per rep.
void StartHundred(bench::FloorProbe* floor, int reps) {
  constexpr int kN = 100;
  Figure f{"start_100_services_p50", "ms"};
  for (int p = 0; p < kPeers; ++p) {
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "start100"));
      t.Start(kN);
      std::map<std::string, Tree::Stamp> st;
      int64_t t0 = t.StartSleepers("h", 3, kN, 60 * kNanosPerSecond, &st);
      int64_t last = 0;
      for (auto& kv : st) last = std::max(last, kv.second.ns);
      ms.push_back(Ms(last - t0));
      t.Stop();
    }
    f.v[p] = Median(ms);
    std::sort(ms.begin(), ms.end());
    Info("start of 100 services, %s: p50 %.2f ms, min %.2f, max %.2f ms (%d reps)", kPeerName[p], f.v[p],
         ms.front(), ms.back(), reps);
  }
  std::vector<double> fl;
  for (int r = 0; r < reps; ++r) {
    auto a = floor->Exec(50);
    auto b = floor->Exec(50);
    if (!a.ok() || !b.ok()) Fatal("floor probe: exec 50 failed");
    fl.push_back(Ms(*a + *b));
  }
  f.floor = Median(fl);
  AddFigure(f);
}

// 3. Restart after kill -9 of a service that has been up 1.2 s. The three
// trees run side by side, and each round kills one service in each, one
// after the other in an order that rotates from round to round: all three
// are measured over the same minutes of the machine, whose speed drifts,
// and none is always the first after the sleep. `reps` rounds.
void Restart(bench::FloorProbe* floor, int reps) {
  Figure f{"restart_after_kill9_p50", "ms"};
  std::vector<std::unique_ptr<Tree>> trees;
  std::map<std::string, Tree::Stamp> st[kPeers];
  const std::string n = "r";
  for (int p = 0; p < kPeers; ++p) {
    trees.push_back(std::make_unique<Tree>(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "restart")));
    trees[p]->Start(1);
    trees[p]->Prepare({n, StampSleep(*trees[p], n)});
    trees[p]->Activate({n});
    st[p] = trees[p]->WaitStamps({n}, 30 * kNanosPerSecond);
  }
  std::vector<double> ms[kPeers];
  for (int r = 0; r < reps; ++r) {
    ::usleep(1200 * 1000);  // up for more than 1 s: no restart throttle applies
    for (int i = 0; i < kPeers; ++i) {
      const int p = (r + i) % kPeers;
      Tree& t = *trees[p];
      pid_t pid = st[p][n].pid;
      CheckInterrupt();
      if (Comm(pid) != "run" || !HasMarker(pid)) {
        Fatal(Format("%s: pid %d is not our service any more", kPeerName[p], pid));
      }
      int64_t t0 = MonotonicNanos();
      if (::kill(pid, SIGKILL) != 0) Fatal(Format("kill %d: %s", pid, std::strerror(errno)));
      st[p] = t.WaitStamps({n}, 30 * kNanosPerSecond);
      if (st[p][n].pid == pid) Fatal(Format("%s: the service's pid did not change", kPeerName[p]));
      ms[p].push_back(Ms(st[p][n].ns - t0));
    }
  }
  for (int p = 0; p < kPeers; ++p) {
    trees[p]->Stop();
    f.v[p] = Median(ms[p]);
    std::sort(ms[p].begin(), ms[p].end());
    Info("restart after kill -9, %s: p50 %.3f ms, min %.3f, max %.3f ms (%d rounds, the trees side by side)",
         kPeerName[p], f.v[p], ms[p].front(), ms[p].back(), reps);
  }
  f.floor = FloorStampMedian(floor, reps);
  AddFigure(f);
}

// ---- crash loop ----------------------------------------------------------------------

namespace {

// CPU (us) of `fork + exec helper service exit 1 + wait`, from a small child.
double ForkExecCpuUs(int n) {
  rusage before, after;
  ::getrusage(RUSAGE_CHILDREN, &before);
  std::fflush(stdout);
  pid_t c = ::fork();
  if (c == 0) {
    for (int i = 0; i < n; ++i) {
      pid_t k = ::fork();
      if (k == 0) {
        const char* argv[] = {g_bins.helper.c_str(), "service", "exit", "1", nullptr};
        ::execv(argv[0], const_cast<char* const*>(argv));
        ::_exit(127);
      }
      ::waitpid(k, nullptr, 0);
    }
    ::_exit(0);
  }
  ::waitpid(c, nullptr, 0);
  ::getrusage(RUSAGE_CHILDREN, &after);
  auto us = [](const rusage& r) {
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
           static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  };
  return (us(after) - us(before)) / n;
}

}  // namespace

namespace {

// Lines in a file whose last line is complete (0 if it cannot be read).
int CompleteLines(const std::string& path) {
  auto text = sys::ReadFile(path, 1 << 20);
  if (!text.ok()) return 0;
  size_t n = static_cast<size_t>(std::count(text->begin(), text->end(), '\n'));
  return static_cast<int>(n);
}

// Polls (every 2 ms) until path has at least n complete lines.
void WaitLines(const std::string& path, int n, const char* peer, const char* what) {
  for (int64_t end = MonotonicNanos() + 30 * kNanosPerSecond; CompleteLines(path) < n;) {
    if (MonotonicNanos() > end) Fatal(Format("%s: %s within 30 s", peer, what));
    CheckInterrupt();
    ::usleep(2000);
  }
}

}  // namespace

// 4. Crash loop CPU: the CPU a tree used over a whole number of restarts,
// from just after one start of the service to just after the N-th start
// after it (its supervisors' own start-up and shut-down left out, and no
// partial cycle at either end): every live process's CPU clock read at both
// ends, plus what each service started in between reported at its exit (the
// time its supervisor's child spent before exec included). The same tree's
// CPU with a sleeping service, per second, is subtracted. The three peers'
// trees run side by side, so that all three are measured over the same
// seconds of the machine (whose speed drifts by 2x within an hour here);
// each restarts about once a second, a third of a second after the one
// before it, and is idle in between. Where in that second a tree restarts
// changes its cost here (the first one activated cost 2-3x the last in
// the same run, whichever peer it was), so there are `rounds` rounds with
// the order rotated, and the figure is their total CPU over their total
// time.
void CrashLoop(int restarts, int rounds) {
  Figure f{"crash_loop_cpu", "ms/s"};
  Figure starts{"crash_loop_starts", "1/s"};
  char* real = ::realpath(g_bins.helper.c_str(), nullptr);
  const std::string helper_exe = real ? real : g_bins.helper;
  std::free(real);
  struct Run {
    std::unique_ptr<Tree> tree;
    std::string counter, cpu;
    int64_t from = 0, to = 0;
    long long tree_from = 0, tree_to = 0, services = 0;
    int count = 0;
    int lines_before = 0;  // starts counted at the last poll before the window
  };
  // [crash][peer]: CPU (ns) and seconds summed over the rounds.
  double used_ns[2][kPeers] = {}, seconds[2][kPeers] = {};
  // One round: the three trees side by side, activated in the order
  // first, first + 1, ... (mod 3). The sleeping trees run as long as the
  // crashing ones took on average.
  auto round = [&](bool crash, int first) {
    std::vector<Run> runs(kPeers);
    for (int p = 0; p < kPeers; ++p) {
      Run& r = runs[p];
      r.tree = std::make_unique<Tree>(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), crash ? "crash" : "idle"));
      // The peers' rate: one start per second (outpost's default doubles
      // the delay of quick deaths up to 1m).
      r.tree->outpost_restart = "{\"delay\": \"0s\"}";
      r.tree->Start(1);
      r.counter = r.tree->dir + "/starts";
      r.cpu = r.tree->dir + "/cpu";
      r.tree->Prepare({"c", crash ? std::vector<std::string>{"service", "count", r.counter, "cpu", r.cpu, "exit", "1"}
                                  : std::vector<std::string>{"service", "count", r.counter, "sleep", "100000"}});
    }
    // A third of a second apart: the three restart at different moments.
    for (int q = 0; q < kPeers; ++q) {
      if (q > 0) ::usleep(333333);
      runs[(first + q) % kPeers].tree->Activate({"c"});
    }
    // runsvdir may take up to 5 s to see the service.
    const int64_t deadline = MonotonicNanos() + (40 + 2 * restarts) * kNanosPerSecond;
    for (int done = 0; done < kPeers;) {
      if (MonotonicNanos() > deadline) Fatal("crash loop: the services did not start or restart in time");
      CheckInterrupt();
      for (int p = 0; p < kPeers; ++p) {
        Run& r = runs[p];
        if (r.to != 0) continue;
        int lines = CompleteLines(r.counter);
        if (r.from == 0 && lines >= 1 && (!crash || (r.lines_before >= 1 && lines > r.lines_before))) {
          // Just after a start (one seen happen, not one found done): a
          // whole number of cycles follows.
          r.from = MonotonicNanos();
          r.tree_from = LiveCpuNs(r.tree->wrapper, helper_exe);
          r.lines_before = lines;
        } else if (r.from == 0) {
          r.lines_before = lines;
        } else if (crash ? lines >= r.lines_before + restarts
                         : MonotonicNanos() - r.from >=
                               static_cast<int64_t>(seconds[1][p] / std::max(rounds, 1) * 1e9)) {
          r.to = MonotonicNanos();
          r.tree_to = LiveCpuNs(r.tree->wrapper, helper_exe);
          ++done;
        }
      }
      ::usleep(2000);  // polled every 2 ms
    }
    for (int p = 0; p < kPeers; ++p) {
      Run& r = runs[p];
      if (crash) {
        WaitLines(r.cpu, r.lines_before + restarts, kPeerName[p], "the crash-loop service did not report its CPU");
        auto text = sys::ReadFile(r.cpu, 1 << 20);
        long long last = 0;
        std::string gaps;
        for (const std::string& l : Split(text.ok() ? *text : std::string(), '\n')) {
          char* rest = nullptr;
          long long main_ns = std::strtoll(l.c_str(), &rest, 10);
          if (!l.empty() && last) gaps += Format(" %.0f", static_cast<double>(main_ns - last) / 1e6);
          if (!l.empty()) last = main_ns;
          if (l.empty() || main_ns <= r.from || main_ns > r.to) continue;
          r.services += std::strtoll(rest, nullptr, 10);
          ++r.count;
        }
        Info("crash loop, %s: ms between starts:%s", kPeerName[p], gaps.c_str());
        if (r.count != restarts) {
          Fatal(Format("%s: %d of %d restarts reported their CPU", kPeerName[p], r.count, restarts));
        }
      }
      r.tree->Stop();
      const double used = static_cast<double>(r.tree_to - r.tree_from + r.services);
      const double secs = static_cast<double>(r.to - r.from) / 1e9;
      used_ns[crash][p] += used;
      seconds[crash][p] += secs;
      Info("crash loop, %s, %s, activated %s: %.1f ms CPU in %.2f s (%.2f ms/s), of which %.1f ms in %d services",
           kPeerName[p], crash ? "crashing" : "sleeping",
           (p - first + kPeers) % kPeers == 0 ? "first" : (p - first + kPeers) % kPeers == 1 ? "second" : "third",
           used / 1e6, secs, used / 1e6 / secs, static_cast<double>(r.services) / 1e6, r.count);
    }
  };
  for (int i = 0; i < rounds; ++i) round(true, i % kPeers);
  round(false, 0);
  for (int p = 0; p < kPeers; ++p) {
    f.v[p] = (used_ns[1][p] / seconds[1][p] - used_ns[0][p] / seconds[0][p]) / 1e6;
    starts.v[p] = restarts * rounds / seconds[1][p];
    Info("crash loop, %s: %d restarts in %.2f s: %.3f ms CPU per s, %.3f ms per restart", kPeerName[p],
         restarts * rounds, seconds[1][p], f.v[p], f.v[p] * seconds[1][p] / (restarts * rounds));
  }
  double per_start_us = ForkExecCpuUs(20);
  f.floor = per_start_us / 1000.0 * 1.0;  // one start per second
  starts.floor = -1;
  Info("default backoff: s6-supervise waits 1 s before restarting a service that ran < 1 s; runsv waits 1 s "
       "likewise; outpost (default: a quick death waits 1s, doubling to 1m) is measured here with delay 0s: "
       "at most one start per second, as the peers");
  Info("floor: one fork+exec+exit of the same program per second: %.3f ms CPU per start", per_start_us / 1000.0);
  AddFigure(f);
  Info("crash loop starts per second: outpost %.2f, s6 %.2f, runit %.2f", starts.v[0], starts.v[1], starts.v[2]);
}

// ---- log throughput ------------------------------------------------------------------

namespace {

uint64_t ExpectedBytes(long n) {
  uint64_t b = 0;
  for (long i = 1; i <= n; ++i) b += std::to_string(i).size() + 1;
  return b;
}

uint64_t LogBytes(Peer p, const std::string& dir, std::vector<std::string>* files) {
  uint64_t total = 0;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    if (!Tree::IsLogFile(p, e->d_name)) continue;
    struct stat st;
    std::string path = dir + "/" + e->d_name;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    total += static_cast<uint64_t>(st.st_size);
    if (files) files->push_back(path);
  }
  ::closedir(d);
  return total;
}

void VerifyLines(const char* who, const std::vector<std::string>& files, long n) {
  std::vector<uint8_t> seen(static_cast<size_t>(n) + 1, 0);
  long lines = 0;
  for (const std::string& f : files) {
    auto text = sys::ReadFile(f, 1 << 30);
    if (!text.ok()) Fatal(std::string(who) + ": read " + f);
    size_t at = 0;
    while (at < text->size()) {
      size_t nl = text->find('\n', at);
      if (nl == std::string::npos) Fatal(Format("%s: %s ends in a partial line", who, f.c_str()));
      char* end = nullptr;
      long v = std::strtol(text->c_str() + at, &end, 10);
      if (end != text->c_str() + nl || v < 1 || v > n) {
        Fatal(Format("%s: unexpected line in %s: \"%s\"", who, f.c_str(), text->substr(at, std::min<size_t>(nl - at, 80)).c_str()));
      }
      if (seen[static_cast<size_t>(v)]++) Fatal(Format("%s: line %ld is in the logs twice", who, v));
      ++lines;
      at = nl + 1;
    }
  }
  if (lines != n) {
    long first = 0;
    for (long i = 1; i <= n && !first; ++i) {
      if (!seen[static_cast<size_t>(i)]) first = i;
    }
    Fatal(Format("%s: %ld of %ld lines in the logs (first missing: %ld)", who, lines, n, first));
  }
}

}  // namespace

// 6. Log throughput, each line exactly once.
void LogThroughput(long n, int runs) {
  Figure f{"log_throughput", "MiB/s"};
  f.higher_better = true;
  f.bench_name = "peer_log_ns_per_line";
  f.bench_unit = "ns";
  const uint64_t bytes = ExpectedBytes(n);
  for (int p = 0; p < kPeers; ++p) {
    double best = 1e30;
    size_t nfiles = 0;
    for (int r = 0; r < runs; ++r) {
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), "log"));
      t.Start(1);
      std::string name = "l";
      t.Prepare({name, {"service", "stamp", t.StampPath(name), "lines", std::to_string(n), "sleep", "100000"}});
      t.Activate({name});
      auto st = t.WaitStamps({name}, 30 * kNanosPerSecond);
      std::string dir = t.LogDir(name);
      int64_t done = 0;
      for (int64_t end = MonotonicNanos() + 120 * kNanosPerSecond;;) {  // polled every 1 ms
        uint64_t now = LogBytes(static_cast<Peer>(p), dir, nullptr);
        if (now >= bytes) {
          done = MonotonicNanos();
          break;
        }
        if (MonotonicNanos() > end) {
          Fatal(Format("%s: %llu of %llu bytes in %s after 120 s", kPeerName[p], static_cast<unsigned long long>(now),
                       static_cast<unsigned long long>(bytes), dir.c_str()));
        }
        CheckInterrupt();
        ::usleep(1000);
      }
      ::usleep(200000);  // anything beyond the expected bytes (a duplicate) has time to show up
      std::vector<std::string> files;
      LogBytes(static_cast<Peer>(p), dir, &files);
      VerifyLines(kPeerName[p], files, n);
      nfiles = files.size();
      best = std::min(best, static_cast<double>(done - st[name].ns) / 1e9);
      t.Stop();
    }
    f.v[p] = static_cast<double>(bytes) / (1 << 20) / best;
    f.bench_v[p] = best * 1e9 / static_cast<double>(n);
    Info("log, %s: %ld lines (%.1f MiB) in the log files %.3f s after the service's main (best of %d): "
         "%.0f lines/s, %.1f MiB/s; %zu files; every line once",
         kPeerName[p], n, static_cast<double>(bytes) / (1 << 20), best, runs, n / best, f.v[p], nfiles);
  }
  // Floor: the same program writing to a regular file.
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    std::string out = g_dir + "/floor.log", stamp = g_dir + "/floor-log-stamp";
    int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    std::fflush(stdout);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fd, 1);
      std::string ns = std::to_string(n);
      const char* argv[] = {g_bins.helper.c_str(), "service", "stamp", stamp.c_str(), "lines", ns.c_str(), nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(fd);
    ::waitpid(pid, nullptr, 0);
    int64_t done = MonotonicNanos();
    auto text = sys::ReadFile(stamp, 128);
    if (!text.ok()) Fatal("floor: no stamp");
    best = std::min(best, static_cast<double>(done - std::strtoll(text->c_str(), nullptr, 10)) / 1e9);
    ::unlink(out.c_str());
    ::unlink(stamp.c_str());
  }
  f.floor = static_cast<double>(bytes) / (1 << 20) / best;
  Info("log floor: the same %ld lines to a regular file in %.3f s: %.0f lines/s", n, best, n / best);
  AddFigure(f);
}

// ---- installed size ------------------------------------------------------------------

namespace {

long FileBytes(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_size) : -1;
}

// The shared libraries path needs, except libc and the dynamic loader (ldd's "=> /path").
std::vector<std::string> SharedLibs(const std::string& path) {
  std::vector<std::string> out;
  std::string cmd = "ldd '" + path + "' 2>/dev/null";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  char line[1024];
  while (std::fgets(line, sizeof line, f)) {
    const char* arrow = std::strstr(line, "=> /");
    if (!arrow) continue;
    std::string lib = arrow + 3;
    lib = lib.substr(0, lib.find(' '));
    if (lib.find("/libc.so") != std::string::npos || lib.find("ld-linux") != std::string::npos) continue;
    out.push_back(lib);
  }
  ::pclose(f);
  return out;
}

double InstalledKiB(const char* who, const std::vector<std::string>& bins) {
  std::set<std::string> files(bins.begin(), bins.end());
  for (const std::string& b : bins) {
    for (const std::string& l : SharedLibs(b)) files.insert(l);
  }
  long total = 0;
  std::string list;
  for (const std::string& f : files) {
    long b = FileBytes(f);
    total += std::max(0L, b);
    list += Format(" %s=%ld", f.c_str(), b);
  }
  Info("installed, %s: %ld bytes:%s", who, total, list.c_str());
  return static_cast<double>(total) / 1024;
}

}  // namespace

// 7. Installed size.
void InstalledSize() {
  Figure f{"installed_size", "KiB"};
  std::string stripped = g_dir + "/outpost.stripped";
  std::string strip = Which("strip");
  if (!strip.empty() && RunCommand({strip, "-o", stripped, g_bins.outpost})) {
    f.v[kOutpost] = InstalledKiB("outpost (stripped, static: its libc included)", {stripped});
  } else {
    f.v[kOutpost] = InstalledKiB("outpost (not stripped: no strip found)", {g_bins.outpost});
  }
  f.v[kS6] = InstalledKiB("s6 (glibc not counted)",
                          {g_bins.svscan, g_bins.svscanctl, g_bins.supervise, g_bins.s6log, g_bins.s6svc});
  f.v[kRunit] = InstalledKiB("runit (glibc not counted)", {g_bins.runsvdir, g_bins.runsv, g_bins.svlogd, g_bins.sv});
  // The shared glibc the peers use (outpost carries its own, static).
  std::string libc;
  FILE* l = ::popen(("ldd '" + g_bins.runsv + "' 2>/dev/null").c_str(), "r");
  char line[1024];
  while (l && std::fgets(line, sizeof line, l)) {
    const char* arrow = std::strstr(line, "=> /");
    if (arrow && std::strstr(line, "libc.so")) libc = std::string(arrow + 3).substr(0, std::string(arrow + 3).find(' '));
  }
  if (l) ::pclose(l);
  double libc_kib = libc.empty() ? 0 : static_cast<double>(FileBytes(libc)) / 1024;
  Info("not counted above: the peers' shared %s, %.0f KiB (with it: s6 %.0f KiB, runit %.0f KiB)",
       libc.empty() ? "libc" : libc.c_str(), libc_kib, f.v[kS6] + libc_kib, f.v[kRunit] + libc_kib);
  AddFigure(f);
}

}  // namespace outpost::peer_bench
