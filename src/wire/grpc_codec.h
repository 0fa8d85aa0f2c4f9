// The gRPC wire rules that are not HTTP/2 (grpc/grpc doc/PROTOCOL-HTTP2.md).
// Owns: the length-prefixed message framing in both directions, grpc-timeout
// (sending grpc-go's form, reading every valid one), grpc-message's percent
// encoding, grpc-status, and the statuses a client makes of an HTTP/2 reset
// or a non-gRPC answer. Does not own: streams, headers as a whole or calls
// (wire/grpc_session).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace outpost::wire::grpc {

constexpr size_t kMessagePrefixBytes = 5;

// The 5-octet prefix of an uncompressed message of n octets.
void MessagePrefix(size_t n, char out[kMessagePrefixBytes]);

// Reassembles length-prefixed messages from DATA payloads that split and
// join them arbitrarily. Memory: the incomplete message (at most the
// limit) and nothing for messages that arrive whole in one payload.
class MessageReader {
 public:
  explicit MessageReader(size_t max_message) : max_(max_message) {}

  // Takes the next piece of the stream; on_message(view) runs for each
  // whole message (the view lives only during the call) and returns false
  // to stop. Errors, after which the reader must not be fed again:
  //   ResourceExhausted "grpc: received message larger than max (N vs. M)"
  //   Internal          "grpc: compressed flag set with identity or empty encoding"
  //                     (when !compression_allowed)
  //   Unimplemented     "grpc: Decompressor is not installed for grpc-encoding "X""
  // (outpost sends and accepts no compression; encoding is the stream's
  // grpc-encoding, for the message).
  template <typename OnMessage>
  Status Feed(std::string_view data, std::string_view encoding, OnMessage&& on_message);

  // Octets of an incomplete message (or prefix) buffered: at the end of a
  // stream, non-zero means a message was cut off.
  size_t partial() const { return buf_.size(); }
  void set_max(size_t max_message) { max_ = max_message; }

 private:
  Status CheckPrefix(const char* prefix, std::string_view encoding, size_t* length) const;

  size_t max_;
  std::string buf_;  // the prefix and body so far of a message split across payloads
};

// grpc-timeout as grpc-go writes it: the smallest unit (n, u, m, S, M, H)
// whose rounded-up value has at most 8 digits. nanos must be > 0.
std::string EncodeTimeout(int64_t nanos);
// Any valid grpc-timeout: 1 to 8 digits and a unit of HMSmun (spaces
// around it are tolerated, as C-core does). False when malformed.
bool ParseTimeout(std::string_view text, int64_t* nanos);

// grpc-message: UTF-8 with octets outside 0x20-0x7e and '%' as %XX.
std::string PercentEncode(std::string_view text);
// Decodes %XX; a malformed escape is kept as it is (never an error).
std::string PercentDecode(std::string_view text);

// grpc-status: decimal, no sign or leading zeros. False when malformed.
bool ParseStatus(std::string_view text, int32_t* code);

// What a client makes of a stream the server reset (grpc-go's table).
Error ResetError(uint32_t h2_code);
// What a client makes of a non-200 :status without grpc-status.
Error HttpStatusError(std::string_view status);

template <typename OnMessage>
Status MessageReader::Feed(std::string_view data, std::string_view encoding, OnMessage&& on_message) {
  while (!data.empty()) {
    if (buf_.empty() && data.size() >= kMessagePrefixBytes) {
      // Whole messages in this payload are handed out without a copy.
      size_t length = 0;
      Status st = CheckPrefix(data.data(), encoding, &length);
      if (!st.ok()) return st;
      if (data.size() - kMessagePrefixBytes >= length) {
        if (!on_message(data.substr(kMessagePrefixBytes, length))) return OkStatus();
        data.remove_prefix(kMessagePrefixBytes + length);
        continue;
      }
    }
    size_t need = kMessagePrefixBytes;
    if (buf_.size() >= kMessagePrefixBytes) {
      size_t length = 0;
      Status st = CheckPrefix(buf_.data(), encoding, &length);
      if (!st.ok()) return st;
      need += length;
    }
    size_t take = need - buf_.size() < data.size() ? need - buf_.size() : data.size();
    buf_.append(data.data(), take);
    data.remove_prefix(take);
    if (buf_.size() == kMessagePrefixBytes) {
      size_t length = 0;
      Status st = CheckPrefix(buf_.data(), encoding, &length);
      if (!st.ok()) return st;
      if (length == 0) {
        buf_.clear();
        if (!on_message(std::string_view())) return OkStatus();
      } else {
        buf_.reserve(kMessagePrefixBytes + length);
      }
      continue;
    }
    if (buf_.size() == need) {
      std::string msg = std::move(buf_);
      buf_.clear();
      if (!on_message(std::string_view(msg).substr(kMessagePrefixBytes))) return OkStatus();
    }
  }
  return OkStatus();
}

}  // namespace outpost::wire::grpc
