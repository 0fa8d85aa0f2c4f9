#include "cli/log_view.h"

#include <cstdlib>

#include "base/clock.h"

#include "base/strings.h"

namespace outpost::cli {

namespace {

// Not timegm: glibc's goes through the time zone code, whose zone file
// parser (sscanf) costs a static binary about 40 KB (as gmtime_r would;
// base/log.cc's FormatWallTime does the other direction the same way).
// Days from 1970-01-01 of a civil date, with 400-year eras counted from
// March (the inverse of FormatWallTime's).
int64_t UnixSecondsOfUtc(int y, int mo, int d, int h, int mi, int se) {
  const int64_t year = mo <= 2 ? y - 1 : y;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const int64_t yoe = year - era * 400;                                     // [0, 399]
  const int64_t doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;               // [0, 146096]
  const int64_t days = era * 146097 + doe - 719468;
  return days * 86400 + h * 3600 + mi * 60 + se;
}

bool Digits(std::string_view s, size_t at, size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)
bool ParseRfc3339(std::string_view s, int64_t* out) {
  int y, mo, d, h, mi, se;
  if (!Digits(s, 0, 4, &y) || s.size() < 20 || s[4] != '-' || !Digits(s, 5, 2, &mo) || s[7] != '-' ||
      !Digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !Digits(s, 11, 2, &h) ||
      s[13] != ':' || !Digits(s, 14, 2, &mi) || s[16] != ':' || !Digits(s, 17, 2, &se)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
  size_t at = 19;
  if (at < s.size() && s[at] == '.') {
    ++at;
    size_t start = at;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
    if (at == start) return false;
  }
  int64_t offset = 0;
  if (at < s.size() && (s[at] == 'Z' || s[at] == 'z')) {
    ++at;
  } else if (at < s.size() && (s[at] == '+' || s[at] == '-')) {
    int oh, om;
    if (!Digits(s, at + 1, 2, &oh) || at + 3 >= s.size() || s[at + 3] != ':' || !Digits(s, at + 4, 2, &om) ||
        oh > 23 || om > 59) {
      return false;
    }
    offset = (s[at] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    at += 6;
  } else {
    return false;
  }
  if (at != s.size()) return false;
  *out = UnixSecondsOfUtc(y, mo, d, h, mi, se) - offset;
  return true;
}

}  // namespace

Result<int64_t> ParseSince(std::string_view s, int64_t now_unix_seconds) {
  int64_t t = 0;
  if (ParseRfc3339(s, &t)) return t;
  auto d = ParseDuration(s);
  if (d.ok() && *d >= 0) return now_unix_seconds - *d / 1000000000;
  return Error(Code::kInvalidArgument, "expected a duration (10m, 2h) or an RFC 3339 time (2026-12-02T07:00:00Z), got \"" +
                                           std::string(s) + "\"");
}

std::string FormatSecond(int64_t unix_seconds) {
  if (unix_seconds <= 0) return "-                   ";
  std::string t = FormatWallTime(unix_seconds * kNanosPerSecond);  // ...T07:00:05.000Z
  return t.substr(0, t.size() - 5) + "Z";
}

bool LogPrinter::Print(bool stderr_stream, int64_t unix_seconds, std::string_view bytes) {
  FILE* f = stderr_stream ? err_ : out_;
  bool& mid = mid_line_[stderr_stream ? 1 : 0];
  // Both streams may go to one pipe or file (2>&1, which leaves stdout
  // fully buffered): what the other stream has buffered goes out first, so
  // the lines keep their order there too.
  if (last_ && last_ != f && std::fflush(last_) != 0) return false;
  last_ = f;
  if (!timestamps_) {
    if (!bytes.empty()) mid = bytes.back() != '\n';
    return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  }
  const std::string stamp = FormatSecond(unix_seconds) + " ";
  while (!bytes.empty()) {
    if (!mid && std::fwrite(stamp.data(), 1, stamp.size(), f) != stamp.size()) return false;
    size_t nl = bytes.find('\n');
    size_t n = nl == std::string_view::npos ? bytes.size() : nl + 1;
    if (std::fwrite(bytes.data(), 1, n, f) != n) return false;
    mid = nl == std::string_view::npos;
    bytes.remove_prefix(n);
  }
  return true;
}

}  // namespace outpost::cli
