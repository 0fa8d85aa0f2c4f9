// cty's types and values (zclconf/go-cty), as a Nomad client holds a plugin
// or task config between decoding it with the plugin's schema
// (driver/nomad/hclspec) and encoding it for the plugin
// (driver/nomad/cty_msgpack). Owns: Type, Number (exact decimals, as cty's
// 512-bit big.Float holds what configs contain), Value, cty's conversions
// between types (convert.Convert: the unsafe ones too, string to number and
// bool), unification of block values, and set order and equality. Does not
// own: parsing configs or schemas (hclspec), msgpack (cty_msgpack).
// Number's methods are in cty_number.cc.
//
// Values carry their own type (an object's is made of its attributes'
// types), as cty's do: a config is encoded with its value's type, never
// the schema's, so no dynamic wrapper ever reaches a plugin.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace outpost::driver::nomad {

struct Type {
  enum Kind : uint8_t { kDynamic, kString, kNumber, kBool, kList, kSet, kMap, kObject, kTuple };
  Kind kind = kDynamic;
  // list, set, map: the element type; tuple: the element types; object:
  // the attribute types, in the order of names.
  std::vector<Type> elems;
  std::vector<std::string> names;  // object: attribute names, sorted

  Type() = default;
  explicit Type(Kind k) : kind(k) {}
  static Type Collection(Kind k, Type elem);
  static Type Tuple(std::vector<Type> elems);
  // names sorted and unique, one type each.
  static Type Object(std::vector<std::string> names, std::vector<Type> types);

  bool operator==(const Type& o) const { return kind == o.kind && elems == o.elems && names == o.names; }
  bool operator!=(const Type& o) const { return !(*this == o); }
  bool primitive() const { return kind == kString || kind == kNumber || kind == kBool; }
  bool collection() const { return kind == kList || kind == kSet || kind == kMap; }
  bool HasDynamic() const;
  // "string", "list of number", "map of any", "object", "tuple".
  std::string Name() const;
};

// A cty number: an exact decimal (digits x 10^exp) or an infinity. Numbers
// from text keep every digit given (up to kMaxDigits); numbers from a
// float64 (msgpack) are that double exactly, as cty.NumberFloatVal.
class Number {
 public:
  static constexpr size_t kMaxDigits = 153;  // what 512 bits keep exactly
  static constexpr int kMaxExp10 = 400;      // |10-exponent| of the leading digit

  enum class Parsed : uint8_t { kOk, kSyntax, kRange };
  // cty.ParseNumberVal's syntax (big.ParseFloat, base 10): an optional
  // sign, then Inf, inf or digits with an optional fraction and exponent.
  static Parsed Parse(std::string_view text, Number* out);
  static Number Int(int64_t v);
  static Number Uint(uint64_t v);
  static Number Double(double v);  // finite or infinite, not NaN
  static Number Infinity(bool negative);

  bool inf() const { return inf_; }
  bool negative() const { return neg_; }
  bool zero() const { return !inf_ && digits_.empty(); }
  // Exact conversions only.
  bool ToInt64(int64_t* out) const;
  bool ToDouble(double* out) const;
  // big.Float.Text('f', -1): plain decimal digits, the shortest that read
  // back for a number from a float64; "+Inf", "-Inf".
  std::string Text() const;
  // big.Float.String() (Text('g', 10)), which cty orders sets of compound
  // values by.
  std::string Text10g() const;
  int Compare(const Number& o) const;
  bool operator==(const Number& o) const { return Compare(o) == 0; }
  Number Negated() const;

 private:
  void Normalize();
  // Digits after rounding to n significant ones (big's decimal rounding:
  // half to even only when exactly half), and the shifted exponent.
  std::string RoundedDigits(size_t n, int32_t* point) const;

  bool neg_ = false;
  bool inf_ = false;
  bool f64_ = false;    // from a float64: Text uses the shortest digits
  std::string digits_;  // no leading or trailing zeros; "" is zero
  int32_t exp_ = 0;
};

