// The keeper's end of one worker connection (docs/process-model.md). Owns:
// the keeper's end of the SOCK_SEQPACKET socketpair, answering hello,
// sending journal entries in order (resending everything unacknowledged to a
// new worker, then kReplayDone), applying acks, and the task FIFO fds held
// for workers (kHoldFifos), which outlive any one connection.
//
// Does not own: the journal itself (keeper/journal), starting workers or
// reaping (keeper/keeper), the worker's end (keeper/link), the message
// encoding (keeper/proto.h).
//
// Rules: never blocks and never allocates; a full socket leaves entries
// queued in the journal until OnWritable.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "base/fd.h"
#include "keeper/journal.h"
#include "keeper/proto.h"

namespace outpost::keeper {

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
    bool beat = false;   // a heartbeat arrived (the latest one's timeout below)
    int64_t beat_timeout_nanos = 0;  // 0: the worker asks not to be watched
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

}  // namespace outpost::keeper
