#include "base/strings.h"

#include <cstdarg>
#include <cstdio>
#include <limits>

namespace outpost {

namespace {
constexpr int64_t kNanosPerSecondLocal = 1000000000;
}  // namespace

std::string Format(const char* fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof small) return std::string(small, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n), '\0');
  va_start(ap, fmt);
  std::vsnprintf(&out[0], out.size() + 1, fmt, ap);
  va_end(ap);
  return out;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max) {
  if (s.empty()) return Error(Code::kInvalidArgument, "expected a number, got an empty string");
  bool neg = false;
  size_t i = 0;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
  }
  if (i == s.size()) return Error(Code::kInvalidArgument, "expected a number, got \"" + std::string(s) + "\"");
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') {
      return Error(Code::kInvalidArgument, "expected a number, got \"" + std::string(s) + "\"");
    }
    if (v > (std::numeric_limits<uint64_t>::max() - 9) / 10) {
      return Error(Code::kOutOfRange, "number \"" + std::string(s) + "\" is too large");
    }
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (neg ? 1 : 0)) {
    return Error(Code::kOutOfRange, "number \"" + std::string(s) + "\" is too large");
  }
  int64_t r = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  if (r < min || r > max) {
    return Error(Code::kOutOfRange, Format("%s is out of range %lld..%lld", std::string(s).c_str(),
                                           static_cast<long long>(min), static_cast<long long>(max)));
  }
  return r;
}

// "<digits>[.<digits>]" at s[*pos] times mult, in integers (no floating
// point: a long double is a software 128-bit type on aarch64): the product
// rounded to the nearest whole number in *out, and *exact when it needed no
// rounding. False on a syntax error; *out = max + 1 when the product passes
// max (at most INT64_MAX).
static bool ParseScaled(std::string_view s, size_t* pos, uint64_t mult, uint64_t max, uint64_t* out, bool* exact) {
  auto digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
  size_t start = *pos;
  uint64_t whole = 0;
  bool too_large = false;
  for (; digit(*pos); ++*pos) {
    uint64_t d = static_cast<uint64_t>(s[*pos] - '0');
    if (whole > (max - d) / 10) too_large = true;
    if (!too_large) whole = whole * 10 + d;
  }
  uint64_t frac = 0;
  *exact = true;
  if (*pos < s.size() && s[*pos] == '.') {
    size_t first = ++*pos;
    while (digit(*pos)) ++*pos;
    if (*pos == first) return false;
    // 0.d1d2...dk * mult by Horner's rule from the last digit: each step
    // divides by 10; a remainder anywhere means the product is no integer.
    uint64_t acc = 0, rem = 0;
    for (size_t k = *pos; k-- > first;) {
      uint64_t t = static_cast<uint64_t>(s[k] - '0') * mult + acc;
      acc = t / 10;
      rem = t % 10;
      if (rem != 0) *exact = false;
    }
    frac = acc + (rem >= 5 ? 1 : 0);
  }
  if (*pos == start) return false;
  if (too_large || (whole != 0 && mult > max / whole) || frac > max - whole * mult) {
    *out = max + 1;
  } else {
    *out = whole * mult + frac;
  }
  return true;
}

Result<int64_t> ParseDuration(std::string_view s) {
  auto bad = [&] {
    return Error(Code::kInvalidArgument, "expected a duration like \"5s\", got \"" + std::string(s) + "\"");
  };
  if (s == "0") return int64_t{0};
  if (s.empty()) return bad();
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t total = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t num = pos;
    while (pos < s.size() && ((s[pos] >= '0' && s[pos] <= '9') || s[pos] == '.')) ++pos;
    size_t ustart = pos;
    while (pos < s.size() && ((s[pos] >= 'a' && s[pos] <= 'z') || s[pos] == 'A')) ++pos;
    std::string_view unit = s.substr(ustart, pos - ustart);
    uint64_t mult;
    if (unit == "ns") mult = 1;
    else if (unit == "us") mult = 1000;
    else if (unit == "ms") mult = 1000000;
    else if (unit == "s") mult = 1000000000;
    else if (unit == "m") mult = 60000000000;
    else if (unit == "h") mult = 3600000000000;
    else return bad();
    uint64_t v = 0;
    bool exact = true;
    size_t end = num;
    if (!ParseScaled(s.substr(0, ustart), &end, mult, kMax, &v, &exact) || end != ustart) return bad();
    if (v > kMax - total) return Error(Code::kOutOfRange, "duration \"" + std::string(s) + "\" is too long");
    total += v;
  }
  return static_cast<int64_t>(total);
}

