// The gRPC server (see grpc_server.h): the listener and its admission, and
// the server's half of a session (wire/grpc_session): taking a call from
// its request headers to its handler, and its status.
#include "wire/grpc_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "wire/grpc_session.h"

namespace outpost::wire {

namespace {

constexpr std::string_view kGrpcContentType = "application/grpc";
constexpr int kAcceptBatch = 32;

std::string_view Field(const hpack::HeaderList& list, std::string_view name) {
  for (const hpack::HeaderField& f : list) {
    if (f.name == name) return f.value;
  }
  return {};
}

GrpcCallContext ContextOf(const GrpcSession& s, const GrpcCall& call, std::string_view service,
                          std::string_view method, const hpack::HeaderList* headers) {
  GrpcCallContext ctx;
  ctx.connection_id = s.id();
  ctx.stream_id = call.stream_id();
  ctx.peer = s.peer();
  ctx.deadline = call.deadline();
  ctx.service = service;
  ctx.method = method;
  ctx.headers = headers;
  return ctx;
}

}  // namespace

// ---- the server's half of a session ----------------------------------------------------

void GrpcSession::TrailersOnly(uint32_t stream, const Error& error, const char* http_status) {
  Code code = error.code() == Code::kOk ? Code::kUnknown : error.code();
  conn_->SendHeaders(stream,
                     {{":status", http_status},
                      {"content-type", std::string(kGrpcContentType)},
                      {"grpc-status", std::to_string(static_cast<int>(code))},
                      {"grpc-message", grpc::PercentEncode(error.message())}},
                     true);
}

void GrpcSession::NewServerCall(uint32_t stream, hpack::HeaderList* headers, bool end_stream) {
  std::string_view method = Field(*headers, ":method");
  if (method != "POST") {
    return TrailersOnly(stream,
                        Error(Code::kInternal, "Received a HEADERS frame with :method \"" + std::string(method) +
                                                   "\" which should be POST"),
                        "405");
  }
  std::string_view ct = Field(*headers, "content-type");
  if (!StartsWith(ct, kGrpcContentType) ||
      (ct.size() > kGrpcContentType.size() && ct[kGrpcContentType.size()] != '+' &&
       ct[kGrpcContentType.size()] != ';')) {
    return TrailersOnly(
        stream, Error(Code::kInvalidArgument, "invalid gRPC request content-type \"" + std::string(ct) + "\""), "415");
  }
  std::string_view path = Field(*headers, ":path");
  size_t slash = path.size() > 1 ? path.find('/', 1) : std::string_view::npos;
  if (path.empty() || path[0] != '/' || slash == std::string_view::npos || slash + 1 == path.size()) {
    return TrailersOnly(stream, Error(Code::kUnimplemented, "malformed method name: \"" + std::string(path) + "\""),
                        "200");
  }
  std::string_view service = path.substr(1, slash - 1);
  std::string_view name = path.substr(slash + 1);
  int64_t deadline = 0;
  std::string_view timeout = Field(*headers, "grpc-timeout");
  if (!timeout.empty()) {
    int64_t nanos = 0;
    if (!grpc::ParseTimeout(timeout, &nanos)) {
      return TrailersOnly(stream, Error(Code::kInternal, "malformed grpc-timeout: " + std::string(timeout)), "400");
    }
    if (nanos == 0) {
      return TrailersOnly(stream, Error(Code::kDeadlineExceeded, "context deadline exceeded"), "200");
    }
    deadline = MonotonicNanos() + nanos;
  }
  bool service_known = false;
  std::shared_ptr<const GrpcMethod> m = services_->Find(service, name, &service_known);
  if (m == nullptr) {
    return TrailersOnly(stream,
                        Error(Code::kUnimplemented,
                              service_known ? "unknown method " + std::string(name) + " for service " +
                                                  std::string(service)
                                            : "unknown service " + std::string(service)),
                        "200");
  }
  auto call = std::make_shared<GrpcCall>(this, false);
  call->stream_id_ = stream;
  call->deadline_ = deadline;
  call->reader_.set_max(limits_.max_message_bytes);
  call->encoding_ = std::string(Field(*headers, "grpc-encoding"));
  call->service_ = std::string(service);
  call->method_name_ = std::string(name);
  call->method_ = m;
  call->headers_ = std::move(*headers);
  calls_[stream] = call;
  ++calls_started_;
  ArmDeadline(call);
  if (m->stream) {
    auto alive = alive_;
    m->stream(ContextOf(*this, *call, call->service_, call->method_name_, &call->headers_), call);
    if (!*alive) return;
  }
  if (end_stream && !call->done_) ServerHalfClose(call);
}

void GrpcSession::ServerMessage(const std::shared_ptr<GrpcCall>& call, std::string_view message) {
  if (call->method_->stream) {
    if (call->on_message_) call->on_message_(message);
    return;
  }
  if (++call->unary_count_ == 1) {
    call->unary_message_.assign(message.data(), message.size());
    return;
  }
  Finish(call.get(), Error(Code::kInternal,
                           "cardinality violation: received multiple request messages for non-client-streaming RPC"));
}

void GrpcSession::ServerHalfClose(const std::shared_ptr<GrpcCall>& call) {
  if (call->done_) return;
  if (call->method_->stream) {
    if (call->on_half_close_) call->on_half_close_();
    return;
  }
  if (call->unary_count_ == 0) {
    return Finish(call.get(), Error(Code::kInternal,
                                    "cardinality violation: received no request message from non-client-streaming "
                                    "RPC"));
  }
  std::shared_ptr<const GrpcMethod> m = call->method_;  // a handler may replace it
  std::string request = std::move(call->unary_message_);
  m->unary(ContextOf(*this, *call, call->service_, call->method_name_, &call->headers_), request,
           GrpcResponder(call));
}

void GrpcSession::Finish(GrpcCall* call, const Status& status) {
  if (call->done_ || call->client_) return;
  hpack::HeaderList trailers;
  if (!call->headers_sent_) {
    trailers.push_back({":status", "200"});
    trailers.push_back({"content-type", std::string(kGrpcContentType)});
  }
  Code code = status.ok() ? Code::kOk : status.error().code();
  if (!status.ok() && code == Code::kOk) code = Code::kUnknown;
  trailers.push_back({"grpc-status", std::to_string(static_cast<int>(code))});
  if (!status.ok()) trailers.push_back({"grpc-message", grpc::PercentEncode(status.error().message())});
  conn_->SendHeaders(call->stream_id_, trailers, true);
  auto it = calls_.find(call->stream_id_);
  if (it != calls_.end()) EndCall(it->second, status, false);
}

// ---- GrpcResponder ----------------------------------------------------------------------

void GrpcResponder::Reply(std::string_view message) const {
  if (!pending()) return;
  (void)call_->Write(message);
  call_->Finish(OkStatus());
}

void GrpcResponder::Fail(const Error& error) const {
  if (!pending()) return;
  call_->Finish(error.code() == Code::kOk ? Error(Code::kUnknown, error.message()) : error);
}

void GrpcResponder::Finish(const Result<std::string>& result) const {
  if (result.ok()) {
    Reply(*result);
  } else {
    Fail(result.error());
  }
}

// ---- the listener ------------------------------------------------------------------------

class GrpcServerCore {
 public:
  GrpcServerCore(Loop* loop, GrpcServerOptions options) : loop_(loop), opts_(std::move(options)) {}
  ~GrpcServerCore() {
    *alive_ = false;
    listen_.Reset();
  }

