// The keeper's exit journal (docs/process-model.md). Owns: the fixed ring of
// task exits not yet acknowledged by a worker, how much of it the current
// worker was already sent, the count of exits dropped on overflow, and the
// format in which an upgrade exec hands it (and the held FIFO fds) to the
// new image.
//
// Does not own: sending entries or applying acks (keeper/channel), reaping
// (keeper/keeper).
//
// Rules: fixed size, no allocation; the ring is not touched before exits
// arrive, so it costs no resident memory until then.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/error.h"

namespace outpost::keeper {

// No default member initialisers: the ring stays untouched (and out of the
// keeper's RSS) until exits arrive.
struct ExitRecord {
  int32_t pid;
  int32_t status;      // waitpid() status
  int64_t unix_nanos;  // CLOCK_REALTIME when reaped
};

// Fixed-capacity FIFO of task exits not yet acknowledged by a worker. When it
// is full the oldest entry is dropped and counted (the worker then learns the
// count in the hello reply and reports such tasks as "exit status unknown").
// Also tracks how many entries, from the oldest, were already sent to the
// current worker: the rest are sent when the socket has room.
class ExitJournal {
 public:
  static constexpr size_t kCapacity = 4096;

  void Push(const ExitRecord& r);
  // Removes the oldest entry for pid; false if there is none. *index (if
  // given) gets the position the entry had.
  bool Ack(int32_t pid, size_t* index = nullptr);
  void Clear();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const ExitRecord& at(size_t i) const { return ring_[(head_ + i) % kCapacity]; }  // 0 = oldest
  uint64_t dropped() const { return dropped_; }
  void set_dropped(uint64_t n) { dropped_ = n; }

  size_t sent() const { return sent_; }
  void MarkNextSent() {
    if (sent_ < size_) ++sent_;
  }
  void ResetSent() { sent_ = 0; }

 private:
  ExitRecord ring_[kCapacity];
  size_t head_ = 0;
  size_t size_ = 0;
  size_t sent_ = 0;
  uint64_t dropped_ = 0;
};

class KeeperChannel;

// What an upgrade exec hands to the new image in a memfd: a kJournalHeader
// record (pid = exits, status = held FIFO entries, value = dropped), the
// kExit records, then one kHoldFifos record per held entry (value = key,
// pid/status = the fd numbers, which stay open across execve). Load appends
// to *journal, keeps what it could read before an error, and gives the held
// fds to *channel (or closes them when channel is null).
Status SaveJournal(const ExitJournal& journal, int fd, const KeeperChannel* channel = nullptr);
Status LoadJournal(int fd, ExitJournal* journal, KeeperChannel* channel = nullptr);

}  // namespace outpost::keeper
