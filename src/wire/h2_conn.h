// One HTTP/2 connection (RFC 9113) over a connected unix stream socket,
// cleartext with prior knowledge, either side. Owns: the socket and its
// read buffer and write queue, the preface, SETTINGS and their acks, the
// frame layer (HEADERS + CONTINUATION, DATA with padding, PRIORITY,
// RST_STREAM, PING, GOAWAY, WINDOW_UPDATE, unknown types skipped), the
// HPACK decoder and encoder (wire/hpack), stream states and ids, flow
// control at connection and stream level in both directions, the protocol
// errors with their codes, and the connection's timeouts (idle, a frame
// or header block that does not complete, a peer that does not read).
// Does not own: what the streams carry (the Handler, for gRPC
// wire/grpc_session), accepting connections, reconnecting.
//
// Sending: headers and trailers go out at once (they are not flow
// controlled); DATA is staged per stream and leaves as the peer's windows
// allow, streams taking turns, at most 16,384 octets a frame (grpc-go
// accepts no larger frame whatever it advertised). Trailers queued behind
// staged data wait for it. Frames go to the socket once per loop turn.
//
// Receiving: frames are at most 16,384 octets (this side never advertises
// more), so the read buffer holds at most one frame and a read chunk.
// Credit is given back as DATA is handed to the handler (which consumes it
// at once): the stream window when a quarter of it has been used, the
// connection window likewise; a stream's own memory (a message being
// reassembled) is the handler's to bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/error.h"
#include "base/fd.h"
#include "base/log.h"
#include "loop/loop.h"
#include "wire/frame.h"
#include "wire/hpack.h"

namespace outpost::wire::h2 {

// RFC 9113 §7.
enum ErrorCode : uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kSettingsTimeout = 0x4,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kConnectError = 0xa,
  kEnhanceYourCalm = 0xb,
  kInadequateSecurity = 0xc,
  kHttp11Required = 0xd,
};
const char* ErrorCodeName(uint32_t code);

enum FrameType : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

constexpr uint8_t kFlagEndStream = 0x1;
constexpr uint8_t kFlagAck = 0x1;
constexpr uint8_t kFlagEndHeaders = 0x4;
constexpr uint8_t kFlagPadded = 0x8;
constexpr uint8_t kFlagPriority = 0x20;

constexpr size_t kFrameHeaderBytes = 9;
constexpr uint32_t kMaxFrameSize = 16384;  // sent and accepted
constexpr uint32_t kDefaultWindow = 65535;
constexpr int64_t kMaxWindow = 0x7fffffff;
extern const char kClientPreface[24];  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

enum SettingId : uint16_t {
  kSettingHeaderTableSize = 0x1,
  kSettingEnablePush = 0x2,
  kSettingMaxConcurrentStreams = 0x3,
  kSettingInitialWindowSize = 0x4,
  kSettingMaxFrameSize = 0x5,
  kSettingMaxHeaderListSize = 0x6,
};

void AppendFrameHeader(std::string* out, uint32_t length, uint8_t type, uint8_t flags, uint32_t stream);

struct ConnOptions {
  bool client = false;
  std::string name = "h2";
  // What this side advertises.
  uint32_t max_concurrent_streams = 100;  // server: the peer's streams at once
  uint32_t stream_window = 1 << 20;       // SETTINGS_INITIAL_WINDOW_SIZE
  uint32_t connection_window = 16 << 20;  // raised from 65,535 at start
  uint32_t max_header_list_bytes = 16 << 10;
  // Unsent stream data past which StreamWritable is false.
  size_t stream_queue_bytes = 1 << 20;
  // Socket write queue: above half of it reading pauses; unread for
  // idle_timeout_nanos closes the connection.
  size_t write_queue_bytes = 1 << 20;
  int64_t idle_timeout_nanos = 0;   // no stream open, no bytes moved; 0 = never
  int64_t frame_timeout_nanos = 0;  // a frame or header block started; 0 = never
};

