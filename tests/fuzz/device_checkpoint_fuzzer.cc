// libFuzzer target: the device checkpoint file (devices/checkpoint.h), read
// back at every agent start from whatever the state dir holds. Nothing may
// crash; an accepted file re-encodes to one that decodes to the same
// content (and the same text), and the manager restores it and writes back
// what it read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "devices/checkpoint.h"
#include "devices/manager.h"

using namespace outpost;
using namespace outpost::devices;

namespace {

Loop* TheLoop() {
  static Loop* loop = Loop::Create()->release();
  return loop;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto d = DecodeCheckpoint(text);
  if (!d.ok()) return 0;
  std::string once = EncodeCheckpoint(*d);
  auto again = DecodeCheckpoint(once);
  if (!again.ok() || EncodeCheckpoint(*again) != once) __builtin_trap();
  Manager m(TheLoop(), nullptr);
  m.Restore(*d, d->boot_id);
  CheckpointData snap = m.Snapshot();
  if (snap.registered.size() != d->registered.size()) __builtin_trap();
  for (const CheckpointEntry& e : d->entries) {
    if (!m.Held(e.task, e.resource)) __builtin_trap();
  }
  return 0;
}
