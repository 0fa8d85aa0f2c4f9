// What the two halves of grpc_peer share (grpc_peer.cc: the server and
// main; grpc_peer_call.cc: the client cases): the Interop service's Msg
// (proto/grpc_interop.proto) and the output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace outpost::grpc_peer {

constexpr const char* kService = "outpost.interop.v1.Interop";

struct Msg {
  std::string payload;
  int32_t count = 0;
  int32_t delay_ms = 0;
  int32_t fail_code = 0;
  std::string fail_message;
  std::string echo_metadata;
  int32_t seq = 0;
  std::string echoed_metadata;
};

std::string Encode(const Msg& m);
Result<Msg> Decode(std::string_view bytes);

// One line on stdout, flushed: the tests wait for lines.
void Say(const std::string& line);

int Serve(const std::string& path, int drain_after);
int CallCases(const std::string& path, const std::vector<std::string>& cases);

}  // namespace outpost::grpc_peer
