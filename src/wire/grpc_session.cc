// The gRPC calls of one HTTP/2 connection (see grpc_session.h).
#include "wire/grpc_session.h"

#include <algorithm>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"

namespace outpost::wire {

namespace {

const char kUserAgent[] = "grpc-outpost/" OUTPOST_VERSION;
constexpr std::string_view kGrpcContentType = "application/grpc";

std::string_view Field(const hpack::HeaderList& list, std::string_view name) {
  for (const hpack::HeaderField& f : list) {
    if (f.name == name) return f.value;
  }
  return {};
}

bool HasField(const hpack::HeaderList& list, std::string_view name) {
  for (const hpack::HeaderField& f : list) {
    if (f.name == name) return true;
  }
  return false;
}

// application/grpc, application/grpc+proto, application/grpc;...
bool IsGrpcContentType(std::string_view ct) {
  if (!StartsWith(ct, kGrpcContentType)) return false;
  return ct.size() == kGrpcContentType.size() || ct[kGrpcContentType.size()] == '+' ||
         ct[kGrpcContentType.size()] == ';';
}

Error CallOverError() { return Error(Code::kFailedPrecondition, "grpc: the call is over"); }

}  // namespace

void GrpcServices::Add(std::string service, std::string method, GrpcMethod m) {
  services_[std::move(service)][std::move(method)] = std::make_shared<const GrpcMethod>(std::move(m));
}

std::shared_ptr<const GrpcMethod> GrpcServices::Find(std::string_view service, std::string_view method,
                                                     bool* service_known) const {
  auto s = services_.find(service);
  *service_known = s != services_.end();
  if (!*service_known) return nullptr;
  auto m = s->second.find(method);
  return m == s->second.end() ? nullptr : m->second;
}

// ---- GrpcCall: the application's side of a call --------------------------------

Status GrpcCall::Write(std::string_view message) {
  return session_ == nullptr ? CallOverError() : session_->Write(this, message);
}

void GrpcCall::CloseSend() {
  if (session_ != nullptr) session_->CloseSend(this);
}

void GrpcCall::Finish(const Status& status) {
  if (session_ != nullptr) session_->Finish(this, status);
}

void GrpcCall::Cancel() {
  if (session_ != nullptr) session_->Cancel(this);
}

size_t GrpcCall::queued_bytes() const { return session_ == nullptr ? 0 : session_->Queued(this); }

// ---- the session ------------------------------------------------------------------

GrpcSession::GrpcSession(Loop* loop, const GrpcLimits& limits, const GrpcServices* services, std::string authority)
    : loop_(loop), limits_(limits), services_(services), authority_(std::move(authority)) {}

Result<std::unique_ptr<GrpcSession>> GrpcSession::Create(Loop* loop, UniqueFd fd, const GrpcLimits& limits,
                                                         const GrpcServices* services, std::string authority) {
  std::unique_ptr<GrpcSession> s(new GrpcSession(loop, limits, services, std::move(authority)));
  h2::ConnOptions o;
  o.client = services == nullptr;
  o.name = limits.name;
  o.max_concurrent_streams = limits.max_concurrent_streams;
  o.max_header_list_bytes = limits.max_header_list_bytes;
  o.stream_queue_bytes = limits.stream_queue_bytes;
  o.write_queue_bytes = limits.write_queue_bytes;
  o.idle_timeout_nanos = limits.idle_timeout_nanos;
  o.frame_timeout_nanos = limits.frame_timeout_nanos;
  auto conn = h2::Conn::Create(loop, std::move(fd), std::move(o), s.get());
  if (!conn.ok()) return conn.error();
  s->conn_ = std::move(*conn);
  return s;
}

GrpcSession::~GrpcSession() {
  *alive_ = false;
  auto detach = [this](const std::shared_ptr<GrpcCall>& c) {
    if (c->deadline_timer_ != 0) loop_->CancelTimer(c->deadline_timer_);
    c->session_ = nullptr;
    c->done_ = true;
  };
  for (auto& [id, c] : calls_) detach(c);
  for (auto& c : waiting_) detach(c);
}

GrpcCall* GrpcSession::Find(uint32_t stream) const {
  auto it = calls_.find(stream);
  return it == calls_.end() ? nullptr : it->second.get();
}

void GrpcSession::ArmDeadline(const std::shared_ptr<GrpcCall>& call) {
  if (call->deadline_ == 0) return;
  std::weak_ptr<GrpcCall> weak = call;
  std::weak_ptr<bool> alive = alive_;
  call->deadline_timer_ = loop_->AddTimerAt(call->deadline_, [this, weak, alive] {
    auto a = alive.lock();
    auto c = weak.lock();
    if (!a || !*a || !c || c->done_) return;
    c->deadline_timer_ = 0;
    OnDeadline(c);
  });
}

void GrpcSession::OnDeadline(const std::shared_ptr<GrpcCall>& call) {
  if (call->stream_id_ != 0) conn_->ResetStream(call->stream_id_, h2::kCancel);
  EndCall(call, Error(Code::kDeadlineExceeded, "context deadline exceeded"), true);
}

void GrpcSession::EndCall(const std::shared_ptr<GrpcCall>& ending, const Status& status, bool notify) {
  std::shared_ptr<GrpcCall> call = ending;  // ending may be the map's own reference
  if (call->done_) return;
  call->done_ = true;
  call->session_ = nullptr;
  if (call->deadline_timer_ != 0) loop_->CancelTimer(call->deadline_timer_);
  call->deadline_timer_ = 0;
  if (call->stream_id_ != 0) {
    calls_.erase(call->stream_id_);
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), call);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  if (client()) OpenWaiting();
  // The application's callbacks may hold the call (a cycle): they are let
  // go after the current loop callback, which may be one of them. When
  // this side ended the call (Finish, Cancel), OnDone runs then too.
  if (call->on_message_ || call->on_half_close_ || call->on_writable_ || (!notify && call->on_done_)) {
    loop_->Defer([m = std::move(call->on_message_), h = std::move(call->on_half_close_),
                  w = std::move(call->on_writable_), call, status, notify] {
      if (!notify) Notify(call.get(), status);
    });
    call->on_message_ = nullptr;
    call->on_half_close_ = nullptr;
    call->on_writable_ = nullptr;
    if (!notify) return;
  }
  if (notify) Notify(call.get(), status);
}

