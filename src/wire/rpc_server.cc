#include "wire/rpc_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "wire/deadline_queue.h"
#include "wire/frame.h"

namespace outpost::wire {

namespace {

constexpr int kAcceptBatch = 32;
constexpr int64_t kAcceptPauseNanos = 100 * kNanosPerMilli;  // after EMFILE and friends
constexpr int64_t kNever = INT64_MAX;

int64_t AddSaturating(int64_t a, int64_t b) {
  if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
  if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
  return a + b;
}

}  // namespace

struct ServerConn {
  uint64_t id = 0;
  UniqueFd fd;
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
};

// The server's state, shared with Responders through weak_ptrs so a reply
// can outlive the server (it is then dropped).
class RpcServerCore : public std::enable_shared_from_this<RpcServerCore> {
 public:
  RpcServerCore(Loop* loop, UniqueFd listen_fd, ServerOptions options)
      : loop_(loop),
        listen_fd_(std::move(listen_fd)),
        opts_(std::move(options)),
        deadlines_(loop, [this](const DeadlineEntry& e) { OnDeadline(e); }) {}

  Status Start();
  void Shutdown();
  void Register(std::string service, std::string method, Handler handler) {
    services_[std::move(service)][std::move(method)] = std::make_shared<Handler>(std::move(handler));
  }
  Result<uint64_t> Admit(UniqueFd fd);
  void SetOptions(ServerOptions options);
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

  void OnAcceptable();
  void OnConnEvent(uint64_t id, uint32_t events);
  void ReadOnce(ServerConn* c);
  void ProcessFrames(ServerConn* c);
  void HandleFrame(ServerConn* c, const Frame& f, Request* req);
  void HandleRequest(ServerConn* c, const Frame& f, Request* req);
  void SendError(ServerConn* c, uint32_t stream, const Error& err);
  void Send(ServerConn* c, uint32_t stream, const Response& resp);
  void AfterIo(ServerConn* c);
  bool Flush(ServerConn* c);
  void UpdateInterest(ServerConn* c);
  void CloseConn(ServerConn* c, log::Level level, const std::string& reason);
  void OnDeadline(const DeadlineEntry& e);
  int64_t Expiry(const ServerConn* c) const;
  void ArmSweep(int64_t at);
  void Sweep();

  Loop* loop_;
  UniqueFd listen_fd_;
  ServerOptions opts_;
  std::map<std::string, std::map<std::string, std::shared_ptr<Handler>, std::less<>>, std::less<>> services_;
  std::unordered_map<uint64_t, std::unique_ptr<ServerConn>> conns_;
  std::vector<std::unique_ptr<ServerConn>> graveyard_;
  uint64_t next_conn_id_ = 1;
  size_t total_pending_ = 0;
  DeadlineQueue deadlines_;
  Loop::TimerId sweep_timer_ = 0;
  int64_t sweep_at_ = 0;
  Loop::TimerId accept_timer_ = 0;
  int depth_ = 0;
  bool shut_down_ = false;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  uint64_t calls_ = 0;
};

Status RpcServerCore::Start() {
  if (!listen_fd_) return OkStatus();
  // The accept loop runs until EAGAIN: a blocking listener would hang it.
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(listen_fd_.get(), true));
  return loop_->AddFd(listen_fd_.get(), EPOLLIN, [this](uint32_t) { OnAcceptable(); });
}

void RpcServerCore::Shutdown() {
  if (shut_down_) return;
  Scope scope(this);
  shut_down_ = true;
  if (listen_fd_) loop_->RemoveFd(listen_fd_.get());
  listen_fd_.Reset();
  if (sweep_timer_ != 0) loop_->CancelTimer(sweep_timer_);
  if (accept_timer_ != 0) loop_->CancelTimer(accept_timer_);
  sweep_timer_ = accept_timer_ = 0;
  std::vector<ServerConn*> all;
  for (auto& [id, c] : conns_) all.push_back(c.get());
  for (ServerConn* c : all) CloseConn(c, log::Level::kDebug, "server shutting down");
  deadlines_.Clear();
}

void RpcServerCore::OnAcceptable() {
  Scope scope(this);
  for (int i = 0; i < kAcceptBatch && !shut_down_; ++i) {
    int fd = sys::RetryEintr(
        [&] { return ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); });
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == ECONNABORTED || err == EPROTO) continue;
      // Out of fds or memory: the listening socket stays readable, so stop
      // watching it for a moment instead of spinning.
      log::Warn("rpc accept failed; pausing accept", {{"server", opts_.name}, {"error", std::strerror(err)}});
      (void)loop_->ModifyFd(listen_fd_.get(), 0);
      accept_timer_ = loop_->AddTimer(kAcceptPauseNanos, [this] {
        accept_timer_ = 0;
        if (listen_fd_) (void)loop_->ModifyFd(listen_fd_.get(), EPOLLIN);
      });
      return;
    }
    (void)Admit(UniqueFd(fd));
  }
}

