// libFuzzer target: the event history file (task/events.h, ReadHistory) as
// a new worker reads it back: whatever a killed writer, a full disk or
// another program left there. Nothing may crash or read past the bytes; the
// records kept have consecutive seqs; loaded into an EventLog every record
// unpacks and reads filter without crashing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/sys.h"
#include "loop/loop.h"
#include "task/events.h"

using namespace outpost;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  uint64_t prev = 0;
  bool first = true;
  task::ReadHistory(bytes, [&](uint64_t seq, std::string_view rec) {
    if (!first && seq != prev + 1) __builtin_trap();
    if (rec.data() < bytes.data() || rec.data() + rec.size() > bytes.data() + bytes.size()) __builtin_trap();
    first = false;
    prev = seq;
  });
  static std::unique_ptr<Loop> loop = [] {
    auto l = Loop::Create();
    return l.ok() ? std::move(*l) : nullptr;
  }();
  if (!loop) return 0;
  static const std::string path = "/tmp/outpost-event-history-fuzz-" + std::to_string(::getpid());
  if (!sys::WriteFileAtomic(path, std::string(bytes), 0600, sys::Durability::kProcessCrash).ok()) return 0;
  task::EventLog log(50, 4096);
  (void)log.Persist(loop.get(), path);
  for (const auto& e : log.After(0)) {
    if (e.seq == 0) __builtin_trap();
  }
  (void)log.AfterRef(0, "j/t");
  (void)log.AfterRef(0, "j");
  return 0;
}
