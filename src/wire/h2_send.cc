// HTTP/2 connection: the sending half (see h2_conn.h) — SETTINGS and
// control frames, header blocks, staged DATA and the pump that frames it
// as the windows allow, flushing to the socket, GOAWAY and closing, and
// the connection's timer.
#include <sys/epoll.h>

#include <algorithm>
#include <climits>

#include "base/clock.h"
#include "wire/h2_conn.h"

namespace outpost::wire::h2 {

namespace {

void PutBe32(std::string* out, uint32_t v) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
               static_cast<char>(v)};
  out->append(b, 4);
}

void PutSetting(std::string* out, uint16_t id, uint32_t v) {
  char b[2] = {static_cast<char>(id >> 8), static_cast<char>(id)};
  out->append(b, 2);
  PutBe32(out, v);
}

// A write queue this large after draining is given back to the allocator.
constexpr size_t kStagedKeep = 64 << 10;

}  // namespace

void AppendFrameHeader(std::string* out, uint32_t length, uint8_t type, uint8_t flags, uint32_t stream) {
  char b[kFrameHeaderBytes] = {static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                               static_cast<char>(length),       static_cast<char>(type),
                               static_cast<char>(flags),        static_cast<char>((stream >> 24) & 0x7f),
                               static_cast<char>(stream >> 16), static_cast<char>(stream >> 8),
                               static_cast<char>(stream)};
  out->append(b, sizeof b);
}

void Conn::SendPrefaceAndSettings() {
  std::string* o = out_.buffer();
  if (opts_.client) o->append(kClientPreface, sizeof kClientPreface);
  std::string s;
  if (opts_.client) {
    PutSetting(&s, kSettingEnablePush, 0);
  } else {
    PutSetting(&s, kSettingMaxConcurrentStreams, opts_.max_concurrent_streams);
  }
  if (opts_.stream_window != kDefaultWindow) PutSetting(&s, kSettingInitialWindowSize, opts_.stream_window);
  PutSetting(&s, kSettingMaxHeaderListSize, opts_.max_header_list_bytes);
  AppendFrameHeader(o, static_cast<uint32_t>(s.size()), kSettings, 0, 0);
  o->append(s);
  if (opts_.connection_window > kDefaultWindow) {
    AppendWindowUpdate(0, opts_.connection_window - kDefaultWindow);
    recv_window_ = opts_.connection_window;
  }
}

void Conn::AppendWindowUpdate(uint32_t stream, uint32_t increment) {
  AppendFrameHeader(out_.buffer(), 4, kWindowUpdate, 0, stream);
  PutBe32(out_.buffer(), increment);
  RequestFlush();
}

void Conn::AppendRst(uint32_t stream, uint32_t code) {
  AppendFrameHeader(out_.buffer(), 4, kRstStream, 0, stream);
  PutBe32(out_.buffer(), code);
  RequestFlush();
}

void Conn::AppendGoaway(uint32_t code, std::string_view debug) {
  debug = debug.substr(0, 256);
  AppendFrameHeader(out_.buffer(), static_cast<uint32_t>(8 + debug.size()), kGoaway, 0, 0);
  PutBe32(out_.buffer(), last_peer_stream_);
  PutBe32(out_.buffer(), code);
  out_.buffer()->append(debug.data(), debug.size());
  RequestFlush();
}

void Conn::EncodeHeaders(uint32_t stream, const hpack::HeaderList& headers, bool end_stream) {
  scratch_.clear();
  encoder_.Encode(headers, &scratch_);
  std::string* o = out_.buffer();
  size_t off = 0;
  bool first = true;
  do {
    size_t n = std::min(scratch_.size() - off, size_t{kMaxFrameSize});
    bool last = off + n == scratch_.size();
    uint8_t flags = (last ? kFlagEndHeaders : 0) | (first && end_stream ? kFlagEndStream : 0);
    AppendFrameHeader(o, static_cast<uint32_t>(n), first ? kHeaders : kContinuation, flags, stream);
    o->append(scratch_, off, n);
    off += n;
    first = false;
  } while (off < scratch_.size());
  if (scratch_.capacity() > kStagedKeep) std::string().swap(scratch_);
  RequestFlush();
}

