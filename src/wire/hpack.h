// HPACK header compression for HTTP/2 (RFC 7541). Owns: the integer and
// string primitives, the Huffman code of Appendix B, the static table, a
// decoder with its dynamic table (size updates, eviction, header-list
// limits) and an encoder. Does not own: HTTP/2 frames or which header
// block belongs to which stream (wire/h2_conn), or what the fields mean
// (wire/grpc_*).
//
// One Decoder and one Encoder per connection and direction: header blocks
// must be decoded in the order they arrive on the connection, whichever
// stream they belong to, and a block must be decoded even when its stream
// is being refused, or the dynamic tables fall out of step.
//
// The encoder never inserts into the dynamic table: a field that matches a
// static entry exactly is sent indexed, one whose name is in the static
// table as a literal without indexing with the name indexed, anything else
// as a literal without indexing with a literal name; strings are Huffman
// coded only when that is strictly shorter (what grpc-go does). Its table
// stays empty, so no per-connection table memory and no state to keep in
// step with the peer; the first block, and the first block after the peer
// changes SETTINGS_HEADER_TABLE_SIZE, start with a size update to 0, which
// is within any limit the peer can set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace outpost::wire::hpack {

struct HeaderField {
  std::string name;
  std::string value;
};
using HeaderList = std::vector<HeaderField>;

// RFC 7541 §4.1: name + value + 32 octets.
constexpr size_t kEntryOverhead = 32;
inline size_t FieldSize(std::string_view name, std::string_view value) {
  return name.size() + value.size() + kEntryOverhead;
}

// The 61 entries of Appendix A; index 1..61.
constexpr size_t kStaticTableSize = 61;
struct StaticEntry {
  std::string_view name;
  std::string_view value;
};
const StaticEntry& StaticTableEntry(size_t index);  // 1 <= index <= 61

// Appendix B. HuffmanEncodedSize is the exact octet count HuffmanEncode
// appends (padding included). HuffmanDecode appends the decoded octets to
// *out and fails (nothing reliable appended) on an EOS symbol in the data,
// padding longer than 7 bits or padding that is not a prefix of EOS.
size_t HuffmanEncodedSize(std::string_view in);
void HuffmanEncode(std::string_view in, std::string* out);
bool HuffmanDecode(std::string_view in, std::string* out);

// §5.1: appends value with an N-bit prefix; first_octet_bits are the
// representation's pattern bits above the prefix.
void AppendInteger(uint64_t value, int prefix_bits, uint8_t first_octet_bits, std::string* out);
// Reads an N-bit-prefix integer at *pos (advanced past it). Fails on
// truncation and on values above 2^32-1 (nothing in HTTP/2 is larger).
bool ReadInteger(std::string_view in, size_t* pos, int prefix_bits, uint32_t* value);

class Decoder {
 public:
  // max_table_size: the SETTINGS_HEADER_TABLE_SIZE this side advertised
  // (the most a size update may ask for; 4096 until changed).
  // max_list_size: the largest header list accepted, counted as in §4.1.
  explicit Decoder(uint32_t max_table_size = 4096, size_t max_list_size = 16 << 10);

  // Decodes one complete header block (all of HEADERS + CONTINUATION
  // fragments, joined) and appends its fields to *out, in order.
  // Errors:
  //   kResourceExhausted  the list is over max_list_size: the block was
  //                       still decoded to its end, so the dynamic table is
  //                       in step, and *out holds no field of this block
  //                       (a stream error: refuse the stream, keep the
  //                       connection);
  //   anything else       COMPRESSION_ERROR, a connection error; the
  //                       message says what was wrong and at which octet.
  // A single string longer than max_list_size (as sent) is refused before
  // it is copied or decoded, unless its field is to be inserted and it may
  // fit in the dynamic table: the table must stay in step, and its maximum
  // bounds what such a string costs.
  Status Decode(std::string_view block, HeaderList* out);

  // This side advertised a new SETTINGS_HEADER_TABLE_SIZE (and the peer
  // acknowledged it): later size updates may go up to it.
  void SetMaxTableSize(uint32_t n);
  void SetMaxListSize(size_t n) { max_list_size_ = n; }

  // The dynamic table, for tests: entries newest first, and its size (§4.1).
  size_t table_size() const { return table_size_; }
  size_t table_entries() const { return entries_.size() - first_; }
  const HeaderField& table_entry(size_t i) const { return entries_[entries_.size() - 1 - i]; }  // 0 = newest (index 62)
  uint32_t table_max_size() const { return table_max_; }

 private:
  Status DecodeBlock(std::string_view in, HeaderList* out);
  bool Lookup(uint32_t index, std::string_view* name, std::string_view* value) const;
  void Insert(const HeaderField& field);
  void Evict(size_t limit);

  uint32_t settings_max_;  // what this side advertised
  uint32_t table_max_;     // current max, as set by the peer's size updates
  size_t max_list_size_;
  size_t table_size_ = 0;
  // The dynamic table, oldest first: the newest entry is the last, the
  // oldest entries_[first_]; those before it are evicted (and empty).
  std::vector<HeaderField> entries_;
  size_t first_ = 0;
};

class Encoder {
 public:
  // Appends one header block (the fields in order) to *out.
  void Encode(const HeaderList& fields, std::string* out);
  // The same, one field at a time: Begin, then Add for each field.
  void Begin(std::string* out);
  void Add(std::string_view name, std::string_view value, std::string* out);

  // The peer sent SETTINGS_HEADER_TABLE_SIZE: the next block starts with a
  // size update (to 0: this encoder never uses its table).
  void PeerTableSizeChanged() { size_update_due_ = true; }

 private:
  bool size_update_due_ = true;  // the first block announces table size 0
};

}  // namespace outpost::wire::hpack