  Status Start(UniqueFd listen_fd) {
    if (!listen_fd) return OkStatus();
    OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(listen_fd.get(), true));
    auto watched = LoopFd::Watch(loop_, std::move(listen_fd), EPOLLIN, [this](uint32_t) { OnAcceptable(); });
    if (!watched.ok()) return watched.error();
    listen_ = std::move(*watched);
    return OkStatus();
  }

  void OnAcceptable() {
    for (int i = 0; i < kAcceptBatch && listen_; ++i) {
      auto fd = sys::Accept(listen_.get());
      if (fd.ok()) {
        (void)Admit(std::move(*fd));
        continue;
      }
      int err = fd.error().sys_errno();
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == ECONNABORTED || err == EPROTO) continue;
      // Out of fds or memory: stop watching for a moment instead of spinning.
      log::Warn("grpc accept failed; pausing accept for 100ms",
                {{"server", opts_.name}, {"error", fd.error().message()}});
      (void)listen_.Modify(0);
      std::weak_ptr<bool> alive = alive_;
      loop_->AddTimer(100 * kNanosPerMilli, [this, alive] {
        auto a = alive.lock();
        if (a && *a && listen_) (void)listen_.Modify(EPOLLIN);
      });
      return;
    }
  }

  Result<uint64_t> Admit(UniqueFd fd) {
    auto cred = sys::GetPeerCred(fd.get());
    if (!cred.ok()) return Refuse(cred.error(), nullptr);
    if (!opts_.allow_any_uid &&
        std::find(opts_.allowed_uids.begin(), opts_.allowed_uids.end(), cred->uid) == opts_.allowed_uids.end()) {
      return Refuse(Error(Code::kPermissionDenied, "peer uid " + std::to_string(cred->uid) + " is not allowed"),
                    &*cred);
    }
    if (sessions_.size() >= opts_.max_connections) {
      return Refuse(Error(Code::kResourceExhausted,
                          "over " + std::to_string(opts_.max_connections) + " connections"),
                    &*cred);
    }
    auto session = GrpcSession::Create(loop_, std::move(fd), opts_, &services_, {});
    if (!session.ok()) return Refuse(session.error(), &*cred);
    uint64_t id = next_id_++;
    GrpcSession* s = session->get();
    s->set_id(id);
    s->set_peer(*cred);
    std::weak_ptr<bool> alive = alive_;
    s->SetClosedCallback([this, id, alive](const Error&) {
      auto a = alive.lock();
      if (a && *a) Remove(id);
    });
    sessions_[id] = std::move(*session);
    ++accepted_;
    if (draining_) s->Drain();
    return id;
  }

  Error Refuse(const Error& why, const sys::PeerCred* peer) {
    ++refused_;
    log::Warn("grpc connection refused", {{"server", opts_.name},
                                          {"reason", why.message()},
                                          {"uid", peer ? std::to_string(peer->uid) : "?"},
                                          {"pid", peer ? std::to_string(peer->pid) : "?"}});
    return why;
  }

  // A session is closed from inside its own callbacks: it is destroyed
  // once they have returned.
  void Remove(uint64_t id) {
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    calls_ended_ += it->second->calls_started();
    std::shared_ptr<GrpcSession> dead(std::move(it->second));
    sessions_.erase(it);
    loop_->Defer([dead] {});
  }

  void Drain() {
    draining_ = true;
    listen_.Reset();
    std::vector<GrpcSession*> all;
    for (auto& [id, s] : sessions_) all.push_back(s.get());
    for (GrpcSession* s : all) s->Drain();
  }

  GrpcServerStats stats() const {
    GrpcServerStats st;
    st.connections = sessions_.size();
    st.calls = calls_ended_;
    for (const auto& [id, s] : sessions_) {
      st.open_calls += s->open_calls();
      st.calls += s->calls_started();
    }
    st.accepted = accepted_;
    st.refused = refused_;
    return st;
  }

  GrpcServices services_;

  void FeedForTest(uint64_t id, std::string_view bytes) {
    auto it = sessions_.find(id);
    if (it != sessions_.end()) it->second->FeedForTest(bytes);
  }

 private:
  Loop* loop_;
  GrpcServerOptions opts_;
  LoopFd listen_;
  std::unordered_map<uint64_t, std::unique_ptr<GrpcSession>> sessions_;
  uint64_t next_id_ = 1;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  uint64_t calls_ended_ = 0;
  bool draining_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::Create(Loop* loop, UniqueFd listen_fd, GrpcServerOptions options) {
  auto core = std::make_shared<GrpcServerCore>(loop, std::move(options));
  OUTPOST_RETURN_IF_ERROR(core->Start(std::move(listen_fd)));
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(core)));
}

GrpcServer::~GrpcServer() = default;

void GrpcServer::Register(std::string service, std::string method, GrpcUnaryHandler handler) {
  GrpcMethod m;
  m.unary = std::move(handler);
  core_->services_.Add(std::move(service), std::move(method), std::move(m));
}

void GrpcServer::RegisterStream(std::string service, std::string method, GrpcStreamHandler handler) {
  GrpcMethod m;
  m.stream = std::move(handler);
  core_->services_.Add(std::move(service), std::move(method), std::move(m));
}

Result<uint64_t> GrpcServer::AddConnection(UniqueFd fd) { return core_->Admit(std::move(fd)); }

void GrpcServer::Drain() { core_->Drain(); }

GrpcServerStats GrpcServer::stats() const { return core_->stats(); }

void GrpcServer::FeedForTest(uint64_t connection_id, std::string_view bytes) {
  core_->FeedForTest(connection_id, bytes);
}

}  // namespace outpost::wire
