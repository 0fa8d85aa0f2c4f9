#include "wire/frame.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::wire {

namespace {

void PutBe32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

uint32_t GetBe32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

// A write queue keeps this much capacity around after draining; more is
// returned to the allocator so a burst of big replies does not pin memory.
constexpr size_t kWriteQueueKeep = 256 << 10;

}  // namespace

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  PutBe32(out, h.length);
  PutBe32(out + 4, h.stream_id);
  out[8] = h.type;
  out[9] = h.flags;
}

FrameHeader DecodeFrameHeader(const uint8_t in[kFrameHeaderSize]) {
  FrameHeader h;
  h.length = GetBe32(in);
  h.stream_id = GetBe32(in + 4);
  h.type = in[8];
  h.flags = in[9];
  return h;
}

void AppendFrame(std::string* out, uint32_t stream_id, FrameType type, uint8_t flags, std::string_view payload) {
  FrameHeader h;
  h.length = static_cast<uint32_t>(payload.size());
  h.stream_id = stream_id;
  h.type = static_cast<uint8_t>(type);
  h.flags = flags;
  uint8_t hdr[kFrameHeaderSize];
  EncodeFrameHeader(h, hdr);
  out->append(reinterpret_cast<const char*>(hdr), sizeof hdr);
  out->append(payload.data(), payload.size());
}

Error OversizeError(size_t length) {
  return Error(Code::kResourceExhausted,
               Format("message length %zu exceed maximum message size of %u", length, kMaxFramePayload));
}

// ---- FrameReader ------------------------------------------------------------

FrameReader::FrameReader(uint32_t max_payload) : max_payload_(max_payload) {}

void FrameReader::Reserve(size_t tail_room) {
  if (start_ == end_) {
    start_ = end_ = 0;
    // Drop a buffer grown for a big frame once it is no longer needed.
    if (cap_ > 4 * kChunk && tail_room <= kChunk) {
      buf_.reset();
      cap_ = 0;
    }
  }
  if (cap_ - end_ >= tail_room) return;
  size_t used = end_ - start_;
  if (start_ > 0 && cap_ - used >= tail_room) {
    std::memmove(buf_.get(), buf_.get() + start_, used);
    start_ = 0;
    end_ = used;
    return;
  }
  size_t new_cap = std::max(used + tail_room, kChunk);
  // new[] without value-initialisation: a 4 MiB frame buffer is not zeroed.
  std::unique_ptr<char[]> fresh(new char[new_cap]);
  if (used > 0) std::memcpy(fresh.get(), buf_.get() + start_, used);
  buf_ = std::move(fresh);
  cap_ = new_cap;
  start_ = 0;
  end_ = used;
}

void FrameReader::Feed(const void* data, size_t len) {
  if (len == 0) return;
  Reserve(len);
  std::memcpy(buf_.get() + end_, data, len);
  end_ += len;
}

char* FrameReader::Prepare(size_t* avail) {
  size_t want = kChunk;
  size_t used = end_ - start_;
  if (!discarding_ && used >= kFrameHeaderSize) {
    // A big frame is arriving: grow towards its announced size, but at most
    // doubling per step, so memory follows the bytes actually received. A
    // peer that sends only a header claiming 4 MiB costs one chunk, not 4 MiB.
    FrameHeader h = DecodeFrameHeader(reinterpret_cast<const uint8_t*>(buf_.get() + start_));
    if (h.length <= max_payload_) {
      size_t total = kFrameHeaderSize + h.length;
      if (total > used) want = std::max(want, std::min(total - used, cap_));
    }
  }
  Reserve(want);
  *avail = cap_ - end_;
  return buf_.get() + end_;
}

void FrameReader::Commit(size_t n) { end_ += std::min(n, cap_ - end_); }

FrameReader::Event FrameReader::Next(Frame* frame) {
  for (;;) {
    if (discarding_) {
      size_t drop = static_cast<size_t>(std::min<uint64_t>(discard_left_, end_ - start_));
      start_ += drop;
      discard_left_ -= drop;
      if (discard_left_ > 0) return Event::kNeedMore;
      discarding_ = false;
      frame->header = discard_header_;
      frame->payload = std::string_view();
      return Event::kOversize;
    }
    size_t used = end_ - start_;
    if (used < kFrameHeaderSize) return Event::kNeedMore;
    const char* p = buf_.get() + start_;
    FrameHeader h = DecodeFrameHeader(reinterpret_cast<const uint8_t*>(p));
    if (h.length > max_payload_) {
      // Never buffer it: skip the announced bytes as they arrive.
      start_ += kFrameHeaderSize;
      discarding_ = true;
      discard_left_ = h.length;
      discard_header_ = h;
      continue;
    }
    if (used - kFrameHeaderSize < h.length) return Event::kNeedMore;
    frame->header = h;
    frame->payload = std::string_view(p + kFrameHeaderSize, h.length);
    start_ += kFrameHeaderSize + h.length;
    return Event::kFrame;
  }
}

// ---- WriteQueue -------------------------------------------------------------

bool WriteQueue::Flush(int fd) {
  while (off_ < data_.size()) {
    ssize_t n = sys::RetryEintr(
        [&] { return ::send(fd, data_.data() + off_, data_.size() - off_, MSG_NOSIGNAL | MSG_DONTWAIT); });
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    off_ += static_cast<size_t>(n);
  }
  if (off_ == data_.size()) {
    Clear();
  } else if (off_ >= (64u << 10) && off_ >= data_.size() - off_) {
    // Mostly written: move the tail down so appends do not grow the string
    // forever while the peer drains slowly.
    data_.erase(0, off_);
    off_ = 0;
  }
  return true;
}

void WriteQueue::Clear() {
  off_ = 0;
  if (data_.capacity() > kWriteQueueKeep) {
    std::string().swap(data_);
  } else {
    data_.clear();
  }
}

}  // namespace outpost::wire
