// The NRI multiplexer (see mux.h): the trunk's reader, which streams each
// frame's payload to its link as it arrives (nothing is buffered per frame,
// so an announced length costs no memory), its writer, which cuts ttRPC
// messages into mux frames by the sending rule, and the in-memory link pair.
#include "wire/mux.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "base/log.h"
#include "base/strings.h"
#include "base/sys.h"
#include "wire/frame.h"

namespace outpost::wire {

namespace {

constexpr size_t kReadChunk = 64 << 10;
// The longest frame a Go reader accepts after a message's first frame
// (10 + 4 MiB); only a caller breaking the whole-frames rule gets near it.
constexpr size_t kMaxTailFrame = (4u << 20) + 10;

uint32_t LoadBE32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

void AppendBE32(std::string* out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out->append(b, 4);
}

}  // namespace

namespace mux_internal {

class TrunkCore;

// One logical connection. Holds the trunk weakly: after the trunk is gone
// the link reports closed and every call is a no-op.
class MuxLink : public ByteLink, public std::enable_shared_from_this<MuxLink> {
 public:
  MuxLink(std::weak_ptr<TrunkCore> trunk, Loop* loop, uint32_t id) : trunk_(std::move(trunk)), loop_(loop), id_(id) {}

  bool Send(std::string_view frames) override;
  void SetReceiver(Receiver on_bytes, Closed on_closed) override;
  size_t queued_bytes() const override;
  void Close() override;

  // Marks the link closed; the notice runs later through Notify.
  void MarkClosed(const Error& why) {
    if (closed_) return;
    closed_ = true;
    reason_ = why;
  }
  // Runs the close notice once (if a callback is set) and drops the callbacks.
  void Notify() {
    receiver_.reset();
    if (notified_ || !on_closed_) return;
    notified_ = true;
    Closed cb = std::move(on_closed_);
    on_closed_ = nullptr;
    cb(*reason_);
  }
  // The trunk was destroyed: no notice.
  void Detach(const Error& why) {
    MarkClosed(why);
    notified_ = true;
    receiver_.reset();
    on_closed_ = nullptr;
  }
  bool closed() const { return closed_; }
  std::shared_ptr<Receiver> receiver() const { return receiver_; }

 private:
  std::weak_ptr<TrunkCore> trunk_;
  Loop* loop_;
  uint32_t id_;
  bool closed_ = false;
  bool notified_ = false;
  std::optional<Error> reason_;
  std::shared_ptr<Receiver> receiver_;  // shared: a receiver may replace itself while it runs
  Closed on_closed_;
};

class TrunkCore : public std::enable_shared_from_this<TrunkCore> {
 public:
  TrunkCore(Loop* loop, UniqueFd fd, MuxOptions options)
      : loop_(loop), opts_(std::move(options)), idle_fd_(std::move(fd)) {}

  std::shared_ptr<ByteLink> Open(uint32_t id);
  Status Start();
  void SetCloseCallback(std::function<void(const Error&)> cb) { on_close_ = std::move(cb); }
  bool Send(uint32_t conn, std::string_view frames);
  // Closes the socket now; the notices run from a deferred loop callback.
  void CloseLater(const Error& why);
  // Closes without any notice (the trunk object is being destroyed).
  void Shutdown();
  bool closed() const { return closed_; }
  int fd() const { return fd_.valid() ? fd_.get() : idle_fd_.get(); }
  size_t queued() const { return out_.size(); }
  MuxStats stats() const {
    MuxStats s = stats_;
    s.queued_bytes = out_.size();
    return s;
  }
  const std::string& name() const { return opts_.name; }

 private:
  void OnEvent(uint32_t events);
  // Feeds bytes read from the socket through the frame parser; false once
  // the trunk closed (a bad header, or a receiver closed it).
  bool Consume(const char* p, size_t n);
  bool MidFrame() const { return header_have_ > 0 || frame_left_ > 0; }
  Status UpdateInterest();
  void Teardown(const Error& why);
  void CloseNow(const Error& why);
  void Notify();

