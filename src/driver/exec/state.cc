// The exec driver's state in a TaskHandle: a small JSON object.
#include <picojson.h>

#include "base/json.h"
#include "driver/exec/exec_driver.h"

namespace outpost::driver {

std::string ExecDriver::EncodeState(const State& s) {
  picojson::object o;
  o["pid"] = picojson::value(static_cast<int64_t>(s.pid));
  o["start_ticks"] = picojson::value(static_cast<int64_t>(s.start_ticks));
  o["instance"] = picojson::value(s.instance);
  if (!s.boot_id.empty()) o["boot_id"] = picojson::value(s.boot_id);
  o["parent"] = picojson::value(s.parent);
  std::string out = picojson::value(o).serialize();
  out.shrink_to_fit();  // kept per task in its record: no spare capacity
  return out;
}

Result<ExecDriver::State> ExecDriver::DecodeState(int version, const std::string& text) {
  if (version != kStateVersion && version != 0) {
    return Error(Code::kFailedPrecondition, "exec driver state version " + std::to_string(version) +
                                                " is not one this binary understands");
  }
  auto doc = json::Parse(text, json::ParseLimits{4 << 20, 16});
  if (!doc.ok()) return doc.error();
  json::Errors errors;
  json::ObjectReader r(*doc, "", &errors);
  State s;
  int64_t pid = 0, ticks = 0;
  r.Int("pid", 0, INT32_MAX, &pid);
  r.Int("start_ticks", 0, INT64_MAX, &ticks);
  r.String("instance", &s.instance);
  r.String("boot_id", &s.boot_id);
  // The first on-disk format called the parent "driver_state".
  r.String(version == 0 ? "driver_state" : "parent", &s.parent);
  if (!errors.empty()) return Error(Code::kInvalidArgument, json::JoinErrors(errors));
  if (pid <= 0) return Error(Code::kInvalidArgument, "pid: missing");
  s.pid = static_cast<pid_t>(pid);
  s.start_ticks = static_cast<uint64_t>(ticks);
  return s;
}

}  // namespace outpost::driver
