#include "base/log.h"

#include <fcntl.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fd.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost {

std::string FormatWallTime(int64_t wall_nanos) {
  time_t secs = static_cast<time_t>(wall_nanos / kNanosPerSecond);
  struct tm tm;
  gmtime_r(&secs, &tm);
  return Format("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((wall_nanos % kNanosPerSecond) / kNanosPerMilli));
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
