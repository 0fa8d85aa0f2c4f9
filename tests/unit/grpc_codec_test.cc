// wire/grpc_codec: message framing split at every offset, grpc-timeout both
// ways, grpc-message's percent encoding, grpc-status, and the statuses a
// client makes of resets and HTTP answers.
#include "wire/grpc_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "wire/h2_conn.h"

namespace outpost::wire::grpc {
namespace {

std::string Framed(std::string_view body) {
  char p[kMessagePrefixBytes];
  MessagePrefix(body.size(), p);
  return std::string(p, sizeof p) + std::string(body);
}

std::vector<std::string> FeedAll(MessageReader* r, const std::vector<std::string_view>& pieces, Status* st) {
  std::vector<std::string> got;
  *st = OkStatus();
  for (std::string_view piece : pieces) {
    *st = r->Feed(piece, "", [&](std::string_view m) {
      got.emplace_back(m);
      return true;
    });
    if (!st->ok()) break;
  }
  return got;
}

TEST(GrpcMessageReader, SplitAtEveryOffsetGivesTheSameMessages) {
  const std::string big(70000, 'x');
  const std::string stream = Framed("hello") + Framed("") + Framed(big) + Framed("z");
  for (size_t cut = 0; cut <= stream.size(); cut += (cut < 64 || cut + 64 > stream.size()) ? 1 : 997) {
    MessageReader r(1 << 20);
    Status st;
    auto got = FeedAll(&r, {std::string_view(stream).substr(0, cut), std::string_view(stream).substr(cut)}, &st);
    ASSERT_TRUE(st.ok()) << cut;
    ASSERT_EQ(got.size(), 4u) << cut;
    EXPECT_EQ(got[0], "hello");
    EXPECT_EQ(got[1], "");
    EXPECT_EQ(got[2], big);
    EXPECT_EQ(got[3], "z");
    EXPECT_EQ(r.partial(), 0u);
  }
}

TEST(GrpcMessageReader, OneByteAtATime) {
  const std::string stream = Framed("abc") + Framed("defgh");
  MessageReader r(64);
  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < stream.size(); ++i) pieces.push_back(std::string_view(stream).substr(i, 1));
  Status st;
  auto got = FeedAll(&r, pieces, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], "abc");
  EXPECT_EQ(got[1], "defgh");
}

TEST(GrpcMessageReader, ATruncatedMessageStaysPartial) {
  const std::string stream = Framed("abcdef");
  MessageReader r(64);
  Status st;
  auto got = FeedAll(&r, {std::string_view(stream).substr(0, 7)}, &st);
  EXPECT_TRUE(st.ok());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(r.partial(), 7u);
}

TEST(GrpcMessageReader, OverTheLimitIsRefusedBeforeBuffering) {
  MessageReader r(10);
  std::string prefix("\0\0\0\0\x0b", 5);  // 11 octets announced
  Status st = r.Feed(prefix, "", [](std::string_view) { return true; });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(st.error().message(), "grpc: received message larger than max (11 vs. 10)");
  EXPECT_EQ(r.partial(), 0u);
}

TEST(GrpcMessageReader, CompressedMessagesAreRefusedByEncoding) {
  std::string msg("\x01\0\0\0\x01z", 6);
  MessageReader r(10);
  Status st = r.Feed(msg, "", [](std::string_view) { return true; });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kInternal);
  EXPECT_EQ(st.error().message(), "grpc: compressed flag set with identity or empty encoding");
  MessageReader r2(10);
  st = r2.Feed(msg, "gzip", [](std::string_view) { return true; });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kUnimplemented);
  EXPECT_EQ(st.error().message(), "grpc: Decompressor is not installed for grpc-encoding \"gzip\"");
}

TEST(GrpcMessageReader, StoppingDropsTheRest) {
  const std::string stream = Framed("a") + Framed("b");
  MessageReader r(10);
  int n = 0;
  Status st = r.Feed(stream, "", [&](std::string_view) { return ++n < 1; });
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(n, 1);
}

TEST(GrpcTimeout, EncodesLikeGrpcGo) {
  EXPECT_EQ(EncodeTimeout(10 * 1000000LL), "10000000n");
  EXPECT_EQ(EncodeTimeout(100 * 1000000LL), "100000u");
  EXPECT_EQ(EncodeTimeout(1000000000LL), "1000000u");
  EXPECT_EQ(EncodeTimeout(5000000000LL), "5000000u");
  EXPECT_EQ(EncodeTimeout(120 * 1000000000LL), "120000m");
  EXPECT_EQ(EncodeTimeout(3600 * 1000000000LL), "3600000m");
  EXPECT_EQ(EncodeTimeout(1), "1n");
  EXPECT_EQ(EncodeTimeout(0), "1n");
  EXPECT_EQ(EncodeTimeout(100000000001LL), "100001m");  // rounded up to the unit that fits 8 digits
}