  Loop* loop_;
  MuxOptions opts_;
  // The socket is registered with the loop only while there is something
  // to wait for: before Start with nothing queued it sits here unwatched,
  // so a peer that hung up early cannot make the loop spin on EPOLLHUP.
  UniqueFd idle_fd_;
  LoopFd fd_;
  uint32_t events_ = 0;
  bool started_ = false;
  bool closed_ = false;
  bool notified_ = false;
  std::optional<Error> reason_;
  WriteQueue out_;
  std::map<uint32_t, std::shared_ptr<MuxLink>> links_;  // ordered: close notices go in id order
  std::function<void(const Error&)> on_close_;
  MuxStats stats_;
  std::unique_ptr<char[]> rbuf_;
  unsigned char header_[kMuxHeaderSize];
  size_t header_have_ = 0;
  uint32_t frame_left_ = 0;
  std::shared_ptr<MuxLink> target_;  // the current frame's link; null: dropping it
};

// ---- MuxLink ----------------------------------------------------------------

bool MuxLink::Send(std::string_view frames) {
  if (closed_) return false;
  auto t = trunk_.lock();
  return t && t->Send(id_, frames);
}

void MuxLink::SetReceiver(Receiver on_bytes, Closed on_closed) {
  receiver_ = on_bytes ? std::make_shared<Receiver>(std::move(on_bytes)) : nullptr;
  on_closed_ = std::move(on_closed);
  if (closed_ && on_closed_) {
    // Closed before this owner listened: tell it from the loop.
    notified_ = false;
    loop_->Defer([w = weak_from_this()] {
      if (auto l = w.lock()) l->Notify();
    });
  }
}

size_t MuxLink::queued_bytes() const {
  auto t = trunk_.lock();
  return t && !closed_ ? t->queued() : 0;
}

void MuxLink::Close() {
  auto t = trunk_.lock();
  if (t && !closed_) {
    t->CloseLater(Error(Code::kUnavailable, Format("%s: connection %u closed locally", t->name().c_str(), id_)));
  }
}

// ---- TrunkCore --------------------------------------------------------------

std::shared_ptr<ByteLink> TrunkCore::Open(uint32_t id) {
  auto it = links_.find(id);
  if (it != links_.end()) return it->second;
  auto link = std::make_shared<MuxLink>(weak_from_this(), loop_, id);
  if (id == 0) {
    link->MarkClosed(Error(Code::kInvalidArgument, "mux connection id 0 is reserved"));
    return link;
  }
  if (closed_) link->MarkClosed(*reason_);
  links_.emplace(id, link);
  return link;
}

Status TrunkCore::Start() {
  if (closed_) return Error(Code::kUnavailable, Format("%s: trunk is closed", opts_.name.c_str()));
  if (started_) return OkStatus();
  started_ = true;
  rbuf_.reset(new char[kReadChunk]);
  return UpdateInterest();
}

Status TrunkCore::UpdateInterest() {
  uint32_t want = (started_ ? static_cast<uint32_t>(EPOLLIN) : 0u) | (out_.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (want == 0) {
    if (fd_.valid()) idle_fd_ = fd_.Release();
    events_ = 0;
    return OkStatus();
  }
  if (!fd_.valid()) {
    std::weak_ptr<TrunkCore> weak = weak_from_this();
    auto watched = LoopFd::Watch(loop_, std::move(idle_fd_), want, [weak](uint32_t ev) {
      if (auto t = weak.lock()) t->OnEvent(ev);
    });
    if (!watched.ok()) return watched.error();
    fd_ = std::move(*watched);
    events_ = want;
    return OkStatus();
  }
  if (want != events_) {
    OUTPOST_RETURN_IF_ERROR(fd_.Modify(want));
    events_ = want;
  }
  return OkStatus();
}

bool TrunkCore::Send(uint32_t conn, std::string_view frames) {
  if (closed_) return false;
  const bool was_empty = out_.empty();
  std::string* buf = out_.buffer();
  while (!frames.empty()) {
    // One ttRPC message: its header names its length. A short or missing
    // header (a caller breaking the whole-frames rule) ends the batch.
    size_t msg = frames.size();
    if (frames.size() >= kFrameHeaderSize) {
      uint64_t len = LoadBE32(reinterpret_cast<const unsigned char*>(frames.data()));
      msg = static_cast<size_t>(std::min<uint64_t>(kFrameHeaderSize + len, frames.size()));
    }
    size_t first = std::min(msg, kMuxFirstFrameMax);
    for (size_t off = 0, part = first; off < msg; off += part, part = std::min(msg - off, kMaxTailFrame)) {
      AppendBE32(buf, conn);
      AppendBE32(buf, static_cast<uint32_t>(part));
      buf->append(frames.data() + off, part);
      ++stats_.frames_out;
    }
    frames.remove_prefix(msg);
  }
  // With bytes already queued the socket is full and EPOLLOUT is armed.
  if (was_empty && !out_.Flush(fd())) {
    CloseLater(Error(Code::kUnavailable, Format("%s: trunk write: %s", opts_.name.c_str(), std::strerror(errno))));
    return false;
  }
  if (out_.size() > opts_.max_queued_bytes) {
    CloseLater(Error(Code::kResourceExhausted, Format("%s: trunk write queue over %zu bytes: peer is not reading",
                                                      opts_.name.c_str(), opts_.max_queued_bytes)));
    return false;
  }
  Status st = UpdateInterest();
  if (!st.ok()) {
    CloseLater(Error(Code::kUnavailable, Format("%s: trunk: %s", opts_.name.c_str(), st.error().message().c_str())));
    return false;
  }
  return true;
}

void TrunkCore::OnEvent(uint32_t events) {
  if (closed_) return;
  std::shared_ptr<TrunkCore> self = shared_from_this();
  if (events & EPOLLERR) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    CloseNow(Error(Code::kUnavailable, Format("%s: trunk socket error: %s", opts_.name.c_str(), std::strerror(err))));
    return;
  }
  // Before Start only EPOLLOUT is asked for, but a hangup comes anyway:
  // writing then fails and closes, so it cannot spin.
  if ((events & (EPOLLOUT | EPOLLHUP)) && !out_.empty() && !out_.Flush(fd_.get())) {
    CloseNow(Error(Code::kUnavailable, Format("%s: trunk write: %s", opts_.name.c_str(), std::strerror(errno))));
    return;
  }
  if (started_ && (events & (EPOLLIN | EPOLLHUP))) {
    ssize_t n = sys::Read(fd_.get(), rbuf_.get(), kReadChunk);
    if (n == 0) {
      CloseNow(Error(Code::kUnavailable, MidFrame() ? Format("%s: trunk closed mid-frame", opts_.name.c_str())
                                                    : Format("%s: trunk closed by peer", opts_.name.c_str())));
      return;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      CloseNow(Error(Code::kUnavailable, Format("%s: trunk read: %s", opts_.name.c_str(), std::strerror(errno))));
      return;
    }
    if (n > 0 && !Consume(rbuf_.get(), static_cast<size_t>(n))) return;
  }
  if (closed_) return;
  Status st = UpdateInterest();
  if (!st.ok()) CloseNow(Error(Code::kUnavailable, Format("%s: trunk: %s", opts_.name.c_str(), st.error().message().c_str())));
}

bool TrunkCore::Consume(const char* p, size_t n) {
  while (n > 0) {
    if (frame_left_ == 0) {
      size_t take = std::min(kMuxHeaderSize - header_have_, n);
      std::memcpy(header_ + header_have_, p, take);
      header_have_ += take;
      p += take;
      n -= take;
      if (header_have_ < kMuxHeaderSize) return true;
      header_have_ = 0;
      const uint32_t conn = LoadBE32(header_);
      const uint32_t len = LoadBE32(header_ + 4);
      if (len > opts_.max_frame) {
        CloseNow(Error(Code::kResourceExhausted,
                       Format("%s: mux frame of %u bytes for connection %u is over the limit of %u bytes",
                              opts_.name.c_str(), len, conn, opts_.max_frame)));
        return false;
      }
      ++stats_.frames_in;
      auto it = links_.find(conn);
      if (it == links_.end() || it->second->closed()) {
        ++stats_.dropped_frames;
      } else if (len > 0) {
        target_ = it->second;
      }
      frame_left_ = len;
      continue;
    }
    size_t take = std::min<size_t>(frame_left_, n);
    frame_left_ -= static_cast<uint32_t>(take);
    if (target_) {
      std::shared_ptr<MuxLink> link = target_;
      if (frame_left_ == 0) target_.reset();
      std::shared_ptr<ByteLink::Receiver> r = link->receiver();
      if (r && *r) (*r)(std::string_view(p, take));
      if (closed_) return false;
    }
    p += take;
    n -= take;
  }
  return true;
}

void TrunkCore::Teardown(const Error& why) {
  closed_ = true;
  reason_ = why;
  fd_.Reset();
  idle_fd_.Reset();
  out_.Clear();
  target_.reset();
  header_have_ = 0;
  frame_left_ = 0;
  // rbuf_ stays: a receiver that closed the trunk may still hold a view of it.
  log::Debug("mux trunk closed", {{"mux", opts_.name}, {"reason", why.message()}});
  for (auto& [id, link] : links_) link->MarkClosed(why);
}

void TrunkCore::CloseNow(const Error& why) {
  if (closed_) return;
  Teardown(why);
  Notify();
}

void TrunkCore::CloseLater(const Error& why) {
  if (closed_) return;
  Teardown(why);
  loop_->Defer([w = weak_from_this()] {
    if (auto t = w.lock()) t->Notify();
  });
}

void TrunkCore::Notify() {
  if (notified_) return;
  notified_ = true;
  std::shared_ptr<TrunkCore> self = shared_from_this();
  std::vector<std::shared_ptr<MuxLink>> links;
  links.reserve(links_.size());
  for (auto& [id, link] : links_) links.push_back(link);
  for (auto& link : links) link->Notify();
  if (on_close_) {
    auto cb = std::move(on_close_);
    on_close_ = nullptr;
    cb(*reason_);
  }
}

void TrunkCore::Shutdown() {
  const Error why(Code::kUnavailable, Format("%s: trunk destroyed", opts_.name.c_str()));
  if (!closed_) Teardown(why);
  notified_ = true;
  on_close_ = nullptr;
  for (auto& [id, link] : links_) link->Detach(why);
}

}  // namespace mux_internal

// ---- MuxTrunk ---------------------------------------------------------------

struct MuxTrunk::Impl : public mux_internal::TrunkCore {
  using TrunkCore::TrunkCore;
};

Result<std::unique_ptr<MuxTrunk>> MuxTrunk::Create(Loop* loop, UniqueFd fd, MuxOptions options) {
  if (!fd) return Error(Code::kInvalidArgument, "mux trunk: invalid fd");
  OUTPOST_RETURN_IF_ERROR(sys::SetNonBlocking(fd.get(), true));
  auto impl = std::make_shared<Impl>(loop, std::move(fd), std::move(options));
  return std::unique_ptr<MuxTrunk>(new MuxTrunk(std::move(impl)));
}

MuxTrunk::~MuxTrunk() { impl_->Shutdown(); }

std::shared_ptr<ByteLink> MuxTrunk::Open(uint32_t conn_id) { return impl_->Open(conn_id); }
Status MuxTrunk::Start() { return impl_->Start(); }
void MuxTrunk::SetCloseCallback(std::function<void(const Error& why)> cb) { impl_->SetCloseCallback(std::move(cb)); }
void MuxTrunk::Close() {
  impl_->CloseLater(Error(Code::kUnavailable, Format("%s: trunk closed locally", impl_->name().c_str())));
}
bool MuxTrunk::closed() const { return impl_->closed(); }
int MuxTrunk::fd() const { return impl_->fd(); }
MuxStats MuxTrunk::stats() const { return impl_->stats(); }

// ---- MakeLinkPair -----------------------------------------------------------

namespace {

// One end of an in-memory pair. Bytes sent land in the peer's inbox and are
// handed over from a deferred loop callback, in order; a close is seen by
// both ends from the loop, the peer's after the bytes sent before it.
class PairLink : public ByteLink, public std::enable_shared_from_this<PairLink> {
 public:
  explicit PairLink(Loop* loop) : loop_(loop) {}
  ~PairLink() override {
    if (auto peer = peer_.lock()) peer->MarkClosed(Error(Code::kUnavailable, "link peer gone"));
  }
  void SetPeer(const std::shared_ptr<PairLink>& peer) { peer_ = peer; }