std::string FormatDuration(int64_t ns) {
  if (ns == 0) return "0s";
  std::string sign = ns < 0 ? "-" : "";
  if (ns < 0) ns = -ns;
  if (ns % kNanosPerSecondLocal == 0) {
    // Whole seconds: "1h30m", "1m30s", "45s".
    int64_t s = ns / kNanosPerSecondLocal;
    std::string out = sign;
    if (s >= 3600) out += Format("%lldh", static_cast<long long>(s / 3600));
    if (s % 3600 >= 60) out += Format("%lldm", static_cast<long long>((s % 3600) / 60));
    if (s % 60) out += Format("%llds", static_cast<long long>(s % 60));
    return out;
  }
  struct Unit { const char* name; int64_t size; };
  static const Unit units[] = {{"s", 1000000000LL}, {"ms", 1000000LL}, {"us", 1000LL}, {"ns", 1}};
  for (const Unit& u : units) {
    if (ns >= u.size) {
      if (ns % u.size == 0) return sign + Format("%lld%s", static_cast<long long>(ns / u.size), u.name);
      return sign + Format("%.4g%s", static_cast<double>(ns) / static_cast<double>(u.size), u.name);
    }
  }
  return sign + Format("%lldns", static_cast<long long>(ns));
}

Result<uint64_t> ParseSize(std::string_view s) {
  auto bad = [&] {
    return Error(Code::kInvalidArgument, "expected a size like \"10MiB\", got \"" + std::string(s) + "\"");
  };
  size_t pos = 0;
  while (pos < s.size() && ((s[pos] >= '0' && s[pos] <= '9') || s[pos] == '.')) ++pos;
  std::string_view unit = s.substr(pos);
  uint64_t mult;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = uint64_t{1} << 10;
  else if (unit == "KB" || unit == "kB") mult = 1000;
  else if (unit == "M" || unit == "MiB") mult = uint64_t{1} << 20;
  else if (unit == "MB") mult = 1000000;
  else if (unit == "G" || unit == "GiB") mult = uint64_t{1} << 30;
  else if (unit == "GB") mult = 1000000000;
  else if (unit == "T" || unit == "TiB") mult = uint64_t{1} << 40;
  else if (unit == "TB") mult = 1000000000000;
  else return bad();
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t bytes = 0;
  bool exact = true;
  size_t end = 0;
  if (!ParseScaled(s.substr(0, pos), &end, mult, kMax, &bytes, &exact) || end != pos) return bad();
  if (bytes > kMax) return Error(Code::kOutOfRange, "size \"" + std::string(s) + "\" is too large");
  if (!exact) {
    return Error(Code::kInvalidArgument, "size \"" + std::string(s) + "\" is not a whole number of bytes");
  }
  return bytes;
}

std::string QuoteIfNeeded(std::string_view v) {
  bool needs = v.empty();
  for (unsigned char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) {
      needs = true;
      break;
    }
  }
  if (!needs) return std::string(v);
  std::string out = "\"";
  for (unsigned char c : v) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < ' ' || c == 0x7f) out += Format("\\x%02x", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b, size_t limit) {
  // The distance is at least the difference in length, and a row's minimum
  // never decreases: both let a search for close matches stop early, so an
  // unknown key of any length costs little.
  size_t diff = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (diff >= limit) return limit;
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    size_t row_min = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min(std::min(prev[j] + 1, cur[j - 1] + 1), sub);
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min >= limit) return limit;
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], limit);
}

std::string JoinStrings(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

size_t Utf8RuneAt(std::string_view s, size_t i, uint32_t* rune) {
  auto at = [&](size_t k) -> uint32_t { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  auto cont = [](uint32_t c) { return (c & 0xC0) == 0x80; };
  uint32_t c = at(0), r = 0;
  size_t n = 0;
  if (i >= s.size()) return 0;
  if (c < 0x80) {
    r = c, n = 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    if (cont(at(1))) r = (c & 0x1F) << 6 | (at(1) & 0x3F), n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    uint32_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    if (at(1) >= lo && at(1) <= hi && cont(at(2))) r = (c & 0x0F) << 12 | (at(1) & 0x3F) << 6 | (at(2) & 0x3F), n = 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    uint32_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    if (at(1) >= lo && at(1) <= hi && cont(at(2)) && cont(at(3))) {
      r = (c & 0x07) << 18 | (at(1) & 0x3F) << 12 | (at(2) & 0x3F) << 6 | (at(3) & 0x3F), n = 4;
    }
  }
  if (n != 0 && rune != nullptr) *rune = r;
  return n;
}

namespace {

const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string Base64Encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    if (rest == 2) n |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Strict: whole quads, padding only at the end, and the unused bits of the
// last character zero, so that every input has one decoding and one
// encoding (Go writes it so).
Result<std::string> Base64Decode(const std::string& in) {
  if (in.size() % 4 != 0) {
    return Error(Code::kInvalidArgument, Format("not valid base64: length %zu is not a multiple of 4", in.size()));
  }
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    bool last = i + 4 == in.size();
    int pad = 0;
    if (last && in[i + 3] == '=') pad = in[i + 2] == '=' ? 2 : 1;
    uint32_t n = 0;
    for (int j = 0; j < 4; ++j) {
      int v = j >= 4 - pad ? 0 : Base64Value(in[i + j]);
      if (v < 0) return Error(Code::kInvalidArgument, Format("not valid base64: bad character at offset %zu", i + j));
      n = (n << 6) | static_cast<uint32_t>(v);
    }
    if ((pad == 1 && (n & 0xff) != 0) || (pad == 2 && (n & 0xffff) != 0)) {
      return Error(Code::kInvalidArgument, Format("not valid base64: stray bits before the padding at offset %zu", i));
    }
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

}  // namespace outpost