Result<uint64_t> RpcServerCore::Admit(UniqueFd fd) {
  Scope scope(this);
  if (shut_down_) return Error(Code::kUnavailable, "server is shut down");
  if (conns_.size() >= opts_.max_connections) {
    ++refused_;
    log::Warn("rpc connection limit reached; closing new connection",
              {{"server", opts_.name}, {"max_connections", std::to_string(opts_.max_connections)}});
    return Error(Code::kResourceExhausted, Format("connection limit %zu reached", opts_.max_connections));
  }
  auto cred = sys::GetPeerCred(fd.get());
  if (!cred.ok()) {
    ++refused_;
    log::Warn("rpc connection refused", {{"server", opts_.name}, {"error", cred.error().message()}});
    return cred.error();
  }
  if (!Allowed(cred->uid)) {
    ++refused_;
    log::Warn("rpc connection refused: peer uid not allowed",
              {{"server", opts_.name}, {"uid", std::to_string(cred->uid)}, {"pid", std::to_string(cred->pid)}});
    return Error(Code::kPermissionDenied, Format("peer uid %u is not allowed", static_cast<unsigned>(cred->uid)));
  }
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(fd.get(), true));
  auto conn = std::make_unique<ServerConn>();
  ServerConn* c = conn.get();
  c->id = next_conn_id_++;
  c->peer = *cred;
  c->last_activity = MonotonicNanos();
  c->events = EPOLLIN;
  uint64_t id = c->id;
  OUTPOST_RETURN_IF_ERROR(loop_->AddFd(fd.get(), EPOLLIN, [this, id](uint32_t ev) { OnConnEvent(id, ev); }));
  c->fd = std::move(fd);
  conns_.emplace(id, std::move(conn));
  ++accepted_;
  log::Debug("rpc connection", {{"server", opts_.name}, {"conn", std::to_string(id)},
                                {"uid", std::to_string(c->peer.uid)}, {"pid", std::to_string(c->peer.pid)}});
  ArmSweep(Expiry(c));
  return id;
}

void RpcServerCore::OnConnEvent(uint64_t id, uint32_t events) {
  Scope scope(this);
  ServerConn* c = Find(id);
  if (c == nullptr) return;
  if (events & EPOLLERR) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(c->fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    CloseConn(c, log::Level::kDebug, Format("socket error: %s", std::strerror(err)));
    return;
  }
  if ((events & EPOLLOUT) && !Flush(c)) return;
  bool reading = (c->events & EPOLLIN) != 0;
  if (reading && (events & (EPOLLIN | EPOLLHUP))) {
    ReadOnce(c);
    if (c->closed) return;
    ProcessFrames(c);
    if (c->closed || shut_down_) return;
  } else if (events & EPOLLHUP) {
    // The peer is gone for good and we are not reading: nobody can receive
    // what is queued or pending.
    CloseConn(c, log::Level::kDebug, "peer hung up");
    return;
  }
  AfterIo(c);
}

void RpcServerCore::ReadOnce(ServerConn* c) {
  size_t avail;
  char* p = c->reader.Prepare(&avail);
  ssize_t n = sys::Read(c->fd.get(), p, avail);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    CloseConn(c, log::Level::kDebug, Format("read: %s", std::strerror(errno)));
    return;
  }
  if (n == 0) {
    // Half-close: answer what was asked, then close (AfterIo decides).
    c->read_eof = true;
    return;
  }
  c->reader.Commit(static_cast<size_t>(n));
  c->last_activity = MonotonicNanos();
}

void RpcServerCore::ProcessFrames(ServerConn* c) {
  c->dispatching = true;
  c->has_unprocessed = false;
  Request req;  // reused across the batch: metadata keeps its capacity
  bool completed = false;
  Frame f;
  for (;;) {
    if (c->write_paused || c->out.size() >= opts_.write_queue_pause_bytes ||
        c->pending.size() >= opts_.max_inflight_per_connection) {
      c->has_unprocessed = c->reader.buffered() > 0;
      break;
    }
    FrameReader::Event ev = c->reader.Next(&f);
    if (ev == FrameReader::Event::kNeedMore) break;
    completed = true;
    if (ev == FrameReader::Event::kOversize) {
      // As ttRPC: answer on the stream id the header named, no other checks.
      SendError(c, f.header.stream_id, OversizeError(f.header.length));
    } else {
      HandleFrame(c, f, &req);
    }
    if (c->closed || shut_down_) return;  // c stays valid until the Scope ends
  }
  c->dispatching = false;
  if (completed) c->frame_started = 0;
}

