// nanopb and the messages in proto/.
//
// The service protos (agent, task) use FT_POINTER fields: each field set,
// encoded, decoded into a fresh struct (the decoder mallocs), compared and
// pb_release'd. A build where PB_ENABLE_MALLOC differs between the generated
// code and the nanopb library fails here: decoding a pointer field needs
// malloc support in both.
//
// The ttRPC envelopes (ttrpc, status) are FT_CALLBACK messages driven by
// wire/codec. Their bytes are compared with golden bytes from protoc, the
// reference encoder:
//   printf '%s' '<text format>' | protoc --encode=ttrpc.Request -I proto ttrpc.proto | od -An -tx1
#include <gtest/gtest.h>
#include <pb.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include <string>
#include <type_traits>

#include "agent.pb.h"
#include "status.pb.h"
#include "task.pb.h"
#include "ttrpc.pb.h"
#include "wire/codec.h"

#ifndef PB_ENABLE_MALLOC
#error "proto/*.options use FT_POINTER fields: build with -DPB_ENABLE_MALLOC=1"
#endif

namespace outpost {
namespace {

std::string PbEncode(const pb_msgdesc_t* fields, const void* msg) {
  size_t size = 0;
  EXPECT_TRUE(pb_get_encoded_size(&size, fields, msg));
  std::string out(size, '\0');
  pb_ostream_t os = pb_ostream_from_buffer(reinterpret_cast<pb_byte_t*>(out.data()), size);
  EXPECT_TRUE(pb_encode(&os, fields, msg)) << PB_GET_ERROR(&os);
  EXPECT_EQ(os.bytes_written, size);
  return out;
}

// Decodes into *msg (zero-initialised by the caller); the caller releases.
bool PbDecode(const std::string& bytes, const pb_msgdesc_t* fields, void* msg, std::string* err = nullptr) {
  pb_istream_t is = pb_istream_from_buffer(reinterpret_cast<const pb_byte_t*>(bytes.data()), bytes.size());
  bool ok = pb_decode(&is, fields, msg);
  if (!ok && err) *err = PB_GET_ERROR(&is);
  return ok;
}

// For the encode side only: nanopb reads these and never frees them.
char* Str(const std::string& s) { return const_cast<char*>(s.c_str()); }
std::string S(const char* s) { return s ? s : ""; }

std::string Hex(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

// ---- ttRPC envelopes: nanopb callbacks, checked against protoc ------------

// The reason the envelopes are callbacks: nothing in them may be limited by
// the 16-bit pb_size_t of Debian's nanopb build.
static_assert(std::is_same_v<decltype(ttrpc_Request::service), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_Request::method), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_Request::payload), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_Request::metadata), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_KeyValue::key), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_KeyValue::value), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_Response::status), pb_callback_t>);
static_assert(std::is_same_v<decltype(ttrpc_Response::payload), pb_callback_t>);
static_assert(std::is_same_v<decltype(google_rpc_Status::message), pb_callback_t>);

void ExpectSameRequest(const wire::Request& a, const wire::Request& b) {
  EXPECT_EQ(a.service, b.service);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.payload, b.payload);
  EXPECT_EQ(a.timeout_nano, b.timeout_nano);
  ASSERT_EQ(a.metadata.size(), b.metadata.size());
  for (size_t i = 0; i < a.metadata.size(); ++i) {
    EXPECT_EQ(a.metadata[i].key, b.metadata[i].key) << i;
    EXPECT_EQ(a.metadata[i].value, b.metadata[i].value) << i;
  }
}

// Encodes to the golden bytes, sizes them right, and decodes them back.
void CheckRequestGolden(const wire::Request& req, const std::string& golden) {
  EXPECT_EQ(wire::Encode(req), golden);
  EXPECT_EQ(wire::EncodedSize(req), golden.size());
  wire::Request back;
  ASSERT_TRUE(wire::DecodeRequest(golden, &back).ok());
  ExpectSameRequest(back, req);
}

void CheckResponseGolden(const wire::Response& resp, const std::string& golden) {
  EXPECT_EQ(wire::Encode(resp), golden);
  EXPECT_EQ(wire::EncodedSize(resp), golden.size());
  wire::Response back;
  ASSERT_TRUE(wire::DecodeResponse(golden, &back).ok());
  EXPECT_EQ(back.has_status, resp.has_status);
  EXPECT_EQ(back.code, resp.code);
  EXPECT_EQ(back.message, resp.message);
  EXPECT_EQ(back.payload, resp.payload);
}

