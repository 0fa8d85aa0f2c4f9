// libFuzzer target for wire/hpack. Byte 0 picks the decoder's table size
// (bits 0-1: 0, 64, 256 or 4096) and header-list limit (bits 2-3: 64, 512,
// 4096 or 16384); the rest is a connection's header blocks, each led by a
// length octet (0xfe: a 16-bit big-endian length follows; 0xff: the next
// octet times 32 becomes the advertised table size, SetMaxTableSize),
// decoded in order on one Decoder as on a connection, until a compression
// error ends it. Invariants: the table never exceeds its maximum, which
// never exceeds what was advertised, and its size is the sum of its
// entries'; a refused list leaves nothing behind; an accepted list is
// within the limit, and the Encoder's block for it starts with a size
// update to 0 and decodes back to the same list on a fresh Decoder (whose
// table stays empty). Every block is also fed to HuffmanDecode: what
// decodes re-encodes to exactly the same octets (the padding is unique),
// and to ReadInteger, whose value re-encodes to one that reads the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "wire/hpack.h"

namespace {

using outpost::Code;
using outpost::Status;
using outpost::wire::hpack::AppendInteger;
using outpost::wire::hpack::Decoder;
using outpost::wire::hpack::Encoder;
using outpost::wire::hpack::FieldSize;
using outpost::wire::hpack::HeaderField;
using outpost::wire::hpack::HeaderList;
using outpost::wire::hpack::HuffmanDecode;
using outpost::wire::hpack::HuffmanEncode;
using outpost::wire::hpack::HuffmanEncodedSize;
using outpost::wire::hpack::ReadInteger;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool SameList(const HeaderList& a, const HeaderList& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  }
  return true;
}

void CheckTable(const Decoder& d, uint32_t advertised) {
  Check(d.table_size() <= d.table_max_size() && d.table_max_size() <= advertised);
  size_t sum = 0;
  for (size_t i = 0; i < d.table_entries(); ++i) sum += FieldSize(d.table_entry(i).name, d.table_entry(i).value);
  Check(sum == d.table_size());
}

void CheckHuffman(std::string_view in) {
  std::string decoded;
  if (!HuffmanDecode(in, &decoded)) return;
  std::string again;
  HuffmanEncode(decoded, &again);
  Check(again == in && HuffmanEncodedSize(decoded) == in.size());
}

void CheckInteger(std::string_view in) {
  for (int prefix = 1; prefix <= 8; ++prefix) {
    size_t pos = 0;
    uint32_t value;
    if (!ReadInteger(in, &pos, prefix, &value)) continue;
    Check(pos > 0 && pos <= in.size() && pos <= 6);
    std::string again;
    AppendInteger(value, prefix, 0, &again);
    Check(again.size() <= pos);
    size_t pos2 = 0;
    uint32_t back;
    Check(ReadInteger(again, &pos2, prefix, &back) && back == value && pos2 == again.size());
  }
}

void CheckRoundTrip(const HeaderList& list, size_t limit) {
  size_t size = 0;
  for (const HeaderField& f : list) size += FieldSize(f.name, f.value);
  Check(size <= limit);
  Encoder e;
  std::string block;
  e.Encode(list, &block);
  Check(!block.empty() && block[0] == 0x20);
  Decoder fresh(4096, SIZE_MAX);
  HeaderList back;
  Check(fresh.Decode(block, &back).ok());
  Check(SameList(back, list));
  Check(fresh.table_entries() == 0 && fresh.table_size() == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const uint32_t kTableSizes[] = {0, 64, 256, 4096};
  static const size_t kListLimits[] = {64, 512, 4096, 16384};
  uint32_t advertised = kTableSizes[data[0] & 3];
  const size_t limit = kListLimits[(data[0] >> 2) & 3];
  Decoder d(advertised, limit);
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t i = 1;
  while (i < in.size()) {
    const uint8_t lead = data[i++];
    if (lead == 0xff) {
      if (i == in.size()) break;
      advertised = uint32_t{data[i++]} * 32;
      d.SetMaxTableSize(advertised);
      CheckTable(d, advertised);
      continue;
    }
    size_t len = lead;
    if (lead == 0xfe) {
      if (in.size() - i < 2) break;
      len = size_t{data[i]} << 8 | data[i + 1];
      i += 2;
    }
    const std::string_view block = in.substr(i, len);
    i += block.size();
    CheckHuffman(block);
    CheckInteger(block);
    HeaderList list;
    Status st = d.Decode(block, &list);
    CheckTable(d, advertised);
    if (st.ok()) {
      CheckRoundTrip(list, limit);
      continue;
    }
    Check(list.empty());
    if (st.error().code() != Code::kResourceExhausted) {
      Check(st.error().code() == Code::kInternal);
      break;  // a COMPRESSION_ERROR ends the connection
    }
  }
  return 0;
}
