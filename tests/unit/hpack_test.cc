// wire/hpack: every example of RFC 7541 Appendix C (integers, single
// fields, the request and response sequences with their dynamic tables),
// Appendix B's code checked octet by octet and on known strings, a grpc-go
// request captured on the wire, malformed blocks (each failing with what
// and where), the header-list limit keeping the table in step, every
// prefix of valid blocks, and the encoder's choices and round trips.
#include "wire/hpack.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace outpost::wire::hpack {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// "82 86 4188" -> bytes; spaces and newlines ignored.
std::string Hex(std::string_view s) {
  std::string out;
  int hi = -1;
  for (char c : s) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      continue;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<char>(hi << 4 | v));
      hi = -1;
    }
  }
  EXPECT_EQ(hi, -1) << "odd number of hex digits in " << s;
  return out;
}

std::string ToHex(std::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Pairs ToPairs(const HeaderList& list) {
  Pairs out;
  for (const HeaderField& f : list) out.emplace_back(f.name, f.value);
  return out;
}

// The dynamic table, newest first.
Pairs Table(const Decoder& d) {
  Pairs out;
  size_t sum = 0;
  for (size_t i = 0; i < d.table_entries(); ++i) {
    out.emplace_back(d.table_entry(i).name, d.table_entry(i).value);
    sum += FieldSize(d.table_entry(i).name, d.table_entry(i).value);
  }
  EXPECT_EQ(sum, d.table_size());
  return out;
}

Pairs DecodeOk(Decoder* d, std::string_view block) {
  HeaderList list;
  Status st = d->Decode(block, &list);
  EXPECT_TRUE(st.ok()) << st.error().message();
  return ToPairs(list);
}

Error DecodeError(Decoder* d, std::string_view block) {
  HeaderList list;
  Status st = d->Decode(block, &list);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(list.empty());
  return st.ok() ? Error(Code::kOk, "") : st.error();
}

std::string HuffmanEncoded(std::string_view s) {
  std::string out;
  HuffmanEncode(s, &out);
  EXPECT_EQ(out.size(), HuffmanEncodedSize(s));
  return out;
}

// ---- integers (§5.1, C.1) ---------------------------------------------------

TEST(HpackInteger, RfcC1) {
  std::string out;
  AppendInteger(10, 5, 0, &out);
  EXPECT_EQ(ToHex(out), "0a");  // C.1.1
  out.clear();
  AppendInteger(1337, 5, 0, &out);
  EXPECT_EQ(ToHex(out), "1f9a0a");  // C.1.2
  out.clear();
  AppendInteger(42, 8, 0, &out);
  EXPECT_EQ(ToHex(out), "2a");  // C.1.3

  uint32_t v = 0;
  size_t pos = 0;
  ASSERT_TRUE(ReadInteger(Hex("1f9a0a"), &pos, 5, &v));
  EXPECT_EQ(v, 1337u);
  EXPECT_EQ(pos, 3u);
  // The bits above the prefix belong to the representation, not the value.
  pos = 0;
  ASSERT_TRUE(ReadInteger(Hex("ff9a0a"), &pos, 5, &v));
  EXPECT_EQ(v, 1337u);
  pos = 1;
  ASSERT_TRUE(ReadInteger(Hex("ff2a"), &pos, 8, &v));
  EXPECT_EQ(v, 42u);
  EXPECT_EQ(pos, 2u);
}

TEST(HpackInteger, PatternBitsAndBoundaries) {
  std::string out;
  AppendInteger(30, 5, 0xe0, &out);
  AppendInteger(31, 5, 0x20, &out);
  AppendInteger(127 + 128, 7, 0x80, &out);
  EXPECT_EQ(ToHex(out), "fe3f00ff8001");  // 30 in 5 bits, 31 in 5 bits, 255 in 7 bits
}

TEST(HpackInteger, RoundTripsUpTo2To32Minus1) {
  const uint64_t values[] = {0,       1,       14,      15,        16,        30,         31,        62,    63,
                             126,     127,     128,     254,       255,       256,        16383,     16384, 65535,
                             2097157, 2097151, 2097152, 268435455, 268435456, 0xfffffffe, 0xffffffff};
  for (int prefix = 1; prefix <= 8; ++prefix) {
    for (uint64_t value : values) {
      std::string out = "x";
      AppendInteger(value, prefix, 0, &out);
      size_t pos = 1;
      uint32_t back = 0;
      ASSERT_TRUE(ReadInteger(out, &pos, prefix, &back)) << prefix << " " << value;
      EXPECT_EQ(back, value);
      EXPECT_EQ(pos, out.size());
      // Every shorter encoding is a truncated one.
      for (size_t n = 1; n < out.size(); ++n) {
        pos = 1;
        EXPECT_FALSE(ReadInteger(std::string_view(out).substr(0, n), &pos, prefix, &back));
        EXPECT_EQ(pos, 1u);
      }
    }
  }
}

TEST(HpackInteger, RejectsOverflowAndOverlong) {
  uint32_t v;
  size_t pos = 0;
  EXPECT_TRUE(ReadInteger(Hex("ff80feffff0f"), &pos, 8, &v));  // 255 + (2^32 - 256)
  EXPECT_EQ(v, 0xffffffffu);
  pos = 0;
  EXPECT_FALSE(ReadInteger(Hex("ff81feffff0f"), &pos, 8, &v));  // 2^32
  pos = 0;
  EXPECT_FALSE(ReadInteger(Hex("1fffffffff7f"), &pos, 5, &v));
  pos = 0;
  // A sixth octet: zeros that change nothing, still refused (no endless input).
  EXPECT_FALSE(ReadInteger(Hex("1f808080808000"), &pos, 5, &v));
  EXPECT_EQ(pos, 0u);
  pos = 0;
  EXPECT_TRUE(ReadInteger(Hex("1f8080808000"), &pos, 5, &v));  // five octets: allowed
  EXPECT_EQ(v, 31u);
  pos = 0;
  EXPECT_FALSE(ReadInteger("", &pos, 5, &v));
}

// ---- Huffman (Appendix B) ---------------------------------------------------

// The code of an octet as a bit string: eight copies encode to exactly
// length octets, with no padding.
std::string CodeBits(unsigned char c) {
  std::string enc = HuffmanEncoded(std::string(8, static_cast<char>(c)));
  std::string bits;
  for (unsigned char b : enc) {
    for (int k = 7; k >= 0; --k) bits.push_back((b >> k) & 1 ? '1' : '0');
  }
  return bits.substr(0, enc.size());  // the first of the eight codes
}

std::string Bits(uint32_t code, int len) {
  std::string s;
  for (int k = len - 1; k >= 0; --k) s.push_back((code >> k) & 1 ? '1' : '0');
  return s;
}

TEST(HpackHuffman, AppendixBSpotCodes) {
  EXPECT_EQ(CodeBits('0'), "00000");
  EXPECT_EQ(CodeBits('1'), "00001");
  EXPECT_EQ(CodeBits('a'), "00011");
  EXPECT_EQ(CodeBits('e'), "00101");
  EXPECT_EQ(CodeBits('t'), "01001");
  EXPECT_EQ(CodeBits(' '), "010100");
  EXPECT_EQ(CodeBits('-'), "010110");
  EXPECT_EQ(CodeBits('/'), "011000");
  EXPECT_EQ(CodeBits(':'), "1011100");
  EXPECT_EQ(CodeBits('A'), "100001");
  EXPECT_EQ(CodeBits('z'), "1111011");
  EXPECT_EQ(CodeBits(0x00), Bits(0x1ff8, 13));
  EXPECT_EQ(CodeBits(0xff), Bits(0x3ffffee, 26));
  EXPECT_EQ(CodeBits(22), Bits(0x3ffffffe, 30));
  // EOS is 30 ones, the code after 22's: the same bits plus two of padding
  // decode to 22, all ones is EOS and refused.
  std::string out;
  EXPECT_TRUE(HuffmanDecode(Hex("fffffffb"), &out));
  EXPECT_EQ(out, "\x16");
  out.clear();
  EXPECT_FALSE(HuffmanDecode(Hex("ffffffff"), &out));
  // One octet padded: the code's bits, then ones.
  EXPECT_EQ(ToHex(HuffmanEncoded("0")), "07");
  EXPECT_EQ(ToHex(HuffmanEncoded(std::string(1, '\0'))), "ffc7");
  EXPECT_EQ(ToHex(HuffmanEncoded("\xff")), "fffffbbf");
}

TEST(HpackHuffman, KnownStrings) {
  const std::pair<const char*, const char*> cases[] = {
      {"www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"},
      {"no-cache", "a8eb10649cbf"},
      {"custom-key", "25a849e95ba97d7f"},
      {"custom-value", "25a849e95bb8e8b4bf"},
      {"application/grpc", "1d75d0620d263d4c4d6564"},
      {"trailers", "4d833505b11f"},
      {"localhost", "a0e41d139d09"},
      {"grpc-status", "9acac8b21234da8f"},
      {"grpc-message", "9acac8b5254207317f"},
      {"302", "6402"},
      {"private", "aec3771a4b"},
      {"Mon, 21 Oct 2013 20:13:21 GMT", "d07abe941054d444a8200595040b8166e082a62d1bff"},
      {"https://www.example.com", "9d29ad171863c78f0b97c8e9ae82ae43d3"},
      {"gzip", "9bd9ab"},
      {"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
       "94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"},
  };
  for (const auto& [text, hex] : cases) {
    EXPECT_EQ(ToHex(HuffmanEncoded(text)), hex) << text;
    std::string out = "prefix:";
    EXPECT_TRUE(HuffmanDecode(Hex(hex), &out)) << text;
    EXPECT_EQ(out, std::string("prefix:") + text);
  }
}

TEST(HpackHuffman, EveryOctetRoundTrips) {
  std::string all;
  for (int c = 0; c < 256; ++c) {
    std::string one(1, static_cast<char>(c));
    std::string back;
    ASSERT_TRUE(HuffmanDecode(HuffmanEncoded(one), &back)) << c;
    EXPECT_EQ(back, one);
    all += one;
  }
  std::string back;
  ASSERT_TRUE(HuffmanDecode(HuffmanEncoded(all), &back));
  EXPECT_EQ(back, all);
  // Kraft: the 256 codes and EOS fill the code space, so the shortest is 5
  // bits and all 256 octets take far more than 256 octets.
  EXPECT_GT(HuffmanEncodedSize(all), all.size());
}

TEST(HpackHuffman, RandomStringsRoundTrip) {
  std::mt19937 rng(7541);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 200, '\0');
    const bool text = i % 2 == 0;
    for (char& c : s) c = static_cast<char>(text ? 32 + rng() % 95 : rng() % 256);
    std::string enc = HuffmanEncoded(s);
    std::string back;
    ASSERT_TRUE(HuffmanDecode(enc, &back)) << ToHex(enc);
    ASSERT_EQ(back, s);
  }
}

