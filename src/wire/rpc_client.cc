#include "wire/rpc_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"

namespace outpost::wire {

namespace {

constexpr uint64_t kMaxStreamId = UINT32_MAX;

int64_t DeadlineFrom(int64_t now, int64_t timeout_nanos) {
  if (timeout_nanos <= 0) return 0;
  return now > INT64_MAX - timeout_nanos ? INT64_MAX : now + timeout_nanos;
}

Result<std::string> DecodeReply(std::string_view payload) {
  Response resp;
  Status st = DecodeResponse(payload, &resp);
  if (!st.ok()) return Error(Code::kInternal, st.error().message());
  return ResponseToResult(resp);
}

}  // namespace

// ---- RpcClient --------------------------------------------------------------

RpcClient::RpcClient(Loop* loop, ClientOptions options)
    : loop_(loop),
      opts_(std::move(options)),
      deadlines_(loop, [this](const DeadlineEntry& e) { OnDeadline(e); }) {}

Result<std::unique_ptr<RpcClient>> RpcClient::Create(Loop* loop, UniqueFd fd, ClientOptions options) {
  if (!fd) return Error(Code::kInvalidArgument, "rpc client: invalid fd");
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(fd.get(), true));
  std::unique_ptr<RpcClient> client(new RpcClient(loop, std::move(options)));
  RpcClient* raw = client.get();
  auto watched = LoopFd::Watch(loop, std::move(fd), EPOLLIN, [raw](uint32_t ev) { raw->OnEvent(ev); });
  if (!watched.ok()) return watched.error();
  raw->fd_ = std::move(*watched);
  raw->events_ = EPOLLIN;
  return client;
}

Result<std::unique_ptr<RpcClient>> RpcClient::Connect(Loop* loop, const std::string& socket_path,
                                                      ClientOptions options) {
  auto fd = sys::UnixConnect(socket_path, true);
  if (!fd.ok()) return fd.error();
  return Create(loop, std::move(*fd), std::move(options));
}

Result<std::unique_ptr<RpcClient>> RpcClient::CreateOnLink(Loop* loop, std::shared_ptr<ByteLink> link,
                                                           ClientOptions options) {
  if (!link) return Error(Code::kInvalidArgument, "rpc client: no link");
  std::unique_ptr<RpcClient> client(new RpcClient(loop, std::move(options)));
  RpcClient* raw = client.get();
  std::weak_ptr<bool> alive = raw->alive_;
  raw->link_ = std::move(link);
  raw->link_->SetReceiver(
      [raw, alive](std::string_view bytes) {
        if (auto a = alive.lock(); a && *a) raw->OnLinkBytes(bytes);
      },
      [raw, alive](const Error& why) {
        if (auto a = alive.lock(); a && *a) raw->CloseWith(Error(Code::kUnavailable, why.message()));
      });
  return client;
}

RpcClient::~RpcClient() {
  *alive_ = false;
  if (link_) {
    link_->SetReceiver(nullptr, nullptr);
    link_->Close();
  }
}

void RpcClient::Call(std::string_view service, std::string_view method, std::string_view payload,
                     int64_t timeout_nanos, Callback done) {
  static const std::vector<MetadataEntry> kNoMetadata;
  Call(service, method, payload, timeout_nanos, kNoMetadata, std::move(done));
}

void RpcClient::Call(std::string_view service, std::string_view method, std::string_view payload,
                     int64_t timeout_nanos, const std::vector<MetadataEntry>& metadata, Callback done) {
  if (!connected() || close_scheduled_) {
    FailLater(std::move(done), Error(Code::kUnavailable, "rpc connection is closed"));
    return;
  }
  if (next_stream_ > kMaxStreamId) {
    FailLater(std::move(done), Error(Code::kResourceExhausted, "stream ids exhausted; reconnect"));
    return;
  }
  if (queued_bytes() > opts_.max_queued_bytes) {
    FailLater(std::move(done), Error(Code::kResourceExhausted,
                                     Format("write queue over %zu bytes: server is not reading", opts_.max_queued_bytes)));
    return;
  }
  Request req;
  req.service = service;
  req.method = method;
  req.payload = payload;
  req.timeout_nano = timeout_nanos > 0 ? timeout_nanos : 0;
  // A Request is trivially copyable apart from the metadata vector; copy
  // only when there is metadata.
  if (!metadata.empty()) req.metadata = metadata;
  uint32_t stream = static_cast<uint32_t>(next_stream_);
  Status st = AppendRequestFrame(stream, req, out_.buffer());
  if (!st.ok()) {
    FailLater(std::move(done), st.error());  // nothing went on the wire
    return;
  }
  next_stream_ += 2;
  int64_t deadline = DeadlineFrom(MonotonicNanos(), timeout_nanos);
  pending_.emplace(stream, Pending{std::move(done), deadline});
  if (deadline != 0) {
    deadlines_.Push({deadline, 0, stream});
    deadlines_.MaybeCompact(pending_.size(), [this](const DeadlineEntry& e) { return pending_.count(e.stream) != 0; });
  }
  // Inside our own read callback replies to many calls are batched into one
  // write at its end; otherwise write now for latency.
  if (!dispatching_ && !FlushAndWatch()) {
    // Callbacks never run inside Call: report the broken connection later.
    close_scheduled_ = true;
    std::weak_ptr<bool> alive = alive_;
    int err = errno;
    loop_->Defer([this, alive, err] {
      if (auto a = alive.lock(); a && *a) CloseWith(Error(Code::kUnavailable, Format("write: %s", std::strerror(err))));
    });
  }
}

