// Reading JSON documents written by people (config, job specs) with picojson,
// and writing JSON for people and programs.
// Owns: parsing with a size/depth limit, and ObjectReader, which reads typed
// fields while collecting every error with its JSON path
// (e.g. `tasks[1].restart.delay: expected a duration like "5s", got "five"`)
// and reports unknown keys with a "did you mean" hint. It never throws.
// Also Write, the serializer of picojson values the CLI prints with.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"

namespace outpost::json {

struct ParseLimits {
  size_t max_bytes = 1 << 20;
  int max_depth = 32;
  // A member given twice in one object is an error (picojson keeps the
  // last): for documents people write, where the first is then lost
  // without a word. Off for what programs write (Go's encoding/json, which
  // third-party tools use, takes the last as well).
  bool unique_members = false;
};

// Parses text. Errors say where (line) and what; nesting deeper than
// max_depth and non-UTF-8 input are rejected before picojson sees them.
Result<picojson::value> Parse(const std::string& text, const ParseLimits& limits = ParseLimits());

// In a valid JSON document: "" or, for the first member given twice in one
// object, `PATH: given twice (lines A and B)` with PATH as ObjectReader
// writes it (`tasks[0].config.image`). Names are compared as written
// ("a" and "\u0061" are two).
std::string FindDuplicateMember(const std::string& text);

// The byte offset of the first number (outside strings) that picojson would
// read as a double and that overflows one (1e999, or an integer of 400
// digits), or -1. picojson throws for it; Parse refuses it first.
long FindOverflowingNumber(const std::string& text);

// Type name for messages: "string", "number", "object", ...
const char* TypeName(const picojson::value& v);
// Short rendering of a value for messages (strings quoted, long ones cut).
std::string Preview(const picojson::value& v);

using Errors = std::vector<std::string>;

class ObjectReader {
 public:
  // path: "" for the document root, else "tasks[1].restart".
  ObjectReader(const picojson::value& v, std::string path, Errors* errors);

  bool ok() const { return obj_ != nullptr; }
  bool Has(const std::string& key) const;
  // Marks key as known without reading it (for fields handled elsewhere).
  void Known(const std::string& key) { known_.insert(key); }

  // Each reader leaves *out untouched when the key is absent, and records
  // an error (and leaves *out untouched) when the value is wrong.
  void String(const std::string& key, std::string* out, bool allow_empty = true);
  void Bool(const std::string& key, bool* out);
  void Int(const std::string& key, int64_t min, int64_t max, int64_t* out);
  void Duration(const std::string& key, int64_t* out_nanos);
  void Size(const std::string& key, uint64_t* out_bytes);
  void StringList(const std::string& key, std::vector<std::string>* out);
  void IntList(const std::string& key, int64_t min, int64_t max, std::vector<int64_t>* out);
  // Raw access for nested objects and arrays; nullptr when absent.
  const picojson::value* Get(const std::string& key);

  std::string PathOf(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  void Fail(const std::string& key, const std::string& msg);

  // Reports keys that no reader asked for. Call after reading all fields.
  void RejectUnknown();

 private:
  const picojson::object* obj_ = nullptr;
  std::string path_;
  Errors* errors_;
  std::set<std::string> known_;
};

// JSON text of v, unlike picojson's serialize: no "\/" for a slash (only
// '"', '\\' and control characters U+0000-U+001F and U+007F are escaped;
// other UTF-8 passes through as is, a byte that is not UTF-8 becomes
// U+FFFD), and numbers as the shortest text that reads back as the same
// double (0.06, not 0.059999999999999998; 1e-7; 1e+21): integral values
// below 1e21 as integers, -0 as 0, NaN and infinities (not JSON) as null.
// Object keys in picojson's (sorted) order. pretty: two spaces per level,
// one member or element per line, "[]" and "{}" when empty; no newline at
// the end in either form.
std::string Write(const picojson::value& v, bool pretty = false);
// A double as Write prints it ("0.06", "1e-7", "null" for NaN).
std::string FormatNumber(double d);

// "a: x" + "b: y" -> "a: x\nb: y" (one error per line).
std::string JoinErrors(const Errors& errors);

}  // namespace outpost::json