bool Conn::can_open() const {
  return !closed_ && !goaway_received_ && !goaway_sent_ && next_stream_ <= kMaxWindow &&
         streams_.size() < peer_max_streams_;
}

uint32_t Conn::OpenStream(const hpack::HeaderList& headers, bool end_stream) {
  if (!opts_.client || !can_open()) return 0;
  uint32_t id = next_stream_;
  next_stream_ += 2;
  Stream& s = streams_[id];
  s.send_window = peer_initial_window_;
  s.recv_window = opts_.stream_window;
  s.local_closed = end_stream;
  EncodeHeaders(id, headers, end_stream);
  return id;
}

void Conn::SendHeaders(uint32_t stream, const hpack::HeaderList& headers, bool end_stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end() || it->second.local_closed || it->second.end_after_staged || it->second.trailers_due) {
    return;
  }
  Stream* s = &it->second;
  if (end_stream && s->staged.size() > s->staged_off) {
    s->trailers = headers;
    s->trailers_due = true;
    MarkReady(stream, s);
    return;
  }
  EncodeHeaders(stream, headers, end_stream);
  if (end_stream) EndLocal(stream, s);
}

void Conn::SendData(uint32_t stream, std::string_view a, std::string_view b, bool end_stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  Stream* s = &it->second;
  if (s->local_closed || s->end_after_staged || s->trailers_due) return;
  const size_t total = a.size() + b.size();
  if (s->staged.size() == s->staged_off && total <= kMaxFrameSize && int64_t(total) <= send_window_ &&
      int64_t(total) <= s->send_window && out_.size() < opts_.write_queue_bytes / 2) {
    // Nothing waits ahead of it and the windows allow: framed at once.
    std::string* o = out_.buffer();
    AppendFrameHeader(o, static_cast<uint32_t>(total), kData, end_stream ? kFlagEndStream : 0, stream);
    o->append(a.data(), a.size());
    o->append(b.data(), b.size());
    send_window_ -= int64_t(total);
    s->send_window -= int64_t(total);
    RequestFlush();
    if (end_stream) EndLocal(stream, s);
    return;
  }
  if (s->staged_off > 0 && s->staged_off >= s->staged.size() / 2) {
    s->staged.erase(0, s->staged_off);
    s->staged_off = 0;
  }
  s->staged.append(a.data(), a.size());
  s->staged.append(b.data(), b.size());
  s->end_after_staged = end_stream;
  MarkReady(stream, s);
}

void Conn::ResetStream(uint32_t stream, uint32_t code) {
  if (streams_.find(stream) == streams_.end()) return;
  AppendRst(stream, code);
  Forget(stream);
}

bool Conn::StreamWritable(uint32_t stream) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return false;
  Stream* s = &it->second;
  if (s->staged.size() - s->staged_off <= opts_.stream_queue_bytes) return true;
  s->over_limit = true;
  return false;
}

size_t Conn::StreamQueued(uint32_t stream) const {
  auto it = streams_.find(stream);
  return it == streams_.end() ? 0 : it->second.staged.size() - it->second.staged_off;
}

size_t Conn::queued_bytes() const {
  size_t n = out_.size();
  for (const auto& [id, s] : streams_) n += s.staged.size() - s.staged_off;
  return n;
}

void Conn::MarkReady(uint32_t stream, Stream* s) {
  if (!s->ready) {
    s->ready = true;
    ready_.push_back(stream);
  }
  RequestFlush();
}

void Conn::DropReady(uint32_t stream) {
  auto it = std::find(ready_.begin(), ready_.end(), stream);
  if (it != ready_.end()) ready_.erase(it);
}

