#include "driver/nomad/cty.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "base/strings.h"

namespace outpost::driver::nomad {

// ---- types ------------------------------------------------------------------

Type Type::Collection(Kind k, Type elem) {
  Type t(k);
  t.elems.push_back(std::move(elem));
  return t;
}

Type Type::Tuple(std::vector<Type> elems) {
  Type t(kTuple);
  t.elems = std::move(elems);
  return t;
}

Type Type::Object(std::vector<std::string> names, std::vector<Type> types) {
  Type t(kObject);
  t.names = std::move(names);
  t.elems = std::move(types);
  return t;
}

bool Type::HasDynamic() const {
  if (kind == kDynamic) return true;
  for (const Type& e : elems) {
    if (e.HasDynamic()) return true;
  }
  return false;
}

std::string Type::Name() const {
  switch (kind) {
    case kDynamic: return "any";
    case kString: return "string";
    case kNumber: return "number";
    case kBool: return "bool";
    case kList: return "list of " + elems[0].Name();
    case kSet: return "set of " + elems[0].Name();
    case kMap: return "map of " + elems[0].Name();
    case kObject: return "object";
    case kTuple: return "tuple";
  }
  return "?";
}

// ---- values -----------------------------------------------------------------

Value Value::Null(Type t) {
  Value v;
  v.type = std::move(t);
  return v;
}

Value Value::Unknown(Type t) {
  Value v;
  v.type = std::move(t);
  v.state = State::kUnknown;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.type.kind = Type::kString;
  v.state = State::kKnown;
  v.s = std::move(s);
  return v;
}

Value Value::Num(Number n) {
  Value v;
  v.type.kind = Type::kNumber;
  v.state = State::kKnown;
  v.n = std::move(n);
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.type.kind = Type::kBool;
  v.state = State::kKnown;
  v.b = b;
  return v;
}

Value Value::Collection(Type::Kind kind, Type elem, std::vector<Value> elems) {
  Value v;
  v.state = State::kKnown;
  if (kind == Type::kSet) NormalizeSet(&elems, elem);
  v.type = Type::Collection(kind, std::move(elem));
  v.elems = std::move(elems);
  return v;
}

Value Value::Tuple(std::vector<Value> elems) {
  Value v;
  v.state = State::kKnown;
  std::vector<Type> types;
  types.reserve(elems.size());
  for (const Value& e : elems) types.push_back(e.type);
  v.type = Type::Tuple(std::move(types));
  v.elems = std::move(elems);
  return v;
}

Value Value::Map(Type elem, std::vector<std::string> keys, std::vector<Value> vals) {
  Value v;
  v.state = State::kKnown;
  v.type = Type::Collection(Type::kMap, std::move(elem));
  v.keys = std::move(keys);
  v.elems = std::move(vals);
  return v;
}

Value Value::Object(std::vector<std::string> keys, std::vector<Value> vals) {
  Value v;
  v.state = State::kKnown;
  std::vector<Type> types;
  types.reserve(vals.size());
  for (const Value& e : vals) types.push_back(e.type);
  v.type = Type::Object(keys, std::move(types));
  v.keys = std::move(keys);
  v.elems = std::move(vals);
  return v;
}

bool Value::HasUnknown() const {
  if (state == State::kUnknown) return true;
  for (const Value& e : elems) {
    if (e.HasUnknown()) return true;
  }
  return false;
}

bool RawEqual(const Value& a, const Value& b) {
  if (a.state != b.state || a.type != b.type) return false;
  if (!a.known()) return true;
  switch (a.type.kind) {
    case Type::kString: return a.s == b.s;
    case Type::kNumber: return a.n == b.n;
    case Type::kBool: return a.b == b.b;
    default: break;
  }
  if (a.keys != b.keys || a.elems.size() != b.elems.size()) return false;
  for (size_t i = 0; i < a.elems.size(); ++i) {
    if (!RawEqual(a.elems[i], b.elems[i])) return false;
  }
  return true;
}

// ---- sets -------------------------------------------------------------------

namespace {

// Whether Go's unicode.IsPrint holds, closely enough: exact for ASCII and
// Latin-1, the common invisible and private-use ranges beyond.
bool GoPrintable(uint32_t r) {
  if (r < 0x80) return r >= 0x20 && r < 0x7f;
  if (r <= 0xa0 || r == 0xad || r == 0x1680 || r == 0x3000 || r == 0xfeff) return false;
  if ((r >= 0x2000 && r <= 0x200f) || (r >= 0x2028 && r <= 0x202f) || (r >= 0x205f && r <= 0x206f)) return false;
  if ((r >= 0xe000 && r <= 0xf8ff) || (r >= 0xfff9 && r <= 0xfffb) || r >= 0xf0000) return false;
  return (r & 0xfffe) != 0xfffe;
}

// Go's strconv.Quote, which cty's set hash writes strings with.
void AppendGoQuoted(const std::string& s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    uint32_t r = 0;
    size_t n = Utf8RuneAt(s, i, &r);
    if (n == 0) {
      uint8_t c = static_cast<uint8_t>(s[i++]);
      *out += "\\x";
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
      continue;
    }
    if (r == '"' || r == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(r));
    } else if (GoPrintable(r)) {
      out->append(s, i, n);
    } else {
      const char* esc = nullptr;
      switch (r) {
        case '\a': esc = "\\a"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\v': esc = "\\v"; break;
        default: break;
      }
      if (esc) {
        *out += esc;
      } else {
        int width = r < 0x80 ? 2 : (r < 0x10000 ? 4 : 8);
        *out += width == 2 ? "\\x" : (width == 4 ? "\\u" : "\\U");
        for (int k = width - 1; k >= 0; --k) out->push_back(kHex[(r >> (4 * k)) & 15]);
      }
    }
    i += n;
  }
  out->push_back('"');
}

