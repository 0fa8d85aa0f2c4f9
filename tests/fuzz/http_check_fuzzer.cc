// libFuzzer target for job/check_http (what an http health check reads
// from a task: untrusted bytes). The first byte picks a chunking pattern;
// the rest is the response, fed whole, in chunks, and one byte at a time.
// Invariants: the three feedings end in the same state, status and error;
// a finished parse has a status of 100-999 (never an interim 1xx but 101);
// an unfinished one turns into an error at Finish; the head stays bounded.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "job/check_http.h"

namespace {

using outpost::job::HttpResponseParser;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  unsigned pattern = data[0];
  const char* text = reinterpret_cast<const char*>(data + 1);
  size_t n = size - 1;

  HttpResponseParser whole, chunked, bytes;
  whole.Feed(text, n);
  size_t step = 1 + (pattern & 31), off = 0;
  while (off < n) {
    size_t len = std::min(step, n - off);
    chunked.Feed(text + off, len);
    off += len;
    step = 1 + ((step * 7 + pattern) & 63);
  }
  for (size_t i = 0; i < n; i++) bytes.Feed(text + i, 1);
  for (HttpResponseParser* p : {&chunked, &bytes}) {
    Check(p->state() == whole.state());
    Check(p->status() == whole.status());
    Check(p->error() == whole.error());
    Check(p->reason() == whole.reason());
  }
  if (whole.state() == HttpResponseParser::State::kDone) {
    Check(whole.status() >= 100 && whole.status() <= 999);
    Check(whole.status() >= 200 || whole.status() == 101);
    Check(whole.reason().size() <= 67);
  }
  if (whole.state() == HttpResponseParser::State::kNeedMore) {
    Check(n <= HttpResponseParser::kMaxHeadBytes);
    Check(whole.Finish() == HttpResponseParser::State::kError);
  }
  return 0;
}
