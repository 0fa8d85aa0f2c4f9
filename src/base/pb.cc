#include "base/pb.h"

namespace outpost {

Result<std::string> PbEncode(const pb_msgdesc_t* fields, const void* msg, const char* what) {
  size_t size = 0;
  if (!pb_get_encoded_size(&size, fields, msg)) {
    return Error(Code::kInternal, std::string("encode ") + what + ": cannot compute size");
  }
  std::string out(size, '\0');
  pb_ostream_t os = pb_ostream_from_buffer(reinterpret_cast<pb_byte_t*>(&out[0]), size);
  if (!pb_encode(&os, fields, msg)) {
    return Error(Code::kInternal, std::string("encode ") + what + ": " + PB_GET_ERROR(&os));
  }
  out.resize(os.bytes_written);
  return out;
}

Status PbDecode(std::string_view bytes, const pb_msgdesc_t* fields, void* msg, const char* what) {
  pb_istream_t is = pb_istream_from_buffer(reinterpret_cast<const pb_byte_t*>(bytes.data()), bytes.size());
  // pb_decode releases partially decoded allocations itself on failure.
  if (!pb_decode(&is, fields, msg)) {
    return Error(Code::kInvalidArgument, std::string("decode ") + what + ": " + PB_GET_ERROR(&is));
  }
  return OkStatus();
}

namespace {

bool EncodeBytes(pb_ostream_t* stream, const pb_field_t* field, void* const* arg) {
  const auto* v = static_cast<const std::string_view*>(*arg);
  if (v->empty()) return true;
  return pb_encode_tag_for_field(stream, field) &&
         pb_encode_string(stream, reinterpret_cast<const pb_byte_t*>(v->data()), v->size());
}

// Decoded values are bounded by what the caller decodes from (a gRPC
// message is at most its limit); nothing more is needed here.
bool DecodeBytes(pb_istream_t* stream, const pb_field_t*, void** arg) {
  auto* out = static_cast<std::string*>(*arg);
  out->resize(stream->bytes_left);
  return pb_read(stream, reinterpret_cast<pb_byte_t*>(&(*out)[0]), stream->bytes_left);
}

}  // namespace

pb_callback_t PbBytesOut(const std::string_view* value) {
  pb_callback_t cb;
  cb.funcs.encode = EncodeBytes;
  cb.arg = const_cast<std::string_view*>(value);
  return cb;
}

pb_callback_t PbBytesIn(std::string* out) {
  pb_callback_t cb;
  cb.funcs.decode = DecodeBytes;
  cb.arg = out;
  return cb;
}

}  // namespace outpost
