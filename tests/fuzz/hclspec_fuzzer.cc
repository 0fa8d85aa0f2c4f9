// libFuzzer target for driver/nomad/hclspec: a plugin's schema (an
// hclspec.Spec message, untrusted: another program's answer) and a config
// validated against it. Input: two bytes (big-endian) giving the length of
// the Spec message, the message, then the config's JSON text. The config is
// decoded with ${...} refused, deferred and resolved; nothing crashes, and
// a value accepted encodes to msgpack that decodes back, with the value's
// type, to an equal value and the same bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "base/json.h"
#include "driver/nomad/cty_msgpack.h"
#include "driver/nomad/hclspec.h"

namespace {

using namespace outpost::driver::nomad;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// A TaskConfigSchemaResponse holding the Spec message (spec = 1).
std::string Response(std::string_view spec) {
  std::string out = "\x0a";
  size_t n = spec.size();
  do {
    uint8_t b = n & 0x7f;
    n >>= 7;
    out.push_back(static_cast<char>(b | (n ? 0x80 : 0)));
  } while (n);
  out.append(spec);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t len = static_cast<size_t>(data[0]) << 8 | data[1];
  if (len > size - 2) return 0;
  std::string_view spec_bytes(reinterpret_cast<const char*>(data) + 2, len);
  auto schema = DecodeSchemaResponse(Response(spec_bytes));
  auto spec = DecodeSpec(spec_bytes);
  Check(schema.ok() == spec.ok());
  if (!spec.ok()) {
    Check(!spec.error().message().empty());
    return 0;
  }
  (void)ImpliedType(*spec);
  std::string text(reinterpret_cast<const char*>(data) + 2 + len, size - 2 - len);
  auto config = outpost::json::Parse(text);
  if (!config.ok()) return 0;
  std::map<std::string, std::string> env = {{"NOMAD_TASK_DIR", "/local"}, {"node.unique.id", "n1"}};
  for (int mode = 0; mode < 3; ++mode) {
    DecodeOptions opts;
    opts.vars = static_cast<DecodeOptions::Vars>(mode);
    opts.env = &env;
    outpost::json::Errors errors;
    Value v = DecodeConfig(*spec, *config, opts, &errors);
    for (const std::string& e : errors) Check(e.compare(0, 6, "config") == 0);
    if (!errors.empty()) continue;
    Check(mode == 1 || !v.HasUnknown());
    std::string enc = MsgpackEncode(v);
    auto back = MsgpackDecode(enc, v.type);
    Check(back.ok());
    Check(RawEqual(*back, v));
    Check(MsgpackEncode(*back) == enc);
    if (mode != 1) {
      auto bytes = EncodeConfig(*schema, *config, opts);
      Check(bytes.ok() && *bytes == enc);
    }
  }
  return 0;
}
