// ttRPC clients (containerd/ttrpc wire format). Owns: client-side stream ids (odd,
// increasing from 1), matching replies to calls by stream id, per-call
// deadlines, and refusing to send a Request over 4 MiB (ResourceExhausted,
// nothing written). Two flavours:
//   RpcClient      asynchronous, on the Loop; many calls in flight; used by
//                  the agent (NRI plugins, registered plugins).
//   BlockingClient one call at a time with poll(2) and a deadline; no Loop;
//                  used by the CLI.
// Both send timeout_nano (the time left until the deadline) so the server
// can give up at the same moment. An RpcClient runs over its own socket or
// over a ByteLink (an NRI mux connection, wire/mux); the state machine is
// the same. Does not own: what the payloads mean, the link's transport, or
// reconnecting (a closed RpcClient stays closed; make a new one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "wire/codec.h"
#include "wire/deadline_queue.h"
#include "wire/frame.h"
#include "wire/mux.h"

namespace outpost::wire {

struct ClientOptions {
  std::string name = "rpc";  // in log lines
  // Calls fail with ResourceExhausted instead of queueing more than this
  // for a server that does not read.
  size_t max_queued_bytes = 16 << 20;
};

class RpcClient {
 public:
  // Success: the reply payload. Failure: the server's status as an Error,
  // DeadlineExceeded, Unavailable (connection closed), ResourceExhausted
  // (request too large, or write queue full), InvalidArgument...
  using Callback = std::function<void(Result<std::string> reply)>;
  using CloseCallback = std::function<void(const Error& why)>;

  // fd: a connected stream socket (made nonblocking here).
  static Result<std::unique_ptr<RpcClient>> Create(Loop* loop, UniqueFd fd, ClientOptions options = {});
  static Result<std::unique_ptr<RpcClient>> Connect(Loop* loop, const std::string& socket_path,
                                                    ClientOptions options = {});
  // Over a link instead of a socket: requests go to link->Send, received
  // bytes are framed as from a socket, and the link's close notice closes
  // the client (pending calls fail with Unavailable, then the close
  // callback runs). The client takes over the link's receiver; closing or
  // destroying the client closes the link (for a mux link: the trunk).
  // max_queued_bytes counts the link's queue (a mux trunk's shared queue).
  static Result<std::unique_ptr<RpcClient>> CreateOnLink(Loop* loop, std::shared_ptr<ByteLink> link,
                                                         ClientOptions options = {});
  // Drops pending calls without running their callbacks.
  ~RpcClient();
  RpcClient(const RpcClient&) = delete;
  RpcClient& operator=(const RpcClient&) = delete;

  // Starts a unary call. timeout_nanos > 0 sets a deadline (sent as
  // timeout_nano); 0 means none. done runs exactly once, from a Loop
  // callback, never inside Call itself. The views need to live only for the
  // duration of Call.
  void Call(std::string_view service, std::string_view method, std::string_view payload, int64_t timeout_nanos,
            Callback done);
  void Call(std::string_view service, std::string_view method, std::string_view payload, int64_t timeout_nanos,
            const std::vector<MetadataEntry>& metadata, Callback done);

  // Closes the connection; pending calls fail with Unavailable (their
  // callbacks run before Close returns), then the close callback runs.
  void Close();
  // Runs once when the connection closes for any reason (not on destruction).
  void SetCloseCallback(CloseCallback cb) { on_close_ = std::move(cb); }

  bool connected() const { return fd_.valid() || link_ != nullptr; }
  size_t pending_calls() const { return pending_.size(); }
  size_t queued_bytes() const { return out_.size() + (link_ ? link_->queued_bytes() : 0); }

 private:
  struct Pending {
    Callback done;
    int64_t deadline;
  };

  RpcClient(Loop* loop, ClientOptions options);
  void FailLater(Callback done, Error error);
  void OnEvent(uint32_t events);
  void OnLinkBytes(std::string_view bytes);
  void ProcessFrames();
  void Complete(uint32_t stream, Result<std::string> result);
  void OnDeadline(const DeadlineEntry& e);
  bool FlushAndWatch();
  void CloseWith(const Error& why);

  Loop* loop_;
  LoopFd fd_;  // unregistered before it is closed
  std::shared_ptr<ByteLink> link_;  // instead of fd_; null once closed
  ClientOptions opts_;
  FrameReader reader_;
  WriteQueue out_;
  std::unordered_map<uint32_t, Pending> pending_;
  uint64_t next_stream_ = 1;
  uint32_t events_ = 0;
  bool dispatching_ = false;
  bool close_scheduled_ = false;
  CloseCallback on_close_;
  DeadlineQueue deadlines_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class BlockingClient {
 public:
  // Connects to a unix socket, retrying while the listen backlog is full,
  // for up to timeout_nanos (0 = one attempt).
  static Result<BlockingClient> Connect(const std::string& socket_path, int64_t timeout_nanos);
  // fd: a connected stream socket (made nonblocking here).
  explicit BlockingClient(UniqueFd fd);
  BlockingClient(BlockingClient&&) = default;
  BlockingClient& operator=(BlockingClient&&) = default;

  // One call; waits at most timeout_nanos (0 = no limit) for the reply.
  // After a timeout the connection stays usable: the late reply is skipped
  // by its stream id.
  Result<std::string> Call(std::string_view service, std::string_view method, std::string_view payload,
                           int64_t timeout_nanos);
  Result<std::string> Call(std::string_view service, std::string_view method, std::string_view payload,
                           int64_t timeout_nanos, const std::vector<MetadataEntry>& metadata);

  int fd() const { return fd_.get(); }
  // Whether the last Call's outcome is the server's answer (a payload or
  // its error status), not a failure to reach it (write, read, closed
  // connection, deadline): a server may answer Unavailable itself.
  bool answered() const { return answered_; }

 private:
  Status WriteAll(int64_t deadline);
  Status WaitFor(short events, int64_t deadline);

  UniqueFd fd_;
  FrameReader reader_;
  std::string out_;
  uint64_t next_stream_ = 1;
  bool broken_ = false;  // a request was cut off mid-frame: the stream is unusable
  bool answered_ = false;
};

}  // namespace outpost::wire
