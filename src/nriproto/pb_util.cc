#include "nriproto/pb_util.h"

#include <cstring>

#include "base/strings.h"
#include "nriproto/codec.h"

namespace outpost::nriproto {

namespace {

// The length of the longest valid UTF-8 prefix of s.
size_t ValidPrefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8RuneAt(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

}  // namespace

bool IsValidUtf8(std::string_view s) { return ValidPrefix(s) == s.size(); }

std::string ValidUtf8(std::string_view s) {
  size_t i = ValidPrefix(s);
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  while (i < s.size()) {
    size_t n = Utf8RuneAt(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

void* Arena::Alloc(size_t n) {
  blocks_.emplace_back(new unsigned char[n == 0 ? 1 : n]());
  return blocks_.back().get();
}

char* Arena::S(const std::string& s) {
  if (s.empty()) return nullptr;
  std::string v = ValidUtf8(s);
  char* p = static_cast<char*>(Alloc(v.size() + 1));
  std::memcpy(p, v.data(), v.size());
  return p;
}

pb_bytes_array_t* Arena::Bytes(const std::string& data) {
  size_t n = data.size() > PB_SIZE_MAX ? PB_SIZE_MAX : data.size();
  auto* b = static_cast<pb_bytes_array_t*>(Alloc(PB_BYTES_ARRAY_T_ALLOCSIZE(n)));
  b->size = static_cast<pb_size_t>(n);
  if (n > 0) std::memcpy(b->bytes, data.data(), n);
  return b;
}

char** StringList(const std::vector<std::string>& v, Arena& a, pb_size_t* count) {
  char** l = a.Array<char*>(v.size(), count);
  // A NULL element encodes as "" (an element of a repeated field is always sent).
  for (pb_size_t i = 0; i < *count; ++i) l[i] = a.S(v[i]);
  return l;
}

pb::KeyValue* StringMap(const std::map<std::string, std::string>& map, Arena& a, pb_size_t* count) {
  std::map<std::string, std::string> tmp;
  const auto& m = SentKeys(map, &tmp);
  pb::KeyValue* l = a.Array<pb::KeyValue>(m.size(), count);
  pb_size_t i = 0;
  for (auto it = m.begin(); i < *count; ++it, ++i) {  // sorted by the key as sent
    l[i].key = a.S(it->first);
    l[i].value = a.S(it->second);
  }
  return l;
}

pb::OptionalString* WrapString(const std::optional<std::string>& v, Arena& a) {
  if (!v) return nullptr;
  auto* m = a.New<pb::OptionalString>();
  m->value = a.S(*v);
  return m;
}

std::vector<std::string> ListOf(char* const* v, pb_size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (pb_size_t i = 0; i < n; ++i) out.push_back(PbString(v[i]));
  return out;
}

std::map<std::string, std::string> MapOf(const pb::KeyValue* kv, pb_size_t n) {
  std::map<std::string, std::string> m;
  // A repeated key: the last entry wins, as in Go.
  for (pb_size_t i = 0; i < n; ++i) m[PbString(kv[i].key)] = PbString(kv[i].value);
  return m;
}

std::string BytesOf(const pb_bytes_array_t* b) {
  return b ? std::string(reinterpret_cast<const char*>(b->bytes), b->size) : std::string();
}

std::optional<std::string> UnwrapString(const pb::OptionalString* m) {
  if (!m) return std::nullopt;
  return PbString(m->value);
}

}  // namespace outpost::nriproto
