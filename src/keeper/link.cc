#include "keeper/link.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "proc/exit_status.h"

namespace outpost::keeper {

namespace kp = proto;

Result<std::unique_ptr<KeeperLink>> KeeperLink::Attach(Loop* loop, UniqueFd fd, ExitHandler on_exit,
                                                      bool keeper_empty) {
  if (!fd) return Error(Code::kInvalidArgument, "keeper socket: no fd");
  const int raw = fd.get();
  // Inherited without close-on-exec (that is how it got here); nothing we
  // start may inherit it, or the keeper would not see us go away.
  if (::fcntl(raw, F_SETFD, FD_CLOEXEC) != 0) return ErrnoError(Format("keeper socket fd %d", raw));
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(raw, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
    return Error(Code::kInvalidArgument, Format("fd %d is not the keeper's socket (a SOCK_SEQPACKET socket)", raw));
  }
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(raw, true));
  std::unique_ptr<KeeperLink> link(new KeeperLink(loop, std::move(on_exit)));
  link->keeper_pid_ = ::getppid();
  link->replayed_ = keeper_empty;
  KeeperLink* l = link.get();
  auto w = LoopFd::Watch(loop, std::move(fd), EPOLLIN, [l](uint32_t events) { l->OnEvents(events); });
  if (!w.ok()) return w.error();
  link->fd_ = std::move(*w);
  kp::Message hello;
  hello.type = kp::Type::kHello;
  hello.pid = static_cast<int32_t>(::getpid());
  link->Send(hello);
  if (link->lost_) return Error(Code::kUnavailable, "keeper socket: the keeper is gone");
  return link;
}

void KeeperLink::SetHeartbeat(int64_t timeout_nanos) {
  if (timeout_nanos == beat_timeout_) return;
  beat_timeout_ = timeout_nanos;
  if (beating_) Beat();  // the keeper learns the new timeout (or that beats stop) at once
}

void KeeperLink::StartHeartbeat() {
  if (beating_) return;
  beating_ = true;
  if (beat_timeout_ <= 0) return;
  log::Info("heartbeat started: the keeper replaces this worker if its loop stalls",
            {{"timeout", FormatDuration(beat_timeout_)}});
  Beat();
}

void KeeperLink::Beat() {
  if (beat_timer_ != 0) loop_->CancelTimer(beat_timer_);
  beat_timer_ = 0;
  if (lost_) return;
  kp::Message m;
  m.type = kp::Type::kBeat;
  m.pid = static_cast<int32_t>(::getpid());
  m.value = beat_timeout_;
  Send(m);
  // Three beats per timeout: one late or lost beat is not a missed deadline.
  if (beat_timeout_ > 0 && !lost_) {
    beat_timer_ = loop_->AddTimer(beat_timeout_ / 3, [this] {
      beat_timer_ = 0;
      Beat();
    });
  }
}

void KeeperLink::SetOnJournalReplayed(std::function<void()> cb) {
  on_replayed_ = std::move(cb);
  if (replayed_ && on_replayed_) on_replayed_();
}

void KeeperLink::Ack(pid_t pid) {
  if (lost_) return;
  kp::Message m;
  m.type = kp::Type::kAck;
  m.pid = static_cast<int32_t>(pid);
  Send(m);
}

void KeeperLink::OnEvents(uint32_t events) {
  if (events & EPOLLOUT) FlushQueue();
  // Read before acting on a hang-up: the keeper's last messages come first.
  if (!lost_ && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) ReadMessages();
}

