// libFuzzer target: every JSON document outpost reads from people or disk
// (agent config, job specs, persisted task handles, hooks.d files) goes through json::Parse
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
#include "hooks/catalog.h"
#include "hooks/hook.h"
#include "task/record.h"

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
  // A task record (<state_dir>/tasks/<id>.json) and the exec driver's state.
  auto record = outpost::task::DecodeTaskRecord(text);
  if (record.ok()) (void)outpost::task::EncodeTaskRecord(*record);
  (void)outpost::driver::ExecDriver::DecodeState(0, text);
  (void)outpost::driver::ExecDriver::DecodeState(outpost::driver::ExecDriver::kStateVersion, text);
  // A hooks.d file (both schemas; regexes compiled and matched), and a
  // runtime-spec `hooks` object as a job spec or a bundle carries it.
  auto hooksd = outpost::hooks::ParseHooksDFile("/fuzz/hooks.d/x.json", text);
  if (hooksd.ok()) {
    outpost::hooks::MatchInput in;
    in.annotations["com.example.key"] = "value";
    in.command = "/usr/bin/fuzz";
    std::string why;
    (void)hooksd->Matches(in, &why);
  }
  if (doc.ok()) {
    std::vector<std::string> errors;
    auto set = outpost::hooks::HooksFromJson(*doc, "hooks", "fuzz", &errors);
    if (errors.empty()) (void)outpost::hooks::HooksToJson(set).serialize();
  }
  return 0;
}
