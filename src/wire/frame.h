// ttRPC framing (containerd/ttrpc wire format). Owns: the 10-byte frame header
// codec, the incremental FrameReader that turns a byte stream into whole
// frames, and the WriteQueue that holds encoded frames until the socket takes
// them. Does not own: the protobuf bodies (wire/codec), sockets or the loop.
//
// Header, all big-endian:
//   [0..3] payload length  [4..7] stream id  [8] type  [9] flags
// A payload may be at most kMaxFramePayload (4 MiB) bytes; exactly 4 MiB is
// allowed. A reader rejects a longer length before allocating anything, then
// skips that many bytes so the stream stays in sync.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"

namespace outpost::wire {

constexpr size_t kFrameHeaderSize = 10;
constexpr uint32_t kMaxFramePayload = 4u << 20;

enum class FrameType : uint8_t { kRequest = 1, kResponse = 2, kData = 3 };

// Flag bits (only meaningful for streaming; unary calls send 0).
constexpr uint8_t kFlagRemoteClosed = 0x01;
constexpr uint8_t kFlagRemoteOpen = 0x02;
constexpr uint8_t kFlagNoData = 0x04;

struct FrameHeader {
  uint32_t length = 0;
  uint32_t stream_id = 0;
  uint8_t type = 0;  // raw byte: a peer may send types we do not know
  uint8_t flags = 0;
};

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]);
FrameHeader DecodeFrameHeader(const uint8_t in[kFrameHeaderSize]);

// Appends header + payload to *out. The caller keeps payload within the limit.
void AppendFrame(std::string* out, uint32_t stream_id, FrameType type, uint8_t flags, std::string_view payload);

// "message length N exceed maximum message size of 4194304", ResourceExhausted:
// the status ttRPC uses both for refusing to send and for answering an
// oversize frame.
Error OversizeError(size_t length);

struct Frame {
  FrameHeader header;
  std::string_view payload;  // into the reader's buffer; valid until the next Feed/Prepare/Next
};

// Reassembles frames from bytes that arrive in arbitrary chunks (one byte at
// a time works). Two ways to feed it: Feed() copies, or Prepare()/Commit()
// lets the caller read(2) straight into the buffer.
//
// Memory: at most one frame (header + max_payload) plus one read chunk is
// buffered. The buffer grows with the bytes that actually arrive (doubling,
// never beyond the announced frame), never for a length over the limit, and
// shrinks back when empty.
class FrameReader {
 public:
  enum class Event {
    kNeedMore,  // no complete frame buffered
    kFrame,     // *frame holds a complete frame
    kOversize,  // a frame announced a length > max_payload and its bytes have now
                // been skipped; frame->header has its length and stream id,
                // frame->payload is empty
  };

  explicit FrameReader(uint32_t max_payload = kMaxFramePayload);
  FrameReader(FrameReader&&) = default;
  FrameReader& operator=(FrameReader&&) = default;

  void Feed(const void* data, size_t len);

  // Returns writable space for at least one byte (usually a whole chunk, or
  // the rest of the frame being received); *avail gets its size. Commit(n)
  // then publishes the first n bytes written there.
  char* Prepare(size_t* avail);
  void Commit(size_t n);

  // Extracts the next complete frame. Call until kNeedMore.
  Event Next(Frame* frame);

  // True while part of a frame (or of an oversize frame being skipped) is
  // buffered: the "half-received frame" that a slowloris timeout watches.
  bool MidFrame() const { return end_ > start_ || discard_left_ > 0; }
  size_t buffered() const { return end_ - start_; }
  size_t capacity() const { return cap_; }

 private:
  static constexpr size_t kChunk = 16 << 10;

  void Reserve(size_t tail_room);

  uint32_t max_payload_;
  std::unique_ptr<char[]> buf_;
  size_t cap_ = 0;
  size_t start_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last byte fed
  // Skipping an oversize frame: bytes still to drop, and its header.
  uint64_t discard_left_ = 0;
  FrameHeader discard_header_;
  bool discarding_ = false;
};

// Bytes waiting to be written to a nonblocking socket. Frames are appended
// whole; Flush writes as much as the socket takes.
class WriteQueue {
 public:
  std::string* buffer() { return &data_; }  // append encoded frames here
  size_t size() const { return data_.size() - off_; }
  bool empty() const { return size() == 0; }

  // Writes until done or EAGAIN. Returns false with errno set on a socket
  // error (EPIPE, ECONNRESET, ...). Uses send(MSG_NOSIGNAL) so a closed peer
  // never raises SIGPIPE.
  bool Flush(int fd);
  void Clear();

 private:
  std::string data_;
  size_t off_ = 0;
};

}  // namespace outpost::wire