TEST(GrpcTimeout, ParsesEveryUnit) {
  struct {
    const char* text;
    int64_t nanos;
  } cases[] = {{"1n", 1},         {"5u", 5000},          {"7m", 7000000},   {"2S", 2000000000},
               {"3M", 180000000000}, {"1H", 3600000000000}, {"99999999n", 99999999}, {" 4S ", 4000000000},
               {"0m", 0}};
  for (const auto& c : cases) {
    int64_t got = -1;
    ASSERT_TRUE(ParseTimeout(c.text, &got)) << c.text;
    EXPECT_EQ(got, c.nanos) << c.text;
  }
  int64_t big = 0;
  ASSERT_TRUE(ParseTimeout("99999999H", &big));
  EXPECT_GT(big, 0);
  for (const char* bad : {"", "5", "S", "123456789S", "5s", "-5S", "5 S", "1.5S", "5x"}) {
    int64_t v;
    EXPECT_FALSE(ParseTimeout(bad, &v)) << bad;
  }
}

TEST(GrpcTimeout, RoundTrips) {
  for (int64_t n : {int64_t{1}, int64_t{999}, int64_t{123456789}, int64_t{86400} * 1000000000}) {
    int64_t back = 0;
    ASSERT_TRUE(ParseTimeout(EncodeTimeout(n), &back));
    EXPECT_GE(back, n);
    EXPECT_LT(back - n, 1000 * (n / 99999999 + 1));  // rounded up by less than the unit chosen
  }
}

TEST(GrpcMessage, PercentEncodesAsTheSpecSays) {
  EXPECT_EQ(PercentEncode("plain text ~"), "plain text ~");
  EXPECT_EQ(PercentEncode("100% done\n"), "100%25 done%0A");
  EXPECT_EQ(PercentEncode("\xc3\xbc"), "%C3%BC");
  EXPECT_EQ(PercentDecode("100%25 done%0A"), "100% done\n");
  EXPECT_EQ(PercentDecode("%C3%bc"), "\xc3\xbc");
  // Malformed escapes stay as they are.
  EXPECT_EQ(PercentDecode("50%"), "50%");
  EXPECT_EQ(PercentDecode("%zz%4"), "%zz%4");
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  EXPECT_EQ(PercentDecode(PercentEncode(all)), all);
}

TEST(GrpcStatus, ParsesOnlyPlainDecimals) {
  int32_t c = -1;
  EXPECT_TRUE(ParseStatus("0", &c));
  EXPECT_EQ(c, 0);
  EXPECT_TRUE(ParseStatus("14", &c));
  EXPECT_EQ(c, 14);
  for (const char* bad : {"", "01", "-1", "1x", " 1", "1234567890"}) EXPECT_FALSE(ParseStatus(bad, &c)) << bad;
}

TEST(GrpcStatus, ResetsAndHttpAnswersMapAsGrpcGoDoes) {
  EXPECT_EQ(ResetError(h2::kRefusedStream).code(), Code::kUnavailable);
  EXPECT_EQ(ResetError(h2::kCancel).code(), Code::kCanceled);
  EXPECT_EQ(ResetError(h2::kEnhanceYourCalm).code(), Code::kResourceExhausted);
  EXPECT_EQ(ResetError(h2::kFlowControlError).code(), Code::kResourceExhausted);
  EXPECT_EQ(ResetError(h2::kInadequateSecurity).code(), Code::kPermissionDenied);
  EXPECT_EQ(ResetError(h2::kProtocolError).code(), Code::kInternal);
  EXPECT_EQ(ResetError(0x99).code(), Code::kUnknown);
  EXPECT_EQ(ResetError(h2::kCancel).message(), "stream terminated by RST_STREAM with error code: CANCEL");
  EXPECT_EQ(HttpStatusError("404").code(), Code::kUnimplemented);
  EXPECT_EQ(HttpStatusError("503").code(), Code::kUnavailable);
  EXPECT_EQ(HttpStatusError("400").code(), Code::kInternal);
  EXPECT_EQ(HttpStatusError("418").code(), Code::kUnknown);
}

}  // namespace
}  // namespace outpost::wire::grpc
