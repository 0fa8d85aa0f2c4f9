#include "agent/boot_id.h"

#include <errno.h>
#include <linux/magic.h>
#include <sys/statfs.h>

#include "base/log.h"
#include "base/sys.h"
#include "proc/procfs.h"

namespace outpost::agent {

namespace {

// Whether dir is on a filesystem that starts empty at every boot (tmpfs,
// ramfs): whatever it holds was made during this boot.
bool OnMemoryFs(const std::string& dir) {
  struct statfs fs;
  if (sys::RetryEintr([&] { return ::statfs(dir.c_str(), &fs); }) != 0) return false;
  return static_cast<unsigned long>(fs.f_type) == TMPFS_MAGIC ||
         static_cast<unsigned long>(fs.f_type) == RAMFS_MAGIC;
}

}  // namespace

// Whether this is the first worker since the node booted, so that nothing
// of an earlier agent can be left to look for (docs/process-model.md says
// why this is safe). Every worker records the kernel's boot id in
// <state_dir>/boot-id and <runtime_dir>/boot-id before it starts a task.
// First when neither holds this boot's id and
//  - the state dir's names another boot, or
//  - the state dir's is missing or empty (a new or wiped state dir, what a
//    power cut left of a new file), the runtime dir has none, and it is on
//    tmpfs or ramfs: no worker has used it since it was mounted, in this
//    boot.
// Anything else (an unreadable file, a new state dir with a runtime dir on
// disk) is not first, and the worker looks. The files are not fsync'd; if
// one cannot be written the worker looks (the next one could not tell). An
// unknown boot id is never first.
bool FirstStartSinceBoot(const std::string& state_dir, const std::string& runtime_dir) {
  const std::string& now = proc::CurrentBootId();
  if (now.empty()) return false;
  const std::string state_path = state_dir + "/boot-id";
  const std::string runtime_path = runtime_dir + "/boot-id";
  auto state = sys::ReadFile(state_path, 128);
  auto runtime = sys::ReadFile(runtime_path, 128);
  const bool state_now = state.ok() && *state == now + "\n";
  const bool runtime_now = runtime.ok() && *runtime == now + "\n";
  const bool state_missing = state.ok() ? state->empty() : state.error().sys_errno() == ENOENT;
  const bool runtime_missing = !runtime.ok() && runtime.error().sys_errno() == ENOENT;
  const char* why = nullptr;  // stays null if a worker ran in this boot
  if (!state_now && !runtime_now) {
    if (state.ok() && !state_missing && state->find('\0') == std::string::npos) {
      why = "the state dir's boot-id names another boot";
    } else if (state_missing && runtime_missing && OnMemoryFs(runtime_dir)) {
      why = "a new state dir, and a runtime dir on tmpfs without a boot-id";
    }
  }
  const std::string id = now + "\n";
  Status written = OkStatus();
  if (!state_now) written = sys::WriteFileAtomic(state_path, id, 0600, sys::Durability::kProcessCrash);
  if (written.ok() && !runtime_now) {
    written = sys::WriteFileAtomic(runtime_path, id, 0600, sys::Durability::kProcessCrash);
  }
  if (!written.ok()) {
    log::Warn("cannot record the boot id", {{"error", written.error().message()}});
    return false;  // the next worker could not tell: look for leftovers now too
  }
  if (why) log::Info("first start since boot: no leftovers of an earlier agent to look for", {{"because", why}});
  return why != nullptr;
}

}  // namespace outpost::agent