struct Value {
  enum class State : uint8_t { kKnown, kNull, kUnknown };
  Type type;
  State state = State::kNull;
  bool b = false;
  Number n;
  std::string s;
  // list, set, tuple: the elements (a set's in cty's order, without
  // duplicates); map, object: the values, in the order of keys.
  std::vector<Value> elems;
  std::vector<std::string> keys;  // map, object: sorted

  static Value Null(Type t);
  static Value Unknown(Type t);
  static Value String(std::string v);
  static Value Num(Number v);
  static Value Bool(bool v);
  // list or set of elem (elements of that type); a set is put in cty's
  // order and loses duplicates.
  static Value Collection(Type::Kind kind, Type elem, std::vector<Value> elems);
  static Value Tuple(std::vector<Value> elems);
  // keys sorted and unique, one value each.
  static Value Map(Type elem, std::vector<std::string> keys, std::vector<Value> vals);
  static Value Object(std::vector<std::string> keys, std::vector<Value> vals);

  bool known() const { return state == State::kKnown; }
  bool null() const { return state == State::kNull; }
  // Whether an unknown value is anywhere in it.
  bool HasUnknown() const;
};

// cty's RawEquals: same type, same state, same contents (numbers by value).
bool RawEqual(const Value& a, const Value& b);

// Puts a set's elements in cty's iteration order (strings, numbers, bools
// by value, compound values by cty's set hash text; nulls, then unknowns,
// last) and drops known duplicates.
void NormalizeSet(std::vector<Value>* elems, const Type& elem);

using ConvertErrors = std::vector<std::string>;

// cty's convert.Convert(in, want): number and bool to string, string to
// number ("a number is required") and to bool ("true", "1", "false", "0"),
// tuples to lists, sets and tuples, objects to maps and objects (missing
// attributes are an error, extra ones are dropped), element types of
// list(any) and map(any) unified; null and unknown values take the wanted
// type. On failure appends "<path>: <why>" to *errors and returns false.
bool Convert(const Value& in, const Type& want, const std::string& path, Value* out, ConvertErrors* errors);

// cty's convert.UnifyUnsafe, for the common cases (what hcldec needs for
// block lists whose values differ in type): equal types; primitives, with
// string absorbing number and bool; objects with the same attributes,
// tuples of one length, and collections of one kind, element-wise. False
// when there is none.
bool Unify(const std::vector<Type>& types, Type* out);
// Unifies the values' types and converts each value to the result, *out;
// false when there is no common type (the values are then left as they
// were or partly converted).
bool UnifyValues(std::vector<Value>* vals, Type* out);

// The order that sorts n items by less(ctx, a, b), stably (one sort for
// every caller: each std::sort instance costs a kilobyte of code).
std::vector<uint32_t> SortOrder(size_t n, bool (*less)(const void* ctx, uint32_t a, uint32_t b), const void* ctx);
// The stable order of keys.
std::vector<uint32_t> KeyOrder(const std::vector<std::string>& keys);

// Sorts keys, and vals with them. A key given more than once keeps its last
// value; then the first such key is in *dup and false is returned.
template <typename T>
bool SortByKey(std::vector<std::string>* keys, std::vector<T>* vals, std::string* dup) {
  std::vector<uint32_t> order = KeyOrder(*keys);
  std::vector<std::string> k;
  std::vector<T> v;
  bool ok = true;
  for (size_t i = 0; i < order.size(); ++i) {
    uint32_t j = order[i];
    if (i + 1 < order.size() && (*keys)[order[i + 1]] == (*keys)[j]) {
      if (ok) *dup = (*keys)[j];
      ok = false;
      continue;
    }
    k.push_back(std::move((*keys)[j]));
    v.push_back(std::move((*vals)[j]));
  }
  *keys = std::move(k);
  *vals = std::move(v);
  return ok;
}

// How a value reads in messages: "number", `string "abc"`, "array", ...
std::string Describe(const Value& v);

// A path to the key of an object or map: "a.b", or `a["x y"]` for a key
// that is not a plain name (Go's quoting).
std::string KeyPath(const std::string& path, const std::string& key);

}  // namespace outpost::driver::nomad
