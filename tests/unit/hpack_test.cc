// wire/hpack's Huffman code (Appendix B): the code of single octets
// checked bit by bit, known strings both ways, every octet and random
// strings round trip, and the decoding errors (EOS, long or bad padding).
#include "wire/hpack.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>

namespace outpost::wire::hpack {
namespace {

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

std::string HuffmanEncoded(std::string_view s) {
  std::string out;
  HuffmanEncode(s, &out);
  EXPECT_EQ(out.size(), HuffmanEncodedSize(s));
  return out;
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
  EXPECT_EQ(out,
            "kept\xc7"
            "00000000");
  EXPECT_TRUE(HuffmanDecode("", &out));
  EXPECT_EQ(out,
            "kept\xc7"
            "00000000");
}

}  // namespace
}  // namespace outpost::wire::hpack
