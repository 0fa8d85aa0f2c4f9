// driver/nomad/hclspec: a plugin's Spec tree from its protobuf bytes (every
// kind, the names an Object lends, what Nomad's hclspecutils refuses,
// limits), HCL type and literal expressions, and configs decoded against
// specs as Nomad's client decodes them over HCL's JSON syntax: attributes of
// every type and cty's conversions, blocks, block lists, sets and maps,
// defaults, required fields, ${...} variables, the errors with their
// paths, and the msgpack bytes the plugin gets.
#include <gtest/gtest.h>

#include <string>

#include "base/json.h"
#include "base/pb.h"
#include "driver/nomad/cty_msgpack.h"
#include "driver/nomad/hclspec.h"
#include "nomad_hcl_spec.pb.h"
#include "nomad_test_util.h"

namespace outpost::driver::nomad {
namespace {

namespace t = test;
using test::Hex;
using test::ToHex;

Spec MustSpec(const std::string& bytes) {
  auto s = DecodeSpec(bytes);
  EXPECT_TRUE(s.ok()) << s.error().message();
  return s.ok() ? *s : Spec();
}

std::string SpecError(const std::string& bytes) {
  auto s = DecodeSpec(bytes);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.error().message();
}

picojson::value J(const std::string& text) {
  auto v = json::Parse(text);
  EXPECT_TRUE(v.ok()) << text;
  return v.ok() ? *v : picojson::value();
}

// The config decoded; the msgpack of the value, as hex.
std::string Decoded(const std::string& spec, const std::string& config, DecodeOptions opts = DecodeOptions()) {
  auto v = DecodeConfig(MustSpec(spec), J(config), opts);
  EXPECT_TRUE(v.ok()) << v.error().message();
  return v.ok() ? ToHex(MsgpackEncode(*v)) : "";
}

// Every error, one per line.
std::string Errors(const std::string& spec, const std::string& config, DecodeOptions opts = DecodeOptions()) {
  json::Errors errors;
  DecodeConfig(MustSpec(spec), J(config), opts, &errors);
  EXPECT_FALSE(errors.empty()) << config;
  return json::JoinErrors(errors);
}

// ---- specs ------------------------------------------------------------------

TEST(NomadHclspec, SkeletonSchemas) {
  // hello-world-example: Object{shell: Default{Attr shell string, Literal "bash"}}
  std::string plugin = t::Object({{"shell", t::Default(t::Attr("shell", "string"), t::Literal("\"bash\""))}});
  Spec s = MustSpec(plugin);
  EXPECT_EQ(s.kind, Spec::Kind::kObject);
  ASSERT_EQ(s.keys, std::vector<std::string>{"shell"});
  EXPECT_EQ(s.children[0].kind, Spec::Kind::kDefault);
  EXPECT_EQ(s.children[0].children[0].name, "shell");
  EXPECT_EQ(s.children[0].children[1].literal.s, "bash");
  // No config: the defaults, encoded as the skeleton's SetConfig expects.
  EXPECT_EQ(Decoded(plugin, "null"), "81 a5 73 68 65 6c 6c a4 62 61 73 68");
  EXPECT_EQ(Decoded(plugin, "{}"), "81 a5 73 68 65 6c 6c a4 62 61 73 68");
  EXPECT_EQ(Decoded(plugin, R"({"shell": "fish"})"), "81 a5 73 68 65 6c 6c a4 66 69 73 68");
  std::string task = t::Object({{"greeting", t::Default(t::Attr("greeting", "string"), t::Literal("\"Hello, World!\""))}});
  EXPECT_EQ(Decoded(task, "{}"), "81 a8 67 72 65 65 74 69 6e 67 ad 48 65 6c 6c 6f 2c 20 57 6f 72 6c 64 21");
}

TEST(NomadHclspec, EveryKind) {
  std::string bytes = t::Object({
      {"a", t::Attr("", "number", true)},
      {"arr", t::Array({t::Attr("x", "string"), t::Literal("1")})},
      {"b", t::Block("", t::Object({{"c", t::Attr("", "bool")}}), true)},
      {"env", t::BlockAttrs("", "string")},
      {"l", t::BlockList("", t::Object({}), 1, 3)},
      {"s", t::BlockSet("set", t::Object({}))},
      {"m", t::BlockMap("", {"x", "y"}, t::Object({}))},
  });
  Spec s = MustSpec(bytes);
  ASSERT_EQ(s.keys, (std::vector<std::string>{"a", "arr", "b", "env", "l", "m", "s"}));
  const Spec& a = s.children[0];
  EXPECT_EQ(a.kind, Spec::Kind::kAttr);
  EXPECT_EQ(a.name, "a");  // the Object's key
  EXPECT_TRUE(a.required);
  EXPECT_EQ(a.type.kind, Type::kNumber);
  EXPECT_EQ(s.children[1].kind, Spec::Kind::kArray);
  EXPECT_EQ(s.children[1].children[0].name, "x");
  EXPECT_EQ(s.children[2].kind, Spec::Kind::kBlock);
  EXPECT_TRUE(s.children[2].required);
  EXPECT_EQ(s.children[2].children[0].children[0].name, "c");
  EXPECT_EQ(s.children[3].kind, Spec::Kind::kBlockAttrs);
  EXPECT_EQ(s.children[3].type.kind, Type::kString);
  EXPECT_EQ(s.children[4].min_items, 1u);
  EXPECT_EQ(s.children[4].max_items, 3u);
  EXPECT_EQ(s.children[5].labels, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(s.children[6].name, "set");  // its own name wins over the key
  Type implied = ImpliedType(s);
  EXPECT_EQ(implied.Name(), "object");
  EXPECT_EQ(TypeJson(implied),
            "[\"object\",{\"a\":\"number\",\"arr\":[\"tuple\",[\"string\",\"number\"]],\"b\":[\"object\",{\"c\":\"bool\"}],"
            "\"env\":[\"map\",\"string\"],\"l\":[\"list\",[\"object\",{}]],\"m\":[\"map\",[\"map\",[\"object\",{}]]],"
            "\"s\":[\"set\",[\"object\",{}]]}]");
}

TEST(NomadHclspec, SchemaResponse) {
  auto none = DecodeSchemaResponse("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->present);
  auto some = DecodeSchemaResponse(t::Bytes(1, t::Attr("x", "string")) + t::Num(7, 1));  // unknown fields skipped
  ASSERT_TRUE(some.ok()) << some.error().message();
  EXPECT_TRUE(some->present);
  EXPECT_EQ(some->root.name, "x");
  EXPECT_FALSE(DecodeSchemaResponse(Hex("0a 05 01")).ok());
}

TEST(NomadHclspec, NanopbMessagesDecodeTheSame) {
  // The proto's field numbers and the decoder's agree: a Spec built with
  // the generated nanopb types.
  hashicorp_nomad_plugins_shared_hclspec_Attr attr = {};
  std::string name = "port", type = "list(number)", list_name = "ports";
  attr.name = PbStr(name);
  attr.type = PbStr(type);
  attr.required = true;
  hashicorp_nomad_plugins_shared_hclspec_Spec inner = {};
  inner.which_block = hashicorp_nomad_plugins_shared_hclspec_Spec_Attr_tag;
  inner.block.Attr = &attr;
  hashicorp_nomad_plugins_shared_hclspec_BlockList list = {};
  list.name = PbStr(list_name);
  list.max_items = 2;
  list.has_nested = true;
  list.nested = inner;
  hashicorp_nomad_plugins_shared_hclspec_Spec outer = {};
  outer.which_block = hashicorp_nomad_plugins_shared_hclspec_Spec_block_list_tag;
  outer.block.block_list = &list;
  auto bytes = PbEncode(hashicorp_nomad_plugins_shared_hclspec_Spec_fields, &outer, "Spec");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, t::BlockList("ports", t::Attr("port", "list(number)", true), 0, 2));
  Spec s = MustSpec(*bytes);
  EXPECT_EQ(s.kind, Spec::Kind::kBlockList);
  EXPECT_EQ(s.max_items, 2u);
  EXPECT_EQ(s.children[0].type.Name(), "list of number");
}

TEST(NomadHclspec, SpecsNomadRefuses) {
  EXPECT_NE(SpecError("").find("schema: a spec with no kind"), std::string::npos);
  EXPECT_NE(SpecError(t::Attr("", "string")).find("attr with no name"), std::string::npos);
  EXPECT_NE(SpecError(t::Object({{"p", t::Attr("", "")}})).find("schema.p: attr p: type"), std::string::npos);
  EXPECT_NE(SpecError(t::Attr("p", "strin")).find("unknown type \"strin\""), std::string::npos);
  EXPECT_NE(SpecError(t::Attr("p", "list(string")).find("expected )"), std::string::npos);
  EXPECT_NE(SpecError(t::SpecOf(4, t::Bytes(1, "b"))).find("block b has no nested spec"), std::string::npos);
  EXPECT_NE(SpecError(t::BlockMap("m", {}, t::Object({}))).find("block_map m has no labels"), std::string::npos);
  EXPECT_NE(SpecError(t::BlockMap("m", {"k"}, t::Object({{"x", t::Attr("", "any")}}))).find("type any"),
            std::string::npos);
  EXPECT_NE(SpecError(t::SpecOf(9, t::Bytes(1, t::Literal("1")))).find("primary and a default"), std::string::npos);
  EXPECT_NE(SpecError(t::Literal("upper(\"x\")")).find("function calls are not supported (upper)"), std::string::npos);
  EXPECT_NE(SpecError(t::Literal("var.x")).find("variables are not allowed here (var)"), std::string::npos);
  EXPECT_NE(SpecError(t::Array({t::Attr("", "string")})).find("schema[0]: attr with no name"), std::string::npos);
  EXPECT_NE(SpecError(Hex("1a 05 0a")).find("malformed protobuf"), std::string::npos);
  EXPECT_NE(SpecError(Hex("1a ff ff ff ff 0f")).find("malformed protobuf"), std::string::npos);
}

TEST(NomadHclspec, SpecLimits) {
  std::string deep = t::Attr("x", "string");
  for (int i = 0; i <= kMaxSpecDepth; ++i) deep = t::Block("b", deep);
  EXPECT_NE(SpecError(deep).find("nested more than 32 deep"), std::string::npos);
  std::string wide;
  for (size_t i = 0; i < kMaxSpecNodes; ++i) wide += t::Bytes(1, t::Attr("x", "string"));
  EXPECT_NE(SpecError(t::SpecOf(2, wide)).find("more than 4096 nodes"), std::string::npos);
  // A oneof given twice: the last one counts, as in protobuf.
  Spec s = MustSpec(t::Literal("1") + t::Attr("x", "bool"));
  EXPECT_EQ(s.kind, Spec::Kind::kAttr);
}

TEST(NomadHclspec, TypeExpressions) {
  struct Case {
    const char* expr;
    const char* json;
  } cases[] = {
      {"string", "\"string\""},
      {"number", "\"number\""},
      {"bool", "\"bool\""},
      {"any", "\"dynamic\""},
      {"null", "\"dynamic\""},
      {"list(string)", "[\"list\",\"string\"]"},
      {" set( number ) ", "[\"set\",\"number\"]"},
      {"map(list(bool))", "[\"map\",[\"list\",\"bool\"]]"},
      {"tuple([string, number,])", "[\"tuple\",[\"string\",\"number\"]]"},
      {"tuple([])", "[\"tuple\",[]]"},
      {"object({b = number, \"a\" = string})", "[\"object\",{\"a\":\"string\",\"b\":\"number\"}]"},
      {"object({\n  x: list(any) # comment\n  y = bool\n})", "[\"object\",{\"x\":[\"list\",\"dynamic\"],\"y\":\"bool\"}]"},
  };
  for (const Case& c : cases) {
    auto ty = ParseTypeExpr(c.expr);
    ASSERT_TRUE(ty.ok()) << c.expr << ": " << ty.error().message();
    EXPECT_EQ(TypeJson(*ty), c.json) << c.expr;
  }
  for (const char* bad : {"", "String", "list", "list()", "list(string, number)", "map(string))", "object({a = b})",
                          "object({a = string, a = number})", "tuple(string)", "\"string\"", "string string"}) {
    EXPECT_FALSE(ParseTypeExpr(bad).ok()) << bad;
  }
}

TEST(NomadHclspec, LiteralExpressions) {
  struct Case {
    const char* expr;
    const char* msgpack;
  } cases[] = {
      {"\"bash\"", "a4 62 61 73 68"},
      {"5", "05"},
      {"-1", "ff"},
      {"1.5", "cb 3f f8 00 00 00 00 00 00"},
      {"1e3", "cd 03 e8"},
      {"0.1", "a3 30 2e 31"},
      {"true", "c3"},
      {"!true", "c2"},
      {"null", "c0"},
      {"[\"a\", 1, [],]", "93 a1 61 01 90"},
      {"{ a = 1, \"b\" = \"x\" }", "82 a1 61 01 a1 62 a1 78"},
      {"{\n  z: true\n  a = {}\n}", "82 a1 61 80 a1 7a c3"},
      {"\"tab\\there \\\"q\\\" \\\\ \\u00e9 \\U0001F600\"", "b6 74 61 62 09 68 65 72 65 20 22 71 22 20 5c 20 c3 a9 20 f0 9f 98 80"},
      {"\"$${x} %%{y}\"", "a9 24 7b 78 7d 20 25 7b 79 7d"},
      {"/* c */ (5) // trailing", "05"},
  };
  for (const Case& c : cases) {
    auto v = ParseLiteral(c.expr);
    ASSERT_TRUE(v.ok()) << c.expr << ": " << v.error().message();
    EXPECT_EQ(ToHex(MsgpackEncode(*v)), c.msgpack) << c.expr;
  }
  for (const char* bad : {"", "\"unterminated", "\"bad \\q escape\"", "\"${x}\"", "\"%{ if x }\"", "1 + 2", "x",
                          "max(1, 2)", "<<EOT\nx\nEOT", "[1 2]", "{a 1}", "-\"x\"", "!1", "{a = 1, a = 2}",
                          "\"\\ud800\"", "\"line\nbreak\""}) {
    EXPECT_FALSE(ParseLiteral(bad).ok()) << bad;
  }
}

// ---- configs: attributes ----------------------------------------------------

std::string AttrSpec(const std::string& type, bool required = false) { return t::Object({{"v", t::Attr("", type, required)}}); }

// The value of attribute v after decoding, as msgpack hex.
std::string V(const std::string& type, const std::string& json) {
  std::string hex = Decoded(AttrSpec(type), "{\"v\": " + json + "}");
  return hex.size() > 9 ? hex.substr(9) : hex;  // after "81 a1 76 "
}

std::string VErr(const std::string& type, const std::string& json) {
  return Errors(AttrSpec(type), "{\"v\": " + json + "}");
}

TEST(NomadHclspecConfig, Primitives) {
  EXPECT_EQ(V("string", "\"x\""), "a1 78");
  EXPECT_EQ(V("number", "8080"), "cd 1f 90");
  EXPECT_EQ(V("number", "-0.5"), "cb bf e0 00 00 00 00 00 00");
  EXPECT_EQ(V("number", "0.1"), "a3 30 2e 31");  // the decimal as written
  EXPECT_EQ(V("number", "9007199254740993"), "cf 00 20 00 00 00 00 00 01");  // int64: exact
  EXPECT_EQ(V("number", "1e300"), "da 01 2d 31" + [] {
    std::string z;
    for (int i = 0; i < 300; ++i) z += " 30";
    return z;
  }());
  EXPECT_EQ(V("bool", "true"), "c3");
  EXPECT_EQ(V("string", "null"), "c0");
  EXPECT_EQ(V("any", "null"), "c0");
  // cty's conversions: number and bool to string, string to number and bool.
  EXPECT_EQ(V("string", "42"), "a2 34 32");
  EXPECT_EQ(V("string", "1.5"), "a3 31 2e 35");
  EXPECT_EQ(V("string", "1e21"), "b6 31 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30 30");
  EXPECT_EQ(V("string", "true"), "a4 74 72 75 65");
  EXPECT_EQ(V("number", "\"42\""), "2a");
  EXPECT_EQ(VErr("number", "\" 42\""), "config.v: expected number, got string \" 42\"");
  EXPECT_EQ(V("number", "\"1e3\""), "cd 03 e8");
  EXPECT_EQ(V("number", "\"-inf\""), "cb ff f0 00 00 00 00 00 00");
  EXPECT_EQ(V("bool", "\"true\""), "c3");
  EXPECT_EQ(V("bool", "\"0\""), "c2");
  EXPECT_EQ(V("bool", "\"1\""), "c3");
}

TEST(NomadHclspecConfig, PrimitiveMismatches) {
  EXPECT_EQ(VErr("number", "\"abc\""), "config.v: expected number, got string \"abc\"");
  EXPECT_EQ(VErr("number", "\"1e999\""), "config.v: number out of range (more than 153 digits, or beyond 1e400)");
  EXPECT_EQ(VErr("bool", "1"), "config.v: expected bool, got number");
  EXPECT_EQ(VErr("bool", "\"True\""), "config.v: expected bool, got string \"True\" (write \"true\")");
  EXPECT_EQ(VErr("bool", "\"yes\""), "config.v: expected bool, got string \"yes\"");
  EXPECT_EQ(VErr("number", "true"), "config.v: expected number, got bool");
  EXPECT_EQ(VErr("string", "[\"a\"]"), "config.v: expected string, got array");
  EXPECT_EQ(VErr("string", "{}"), "config.v: expected string, got object");
}

TEST(NomadHclspecConfig, Collections) {
  EXPECT_EQ(V("list(string)", "[\"a\", 1, true]"), "93 a1 61 a1 31 a4 74 72 75 65");
  EXPECT_EQ(V("list(number)", "[]"), "90");
  EXPECT_EQ(V("list(number)", "[1, null]"), "92 01 c0");
  EXPECT_EQ(V("set(string)", "[\"b\", \"a\", \"b\"]"), "92 a1 61 a1 62");
  EXPECT_EQ(V("map(string)", "{\"B\": 1, \"A\": \"x\"}"), "82 a1 41 a1 78 a1 42 a1 31");
  EXPECT_EQ(V("map(list(number))", "{\"k\": [1, \"2\"]}"), "81 a1 6b 92 01 02");
  // any: unified, as cty.Convert does for list(any) and map(any).
  EXPECT_EQ(V("list(any)", "[\"a\", 1]"), "92 a1 61 a1 31");
  EXPECT_EQ(V("list(any)", "[1, 2]"), "92 01 02");
  EXPECT_EQ(V("map(any)", "{\"a\": [\"x\"], \"b\": [1]}"), "82 a1 61 91 a1 78 a1 62 91 a1 31");
  EXPECT_EQ(V("map(any)", "{\"a\": [1], \"b\": [2, 3]}"), "82 a1 61 91 01 a1 62 92 02 03");  // tuples: a list
  EXPECT_EQ(V("list(any)", "[{\"a\": 1}, {\"b\": \"x\"}]"), "92 81 a1 61 a1 31 81 a1 62 a1 78");  // objects: a map
  EXPECT_EQ(VErr("map(any)", "{\"a\": [1], \"b\": [true]}"), "config.v: all elements must have the same type");
  EXPECT_EQ(VErr("list(any)", "[1, true]"), "config.v: all elements must have the same type");
  EXPECT_EQ(VErr("list(string)", "\"a\""), "config.v: expected list of string, got string \"a\"");
  EXPECT_EQ(VErr("list(string)", "[\"a\", {}]"), "config.v[1]: expected string, got object");
  EXPECT_EQ(VErr("map(number)", "{\"x y\": \"z\"}"), "config.v[\"x y\"]: expected number, got string \"z\"");
  EXPECT_EQ(VErr("map(string)", "[]"), "config.v: expected map of string, got array");
}

TEST(NomadHclspecConfig, ObjectsTuplesAny) {
  EXPECT_EQ(V("object({a = number, b = list(string)})", "{\"b\": [], \"a\": \"5\", \"extra\": 1}"),
            "82 a1 61 05 a1 62 90");  // extra attributes are dropped, as cty does
  EXPECT_EQ(VErr("object({a = number, b = string})", "{\"a\": 1}"), "config.v.b: required attribute missing");
  EXPECT_EQ(V("tuple([string, number])", "[1, \"2\"]"), "92 a1 31 02");
  EXPECT_EQ(VErr("tuple([string, number])", "[1]"), "config.v: expected a tuple of 2 elements, got 1");
  // any keeps the JSON's own shape: arrays are tuples, objects objects.
  EXPECT_EQ(V("any", "{\"b\": [1, \"x\", null], \"a\": {}}"), "82 a1 61 80 a1 62 93 01 a1 78 c0");
  EXPECT_EQ(V("any", "1.25"), "cb 3f f4 00 00 00 00 00 00");
}

TEST(NomadHclspecConfig, RequiredUnknownAndComments) {
  std::string spec = t::Object({{"port", t::Attr("", "number", true)}, {"name", t::Attr("", "string")}});
  EXPECT_EQ(Errors(spec, "{}"), "config.port: required attribute missing");
  EXPECT_EQ(Errors(spec, "{\"port\": 1, \"nmae\": \"x\"}"), "config.nmae: unknown field (did you mean \"name\"?)");
  EXPECT_EQ(Errors(spec, "{\"port\": 1, \"zzzzzz\": 1}"), "config.zzzzzz: unknown field");
  EXPECT_EQ(Errors(spec, "[]"), "config.port: required attribute missing");
  EXPECT_EQ(Errors(spec, "\"x\""), "config: expected an object, got string\nconfig.port: required attribute missing");
  // "//" is a comment in HCL's JSON; null is left out; a body may be an
  // array of objects, merged.
  EXPECT_EQ(Decoded(spec, "{\"//\": \"note\", \"port\": 1}"), "82 a4 6e 61 6d 65 c0 a4 70 6f 72 74 01");
  EXPECT_EQ(Decoded(spec, "[{\"port\": 1}, {\"name\": \"n\"}]"), "82 a4 6e 61 6d 65 a1 6e a4 70 6f 72 74 01");
  EXPECT_EQ(Errors(spec, "[{\"port\": 1}, {\"port\": 2}]"), "config[1].port: set twice");
  EXPECT_EQ(Errors(spec, "[{\"port\": 1}, 5]"), "config[1]: expected an object, got number");
  // Every problem is told, not only the first.
  EXPECT_EQ(Errors(spec, "{\"name\": [], \"x\": 1}"),
            "config.x: unknown field\nconfig.port: required attribute missing\nconfig.name: expected string, got array");
  DecodeOptions opts;
  opts.path = "nomad_plugins.podman.config";
  EXPECT_EQ(Errors(spec, "{}", opts), "nomad_plugins.podman.config.port: required attribute missing");
}

// ---- configs: blocks --------------------------------------------------------

TEST(NomadHclspecConfig, Block) {
  std::string spec = t::Object({{"auth", t::Block("", t::Object({{"user", t::Attr("", "string", true)},
                                                                 {"tls", t::Attr("", "bool")}}))}});
  EXPECT_EQ(Decoded(spec, "{\"auth\": {\"user\": \"u\"}}"), "81 a4 61 75 74 68 82 a3 74 6c 73 c0 a4 75 73 65 72 a1 75");
  EXPECT_EQ(Decoded(spec, "{\"auth\": [{\"user\": \"u\", \"tls\": true}]}"),
            "81 a4 61 75 74 68 82 a3 74 6c 73 c3 a4 75 73 65 72 a1 75");
  EXPECT_EQ(Decoded(spec, "{}"), "81 a4 61 75 74 68 c0");
  EXPECT_EQ(Decoded(spec, "{\"auth\": null}"), "81 a4 61 75 74 68 c0");
  EXPECT_EQ(Decoded(spec, "{\"auth\": []}"), "81 a4 61 75 74 68 c0");
  EXPECT_EQ(Errors(spec, "{\"auth\": [{\"user\": \"a\"}, {\"user\": \"b\"}]}"), "config.auth[1]: only one auth block is allowed");
  EXPECT_EQ(Errors(spec, "{\"auth\": {}}"), "config.auth.user: required attribute missing");
  EXPECT_EQ(Errors(spec, "{\"auth\": \"x\"}"), "config.auth: expected an object or an array of objects (blocks), got string");
  EXPECT_EQ(Errors(spec, "{\"auth\": [{\"usr\": \"a\"}]}"),
            "config.auth[0].usr: unknown field (did you mean \"user\"?)\nconfig.auth[0].user: required attribute missing");
  std::string required = t::Object({{"auth", t::Block("", t::Object({}), true)}});
  EXPECT_EQ(Errors(required, "{}"), "config.auth: required block missing");
}

TEST(NomadHclspecConfig, BlockList) {
  std::string spec = t::Object({{"port_map", t::BlockList("", t::Object({{"label", t::Attr("", "string", true)},
                                                                         {"port", t::Attr("", "number")}}), 1, 2)}});
  EXPECT_EQ(Decoded(spec, "{\"port_map\": [{\"label\": \"http\", \"port\": 80}, {\"label\": \"x\"}]}"),
            "81 a8 70 6f 72 74 5f 6d 61 70 92 82 a5 6c 61 62 65 6c a4 68 74 74 70 a4 70 6f 72 74 50"
            " 82 a5 6c 61 62 65 6c a1 78 a4 70 6f 72 74 c0");
  EXPECT_EQ(Decoded(spec, "{\"port_map\": {\"label\": \"one\"}}"),
            "81 a8 70 6f 72 74 5f 6d 61 70 91 82 a5 6c 61 62 65 6c a3 6f 6e 65 a4 70 6f 72 74 c0");
  EXPECT_EQ(Errors(spec, "{\"port_map\": [{\"port\": 1}]}"), "config.port_map[0].label: required attribute missing");
  EXPECT_EQ(Errors(spec, "{}"), "config.port_map: at least 1 port_map blocks required, got 0");
  EXPECT_EQ(Errors(spec, "{\"port_map\": [{\"label\": \"a\"}, {\"label\": \"b\"}, {\"label\": \"c\"}]}"),
            "config.port_map: at most 2 port_map blocks allowed, got 3");
  EXPECT_EQ(Errors(spec, "{\"port_map\": [{\"label\": \"a\", \"port\": \"x\"}, 7]}"),
            "config.port_map[0].port: expected number, got string \"x\"\n"
            "config.port_map[1]: expected an object, got number\n"
            "config.port_map[1].label: required attribute missing");
  // No limits: zero blocks are an empty list.
  std::string free = t::Object({{"l", t::BlockList("", t::Object({{"x", t::Attr("", "number")}}))}});
  EXPECT_EQ(Decoded(free, "{}"), "81 a1 6c 90");
  // Blocks whose `any` attributes differ in type are unified (hcldec).
  std::string any = t::Object({{"l", t::BlockList("", t::Object({{"x", t::Attr("", "any")}}))}});
  EXPECT_EQ(Decoded(any, "{\"l\": [{\"x\": 1}, {\"x\": \"s\"}]}"), "81 a1 6c 92 81 a1 78 a1 31 81 a1 78 a1 73");
  EXPECT_EQ(Errors(any, "{\"l\": [{\"x\": 1}, {\"x\": true}]}"), "config.l: the blocks' values differ in type");
}

TEST(NomadHclspecConfig, BlockSet) {
  std::string spec = t::Object({{"mount", t::BlockSet("", t::Object({{"src", t::Attr("", "string")}}), 0, 3)}});
  // Duplicates go; the order is cty's (objects by their set hash text).
  EXPECT_EQ(Decoded(spec, "{\"mount\": [{\"src\": \"b\"}, {\"src\": \"a\"}, {\"src\": \"b\"}]}"),
            "81 a5 6d 6f 75 6e 74 92 81 a3 73 72 63 a1 61 81 a3 73 72 63 a1 62");
  // The count is of blocks given, before duplicates go (hcldec).
  EXPECT_EQ(Errors(spec, "{\"mount\": [{\"src\": \"b\"}, {\"src\": \"b\"}, {\"src\": \"b\"}, {\"src\": \"b\"}]}"),
            "config.mount: at most 3 mount blocks allowed, got 4");
}

TEST(NomadHclspecConfig, BlockMap) {
  std::string one = t::Object({{"volume", t::BlockMap("", {"name"}, t::Object({{"ro", t::Attr("", "bool")}}))}});
  EXPECT_EQ(Decoded(one, "{\"volume\": {\"b\": {\"ro\": true}, \"a\": {}}}"),
            "81 a6 76 6f 6c 75 6d 65 82 a1 61 81 a2 72 6f c0 a1 62 81 a2 72 6f c3");
  EXPECT_EQ(Decoded(one, "{}"), "81 a6 76 6f 6c 75 6d 65 80");
  EXPECT_EQ(Errors(one, "{\"volume\": {}}"), "config.volume: expected an object keyed by name, got none");
  EXPECT_EQ(Errors(one, "{\"volume\": [1]}"), "config.volume[0]: expected an object keyed by name, got number");
  EXPECT_EQ(Errors(one, "{\"volume\": [{\"a\": {}}, {\"a\": {}}]}"),
            "config.volume[1].a: a block with these labels is already given");
  EXPECT_EQ(Errors(one, "{\"volume\": {\"a\": {\"rw\": true}}}"), "config.volume.a.rw: unknown field (did you mean \"ro\"?)");
  std::string two = t::Object({{"m", t::BlockMap("", {"k1", "k2"}, t::Object({{"n", t::Attr("", "number")}}))}});
  EXPECT_EQ(Decoded(two, "{\"m\": {\"x\": {\"q\": {\"n\": 1}, \"p\": {\"n\": 2}}, \"a\": {\"z\": {}}}}"),
            "81 a1 6d 82 a1 61 81 a1 7a 81 a1 6e c0 a1 78 82 a1 70 81 a1 6e 02 a1 71 81 a1 6e 01");
  // A block with two labels per level, given as arrays of objects.
  EXPECT_EQ(Decoded(two, "{\"m\": [{\"x\": [{\"y\": {\"n\": 3}}]}]}"), "81 a1 6d 81 a1 78 81 a1 79 81 a1 6e 03");
}

TEST(NomadHclspecConfig, BlockAttrs) {
  std::string spec = t::Object({{"env", t::BlockAttrs("", "string")}});
  EXPECT_EQ(Decoded(spec, "{\"env\": {\"B\": 2, \"A\": \"x\", \"//\": \"c\"}}"), "81 a3 65 6e 76 82 a1 41 a1 78 a1 42 a1 32");
  EXPECT_EQ(Decoded(spec, "{\"env\": {}}"), "81 a3 65 6e 76 80");
  EXPECT_EQ(Decoded(spec, "{}"), "81 a3 65 6e 76 c0");
  EXPECT_EQ(Errors(spec, "{\"env\": {\"A\": []}}"), "config.env.A: expected string, got array");
  EXPECT_EQ(Decoded(spec, "{\"env\": [{\"A\": \"x\"}]}"), "81 a3 65 6e 76 81 a1 41 a1 78");
  EXPECT_EQ(Errors(spec, "{\"env\": [{}, {}]}"), "config.env[1]: only one env block is allowed");
  std::string required = t::Object({{"env", t::BlockAttrs("", "string", true)}});
  EXPECT_EQ(Errors(required, "{}"), "config.env: required block missing");
}

TEST(NomadHclspecConfig, DefaultsAndLiterals) {
  std::string spec = t::Object({
      {"caps", t::Default(t::Attr("caps", "list(string)"), t::Literal("[\"chown\", \"kill\"]"))},
      {"timeout", t::Default(t::Attr("timeout", "string"), t::Literal("\"5m\""))},
      {"n", t::Default(t::Attr("n", "number"), t::Literal("5"))},
      {"fixed", t::Literal("{ a = true }")},
  });
  EXPECT_EQ(Decoded(spec, "{}"),
            "84 a4 63 61 70 73 92 a5 63 68 6f 77 6e a4 6b 69 6c 6c a5 66 69 78 65 64 81 a1 61 c3 a1 6e 05"
            " a7 74 69 6d 65 6f 75 74 a2 35 6d");
  EXPECT_EQ(Decoded(spec, "{\"caps\": [], \"n\": \"7\", \"timeout\": null}"),
            "84 a4 63 61 70 73 90 a5 66 69 78 65 64 81 a1 61 c3 a1 6e 07 a7 74 69 6d 65 6f 75 74 a2 35 6d");
  // A literal of another type than the attribute's is what the plugin gets
  // when the attribute is absent (hcldec does not convert defaults).
  std::string odd = t::Object({{"n", t::Default(t::Attr("n", "string"), t::Literal("5"))}});
  EXPECT_EQ(Decoded(odd, "{}"), "81 a1 6e 05");
  // The default's attribute is part of the schema too (hcldec's union).
  std::string alt = t::Object({{"v", t::Default(t::Attr("new", "string"), t::Attr("old", "string"))}});
  EXPECT_EQ(Decoded(alt, "{\"old\": \"o\"}"), "81 a1 76 a1 6f");
  EXPECT_EQ(Decoded(alt, "{\"old\": \"o\", \"new\": \"n\"}"), "81 a1 76 a1 6e");
}

// ---- configs: ${...} --------------------------------------------------------

TEST(NomadHclspecConfig, Variables) {
  std::string spec = t::Object({{"dir", t::Attr("", "string")}, {"port", t::Attr("", "number")}});
  std::string config = R"({"dir": "${NOMAD_TASK_DIR}/x ${ node.unique.id }", "port": "${NOMAD_PORT_http}"})";
  // A plugin's config takes none (Nomad evaluates it without variables).
  EXPECT_EQ(Errors(spec, R"({"dir": "${NOMAD_TASK_DIR}"})"),
            "config.dir: variables are not allowed here (${NOMAD_TASK_DIR}); write $${ for a literal ${");
  // At submission: checked, not known; number conversion waits.
  DecodeOptions defer;
  defer.vars = DecodeOptions::Vars::kDefer;
  auto v = DecodeConfig(MustSpec(spec), J(config), defer);
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_TRUE(v->HasUnknown());
  Schema schema{true, MustSpec(spec)};
  EXPECT_FALSE(EncodeConfig(schema, J(config), defer).ok());
  // At start: from the task's environment.
  std::map<std::string, std::string> env = {
      {"NOMAD_TASK_DIR", "/alloc/t/local"}, {"NOMAD_PORT_http", "8080"}, {"node.unique.id", "n1"}};
  DecodeOptions resolve;
  resolve.vars = DecodeOptions::Vars::kResolve;
  resolve.env = &env;
  EXPECT_EQ(Decoded(spec, config, resolve),
            "82 a3 64 69 72 b3 2f 61 6c 6c 6f 63 2f 74 2f 6c 6f 63 61 6c 2f 78 20 6e 31 a4 70 6f 72 74 cd 1f 90");
  EXPECT_EQ(Errors(spec, R"({"dir": "${NOMAD_NOPE}"})", resolve), "config.dir: unknown variable \"NOMAD_NOPE\" in ${...}");
  // Escapes, strip markers, index steps; what is not a variable.
  EXPECT_EQ(Decoded(spec, R"({"dir": "$${HOME} %%{x} a ${~ NOMAD_TASK_DIR ~} b"})", resolve),
            "82 a3 64 69 72 bd 24 7b 48 4f 4d 45 7d 20 25 7b 78 7d 20 61 2f 61 6c 6c 6f 63 2f 74 2f 6c 6f 63 61 6c 62"
            " a4 70 6f 72 74 c0");
  EXPECT_EQ(Decoded(spec, R"({"dir": "${node[\"unique\"].id}"})", resolve), "82 a3 64 69 72 a2 6e 31 a4 70 6f 72 74 c0");
  EXPECT_EQ(Decoded(spec, R"({"dir": "$ { } % x $"})"), "82 a3 64 69 72 ab 24 20 7b 20 7d 20 25 20 78 20 24 a4 70 6f 72 74 c0");
  for (const char* bad : {R"({"dir": "${upper(x)}"})", R"({"dir": "${1 + 2}"})", R"({"dir": "${x"})",
                          R"({"dir": "${}"})"}) {
    EXPECT_EQ(Errors(spec, bad, resolve),
              "config.dir: only a variable, such as ${NOMAD_TASK_DIR}, is supported inside ${...}; write $${ for a literal ${")
        << bad;
  }
  EXPECT_EQ(Errors(spec, R"({"dir": "%{ if x }y%{ endif }"})", resolve),
            "config.dir: template directives (%{...}) are not supported; write %%{ for a literal %{");
}

TEST(NomadHclspecConfig, EncodeConfigWithoutSchema) {
  Schema none;
  auto empty = EncodeConfig(none, J("{}"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
  EXPECT_TRUE(EncodeConfig(none, picojson::value()).ok());
  auto refused = EncodeConfig(none, J("{\"a\": 1}"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(), "config: the plugin takes no configuration");
  Schema schema{true, MustSpec(AttrSpec("number", true))};
  auto err = EncodeConfig(schema, J("{}"));
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(err.error().message(), "config.v: required attribute missing");
  auto ok = EncodeConfig(schema, J("{\"v\": 3}"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ToHex(*ok), "81 a1 76 03");
}

TEST(NomadHclspecConfig, DeepJsonIsRefused) {
  std::string spec = AttrSpec("any");
  picojson::value v;
  for (int i = 0; i < 100; ++i) {
    picojson::array a;
    a.push_back(v);
    v = picojson::value(a);
  }
  picojson::object o;
  o["v"] = v;
  json::Errors errors;
  DecodeConfig(MustSpec(spec), picojson::value(o), DecodeOptions(), &errors);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("nested too deeply"), std::string::npos);
}

}  // namespace
}  // namespace outpost::driver::nomad
