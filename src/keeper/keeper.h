// The keeper: the tiny process `outpost agent` runs as, so that tasks, their
// exit statuses and (later) their log FIFOs outlive a crash, kill -9 or
// upgrade of the worker. See docs/process-model.md.
//
//   busybox init ── outpost agent                    (keeper, child subreaper)
//                     ├── outpost agent --worker ... (worker: loop and logic)
//                     └── tasks                      (spawned by the worker with
//                                                     CLONE_PARENT: our children)
//
// Owns: starting the worker (fork + execve of the agent binary, resolved once
// from /proc/self/exe so a binary replaced on disk is picked up), restarting
// it with backoff, reaping every child, the journal of task exits not yet
// acknowledged by a worker, forwarding signals, and the in-place upgrade
// (SIGUSR2: stop the worker, execve the binary again with the journal in a
// memfd, keeping the keeper's pid and so the parenthood of every task).
//
// Does not own: anything the worker does (agent/), the worker side of the
// socket (keeper/link), the message encoding (keeper/proto.h).
//
// Rules: after start-up the keeper does not allocate on its hot path (a task
// exit is a waitpid, a copy into a fixed ring and a send); it must not exit
// while it may have tasks, except when told to stop. Its log lines (rare
// events) go through base/log.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "keeper/proto.h"

namespace outpost::keeper {

// ---- command-line roles ------------------------------------------------------

enum class AgentRole {
  kKeeper,    // `outpost agent`: run the keeper, which starts the worker
  kWorker,    // internal: `--worker --keeper-fd=N`, started by the keeper
  kNoKeeper,  // `--no-keeper`: run the worker logic directly (debugging)
};

struct KeeperFlags {
  AgentRole role = AgentRole::kKeeper;
  int keeper_fd = -1;   // kWorker: our end of the keeper socketpair
  int journal_fd = -1;  // kKeeper after an upgrade exec: the carried journal
};

constexpr const char* kNoKeeperFlag = "--no-keeper";
constexpr const char* kWorkerFlag = "--worker";              // internal
constexpr const char* kKeeperFdFlag = "--keeper-fd=";        // internal
constexpr const char* kJournalFdFlag = "--keeper-journal-fd=";  // internal

// Removes the keeper flags from *args (leaving the user's agent arguments)
// and returns what they asked for. Malformed or contradictory flags are an
// InvalidArgument error (exit 2).
Result<KeeperFlags> TakeKeeperFlags(std::vector<std::string>* args);

// Runs the keeper until it is told to stop; returns the process exit code.
// agent_args: the user's `outpost agent` arguments without keeper flags (the
// worker gets them plus --worker --keeper-fd=N; an upgrade exec gets them plus
// --keeper-journal-fd=N). journal_fd: from an upgrade exec, or -1.
int RunKeeper(const std::vector<std::string>& agent_args, int journal_fd);

// ---- the exit journal ------------------------------------------------------

// No default member initialisers: the ring stays untouched (and out of the
// keeper's RSS) until exits arrive.
struct ExitRecord {
  int32_t pid;
  int32_t status;      // waitpid() status
  int64_t unix_nanos;  // CLOCK_REALTIME when reaped
};

// Fixed-capacity FIFO of task exits not yet acknowledged by a worker. When it
// is full the oldest entry is dropped and counted (the worker then learns the
// count in the hello reply and reports such tasks as "exit status unknown").
// Also tracks how many entries, from the oldest, were already sent to the
// current worker: the rest are sent when the socket has room.
class ExitJournal {
 public:
  static constexpr size_t kCapacity = 4096;

  void Push(const ExitRecord& r);
  // Removes the oldest entry for pid; false if there is none. *index (if
  // given) gets the position the entry had.
  bool Ack(int32_t pid, size_t* index = nullptr);
  void Clear();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const ExitRecord& at(size_t i) const { return ring_[(head_ + i) % kCapacity]; }  // 0 = oldest
  uint64_t dropped() const { return dropped_; }
  void set_dropped(uint64_t n) { dropped_ = n; }

  size_t sent() const { return sent_; }
  void MarkNextSent() {
    if (sent_ < size_) ++sent_;
  }
  void ResetSent() { sent_ = 0; }

 private:
  ExitRecord ring_[kCapacity];
  size_t head_ = 0;
  size_t size_ = 0;
  size_t sent_ = 0;
  uint64_t dropped_ = 0;
};

class KeeperChannel;

// What an upgrade exec hands to the new image in a memfd: a kJournalHeader
// record (pid = exits, status = held FIFO entries, value = dropped), the
// kExit records, then one kHoldFifos record per held entry (value = key,
// pid/status = the fd numbers, which stay open across execve). Load appends
// to *journal, keeps what it could read before an error, and gives the held
// fds to *channel (or closes them when channel is null).
Status SaveJournal(const ExitJournal& journal, int fd, const KeeperChannel* channel = nullptr);
Status LoadJournal(int fd, ExitJournal* journal, KeeperChannel* channel = nullptr);

// ---- the keeper's end of one worker connection ----------------------------

// Speaks the protocol on the keeper's end of the socketpair: answers hello,
// sends journal entries in order (resending everything unacknowledged to a
// new worker, then kReplayDone), applies acks. Never blocks and never allocates; a full socket
// leaves entries queued in the journal until OnWritable.
class KeeperChannel {
 public:
  explicit KeeperChannel(ExitJournal* journal) : journal_(journal) {}

