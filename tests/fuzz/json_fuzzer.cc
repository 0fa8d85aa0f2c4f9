// libFuzzer target: every JSON document outpost reads from people or disk
// (agent config, job specs, persisted task handles) goes through json::Parse
// and then a typed reader. None of it may crash, hang or leak on arbitrary
// bytes; an accepted job spec must also survive its canonical form.
#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/config.h"
#include "base/json.h"
#include "job/spec.h"
#include "job/store.h"
#include "driver/exec/exec_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = outpost::json::Parse(text);
  if (doc.ok()) (void)doc->serialize();
  (void)outpost::ParseConfig(text, "fuzz.json");
  auto spec = outpost::job::ParseJobSpec(text, "fuzz.json");
  if (spec.ok()) {
    std::string canonical = outpost::job::JobSpecToJson(*spec).serialize();
    auto again = outpost::job::ParseJobSpec(canonical, "canonical");
    if (!again.ok() || outpost::job::JobSpecToJson(*again).serialize() != canonical) __builtin_trap();
  }
  // A stored job record (<state_dir>/jobs/<id>.json) read back at start.
  auto stored = outpost::job::JobStore::Decode(text, "fuzz.json");
  if (stored.ok()) (void)outpost::job::JobStore::Encode(*stored);
  outpost::driver::ExitResult exit;
  int64_t completed = 0;
  bool has_exit = false;
  (void)outpost::driver::ExecDriver::DecodeHandle(text, &exit, &completed, &has_exit);
  return 0;
}