// Stream events. Handler methods run from the connection's loop callbacks;
// any of them may call back into the connection, including Close().
class Handler {
 public:
  virtual ~Handler() = default;
  // A whole header block for a stream: the request headers of a new
  // stream (server), the response headers (client) or trailers (both).
  // initial: the first block on this stream. The handler may move from
  // *headers.
  virtual void OnHeaders(uint32_t stream, hpack::HeaderList* headers, bool initial, bool end_stream) = 0;
  // DATA payload (padding removed); end_stream: the peer's last frame.
  virtual void OnData(uint32_t stream, std::string_view data, bool end_stream) = 0;
  // The stream is gone without a normal end: the peer reset it (code is
  // its error code), or this side did (local, after a stream error or a
  // GOAWAY that left it unprocessed: code is what was sent, or
  // kRefusedStream for the latter).
  virtual void OnStreamReset(uint32_t stream, uint32_t code, bool local) = 0;
  // The stream's staged data went from over stream_queue_bytes to under.
  virtual void OnStreamWritable(uint32_t stream) = 0;
  // The peer sent GOAWAY.
  virtual void OnGoaway(uint32_t last_stream, uint32_t code, std::string_view debug) = 0;
  // The connection is closed; every stream still open is gone with it.
  virtual void OnClosed(const Error& why) = 0;
};

class Conn {
 public:
  // fd: a connected stream socket (made nonblocking here). The preface (a
  // client's) and SETTINGS are queued at once.
  static Result<std::unique_ptr<Conn>> Create(Loop* loop, UniqueFd fd, ConnOptions options, Handler* handler);
  // Closes the socket without telling the handler.
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Client: opens a stream with these request headers; returns its id, or
  // 0 when no stream can be opened now (GOAWAY received, ids used up, or
  // the peer's MAX_CONCURRENT_STREAMS reached: see can_open()).
  uint32_t OpenStream(const hpack::HeaderList& headers, bool end_stream);
  bool can_open() const;
  // Headers after the first block (trailers, with end_stream), or a
  // server's response headers. With staged data on the stream, a block
  // with end_stream waits for that data.
  void SendHeaders(uint32_t stream, const hpack::HeaderList& headers, bool end_stream);
  // Stages data (two pieces, sent back to back: a message's prefix and
  // body) and, with end_stream, closes this side after it.
  void SendData(uint32_t stream, std::string_view a, std::string_view b, bool end_stream);
  // RST_STREAM; the stream is forgotten (no OnStreamReset for it).
  void ResetStream(uint32_t stream, uint32_t code);
  // False when the stream's staged data is over stream_queue_bytes; the
  // handler's OnStreamWritable then runs once it is under again.
  bool StreamWritable(uint32_t stream);
  size_t StreamQueued(uint32_t stream) const;

  // GOAWAY with the last stream this side took; streams above it that
  // arrive later are refused. With kNoError the connection closes once its
  // streams are done; otherwise at once (after the GOAWAY is written).
  void Goaway(uint32_t code, std::string_view debug);
  // Closes now (what is queued gets one last try); OnClosed(why) runs
  // before this returns.
  void Close(const Error& why);

  // For tests and fuzzers: handles bytes as if read from the socket.
  void FeedForTest(std::string_view bytes);

  bool closed() const { return closed_; }
  bool goaway_received() const { return goaway_received_; }
  size_t open_streams() const { return streams_.size(); }
  size_t queued_bytes() const;
  uint64_t id() const { return id_; }
  void set_id(uint64_t id) { id_ = id; }
  int fd() const { return fd_.get(); }

 private:
  struct Stream {
    int64_t send_window = 0;
    int64_t recv_window = 0;
    uint32_t recv_unacked = 0;
    std::string staged;  // DATA not yet framed
    size_t staged_off = 0;
    hpack::HeaderList trailers;  // to send after staged
    bool trailers_due = false;
    bool end_after_staged = false;
    bool local_closed = false;
    bool remote_closed = false;
    bool over_limit = false;  // StreamWritable was false; OnStreamWritable owed
    bool ready = false;       // in ready_
    bool headers_received = false;
  };

  Conn(Loop* loop, ConnOptions options, Handler* handler);

