// The JSON-lines calls logs the Python test plugins write (device plugin,
// Nomad driver), read by the benchmarks that host them.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/strings.h"
#include "base/sys.h"

namespace outpost::bench {

// The JSON objects of a calls log, in order; lines that are not one are
// skipped.
inline std::vector<picojson::object> Calls(const std::string& path) {
  std::vector<picojson::object> out;
  auto text = sys::ReadFile(path, 256 << 20);
  if (!text.ok()) return out;
  for (const std::string& line : Split(*text, '\n')) {
    picojson::value v;
    if (line.empty() || !picojson::parse(v, line).empty() || !v.is<picojson::object>()) continue;
    out.push_back(v.get<picojson::object>());
  }
  return out;
}
// A string member ("" when absent or not a string).
inline std::string Str(const picojson::object& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->second.is<std::string>() ? it->second.get<std::string>() : "";
}
// A number member (-1 when absent or not a number).
inline int64_t Num(const picojson::object& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->second.is<double>() ? static_cast<int64_t>(it->second.get<double>()) : -1;
}
// s as a JSON string literal.
inline std::string Json(const std::string& s) { return picojson::value(s).serialize(); }

}  // namespace outpost::bench