void RpcClient::FailLater(Callback done, Error error) {
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([alive, done = std::move(done), error = std::move(error)]() mutable {
    if (auto a = alive.lock(); a && *a) done(std::move(error));
  });
}

bool RpcClient::FlushAndWatch() {
  if (link_) {
    // The link takes whole frames; it never calls back from inside Send.
    if (out_.empty()) return true;
    bool sent = link_->Send(*out_.buffer());
    out_.Clear();
    if (!sent) errno = EPIPE;
    return sent;
  }
  if (!out_.Flush(fd_.get())) return false;
  uint32_t events = EPOLLIN | (out_.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (events != events_) {
    if (!fd_.Modify(events).ok()) return false;
    events_ = events;
  }
  return true;
}

void RpcClient::OnEvent(uint32_t events) {
  if (!fd_) return;
  if (events & EPOLLERR) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    CloseWith(Error(Code::kUnavailable, Format("rpc connection error: %s", std::strerror(err))));
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP)) {
    size_t avail;
    char* p = reader_.Prepare(&avail);
    ssize_t n = sys::Read(fd_.get(), p, avail);
    if (n == 0) {
      CloseWith(Error(Code::kUnavailable, "rpc connection closed by peer"));
      return;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      CloseWith(Error(Code::kUnavailable, Format("rpc read: %s", std::strerror(errno))));
      return;
    }
    if (n > 0) {
      reader_.Commit(static_cast<size_t>(n));
      std::shared_ptr<bool> alive = alive_;
      ProcessFrames();
      if (!*alive || !fd_) return;
    }
  }
  if (!FlushAndWatch()) CloseWith(Error(Code::kUnavailable, Format("rpc write: %s", std::strerror(errno))));
}

void RpcClient::OnLinkBytes(std::string_view bytes) {
  if (!link_) return;
  reader_.Feed(bytes.data(), bytes.size());
  std::shared_ptr<bool> alive = alive_;
  ProcessFrames();
  if (!*alive || !link_) return;
  if (!FlushAndWatch()) CloseWith(Error(Code::kUnavailable, Format("rpc write: %s", std::strerror(errno))));
}

void RpcClient::ProcessFrames() {
  std::shared_ptr<bool> alive = alive_;
  dispatching_ = true;
  Frame f;
  for (;;) {
    FrameReader::Event ev = reader_.Next(&f);
    if (ev == FrameReader::Event::kNeedMore) break;
    if (ev == FrameReader::Event::kOversize) {
      Complete(f.header.stream_id, OversizeError(f.header.length));
    } else if (f.header.type == static_cast<uint8_t>(FrameType::kResponse)) {
      Complete(f.header.stream_id, DecodeReply(f.payload));
    } else {
      log::Debug("rpc client ignoring frame", {{"client", opts_.name}, {"type", std::to_string(f.header.type)}});
    }
    if (!*alive) return;
    if (!connected()) break;
  }
  dispatching_ = false;
}

void RpcClient::Complete(uint32_t stream, Result<std::string> result) {
  auto it = pending_.find(stream);
  if (it == pending_.end()) return;  // late reply after our deadline, or unknown
  Callback done = std::move(it->second.done);
  pending_.erase(it);
  done(std::move(result));
}

void RpcClient::OnDeadline(const DeadlineEntry& e) {
  auto it = pending_.find(e.stream);
  if (it == pending_.end() || it->second.deadline != e.deadline) return;
  Complete(e.stream, DeadlineExceededError());
}

void RpcClient::Close() { CloseWith(Error(Code::kUnavailable, "rpc connection closed")); }

void RpcClient::CloseWith(const Error& why) {
  if (!connected()) return;
  std::shared_ptr<bool> alive = alive_;
  fd_.Reset();
  if (std::shared_ptr<ByteLink> link = std::move(link_)) {
    link->SetReceiver(nullptr, nullptr);
    link->Close();  // its notices (other links', a trunk's) come from the loop
  }
  out_.Clear();
  deadlines_.Clear();
  std::vector<std::pair<uint32_t, Callback>> calls;
  calls.reserve(pending_.size());
  for (auto& [stream, p] : pending_) calls.emplace_back(stream, std::move(p.done));
  pending_.clear();
  std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [stream, done] : calls) {
    done(why);
    if (!*alive) return;
  }
  if (on_close_) {
    CloseCallback cb = std::move(on_close_);
    cb(why);
  }
}

// ---- BlockingClient ---------------------------------------------------------

