#include "keeper/journal.h"

#include <unistd.h>

#include <cerrno>

#include "base/strings.h"
#include "base/sys.h"
#include "keeper/channel.h"
#include "keeper/proto.h"

namespace outpost::keeper {

namespace kp = proto;

void ExitJournal::Push(const ExitRecord& r) {
  if (size_ == kCapacity) {
    head_ = (head_ + 1) % kCapacity;
    --size_;
    ++dropped_;
    if (sent_ > 0) --sent_;
  }
  ring_[(head_ + size_) % kCapacity] = r;
  ++size_;
}

bool ExitJournal::Ack(int32_t pid, size_t* index) {
  size_t i = 0;
  while (i < size_ && at(i).pid != pid) ++i;
  if (i == size_) return false;
  if (index) *index = i;
  if (i == 0) {
    head_ = (head_ + 1) % kCapacity;  // the usual case: acks come in order
  } else {
    for (size_t k = i; k + 1 < size_; ++k) ring_[(head_ + k) % kCapacity] = ring_[(head_ + k + 1) % kCapacity];
  }
  --size_;
  if (i < sent_) --sent_;
  return true;
}

void ExitJournal::Clear() {
  head_ = size_ = sent_ = 0;
}

namespace {

// Reads exactly len bytes; false on EOF or error (errno set, 0 for EOF).
bool ReadFull(int fd, uint8_t* buf, size_t len) {
  while (len > 0) {
    ssize_t n = sys::Read(fd, buf, len);
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    buf += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status SaveJournal(const ExitJournal& journal, int fd, const KeeperChannel* channel) {
  constexpr size_t kBatch = 64;
  uint8_t buf[kBatch][kp::kMessageSize];
  size_t used = 0;
  auto put = [&](const kp::Message& m) -> Status {
    kp::Encode(m, buf[used++]);
    if (used < kBatch) return OkStatus();
    used = 0;
    return sys::WriteAll(fd, buf, sizeof buf, "write exit journal");
  };
  const size_t held = channel ? channel->held_count() : 0;
  kp::Message header;
  header.type = kp::Type::kJournalHeader;
  header.pid = static_cast<int32_t>(journal.size());
  header.status = static_cast<int32_t>(held);
  header.value = static_cast<int64_t>(journal.dropped());
  OUTPOST_RETURN_IF_ERROR(put(header));
  for (size_t i = 0; i < journal.size(); ++i) {
    const ExitRecord& r = journal.at(i);
    kp::Message m;
    m.type = kp::Type::kExit;
    m.pid = r.pid;
    m.status = r.status;
    m.value = r.unix_nanos;
    OUTPOST_RETURN_IF_ERROR(put(m));
  }
  for (size_t i = 0; i < held; ++i) {
    kp::Message m;
    m.type = kp::Type::kHoldFifos;
    m.value = channel->held_key(i);
    m.pid = channel->held_fds(i)[0];
    m.status = channel->held_fds(i)[1];
    OUTPOST_RETURN_IF_ERROR(put(m));
  }
  if (used > 0) OUTPOST_RETURN_IF_ERROR(sys::WriteAll(fd, buf, used * kp::kMessageSize, "write exit journal"));
  return OkStatus();
}

Status LoadJournal(int fd, ExitJournal* journal, KeeperChannel* channel) {
  uint8_t buf[kp::kMessageSize];
  kp::Message m;
  if (!ReadFull(fd, buf, sizeof buf)) {
    return errno ? ErrnoError("read exit journal") : Error(Code::kInvalidArgument, "exit journal: empty");
  }
  kp::DecodeError e = kp::Decode(buf, sizeof buf, &m);
  if (e != kp::DecodeError::kNone || m.type != kp::Type::kJournalHeader || m.pid < 0 || m.status < 0 ||
      static_cast<size_t>(m.status) > KeeperChannel::kMaxHeld) {
    return Error(Code::kInvalidArgument, "exit journal: bad header");
  }
  journal->set_dropped(journal->dropped() + static_cast<uint64_t>(m.value));
  const int32_t count = m.pid;
  const int32_t held = m.status;
  for (int32_t i = 0; i < count; ++i) {
    if (!ReadFull(fd, buf, sizeof buf)) {
      return Error(Code::kInvalidArgument, Format("exit journal: truncated after %d of %d records", i, count));
    }
    e = kp::Decode(buf, sizeof buf, &m);
    if (e != kp::DecodeError::kNone || m.type != kp::Type::kExit) {
      return Error(Code::kInvalidArgument, Format("exit journal: record %d is not an exit", i));
    }
    journal->Push(ExitRecord{m.pid, m.status, m.value});
  }
  for (int32_t i = 0; i < held; ++i) {
    if (!ReadFull(fd, buf, sizeof buf)) {
      return Error(Code::kInvalidArgument, Format("exit journal: truncated after %d of %d held FIFOs", i, held));
    }
    e = kp::Decode(buf, sizeof buf, &m);
    if (e != kp::DecodeError::kNone || m.type != kp::Type::kHoldFifos) {
      return Error(Code::kInvalidArgument, Format("exit journal: held FIFO record %d is not one", i));
    }
    if (channel) {
      channel->AdoptHeld(m.value, m.pid, m.status);
    } else {
      for (int held_fd : {m.pid, m.status}) {
        if (held_fd > STDERR_FILENO) ::close(held_fd);
      }
    }
  }
  return OkStatus();
}

}  // namespace outpost::keeper
