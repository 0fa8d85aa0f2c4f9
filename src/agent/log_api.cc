#include "agent/log_api.h"

#include <algorithm>
#include <memory>

#include "agent/api_util.h"
#include "base/clock.h"
#include "base/pb.h"
#include "logs/log_files.h"
#include "logs/log_merge.h"
#include "loop/loop.h"
#include "task.pb.h"
#include "task/manager.h"

namespace outpost::agent {

namespace {

namespace logfiles = logs::logfiles;

constexpr int64_t kMaxWaitNanos = 60LL * kNanosPerSecond;
constexpr size_t kMaxLogChunk = 60000;  // nanopb bytes fields are < 64 KiB
constexpr int64_t kLogPollNanos = 100 * kNanosPerMilli;

// One call: the streams it reads (stdout, stderr or both), where each
// continues, and how it answers. The first call without a cursor and with
// tail_lines >= 0 answers the tail; every other one reads on from cursors
// and, with wait_nanos, waits (polling the files) until new data arrives,
// the task exits, or the wait ends.
struct LogCall {
  task::TaskManager* tm;
  Loop* loop;
  std::string id;
  std::vector<std::string> paths;  // per stream
  std::vector<bool> err;           // per stream: stderr
  std::vector<logfiles::Cursor> cursors;
  bool parts = false;  // answer with the parts' streams and times
  int64_t deadline = 0;
  wire::Responder r;
};

bool Exited(const LogCall& c) {
  auto v = c.tm->Inspect(c.id);
  return !v.ok() || v->status.state == driver::TaskState::kExited;
}

void Reply(const LogCall& c, const logfiles::Merged& m, bool exited) {
  Arena a;
  outpost_v1_ReadLogsResponse resp = outpost_v1_ReadLogsResponse_init_zero;
  resp.data = a.Bytes(m.data);
  // The cursor is stdout's with both streams, else the one stream's.
  resp.has_cursor = true;
  resp.cursor.inode = m.next[0].inode;
  resp.cursor.offset = m.next[0].offset;
  if (m.next.size() > 1) {
    resp.has_stderr_cursor = true;
    resp.stderr_cursor.inode = m.next[1].inode;
    resp.stderr_cursor.offset = m.next[1].offset;
  }
  resp.task_exited = exited;
  if (c.parts) {
    resp.parts_count = static_cast<pb_size_t>(m.parts.size());
    resp.parts = a.Array<outpost_v1_LogPart>(m.parts.size());
    for (size_t i = 0; i < m.parts.size(); ++i) {
      resp.parts[i] = outpost_v1_LogPart_init_zero;
      resp.parts[i].length = static_cast<uint32_t>(m.parts[i].length);
      resp.parts[i].stderr = c.err[static_cast<size_t>(m.parts[i].stream)];
      resp.parts[i].unix_seconds = m.parts[i].unix_seconds;
    }
  }
  c.r.Finish(PbEncode(outpost_v1_ReadLogsResponse_fields, &resp, "ReadLogsResponse"));
}

// Each stream's share of a reply.
size_t Share(const LogCall& c) { return kMaxLogChunk / c.paths.size(); }

logfiles::StreamRead Timed(const std::string& path, logfiles::Chunk chunk, size_t limit, bool times) {
  logfiles::StreamRead s;
  s.full = chunk.data.size() >= limit;
  if (times) {
    s.times = logfiles::Times(path, chunk);
  } else if (!chunk.data.empty()) {
    s.times.push_back(logfiles::TimedPart{chunk.data.size(), 0});
  }
  s.chunk = std::move(chunk);
  return s;
}

void Poll(std::shared_ptr<LogCall> c) {
  std::vector<logfiles::StreamRead> reads;
  bool any = false;
  // Times are needed to merge two streams, or when asked for.
  bool times = c->parts || c->paths.size() > 1;
  for (size_t i = 0; i < c->paths.size(); ++i) {
    auto chunk = logfiles::ReadFrom(c->paths[i], c->cursors[i], Share(*c));
    if (!chunk.ok()) return c->r.Fail(chunk.error());
    any = any || !chunk->data.empty();
    reads.push_back(Timed(c->paths[i], std::move(*chunk), Share(*c), times));
  }
  bool exited = Exited(*c);
  if (any || exited || MonotonicNanos() >= c->deadline || !c->r.pending()) {
    return Reply(*c, logfiles::Merge(std::move(reads)), exited);
  }
  for (size_t i = 0; i < reads.size(); ++i) c->cursors[i] = reads[i].chunk.next;
  c->loop->AddTimer(kLogPollNanos, [c] { Poll(c); });
}

}  // namespace

void ServeReadLogs(task::TaskManager* tm, Loop* loop, std::string_view payload, wire::Responder r) {
  PbOwned<outpost_v1_ReadLogsRequest> req(outpost_v1_ReadLogsRequest_fields);
  if (!DecodeOrFail(payload, &req, "ReadLogsRequest", r)) return;
  auto resolved = tm->ResolveId(PbString(req->id));
  if (!resolved.ok()) return r.Fail(resolved.error());
  auto c = std::make_shared<LogCall>();
  c->tm = tm;
  c->loop = loop;
  c->id = *resolved;
  c->parts = req->timestamps || req->all;
  c->r = r;
  std::vector<bool> streams = req->all ? std::vector<bool>{false, true} : std::vector<bool>{req->stderr};
  for (bool err : streams) {
    auto path = tm->LogPath(c->id, err);
    if (!path.ok()) {
      // JOB/TASK resolved, so the task is the job's: it has never run.
      std::string asked = PbString(req->id);
      if (path.error().code() != Code::kNotFound || asked.find('/') == std::string::npos) return r.Fail(path.error());
      return r.Fail(Error(Code::kNotFound, asked + " has no logs yet: it has not started (`outpost inspect " + asked +
                                               "` says why)"));
    }
    c->paths.push_back(*path);
    c->err.push_back(err);
  }
  const int max_files = tm->LogMaxFiles(c->id);
  if (req->has_cursor) {
    c->cursors.push_back(logfiles::Cursor{req->cursor.inode, req->cursor.offset});
    if (req->all) c->cursors.push_back(logfiles::Cursor{req->stderr_cursor.inode, req->stderr_cursor.offset});
  } else if (req->since_unix_seconds > 0) {
    for (const std::string& p : c->paths) {
      auto at = logfiles::Since(p, max_files, req->since_unix_seconds);
      if (!at.ok()) return r.Fail(at.error());
      c->cursors.push_back(*at);
    }
  } else if (req->tail_lines >= 0) {
    std::vector<logfiles::StreamRead> reads;
    for (const std::string& p : c->paths) {
      auto tail = logfiles::Tail(p, max_files, static_cast<size_t>(req->tail_lines), Share(*c));
      if (!tail.ok()) return r.Fail(tail.error());
      reads.push_back(Timed(p, std::move(*tail), Share(*c) + 1, c->parts));
    }
    logfiles::Merged m = logfiles::Merge(std::move(reads));
    if (c->paths.size() > 1) logfiles::KeepLastLines(&m, static_cast<size_t>(req->tail_lines));
    return Reply(*c, m, Exited(*c));
  } else {
    c->cursors.assign(c->paths.size(), logfiles::Cursor{});  // {0, 0}: the start of the active file
  }
  c->deadline = MonotonicNanos() + std::min(std::max<int64_t>(req->wait_nanos, 0), kMaxWaitNanos);
  Poll(c);
}

}  // namespace outpost::agent
