// How `outpost logs` shows what ReadLogs returns: the --since argument, the
// times of -t, and the printer that puts each stream's bytes on its own fd
// (stdout's on stdout, stderr's on stderr, as docker does) with a time in
// front of each line when asked.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/error.h"

namespace outpost::cli {

// --since: a duration back from now_unix_seconds ("10m", "2h30m") or an RFC
// 3339 time ("2026-12-02T07:00:00Z", "2026-12-02T08:00:00+01:00", with or
// without fractional seconds); the unix second it names.
Result<int64_t> ParseSince(std::string_view s, int64_t now_unix_seconds);

// "2026-12-02T07:00:05Z"; a time not known (0) is "-" padded to the same
// width.
std::string FormatSecond(int64_t unix_seconds);

class LogPrinter {
 public:
  LogPrinter(FILE* out, FILE* err, bool timestamps) : out_(out), err_(err), timestamps_(timestamps) {}
  // Prints bytes of one stream written in the given second. False when a
  // write failed.
  bool Print(bool stderr_stream, int64_t unix_seconds, std::string_view bytes);

 private:
  FILE* out_;
  FILE* err_;
  bool timestamps_;
  bool mid_line_[2] = {false, false};  // per stream: the last bytes printed ended inside a line
  FILE* last_ = nullptr;               // where the last bytes went
};

}  // namespace outpost::cli
