// HTTP/2 connection: input framing and the frame handlers (see h2_conn.h).
// The sending half (headers, staged data, the pump, flushing, timers) is in
// h2_send.cc.
#include "wire/h2_conn.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::wire::h2 {

const char kClientPreface[24] = {'P', 'R', 'I', ' ', '*', ' ', 'H', 'T', 'T', 'P', '/', '2',
                                 '.', '0', '\r', '\n', '\r', '\n', 'S', 'M', '\r', '\n', '\r', '\n'};

namespace {

uint32_t Be32(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

uint32_t Len24(const char* p) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{u[0]} << 16) | (uint32_t{u[1]} << 8) | u[2];
}

constexpr size_t kReadChunk = 64 << 10;
// Input read per readiness event before other connections get their turn.
constexpr size_t kReadBudget = 256 << 10;

// RFC 9113 §8.2.2 and §8.3: what makes a field block malformed.
bool IsConnectionSpecific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

// Empty when the block is well formed; else what is wrong with it.
std::string CheckFieldBlock(const hpack::HeaderList& list, bool request, bool initial) {
  bool regular_seen = false;
  uint32_t seen = 0;  // pseudo-header bits, for duplicates
  for (const hpack::HeaderField& f : list) {
    const std::string& n = f.name;
    if (n.empty()) return "empty field name";
    for (char c : n) {
      if (c >= 'A' && c <= 'Z') return "upper-case field name '" + n + "'";
    }
    if (n[0] == ':') {
      if (regular_seen) return "pseudo-header '" + n + "' after a regular field";
      if (!initial) return "pseudo-header '" + n + "' in trailers";
      static const char* const kRequest[] = {":method", ":scheme", ":path", ":authority", ":protocol"};
      uint32_t bit = 0;
      if (request) {
        for (uint32_t i = 0; i < 5; ++i) {
          if (n == kRequest[i]) bit = 1u << i;
        }
      } else if (n == ":status") {
        bit = 1u << 5;
      }
      if (bit == 0) return "unexpected pseudo-header '" + n + "'";
      if (seen & bit) return "duplicate pseudo-header '" + n + "'";
      seen |= bit;
      continue;
    }
    regular_seen = true;
    if (IsConnectionSpecific(n)) return "connection-specific field '" + n + "'";
    if (n == "te" && f.value != "trailers") return "te other than trailers";
  }
  if (initial && !request && !(seen & (1u << 5))) return "no :status";
  return {};
}

}  // namespace

const char* ErrorCodeName(uint32_t code) {
  static const char* const kNames[] = {
      "NO_ERROR",    "PROTOCOL_ERROR",  "INTERNAL_ERROR",    "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
      "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM",  "CANCEL",             "COMPRESSION_ERROR",
      "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"};
  return code < sizeof kNames / sizeof kNames[0] ? kNames[code] : "UNKNOWN";
}

Conn::Conn(Loop* loop, ConnOptions options, Handler* handler)
    : loop_(loop),
      opts_(std::move(options)),
      handler_(handler),
      decoder_(4096, opts_.max_header_list_bytes) {}

Conn::~Conn() {
  *alive_ = false;
  if (timer_ != 0) loop_->CancelTimer(timer_);
}

Result<std::unique_ptr<Conn>> Conn::Create(Loop* loop, UniqueFd fd, ConnOptions options, Handler* handler) {
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(fd.get(), true));
  std::unique_ptr<Conn> c(new Conn(loop, std::move(options), handler));
  Conn* self = c.get();
  auto watched = LoopFd::Watch(loop, std::move(fd), EPOLLIN, [self](uint32_t ev) { self->OnEvent(ev); });
  if (!watched.ok()) return watched.error();
  c->fd_ = std::move(*watched);
  c->events_ = EPOLLIN;
  c->last_activity_ = MonotonicNanos();
  c->preface_done_ = c->opts_.client;
  c->SendPrefaceAndSettings();
  c->RequestFlush();
  c->ArmTimer();
  return c;
}

