#include "wire/hpack.h"

#include <cstdio>
#include <cstring>

#include "base/strings.h"

namespace outpost::wire::hpack {

namespace {

// Appendix A, read at compile time only: what is stored is the packed form
// below (about 1 KB), and the StaticEntry array StaticTableEntry returns
// from (61 string_view pairs into the packed text, 2 KB on 64-bit targets)
// is left out of a binary that never calls it.
constexpr StaticEntry kAppendixA[kStaticTableSize] = {
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
};

constexpr size_t kMaxStaticNameLen = 27;  // access-control-allow-origin
constexpr size_t kStaticNames = 52;       // 9 entries repeat the name before them
constexpr size_t kValued = 16;            // no entry after accept-encoding has a value

constexpr bool NewName(size_t i) { return i == 0 || kAppendixA[i - 1].name != kAppendixA[i].name; }

constexpr bool NoValuesAfterValued() {
  for (size_t i = kValued; i < kStaticTableSize; ++i) {
    if (!kAppendixA[i].value.empty()) return false;
  }
  return true;
}
static_assert(NoValuesAfterValued());

constexpr size_t PackedTextSize() {
  size_t n = 0;
  for (size_t i = 0; i < kStaticTableSize; ++i) {
    n += (NewName(i) ? kAppendixA[i].name.size() : 0) + kAppendixA[i].value.size();
  }
  return n;
}

// The static table as the coders read it: its text once (a name repeated
// by the next entries only once), offsets and lengths into it (values for
// the first kValued entries only), and the encoder's lookup of names by
// length: the first index of each distinct name, those of length L being
// by_len[by_len_start[L]] up to by_len[by_len_start[L + 1] - 1], so a name
// is compared with at most six static names (grpc-status with one,
// grpc-message with two, te with none).
struct PackedTable {
  char text[PackedTextSize()];
  uint16_t name_at[kStaticTableSize];
  uint8_t name_len[kStaticTableSize];
  uint16_t value_at[kValued];
  uint8_t value_len[kValued];
  uint8_t by_len_start[kMaxStaticNameLen + 2];
  uint8_t by_len[kStaticNames];
};

constexpr PackedTable Pack() {
  PackedTable t{};
  size_t at = 0;
  for (size_t i = 0; i < kStaticTableSize; ++i) {
    const StaticEntry& e = kAppendixA[i];
    if (NewName(i)) {
      t.name_at[i] = static_cast<uint16_t>(at);
      for (char c : e.name) t.text[at++] = c;
    } else {
      t.name_at[i] = t.name_at[i - 1];
    }
    t.name_len[i] = static_cast<uint8_t>(e.name.size());
    if (i < kValued) {
      t.value_at[i] = static_cast<uint16_t>(at);
      for (char c : e.value) t.text[at++] = c;
      t.value_len[i] = static_cast<uint8_t>(e.value.size());
    }
  }
  size_t k = 0;
  for (size_t len = 0; len <= kMaxStaticNameLen; ++len) {
    t.by_len_start[len] = static_cast<uint8_t>(k);
    for (size_t i = 0; i < kStaticTableSize; ++i) {
      if (NewName(i) && kAppendixA[i].name.size() == len) t.by_len[k++] = static_cast<uint8_t>(i + 1);
    }
  }
  t.by_len_start[kMaxStaticNameLen + 1] = static_cast<uint8_t>(k);
  return t;
}

constexpr PackedTable kPacked = Pack();
static_assert(kPacked.by_len_start[kMaxStaticNameLen + 1] == kStaticNames, "a name longer than kMaxStaticNameLen");

// 1 <= index <= 61.
constexpr std::string_view StaticName(size_t index) {
  return std::string_view(kPacked.text + kPacked.name_at[index - 1], kPacked.name_len[index - 1]);
}
constexpr std::string_view StaticValue(size_t index) {
  if (index > kValued) return std::string_view();
  return std::string_view(kPacked.text + kPacked.value_at[index - 1], kPacked.value_len[index - 1]);
}

struct StaticEntries {
  StaticEntry entry[kStaticTableSize];
};

constexpr StaticEntries MakeStaticEntries() {
  StaticEntries t{};
  for (size_t i = 0; i < kStaticTableSize; ++i) t.entry[i] = {StaticName(i + 1), StaticValue(i + 1)};
  return t;
}

constexpr StaticEntries kStaticEntries = MakeStaticEntries();

// The first static index with this name, 0 if none.
size_t StaticNameIndex(std::string_view name) {
  const size_t len = name.size();
  if (len > kMaxStaticNameLen) return 0;
  for (size_t k = kPacked.by_len_start[len]; k < kPacked.by_len_start[len + 1]; ++k) {
    const size_t index = kPacked.by_len[k];
    if (std::memcmp(kPacked.text + kPacked.name_at[index - 1], name.data(), len) == 0) return index;
  }
  return 0;
}

// What can be wrong with a block (a COMPRESSION_ERROR); Fail words it.
enum class Fault : uint8_t {
  kNone,
  kTruncatedInteger,
  kIntegerTooBig,
  kLateSizeUpdate,
  kSizeUpdateTooBig,  // a: the update, b: the limit
  kIndexZero,
  kIndexBeyond,  // a: the index, b: the entries
  kTruncatedString,
  kBadHuffman,
};

// The error for a fault in the representation (or string) that starts at
// octet `at` of the block.
Status Fail(Fault fault, size_t at, uint32_t a = 0, size_t b = 0) {
  char numbered[80];
  const char* what = "truncated integer";
  switch (fault) {
    case Fault::kNone:
    case Fault::kTruncatedInteger:
      break;
    case Fault::kIntegerTooBig:
      what = "integer over 2^32-1 or 6 octets";
      break;
    case Fault::kLateSizeUpdate:
      what = "table size update after a field";
      break;
    case Fault::kSizeUpdateTooBig:
      std::snprintf(numbered, sizeof numbered, "table size update to %u over the limit of %zu", a, b);
      what = numbered;
      break;
    case Fault::kIndexZero:
      what = "index 0";
      break;
    case Fault::kIndexBeyond:
      std::snprintf(numbered, sizeof numbered, "index %u beyond the table (%zu entries)", a, b);
      what = numbered;
      break;
    case Fault::kTruncatedString:
      what = "truncated string";
      break;
    case Fault::kBadHuffman:
      what = "Huffman string with EOS or bad padding";
      break;
  }
  return Error(Code::kInternal, Format("hpack: %s at octet %zu", what, at));
}

Fault ReadInt(std::string_view in, size_t* pos, int prefix_bits, uint32_t* value) {
  size_t p = *pos;
  if (p >= in.size()) return Fault::kTruncatedInteger;
  const uint32_t mask = (1u << prefix_bits) - 1;
  uint64_t v = static_cast<uint8_t>(in[p++]) & mask;
  if (v == mask) {
    for (int shift = 0;; shift += 7) {
      // Five octets carry 35 bits: a sixth only adds zeros or overflows.
      if (shift > 28) return Fault::kIntegerTooBig;
      if (p == in.size()) return Fault::kTruncatedInteger;
      const uint8_t b = static_cast<uint8_t>(in[p++]);
      v += uint64_t{b & 0x7fu} << shift;
      if (v > UINT32_MAX) return Fault::kIntegerTooBig;
      if ((b & 0x80) == 0) break;
    }
  }
  *pos = p;
  *value = static_cast<uint32_t>(v);
  return Fault::kNone;
}

// Reads the string literal (§5.2) at *pos into *s. One longer than
// list_limit as sent is certainly over the list limit (any encoder that
// Huffman codes a string only when that is shorter sends none longer than
// its decoded form): it is skipped (*dropped) without being copied or
// decoded, unless it might fit in table_room (its field is to be inserted:
// the table must stay in step, and its size bounds what that costs).
// Once *dropped, the field's other string is skipped too.
Fault ReadString(std::string_view in, size_t* pos, size_t list_limit, size_t table_room, std::string* s,
                 bool* dropped) {
  const bool huffman = *pos < in.size() && (static_cast<uint8_t>(in[*pos]) & 0x80) != 0;
  uint32_t len;
  if (Fault f = ReadInt(in, pos, 7, &len); f != Fault::kNone) return f;
  if (len > in.size() - *pos) return Fault::kTruncatedString;
  const std::string_view raw = in.substr(*pos, len);
  *pos += len;
  if (!*dropped && len > list_limit) {
    // The shortest a Huffman string decodes to: all 30-bit codes, 7 bits of padding.
    const uint64_t least = huffman ? (uint64_t{len} * 8 + 22) / 30 : len;
    *dropped = least + kEntryOverhead > table_room;
  }
  if (*dropped) return Fault::kNone;
  if (!huffman) {
    s->assign(raw);
  } else if (!HuffmanDecode(raw, s)) {
    return Fault::kBadHuffman;
  }
  return Fault::kNone;
}

// §5.2: Huffman coded when that is strictly shorter.
void AppendString(std::string_view s, std::string* out) {
  const size_t huffman = HuffmanEncodedSize(s);
  if (huffman < s.size()) {
    AppendInteger(huffman, 7, 0x80, out);
    HuffmanEncode(s, out);
  } else {
    AppendInteger(s.size(), 7, 0x00, out);
    out->append(s);
  }
}

}  // namespace

const StaticEntry& StaticTableEntry(size_t index) { return kStaticEntries.entry[index - 1]; }

void AppendInteger(uint64_t value, int prefix_bits, uint8_t first_octet_bits, std::string* out) {
  const uint32_t mask = (1u << prefix_bits) - 1;
  if (value < mask) {
    out->push_back(static_cast<char>(first_octet_bits | value));
    return;
  }
  out->push_back(static_cast<char>(first_octet_bits | mask));
  value -= mask;
  while (value >= 0x80) {
    out->push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

bool ReadInteger(std::string_view in, size_t* pos, int prefix_bits, uint32_t* value) {
  return ReadInt(in, pos, prefix_bits, value) == Fault::kNone;
}

Decoder::Decoder(uint32_t max_table_size, size_t max_list_size)
    : settings_max_(max_table_size), table_max_(max_table_size), max_list_size_(max_list_size) {}

void Decoder::SetMaxTableSize(uint32_t n) {
  settings_max_ = n;
  // A smaller limit binds the peer's encoder from the acknowledgment on: its
  // next block must start with a size update to at most n, which evicts the
  // same entries. A larger one changes nothing until the peer asks for it.
  if (table_max_ > n) {
    table_max_ = n;
    Evict(n);
  }
}

Status Decoder::Decode(std::string_view block, HeaderList* out) {
  const size_t first = out->size();
  Status st = DecodeBlock(block, out);
  if (!st.ok()) {
    while (out->size() > first) out->pop_back();
  }
  return st;
}

Status Decoder::DecodeBlock(std::string_view in, HeaderList* out) {
  uint64_t list_size = 0;
  bool over = false;  // the list is over max_list_size_: nothing more is listed
  size_t over_at = 0;
  bool field_seen = false;
  HeaderField spare;  // where a field that is not listed is decoded for the table
  for (size_t pos = 0; pos < in.size();) {
    const size_t at = pos;
    const uint8_t b = static_cast<uint8_t>(in[pos]);
    uint32_t index;
    if ((b & 0xe0) == 0x20) {  // §6.3
      if (field_seen) return Fail(Fault::kLateSizeUpdate, at);
      if (Fault f = ReadInt(in, &pos, 5, &index); f != Fault::kNone) return Fail(f, at);
      if (index > settings_max_) return Fail(Fault::kSizeUpdateTooBig, at, index, settings_max_);
      table_max_ = index;
      Evict(index);
      continue;
    }
    field_seen = true;
    const bool indexed = (b & 0x80) != 0;      // §6.1
    const bool indexing = (b & 0xc0) == 0x40;  // §6.2.1; else §6.2.2 (0000) or §6.2.3 (0001)
    if (Fault f = ReadInt(in, &pos, indexed ? 7 : indexing ? 6 : 4, &index); f != Fault::kNone) {
      return Fail(f, at);
    }
    std::string_view name, value;
    if (indexed || index != 0) {
      if (index == 0) return Fail(Fault::kIndexZero, at);
      if (!Lookup(index, &name, &value)) {
        return Fail(Fault::kIndexBeyond, at, index, kStaticTableSize + table_entries());
      }
    }
    // Past the limit, a field is decoded (into spare) only for the table;
    // one that is not to be inserted is only parsed, its strings skipped
    // (and a 2-octet reference to a large entry copies nothing).
    const bool keep = !over || indexing;
    HeaderField& field = over ? spare : out->emplace_back();
    if (keep) {
      field.name.assign(name);  // a copy: the name's entry may be evicted by this field's insertion
      field.value.assign(indexed ? value : std::string_view());
    }
    bool dropped = !keep;
    if (!indexed) {
      const size_t list_limit = over ? 0 : max_list_size_;
      const size_t table_room = indexing ? table_max_ : 0;
      size_t string_at = pos;
      Fault f = Fault::kNone;
      if (index == 0) f = ReadString(in, &pos, list_limit, table_room, &field.name, &dropped);
      if (f == Fault::kNone) {
        string_at = pos;
        f = ReadString(in, &pos, list_limit, table_room, &field.value, &dropped);
      }
      if (f != Fault::kNone) return Fail(f, string_at);
    }
    if (!dropped) list_size += FieldSize(field.name, field.value);
    if (!over && (dropped || list_size > max_list_size_)) {
      over = true;
      over_at = at;
    }
    if (indexing) {
      // A dropped string makes the entry larger than the table: §4.4 empties it.
      if (dropped) {
        Evict(0);
      } else {
        Insert(field);
      }
    }
  }
  if (over) {
    return Error(Code::kResourceExhausted,
                 Format("hpack: header list over the limit of %zu octets at octet %zu", max_list_size_, over_at));
  }
  return OkStatus();
}

bool Decoder::Lookup(uint32_t index, std::string_view* name, std::string_view* value) const {
  if (index <= kStaticTableSize) {
    *name = StaticName(index);
    *value = StaticValue(index);
    return true;
  }
  if (index - kStaticTableSize > table_entries()) return false;
  const HeaderField& e = table_entry(index - kStaticTableSize - 1);
  *name = e.name;
  *value = e.value;
  return true;
}

void Decoder::Insert(const HeaderField& field) {
  const size_t size = FieldSize(field.name, field.value);
  Evict(size > table_max_ ? 0 : table_max_ - size);
  if (size > table_max_) return;
  // Evicted slots are dropped in a batch once they are the majority: each
  // eviction stays O(1) and the vector at most twice the entries it holds.
  if (first_ > 8 && first_ * 2 > entries_.size()) {
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(first_));
    first_ = 0;
  }
  HeaderField& e = entries_.emplace_back();
  e.name = field.name;
  e.value = field.value;
  table_size_ += size;
}

void Decoder::Evict(size_t limit) {
  while (table_size_ > limit) {
    HeaderField& oldest = entries_[first_++];
    table_size_ -= FieldSize(oldest.name, oldest.value);
    oldest = HeaderField();  // its memory goes back now
  }
}

void Encoder::Encode(const HeaderList& fields, std::string* out) {
  Begin(out);
  for (const HeaderField& f : fields) Add(f.name, f.value, out);
}

void Encoder::Begin(std::string* out) {
  if (size_update_due_) {
    out->push_back(0x20);  // §6.3, to 0
    size_update_due_ = false;
  }
}

void Encoder::Add(std::string_view name, std::string_view value, std::string* out) {
  const size_t index = StaticNameIndex(name);
  if (index == 0) {
    out->push_back(0x00);  // §6.2.2, new name
    AppendString(name, out);
  } else {
    // Entries that share a name are adjacent, and share its text.
    for (size_t i = index; i <= kStaticTableSize && kPacked.name_at[i - 1] == kPacked.name_at[index - 1]; ++i) {
      if (StaticValue(i) == value) {
        AppendInteger(i, 7, 0x80, out);  // §6.1
        return;
      }
    }
    AppendInteger(index, 4, 0x00, out);  // §6.2.2, indexed name
  }
  AppendString(value, out);
}

}  // namespace outpost::wire::hpack