void RpcServerCore::HandleFrame(ServerConn* c, const Frame& f, Request* req) {
  const uint32_t stream = f.header.stream_id;
  if (stream % 2 != 1) {
    SendError(c, stream, Error(Code::kInvalidArgument, "StreamID must be odd for client initiated streams"));
    return;
  }
  switch (static_cast<FrameType>(f.header.type)) {
    case FrameType::kRequest: HandleRequest(c, f, req); return;
    case FrameType::kData: {
      auto it = c->pending.find(stream);
      if (it == c->pending.end()) {
        SendError(c, stream, Error(Code::kInvalidArgument, "StreamID is no longer active"));
        return;
      }
      // Unary calls only: fail the call; its handler's reply is then dropped.
      c->pending.erase(it);
      --total_pending_;
      SendError(c, stream, Error(Code::kInvalidArgument, "data frames are not supported: unary calls only"));
      return;
    }
    default:
      // Responses and unknown types are ignored, as ttRPC does.
      log::Debug("rpc ignoring frame", {{"server", opts_.name}, {"type", std::to_string(f.header.type)}});
      return;
  }
}

void RpcServerCore::HandleRequest(ServerConn* c, const Frame& f, Request* req) {
  const uint32_t stream = f.header.stream_id;
  Status st = DecodeRequest(f.payload, req);
  if (!st.ok()) {
    SendError(c, stream, Error(Code::kInvalidArgument, "unmarshal request error: " + st.error().message()));
    return;
  }
  if (stream <= c->last_stream) {
    SendError(c, stream, Error(Code::kInvalidArgument, "StreamID cannot be re-used and must increment"));
    return;
  }
  c->last_stream = stream;
  auto svc = services_.find(req->service);
  if (svc == services_.end()) {
    SendError(c, stream, Error(Code::kUnimplemented, "service " + std::string(req->service)));
    return;
  }
  auto method = svc->second.find(req->method);
  if (method == svc->second.end()) {
    SendError(c, stream, Error(Code::kUnimplemented, "method " + std::string(req->method)));
    return;
  }
  CallContext ctx;
  ctx.connection_id = c->id;
  ctx.stream_id = stream;
  ctx.peer = c->peer;
  ctx.service = req->service;
  ctx.method = req->method;
  ctx.metadata = &req->metadata;
  if (req->timeout_nano != 0) {
    // A negative timeout (the client's deadline already passed) expires at once.
    ctx.deadline = std::max<int64_t>(1, AddSaturating(MonotonicNanos(), req->timeout_nano));
    deadlines_.Push({ctx.deadline, c->id, stream});
  }
  c->pending.emplace(stream, ctx.deadline);
  ++total_pending_;
  ++calls_;
  if (ctx.deadline != 0) {
    deadlines_.MaybeCompact(total_pending_, [this](const DeadlineEntry& e) {
      ServerConn* dc = Find(e.conn);
      return dc != nullptr && dc->pending.count(e.stream) != 0;
    });
  }
  std::shared_ptr<Handler> handler = method->second;  // survives a re-Register from inside
  (*handler)(ctx, req->payload, Responder(weak_from_this(), c->id, stream));
}

void RpcServerCore::SendError(ServerConn* c, uint32_t stream, const Error& err) {
  Send(c, stream, ErrorResponse(err));
}

void RpcServerCore::Send(ServerConn* c, uint32_t stream, const Response& resp) {
  // One reply always fits into an empty queue, whatever the limit. Sizing a
  // reply costs a pass of the encoder, so it is done only when the queue is
  // within one maximal frame of its limit.
  if (!c->out.empty() && c->out.size() + kFrameHeaderSize + kMaxFramePayload > opts_.write_queue_max_bytes) {
    size_t len = EncodedSize(resp);
    if (len <= kMaxFramePayload && c->out.size() + kFrameHeaderSize + len > opts_.write_queue_max_bytes) {
      CloseConn(c, log::Level::kWarn,
                Format("write queue over %zu bytes: peer is not reading its replies", opts_.write_queue_max_bytes));
      return;
    }
  }
  // Appends nothing when the reply is over the frame limit.
  Status st = AppendResponseFrame(stream, resp, c->out.buffer());
  if (!st.ok()) {
    log::Warn("rpc reply too large; sending an error instead",
              {{"server", opts_.name}, {"error", st.error().message()}});
    Send(c, stream, ErrorResponse(st.error()));
  }
}