// cty's appendSetHashBytes.
void AppendSetHash(const Value& v, std::string* out) {
  if (v.state == Value::State::kUnknown) {
    out->push_back('?');
    return;
  }
  if (v.null()) {
    out->push_back('~');
    return;
  }
  switch (v.type.kind) {
    case Type::kNumber: *out += v.n.Text10g(); return;
    case Type::kBool: out->push_back(v.b ? 'T' : 'F'); return;
    case Type::kString: AppendGoQuoted(v.s, out); return;
    case Type::kMap:
      out->push_back('{');
      for (size_t i = 0; i < v.elems.size(); ++i) {
        AppendGoQuoted(v.keys[i], out);
        out->push_back(':');
        AppendSetHash(v.elems[i], out);
        out->push_back(';');
      }
      out->push_back('}');
      return;
    default: break;
  }
  bool seq = v.type.kind == Type::kList || v.type.kind == Type::kSet;
  out->push_back(seq ? '[' : '<');
  for (const Value& e : v.elems) {
    AppendSetHash(e, out);
    out->push_back(';');
  }
  out->push_back(seq ? ']' : '>');
}

}  // namespace

std::vector<uint32_t> SortOrder(size_t n, bool (*less)(const void* ctx, uint32_t a, uint32_t b), const void* ctx) {
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  struct Cmp {
    bool (*less)(const void*, uint32_t, uint32_t);
    const void* ctx;
    bool operator()(uint32_t a, uint32_t b) const {
      if (less(ctx, a, b)) return true;
      return !less(ctx, b, a) && a < b;  // equal: keep their order
    }
  };
  std::sort(order.begin(), order.end(), Cmp{less, ctx});
  return order;
}

std::vector<uint32_t> KeyOrder(const std::vector<std::string>& keys) {
  return SortOrder(
      keys.size(),
      [](const void* ctx, uint32_t a, uint32_t b) {
        const auto& k = *static_cast<const std::vector<std::string>*>(ctx);
        return k[a] < k[b];
      },
      &keys);
}