void GrpcSession::Notify(GrpcCall* call, const Status& status) {
  if (call->unary_done_) {
    auto done = std::move(call->unary_done_);
    call->unary_done_ = nullptr;
    if (!status.ok()) return done(status.error());
    if (call->unary_count_ == 1) return done(std::move(call->unary_message_));
    return done(Error(Code::kInternal, call->unary_count_ == 0
                                           ? "cardinality violation: received no response message from "
                                             "non-server-streaming RPC"
                                           : "cardinality violation: received multiple response messages for "
                                             "non-server-streaming RPC"));
  }
  if (call->on_done_) {
    auto fn = std::move(call->on_done_);
    call->on_done_ = nullptr;
    fn(status);
  }
}

// ---- client -------------------------------------------------------------------------

std::shared_ptr<GrpcCall> GrpcSession::StartCall(std::string_view service, std::string_view method,
                                                 int64_t timeout_nanos, const hpack::HeaderList* metadata) {
  auto call = std::make_shared<GrpcCall>(this, true);
  call->reader_.set_max(limits_.max_message_bytes);
  if (timeout_nanos > 0) call->deadline_ = MonotonicNanos() + timeout_nanos;
  std::string path;
  path.reserve(service.size() + method.size() + 2);
  path.append("/").append(service).append("/").append(method);
  call->headers_ = {{":method", "POST"},
                    {":scheme", "http"},
                    {std::string(":path"), std::move(path)},
                    {":authority", authority_},
                    {"content-type", std::string(kGrpcContentType)},
                    {"user-agent", kUserAgent},
                    {"te", "trailers"}};
  if (metadata != nullptr) call->headers_.insert(call->headers_.end(), metadata->begin(), metadata->end());
  if (!accepting_calls()) {
    // Told from the loop, as every outcome is.
    std::weak_ptr<bool> alive = alive_;
    bool goaway = !closed();
    call->session_ = nullptr;
    call->done_ = true;
    loop_->Defer([call, goaway] {
      Error e(Code::kUnavailable, goaway ? "grpc: the server sent GOAWAY: no new calls on this connection"
                                         : "grpc: the connection is closed");
      if (call->unary_done_) {
        auto done = std::move(call->unary_done_);
        done(e);
      } else if (call->on_done_) {
        auto fn = std::move(call->on_done_);
        fn(e);
      }
    });
    return call;
  }
  ArmDeadline(call);
  if (!Open(call)) waiting_.push_back(call);
  return call;
}

