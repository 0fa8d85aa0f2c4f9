#include "task/events.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace outpost::task {

// A packed event: its timestamp (i64, host byte order: the history never
// leaves the process), then strings, each a varint length and its bytes:
// task id, task name, job, type, message, then the annotations' count
// (varint) and their keys and values. Its seq and its size follow from
// where it is (starts_).
namespace {

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutStr(std::string* out, const std::string& s) {
  PutVarint(out, s.size());
  out->append(s);
}

// Reads a packed record; every read is bounds-checked, so a broken record
// yields empty fields, never a read past it.
struct Reader {
  const char* p;
  const char* end;
  uint64_t U64() {
    uint64_t v = 0;
    if (static_cast<size_t>(end - p) >= sizeof v) std::memcpy(&v, p, sizeof v);
    p += std::min<size_t>(sizeof v, static_cast<size_t>(end - p));
    return v;
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; p < end && shift < 64; shift += 7) {
      uint8_t b = static_cast<uint8_t>(*p++);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  }
  std::string_view Str() {
    size_t n = static_cast<size_t>(std::min<uint64_t>(Varint(), static_cast<uint64_t>(end - p)));
    std::string_view s(p, n);
    p += n;
    return s;
  }
};

EventRecord Unpack(uint64_t seq, std::string_view rec) {
  Reader r{rec.data(), rec.data() + rec.size()};
  EventRecord out;
  out.seq = seq;
  out.event.timestamp_unix_nanos = static_cast<int64_t>(r.U64());
  out.event.task_id = std::string(r.Str());
  out.event.task_name = std::string(r.Str());
  out.event.job = std::string(r.Str());
  out.event.type = std::string(r.Str());
  out.event.message = std::string(r.Str());
  for (uint64_t n = r.Varint(); n > 0 && r.p < r.end; --n) {
    std::string key(r.Str());
    out.event.annotations[key] = std::string(r.Str());
  }
  return out;
}

}  // namespace

EventLog::~EventLog() {
  if (rewrite_timer_ != 0 && loop_) loop_->CancelTimer(rewrite_timer_);
}

void EventLog::Publish(const driver::TaskEvent& ev) {
  std::string rec;
  uint64_t ts = static_cast<uint64_t>(ev.timestamp_unix_nanos);
  rec.append(reinterpret_cast<const char*>(&ts), sizeof ts);
  PutStr(&rec, ev.task_id);
  PutStr(&rec, ev.task_name);
  PutStr(&rec, ev.job);
  PutStr(&rec, ev.type);
  PutStr(&rec, ev.message);
  PutVarint(&rec, ev.annotations.size());
  for (const auto& [k, v] : ev.annotations) {
    PutStr(&rec, k);
    PutStr(&rec, v);
  }
  Add(next_seq_, rec);
  if (!path_.empty()) Store(rec);
  if (notify_.empty()) return;
  auto pending = std::move(notify_);
  notify_.clear();
  for (auto& [id, cb] : pending) cb();
}

void EventLog::Add(uint64_t seq, std::string_view rec) {
  if (count_ == 0) first_seq_ = seq;
  starts_.push_back(static_cast<uint32_t>(packed_.size()));
  packed_.append(rec.data(), rec.size());
  next_seq_ = seq + 1;
  ++count_;
  Bound();
}

void EventLog::Bound() {
  while (count_ > 1 && (count_ > capacity_ || bytes() > max_bytes_)) DropOldest();
  if (head_ > 4096 && head_ > packed_.size() / 4) {
    packed_.erase(0, head_);
    starts_.erase(starts_.begin(), starts_.begin() + static_cast<std::ptrdiff_t>(first_));
    for (uint32_t& at : starts_) at -= static_cast<uint32_t>(head_);
    head_ = 0;
    first_ = 0;
  }
}

std::string_view EventLog::Record(size_t i) const {
  size_t at = starts_[first_ + i];
  size_t end = i + 1 < count_ ? starts_[first_ + i + 1] : packed_.size();
  return std::string_view(packed_.data() + at, end - at);
}

void EventLog::DropOldest() {
  ++first_;
  --count_;
  ++first_seq_;
  head_ = starts_[first_];
}

bool EventLog::Filter::Matches(std::string_view id, std::string_view name, std::string_view j) const {
  if (job_or_task) return j == job || id == task_id;
  return (task_id.empty() || id == task_id) && (job.empty() || j == job) && (task_name.empty() || name == task_name);
}

EventLog::Filter EventLog::RefFilter(const std::string& ref) {
  Filter f;
  size_t slash = ref.find('/');
  if (slash != std::string::npos) {
    f.job = ref.substr(0, slash);
    f.task_name = ref.substr(slash + 1);
  } else {
    f.job = ref;
    f.task_id = ref;
    f.job_or_task = true;
  }
  return f;
}

template <typename Fn>
void EventLog::Scan(uint64_t after_seq, const Filter& f, Fn fn) const {
  for (size_t i = after_seq < first_seq_ ? 0 : after_seq - first_seq_ + 1; i < count_; ++i) {
    std::string_view rec = Record(i);
    if (!f.any()) {
      Reader r{rec.data() + std::min(sizeof(uint64_t), rec.size()), rec.data() + rec.size()};
      std::string_view id = r.Str();
      std::string_view name = r.Str();
      std::string_view j = r.Str();
      if (!f.Matches(id, name, j)) continue;
    }
    if (!fn(first_seq_ + i, rec)) return;
  }
}

std::vector<EventRecord> EventLog::After(uint64_t after_seq, const std::string& task_id,
                                         const std::string& job) const {
  Filter f;
  f.task_id = task_id;
  f.job = job;
  std::vector<EventRecord> out;
  Scan(after_seq, f, [&](uint64_t seq, std::string_view rec) {
    out.push_back(Unpack(seq, rec));
    return true;
  });
  return out;
}

bool EventLog::AnyAfter(uint64_t after_seq, const std::string& task_id, const std::string& job) const {
  Filter f;
  f.task_id = task_id;
  f.job = job;
  bool any = false;
  Scan(after_seq, f, [&](uint64_t, std::string_view) {
    any = true;
    return false;
  });
  return any;
}

std::vector<EventRecord> EventLog::AfterRef(uint64_t after_seq, const std::string& ref) const {
  std::vector<EventRecord> out;
  Scan(after_seq, RefFilter(ref), [&](uint64_t seq, std::string_view rec) {
    out.push_back(Unpack(seq, rec));
    return true;
  });
  return out;
}

bool EventLog::AnyAfterRef(uint64_t after_seq, const std::string& ref) const {
  bool any = false;
  Scan(after_seq, RefFilter(ref), [&](uint64_t, std::string_view) {
    any = true;
    return false;
  });
  return any;
}

bool EventLog::Holds(const driver::TaskEvent& ev) const {
  Filter f;
  f.task_id = ev.task_id;
  bool held = false;
  Scan(0, f, [&](uint64_t seq, std::string_view rec) {
    EventRecord r = Unpack(seq, rec);
    held = r.event.timestamp_unix_nanos == ev.timestamp_unix_nanos && r.event.type == ev.type &&
           r.event.message == ev.message;
    return !held;
  });
  return held;
}

bool EventLog::AnyOf(const std::string& ref) const { return AnyAfterRef(0, ref); }

uint64_t EventLog::NotifyOnEvent(std::function<void()> cb) {
  uint64_t id = next_notify_++;
  notify_[id] = std::move(cb);
  return id;
}

}  // namespace outpost::task
