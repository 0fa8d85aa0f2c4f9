// The keeper <-> worker protocol. Owns: the fixed-size messages exchanged on
// the SOCK_SEQPACKET socketpair between the keeper (the parent of every task)
// and the worker, their encoding, and the record format of the exit journal
// handed across an in-place upgrade (the same 32-byte records).
//
// Does not own: the sockets, the journal (keeper/keeper) or the worker side of
// the link (keeper/link).
//
// Every message is one 32-byte datagram in host byte order (both ends run on
// the same machine):
//
//   offset  0  u32  magic    kMagic
//   offset  4  u16  version  the sender's protocol version (>= 1)
//   offset  6  u16  type     Type
//   offset  8  i32  pid
//   offset 12  i32  status   waitpid() status (kExit)
//   offset 16  i64  value    see Type
//   offset 24  u64  reserved zero
//
// Compatibility: the keeper and the worker may run different binaries (the
// binary is replaced on disk and the worker restarts before the keeper is
// upgraded). A later version may only add message types, use the reserved
// bytes or append bytes; so a receiver decodes any version >= 1, reads the v1
// fields, ignores trailing bytes and ignores types it does not know.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace outpost::keeper::proto {

constexpr uint32_t kMagic = 0x31706b6f;  // "okp1" in memory on little-endian machines
constexpr uint16_t kVersion = 1;
constexpr size_t kMessageSize = 32;

enum class Type : uint16_t {
  // worker -> keeper, once per connection, after the worker's API is up:
  // "I am ready; send every exit I have not acknowledged". pid = worker pid.
  kHello = 1,
  // keeper -> worker, answer to kHello, before any kExit. pid = keeper pid,
  // status = number of journaled exits that follow (the replay), value =
  // task exits dropped so far because the journal overflowed.
  kHelloReply = 2,
  // keeper -> worker: a child of the keeper other than the worker was reaped.
  // pid, status = waitpid() status, value = CLOCK_REALTIME ns of the reap.
  kExit = 3,
  // worker -> keeper: the exit of pid is recorded durably; forget it. Removes
  // the oldest journal entry for pid (a pid can appear twice after reuse).
  kAck = 4,
  // keeper -> worker, once per connection: every exit the keeper held when
  // the hello arrived has been sent (the worker may now conclude that a task
  // gone without an exit record ended while no keeper ran). pid = how many.
  kReplayDone = 5,
  // Journal transfer across an upgrade exec only (never on the socket): the
  // first record; pid = number of kExit records that follow, value = dropped.
  kJournalHeader = 6,
  // worker -> keeper: hold these FIFO fds (SCM_RIGHTS, one or two, opened
  // O_RDWR) for the task whose key (a hash of the task id) is in value, so
  // that what the task wrote survives in the pipe while no worker reads, even
  // after the task exits. A hold with a key already held replaces it.
  kHoldFifos = 7,
  // worker -> keeper: close the FIFO fds held under key (value): the task's
  // logs are drained and the task is gone.
  kReleaseFifos = 8,
  // worker -> keeper: the worker's loop is running (sent from a loop timer).
  // value = how long the keeper may go without the next one before it kills
  // the worker (ns; 0 = stop expecting beats). The first beat, once the
  // worker has recovered its tasks and jobs, arms the keeper's deadline.
  kBeat = 9,
};

// Key of a task for kHoldFifos/kReleaseFifos: FNV-1a of its id (pids are
// reused; ids are not).
inline int64_t TaskKey(const char* id, size_t len) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; ++i) {
    h ^= static_cast<unsigned char>(id[i]);
    h *= 1099511628211ULL;
  }
  return static_cast<int64_t>(h);
}

struct Message {
  Type type = Type::kHello;
  int32_t pid = 0;
  int32_t status = 0;
  int64_t value = 0;
};

enum class DecodeError { kNone, kShort, kBadMagic, kBadVersion, kUnknownType };

inline const char* DecodeErrorName(DecodeError e) {
  switch (e) {
    case DecodeError::kNone: return "ok";
    case DecodeError::kShort: return "short message";
    case DecodeError::kBadMagic: return "bad magic";
    case DecodeError::kBadVersion: return "bad version";
    case DecodeError::kUnknownType: return "unknown message type";
  }
  return "?";
}

inline void Encode(const Message& m, uint8_t (&out)[kMessageSize]) {
  const uint32_t magic = kMagic;
  const uint16_t version = kVersion;
  const uint16_t type = static_cast<uint16_t>(m.type);
  const uint64_t reserved = 0;
  std::memcpy(out + 0, &magic, 4);
  std::memcpy(out + 4, &version, 2);
  std::memcpy(out + 6, &type, 2);
  std::memcpy(out + 8, &m.pid, 4);
  std::memcpy(out + 12, &m.status, 4);
  std::memcpy(out + 16, &m.value, 8);
  std::memcpy(out + 24, &reserved, 8);
}

// Decodes one datagram of len bytes. On anything but kNone, *out is untouched.
// kUnknownType is reported after the header checks passed: the caller may
// ignore it silently (a newer peer) or log it.
inline DecodeError Decode(const uint8_t* data, size_t len, Message* out) {
  if (len < kMessageSize) return DecodeError::kShort;
  uint32_t magic;
  uint16_t version, type;
  std::memcpy(&magic, data + 0, 4);
  std::memcpy(&version, data + 4, 2);
  std::memcpy(&type, data + 6, 2);
  if (magic != kMagic) return DecodeError::kBadMagic;
  if (version == 0) return DecodeError::kBadVersion;
  if (type < static_cast<uint16_t>(Type::kHello) || type > static_cast<uint16_t>(Type::kBeat)) {
    return DecodeError::kUnknownType;
  }
  Message m;
  m.type = static_cast<Type>(type);
  std::memcpy(&m.pid, data + 8, 4);
  std::memcpy(&m.status, data + 12, 4);
  std::memcpy(&m.value, data + 16, 8);
  *out = m;
  return DecodeError::kNone;
}

}  // namespace outpost::keeper::proto