void RpcServerCore::Reply(uint64_t conn_id, uint32_t stream, const Response& resp) {
  Scope scope(this);
  ServerConn* c = Find(conn_id);
  if (c == nullptr) return;  // connection gone: drop
  auto it = c->pending.find(stream);
  if (it == c->pending.end()) return;  // answered already, or timed out
  c->pending.erase(it);
  --total_pending_;
  Send(c, stream, resp);
  if (!c->closed && !c->dispatching) AfterIo(c);
}

bool RpcServerCore::IsPending(uint64_t conn_id, uint32_t stream) const {
  ServerConn* c = Find(conn_id);
  return c != nullptr && c->pending.count(stream) != 0;
}

void RpcServerCore::OnDeadline(const DeadlineEntry& e) {
  Scope scope(this);
  ServerConn* c = Find(e.conn);
  if (c == nullptr) return;
  auto it = c->pending.find(e.stream);
  if (it == c->pending.end() || it->second != e.deadline) return;
  const Error expired(Code::kDeadlineExceeded, "context deadline exceeded");
  Reply(e.conn, e.stream, ErrorResponse(expired));
}

bool RpcServerCore::Flush(ServerConn* c) {
  if (c->out.empty()) return true;
  size_t before = c->out.size();
  if (!c->out.Flush(c->fd.get())) {
    CloseConn(c, log::Level::kDebug, Format("write: %s", std::strerror(errno)));
    return false;
  }
  if (c->out.size() != before) c->last_activity = MonotonicNanos();
  return true;
}

void RpcServerCore::AfterIo(ServerConn* c) {
  if (!Flush(c)) return;
  if (c->read_eof && c->pending.empty() && c->out.empty() && !c->has_unprocessed) {
    CloseConn(c, log::Level::kDebug, "peer closed");
    return;
  }
  UpdateInterest(c);
  ArmSweep(Expiry(c));
}

void RpcServerCore::UpdateInterest(ServerConn* c) {
  size_t queued = c->out.size();
  if (c->write_paused) {
    if (queued <= opts_.write_queue_pause_bytes / 2) c->write_paused = false;
  } else if (queued >= opts_.write_queue_pause_bytes) {
    c->write_paused = true;
  }
  bool can_process = !c->write_paused && c->pending.size() < opts_.max_inflight_per_connection;
  bool want_read = can_process && !c->read_eof;
  uint32_t events = (want_read ? EPOLLIN : 0u) | (queued > 0 ? EPOLLOUT : 0u);
  if (events != c->events) {
    Status st = loop_->ModifyFd(c->fd.get(), events);
    if (!st.ok()) {
      CloseConn(c, log::Level::kWarn, st.error().message());
      return;
    }
    c->events = events;
  }
  // The slowloris clock runs only while we are willing to read.
  if (!want_read) {
    c->frame_started = 0;
  } else if (c->reader.MidFrame() && c->frame_started == 0) {
    c->frame_started = MonotonicNanos();
  }
  if (can_process && c->has_unprocessed && !c->resume_scheduled) {
    // Frames already buffered produce no EPOLLIN: handle them on this turn.
    c->resume_scheduled = true;
    std::weak_ptr<RpcServerCore> weak = weak_from_this();
    uint64_t id = c->id;
    loop_->Defer([weak, id] {
      auto core = weak.lock();
      if (!core) return;
      Scope scope(core.get());
      ServerConn* rc = core->Find(id);
      if (rc == nullptr) return;
      rc->resume_scheduled = false;
      core->ProcessFrames(rc);
      if (!rc->closed && !core->shut_down_) core->AfterIo(rc);
    });
  }
}

void RpcServerCore::CloseConn(ServerConn* c, log::Level level, const std::string& reason) {
  if (c->closed) return;
  c->closed = true;
  log::Write(level, "rpc connection closed",
             {{"server", opts_.name}, {"conn", std::to_string(c->id)}, {"reason", reason},
              {"pending", std::to_string(c->pending.size())}});
  total_pending_ -= c->pending.size();
  c->pending.clear();
  loop_->RemoveFd(c->fd.get());
  c->fd.Reset();
  auto it = conns_.find(c->id);
  if (it != conns_.end()) {
    // Every entry point holds a Scope, so the memory lives until it ends.
    graveyard_.push_back(std::move(it->second));
    conns_.erase(it);
  }
}