  bool Send(std::string_view frames) override {
    auto peer = peer_.lock();
    if (closed_ || !peer || peer->closed_) return false;
    peer->inbox_.append(frames.data(), frames.size());
    peer->Schedule();
    return true;
  }
  void SetReceiver(Receiver on_bytes, Closed on_closed) override {
    receiver_ = on_bytes ? std::make_shared<Receiver>(std::move(on_bytes)) : nullptr;
    on_closed_ = std::move(on_closed);
    if (closed_ && on_closed_) notified_ = false;  // a new owner hears of the close too
    if (!inbox_.empty() || (closed_ && !notified_)) Schedule();
  }
  size_t queued_bytes() const override {
    auto peer = peer_.lock();
    return peer ? peer->inbox_.size() : 0;
  }
  void Close() override {
    if (closed_) return;
    auto peer = peer_.lock();
    const Error why(Code::kUnavailable, "link closed");
    MarkClosed(why);
    if (peer) peer->MarkClosed(why);
  }

 private:
  void MarkClosed(const Error& why) {
    if (closed_) return;
    closed_ = true;
    reason_ = why;
    Schedule();
  }
  void Schedule() {
    if (scheduled_) return;
    scheduled_ = true;
    loop_->Defer([w = weak_from_this()] {
      if (auto l = w.lock()) l->Run();
    });
  }
  // Hands over the inbox, then (once) the close notice.
  void Run() {
    scheduled_ = false;
    if (notified_) return;
    while (!inbox_.empty() && receiver_) {
      std::string bytes;
      bytes.swap(inbox_);
      std::shared_ptr<Receiver> r = receiver_;
      (*r)(bytes);
      if (notified_) return;
    }
    if (closed_ && on_closed_) {
      notified_ = true;
      receiver_.reset();
      inbox_.clear();
      Closed cb = std::move(on_closed_);
      on_closed_ = nullptr;
      cb(*reason_);
    }
  }

  Loop* loop_;
  std::weak_ptr<PairLink> peer_;
  std::string inbox_;
  bool scheduled_ = false;
  bool closed_ = false;
  bool notified_ = false;
  std::optional<Error> reason_;
  std::shared_ptr<Receiver> receiver_;
  Closed on_closed_;
};

}  // namespace

std::pair<std::shared_ptr<ByteLink>, std::shared_ptr<ByteLink>> MakeLinkPair(Loop* loop) {
  auto a = std::make_shared<PairLink>(loop);
  auto b = std::make_shared<PairLink>(loop);
  a->SetPeer(b);
  b->SetPeer(a);
  return {a, b};
}

}  // namespace outpost::wire
