// Events of tasks and jobs. Owns: the EventSink every producer publishes to
// (drivers through the task layer, the task layer's pipelines, job
// supervision; later steps such as hooks, networks and NRI publish here
// too), and the EventLog behind `outpost events`: a bounded history with
// sequence numbers, filtered reads and one-shot notifications for
// long-polling readers, kept on disk across restarts of the worker
// (Persist).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/fd.h"
#include "driver/driver.h"
#include "loop/pending_writes.h"

namespace outpost::task {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Publish(const driver::TaskEvent& ev) = 0;
  // Whether the history already holds an event of ev's task with its time,
  // type and message (a driver's event replayed to a new worker).
  virtual bool Holds(const driver::TaskEvent&) const { return false; }
};

struct EventRecord {
  uint64_t seq = 0;
  driver::TaskEvent event;
};

// The history behind `outpost events`: the newest events, at most
// `capacity` of them in at most `max_bytes` of packed records (whichever
// binds first; the newest event is always kept). Each event is packed into
// one byte buffer (its strings length-prefixed, no allocation of its own):
// about 70 bytes for a typical event instead of about 260 as a TaskEvent in
// a deque, and a bound on the history's memory whatever its messages'
// lengths.
class EventLog : public EventSink {
 public:
  static constexpr size_t kDefaultCapacity = 1000;
  static constexpr size_t kDefaultMaxBytes = 128 << 10;
  explicit EventLog(size_t capacity = kDefaultCapacity, size_t max_bytes = kDefaultMaxBytes)
      : capacity_(capacity), max_bytes_(max_bytes) {}

  ~EventLog() override;
  void Publish(const driver::TaskEvent& ev) override;
  bool Holds(const driver::TaskEvent& ev) const override;

  // Keeps the history in the file at path from now on, and first takes
  // back what an earlier worker left there (its sequence numbers go on).
  // Each event is appended as it is published (one write, no fsync: the
  // history survives the worker's death and upgrades, not a power cut);
  // once the file has grown to twice max_bytes it is rewritten from
  // memory, so it stays under 2 * max_bytes plus one event. A full disk
  // costs no event: the file is then rewritten whole through PendingWrites
  // when there is room. The file is untrusted on load (ReadHistory).
  Status Persist(Loop* loop, const std::string& path);

  // Events of ref, as `outpost events REF` means it: "JOB/TASK" (by job and
  // task name), else a job's name or a bare task's id. Whether the history
  // holds any (a removed job's, until they age out).
  bool AnyOf(const std::string& ref) const;
  std::vector<EventRecord> AfterRef(uint64_t after_seq, const std::string& ref) const;
  bool AnyAfterRef(uint64_t after_seq, const std::string& ref) const;

  // Events with seq > after_seq (task_id / job "" = all).
  std::vector<EventRecord> After(uint64_t after_seq, const std::string& task_id = "",
                                 const std::string& job = "") const;
  // Whether After() would return any (without unpacking them).
  bool AnyAfter(uint64_t after_seq, const std::string& task_id = "", const std::string& job = "") const;
  uint64_t last_seq() const { return next_seq_ - 1; }
  size_t size() const { return count_; }          // events held
  size_t bytes() const { return packed_.size() - head_; }  // their packed size
  // Runs cb once, after the next event is recorded (long-poll).
  uint64_t NotifyOnEvent(std::function<void()> cb);
  void CancelNotify(uint64_t id) { notify_.erase(id); }

 private:
  // Calls fn(seq, record) for each held event with seq > after_seq whose
  // task id and job match, with its packed record, until fn returns false.
  // Which events a read wants: by task id and job (each "" = any), or by
  // a ref (see AfterRef).
  struct Filter {
    std::string task_id, job, task_name;
    bool job_or_task = false;  // job == job or task id == task_id
    bool any() const { return task_id.empty() && job.empty() && task_name.empty(); }
    bool Matches(std::string_view id, std::string_view name, std::string_view j) const;
  };
  static Filter RefFilter(const std::string& ref);
  template <typename Fn>
  void Scan(uint64_t after_seq, const Filter& f, Fn fn) const;
  std::string_view Record(size_t i) const;  // the i-th held event's packed record
  void DropOldest();
  void Add(uint64_t seq, std::string_view rec);  // a packed record with its seq (next_seq_ or a loaded one)
  void Bound();
  void Store(std::string_view rec);  // appends it to the file, or rewrites the file
  std::string Serialize() const;
  void Rewrite();

  size_t capacity_;
  size_t max_bytes_;
  // Records back to back, oldest first, from packed_[head_]; the bytes
  // before head_ are dropped records, cut off once they are a quarter of
  // the buffer (so the buffer is at most a third bigger than the history).
  std::string packed_;
  size_t head_ = 0;
  // Where each held event's record starts in packed_ (from starts_[first_];
  // it ends where the next starts): reads start at the first event they
  // want instead of walking the history.
  std::vector<uint32_t> starts_;
  size_t first_ = 0;
  size_t count_ = 0;
  uint64_t first_seq_ = 1;  // seq of the oldest held event
  uint64_t next_seq_ = 1;
  std::map<uint64_t, std::function<void()>> notify_;
  uint64_t next_notify_ = 1;

  // Persist: the file, its append fd (invalid while a rewrite is due) and
  // its size.
  std::string path_;
  Loop* loop_ = nullptr;
  std::unique_ptr<PendingWrites> writes_;
  UniqueFd file_;
  uint64_t file_size_ = 0;
  Loop::TimerId rewrite_timer_ = 0;  // a rewrite after a failed write, at most once a second
};

// The history file's records, as Persist writes them: the magic
// "OPEVTS1\n", then per event a marker byte, its packed record's length
// (u32), its seq (u64) and the record. Any bytes are taken: the records up
// to the first one that does not fit are read, spaces and newlines between
// records are skipped (a short rewrite pads with them), and only the newest run of
// consecutive seqs is kept. fn(seq, record) per record kept, oldest first.
void ReadHistory(std::string_view file, const std::function<void(uint64_t, std::string_view)>& fn);

}  // namespace outpost::task