void Conn::OnEvent(uint32_t events) {
  auto alive = alive_;
  processing_ = true;
  if (events & EPOLLOUT) {
    if (!out_.Flush(fd_.get())) return Close(ErrnoError("http2 write"));
    last_activity_ = MonotonicNanos();
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadAvailable();
  if (!*alive || closed_) return;
  processing_ = false;
  Flush();
}

void Conn::FeedForTest(std::string_view bytes) {
  auto alive = alive_;
  processing_ = true;
  if (!ProcessInput(bytes.data(), bytes.size()) || !*alive || closed_) return;
  processing_ = false;
  Flush();
}

void Conn::ReadAvailable() {
  auto alive = alive_;
  char buf[kReadChunk];
  size_t total = 0;
  while (!read_paused_ && total < kReadBudget) {
    ssize_t n = sys::Read(fd_.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      return Close(ErrnoError("http2 read"));
    }
    if (n == 0) {
      return Close(Error(Code::kUnavailable, in_.empty() ? "http2: connection closed by peer"
                                                         : "http2: connection closed by peer inside a frame"));
    }
    last_activity_ = MonotonicNanos();
    total += static_cast<size_t>(n);
    if (!ProcessInput(buf, static_cast<size_t>(n)) || !*alive || closed_) return;
  }
}

// Bytes the frame at the start of `have` bytes still needs: the preface,
// then a header, then its payload. 0 once whole.
size_t Conn::Needed(const char* p, size_t have) const {
  if (!preface_done_) return have >= sizeof kClientPreface ? 0 : sizeof kClientPreface - have;
  if (have < kFrameHeaderBytes) return kFrameHeaderBytes - have;
  size_t whole = kFrameHeaderBytes + (Len24(p));
  return have >= whole ? 0 : whole - have;
}

bool Conn::ProcessInput(const char* p, size_t n) {
  auto alive = alive_;
  // First complete the frame a previous read left partial, taking only
  // its own bytes, so a long stream of frames is not copied.
  while (!in_.empty() && n > 0) {
    size_t need = Needed(in_.data(), in_.size());
    size_t take = std::min(need, n);
    in_.append(p, take);
    p += take;
    n -= take;
    if (!CheckLength(in_.data(), in_.size())) return false;
    if (Needed(in_.data(), in_.size()) != 0) continue;  // a header just completed: take its payload next
    size_t used = 0;
    if (!TakeFrames(in_.data(), in_.size(), &used) || !*alive || closed_) return false;
    in_.erase(0, used);
  }
  if (n == 0) return true;
  size_t used = 0;
  if (!TakeFrames(p, n, &used) || !*alive || closed_) return false;
  in_.assign(p + used, n - used);
  if (in_.capacity() > (kMaxFrameSize + kFrameHeaderBytes) * 2 && in_.size() < 1024) in_.shrink_to_fit();
  frame_started_ = (in_.empty() && !in_block_) ? 0 : (frame_started_ != 0 ? frame_started_ : MonotonicNanos());
  return true;
}

// A frame header whose length is over the limit is refused before its
// payload is buffered.
bool Conn::CheckLength(const char* p, size_t have) {
  if (!preface_done_) {
    size_t k = std::min(have, sizeof kClientPreface);
    if (std::memcmp(p, kClientPreface, k) != 0) return ConnError(kProtocolError, "bad connection preface");
    return true;
  }
  if (have < kFrameHeaderBytes) return true;
  uint32_t len = Len24(p);
  if (len > kMaxFrameSize) {
    return ConnError(kFrameSizeError, "frame of " + std::to_string(len) + " octets over " +
                                          std::to_string(kMaxFrameSize));
  }
  return true;
}

bool Conn::TakeFrames(const char* p, size_t n, size_t* used) {
  auto alive = alive_;
  size_t off = 0;
  for (;;) {
    if (!CheckLength(p + off, n - off)) return false;
    if (Needed(p + off, n - off) != 0) break;
    if (!preface_done_) {
      preface_done_ = true;
      off += sizeof kClientPreface;
      continue;
    }
    const char* h = p + off;
    uint32_t len = Len24(h);
    auto type = static_cast<uint8_t>(h[3]);
    auto flags = static_cast<uint8_t>(h[4]);
    uint32_t stream = Be32(h + 5) & 0x7fffffff;
    off += kFrameHeaderBytes + len;
    if (!HandleFrame(type, flags, stream, std::string_view(h + kFrameHeaderBytes, len))) return false;
    if (!*alive || closed_) return false;
    // A peer that sends requests (or pings) and reads no answers stops
    // being read once the answers fill half the write queue.
    if (out_.size() > opts_.write_queue_bytes / 2) read_paused_ = true;
    if (read_paused_) break;
  }
  *used = off;
  if (frame_started_ != 0 && off == n && !in_block_) frame_started_ = 0;
  return true;
}

bool Conn::HandleFrame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  if (in_block_ && type != kContinuation) {
    return ConnError(kProtocolError, "frame of type " + std::to_string(type) + " inside a header block");
  }
  if (!settings_seen_) {
    if (type != kSettings || (flags & kFlagAck)) return ConnError(kProtocolError, "first frame is not SETTINGS");
    settings_seen_ = true;
  }
  switch (type) {
    case kData: return HandleData(flags, stream, payload);
    case kHeaders: return HandleHeaders(flags, stream, payload);
    case kPriority:
      if (stream == 0) return ConnError(kProtocolError, "PRIORITY on stream 0");
      if (payload.size() != 5) StreamError(stream, kFrameSizeError);
      return true;
    case kRstStream: return HandleRst(stream, payload);
    case kSettings: return HandleSettings(flags, stream, payload);
    case kPushPromise: return ConnError(kProtocolError, "PUSH_PROMISE (push is disabled)");
    case kPing: return HandlePing(flags, stream, payload);
    case kGoaway: return HandleGoaway(stream, payload);
    case kWindowUpdate: return HandleWindowUpdate(stream, payload);
    case kContinuation: return HandleContinuation(flags, stream, payload);
    default: return true;  // §5.5: unknown types are ignored
  }
}

