// outpost.driver.v1.Driver (proto/driver.proto) for both of its sides: the
// agent's RemoteDriver (driver/remote_codec, over the agent's types) and the
// plugin library (driverproto/plugin_codec, over the public types of
// include/outpost/driver.h). Owns: the service's names and limits, and the
// nanopb plumbing both sides fill and read its messages with. Below sdk and
// driver (tools/check-layers.sh), so the plugin library links it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "base/pb.h"
#include "driver.pb.h"

namespace outpost::driverproto {

inline constexpr const char kService[] = "outpost.driver.v1.Driver";
inline constexpr const char kPluginType[] = "TaskDriver";
inline constexpr const char kApiVersion[] = "v1";
// A TaskEvents reply holds at most this many events.
inline constexpr size_t kMaxEventsPerReply = 256;
// An ExecTask reply's output is at most this long (longer: truncated).
inline constexpr size_t kMaxExecOutput = 4096;
// A bytes field (TaskHandle.driver_state) holds at most this much.
inline constexpr size_t kMaxBytesField = 65535;

// Strings a message points into while it is encoded.
struct Keep {
  std::deque<std::string> strings;
  std::deque<std::vector<char*>> lists;
  std::deque<std::vector<outpost_driver_v1_KeyValue>> kvs;
  char* S(const std::string& s) { return PbStr(strings.emplace_back(s)); }
  char** List(const std::vector<std::string>& v, pb_size_t* count) {
    auto& l = lists.emplace_back();
    for (const std::string& s : v) l.push_back(S(s));
    *count = static_cast<pb_size_t>(l.size());
    return l.data();
  }
  outpost_driver_v1_KeyValue* Map(const std::map<std::string, std::string>& m, pb_size_t* count) {
    auto& l = kvs.emplace_back();
    for (const auto& kv : m) l.push_back({S(kv.first), S(kv.second)});
    *count = static_cast<pb_size_t>(l.size());
    return l.data();
  }
};

// A decoded map<string, string> (repeated KeyValue).
std::map<std::string, std::string> MapOf(const outpost_driver_v1_KeyValue* kv, pb_size_t n);
// A decoded repeated string.
std::vector<std::string> ListOf(char* const* v, pb_size_t n);
// A bytes field for encoding (data at most kMaxBytesField), kept in *buf.
pb_bytes_array_t* Bytes(const std::string& data, std::vector<uint8_t>* buf);
// A decoded bytes field; "" when absent.
std::string BytesOf(const pb_bytes_array_t* b);

}  // namespace outpost::driverproto
