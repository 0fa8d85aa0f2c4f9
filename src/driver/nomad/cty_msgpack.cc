#include "driver/nomad/cty_msgpack.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/strings.h"

namespace outpost::driver::nomad {

namespace {

// ---- encoding ---------------------------------------------------------------

void Put(std::string* out, uint8_t code, uint64_t v, int bytes) {
  out->push_back(static_cast<char>(code));
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}

// vmihailenco's EncodeInt: the smallest form, positive numbers unsigned.
void PutInt(std::string* out, int64_t n) {
  if (n >= 0) {
    uint64_t u = static_cast<uint64_t>(n);
    if (u <= 0x7f) out->push_back(static_cast<char>(u));
    else if (u <= 0xff) Put(out, 0xcc, u, 1);
    else if (u <= 0xffff) Put(out, 0xcd, u, 2);
    else if (u <= 0xffffffff) Put(out, 0xce, u, 4);
    else Put(out, 0xcf, u, 8);
    return;
  }
  uint64_t bits = static_cast<uint64_t>(n);
  if (n >= -32) out->push_back(static_cast<char>(bits));
  else if (n >= INT8_MIN) Put(out, 0xd0, bits, 1);
  else if (n >= INT16_MIN) Put(out, 0xd1, bits, 2);
  else if (n >= INT32_MIN) Put(out, 0xd2, bits, 4);
  else Put(out, 0xd3, bits, 8);
}

void PutDouble(std::string* out, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  Put(out, 0xcb, bits, 8);
}

// Array and map headers: fix form under 16, then 16 and 32 bits.
void PutLen(std::string* out, uint8_t fix, uint8_t code16, size_t n) {
  if (n < 16) out->push_back(static_cast<char>(fix | n));
  else if (n <= 0xffff) Put(out, code16, n, 2);
  else Put(out, static_cast<uint8_t>(code16 + 1), n, 4);
}

void PutStr(std::string* out, std::string_view s) {
  size_t n = s.size();
  if (n < 32) out->push_back(static_cast<char>(0xa0 | n));
  else if (n <= 0xff) Put(out, 0xd9, n, 1);
  else if (n <= 0xffff) Put(out, 0xda, n, 2);
  else Put(out, 0xdb, n, 4);
  out->append(s);
}

void PutBin(std::string* out, std::string_view s) {
  size_t n = s.size();
  if (n <= 0xff) Put(out, 0xc4, n, 1);
  else if (n <= 0xffff) Put(out, 0xc5, n, 2);
  else Put(out, 0xc6, n, 4);
  out->append(s);
}

// Go's encoding/json string: HTML characters and U+2028/2029 escaped, bad
// UTF-8 as U+FFFD.
void AppendGoJsonString(const std::string& s, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    uint32_t r = 0;
    size_t n = Utf8RuneAt(s, i, &r);
    if (n == 0) {
      *out += "\\ufffd";
      ++i;
      continue;
    }
    if (r == '"' || r == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(r));
    } else if (r == '\n') {
      *out += "\\n";
    } else if (r == '\r') {
      *out += "\\r";
    } else if (r == '\t') {
      *out += "\\t";
    } else if (r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029) {
      *out += "\\u";
      for (int k = 3; k >= 0; --k) out->push_back(kHex[(r >> (4 * k)) & 15]);
    } else {
      out->append(s, i, n);
    }
    i += n;
  }
  out->push_back('"');
}

void AppendTypeJson(const Type& t, std::string* out) {
  switch (t.kind) {
    case Type::kDynamic: *out += "\"dynamic\""; return;
    case Type::kString: *out += "\"string\""; return;
    case Type::kNumber: *out += "\"number\""; return;
    case Type::kBool: *out += "\"bool\""; return;
    case Type::kList: *out += "[\"list\","; break;
    case Type::kSet: *out += "[\"set\","; break;
    case Type::kMap: *out += "[\"map\","; break;
    case Type::kObject: *out += "[\"object\",{"; break;
    case Type::kTuple: *out += "[\"tuple\",["; break;
  }
  for (size_t i = 0; i < t.elems.size(); ++i) {
    if (i) out->push_back(',');
    if (t.kind == Type::kObject) {
      AppendGoJsonString(t.names[i], out);
      out->push_back(':');
    }
    AppendTypeJson(t.elems[i], out);
  }
  if (t.kind == Type::kObject) out->push_back('}');
  if (t.kind == Type::kTuple) out->push_back(']');
  out->push_back(']');
}

