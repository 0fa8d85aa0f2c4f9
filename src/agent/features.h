// What this node offers, as reported by `outpost status`. Owns detection of
// kernel features (cgroup v2 mount and controllers, pidfd) from /proc and
// /sys. Pure reads: never mounts or writes anything.
#pragma once

#include <string>
#include <vector>

namespace outpost::agent {

struct Feature {
  std::string name;
  bool enabled = false;
  std::string detail;
};

struct Cgroup2Info {
  std::string mount_point;          // "" when no cgroup2 is mounted
  std::vector<std::string> controllers;  // from <mount>/cgroup.controllers
};

// Parses /proc/self/mountinfo text for the first cgroup2 mount.
std::string FindCgroup2Mount(const std::string& mountinfo);
Cgroup2Info DetectCgroup2();

}  // namespace outpost::agent