TEST(HpackHuffman, DecodeErrors) {
  std::string out = "kept";
  // 'a' (00011), EOS (30 ones), 5 ones of padding.
  EXPECT_FALSE(HuffmanDecode(Hex("1fffffffff"), &out));
  EXPECT_EQ(out, "kept");
  // '0' then 11 bits of ones: padding longer than 7 bits.
  EXPECT_FALSE(HuffmanDecode(Hex("07ff"), &out));
  // A whole octet of ones is padding too long.
  EXPECT_FALSE(HuffmanDecode(Hex("ff"), &out));
  // '0' (00000), padding 000.
  EXPECT_FALSE(HuffmanDecode(Hex("00"), &out));
  // '0' (00000), padding 110.
  EXPECT_FALSE(HuffmanDecode(Hex("06"), &out));
  EXPECT_EQ(out, "kept");
  // 7 ones of padding are the most allowed (0xc7 has a 25-bit code); none
  // is fine too.
  EXPECT_EQ(ToHex(HuffmanEncoded("\xc7")), "fffff67f");
  EXPECT_TRUE(HuffmanDecode(Hex("fffff67f"), &out));
  EXPECT_EQ(out, "kept\xc7");
  EXPECT_TRUE(HuffmanDecode(Hex("0000000000"), &out));
  EXPECT_EQ(out, std::string("kept\xc7") + "00000000");
  EXPECT_TRUE(HuffmanDecode("", &out));
  EXPECT_EQ(out, std::string("kept\xc7") + "00000000");
}

