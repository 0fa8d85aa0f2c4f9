#include "driver/nomad/hclspec.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "base/strings.h"
#include "driver/nomad/cty_msgpack.h"

namespace outpost::driver::nomad {

namespace {

// NOMAD_ variables whose names depend on the job (its port labels, meta).
bool DynamicNomadName(const std::string& name) {
  static const char* const kPrefixes[] = {"NOMAD_PORT_",      "NOMAD_HOST_PORT_", "NOMAD_ALLOC_PORT_", "NOMAD_IP_",
                                          "NOMAD_ADDR_",      "NOMAD_HOST_IP_",   "NOMAD_HOST_ADDR_",  "NOMAD_META_",
                                          "NOMAD_UPSTREAM_", "NOMAD_UNIX_ADDR_"};
  for (const char* p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  return false;
}


// ---- protobuf ---------------------------------------------------------------

// Reads the fields of one protobuf message. The schema comes from another
// program: every length is checked against what is left.
class PbReader {
 public:
  explicit PbReader(std::string_view in) : in_(in) {}

  bool done() const { return pos_ == in_.size(); }

  // The next field: its number and, for wire type 2, its bytes (*bytes) or,
  // for a varint, its value (*num). Other wire types are skipped over.
  bool Next(uint32_t* field, uint32_t* wire, std::string_view* bytes, uint64_t* num) {
    uint64_t tag;
    if (!Varint(&tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    switch (*wire) {
      case 0: return Varint(num);
      case 1: return Skip(8);
      case 2: {
        uint64_t len;
        if (!Varint(&len) || len > in_.size() - pos_) return false;
        *bytes = in_.substr(pos_, static_cast<size_t>(len));
        pos_ += static_cast<size_t>(len);
        return true;
      }
      case 5: return Skip(4);
      default: return false;
    }
  }

 private:
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && pos_ < in_.size(); shift += 7) {
      uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool Skip(size_t n) {
    if (n > in_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
};

// ---- HCL expressions --------------------------------------------------------

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

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9') || c == '-'; }

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
    if (pos_ >= s_.size() || !IsIdentStart(s_[pos_])) return false;
    size_t start = pos_;
    while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
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

// ---- specs ------------------------------------------------------------------

class SpecDecoder {
 public:
  const Error& error() const { return err_; }

  // msg: a Spec message; implied: the Object key it is under ("" elsewhere).
  bool Decode(std::string_view msg, const std::string& implied, int depth, const std::string& path, Spec* out) {
    if (depth > kMaxSpecDepth) return Bad(path, Format("nested more than %d deep", kMaxSpecDepth));
    if (++nodes_ > kMaxSpecNodes) return Bad(path, Format("more than %zu nodes", kMaxSpecNodes));
    Spec& s = *out;
    // The oneof: the last kind given wins, as protobuf's decoders have it.
    Fields spec;
    if (!Read(msg, 0, &spec)) return Bad(path, "malformed protobuf");
    uint32_t kind = 0;
    for (uint32_t f = 1; f <= 10; ++f) {
      if (spec.has[f] && spec.at[f] >= spec.at[kind]) kind = f;
    }
    if (kind == 0) return Bad(path, "a spec with no kind (none of object, attr, block, ... is set)");
    s.kind = static_cast<Spec::Kind>(kind - 1);
    // The kind's own message: field numbers as in hcl_spec.proto.
    Fields f;
    uint32_t repeated = s.kind == Spec::Kind::kBlockMap ? 2 : (kind <= 2 ? 1 : 0);
    if (!Read(spec.bytes[kind], repeated, &f)) return Bad(path, "malformed protobuf");
    switch (s.kind) {
      case Spec::Kind::kObject: {
        std::vector<std::string> keys;
        std::vector<std::string_view> vals;
        for (std::string_view entry : f.reps) {
          Fields e;
          if (!Read(entry, 0, &e)) return Bad(path, "malformed protobuf");
          keys.emplace_back(e.bytes[1]);
          vals.push_back(e.bytes[2]);
          if (!e.has[2]) return Bad(KeyPath(path, keys.back()), "no spec");
        }
        std::string dup;
        SortByKey(&keys, &vals, &dup);  // a protobuf map: the last entry of a key wins
        s.children.resize(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!Decode(vals[i], keys[i], depth + 1, KeyPath(path, keys[i]), &s.children[i])) return false;
        }
        s.keys = std::move(keys);
        return true;
      }
      case Spec::Kind::kArray:
        s.children.resize(f.reps.size());
        for (size_t i = 0; i < f.reps.size(); ++i) {
          if (!Decode(f.reps[i], "", depth + 1, Format("%s[%zu]", path.c_str(), i), &s.children[i])) return false;
        }
        return true;
      case Spec::Kind::kLiteral: {
        HclParser p(f.bytes[1]);
        if (!p.ParseValue(&s.literal, 0) || !p.Done()) {
          return Bad(path, Format("literal %s: %s", QuoteIfNeeded(f.bytes[1]).c_str(), p.error().c_str()));
        }
        return true;
      }
      case Spec::Kind::kDefault:
        if (!f.has[1] || !f.has[2]) return Bad(path, "a default needs a primary and a default spec");
        s.children.resize(2);
        return Decode(f.bytes[1], "", depth + 1, path, &s.children[0]) &&
               Decode(f.bytes[2], "", depth + 1, path, &s.children[1]);
      default: break;
    }
    // attr, block_attrs: name 1, type 2, required 3; block: name 1,
    // required 2, nested 3; block_list, block_set: name 1, min_items 2,
    // max_items 3, nested 4; block_map: name 1, labels 2, nested 3.
    static const char* const kNames[] = {"", "", "attr", "block", "block_attrs", "block_list", "block_set", "block_map"};
    const char* what = kNames[kind - 1];
    s.name = f.bytes[1].empty() ? implied : std::string(f.bytes[1]);
    if (s.name.empty()) return Bad(path, Format("%s with no name", what));
    if (s.kind == Spec::Kind::kAttr || s.kind == Spec::Kind::kBlockAttrs) {
      s.required = f.nums[3] != 0;
      HclParser p(f.bytes[2]);
      if (!p.ParseType(&s.type) || !p.Done()) {
        return Bad(path, Format("%s %s: type %s: %s", what, s.name.c_str(), QuoteIfNeeded(f.bytes[2]).c_str(),
                                p.error().c_str()));
      }
      return true;
    }
    bool list = s.kind == Spec::Kind::kBlockList || s.kind == Spec::Kind::kBlockSet;
    uint32_t nested = list ? 4 : 3;
    if (s.kind == Spec::Kind::kBlock) s.required = f.nums[2] != 0;
    if (list) {
      s.min_items = f.nums[2];
      s.max_items = f.nums[3];
    }
    for (std::string_view l : s.kind == Spec::Kind::kBlockMap ? f.reps : std::vector<std::string_view>()) {
      s.labels.emplace_back(l);
    }
    if (!f.has[nested]) return Bad(path, Format("%s %s has no nested spec", what, s.name.c_str()));
    s.children.resize(1);
    if (!Decode(f.bytes[nested], "", depth + 1, path, &s.children[0])) return false;
    if (s.kind == Spec::Kind::kBlockMap) {
      if (s.labels.empty()) return Bad(path, Format("block_map %s has no labels", s.name.c_str()));
      // hcldec panics on this; Nomad's client would crash.
      if (ImpliedType(s.children[0]).HasDynamic()) {
        return Bad(path, Format("block_map %s holds attributes of type any, which hcldec does not allow", s.name.c_str()));
      }
    }
    return true;
  }

 private:
  // A message's fields 1 to 10: the last value of each (bytes for wire
  // type 2, nums for varints) and where it came (at); every value of
  // field `repeated` in reps.
  struct Fields {
    std::string_view bytes[11];
    uint64_t nums[11] = {};
    bool has[11] = {};
    size_t at[11] = {};
    std::vector<std::string_view> reps;
  };

  static bool Read(std::string_view msg, uint32_t repeated, Fields* out) {
    PbReader r(msg);
    for (size_t n = 1; !r.done(); ++n) {
      uint32_t field, wire;
      std::string_view bytes;
      uint64_t num = 0;
      if (!r.Next(&field, &wire, &bytes, &num)) return false;
      if (field > 10) continue;
      if (wire == 2 && field == repeated) out->reps.push_back(bytes);
      out->bytes[field] = bytes;
      out->nums[field] = num;
      out->has[field] = wire == 2;
      out->at[field] = n;
    }
    return true;
  }

  bool Bad(const std::string& path, const std::string& what) {
    err_ = Error(Code::kInvalidArgument, "invalid plugin schema: " + path + ": " + what);
    return false;
  }

  size_t nodes_ = 0;
  Error err_{Code::kOk, ""};
};

// ---- configs ----------------------------------------------------------------

struct Member {
  const std::string* key;
  const picojson::value* value;
  std::string path;  // of the member itself
};

struct Block {
  const Spec* spec;
  std::vector<std::string> labels;
  const picojson::value* body;
  std::string path;
};

struct Content {
  std::vector<Member> attrs;
  std::vector<Block> blocks;

  const Member* Attr(const std::string& name) const {
    for (const Member& m : attrs) {
      if (*m.key == name) return &m;
    }
    return nullptr;
  }
};

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class ConfigDecoder {
 public:
  ConfigDecoder(const DecodeOptions& opts, json::Errors* errors) : opts_(opts), errors_(errors) {}

  // hcldec's decode: the body's content by the spec's schema, then the
  // spec's value from it.
  Value Body(const Spec& spec, const picojson::value& body, const std::string& path, int depth) {
    if (depth > 64) {
      Fail(path, "nested too deeply");
      return Value::Unknown(ImpliedType(spec));
    }
    std::vector<const Spec*> schema;  // the attributes and blocks it may hold
    Schema(spec, &schema);
    std::vector<Member> members;
    Members(body, path, nullptr, &members);
    Content content;
    for (Member& m : members) {
      if (*m.key == "//") continue;  // HCL's JSON comments
      const Spec* hit = nullptr;
      std::string best;
      size_t best_dist = 3;
      for (const Spec* s : schema) {
        if (s->name == *m.key) hit = s;
        size_t d = EditDistance(*m.key, s->name, best_dist);
        if (d < best_dist) {
          best_dist = d;
          best = s->name;
        }
      }
      if (!hit) {
        Fail(m.path, best.empty() ? "unknown field" : "unknown field (did you mean \"%s\"?)", best.c_str());
      } else if (hit->kind != Spec::Kind::kAttr) {
        std::vector<std::string> labels;
        Unpack(*hit, *m.value, &labels, m.path, &content);
      } else if (content.Attr(*m.key)) {
        Fail(m.path, "set twice");
      } else {
        content.attrs.push_back(std::move(m));
      }
    }
    std::vector<const std::string*> told;
    for (const Spec* s : schema) {
      if (s->kind != Spec::Kind::kAttr || !s->required || content.Attr(s->name)) continue;
      if (std::none_of(told.begin(), told.end(), [&](const std::string* t) { return *t == s->name; })) {
        told.push_back(&s->name);
        Fail(KeyPath(path, s->name), "required attribute missing");
      }
    }
    return Eval(spec, content, path, depth);
  }

 private:
  void Fail(const std::string& path, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    errors_->push_back(path + ": " + buf);
  }

  // hcldec's ImpliedSchema: what the body may hold at this level.
  static void Schema(const Spec& s, std::vector<const Spec*>* out) {
    if (s.kind == Spec::Kind::kObject || s.kind == Spec::Kind::kArray || s.kind == Spec::Kind::kDefault) {
      for (const Spec& c : s.children) Schema(c, out);
    } else if (s.kind != Spec::Kind::kLiteral) {
      out->push_back(&s);
    }
  }

  // HCL's collectDeepAttrs: the members of an object, of each object of an
  // array, none of null. label: what they name, for block_map labels.
  void Members(const picojson::value& v, const std::string& path, const std::string* label, std::vector<Member>* out) {
    const picojson::array* items = v.is<picojson::array>() ? &v.get<picojson::array>() : nullptr;
    if (v.is<picojson::null>()) return;
    for (size_t i = 0; i < (items ? items->size() : 1); ++i) {
      const picojson::value& o = items ? (*items)[i] : v;
      std::string at = items ? Format("%s[%zu]", path.c_str(), i) : path;
      if (!o.is<picojson::object>()) {
        Fail(at, "expected an object%s%s, got %s", label ? " keyed by " : "", label ? label->c_str() : "",
             json::TypeName(o));
        continue;
      }
      for (const auto& [k, x] : o.get<picojson::object>()) out->push_back({&k, &x, KeyPath(at, k)});
    }
  }

  // HCL's unpackBlock: one level of labels per block_map label, then one
  // block per object (an array holds several).
  void Unpack(const Spec& spec, const picojson::value& v, std::vector<std::string>* labels, const std::string& path,
              Content* content) {
    if (labels->size() < spec.labels.size()) {
      const std::string& label = spec.labels[labels->size()];
      std::vector<Member> members;
      size_t before = errors_->size();
      Members(v, path, &label, &members);
      if (members.empty() && errors_->size() == before) Fail(path, "expected an object keyed by %s, got none", label.c_str());
      for (const Member& m : members) {
        labels->push_back(*m.key);
        Unpack(spec, *m.value, labels, m.path, content);
        labels->pop_back();
      }
      return;
    }
    if (v.is<picojson::object>()) {
      content->blocks.push_back({&spec, *labels, &v, path});
    } else if (v.is<picojson::array>()) {
      const picojson::array& a = v.get<picojson::array>();
      for (size_t i = 0; i < a.size(); ++i) {
        content->blocks.push_back({&spec, *labels, &a[i], Format("%s[%zu]", path.c_str(), i)});
      }
    } else if (!v.is<picojson::null>()) {
      Fail(path, "expected an object or an array of objects (blocks), got %s", json::TypeName(v));
    }
  }

  // A JSON value as HCL's JSON syntax reads an attribute's expression.
  Value FromJson(const picojson::value& v, const std::string& path, int depth) {
    if (depth > 64) {
      Fail(path, "nested too deeply");
      return Value::Unknown(Type());
    }
    if (v.is<picojson::null>()) return Value::Null(Type());
    if (v.is<bool>()) return Value::Bool(v.get<bool>());
    if (v.is<int64_t>()) return Value::Num(Number::Int(v.get<int64_t>()));
    if (v.is<double>()) {
      // The number as written (the shortest text of the double picojson
      // made of it): Nomad parses the JSON text as a decimal.
      Number n;
      if (Number::Parse(json::FormatNumber(v.get<double>()), &n) != Number::Parsed::kOk) {
        Fail(path, "number out of range");
        return Value::Unknown(Type(Type::kNumber));
      }
      return Value::Num(std::move(n));
    }
    bool unknown = false;
    if (v.is<std::string>()) {
      std::string s;
      if (!Template(v.get<std::string>(), path, &s, &unknown)) return Value::Unknown(Type());
      return unknown ? Value::Unknown(Type(Type::kString)) : Value::String(std::move(s));
    }
    std::vector<Value> vals;
    if (v.is<picojson::array>()) {
      const picojson::array& a = v.get<picojson::array>();
      for (size_t i = 0; i < a.size(); ++i) vals.push_back(FromJson(a[i], Format("%s[%zu]", path.c_str(), i), depth + 1));
      return Value::Tuple(std::move(vals));
    }
    // An object; its keys are templates too.
    std::vector<std::string> keys;
    for (const auto& [k, x] : v.get<picojson::object>()) {
      std::string at = KeyPath(path, k);
      keys.emplace_back();
      if (!Template(k, at, &keys.back(), &unknown)) keys.back() = k;
      vals.push_back(FromJson(x, at, depth + 1));
    }
    if (unknown) return Value::Unknown(Type());
    std::string dup;
    if (!SortByKey(&keys, &vals, &dup)) Fail(KeyPath(path, dup), "set twice");
    return Value::Object(std::move(keys), std::move(vals));
  }

  // Values of one block list, set or map made one type (hcldec unifies
  // them: attributes of type any may differ from block to block).
  bool Uniform(std::vector<Value>* vals, const std::string& path, Type* ety, const char* what = "the blocks' values") {
    if (UnifyValues(vals, ety)) return true;
    Fail(path, "%s differ in type", what);
    return false;
  }

  // A block_map's nested maps: items[lo, hi) share their first `level`
  // labels and are in label order.
  Value MapLevel(const std::vector<const Block*>& blocks, std::vector<Value>* vals, const std::vector<uint32_t>& order,
                 size_t lo, size_t hi, size_t level, const Spec& spec, const std::string& path) {
    std::vector<std::string> keys;
    std::vector<Value> out;
    bool last = level + 1 == spec.labels.size();
    for (size_t i = lo; i < hi;) {
      const std::string& key = blocks[order[i]]->labels[level];
      size_t j = i + 1;
      while (j < hi && blocks[order[j]]->labels[level] == key) {
        if (last) Fail(blocks[order[j]]->path, "a block with these labels is already given");
        ++j;
      }
      keys.push_back(key);
      out.push_back(last ? std::move((*vals)[order[i]]) : MapLevel(blocks, vals, order, i, j, level + 1, spec, path));
      i = j;
    }
    Type ety;
    if (!Uniform(&out, path, &ety)) return Value::Unknown(Type());
    return Value::Map(std::move(ety), std::move(keys), std::move(out));
  }

  Value Eval(const Spec& spec, const Content& content, const std::string& path, int depth) {
    std::vector<Value> vals;
    switch (spec.kind) {
      case Spec::Kind::kObject:
      case Spec::Kind::kArray:
        for (const Spec& c : spec.children) vals.push_back(Eval(c, content, path, depth));
        if (spec.kind == Spec::Kind::kArray) return Value::Tuple(std::move(vals));
        return Value::Object(spec.keys, std::move(vals));
      case Spec::Kind::kAttr: {
        const Member* m = content.Attr(spec.name);
        if (!m) return Value::Null(spec.type);
        Value out;
        if (!Convert(FromJson(*m->value, m->path, depth + 1), spec.type, m->path, &out, errors_)) {
          return Value::Unknown(spec.type);
        }
        return out;
      }
      case Spec::Kind::kDefault: {
        Value v = Eval(spec.children[0], content, path, depth);
        return v.null() ? Eval(spec.children[1], content, path, depth) : v;
      }
      case Spec::Kind::kLiteral: return spec.literal;
      default: break;
    }
    std::vector<const Block*> blocks;
    for (const Block& b : content.blocks) {
      if (b.spec->name == spec.name) blocks.push_back(&b);
    }
    std::string at = KeyPath(path, spec.name);
    Type type = ImpliedType(spec);
    bool single = spec.kind == Spec::Kind::kBlock || spec.kind == Spec::Kind::kBlockAttrs;
    if (single) {
      for (size_t i = 1; i < blocks.size(); ++i) Fail(blocks[i]->path, "only one %s block is allowed", spec.name.c_str());
      if (blocks.empty()) {
        if (spec.required) Fail(at, "required block missing");
        return Value::Null(type);
      }
    }
    if (spec.kind == Spec::Kind::kBlockAttrs) {
      // hcl's JustAttributes: an object whose every member is an
      // attribute of the one type.
      const Block& b = *blocks[0];
      if (!b.body->is<picojson::object>()) {
        Fail(b.path, "expected an object, got %s", json::TypeName(*b.body));
        return Value::Unknown(type);
      }
      std::vector<std::string> keys;
      bool ok = true;
      for (const auto& [k, x] : b.body->get<picojson::object>()) {
        if (k == "//") continue;
        std::string kp = KeyPath(b.path, k);
        keys.push_back(k);
        vals.emplace_back();
        ok &= Convert(FromJson(x, kp, depth + 1), spec.type, kp, &vals.back(), errors_);
      }
      // A map's values share one type: those of an `any` map are unified
      // (cty.MapVal would panic on them in Nomad).
      Type ety = spec.type;
      if (!ok || (ety.HasDynamic() && !vals.empty() && !Uniform(&vals, b.path, &ety, "the values"))) {
        return Value::Unknown(type);
      }
      return Value::Map(std::move(ety), std::move(keys), std::move(vals));
    }
    for (const Block* b : blocks) vals.push_back(Body(spec.children[0], *b->body, b->path, depth + 1));
    if (spec.kind == Spec::Kind::kBlock) return std::move(vals[0]);
    if (spec.kind == Spec::Kind::kBlockMap) {
      if (blocks.empty()) return Value::Map(ImpliedType(spec.children[0]), {}, {});  // as hcldec makes it
      std::vector<uint32_t> order = SortOrder(
          blocks.size(),
          [](const void* ctx, uint32_t a, uint32_t b) {
            const auto& bl = *static_cast<const std::vector<const Block*>*>(ctx);
            return bl[a]->labels < bl[b]->labels;
          },
          &blocks);
      return MapLevel(blocks, &vals, order, 0, blocks.size(), 0, spec, at);
    }
    // hcldec converts the uint64 limits to int: one past 2^63 is none.
    int64_t min = static_cast<int64_t>(spec.min_items), max = static_cast<int64_t>(spec.max_items);
    if (min > 0 && vals.size() < static_cast<uint64_t>(min)) {
      Fail(at, "at least %lld %s blocks required, got %zu", static_cast<long long>(min), spec.name.c_str(), vals.size());
    } else if (max > 0 && vals.size() > static_cast<uint64_t>(max)) {
      Fail(at, "at most %lld %s blocks allowed, got %zu", static_cast<long long>(max), spec.name.c_str(), vals.size());
    }
    Type ety = type.elems[0];
    if (!vals.empty() && !Uniform(&vals, at, &ety)) return Value::Unknown(type);
    return Value::Collection(type.kind, std::move(ety), std::move(vals));
  }

  // An HCL template in a JSON string: text, $${ and %%{ for ${ and %{, and
  // ${name} or ${a.b["c"]} interpolations, whose value comes from
  // opts_.env. Anything else in ${...}, and %{...} directives, is refused:
  // outpost evaluates no HCL functions or expressions in configs.
  bool Template(const std::string& in, const std::string& path, std::string* out, bool* unknown) {
    out->clear();
    for (size_t i = 0; i < in.size();) {
      char c = in[i];
      bool open = i + 1 < in.size() && in[i + 1] == '{';
      if ((c == '$' || c == '%') && i + 2 < in.size() && in[i + 1] == c && in[i + 2] == '{') {
        out->push_back(c);
        out->push_back('{');
        i += 3;
        continue;
      }
      if (c == '%' && open) {
        Fail(path, "template directives (%%{...}) are not supported; write %%%%{ for a literal %%{");
        return false;
      }
      if (c != '$' || !open) {
        out->push_back(c);
        ++i;
        continue;
      }
      size_t j = i + 2;
      if (j < in.size() && in[j] == '~') {
        ++j;
        while (!out->empty() && IsBlank(out->back())) out->pop_back();
      }
      while (j < in.size() && IsBlank(in[j])) ++j;
      // A traversal: name, then .name or ["key"] steps.
      std::string name;
      bool ok = j < in.size() && IsIdentStart(in[j]);
      while (ok && j < in.size()) {
        if (IsIdentChar(in[j])) {
          name.push_back(in[j++]);
        } else if (in[j] == '.' && j + 1 < in.size() && IsIdentStart(in[j + 1])) {
          name.push_back(in[j++]);
        } else if (in.compare(j, 2, "[\"") == 0 && in.find("\"]", j + 2) != std::string::npos) {
          size_t end = in.find("\"]", j + 2);
          name += "." + in.substr(j + 2, end - j - 2);
          j = end + 2;
        } else {
          break;
        }
      }
      while (j < in.size() && IsBlank(in[j])) ++j;
      bool strip = j < in.size() && in[j] == '~';
      if (strip) ++j;
      if (!ok || j >= in.size() || in[j] != '}') {
        Fail(path, "only a variable, such as ${NOMAD_TASK_DIR}, is supported inside ${...}; write $${ for a literal ${");
        return false;
      }
      for (i = j + 1; strip && i < in.size() && IsBlank(in[i]);) ++i;
      const std::map<std::string, std::string>* env = opts_.env;
      auto it = env ? env->find(name) : std::map<std::string, std::string>::const_iterator();
      if (opts_.vars == DecodeOptions::Vars::kDefer) {
        // Only Nomad's own names can be known before the task starts: one
        // of those that is not among them is a typo.
        if (env != nullptr && it == env->end() && StartsWith(name, "NOMAD_") && !DynamicNomadName(name)) {
          Fail(path, "unknown variable \"%s\" in ${...}", name.c_str());
          return false;
        }
        *unknown = true;
      } else if (opts_.vars == DecodeOptions::Vars::kRefuse) {
        Fail(path, "variables are not allowed here (${%s}); write $${ for a literal ${", name.c_str());
        return false;
      } else if (!env || it == env->end()) {
        Fail(path, "unknown variable \"%s\" in ${...}", name.c_str());
        return false;
      } else {
        *out += it->second;
      }
    }
    return true;
  }

  const DecodeOptions& opts_;
  json::Errors* errors_;
};

}  // namespace

Result<Spec> DecodeSpec(std::string_view spec_message) {
  SpecDecoder d;
  Spec s;
  if (!d.Decode(spec_message, "", 0, "schema", &s)) return d.error();
  return s;
}

Result<Schema> DecodeSchemaResponse(std::string_view response) {
  Schema out;
  std::string_view spec;
  PbReader r(response);
  while (!r.done()) {
    uint32_t field, wire;
    std::string_view bytes;
    uint64_t num;
    if (!r.Next(&field, &wire, &bytes, &num)) {
      return Error(Code::kInvalidArgument, "invalid plugin schema: malformed protobuf");
    }
    if (field == 1 && wire == 2) {
      spec = bytes;
      out.present = true;
    }
  }
  if (!out.present) return out;
  auto root = DecodeSpec(spec);
  if (!root.ok()) return root.error();
  out.root = std::move(*root);
  return out;
}

Result<Type> ParseTypeExpr(std::string_view text) {
  HclParser p(text);
  Type t;
  if (!p.ParseType(&t) || !p.Done()) return Error(Code::kInvalidArgument, "type " + std::string(text) + ": " + p.error());
  return t;
}

Result<Value> ParseLiteral(std::string_view text) {
  HclParser p(text);
  Value v;
  if (!p.ParseValue(&v, 0) || !p.Done()) return Error(Code::kInvalidArgument, std::string(text) + ": " + p.error());
  return v;
}

Type ImpliedType(const Spec& spec) {
  switch (spec.kind) {
    case Spec::Kind::kObject:
    case Spec::Kind::kArray: {
      std::vector<Type> types;
      for (const Spec& c : spec.children) types.push_back(ImpliedType(c));
      if (spec.kind == Spec::Kind::kArray) return Type::Tuple(std::move(types));
      return Type::Object(spec.keys, std::move(types));
    }
    case Spec::Kind::kAttr: return spec.type;
    case Spec::Kind::kBlock:
    case Spec::Kind::kDefault: return ImpliedType(spec.children[0]);
    case Spec::Kind::kBlockAttrs: return Type::Collection(Type::kMap, spec.type);
    case Spec::Kind::kBlockList: return Type::Collection(Type::kList, ImpliedType(spec.children[0]));
    case Spec::Kind::kBlockSet: return Type::Collection(Type::kSet, ImpliedType(spec.children[0]));
    case Spec::Kind::kBlockMap: {
      Type t = ImpliedType(spec.children[0]);
      for (size_t i = 0; i < spec.labels.size(); ++i) t = Type::Collection(Type::kMap, std::move(t));
      return t;
    }
    case Spec::Kind::kLiteral: return spec.literal.type;
  }
  return Type();
}

Value DecodeConfig(const Spec& spec, const picojson::value& config, const DecodeOptions& opts, json::Errors* errors) {
  ConfigDecoder d(opts, errors);
  // No config is an empty one: the schema's defaults apply.
  picojson::value empty{picojson::object()};
  return d.Body(spec, config.is<picojson::null>() ? empty : config, opts.path, 0);
}

Result<Value> DecodeConfig(const Spec& spec, const picojson::value& config, const DecodeOptions& opts) {
  json::Errors errors;
  Value v = DecodeConfig(spec, config, opts, &errors);
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  return v;
}

Result<std::string> EncodeConfig(const Schema& schema, const picojson::value& config, const DecodeOptions& opts) {
  if (!schema.present) {
    bool empty = config.is<picojson::null>() ||
                 (config.is<picojson::object>() && config.get<picojson::object>().empty());
    if (empty) return std::string();
    return Error(Code::kInvalidArgument, opts.path + ": the plugin takes no configuration");
  }
  auto v = DecodeConfig(schema.root, config, opts);
  if (!v.ok()) return v.error();
  if (v->HasUnknown()) {
    return Error(Code::kInvalidArgument, opts.path + ": holds ${...} values not known yet");
  }
  return MsgpackEncode(*v);
}

}  // namespace outpost::driver::nomad
