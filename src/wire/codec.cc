#include "wire/codec.h"

#include "base/strings.h"
#include "wire/frame.h"

namespace outpost::wire {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

// Size of a length-delimited field with a one-byte tag (field numbers < 16),
// or 0 when proto3 omits it.
size_t BytesFieldSize(std::string_view v) { return v.empty() ? 0 : 1 + VarintSize(v.size()) + v.size(); }

void PutBytesField(std::string* out, uint32_t field, std::string_view v) {
  if (v.empty()) return;
  out->push_back(static_cast<char>(field << 3 | kLengthDelimited));
  PutVarint(out, v.size());
  out->append(v.data(), v.size());
}

size_t KeyValueSize(const MetadataEntry& kv) { return BytesFieldSize(kv.key) + BytesFieldSize(kv.value); }

// int32 fields are sign-extended to 64 bits on the wire (protobuf rule).
uint64_t Int32Wire(int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

size_t StatusSize(const Response& r) {
  return (r.code != 0 ? 1 + VarintSize(Int32Wire(r.code)) : 0) + BytesFieldSize(r.message);
}

// Reads protobuf fields one at a time from a byte range.
class FieldReader {
 public:
  FieldReader(std::string_view bytes, const char* message) : p_(bytes.data()), end_(p_ + bytes.size()), msg_(message) {}

  bool done() const { return p_ == end_; }
  uint32_t field() const { return field_; }
  uint32_t wire_type() const { return wire_type_; }

  Status NextTag() {
    uint64_t tag;
    OUTPOST_RETURN_IF_ERROR(ReadVarint(&tag, "tag"));
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff) return Fail("invalid field number in tag");
    field_ = static_cast<uint32_t>(tag >> 3);
    wire_type_ = static_cast<uint32_t>(tag & 7);
    return OkStatus();
  }

  Status Varint(uint64_t* v) {
    OUTPOST_RETURN_IF_ERROR(Expect(kVarint));
    return ReadVarint(v, "varint");
  }

  Status Bytes(std::string_view* v) {
    OUTPOST_RETURN_IF_ERROR(Expect(kLengthDelimited));
    uint64_t len;
    OUTPOST_RETURN_IF_ERROR(ReadVarint(&len, "length"));
    if (len > static_cast<uint64_t>(end_ - p_)) return Fail("length-delimited value runs past the end");
    *v = std::string_view(p_, static_cast<size_t>(len));
    p_ += len;
    return OkStatus();
  }

  Status Skip() {
    switch (wire_type_) {
      case kVarint: {
        uint64_t v;
        return ReadVarint(&v, "varint");
      }
      case kFixed64: return Advance(8);
      case kFixed32: return Advance(4);
      case kLengthDelimited: {
        std::string_view v;
        return Bytes(&v);
      }
      default: return Fail(Format("unsupported wire type %u", wire_type_));
    }
  }

 private:
  Status ReadVarint(uint64_t* v, const char* what) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p_ == end_) return Fail(Format("truncated %s", what));
      uint8_t b = static_cast<uint8_t>(*p_++);
      if (shift == 63 && b > 1) return Fail(Format("%s overflows 64 bits", what));
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *v = result;
        return OkStatus();
      }
    }
    return Fail(Format("%s longer than 10 bytes", what));
  }

  Status Advance(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return Fail("truncated fixed-width value");
    p_ += n;
    return OkStatus();
  }

  Status Expect(uint32_t wire_type) {
    if (wire_type_ != wire_type) return Fail(Format("wire type %u, expected %u", wire_type_, wire_type));
    return OkStatus();
  }

  Error Fail(const std::string& what) const {
    if (field_ == 0) return Error(Code::kInvalidArgument, Format("decode %s: %s", msg_, what.c_str()));
    return Error(Code::kInvalidArgument, Format("decode %s field %u: %s", msg_, field_, what.c_str()));
  }

  const char* p_;
  const char* end_;
  const char* msg_;
  uint32_t field_ = 0;
  uint32_t wire_type_ = 0;
};

Status DecodeKeyValue(std::string_view bytes, MetadataEntry* kv) {
  FieldReader r(bytes, "ttrpc.KeyValue");
  while (!r.done()) {
    OUTPOST_RETURN_IF_ERROR(r.NextTag());
    switch (r.field()) {
      case 1: OUTPOST_RETURN_IF_ERROR(r.Bytes(&kv->key)); break;
      case 2: OUTPOST_RETURN_IF_ERROR(r.Bytes(&kv->value)); break;
      default: OUTPOST_RETURN_IF_ERROR(r.Skip());
    }
  }
  return OkStatus();
}

// google.rpc.Status; field 3 (details) is skipped. Repeated occurrences of
// the embedded message merge, as protobuf specifies.
Status DecodeStatus(std::string_view bytes, Response* out) {
  FieldReader r(bytes, "google.rpc.Status");
  while (!r.done()) {
    OUTPOST_RETURN_IF_ERROR(r.NextTag());
    switch (r.field()) {
      case 1: {
        uint64_t v;
        OUTPOST_RETURN_IF_ERROR(r.Varint(&v));
        out->code = static_cast<int32_t>(static_cast<uint32_t>(v));
        break;
      }
      case 2: OUTPOST_RETURN_IF_ERROR(r.Bytes(&out->message)); break;
      default: OUTPOST_RETURN_IF_ERROR(r.Skip());
    }
  }
  return OkStatus();
}

}  // namespace

size_t EncodedSize(const Request& req) {
  size_t n = BytesFieldSize(req.service) + BytesFieldSize(req.method) + BytesFieldSize(req.payload);
  if (req.timeout_nano != 0) n += 1 + VarintSize(static_cast<uint64_t>(req.timeout_nano));
  for (const MetadataEntry& kv : req.metadata) {
    size_t kvn = KeyValueSize(kv);
    n += 1 + VarintSize(kvn) + kvn;  // repeated message: present even when empty
  }
  return n;
}

