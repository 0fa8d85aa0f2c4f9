#include "proc/spawn.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"
#include "proc/clone_vm.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace outpost::proc {

namespace {

// The longest text a failed pre-exec step sends along (below PIPE_BUF with
// the ChildError, so one write and one read carry it).
constexpr size_t kReportTextMax = 2048;

// What the child reports over the error pipe before _exit.
struct ChildError {
  int step;
  int err;
};

// Written by the child into the caller's memory. With CLONE_VM the caller
// sees it once the child has exec'd; under an emulator that makes vfork a
// fork (qemu-user) it never does, which is how Spawn tells.
struct ChildReport {
  volatile int ran = 0;
  ChildError error{0, 0};
};

enum Step {
  kStepSetpgid = 1,
  kStepDup,
  kStepRlimit,
  kStepGroups,
  kStepGid,
  kStepUid,
  kStepChdir,
  kStepExec,
  kStepCgroup,
  kStepPreExec,
  kStepNetns,
  kStepHostname,
  kStepMount,
  kStepOomScore,
};

const char* StepName(int step) {
  switch (step) {
    case kStepSetpgid: return "setpgid";
    case kStepDup: return "set up stdio";
    case kStepRlimit: return "setrlimit";
    case kStepGroups: return "setgroups";
    case kStepGid: return "setgid";
    case kStepUid: return "setuid";
    case kStepChdir: return "chdir";
    case kStepExec: return "exec";
    case kStepCgroup: return "join cgroup";
    case kStepPreExec: return "pre-exec step";
    case kStepNetns: return "join network namespace";
    case kStepHostname: return "set hostname";
    case kStepMount: return "bind mount";
    case kStepOomScore: return "set oom_score_adj";
  }
  return "spawn";
}

// Everything the child touches, prepared by the parent as plain C data.
struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* workdir;
  int fds[3];
  int err_fd;
  bool set_creds;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t ngroups;
  const std::pair<int, rlimit>* rlimits;
  size_t nrlimits;
  bool new_pgrp;
  int join_cgroup_fd;  // -1, or cgroup.procs to write "0" to (no CLONE_INTO_CGROUP)
  int netns_fd;        // -1, or a network namespace to join
  const char* hostname;  // null, or the hostname of a new UTS namespace
  size_t hostname_len;
  // Bind mounts in a private mount namespace: sources, destinations and
  // read-only flags, nmounts of each.
  const char* const* mount_src;
  const char* const* mount_dst;
  const bool* mount_ro;
  size_t nmounts;
  const char* oom_score_adj;  // null, or the text to write to /proc/self/oom_score_adj
  const std::function<int()>* pre_exec;
  const std::function<const char*()>* pre_exec_message;
  // The child shares our fd table until it has its stdio (CLONE_FILES), then
  // takes a private copy of fds 0..2 only: cloning and exec then cost the
  // same however many fds we hold. It reports a failure through *report
  // (our memory), not err_fd.
  bool share_files;
  ChildReport* report;  // always set; in our memory
};

// The 32-bit id calls where the architecture has both (arm).
#ifdef SYS_setuid32
constexpr long kSysSetuid = SYS_setuid32, kSysSetgid = SYS_setgid32, kSysSetgroups = SYS_setgroups32;
#else
constexpr long kSysSetuid = SYS_setuid, kSysSetgid = SYS_setgid, kSysSetgroups = SYS_setgroups;
#endif

[[noreturn]] void ChildFail(const ChildPlan& p, int step) {
  ChildError e{step, errno};
  if (p.share_files) {
    p.report->error = e;
    ::_exit(step == kStepExec ? (e.err == ENOENT ? 127 : 126) : 1);
  }
  // Best effort: if the parent went away there is nobody to tell. One
  // write (below PIPE_BUF), so the report is read whole.
  struct {
    ChildError e;
    char text[kReportTextMax];
  } msg;
  msg.e = e;
  size_t len = 0;
  if (step == kStepPreExec && p.pre_exec_message && *p.pre_exec_message) {
    const char* text = (*p.pre_exec_message)();
    while (text && text[len] && len < kReportTextMax) {
      msg.text[len] = text[len];
      ++len;
    }
  }
  ssize_t r;
  do {
    r = ::write(p.err_fd, &msg, sizeof msg.e + len);
  } while (r < 0 && errno == EINTR);
  ::_exit(step == kStepExec ? (e.err == ENOENT ? 127 : 126) : 1);
}

void MoveStdio(const ChildPlan& p);
[[noreturn]] void ChildSetup(const ChildPlan& p);

