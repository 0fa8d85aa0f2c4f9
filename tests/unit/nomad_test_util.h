// Builders of hclspec.Spec protobuf messages for the Nomad codec tests
// (field numbers as in proto/nomad_hcl_spec.proto), and hex helpers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outpost::driver::nomad::test {

inline std::string Varint(uint64_t v) {
  std::string out;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(static_cast<char>(b | (v ? 0x80 : 0)));
  } while (v);
  return out;
}

inline std::string Bytes(uint32_t field, std::string_view b) {
  return Varint(uint64_t{field} << 3 | 2) + Varint(b.size()) + std::string(b);
}

inline std::string Num(uint32_t field, uint64_t v) { return Varint(uint64_t{field} << 3) + Varint(v); }

// Spec{field: message}
inline std::string SpecOf(uint32_t field, const std::string& msg) { return Bytes(field, msg); }

inline std::string Attr(const std::string& name, const std::string& type, bool required = false) {
  return SpecOf(3, Bytes(1, name) + Bytes(2, type) + (required ? Num(3, 1) : ""));
}
inline std::string Block(const std::string& name, const std::string& nested, bool required = false) {
  return SpecOf(4, Bytes(1, name) + (required ? Num(2, 1) : "") + Bytes(3, nested));
}
inline std::string BlockAttrs(const std::string& name, const std::string& type, bool required = false) {
  return SpecOf(5, Bytes(1, name) + Bytes(2, type) + (required ? Num(3, 1) : ""));
}
inline std::string BlockList(const std::string& name, const std::string& nested, uint64_t min = 0, uint64_t max = 0,
                             uint32_t kind = 6) {
  return SpecOf(kind, Bytes(1, name) + (min ? Num(2, min) : "") + (max ? Num(3, max) : "") + Bytes(4, nested));
}
inline std::string BlockSet(const std::string& name, const std::string& nested, uint64_t min = 0, uint64_t max = 0) {
  return BlockList(name, nested, min, max, 7);
}
inline std::string BlockMap(const std::string& name, const std::vector<std::string>& labels, const std::string& nested) {
  std::string m = Bytes(1, name);
  for (const std::string& l : labels) m += Bytes(2, l);
  return SpecOf(8, m + Bytes(3, nested));
}
inline std::string Default(const std::string& primary, const std::string& def) {
  return SpecOf(9, Bytes(1, primary) + Bytes(2, def));
}
inline std::string Literal(const std::string& value) { return SpecOf(10, Bytes(1, value)); }
inline std::string Object(const std::vector<std::pair<std::string, std::string>>& attrs) {
  std::string m;
  for (const auto& [k, v] : attrs) m += Bytes(1, Bytes(1, k) + Bytes(2, v));
  return SpecOf(1, m);
}
inline std::string Array(const std::vector<std::string>& values) {
  std::string m;
  for (const std::string& v : values) m += Bytes(1, v);
  return SpecOf(2, m);
}

inline std::string Hex(std::string_view hex) {
  std::string out;
  int hi = -1;
  for (char c : hex) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) continue;
    if (hi < 0) {
      hi = d;
    } else {
      out.push_back(static_cast<char>(hi << 4 | d));
      hi = -1;
    }
  }
  return out;
}

inline std::string ToHex(std::string_view b) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i) out.push_back(' ');
    out.push_back(kHex[static_cast<uint8_t>(b[i]) >> 4]);
    out.push_back(kHex[static_cast<uint8_t>(b[i]) & 15]);
  }
  return out;
}

}  // namespace outpost::driver::nomad::test
