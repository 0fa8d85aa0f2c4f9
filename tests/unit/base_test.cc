#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost {
namespace {

TEST(Strings, ParseDuration) {
  EXPECT_EQ(*ParseDuration("5s"), 5 * 1000000000LL);
  EXPECT_EQ(*ParseDuration("1500ms"), 1500000000LL);
  EXPECT_EQ(*ParseDuration("1.5s"), 1500000000LL);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400LL * 1000000000LL);
  EXPECT_EQ(*ParseDuration("0"), 0);
  EXPECT_EQ(*ParseDuration("250us"), 250000);
  for (const char* bad : {"", "five", "5", "5x", "s", "1.s", "-1s", "5 s"}) {
    auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), std::string("expected a duration like \"5s\", got \"") + bad + "\"");
  }
  EXPECT_FALSE(ParseDuration("9999999999h").ok());
  // Integer arithmetic: exact to the nanosecond, rounded half up.
  EXPECT_EQ(*ParseDuration("0.1h"), 360000000000LL);
  EXPECT_EQ(*ParseDuration("1.0000000000005h"), 3600000000002LL);
  EXPECT_EQ(*ParseDuration("0.5ns"), 1);
  EXPECT_EQ(*ParseDuration("0.49ns"), 0);
  EXPECT_EQ(*ParseDuration("1.999999999999s"), 2000000000LL);
  EXPECT_EQ(*ParseDuration("1m0.25s"), 60250000000LL);
  EXPECT_EQ(*ParseDuration("9223372036854775807ns"), INT64_MAX);
  EXPECT_EQ(ParseDuration("9223372036854775808ns").error().message(),
            "duration \"9223372036854775808ns\" is too long");
  EXPECT_EQ(ParseDuration("2562047h48m").error().message(), "duration \"2562047h48m\" is too long");
  EXPECT_FALSE(ParseDuration("1.2.3s").ok());
}

TEST(Strings, FormatDuration) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(90LL * 1000000000), "1m30s");
  EXPECT_EQ(FormatDuration(5LL * 1000000000), "5s");
  EXPECT_EQ(FormatDuration(1500000000LL), "1.5s");
  EXPECT_EQ(FormatDuration(3600LL * 1000000000), "1h");
  EXPECT_EQ(FormatDuration(2000000), "2ms");
}

TEST(Strings, ParseSize) {
  EXPECT_EQ(*ParseSize("10MiB"), 10u << 20);
  EXPECT_EQ(*ParseSize("512KiB"), 512u << 10);
  EXPECT_EQ(*ParseSize("1G"), 1u << 30);
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("1MB"), 1000000u);
  EXPECT_EQ(*ParseSize("1.5KiB"), 1536u);
  for (const char* bad : {"", "ten", "10XB", "-1", "MiB"}) {
    auto r = ParseSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), std::string("expected a size like \"10MiB\", got \"") + bad + "\"");
  }
  EXPECT_FALSE(ParseSize("0.3B").ok());
  EXPECT_EQ(*ParseSize("0.5KiB"), 512u);
  EXPECT_EQ(*ParseSize(".25K"), 256u);
  EXPECT_EQ(ParseSize("1.0005KB").error().message(), "size \"1.0005KB\" is not a whole number of bytes");
  EXPECT_EQ(*ParseSize("8388607TiB"), 8388607ull << 40);
  EXPECT_EQ(ParseSize("8388608TiB").error().message(), "size \"8388608TiB\" is too large");
  EXPECT_EQ(ParseSize("99999999999999999999").error().message(), "size \"99999999999999999999\" is too large");
}

TEST(Strings, ParseIntRangeAndGarbage) {
  EXPECT_EQ(*ParseInt("42", 0, 100), 42);
  EXPECT_EQ(*ParseInt("-7", -10, 10), -7);
  EXPECT_FALSE(ParseInt("101", 0, 100).ok());
  EXPECT_FALSE(ParseInt("4x", 0, 100).ok());
  EXPECT_FALSE(ParseInt("", 0, 100).ok());
  EXPECT_FALSE(ParseInt("99999999999999999999999", 0, 100).ok());
}