// The child side. Async-signal-safe calls only: no allocation, no locks,
// no C++ beyond reading the plan.
[[noreturn]] void ChildMain(const ChildPlan& p) {
  p.report->ran = 1;
  // Signals: the agent blocks the ones it handles through signalfd and may
  // ignore SIGPIPE; the task must start with a clean slate.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    ::sigaction(s, &dfl, nullptr);  // fails harmlessly for the glibc-reserved ones
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // Kernels without CLONE_INTO_CGROUP (before 5.7): join the cgroup first
  // thing, before running anything of the task.
  if (p.join_cgroup_fd >= 0 && ::write(p.join_cgroup_fd, "0", 1) != 1) ChildFail(p, kStepCgroup);
  if (p.new_pgrp && ::setpgid(0, 0) != 0) ChildFail(p, kStepSetpgid);
  // Namespaces before stdio (a private fd table drops netns_fd) and before
  // credentials (joining needs CAP_SYS_ADMIN). They change this task only,
  // not a caller whose memory we share.
  if (p.netns_fd >= 0 && ::setns(p.netns_fd, CLONE_NEWNET) != 0) ChildFail(p, kStepNetns);
  if (p.hostname && (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(p.hostname, p.hostname_len) != 0)) {
    ChildFail(p, kStepHostname);
  }
  if (p.nmounts > 0) {
    // A mount namespace of its own whose changes never propagate back.
    if (::unshare(CLONE_NEWNS) != 0) ChildFail(p, kStepMount);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail(p, kStepMount);
    for (size_t i = 0; i < p.nmounts; ++i) {
      if (::mount(p.mount_src[i], p.mount_dst[i], nullptr, MS_BIND | MS_REC, nullptr) != 0) ChildFail(p, kStepMount);
      if (p.mount_ro[i] &&
          ::mount(nullptr, p.mount_dst[i], nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
        ChildFail(p, kStepMount);
      }
    }
  }
  if (p.oom_score_adj) {
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    size_t len = 0;
    while (p.oom_score_adj[len]) ++len;
    if (fd < 0 || ::write(fd, p.oom_score_adj, len) != static_cast<ssize_t>(len)) ChildFail(p, kStepOomScore);
    ::close(fd);
  }

  if (p.share_files) {
    // Our fd table is the caller's (which waits, and has saved its own 0..2
    // to restore them): the sources are all >= 3, so dup2 clobbers none.
    for (int i = 0; i < 3; ++i) {
      if (::dup2(p.fds[i], i) < 0) ChildFail(p, kStepDup);
    }
    // A private table of 0..2 alone (5.9+): nothing else is copied, nothing
    // else to close at exec. Older kernels: a whole copy, then close the rest.
    if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_UNSHARE) != 0) {
      if (::unshare(CLONE_FILES) != 0) ChildFail(p, kStepDup);
      if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
        for (int fd = 3; fd < 65536; ++fd) ::close(fd);
      }
    }
  } else {
    MoveStdio(p);
  }
  ChildSetup(p);
}

// stdio from p.fds without a shared table. The three sources move out of
// the 0..2 range first so that dup2 into 0..2 cannot clobber a source that
// happens to be 0..2 itself.
void MoveStdio(const ChildPlan& p) {
  int src[3];
  for (int i = 0; i < 3; ++i) {
    src[i] = ::fcntl(p.fds[i], F_DUPFD_CLOEXEC, 3);
    if (src[i] < 0) ChildFail(p, kStepDup);
  }
  for (int i = 0; i < 3; ++i) {
    if (::dup2(src[i], i) < 0) ChildFail(p, kStepDup);  // dup2 clears CLOEXEC on i
  }
  // Every other fd gets CLOEXEC, so nothing leaks into the task even if some
  // code opened an fd without it; the error pipe stays usable until exec.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (int fd = 3; fd < 4096; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
}

// Limits, credentials, workdir, the pre-exec step, exec.
[[noreturn]] void ChildSetup(const ChildPlan& p) {
  for (size_t i = 0; i < p.nrlimits; ++i) {
    if (::setrlimit(static_cast<__rlimit_resource_t>(p.rlimits[i].first), &p.rlimits[i].second) != 0) {
      ChildFail(p, kStepRlimit);
    }
  }
  if (p.set_creds) {
    // Raw system calls: libc's wrappers may try to apply the change to
    // every thread of the process, and a child sharing our memory would
    // reach for our threads.
    if (::syscall(kSysSetgroups, p.ngroups, p.groups) != 0) ChildFail(p, kStepGroups);
    if (::syscall(kSysSetgid, p.gid) != 0) ChildFail(p, kStepGid);
    if (::syscall(kSysSetuid, p.uid) != 0) ChildFail(p, kStepUid);
  }
  if (p.workdir && ::chdir(p.workdir) != 0) ChildFail(p, kStepChdir);
  if (p.pre_exec) {
    // Only ever in a child with its own copy of our memory (see Spawn).
    int err = (*p.pre_exec)();
    if (err != 0) {
      errno = err;
      ChildFail(p, kStepPreExec);
    }
  }
  ::execve(p.path, p.argv, p.envp);
  ChildFail(p, kStepExec);
}

