// The agent's heap: malloc's thresholds (TuneMalloc) and what a burst of
// work leaves, given back to the kernel once the burst is over
// (Agent::TrimAfterActivity).
#include <malloc.h>

#include "agent/agent.h"
#include "base/clock.h"

namespace outpost::agent {

// glibc raises its mmap threshold to the size of every large block freed
// (up to 32 MiB), so after one big reply (a list of 1,000 tasks) or a burst
// of pipelined calls, buffers of that size come from the heap and stay
// resident after they are freed, between the long-lived per-task objects.
// Fixed thresholds keep large buffers in their own mappings, returned when
// freed, and let free() give back the top of the heap: the agent runs for
// years and its memory per task is measured (docs/benchmarks.md).
void TuneMalloc() {
  (void)::mallopt(M_MMAP_THRESHOLD, 64 << 10);
  (void)::mallopt(M_TRIM_THRESHOLD, 128 << 10);
}

// A burst of work (starts, stops, restarts: each publishes events) leaves
// freed temporaries between the long-lived objects of the tasks it made,
// about 1.3 KiB per task started in a pipelined burst, which would stay
// resident for good. Once the events have stopped for 250 ms, whole free
// pages inside the heap go back to the kernel: once per burst, never in
// the middle of one (refaulting them would slow it down), and an idle agent
// is never woken for it. Fewer than kTrimEvents events since the last trim
// are not worth it (one restart of a crash-looping task publishes about
// four: a wake-up and a trim per restart, then the same pages faulted in
// again at the next): what they left waits for a bigger burst. The first
// burst (start-up, recovery) is always trimmed after.
void Agent::TrimAfterActivity() {
  constexpr uint64_t kTrimEvents = 64;
  events_.NotifyOnEvent([this] {
    if (trim_timer_ != 0) return;
    if (trimmed_at_seq_ != kNeverTrimmed && events_.last_seq() - trimmed_at_seq_ < kTrimEvents) {
      return TrimAfterActivity();
    }
    TrimWhenQuiet(events_.last_seq());
  });
}

void Agent::TrimWhenQuiet(uint64_t seen) {
  constexpr int64_t kQuietNanos = 250 * kNanosPerMilli;
  trim_timer_ = loop_->AddTimer(kQuietNanos, [this, seen] {
    trim_timer_ = 0;
    if (events_.last_seq() != seen) return TrimWhenQuiet(events_.last_seq());
    (void)::malloc_trim(0);
    trimmed_at_seq_ = seen;
    TrimAfterActivity();
  });
}

}  // namespace outpost::agent
