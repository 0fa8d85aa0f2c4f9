// gRPC wire rules (see grpc_codec.h).
#include "wire/grpc_codec.h"

#include "wire/h2_conn.h"

namespace outpost::wire::grpc {

void MessagePrefix(size_t n, char out[kMessagePrefixBytes]) {
  out[0] = 0;
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
}

Status MessageReader::CheckPrefix(const char* prefix, std::string_view encoding, size_t* length) const {
  const auto* u = reinterpret_cast<const uint8_t*>(prefix);
  uint32_t n = (uint32_t{u[1]} << 24) | (uint32_t{u[2]} << 16) | (uint32_t{u[3]} << 8) | u[4];
  if (u[0] != 0) {
    if (encoding.empty() || encoding == "identity") {
      return Error(Code::kInternal, "grpc: compressed flag set with identity or empty encoding");
    }
    return Error(Code::kUnimplemented,
                 "grpc: Decompressor is not installed for grpc-encoding \"" + std::string(encoding) + "\"");
  }
  if (n > max_) {
    return Error(Code::kResourceExhausted, "grpc: received message larger than max (" + std::to_string(n) + " vs. " +
                                               std::to_string(max_) + ")");
  }
  *length = n;
  return OkStatus();
}

std::string EncodeTimeout(int64_t nanos) {
  static const struct {
    int64_t nanos;
    char unit;
  } kUnits[] = {{1, 'n'},
                {1000, 'u'},
                {1000000, 'm'},
                {1000000000, 'S'},
                {60LL * 1000000000, 'M'},
                {3600LL * 1000000000, 'H'}};
  constexpr int64_t kMaxValue = 99999999;
  if (nanos < 1) nanos = 1;
  for (const auto& u : kUnits) {
    int64_t v = nanos / u.nanos + (nanos % u.nanos != 0 ? 1 : 0);
    if (v <= kMaxValue) return std::to_string(v) + u.unit;
  }
  return std::to_string(kMaxValue) + "H";
}

bool ParseTimeout(std::string_view text, int64_t* nanos) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.size() < 2 || text.size() > 9) return false;
  int64_t unit = 0;
  switch (text.back()) {
    case 'n': unit = 1; break;
    case 'u': unit = 1000; break;
    case 'm': unit = 1000000; break;
    case 'S': unit = 1000000000; break;
    case 'M': unit = 60LL * 1000000000; break;
    case 'H': unit = 3600LL * 1000000000; break;
    default: return false;
  }
  int64_t v = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  // 99,999,999 hours overflow int64 nanoseconds: saturate (as good as never).
  constexpr int64_t kMax = INT64_MAX / 2;
  *nanos = v > kMax / unit ? kMax : v * unit;
  return true;
}

std::string PercentEncode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c <= 0x7e && c != '%') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

static int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

bool ParseStatus(std::string_view text, int32_t* code) {
  if (text.empty() || text.size() > 9 || (text.size() > 1 && text[0] == '0')) return false;
  int32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *code = v;
  return true;
}

Error ResetError(uint32_t h2_code) {
  Code code = Code::kInternal;
  switch (h2_code) {
    case h2::kRefusedStream: code = Code::kUnavailable; break;
    case h2::kCancel: code = Code::kCanceled; break;
    case h2::kFlowControlError:
    case h2::kEnhanceYourCalm: code = Code::kResourceExhausted; break;
    case h2::kInadequateSecurity: code = Code::kPermissionDenied; break;
    default:
      if (h2_code > h2::kHttp11Required) code = Code::kUnknown;
      break;
  }
  return Error(code, std::string("stream terminated by RST_STREAM with error code: ") + h2::ErrorCodeName(h2_code));
}

Error HttpStatusError(std::string_view status) {
  Code code = Code::kUnknown;
  if (status == "400") {
    code = Code::kInternal;
  } else if (status == "401") {
    code = Code::kUnauthenticated;
  } else if (status == "403") {
    code = Code::kPermissionDenied;
  } else if (status == "404") {
    code = Code::kUnimplemented;
  } else if (status == "429" || status == "502" || status == "503" || status == "504") {
    code = Code::kUnavailable;
  }
  return Error(code, "unexpected HTTP status code received from server: " + std::string(status));
}

}  // namespace outpost::wire::grpc
