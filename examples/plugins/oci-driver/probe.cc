#include "probe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "spec.h"

namespace oci_driver {

namespace {

// One line of a message: the runtime's errors end in newlines.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Containers of earlier probes whose process is gone (killed mid-probe):
// deleted, so that the probe's --root does not fill up. Ids are
// "probe-<pid>-<n>"; a live pid's probe is left alone.
void DeleteLeftovers(const Runtime& rt) {
  DIR* d = ::opendir(rt.root().c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, 6, "probe-") != 0) continue;
    int pid = std::atoi(name.c_str() + 6);
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  ::closedir(d);
  for (const std::string& id : stale) (void)rt.Run({"delete", "--force", id}, true, "");
}

// The container's init (our child: the prober is a subreaper) once the
// runtime deleted it; bounded, in case the runtime could not kill it.
void ReapInit(pid_t pid) {
  if (pid <= 0) return;
  for (int i = 0; i < 200; ++i) {
    pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return;
    struct timespec ts = {0, 10 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
}

int g_probes = 0;

}  // namespace

ProbeResult ProbeRuntime(const Runtime& rt, const std::string& dir, bool no_pivot) {
  ProbeResult out;
  out.unusable = rt.Probe(&out.version);
  if (!out.unusable.empty()) return out;
  Runtime prober(rt.path(), dir + "/root");
  std::string rootfs = dir + "/rootfs";
  std::string id = "probe-" + std::to_string(::getpid()) + "-" + std::to_string(++g_probes);
  std::string bundle = dir + "/" + id;
  if (!MkdirAll(prober.root(), 0700) || !MkdirAll(rootfs, 0755) || !MkdirAll(bundle, 0700) ||
      !WriteFile(rootfs + "/probe", "", 0755)) {
    out.create_error = "cannot prepare the probe container in " + dir + ": " + std::strerror(errno);
    return out;
  }
  DeleteLeftovers(prober);
  outpost::plugin_sdk::TaskConfig task;
  task.id = id;
  task.name = "probe";
  task.command = "/probe";
  TaskOptions opts;
  opts.rootfs = rootfs;
  std::string log = bundle + "/runtime.log";
  if (!WriteFile(bundle + "/config.json", BuildSpec(task, opts, picojson::value()).serialize(), 0600)) {
    out.create_error = "cannot write " + bundle + "/config.json: " + std::strerror(errno);
  } else {
    std::vector<std::string> create = {"create"};
    if (no_pivot) create.push_back("--no-pivot");
    create.insert(create.end(), {"--bundle", bundle, "--pid-file", bundle + "/pid", id});
    // As for a task without a cgroup from outpost (crun: no cgroup manager).
    // The container's stdio is /dev/null, not a pipe of ours: its init keeps
    // it open until the delete, and the runtime's error is in its log.
    int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    RunResult r = prober.Run(create, true, log, null, null);
    if (null >= 0) ::close(null);
    pid_t init = static_cast<pid_t>(std::atoi(ReadSmallFile(bundle + "/pid", 64).c_str()));
    if (!r.ok()) out.create_error = OneLine(r.error);
    RunResult del = prober.Run({"delete", "--force", id}, true, "");
    if (r.ok() && !del.ok()) out.create_error = "created, but delete failed: " + OneLine(del.error);
    ReapInit(init);
  }
  RemoveBundle(bundle);
  return out;
}

int ProbeMain(int argc, char** argv) {
  std::string runtime, dir;
  bool no_pivot = false;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-pivot") {
      no_pivot = true;
    } else if ((a == "--runtime" || a == "--dir") && i + 1 < argc) {
      (a == "--runtime" ? runtime : dir) = argv[++i];
    } else {
      std::fprintf(stderr, "outpost-oci-driver --probe: %s: unknown option\n", a.c_str());
      return 2;
    }
  }
  if (runtime.empty() || dir.empty()) {
    std::fprintf(stderr, "outpost-oci-driver --probe needs --runtime PATH and --dir DIR\n");
    return 2;
  }
  // The container's init is re-parented to us when the runtime's create
  // exits, and reaped here.
  (void)::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ProbeResult r = ProbeRuntime(Runtime(runtime, dir + "/root"), dir, no_pivot);
  std::printf("version %s\nunusable %s\ncreate %s\n", OneLine(r.version).c_str(), OneLine(r.unusable).c_str(),
              r.create_error.c_str());
  return std::fflush(stdout) == 0 ? 0 : 1;
}

ProbeResult ParseProbeOutput(const std::string& text) {
  ProbeResult r;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    size_t sp = line.find(' ');
    std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "version") r.version = value;
    if (key == "unusable") r.unusable = value;
    if (key == "create") r.create_error = value;
  }
  if (r.version.empty() && r.unusable.empty() && r.create_error.empty()) {
    r.create_error = "the probe process gave no result";
  }
  return r;
}

}  // namespace oci_driver
