// Network namespaces pinned by a bind mount, the way `ip netns add` and
// Nomad do it, so that `ip netns exec outpost-<job> ...` works and the
// namespace outlives the agent (tasks keep their network across an agent
// crash or upgrade). Owns: making the pin directory a shared mount point
// (bind-mounting it onto itself first where it is not a mount point yet),
// creating a namespace and binding /proc/self/ns/net over an empty file in
// it (the agent enters the new namespace for a moment and returns to its
// own before anything else runs: it is single-threaded), bringing loopback
// up inside it, telling a pin from a plain file (statfs: NSFS_MAGIC), and
// removing a pin (umount MNT_DETACH, then unlink), and opening a socket in
// a pinned namespace (to ask the kernel what is in it). Every function is
// synchronous and short (a few syscalls).
#pragma once

#include <string>

#include "base/error.h"
#include "base/fd.h"

namespace outpost::net {

// Creates <dir>/<name> holding a new network namespace with loopback up.
// AlreadyExists when <dir>/<name> is a pinned namespace already (left as
// it is); a plain file of that name (an earlier crash between create and
// mount) is replaced.
Status PinNewNetns(const std::string& dir, const std::string& name);
// Whether path is a pinned namespace (a nsfs mount).
bool IsPinnedNetns(const std::string& path);
// Unmounts (MNT_DETACH) and unlinks; a missing pin is fine.
Status UnpinNetns(const std::string& path);
// Opens the namespace for setns (O_RDONLY|O_CLOEXEC); the error names the path.
Result<UniqueFd> OpenNetns(const std::string& path);
// A socket(domain, type | SOCK_CLOEXEC, protocol) of the namespace at path
// (a socket stays in the namespace it was made in): the agent enters it
// for the one call and returns at once, as when pinning.
Result<UniqueFd> SocketInNetns(const std::string& path, int domain, int type, int protocol);

}  // namespace outpost::net
