// ttRPC envelope codec (containerd/ttrpc Request/Response). Owns: encoding and
// decoding of ttrpc.Request, ttrpc.Response and google.rpc.Status, and
// building whole Request/Response frames. Does not own: framing of the byte
// stream (wire/frame) or the service payloads inside the envelopes.
//
// nanopb, with every string, bytes and message field of the envelopes an
// FT_CALLBACK field (proto/ttrpc.options, proto/status.options). Debian's
// nanopb runtime is built with a 16-bit pb_size_t, so an FT_POINTER or
// FT_STATIC bytes field cannot exceed 65,535 bytes, while ttRPC payloads go
// up to 4 MiB; callbacks see size_t lengths and have no such limit. They
// also let decoding hand out views of the input instead of copies. nanopb
// writes fields in number order and omits proto3 defaults, as protobuf does
// (tests/unit/proto_roundtrip_test.cc checks the bytes against protoc's).
// A successful Response omits status.
//
// Decoded messages hold string_views into the decoded bytes; they are valid
// only as long as those bytes are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace outpost::wire {

struct MetadataEntry {
  std::string_view key;
  std::string_view value;
};

// ttrpc.Request {service=1, method=2, payload=3, timeout_nano=4, metadata=5}
struct Request {
  std::string_view service;
  std::string_view method;
  std::string_view payload;
  int64_t timeout_nano = 0;  // 0 = no deadline
  std::vector<MetadataEntry> metadata;
};

// ttrpc.Response {status=1 {code=1, message=2}, payload=2}
struct Response {
  bool has_status = false;
  int32_t code = 0;
  std::string_view message;
  std::string_view payload;
};

size_t EncodedSize(const Request& req);
size_t EncodedSize(const Response& resp);
void AppendEncoded(const Request& req, std::string* out);
void AppendEncoded(const Response& resp, std::string* out);
std::string Encode(const Request& req);
std::string Encode(const Response& resp);

// Malformed input gives InvalidArgument naming the message and field.
// Unknown fields are skipped. *out is overwritten (metadata keeps its
// capacity, so a reused Request decodes without allocating).
Status DecodeRequest(std::string_view bytes, Request* out);
Status DecodeResponse(std::string_view bytes, Response* out);

// Whole frames (header + encoded envelope) appended to *out. Fails with
// ResourceExhausted ("message length N exceed maximum message size of
// 4194304") and appends nothing when the envelope is over kMaxFramePayload.
Status AppendRequestFrame(uint32_t stream_id, const Request& req, std::string* out);
Status AppendResponseFrame(uint32_t stream_id, const Response& resp, std::string* out);

// The Response for a failed call: status {code, message}, no payload. A
// kOk code is sent as kUnknown so that an error never reads as success.
// The message is a view into error, so a temporary Error is refused.
Response ErrorResponse(const Error& error);
Response ErrorResponse(const Error&& error) = delete;
// A call whose deadline passed: DeadlineExceeded, "context deadline
// exceeded" (ttRPC's wording), the same from client and server.
Error DeadlineExceededError();
// Success: payload; a status with a non-zero code: Error(code, message).
// A missing status, or code 0, is success (what Go's ttrpc client does).
Result<std::string> ResponseToResult(const Response& resp);

}  // namespace outpost::wire
