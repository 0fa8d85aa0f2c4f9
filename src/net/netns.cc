#include "net/netns.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/sys.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

namespace outpost::net {

namespace {

// The pin dir must be a shared mount point: a pin bound below it then
// propagates into mount namespaces made later (a task's, `ip netns exec`'s),
// and unmounting it there is seen everywhere. Where dir is no mount point
// yet, the kernel refuses to change its propagation (EINVAL): binding dir
// onto itself makes it one.
Status MakeSharedMount(const std::string& dir) {
  if (::mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) == 0) return OkStatus();
  if (errno != EINVAL) return PathError("mount --make-rshared", dir);
  if (::mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) != 0) {
    return PathError("mount --rbind", dir);
  }
  if (::mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) != 0) {
    return PathError("mount --make-rshared", dir);
  }
  return OkStatus();
}

// The empty file a namespace is bound over. A plain file left by a crash
// between create and mount is replaced.
Status CreateMountTarget(const std::string& path) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (fd >= 0) {
      ::close(fd);
      return OkStatus();
    }
    if (errno != EEXIST || attempt > 0) break;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return PathError("unlink stale", path);
  }
  return PathError("create", path);
}

// Loopback is down in a new namespace; nearly every program expects it up.
Status LoopbackUp() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return ErrnoError("bring up lo: socket");
  UniqueFd sock(s);
  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) != 0) return ErrnoError("bring up lo: SIOCGIFFLAGS");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  if (::ioctl(s, SIOCSIFFLAGS, &ifr) != 0) return ErrnoError("bring up lo: SIOCSIFFLAGS");
  return OkStatus();
}

// Back into the agent's own namespace. Staying in a job's namespace would
// put every later socket, plugin and task of the agent there: no way on.
void ReturnToNetnsOrDie(int own_fd, const std::string& path) {
  if (::setns(own_fd, CLONE_NEWNET) == 0) return;
  int err = errno;
  std::fprintf(stderr, "outpost: fatal: cannot return to the agent's network namespace after entering '%s': %s\n",
               path.c_str(), std::strerror(err));
  std::abort();
}

// In a new namespace: lo up, then bind it over path. Runs with the calling
// thread in the new namespace; the caller returns it.
Status SetUpAndBind(const std::string& path) {
  if (::unshare(CLONE_NEWNET) != 0) return ErrnoError("unshare(CLONE_NEWNET) for '" + path + "'");
  Status st = LoopbackUp();
  if (!st.ok()) return st.error().Wrap("new network namespace '" + path + "'");
  if (::mount("/proc/self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0) {
    return PathError("bind the network namespace onto", path);
  }
  return OkStatus();
}

}  // namespace

Status PinNewNetns(const std::string& dir, const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return Error(Code::kInvalidArgument, "network namespace name \"" + name + "\" is not a plain file name");
  }
  OUTPOST_RETURN_IF_ERROR(sys::MkdirAll(dir, 0755));
  OUTPOST_RETURN_IF_ERROR(MakeSharedMount(dir));
  const std::string path = dir + "/" + name;
  if (IsPinnedNetns(path)) return Error(Code::kAlreadyExists, "network namespace '" + path + "' exists already");
  OUTPOST_RETURN_IF_ERROR(CreateMountTarget(path));

  // Opened before the switch: the way back.
  int own = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) {
    Error e = PathError("open", "/proc/self/ns/net");
    ::unlink(path.c_str());
    return e;
  }
  UniqueFd own_fd(own);
  Status st = SetUpAndBind(path);
  ReturnToNetnsOrDie(own_fd.get(), path);
  if (!st.ok()) {
    // Nothing half-made stays: a mount done before a later failure (none
    // today, the bind is last) and the file.
    if (IsPinnedNetns(path)) ::umount2(path.c_str(), MNT_DETACH);
    ::unlink(path.c_str());
    return st.error();
  }
  return OkStatus();
}

bool IsPinnedNetns(const std::string& path) {
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return false;
  return static_cast<unsigned long>(fs.f_type) == static_cast<unsigned long>(NSFS_MAGIC);
}

Status UnpinNetns(const std::string& path) {
  // EINVAL: not a mount point (a plain file left by a crash); ENOENT: gone.
  if (::umount2(path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return PathError("umount", path);
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return PathError("unlink", path);
  return OkStatus();
}

Result<UniqueFd> OpenNetns(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PathError("open network namespace", path);
  return UniqueFd(fd);
}

Result<UniqueFd> SocketInNetns(const std::string& path, int domain, int type, int protocol) {
  auto ns = OpenNetns(path);
  if (!ns.ok()) return ns.error();
  int own = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) return PathError("open", "/proc/self/ns/net");
  UniqueFd own_fd(own);
  if (::setns(ns->get(), CLONE_NEWNET) != 0) return PathError("enter network namespace", path);
  int s = ::socket(domain, type | SOCK_CLOEXEC, protocol);
  int err = errno;
  ReturnToNetnsOrDie(own_fd.get(), path);
  if (s < 0) return ErrnoError("socket in network namespace '" + path + "'", err);
  return UniqueFd(s);
}

}  // namespace outpost::net
