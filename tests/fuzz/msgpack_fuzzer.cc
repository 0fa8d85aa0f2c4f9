// libFuzzer target for driver/nomad/cty_msgpack's decoder (untrusted bytes:
// a plugin's driver state, anything read back): the input is read as the
// value its bytes imply and, past its first byte, as a value of a type the
// first byte picks. Nothing crashes, leaks or overflows the stack, and what
// decodes re-encodes canonically: its encoding decodes, with the value's own
// type, to an equal value that encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "driver/nomad/cty.h"
#include "driver/nomad/cty_msgpack.h"

namespace {

using namespace outpost::driver::nomad;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void Canonical(const Value& v) {
  std::string enc = MsgpackEncode(v);
  auto back = MsgpackDecode(enc, v.type);
  Check(back.ok());
  Check(RawEqual(*back, v));
  Check(MsgpackEncode(*back) == enc);
  auto implied = MsgpackDecodeImplied(enc);
  Check(implied.ok());
  Check(MsgpackEncode(*implied) == enc);
}

Type Types(uint8_t pick) {
  Type s(Type::kString), n(Type::kNumber), b(Type::kBool);
  switch (pick % 9) {
    case 0: return s;
    case 1: return n;
    case 2: return b;
    case 3: return Type::Collection(Type::kList, s);
    case 4: return Type::Collection(Type::kSet, n);
    case 5: return Type::Collection(Type::kMap, Type());
    case 6: return Type::Object({"a", "b"}, {s, Type::Collection(Type::kList, n)});
    case 7: return Type::Tuple({s, Type()});
    default: return Type::Collection(Type::kSet, Type::Object({"k"}, {Type::Collection(Type::kMap, n)}));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto v = MsgpackDecodeImplied(in);
  if (v.ok()) Canonical(*v);
  if (size > 0) {
    auto typed = MsgpackDecode(in.substr(1), Types(data[0]));
    if (typed.ok()) Canonical(*typed);
  }
  return 0;
}