void KeeperLink::ReadMessages() {
  // Bounded per wake-up so a resent journal does not starve the API; the fd
  // is level-triggered and comes back.
  for (int i = 0; i < 256 && !lost_; ++i) {
    uint8_t buf[2 * kp::kMessageSize];
    ssize_t n = sys::RetryEintr([&] { return ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) return Lose(ErrnoError("keeper socket").message());
    if (n == 0) return Lose("keeper closed the socket");
    kp::Message m;
    kp::DecodeError e = kp::Decode(buf, static_cast<size_t>(n), &m);
    if (e != kp::DecodeError::kNone) {
      if (!warned_bad_message_) {
        warned_bad_message_ = true;
        log::Warn("ignoring a malformed message from the keeper (reported once)",
                  {{"error", kp::DecodeErrorName(e)}, {"bytes", std::to_string(n)}});
      }
      continue;
    }
    Handle(m);
  }
}

void KeeperLink::Handle(const kp::Message& m) {
  switch (m.type) {
    case kp::Type::kHelloReply:
      if (m.pid != keeper_pid_) {
        log::Warn("the keeper is not our parent", {{"keeper_pid", std::to_string(m.pid)},
                                                   {"parent_pid", std::to_string(keeper_pid_)}});
      }
      keeper_pid_ = static_cast<pid_t>(m.pid);
      dropped_exits_ = static_cast<uint64_t>(m.value);
      connected_ = true;
      log::Info("connected to the keeper",
                {{"keeper_pid", std::to_string(keeper_pid_)}, {"unacked_exits", std::to_string(m.status)}});
      if (dropped_exits_ > 0) {
        log::Warn("the keeper's exit journal overflowed: some task exits were lost and are reported as "
                  "\"exit status unknown\"",
                  {{"dropped", std::to_string(dropped_exits_)}});
      }
      return;
    case kp::Type::kExit:
      if (on_exit_) {
        on_exit_(static_cast<pid_t>(m.pid), m.status, m.value);
      } else {
        if (log::GetLevel() <= log::Level::kDebug) {
          char st[48];
          proc::DescribeExitStatus(proc::DecodeWaitStatus(m.status), st, sizeof st);
          log::Debug("task exit from the keeper (no exit handler installed; acknowledged)",
                     {{"pid", std::to_string(m.pid)}, {"status", st}});
        }
        Ack(static_cast<pid_t>(m.pid));
      }
      return;
    case kp::Type::kReplayDone:
      if (replayed_) return;
      replayed_ = true;
      log::Debug("the keeper finished resending its exit journal", {{"exits", std::to_string(m.pid)}});
      if (on_replayed_) on_replayed_();
      return;
    default:
      if (!warned_bad_message_) {
        warned_bad_message_ = true;
        log::Warn("ignoring an unexpected message from the keeper (reported once)",
                  {{"type", std::to_string(static_cast<int>(m.type))}});
      }
      return;
  }
}

void KeeperLink::HoldFifos(int64_t key, const std::vector<int>& fds) {
  if (lost_ || fds.empty() || fds.size() > 2) return;
  kp::Message m;
  m.type = kp::Type::kHoldFifos;
  m.value = key;
  uint8_t buf[kp::kMessageSize];
  kp::Encode(m, buf);
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  // Best effort and never queued: a hold that does not fit now only matters
  // if the worker dies before the task's output is read, and queued fds
  // would have to stay open here meanwhile.
  ssize_t n = sys::RetryEintr([&] { return ::sendmsg(fd_.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT); });
  if (n != static_cast<ssize_t>(sizeof buf)) {
    log::Warn("cannot hand task FIFOs to the keeper", {{"error", n < 0 ? std::strerror(errno) : "short send"}});
  }
}

void KeeperLink::ReleaseFifos(int64_t key) {
  kp::Message m;
  m.type = kp::Type::kReleaseFifos;
  m.value = key;
  Send(m);
}

void KeeperLink::Send(const kp::Message& m) {
  Bytes b;
  kp::Encode(m, b.data);
  const char* raw = reinterpret_cast<const char*>(b.data);
  if (queue_head_ < queue_.size()) {
    queue_.append(raw, sizeof b.data);
    return;
  }
  ssize_t n = sys::RetryEintr([&] { return ::send(fd_.get(), b.data, sizeof b.data, MSG_NOSIGNAL | MSG_DONTWAIT); });
  if (n == static_cast<ssize_t>(sizeof b.data)) return;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    queue_.append(raw, sizeof b.data);
    (void)fd_.Modify(EPOLLIN | EPOLLOUT);
    return;
  }
  Lose(n < 0 ? ErrnoError("send to the keeper").message() : "short send to the keeper");
}

void KeeperLink::FlushQueue() {
  while (queue_head_ < queue_.size() && !lost_) {
    const char* m = queue_.data() + queue_head_;
    ssize_t n = sys::RetryEintr([&] { return ::send(fd_.get(), m, kp::kMessageSize, MSG_NOSIGNAL | MSG_DONTWAIT); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      queue_.erase(0, queue_head_);  // what was sent goes; the rest waits
      queue_head_ = 0;
      return;
    }
    if (n != static_cast<ssize_t>(kp::kMessageSize)) {
      return Lose(n < 0 ? ErrnoError("send to the keeper").message() : "short send to the keeper");
    }
    queue_head_ += kp::kMessageSize;
  }
  queue_.clear();
  queue_head_ = 0;
  if (!lost_) (void)fd_.Modify(EPOLLIN);
}

void KeeperLink::Lose(const std::string& why) {
  if (lost_) return;
  lost_ = true;
  connected_ = false;
  if (beat_timer_ != 0) loop_->CancelTimer(beat_timer_);
  beat_timer_ = 0;
  queue_.clear();
  queue_head_ = 0;
  fd_.Reset();
  log::Error("the keeper went away; stopping the worker (its tasks lost their parent; a new agent recovers them)",
             {{"reason", why}, {"keeper_pid", std::to_string(keeper_pid_)}});
  loop_->Stop();
  if (on_lost_) on_lost_();
}

}  // namespace outpost::keeper
