// json::Write, the serializer the CLI prints --json with: escapes, UTF-8,
// numbers that read back exactly, int64 extremes, nesting, pretty layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "base/json.h"

namespace outpost::json {
namespace {

std::string W(const picojson::value& v) { return Write(v); }
picojson::value S(const std::string& s) { return picojson::value(s); }
picojson::value D(double d) { return picojson::value(d); }

TEST(JsonWrite, EscapesOnlyWhatJsonRequires) {
  EXPECT_EQ(W(S("/etc/outpost/config.json")), "\"/etc/outpost/config.json\"");
  EXPECT_EQ(W(S("a\"b\\c")), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(W(S("\b\f\n\r\t")), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(W(S(std::string("\x01\x1f\x7f", 3))), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(W(S(std::string("a\0b", 3))), "\"a\\u0000b\"");
  EXPECT_EQ(W(S("<tag> & 'q'")), "\"<tag> & 'q'\"");
}

TEST(JsonWrite, Utf8PassesThroughAndBadBytesBecomeReplacement) {
  EXPECT_EQ(W(S("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80")), "\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(W(S("\xe2\x80\xa8")), "\"\xe2\x80\xa8\"");  // U+2028: valid JSON as is
  EXPECT_EQ(W(S("a\xff" "b")), "\"a\xef\xbf\xbd" "b\"");
  EXPECT_EQ(W(S("\xc3")), "\"\xef\xbf\xbd\"");              // cut sequence
  EXPECT_EQ(W(S("\xed\xa0\x80")), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // a surrogate
  // What it writes parses, to the same text.
  auto back = Parse(W(S("a\xff\x01/\xc3\xa9")));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->get<std::string>(), "a\xef\xbf\xbd\x01/\xc3\xa9");
}

TEST(JsonWrite, NumbersShortestThatReadBack) {
  EXPECT_EQ(W(D(0.06)), "0.06");
  EXPECT_EQ(W(D(0.1 + 0.2)), "0.30000000000000004");
  EXPECT_EQ(W(D(1e-7)), "1e-7");
  EXPECT_EQ(W(D(1.5e-300)), "1.5e-300");
  EXPECT_EQ(W(D(1e21)), "1e+21");
  EXPECT_EQ(W(D(1e20)), "100000000000000000000");
  EXPECT_EQ(W(D(123456.789)), "123456.789");
  EXPECT_EQ(W(D(-2.5)), "-2.5");
  EXPECT_EQ(W(D(3.0)), "3");
  EXPECT_EQ(W(D(-0.0)), "0");
  EXPECT_EQ(W(D(0.0)), "0");
  EXPECT_EQ(W(D(std::numeric_limits<double>::max())), "1.7976931348623157e+308");
  EXPECT_EQ(W(D(std::numeric_limits<double>::denorm_min())), "5e-324");
  EXPECT_EQ(FormatNumber(std::nan("")), "null");
  EXPECT_EQ(FormatNumber(std::numeric_limits<double>::infinity()), "null");
  for (double d : {0.06, 1e-7, 1e21, 2.0 / 3, 1234.5678e-9, 9007199254740993.0, 4.35, 0.1}) {
    EXPECT_EQ(std::strtod(FormatNumber(d).c_str(), nullptr), d) << FormatNumber(d);
  }
}

TEST(JsonWrite, Int64AsIntegers) {
  EXPECT_EQ(W(picojson::value(int64_t{0})), "0");
  EXPECT_EQ(W(picojson::value(int64_t{-42})), "-42");
  EXPECT_EQ(W(picojson::value(std::numeric_limits<int64_t>::max())), "9223372036854775807");
  EXPECT_EQ(W(picojson::value(std::numeric_limits<int64_t>::min())), "-9223372036854775808");
  auto back = Parse("[9223372036854775807,-9223372036854775808]");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(W(*back), "[9223372036854775807,-9223372036854775808]");
}

TEST(JsonWrite, LiteralsAndNesting) {
  EXPECT_EQ(W(picojson::value()), "null");
  EXPECT_EQ(W(picojson::value(true)), "true");
  EXPECT_EQ(W(picojson::value(false)), "false");
  auto doc = Parse(R"({"b":[1,{"c":null,"a":[]},{}],"a":{"x/y":"\/"}})");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(W(*doc), R"({"a":{"x/y":"/"},"b":[1,{"a":[],"c":null},{}]})");
  EXPECT_EQ(Write(*doc, true),
            "{\n"
            "  \"a\": {\n"
            "    \"x/y\": \"/\"\n"
            "  },\n"
            "  \"b\": [\n"
            "    1,\n"
            "    {\n"
            "      \"a\": [],\n"
            "      \"c\": null\n"
            "    },\n"
            "    {}\n"
            "  ]\n"
            "}");
  EXPECT_EQ(Write(picojson::value(picojson::array()), true), "[]");
  EXPECT_EQ(Write(picojson::value(picojson::object()), true), "{}");
  EXPECT_EQ(Write(S("x"), true), "\"x\"");
}

TEST(JsonWrite, RoundTripsThroughParse) {
  const char* docs[] = {
      R"({"a":0.06,"b":[1e-7,1e+21,-1.25],"c":"\u00e9\n","d":{"e":[true,false,null]}})",
      R"([[[[]]],{"":""},-9223372036854775808])",
  };
  for (const char* text : docs) {
    auto v = Parse(text);
    ASSERT_TRUE(v.ok()) << text;
    for (bool pretty : {false, true}) {
      auto again = Parse(Write(*v, pretty));
      ASSERT_TRUE(again.ok()) << Write(*v, pretty);
      EXPECT_TRUE(*again == *v) << Write(*v, pretty);
    }
  }
}

// Preview (error messages) shows numbers the same way.
TEST(JsonWrite, PreviewUsesIt) {
  EXPECT_EQ(Preview(D(0.1)), "0.1");
  EXPECT_EQ(Preview(S("/a")), "\"/a\"");
}

}  // namespace
}  // namespace outpost::json
