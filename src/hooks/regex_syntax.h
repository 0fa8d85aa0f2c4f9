// The syntax half of hooks/regex.h: Go regexp syntax parsed into a tree.
// The rules and error texts follow Go's regexp/syntax with the flags
// regexp.Compile uses (Perl): `[^a]` matches a newline, `-` may stand
// anywhere in a class, `$` without (?m) is the end of the text only, repeat
// counts go up to 1000, a leading zero makes `{` literal. Internal to
// hooks/regex.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outpost::hooks::regex_syntax {

// Inclusive code point ranges, sorted and merged.
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr uint32_t kMaxRune = 0x10FFFF;

// Assertions (a kAssert node's flags).
constexpr uint32_t kBeginText = 1, kEndText = 2, kBeginLine = 4, kEndLine = 8, kWordBoundary = 16,
                   kNoWordBoundary = 32;

struct Node {
  enum Kind { kEmpty, kClass, kAssert, kCat, kAlt, kRepeat } kind = kEmpty;
  Ranges ranges;           // kClass
  uint32_t assert = 0;     // kAssert
  std::vector<Node> subs;  // kCat, kAlt; kRepeat: one
  int min = 0, max = 0;    // kRepeat; max -1: unbounded
};

// The tree of text, or false with *error set as Go words it ("missing
// closing ): `(abc`").
bool Parse(std::string_view text, Node* out, std::string* error);

// [0-9A-Za-z_], what \b looks at; false for -1 (an end of the text).
inline bool IsWordChar(int32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

}  // namespace outpost::hooks::regex_syntax
