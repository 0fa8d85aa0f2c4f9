#include "base/json.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/strings.h"

namespace outpost::json {

namespace {

// Validates UTF-8 (no overlongs, no surrogates, max U+10FFFF) and reports the
// byte offset of the first bad sequence, or -1.
long FindInvalidUtf8(const std::string& s) {
  for (size_t i = 0, n; i < s.size(); i += n) {
    n = Utf8RuneAt(s, i);
    if (n == 0) return static_cast<long>(i);
  }
  return -1;
}

// Bracket depth outside strings. picojson recurses per level, so deep input
// must be refused before it reaches the parser.
int MaxDepth(const std::string& s) {
  int depth = 0, max = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') max = std::max(max, ++depth);
    else if (c == '}' || c == ']') --depth;
  }
  return max;
}

}  // namespace

long FindOverflowingNumber(const std::string& s) {
  bool in_str = false, esc = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') {
      in_str = true;
      continue;
    }
    if (c != '-' && (c < '0' || c > '9')) continue;
    // What picojson takes as the number: the run of these characters; it
    // reads it as an int64 when it can, else as a double.
    size_t end = i;
    while (end < s.size() && s[end] != '\0' && std::strchr("0123456789+-eE.", s[end])) ++end;
    std::string run = s.substr(i, end - i);
    char* endp = nullptr;
    errno = 0;
    (void)std::strtoimax(run.c_str(), &endp, 10);
    if (errno != 0 || endp != run.c_str() + run.size()) {
      double f = std::strtod(run.c_str(), &endp);
      if (endp == run.c_str() + run.size() && !std::isfinite(f)) return static_cast<long>(i);
    }
    i = end - 1;
  }
  return -1;
}

namespace {

size_t LineOf(const std::string& s, size_t offset) {
  size_t line = 1;
  for (size_t i = 0; i < offset && i < s.size(); ++i) line += s[i] == '\n';
  return line;
}

}  // namespace

std::string FindDuplicateMember(const std::string& s) {
  struct Frame {
    bool object = false;
    size_t index = 0;                                  // an array's current element
    std::vector<std::pair<std::string, size_t>> seen;  // an object's members so far (as written), with their lines
  };
  std::vector<Frame> stack;
  bool expect_key = false;
  size_t line = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\n') {
      ++line;
    } else if (c == '"') {
      size_t start = i + 1;
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
      if (!expect_key || stack.empty()) continue;
      expect_key = false;
      std::string key = s.substr(start, i - start);
      for (const auto& [name, at] : stack.back().seen) {
        if (name != key) continue;
        // The object's path: how each outer bracket led into it.
        std::string path;
        for (size_t j = 0; j + 1 < stack.size(); ++j) {
          if (stack[j].object) path += (path.empty() ? "" : ".") + stack[j].seen.back().first;
          else path += Format("[%zu]", stack[j].index);
        }
        return (path.empty() ? "" : path + ".") + key + Format(": given twice (lines %zu and %zu)", at, line);
      }
      stack.back().seen.emplace_back(std::move(key), line);
    } else if (c == '{' || c == '[') {
      stack.emplace_back();
      stack.back().object = c == '{';
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',' && !stack.empty()) {
      if (stack.back().object) expect_key = true;
      else ++stack.back().index;
    }
  }
  return "";
}

Result<picojson::value> Parse(const std::string& text, const ParseLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Error(Code::kInvalidArgument, Format("document is %zu bytes, more than the limit of %zu bytes",
                                                text.size(), limits.max_bytes));
  }
  long bad = FindInvalidUtf8(text);
  if (bad >= 0) {
    return Error(Code::kInvalidArgument, Format("line %zu: invalid UTF-8 at byte offset %ld",
                                                LineOf(text, static_cast<size_t>(bad)), bad));
  }
  int depth = MaxDepth(text);
  if (depth > limits.max_depth) {
    return Error(Code::kInvalidArgument,
                 Format("document is nested %d levels deep, more than the limit of %d", depth, limits.max_depth));
  }
  // picojson would throw (std::overflow_error) for a number that overflows
  // a double, such as 1e999 (found by tests/fuzz/json_fuzzer); outpost is
  // built without exceptions (src/base/compat/picojson.h).
  long big = FindOverflowingNumber(text);
  if (big >= 0) {
    return Error(Code::kInvalidArgument, Format("invalid JSON: line %zu: a number is too large (byte offset %ld)",
                                                LineOf(text, static_cast<size_t>(big)), big));
  }
  picojson::value v;
  std::string err;
  std::string::const_iterator end = picojson::parse(v, text.cbegin(), text.cend(), &err);
  if (!err.empty()) {
    // picojson: "syntax error at line N near: ...". Keep it to one line.
    for (char& c : err) if (c == '\n' || c == '\r') c = ' ';
    while (!err.empty() && err.back() == ' ') err.pop_back();
    // At the end of the input picojson has nothing to show after "near:".
    if (EndsWith(err, "near:")) err = err.substr(0, err.size() - 5) + "(unexpected end of the document)";
    return Error(Code::kInvalidArgument, "invalid JSON: " + err);
  }
  for (; end != text.cend(); ++end) {
    if (*end != ' ' && *end != '\n' && *end != '\t' && *end != '\r') {
      return Error(Code::kInvalidArgument,
                   Format("invalid JSON: line %zu: unexpected data after the document",
                          LineOf(text, static_cast<size_t>(end - text.cbegin()))));
    }
  }
  if (limits.unique_members) {
    std::string twice = FindDuplicateMember(text);
    if (!twice.empty()) return Error(Code::kInvalidArgument, twice);
  }
  return v;
}