  void Attach(UniqueFd sock);  // a new worker: nothing is "sent" to it yet
  void Detach();
  int fd() const { return sock_.get(); }
  bool attached() const { return sock_.valid(); }
  bool ready() const { return hello_; }            // the current worker said hello
  bool want_write() const { return want_write_; }  // entries wait for socket room

  struct ReadResult {
    bool hello = false;  // a hello arrived (worker_pid set)
    bool eof = false;    // the worker's end is closed; the channel detached itself
    pid_t worker_pid = 0;
    size_t replay = 0;   // with hello: how many journaled exits are being resent
  };
  ReadResult OnReadable();
  void OnWritable() { Flush(); }

  // A child other than the worker was reaped: journal it, send it if we can.
  void OnTaskExit(const ExitRecord& r);

  // FIFO fds held for tasks (kHoldFifos). They outlive worker connections:
  // a FIFO keeps its unread data only while some fd of it is open.
  static constexpr size_t kMaxHeld = 4096;
  size_t held_count() const { return held_count_; }
  int64_t held_key(size_t i) const { return held_[i].key; }
  const int* held_fds(size_t i) const { return held_[i].fds; }  // two; -1 = none
  // Held fds are close-on-exec so workers never inherit them; an upgrade exec
  // turns that off for its execve (and back on if it fails).
  void SetHeldCloseOnExec(bool on);
  // After an upgrade exec: take over fds the previous image held (made
  // close-on-exec again). Numbers that are not open fds are skipped.
  void AdoptHeld(int64_t key, int fd0, int fd1);

 private:
  void Flush();
  // 1 sent, 0 no room (EAGAIN), -1 the socket is broken.
  int Send(const proto::Message& m);

  ExitJournal* journal_;
  UniqueFd sock_;
  bool hello_ = false;
  bool want_write_ = false;
  bool warned_bad_message_ = false;
  // Of the entries held at hello, how many are still unsent; the kReplayDone
  // marker goes out when this reaches 0.
  size_t replay_left_ = 0;
  size_t replay_total_ = 0;
  bool replay_marker_pending_ = false;

  // Plain (no initialisers): entries are written only when used, so the
  // untouched part of the table costs no resident memory.
  struct Held {
    int64_t key;
    int fds[2];
  };
  void Hold(int64_t key, const int* fds, size_t n);
  void Release(int64_t key);
  Held held_[kMaxHeld];
  size_t held_count_ = 0;
  bool warned_hold_full_ = false;
};

// ---- restart policy --------------------------------------------------------

// Worker restart delay: 0.5 s, doubling to 30 s; back to 0.5 s once a worker
// stayed up for 60 s.
class RestartBackoff {
 public:
  static constexpr int64_t kInitialNanos = 500LL * 1000000;
  static constexpr int64_t kMaxNanos = 30LL * 1000000000;
  static constexpr int64_t kResetAfterNanos = 60LL * 1000000000;

  // The delay before starting the next worker after one that ran uptime_nanos.
  int64_t NextDelay(int64_t uptime_nanos);

 private:
  int64_t next_ = kInitialNanos;
};

enum class StopRequest { kNone, kStop, kUpgrade };

struct WorkerExitDecision {
  enum Action { kRestart, kExitKeeper, kExecUpgrade } action;
  int exit_code;  // for kExitKeeper
};

// What the keeper does when its worker exits with wait_status:
// - after a stop request: exit 0 (1 if the worker did not exit 0);
// - after an upgrade request: exec the new binary;
// - if there cannot be tasks yet (no worker ever became ready, no child and
//   no journaled exit: the first start failed on a bad config, another agent
//   running, a socket path taken...): exit with the worker's code (128+signo
//   for a signal; 1 for 0), like the agent did before the keeper, instead of
//   retrying forever;
// - otherwise restart it with backoff. Once tasks may exist the keeper is
//   their parent, so it never gives up on its own.
WorkerExitDecision DecideOnWorkerExit(StopRequest stop, bool may_have_tasks, int wait_status);

// "exit=3" / "signal=9" style fields for log lines, without allocation.
// Writes e.g. "exit 3" or "signal 9 (SIGKILL)" into buf.
const char* DescribeWaitStatus(int wait_status, char* buf, size_t len);

}  // namespace outpost::keeper