TEST(ProtoRoundTrip, TtrpcRequestMatchesProtoc) {
  // service: "nri.pkg.api.v1alpha1.Plugin" method: "CreateContainer"
  // payload: "\000\001\002payload" timeout_nano: 2000000000
  // metadata { key: "k1" value: "v1" } metadata { key: "k2" value: "" }
  const std::string payload("\x00\x01\x02payload", 10);
  wire::Request req;
  req.service = "nri.pkg.api.v1alpha1.Plugin";
  req.method = "CreateContainer";
  req.payload = payload;
  req.timeout_nano = 2000000000;
  req.metadata = {{"k1", "v1"}, {"k2", ""}};
  CheckRequestGolden(req, Hex({0x0a, 0x1b, 0x6e, 0x72, 0x69, 0x2e, 0x70, 0x6b, 0x67, 0x2e, 0x61, 0x70, 0x69, 0x2e,
                               0x76, 0x31, 0x61, 0x6c, 0x70, 0x68, 0x61, 0x31, 0x2e, 0x50, 0x6c, 0x75, 0x67, 0x69,
                               0x6e, 0x12, 0x0f, 0x43, 0x72, 0x65, 0x61, 0x74, 0x65, 0x43, 0x6f, 0x6e, 0x74, 0x61,
                               0x69, 0x6e, 0x65, 0x72, 0x1a, 0x0a, 0x00, 0x01, 0x02, 0x70, 0x61, 0x79, 0x6c, 0x6f,
                               0x61, 0x64, 0x20, 0x80, 0xa8, 0xd6, 0xb9, 0x07, 0x2a, 0x08, 0x0a, 0x02, 0x6b, 0x31,
                               0x12, 0x02, 0x76, 0x31, 0x2a, 0x04, 0x0a, 0x02, 0x6b, 0x32}));

  // service: "s" timeout_nano: -5 metadata { key: "" value: "" }
  // metadata { key: "" value: "x" }
  wire::Request neg;
  neg.service = "s";
  neg.timeout_nano = -5;
  neg.metadata = {{"", ""}, {"", "x"}};
  CheckRequestGolden(neg, Hex({0x0a, 0x01, 0x73, 0x20, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                               0x2a, 0x00, 0x2a, 0x03, 0x12, 0x01, 0x78}));

  CheckRequestGolden(wire::Request(), "");
}

TEST(ProtoRoundTrip, TtrpcResponseMatchesProtoc) {
  wire::Response ok;  // payload: "reply"
  ok.payload = "reply";
  CheckResponseGolden(ok, Hex({0x12, 0x05, 0x72, 0x65, 0x70, 0x6c, 0x79}));

  // status { code: 12 message: "method Nope" }
  const Error unimplemented(Code::kUnimplemented, "method Nope");
  CheckResponseGolden(wire::ErrorResponse(unimplemented),
                      Hex({0x0a, 0x0f, 0x08, 0x0c, 0x12, 0x0b, 0x6d, 0x65, 0x74, 0x68, 0x6f, 0x64, 0x20, 0x4e,
                           0x6f, 0x70, 0x65}));

  wire::Response negative;  // status { code: -1 } payload: "p"
  negative.has_status = true;
  negative.code = -1;
  negative.payload = "p";
  CheckResponseGolden(negative, Hex({0x0a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0x01, 0x12, 0x01, 0x70}));

  wire::Response empty_status;  // status { }
  empty_status.has_status = true;
  CheckResponseGolden(empty_status, Hex({0x0a, 0x00}));

  CheckResponseGolden(wire::Response(), "");
}

// Beyond nanopb's 16-bit limit: 3 MiB of payload and a 300-byte message.
// protoc: status { code: 3 message: "m"*300 } payload: "y"*(3<<20) is 3146041
// bytes: 0a b1 02 08 03 12 ac 02 m... 12 80 80 c0 01 y...
TEST(ProtoRoundTrip, TtrpcLargeResponseMatchesProtoc) {
  const std::string message(300, 'm'), payload(3u << 20, 'y');
  std::string golden = Hex({0x0a, 0xb1, 0x02, 0x08, 0x03, 0x12, 0xac, 0x02}) + message +
                       Hex({0x12, 0x80, 0x80, 0xc0, 0x01}) + payload;
  ASSERT_EQ(golden.size(), 3146041u);
  wire::Response resp;
  resp.has_status = true;
  resp.code = 3;
  resp.message = message;
  resp.payload = payload;
  CheckResponseGolden(resp, golden);

  // Decoding is zero-copy: the views point into the input.
  wire::Response back;
  ASSERT_TRUE(wire::DecodeResponse(golden, &back).ok());
  EXPECT_EQ(back.message.data(), golden.data() + 8);
  EXPECT_EQ(back.payload.data(), golden.data() + 8 + 300 + 5);
}

// ---- service protos: FT_POINTER, malloc'ed by the decoder -----------------

