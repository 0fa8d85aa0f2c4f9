// The NRI codec against bytes: frames captured from upstream Go plugins,
// encodings written out by hand from the protobuf rules (proving the field
// numbers), the encoding rules of nriproto/codec.h, and bad input.
#include <gtest/gtest.h>

#include <string>

#include "nri_codec_test_util.h"
#include "nriproto/codec.h"
#include "wire/codec.h"

namespace outpost::nriproto {
namespace {

using nri_test::Hex;
using nri_test::ToHex;

// Strips the 8-byte mux and 10-byte ttRPC headers of a captured frame and
// decodes the ttRPC Request in it.
wire::Request RequestOfFrame(const std::string& frame) {
  wire::Request req;
  EXPECT_GE(frame.size(), 18u);
  EXPECT_EQ(frame.substr(0, 4), Hex("00 00 00 02"));  // conn 2: the Runtime service
  Status st = wire::DecodeRequest(std::string_view(frame).substr(18), &req);
  EXPECT_TRUE(st.ok()) << st.error().message();
  return req;
}

TEST(NriCodecGolden, RegisterPluginV0_12_2) {
  const std::string frame = Hex(
      "00 00 00 02 00 00 00 5b 00 00 00 51 00 00 00 01"
      "01 00 0a 1c 6e 72 69 2e 70 6b 67 2e 61 70 69 2e"
      "76 31 61 6c 70 68 61 31 2e 52 75 6e 74 69 6d 65"
      "12 0e 52 65 67 69 73 74 65 72 50 6c 75 67 69 6e"
      "1a 1b 0a 06 6c 6f 67 67 65 72 12 02 31 30 1a 0d"
      "30 2e 30 2e 30 2d 75 6e 6b 6e 6f 77 6e 20 a5 91"
      "df cf 12");
  ASSERT_EQ(frame.size(), 99u);
  std::string frame_copy = frame;  // the Request holds views into it
  wire::Request req = RequestOfFrame(frame_copy);
  EXPECT_EQ(req.service, nri::kRuntimeService);
  EXPECT_EQ(req.method, "RegisterPlugin");
  nri::RegisterPluginRequest r;
  Status st = Decode(req.payload, &r);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(r.plugin_name, "logger");
  EXPECT_EQ(r.plugin_idx, "10");
  EXPECT_EQ(r.nri_version, "0.0.0-unknown");
  // Our encoding of the same request is the captured payload.
  EXPECT_EQ(ToHex(Encode(r)), ToHex(std::string(req.payload)));
}

TEST(NriCodecGolden, RegisterPluginV0_8_0) {
  std::string frame = Hex(
      "00 00 00 02 00 00 00 4c 00 00 00 42 00 00 00 01"
      "01 00 0a 1c 6e 72 69 2e 70 6b 67 2e 61 70 69 2e"
      "76 31 61 6c 70 68 61 31 2e 52 75 6e 74 69 6d 65"
      "12 0e 52 65 67 69 73 74 65 72 50 6c 75 67 69 6e"
      "1a 0c 0a 06 6c 6f 67 67 65 72 12 02 31 30 20 86"
      "b8 ed cf 12");
  ASSERT_EQ(frame.size(), 84u);
  wire::Request req = RequestOfFrame(frame);
  EXPECT_EQ(req.method, "RegisterPlugin");
  nri::RegisterPluginRequest r{"x", "y", "z"};
  Status st = Decode(req.payload, &r);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(r.plugin_name, "logger");
  EXPECT_EQ(r.plugin_idx, "10");
  EXPECT_EQ(r.nri_version, "");  // overwritten, not kept
  EXPECT_EQ(ToHex(Encode(r)), ToHex(std::string(req.payload)));
}

TEST(NriCodecGolden, ConfigureResponseAllEvents) {
  nri::ConfigureResponse r;
  r.events = 16383;
  EXPECT_EQ(ToHex(Encode(r)), "10 ff 7f");
  nri::ConfigureResponse back;
  ASSERT_TRUE(Decode(Hex("10 ff 7f"), &back).ok());
  EXPECT_EQ(back.events, 16383);
  EXPECT_EQ(back.request_timeout_ms, 0);
  // request_timeout is field 3 (int64 ms).
  EXPECT_EQ(ToHex(Encode(nri::ConfigureResponse{8, 1000})), "10 08 18 e8 07");
}

TEST(NriCodecGolden, EmptyButPresentAdjust) {
  nri::CreateContainerResponse r;
  r.adjust = nri::ContainerAdjustment{};
  EXPECT_EQ(ToHex(Encode(r)), "0a 00");
  EXPECT_EQ(Encode(nri::CreateContainerResponse{}), "");
  nri::CreateContainerResponse back;
  ASSERT_TRUE(Decode(Hex("0a 00"), &back).ok());
  ASSERT_TRUE(back.adjust.has_value());
  EXPECT_TRUE(back.adjust->annotations.empty());
  EXPECT_FALSE(back.adjust->linux.has_value());
  ASSERT_TRUE(Decode("", &back).ok());
  EXPECT_FALSE(back.adjust.has_value());
}

// ---- field numbers, from the protobuf encoding rules -----------------------

TEST(NriCodecEncode, ContainerIdAndState) {
  nri::Container c;
  c.id = "a";
  c.state = nri::ContainerState::kRunning;
  EXPECT_EQ(ToHex(Encode(c)), "0a 01 61 20 03");  // id = 1, state = 4 (varint 3)
}

TEST(NriCodecEncode, HookTimeoutIsOptionalIntField4) {
  nri::Container c;
  c.hooks = nri::Hooks{};
  c.hooks->poststop = {{"p", {}, {}, 5}};
  // Container.hooks = 10 {Hooks.poststop = 6 {Hook.path = 1 "p", timeout = 4 {value = 1: 5}}}
  EXPECT_EQ(ToHex(Encode(c)), "52 09 32 07 0a 01 70 22 02 08 05");
  c.hooks->poststop[0].timeout = 0;  // present, holding 0: an empty wrapper
  EXPECT_EQ(ToHex(Encode(c)), "52 07 32 05 0a 01 70 22 00");
  c.hooks->poststop[0].timeout.reset();
  EXPECT_EQ(ToHex(Encode(c)), "52 05 32 03 0a 01 70");
}

TEST(NriCodecEncode, NegativeExitCodeIsTenByteVarint) {
  nri::Container c;
  c.exit_code = -1;
  // field 17, varint: tag 0x88 0x01.
  EXPECT_EQ(ToHex(Encode(c)), "88 01 ff ff ff ff ff ff ff ff ff 01");
  nri::Container back;
  ASSERT_TRUE(Decode(Encode(c), &back).ok());
  EXPECT_EQ(back.exit_code, -1);
}

TEST(NriCodecEncode, AdditionalGidsArePacked) {
  nri::Container c;
  c.user = nri::User{1, 0, {5, 300}};
  // user = 21 (tag aa 01) {uid = 1: 1, additional_gids = 3 packed [5, 300]}
  EXPECT_EQ(ToHex(Encode(c)), "aa 01 07 08 01 1a 03 05 ac 02");
}

TEST(NriCodecEncode, MapsAreSortedEntries) {
  nri::PodSandbox p;
  p.labels = {{"b", "2"}, {"a", "1"}};
  EXPECT_EQ(ToHex(Encode(p)), "2a 06 0a 01 61 12 01 31 2a 06 0a 01 62 12 01 32");
}

TEST(NriCodecEncode, StateChangeEvent) {
  nri::StateChangeEvent e;
  e.event = nri::Event::kStartContainer;
  e.pod = nri::PodSandbox{};
  e.pod->id = "p";
  e.container = nri::Container{};
  EXPECT_EQ(ToHex(Encode(e)), "08 06 12 03 0a 01 70 1a 00");
}

TEST(NriCodecEncode, LinuxMessagesOnlyWhenSet) {
  nri::PodSandbox p;
  p.id = "p";
  EXPECT_EQ(ToHex(Encode(p)), "0a 01 70");
  p.cgroup_parent = "c";
  EXPECT_EQ(ToHex(Encode(p)), "0a 01 70 42 03 1a 01 63");  // linux = 8 {cgroup_parent = 3}

  nri::Container c;
  c.oom_score_adj = 0;  // linux = 11 {oom_score_adj = 4 {}}
  EXPECT_EQ(ToHex(Encode(c)), "5a 02 22 00");

  nri::ContainerAdjustment a;
  a.linux = nri::LinuxAdjustment{};  // nothing in it: not sent
  EXPECT_EQ(Encode(a), "");
  a.linux->rdt_raw = "";  // a raw field present even when empty: linux = 6 {rdt = 11 ""}
  EXPECT_EQ(ToHex(Encode(a)), "32 02 5a 00");
}

TEST(NriCodecEncode, UpdateAndEviction) {
  nri::UpdateContainersRequest r;
  r.update = {{"c", nri::Resources{}, true}};
  r.evict = {{"d", "oom"}};
  // update = 1 {container_id "c", linux = 2 {resources = 1 {}}, ignore_failure = 3}, evict = 2 {...}
  EXPECT_EQ(ToHex(Encode(r)), "0a 09 0a 01 63 12 02 0a 00 18 01 12 08 0a 01 64 12 03 6f 6f 6d");
}

TEST(NriCodecEncode, ValidateOwners) {
  nri::ValidateContainerAdjustmentRequest r;
  r.owners["c"].simple[8] = "10-a";
  // owners = 5 {owners = 1 {key "c", value = 2 {simple = 1 {key 8, value "10-a"}}}}
  std::string want = Hex("2a 11 0a 0f 0a 01 63 12 0a 0a 08 08 08 12 04 31 30 2d 61");
  EXPECT_EQ(ToHex(Encode(r)), ToHex(want));
  EXPECT_EQ(Encode(nri::ValidateContainerAdjustmentRequest{}), "");
}

// ---- decoding --------------------------------------------------------------

TEST(NriCodecDecode, UnknownFieldsAreSkipped) {
  // id "a", field 99 varint 1, field 22 (image, newer peers) a message,
  // linux = 11 {io_priority = 6 (not in our proto) {class 1}, cgroups_path "x"},
  // field 100 fixed64, field 101 fixed32.
  std::string in = Hex(
      "0a 01 61 98 06 01 b2 01 02 0a 00 5a 07 32 02 08 01 2a 01 78"
      "a1 06 01 02 03 04 05 06 07 08 ad 06 01 02 03 04");
  nri::Container c;
  Status st = Decode(in, &c);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(c.id, "a");
  EXPECT_EQ(c.cgroups_path, "x");
}

TEST(NriCodecDecode, UnpackedGids) {
  nri::Container c;
  ASSERT_TRUE(Decode(Hex("aa 01 05 18 05 18 ac 02"), &c).ok());
  ASSERT_TRUE(c.user.has_value());
  EXPECT_EQ(c.user->additional_gids, (std::vector<uint32_t>{5, 300}));
  // Mixed: a packed run and an unpacked element.
  ASSERT_TRUE(Decode(Hex("aa 01 06 1a 02 01 02 18 03"), &c).ok());
  EXPECT_EQ(c.user->additional_gids, (std::vector<uint32_t>{1, 2, 3}));
}

TEST(NriCodecDecode, LastMapEntryWins) {
  nri::PodSandbox p;
  ASSERT_TRUE(Decode(Hex("2a 06 0a 01 61 12 01 31 2a 06 0a 01 61 12 01 32 2a 00"), &p).ok());
  EXPECT_EQ(p.labels, (std::map<std::string, std::string>{{"", ""}, {"a", "2"}}));
}

TEST(NriCodecDecode, BadInputIsAnErrorNamingTheMessage) {
  nri::CreateContainerResponse r;
  for (const char* hex : {"0a 05 0a", "ff", "0a", "0b 00", "0a 02 12 05", "12 80 80 80 80 80 80 80 80 80 80",
                          "0a ff ff ff ff 0f"}) {
    Status st = Decode(Hex(hex), &r);
    ASSERT_FALSE(st.ok()) << hex;
    EXPECT_EQ(st.error().code(), Code::kInvalidArgument);
    EXPECT_EQ(st.error().message().rfind("decode nri CreateContainerResponse: ", 0), 0u) << st.error().message();
  }
  nri::Container c;
  Status st = Decode(Hex("08 01"), &c);  // id (a string) sent as a varint
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("decode nri Container"), std::string::npos);
}

TEST(NriCodecDecode, EveryTruncationIsHandled) {
  nri::ValidateContainerAdjustmentRequest full;
  full.pod = nri_test::FullPod();
  full.container = nri_test::FullContainer();
  full.adjust = nri_test::FullAdjustment();
  full.update = {nri_test::FullUpdate("u")};
  full.owners["ctr-id"].simple[7] = "10-x";
  full.owners["ctr-id"].compound[1] = {{"k", "10-x"}};
  full.plugins = {{"x", "10"}};
  std::string enc = Encode(full);
  ASSERT_GT(enc.size(), 500u);
  int errors = 0;
  for (size_t n = 0; n < enc.size(); ++n) {
    nri::ValidateContainerAdjustmentRequest r;
    if (!Decode(std::string_view(enc).substr(0, n), &r).ok()) ++errors;
  }
  EXPECT_GT(errors, static_cast<int>(enc.size() / 2));
  // Flipping bytes: decoded or refused, never a crash or a leak (ASan runs).
  for (size_t i = 0; i < enc.size(); i += 7) {
    std::string bad = enc;
    bad[i] = static_cast<char>(bad[i] ^ 0xA5);
    nri::ValidateContainerAdjustmentRequest r;
    (void)Decode(bad, &r);
  }
}

TEST(NriCodecDecode, OversizeIsRefused) {
  std::string big((4u << 20) + 1, '\0');
  nri::CreateContainerResponse r;
  Status st = Decode(big, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("over the 4 MiB limit"), std::string::npos);
}

// ---- UTF-8 and event names -------------------------------------------------

TEST(NriCodecUtf8, InvalidBytesBecomeReplacementChars) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8("plain"), "plain");
  EXPECT_EQ(ValidUtf8("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  EXPECT_EQ(ValidUtf8("a\xFF" "b"), "a" + r + "b");
  EXPECT_EQ(ValidUtf8("\xE2\x82"), r + r);                // truncated sequence: each byte
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), r + r);                // overlong
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), r + r + r);        // surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), r + r + r + r);  // past U+10FFFF
  EXPECT_EQ(ValidUtf8("\x80" "x"), r + "x");

  nri::Container c;
  c.id = "a\xFF";
  c.annotations["k\xFE"] = "v\xC3";
  nri::Container back;
  ASSERT_TRUE(Decode(Encode(c), &back).ok());
  EXPECT_EQ(back.id, "a" + r);
  EXPECT_EQ(back.annotations, (std::map<std::string, std::string>{{"k" + r, "v" + r}}));
  // Keys that become equal are sent once (the last wins), and the entries
  // are sorted by the key as sent.
  nri::PodSandbox p;
  p.labels = {{"k\xFE", "1"}, {"k\xFF", "2"}, {"k\xEF\xBF\xBE", "3"}};
  EXPECT_EQ(ToHex(Encode(p)), "2a 09 0a 04 6b ef bf bd 12 01 32 2a 09 0a 04 6b ef bf be 12 01 33");
  // Raw fields are bytes: kept as they are.
  nri::ContainerAdjustment a;
  a.linux = nri::LinuxAdjustment{};
  a.linux->scheduler_raw = std::string("\xFF\x00", 2);
  nri::ContainerAdjustment aback;
  ASSERT_TRUE(Decode(Encode(a), &aback).ok());
  EXPECT_EQ(aback.linux->scheduler_raw, std::string("\xFF\x00", 2));
}