// This side sent its last frame on the stream. A server whose answer is
// complete before the request is asks the client to stop sending
// (RST_STREAM NO_ERROR, RFC 9113 §8.1), as gRPC servers do.
void Conn::EndLocal(uint32_t stream, Stream* s) {
  s->local_closed = true;
  if (s->remote_closed) {
    Forget(stream);
  } else if (!opts_.client) {
    AppendRst(stream, kNoError);
    Forget(stream);
  }
}

void Conn::Forget(uint32_t stream) {
  if (streams_.erase(stream) != 0) DropReady(stream);
}

// Frames staged data while the socket queue has room: each ready stream in
// turn gets one frame's worth of its windows.
bool Conn::Pump() {
  bool progress = false;
  std::vector<uint32_t> writable;
  const size_t room = opts_.write_queue_bytes / 2;
  std::string* o = out_.buffer();
  bool moved = true;
  while (moved && !ready_.empty() && out_.size() < room) {
    moved = false;
    for (size_t k = 0; k < ready_.size() && out_.size() < room;) {
      const uint32_t id = ready_[k];
      auto it = streams_.find(id);
      if (it == streams_.end()) {
        ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      Stream* s = &it->second;
      size_t left = s->staged.size() - s->staged_off;
      if (left > 0) {
        int64_t win = std::min(send_window_, s->send_window);
        if (win <= 0) {
          ++k;  // blocked until a WINDOW_UPDATE
          continue;
        }
        size_t n = std::min({left, size_t(win), size_t{kMaxFrameSize}});
        bool drained = n == left;
        bool end = drained && s->end_after_staged && !s->trailers_due;
        AppendFrameHeader(o, static_cast<uint32_t>(n), kData, end ? kFlagEndStream : 0, id);
        o->append(s->staged, s->staged_off, n);
        s->staged_off += n;
        send_window_ -= int64_t(n);
        s->send_window -= int64_t(n);
        moved = progress = true;
        if (s->over_limit && left - n <= opts_.stream_queue_bytes) {
          s->over_limit = false;
          writable.push_back(id);
        }
        if (!drained) {
          ++k;  // the next stream's turn
          continue;
        }
        s->staged.clear();
        s->staged_off = 0;
        if (s->staged.capacity() > kStagedKeep) std::string().swap(s->staged);
        if (end) {
          s->end_after_staged = false;
          s->ready = false;
          ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(k));
          EndLocal(id, s);
          continue;
        }
      }
      s->ready = false;
      ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(k));
      if (s->trailers_due) {
        s->trailers_due = false;
        hpack::HeaderList trailers = std::move(s->trailers);
        EncodeHeaders(id, trailers, true);
        EndLocal(id, s);
        moved = progress = true;
      } else if (s->end_after_staged) {
        s->end_after_staged = false;
        AppendFrameHeader(o, 0, kData, kFlagEndStream, id);
        EndLocal(id, s);
        moved = progress = true;
      }
    }
  }
  if (!writable.empty()) {
    auto alive = alive_;
    for (uint32_t id : writable) {
      if (streams_.find(id) == streams_.end()) continue;
      handler_->OnStreamWritable(id);
      if (!*alive || closed_) return false;
    }
  }
  return progress;
}

void Conn::RequestFlush() {
  if (processing_ || flush_scheduled_ || closed_) return;
  flush_scheduled_ = true;
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive] {
    auto a = alive.lock();
    if (!a || !*a) return;
    flush_scheduled_ = false;
    Flush();
  });
}

void Conn::Flush() {
  if (closed_) return;
  auto alive = alive_;
  for (;;) {
    bool more = Pump();
    if (!*alive || closed_) return;
    if (out_.empty()) break;
    size_t before = out_.size();
    if (!out_.Flush(fd_.get())) return Close(ErrnoError("http2 write"));
    if (out_.size() != before) last_activity_ = MonotonicNanos();
    if (!out_.empty() || !more || ready_.empty()) break;
  }
  if (closing_) return Close(Error(Code::kUnavailable, "http2: connection closed after GOAWAY"));
  UpdateInterest();
  MaybeFinish();
  if (!closed_) ArmTimer();
}

