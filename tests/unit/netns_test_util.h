// Helpers for tests that create network namespaces and mounts: they run as
// root only, and in a forked child with a private mount namespace, so that
// nothing they mount reaches the host's mount table and a crash leaves
// nothing behind (the mounts die with the child's namespace).
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

namespace outpost::testing {

// Why a namespace test cannot run here ("" = it can).
inline std::string NetnsTestSkipReason() {
  if (::geteuid() != 0) return "needs root (creates network namespaces and mounts)";
  return "";
}

// The inode of a namespace file (/proc/self/ns/net, a pin): equal inodes,
// same namespace. 0 when it cannot be stat'ed.
inline ino_t NsInode(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Runs body in a forked child with a private mount namespace. body returns
// "" on success or what went wrong; the child sends that back over a pipe.
// Returns "" when the child succeeded, else its message (or how it died).
inline std::string RunInMountNsChild(const std::function<std::string()>& body) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + std::strerror(errno);
  if (pid == 0) {
    ::close(p[0]);
    std::string msg;
    if (::unshare(CLONE_NEWNS) != 0) {
      msg = std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    } else if (::mount("", "/", nullptr, MS_PRIVATE | MS_REC, nullptr) != 0) {
      msg = std::string("make / private: ") + std::strerror(errno);
    } else {
      msg = body();
    }
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t n = ::write(p[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::_exit(msg.empty() ? 0 : 1);
  }
  ::close(p[1]);
  std::string msg;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(ws)) return msg + " (child killed by signal " + std::to_string(WTERMSIG(ws)) + ")";
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return msg.empty() ? "child exited with " + std::to_string(WEXITSTATUS(ws)) : msg;
  }
  return msg;
}

}  // namespace outpost::testing
