// hooks::Regex: Go regexp syntax and MatchString semantics (unanchored,
// UTF-8, `$` only at the end without (?m)), the error texts Go gives, and
// expressions a backtracking matcher would take exponential time on.
#include "hooks/regex.h"

#include <gtest/gtest.h>

#include <string>

namespace outpost::hooks {
namespace {

struct Case {
  const char* re;
  std::string text;
  bool match;
};

class HooksRegexTest : public ::testing::Test {
 protected:
  static std::string CompileError(const std::string& re) {
    Regex r;
    return r.Compile(re);
  }
};

TEST_F(HooksRegexTest, MatchesAsGoRegexpMatchString) {
  const Case cases[] = {
      {"abc", "xabcx", true},
      {"^abc$", "abc", true},
      {"^abc$", "abcd", false},
      {"", "anything", true},
      {"a|b", "b", true},
      {"ab|cd", "xcdx", true},
      {"ab|cd", "ac", false},
      {"\\d+", "x12", true},
      {"\\D", "123", false},
      {"\\w+", "_", true},
      {"\\W", "a_1", false},
      {"\\s", "a b", true},
      {"\\s", "a\vb", false},  // Go's \s has no \v
      {"\\S", " \t\n", false},
      {"[\\d]", "5", true},
      {"[^\\d]", "5", false},
      {"(?i)systemd", "SystemD", true},
      {"(?i:a)b", "Ab", true},
      {"(?i:a)b", "AB", false},
      {"(?i)[a-c]", "B", true},
      {"x(?i)y|z", "Z", true},  // the flag lasts to the end of the group, across |
      {"(x(?i)y)z", "xYZ", false},
      {"(x(?i)y)z", "xYz", true},
      {"a.c", "a\nc", false},
      {"(?s)a.c", "a\nc", true},
      {"^b", "a\nb", false},
      {"(?m)^b$", "a\nb\nc", true},
      {"a$", "a\n", false},  // Go: $ is the end of the text
      {"a\\z", "a", true},
      {"\\Aa", "ba", false},
      {"\\bfoo\\b", "a foo b", true},
      {"\\bfoo\\b", "afoo", false},
      {"\\Bo", "foo", true},
      {"^a{2,3}$", "aa", true},
      {"^a{2,3}$", "aaaa", false},
      {"^a{2}$", "aa", true},
      {"^a{2,}$", "aaaaa", true},
      {"^a{2,}$", "a", false},
      {"^x{,2}$", "x{,2}", true},  // not a count: literal
      {"^a{01}$", "a{01}", true},  // a leading zero: literal
      {"^{$", "{", true},
      {"\\x41", "A", true},
      {"\\x{263a}", "\xe2\x98\xba", true},
      {"\\101\\0", std::string("A\0", 2), true},
      {"\\Qa.b\\E+", "a.bb", true},
      {"\\Qa.b\\E", "axb", false},
      {"\\.", "a", false},
      {"^.$", "\xc3\xa9", true},  // one character, two bytes
      {"^..$", "\xc3\xa9", false},
      {"^\\x{FFFD}$", "\xff", true},  // a bad byte reads as U+FFFD
      {"[[:alpha:]]+", "abc", true},
      {"[[:^digit:]]", "1", false},
      {"^[[:word:][:punct:]]+$", "a_b.c!", true},
      {"(a*)*b", "aaab", true},
      {"(a|)+c", "c", true},
      {"a+?", "a", true},
      {"a*?b??c", "c", true},
      {"^(?:ab)+$", "abab", true},
      {"(?)x", "x", true},
      {"(?P<name>x)", "x", true},
      {"(?<n>x)y", "xy", true},
      {"[]a]", "]", true},
      {"[^]a]", "]", false},
      {"[a-]", "-", true},
      {"[a-c-e]", "-", true},
      {"[^a]", "\n", true},
      {"^com\\.example\\.x$", "com.example.x", true},
      {"^com\\.example\\.x$", "comXexample.x", false},
      {"[\\x{100}-\\x{200}]", "\xc4\x80", true},
  };
  for (const Case& c : cases) {
    Regex r;
    ASSERT_EQ(r.Compile(c.re), "") << c.re;
    EXPECT_EQ(r.Match(c.text), c.match) << "regex " << c.re << " text " << c.text;
  }
}

TEST_F(HooksRegexTest, ErrorsReadAsGos) {
  EXPECT_EQ(CompileError("(abc"), "missing closing ): `(abc`");
  EXPECT_EQ(CompileError("abc)"), "unexpected ): `abc)`");
  EXPECT_EQ(CompileError("x[a"), "missing closing ]: `[a`");
  EXPECT_EQ(CompileError("[z-a]"), "invalid character class range: `z-a`");
  EXPECT_EQ(CompileError("[[:foo:]]"), "invalid character class range: `[:foo:]`");
  EXPECT_EQ(CompileError("*a"), "missing argument to repetition operator: `*`");
  EXPECT_EQ(CompileError("a|+"), "missing argument to repetition operator: `+`");
  EXPECT_EQ(CompileError("({2})"), "missing argument to repetition operator: `{2}`");
  EXPECT_EQ(CompileError("a**"), "invalid nested repetition operator: `**`");
  EXPECT_EQ(CompileError("a+?*"), "invalid nested repetition operator: `+?*`");
  EXPECT_EQ(CompileError("a{2,1}"), "invalid repeat count: `{2,1}`");
  EXPECT_EQ(CompileError("a{1001}"), "invalid repeat count: `{1001}`");
  EXPECT_EQ(CompileError("(a)\\1"), "invalid escape sequence: `\\1`");
  EXPECT_EQ(CompileError("\\q"), "invalid escape sequence: `\\q`");
  EXPECT_EQ(CompileError("\\xZ1"), "invalid escape sequence: `\\xZ1`");
  EXPECT_EQ(CompileError("a\\"), "trailing backslash at end of expression: ``");
  EXPECT_EQ(CompileError("(?z)"), "invalid or unsupported Perl syntax: `(?z`");
  EXPECT_EQ(CompileError("(?i-)"), "invalid or unsupported Perl syntax: `(?i-)`");
  EXPECT_EQ(CompileError("(?P<a-b>x)"), "invalid named capture: `(?P<a-b>`");
  EXPECT_EQ(CompileError("(?P<n>a)(?P<n>b)"), "duplicate capture group name: `n`");
  EXPECT_EQ(CompileError("\xff"), "invalid UTF-8: `\xff`");
  EXPECT_EQ(CompileError("\\pL"), "Unicode character classes are not supported by outpost: `\\pL`");
  EXPECT_EQ(CompileError("x\\p{Greek}y"), "Unicode character classes are not supported by outpost: `\\p{Greek}`");
  EXPECT_EQ(CompileError("(?i)caf\xc3\xa9"),
            "(?i) on non-ASCII characters is not supported by outpost; spell the cases out: `\xc3\xa9`");
  EXPECT_EQ(CompileError("((a{1000}){1000}){1000}"), "expression too large: `((a{1000}){1000}){1000}`");
  EXPECT_EQ(CompileError(std::string(1001, '(') + std::string(1001, ')')).rfind("expression nests too deeply: ", 0),
            0u);
  EXPECT_EQ(CompileError(std::string(999, '(') + std::string(999, ')')), "");
}

TEST_F(HooksRegexTest, NothingMatchesBeforeAGoodCompile) {
  Regex r;
  EXPECT_FALSE(r.Match("x"));
  EXPECT_NE(r.Compile("("), "");
  EXPECT_FALSE(r.Match(""));
  EXPECT_EQ(r.Compile("x"), "");
  EXPECT_TRUE(r.Match("x"));
}

// A backtracking matcher takes time exponential in the text on these; this
// one visits each state once per character, so the test ends either way
// only if the matcher is linear.
TEST_F(HooksRegexTest, PathologicalExpressionsAnswer) {
  std::string xs(5000, 'x');
  Regex nested;
  ASSERT_EQ(nested.Compile("^(x+x+)+y$"), "");
  EXPECT_FALSE(nested.Match(xs));
  EXPECT_TRUE(nested.Match(xs + "y"));
  Regex star;
  ASSERT_EQ(star.Compile("(a*)*$b"), "");
  EXPECT_FALSE(star.Match(std::string(5000, 'a')));
  Regex counted;
  ASSERT_EQ(counted.Compile("(x?){30}x{30}"), "");
  EXPECT_TRUE(counted.Match(std::string(30, 'x')));
  EXPECT_FALSE(counted.Match(std::string(29, 'x')));
}

}  // namespace
}  // namespace outpost::hooks
