// nanopb helpers. Owns: encoding a message to std::string, decoding with
// errors that name the message type, and PbOwned<T>, which releases what
// nanopb malloc'ed (PB_ENABLE_MALLOC, FT_POINTER fields) when it goes.
//
// Encoding side convention: FT_POINTER string fields may point into
// std::strings owned by the caller (PbStr); such messages are never passed to
// pb_release.
#pragma once

#include <pb.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include <string>
#include <string_view>

#include "base/error.h"

namespace outpost {

Result<std::string> PbEncode(const pb_msgdesc_t* fields, const void* msg, const char* what);
// msg must be zero-initialised; on success the caller owns allocations in it
// (use PbOwned). On failure nothing stays allocated.
Status PbDecode(std::string_view bytes, const pb_msgdesc_t* fields, void* msg, const char* what);

// For the encode side: a char* view of a string nanopb will only read.
inline char* PbStr(const std::string& s) { return const_cast<char*>(s.c_str()); }
// For the decode side: a FT_POINTER string that may be absent.
inline std::string PbString(const char* s) { return s ? std::string(s) : std::string(); }

// FT_CALLBACK bytes or string fields, for values past nanopb's 16-bit
// FT_POINTER limit. Encoding: the field is written from *value (omitted
// when empty, as proto3 does), which must outlive the encode. Decoding: the
// field's bytes are copied into *out (bounded by the message decoded).
pb_callback_t PbBytesOut(const std::string_view* value);
pb_callback_t PbBytesIn(std::string* out);

template <typename T>
class PbOwned {
 public:
  explicit PbOwned(const pb_msgdesc_t* fields) : fields_(fields), msg_{} {}
  ~PbOwned() { pb_release(fields_, &msg_); }
  PbOwned(const PbOwned&) = delete;
  PbOwned& operator=(const PbOwned&) = delete;

  Status Decode(std::string_view bytes, const char* what) {
    pb_release(fields_, &msg_);
    msg_ = T{};
    return PbDecode(bytes, fields_, &msg_, what);
  }
  T* operator->() { return &msg_; }
  T& operator*() { return msg_; }

 private:
  const pb_msgdesc_t* fields_;
  T msg_;
};

}  // namespace outpost
