// A Nomad plugin's configuration schema (hclspec, the Spec tree a plugin
// answers ConfigSchema and TaskConfigSchema with) and the decoding of a
// config against it, as a Nomad client does with hcldec over HCL's JSON
// syntax: the plugin's `config` from outpost's config file and a task's
// `config` from its job spec, both JSON. Owns: decoding a Spec from its
// protobuf bytes (untrusted: depth and size limits) into Spec, parsing the
// type expressions and HCL literal expressions in it, decoding a JSON
// config into a cty value (attributes, blocks, block lists, sets and maps,
// defaults, required fields; every error with its JSON path), ${...}
// variables in strings, and the bytes for SetConfig and StartTask (the
// Spec tree in hclspec.cc, the expressions in hcl_expr.cc, configs in
// hcl_config.cc). Does not own: the value model and cty's conversions
// (driver/nomad/cty), msgpack (driver/nomad/cty_msgpack), calling the
// plugin.
#pragma once

#include <picojson.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "driver/nomad/cty.h"

namespace outpost::driver::nomad {

struct Spec {
  enum class Kind : uint8_t {
    kObject,      // keys -> children
    kArray,       // children, a tuple
    kAttr,        // name, type, required
    kBlock,       // name, required, children[0] the nested spec
    kBlockAttrs,  // name, type (of each attribute), required
    kBlockList,   // name, min_items, max_items, children[0]
    kBlockSet,    // name, min_items, max_items, children[0]
    kBlockMap,    // name, labels, children[0]
    kDefault,     // children[0] primary, children[1] the default
    kLiteral,     // literal
  };
  Kind kind = Kind::kLiteral;
  // The attribute's or block type's name, the Object's key when the plugin
  // left it empty (as Nomad's hclspecutils does).
  std::string name;
  Type type;
  bool required = false;
  uint64_t min_items = 0;
  uint64_t max_items = 0;
  std::vector<std::string> labels;
  std::vector<std::string> keys;  // object: sorted, one per child
  std::vector<Spec> children;
  Value literal;
};

// What a plugin answered ConfigSchema or TaskConfigSchema with: a schema,
// or none (then it takes no configuration).
struct Schema {
  bool present = false;
  Spec root;
};

// Limits on what a plugin may send (it is another program's output).
constexpr int kMaxSpecDepth = 32;       // nested Spec messages
constexpr size_t kMaxSpecNodes = 4096;  // Spec messages in all

// A hashicorp.nomad.plugins.shared.hclspec.Spec message. Errors say where in
// the schema ("schema.volumes.nested: ...") and what, as Nomad's
// hclspecutils.Convert would refuse it.
Result<Spec> DecodeSpec(std::string_view spec_message);
// A ConfigSchemaResponse or TaskConfigSchemaResponse (both: spec = 1).
Result<Schema> DecodeSchemaResponse(std::string_view response);

// An HCL type expression as hclspec's Attr and BlockAttrs carry one:
// string, number, bool, any, list(T), set(T), map(T), object({a = T, ...}),
// tuple([T, ...]); null is any.
Result<Type> ParseTypeExpr(std::string_view text);
// An HCL literal expression as a Literal carries one: numbers (with a
// sign), "strings" with HCL's escapes, true, false, null, [tuples] and
// {objects} (keys as names or strings, "=" or ":", commas or newlines),
// comments. Function calls, variables, operators and templates are
// refused.
Result<Value> ParseLiteral(std::string_view text);

struct DecodeOptions {
  // The config's path in error messages: "config" gives
  // "config.port_map[0].label: required attribute missing".
  std::string path = "config";
  // Strings are HCL templates: "${NOMAD_TASK_DIR}/x", "$${literal}".
  enum class Vars : uint8_t {
    kRefuse,   // a ${...} is an error, as in a plugin's config
    kDefer,    // checked, its value unknown: a task's config at submission
    kResolve,  // its value from env: a task's config at start
  };
  Vars vars = Vars::kRefuse;
  // kResolve: what a ${name} or ${a.b.c} stands for ("a.b.c" looked up).
  // kDefer: the names known before the task starts; a NOMAD_ name not
  // among them (and not one named after a port label or meta key) is an
  // error. Null: nothing is checked.
  const std::map<std::string, std::string>* env = nullptr;
};

// Decodes config (a JSON object; null is {}) as Nomad's client decodes a
// plugin's or a task's config: every problem goes to *errors, one per entry,
// "<path>: <what>"; the value is meaningful only when none was added.
// What is accepted and how JSON maps to cty types is in
// docs/nomad-drivers.md ("Task config validation and encoding").
Value DecodeConfig(const Spec& spec, const picojson::value& config, const DecodeOptions& opts, json::Errors* errors);
// The same, the errors joined one per line into an InvalidArgument.
Result<Value> DecodeConfig(const Spec& spec, const picojson::value& config,
                           const DecodeOptions& opts = DecodeOptions());

// The msgpack bytes Nomad's client sends for config (SetConfigRequest
// msgpack_config, TaskConfig msgpack_driver_config): decoded with the
// schema and encoded with the value's own type. Without a schema a config
// that is not empty is refused and "" is sent. A value still holding an
// unknown (Vars::kDefer) is refused.
Result<std::string> EncodeConfig(const Schema& schema, const picojson::value& config,
                                 const DecodeOptions& opts = DecodeOptions());

// The type a spec decodes to when what it describes is absent
// (hcldec's ImpliedType).
Type ImpliedType(const Spec& spec);

}  // namespace outpost::driver::nomad
