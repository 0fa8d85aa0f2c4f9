// libFuzzer target: what the oci driver (examples/plugins/oci-driver)
// reads: a task's `config` object, the spec outpost sends
// (TaskConfig.oci_spec) and the runtime's `state` output. None of it may
// crash or hang; an accepted config always builds a spec that serializes
// and parses back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../examples/plugins/oci-driver/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // One input, two documents: the config, then (after the first NUL) the base spec.
  size_t nul = text.find('\0');
  std::string config = text.substr(0, nul);
  std::string base_text = nul == std::string::npos ? "" : text.substr(nul + 1);
  std::string status;
  int64_t pid = 0;
  (void)oci_driver::ParseState(text, &status, &pid);
  oci_driver::TaskOptions opts;
  std::vector<std::string> problems;
  bool ok = oci_driver::ParseOptions(config, &opts, &problems);
  if (ok != problems.empty()) __builtin_trap();
  if (!ok) return 0;
  picojson::value base;
  if (!oci_driver::ParseJson(&base, base_text).empty()) base = picojson::value();
  outpost::plugin_sdk::TaskConfig task;
  task.id = "fuzz.t";
  task.command = "/bin/sh";
  picojson::value spec = oci_driver::BuildSpec(task, opts, base);
  picojson::value back;
  if (!oci_driver::ParseJson(&back, spec.serialize()).empty() || !back.get("root").is<picojson::object>()) __builtin_trap();
  return 0;
}
