// The listener half of the ttRPC server (see rpc_server_core.h): accepting
// and admitting connections, closing them, idle and frame timeouts, options,
// stats, and the public RpcServer and Responder.
#include "wire/rpc_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "wire/rpc_server_core.h"

namespace outpost::wire {

namespace {

constexpr int kAcceptBatch = 32;
constexpr int64_t kAcceptPauseNanos = 100 * kNanosPerMilli;  // after EMFILE and friends

}  // namespace

Status RpcServerCore::Start(UniqueFd listen_fd) {
  if (!listen_fd) return OkStatus();
  // The accept loop runs until EAGAIN: a blocking listener would hang it.
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(listen_fd.get(), true));
  auto watched = LoopFd::Watch(loop_, std::move(listen_fd), EPOLLIN, [this](uint32_t) { OnAcceptable(); });
  if (!watched.ok()) return watched.error();
  listen_ = std::move(*watched);
  return OkStatus();
}

void RpcServerCore::Shutdown() {
  if (shut_down_) return;
  Scope scope(this);
  shut_down_ = true;
  listen_.Reset();
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
        [&] { return ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); });
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == ECONNABORTED || err == EPROTO) continue;
      // Out of fds or memory: the listening socket stays readable, so stop
      // watching it for a moment instead of spinning.
      log::Warn("rpc accept failed; pausing accept", {{"server", opts_.name}, {"error", std::strerror(err)}});
      (void)listen_.Modify(0);
      accept_timer_ = loop_->AddTimer(kAcceptPauseNanos, [this] {
        accept_timer_ = 0;
        if (listen_) (void)listen_.Modify(EPOLLIN);
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
  auto watched = LoopFd::Watch(loop_, std::move(fd), EPOLLIN, [this, id](uint32_t ev) { OnConnEvent(id, ev); });
  if (!watched.ok()) return watched.error();
  c->fd = std::move(*watched);
  conns_.emplace(id, std::move(conn));
  ++accepted_;
  log::Debug("rpc connection", {{"server", opts_.name}, {"conn", std::to_string(id)},
                                {"uid", std::to_string(c->peer.uid)}, {"pid", std::to_string(c->peer.pid)}});
  ArmSweep(Expiry(c));
  return id;
}

void RpcServerCore::CloseConn(ServerConn* c, log::Level level, const std::string& reason) {
  if (c->closed) return;
  c->closed = true;
  log::Write(level, "rpc connection closed",
             {{"server", opts_.name}, {"conn", std::to_string(c->id)}, {"reason", reason},
              {"pending", std::to_string(c->pending.size())}});
  total_pending_ -= c->pending.size();
  c->pending.clear();
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
  auto core = std::make_shared<RpcServerCore>(loop, std::move(options));
  OUTPOST_RETURN_IF_ERROR(core->Start(std::move(listen_fd)));
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