// Writes cty's dynamic form of v: [bin(type JSON), value].
using Wrap = void (*)(const Value& v, std::string* out);

// go-cty's marshal. wrap writes a value where ty is `any` and its own type
// is not; only MsgpackEncodeAs passes one, so that what Nomad's encoding
// never needs stays out of a binary that does not use it.
void Marshal(const Value& v, const Type& ty, std::string* out, Wrap wrap) {
  if (ty.kind == Type::kDynamic && v.type.kind != Type::kDynamic && wrap) return wrap(v, out);
  if (v.state == Value::State::kUnknown) {
    *out += std::string("\xd4\x00\x00", 3);
    return;
  }
  if (v.null()) {
    out->push_back(static_cast<char>(0xc0));
    return;
  }
  switch (ty.kind) {
    case Type::kString: PutStr(out, v.s); return;
    case Type::kBool: out->push_back(static_cast<char>(v.b ? 0xc3 : 0xc2)); return;
    case Type::kNumber: {
      int64_t i;
      double d;
      if (v.n.ToInt64(&i)) PutInt(out, i);
      else if (v.n.ToDouble(&d)) PutDouble(out, d);
      else PutStr(out, v.n.Text());
      return;
    }
    case Type::kList:
    case Type::kSet:
    case Type::kTuple:
      PutLen(out, 0x90, 0xdc, v.elems.size());
      for (size_t i = 0; i < v.elems.size(); ++i) {
        Marshal(v.elems[i], ty.kind == Type::kTuple ? ty.elems[i] : ty.elems[0], out, wrap);
      }
      return;
    case Type::kMap:
      PutLen(out, 0x80, 0xde, v.elems.size());
      for (size_t i = 0; i < v.elems.size(); ++i) {
        PutStr(out, v.keys[i]);
        Marshal(v.elems[i], ty.elems[0], out, wrap);
      }
      return;
    case Type::kObject:
      PutLen(out, 0x80, 0xde, ty.names.size());
      for (size_t i = 0; i < ty.names.size(); ++i) {
        PutStr(out, ty.names[i]);
        auto it = std::lower_bound(v.keys.begin(), v.keys.end(), ty.names[i]);
        if (it != v.keys.end() && *it == ty.names[i]) {
          Marshal(v.elems[static_cast<size_t>(it - v.keys.begin())], ty.elems[i], out, wrap);
        } else {
          out->push_back(static_cast<char>(0xc0));
        }
      }
      return;
    case Type::kDynamic: break;
  }
  out->push_back(static_cast<char>(0xc0));
}

// ---- decoding ---------------------------------------------------------------