std::vector<char*> CStrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Where the child runs until it execs when it shares our memory: its own
// small stack (the caller's frames stay intact for when it resumes).
constexpr size_t kChildStack = 64 << 10;

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer's shadow memory and interceptors assume one stack per
// thread; a child borrowing our memory on another stack confuses them.
constexpr bool kCanShareMemory = false;
#else
constexpr bool kCanShareMemory = true;
#endif

int ChildEntry(void* plan) { ChildMain(*static_cast<const ChildPlan*>(plan)); }

// clone3 where the kernel (or qemu-user) has it; clone otherwise. Returns
// the pid in the parent, 0 in the child, -1 with errno on failure. With
// fork semantics (a copy of our memory): for a child that runs a pre-exec
// step, which must not hold us up.
pid_t CloneCopy(bool clone_parent, int cgroup_fd, int* pidfd) {
  *pidfd = -1;
  uint64_t flags = CLONE_PIDFD | (clone_parent ? CLONE_PARENT : 0);
#ifdef SYS_clone3
  CloneArgs args;
  std::memset(&args, 0, sizeof args);
  args.flags = flags;
  args.pidfd = reinterpret_cast<uintptr_t>(pidfd);
  // With CLONE_PARENT the kernel insists on exit_signal 0 and uses the
  // caller's own exit signal (SIGCHLD, as the keeper forked us) instead.
  args.exit_signal = clone_parent ? 0 : SIGCHLD;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }
  long r = ::syscall(SYS_clone3, &args, sizeof args);
  if (r >= 0 || (errno != ENOSYS && errno != E2BIG)) return static_cast<pid_t>(r);
#endif
  if (cgroup_fd >= 0) {
    errno = ENOSYS;
    return -1;
  }
  // clone(2) with fork semantics. Argument order differs per architecture;
  // the x86_64 and generic (arm, arm64) orders are both
  // (flags, stack, parent_tid, child_tid, tls) for these flags, and
  // CLONE_PIDFD stores the fd through parent_tid.
  pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, flags | SIGCHLD, nullptr, pidfd, nullptr, nullptr));
  if (pid >= 0 || clone_parent || (errno != EINVAL && errno != ENOSYS)) return pid;
  // Emulators (qemu-user) reject CLONE_PIDFD: a plain fork is as good when
  // we are to be the parent; the caller opens a pidfd afterwards if it can.
  *pidfd = -1;
  return ::fork();
}

// The child borrows our memory (CLONE_VM) and we wait (CLONE_VFORK) until
// it has exec'd or exited, as posix_spawn does: no page tables are copied,
// so the cost does not grow with our size. The child runs ChildMain on a
// stack of its own and never returns. Returns the pid, or -1 with errno.
// The stack is made once and kept: each spawn's child is done with it when
// the clone returns (it has exec'd or exited), and unmapping a stack another
// CPU ran on costs a TLB shootdown on every spawn (a tenth of a spawn's
// time in a crash loop's profile). Spawns come from one thread, one at a time.
pid_t CloneShared(ChildPlan* plan, bool clone_parent, int cgroup_fd, int* pidfd) {
  *pidfd = -1;
  static void* stack = nullptr;
  if (!stack) {
    void* made = ::mmap(nullptr, kChildStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (made == MAP_FAILED) return -1;
    stack = made;
  }
  char* top = static_cast<char*>(stack) + kChildStack;
  void* arg = plan;
  uint64_t flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | (clone_parent ? CLONE_PARENT : 0);
  CloneArgs args;
  std::memset(&args, 0, sizeof args);
  args.flags = flags | (plan->share_files ? CLONE_FILES : 0);
  args.pidfd = reinterpret_cast<uintptr_t>(pidfd);
  args.exit_signal = clone_parent ? 0 : SIGCHLD;
  args.stack = reinterpret_cast<uintptr_t>(stack);
  args.stack_size = kChildStack;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }
  pid_t pid = static_cast<pid_t>(RawClone3(&args, ChildEntry, arg));
  if (pid < 0 && (errno == ENOSYS || errno == E2BIG)) {
    plan->share_files = false;  // only ever with clone3 on a kernel of our own
    if (cgroup_fd >= 0) {
      errno = ENOSYS;  // the caller retries with the child joining the cgroup itself
    } else {
      int cflags = static_cast<int>(flags) | SIGCHLD;
      pid = ::clone(ChildEntry, top, cflags, arg, pidfd);
      if (pid < 0 && !clone_parent && (errno == EINVAL || errno == ENOSYS)) {
        // Emulators (qemu-user) reject CLONE_PIDFD; see CloneCopy.
        *pidfd = -1;
        pid = ::clone(ChildEntry, top, cflags & ~CLONE_PIDFD, arg);
      }
    }
  }
  return pid;
}