bool GrpcSession::Open(const std::shared_ptr<GrpcCall>& call) {
  if (!conn_->can_open()) return false;
  if (call->deadline_ != 0) {
    int64_t left = call->deadline_ - MonotonicNanos();
    if (left <= 0) return true;  // its timer ends it
    call->headers_.push_back({"grpc-timeout", grpc::EncodeTimeout(left)});
  }
  uint32_t stream = conn_->OpenStream(call->headers_, false);
  if (stream == 0) return false;
  call->headers_.clear();
  call->stream_id_ = stream;
  calls_[stream] = call;
  if (!call->waiting_.empty() || call->send_closed_) {
    conn_->SendData(stream, call->waiting_, {}, call->send_closed_);
    std::string().swap(call->waiting_);
  }
  return true;
}

void GrpcSession::OpenWaiting() {
  while (!waiting_.empty() && !closed() && conn_->can_open()) {
    std::shared_ptr<GrpcCall> c = waiting_.front();
    waiting_.erase(waiting_.begin());
    if (!c->done_) Open(c);
  }
}

void GrpcSession::Unary(std::string_view service, std::string_view method, std::string_view request,
                        int64_t timeout_nanos, UnaryDone done) {
  std::shared_ptr<GrpcCall> call = StartCall(service, method, timeout_nanos, nullptr);
  call->unary_done_ = std::move(done);
  if (call->done_) return;
  if (call->stream_id_ == 0) {
    (void)Write(call.get(), request);
    CloseSend(call.get());
    return;
  }
  call->send_closed_ = true;
  SendMessage(call.get(), request, true);
}

Status GrpcSession::Write(GrpcCall* call, std::string_view message) {
  if (call->done_ || call->send_closed_) return CallOverError();
  if (call->stream_id_ == 0) {
    if (call->waiting_.size() > limits_.stream_queue_bytes) {
      return Error(Code::kResourceExhausted, "grpc: over " + std::to_string(limits_.stream_queue_bytes) +
                                                 " bytes written before the server took the call");
    }
    char prefix[grpc::kMessagePrefixBytes];
    grpc::MessagePrefix(message.size(), prefix);
    call->waiting_.append(prefix, sizeof prefix).append(message.data(), message.size());
    return OkStatus();
  }
  if (!conn_->StreamWritable(call->stream_id_)) {
    return Error(Code::kResourceExhausted, "grpc: over " + std::to_string(limits_.stream_queue_bytes) +
                                               " bytes queued for a peer that is not reading them");
  }
  SendMessage(call, message, false);
  return OkStatus();
}

void GrpcSession::SendMessage(GrpcCall* call, std::string_view message, bool end) {
  if (!call->client_ && !call->headers_sent_) {
    call->headers_sent_ = true;
    conn_->SendHeaders(call->stream_id_, {{":status", "200"}, {"content-type", std::string(kGrpcContentType)}},
                       false);
  }
  char prefix[grpc::kMessagePrefixBytes];
  grpc::MessagePrefix(message.size(), prefix);
  conn_->SendData(call->stream_id_, std::string_view(prefix, sizeof prefix), message, end);
}

void GrpcSession::CloseSend(GrpcCall* call) {
  if (call->done_ || call->send_closed_ || !call->client_) return;
  call->send_closed_ = true;
  if (call->stream_id_ != 0) conn_->SendData(call->stream_id_, {}, {}, true);
}

