// The event history on disk (EventLog::Persist in task/events.h): how it is
// appended, rewritten and read back.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "base/log.h"
#include "base/sys.h"
#include "task/events.h"

namespace outpost::task {

namespace {

constexpr char kMagic[8] = {'O', 'P', 'E', 'V', 'T', 'S', '1', '\n'};
constexpr unsigned char kMarker = 0xA5;
constexpr size_t kFrame = 1 + 4 + 8;        // marker, length, seq
constexpr size_t kMaxRecord = 1 << 20;      // no event is this big
constexpr size_t kMaxFile = 16 << 20;       // larger is not ours: read as empty
constexpr int64_t kRewriteDelay = 1000LL * 1000000;

void Frame(uint64_t seq, std::string_view rec, std::string* out) {
  out->push_back(static_cast<char>(kMarker));
  uint32_t len = static_cast<uint32_t>(rec.size());
  out->append(reinterpret_cast<const char*>(&len), sizeof len);
  out->append(reinterpret_cast<const char*>(&seq), sizeof seq);
  out->append(rec.data(), rec.size());
}

}  // namespace

void ReadHistory(std::string_view file, const std::function<void(uint64_t, std::string_view)>& fn) {
  if (file.size() < sizeof kMagic || std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return;
  // The newest run of consecutive seqs: [run_start, run_end) of the records.
  std::vector<std::pair<uint64_t, std::string_view>> recs;
  size_t run = 0;
  size_t at = sizeof kMagic;
  while (at < file.size()) {
    if (file[at] == ' ' || file[at] == '\n') {  // a short rewrite's padding
      ++at;
      continue;
    }
    if (file.size() - at < kFrame || static_cast<unsigned char>(file[at]) != kMarker) break;
    uint32_t len;
    uint64_t seq;
    std::memcpy(&len, file.data() + at + 1, sizeof len);
    std::memcpy(&seq, file.data() + at + 5, sizeof seq);
    if (len > kMaxRecord || len > file.size() - at - kFrame || seq == 0 || seq == ~uint64_t{0}) break;
    if (!recs.empty() && seq != recs.back().first + 1) run = recs.size();
    recs.emplace_back(seq, file.substr(at + kFrame, len));
    at += kFrame + len;
  }
  for (size_t i = run; i < recs.size(); ++i) fn(recs[i].first, recs[i].second);
}

std::string EventLog::Serialize() const {
  std::string out(kMagic, sizeof kMagic);
  for (size_t i = 0; i < count_; ++i) Frame(first_seq_ + i, Record(i), &out);
  return out;
}

Status EventLog::Persist(Loop* loop, const std::string& path) {
  loop_ = loop;
  path_ = path;
  writes_ = std::make_unique<PendingWrites>(loop, sys::Durability::kProcessCrash);
  auto old = sys::ReadFile(path, kMaxFile);
  if (old.ok()) {
    size_t before = count_;
    ReadHistory(*old, [this](uint64_t seq, std::string_view rec) {
      if (seq >= next_seq_ || count_ == 0) Add(seq, rec);
    });
    if (count_ == before && old->size() > sizeof kMagic) {
      log::Warn("event history: nothing could be read back, starting anew", {{"file", path}});
    }
  } else if (old.error().code() != Code::kNotFound) {
    log::Warn("event history: cannot read it, starting anew", {{"file", path}, {"error", old.error().message()}});
  }
  // Rewritten at once: a torn last record or a foreign tail is cut off, and
  // appends continue from a clean file.
  Rewrite();
  return OkStatus();
}

void EventLog::Store(std::string_view rec) {
  if (file_.valid() && file_size_ >= 2 * max_bytes_) return Rewrite();  // compaction
  if (file_.valid()) {
    std::string framed;
    Frame(last_seq(), rec, &framed);
    ssize_t n = sys::RetryEintr([&] { return ::write(file_.get(), framed.data(), framed.size()); });
    if (n == static_cast<ssize_t>(framed.size())) {
      file_size_ += framed.size();
      return;
    }
    // A short or failed append (a full disk): the file is rewritten whole
    // (its torn tail is then gone), through PendingWrites.
    log::Warn("event history: append failed, rewriting it",
              {{"file", path_}, {"error", n < 0 ? std::string(std::strerror(errno)) : "short write"}});
    file_.Reset();
  }
  // A rewrite is due: at most one a second while writes fail.
  if (rewrite_timer_ == 0) {
    rewrite_timer_ = loop_->AddTimer(kRewriteDelay, [this] {
      rewrite_timer_ = 0;
      Rewrite();
    });
  }
}

void EventLog::Rewrite() {
  file_.Reset();
  std::string data = Serialize();
  bool kept = false;
  Status st = writes_->Write(path_, data, &kept);
  if (!st.ok() || kept) {
    if (!st.ok()) log::Warn("event history: cannot write it", {{"file", path_}, {"error", st.error().message()}});
    // Appends wait for a rewrite that lands (after the next event).
    return;
  }
  auto fd = sys::Open(path_, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (!fd.ok()) return;
  // The file may be longer than data (a short rewrite over a longer file
  // pads with spaces): appends go after it all.
  off_t end = ::lseek(fd->get(), 0, SEEK_END);
  file_size_ = end > 0 ? static_cast<uint64_t>(end) : data.size();
  file_ = std::move(*fd);
}

}  // namespace outpost::task
