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

}  // namespace outpost