void GrpcSession::Cancel(GrpcCall* call) {
  if (call->done_) return;
  if (call->stream_id_ != 0) conn_->ResetStream(call->stream_id_, h2::kCancel);
  auto it = call->stream_id_ != 0 ? calls_.find(call->stream_id_) : calls_.end();
  std::shared_ptr<GrpcCall> self = it != calls_.end() ? it->second : nullptr;
  if (self == nullptr) {
    for (auto& w : waiting_) {
      if (w.get() == call) self = w;
    }
  }
  if (self != nullptr) EndCall(self, Error(Code::kCanceled, "call cancelled"), false);
}

size_t GrpcSession::Queued(const GrpcCall* call) const {
  return call->stream_id_ == 0 ? call->waiting_.size() : conn_->StreamQueued(call->stream_id_);
}

void GrpcSession::ClientHeaders(const std::shared_ptr<GrpcCall>& call, hpack::HeaderList* headers, bool initial,
                                bool end) {
  const bool has_status = HasField(*headers, "grpc-status");
  if (initial) {
    std::string_view http = Field(*headers, ":status");
    if (http != "200" && !has_status) {
      if (!end) conn_->ResetStream(call->stream_id_, h2::kCancel);
      return ClientEnd(call, grpc::HttpStatusError(http));
    }
    std::string_view ct = Field(*headers, "content-type");
    if (!IsGrpcContentType(ct) && !has_status) {
      if (!end) conn_->ResetStream(call->stream_id_, h2::kCancel);
      return ClientEnd(call, Error(Code::kUnknown, "grpc: unexpected content-type \"" + std::string(ct) + "\""));
    }
    call->got_headers_ = true;
    call->encoding_ = std::string(Field(*headers, "grpc-encoding"));
    if (!end) {
      call->headers_ = std::move(*headers);
      return;
    }
  }
  // Trailers (or a trailers-only answer).
  Status status;
  int32_t code = 0;
  if (!has_status) {
    status = Error(Code::kUnknown, "grpc: the server's trailers have no grpc-status");
  } else if (!grpc::ParseStatus(Field(*headers, "grpc-status"), &code)) {
    status = Error(Code::kUnknown, "transport: malformed grpc-status: " + std::string(Field(*headers, "grpc-status")));
  } else if (code != 0) {
    status = Error(static_cast<Code>(code), grpc::PercentDecode(Field(*headers, "grpc-message")));
  } else if (call->reader_.partial() != 0) {
    status = Error(Code::kInternal, "grpc: the stream ended inside a message");
  }
  for (hpack::HeaderField& f : *headers) call->headers_.push_back(std::move(f));
  ClientEnd(call, status);
}

void GrpcSession::ClientMessage(const std::shared_ptr<GrpcCall>& call, std::string_view message) {
  if (call->unary_done_) {
    if (++call->unary_count_ == 1) call->unary_message_.assign(message.data(), message.size());
    return;
  }
  if (call->on_message_) call->on_message_(message);
}

void GrpcSession::ClientEnd(const std::shared_ptr<GrpcCall>& call, Status status) {
  EndCall(call, status, true);
}

// ---- h2::Handler ----------------------------------------------------------------------

void GrpcSession::OnHeaders(uint32_t stream, hpack::HeaderList* headers, bool initial, bool end_stream) {
  if (!client()) {
    if (initial) return NewServerCall(stream, headers, end_stream);
    auto it = calls_.find(stream);
    if (it != calls_.end() && end_stream) ServerHalfClose(it->second);
    return;
  }
  auto it = calls_.find(stream);
  if (it == calls_.end()) return;
  std::shared_ptr<GrpcCall> call = it->second;
  ClientHeaders(call, headers, initial, end_stream);
}

