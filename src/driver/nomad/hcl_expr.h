// The part of HCL's native expression syntax that hclspec's type
// expressions and Literal values use (strings with escapes and templates
// without interpolation, numbers, bools, null, tuples, objects, the type
// keywords and calls), parsed into driver/nomad/cty's model. Owns: that
// parser, for untrusted text (a plugin's schema): depth-limited, every
// error a message. Does not own: what a spec means (driver/nomad/hclspec).
#pragma once

#include <string>
#include <string_view>

#include "driver/nomad/cty.h"

namespace outpost::driver::nomad {

// HCL identifiers, as in `object({a-b = string})` and `${NAME}`.
inline bool IsHclIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool IsHclIdentChar(char c) { return IsHclIdentStart(c) || (c >= '0' && c <= '9') || c == '-'; }

// All of text as a type expression (string, list(number), object({...}),
// ...) or as a value; false with *error saying what and where otherwise.
bool ParseHclType(std::string_view text, Type* out, std::string* error);
bool ParseHclValue(std::string_view text, Value* out, std::string* error);

}  // namespace outpost::driver::nomad
