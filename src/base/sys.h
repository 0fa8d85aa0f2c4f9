// Thin syscall wrappers. Owns: the one place where EINTR is retried, and the
// creation of fds with O_CLOEXEC|O_NONBLOCK in the creating call. Callers get
// Result/Status values carrying the path or operation that failed.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fd.h"

namespace outpost::sys {

// Retries fn() while it fails with EINTR. Everything that can block or be
// interrupted goes through this.
template <typename Fn>
auto RetryEintr(Fn fn) -> decltype(fn()) {
  decltype(fn()) r;
  do {
    r = fn();
  } while (r == -1 && errno == EINTR);
  return r;
}

// read/write with EINTR handled; return -1 with errno set otherwise.
ssize_t Read(int fd, void* buf, size_t len);
ssize_t Write(int fd, const void* buf, size_t len);
// Writes all of buf to a blocking fd (or fails).
Status WriteAll(int fd, const void* buf, size_t len, const std::string& what);

Result<UniqueFd> Open(const std::string& path, int flags, mode_t mode = 0);
// mkdir -p: missing parents are created 0755, path itself with mode. The
// mode of each directory it creates is exactly that (whatever the umask);
// an existing directory keeps its mode. Ends in an error unless path is a
// directory.
Status MkdirAll(const std::string& path, mode_t mode);

// Whole small file (config, /proc entries). Refuses files above max_bytes.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes = 16 << 20);
// What a state file must survive (docs/process-model.md, "What is written
// when, and what survives what").
enum class Durability {
  kPowerCut,      // fsync the file before the rename and the directory after
  kProcessCrash,  // the page cache is enough: no fsync
};
// Write a temp file, rename it over path (so a reader sees the old or the
// new content, never a mix), with the fsyncs durability asks for.
Status WriteFileAtomic(const std::string& path, const std::string& data, mode_t mode,
                       Durability durability = Durability::kPowerCut);
// For a small text state file that only has to survive a process crash
// (Durability::kProcessCrash) and is rewritten often, such as a task record:
// where the file exists, is no longer than a page and at least as long as
// data, one pwrite at offset 0 of data padded with spaces to the file's
// length (JSON readers skip them). A kill cannot split a one-page write, so
// a reader sees the old or the new content whole, and no inode is created
// and deleted per write (which ext4 makes slower the more were deleted
// lately). A new file is created and written the same way (a reader that
// finds it empty takes it as absent). Otherwise WriteFileAtomic without
// fsync. Data is padded to a multiple of 512 bytes, so that the next writes
// fit in place.
Status OverwriteFile(const std::string& path, const std::string& data, mode_t mode);
// unlink, then fsync the directory so the removal survives a power cut.
// A missing file is not an error.
Status RemoveFileDurable(const std::string& path);
// Entry names of a directory (no "." / ".."), sorted.
Result<std::vector<std::string>> ListDir(const std::string& dir);
// Removes path and, if it is a directory, everything below it. Never follows
// a symlink (a link is removed, not its target) and never leaves the tree it
// started in. A missing path is not an error.
Status RemoveTree(const std::string& path);

// Unix stream sockets; every fd is SOCK_CLOEXEC|SOCK_NONBLOCK unless blocking
// is asked for explicitly.
Result<UniqueFd> UnixListen(const std::string& path, int backlog);
Result<UniqueFd> UnixConnect(const std::string& path, bool nonblocking);
Result<UniqueFd> Accept(int listen_fd);  // -> nonblocking, cloexec

struct PeerCred {
  pid_t pid;
  uid_t uid;
  gid_t gid;
};
Result<PeerCred> GetPeerCred(int fd);

Status SetNonBlocking(int fd, bool on);

// pidfd_open(2): an fd that turns readable when pid ends; -1 with errno
// (ENOSYS before Linux 5.3 or where the headers lack it, ESRCH if gone).
int PidfdOpen(pid_t pid);

std::string Dirname(const std::string& path);
std::string Basename(const std::string& path);

}  // namespace outpost::sys
