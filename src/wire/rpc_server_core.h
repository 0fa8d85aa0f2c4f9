// The ttRPC server's internals (wire/rpc_server), shared by its two halves:
// rpc_server.cc (listener, admission, timeouts, options, the public classes)
// and rpc_server_conn.cc (per-connection I/O, framing and dispatch of calls).
// Not for use outside wire/rpc_server*.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "wire/codec.h"
#include "wire/deadline_queue.h"
#include "wire/frame.h"
#include "wire/mux.h"
#include "wire/rpc_server.h"

namespace outpost::wire {

constexpr int64_t kNever = INT64_MAX;

// The server's files are built for speed, for the per-call path. What runs
// per connection or per timeout (accepting, admission, closing, sweeping,
// options) is marked cold, which GCC builds for size: a few KB smaller, and
// a syscall or two per connection dominates it anyway.
#define OUTPOST_PER_CONNECTION __attribute__((cold))

inline int64_t AddSaturating(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

struct ServerConn {
  uint64_t id = 0;
  LoopFd fd;  // registered with the loop while the connection is open
  // Instead of fd: a connection over a ByteLink. Its replies go to the
  // link whole (out is emptied at every flush, so write backpressure is
  // the link's), it has no epoll interest and no idle or frame timeouts.
  std::shared_ptr<ByteLink> link;
  sys::PeerCred peer{};
  FrameReader reader;
  WriteQueue out;
  std::unordered_map<uint32_t, int64_t> pending;  // stream id -> deadline (0 = none)
  uint32_t last_stream = 0;
  uint32_t events = 0;        // epoll interest currently registered
  int64_t last_activity = 0;  // last time bytes moved either way
  int64_t frame_started = 0;  // a partial frame has been waiting since; 0 = none
  bool write_paused = false;  // backpressure, with hysteresis
  bool read_eof = false;
  bool closed = false;
  bool dispatching = false;     // replies queue up; ProcessFrames flushes them
  bool has_unprocessed = false; // frames left in the reader while paused
  bool resume_scheduled = false;
  size_t counted_read_buffer = 0;  // reader.capacity() as added to read_buffers_
};

// The server's state, shared with Responders through weak_ptrs so a reply
// can outlive the server (it is then dropped).
class RpcServerCore : public std::enable_shared_from_this<RpcServerCore> {
 public:
  RpcServerCore(Loop* loop, ServerOptions options)
      : loop_(loop),
        opts_(std::move(options)),
        deadlines_(loop, [this](const DeadlineEntry& e) { OnDeadline(e); }) {}

  // Watches listen_fd (none: an invalid fd) for connections to accept.
  OUTPOST_PER_CONNECTION Status Start(UniqueFd listen_fd);
  OUTPOST_PER_CONNECTION void Shutdown();
  void Register(std::string service, std::string method, Handler handler) {
    services_[std::move(service)][std::move(method)] = std::make_shared<Handler>(std::move(handler));
  }
  Result<uint64_t> Admit(UniqueFd fd) { return Admit(std::move(fd), false); }
  OUTPOST_PER_CONNECTION Result<uint64_t> AdmitLink(std::shared_ptr<ByteLink> link, const sys::PeerCred& peer);
  OUTPOST_PER_CONNECTION void SetOptions(ServerOptions options);
  const ServerOptions& options() const { return opts_; }
  size_t connection_count() const { return conns_.size(); }
  ServerStats stats() const;

  // From Responder.
  void Reply(uint64_t conn_id, uint32_t stream, const Response& resp);
  bool IsPending(uint64_t conn_id, uint32_t stream) const;

 private:
  // Keeps the core alive and closed connections' memory valid until the
  // outermost entry point returns: handlers may close connections (even
  // destroy the server) while frames of that connection are being handled.
  class Scope {
   public:
    explicit Scope(RpcServerCore* core) : core_(core->shared_from_this()) { ++core_->depth_; }
    ~Scope() {
      if (--core_->depth_ == 0) core_->graveyard_.clear();
    }

   private:
    std::shared_ptr<RpcServerCore> core_;
  };

  ServerConn* Find(uint64_t id) const {
    auto it = conns_.find(id);
    return it == conns_.end() ? nullptr : it->second.get();
  }
  bool Allowed(uid_t uid) const {
    return opts_.allow_any_uid || std::find(opts_.allowed_uids.begin(), opts_.allowed_uids.end(), uid) !=
                                      opts_.allowed_uids.end();
  }

  // rpc_server.cc
  OUTPOST_PER_CONNECTION void OnAcceptable();
  OUTPOST_PER_CONNECTION void PauseAccept();
  // need_fd: the process is out of fds and the spare one was spent on
  // accepting fd, so admitting it takes closing an idle connection.
  OUTPOST_PER_CONNECTION Result<uint64_t> Admit(UniqueFd fd, bool need_fd);
  // The allow-list and connection limits (making room or refusing).
  OUTPOST_PER_CONNECTION Status CheckAdmission(const sys::PeerCred& cred, bool need_fd);
  OUTPOST_PER_CONNECTION uint64_t Insert(std::unique_ptr<ServerConn> conn);
  OUTPOST_PER_CONNECTION Error Refuse(const Error& why, const sys::PeerCred* peer);
  OUTPOST_PER_CONNECTION bool MakeRoom(const uid_t* uid, const std::string& limit);
  OUTPOST_PER_CONNECTION ServerConn* OldestIdle(const uid_t* uid) const;
  size_t& UidCount(uid_t uid);
  // Closes c with reason logged at level, or through burst (one line per
  // burst of the same kind) when given.
  OUTPOST_PER_CONNECTION void CloseConn(ServerConn* c, log::Level level, const std::string& reason,
                                        log::RepeatedLine* burst = nullptr);
  OUTPOST_PER_CONNECTION void ArmLogFlush();
  OUTPOST_PER_CONNECTION void OverReadBudget(ServerConn* c);
  int64_t Expiry(const ServerConn* c) const;
  void ArmSweep(int64_t at);
  OUTPOST_PER_CONNECTION void Sweep();

  // rpc_server_conn.cc
  void OnConnEvent(uint64_t id, uint32_t events);
  void OnLinkBytes(uint64_t id, std::string_view bytes);
  OUTPOST_PER_CONNECTION void OnLinkClosed(uint64_t id, const Error& why);
  void AccountReadBuffer(ServerConn* c);
  void ReadOnce(ServerConn* c);
  void ProcessFrames(ServerConn* c);
  void HandleFrame(ServerConn* c, const Frame& f, Request* req);
  void HandleRequest(ServerConn* c, const Frame& f, Request* req);
  void SendError(ServerConn* c, uint32_t stream, const Error& err);
  void Send(ServerConn* c, uint32_t stream, const Response& resp);
  void AfterIo(ServerConn* c);
  bool Flush(ServerConn* c);
  void UpdateInterest(ServerConn* c);
  void OnDeadline(const DeadlineEntry& e);

  Loop* loop_;
  LoopFd listen_;
  ServerOptions opts_;
  std::map<std::string, std::map<std::string, std::shared_ptr<Handler>, std::less<>>, std::less<>> services_;
  std::unordered_map<uint64_t, std::unique_ptr<ServerConn>> conns_;
  std::vector<std::unique_ptr<ServerConn>> graveyard_;
  uint64_t next_conn_id_ = 1;
  size_t total_pending_ = 0;
  size_t read_buffers_ = 0;  // sum of the connections' reader capacities
  DeadlineQueue deadlines_;
  Loop::TimerId sweep_timer_ = 0;
  int64_t sweep_at_ = 0;
  Loop::TimerId accept_timer_ = 0;
  Loop::TimerId log_timer_ = 0;
  int64_t log_at_ = 0;
  // Spent to accept (and then close or make room for) a connection when the
  // process is out of fds, so a full fd table never leaves the listener
  // readable with nothing we can do about it.
  UniqueFd spare_fd_;
  std::vector<std::pair<uid_t, size_t>> per_uid_;  // open connections by allowed peer uid
  int depth_ = 0;
  bool shut_down_ = false;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  uint64_t evicted_ = 0;
  uint64_t calls_ = 0;
  // Events that come in bursts from a flood of clients: one line per burst.
  log::RepeatedLine accept_failed_log_{log::Level::kWarn, "rpc accept failed; pausing accept for 100ms"};
  log::RepeatedLine refused_log_{log::Level::kWarn, "rpc connection refused"};
  log::RepeatedLine evicted_log_{log::Level::kInfo, "rpc connection closed"};
  log::RepeatedLine idle_log_{log::Level::kInfo, "rpc connection closed"};
  log::RepeatedLine slow_log_{log::Level::kWarn, "rpc connection closed"};
};

}  // namespace outpost::wire
