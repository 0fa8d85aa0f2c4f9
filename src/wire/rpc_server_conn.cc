// Per-connection half of the ttRPC server (see rpc_server_core.h): reading
// and framing, dispatch of requests to handlers, replies and their write
// queue with backpressure, and per-call deadlines.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "wire/rpc_server_core.h"

namespace outpost::wire {

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

void RpcServerCore::OnLinkBytes(uint64_t id, std::string_view bytes) {
  Scope scope(this);
  ServerConn* c = Find(id);
  if (c == nullptr) return;
  // A link cannot be paused: while calls wait (in-flight cap) its bytes
  // pile up in the reader, bounded by the read-buffer budget.
  c->reader.Feed(bytes.data(), bytes.size());
  AccountReadBuffer(c);
  if (c->closed) return;
  c->last_activity = MonotonicNanos();
  ProcessFrames(c);
  if (c->closed || shut_down_) return;
  AfterIo(c);
}

void RpcServerCore::OnLinkClosed(uint64_t id, const Error& why) {
  Scope scope(this);
  ServerConn* c = Find(id);
  if (c != nullptr) CloseConn(c, log::Level::kDebug, "link closed: " + why.message());
}

void RpcServerCore::AccountReadBuffer(ServerConn* c) {
  if (c->reader.capacity() != c->counted_read_buffer) {
    read_buffers_ += c->reader.capacity() - c->counted_read_buffer;
    c->counted_read_buffer = c->reader.capacity();
    if (c->counted_read_buffer > (64u << 10) && read_buffers_ > opts_.read_buffers_max_bytes) OverReadBudget(c);
  }
}

void RpcServerCore::ReadOnce(ServerConn* c) {
  size_t avail;
  char* p = c->reader.Prepare(&avail);
  AccountReadBuffer(c);
  if (c->closed) return;
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
                Format("write queue over %zu bytes: peer is not reading its replies", opts_.write_queue_max_bytes),
                &slow_log_);
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
  const Error expired = DeadlineExceededError();
  Reply(e.conn, e.stream, ErrorResponse(expired));
}

bool RpcServerCore::Flush(ServerConn* c) {
  if (c->out.empty()) return true;
  if (c->link) {
    // Whole frames, any number of them: the link cuts them up as it must.
    bool sent = c->link->Send(*c->out.buffer());
    c->out.Clear();
    if (!sent) CloseConn(c, log::Level::kDebug, "link closed");
    return sent;
  }
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
  if (events != c->events && !c->link) {
    Status st = c->fd.Modify(events);
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

}  // namespace outpost::wire
