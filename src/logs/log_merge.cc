#include "logs/log_merge.h"

#include <algorithm>

namespace outpost::logs::logfiles {

Cursor CursorAt(const Chunk& chunk, size_t pos) {
  if (pos >= chunk.data.size()) return chunk.next;
  size_t at = 0;
  for (const Span& s : chunk.spans) {
    if (pos < at + s.length) return Cursor{s.inode, s.offset + (pos - at)};
    at += s.length;
  }
  return chunk.next;
}

namespace {

// Cuts r after its last part at or before t.
void CutAfter(StreamRead* r, int64_t t) {
  size_t keep = 0, parts = 0;
  for (const TimedPart& p : r->times) {
    if (p.unix_seconds > t) break;
    keep += p.length;
    ++parts;
  }
  if (parts == r->times.size()) return;
  r->chunk.next = CursorAt(r->chunk, keep);
  r->chunk.data.resize(keep);
  r->times.resize(parts);
}

}  // namespace

Merged Merge(std::vector<StreamRead> reads) {
  bool any_full = false;
  int64_t t = 0;
  for (const StreamRead& r : reads) {
    if (!r.full || r.times.empty()) continue;
    int64_t last = r.times.back().unix_seconds;
    t = any_full ? std::min(t, last) : last;
    any_full = true;
  }
  if (any_full) {
    for (StreamRead& r : reads) {
      if (!r.full) CutAfter(&r, t);
    }
  }
  Merged m;
  std::vector<size_t> part(reads.size(), 0), byte(reads.size(), 0);
  for (;;) {
    int best = -1;
    for (size_t i = 0; i < reads.size(); ++i) {
      if (part[i] >= reads[i].times.size()) continue;
      if (best < 0 || reads[i].times[part[i]].unix_seconds <
                          reads[static_cast<size_t>(best)].times[part[static_cast<size_t>(best)]].unix_seconds) {
        best = static_cast<int>(i);
      }
    }
    if (best < 0) break;
    size_t b = static_cast<size_t>(best);
    const TimedPart& p = reads[b].times[part[b]++];
    size_t len = static_cast<size_t>(std::min<uint64_t>(p.length, reads[b].chunk.data.size() - byte[b]));
    m.data.append(reads[b].chunk.data, byte[b], len);
    byte[b] += len;
    m.parts.push_back(MergedPart{best, len, p.unix_seconds});
  }
  for (const StreamRead& r : reads) m.next.push_back(r.chunk.next);
  return m;
}

void KeepLastLines(Merged* m, size_t n) {
  size_t lines = 0, start = 0;
  bool found = false;
  for (size_t i = m->data.size(); i-- > 0;) {
    if (m->data[i] != '\n' || i + 1 == m->data.size()) continue;
    if (++lines == n) {
      start = i + 1;
      found = true;
      break;
    }
  }
  if (n == 0) start = m->data.size();
  else if (!found) return;
  m->data.erase(0, start);
  size_t cut = start;
  std::vector<MergedPart> kept;
  for (const MergedPart& p : m->parts) {
    if (cut >= p.length) {
      cut -= p.length;
      continue;
    }
    MergedPart q = p;
    q.length -= cut;
    cut = 0;
    kept.push_back(q);
  }
  m->parts.swap(kept);
}

}  // namespace outpost::logs::logfiles