// ---- the static table (Appendix A) ------------------------------------------

TEST(HpackStaticTable, AppendixA) {
  const std::pair<size_t, Pairs::value_type> spots[] = {
      {1, {":authority", ""}},
      {2, {":method", "GET"}},
      {3, {":method", "POST"}},
      {4, {":path", "/"}},
      {5, {":path", "/index.html"}},
      {6, {":scheme", "http"}},
      {7, {":scheme", "https"}},
      {8, {":status", "200"}},
      {14, {":status", "500"}},
      {15, {"accept-charset", ""}},
      {16, {"accept-encoding", "gzip, deflate"}},
      {20, {"access-control-allow-origin", ""}},
      {24, {"cache-control", ""}},
      {31, {"content-type", ""}},
      {33, {"date", ""}},
      {46, {"location", ""}},
      {55, {"set-cookie", ""}},
      {58, {"user-agent", ""}},
      {61, {"www-authenticate", ""}},
  };
  for (const auto& [index, want] : spots) {
    EXPECT_EQ(StaticTableEntry(index).name, want.first) << index;
    EXPECT_EQ(StaticTableEntry(index).value, want.second) << index;
  }
  for (size_t i = 1; i <= kStaticTableSize; ++i) EXPECT_FALSE(StaticTableEntry(i).name.empty()) << i;
}

// ---- the decoder: Appendix C ------------------------------------------------