// Strips the padding of a DATA or HEADERS payload.
bool Conn::Unpad(uint8_t flags, std::string_view* payload) {
  if (!(flags & kFlagPadded)) return true;
  if (payload->empty()) return ConnError(kFrameSizeError, "padded frame without a pad length");
  size_t pad = static_cast<uint8_t>((*payload)[0]);
  if (pad >= payload->size()) return ConnError(kProtocolError, "padding longer than the frame");
  *payload = payload->substr(1, payload->size() - 1 - pad);
  return true;
}

bool Conn::IsIdle(uint32_t stream) const {
  // A stream the peer could open but has not, or one of ours not yet opened.
  bool ours = (stream & 1) == (opts_.client ? 1u : 0u);
  return ours ? stream >= next_stream_ : stream > last_peer_stream_;
}

bool Conn::HandleData(uint8_t flags, uint32_t stream, std::string_view payload) {
  if (stream == 0) return ConnError(kProtocolError, "DATA on stream 0");
  const auto flow = static_cast<uint32_t>(payload.size());
  recv_window_ -= flow;
  if (recv_window_ < 0) return ConnError(kFlowControlError, "DATA beyond the connection window");
  if (!Unpad(flags, &payload)) return false;
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    if (IsIdle(stream)) return ConnError(kProtocolError, "DATA on idle stream " + std::to_string(stream));
    ReturnCredit(nullptr, 0, flow);  // a stream already closed or reset: ignored
    return true;
  }
  Stream* s = &it->second;
  if (s->remote_closed) {
    ReturnCredit(nullptr, 0, flow);
    StreamError(stream, kStreamClosed);
    return true;
  }
  s->recv_window -= flow;
  if (s->recv_window < 0) {
    ReturnCredit(nullptr, 0, flow);
    StreamError(stream, kFlowControlError);
    return true;
  }
  bool end = (flags & kFlagEndStream) != 0;
  if (end) s->remote_closed = true;
  auto alive = alive_;
  handler_->OnData(stream, payload, end);
  if (!*alive || closed_) return false;
  it = streams_.find(stream);
  s = it == streams_.end() ? nullptr : &it->second;
  ReturnCredit(s, stream, flow);
  if (s != nullptr && s->remote_closed && s->local_closed) Forget(stream);
  return true;
}

