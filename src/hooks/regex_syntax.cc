// Go regexp syntax into a regex_syntax::Node tree (hooks/regex_syntax.h).
#include "hooks/regex_syntax.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/strings.h"

namespace outpost::hooks::regex_syntax {

namespace {

constexpr int kMaxDepth = 1000;   // Go's maxHeight
constexpr int kMaxRepeat = 1000;  // Go's repeat count limit

enum Flags : int { kFoldCase = 1, kMultiLine = 2, kDotNewline = 4 };

void Normalize(Ranges* r) {
  std::sort(r->begin(), r->end());
  Ranges out;
  for (const auto& [lo, hi] : *r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  *r = std::move(out);
}

// The complement of normalized ranges within [0, kMaxRune].
Ranges Negate(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxRune) out.emplace_back(next, kMaxRune);
  return out;
}

// Named ASCII classes ([:alpha:]) and Perl classes (\d): pairs of bounds.
struct NamedClass {
  const char* name;
  const char* pairs;  // lo,hi,lo,hi...
};
constexpr NamedClass kPosixClasses[] = {
    {"alnum", "09AZaz"},
    {"alpha", "AZaz"},
    {"ascii", "\x01\x7f"},  // and \0, added below
    {"blank", "\t\t  "},
    {"cntrl", "\x01\x1f\x7f\x7f"},  // and \0
    {"digit", "09"},
    {"graph", "!~"},
    {"lower", "az"},
    {"print", " ~"},
    {"punct", "!/:@[`{~"},
    {"space", "\t\r  "},
    {"upper", "AZ"},
    {"word", "09AZ__az"},
    {"xdigit", "09AFaf"},
};

Ranges ClassRanges(const char* pairs, bool with_nul) {
  Ranges r;
  if (with_nul) r.emplace_back(0, 0);
  for (size_t i = 0; pairs[i] != '\0' && pairs[i + 1] != '\0'; i += 2) {
    r.emplace_back(static_cast<unsigned char>(pairs[i]), static_cast<unsigned char>(pairs[i + 1]));
  }
  return r;
}

// \d \s \w and their negations; false for another letter.
bool PerlClass(char c, Ranges* out) {
  const char* pairs = nullptr;
  switch (c | 0x20) {
    case 'd': pairs = "09"; break;
    case 's': pairs = "\t\n\f\r  "; break;  // Go's \s: no \v
    case 'w': pairs = "09AZ__az"; break;
    default: return false;
  }
  Ranges r = ClassRanges(pairs, false);
  Normalize(&r);
  if (c >= 'A' && c <= 'Z') r = Negate(r);
  out->insert(out->end(), r.begin(), r.end());
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  // The tree of the whole expression, or false with error() set.
  bool Parse(Node* out) {
    if (!Alternation(out)) return false;
    if (i_ < t_.size()) return Fail("unexpected )", t_);  // Alternation stops only at ')' or the end
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  bool Fail(const char* what, std::string_view arg) {
    error_ = std::string(what) + ": `" + std::string(arg) + "`";
    return false;
  }
  bool At(char c) const { return i_ < t_.size() && t_[i_] == c; }
  bool StartsAt(size_t i, const char* s) const { return t_.substr(i, std::strlen(s)) == s; }

  bool Alternation(Node* out) {
    Node alt;
    alt.kind = Node::kAlt;
    for (;;) {
      alt.subs.emplace_back();
      if (!Concatenation(&alt.subs.back())) return false;
      if (!At('|')) break;
      ++i_;
    }
    *out = alt.subs.size() == 1 ? std::move(alt.subs[0]) : std::move(alt);
    return true;
  }

  bool Concatenation(Node* out) {
    out->kind = Node::kCat;
    while (i_ < t_.size() && t_[i_] != '|' && t_[i_] != ')') {
      size_t op_end = 0;
      int min = 0, max = 0;
      if (RepeatAt(i_, &min, &max, &op_end)) {
        return Fail("missing argument to repetition operator", t_.substr(i_, op_end - i_));
      }
      Node atom;
      bool have = false;
      if (!Atom(&atom, &have)) return false;
      if (!have) continue;  // a flags group: (?i)
      size_t op_start = i_;
      if (RepeatAt(i_, &min, &max, &op_end)) {
        if (min > kMaxRepeat || max > kMaxRepeat || (max >= 0 && min > max)) {
          return Fail("invalid repeat count", t_.substr(op_start, op_end - op_start));
        }
        i_ = op_end;
        size_t next_end = 0;
        int m2 = 0, x2 = 0;
        if (RepeatAt(i_, &m2, &x2, &next_end)) {
          return Fail("invalid nested repetition operator", t_.substr(op_start, next_end - op_start));
        }
        Node rep;
        rep.kind = Node::kRepeat;
        rep.min = min;
        rep.max = max;
        rep.subs.push_back(std::move(atom));
        atom = std::move(rep);
      }
      out->subs.push_back(std::move(atom));
    }
    return true;
  }

  // A repetition operator at i (with its lazy '?'): its bounds and end.
  // "{" that is no valid count ("{", "{x}", "{,2}", "{01}") is a literal.
  bool RepeatAt(size_t i, int* min, int* max, size_t* end) const {
    if (i >= t_.size()) return false;
    char c = t_[i];
    size_t j = i + 1;
    if (c == '*' || c == '+' || c == '?') {
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      if (!Count(&j, min)) return false;
      *max = *min;
      if (j < t_.size() && t_[j] == ',') {
        ++j;
        *max = -1;
        if (j < t_.size() && t_[j] != '}' && !Count(&j, max)) return false;
      }
      if (j >= t_.size() || t_[j] != '}') return false;
      ++j;
    } else {
      return false;
    }
    if (j < t_.size() && t_[j] == '?') ++j;  // lazy: the same yes/no answer
    *end = j;
    return true;
  }

  // Decimal digits at *j, no leading zero (as Go); a huge count reads as
  // kMaxRepeat + 1, which the caller refuses.
  bool Count(size_t* j, int* out) const {
    size_t k = *j;
    if (k >= t_.size() || t_[k] < '0' || t_[k] > '9') return false;
    if (t_[k] == '0' && k + 1 < t_.size() && t_[k + 1] >= '0' && t_[k + 1] <= '9') return false;
    long v = 0;
    for (; k < t_.size() && t_[k] >= '0' && t_[k] <= '9'; ++k) v = std::min<long>(v * 10 + (t_[k] - '0'), 100000);
    *out = static_cast<int>(std::min<long>(v, kMaxRepeat + 1));
    *j = k;
    return true;
  }

  bool Atom(Node* out, bool* have) {
    *have = true;
    char c = t_[i_];
    switch (c) {
      case '(': return Group(out, have);
      case '[': return Class(out);
      case '.':
        ++i_;
        out->kind = Node::kClass;
        if (flags_ & kDotNewline) {
          out->ranges = {{0, kMaxRune}};
        } else {
          out->ranges = {{0, '\n' - 1}, {'\n' + 1, kMaxRune}};
        }
        return true;
      case '^':
      case '$':
        ++i_;
        out->kind = Node::kAssert;
        if (c == '^') out->assert = flags_ & kMultiLine ? kBeginLine : kBeginText;
        if (c == '$') out->assert = flags_ & kMultiLine ? kEndLine : kEndText;
        return true;
      case '\\': return Escape(out, have);
      default: {
        uint32_t r = 0;
        size_t n = Utf8RuneAt(t_, i_, &r);
        if (n == 0) return Fail("invalid UTF-8", t_.substr(i_));
        i_ += n;
        return Literal(r, t_.substr(i_ - n, n), out);
      }
    }
  }

  bool Literal(uint32_t r, std::string_view text, Node* out) {
    out->kind = Node::kClass;
    return AddRange(r, r, text, &out->ranges);
  }

  // [lo, hi], with the other case of ASCII letters under (?i).
  bool AddRange(uint32_t lo, uint32_t hi, std::string_view text, Ranges* r) {
    r->emplace_back(lo, hi);
    if (flags_ & kFoldCase) {
      if (hi >= 0x80) return Fail("(?i) on non-ASCII characters is not supported by outpost; spell the cases out", text);
      for (uint32_t a : {static_cast<uint32_t>('a'), static_cast<uint32_t>('A')}) {
        uint32_t l = std::max(lo, a), h = std::min(hi, a + 25);
        if (l <= h) r->emplace_back(l ^ 0x20, h ^ 0x20);
      }
    }
    Normalize(r);
    return true;
  }

  bool Group(Node* out, bool* have) {
    size_t start = i_;
    if (++depth_ > kMaxDepth) return Fail("expression nests too deeply", t_);
    ++i_;
    int saved = flags_;
    if (At('?')) {
      size_t name_at = 0;
      if (StartsAt(i_, "?P<")) name_at = i_ + 3;
      if (StartsAt(i_, "?<")) name_at = i_ + 2;
      if (name_at != 0) {
        size_t end = t_.find('>', name_at);
        if (end == std::string_view::npos) return Fail("invalid named capture", t_.substr(start));
        std::string_view name = t_.substr(name_at, end - name_at);
        bool ok = !name.empty();
        for (char ch : name) ok = ok && IsWordChar(static_cast<unsigned char>(ch));
        if (!ok) return Fail("invalid named capture", t_.substr(start, end + 1 - start));
        if (!names_.insert(std::string(name)).second) return Fail("duplicate capture group name", name);
        i_ = end + 1;
      } else {
        // Flags: (?i) (?-s) (?im-sU) to the end of the enclosing group, or
        // (?flags:re) for re only.
        ++i_;
        bool negated = false, any = false;
        for (;; ++i_) {
          if (i_ >= t_.size()) return Fail("missing closing )", t_);
          char f = t_[i_];
          int bit = f == 'i' ? kFoldCase : f == 'm' ? kMultiLine : f == 's' ? kDotNewline : f == 'U' ? -1 : 0;
          if (bit != 0) {
            if (bit > 0) flags_ = negated ? flags_ & ~bit : flags_ | bit;
            any = true;
            continue;
          }
          if (f == '-' && !negated) {
            negated = true;
            any = false;  // "(?i-)" needs a flag after '-'
            continue;
          }
          if ((f == ')' || f == ':') && (any || !negated)) break;  // "(?)" and "(?:" are fine in Go too
          return Fail("invalid or unsupported Perl syntax", t_.substr(start, i_ + 1 - start));
        }
        if (t_[i_++] == ')') {  // flags for the rest of the enclosing group
          --depth_;
          *have = false;
          return true;
        }
      }
    }
    if (!Alternation(out)) return false;
    if (!At(')')) return Fail("missing closing )", t_);
    ++i_;
    flags_ = saved;
    --depth_;
    return true;
  }

  bool Escape(Node* out, bool* have) {
    size_t start = i_;
    if (i_ + 1 >= t_.size()) return Fail("trailing backslash at end of expression", "");
    char c = t_[i_ + 1];
    uint32_t assert = c == 'A' ? kBeginText : c == 'z' ? kEndText : c == 'b' ? kWordBoundary : c == 'B' ? kNoWordBoundary : 0;
    if (assert != 0) {
      i_ += 2;
      out->kind = Node::kAssert;
      out->assert = assert;
      return true;
    }
    if (c == 'Q') {  // \Q...\E: literal text
      i_ += 2;
      size_t end = t_.find("\\E", i_);
      std::string_view lit = t_.substr(i_, end == std::string_view::npos ? std::string_view::npos : end - i_);
      i_ = end == std::string_view::npos ? t_.size() : end + 2;
      out->kind = Node::kCat;
      for (size_t k = 0; k < lit.size();) {
        uint32_t r = 0;
        size_t n = Utf8RuneAt(lit, k, &r);
        if (n == 0) return Fail("invalid UTF-8", lit.substr(k));
        out->subs.emplace_back();
        if (!Literal(r, lit.substr(k, n), &out->subs.back())) return false;
        k += n;
      }
      *have = !out->subs.empty();
      return true;
    }
    out->kind = Node::kClass;
    if (PerlClass(c, &out->ranges)) {
      i_ += 2;
      return true;
    }
    uint32_t r = 0;
    if (!EscapedRune(&r)) return false;
    return Literal(r, t_.substr(start, i_ - start), out);
  }

  // The character a backslash escape at i_ stands for (not a class or an
  // assertion); i_ moves past it.
  bool EscapedRune(uint32_t* r) {
    size_t start = i_;
    auto bad = [&](size_t end) { return Fail("invalid escape sequence", t_.substr(start, end - start)); };
    auto octal = [&](size_t k) { return k < t_.size() && t_[k] >= '0' && t_[k] <= '7'; };
    auto hex = [&](size_t k) -> int {
      if (k >= t_.size()) return -1;
      char h = t_[k];
      if (h >= '0' && h <= '9') return h - '0';
      if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') return (h | 0x20) - 'a' + 10;
      return -1;
    };
    if (i_ + 1 >= t_.size()) return Fail("trailing backslash at end of expression", "");
    char c = t_[i_ + 1];
    size_t k = i_ + 2;
    if (c >= '1' && c <= '7' && !octal(k)) return bad(k);  // a back-reference: not in RE2
    if (c >= '0' && c <= '7') {
      *r = static_cast<uint32_t>(c - '0');
      for (int n = 0; n < 2 && octal(k); ++n, ++k) *r = *r * 8 + static_cast<uint32_t>(t_[k] - '0');
      i_ = k;
      return true;
    }
    if (c == 'x') {
      uint32_t v = 0;
      if (k < t_.size() && t_[k] == '{') {
        size_t digits = 0;
        for (++k; hex(k) >= 0; ++k, ++digits) {
          v = v * 16 + static_cast<uint32_t>(hex(k));
          if (v > kMaxRune) return bad(k + 1);
        }
        if (digits == 0 || k >= t_.size() || t_[k] != '}') return bad(std::min(k + 1, t_.size()));
        ++k;
      } else {
        if (hex(k) < 0 || hex(k + 1) < 0) return bad(std::min(k + 2, t_.size()));
        v = static_cast<uint32_t>(hex(k) * 16 + hex(k + 1));
        k += 2;
      }
      *r = v;
      i_ = k;
      return true;
    }
    const char* from = "aftnrv";
    const char* to = "\a\f\t\n\r\v";
    if (const char* p = c != '\0' ? std::strchr(from, c) : nullptr) {
      *r = static_cast<unsigned char>(to[p - from]);
      i_ = k;
      return true;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80 && !IsWordChar(u)) {  // escaped punctuation (or space)
      *r = u;
      i_ = k;
      return true;
    }
    size_t n = Utf8RuneAt(t_, i_ + 1);
    if (c == 'p' || c == 'P') {
      size_t end = k < t_.size() && t_[k] == '{' ? t_.find('}', k) : k;
      end = end == std::string_view::npos ? t_.size() : end + 1;
      return Fail("Unicode character classes are not supported by outpost", t_.substr(start, end - start));
    }
    return bad(i_ + 1 + std::max<size_t>(n, 1));
  }

  bool Class(Node* out) {
    size_t start = i_++;
    out->kind = Node::kClass;
    bool negated = At('^');
    if (negated) ++i_;
    Ranges& r = out->ranges;
    bool first = true;
    while (i_ < t_.size() && (t_[i_] != ']' || first)) {
      first = false;
      if (StartsAt(i_, "[:")) {
        size_t end = t_.find(":]", i_ + 2);
        if (end != std::string_view::npos) {
          std::string_view name = t_.substr(i_ + 2, end - i_ - 2);
          bool neg = !name.empty() && name[0] == '^';
          if (neg) name.remove_prefix(1);
          const NamedClass* found = nullptr;
          for (const NamedClass& nc : kPosixClasses) {
            if (name == nc.name) found = &nc;
          }
          if (found == nullptr) return Fail("invalid character class range", t_.substr(i_, end + 2 - i_));
          Ranges add;
          for (const auto& [lo, hi] : ClassRanges(found->pairs, name == "ascii" || name == "cntrl")) {
            if (!AddRange(lo, hi, name, &add)) return false;
          }
          if (neg) add = Negate(add);
          r.insert(r.end(), add.begin(), add.end());
          i_ = end + 2;
          continue;
        }
      }
      if (t_[i_] == '\\' && i_ + 1 < t_.size() && PerlClass(t_[i_ + 1], &r)) {
        i_ += 2;
        continue;
      }
      size_t range_start = i_;
      uint32_t lo = 0, hi = 0;
      if (!ClassChar(&lo)) return false;
      hi = lo;
      if (At('-') && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
        ++i_;
        if (!ClassChar(&hi)) return false;
        if (hi < lo) return Fail("invalid character class range", t_.substr(range_start, i_ - range_start));
      }
      if (!AddRange(lo, hi, t_.substr(range_start, i_ - range_start), &r)) return false;
    }
    if (i_ >= t_.size()) return Fail("missing closing ]", t_.substr(start));
    ++i_;
    Normalize(&r);
    if (negated) r = Negate(r);
    return true;
  }

  // One character of a class: an escape or a UTF-8 character.
  bool ClassChar(uint32_t* r) {
    if (i_ >= t_.size()) return Fail("missing closing ]", t_);
    if (t_[i_] == '\\') return EscapedRune(r);
    size_t n = Utf8RuneAt(t_, i_, r);
    if (n == 0) return Fail("invalid UTF-8", t_.substr(i_));
    i_ += n;
    return true;
  }

  std::string_view t_;
  size_t i_ = 0;
  int flags_ = 0;
  int depth_ = 0;
  std::set<std::string> names_;
  std::string error_;
};

}  // namespace

bool Parse(std::string_view text, Node* out, std::string* error) {
  Parser parser(text);
  if (parser.Parse(out)) return true;
  *error = parser.error();
  return false;
}

}  // namespace outpost::hooks::regex_syntax
