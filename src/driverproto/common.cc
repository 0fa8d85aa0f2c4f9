#include "driverproto/common.h"

#include <algorithm>

namespace outpost::driverproto {

std::map<std::string, std::string> MapOf(const outpost_driver_v1_KeyValue* kv, pb_size_t n) {
  std::map<std::string, std::string> m;
  for (pb_size_t i = 0; i < n; ++i) m[PbString(kv[i].key)] = PbString(kv[i].value);
  return m;
}

std::vector<std::string> ListOf(char* const* v, pb_size_t n) {
  std::vector<std::string> out;
  for (pb_size_t i = 0; i < n; ++i) out.push_back(PbString(v[i]));
  return out;
}

pb_bytes_array_t* Bytes(const std::string& data, std::vector<uint8_t>* buf) {
  buf->assign(PB_BYTES_ARRAY_T_ALLOCSIZE(data.size()), 0);
  auto* b = reinterpret_cast<pb_bytes_array_t*>(buf->data());
  b->size = static_cast<pb_size_t>(data.size());
  std::copy(data.begin(), data.end(), b->bytes);
  return b;
}

std::string BytesOf(const pb_bytes_array_t* b) {
  return b ? std::string(reinterpret_cast<const char*>(b->bytes), b->size) : std::string();
}

}  // namespace outpost::driverproto