void Conn::UpdateInterest() {
  size_t queued = out_.size();
  if (!read_paused_ && queued > opts_.write_queue_bytes / 2) {
    read_paused_ = true;
  } else if (read_paused_ && queued <= opts_.write_queue_bytes / 4) {
    read_paused_ = false;
    // Frames left unprocessed when reading paused go first.
    if (!in_.empty()) {
      auto alive = alive_;
      processing_ = true;
      size_t used = 0;
      bool ok = TakeFrames(in_.data(), in_.size(), &used);
      if (!*alive || closed_ || !ok) return;
      processing_ = false;
      in_.erase(0, used);
      RequestFlush();
    }
  }
  uint32_t want = (read_paused_ ? 0u : uint32_t{EPOLLIN}) | (out_.empty() ? 0u : uint32_t{EPOLLOUT});
  if (want != events_ && fd_) {
    events_ = want;
    (void)fd_.Modify(want);
  }
}

void Conn::MaybeFinish() {
  if (closed_ || !streams_.empty() || !out_.empty() || in_block_) return;
  if (goaway_received_) return Close(Error(Code::kUnavailable, "http2: the peer sent GOAWAY"));
  if (goaway_sent_) return Close(Error(Code::kUnavailable, "http2: connection drained"));
}

void Conn::Goaway(uint32_t code, std::string_view debug) {
  if (closed_) return;
  if (!goaway_sent_) {
    goaway_sent_ = true;
    goaway_last_ = last_peer_stream_;
    AppendGoaway(code, debug);
  }
  if (code != kNoError) closing_ = true;
  RequestFlush();
}

void Conn::Close(const Error& why) {
  if (closed_) return;
  closed_ = true;
  if (!out_.empty() && fd_) (void)out_.Flush(fd_.get());  // one last try: a GOAWAY, say
  fd_.Reset();
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_ = 0;
  streams_.clear();
  ready_.clear();
  handler_->OnClosed(why);
}

void Conn::ArmTimer() {
  int64_t at = INT64_MAX;
  if (opts_.idle_timeout_nanos > 0 && (streams_.empty() || !out_.empty())) {
    at = last_activity_ + opts_.idle_timeout_nanos;
  }
  if (opts_.frame_timeout_nanos > 0 && frame_started_ != 0) {
    at = std::min(at, frame_started_ + opts_.frame_timeout_nanos);
  }
  if (at == INT64_MAX || (timer_ != 0 && timer_at_ <= at)) return;
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_at_ = at;
  timer_ = loop_->AddTimerAt(at, [this] {
    timer_ = 0;
    OnTimer();
  });
}

void Conn::OnTimer() {
  const int64_t now = MonotonicNanos();
  if (opts_.frame_timeout_nanos > 0 && frame_started_ != 0 && now >= frame_started_ + opts_.frame_timeout_nanos) {
    log::Info("http2 connection closed", {{"conn", opts_.name}, {"reason", "incomplete frame timeout"}});
    Goaway(kProtocolError, "incomplete frame timeout");
    return Close(Error(Code::kUnavailable, "http2: incomplete frame timeout"));
  }
  if (opts_.idle_timeout_nanos > 0 && now >= last_activity_ + opts_.idle_timeout_nanos) {
    if (!out_.empty()) {
      log::Info("http2 connection closed", {{"conn", opts_.name}, {"reason", "write timeout: peer is not reading"}});
      return Close(Error(Code::kUnavailable, "http2: write timeout: peer is not reading"));
    }
    if (streams_.empty()) {
      log::Debug("http2 connection closed", {{"conn", opts_.name}, {"reason", "idle"}});
      Goaway(kNoError, "idle");
      return Close(Error(Code::kUnavailable, "http2: idle connection closed"));
    }
  }
  ArmTimer();
}

}  // namespace outpost::wire::h2