namespace {

struct SetItems {
  const std::vector<Value>* vals;
  std::vector<std::string> hash;  // compound element types only
};

int Rank(const Value& v) { return v.known() ? 0 : (v.null() ? 1 : 2); }

// cty's setRules.Less: nulls, then unknowns, after the rest.
bool SetLess(const void* ctx, uint32_t i, uint32_t j) {
  const SetItems& s = *static_cast<const SetItems*>(ctx);
  const Value& a = (*s.vals)[i];
  const Value& b = (*s.vals)[j];
  if (Rank(a) != Rank(b)) return Rank(a) < Rank(b);
  if (!a.known()) return false;
  switch (a.type.kind) {
    case Type::kString: return a.s < b.s;
    case Type::kNumber: return a.n.Compare(b.n) < 0;
    case Type::kBool: return !a.b && b.b;
    default: return s.hash[i] < s.hash[j];
  }
}

}  // namespace

void NormalizeSet(std::vector<Value>* elems, const Type& elem) {
  SetItems items{elems, std::vector<std::string>(elems->size())};
  if (!elem.primitive()) {
    for (size_t i = 0; i < elems->size(); ++i) {
      if ((*elems)[i].known()) AppendSetHash((*elems)[i], &items.hash[i]);
    }
  }
  std::vector<uint32_t> order = SortOrder(elems->size(), SetLess, &items);
  std::vector<Value> out;
  out.reserve(order.size());
  size_t group = 0;  // where the run of elements that sort alike starts
  for (size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && SetLess(&items, order[k - 1], order[k])) group = out.size();
    const Value& v = (*elems)[order[k]];
    bool dup = false;
    for (size_t j = group; v.known() && j < out.size() && !dup; ++j) dup = RawEqual(out[j], v);
    if (!dup) out.push_back(v);
  }
  *elems = std::move(out);
}

// ---- conversion -------------------------------------------------------------

namespace {

std::string ElemPath(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

}  // namespace

std::string KeyPath(const std::string& path, const std::string& key) {
  bool plain = !key.empty();
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
      plain = false;
    }
  }
  if (plain) return path.empty() ? key : path + "." + key;
  std::string q;
  AppendGoQuoted(key, &q);
  return path + "[" + q + "]";
}

