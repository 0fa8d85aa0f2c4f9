// Structured logging. Owns: the process-wide log sink (stderr and an
// optional file) and the line format
//   2026-11-22T19:25:20.123Z INFO agent started pid=42 socket=/run/outpost/outpost.sock
// One line per event; values quoted when needed. Not thread-safe by design:
// the agent is single-threaded. The keeper uses it too, for rare events only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace outpost::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using Field = std::pair<std::string_view, std::string>;
using Fields = std::initializer_list<Field>;

Result<Level> ParseLevel(std::string_view name);
const char* LevelName(Level level);

void SetLevel(Level level);
Level GetLevel();
// Also append every line to path (opened O_APPEND); "" turns it off.
Status SetFile(const std::string& path);

void Write(Level level, std::string_view msg, Fields fields = {});
inline void Debug(std::string_view msg, Fields f = {}) { Write(Level::kDebug, msg, f); }
inline void Info(std::string_view msg, Fields f = {}) { Write(Level::kInfo, msg, f); }
inline void Warn(std::string_view msg, Fields f = {}) { Write(Level::kWarn, msg, f); }
inline void Error(std::string_view msg, Fields f = {}) { Write(Level::kError, msg, f); }

// "Log this error and continue": a failed st is one Warn line
// `<what> error="<message>" <fields>`; an ok one logs nothing. Returns st.ok().
bool WarnIfError(const Status& st, std::string_view what, Fields fields = {});

// Formats one line without writing it (used by tests).
std::string FormatLine(int64_t wall_nanos, Level level, std::string_view msg, Fields fields);

// One log event that may repeat in bursts (a refused connection per accept,
// say): the first occurrence is written at once, later ones within the
// window are only counted, and when the window ends one line stands for them:
//   <msg> (repeated 2,981 times in the last 10 s) <fields of the last one>
// The summary is written by Flush (the owner calls it at due(), from a timer)
// or, failing that, by the next occurrence. Field keys must outlive the
// object (string literals). Times are monotonic nanoseconds.
class RepeatedLine {
 public:
  RepeatedLine(Level level, std::string msg, int64_t window_nanos = 10LL * 1000000000)
      : level_(level), msg_(std::move(msg)), window_(window_nanos) {}

  // Returns true if this occurrence was written, false if it was counted.
  bool Write(int64_t now, Fields fields);
  // Writes the summary if the window has ended with occurrences held back.
  void Flush(int64_t now);
  // When Flush has something to write; 0 = nothing held back.
  int64_t due() const { return held_ > 0 ? window_start_ + window_ : 0; }
  uint64_t held() const { return held_; }

 private:
  Level level_;
  std::string msg_;
  int64_t window_;
  int64_t window_start_ = 0;
  bool active_ = false;  // a window is open
  uint64_t held_ = 0;
  std::vector<Field> last_;
};

// 2981 -> "2,981".
std::string GroupThousands(uint64_t n);

}  // namespace outpost::log
