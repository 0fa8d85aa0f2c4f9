// A raw HTTP/2 peer for the wire/h2_conn and wire/grpc_* tests: one end of a
// socketpair that the test writes hand-made frames to and reads the other
// side's frames from, with its own HPACK encoder and decoder. The loop is
// driven until a frame arrives or a deadline passes (then the test fails).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "loop/loop.h"
#include "test_util.h"
#include "wire/h2_conn.h"
#include "wire/hpack.h"

namespace outpost::wire::h2test {

struct RawFrame {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream = 0;
  std::string payload;
  hpack::HeaderList headers;  // HEADERS: the decoded block (CONTINUATIONs joined)
  uint32_t u32() const {
    const auto* u = reinterpret_cast<const uint8_t*>(payload.data());
    return payload.size() < 4 ? 0 : (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
  }
  // GOAWAY's error code, RST_STREAM's code.
  uint32_t code() const {
    if (type == h2::kGoaway && payload.size() >= 8) {
      RawFrame f;
      f.payload = payload.substr(4);
      return f.u32();
    }
    return u32();
  }
  std::string_view header(std::string_view name) const {
    for (const auto& f : headers) {
      if (f.name == name) return f.value;
    }
    return {};
  }
};

inline std::string Be32(uint32_t v) {
  return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
}

inline std::string Frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string out;
  h2::AppendFrameHeader(&out, static_cast<uint32_t>(payload.size()), type, flags, stream);
  out.append(payload.data(), payload.size());
  return out;
}

inline std::string Setting(uint16_t id, uint32_t v) {
  return std::string{static_cast<char>(id >> 8), static_cast<char>(id)} + Be32(v);
}

class RawPeer {
 public:
  // Makes the pair; *other gets the end for the side under test.
  bool Open(UniqueFd* other) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    fd_ = UniqueFd(sv[0]);
    *other = UniqueFd(sv[1]);
    return true;
  }
  int fd() const { return fd_.get(); }
  // Playing a server: the client's 24-octet preface comes before its frames.
  void ExpectClientPreface() { preface_left_ = sizeof h2::kClientPreface; }
  void CloseWrite() { ::shutdown(fd_.get(), SHUT_WR); }
  void Close() { fd_.Reset(); }

  void Send(std::string_view bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_.get(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      ASSERT_GT(n, 0) << std::strerror(errno);
      off += static_cast<size_t>(n);
    }
  }
  void SendFrame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
    Send(Frame(type, flags, stream, payload));
  }
  // A header block in one HEADERS frame.
  void SendHeaders(uint32_t stream, const hpack::HeaderList& list, bool end_stream) {
    std::string block;
    encoder_.Encode(list, &block);
    SendFrame(h2::kHeaders, h2::kFlagEndHeaders | (end_stream ? h2::kFlagEndStream : 0), stream, block);
  }
  std::string EncodeBlock(const hpack::HeaderList& list) {
    std::string block;
    encoder_.Encode(list, &block);
    return block;
  }
  // The client side of the connection start: preface and SETTINGS.
  void SendClientStart(std::string_view settings = {}) {
    Send(std::string(h2::kClientPreface, sizeof h2::kClientPreface));
    SendFrame(h2::kSettings, 0, 0, settings);
  }

  // Reads the next frame, running the loop meanwhile. False on EOF or
  // timeout.
  bool Next(Loop* loop, RawFrame* f, int64_t timeout = 5 * kNanosPerSecond) {
    int64_t deadline = MonotonicNanos() + timeout;
    for (;;) {
      if (TakeFrame(f)) return true;
      if (eof_) return false;
      char buf[65536];
      ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        eof_ = true;
        continue;
      }
      if (MonotonicNanos() > deadline) return false;
      (void)loop->RunOnce(10 * kNanosPerMilli);
    }
  }
  // Skips frames until one of type arrives.
  bool NextOfType(Loop* loop, uint8_t type, RawFrame* f, int64_t timeout = 5 * kNanosPerSecond) {
    while (Next(loop, f, timeout)) {
      if (f->type == type) return true;
    }
    return false;
  }
  // True once the other side has closed the connection (frames before
  // that are skipped).
  bool WaitClosed(Loop* loop, int64_t timeout = 5 * kNanosPerSecond) {
    RawFrame f;
    while (Next(loop, &f, timeout)) {
    }
    return eof_;
  }
  bool eof() const { return eof_; }
  hpack::Decoder& decoder() { return decoder_; }

 private:
  bool TakeFrame(RawFrame* f) {
    if (preface_left_ > 0) {
      if (in_.size() < preface_left_) return false;
      EXPECT_EQ(in_.substr(0, preface_left_), std::string(h2::kClientPreface, sizeof h2::kClientPreface));
      in_.erase(0, preface_left_);
      preface_left_ = 0;
    }
    for (;;) {
      if (in_.size() < 9) return false;
      const auto* u = reinterpret_cast<const uint8_t*>(in_.data());
      uint32_t len = (uint32_t{u[0]} << 16) | (uint32_t{u[1]} << 8) | u[2];
      if (in_.size() < 9 + len) return false;
      RawFrame got;
      got.type = u[3];
      got.flags = u[4];
      got.stream = ((uint32_t{u[5]} << 24) | (uint32_t{u[6]} << 16) | (uint32_t{u[7]} << 8) | u[8]) & 0x7fffffff;
      got.payload = in_.substr(9, len);
      in_.erase(0, 9 + len);
      if (got.type == h2::kHeaders || got.type == h2::kContinuation) {
        if (got.type == h2::kHeaders) {
          block_ = got.payload;
          block_frame_ = got;
        } else {
          block_ += got.payload;
        }
        if (!(got.flags & h2::kFlagEndHeaders)) continue;
        RawFrame whole = block_frame_;
        whole.flags |= h2::kFlagEndHeaders;
        EXPECT_TRUE(decoder_.Decode(block_, &whole.headers).ok());
        *f = std::move(whole);
        return true;
      }
      *f = std::move(got);
      return true;
    }
  }

  UniqueFd fd_;
  size_t preface_left_ = 0;
  std::string in_;
  bool eof_ = false;
  std::string block_;
  RawFrame block_frame_;
  hpack::Encoder encoder_;
  hpack::Decoder decoder_;
};

// A gRPC request's headers.
inline hpack::HeaderList RequestHeaders(std::string_view path, const hpack::HeaderList& extra = {}) {
  hpack::HeaderList h = {{":method", "POST"},
                         {":scheme", "http"},
                         {":path", std::string(path)},
                         {":authority", "localhost"},
                         {"content-type", "application/grpc"},
                         {"te", "trailers"}};
  h.insert(h.end(), extra.begin(), extra.end());
  return h;
}

// A message as gRPC frames it (uncompressed).
inline std::string GrpcMessage(std::string_view body) {
  std::string out(1, '\0');
  out += Be32(static_cast<uint32_t>(body.size()));
  out.append(body.data(), body.size());
  return out;
}

}  // namespace outpost::wire::h2test
