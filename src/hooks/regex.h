// Regular expressions as hooks.d files use them: Go's regexp syntax (RE2),
// matched as Go's regexp.MatchString matches (anywhere in the text unless
// anchored). containers/common compiles every `when` regex with Go's
// regexp, so a file written for podman or CRI-O means the same here.
//
// The matcher simulates the compiled program on all its states at once
// (Thompson/Pike), so its time is linear in the text for any expression: a
// hooks.d file cannot make a task's start slow. Only whether a regex matches
// is computed: no submatches, so greedy and lazy are the same.
//
// Supported: literals, `.`, `[...]` with ranges, negation, `[:alpha:]`-style
// classes and Perl classes, `\d \D \s \S \w \W`, escapes (`\t \n \x7F
// \x{263a} \123 \Q...\E`, escaped punctuation), `^ $ \A \z \b \B`, groups
// `(re)`, `(?:re)`, `(?P<name>re)`, `(?<name>re)`, flags `(?imsU)` and
// `(?flags:re)`, `* + ? {n} {n,} {n,m}` and their lazy forms, `|`; the text
// and the expression are UTF-8, `.` and classes match one character.
// Not supported, refused with a reason by Compile: Unicode classes (`\p{Greek}`,
// `\pL`, `[[:^...:]]` is supported) and `(?i)` on non-ASCII letters.
// Errors read as Go's ("missing closing ): `(abc`").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace outpost::hooks {

class Regex {
 public:
  // "" when text compiles, else what is wrong ("missing closing ]: `[a`").
  std::string Compile(std::string_view text);
  // Whether the regex matches somewhere in s (false before a good Compile).
  bool Match(std::string_view s) const;
  const std::string& text() const { return text_; }

  // One instruction of the compiled program (public for regex.cc only).
  struct Inst {
    enum Op : uint8_t { kRanges, kSplit, kJmp, kAssert, kMatch } op;
    uint32_t x = 0, y = 0;  // kRanges: [x, y) in ranges_; kSplit/kJmp: targets; kAssert: x = flags
  };

 private:
  std::string text_;
  std::vector<Inst> prog_;
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // inclusive code point ranges
};

}  // namespace outpost::hooks