TEST(Strings, SplitAndAffixes) {
  EXPECT_EQ(Split("a,b,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_TRUE(StartsWith("outpost", "out"));
  EXPECT_FALSE(StartsWith("out", "outpost"));
  EXPECT_TRUE(EndsWith("job.json", ".json"));
  EXPECT_EQ(EditDistance("staus", "status"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting", 3), 3u) << "at the limit";
  EXPECT_EQ(EditDistance("kitten", "sitting", 2), 2u) << "beyond the limit: the limit";
  EXPECT_EQ(EditDistance("staus", "status", 3), 1u);
  EXPECT_EQ(EditDistance(std::string(10000, 'x'), "status", 3), 3u) << "long keys stop at once";
}

TEST(Log, LineFormatQuotesWhereNeeded) {
  std::string line = log::FormatLine(1795375520123000000LL, log::Level::kWarn, "disk\nfull",
                                     {{"path", "/var/log/x y"}, {"n", "3"}, {"q", "a\"b"}, {"e", ""}});
  EXPECT_EQ(line, "2026-11-22T19:25:20.123Z WARN disk full path=\"/var/log/x y\" n=3 q=\"a\\\"b\" e=\"\"\n");
  EXPECT_EQ(QuoteIfNeeded("plain"), "plain");
  EXPECT_EQ(QuoteIfNeeded("a=b"), "\"a=b\"");
  EXPECT_EQ(QuoteIfNeeded(std::string("\x01", 1)), "\"\\x01\"");
}

// The agent's own UTC conversion against the C library's, over leap days,
// century and 400-year leap years, 2038, 2262 (near the int64 nanosecond
// limit) and negative times.
TEST(Log, FormatWallTimeMatchesGmtime) {
  EXPECT_EQ(FormatWallTime(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatWallTime(951782400LL * kNanosPerSecond + 123456789), "2000-02-29T00:00:00.123Z");
  EXPECT_EQ(FormatWallTime(-1 * kNanosPerMilli), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatWallTime(4107542400LL * kNanosPerSecond), "2100-03-01T00:00:00.000Z") << "past 2038 everywhere";
  std::vector<int64_t> secs = {-86400LL * 366 * 3, -1, 0, 59, 86399, 86400, 68169599, 951868799,
                               951868800, 4107542400LL, 4107456000LL, 2147483647LL, 2147483648LL, 9214646400LL};
  for (int64_t t = -2208988800LL; t < 7258118400LL; t += 86400LL * 13 + 3607) secs.push_back(t);
  for (int64_t t : secs) {
    // A 32-bit time_t (armhf) cannot hold the reference past 2038; ours can.
    if (static_cast<int64_t>(static_cast<time_t>(t)) != t) continue;
    time_t tt = static_cast<time_t>(t);
    struct tm tm;
    ASSERT_NE(gmtime_r(&tt, &tm), nullptr);
    std::string want = Format("%04d-%02d-%02dT%02d:%02d:%02d.042Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                              tm.tm_hour, tm.tm_min, tm.tm_sec);
    ASSERT_EQ(FormatWallTime(t * kNanosPerSecond + 42 * kNanosPerMilli), want) << "t=" << t;
  }
}

TEST(Log, GroupThousands) {
  EXPECT_EQ(log::GroupThousands(0), "0");
  EXPECT_EQ(log::GroupThousands(999), "999");
  EXPECT_EQ(log::GroupThousands(2981), "2,981");
  EXPECT_EQ(log::GroupThousands(1234567), "1,234,567");
}

// Lines a RepeatedLine writes, read back from a log file (without their
// timestamps).
class RepeatedLineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/outpost-log-XXXXXX";
    ASSERT_GE(::mkstemp(tmpl), 0);
    path_ = tmpl;
    ASSERT_TRUE(log::SetFile(path_).ok());
  }
  void TearDown() override {
    (void)log::SetFile("");
    ::unlink(path_.c_str());
  }
  std::vector<std::string> Lines() {
    auto text = sys::ReadFile(path_);
    EXPECT_TRUE(text.ok());
    std::vector<std::string> out;
    for (const std::string& l : Split(text.ok() ? *text : "", '\n')) {
      if (!l.empty()) out.push_back(l.substr(l.find(' ') + 1));
    }
    return out;
  }
  std::string path_;
};

TEST_F(RepeatedLineTest, OneLinePerBurstWithTheCount) {
  constexpr int64_t kSec = 1000000000;
  log::RepeatedLine line(log::Level::kWarn, "accept failed", 10 * kSec);
  EXPECT_EQ(line.due(), 0);
  EXPECT_TRUE(line.Write(100 * kSec, {{"n", "0"}}));
  for (int i = 1; i <= 2981; ++i) EXPECT_FALSE(line.Write(100 * kSec + i * 1000, {{"n", std::to_string(i)}}));
  EXPECT_EQ(line.held(), 2981u);
  EXPECT_EQ(line.due(), 110 * kSec);
  line.Flush(109 * kSec);  // too early: nothing
  EXPECT_EQ(Lines().size(), 1u);
  line.Flush(110 * kSec);
  // Still repeating in the next window: summarised again at its end.
  EXPECT_FALSE(line.Write(111 * kSec, {{"n", "last"}}));
  line.Flush(120 * kSec);
  // A quiet window ends the burst: the next one is written at once.
  line.Flush(130 * kSec);
  EXPECT_EQ(line.due(), 0);
  EXPECT_TRUE(line.Write(200 * kSec, {{"n", "again"}}));
  // Without a Flush, the next occurrence after the window writes the summary.
  EXPECT_FALSE(line.Write(201 * kSec, {{"n", "a"}}));
  EXPECT_FALSE(line.Write(215 * kSec, {{"n", "b"}}));
  EXPECT_EQ(Lines(), (std::vector<std::string>{
                         "WARN accept failed n=0",
                         "WARN accept failed (repeated 2,981 times in the last 10 s) n=2981",
                         "WARN accept failed (repeated 1 time in the last 10 s) n=last",
                         "WARN accept failed n=again",
                         "WARN accept failed (repeated 1 time in the last 15 s) n=a",
                     }));
  EXPECT_EQ(line.held(), 1u);  // "b" opens the next window
}

TEST(Json, ParseRejectsDeepNestingBadUtf8TrailingDataAndHugeInput) {
  EXPECT_TRUE(json::Parse("{\"a\": [1, 2, {\"b\": \"\\u00e9\"}]}").ok());
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto r = json::Parse(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "document is nested 100 levels deep, more than the limit of 32");
  r = json::Parse("{\"a\": \"\xc3\x28\"}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "line 1: invalid UTF-8 at byte offset 7");
  r = json::Parse("{} {}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "invalid JSON: line 1: unexpected data after the document");
  r = json::Parse(std::string(100, ' '), json::ParseLimits{10, 8});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "document is 100 bytes, more than the limit of 10 bytes");
  r = json::Parse("{\"a\":\n tru}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message().rfind("invalid JSON: syntax error at line 2", 0), 0u) << r.error().message();
  // picojson throws on numbers that overflow a double; we must not.
  r = json::Parse("{\"a\": 1e999}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "invalid JSON: line 1: a number is too large (byte offset 6)");
  r = json::Parse("{\"a\": [0,\n -" + std::string(400, '9') + "]}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "invalid JSON: line 2: a number is too large (byte offset 11)");
  // The same characters inside strings, and numbers that do fit, are fine.
  r = json::Parse("{\"1e999\": \"1e999 \\\" 1e999\", \"b\": [1e308, -9223372036854775808, 1e-999, 123456789012345678901]}");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->get("b").get(3).is<double>());
  EXPECT_EQ(json::FindOverflowingNumber("[1, 2e400]"), 4);
  EXPECT_EQ(json::FindOverflowingNumber("[\"2e400\", 1]"), -1);
  EXPECT_EQ(json::FindOverflowingNumber("-1e309"), 0);
  EXPECT_EQ(json::FindOverflowingNumber("[1e309x]"), 1);  // picojson reads 1e309, then fails at x
  EXPECT_EQ(json::FindOverflowingNumber("[1e3e999]"), -1);  // not a number as a whole: a syntax error
  // Brackets inside strings do not count as nesting.
  EXPECT_TRUE(json::Parse("{\"a\": \"" + std::string(100, '[') + "\"}").ok());
  // Overlong encodings and surrogates are not UTF-8.
  EXPECT_FALSE(json::Parse("\"\xc0\xaf\"").ok());
  EXPECT_FALSE(json::Parse("\"\xed\xa0\x80\"").ok());
}

TEST(Json, DuplicateMembersNamedWithPathAndLines) {
  EXPECT_EQ(json::FindDuplicateMember("{\"a\": 1, \"b\": 2}"), "");
  EXPECT_EQ(json::FindDuplicateMember("{\"id\": \"f\",\n \"id\": \"g\"}"), "id: given twice (lines 1 and 2)");
  // Its path as ObjectReader writes it; the same name in other objects, as
  // a value, or inside strings is no duplicate.
  std::string doc =
      "{\"tasks\": [{\"name\": \"a\", \"config\": {\"name\": \"x\"}},\n"
      "  {\"name\": \"b\", \"env\": {\"k\": \"name\", \"s\": \"\\\", \\\"k\\\": \"},\n"
      "   \"config\": {\"image\": \"x\", \"l\": [{}, {\"image\": 1}],\n \"image\": \"y\"}}]}";
  ASSERT_TRUE(json::Parse(doc).ok()) << doc;
  EXPECT_EQ(json::FindDuplicateMember(doc), "tasks[1].config.image: given twice (lines 3 and 4)");
  // Names as written (an escaped spelling is another name).
  EXPECT_EQ(json::FindDuplicateMember("{\"x\": {\"a\\n\": 1, \"a\\n\": 2}}"), "x.a\\n: given twice (lines 1 and 1)");
  EXPECT_EQ(json::FindDuplicateMember("{\"x\": {\"a\": 1, \"\\u0061\": 2}}"), "");
  // Parse refuses it only when asked (documents people write).
  EXPECT_TRUE(json::Parse("{\"a\": 1, \"a\": 2}").ok());
  json::ParseLimits strict;
  strict.unique_members = true;
  auto r = json::Parse("{\"a\": 1, \"a\": 2}", strict);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "a: given twice (lines 1 and 1)");
}

TEST(Json, ObjectReaderCollectsEveryErrorWithPaths) {
  auto doc = json::Parse(R"({"name": 5, "count": 1.5, "big": 99, "delay": "five", "size": "10XB",
                             "tags": ["a", 2], "flag": "yes", "restrat": {}})");
  ASSERT_TRUE(doc.ok());
  json::Errors errors;
  json::ObjectReader r(*doc, "tasks[1]", &errors);
  std::string name = "unchanged";
  int64_t count = -1, big = -1, delay = -1;
  uint64_t size = 0;
  std::vector<std::string> tags;
  bool flag = false;
  r.String("name", &name);
  r.Int("count", 0, 10, &count);
  r.Int("big", 0, 10, &big);
  r.Duration("delay", &delay);
  r.Size("size", &size);
  r.StringList("tags", &tags);
  r.Bool("flag", &flag);
  r.Known("restart");
  r.RejectUnknown();
  EXPECT_EQ(name, "unchanged");
  EXPECT_EQ(count, -1);
  std::vector<std::string> want = {
      "tasks[1].name: expected a string, got number",
      "tasks[1].count: expected a whole number, got 1.5",
      "tasks[1].big: must be between 0 and 10, got 99",
      "tasks[1].delay: expected a duration like \"5s\", got \"five\"",
      "tasks[1].size: expected a size like \"10MiB\", got \"10XB\"",
      "tasks[1].tags[1]: expected a string, got number",
      "tasks[1].flag: expected true or false, got string",
      "tasks[1].restrat: unknown field (did you mean \"restart\"?)",
  };
  EXPECT_EQ(errors, want);
}

TEST(Json, ObjectReaderOnNonObject) {
  auto doc = json::Parse("[1]");
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  std::string s;
  r.String("x", &s);
  r.RejectUnknown();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(errors, (std::vector<std::string>{"document: expected an object, got array"}));
}

}  // namespace
}  // namespace outpost
