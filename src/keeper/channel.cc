#include "keeper/channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"
#include "base/sys.h"

namespace outpost::keeper {

namespace kp = proto;

void KeeperChannel::Attach(UniqueFd sock) {
  Detach();
  sock_ = std::move(sock);
}

void KeeperChannel::Detach() {
  sock_.Reset();
  hello_ = false;
  want_write_ = false;
  replay_left_ = replay_total_ = 0;
  replay_marker_pending_ = false;
  journal_->ResetSent();
}

int KeeperChannel::Send(const kp::Message& m) {
  uint8_t buf[kp::kMessageSize];
  kp::Encode(m, buf);
  ssize_t n = sys::RetryEintr([&] { return ::send(sock_.get(), buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT); });
  if (n == static_cast<ssize_t>(sizeof buf)) return 1;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  return -1;
}

void KeeperChannel::Flush() {
  want_write_ = false;
  if (!sock_ || !hello_) return;
  for (;;) {
    kp::Message m;
    const bool marker = replay_marker_pending_ && replay_left_ == 0;
    if (marker) {
      m.type = kp::Type::kReplayDone;
      m.pid = static_cast<int32_t>(replay_total_);
    } else if (journal_->sent() < journal_->size()) {
      const ExitRecord& r = journal_->at(journal_->sent());
      m.type = kp::Type::kExit;
      m.pid = r.pid;
      m.status = r.status;
      m.value = r.unix_nanos;
    } else {
      return;
    }
    int s = Send(m);
    if (s == 0) {
      want_write_ = true;  // resume on POLLOUT
      return;
    }
    // A broken socket means the worker is going away: its SIGCHLD follows and
    // the entries stay in the journal for the next worker.
    if (s < 0) return;
    if (marker) {
      replay_marker_pending_ = false;
    } else {
      journal_->MarkNextSent();
      if (replay_left_ > 0) --replay_left_;
    }
  }
}

KeeperChannel::ReadResult KeeperChannel::OnReadable() {
  ReadResult res;
  // Bounded so a chatty worker cannot starve signal handling; the socket stays
  // readable and poll comes back at once.
  for (int i = 0; i < 1024 && sock_; ++i) {
    uint8_t buf[2 * kp::kMessageSize];
    // Room for the fds of a kHoldFifos; fds arriving with any other message
    // are closed below.
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
    iovec iov{buf, sizeof buf};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    ssize_t n = sys::RetryEintr([&] { return ::recvmsg(sock_.get(), &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // EOF (we never send empty datagrams) or a reset
      Detach();
      res.eof = true;
      break;
    }
    int fds[2] = {-1, -1};
    size_t nfds = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t k = 0; k < count; ++k) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
        if (nfds < 2) fds[nfds++] = fd;
        else ::close(fd);
      }
    }
    kp::Message m;
    kp::DecodeError e = kp::Decode(buf, static_cast<size_t>(n), &m);
    if (e == kp::DecodeError::kNone && m.type == kp::Type::kHoldFifos) {
      Hold(m.value, fds, nfds);
      continue;
    }
    for (size_t k = 0; k < nfds; ++k) ::close(fds[k]);
    if (e == kp::DecodeError::kNone && m.type == kp::Type::kReleaseFifos) {
      Release(m.value);
      continue;
    }
    if (e == kp::DecodeError::kNone && m.type == kp::Type::kBeat) {
      // The common case while idle: no reply, no log, no allocation.
      res.beat = true;
      res.beat_timeout_nanos = m.value > 0 ? m.value : 0;
      continue;
    }
    if (e == kp::DecodeError::kNone && m.type == kp::Type::kHello) {
      hello_ = true;
      journal_->ResetSent();  // a (re)connected worker gets everything unacknowledged
      replay_left_ = replay_total_ = journal_->size();
      replay_marker_pending_ = true;
      kp::Message reply;
      reply.type = kp::Type::kHelloReply;
      reply.pid = static_cast<int32_t>(::getpid());
      reply.status = static_cast<int32_t>(replay_left_);
      reply.value = static_cast<int64_t>(journal_->dropped());
      if (Send(reply) == 1) Flush();
      res.hello = true;
      res.worker_pid = m.pid;
      res.replay = replay_total_;
    } else if (e == kp::DecodeError::kNone && m.type == kp::Type::kAck) {
      // An ack for a replayed entry not sent yet (the worker knew it from an
      // earlier connection) shortens the replay.
      const size_t unsent_from = journal_->sent();
      size_t index = 0;
      if (journal_->Ack(m.pid, &index) && index >= unsent_from && index < unsent_from + replay_left_) {
        --replay_left_;
        if (replay_left_ == 0 && !want_write_) Flush();
      }
    } else if (!warned_bad_message_) {
      warned_bad_message_ = true;
      log::Warn("ignoring an unexpected message from the worker (reported once)",
                {{"error", e == kp::DecodeError::kNone ? "unexpected type" : kp::DecodeErrorName(e)},
                 {"bytes", std::to_string(n)}});
    }
  }
  return res;
}

void KeeperChannel::Hold(int64_t key, const int* fds, size_t n) {
  Release(key);  // a new worker re-holds what an earlier one held
  if (n == 0) return;
  if (held_count_ == kMaxHeld) {
    for (size_t k = 0; k < n; ++k) ::close(fds[k]);
    if (!warned_hold_full_) {
      warned_hold_full_ = true;
      log::Warn("keeper: too many tasks to hold their log FIFOs; output of a task that exits while no worker "
                "runs may be lost (reported once)");
    }
    return;
  }
  Held& h = held_[held_count_++];
  h.key = key;
  h.fds[0] = fds[0];
  h.fds[1] = n > 1 ? fds[1] : -1;
}

void KeeperChannel::SetHeldCloseOnExec(bool on) {
  for (size_t i = 0; i < held_count_; ++i) {
    for (int fd : held_[i].fds) {
      if (fd >= 0) ::fcntl(fd, F_SETFD, on ? FD_CLOEXEC : 0);
    }
  }
}

void KeeperChannel::AdoptHeld(int64_t key, int fd0, int fd1) {
  int fds[2];
  size_t n = 0;
  for (int fd : {fd0, fd1}) {
    // Only fds we can see open, and never stdio (a damaged record must not
    // make us close those later).
    if (fd > STDERR_FILENO && ::fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) fds[n++] = fd;
  }
  Hold(key, fds, n);
}

void KeeperChannel::Release(int64_t key) {
  for (size_t i = 0; i < held_count_; ++i) {
    if (held_[i].key != key) continue;
    for (int fd : held_[i].fds) {
      if (fd >= 0) ::close(fd);
    }
    held_[i] = held_[--held_count_];  // order does not matter
    return;
  }
}

void KeeperChannel::OnTaskExit(const ExitRecord& r) {
  // A full journal drops its oldest entry; if that one was an unsent part of
  // the replay, the replay is one shorter.
  if (journal_->size() == ExitJournal::kCapacity && journal_->sent() == 0 && replay_left_ > 0) --replay_left_;
  journal_->Push(r);
  if (!want_write_) Flush();
}

}  // namespace outpost::keeper
