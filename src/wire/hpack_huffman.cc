// The Huffman code of RFC 7541 Appendix B. The code is canonical (within a
// length, codes rise with the symbol; each length's first code follows the
// previous length's last), so its 257 code lengths determine it: the rest
// is derived from them at compile time. Stored are the lengths, the octets
// in code order and each octet's rank in that order (256 octets each) and
// two words per length; no table of 256 codes, no decoding state machine.
#include <cstdint>

#include "wire/hpack.h"

namespace outpost::wire::hpack {

namespace {

// Code lengths in bits of octets 0..255 and of EOS (256): Appendix B.
constexpr uint8_t kCodeLen[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,  // 0x00
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,  // 0x10
    6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,   // 0x20
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10,  // 0x30
    13, 6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,   // 0x40
    7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,   // 0x50
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,   // 0x60
    6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28,  // 0x70
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,  // 0x80
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,  // 0x90
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,  // 0xa0
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,  // 0xb0
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,  // 0xc0
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,  // 0xd0
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,  // 0xe0
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,  // 0xf0
    30,                                                              // EOS
};

constexpr int kMinLen = 5;
constexpr int kMaxLen = 30;
constexpr int kLens = kMaxLen - kMinLen + 1;
constexpr uint32_t kEos = 256;

// Symbols ranked by (length, symbol): a symbol's code is its rank minus its
// length's base, and the decoder turns a code back into a rank the same way.
// EOS, the last of the longest codes, has rank 256.
struct Tables {
  uint8_t symbol[256];   // rank -> octet
  uint8_t rank[256];     // octet -> rank
  uint32_t base[kLens];  // rank - code, modulo 2^32
  // The last code of each length, left-aligned in 32 bits and filled with
  // ones below: a 32-bit window starting with a code of length L is at most
  // last[L] and above last[L - 1].
  uint32_t last[kLens];
};

constexpr Tables MakeTables() {
  Tables t{};
  uint32_t code = 0;
  uint32_t rank = 0;
  for (int len = kMinLen; len <= kMaxLen; ++len) {
    t.base[len - kMinLen] = rank - code;
    for (uint32_t s = 0; s <= kEos; ++s) {
      if (kCodeLen[s] != len) continue;
      if (s != kEos) {
        t.symbol[rank] = static_cast<uint8_t>(s);
        t.rank[s] = static_cast<uint8_t>(rank);
      }
      ++code;
      ++rank;
    }
    t.last[len - kMinLen] = static_cast<uint32_t>((uint64_t{code} << (32 - len)) - 1);
    code <<= 1;
  }
  return t;
}

constexpr Tables kTables = MakeTables();

constexpr uint32_t Code(uint32_t s) { return kTables.rank[s] - kTables.base[kCodeLen[s] - kMinLen]; }

// The lengths are a complete prefix code whose every code is at most 30 bits
// (the last 30-bit code is all ones), with EOS last; spot checks against
// Appendix B.
static_assert(kTables.last[kLens - 1] == 0xffffffffu && kTables.base[kLens - 1] + 0x3fffffffu == kEos);
static_assert(Code('0') == 0x0 && Code('a') == 0x3 && Code(' ') == 0x14 && Code(':') == 0x5c);
static_assert(Code(0) == 0x1ff8 && Code(0xff) == 0x3ffffee && Code(22) == 0x3ffffffe);

}  // namespace

size_t HuffmanEncodedSize(std::string_view in) {
  uint64_t bits = 0;
  for (unsigned char c : in) bits += kCodeLen[c];
  return static_cast<size_t>((bits + 7) / 8);
}

void HuffmanEncode(std::string_view in, std::string* out) {
  size_t at = out->size();
  out->resize(at + HuffmanEncodedSize(in));
  char* p = &(*out)[0] + at;
  uint64_t acc = 0;  // the low `bits` bits are pending
  int bits = 0;
  for (unsigned char c : in) {
    int len = kCodeLen[c];
    acc = (acc << len) | Code(c);
    bits += len;
    while (bits >= 8) {
      bits -= 8;
      *p++ = static_cast<char>(acc >> bits);
    }
  }
  // Padding: the most significant bits of EOS, all ones.
  if (bits > 0) *p = static_cast<char>((acc << (8 - bits)) | (0xffu >> bits));
}

bool HuffmanDecode(std::string_view in, std::string* out) {
  const size_t at = out->size();
  // Codes are at least 5 bits long: this is the most the input can hold.
  out->resize(at + in.size() * 8 / kMinLen);
  char* const start = &(*out)[0] + at;
  char* p = start;
  uint64_t acc = 0;  // the top `bits` bits are input not yet decoded, the rest zero
  int bits = 0;
  size_t i = 0;
  for (;;) {
    while (bits <= 56 && i < in.size()) {
      acc |= uint64_t{static_cast<unsigned char>(in[i++])} << (56 - bits);
      bits += 8;
    }
    if (bits == 0) break;
    const uint32_t window = static_cast<uint32_t>(acc >> 32);
    int len = kMinLen;
    while (window > kTables.last[len - kMinLen]) ++len;
    if (len > bits) {
      // Only at the end of the input (more would have been read): what is
      // left must be padding, 1 to 7 bits of EOS's prefix (all ones).
      if (bits > 7 || window >> (32 - bits) != (1u << bits) - 1) {
        out->resize(at);
        return false;
      }
      break;
    }
    const uint32_t rank = (window >> (32 - len)) + kTables.base[len - kMinLen];
    if (rank == kEos) {
      out->resize(at);
      return false;
    }
    *p++ = static_cast<char>(kTables.symbol[rank]);
    acc <<= len;
    bits -= len;
  }
  out->resize(at + static_cast<size_t>(p - start));
  return true;
}

}  // namespace outpost::wire::hpack