void Conn::ReturnCredit(Stream* s, uint32_t stream, size_t n) {
  recv_unacked_ += static_cast<uint32_t>(n);
  if (recv_unacked_ >= opts_.connection_window / 4) {
    AppendWindowUpdate(0, recv_unacked_);
    recv_window_ += recv_unacked_;
    recv_unacked_ = 0;
  }
  if (s == nullptr || s->remote_closed) return;
  s->recv_unacked += static_cast<uint32_t>(n);
  if (s->recv_unacked >= opts_.stream_window / 4) {
    AppendWindowUpdate(stream, s->recv_unacked);
    s->recv_window += s->recv_unacked;
    s->recv_unacked = 0;
  }
}

bool Conn::HandleHeaders(uint8_t flags, uint32_t stream, std::string_view payload) {
  if (stream == 0) return ConnError(kProtocolError, "HEADERS on stream 0");
  if (!Unpad(flags, &payload)) return false;
  if (flags & kFlagPriority) {
    if (payload.size() < 5) return ConnError(kFrameSizeError, "HEADERS too short for its priority");
    payload.remove_prefix(5);
  }
  block_.assign(payload.data(), payload.size());
  block_stream_ = stream;
  block_end_stream_ = (flags & kFlagEndStream) != 0;
  if (!(flags & kFlagEndHeaders)) {
    in_block_ = true;
    if (frame_started_ == 0) frame_started_ = MonotonicNanos();
    return true;
  }
  return FinishHeaderBlock();
}

bool Conn::HandleContinuation(uint8_t flags, uint32_t stream, std::string_view payload) {
  if (!in_block_ || stream != block_stream_) return ConnError(kProtocolError, "CONTINUATION without a header block");
  // A block's encoded size never needs to exceed twice the list limit.
  if (block_.size() + payload.size() > 2 * size_t{opts_.max_header_list_bytes}) {
    return ConnError(kProtocolError, "header block over " + std::to_string(2 * opts_.max_header_list_bytes) +
                                         " octets");
  }
  block_.append(payload.data(), payload.size());
  if (!(flags & kFlagEndHeaders)) return true;
  in_block_ = false;
  return FinishHeaderBlock();
}

bool Conn::FinishHeaderBlock() {
  in_block_ = false;
  const uint32_t stream = block_stream_;
  const bool end = block_end_stream_;
  hpack::HeaderList list;
  Status decoded = decoder_.Decode(block_, &list);
  if (block_.capacity() > 64 << 10) std::string().swap(block_);
  if (!decoded.ok() && decoded.error().code() != Code::kResourceExhausted) {
    return ConnError(kCompressionError, decoded.error().message());
  }
  const bool too_large = !decoded.ok();
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    bool peer_opens = (stream & 1) == (opts_.client ? 0u : 1u);
    if (!peer_opens) {
      if (!opts_.client) return ConnError(kProtocolError, "received an illegal stream id: " + std::to_string(stream));
      if (IsIdle(stream)) return ConnError(kProtocolError, "HEADERS on idle stream " + std::to_string(stream));
      return true;  // trailers of a stream this side reset: decoded, ignored
    }
    if (opts_.client) return ConnError(kProtocolError, "server opened stream " + std::to_string(stream));
    // gRPC clients send no trailers, so HEADERS for a stream that is gone
    // can only be a new stream reusing an id (grpc-go answers the same).
    if (stream <= last_peer_stream_) {
      return ConnError(kProtocolError, "received an illegal stream id: " + std::to_string(stream));
    }
    last_peer_stream_ = stream;
    if (goaway_sent_ && stream > goaway_last_) {
      AppendRst(stream, kRefusedStream);
      return true;
    }
    if (too_large) {
      AppendRst(stream, kFrameSizeError);
      return true;
    }
    if (streams_.size() >= opts_.max_concurrent_streams) {
      AppendRst(stream, kRefusedStream);
      return true;
    }
    std::string bad = CheckFieldBlock(list, true, true);
    if (!bad.empty()) {
      log::Debug("http2 malformed request", {{"conn", opts_.name}, {"stream", std::to_string(stream)}, {"why", bad}});
      AppendRst(stream, kProtocolError);
      return true;
    }
    Stream& s = streams_[stream];
    s.send_window = peer_initial_window_;
    s.recv_window = opts_.stream_window;
    s.headers_received = true;
    s.remote_closed = end;
    return Deliver(stream, &list, true, end);
  }
  Stream* s = &it->second;
  if (s->remote_closed) {
    StreamError(stream, kStreamClosed);
    return true;
  }
  const bool initial = !s->headers_received;
  if (too_large) {
    StreamError(stream, kFrameSizeError);
    return true;
  }
  // After the first block only trailers may come, and they end the stream.
  if ((!initial && !end) || !CheckFieldBlock(list, false, initial).empty()) {
    StreamError(stream, kProtocolError);
    return true;
  }
  s->headers_received = true;
  if (end) s->remote_closed = true;
  return Deliver(stream, &list, initial, end);
}

