// What the files of peer_bench share (internal to it; what it measures and
// how is at the top of peer_bench.cc):
//   peer_bench.cc          main, the PEER/BENCH lines, clean-up
//   peer_bench_tree.cc     a supervisor tree (outpost, s6, runit) under its
//                          wrapper process, its services, /proc helpers
//   peer_bench_figures.cc  figures 1-4, 6 and 7: start, restart, crash loop,
//                          log throughput, installed size
//   peer_bench_memory.cc   figure 5: the memory, fd and pipe census
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench_util.h"

namespace outpost::peer_bench {

using bench::g_interrupted;
using bench::Info;

enum Peer { kOutpost = 0, kS6 = 1, kRunit = 2 };
constexpr int kPeers = 3;
inline const char* const kPeerName[kPeers] = {"outpost", "s6", "runit"};

struct Bins {
  std::string outpost, helper;
  std::string svscan, svscanctl, s6log, supervise, s6svc;
  std::string runsvdir, runsv, svlogd, sv;
};

struct Tree;
extern Bins g_bins;
extern std::string g_dir, g_marker;
extern std::vector<Tree*> g_trees;  // running, for clean-up

// ---- peer_bench.cc -------------------------------------------------------------------

// Cleans up (every tree stopped, strays killed, the scratch dir removed) and exits 1.
[[noreturn]] void Fatal(const std::string& what);
void CheckInterrupt();

struct Figure {
  Figure(std::string n, std::string u) : name(std::move(n)), unit(std::move(u)) {}
  std::string name, unit, bench_name, bench_unit;
  double v[kPeers] = {0, 0, 0};
  double floor = -1;
  bool higher_better = false;
  // BENCH value when the PEER figure is "higher is better" (a rate): its inverse.
  double bench_v[kPeers] = {0, 0, 0};
};

// Prints f's PEER and BENCH lines.
void AddFigure(Figure f);

// ---- peer_bench_tree.cc --------------------------------------------------------------

std::string Which(const char* name);
// Runs argv, waits for it; true if it exited 0.
bool RunCommand(const std::vector<std::string>& args);
std::vector<pid_t> Descendants(pid_t root);
std::string Comm(pid_t pid);
// CPU (ns) used so far by every live process below root, zombies and the
// processes running skip_exe (a canonical path) left out.
long long LiveCpuNs(pid_t root, const std::string& skip_exe);
bool HasMarker(pid_t pid);

struct Service {
  std::string name;
  std::vector<std::string> args;  // after `run`
};

// One supervisor tree, under a wrapper process of ours.
struct Tree {
  Peer peer;
  std::string dir, svc, scan, stage, stamps, socket;
  pid_t wrapper = -1, root = -1;
  int ctl = -1;
  FILE* res = nullptr;
  int inotify = -1;
  bool stopped = false;
  // outpost's job `restart` block for the services prepared next ("" =
  // outpost's defaults, as every figure but the crash loop measures).
  std::string outpost_restart;

  Tree(Peer p, const std::string& name);
  ~Tree();

  // Starts the supervisor; services: the expected number (for s6-svscan's -c).
  void Start(int services);
  // Stops the supervisor and whatever is left below it; returns once all are gone.
  void Stop();

  std::string StampPath(const std::string& name) const { return stamps + "/" + name; }
  // Where the service's output lands.
  std::string LogDir(const std::string& name) const;
  static bool IsLogFile(Peer p, const char* name);

  // Prepares a service (dir and, for outpost, its job file) out of sight.
  void Prepare(const Service& s);
  // Makes prepared services visible to the supervisor, as a user would.
  void Activate(const std::vector<std::string>& names);

  struct Stamp {
    int64_t ns = 0;
    pid_t pid = 0;
  };
  // Waits (inotify on the stamps dir) until every name has written its stamp;
  // reads and removes them. Fails after timeout.
  std::map<std::string, Stamp> WaitStamps(const std::set<std::string>& names, int64_t timeout);
  // Prepares n services that stamp and sleep, named prefix + their number
  // in digits digits, makes them all visible at once and waits until every
  // main ran. Returns when they were made visible; *out gets their stamps.
  int64_t StartSleepers(const char* prefix, int digits, int n, int64_t timeout, std::map<std::string, Stamp>* out);
};

// ---- peer_bench_figures.cc -----------------------------------------------------------

// A fresh tree's name (its dir under g_dir), unique in the run.
std::string TreeName(Peer p, const char* what);
// A service that writes its stamp, then sleeps.
std::vector<std::string> StampSleep(const Tree& t, const std::string& name);

void StartOne(bench::FloorProbe* floor, int reps);
void StartHundred(bench::FloorProbe* floor, int reps);
void Restart(bench::FloorProbe* floor, int reps);
void CrashLoop(int restarts, int rounds);
void LogThroughput(long n, int runs);
void InstalledSize();

// ---- peer_bench_memory.cc ------------------------------------------------------------

void Memory(const std::vector<int>& sizes);

}  // namespace outpost::peer_bench