void GrpcSession::OnData(uint32_t stream, std::string_view data, bool end_stream) {
  auto it = calls_.find(stream);
  if (it == calls_.end()) return;
  std::shared_ptr<GrpcCall> call = it->second;
  if (client() && !call->got_headers_) {
    conn_->ResetStream(stream, h2::kProtocolError);
    return ClientEnd(call, Error(Code::kInternal, "grpc: DATA before the response headers"));
  }
  auto alive = alive_;
  const bool is_client = client();
  Status st = call->reader_.Feed(data, call->encoding_, [&](std::string_view m) {
    if (is_client) {
      ClientMessage(call, m);
    } else {
      ServerMessage(call, m);
    }
    return *alive && !call->done_;
  });
  if (!*alive || call->done_) return;
  if (!st.ok()) {
    if (!is_client) return Finish(call.get(), st.error());
    conn_->ResetStream(stream, h2::kCancel);
    return ClientEnd(call, st.error());
  }
  if (!end_stream) return;
  if (is_client) {
    return ClientEnd(call, Error(Code::kInternal, "server closed the stream without sending trailers"));
  }
  if (call->reader_.partial() != 0) {
    return Finish(call.get(), Error(Code::kInternal, "grpc: the request ended inside a message"));
  }
  ServerHalfClose(call);
}

void GrpcSession::OnStreamReset(uint32_t stream, uint32_t code, bool local) {
  auto it = calls_.find(stream);
  if (it == calls_.end()) return;
  std::shared_ptr<GrpcCall> call = it->second;
  if (!client()) {
    return EndCall(call, Error(Code::kCanceled, local ? std::string("grpc: stream reset: ") + h2::ErrorCodeName(code)
                                                      : std::string("call cancelled by the client")),
                   true);
  }
  Error e = grpc::ResetError(code);
  if (code == h2::kCancel && call->deadline_ != 0 && MonotonicNanos() >= call->deadline_) {
    e = Error(Code::kDeadlineExceeded, "context deadline exceeded");
  } else if (code == h2::kRefusedStream && local) {
    e = Error(Code::kUnavailable, "grpc: the server sent GOAWAY before it took the call");
  }
  EndCall(call, e, true);
}

void GrpcSession::OnStreamWritable(uint32_t stream) {
  GrpcCall* call = Find(stream);
  if (call != nullptr && call->on_writable_) call->on_writable_();
}

void GrpcSession::OnGoaway(uint32_t last_stream, uint32_t code, std::string_view debug) {
  log::Write(code == h2::kNoError ? log::Level::kDebug : log::Level::kInfo, "grpc peer sent GOAWAY",
             {{"conn", limits_.name},
              {"last_stream", std::to_string(last_stream)},
              {"code", h2::ErrorCodeName(code)},
              {"debug", std::string(debug.substr(0, 128))}});
  if (client()) {
    // Calls waiting for a stream will not get one on this connection.
    std::vector<std::shared_ptr<GrpcCall>> waiting = std::move(waiting_);
    waiting_.clear();
    auto alive = alive_;
    for (auto& c : waiting) {
      EndCall(c, Error(Code::kUnavailable, "grpc: the server sent GOAWAY: no new calls on this connection"), true);
      if (!*alive) return;
    }
  }
}

void GrpcSession::OnClosed(const Error& why) {
  auto alive = alive_;
  std::vector<std::shared_ptr<GrpcCall>> open;
  open.reserve(calls_.size() + waiting_.size());
  for (auto& [id, c] : calls_) open.push_back(c);
  for (auto& c : waiting_) open.push_back(c);
  const Error e = client() ? Error(Code::kUnavailable, why.message())
                           : Error(Code::kCanceled, "grpc: connection closed: " + why.message());
  for (auto& c : open) {
    EndCall(c, e, true);
    if (!*alive) return;
  }
  if (on_closed_) {
    auto fn = std::move(on_closed_);
    on_closed_ = nullptr;
    fn(why);
  }
}

void GrpcSession::Drain() {
  if (!closed()) conn_->Goaway(h2::kNoError, "drain");
}

void GrpcSession::Close(const Error& why) {
  if (closed()) return;
  conn_->Goaway(h2::kNoError, "client closing");
  conn_->Close(why);
}

}  // namespace outpost::wire
