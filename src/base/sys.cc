#include "base/sys.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace outpost::sys {

ssize_t Read(int fd, void* buf, size_t len) {
  return RetryEintr([&] { return ::read(fd, buf, len); });
}

ssize_t Write(int fd, const void* buf, size_t len) {
  return RetryEintr([&] { return ::write(fd, buf, len); });
}

Status WriteAll(int fd, const void* buf, size_t len, const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = Write(fd, p, len);
    if (n < 0) return ErrnoError(what);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return OkStatus();
}

Result<UniqueFd> Open(const std::string& path, int flags, mode_t mode) {
  int fd = RetryEintr([&] { return ::open(path.c_str(), flags | O_CLOEXEC, mode); });
  if (fd < 0) return PathError("open", path);
  return UniqueFd(fd);
}

Status MkdirAll(const std::string& path, mode_t mode) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty()) return Error(Code::kInvalidArgument, "mkdir: empty path");
  // The leaf first: its parents exist in the common case (a task's dir under
  // the state dir), which then costs one mkdir, not one per component.
  bool created = ::mkdir(p.c_str(), mode) == 0;
  if (!created && errno == ENOENT) {
    size_t slash = p.find_last_of('/');
    if (slash != std::string::npos && slash > 0) OUTPOST_RETURN_IF_ERROR(MkdirAll(p.substr(0, slash), 0755));
    created = ::mkdir(p.c_str(), mode) == 0;
  }
  if (!created) {
    if (errno != EEXIST) return PathError("mkdir", p);
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return PathError("stat", p);
    if (!S_ISDIR(st.st_mode)) return Error(Code::kFailedPrecondition, "'" + p + "' is not a directory");
    return OkStatus();
  }
  // Ours: the umask must not narrow it (a 0711 state dir at umask 077 would
  // keep task users out).
  if (::chmod(p.c_str(), mode) != 0) return PathError("chmod", p);
  return OkStatus();
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  auto fd = Open(path, O_RDONLY);
  if (!fd.ok()) return fd.error();
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = Read(fd->get(), buf, sizeof buf);
    if (n < 0) return PathError("read", path);
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return Error(Code::kResourceExhausted,
                   "read '" + path + "': file is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode, Durability durability) {
  const bool sync = durability == Durability::kPowerCut;
  std::string tmp = path + ".tmp";
  {
    auto fd = Open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (!fd.ok()) return fd.error();
    Status st = WriteAll(fd->get(), data.data(), data.size(), "write '" + tmp + "'");
    if (st.ok() && sync && ::fsync(fd->get()) != 0) st = PathError("fsync", tmp);
    if (!st.ok()) {
      ::unlink(tmp.c_str());  // a partial file would only hold on to space a full disk lacks
      return st;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = ErrnoError("rename '" + tmp + "' to '" + path + "'");
    ::unlink(tmp.c_str());
    return e;
  }
  if (!sync) return OkStatus();
  auto dir = Open(Dirname(path), O_RDONLY | O_DIRECTORY);
  if (!dir.ok()) return dir.error();
  if (::fsync(dir->get()) != 0) return PathError("fsync", Dirname(path));
  return OkStatus();
}

Status OverwriteFile(const std::string& path, const std::string& data, mode_t mode) {
  constexpr size_t kPage = 4096, kRound = 512;
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  const bool missing = fd < 0 && errno == ENOENT;
  if (fd >= 0) {
    struct stat st;
    bool fits = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) >= data.size() &&
                static_cast<size_t>(st.st_size) <= kPage;
    if (fits) {
      std::string padded = data;
      padded.resize(static_cast<size_t>(st.st_size), ' ');
      if (!padded.empty() && padded.size() > data.size()) padded.back() = '\n';
      ssize_t n = RetryEintr([&] { return ::pwrite(fd, padded.data(), padded.size(), 0); });
      int err = errno;
      ::close(fd);
      if (n == static_cast<ssize_t>(padded.size())) return OkStatus();
      // A short write cannot happen over blocks the file already has; if it
      // did, the whole content goes down the atomic way below.
      if (n < 0) return ErrnoError("write '" + path + "'", err);
    } else {
      ::close(fd);
    }
  }
  std::string padded = data;
  padded.resize((data.size() + kRound) / kRound * kRound, ' ');
  padded.back() = '\n';
  if (missing && padded.size() <= kPage) {
    // A new file: no old content to keep whole, so no temp file and rename
    // either (one inode, not two operations on the directory). A kill
    // between the create and the write leaves it empty, which readers of
    // such files take as absent.
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0) {
      ssize_t n = RetryEintr([&] { return ::pwrite(fd, padded.data(), padded.size(), 0); });
      int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      if (n == static_cast<ssize_t>(padded.size())) return OkStatus();
      ::unlink(path.c_str());
      return ErrnoError("write '" + path + "'", err);
    }
    if (errno != EEXIST) return ErrnoError("create '" + path + "'");
  }
  return WriteFileAtomic(path, padded, mode, Durability::kProcessCrash);
}

