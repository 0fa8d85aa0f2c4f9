#include "driver/nomad/hcl_expr.h"

#include "base/strings.h"
#include "driver/nomad/hclspec.h"

namespace outpost::driver::nomad {

namespace {

void AppendUtf8(uint32_t r, std::string* out) {
  if (r < 0x80) {
    out->push_back(static_cast<char>(r));
  } else if (r < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (r >> 6)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3f)));
  } else if (r < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (r >> 12)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (r >> 18)));
    out->push_back(static_cast<char>(0x80 | ((r >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((r >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (r & 0x3f)));
  }
}

// The part of HCL's native expression syntax that hclspec's type
// expressions and Literal values use.
class HclParser {
 public:
  explicit HclParser(std::string_view s) : s_(s) {}

  const std::string& error() const { return err_; }

  // A type expression: parsed as a value whose names and calls are
  // unknown values (s the name, a call's argument in elems), then read as
  // a type (evalTypeExpr in Nomad's hclspecutils).
  bool ParseType(Type* out) {
    Value v;
    types_ = true;
    return ParseValue(&v, 0) && ToType(v, out);
  }

  bool ParseValue(Value* out, int depth) {
    if (depth > 32) return Fail("nested too deeply");
    Skip();
    if (pos_ >= s_.size()) return Fail("a value is required");
    char c = s_[pos_];
    if (c == '-' || c == '!') {
      ++pos_;
      Value v;
      if (!ParseValue(&v, depth + 1)) return false;
      if (c == '-' && v.known() && v.type.kind == Type::kNumber) {
        *out = Value::Num(v.n.Negated());
      } else if (c == '!' && v.known() && v.type.kind == Type::kBool) {
        *out = Value::Bool(!v.b);
      } else {
        return Fail(c == '-' ? "- needs a number" : "! needs a bool");
      }
      return true;
    }
    if (c == '"') {
      std::string str;
      if (!String(&str)) return false;
      *out = Value::String(std::move(str));
      return true;
    }
    if (c >= '0' && c <= '9') {
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (pos_ + 1 < s_.size() && s_[pos_] == '.' && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
        for (++pos_; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9';) ++pos_;
      }
      if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
        size_t e = pos_ + 1;
        if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
        if (e < s_.size() && s_[e] >= '0' && s_[e] <= '9') {
          for (pos_ = e; pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9';) ++pos_;
        }
      }
      Number n;
      if (Number::Parse(s_.substr(start, pos_ - start), &n) != Number::Parsed::kOk) {
        return Fail("number out of range: " + std::string(s_.substr(start, pos_ - start)));
      }
      *out = Value::Num(std::move(n));
      return true;
    }
    if (c == '(') {
      ++pos_;
      if (!ParseValue(out, depth + 1)) return false;
      return Eat(')') || Fail("expected )");
    }
    if (c == '[') {
      ++pos_;
      std::vector<Value> elems;
      while (!Eat(']')) {
        elems.emplace_back();
        if (!ParseValue(&elems.back(), depth + 1)) return false;
        if (!Eat(',') && !Peek(']')) return Fail("expected , or ]");
      }
      *out = Value::Tuple(std::move(elems));
      return true;
    }
    if (c == '{') {
      ++pos_;
      std::vector<std::string> keys;
      std::vector<Value> vals;
      while (!Eat('}')) {
        keys.emplace_back();
        vals.emplace_back();
        if (!Key(&keys.back()) || !ParseValue(&vals.back(), depth + 1)) return false;
        Eat(',');
      }
      std::string dup;
      if (!SortByKey(&keys, &vals, &dup)) return Fail("attribute \"" + dup + "\" given twice");
      *out = Value::Object(std::move(keys), std::move(vals));
      return true;
    }
    if (c == '<' && s_.substr(pos_, 2) == "<<") return Fail("heredoc strings are not supported");
    std::string name;
    if (Ident(&name)) {
      if (name == "true" || name == "false") {
        *out = Value::Bool(name == "true");
      } else if (name == "null") {
        *out = Value::Null(Type());
      } else if (!types_) {
        return Fail(Peek('(') ? "function calls are not supported (" + name + ")"
                              : "variables are not allowed here (" + name + ")");
      } else {
        *out = Value::Unknown(Type(Type::kString));
        out->s = name;
        if (Eat('(')) {
          out->elems.emplace_back();
          if (!ParseValue(&out->elems[0], depth + 1)) return false;
          if (!Eat(')')) return Fail("expected ) after the argument of " + name);
        }
      }
      return true;
    }
    return Fail(std::string("unexpected \"") + c + "\"");
  }

  bool ToType(const Value& v, Type* out) {
    const std::string& n = v.s;
    static const char* const kNames[] = {"any", "string", "number", "bool", "list", "set", "map", "object", "tuple"};
    int k = 0;
    while (k < 9 && n != kNames[k]) ++k;
    if (v.null()) k = 0;  // null: any
    bool call = v.elems.size() == 1;
    if (v.known() || k == 9 || (k >= Type::kList) != call) {
      return Fail(k == 9 ? "unknown type \"" + n + "\"" : "a type is required");
    }
    *out = Type(static_cast<Type::Kind>(k));
    if (!call) return true;
    const Value& arg = v.elems[0];
    if (k <= Type::kMap) {
      out->elems.emplace_back();
      return ToType(arg, &out->elems[0]);
    }
    if (!arg.known() || arg.type.kind != (k == Type::kObject ? Type::kObject : Type::kTuple)) {
      return Fail(k == Type::kObject ? "object({...}) is required" : "tuple([...]) is required");
    }
    out->names = arg.keys;
    out->elems.resize(arg.elems.size());
    for (size_t i = 0; i < arg.elems.size(); ++i) {
      if (!ToType(arg.elems[i], &out->elems[i])) return false;
    }
    return true;
  }

  // Only blanks and comments left.
  bool Done() {
    Skip();
    return pos_ == s_.size() || Fail("unexpected \"" + std::string(s_.substr(pos_, 10)) + "\" after the expression");
  }

 private:
  bool Fail(const std::string& msg) {
    if (err_.empty()) err_ = msg;
    return false;
  }

  void Skip() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#' || s_.substr(pos_, 2) == "//") {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (s_.substr(pos_, 2) == "/*") {
        size_t end = s_.find("*/", pos_ + 2);
        pos_ = end == std::string_view::npos ? s_.size() : end + 2;
      } else {
        break;
      }
    }
  }

  bool Peek(char c) {
    Skip();
    return pos_ < s_.size() && s_[pos_] == c;
  }

  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }

  bool Ident(std::string* out) {
    Skip();
    if (pos_ >= s_.size() || !IsHclIdentStart(s_[pos_])) return false;
    size_t start = pos_;
    while (pos_ < s_.size() && IsHclIdentChar(s_[pos_])) ++pos_;
    *out = std::string(s_.substr(start, pos_ - start));
    return true;
  }

  // An object's key and its "=" or ":".
  bool Key(std::string* out) {
    if (!Ident(out) && !(Peek('"') && String(out))) return err_.empty() ? Fail("an attribute name is required") : false;
    return Eat('=') || Eat(':') || Fail("expected = after \"" + *out + "\"");
  }

  // A quoted string with HCL's escapes. Templates are not evaluated here:
  // ${ and %{ are refused, $${ and %%{ stand for themselves.
  bool String(std::string* out) {
    ++pos_;  // the opening quote
    out->clear();
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c == '\n') break;
      if ((c == '$' || c == '%') && pos_ + 1 < s_.size()) {
        if (s_[pos_ + 1] == '{') return Fail("templates are not supported in a literal");
        if (s_[pos_ + 1] == c && pos_ + 2 < s_.size() && s_[pos_ + 2] == '{') {
          out->push_back(c);
          out->push_back('{');
          pos_ += 3;
          continue;
        }
      }
      if (c != '\\') {
        out->push_back(c);
        ++pos_;
        continue;
      }
      if (++pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case 'u':
        case 'U': {
          size_t n = e == 'u' ? 4 : 8;
          uint32_t r = 0;
          for (size_t i = 0; i < n; ++i, ++pos_) {
            char h = pos_ < s_.size() ? s_[pos_] : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return Fail("invalid \\" + std::string(1, e) + " escape");
            r = r << 4 | static_cast<uint32_t>(d);
          }
          if (r > 0x10ffff || (r >= 0xd800 && r < 0xe000)) return Fail("invalid character in \\" + std::string(1, e));
          AppendUtf8(r, out);
          break;
        }
        default: return Fail("invalid escape \\" + std::string(1, e));
      }
    }
    return Fail("unterminated string");
  }

  std::string_view s_;
  size_t pos_ = 0;
  bool types_ = false;
  std::string err_;
};

}  // namespace

bool ParseHclType(std::string_view text, Type* out, std::string* error) {
  HclParser p(text);
  if (p.ParseType(out) && p.Done()) return true;
  *error = p.error();
  return false;
}

bool ParseHclValue(std::string_view text, Value* out, std::string* error) {
  HclParser p(text);
  if (p.ParseValue(out, 0) && p.Done()) return true;
  *error = p.error();
  return false;
}

Result<Type> ParseTypeExpr(std::string_view text) {
  Type t;
  std::string err;
  if (!ParseHclType(text, &t, &err)) return Error(Code::kInvalidArgument, "type " + std::string(text) + ": " + err);
  return t;
}

Result<Value> ParseLiteral(std::string_view text) {
  Value v;
  std::string err;
  if (!ParseHclValue(text, &v, &err)) return Error(Code::kInvalidArgument, std::string(text) + ": " + err);
  return v;
}

}  // namespace outpost::driver::nomad
