#include "agent/features.h"

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::agent {

std::string FindCgroup2Mount(const std::string& mountinfo) {
  // mountinfo: "36 35 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw"
  // The fs type is the first field after the " - " separator.
  for (const std::string& line : Split(mountinfo, '\n')) {
    size_t sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::vector<std::string> pre = Split(line.substr(0, sep), ' ');
    std::vector<std::string> post = Split(line.substr(sep + 3), ' ');
    if (pre.size() >= 5 && !post.empty() && post[0] == "cgroup2") return pre[4];
  }
  return "";
}

Cgroup2Info DetectCgroup2() {
  Cgroup2Info info;
  auto mi = sys::ReadFile("/proc/self/mountinfo");
  if (!mi.ok()) return info;
  info.mount_point = FindCgroup2Mount(*mi);
  if (info.mount_point.empty()) return info;
  auto ctrl = sys::ReadFile(info.mount_point + "/cgroup.controllers", 4096);
  if (!ctrl.ok()) return info;
  for (std::string c : Split(*ctrl, ' ')) {
    while (!c.empty() && (c.back() == '\n' || c.back() == ' ')) c.pop_back();
    if (!c.empty()) info.controllers.push_back(c);
  }
  return info;
}

}  // namespace outpost::agent