bool Conn::Deliver(uint32_t stream, hpack::HeaderList* list, bool initial, bool end) {
  auto alive = alive_;
  handler_->OnHeaders(stream, list, initial, end);
  if (!*alive || closed_) return false;
  auto it = streams_.find(stream);
  if (it != streams_.end() && it->second.remote_closed && it->second.local_closed) Forget(stream);
  return true;
}

bool Conn::HandleRst(uint32_t stream, std::string_view payload) {
  if (stream == 0) return ConnError(kProtocolError, "RST_STREAM on stream 0");
  if (payload.size() != 4) return ConnError(kFrameSizeError, "RST_STREAM of " + std::to_string(payload.size()) + " octets");
  if (IsIdle(stream)) return ConnError(kProtocolError, "RST_STREAM on idle stream " + std::to_string(stream));
  if (streams_.find(stream) == streams_.end()) return true;
  Forget(stream);
  auto alive = alive_;
  handler_->OnStreamReset(stream, Be32(payload.data()), false);
  return *alive && !closed_;
}

bool Conn::HandleSettings(uint8_t flags, uint32_t stream, std::string_view payload) {
  if (stream != 0) return ConnError(kProtocolError, "SETTINGS on stream " + std::to_string(stream));
  if (flags & kFlagAck) {
    if (!payload.empty()) return ConnError(kFrameSizeError, "SETTINGS ack with a payload");
    return true;
  }
  if (payload.size() % 6 != 0) return ConnError(kFrameSizeError, "SETTINGS of " + std::to_string(payload.size()) + " octets");
  for (size_t i = 0; i < payload.size(); i += 6) {
    const auto* u = reinterpret_cast<const uint8_t*>(payload.data() + i);
    uint16_t id = static_cast<uint16_t>((u[0] << 8) | u[1]);
    uint32_t v = Be32(payload.data() + i + 2);
    switch (id) {
      case kSettingHeaderTableSize: encoder_.PeerTableSizeChanged(); break;
      case kSettingEnablePush:
        if (v > 1 || (opts_.client && v == 1)) return ConnError(kProtocolError, "bad ENABLE_PUSH " + std::to_string(v));
        break;
      case kSettingMaxConcurrentStreams: peer_max_streams_ = v; break;
      case kSettingInitialWindowSize: {
        if (v > kMaxWindow) return ConnError(kFlowControlError, "INITIAL_WINDOW_SIZE " + std::to_string(v));
        int64_t delta = int64_t{v} - peer_initial_window_;
        peer_initial_window_ = v;
        for (auto& [sid, s] : streams_) {
          s.send_window += delta;
          if (s.send_window > kMaxWindow) return ConnError(kFlowControlError, "stream window overflow");
          if (delta > 0 && s.staged.size() > s.staged_off) MarkReady(sid, &s);
        }
        break;
      }
      case kSettingMaxFrameSize:
        if (v < 16384 || v > 16777215) return ConnError(kProtocolError, "bad MAX_FRAME_SIZE " + std::to_string(v));
        break;
      case kSettingMaxHeaderListSize: peer_max_header_list_ = v; break;
      default: break;  // unknown settings are ignored (C-core's 0xfe03...)
    }
  }
  AppendFrameHeader(out_.buffer(), 0, kSettings, kFlagAck, 0);
  RequestFlush();
  return true;
}