TEST(HpackDecoder, RfcC2SingleFields) {
  {  // C.2.1: literal with incremental indexing
    Decoder d;
    EXPECT_EQ(DecodeOk(&d, Hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")),
              (Pairs{{"custom-key", "custom-header"}}));
    EXPECT_EQ(Table(d), (Pairs{{"custom-key", "custom-header"}}));
    EXPECT_EQ(d.table_size(), 55u);
  }
  {  // C.2.2: literal without indexing
    Decoder d;
    EXPECT_EQ(DecodeOk(&d, Hex("040c 2f73 616d 706c 652f 7061 7468")), (Pairs{{":path", "/sample/path"}}));
    EXPECT_EQ(d.table_entries(), 0u);
  }
  {  // C.2.3: literal never indexed
    Decoder d;
    EXPECT_EQ(DecodeOk(&d, Hex("1008 7061 7373 776f 7264 0673 6563 7265 74")), (Pairs{{"password", "secret"}}));
    EXPECT_EQ(d.table_entries(), 0u);
  }
  {  // C.2.4: indexed
    Decoder d;
    EXPECT_EQ(DecodeOk(&d, Hex("82")), (Pairs{{":method", "GET"}}));
    EXPECT_EQ(d.table_entries(), 0u);
  }
}

const Pairs kRequest1 = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Pairs kRequest2 = {{":method", "GET"},
                         {":scheme", "http"},
                         {":path", "/"},
                         {":authority", "www.example.com"},
                         {"cache-control", "no-cache"}};
const Pairs kRequest3 = {{":method", "GET"},
                         {":scheme", "https"},
                         {":path", "/index.html"},
                         {":authority", "www.example.com"},
                         {"custom-key", "custom-value"}};

void CheckRequests(const char* const blocks[3]) {
  Decoder d;
  EXPECT_EQ(DecodeOk(&d, Hex(blocks[0])), kRequest1);
  EXPECT_EQ(Table(d), (Pairs{{":authority", "www.example.com"}}));
  EXPECT_EQ(d.table_size(), 57u);
  EXPECT_EQ(DecodeOk(&d, Hex(blocks[1])), kRequest2);
  EXPECT_EQ(Table(d), (Pairs{{"cache-control", "no-cache"}, {":authority", "www.example.com"}}));
  EXPECT_EQ(d.table_size(), 110u);
  EXPECT_EQ(DecodeOk(&d, Hex(blocks[2])), kRequest3);
  EXPECT_EQ(Table(d),
            (Pairs{{"custom-key", "custom-value"}, {"cache-control", "no-cache"}, {":authority", "www.example.com"}}));
  EXPECT_EQ(d.table_size(), 164u);
}

const char* const kC3[3] = {
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
};
const char* const kC4[3] = {
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
};

TEST(HpackDecoder, RfcC3RequestsWithoutHuffman) { CheckRequests(kC3); }
TEST(HpackDecoder, RfcC4RequestsWithHuffman) { CheckRequests(kC4); }

const Pairs kResponse1 = {{":status", "302"},
                          {"cache-control", "private"},
                          {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                          {"location", "https://www.example.com"}};
const Pairs kResponse2 = {{":status", "307"},
                          {"cache-control", "private"},
                          {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                          {"location", "https://www.example.com"}};
const Pairs kResponse3 = {{":status", "200"},
                          {"cache-control", "private"},
                          {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
                          {"location", "https://www.example.com"},
                          {"content-encoding", "gzip"},
                          {"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"}};

// SETTINGS_HEADER_TABLE_SIZE 256: evictions.
void CheckResponses(const char* const blocks[3]) {
  Decoder d(256);
  EXPECT_EQ(DecodeOk(&d, Hex(blocks[0])), kResponse1);
  EXPECT_EQ(Table(d), (Pairs{{"location", "https://www.example.com"},
                             {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                             {"cache-control", "private"},
                             {":status", "302"}}));
  EXPECT_EQ(d.table_size(), 222u);
  EXPECT_EQ(DecodeOk(&d, Hex(blocks[1])), kResponse2);
  EXPECT_EQ(Table(d), (Pairs{{":status", "307"},
                             {"location", "https://www.example.com"},
                             {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                             {"cache-control", "private"}}));
  EXPECT_EQ(d.table_size(), 222u);
  EXPECT_EQ(DecodeOk(&d, Hex(blocks[2])), kResponse3);
  EXPECT_EQ(Table(d), (Pairs{{"set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"},
                             {"content-encoding", "gzip"},
                             {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}}));
  EXPECT_EQ(d.table_size(), 215u);
}

const char* const kC5[3] = {
    "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133"
    "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "4803 3330 37c1 c0bf",
    "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d"
    "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049"
    "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
};
const char* const kC6[3] = {
    "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6"
    "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    "4883 640e ffc1 c0bf",
    "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab"
    "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f"
    "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
};

TEST(HpackDecoder, RfcC5ResponsesWithoutHuffman) { CheckResponses(kC5); }
TEST(HpackDecoder, RfcC6ResponsesWithHuffman) { CheckResponses(kC6); }

// A unary call's request headers as grpc-go sent them (inserting five
// fields), then the next call's, all indexed.
const char kGrpcGoRequest[] =
    "83 86 44 8c 62be b32f bbb9 18d0 54ce 793f 41 86 a0e4 1d13 9d09 5f 8b 1d75 d062 0d26 3d4c 4d65 64"
    "7a 8a 9aca c8b4 c760 2bbc cae1 40 02 7465 86 4d83 3505 b11f";
const char kGrpcGoNextRequest[] = "83 86 c2 c1 c0 bf be";
const Pairs kGrpcRequest = {{":method", "POST"},
                            {":scheme", "http"},
                            {":path", "/pkg.Svc/Method"},
                            {":authority", "localhost"},
                            {"content-type", "application/grpc"},
                            {"user-agent", "grpc-go/1.83.1"},
                            {"te", "trailers"}};

TEST(HpackDecoder, GrpcGoRequests) {
  Decoder d;
  EXPECT_EQ(DecodeOk(&d, Hex(kGrpcGoRequest)), kGrpcRequest);
  EXPECT_EQ(d.table_entries(), 5u);
  EXPECT_EQ(d.table_size(), 261u);
  EXPECT_EQ(Table(d)[0], (Pairs::value_type{"te", "trailers"}));
  EXPECT_EQ(DecodeOk(&d, Hex(kGrpcGoNextRequest)), kGrpcRequest);
  EXPECT_EQ(d.table_size(), 261u);
}

// ---- the decoder: the table -------------------------------------------------

TEST(HpackDecoder, SizeUpdatesAtTheStartOnly) {
  Decoder d;
  EXPECT_EQ(DecodeOk(&d, Hex(kGrpcGoRequest)), kGrpcRequest);
  // Several in a row, the last one wins: 0 empties the table, then 4096.
  EXPECT_EQ(DecodeOk(&d, Hex("20 3fe11f 82")), (Pairs{{":method", "GET"}}));
  EXPECT_EQ(d.table_entries(), 0u);
  EXPECT_EQ(d.table_size(), 0u);
  EXPECT_EQ(d.table_max_size(), 4096u);
  // An update alone is a valid (empty) block.
  EXPECT_EQ(DecodeOk(&d, Hex("3f e1 01")), Pairs{});  // 31 + 97 + 128 = 256
  EXPECT_EQ(d.table_max_size(), 256u);

  Error e = DecodeError(&d, Hex("82 20"));
  EXPECT_EQ(e.code(), Code::kInternal);
  EXPECT_EQ(e.message(), "hpack: table size update after a field at octet 1");
  e = DecodeError(&d, Hex("3f e2 1f"));  // 4097
  EXPECT_EQ(e.message(), "hpack: table size update to 4097 over the limit of 4096 at octet 0");
}

TEST(HpackDecoder, SetMaxTableSize) {
  Decoder d(4096);
  EXPECT_EQ(DecodeOk(&d, Hex(kC3[0])), kRequest1);
  EXPECT_EQ(DecodeOk(&d, Hex(kC3[1])), kRequest2);
  EXPECT_EQ(d.table_size(), 110u);
  // Lowered (and acknowledged): the table shrinks at once, and the peer may
  // ask for no more than that.
  d.SetMaxTableSize(100);
  EXPECT_EQ(d.table_max_size(), 100u);
  EXPECT_EQ(Table(d), (Pairs{{"cache-control", "no-cache"}}));
  EXPECT_EQ(DecodeError(&d, Hex("3f 46")).code(), Code::kInternal);                  // 101
  EXPECT_EQ(DecodeOk(&d, Hex("3f 45 be")), (Pairs{{"cache-control", "no-cache"}}));  // 100
  // Raised: the table keeps its size until the peer asks for more.
  d.SetMaxTableSize(8192);
  EXPECT_EQ(d.table_max_size(), 100u);
  EXPECT_EQ(DecodeOk(&d, Hex("3f e1 3f")), Pairs{});  // 31 + 97 + 63 * 128 = 8192
  EXPECT_EQ(d.table_max_size(), 8192u);
}

TEST(HpackDecoder, EntryLargerThanTheTableEmptiesIt) {
  Decoder d(64);
  EXPECT_EQ(DecodeOk(&d, Hex("40 01 61 01 62")), (Pairs{{"a", "b"}}));
  EXPECT_EQ(d.table_size(), 34u);
  // 1 + 32 + 32 = 65 octets: not an error, the field is listed, the table empty.
  const std::string big = Hex("40 01 78 20") + std::string(32, 'v');
  EXPECT_EQ(DecodeOk(&d, big), (Pairs{{"x", std::string(32, 'v')}}));
  EXPECT_EQ(d.table_entries(), 0u);
  EXPECT_EQ(d.table_size(), 0u);
  // Exactly the table's size fits.
  EXPECT_EQ(DecodeOk(&d, Hex("40 01 78 1f") + std::string(31, 'v')), (Pairs{{"x", std::string(31, 'v')}}));
  EXPECT_EQ(d.table_size(), 64u);
}

TEST(HpackDecoder, NameOfAnEntryTheInsertionEvicts) {
  Decoder d(4096);
  // Table size 70, then ("abc", "def") (38 octets).
  EXPECT_EQ(DecodeOk(&d, Hex("3f 27 40 03 616263 03 646566")), (Pairs{{"abc", "def"}}));
  // Name from index 62, value "vvvvv": 40 octets, which evicts index 62
  // first (§4.4); the name must survive.
  EXPECT_EQ(DecodeOk(&d, Hex("7e 05 7676767676")), (Pairs{{"abc", "vvvvv"}}));
  EXPECT_EQ(Table(d), (Pairs{{"abc", "vvvvv"}}));
  EXPECT_EQ(d.table_size(), 40u);
}

TEST(HpackDecoder, ManyInsertionsWrapTheTable) {
  Decoder d(4096);
  std::mt19937 rng(1);
  Pairs inserted;
  for (int i = 0; i < 3000; ++i) {
    std::string value(rng() % 300, static_cast<char>('a' + i % 26));
    std::string block = Hex("40 01 6b");
    AppendInteger(value.size(), 7, 0, &block);
    block += value;
    ASSERT_EQ(DecodeOk(&d, block), (Pairs{{"k", value}}));
    inserted.emplace(inserted.begin(), "k", value);
    size_t size = 0, n = 0;
    while (n < inserted.size() && size + 33 + inserted[n].second.size() <= 4096) {
      size += 33 + inserted[n++].second.size();
    }
    inserted.resize(n);
    ASSERT_EQ(Table(d), inserted);
    ASSERT_EQ(d.table_size(), size);
    // The oldest entry is still addressable.
    std::string ref;
    AppendInteger(kStaticTableSize + n, 7, 0x80, &ref);
    ASSERT_EQ(DecodeOk(&d, ref), (Pairs{inserted.back()}));
  }
}

// ---- the decoder: malformed blocks ------------------------------------------

TEST(HpackDecoder, IndexErrors) {
  Decoder d;
  EXPECT_EQ(DecodeError(&d, Hex("80")).message(), "hpack: index 0 at octet 0");
  EXPECT_EQ(DecodeError(&d, Hex("82 be")).message(), "hpack: index 62 beyond the table (61 entries) at octet 1");
  // A name index past the table.
  EXPECT_EQ(DecodeError(&d, Hex("7f 00 01 61")).message(), "hpack: index 63 beyond the table (61 entries) at octet 0");
  EXPECT_EQ(DecodeError(&d, Hex("0f 2f 01 61")).message(), "hpack: index 62 beyond the table (61 entries) at octet 0");
  EXPECT_EQ(DecodeOk(&d, Hex("40 01 61 01 62")), (Pairs{{"a", "b"}}));
  Error e = DecodeError(&d, Hex("8286 40 01 63 01 64 c6"));
  EXPECT_EQ(e.code(), Code::kInternal);
  EXPECT_EQ(e.message(), "hpack: index 70 beyond the table (63 entries) at octet 7");
  EXPECT_EQ(DecodeError(&d, Hex("ff 80 80 80 80 10")).message(), "hpack: integer over 2^32-1 or 6 octets at octet 0");
}

TEST(HpackDecoder, TruncationAndOverflowErrors) {
  Decoder d;
  EXPECT_EQ(DecodeError(&d, Hex("ff")).message(), "hpack: truncated integer at octet 0");
  EXPECT_EQ(DecodeError(&d, Hex("82 ff 80")).message(), "hpack: truncated integer at octet 1");
  EXPECT_EQ(DecodeError(&d, Hex("82 40")).message(), "hpack: truncated integer at octet 2");
  EXPECT_EQ(DecodeError(&d, Hex("82 40 7f")).message(), "hpack: truncated integer at octet 2");
  EXPECT_EQ(DecodeError(&d, Hex("40 0a 6375")).message(), "hpack: truncated string at octet 1");
  EXPECT_EQ(DecodeError(&d, Hex("04 0c 2f73")).message(), "hpack: truncated string at octet 1");
  EXPECT_EQ(DecodeError(&d, Hex("00 7f ffffffff0f")).message(), "hpack: integer over 2^32-1 or 6 octets at octet 1");
  EXPECT_EQ(DecodeError(&d, Hex("ff 80 80 80 80 80 00")).message(),
            "hpack: integer over 2^32-1 or 6 octets at octet 0");
  EXPECT_EQ(DecodeError(&d, Hex("3f ffffffff0f")).message(), "hpack: integer over 2^32-1 or 6 octets at octet 0");
  EXPECT_EQ(d.table_entries(), 0u);
}

TEST(HpackDecoder, HuffmanErrors) {
  Decoder d;
  const char* const bad[] = {
      "82 04 85 1fffffffff",  // EOS in the value
      "82 04 82 07ff",        // 11 bits of padding
      "82 04 81 00",          // padding of zeros
      "82 00 81 06 01 61",    // padding 110 in the name
  };
  for (const char* hex : bad) {
    Error e = DecodeError(&d, Hex(hex));
    EXPECT_EQ(e.code(), Code::kInternal) << hex;
    EXPECT_NE(e.message().find("Huffman"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("at octet 2"), std::string::npos) << e.message();
  }
}

// Every prefix of a valid block either fails cleanly or (ending at a field
// boundary) decodes the first fields; the decoder starts each time from the
// state the whole block was decoded in.
void CheckPrefixes(const Decoder& before, const std::string& block) {
  Decoder whole = before;
  HeaderList full;
  ASSERT_TRUE(whole.Decode(block, &full).ok());
  size_t ok = 0;
  for (size_t n = 0; n < block.size(); ++n) {
    Decoder d = before;
    HeaderList list = {{"kept", "field"}};
    Status st = d.Decode(std::string_view(block).substr(0, n), &list);
    ASSERT_GE(list.size(), 1u);
    EXPECT_EQ(list[0].name, "kept");
    list.erase(list.begin());
    if (!st.ok()) {
      EXPECT_EQ(st.error().code(), Code::kInternal);
      EXPECT_TRUE(list.empty());
      continue;
    }
    ++ok;
    ASSERT_LE(list.size(), full.size());
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(list[i].name, full[i].name);
      EXPECT_EQ(list[i].value, full[i].value);
    }
  }
  EXPECT_EQ(ok, full.size());  // one per field boundary, the empty block included
}

TEST(HpackDecoder, EveryPrefixFailsCleanlyOrDecodesAPrefix) {
  for (const auto* blocks : {kC3, kC4, kC5, kC6}) {
    Decoder d(blocks == kC5 || blocks == kC6 ? 256 : 4096);
    for (int i = 0; i < 3; ++i) {
      std::string block = Hex(blocks[i]);
      CheckPrefixes(d, block);
      HeaderList ignored;
      ASSERT_TRUE(d.Decode(block, &ignored).ok());
    }
  }
  Decoder d;
  CheckPrefixes(d, Hex(kGrpcGoRequest));
}

TEST(HpackDecoder, RandomBytesNeverCrash) {
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    Decoder d(256, 1024);
    std::string block(rng() % 64, '\0');
    for (char& c : block) c = static_cast<char>(rng());
    HeaderList list;
    (void)d.Decode(block, &list);
    EXPECT_LE(d.table_size(), d.table_max_size());
    (void)Table(d);
  }
}

// ---- the decoder: the header-list limit -------------------------------------

TEST(HpackDecoder, ListLimitKeepsTheTableInStep) {
  Decoder d(4096, 100);
  // ("x-a", 60 octets) is 95 octets, ("x-b", 10 octets) 45: both inserted,
  // the list refused.
  std::string block = Hex("40 03 782d61 3c") + std::string(60, 'a') + Hex("40 03 782d62 0a") + std::string(10, 'b');
  HeaderList list = {{"kept", "field"}};
  Status st = d.Decode(block, &list);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(st.error().message(), "hpack: header list over the limit of 100 octets at octet 66");
  EXPECT_EQ(ToPairs(list), (Pairs{{"kept", "field"}}));
  EXPECT_EQ(Table(d), (Pairs{{"x-b", std::string(10, 'b')}, {"x-a", std::string(60, 'a')}}));
  // The next block refers to what the refused one inserted.
  EXPECT_EQ(DecodeOk(&d, Hex("bf")), (Pairs{{"x-a", std::string(60, 'a')}}));
  EXPECT_EQ(DecodeOk(&d, Hex("be 82")), (Pairs{{"x-b", std::string(10, 'b')}, {":method", "GET"}}));
  // Exactly the limit is accepted: 45 + 0 + 23 + 32.
  EXPECT_EQ(DecodeOk(&d, Hex("be 00 00 17") + std::string(23, 'c')),
            (Pairs{{"x-b", std::string(10, 'b')}, {"", std::string(23, 'c')}}));
  EXPECT_EQ(DecodeError(&d, Hex("be 00 00 18") + std::string(24, 'c')).code(), Code::kResourceExhausted);
  // Indexed fields count too.
  EXPECT_EQ(DecodeError(&d, Hex("bf be")).code(), Code::kResourceExhausted);
}

// A string literal: its length (and H bit) and its octets as given.
std::string Literal(std::string_view octets, bool huffman = false) {
  std::string out;
  AppendInteger(octets.size(), 7, huffman ? 0x80 : 0x00, &out);
  out.append(octets);
  return out;
}

TEST(HpackDecoder, ListLimitSkipsLongStrings) {
  Decoder d(4096, 100);
  // A 5000-octet value without indexing, then a field with indexing: the
  // first is skipped, the second still inserted.
  std::string block = Hex("00") + Literal("x") + Literal(std::string(5000, 'v')) + Hex("40 01 79 01 7a");
  HeaderList list;
  Status st = d.Decode(block, &list);
  EXPECT_EQ(st.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(st.error().message(), "hpack: header list over the limit of 100 octets at octet 0");
  EXPECT_TRUE(list.empty());
  EXPECT_EQ(Table(d), (Pairs{{"y", "z"}}));
  // A long string in a field with indexing that cannot fit the table:
  // skipped, and the table emptied as the insertion would.
  block = Hex("40") + Literal("x") + Literal(std::string(5000, 'v'));
  EXPECT_EQ(DecodeError(&d, block).code(), Code::kResourceExhausted);
  EXPECT_EQ(d.table_entries(), 0u);
  EXPECT_EQ(d.table_size(), 0u);
  // Huffman coded, in a name: 20000 octets decode to at least 5334.
  EXPECT_EQ(DecodeOk(&d, Hex("40 01 61 01 62")), (Pairs{{"a", "b"}}));
  block = Hex("40") + Literal(std::string(20000, '\xff'), true) + Literal("a");
  EXPECT_EQ(DecodeError(&d, block).code(), Code::kResourceExhausted);
  EXPECT_EQ(d.table_entries(), 0u);
  // One that may fit the table is decoded for it, though not listed; a
  // Huffman string that turns out too big for it empties it.
  EXPECT_EQ(DecodeOk(&d, Hex("40 01 61 01 62")), (Pairs{{"a", "b"}}));
  block = Hex("40") + Literal("x") + Literal(std::string(300, 'v'));
  EXPECT_EQ(DecodeError(&d, block).code(), Code::kResourceExhausted);
  EXPECT_EQ(Table(d), (Pairs{{"x", std::string(300, 'v')}, {"a", "b"}}));
  block = Hex("40") + Literal("y") + Literal(HuffmanEncoded(std::string(5000, 'a')), true);
  EXPECT_EQ(DecodeError(&d, block).code(), Code::kResourceExhausted);
  EXPECT_EQ(d.table_entries(), 0u);
  // Skipped strings are not read: a bad Huffman string past the limit in a
  // field without indexing is no compression error.
  EXPECT_EQ(DecodeOk(&d, Hex("40 01 61 01 62")), (Pairs{{"a", "b"}}));
  block = Hex("00") + Literal("x") + Literal(std::string(5000, '\0'), true);
  EXPECT_EQ(DecodeError(&d, block).code(), Code::kResourceExhausted);
  EXPECT_EQ(Table(d), (Pairs{{"a", "b"}}));
}

// ---- the encoder --------------------------------------------------------------

TEST(HpackEncoder, GrpcRequest) {
  HeaderList fields;
  for (const auto& [name, value] : kGrpcRequest) fields.push_back({name, value});
  Encoder e;
  std::string out;
  e.Encode(fields, &out);
  // Size update to 0; :method POST and :scheme http indexed; :path,
  // :authority, content-type and user-agent with indexed names (4-bit
  // prefix: 31 and 58 take a second octet), Huffman values; "te" and its
  // Huffman value ("te" itself is not shorter coded).
  EXPECT_EQ(ToHex(out), ToHex(Hex("20 83 86 "
                                  "04 8c 62beb32fbbb918d054ce793f "
                                  "01 86 a0e41d139d09 "
                                  "0f10 8b 1d75d0620d263d4c4d6564 "
                                  "0f2b 8a 9acac8b4c7602bbccae1 "
                                  "00 02 7465 86 4d833505b11f")));
  Decoder d;
  EXPECT_EQ(DecodeOk(&d, out), kGrpcRequest);
  EXPECT_EQ(d.table_entries(), 0u);
  // The same one field at a time, and no size update any more.
  std::string again;
  e.Begin(&again);
  for (const HeaderField& f : fields) e.Add(f.name, f.value, &again);
  EXPECT_EQ(again, out.substr(1));
  EXPECT_EQ(DecodeOk(&d, again), kGrpcRequest);
}

TEST(HpackEncoder, SizeUpdateFirstAndAfterPeerChange) {
  Encoder e;
  const HeaderList fields = {{":status", "200"}};
  std::string out;
  e.Encode(fields, &out);
  EXPECT_EQ(ToHex(out), "2088");
  out.clear();
  e.Encode(fields, &out);
  EXPECT_EQ(ToHex(out), "88");
  e.PeerTableSizeChanged();
  out.clear();
  e.Encode({}, &out);
  EXPECT_EQ(ToHex(out), "20");
  out.clear();
  e.Encode(fields, &out);
  EXPECT_EQ(ToHex(out), "88");
  // A peer that set its table to 0 decodes it all.
  Decoder d(0);
  EXPECT_EQ(DecodeOk(&d, Hex("20 88")), (Pairs{{":status", "200"}}));
}

TEST(HpackEncoder, StaticMatches) {
  const std::pair<Pairs::value_type, const char*> cases[] = {
      {{":method", "GET"}, "82"},
      {{":path", "/index.html"}, "85"},
      {{":status", "500"}, "8e"},
      {{"accept-charset", ""}, "8f"},
      {{"accept-encoding", "gzip, deflate"}, "90"},
      {{"www-authenticate", ""}, "bd"},
      {{":status", "201"}, "08 82 1003"},
      {{":authority", "x"}, "01 01 78"},
      {{"accept-encoding", "gzip"}, "0f01 83 9bd9ab"},
      {{"www-authenticate", "a"}, "0f2e 01 61"},
      {{"grpc-status", "0"}, "00 88 9acac8b21234da8f 01 30"},
      {{"grpc-message", ""}, "00 89 9acac8b5254207317f 00"},
      {{"", ""}, "00 00 00"},
      {{":METHOD", "GET"}, "00 07 3a4d4554484f44 03 474554"},
  };
  for (const auto& [field, hex] : cases) {
    Encoder e;
    std::string out;
    e.Begin(&out);
    out.clear();
    e.Add(field.first, field.second, &out);
    EXPECT_EQ(ToHex(out), ToHex(Hex(hex))) << field.first << ": " << field.second;
  }
}

TEST(HpackEncoder, EveryStaticEntryAndNameRoundTrips) {
  for (size_t i = 1; i <= kStaticTableSize; ++i) {
    const StaticEntry& s = StaticTableEntry(i);
    Encoder e;
    std::string out;
    e.Encode({{std::string(s.name), std::string(s.value)}, {std::string(s.name), "other value"}}, &out);
    std::string want = "\x20";
    AppendInteger(i, 7, 0x80, &want);
    EXPECT_EQ(ToHex(out.substr(0, want.size())), ToHex(want)) << s.name;
    Decoder d;
    EXPECT_EQ(DecodeOk(&d, out),
              (Pairs{{std::string(s.name), std::string(s.value)}, {std::string(s.name), "other value"}}));
  }
}

TEST(HpackEncoder, RandomListsRoundTrip) {
  std::mt19937 rng(9113);
  const char* const names[] = {":path", ":status", "content-type", "grpc-timeout", "te", "x-custom", "cookie", ""};
  Encoder e;
  for (int i = 0; i < 500; ++i) {
    HeaderList fields;
    for (size_t n = rng() % 12; n > 0; --n) {
      HeaderField f;
      f.name = rng() % 4 ? names[rng() % 8] : std::string(rng() % 40, 'n');
      size_t len = rng() % 3 ? rng() % 40 : rng() % 20000;
      for (size_t k = 0; k < len; ++k) f.value.push_back(static_cast<char>(rng() % 3 ? 'a' + rng() % 26 : rng()));
      fields.push_back(f);
    }
    if (rng() % 10 == 0) e.PeerTableSizeChanged();
    std::string out;
    e.Encode(fields, &out);
    Decoder d(4096, SIZE_MAX);
    HeaderList back;
    ASSERT_TRUE(d.Decode(out, &back).ok());
    ASSERT_EQ(ToPairs(back), ToPairs(fields));
    EXPECT_EQ(d.table_entries(), 0u);
  }
}

}  // namespace
}  // namespace outpost::wire::hpack
