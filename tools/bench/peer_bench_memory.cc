// peer_bench: figure 5, the memory of the supervisors and loggers: a census
// of every tree's processes (RSS, Pss, page tables, mappings, fds, threads)
// and of the pipes and FIFOs in it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"
#include "peer_bench.h"

namespace outpost::peer_bench {
namespace {

// 5. Memory of the supervisors and loggers.
//
// Kernel memory is estimated, not measured (that needs a memory cgroup per
// tree): per supervisor/logger thread a 16 KiB kernel stack and a
// task_struct; per process its mm, signal, sighand, files and pid objects,
// one vm_area_struct + anon_vma_chain per mapping, its page tables (VmPTE)
// and a struct file per open fd; object sizes from /proc/slabinfo. Per
// pipe or FIFO in the tree (the services' ends included), the figures
// measured with a memory cgroup for docs/benchmarks.md: 2.4 KiB at the
// default 64 KiB size, 17.4 KiB at 1 MiB, in between by its slots.
std::map<std::string, double> SlabSizes() {
  std::map<std::string, double> out;
  auto text = sys::ReadFile("/proc/slabinfo", 1 << 20);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    std::vector<std::string> f;
    for (const std::string& w : Split(line, ' ')) {
      if (!w.empty()) f.push_back(w);
    }
    if (f.size() > 3 && f[0] != "#") out[f[0]] = std::atof(f[3].c_str());
  }
  return out;
}

struct Census {
  int procs = 0, threads = 0, fds = 0, pipes = 0, loggers = 0, maps = 0;
  long rss = 0, pss = 0, pte = 0;
  double pipe_kib = 0;
  double KernelKiB(const std::map<std::string, double>& slab) const {
    auto sz = [&](const char* n, double dflt) {
      auto it = slab.find(n);
      return it == slab.end() ? dflt : it->second;
    };
    double per_thread = 16384 + sz("task_struct", 4288);
    double per_proc = sz("mm_struct", 1600) + sz("signal_cache", 1152) + sz("sighand_cache", 2112) +
                      sz("files_cache", 704) + sz("pid", 192);
    double bytes = threads * per_thread + procs * per_proc + maps * (sz("vm_area_struct", 192) + sz("anon_vma_chain", 64)) +
                   fds * sz("filp", 192);
    return bytes / 1024 + static_cast<double>(pte) + pipe_kib;
  }
};

Census Count(const Tree& t) {
  Census c;
  std::set<std::pair<dev_t, ino_t>> pipes;
  for (pid_t pid : Descendants(t.wrapper)) {
    std::string comm = Comm(pid);
    bool service = comm == "run";  // the service itself: the same under every supervisor
    // Pipes of everyone (the services' ends included): the kernel memory supervision costs.
    DIR* d = ::opendir(Format("/proc/%d/fd", pid).c_str());
    int fds = 0;
    if (d) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        ++fds;
        std::string fdpath = Format("/proc/%d/fd/%s", pid, e->d_name);
        struct stat st;
        if (::stat(fdpath.c_str(), &st) == 0 && S_ISFIFO(st.st_mode) && pipes.insert({st.st_dev, st.st_ino}).second) {
          // Its size: reopened read-only, non-blocking (reads nothing, changes nothing).
          int fd = ::open(fdpath.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
          int size = fd >= 0 ? ::fcntl(fd, F_GETPIPE_SZ) : -1;
          if (fd >= 0) ::close(fd);
          double slots = size > 0 ? size / 4096.0 : 16;
          c.pipe_kib += slots <= 16 ? 2.4 : 2.4 + 15.0 * (slots - 16) / 240.0;
        }
      }
      ::closedir(d);
    }
    if (service) continue;
    if (comm == "s6-log" || comm == "svlogd") ++c.loggers;
    ++c.procs;
    c.fds += fds;
    c.rss += std::max(0L, bench::RssKiB(pid));
    c.pss += std::max(0L, bench::ProcKiB(pid, "smaps_rollup", "Pss"));
    c.pte += std::max(0L, bench::ProcKiB(pid, "status", "VmPTE"));
    c.threads += static_cast<int>(std::max(0L, bench::ProcKiB(pid, "status", "Threads")));
    auto maps = sys::ReadFile(Format("/proc/%d/maps", pid), 1 << 22);
    if (maps.ok()) c.maps += static_cast<int>(std::count(maps->begin(), maps->end(), '\n'));
  }
  c.pipes = static_cast<int>(pipes.size());
  return c;
}

}  // namespace

void Memory(const std::vector<int>& sizes) {
  const std::map<std::string, double> slab = SlabSizes();
  std::vector<Figure> totals;
  Figure rss{"mem_per_service_rss", "KiB"}, pss{"mem_per_service_pss", "KiB"}, kmem{"kmem_per_service_est", "KiB"};
  Figure pipes{"pipes_per_service", "pipes"};
  for (int n : sizes) totals.push_back(Figure{Format("mem_total_%d_services_rss", n), "KiB"});
  for (int p = 0; p < kPeers; ++p) {
    std::vector<Census> cs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int n = sizes[i];
      Tree t(static_cast<Peer>(p), TreeName(static_cast<Peer>(p), Format("mem%d", n).c_str()));
      t.Start(n);
      std::map<std::string, Tree::Stamp> stamps;
      int64_t t0 = t.StartSleepers("m", 4, n, 120 * kNanosPerSecond, &stamps);
      double up_s = static_cast<double>(MonotonicNanos() - t0) / 1e9;
      Census c;
      // The loggers start alongside the services: wait until all are up (polled every 50 ms).
      for (int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;;) {
        c = Count(t);
        if (p == kOutpost || c.loggers >= n) break;
        if (MonotonicNanos() > end) Fatal(Format("%s: only %d of %d loggers up", kPeerName[p], c.loggers, n));
        CheckInterrupt();
        ::usleep(50000);
      }
      ::usleep(1500 * 1000);  // let start-up allocations settle (outpost's keeper drops pages after 1 s idle)
      c = Count(t);
      cs.push_back(c);
      Info("%s with %d services (all up after %.2f s): %d supervisor/logger processes (%d threads), VmRSS %ld KiB, "
           "Pss %ld KiB, page tables %ld KiB, %d mappings, %d fds; %d pipes/FIFOs in the tree (%.0f KiB); "
           "kernel estimate %.0f KiB",
           kPeerName[p], n, up_s, c.procs, c.threads, c.rss, c.pss, c.pte, c.maps, c.fds, c.pipes, c.pipe_kib,
           c.KernelKiB(slab));
      totals[i].v[p] = static_cast<double>(c.rss);
      t.Stop();
    }
    const Census& a = cs.front();
    const Census& b = cs.back();
    double dn = sizes.back() - sizes.front();
    rss.v[p] = static_cast<double>(b.rss - a.rss) / dn;
    pss.v[p] = static_cast<double>(b.pss - a.pss) / dn;
    kmem.v[p] = (b.KernelKiB(slab) - a.KernelKiB(slab)) / dn;
    pipes.v[p] = (b.pipes - a.pipes) / dn;
  }
  for (Figure& f : totals) AddFigure(f);
  AddFigure(rss);
  AddFigure(pss);
  AddFigure(kmem);
  AddFigure(pipes);
}

}  // namespace outpost::peer_bench