namespace {

bool Fail(ConvertErrors* errors, const std::string& path, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
bool Fail(ConvertErrors* errors, const std::string& path, const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  errors->push_back(path + ": " + buf);
  return false;
}

bool Mismatch(const Value& in, const Type& want, const std::string& path, ConvertErrors* errors) {
  return Fail(errors, path, "expected %s, got %s", want.Name().c_str(), Describe(in).c_str());
}

// Whether a null or unknown value of type from may become one of type to:
// between primitives as between values (not number and bool), and
// between compound types, whose contents are not known to differ.
bool TypeConvertible(const Type& from, const Type& to) {
  if (to.kind == Type::kDynamic || from.kind == Type::kDynamic || from == to) return true;
  if (from.primitive() != to.primitive()) return false;
  return !from.primitive() || from.kind == Type::kString || to.kind == Type::kString;
}

// The single type the elements of a list(any) or map(any) take: their
// types unified, leaving out null values of no type (they take it).
bool ElementType(const std::vector<Value>& elems, Type* out) {
  std::vector<Type> types;
  for (const Value& e : elems) {
    if (e.known() || e.type.kind != Type::kDynamic) types.push_back(e.type);
  }
  if (types.empty()) {
    *out = Type();
    return true;
  }
  return Unify(types, out);
}

// After converting to an element type with `any` in it, elements may still
// differ (list(list(any)) of [["a"], [1]]): cty unifies them once more.
bool SameElementTypes(std::vector<Value>* vals, Type* ety, const std::string& path, ConvertErrors* errors) {
  if (!ety->HasDynamic() || vals->empty()) return true;
  return UnifyValues(vals, ety) || Fail(errors, path, "all elements must have the same type");
}

bool ConvertSeq(const Value& in, const Type& want, const std::string& path, Value* out, ConvertErrors* errors) {
  size_t n = in.elems.size();
  std::vector<Value> vals(n);
  bool ok = true;
  if (want.kind == Type::kTuple) {
    if (n != want.elems.size()) {
      return Fail(errors, path, "expected a tuple of %zu elements, got %zu", want.elems.size(), n);
    }
    for (size_t i = 0; i < n; ++i) ok &= Convert(in.elems[i], want.elems[i], ElemPath(path, i), &vals[i], errors);
    if (ok) *out = Value::Tuple(std::move(vals));
    return ok;
  }
  Type ety = want.elems[0];
  if (ety.kind == Type::kDynamic && !ElementType(in.elems, &ety)) {
    return Fail(errors, path, "all elements must have the same type");
  }
  for (size_t i = 0; i < n; ++i) ok &= Convert(in.elems[i], ety, ElemPath(path, i), &vals[i], errors);
  ok = ok && SameElementTypes(&vals, &ety, path, errors);
  if (ok) *out = Value::Collection(want.kind, std::move(ety), std::move(vals));
  return ok;
}

bool ConvertKeyed(const Value& in, const Type& want, const std::string& path, Value* out, ConvertErrors* errors) {
  bool ok = true;
  if (want.kind == Type::kMap) {
    Type ety = want.elems[0];
    if (ety.kind == Type::kDynamic && !ElementType(in.elems, &ety)) {
      return Fail(errors, path, "all elements must have the same type");
    }
    std::vector<Value> vals(in.elems.size());
    for (size_t i = 0; i < vals.size(); ++i) {
      ok &= Convert(in.elems[i], ety, KeyPath(path, in.keys[i]), &vals[i], errors);
    }
    ok = ok && SameElementTypes(&vals, &ety, path, errors);
    if (ok) *out = Value::Map(std::move(ety), in.keys, std::move(vals));
    return ok;
  }
  std::vector<Value> vals(want.names.size());
  for (size_t i = 0; i < want.names.size(); ++i) {
    const std::string& name = want.names[i];
    auto it = std::lower_bound(in.keys.begin(), in.keys.end(), name);
    if (it == in.keys.end() || *it != name) {
      ok = Fail(errors, KeyPath(path, name), "required attribute missing");
      continue;
    }
    const Value& v = in.elems[static_cast<size_t>(it - in.keys.begin())];
    ok &= Convert(v, want.elems[i], KeyPath(path, name), &vals[i], errors);
  }
  if (ok) *out = Value::Object(want.names, std::move(vals));
  return ok;
}

}  // namespace

std::string Describe(const Value& v) {
  if (v.null()) return "null";
  if (!v.known()) return "an unknown value";
  switch (v.type.kind) {
    case Type::kString: {
      std::string q;
      AppendGoQuoted(v.s.size() > 40 ? v.s.substr(0, 37) + "..." : v.s, &q);
      return "string " + q;
    }
    case Type::kNumber: return "number";
    case Type::kBool: return "bool";
    case Type::kList: return "list";
    case Type::kSet: return "set";
    case Type::kMap: return "map";
    case Type::kObject: return "object";
    case Type::kTuple: return "array";
    case Type::kDynamic: break;
  }
  return "any";
}

bool Convert(const Value& in, const Type& want, const std::string& path, Value* out, ConvertErrors* errors) {
  if (want.kind == Type::kDynamic || in.type == want) {
    *out = in;
    return true;
  }
  if (!in.known()) {
    if (!TypeConvertible(in.type, want)) return Mismatch(in, want, path, errors);
    *out = in.null() ? Value::Null(want) : Value::Unknown(want);
    return true;
  }
  Type::Kind from = in.type.kind;
  switch (want.kind) {
    case Type::kString:
      if (from == Type::kNumber) {
        *out = Value::String(in.n.Text());
        return true;
      }
      if (from == Type::kBool) {
        *out = Value::String(in.b ? "true" : "false");
        return true;
      }
      break;
    case Type::kNumber:
      if (from == Type::kString) {
        Number n;
        Number::Parsed p = Number::Parse(in.s, &n);
        if (p == Number::Parsed::kRange) {
          return Fail(errors, path, "number out of range (more than %zu digits, or beyond 1e%d)", Number::kMaxDigits,
                      Number::kMaxExp10);
        }
        if (p != Number::Parsed::kOk) break;
        *out = Value::Num(std::move(n));
        return true;
      }
      break;
    case Type::kBool:
      if (from == Type::kString) {
        if (in.s == "true" || in.s == "1" || in.s == "false" || in.s == "0") {
          *out = Value::Bool(in.s == "true" || in.s == "1");
          return true;
        }
        std::string lower = in.s;
        for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
        if (lower == "true" || lower == "false") {
          return Fail(errors, path, "expected bool, got %s (write \"%s\")", Describe(in).c_str(), lower.c_str());
        }
      }
      break;
    case Type::kList:
    case Type::kSet:
    case Type::kTuple:
      if (from == Type::kList || from == Type::kSet || from == Type::kTuple) {
        return ConvertSeq(in, want, path, out, errors);
      }
      break;
    case Type::kMap:
    case Type::kObject:
      if (from == Type::kMap || from == Type::kObject) return ConvertKeyed(in, want, path, out, errors);
      break;
    case Type::kDynamic: break;
  }
  return Mismatch(in, want, path, errors);
}

bool Unify(const std::vector<Type>& types, Type* out) {
  if (types.empty()) return false;
  const Type& first = types[0];
  bool same = true, prim = true, string = false, dynamic = false, shape = true, seq = true, keyed = true;
  for (const Type& t : types) {
    same &= t == first;
    prim &= t.primitive();
    string |= t.kind == Type::kString;
    dynamic |= t.kind == Type::kDynamic;
    shape &= t.kind == first.kind && t.names == first.names && t.elems.size() == first.elems.size();
    seq &= t.kind == Type::kTuple || t.kind == Type::kList;
    keyed &= t.kind == Type::kObject || t.kind == Type::kMap;
  }
  if (same || dynamic) {
    *out = same ? first : Type();
    return true;
  }
  if (prim) {
    if (!string) return false;  // number and bool have no common type
    *out = Type(Type::kString);
    return true;
  }
  if (shape) {
    // One kind, one shape: unify position by position.
    Type t = first;
    for (size_t i = 0; i < t.elems.size(); ++i) {
      std::vector<Type> at;
      for (const Type& x : types) at.push_back(x.elems[i]);
      if (!Unify(at, &t.elems[i])) return false;
    }
    *out = std::move(t);
    return true;
  }
  if (!seq && !keyed) return false;
  // Tuples of several lengths (and lists) make a list, objects of several
  // attribute sets (and maps) a map, of every element type unified.
  std::vector<Type> all;
  for (const Type& x : types) all.insert(all.end(), x.elems.begin(), x.elems.end());
  Type elem;
  if (!all.empty() && !Unify(all, &elem)) return false;
  *out = Type::Collection(seq ? Type::kList : Type::kMap, std::move(elem));
  return true;
}

bool UnifyValues(std::vector<Value>* vals, Type* out) {
  std::vector<Type> types;
  for (const Value& v : *vals) {
    if (v.known() || v.type.kind != Type::kDynamic) types.push_back(v.type);
  }
  if (types.empty()) {
    *out = Type();
    return true;
  }
  if (!Unify(types, out)) return false;
  ConvertErrors errs;
  for (Value& v : *vals) {
    Value c;
    if (!Convert(v, *out, "", &c, &errs)) return false;
    v = std::move(c);
  }
  return true;
}

}  // namespace outpost::driver::nomad
