// outpost logs' view: --since, the times of -t and the printer that keeps
// both streams in order on one file.
#include "cli/log_view.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>

namespace outpost::cli {
namespace {

constexpr int64_t kNow = 1764658800;  // 2025-12-02T07:00:00Z

TEST(LogViewTest, SinceTakesADurationBackFromNow) {
  EXPECT_EQ(*ParseSince("10m", kNow), kNow - 600);
  EXPECT_EQ(*ParseSince("2h30m", kNow), kNow - 9000);
  EXPECT_EQ(*ParseSince("0s", kNow), kNow);
}

TEST(LogViewTest, SinceTakesAnRfc3339TimeInAnyZone) {
  EXPECT_EQ(*ParseSince("2025-12-02T07:00:00Z", kNow), kNow);
  EXPECT_EQ(*ParseSince("2025-12-02T07:00:00.75z", kNow), kNow);
  EXPECT_EQ(*ParseSince("2025-12-02T08:00:00+01:00", kNow), kNow);
  EXPECT_EQ(*ParseSince("2025-12-02T06:30:00-00:30", kNow), kNow);
  EXPECT_EQ(*ParseSince("2025-12-02 07:00:05Z", kNow), kNow + 5);
}

TEST(LogViewTest, SinceNamesWhatItExpectsForAnythingElse) {
  for (const char* bad : {"", "yesterday", "-5m", "2025-12-02T07:00:00", "2025-13-02T07:00:00Z",
                          "2025-12-02T07:00:00+1:00", "2025-12-02T07:00:00Zjunk", "2025-12-02T07:00:00."}) {
    auto r = ParseSince(bad, kNow);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("RFC 3339"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(std::string("\"") + bad + "\""), std::string::npos) << r.error().message();
  }
}

TEST(LogViewTest, ASecondIsShownInUtcAndAnUnknownOneAsADashOfTheSameWidth) {
  EXPECT_EQ(FormatSecond(kNow + 5), "2025-12-02T07:00:05Z");
  EXPECT_EQ(FormatSecond(0).size(), FormatSecond(kNow).size());
  EXPECT_EQ(FormatSecond(0)[0], '-');
}

// The date arithmetic (no timegm or gmtime_r in the binary: their time zone
// code costs 40 KB) agrees with libc's across leap years and centuries,
// up to the end of int64 nanoseconds (FormatWallTime).
TEST(LogViewTest, TimesAgreeWithLibcFrom1970To2261) {
  for (int y = 1970; y <= 2261; ++y) {  // 2262: past int64 nanoseconds
    for (int mo = 1; mo <= 12; ++mo) {
      for (int d : {1, 15, 28}) {
        struct tm t = {};
        t.tm_year = y - 1900;
        t.tm_mon = mo - 1;
        t.tm_mday = d;
        t.tm_hour = 23;
        t.tm_min = 59;
        t.tm_sec = 58;
        char text[40];
        std::snprintf(text, sizeof text, "%04d-%02d-%02dT23:59:58Z", y, mo, d);
        auto got = ParseSince(text, kNow);
        ASSERT_TRUE(got.ok()) << text;
        ASSERT_EQ(FormatSecond(*got), text);
        // A 32-bit time_t (armhf's glibc) ends in January 2038: libc has no
        // answer past it, outpost's own arithmetic (64-bit) does.
        if (sizeof(time_t) < 8 && y >= 2038) continue;
        ASSERT_EQ(*got, static_cast<int64_t>(timegm(&t))) << text;
      }
    }
  }
  EXPECT_EQ(*ParseSince("2024-02-29T00:00:00Z", kNow) + 86400, *ParseSince("2024-03-01T00:00:00Z", kNow));
  EXPECT_EQ(*ParseSince("2100-02-28T00:00:00Z", kNow) + 86400, *ParseSince("2100-03-01T00:00:00Z", kNow));
  // Past 2038 on every arch (Python's calendar.timegm gives the same).
  EXPECT_EQ(*ParseSince("2038-01-19T03:14:08Z", kNow), 2147483648);
  EXPECT_EQ(*ParseSince("2100-03-01T00:00:00Z", kNow), 4107542400);
  EXPECT_EQ(*ParseSince("2261-12-31T23:59:59Z", kNow), 9214646399);
}

// Two FILEs on one file (as 2>&1 makes stdout and stderr), both fully
// buffered: what the printer wrote comes out in the order it printed it.
struct OneFile {
  OneFile() {
    char path[] = "/tmp/log_view_test.XXXXXX";
    int fd = ::mkstemp(path);
    ::unlink(path);
    out = ::fdopen(fd, "w+");
    err = ::fdopen(::dup(fd), "w");
    std::setvbuf(out, nullptr, _IOFBF, 1 << 16);
    std::setvbuf(err, nullptr, _IOFBF, 1 << 16);
  }
  ~OneFile() {
    std::fclose(err);
    std::fclose(out);
  }
  std::string Contents() {
    std::fflush(out);
    std::fflush(err);
    std::string s;
    char buf[4096];
    size_t n;
    std::rewind(out);
    while ((n = std::fread(buf, 1, sizeof buf, out)) > 0) s.append(buf, n);
    return s;
  }
  FILE* out;
  FILE* err;
};

TEST(LogViewTest, BothStreamsOnOneFileKeepTheirOrder) {
  OneFile f;
  LogPrinter p(f.out, f.err, false);
  ASSERT_TRUE(p.Print(false, 0, "out 1\n"));
  ASSERT_TRUE(p.Print(true, 0, "err 1\n"));
  ASSERT_TRUE(p.Print(false, 0, "out 2\n"));
  ASSERT_TRUE(p.Print(true, 0, "err 2\n"));
  EXPECT_EQ(f.Contents(), "out 1\nerr 1\nout 2\nerr 2\n");
}

TEST(LogViewTest, TimesGoBeforeEachLineAndNotInsideOneContinuedLater) {
  OneFile f;
  LogPrinter p(f.out, f.err, true);
  ASSERT_TRUE(p.Print(false, kNow, "a\nb"));
  ASSERT_TRUE(p.Print(true, kNow + 1, "e\n"));
  ASSERT_TRUE(p.Print(false, kNow + 2, "c\nd\n"));
  ASSERT_TRUE(p.Print(false, 0, "x\n"));
  EXPECT_EQ(f.Contents(),
            "2025-12-02T07:00:00Z a\n2025-12-02T07:00:00Z b"
            "2025-12-02T07:00:01Z e\n"
            "c\n2025-12-02T07:00:02Z d\n" +
                FormatSecond(0) + " x\n");
}

}  // namespace
}  // namespace outpost::cli