static Result<sockaddr_un> UnixAddr(const std::string& path) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Error(Code::kInvalidArgument, "socket path '" + path + "' must be 1.." +
                                             std::to_string(sizeof addr.sun_path - 1) + " bytes long");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

Result<UniqueFd> UnixListen(const std::string& path, int backlog) {
  auto addr = UnixAddr(path);
  if (!addr.ok()) return addr.error();
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return ErrnoError("socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) != 0) {
    return PathError("bind", path);
  }
  if (::listen(fd.get(), backlog) != 0) return PathError("listen", path);
  return fd;
}

Result<UniqueFd> UnixConnect(const std::string& path, bool nonblocking) {
  auto addr = UnixAddr(path);
  if (!addr.ok()) return addr.error();
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0));
  if (!fd) return ErrnoError("socket");
  // A unix-socket connect completes at once or fails (EAGAIN when the backlog
  // is full); EINTR is retried like everywhere else.
  int r = RetryEintr([&] { return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr); });
  if (r != 0) return PathError("connect", path);
  return fd;
}

Result<UniqueFd> Accept(int listen_fd) {
  int fd = RetryEintr([&] { return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); });
  if (fd < 0) return ErrnoError("accept");
  return UniqueFd(fd);
}

Result<PeerCred> GetPeerCred(int fd) {
  ucred cred;
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return ErrnoError("SO_PEERCRED");
  return PeerCred{cred.pid, cred.uid, cred.gid};
}

Status SetNonBlocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return ErrnoError("fcntl F_GETFL");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) != 0) return ErrnoError("fcntl F_SETFL");
  return OkStatus();
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status RemoveFileDurable(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return errno == ENOENT ? OkStatus() : PathError("remove", path);
  int dfd = ::open(Dirname(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return PathError("open", Dirname(path));
  int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) return PathError("fsync", Dirname(path));
  return OkStatus();
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return PathError("open directory", dir);
  std::vector<std::string> out;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    out.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// Empties the directory open as dirfd (which it closes). depth bounds the
// recursion on absurdly deep trees.
Status RemoveContents(int dirfd, const std::string& path, int depth) {
  DIR* d = ::fdopendir(dirfd);
  if (!d) {
    ::close(dirfd);
    return PathError("open directory", path);
  }
  Status result = OkStatus();
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    names.emplace_back(e->d_name);
  }
  for (const std::string& n : names) {
    if (::unlinkat(dirfd, n.c_str(), 0) == 0 || errno == ENOENT) continue;
    if (errno != EISDIR && errno != EPERM) {
      result = PathError("remove", path + "/" + n);
      continue;
    }
    if (depth > 256) {
      result = Error(Code::kFailedPrecondition, "remove '" + path + "': tree too deep");
      continue;
    }
    int sub = ::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      result = PathError("open", path + "/" + n);
      continue;
    }
    Status st = RemoveContents(sub, path + "/" + n, depth + 1);
    if (!st.ok()) result = st;
    if (::unlinkat(dirfd, n.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      result = PathError("remove directory", path + "/" + n);
    }
  }
  ::closedir(d);  // closes dirfd
  return result;
}

}  // namespace

Status RemoveTree(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return OkStatus();
  if (errno != EISDIR && errno != EPERM) return PathError("remove", path);
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? OkStatus() : PathError("open", path);
  OUTPOST_RETURN_IF_ERROR(RemoveContents(fd, path, 0));
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return PathError("remove directory", path);
  return OkStatus();
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace outpost::sys
