// String helpers shared by every layer: printf-style formatting (we avoid
// iostream to keep the static binary small), parsing of durations and sizes
// as they appear in config and job files, and quoting for log lines.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace outpost {

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

std::vector<std::string> Split(std::string_view s, char sep);
// The strings with sep between them ("" for none).
std::string JoinStrings(const std::vector<std::string>& v, const char* sep);
bool StartsWith(std::string_view s, std::string_view prefix);
bool EndsWith(std::string_view s, std::string_view suffix);

// "1500ms", "5s", "2m", "1h30m", "0" -> nanoseconds. Units: ns us ms s m h.
Result<int64_t> ParseDuration(std::string_view s);
// Inverse for display: 1500000000 -> "1.5s".
std::string FormatDuration(int64_t ns);

// "10MiB", "512KiB", "1G", "4096" -> bytes. Units: B K KB KiB M MB MiB G GB GiB
// (K/M/G and KiB/MiB/GiB are powers of 1024, KB/MB/GB powers of 1000).
Result<uint64_t> ParseSize(std::string_view s);

// Decimal integer, whole string, in range.
Result<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max);

// Quotes a value for a key=value log line when it has spaces, quotes,
// '=' or control bytes; otherwise returns it unchanged.
std::string QuoteIfNeeded(std::string_view v);

// Edit distance, for "did you mean" suggestions.
// Levenshtein distance; with a limit, any distance >= limit is returned as
// limit (computed cheaply).
size_t EditDistance(std::string_view a, std::string_view b, size_t limit = SIZE_MAX);

// The length of the valid UTF-8 sequence at s[i] (1 to 4), its code point in
// *rune when given; 0 when s[i] starts none or i is past the end. Overlong
// forms, surrogates and values past U+10FFFF are invalid, as in Go's
// utf8.Valid.
size_t Utf8RuneAt(std::string_view s, size_t i, uint32_t* rune = nullptr);

// RFC 4648 base64 with padding. Decoding is strict: whole quads, padding
// only at the end, the unused bits of the last character zero, so every
// input has one decoding and one encoding (Go writes it so).
std::string Base64Encode(const std::string& in);
Result<std::string> Base64Decode(const std::string& in);

}  // namespace outpost
