#include "wire/codec.h"

#include <pb.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"
#include "status.pb.h"
#include "ttrpc.pb.h"
#include "wire/frame.h"

namespace outpost::wire {

namespace {

const pb_byte_t* PbBytes(const char* p) { return reinterpret_cast<const pb_byte_t*>(p); }

// ---- encoding ---------------------------------------------------------------
//
// The nanopb structs built here only point into the caller's Request or
// Response; callbacks read through those pointers (arg is non-const only
// because pb_callback_t says so).

pb_callback_t EncodeWith(bool (*fn)(pb_ostream_t*, const pb_field_t*, void* const*), const void* arg) {
  pb_callback_t cb;
  cb.funcs.encode = fn;
  cb.arg = const_cast<void*>(arg);
  return cb;
}

// arg: a std::string_view. Empty is the proto3 default and is omitted.
bool EncodeView(pb_ostream_t* stream, const pb_field_t* field, void* const* arg) {
  const auto* v = static_cast<const std::string_view*>(*arg);
  if (v->empty()) return true;
  return pb_encode_tag_for_field(stream, field) && pb_encode_string(stream, PbBytes(v->data()), v->size());
}

// arg: a std::vector<MetadataEntry>. An entry is present even when empty,
// as for any repeated message.
bool EncodeMetadata(pb_ostream_t* stream, const pb_field_t* field, void* const* arg) {
  for (const MetadataEntry& e : *static_cast<const std::vector<MetadataEntry>*>(*arg)) {
    ttrpc_KeyValue kv = ttrpc_KeyValue_init_zero;
    kv.key = EncodeWith(EncodeView, &e.key);
    kv.value = EncodeWith(EncodeView, &e.value);
    if (!pb_encode_tag_for_field(stream, field) || !pb_encode_submessage(stream, &ttrpc_KeyValue_msg, &kv)) {
      return false;
    }
  }
  return true;
}

// arg: a Response. Without has_status the field is omitted (a successful
// Go ttRPC server sends no status at all).
bool EncodeStatus(pb_ostream_t* stream, const pb_field_t* field, void* const* arg) {
  const auto* r = static_cast<const Response*>(*arg);
  if (!r->has_status) return true;
  google_rpc_Status st = google_rpc_Status_init_zero;
  st.code = r->code;
  st.message = EncodeWith(EncodeView, &r->message);
  return pb_encode_tag_for_field(stream, field) && pb_encode_submessage(stream, &google_rpc_Status_msg, &st);
}

// A message ready for pb_encode: its descriptor and its struct.
struct PbRequest {
  static constexpr const pb_msgdesc_t* kFields = &ttrpc_Request_msg;
  static constexpr const char* kName = "ttrpc.Request";
  ttrpc_Request msg;
};
struct PbResponse {
  static constexpr const pb_msgdesc_t* kFields = &ttrpc_Response_msg;
  static constexpr const char* kName = "ttrpc.Response";
  ttrpc_Response msg;
};

PbRequest ToPb(const Request& req) {
  PbRequest p{ttrpc_Request_init_zero};
  p.msg.service = EncodeWith(EncodeView, &req.service);
  p.msg.method = EncodeWith(EncodeView, &req.method);
  p.msg.payload = EncodeWith(EncodeView, &req.payload);
  p.msg.timeout_nano = req.timeout_nano;
  p.msg.metadata = EncodeWith(EncodeMetadata, &req.metadata);
  return p;
}

PbResponse ToPb(const Response& resp) {
  PbResponse p{ttrpc_Response_init_zero};
  p.msg.status = EncodeWith(EncodeStatus, &resp);
  p.msg.payload = EncodeWith(EncodeView, &resp.payload);
  return p;
}

// Our callbacks fail only when the output stream does, and the stream only
// at its limit, so any other failure is a broken invariant.
[[noreturn]] void EncodeFailedOrDie(const char* what, const char* why) {
  std::fprintf(stderr, "outpost: fatal: encode %s: %s\n", what, why);
  std::abort();
}

// Runs the callbacks in sizing mode.
template <typename Pb>
size_t SizeOrDie(const Pb& pb) {
  pb_ostream_t sizing = PB_OSTREAM_SIZING;
  if (!pb_encode(&sizing, Pb::kFields, &pb.msg)) EncodeFailedOrDie(Pb::kName, PB_GET_ERROR(&sizing));
  return sizing.bytes_written;
}

// Output stream state: appends straight to the caller's std::string (each
// byte is copied once), refusing to go past `room` bytes. nanopb writes
// tags and short lengths one byte at a time, hence the inline push_back.
struct Sink {
  std::string* out;
  size_t room;
  bool full = false;
};

bool SinkWrite(pb_ostream_t* stream, const pb_byte_t* buf, size_t count) {
  auto* sink = static_cast<Sink*>(stream->state);
  if (count > sink->room) {
    sink->full = true;
    return false;
  }
  sink->room -= count;
  if (count == 1) {
    sink->out->push_back(static_cast<char>(*buf));
  } else {
    sink->out->append(reinterpret_cast<const char*>(buf), count);
  }
  return true;
}

// Encodes in one pass, appending to *out: no sizing pass first, because
// nanopb's field iteration is most of the cost of encoding an envelope.
// Returns false, with *out as it was, when the encoding would exceed
// `limit` bytes.
template <typename Pb>
bool AppendWithinOrDie(const Pb& pb, size_t limit, std::string* out) {
  const size_t start = out->size();
  Sink sink{out, limit};
  pb_ostream_t os = {SinkWrite, &sink, SIZE_MAX, 0, nullptr};
  if (pb_encode(&os, Pb::kFields, &pb.msg)) return true;
  if (!sink.full) EncodeFailedOrDie(Pb::kName, PB_GET_ERROR(&os));
  out->resize(start);
  return false;
}

template <typename Msg>
void AppendEncodedOf(const Msg& msg, std::string* out) {
  (void)AppendWithinOrDie(ToPb(msg), SIZE_MAX, out);
}

// ---- decoding ---------------------------------------------------------------

// What the callbacks of one pb_decode call share.
struct DecodeCtx {
  // The bytes being decoded: every view handed out lies inside them.
  const char* begin = nullptr;
  const char* end = nullptr;
  // Why a callback failed. nanopb passes a callback's errmsg on for
  // length-delimited values only, so it is kept here.
  const char* reason = nullptr;
  // A submessage's complete error ("decode ttrpc.KeyValue field 1: ..."),
  // returned as is.
  std::string nested;
};

// arg of a decode callback: the call's context and where the value goes.
struct Slot {
  DecodeCtx* ctx;
  void* out;
};

pb_callback_t DecodeWith(bool (*fn)(pb_istream_t*, const pb_field_t*, void**), Slot* slot) {
  pb_callback_t cb;
  cb.funcs.decode = fn;
  cb.arg = slot;
  return cb;
}

// Takes the value of a length-delimited field as a view, without copying.
// nanopb hands a callback a substream of the input buffer: for a buffer
// stream, state points at the next unread byte and bytes_left is the
// value's length (a size_t: no 16-bit limit), and pb_read with a NULL
// buffer advances state without copying. A value of any other wire type is
// first copied into a small buffer on nanopb's stack (so that one callback
// can serve packed and unpacked repeated scalars); its state then lies
// outside the input, which is how a wire type mismatch shows here.
bool TakeView(pb_istream_t* stream, DecodeCtx* ctx, std::string_view* out) {
  const auto p = reinterpret_cast<uintptr_t>(stream->state);
  const auto begin = reinterpret_cast<uintptr_t>(ctx->begin);
  const auto end = reinterpret_cast<uintptr_t>(ctx->end);
  if (p < begin || p > end || stream->bytes_left > end - p) {
    ctx->reason = "wrong wire type";
    return false;
  }
  *out = std::string_view(static_cast<const char*>(stream->state), stream->bytes_left);
  return pb_read(stream, nullptr, stream->bytes_left);
}

// The number of the field that holds position `fail` (where nanopb stopped),
// found by walking the tags with nanopb again; 0 when it is inside a tag or
// the tag is 0.
uint32_t FieldAt(std::string_view bytes, const void* fail) {
  pb_istream_t s = pb_istream_from_buffer(PbBytes(bytes.data()), bytes.size());
  const auto at = reinterpret_cast<uintptr_t>(fail);
  uint32_t field = 0;
  while (reinterpret_cast<uintptr_t>(s.state) < at) {
    pb_wire_type_t wire_type;
    uint32_t tag;
    bool eof;
    if (!pb_decode_tag(&s, &wire_type, &tag, &eof) || reinterpret_cast<uintptr_t>(s.state) > at) return 0;
    field = tag;
    if (!pb_skip_field(&s, wire_type)) break;
  }
  return field;
}

// pb_decode_ex over bytes with ctx set up for the callbacks in *msg.
// Malformed input gives InvalidArgument naming the message and the field.
Status DecodeWithCtx(std::string_view bytes, const pb_msgdesc_t* fields, void* msg, unsigned flags, const char* what,
                     DecodeCtx* ctx) {
  ctx->begin = bytes.data();
  ctx->end = bytes.data() + bytes.size();
  pb_istream_t is = pb_istream_from_buffer(PbBytes(bytes.data()), bytes.size());
  if (pb_decode_ex(&is, fields, msg, flags)) return OkStatus();
  if (!ctx->nested.empty()) return Error(Code::kInvalidArgument, std::move(ctx->nested));
  const char* why = ctx->reason != nullptr ? ctx->reason : PB_GET_ERROR(&is);
  uint32_t field = FieldAt(bytes, is.state);
  if (field == 0) return Error(Code::kInvalidArgument, Format("decode %s: %s", what, why));
  return Error(Code::kInvalidArgument, Format("decode %s field %u: %s", what, field, why));
}

// arg: Slot with out = std::string_view. A repeated occurrence replaces the
// value (the last one wins, as in protobuf).
bool DecodeView(pb_istream_t* stream, const pb_field_t*, void** arg) {
  auto* slot = static_cast<Slot*>(*arg);
  return TakeView(stream, slot->ctx, static_cast<std::string_view*>(slot->out));
}

// Decodes the submessage in the current field; on failure its error goes to
// the parent context.
bool DecodeSubmessage(pb_istream_t* stream, Slot* parent, const pb_msgdesc_t* fields, void* msg, unsigned flags,
                      const char* what, DecodeCtx* ctx) {
  std::string_view sub;
  if (!TakeView(stream, parent->ctx, &sub)) return false;
  Status st = DecodeWithCtx(sub, fields, msg, flags, what, ctx);
  if (!st.ok()) {
    parent->ctx->nested = st.error().message();
    return false;
  }
  return true;
}

// arg: Slot with out = std::vector<MetadataEntry>; each KeyValue appends.
bool DecodeMetadata(pb_istream_t* stream, const pb_field_t*, void** arg) {
  auto* slot = static_cast<Slot*>(*arg);
  MetadataEntry e;
  DecodeCtx ctx;
  Slot key{&ctx, &e.key}, value{&ctx, &e.value};
  ttrpc_KeyValue kv = ttrpc_KeyValue_init_zero;
  kv.key = DecodeWith(DecodeView, &key);
  kv.value = DecodeWith(DecodeView, &value);
  if (!DecodeSubmessage(stream, slot, &ttrpc_KeyValue_msg, &kv, 0, "ttrpc.KeyValue", &ctx)) return false;
  static_cast<std::vector<MetadataEntry>*>(slot->out)->push_back(e);
  return true;
}

// arg: Slot with out = Response. details (field 3) is not in status.proto,
// so nanopb skips it. A repeated status merges into the earlier one, as
// protobuf specifies for embedded messages (hence PB_DECODE_NOINIT).
bool DecodeStatus(pb_istream_t* stream, const pb_field_t*, void** arg) {
  auto* slot = static_cast<Slot*>(*arg);
  auto* out = static_cast<Response*>(slot->out);
  DecodeCtx ctx;
  Slot message{&ctx, &out->message};
  google_rpc_Status st = google_rpc_Status_init_zero;
  st.code = out->code;
  st.message = DecodeWith(DecodeView, &message);
  if (!DecodeSubmessage(stream, slot, &google_rpc_Status_msg, &st, PB_DECODE_NOINIT, "google.rpc.Status", &ctx)) {
    return false;
  }
  out->has_status = true;
  out->code = st.code;
  return true;
}

}  // namespace

size_t EncodedSize(const Request& req) { return SizeOrDie(ToPb(req)); }
size_t EncodedSize(const Response& resp) { return SizeOrDie(ToPb(resp)); }
void AppendEncoded(const Request& req, std::string* out) { AppendEncodedOf(req, out); }
void AppendEncoded(const Response& resp, std::string* out) { AppendEncodedOf(resp, out); }

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
  DecodeCtx ctx;
  Slot service{&ctx, &out->service}, method{&ctx, &out->method}, payload{&ctx, &out->payload};
  Slot metadata{&ctx, &out->metadata};
  ttrpc_Request msg = ttrpc_Request_init_zero;
  msg.service = DecodeWith(DecodeView, &service);
  msg.method = DecodeWith(DecodeView, &method);
  msg.payload = DecodeWith(DecodeView, &payload);
  msg.metadata = DecodeWith(DecodeMetadata, &metadata);
  OUTPOST_RETURN_IF_ERROR(DecodeWithCtx(bytes, &ttrpc_Request_msg, &msg, 0, "ttrpc.Request", &ctx));
  out->timeout_nano = msg.timeout_nano;
  return OkStatus();
}

