// libFuzzer target: a CDI spec file as the oci driver reads it from
// /etc/cdi or /var/run/cdi (examples/plugins/oci-driver/cdi.h), and its
// edits applied to a config.json. Nothing may crash; an accepted spec's
// devices either inject (and the result serializes and parses back) or are
// refused with a reason.
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../examples/plugins/oci-driver/cdi.h"
#include "../../examples/plugins/oci-driver/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  oci_driver::cdi::Spec spec;
  std::vector<std::string> problems;
  bool ok = oci_driver::cdi::ParseSpec(text, "/etc/cdi/fuzz.json", 0, &spec, &problems);
  if (ok != problems.empty()) __builtin_trap();
  std::vector<std::string> names;
  picojson::value doc;
  if (oci_driver::ParseJson(&doc, text).empty()) (void)oci_driver::cdi::AnnotatedDevices(doc, &names);
  if (!ok) return 0;
  names.clear();
  for (const oci_driver::cdi::Device& d : spec.devices) names.push_back(spec.kind + "=" + d.name);
  oci_driver::cdi::Registry reg;
  reg.Add(spec);
  picojson::value base;
  oci_driver::ParseJson(&base, R"({"process": {"env": ["A=1"], "user": {"uid": 5, "gid": 5}}, "mounts": [],
                                   "linux": {"resources": {"devices": []}}})");
  std::string before = base.serialize();
  std::string err = reg.Inject(names, &base);
  if (!err.empty() && base.serialize() != before) __builtin_trap();
  picojson::value back;
  if (!oci_driver::ParseJson(&back, base.serialize()).empty()) __builtin_trap();
  return 0;
}
