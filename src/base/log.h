// Structured logging. Owns: the process-wide log sink (stderr and an
// optional file) and the line format
//   2026-11-22T19:25:20.123Z INFO agent started pid=42 socket=/run/outpost/outpost.sock
// One line per event; values quoted when needed. Not thread-safe by design:
// the agent is single-threaded. The keeper uses it too, for rare events only.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

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

}  // namespace outpost::log