const char* TypeName(const picojson::value& v) {
  if (v.is<picojson::null>()) return "null";
  if (v.is<bool>()) return "boolean";
  if (v.is<std::string>()) return "string";
  if (v.is<picojson::array>()) return "array";
  if (v.is<picojson::object>()) return "object";
  return "number";
}

std::string Preview(const picojson::value& v) {
  std::string s = Write(v);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

ObjectReader::ObjectReader(const picojson::value& v, std::string path, Errors* errors)
    : path_(std::move(path)), errors_(errors) {
  if (v.is<picojson::object>()) {
    obj_ = &v.get<picojson::object>();
  } else {
    errors_->push_back((path_.empty() ? std::string("document") : path_) + ": expected an object, got " +
                       TypeName(v));
  }
}

bool ObjectReader::Has(const std::string& key) const { return obj_ && obj_->count(key); }

const picojson::value* ObjectReader::Get(const std::string& key) {
  known_.insert(key);
  if (!obj_) return nullptr;
  auto it = obj_->find(key);
  return it == obj_->end() ? nullptr : &it->second;
}

void ObjectReader::Fail(const std::string& key, const std::string& msg) {
  errors_->push_back(PathOf(key) + ": " + msg);
}

void ObjectReader::String(const std::string& key, std::string* out, bool allow_empty) {
  const picojson::value* v = Get(key);
  if (!v) return;
  if (!v->is<std::string>()) return Fail(key, std::string("expected a string, got ") + TypeName(*v));
  if (!allow_empty && v->get<std::string>().empty()) return Fail(key, "must not be empty");
  *out = v->get<std::string>();
}

void ObjectReader::Bool(const std::string& key, bool* out) {
  const picojson::value* v = Get(key);
  if (!v) return;
  if (!v->is<bool>()) return Fail(key, std::string("expected true or false, got ") + TypeName(*v));
  *out = v->get<bool>();
}

static bool ToInt(const picojson::value& v, int64_t* out) {
  if (v.is<int64_t>()) {
    *out = v.get<int64_t>();
    return true;
  }
  return false;
}

void ObjectReader::Int(const std::string& key, int64_t min, int64_t max, int64_t* out) {
  const picojson::value* v = Get(key);
  if (!v) return;
  int64_t n;
  if (!ToInt(*v, &n)) {
    if (v->is<double>()) return Fail(key, "expected a whole number, got " + Preview(*v));
    return Fail(key, std::string("expected a number, got ") + TypeName(*v));
  }
  if (n < min || n > max) {
    return Fail(key, Format("must be between %lld and %lld, got %lld", static_cast<long long>(min),
                            static_cast<long long>(max), static_cast<long long>(n)));
  }
  *out = n;
}

void ObjectReader::Duration(const std::string& key, int64_t* out_nanos) {
  const picojson::value* v = Get(key);
  if (!v) return;
  if (!v->is<std::string>()) {
    return Fail(key, std::string("expected a duration like \"5s\", got ") + TypeName(*v) + " " + Preview(*v));
  }
  auto d = ParseDuration(v->get<std::string>());
  if (!d.ok()) return Fail(key, d.error().message());
  *out_nanos = *d;
}

void ObjectReader::Size(const std::string& key, uint64_t* out_bytes) {
  const picojson::value* v = Get(key);
  if (!v) return;
  int64_t n;
  if (ToInt(*v, &n)) {
    if (n < 0) return Fail(key, "must not be negative");
    *out_bytes = static_cast<uint64_t>(n);
    return;
  }
  if (!v->is<std::string>()) {
    return Fail(key, std::string("expected a size like \"10MiB\", got ") + TypeName(*v) + " " + Preview(*v));
  }
  auto s = ParseSize(v->get<std::string>());
  if (!s.ok()) return Fail(key, s.error().message());
  *out_bytes = *s;
}

void ObjectReader::StringList(const std::string& key, std::vector<std::string>* out) {
  const picojson::value* v = Get(key);
  if (!v) return;
  if (!v->is<picojson::array>()) return Fail(key, std::string("expected an array of strings, got ") + TypeName(*v));
  std::vector<std::string> items;
  const auto& arr = v->get<picojson::array>();
  bool good = true;
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is<std::string>()) {
      errors_->push_back(Format("%s[%zu]: expected a string, got %s", PathOf(key).c_str(), i, TypeName(arr[i])));
      good = false;
      continue;
    }
    items.push_back(arr[i].get<std::string>());
  }
  if (good) *out = std::move(items);
}

