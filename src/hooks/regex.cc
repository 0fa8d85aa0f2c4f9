// hooks/regex.h: the tree of hooks/regex_syntax.h compiled into a program
// of character ranges, splits, jumps and assertions, run on all states at
// once.
#include "hooks/regex.h"

#include <algorithm>

#include "base/strings.h"
#include "hooks/regex_syntax.h"

namespace outpost::hooks {

namespace {

using regex_syntax::IsWordChar;
using regex_syntax::kBeginLine;
using regex_syntax::kBeginText;
using regex_syntax::kEndLine;
using regex_syntax::kEndText;
using regex_syntax::kMaxRune;
using regex_syntax::kNoWordBoundary;
using regex_syntax::kWordBoundary;
using regex_syntax::Node;
using regex_syntax::Ranges;

constexpr size_t kMaxProgram = 50000;  // instructions; Go's size limit is of the same order

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
  Node tree;
  std::string error;
  if (!regex_syntax::Parse(text, &tree, &error)) return error;
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
