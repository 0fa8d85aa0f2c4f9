// The NRI connection multiplexer (containerd/nri pkg/net/multiplex) and the
// byte-transport seam that lets the ttRPC client and server run over one of
// its logical connections instead of a socket of their own. Owns: the trunk
// socket, the 8-byte mux frame header ([conn id u32 BE][length u32 BE]),
// reassembling each logical connection's bytes across arbitrary frame
// boundaries, dropping frames for connection ids nobody opened, and how
// outgoing ttRPC messages are cut into mux frames.
//
// Sending rule (the Go peer's trap, docs/nri.md): a Go reader fails with
// ENOMEM on any mux frame larger than 4096 bytes that starts at a ttRPC
// message boundary, and closes the trunk when one logical connection has
// more than 256 frames queued. So each ttRPC message goes out as at most
// two frames, as Go's own writer does: the first min(4096, size) bytes
// (header + up to 4086 payload bytes), then the rest as one frame. Frames
// never pack the tail of one message with the head of the next.
//
// Does not own: what the bytes mean (wire/rpc_client, wire/rpc_server run
// on top through ByteLink), or which side created the socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "base/fd.h"
#include "loop/loop.h"

namespace outpost::wire {

// A bidirectional byte stream for a ttRPC endpoint that has no socket of
// its own (a mux logical connection; a test's in-memory pipe).
//
// Callbacks (bytes and the close notice) run from loop callbacks only:
// never from inside Send, SetReceiver or Close. Every method stays safe to
// call after whatever carries the link is gone (it then reports closed).
class ByteLink {
 public:
  using Receiver = std::function<void(std::string_view bytes)>;
  using Closed = std::function<void(const Error& why)>;
  virtual ~ByteLink() = default;
  // Queues bytes for the peer: one or more whole ttRPC frames (a sender
  // never splits a frame across calls). False once the link is closed (or
  // when this write closed it: a mux trunk over its queue limit).
  virtual bool Send(std::string_view frames) = 0;
  // Where received bytes go (any chunking), and the one close notice.
  // Replaces the previous pair; (nullptr, nullptr) detaches. Set on a link
  // that is already closed, the notice follows from a deferred callback.
  virtual void SetReceiver(Receiver on_bytes, Closed on_closed) = 0;
  // Bytes queued but not yet taken by the socket (backpressure). For a mux
  // link: the whole trunk's queue, which all its links share.
  virtual size_t queued_bytes() const = 0;
  // Closes this link (for a mux connection: the whole trunk, as upstream:
  // the protocol has no per-connection close). Sends fail at once; every
  // close notice (this link's included, if a receiver is still set) runs
  // later from the loop. An owner closing its own link detaches first.
  virtual void Close() = 0;
};

constexpr size_t kMuxHeaderSize = 8;
constexpr size_t kMuxFirstFrameMax = 4096;  // see the sending rule above

struct MuxOptions {
  std::string name = "mux";  // in log lines
  // A frame announcing more than this closes the trunk (a Go writer sends
  // at most 10 + 4 MiB).
  uint32_t max_frame = (4u << 20) + 10;
  // Unsent bytes above this close the trunk: the peer is not reading.
  size_t max_queued_bytes = 16u << 20;
};

struct MuxStats {
  uint64_t frames_in = 0;
  uint64_t frames_out = 0;
  uint64_t dropped_frames = 0;  // for connection ids nobody opened
  size_t queued_bytes = 0;
};

class MuxTrunk {
 public:
  // fd: a connected unix stream socket (made nonblocking here). Nothing is
  // read until Start, so early bytes wait in the kernel buffer while the
  // caller opens its connections.
  static Result<std::unique_ptr<MuxTrunk>> Create(Loop* loop, UniqueFd fd, MuxOptions options = {});
  // Closes the trunk; the links' close callbacks do not run.
  ~MuxTrunk();
  MuxTrunk(const MuxTrunk&) = delete;
  MuxTrunk& operator=(const MuxTrunk&) = delete;

  // The logical connection conn_id (1, 2, ...; 0 is reserved: its link is
  // closed from the start). Opening an id twice returns the same link. The
  // link stays valid (and reports closed) after the trunk goes. Frames for
  // an id that was never opened are dropped (stats().dropped_frames).
  std::shared_ptr<ByteLink> Open(uint32_t conn_id);
  // Starts reading.
  Status Start();
  // Runs once when the trunk closes for any reason other than
  // destruction: peer gone, read or write error, a bad frame, a full write
  // queue, Close. Each open link's Closed runs first, in connection id
  // order. When the loop saw the cause (EOF, a bad frame) they run from
  // that callback; a close started by a call (Close, a link's Send or
  // Close) closes the socket at once and notifies from a deferred callback.
  void SetCloseCallback(std::function<void(const Error& why)> cb);
  void Close();
  bool closed() const;
  int fd() const;  // -1 once closed
  MuxStats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  explicit MuxTrunk(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
};

// An in-memory pair of links (for tests and for in-process peers): bytes
// sent on one arrive on the other from a deferred loop callback.
std::pair<std::shared_ptr<ByteLink>, std::shared_ptr<ByteLink>> MakeLinkPair(Loop* loop);

}  // namespace outpost::wire