Status DecodeResponse(std::string_view bytes, Response* out) {
  *out = Response();
  DecodeCtx ctx;
  Slot status{&ctx, out}, payload{&ctx, &out->payload};
  ttrpc_Response msg = ttrpc_Response_init_zero;
  msg.status = DecodeWith(DecodeStatus, &status);
  msg.payload = DecodeWith(DecodeView, &payload);
  return DecodeWithCtx(bytes, &ttrpc_Response_msg, &msg, 0, "ttrpc.Response", &ctx);
}

namespace {

template <typename Msg>
Status AppendFrameOf(uint32_t stream_id, FrameType type, const Msg& msg, std::string* out) {
  const auto pb = ToPb(msg);
  const size_t start = out->size();
  out->append(kFrameHeaderSize, '\0');  // filled in once the length is known
  if (!AppendWithinOrDie(pb, kMaxFramePayload, out)) {
    out->resize(start);
    return OversizeError(SizeOrDie(pb));
  }
  FrameHeader h;
  h.length = static_cast<uint32_t>(out->size() - start - kFrameHeaderSize);
  h.stream_id = stream_id;
  h.type = static_cast<uint8_t>(type);
  EncodeFrameHeader(h, reinterpret_cast<uint8_t*>(&(*out)[start]));
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

// The one copy of these words outside rpc_server.cc, for the clients (see
// the Makefile's note on literals shared by -Os and -O2 code).
Error DeadlineExceededError() { return Error(Code::kDeadlineExceeded, "context deadline exceeded"); }

Result<std::string> ResponseToResult(const Response& resp) {
  if (resp.has_status && resp.code != 0) {
    // Codes outside our enum still travel intact: Code is an int32 enum.
    return Error(static_cast<Code>(resp.code), std::string(resp.message));
  }
  return std::string(resp.payload);
}

}  // namespace outpost::wire
