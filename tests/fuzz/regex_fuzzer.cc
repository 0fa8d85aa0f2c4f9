// libFuzzer target: the regexes of hooks.d files (hooks/regex.h), Go syntax
// from files that packages and vendors install.
// Input: the regex, a newline, the text to match. Nothing may crash, hang or
// grow without bound; a regex that compiles (without \Q) must answer the
// same when wrapped in a group, and the text quoted with \Q...\E must match itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/strings.h"
#include "hooks/regex.h"

namespace {

bool ValidUtf8(const std::string& s) {
  for (size_t i = 0, n; i < s.size(); i += n) {
    n = outpost::Utf8RuneAt(s, i);
    if (n == 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t nl = in.find('\n');
  std::string re = in.substr(0, nl);
  std::string text = nl == std::string::npos ? "" : in.substr(nl + 1);
  outpost::hooks::Regex r;
  if (r.Compile(re).empty()) {
    bool m = r.Match(text);
    // (An unterminated \Q would swallow the closing parenthesis.)
    outpost::hooks::Regex grouped;
    if (re.find("\\Q") == std::string::npos &&
        (!grouped.Compile("(?:" + re + ")").empty() || grouped.Match(text) != m)) {
      __builtin_trap();
    }
  }
  if (ValidUtf8(text) && text.find("\\E") == std::string::npos) {
    outpost::hooks::Regex quoted;
    if (!quoted.Compile("^\\Q" + text + "\\E$").empty() || !quoted.Match(text)) __builtin_trap();
  }
  return 0;
}