TEST(NriCodecEvents, MethodNames) {
  EXPECT_STREQ(nri::EventMethod(nri::Event::kRunPodSandbox), "RunPodSandbox");
  EXPECT_STREQ(nri::EventMethod(nri::Event::kPostCreateContainer), "PostCreateContainer");
  EXPECT_STREQ(nri::EventMethod(nri::Event::kRemoveContainer), "RemoveContainer");
  EXPECT_STREQ(nri::EventMethod(nri::Event::kPostUpdatePodSandbox), "PostUpdatePodSandbox");
  EXPECT_STREQ(nri::EventMethod(nri::Event::kValidateContainerAdjustment), "ValidateContainerAdjustment");
  EXPECT_STREQ(nri::EventMethod(nri::Event::kUnknown), "");
  EXPECT_STREQ(nri::EventMethod(nri::Event::kLast), "");
  EXPECT_STREQ(nri::EventMethod(static_cast<nri::Event>(99)), "");
  int named = 0;
  for (int e = 1; e < static_cast<int>(nri::Event::kLast); ++e) {
    if (*nri::EventMethod(static_cast<nri::Event>(e)) != '\0') ++named;
  }
  EXPECT_EQ(named, 14);
  EXPECT_EQ(nri::kValidEvents, 0x3FFFu);
}

}  // namespace
}  // namespace outpost::nriproto