void AppendEncoded(const Request& req, std::string* out) {
  out->reserve(out->size() + EncodedSize(req));
  PutBytesField(out, 1, req.service);
  PutBytesField(out, 2, req.method);
  PutBytesField(out, 3, req.payload);
  if (req.timeout_nano != 0) {
    out->push_back(static_cast<char>(4 << 3 | kVarint));
    PutVarint(out, static_cast<uint64_t>(req.timeout_nano));
  }
  for (const MetadataEntry& kv : req.metadata) {
    out->push_back(static_cast<char>(5 << 3 | kLengthDelimited));
    PutVarint(out, KeyValueSize(kv));
    PutBytesField(out, 1, kv.key);
    PutBytesField(out, 2, kv.value);
  }
}

size_t EncodedSize(const Response& resp) {
  size_t n = BytesFieldSize(resp.payload);
  if (resp.has_status) {
    size_t sn = StatusSize(resp);
    n += 1 + VarintSize(sn) + sn;
  }
  return n;
}

void AppendEncoded(const Response& resp, std::string* out) {
  out->reserve(out->size() + EncodedSize(resp));
  if (resp.has_status) {
    out->push_back(static_cast<char>(1 << 3 | kLengthDelimited));
    PutVarint(out, StatusSize(resp));
    if (resp.code != 0) {
      out->push_back(static_cast<char>(1 << 3 | kVarint));
      PutVarint(out, Int32Wire(resp.code));
    }
    PutBytesField(out, 2, resp.message);
  }
  PutBytesField(out, 2, resp.payload);
}

std::string Encode(const Request& req) {
  std::string s;
  AppendEncoded(req, &s);
  return s;
}

std::string Encode(const Response& resp) {
  std::string s;
  AppendEncoded(resp, &s);
  return s;
}

Status DecodeRequest(std::string_view bytes, Request* out) {
  out->service = out->method = out->payload = std::string_view();
  out->timeout_nano = 0;
  out->metadata.clear();
  FieldReader r(bytes, "ttrpc.Request");
  while (!r.done()) {
    OUTPOST_RETURN_IF_ERROR(r.NextTag());
    switch (r.field()) {
      case 1: OUTPOST_RETURN_IF_ERROR(r.Bytes(&out->service)); break;
      case 2: OUTPOST_RETURN_IF_ERROR(r.Bytes(&out->method)); break;
      case 3: OUTPOST_RETURN_IF_ERROR(r.Bytes(&out->payload)); break;
      case 4: {
        uint64_t v;
        OUTPOST_RETURN_IF_ERROR(r.Varint(&v));
        out->timeout_nano = static_cast<int64_t>(v);
        break;
      }
      case 5: {
        std::string_view sub;
        OUTPOST_RETURN_IF_ERROR(r.Bytes(&sub));
        MetadataEntry kv;
        OUTPOST_RETURN_IF_ERROR(DecodeKeyValue(sub, &kv));
        out->metadata.push_back(kv);
        break;
      }
      default: OUTPOST_RETURN_IF_ERROR(r.Skip());
    }
  }
  return OkStatus();
}

Status DecodeResponse(std::string_view bytes, Response* out) {
  *out = Response();
  FieldReader r(bytes, "ttrpc.Response");
  while (!r.done()) {
    OUTPOST_RETURN_IF_ERROR(r.NextTag());
    switch (r.field()) {
      case 1: {
        std::string_view sub;
        OUTPOST_RETURN_IF_ERROR(r.Bytes(&sub));
        out->has_status = true;
        OUTPOST_RETURN_IF_ERROR(DecodeStatus(sub, out));
        break;
      }
      case 2: OUTPOST_RETURN_IF_ERROR(r.Bytes(&out->payload)); break;
      default: OUTPOST_RETURN_IF_ERROR(r.Skip());
    }
  }
  return OkStatus();
}

namespace {

template <typename Msg>
Status AppendFrameOf(uint32_t stream_id, FrameType type, const Msg& msg, std::string* out) {
  size_t len = EncodedSize(msg);
  if (len > kMaxFramePayload) return OversizeError(len);
  FrameHeader h;
  h.length = static_cast<uint32_t>(len);
  h.stream_id = stream_id;
  h.type = static_cast<uint8_t>(type);
  uint8_t hdr[kFrameHeaderSize];
  EncodeFrameHeader(h, hdr);
  out->reserve(out->size() + kFrameHeaderSize + len);
  out->append(reinterpret_cast<const char*>(hdr), sizeof hdr);
  AppendEncoded(msg, out);
  return OkStatus();
}

}  // namespace

Status AppendRequestFrame(uint32_t stream_id, const Request& req, std::string* out) {
  return AppendFrameOf(stream_id, FrameType::kRequest, req, out);
}

Status AppendResponseFrame(uint32_t stream_id, const Response& resp, std::string* out) {
  return AppendFrameOf(stream_id, FrameType::kResponse, resp, out);
}

Response ErrorResponse(const Error& error) {
  Response r;
  r.has_status = true;
  r.code = error.code() == Code::kOk ? static_cast<int32_t>(Code::kUnknown) : static_cast<int32_t>(error.code());
  r.message = error.message();
  return r;
}

Result<std::string> ResponseToResult(const Response& resp) {
  if (resp.has_status && resp.code != 0) {
    // Codes outside our enum still travel intact: Code is an int32 enum.
    return Error(static_cast<Code>(resp.code), std::string(resp.message));
  }
  return std::string(resp.payload);
}

}  // namespace outpost::wire
