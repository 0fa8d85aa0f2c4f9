// Go regexp syntax parsed into a small tree, compiled into a program of
// character ranges, splits, jumps and assertions, and run on all states at
// once (see regex.h). The syntax rules and error texts follow Go's
// regexp/syntax with the flags regexp.Compile uses (Perl): `[^a]` matches a
// newline, `-` may stand anywhere in a class, `$` without (?m) is the end of
// the text only, repeat counts go up to 1000, a leading zero makes `{`
// literal.
#include "hooks/regex.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/strings.h"

namespace outpost::hooks {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr uint32_t kMaxRune = 0x10FFFF;
constexpr int kMaxDepth = 1000;        // Go's maxHeight
constexpr int kMaxRepeat = 1000;       // Go's repeat count limit
constexpr size_t kMaxProgram = 50000;  // instructions; Go's size limit is of the same order

// Assertions (kAssert's flags).
constexpr uint32_t kBeginText = 1, kEndText = 2, kBeginLine = 4, kEndLine = 8, kWordBoundary = 16,
                   kNoWordBoundary = 32;

enum Flags : int { kFoldCase = 1, kMultiLine = 2, kDotNewline = 4 };

struct Node {
  enum Kind { kEmpty, kClass, kAssert, kCat, kAlt, kRepeat } kind = kEmpty;
  Ranges ranges;           // kClass, normalized
  uint32_t assert = 0;     // kAssert
  std::vector<Node> subs;  // kCat, kAlt; kRepeat: one
  int min = 0, max = 0;    // kRepeat; max -1: unbounded
};

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

bool IsWordChar(int32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
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
          bool nul = name == "ascii" || name == "cntrl";
          Ranges add = ClassRanges(found->pairs, nul);
          for (const auto& [lo, hi] : Ranges(add)) {
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

class Compiler {
 public:
  Compiler(std::vector<Regex::Inst>* prog, Ranges* ranges) : prog_(*prog), ranges_(*ranges) {}

  // False when the program would exceed kMaxProgram.
  bool Emit(const Node& n) {
    if (prog_.size() > kMaxProgram) return false;
    switch (n.kind) {
      case Node::kEmpty: return true;
      case Node::kClass: {
        Regex::Inst in{Regex::Inst::kRanges};
        in.x = static_cast<uint32_t>(ranges_.size());
        ranges_.insert(ranges_.end(), n.ranges.begin(), n.ranges.end());
        in.y = static_cast<uint32_t>(ranges_.size());
        prog_.push_back(in);
        return true;
      }
      case Node::kAssert: {
        Regex::Inst in{Regex::Inst::kAssert};
        in.x = n.assert;
        prog_.push_back(in);
        return true;
      }
      case Node::kCat:
        for (const Node& s : n.subs) {
          if (!Emit(s)) return false;
        }
        return true;
      case Node::kAlt: {
        std::vector<size_t> jumps;
        for (size_t k = 0; k < n.subs.size(); ++k) {
          size_t split = k + 1 < n.subs.size() ? Push(Regex::Inst::kSplit) : SIZE_MAX;
          if (split != SIZE_MAX) prog_[split].x = Pc();
          if (!Emit(n.subs[k])) return false;
          if (split != SIZE_MAX) {
            jumps.push_back(Push(Regex::Inst::kJmp));
            prog_[split].y = Pc();
          }
        }
        for (size_t j : jumps) prog_[j].x = Pc();
        return true;
      }
      case Node::kRepeat: return Repeat(n);
    }
    return false;
  }

 private:
  uint32_t Pc() const { return static_cast<uint32_t>(prog_.size()); }
  size_t Push(Regex::Inst::Op op) {
    prog_.push_back(Regex::Inst{op});
    return prog_.size() - 1;
  }

  bool Repeat(const Node& n) {
    const Node& sub = n.subs[0];
    int copies = n.max < 0 ? std::max(n.min - 1, 0) : n.min;
    for (int k = 0; k < copies; ++k) {
      if (!Emit(sub)) return false;
    }
    if (n.max < 0 && n.min > 0) {  // x+: x, then back to it or on
      uint32_t loop = Pc();
      if (!Emit(sub)) return false;
      size_t split = Push(Regex::Inst::kSplit);
      prog_[split].x = loop;
      prog_[split].y = Pc();
      return true;
    }
    if (n.max < 0) {  // x*
      size_t split = Push(Regex::Inst::kSplit);
      prog_[split].x = Pc();
      if (!Emit(sub)) return false;
      prog_[Push(Regex::Inst::kJmp)].x = static_cast<uint32_t>(split);
      prog_[split].y = Pc();
      return true;
    }
    std::vector<size_t> skips;  // x{n,m}: m - n optional copies
    for (int k = n.min; k < n.max; ++k) {
      size_t split = Push(Regex::Inst::kSplit);
      prog_[split].x = Pc();
      skips.push_back(split);
      if (!Emit(sub)) return false;
    }
    for (size_t s : skips) prog_[s].y = Pc();
    return true;
  }

  std::vector<Regex::Inst>& prog_;
  Ranges& ranges_;
};

// A set of program counters in insertion order, cleared in O(1).
class PcSet {
 public:
  explicit PcSet(size_t n) : sparse_(n), dense_(n) {}
  bool Insert(uint32_t pc) {
    uint32_t k = sparse_[pc];
    if (k < size_ && dense_[k] == pc) return false;
    sparse_[pc] = static_cast<uint32_t>(size_);
    dense_[size_++] = pc;
    return true;
  }
  void Clear() { size_ = 0; }
  size_t size() const { return size_; }
  uint32_t operator[](size_t k) const { return dense_[k]; }

 private:
  std::vector<uint32_t> sparse_, dense_;
  size_t size_ = 0;
};

}  // namespace

std::string Regex::Compile(std::string_view text) {
  text_ = std::string(text);
  prog_.clear();
  ranges_.clear();
  Parser parser(text);
  Node tree;
  if (!parser.Parse(&tree)) return parser.error();
  Compiler compiler(&prog_, &ranges_);
  if (!compiler.Emit(tree) || prog_.size() > kMaxProgram) {
    prog_.clear();
    return "expression too large: `" + text_ + "`";
  }
  prog_.push_back(Inst{Inst::kMatch});
  return "";
}

bool Regex::Match(std::string_view s) const {
  if (prog_.empty()) return false;
  PcSet cur(prog_.size()), next(prog_.size());
  std::vector<uint32_t> stack;
  // The character at byte i (U+FFFD for a byte that is not valid UTF-8), its
  // length in *n; -1 at the end.
  auto rune_at = [&](size_t i, size_t* n) -> int32_t {
    if (i >= s.size()) return *n = 0, -1;
    uint32_t r = 0;
    *n = Utf8RuneAt(s, i, &r);
    if (*n == 0) return *n = 1, 0xFFFD;
    return static_cast<int32_t>(r);
  };
  // The assertions that hold between characters prev and next (-1: an end).
  auto holds = [](int32_t before, int32_t after) {
    uint32_t a = 0;
    if (before < 0) a |= kBeginText | kBeginLine;
    if (after < 0) a |= kEndText | kEndLine;
    if (before == '\n') a |= kBeginLine;
    if (after == '\n') a |= kEndLine;
    a |= IsWordChar(before) != IsWordChar(after) ? kWordBoundary : kNoWordBoundary;
    return a;
  };
  // pc and everything reachable from it without reading a character.
  auto add = [&](PcSet* set, uint32_t pc, uint32_t ctx) {
    stack.assign(1, pc);
    while (!stack.empty()) {
      uint32_t p = stack.back();
      stack.pop_back();
      if (!set->Insert(p)) continue;
      const Inst& in = prog_[p];
      if (in.op == Inst::kJmp) stack.push_back(in.x);
      if (in.op == Inst::kSplit) stack.push_back(in.y), stack.push_back(in.x);
      if (in.op == Inst::kAssert && (in.x & ~ctx) == 0) stack.push_back(p + 1);
    }
  };
  auto in_ranges = [&](const Inst& in, uint32_t r) {
    auto first = ranges_.begin() + in.x, last = ranges_.begin() + in.y;
    auto it = std::upper_bound(first, last, std::make_pair(r, kMaxRune + 1));
    return it != first && r <= std::prev(it)->second;
  };
  size_t n = 0, n2 = 0;
  int32_t prev = -1, r = rune_at(0, &n);
  for (size_t pos = 0;; pos += n, prev = r, r = rune_at(pos, &n)) {
    add(&cur, 0, holds(prev, r));  // unanchored: a match may start anywhere
    uint32_t next_ctx = r < 0 ? 0 : holds(r, rune_at(pos + n, &n2));
    for (size_t k = 0; k < cur.size(); ++k) {
      const Inst& in = prog_[cur[k]];
      if (in.op == Inst::kMatch) return true;
      if (in.op == Inst::kRanges && r >= 0 && in_ranges(in, static_cast<uint32_t>(r))) add(&next, cur[k] + 1, next_ctx);
    }
    if (r < 0) return false;
    std::swap(cur, next);
    next.Clear();
  }
}

}  // namespace outpost::hooks
