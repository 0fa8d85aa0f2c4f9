// libFuzzer target for what a plugin answers to GetInfo (plugin/watcher's
// DecodePluginInfo): any bytes either decode into an Info that keeps the
// rules (non-empty type and name without control bytes, a type without
// '/', an absolute endpoint) or give an error; never a crash, a leak or a hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "plugin/watcher.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto info = outpost::plugin::DecodePluginInfo(in, "/run/outpost/plugins/x.sock", outpost::plugin::Transport::kTtrpc);
  if (!info.ok()) {
    Check(!info.error().message().empty());
    return 0;
  }
  Check(!info->type.empty() && !info->name.empty());
  Check(info->type.find('/') == std::string::npos);
  for (const std::string* v : {&info->type, &info->name}) {
    for (char c : *v) Check(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);
  }
  Check(!info->endpoint.empty() && info->endpoint[0] == '/');
  return 0;
}
