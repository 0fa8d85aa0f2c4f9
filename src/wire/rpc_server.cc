// The listener half of the ttRPC server (see rpc_server_core.h): accepting
// and admitting connections, closing them, idle and frame timeouts, options,
// stats, and the public RpcServer and Responder.
#include "wire/rpc_server.h"

#include <fcntl.h>
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
  auto spare = sys::Open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!spare.ok()) return spare.error();
  spare_fd_ = std::move(*spare);
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
  for (Loop::TimerId t : {sweep_timer_, accept_timer_, log_timer_}) {
    if (t != 0) loop_->CancelTimer(t);
  }
  sweep_timer_ = accept_timer_ = log_timer_ = 0;
  std::vector<ServerConn*> all;
  for (auto& [id, c] : conns_) all.push_back(c.get());
  for (ServerConn* c : all) CloseConn(c, log::Level::kDebug, "server shutting down");
  deadlines_.Clear();
}

static int AcceptOne(int listen_fd) {
  return sys::RetryEintr([&] { return ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK); });
}

void RpcServerCore::OnAcceptable() {
  Scope scope(this);
  for (int i = 0; i < kAcceptBatch && !shut_down_ && listen_; ++i) {
    int fd = AcceptOne(listen_.get());
    if (fd >= 0) {
      (void)Admit(UniqueFd(fd), false);
      continue;
    }
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    if (err == ECONNABORTED || err == EPROTO) continue;
    if ((err == EMFILE || err == ENFILE) && spare_fd_) {
      // Out of fds: the spare one takes the connection off the queue; Admit
      // then closes an idle connection to keep it, or refuses it. Either
      // way an fd is free again for the spare.
      spare_fd_.Reset();
      fd = AcceptOne(listen_.get());
      err = errno;
      if (fd >= 0) (void)Admit(UniqueFd(fd), true);
      auto spare = sys::Open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (spare.ok()) spare_fd_ = std::move(*spare);
      if (fd >= 0 && spare_fd_) continue;
      if (fd < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return;
      if (!spare_fd_) err = EMFILE;
    }
    // Out of memory, or of fds with no spare left: the listener stays
    // readable, so stop watching it for a moment instead of spinning.
    accept_failed_log_.Write(MonotonicNanos(), {{"server", opts_.name}, {"error", std::strerror(err)}});
    ArmLogFlush();
    PauseAccept();
    return;
  }
}

void RpcServerCore::PauseAccept() {
  if (accept_timer_ != 0 || !listen_) return;
  (void)listen_.Modify(0);
  accept_timer_ = loop_->AddTimer(kAcceptPauseNanos, [this] {
    accept_timer_ = 0;
    if (listen_) (void)listen_.Modify(EPOLLIN);
  });
}

size_t& RpcServerCore::UidCount(uid_t uid) {
  for (auto& [u, n] : per_uid_) {
    if (u == uid) return n;
  }
  per_uid_.emplace_back(uid, 0);
  return per_uid_.back().second;
}

ServerConn* RpcServerCore::OldestIdle(const uid_t* uid) const {
  ServerConn* best = nullptr;
  for (auto& [id, conn] : conns_) {
    ServerConn* c = conn.get();
    if (c->link || !c->pending.empty() || !c->out.empty() || c->has_unprocessed) continue;
    if (uid != nullptr && c->peer.uid != *uid) continue;
    if (best == nullptr || c->last_activity < best->last_activity) best = c;
  }
  return best;
}

Error RpcServerCore::Refuse(const Error& why, const sys::PeerCred* peer) {
  ++refused_;
  refused_log_.Write(MonotonicNanos(), {{"server", opts_.name},
                                        {"reason", why.message()},
                                        {"uid", peer ? std::to_string(peer->uid) : "?"},
                                        {"pid", peer ? std::to_string(peer->pid) : "?"}});
  ArmLogFlush();
  return why;
}

bool RpcServerCore::MakeRoom(const uid_t* uid, const std::string& limit) {
  ServerConn* victim = OldestIdle(uid);
  if (victim == nullptr) return false;
  ++evicted_;
  CloseConn(victim, log::Level::kDebug, "idle, closed to make room: " + limit, &evicted_log_);
  return true;
}

Result<uint64_t> RpcServerCore::Admit(UniqueFd fd, bool need_fd) {
  Scope scope(this);
  if (shut_down_) return Error(Code::kUnavailable, "server is shut down");
  auto cred = sys::GetPeerCred(fd.get());
  if (!cred.ok()) return Refuse(cred.error(), nullptr);
  OUTPOST_RETURN_IF_ERROR(CheckAdmission(*cred, need_fd));
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
  return Insert(std::move(conn));
}

Result<uint64_t> RpcServerCore::AdmitLink(std::shared_ptr<ByteLink> link, const sys::PeerCred& peer) {
  Scope scope(this);
  if (shut_down_) return Error(Code::kUnavailable, "server is shut down");
  if (!link) return Error(Code::kInvalidArgument, "rpc server: no link");
  OUTPOST_RETURN_IF_ERROR(CheckAdmission(peer, false));
  auto conn = std::make_unique<ServerConn>();
  ServerConn* c = conn.get();
  c->id = next_conn_id_++;
  c->peer = peer;
  c->last_activity = MonotonicNanos();
  c->link = std::move(link);
  std::weak_ptr<RpcServerCore> weak = weak_from_this();
  const uint64_t id = c->id;
  c->link->SetReceiver(
      [weak, id](std::string_view bytes) {
        if (auto core = weak.lock()) core->OnLinkBytes(id, bytes);
      },
      [weak, id](const Error& why) {
        if (auto core = weak.lock()) core->OnLinkClosed(id, why);
      });
  return Insert(std::move(conn));
}

Status RpcServerCore::CheckAdmission(const sys::PeerCred& cred, bool need_fd) {
  const uid_t uid = cred.uid;
  if (!Allowed(uid)) {
    return Refuse(Error(Code::kPermissionDenied, Format("peer uid %u is not allowed", static_cast<unsigned>(uid))),
                  &cred);
  }
  // Limits: make room by closing the oldest idle connection that counts
  // against the limit, or refuse. An idle connection costs its owner only a
  // reconnect; a refused call costs a failed command.
  if (UidCount(uid) >= opts_.max_connections_per_uid) {
    std::string limit = Format("connection limit per uid (%zu) reached by uid %u", opts_.max_connections_per_uid,
                               static_cast<unsigned>(uid));
    if (!MakeRoom(&uid, limit)) return Refuse(Error(Code::kResourceExhausted, limit), &cred);
    need_fd = false;
  }
  if (conns_.size() >= opts_.max_connections) {
    std::string limit = Format("connection limit (%zu) reached", opts_.max_connections);
    if (!MakeRoom(nullptr, limit)) return Refuse(Error(Code::kResourceExhausted, limit), &cred);
    need_fd = false;
  }
  if (need_fd && !MakeRoom(nullptr, "out of file descriptors")) {
    return Refuse(Error(Code::kResourceExhausted, "out of file descriptors"), &cred);
  }
  return OkStatus();
}

uint64_t RpcServerCore::Insert(std::unique_ptr<ServerConn> conn) {
  ServerConn* c = conn.get();
  const uint64_t id = c->id;
  const uid_t uid = c->peer.uid;
  conns_.emplace(id, std::move(conn));
  ++UidCount(uid);
  ++accepted_;
  log::Debug(c->link ? "rpc link connection" : "rpc connection",
             {{"server", opts_.name}, {"conn", std::to_string(id)}, {"uid", std::to_string(c->peer.uid)},
              {"pid", std::to_string(c->peer.pid)}});
  ArmSweep(Expiry(c));
  return id;
}

void RpcServerCore::OverReadBudget(ServerConn* c) {
  CloseConn(c, log::Level::kWarn,
            Format("read buffers of all connections over %zu bytes: this one holds %zu of an incomplete frame",
                   opts_.read_buffers_max_bytes, c->counted_read_buffer),
            &slow_log_);
}

void RpcServerCore::CloseConn(ServerConn* c, log::Level level, const std::string& reason, log::RepeatedLine* burst) {
  if (c->closed) return;
  c->closed = true;
  log::Fields fields = {{"server", opts_.name},
                        {"conn", std::to_string(c->id)},
                        {"uid", std::to_string(c->peer.uid)},
                        {"reason", reason},
                        {"pending", std::to_string(c->pending.size())}};
  if (burst != nullptr) {
    burst->Write(MonotonicNanos(), fields);
    ArmLogFlush();
  } else {
    log::Write(level, "rpc connection closed", fields);
  }
  total_pending_ -= c->pending.size();
  c->pending.clear();
  read_buffers_ -= c->counted_read_buffer;
  c->counted_read_buffer = 0;
  c->fd.Reset();
  --UidCount(c->peer.uid);
  auto it = conns_.find(c->id);
  if (it != conns_.end()) {
    // Every entry point holds a Scope, so the memory lives until it ends.
    graveyard_.push_back(std::move(it->second));
    conns_.erase(it);
  }
  if (std::shared_ptr<ByteLink> link = std::move(c->link)) {
    // As closing a socket: the peer learns it; the notices run from the loop.
    link->SetReceiver(nullptr, nullptr);
    link->Close();
  }
}

void RpcServerCore::ArmLogFlush() {
  int64_t at = kNever;
  for (log::RepeatedLine* l : {&accept_failed_log_, &refused_log_, &evicted_log_, &idle_log_, &slow_log_}) {
    if (l->due() != 0) at = std::min(at, l->due());
  }
  if (at == kNever || shut_down_ || (log_timer_ != 0 && log_at_ <= at)) return;
  if (log_timer_ != 0) loop_->CancelTimer(log_timer_);
  log_at_ = at;
  log_timer_ = loop_->AddTimerAt(at, [this] {
    log_timer_ = 0;
    int64_t now = MonotonicNanos();
    for (log::RepeatedLine* l : {&accept_failed_log_, &refused_log_, &evicted_log_, &idle_log_, &slow_log_}) {
      l->Flush(now);
    }
    ArmLogFlush();
  });
}

int64_t RpcServerCore::Expiry(const ServerConn* c) const {
  int64_t at = kNever;
  if (c->link) return at;  // no idle or frame timeouts on links (rpc_server.h)
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
      expired.emplace_back(c, "incomplete frame timeout: a frame must complete within the frame timeout");
    } else {
      expired.emplace_back(c, c->out.empty() ? "idle timeout" : "write timeout: peer is not reading its replies");
    }
  }
  for (auto& [c, why] : expired) {
    CloseConn(c, log::Level::kInfo, why, std::strcmp(why, "idle timeout") == 0 ? &idle_log_ : &slow_log_);
  }
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
    s.read_buffers += c->counted_read_buffer;
    s.max_queued_bytes = std::max(s.max_queued_bytes, c->out.size());
  }
  s.accepted = accepted_;
  s.refused = refused_;
  s.evicted = evicted_;
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
Result<uint64_t> RpcServer::AddLink(std::shared_ptr<ByteLink> link, sys::PeerCred peer) {
  return core_->AdmitLink(std::move(link), peer);
}
void RpcServer::SetOptions(ServerOptions options) { core_->SetOptions(std::move(options)); }
const ServerOptions& RpcServer::options() const { return core_->options(); }
size_t RpcServer::connection_count() const { return core_->connection_count(); }
ServerStats RpcServer::stats() const { return core_->stats(); }

}  // namespace outpost::wire