Result<BlockingClient> BlockingClient::Connect(const std::string& socket_path, int64_t timeout_nanos) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
    return Error(Code::kInvalidArgument, "socket path '" + socket_path + "' is empty or too long");
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  const int64_t deadline = DeadlineFrom(MonotonicNanos(), timeout_nanos);
  for (;;) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return ErrnoError("socket");
    int r = sys::RetryEintr([&] { return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr); });
    if (r == 0) return BlockingClient(std::move(fd));
    int err = errno;
    if (err == EINPROGRESS) {
      BlockingClient client(std::move(fd));
      OUTPOST_RETURN_IF_ERROR(client.WaitFor(POLLOUT, deadline));
      int soerr = 0;
      socklen_t len = sizeof soerr;
      ::getsockopt(client.fd(), SOL_SOCKET, SO_ERROR, &soerr, &len);
      if (soerr != 0) return ErrnoError("connect '" + socket_path + "'", soerr);
      return client;
    }
    // EAGAIN: the server's listen backlog is full; it is alive, so retry.
    if (err != EAGAIN || deadline == 0 || MonotonicNanos() >= deadline) {
      return ErrnoError("connect '" + socket_path + "'", err);
    }
    (void)sys::RetryEintr([] { return ::poll(nullptr, 0, 5); });
  }
}

BlockingClient::BlockingClient(UniqueFd fd) : fd_(std::move(fd)) {
  // Best effort: everything below copes with either mode through poll().
  (void)sys::SetNonBlocking(fd_.get(), true);
}

Status BlockingClient::WaitFor(short events, int64_t deadline) {
  pollfd pfd{fd_.get(), events, 0};
  for (;;) {
    int timeout_ms = -1;
    if (deadline != 0) {
      int64_t left = deadline - MonotonicNanos();
      if (left <= 0) return DeadlineExceededError();
      timeout_ms = static_cast<int>(std::min<int64_t>((left + kNanosPerMilli - 1) / kNanosPerMilli, INT_MAX));
    }
    int r = sys::RetryEintr([&] { return ::poll(&pfd, 1, timeout_ms); });
    if (r < 0) return ErrnoError("poll");
    if (r > 0) return OkStatus();  // ready, or HUP/ERR: the read/write reports it
  }
}

Status BlockingClient::WriteAll(int64_t deadline) {
  size_t off = 0;
  while (off < out_.size()) {
    ssize_t n = sys::RetryEintr(
        [&] { return ::send(fd_.get(), out_.data() + off, out_.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT); });
    if (n >= 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      broken_ = off > 0;
      return ErrnoError("rpc write");
    }
    Status st = WaitFor(POLLOUT, deadline);
    if (!st.ok()) {
      broken_ = off > 0;
      return st.error();
    }
  }
  return OkStatus();
}

Result<std::string> BlockingClient::Call(std::string_view service, std::string_view method,
                                         std::string_view payload, int64_t timeout_nanos) {
  return Call(service, method, payload, timeout_nanos, {});
}

Result<std::string> BlockingClient::Call(std::string_view service, std::string_view method,
                                         std::string_view payload, int64_t timeout_nanos,
                                         const std::vector<MetadataEntry>& metadata) {
  answered_ = false;
  if (!fd_) return Error(Code::kUnavailable, "rpc connection is closed");
  if (broken_) return Error(Code::kUnavailable, "rpc connection broken by an earlier timeout mid-request");
  if (next_stream_ > kMaxStreamId) return Error(Code::kResourceExhausted, "stream ids exhausted; reconnect");
  const int64_t deadline = DeadlineFrom(MonotonicNanos(), timeout_nanos);
  Request req;
  req.service = service;
  req.method = method;
  req.payload = payload;
  req.timeout_nano = timeout_nanos > 0 ? timeout_nanos : 0;
  req.metadata = metadata;
  const uint32_t stream = static_cast<uint32_t>(next_stream_);
  out_.clear();
  OUTPOST_RETURN_IF_ERROR(AppendRequestFrame(stream, req, &out_));
  next_stream_ += 2;
  OUTPOST_RETURN_IF_ERROR(WriteAll(deadline));
  if (out_.capacity() > (1u << 20)) std::string().swap(out_);
  for (;;) {
    Frame f;
    FrameReader::Event ev;
    while ((ev = reader_.Next(&f)) != FrameReader::Event::kNeedMore) {
      if (f.header.stream_id != stream) continue;  // a reply to an earlier, timed-out call
      if (ev == FrameReader::Event::kOversize) return OversizeError(f.header.length);
      if (f.header.type != static_cast<uint8_t>(FrameType::kResponse)) continue;
      answered_ = true;
      return DecodeReply(f.payload);
    }
    OUTPOST_RETURN_IF_ERROR(WaitFor(POLLIN, deadline));
    size_t avail;
    char* p = reader_.Prepare(&avail);
    ssize_t n = sys::Read(fd_.get(), p, avail);
    if (n == 0) {
      fd_.Reset();
      return Error(Code::kUnavailable, "rpc connection closed by peer");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) continue;
      Error err = ErrnoError("rpc read");
      fd_.Reset();
      return Error(Code::kUnavailable, err.message());
    }
    reader_.Commit(static_cast<size_t>(n));
  }
}

}  // namespace outpost::wire