void ObjectReader::IntList(const std::string& key, int64_t min, int64_t max, std::vector<int64_t>* out) {
  const picojson::value* v = Get(key);
  if (!v) return;
  if (!v->is<picojson::array>()) return Fail(key, std::string("expected an array of numbers, got ") + TypeName(*v));
  std::vector<int64_t> items;
  const auto& arr = v->get<picojson::array>();
  bool good = true;
  for (size_t i = 0; i < arr.size(); ++i) {
    int64_t n;
    std::string item = Format("%s[%zu]", PathOf(key).c_str(), i);
    if (!ToInt(arr[i], &n)) {
      errors_->push_back(item + ": expected a whole number, got " + Preview(arr[i]));
      good = false;
    } else if (n < min || n > max) {
      errors_->push_back(Format("%s: must be between %lld and %lld, got %lld", item.c_str(),
                                static_cast<long long>(min), static_cast<long long>(max),
                                static_cast<long long>(n)));
      good = false;
    } else {
      items.push_back(n);
    }
  }
  if (good) *out = std::move(items);
}

void ObjectReader::RejectUnknown() {
  if (!obj_) return;
  for (const auto& [key, value] : *obj_) {
    if (known_.count(key)) continue;
    std::string best;
    size_t best_dist = 3;  // suggest only close matches
    for (const std::string& k : known_) {
      size_t d = EditDistance(key, k, best_dist);
      if (d < best_dist) {
        best_dist = d;
        best = k;
      }
    }
    std::string msg = "unknown field";
    if (!best.empty()) msg += " (did you mean \"" + best + "\"?)";
    Fail(key, msg);
  }
}

namespace {

void WriteString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t n = Utf8RuneAt(s, i);
      if (n == 0) {
        out->append("\xEF\xBF\xBD");  // U+FFFD for a byte that is not UTF-8
        ++i;
      } else {
        out->append(s, i, n);
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void Indent(int depth, std::string* out) {
  out->push_back('\n');
  out->append(static_cast<size_t>(depth) * 2, ' ');
}

void WriteValue(const picojson::value& v, bool pretty, int depth, std::string* out) {
  if (v.is<picojson::null>()) {
    out->append("null");
  } else if (v.is<bool>()) {
    out->append(v.get<bool>() ? "true" : "false");
  } else if (v.is<int64_t>()) {
    out->append(std::to_string(v.get<int64_t>()));
  } else if (v.is<double>()) {
    out->append(FormatNumber(v.get<double>()));
  } else if (v.is<std::string>()) {
    WriteString(v.get<std::string>(), out);
  } else if (v.is<picojson::array>()) {
    const picojson::array& a = v.get<picojson::array>();
    out->push_back('[');
    for (size_t i = 0; i < a.size(); ++i) {
      if (i) out->push_back(',');
      if (pretty) Indent(depth + 1, out);
      WriteValue(a[i], pretty, depth + 1, out);
    }
    if (pretty && !a.empty()) Indent(depth, out);
    out->push_back(']');
  } else {
    const picojson::object& o = v.get<picojson::object>();
    out->push_back('{');
    bool first = true;
    for (const auto& [key, member] : o) {
      if (!first) out->push_back(',');
      first = false;
      if (pretty) Indent(depth + 1, out);
      WriteString(key, out);
      out->append(pretty ? ": " : ":");
      WriteValue(member, pretty, depth + 1, out);
    }
    if (pretty && !o.empty()) Indent(depth, out);
    out->push_back('}');
  }
}

}  // namespace

std::string FormatNumber(double d) {
  if (!std::isfinite(d)) return "null";
  if (d == 0) return "0";  // and -0: "-0" reads back as 0 in most languages anyway
  char buf[40];
  if (std::fabs(d) < 1e21 && std::floor(d) == d) {
    std::snprintf(buf, sizeof buf, "%.0f", d);
    return buf;
  }
  // The fewest significant digits that read back as d (17 always do).
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // "1e-07" -> "1e-7", "1e+21" stays: as JavaScript writes them.
  std::string s = buf;
  size_t e = s.find('e');
  if (e != std::string::npos) {
    size_t first = e + 2;  // past the sign %g always writes
    while (first + 1 < s.size() && s[first] == '0') s.erase(first, 1);
  }
  return s;
}

std::string Write(const picojson::value& v, bool pretty) {
  std::string out;
  WriteValue(v, pretty, 0, &out);
  return out;
}

std::string JoinErrors(const Errors& errors) {
  std::string out;
  for (const std::string& e : errors) {
    if (!out.empty()) out += '\n';
    out += e;
  }
  return out;
}

}  // namespace outpost::json