Status ExecReportStatus(const ChildError& ce, const std::string& path, const std::string& workdir, int* exit_code) {
  int code = ce.step == kStepExec ? (ce.err == ENOENT ? 127 : 126) : 1;
  if (exit_code) *exit_code = code;
  std::string what = ce.step == kStepExec    ? "exec '" + path + "'"
                     : ce.step == kStepChdir ? "chdir '" + workdir + "'"
                                             : StepName(ce.step);
  Error e = ErrnoError(what, ce.err);
  return Error(ce.step == kStepExec && ce.err == ENOENT ? Code::kNotFound : e.code(),
               e.message() + Format(" (exit status %d)", code));
}

}  // namespace

Result<Spawned> Spawn(const SpawnRequest& req, int* exit_code) {
  if (exit_code) *exit_code = 0;
  UniqueFd devnull;
  auto need_null = [&]() -> Status {
    if (!devnull) {
      auto fd = sys::Open("/dev/null", O_RDWR);
      if (!fd.ok()) return fd.error();
      devnull = std::move(*fd);
    }
    return OkStatus();
  };
  int fds[3] = {req.stdin_fd, req.stdout_fd, req.stderr_fd};
  for (int& fd : fds) {
    if (fd < 0) {
      OUTPOST_RETURN_IF_ERROR(need_null());
      fd = devnull.get();
    }
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoError("pipe");
  UniqueFd err_r(pipefd[0]), err_w(pipefd[1]);

  std::vector<char*> argv = CStrings(req.argv);
  std::vector<char*> envp = CStrings(req.env);
  ChildPlan plan{};
  plan.path = req.path.c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.workdir = req.workdir.empty() ? nullptr : req.workdir.c_str();
  for (int i = 0; i < 3; ++i) plan.fds[i] = fds[i];
  plan.err_fd = err_w.get();
  plan.set_creds = req.set_credentials;
  plan.uid = req.creds.uid;
  plan.gid = req.creds.gid;
  plan.groups = req.creds.groups.data();
  plan.ngroups = req.creds.groups.size();
  plan.rlimits = req.rlimits.data();
  plan.nrlimits = req.rlimits.size();
  plan.new_pgrp = req.new_process_group;
  plan.join_cgroup_fd = -1;
  plan.netns_fd = req.netns_fd;
  plan.hostname = req.hostname.empty() ? nullptr : req.hostname.c_str();
  plan.hostname_len = req.hostname.size();
  std::vector<const char*> mount_src, mount_dst;
  std::unique_ptr<bool[]> mount_ro(new bool[req.bind_mounts.size() + 1]);
  for (size_t i = 0; i < req.bind_mounts.size(); ++i) {
    mount_src.push_back(req.bind_mounts[i].source.c_str());
    mount_dst.push_back(req.bind_mounts[i].destination.c_str());
    mount_ro[i] = req.bind_mounts[i].readonly;
  }
  plan.mount_src = mount_src.data();
  plan.mount_dst = mount_dst.data();
  plan.mount_ro = mount_ro.get();
  plan.nmounts = req.bind_mounts.size();
  std::string oom_text = req.oom_score_adj ? std::to_string(*req.oom_score_adj) : std::string();
  plan.oom_score_adj = req.oom_score_adj ? oom_text.c_str() : nullptr;

  plan.pre_exec = req.pre_exec ? &req.pre_exec : nullptr;
  plan.pre_exec_message = req.pre_exec_message ? &req.pre_exec_message : nullptr;
  ChildReport report;
  plan.report = &report;

  // Every signal blocked across the clone, so that none of our handlers
  // runs in the child before it has reset them (it then unblocks all).
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  const bool shared = kCanShareMemory && !req.pre_exec;
  // Sharing our fd table too once an earlier spawn showed the child really
  // shares our memory (not so under qemu-user), when the stdio sources are
  // not 0..2 themselves. Our own 0..2, which the child replaces in the
  // shared table, are saved here and put back once it has its own table.
  static int memory_really_shared = -1;  // -1: not known yet
  plan.share_files = shared && memory_really_shared == 1 && fds[0] > 2 && fds[1] > 2 && fds[2] > 2;
  int saved[3] = {-1, -1, -1}, saved_flags[3] = {0, 0, 0};
  if (plan.share_files) {
    for (int i = 0; i < 3; ++i) {
      saved_flags[i] = ::fcntl(i, F_GETFD);
      if (saved_flags[i] >= 0) saved[i] = ::fcntl(i, F_DUPFD_CLOEXEC, 3);
      if (saved_flags[i] >= 0 && saved[i] < 0) plan.share_files = false;  // out of fds: no sharing
    }
  }
  auto clone = [&](int cgroup_fd, int* pidfd) -> pid_t {
    if (shared) return CloneShared(&plan, req.clone_parent, cgroup_fd, pidfd);
    pid_t p = CloneCopy(req.clone_parent, cgroup_fd, pidfd);
    if (p == 0) ChildMain(plan);
    return p;
  };
  int pidfd = -1;
  pid_t pid = clone(req.cgroup_fd, &pidfd);
  if (pid < 0 && req.cgroup_fd >= 0 && req.cgroup_procs_fd >= 0 &&
      (errno == ENOSYS || errno == E2BIG || errno == EINVAL)) {
    // No CLONE_INTO_CGROUP here: the child joins before exec instead.
    plan.join_cgroup_fd = req.cgroup_procs_fd;
    pid = clone(-1, &pidfd);
  }
  int clone_errno = errno;
  for (int i = 0; i < 3; ++i) {  // our 0..2 as they were (closed ones closed)
    if (saved[i] >= 0) {
      ::dup2(saved[i], i);
      if (saved_flags[i] & FD_CLOEXEC) ::fcntl(i, F_SETFD, FD_CLOEXEC);
      ::close(saved[i]);
    } else if (plan.share_files && saved_flags[i] < 0) {
      ::close(i);
    }
  }
  if (shared && memory_really_shared == -1 && pid > 0) memory_really_shared = report.ran ? 1 : 0;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return ErrnoError("clone", clone_errno);

  Spawned out;
  out.pid = pid;
  out.pidfd.Reset(pidfd);
  out.parent_is_caller = !req.clone_parent;
  err_w.Reset();
  if (req.pre_exec) {
    // The child may take its time before exec: the caller reads the
    // outcome when the pipe is readable (ReadExecReport).
    out.exec_report = std::move(err_r);
    return out;
  }
  // Our child has exec'd or failed by now when it shared our memory; with a
  // copy, the read waits for its exec (the pipe closes) or its failure.
  // With our fd table shared it reported into our memory instead.
  Status st = plan.share_files && report.error.step != 0
                  ? ExecReportStatus(report.error, req.path, req.workdir, exit_code)
                  : plan.share_files ? OkStatus() : ReadExecReport(err_r.get(), req.path, req.workdir, exit_code);
  if (!st.ok()) {
    // The child failed before exec and is exiting; reap it if it is ours.
    if (out.parent_is_caller) {
      int ws;
      sys::RetryEintr([&] { return ::waitpid(pid, &ws, 0); });
    }
    return st.error();
  }
  return out;
}

Status ReadExecReport(int fd, const std::string& path, const std::string& workdir, int* exit_code) {
  if (exit_code) *exit_code = 0;
  struct {
    ChildError ce;
    char text[kReportTextMax];
  } msg{};
  ssize_t n = sys::Read(fd, &msg, sizeof msg);
  if (n < 0) return ErrnoError("read the exec report of '" + path + "'");
  if (n == 0) return OkStatus();  // closed at exec
  if (n < static_cast<ssize_t>(sizeof msg.ce)) {
    return Error(Code::kInternal, "short exec report from the child for '" + path + "'");
  }
  size_t text_len = static_cast<size_t>(n) - sizeof msg.ce;
  if (msg.ce.step == kStepPreExec && text_len > 0) {
    if (exit_code) *exit_code = 1;
    return Error(Code::kFailedPrecondition, std::string(msg.text, text_len));
  }
  return ExecReportStatus(msg.ce, path, workdir, exit_code);
}

}  // namespace outpost::proc
