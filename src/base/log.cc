#include "base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost {

// UTC only, so no gmtime_r: glibc's goes through the time zone code, which
// links its zone file parser (sscanf and friends, ~60 KB of a static binary).
// Days since 1970-01-01 to a civil date, with 400-year eras of 146,097 days
// and years counted from March, so the leap day ends a year.
std::string FormatWallTime(int64_t wall_nanos) {
  int64_t secs = wall_nanos / kNanosPerSecond;
  int64_t nanos = wall_nanos % kNanosPerSecond;
  if (nanos < 0) {
    nanos += kNanosPerSecond;
    secs -= 1;
  }
  int64_t days = secs / 86400;
  int64_t sod = secs % 86400;
  if (sod < 0) {
    sod += 86400;
    days -= 1;
  }
  const int64_t z = days + 719468;  // days since 0000-03-01
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;                                   // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);             // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                  // March = 0
  const int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  const long long year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return Format("%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", year, month, day, static_cast<int>(sod / 3600),
                static_cast<int>(sod / 60 % 60), static_cast<int>(sod % 60), static_cast<int>(nanos / kNanosPerMilli));
}

namespace log {
namespace {
Level g_level = Level::kInfo;
UniqueFd g_file;
}  // namespace

Result<Level> ParseLevel(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  return outpost::Error(Code::kInvalidArgument,
                        "expected one of debug, info, warn, error, got \"" + std::string(name) + "\"");
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarn: return "WARN";
    case Level::kError: return "ERROR";
  }
  return "INFO";
}

void SetLevel(Level level) { g_level = level; }
Level GetLevel() { return g_level; }

Status SetFile(const std::string& path) {
  if (path.empty()) {
    g_file.Reset();
    return OkStatus();
  }
  auto fd = sys::Open(path, O_WRONLY | O_CREAT | O_APPEND, 0640);
  if (!fd.ok()) return fd.error();
  g_file = std::move(*fd);
  return OkStatus();
}

static void AppendFields(std::string* line, const Field* begin, const Field* end) {
  for (const Field* f = begin; f != end; ++f) {
    *line += ' ';
    *line += f->first;
    *line += '=';
    *line += QuoteIfNeeded(f->second);
  }
}

std::string FormatLine(int64_t wall_nanos, Level level, std::string_view msg, Fields fields) {
  std::string line = FormatWallTime(wall_nanos);
  line += ' ';
  line += LevelName(level);
  line += ' ';
  // The message itself stays unquoted but may not break the one-line rule.
  for (char c : msg) line += (c == '\n' || c == '\r') ? ' ' : c;
  AppendFields(&line, fields.begin(), fields.end());
  line += '\n';
  return line;
}

static void Emit(const std::string& line) {
  // Log writes are best effort: a full disk or closed stderr must never take
  // the agent down, so errors are ignored here on purpose.
  (void)sys::Write(STDERR_FILENO, line.data(), line.size());
  if (g_file) (void)sys::Write(g_file.get(), line.data(), line.size());
}

void Write(Level level, std::string_view msg, Fields fields) {
  if (level < g_level) return;
  Emit(FormatLine(WallNanos(), level, msg, fields));
}

std::string GroupThousands(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool RepeatedLine::Write(int64_t now, Fields fields) {
  if (active_ && now >= window_start_ + window_) Flush(now);
  if (active_) {
    ++held_;
    last_.assign(fields.begin(), fields.end());
    return false;
  }
  active_ = true;
  window_start_ = now;
  log::Write(level_, msg_, fields);
  return true;
}

void RepeatedLine::Flush(int64_t now) {
  if (!active_ || now < window_start_ + window_) return;
  if (held_ == 0) {
    active_ = false;
    return;
  }
  if (level_ >= g_level) {
    int64_t secs = (now - window_start_ + kNanosPerSecond / 2) / kNanosPerSecond;
    std::string msg = msg_ + " (repeated " + GroupThousands(held_) + (held_ == 1 ? " time" : " times") +
                      " in the last " + std::to_string(secs) + " s)";
    std::string line = FormatLine(WallNanos(), level_, msg, {});
    line.pop_back();
    AppendFields(&line, last_.data(), last_.data() + last_.size());
    line += '\n';
    Emit(line);
  }
  // Still repeating: the next window starts now and is summarised too.
  held_ = 0;
  last_.clear();
  window_start_ = now;
}

bool WarnIfError(const Status& st, std::string_view what, Fields fields) {
  if (st.ok()) return true;
  if (Level::kWarn < g_level) return false;
  std::string line = FormatLine(WallNanos(), Level::kWarn, what, {{"error", st.error().message()}});
  line.pop_back();  // the newline: the caller's fields follow
  AppendFields(&line, fields.begin(), fields.end());
  line += '\n';
  Emit(line);
  return false;
}

}  // namespace log
}  // namespace outpost
