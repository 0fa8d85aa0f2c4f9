// driver/nomad/cty_msgpack against bytes: the encodings go-cty's
// msgpack.Marshal produces with Nomad's settings (compact ints, float64
// only, decimal strings past that, sorted keys), worked out byte by byte
// from go-cty and vmihailenco/msgpack; go-cty's round-trip cases; cty's
// numbers and set order; and the decoder on hostile bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "driver/nomad/cty.h"
#include "driver/nomad/cty_msgpack.h"
#include "nomad_test_util.h"

namespace outpost::driver::nomad {
namespace {

using test::Hex;
using test::ToHex;

Value S(const std::string& s) { return Value::String(s); }
Value N(int64_t v) { return Value::Num(Number::Int(v)); }
Value Dec(const std::string& text) {
  Number n;
  EXPECT_EQ(Number::Parse(text, &n), Number::Parsed::kOk) << text;
  return Value::Num(n);
}
Value Obj(std::vector<std::string> keys, std::vector<Value> vals) {
  return Value::Object(std::move(keys), std::move(vals));
}
Value ListOf(Type::Kind kind, Type elem, std::vector<Value> vals) {
  return Value::Collection(kind, std::move(elem), std::move(vals));
}
const Type kString(Type::kString);
const Type kNumber(Type::kNumber);
const Type kBool(Type::kBool);

std::string Enc(const Value& v) { return ToHex(MsgpackEncode(v)); }

// Encodes v, decodes it with its own type and checks it comes back equal
// and encodes to the same bytes.
void RoundTrip(const Value& v) {
  std::string b = MsgpackEncode(v);
  auto back = MsgpackDecode(b, v.type);
  ASSERT_TRUE(back.ok()) << back.error().message() << " for " << ToHex(b);
  EXPECT_TRUE(RawEqual(*back, v)) << ToHex(b);
  EXPECT_EQ(MsgpackEncode(*back), b);
}

// ---- the worked examples ----------------------------------------------------

TEST(NomadMsgpack, SkeletonConfigs) {
  EXPECT_EQ(Enc(Obj({"shell"}, {S("bash")})), "81 a5 73 68 65 6c 6c a4 62 61 73 68");
  EXPECT_EQ(Enc(Obj({"greeting"}, {S("Hello, World!")})),
            "81 a8 67 72 65 65 74 69 6e 67 ad 48 65 6c 6c 6f 2c 20 57 6f 72 6c 64 21");
}

TEST(NomadMsgpack, MixedObject) {
  // port = 8080, ratio = 1.5, big = 18446744073709551617, frac = 0.1,
  // enabled = true, tags = ["a","b"], env = {A = "1"}, opt unset; keys
  // sorted. (2^64 itself would be a float64: it is one exactly.)
  Value env = Value::Map(kString, {"A"}, {S("1")});
  Value tags = ListOf(Type::kList, kString, {S("a"), S("b")});
  Value v = Obj({"big", "enabled", "env", "frac", "opt", "port", "ratio", "tags"},
                {Dec("18446744073709551617"), Value::Bool(true), env, Dec("0.1"), Value::Null(kString), N(8080),
                 Dec("1.5"), tags});
  EXPECT_EQ(MsgpackEncode(v), Hex("88 a3 626967 b4 3138343436373434303733373039353531363137"
                                  " a7 656e61626c6564 c3"
                                  " a3 656e76 81 a1 41 a1 31"
                                  " a4 66726163 a3 302e31"
                                  " a3 6f7074 c0"
                                  " a4 706f7274 cd 1f 90"
                                  " a5 726174696f cb 3f f8 00 00 00 00 00 00"
                                  " a4 74616773 92 a1 61 a1 62"));
  RoundTrip(v);
}

TEST(NomadMsgpack, TwoToThe64IsAFloat64) {
  // go-cty tries Int64, then Float64, and 2^64 is exactly a float64.
  EXPECT_EQ(Enc(Dec("18446744073709551616")), "cb 43 f0 00 00 00 00 00 00");
  EXPECT_EQ(Enc(Dec("-9223372036854775809")), "b4 2d 39 32 32 33 33 37 32 30 33 36 38 35 34 37 37 35 38 30 39");
  // 10^22 is a float64 exactly (5^22 needs 52 bits); 10^30 is not.
  EXPECT_EQ(Enc(Dec("1e22")), "cb 44 80 f0 cf 06 4d d5 92");
  EXPECT_EQ(MsgpackEncode(Dec("1e30")), Hex("bf 31") + std::string(30, '0'));
}

TEST(NomadMsgpack, Integers) {
  EXPECT_EQ(Enc(N(0)), "00");
  EXPECT_EQ(Enc(N(127)), "7f");
  EXPECT_EQ(Enc(N(128)), "cc 80");
  EXPECT_EQ(Enc(N(255)), "cc ff");
  EXPECT_EQ(Enc(N(256)), "cd 01 00");
  EXPECT_EQ(Enc(N(65535)), "cd ff ff");
  EXPECT_EQ(Enc(N(65536)), "ce 00 01 00 00");
  EXPECT_EQ(Enc(N(2147483648)), "ce 80 00 00 00");
  EXPECT_EQ(Enc(N(4294967296)), "cf 00 00 00 01 00 00 00 00");
  EXPECT_EQ(Enc(N(INT64_MAX)), "cf 7f ff ff ff ff ff ff ff");
  EXPECT_EQ(Enc(N(-1)), "ff");
  EXPECT_EQ(Enc(N(-32)), "e0");
  EXPECT_EQ(Enc(N(-33)), "d0 df");
  EXPECT_EQ(Enc(N(-128)), "d0 80");
  EXPECT_EQ(Enc(N(-129)), "d1 ff 7f");
  EXPECT_EQ(Enc(N(-32769)), "d2 ff ff 7f ff");
  EXPECT_EQ(Enc(N(-2147483649LL)), "d3 ff ff ff ff 7f ff ff ff");
  EXPECT_EQ(Enc(N(INT64_MIN)), "d3 80 00 00 00 00 00 00 00");
  // An integer written with a fraction or an exponent is still one.
  EXPECT_EQ(Enc(Dec("5.0")), "05");
  EXPECT_EQ(Enc(Dec("1e2")), "64");
  EXPECT_EQ(Enc(Dec("-0")), "00");
}

TEST(NomadMsgpack, FractionsAndSpecials) {
  EXPECT_EQ(Enc(Dec("0.25")), "cb 3f d0 00 00 00 00 00 00");
  EXPECT_EQ(Enc(Dec("-2.5")), "cb c0 04 00 00 00 00 00 00");
  // Not a binary fraction: a string, as big.Float.Text('f', -1) prints it.
  EXPECT_EQ(Enc(Dec("0.8")), "a3 30 2e 38");
  EXPECT_EQ(Enc(Dec("1e-7")), "a9 30 2e 30 30 30 30 30 30 31");
  EXPECT_EQ(Enc(Value::Num(Number::Infinity(false))), "cb 7f f0 00 00 00 00 00 00");
  EXPECT_EQ(Enc(Value::Num(Number::Infinity(true))), "cb ff f0 00 00 00 00 00 00");
  // A float64 that came as one (msgpack, not text) stays one.
  EXPECT_EQ(Enc(Value::Num(Number::Double(0.1))), "cb 3f b9 99 99 99 99 99 9a");
  EXPECT_EQ(Enc(Value::Num(Number::Double(3.0))), "03");
}

TEST(NomadMsgpack, NullsUnknownsBools) {
  EXPECT_EQ(Enc(Value::Null(kString)), "c0");
  EXPECT_EQ(Enc(Value::Null(Type())), "c0");
  EXPECT_EQ(Enc(Value::Null(Type::Collection(Type::kList, kNumber))), "c0");
  EXPECT_EQ(Enc(Value::Unknown(kString)), "d4 00 00");
  EXPECT_EQ(Enc(Value::Unknown(Type())), "d4 00 00");
  EXPECT_EQ(Enc(Value::Bool(true)), "c3");
  EXPECT_EQ(Enc(Value::Bool(false)), "c2");
}

TEST(NomadMsgpack, StringLengths) {
  EXPECT_EQ(Enc(S("")), "a0");
  EXPECT_EQ(MsgpackEncode(S(std::string(31, 'x'))).substr(0, 1), Hex("bf"));
  EXPECT_EQ(MsgpackEncode(S(std::string(32, 'x'))).substr(0, 2), Hex("d9 20"));
  EXPECT_EQ(MsgpackEncode(S(std::string(255, 'x'))).substr(0, 2), Hex("d9 ff"));
  EXPECT_EQ(MsgpackEncode(S(std::string(256, 'x'))).substr(0, 3), Hex("da 01 00"));
  EXPECT_EQ(MsgpackEncode(S(std::string(65536, 'x'))).substr(0, 5), Hex("db 00 01 00 00"));
  EXPECT_EQ(Enc(S("h\xc3\xa9")), "a3 68 c3 a9");
  RoundTrip(S(std::string(70000, 'y')));
}

TEST(NomadMsgpack, CollectionHeaders) {
  std::vector<Value> fifteen(15, N(1)), sixteen(16, N(1));
  EXPECT_EQ(MsgpackEncode(Value::Tuple(fifteen)).substr(0, 1), Hex("9f"));
  EXPECT_EQ(MsgpackEncode(Value::Tuple(sixteen)).substr(0, 3), Hex("dc 00 10"));
  std::vector<Value> many(70000, N(1));
  EXPECT_EQ(MsgpackEncode(ListOf(Type::kList, kNumber, many)).substr(0, 5), Hex("dd 00 01 11 70"));
  std::vector<std::string> keys;
  std::vector<Value> vals;
  for (int i = 0; i < 16; ++i) {
    keys.push_back(std::string(1, static_cast<char>('a' + i)));
    vals.push_back(N(i));
  }
  EXPECT_EQ(MsgpackEncode(Value::Map(kNumber, keys, vals)).substr(0, 4), Hex("de 00 10 a1"));
  EXPECT_EQ(Enc(ListOf(Type::kList, kString, {})), "90");
  EXPECT_EQ(Enc(Value::Map(kString, {}, {})), "80");
  EXPECT_EQ(Enc(Obj({}, {})), "80");
  EXPECT_EQ(Enc(Value::Tuple({})), "90");
}

TEST(NomadMsgpack, MapsAndObjectsSortTheirKeys) {
  // Byte order: upper case before lower case, shorter prefix first.
  Value m = Value::Map(kNumber, {"B", "a", "ab"}, {N(1), N(2), N(3)});
  EXPECT_EQ(Enc(m), "83 a1 42 01 a1 61 02 a2 61 62 03");
  std::vector<std::string> keys = {"z", "a"};
  std::vector<Value> vals = {N(1), N(2)};
  std::string dup;
  ASSERT_TRUE(SortByKey(&keys, &vals, &dup));
  Value o = Obj(keys, vals);
  EXPECT_EQ(Enc(o), "82 a1 61 02 a1 7a 01");
  keys = {"b", "a", "b"};
  vals = {N(1), N(2), N(3)};
  EXPECT_FALSE(SortByKey(&keys, &vals, &dup));  // the last value of a key kept
  EXPECT_EQ(dup, "b");
  EXPECT_EQ(Enc(Obj(keys, vals)), "82 a1 61 02 a1 62 03");
  RoundTrip(m);
  RoundTrip(o);
}

TEST(NomadMsgpack, DynamicForm) {
  // Marshal(v, any): [bin(type JSON), value]. Nomad never sends it (it
  // marshals with the value's own type), but cty's tests pin it down.
  EXPECT_EQ(ToHex(MsgpackEncodeAs(S("x"), Type())), "92 c4 08 22 73 74 72 69 6e 67 22 a1 78");
  Value l = ListOf(Type::kList, kString, {S("hello")});
  EXPECT_EQ(ToHex(MsgpackEncodeAs(l, Type::Collection(Type::kList, Type()))),
            "91 92 c4 08 22 73 74 72 69 6e 67 22 a5 68 65 6c 6c 6f");
  EXPECT_EQ(ToHex(MsgpackEncodeAs(Value::Null(kString), Type())), "92 c4 08 22 73 74 72 69 6e 67 22 c0");
  EXPECT_EQ(ToHex(MsgpackEncodeAs(Value::Unknown(Type()), Type())), "d4 00 00");
  EXPECT_EQ(TypeJson(Type::Object({"a", "b<"}, {Type::Collection(Type::kSet, kNumber), Type::Tuple({kBool})})),
            "[\"object\",{\"a\":[\"set\",\"number\"],\"b\\u003c\":[\"tuple\",[\"bool\"]]}]");
  EXPECT_EQ(TypeJson(Type::Collection(Type::kMap, Type())), "[\"map\",\"dynamic\"]");
}

// go-cty's cty/msgpack/roundtrip_test.go, the cases without refinements and
// the dynamic form.
TEST(NomadMsgpack, GoCtyRoundTrips) {
  RoundTrip(S("hello"));
  RoundTrip(S(""));
  RoundTrip(Value::Null(kString));
  RoundTrip(Value::Unknown(kString));
  RoundTrip(Value::Bool(true));
  RoundTrip(Value::Bool(false));
  RoundTrip(Value::Null(kBool));
  RoundTrip(Value::Unknown(kBool));
  RoundTrip(N(1));
  RoundTrip(Value::Num(Number::Double(1.5)));
  RoundTrip(Dec(std::string(100, '9')));
  RoundTrip(Dec("0.8"));
  RoundTrip(Value::Num(Number::Infinity(false)));
  RoundTrip(Value::Num(Number::Infinity(true)));
  RoundTrip(Value::Unknown(kNumber));
  Type ls = Type::Collection(Type::kList, kString);
  RoundTrip(ListOf(Type::kList, kString, {S("hello")}));
  RoundTrip(ListOf(Type::kList, kString, {Value::Unknown(kString)}));
  RoundTrip(ListOf(Type::kList, kString, {Value::Null(kString)}));
  RoundTrip(Value::Null(ls));
  RoundTrip(ListOf(Type::kList, kString, {}));
  RoundTrip(Value::Unknown(ls));
  RoundTrip(ListOf(Type::kSet, kString, {S("hello")}));
  RoundTrip(ListOf(Type::kSet, kString, {Value::Unknown(kString)}));
  RoundTrip(ListOf(Type::kSet, kString, {Value::Null(kString)}));
  RoundTrip(ListOf(Type::kSet, kString, {}));
  RoundTrip(Value::Map(kString, {"greeting"}, {S("hello")}));
  RoundTrip(Value::Map(kString, {"greeting"}, {Value::Unknown(kString)}));
  RoundTrip(Value::Map(kString, {"greeting"}, {Value::Null(kString)}));
  RoundTrip(Value::Map(kString, {}, {}));
  RoundTrip(Value::Tuple({S("hello")}));
  RoundTrip(Value::Tuple({Value::Unknown(kString)}));
  RoundTrip(Value::Tuple({Value::Null(kString)}));
  RoundTrip(Value::Tuple({}));
  RoundTrip(Obj({"greeting"}, {S("hello")}));
  RoundTrip(Obj({"greeting"}, {Value::Unknown(kString)}));
  RoundTrip(Obj({"greeting"}, {Value::Null(kString)}));
  RoundTrip(Obj({"a", "b"}, {Value::Null(kString), Value::Null(kString)}));
  RoundTrip(Obj({"a", "b"}, {Value::Unknown(kString), Value::Unknown(kString)}));
  RoundTrip(Obj({}, {}));
  RoundTrip(Value::Unknown(Type()));
}

// ---- numbers ----------------------------------------------------------------

TEST(NomadNumber, ParseAndText) {
  struct Case {
    const char* in;
    const char* text;
  } cases[] = {
      {"0", "0"}, {"-0", "0"}, {"007", "7"}, {"1.50", "1.5"}, {".5", "0.5"}, {"5.", "5"}, {"+3", "3"},
      {"1e3", "1000"}, {"1E-3", "0.001"}, {"-12.345e1", "-123.45"}, {"123456789012345678901234567890",
      "123456789012345678901234567890"}, {"Inf", "+Inf"}, {"-inf", "-Inf"},
  };
  for (const Case& c : cases) {
    Number n;
    ASSERT_EQ(Number::Parse(c.in, &n), Number::Parsed::kOk) << c.in;
    EXPECT_EQ(n.Text(), c.text) << c.in;
  }
  for (const char* bad : {"", "-", ".", "e3", "1e", "1e+", "0x10", "1_000", " 1", "1 ", "abc", "1.2.3", "NaN", "Infinity"}) {
    Number n;
    EXPECT_EQ(Number::Parse(bad, &n), Number::Parsed::kSyntax) << bad;
  }
  Number n;
  EXPECT_EQ(Number::Parse("1e401", &n), Number::Parsed::kRange);
  EXPECT_EQ(Number::Parse("1e-401", &n), Number::Parsed::kRange);
  EXPECT_EQ(Number::Parse(std::string(154, '7'), &n), Number::Parsed::kRange);
  EXPECT_EQ(Number::Parse(std::string(153, '7'), &n), Number::Parsed::kOk);
  EXPECT_EQ(Number::Parse("1" + std::string(300, '0'), &n), Number::Parsed::kOk);  // one digit, e300
}

TEST(NomadNumber, FromDoubles) {
  // Exactly the double; Text is its shortest decimal form, as big.Float
  // prints one of 53 bits.
  EXPECT_EQ(Number::Double(0.1).Text(), "0.1");
  EXPECT_EQ(Number::Double(1e-7).Text(), "0.0000001");
  EXPECT_EQ(Number::Double(123456.789).Text(), "123456.789");
  EXPECT_EQ(Number::Double(1e21).Text(), "1000000000000000000000");
  EXPECT_EQ(Number::Double(-0.0).Text(), "0");
  Number dec;
  ASSERT_EQ(Number::Parse("0.1", &dec), Number::Parsed::kOk);
  EXPECT_FALSE(Number::Double(0.1) == dec);  // 0.1000000000000000055511151231257827...
}

TEST(NomadNumber, ExactConversions) {
  int64_t i;
  double d;
  EXPECT_TRUE(Number::Int(INT64_MIN).ToInt64(&i));
  EXPECT_EQ(i, INT64_MIN);
  EXPECT_FALSE(Number::Uint(UINT64_MAX).ToInt64(&i));
  EXPECT_TRUE(Number::Uint(UINT64_MAX).ToDouble(&d) == false);  // 2^64-1 needs 64 bits
  EXPECT_TRUE(Number::Uint(uint64_t{1} << 63).ToDouble(&d));
  EXPECT_EQ(d, 9223372036854775808.0);
  Number n;
  ASSERT_EQ(Number::Parse("4.9406564584124654e-324", &n), Number::Parsed::kOk);
  EXPECT_FALSE(n.ToDouble(&d));  // near the smallest denormal, not it
  EXPECT_TRUE(Number::Double(5e-324).ToDouble(&d));
  EXPECT_EQ(d, 5e-324);
  EXPECT_TRUE(Number::Double(1.7976931348623157e308).ToDouble(&d));
  ASSERT_EQ(Number::Parse("1.5", &n), Number::Parsed::kOk);
  EXPECT_FALSE(n.ToInt64(&i));
}

TEST(NomadNumber, CompareAndText10g) {
  Number a, b;
  ASSERT_EQ(Number::Parse("-2", &a), Number::Parsed::kOk);
  ASSERT_EQ(Number::Parse("10", &b), Number::Parsed::kOk);
  EXPECT_LT(a.Compare(b), 0);
  EXPECT_GT(Number::Infinity(false).Compare(b), 0);
  EXPECT_LT(Number::Infinity(true).Compare(a), 0);
  EXPECT_EQ(Number::Int(100).Compare(Number::Double(100.0)), 0);
  // big.Float.String(): %g with 10 digits.
  struct Case {
    const char* in;
    const char* g;
  } cases[] = {
      {"8080", "8080"}, {"1.5", "1.5"}, {"0", "0"}, {"-3", "-3"}, {"12345678901", "1.23456789e+10"},
      {"1234567890", "1234567890"}, {"0.0001", "0.0001"}, {"0.00001", "1e-05"}, {"123.456", "123.456"},
      {"1e100", "1e+100"}, {"0.1", "0.1"}, {"99999999995", "1e+11"}, {"2.00000000005", "2"},
      {"2.000000001", "2.000000001"}, {"1.23456789012345", "1.23456789"},
  };
  for (const Case& c : cases) {
    Number n;
    ASSERT_EQ(Number::Parse(c.in, &n), Number::Parsed::kOk) << c.in;
    EXPECT_EQ(n.Text10g(), c.g) << c.in;
  }
}

// ---- sets -------------------------------------------------------------------

TEST(NomadSet, PrimitivesSortByValueAndLoseDuplicates) {
  Value s = ListOf(Type::kSet, kString, {S("b"), S("a"), S("B"), S("a")});
  EXPECT_EQ(Enc(s), "93 a1 42 a1 61 a1 62");
  Value n = ListOf(Type::kSet, kNumber, {N(10), N(-1), Dec("2.5"), Dec("10.0")});
  EXPECT_EQ(Enc(n), "93 ff cb 40 04 00 00 00 00 00 00 0a");
  Value b = ListOf(Type::kSet, kBool, {Value::Bool(true), Value::Bool(false), Value::Bool(true)});
  EXPECT_EQ(Enc(b), "92 c2 c3");
  // Nulls, then unknowns, last; unknowns are never duplicates.
  Value u = ListOf(Type::kSet, kString,
                   {Value::Unknown(kString), S("z"), Value::Null(kString), Value::Unknown(kString)});
  EXPECT_EQ(Enc(u), "94 a1 7a c0 d4 00 00 d4 00 00");
}

TEST(NomadSet, CompoundValuesSortByCtysHashText) {
  // cty orders these by their set hash text: objects "<" attribute values
  // in name order, each followed by ";", strings Go-quoted, numbers %g.
  Type t = Type::Object({"n", "s"}, {kNumber, kString});
  Value a = Obj({"n", "s"}, {N(10), S("x")});  // <10;"x";>
  Value b = Obj({"n", "s"}, {N(9), S("x")});   // <9;"x";>
  Value c = Obj({"n", "s"}, {N(10), S("!")});  // <10;"!";>
  Value s = ListOf(Type::kSet, t, {a, b, c, a});
  ASSERT_EQ(s.elems.size(), 3u);
  EXPECT_TRUE(RawEqual(s.elems[0], c));
  EXPECT_TRUE(RawEqual(s.elems[1], a));
  EXPECT_TRUE(RawEqual(s.elems[2], b));
  // Lists: "[" elements "]"; control characters escaped as Go does.
  Type lt = Type::Collection(Type::kList, kString);
  Value l1 = ListOf(Type::kList, kString, {S("\n")});  // ["\n";]
  Value l2 = ListOf(Type::kList, kString, {S("A")});   // ["A";]
  Value ls = ListOf(Type::kSet, lt, {l2, l1});
  EXPECT_TRUE(RawEqual(ls.elems[0], l2));  // '"A' < '"\\'
  RoundTrip(s);
  RoundTrip(ls);
}

// ---- decoding ---------------------------------------------------------------

TEST(NomadMsgpackDecode, NumbersFromEveryEncoding) {
  struct Case {
    const char* hex;
    const char* text;
  } cases[] = {
      {"05", "5"}, {"e0", "-32"}, {"cc ff", "255"}, {"cd ff ff", "65535"}, {"ce ff ff ff ff", "4294967295"},
      {"cf ff ff ff ff ff ff ff ff", "18446744073709551615"}, {"d0 80", "-128"}, {"d1 80 00", "-32768"},
      {"d2 80 00 00 00", "-2147483648"}, {"d3 80 00 00 00 00 00 00 00", "-9223372036854775808"},
      {"ca 3f c0 00 00", "1.5"}, {"cb 3f f8 00 00 00 00 00 00", "1.5"}, {"a4 31 65 2d 31", "0.1"},
      {"c4 03 31 2e 35", "1.5"},
  };
  for (const Case& c : cases) {
    auto v = MsgpackDecode(Hex(c.hex), kNumber);
    ASSERT_TRUE(v.ok()) << c.hex << ": " << v.error().message();
    EXPECT_EQ(v->n.Text(), c.text) << c.hex;
  }
  // 2^64-1 is no int64 and no float64: it goes back as its digits.
  auto big = MsgpackDecode(Hex("cf ff ff ff ff ff ff ff ff"), kNumber);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(MsgpackEncode(*big), Hex("b4 3138343436373434303733373039353531363135"));
  EXPECT_FALSE(MsgpackDecode(Hex("cb 7f f8 00 00 00 00 00 00"), kNumber).ok());  // NaN
  EXPECT_FALSE(MsgpackDecode(Hex("a3 61 62 63"), kNumber).ok());
  EXPECT_FALSE(MsgpackDecode(Hex("c3"), kNumber).ok());
}

TEST(NomadMsgpackDecode, TypedShapes) {
  Type obj = Type::Object({"a", "b"}, {kString, kBool});
  auto v = MsgpackDecode(Hex("82 a1 62 c3 a1 61 a1 78"), obj);
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(v->keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(v->elems[0].s, "x");
  EXPECT_FALSE(MsgpackDecode(Hex("81 a1 61 a1 78"), obj).ok());               // an attribute short
  EXPECT_FALSE(MsgpackDecode(Hex("82 a1 61 a1 78 a1 7a c3"), obj).ok());      // an unknown one
  EXPECT_FALSE(MsgpackDecode(Hex("82 a1 61 a1 78 a1 61 a1 79"), obj).ok());   // one twice
  EXPECT_FALSE(MsgpackDecode(Hex("82 01 a1 78 a1 62 c3"), obj).ok());         // a key that is no string
  // go-cty reads an empty map or array as an empty object or tuple.
  ASSERT_TRUE(MsgpackDecode(Hex("80"), obj).ok());
  EXPECT_TRUE(MsgpackDecode(Hex("80"), obj)->keys.empty());
  Type map = Type::Collection(Type::kMap, kNumber);
  auto m = MsgpackDecode(Hex("82 a1 61 01 a1 61 02"), map);  // a Go map: the last value wins
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Enc(*m), "81 a1 61 02");
  Type tup = Type::Tuple({kString, kNumber});
  EXPECT_TRUE(MsgpackDecode(Hex("92 a1 61 01"), tup).ok());
  EXPECT_FALSE(MsgpackDecode(Hex("91 a1 61"), tup).ok());
  auto set = MsgpackDecode(Hex("93 a1 62 a1 61 a1 62"), Type::Collection(Type::kSet, kString));
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(Enc(*set), "92 a1 61 a1 62");
  EXPECT_FALSE(MsgpackDecode(Hex("91 01"), Type::Collection(Type::kList, kString)).ok());
  EXPECT_FALSE(MsgpackDecode(Hex("01"), Type::Collection(Type::kList, kString)).ok());
  // A collection takes its elements' type, as cty.SetVal does: here an
  // empty object, what go-cty reads an empty map as (msgpack_fuzzer).
  Type objs = Type::Collection(Type::kSet, Type::Object({"k"}, {Type::Collection(Type::kMap, kNumber)}));
  auto quirk = MsgpackDecode(Hex("91 80"), objs);
  ASSERT_TRUE(quirk.ok());
  EXPECT_EQ(quirk->type, Type::Collection(Type::kSet, Type::Object({}, {})));
  EXPECT_EQ(Enc(*quirk), "91 80");
  EXPECT_FALSE(MsgpackDecode(Hex("92 80 81 a1 6b c0"), objs).ok());  // {} and {k}: no one type
  auto nul = MsgpackDecode(Hex("c0"), obj);
  ASSERT_TRUE(nul.ok());
  EXPECT_TRUE(nul->null());
  EXPECT_EQ(nul->type, obj);
}

TEST(NomadMsgpackDecode, UnknownsAndExtensions) {
  for (const char* hex : {"d4 00 00", "d4 05 01", "c7 00 00", "c7 01 00 00"}) {
    auto v = MsgpackDecode(Hex(hex), kString);
    ASSERT_TRUE(v.ok()) << hex;
    EXPECT_EQ(v->state, Value::State::kUnknown);
  }
  // A refinement map (extension 0x0c) is read past: the value is unknown.
  auto r = MsgpackDecode(Hex("c7 03 0c 81 01 c2"), kString);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, Value::State::kUnknown);
  EXPECT_FALSE(MsgpackDecode(Hex("d5 07 00 00"), kString).ok());  // two bytes, another type
  EXPECT_FALSE(MsgpackDecode(Hex("c7 05 0c 81"), kString).ok());  // truncated body
}

TEST(NomadMsgpackDecode, Implied) {
  auto v = MsgpackDecodeImplied(Hex("83 a1 6c 92 01 a1 78 a1 6e c0 a1 62 c4 02 68 69"));
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(v->type.kind, Type::kObject);
  EXPECT_EQ(v->keys, (std::vector<std::string>{"b", "l", "n"}));
  EXPECT_EQ(v->elems[0].s, "hi");
  EXPECT_EQ(v->elems[1].type.kind, Type::kTuple);
  EXPECT_TRUE(v->elems[2].null());
  EXPECT_EQ(Enc(*v), "83 a1 62 a2 68 69 a1 6c 92 01 a1 78 a1 6e c0");
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("81 01 02")).ok());  // an integer key
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("c1")).ok());        // never used
}

TEST(NomadMsgpackDecode, HostileBytes) {
  EXPECT_FALSE(MsgpackDecodeImplied("").ok());
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("01 02")).ok());               // extra bytes
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("dd ff ff ff ff")).ok());      // 4 G elements in nothing
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("df 7f ff ff ff 01")).ok());   // 2 G pairs
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("db ff ff ff ff 61")).ok());   // a 4 GiB string
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("c9 ff ff ff ff 0c")).ok());   // a 4 GiB extension
  EXPECT_FALSE(MsgpackDecodeImplied(Hex("cb 00 00")).ok());            // a short float
  // Nesting: 64 levels are read, 65 are refused before the stack is.
  std::string ok_depth = std::string(64, '\x91') + "\x01";
  EXPECT_TRUE(MsgpackDecodeImplied(ok_depth).ok());
  std::string deep = std::string(65, '\x91') + "\x01";
  auto v = MsgpackDecodeImplied(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().message().find("nested too deeply"), std::string::npos);
  std::string very_deep(1 << 20, '\x91');
  EXPECT_FALSE(MsgpackDecodeImplied(very_deep).ok());
}

}  // namespace
}  // namespace outpost::driver::nomad