int64_t RpcServerCore::Expiry(const ServerConn* c) const {
  int64_t at = kNever;
  if (opts_.idle_timeout_nanos > 0 && (c->pending.empty() || !c->out.empty())) {
    at = AddSaturating(c->last_activity, opts_.idle_timeout_nanos);
  }
  if (opts_.frame_timeout_nanos > 0 && c->frame_started != 0) {
    at = std::min(at, AddSaturating(c->frame_started, opts_.frame_timeout_nanos));
  }
  return at;
}

void RpcServerCore::ArmSweep(int64_t at) {
  if (at == kNever || shut_down_) return;
  if (sweep_timer_ != 0) {
    if (sweep_at_ <= at) return;
    loop_->CancelTimer(sweep_timer_);
  }
  sweep_at_ = at;
  sweep_timer_ = loop_->AddTimerAt(at, [this] {
    sweep_timer_ = 0;
    Sweep();
  });
}

void RpcServerCore::Sweep() {
  Scope scope(this);
  int64_t now = MonotonicNanos();
  std::vector<std::pair<ServerConn*, const char*>> expired;
  int64_t next = kNever;
  for (auto& [id, conn] : conns_) {
    ServerConn* c = conn.get();
    int64_t at = Expiry(c);
    if (at > now) {
      next = std::min(next, at);
    } else if (opts_.frame_timeout_nanos > 0 && c->frame_started != 0 &&
               c->frame_started + opts_.frame_timeout_nanos <= now) {
      expired.emplace_back(c, "incomplete frame timeout");
    } else {
      expired.emplace_back(c, c->out.empty() ? "idle timeout" : "peer stopped reading (write timeout)");
    }
  }
  for (auto& [c, why] : expired) CloseConn(c, log::Level::kInfo, why);
  ArmSweep(next);
}

void RpcServerCore::SetOptions(ServerOptions options) {
  Scope scope(this);
  opts_ = std::move(options);
  std::vector<ServerConn*> all;
  for (auto& [id, c] : conns_) all.push_back(c.get());
  for (ServerConn* c : all) {
    if (!Allowed(c->peer.uid)) {
      CloseConn(c, log::Level::kWarn, Format("peer uid %u no longer allowed", static_cast<unsigned>(c->peer.uid)));
    } else if (!c->dispatching) {
      UpdateInterest(c);
    }
  }
  if (sweep_timer_ != 0) loop_->CancelTimer(sweep_timer_);
  sweep_timer_ = 0;
  Sweep();  // new, shorter timeouts apply now
}

ServerStats RpcServerCore::stats() const {
  ServerStats s;
  s.connections = conns_.size();
  s.pending_calls = total_pending_;
  for (auto& [id, c] : conns_) {
    s.queued_bytes += c->out.size();
    s.max_queued_bytes = std::max(s.max_queued_bytes, c->out.size());
  }
  s.accepted = accepted_;
  s.refused = refused_;
  s.calls = calls_;
  return s;
}

// ---- Responder --------------------------------------------------------------

void Responder::Reply(std::string_view payload) const {
  auto core = core_.lock();
  if (!core) return;
  Response resp;
  resp.payload = payload;
  core->Reply(conn_, stream_id_, resp);
}

void Responder::Fail(const Error& error) const {
  auto core = core_.lock();
  if (core) core->Reply(conn_, stream_id_, ErrorResponse(error));
}

void Responder::Finish(const Result<std::string>& result) const {
  if (result.ok()) {
    Reply(*result);
  } else {
    Fail(result.error());
  }
}

bool Responder::pending() const {
  auto core = core_.lock();
  return core && core->IsPending(conn_, stream_id_);
}

// ---- RpcServer --------------------------------------------------------------

Result<std::unique_ptr<RpcServer>> RpcServer::Create(Loop* loop, UniqueFd listen_fd, ServerOptions options) {
  auto core = std::make_shared<RpcServerCore>(loop, std::move(listen_fd), std::move(options));
  OUTPOST_RETURN_IF_ERROR(core->Start());
  return std::unique_ptr<RpcServer>(new RpcServer(std::move(core)));
}

RpcServer::~RpcServer() { core_->Shutdown(); }

void RpcServer::Register(std::string service, std::string method, Handler handler) {
  core_->Register(std::move(service), std::move(method), std::move(handler));
}

Result<uint64_t> RpcServer::AddConnection(UniqueFd fd) { return core_->Admit(std::move(fd)); }
void RpcServer::SetOptions(ServerOptions options) { core_->SetOptions(std::move(options)); }
const ServerOptions& RpcServer::options() const { return core_->options(); }
size_t RpcServer::connection_count() const { return core_->connection_count(); }
ServerStats RpcServer::stats() const { return core_->stats(); }

}  // namespace outpost::wire