Error Bad(const std::string& path, const std::string& what) {
  return Error(Code::kInvalidArgument, "msgpack" + (path.empty() ? "" : " at " + path) + ": " + what);
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  bool done() const { return pos_ == in_.size(); }
  size_t left() const { return in_.size() - pos_; }
  bool Peek(uint8_t* c) const {
    if (pos_ >= in_.size()) return false;
    *c = static_cast<uint8_t>(in_[pos_]);
    return true;
  }
  bool Be(int bytes, uint64_t* v) {
    if (static_cast<size_t>(bytes) > left()) return false;
    *v = 0;
    for (int i = 0; i < bytes; ++i) *v = *v << 8 | static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool Take(uint64_t n, std::string_view* out) {
    if (n > left()) return false;
    *out = in_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }

  // The value's bytes as a number (nil and other codes: false), as
  // vmihailenco decodes one for cty: ints, uints, floats, decimal strings.
  bool ReadNumber(const std::string& path, Number* out, Error* err) {
    uint8_t c;
    uint64_t v;
    if (!Peek(&c)) return Fail(path, "truncated", err);
    if (c <= 0x7f || c >= 0xe0) {
      ++pos_;
      *out = Number::Int(static_cast<int8_t>(c));
      return true;
    }
    if (c >= 0xcc && c <= 0xd3) {
      ++pos_;
      int bytes = 1 << ((c - 0xcc) & 3);
      if (!Be(bytes, &v)) return Fail(path, "truncated", err);
      if (c <= 0xcf) {
        *out = Number::Uint(v);
      } else {
        int shift = 64 - 8 * bytes;  // sign-extend
        *out = Number::Int(static_cast<int64_t>(v << shift) >> shift);
      }
      return true;
    }
    if (c == 0xca || c == 0xcb) {
      ++pos_;
      double d;
      if (c == 0xca) {
        if (!Be(4, &v)) return Fail(path, "truncated", err);
        uint32_t bits = static_cast<uint32_t>(v);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        d = f;
      } else {
        if (!Be(8, &v)) return Fail(path, "truncated", err);
        std::memcpy(&d, &v, sizeof d);
      }
      if (std::isnan(d)) return Fail(path, "NaN is not a number", err);
      *out = Number::Double(d);
      return true;
    }
    std::string_view s;
    if (!ReadString(path, &s, err)) return false;
    if (Number::Parse(s, out) != Number::Parsed::kOk) return Fail(path, "number is required", err);
    return true;
  }

  // str or bin.
  bool ReadString(const std::string& path, std::string_view* out, Error* err) {
    uint8_t c;
    uint64_t n;
    if (!Peek(&c)) return Fail(path, "truncated", err);
    ++pos_;
    bool ok;
    if ((c & 0xe0) == 0xa0) {
      n = c & 0x1f;
      ok = true;
    } else if (c >= 0xd9 && c <= 0xdb) {
      ok = Be(1 << (c - 0xd9), &n);
    } else if (c >= 0xc4 && c <= 0xc6) {
      ok = Be(1 << (c - 0xc4), &n);
    } else {
      --pos_;
      return Fail(path, "string is required", err);
    }
    if (!ok || !Take(n, out)) return Fail(path, "truncated", err);
    return true;
  }

  // An array or map header (fix, 16 and 32 bits); the count must be
  // possible in what is left, one byte at least per item.
  bool Len(bool map, const std::string& path, size_t* n, Error* err) {
    uint8_t c;
    uint64_t v;
    if (!Peek(&c)) return Fail(path, "truncated", err);
    uint8_t fix = map ? 0x80 : 0x90, code16 = map ? 0xde : 0xdc;
    ++pos_;
    if ((c & 0xf0) == fix) {
      v = c & 0x0f;
    } else if (c == code16 || c == code16 + 1) {
      if (!Be(c == code16 ? 2 : 4, &v)) return Fail(path, "truncated", err);
    } else {
      --pos_;
      return Fail(path, map ? "a map is required" : "an array is required", err);
    }
    if (v > left() / (map ? 2 : 1)) return Fail(path, "truncated", err);
    *n = static_cast<size_t>(v);
    return true;
  }

  // An extension (what cty writes for an unknown value): skipped.
  bool Ext(const std::string& path, bool* is_ext, Error* err) {
    uint8_t c;
    *is_ext = false;
    if (!Peek(&c)) return Fail(path, "truncated", err);
    uint64_t len = 0;
    int hdr;
    if (c >= 0xd4 && c <= 0xd8) {
      len = uint64_t{1} << (c - 0xd4);
      hdr = 0;
    } else if (c >= 0xc7 && c <= 0xc9) {
      hdr = 1 << (c - 0xc7);
    } else {
      return true;
    }
    *is_ext = true;
    ++pos_;
    uint64_t code;
    std::string_view body;
    if ((hdr && !Be(hdr, &len)) || !Be(1, &code) || !Take(len, &body)) return Fail(path, "truncated", err);
    // cty: one byte or none is an unknown value; more is a refinement map
    // (extension 0x0c, at most 1 KiB), whose refinements outpost ignores.
    if (len > 1 && code != 0x0c) return Fail(path, Format("unsupported extension type 0x%02x", static_cast<unsigned>(code)), err);
    if (len > 1024) return Fail(path, "oversize unknown value refinement", err);
    return true;
  }

  bool Nil() {
    if (pos_ < in_.size() && static_cast<uint8_t>(in_[pos_]) == 0xc0) {
      ++pos_;
      return true;
    }
    return false;
  }

  static bool Fail(const std::string& path, const std::string& what, Error* err) {
    *err = Bad(path, what);
    return false;
  }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

std::string At(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

class Decoder {
 public:
  explicit Decoder(std::string_view in) : r_(in), err_(Code::kOk, "") {}

  const Error& error() const { return err_; }
  bool Finish() { return r_.done() || Reader::Fail("", "extra bytes after the value", &err_); }

  // go-cty's unmarshal.
  bool Typed(const Type& ty, const std::string& path, int depth, Value* out) {
    if (depth > kMaxMsgpackDepth) return Reader::Fail(path, "nested too deeply", &err_);
    bool ext;
    if (!r_.Ext(path, &ext, &err_)) return false;
    if (ext) {
      *out = Value::Unknown(ty);
      return true;
    }
    if (ty.kind == Type::kDynamic) return Implied(path, depth, out);
    if (r_.Nil()) {
      *out = Value::Null(ty);
      return true;
    }
    switch (ty.kind) {
      case Type::kBool: {
        uint8_t c = 0;
        r_.Peek(&c);
        if (c != 0xc2 && c != 0xc3) return Reader::Fail(path, "bool is required", &err_);
        std::string_view skip;
        r_.Take(1, &skip);
        *out = Value::Bool(c == 0xc3);
        return true;
      }
      case Type::kNumber: {
        Number n;
        if (!r_.ReadNumber(path, &n, &err_)) return false;
        *out = Value::Num(std::move(n));
        return true;
      }
      case Type::kString: {
        std::string_view s;
        if (!r_.ReadString(path, &s, &err_)) return false;
        *out = Value::String(std::string(s));
        return true;
      }
      case Type::kList:
      case Type::kSet:
      case Type::kTuple: {
        size_t n;
        if (!r_.Len(false, path, &n, &err_)) return false;
        if (ty.kind == Type::kTuple && n != 0 && n != ty.elems.size()) {
          return Reader::Fail(path, Format("a tuple of length %zu is required", ty.elems.size()), &err_);
        }
        std::vector<Value> elems(n);
        for (size_t i = 0; i < n; ++i) {
          if (!Typed(ty.kind == Type::kTuple ? ty.elems[i] : ty.elems[0], At(path, i), depth + 1, &elems[i])) return false;
        }
        if (ty.kind == Type::kTuple) {
          *out = Value::Tuple(std::move(elems));
          return true;
        }
        // A collection's type is its elements' (cty.ListVal): those of an
        // `any` list arrive with their own types, and an empty map reads
        // as an empty object whatever the attributes wanted (go-cty); they
        // must agree.
        Type ety = ty.elems[0];
        if (!elems.empty()) {
          ety = elems[0].type;
          for (const Value& e : elems) {
            if (e.type != ety) return Reader::Fail(path, "elements of differing types", &err_);
          }
        }
        *out = Value::Collection(ty.kind, std::move(ety), std::move(elems));
        return true;
      }
      case Type::kMap:
      case Type::kObject: {
        size_t n;
        if (!r_.Len(true, path, &n, &err_)) return false;
        if (ty.kind == Type::kObject && n != 0 && n != ty.names.size()) {
          return Reader::Fail(path, Format("an object with %zu attributes is required (%zu given)", ty.names.size(), n),
                              &err_);
        }
        std::vector<std::string> keys(n);
        std::vector<Value> vals(n);
        for (size_t i = 0; i < n; ++i) {
          std::string_view key;
          if (!r_.ReadString(path, &key, &err_)) return false;
          keys[i] = std::string(key);
          std::string kp = KeyPath(path, keys[i]);
          const Type* ety = &ty.elems[0];
          if (ty.kind == Type::kObject) {
            auto it = std::lower_bound(ty.names.begin(), ty.names.end(), keys[i]);
            if (it == ty.names.end() || *it != keys[i]) return Reader::Fail(kp, "unsupported attribute", &err_);
            ety = &ty.elems[static_cast<size_t>(it - ty.names.begin())];
          }
          if (!Typed(*ety, kp, depth + 1, &vals[i])) return false;
        }
        return Keyed(std::move(keys), std::move(vals), ty.kind == Type::kMap ? &ty : nullptr, path, out);
      }
      case Type::kDynamic: break;
    }
    return false;
  }

  // What the bytes imply (cty's ImpliedType), decoded as that.
  bool Implied(const std::string& path, int depth, Value* out) {
    if (depth > kMaxMsgpackDepth) return Reader::Fail(path, "nested too deeply", &err_);
    bool ext;
    if (!r_.Ext(path, &ext, &err_)) return false;
    if (ext) {
      *out = Value::Unknown(Type());
      return true;
    }
    uint8_t c;
    if (!r_.Peek(&c)) return Reader::Fail(path, "truncated", &err_);
    if (r_.Nil()) {
      *out = Value::Null(Type());
      return true;
    }
    if (c == 0xc2 || c == 0xc3) return Typed(Type(Type::kBool), path, depth, out);
    if ((c & 0xe0) == 0xa0 || (c >= 0xd9 && c <= 0xdb) || (c >= 0xc4 && c <= 0xc6)) {
      return Typed(Type(Type::kString), path, depth, out);
    }
    if ((c & 0xf0) == 0x90 || c == 0xdc || c == 0xdd) {
      size_t n;
      if (!r_.Len(false, path, &n, &err_)) return false;
      std::vector<Value> elems(n);
      for (size_t i = 0; i < n; ++i) {
        if (!Implied(At(path, i), depth + 1, &elems[i])) return false;
      }
      *out = Value::Tuple(std::move(elems));
      return true;
    }
    if ((c & 0xf0) == 0x80 || c == 0xde || c == 0xdf) {
      size_t n;
      if (!r_.Len(true, path, &n, &err_)) return false;
      std::vector<std::string> keys(n);
      std::vector<Value> vals(n);
      for (size_t i = 0; i < n; ++i) {
        std::string_view key;
        if (!r_.ReadString(path, &key, &err_)) return false;
        keys[i] = std::string(key);
        if (!Implied(KeyPath(path, keys[i]), depth + 1, &vals[i])) return false;
      }
      return Keyed(std::move(keys), std::move(vals), nullptr, path, out);
    }
    return Typed(Type(Type::kNumber), path, depth, out);
  }

 private:
  // A map's or object's entries in key order; a repeated key keeps its
  // last value (a Go map), except in an object, where it would leave
  // another attribute out.
  bool Keyed(std::vector<std::string> keys, std::vector<Value> vals, const Type* map, const std::string& path,
             Value* out) {
    std::string dup;
    if (!SortByKey(&keys, &vals, &dup) && !map) return Reader::Fail(KeyPath(path, dup), "attribute given twice", &err_);
    if (!map) {
      *out = Value::Object(std::move(keys), std::move(vals));
      return true;
    }
    Type ety = map->elems[0];
    if (!vals.empty()) {
      ety = vals[0].type;
      for (const Value& v : vals) {
        if (v.type != ety) return Reader::Fail(path, "elements of differing types", &err_);
      }
    }
    *out = Value::Map(std::move(ety), std::move(keys), std::move(vals));
    return true;
  }

  Reader r_;
  Error err_;
};

}  // namespace

std::string TypeJson(const Type& ty) {
  std::string out;
  AppendTypeJson(ty, &out);
  return out;
}

std::string MsgpackEncode(const Value& v) {
  std::string out;
  Marshal(v, v.type, &out, nullptr);
  return out;
}

std::string MsgpackEncodeAs(const Value& v, const Type& ty) {
  static const Wrap wrap = [](const Value& x, std::string* out) {
    out->push_back(static_cast<char>(0x92));
    PutBin(out, TypeJson(x.type));
    Marshal(x, x.type, out, nullptr);
  };
  std::string out;
  Marshal(v, ty, &out, wrap);
  return out;
}

Result<Value> MsgpackDecode(std::string_view bytes, const Type& ty) {
  Decoder d(bytes);
  Value v;
  if (!d.Typed(ty, "", 0, &v) || !d.Finish()) return d.error();
  return v;
}

Result<Value> MsgpackDecodeImplied(std::string_view bytes) {
  Decoder d(bytes);
  Value v;
  if (!d.Implied("", 0, &v) || !d.Finish()) return d.error();
  return v;
}

}  // namespace outpost::driver::nomad