  void OnEvent(uint32_t events);
  void ReadAvailable();
  // h2_conn.cc: input. Each returns false once the connection is closed.
  size_t Needed(const char* p, size_t have) const;
  bool CheckLength(const char* p, size_t have);
  bool ProcessInput(const char* p, size_t n);
  bool TakeFrames(const char* p, size_t n, size_t* used);
  bool HandleFrame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload);
  bool Unpad(uint8_t flags, std::string_view* payload);
  bool IsIdle(uint32_t stream) const;
  bool HandleData(uint8_t flags, uint32_t stream, std::string_view payload);
  bool HandleHeaders(uint8_t flags, uint32_t stream, std::string_view payload);
  bool HandleContinuation(uint8_t flags, uint32_t stream, std::string_view payload);
  bool FinishHeaderBlock();
  bool Deliver(uint32_t stream, hpack::HeaderList* list, bool initial, bool end);
  bool HandleSettings(uint8_t flags, uint32_t stream, std::string_view payload);
  bool HandleRst(uint32_t stream, std::string_view payload);
  bool HandlePing(uint8_t flags, uint32_t stream, std::string_view payload);
  bool HandleGoaway(uint32_t stream, std::string_view payload);
  bool HandleWindowUpdate(uint32_t stream, std::string_view payload);
  bool ConnError(uint32_t code, const std::string& what);
  void StreamError(uint32_t stream, uint32_t code);
  void ReturnCredit(Stream* s, uint32_t stream, size_t n);
  // h2_send.cc: output.
  void SendPrefaceAndSettings();
  void AppendWindowUpdate(uint32_t stream, uint32_t increment);
  void AppendRst(uint32_t stream, uint32_t code);
  void AppendGoaway(uint32_t code, std::string_view debug);
  void EncodeHeaders(uint32_t stream, const hpack::HeaderList& headers, bool end_stream);
  void MarkReady(uint32_t stream, Stream* s);
  void DropReady(uint32_t stream);
  bool Pump();  // true when it framed something
  void EndLocal(uint32_t stream, Stream* s);
  void Forget(uint32_t stream);
  void RequestFlush();
  void Flush();
  void UpdateInterest();
  void MaybeFinish();
  void ArmTimer();
  void OnTimer();

  Loop* loop_;
  ConnOptions opts_;
  Handler* handler_;
  LoopFd fd_;
  uint64_t id_ = 0;
  std::string in_;  // a frame (or the preface) a read left incomplete
  WriteQueue out_;
  hpack::Decoder decoder_;
  hpack::Encoder encoder_;
  std::unordered_map<uint32_t, Stream> streams_;
  std::string scratch_;  // a header block being encoded
  std::vector<uint32_t> ready_;  // streams with staged data or trailers due
  // A header block being received: HEADERS without END_HEADERS, then
  // CONTINUATION frames for the same stream.
  std::string block_;
  uint32_t block_stream_ = 0;
  bool block_end_stream_ = false;
  bool in_block_ = false;
  // The peer's settings.
  int64_t peer_initial_window_ = kDefaultWindow;
  uint32_t peer_max_streams_ = 0xffffffff;
  uint32_t peer_max_header_list_ = 0xffffffff;
  int64_t send_window_ = kDefaultWindow;  // connection level
  int64_t recv_window_ = kDefaultWindow;
  uint32_t recv_unacked_ = 0;
  uint32_t next_stream_ = 1;   // client: the next id to open
  uint32_t last_peer_stream_ = 0;  // the highest id the peer opened
  uint32_t goaway_last_ = 0x7fffffff;  // GOAWAY sent: streams above are refused
  bool preface_done_ = false;  // server: the client's 24 octets arrived
  bool settings_seen_ = false;  // the peer's first frame was SETTINGS
  bool goaway_sent_ = false;
  bool goaway_received_ = false;
  bool closing_ = false;  // GOAWAY with an error: close once written
  bool closed_ = false;
  bool processing_ = false;
  bool flush_scheduled_ = false;
  bool read_paused_ = false;
  uint32_t events_ = 0;
  int64_t last_activity_ = 0;
  int64_t frame_started_ = 0;  // a frame or header block is incomplete since
  Loop::TimerId timer_ = 0;
  int64_t timer_at_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace outpost::wire::h2
