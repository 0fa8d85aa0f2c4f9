// The worker's end of the keeper socket (docs/process-model.md). Owns: the
// inherited SOCK_SEQPACKET fd (made close-on-exec at once so tasks and
// plugins never inherit it), the hello handshake, delivering the keeper's
// task exits (including the ones it resends after a worker restart) to one
// handler, sending acknowledgements, and stopping the worker's loop when the
// keeper goes away (its tasks' parent is gone: the node is not in a sane
// state without it, and busybox init will start a fresh agent).
//
// Does not own: what an exit means (the exec driver decides, then calls
// Ack once it has recorded the exit durably), the message encoding
// (keeper/proto.h) or the keeper itself (keeper/keeper).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>
#include <functional>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "keeper/proto.h"

namespace outpost::keeper {

class KeeperLink {
 public:
  // wait_status as from waitpid(); unix_nanos = CLOCK_REALTIME when the
  // keeper reaped the process (not when it was delivered).
  using ExitHandler = std::function<void(pid_t pid, int wait_status, int64_t unix_nanos)>;

  // Registers fd on loop and says hello. With a null on_exit every exit is
  // logged (debug) and acknowledged at once, until SetExitHandler.
  // keeper_empty: the keeper said when it started us (--keeper-empty) that
  // it had no child and held no exit. Its replay is then known to hold
  // nothing a recovered task could be waiting for, and the journal counts
  // as replayed from the start (an exit the keeper sends later is of a
  // process started since, and comes to the exit handler as usual).
  static Result<std::unique_ptr<KeeperLink>> Attach(Loop* loop, UniqueFd fd, ExitHandler on_exit,
                                                    bool keeper_empty = false);
  // Destroy only once the loop no longer runs (a beat timer may be pending).
  KeeperLink(const KeeperLink&) = delete;
  KeeperLink& operator=(const KeeperLink&) = delete;

  // The handler must not destroy the link. Exits are delivered in the order
  // the keeper reaped them; after a worker restart the unacknowledged ones
  // come again, so the handler must be idempotent per (pid, unix_nanos).
  void SetExitHandler(ExitHandler on_exit) { on_exit_ = std::move(on_exit); }
  // Called once when the keeper has resent every exit it held at hello
  // (after their handler calls): a recovered task whose process is gone and
  // whose exit did not come ended while no keeper ran ("exit status
  // unknown"). Called at once if that already happened, or if the keeper
  // was empty (Attach).
  void SetOnJournalReplayed(std::function<void()> cb);
  // Also called (once) when the keeper goes away, after the loop was stopped.
  void SetOnLost(std::function<void()> on_lost) { on_lost_ = std::move(on_lost); }

  // The exit of pid is recorded: the keeper forgets it. Never blocks.
  void Ack(pid_t pid);
  // Asks the keeper to keep these FIFO fds (the task's stdout/stderr, opened
  // O_RDWR) open until ReleaseFifos(key): buffered output then survives a
  // worker restart even if the task exits meanwhile. key: TaskKey(task id).
  void HoldFifos(int64_t key, const std::vector<int>& fds);
  void ReleaseFifos(int64_t key);

  // Heartbeat (docs/supervision.md): the keeper kills a worker whose beats
  // stop for timeout_nanos. SetHeartbeat sets the timeout (0 = off; a
  // reload may change it); StartHeartbeat, once the worker is fully up,
  // sends the first beat, which arms the keeper's deadline, and then one
  // every timeout/3 from a loop timer, so beats stop when the loop does.
  void SetHeartbeat(int64_t timeout_nanos);
  void StartHeartbeat();

  // Our parent at Attach (the keeper forked us), confirmed by the hello reply.
  pid_t keeper_pid() const { return keeper_pid_; }
  bool connected() const { return connected_; }  // hello reply received, socket open
  bool journal_replayed() const { return replayed_; }
  bool lost() const { return lost_; }
  // Exits the keeper dropped because its journal overflowed (as of the hello
  // reply): tasks whose exit never arrives have "exit status unknown".
  uint64_t dropped_exits() const { return dropped_exits_; }

 private:
  struct Bytes {
    uint8_t data[proto::kMessageSize];
  };

  KeeperLink(Loop* loop, ExitHandler on_exit) : loop_(loop), on_exit_(std::move(on_exit)) {}
  void OnEvents(uint32_t events);
  void ReadMessages();
  void Handle(const proto::Message& m);
  void Send(const proto::Message& m);
  void FlushQueue();
  void Lose(const std::string& why);
  void Beat();  // sends one beat and arms the timer for the next


  Loop* loop_;
  LoopFd fd_;  // the socket and its registration; invalid once lost
  ExitHandler on_exit_;
  std::function<void()> on_replayed_;
  std::function<void()> on_lost_;
  // Messages waiting for socket room, back to back (kMessageSize each),
  // from queue_head_ on.
  std::string queue_;
  size_t queue_head_ = 0;
  pid_t keeper_pid_ = 0;
  uint64_t dropped_exits_ = 0;
  bool connected_ = false;
  bool replayed_ = false;
  bool lost_ = false;
  bool warned_bad_message_ = false;
  int64_t beat_timeout_ = 0;
  bool beating_ = false;
  Loop::TimerId beat_timer_ = 0;
};

}  // namespace outpost::keeper