bool Conn::HandlePing(uint8_t flags, uint32_t stream, std::string_view payload) {
  if (stream != 0) return ConnError(kProtocolError, "PING on stream " + std::to_string(stream));
  if (payload.size() != 8) return ConnError(kFrameSizeError, "PING of " + std::to_string(payload.size()) + " octets");
  if (flags & kFlagAck) return true;
  AppendFrameHeader(out_.buffer(), 8, kPing, kFlagAck, 0);
  out_.buffer()->append(payload.data(), 8);
  RequestFlush();
  return true;
}

bool Conn::HandleGoaway(uint32_t stream, std::string_view payload) {
  if (stream != 0) return ConnError(kProtocolError, "GOAWAY on stream " + std::to_string(stream));
  if (payload.size() < 8) return ConnError(kFrameSizeError, "GOAWAY of " + std::to_string(payload.size()) + " octets");
  uint32_t last = Be32(payload.data()) & 0x7fffffff;
  uint32_t code = Be32(payload.data() + 4);
  std::string_view debug = payload.substr(8);
  goaway_received_ = true;
  auto alive = alive_;
  if (opts_.client) {
    // Streams above last were not processed: they may be retried.
    std::vector<uint32_t> refused;
    for (auto& [sid, s] : streams_) {
      if (sid > last) refused.push_back(sid);
    }
    std::sort(refused.begin(), refused.end());
    for (uint32_t sid : refused) {
      if (streams_.erase(sid) == 0) continue;
      DropReady(sid);
      handler_->OnStreamReset(sid, kRefusedStream, true);
      if (!*alive || closed_) return false;
    }
  }
  handler_->OnGoaway(last, code, debug);
  return *alive && !closed_;
}

bool Conn::HandleWindowUpdate(uint32_t stream, std::string_view payload) {
  if (payload.size() != 4) {
    return ConnError(kFrameSizeError, "WINDOW_UPDATE of " + std::to_string(payload.size()) + " octets");
  }
  uint32_t inc = Be32(payload.data()) & 0x7fffffff;
  if (stream == 0) {
    if (inc == 0) return ConnError(kProtocolError, "WINDOW_UPDATE of 0 on the connection");
    send_window_ += inc;
    if (send_window_ > kMaxWindow) return ConnError(kFlowControlError, "connection window overflow");
    return true;
  }
  auto it = streams_.find(stream);
  if (it == streams_.end()) return true;  // closed (or not yet known): ignored
  Stream* s = &it->second;
  if (inc == 0) {
    StreamError(stream, kProtocolError);
    return true;
  }
  s->send_window += inc;
  if (s->send_window > kMaxWindow) {
    StreamError(stream, kFlowControlError);
    return true;
  }
  if (s->staged.size() > s->staged_off || s->trailers_due || s->end_after_staged) MarkReady(stream, s);
  return true;
}

bool Conn::ConnError(uint32_t code, const std::string& what) {
  log::Info("http2 connection error", {{"conn", opts_.name}, {"code", ErrorCodeName(code)}, {"why", what}});
  AppendGoaway(code, what);
  Close(Error(Code::kInternal, std::string("http2: ") + what + " (" + ErrorCodeName(code) + ")"));
  return false;
}

void Conn::StreamError(uint32_t stream, uint32_t code) {
  AppendRst(stream, code);
  if (streams_.find(stream) == streams_.end()) return;
  Forget(stream);
  handler_->OnStreamReset(stream, code, true);
}

}  // namespace outpost::wire::h2