TEST(ProtoRoundTrip, AgentStatus) {
  outpost_v1_StatusRequest req = outpost_v1_StatusRequest_init_zero;
  std::string rbytes = PbEncode(&outpost_v1_StatusRequest_msg, &req);
  EXPECT_EQ(rbytes, "");
  outpost_v1_StatusRequest req_out = outpost_v1_StatusRequest_init_zero;
  ASSERT_TRUE(PbDecode(rbytes, &outpost_v1_StatusRequest_msg, &req_out));
  pb_release(&outpost_v1_StatusRequest_msg, &req_out);

  std::string version = "1.2.3", config = "/etc/outpost/config.json", sock = "/run/outpost/outpost.sock";
  std::string state = "/var/lib/outpost", runtime = "/run/outpost", arch = "arm64";
  std::string f1 = "api", d1 = "", f2 = "cgroups", d2 = "cgroup v2 not mounted";
  outpost_v1_Feature features[2] = {{Str(f1), true, Str(d1)}, {Str(f2), false, Str(d2)}};
  outpost_v1_StatusResponse in = outpost_v1_StatusResponse_init_zero;
  in.version = Str(version);
  in.pid = 42;
  in.uptime_nanos = 123456789012345;
  in.config_path = Str(config);
  in.api_socket = Str(sock);
  in.state_dir = Str(state);
  in.runtime_dir = Str(runtime);
  in.features_count = 2;
  in.features = features;
  in.started_at_unix_nanos = 1790000000000000000;
  in.api_connections = 3;
  in.config_loaded_unix_nanos = -1;
  in.arch = Str(arch);
  std::string bytes = PbEncode(&outpost_v1_StatusResponse_msg, &in);

  outpost_v1_StatusResponse out = outpost_v1_StatusResponse_init_zero;
  ASSERT_TRUE(PbDecode(bytes, &outpost_v1_StatusResponse_msg, &out));
  EXPECT_EQ(S(out.version), version);
  EXPECT_NE(out.version, in.version);  // the decoder allocated its own copy
  EXPECT_EQ(out.pid, 42);
  EXPECT_EQ(out.uptime_nanos, 123456789012345);
  EXPECT_EQ(S(out.config_path), config);
  EXPECT_EQ(S(out.api_socket), sock);
  EXPECT_EQ(S(out.state_dir), state);
  EXPECT_EQ(S(out.runtime_dir), runtime);
  ASSERT_EQ(out.features_count, 2);
  EXPECT_EQ(S(out.features[0].name), "api");
  EXPECT_TRUE(out.features[0].enabled);
  EXPECT_EQ(S(out.features[1].name), "cgroups");
  EXPECT_FALSE(out.features[1].enabled);
  EXPECT_EQ(S(out.features[1].detail), d2);
  EXPECT_EQ(out.started_at_unix_nanos, 1790000000000000000);
  EXPECT_EQ(out.api_connections, 3);
  EXPECT_EQ(out.config_loaded_unix_nanos, -1);
  EXPECT_EQ(S(out.arch), arch);
  pb_release(&outpost_v1_StatusResponse_msg, &out);
  EXPECT_EQ(out.features, nullptr);
  EXPECT_EQ(out.version, nullptr);
}

TEST(ProtoRoundTrip, TruncatedInputFailsAndLeaksNothing) {
  std::string name = "cgroups", detail = "off";
  outpost_v1_Feature in = outpost_v1_Feature_init_zero;
  in.name = Str(name);
  in.detail = Str(detail);
  std::string bytes = PbEncode(&outpost_v1_Feature_msg, &in);
  const size_t first_field = 2 + name.size();
  for (size_t n = 1; n < bytes.size(); ++n) {
    outpost_v1_Feature out = outpost_v1_Feature_init_zero;
    std::string err;
    bool ok = PbDecode(bytes.substr(0, n), &outpost_v1_Feature_msg, &out, &err);
    // A cut between fields is a valid, shorter message; inside one it is not.
    EXPECT_EQ(ok, n == first_field) << n << ": " << err;
    pb_release(&outpost_v1_Feature_msg, &out);  // safe after failure too (ASan checks leaks)
  }
}

// What the envelopes avoid: an FT_POINTER bytes field is limited by
// pb_size_t (65,535 bytes with Debian's 16-bit build). If the build ever
// switches to PB_FIELD_32BIT this documents it.
TEST(ProtoRoundTrip, PointerBytesLimitVersusCallbackCodec) {
  const std::string big(70000, 'x');
  std::string bytes = Hex({0x0a, 0xf0, 0xa2, 0x04}) + big;  // field 1, 70000 bytes
  outpost_v1_ReadLogsResponse out = outpost_v1_ReadLogsResponse_init_zero;
  std::string err;
  bool ok = PbDecode(bytes, &outpost_v1_ReadLogsResponse_msg, &out, &err);
  if (sizeof(pb_size_t) == 2) {
    EXPECT_FALSE(ok);
    EXPECT_EQ(err, "bytes overflow");
  } else {
    EXPECT_TRUE(ok);
  }
  pb_release(&outpost_v1_ReadLogsResponse_msg, &out);

  // The same bytes as a ttrpc.Request: field 1 is service, a callback.
  wire::Request back;
  ASSERT_TRUE(wire::DecodeRequest(bytes, &back).ok());
  EXPECT_EQ(back.service.size(), big.size());
  EXPECT_EQ(wire::Encode(back), bytes);
}

}  // namespace
}  // namespace outpost
