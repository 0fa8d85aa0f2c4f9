// libFuzzer target for wire/mux: the input (after two control bytes) is
// written into a socketpair in chunks whose sizes come from the input, and
// read by a MuxTrunk with links 1 and 2 open. Each link's bytes feed a
// FrameReader; link 2 echoes every complete ttRPC frame back through
// ByteLink::Send. Checks: the trunk ends closed (the writer hangs up), every
// link hears of it exactly once, the echoes come out on the socket as mux
// frames for connection 2 that follow the sending rule and concatenate to
// what was sent, and nothing crashes or leaks.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/fd.h"
#include "base/log.h"
#include "loop/loop.h"
#include "wire/frame.h"
#include "wire/mux.h"

namespace {

using outpost::wire::Frame;
using outpost::wire::FrameReader;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

uint32_t Be32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct Receiver {
  FrameReader reader{1024};  // small: the oversize path runs on small inputs
  int closes = 0;
  std::string echoed;  // what link 2 sent back
};

void Drain(Receiver* r, const std::shared_ptr<outpost::wire::ByteLink>& echo_to) {
  Frame f;
  for (;;) {
    FrameReader::Event ev = r->reader.Next(&f);
    if (ev == FrameReader::Event::kNeedMore) break;
    if (ev != FrameReader::Event::kFrame || !echo_to) continue;
    std::string whole;
    outpost::wire::AppendFrame(&whole, f.header.stream_id, outpost::wire::FrameType::kResponse, 0, f.payload);
    if (echo_to->Send(whole)) r->echoed += whole;
  }
}

// Parses the trunk's output: mux frames for connection 2 that never start
// a message with more than 4096 bytes and never pack two messages, carrying
// a prefix of what was sent (a close drops what was still queued; the
// socket may hold the start of a frame).
void CheckOutput(const std::string& out, const std::string& echoed) {
  std::string joined;
  size_t msg_left = 0;  // bytes of the current ttRPC message still to come
  size_t at = 0;
  while (at + outpost::wire::kMuxHeaderSize <= out.size()) {
    Check(Be32(out, at) == 2);
    size_t len = Be32(out, at + 4);
    if (at + outpost::wire::kMuxHeaderSize + len > out.size()) break;
    std::string payload = out.substr(at + outpost::wire::kMuxHeaderSize, len);
    if (msg_left == 0) {
      Check(len >= outpost::wire::kFrameHeaderSize && len <= outpost::wire::kMuxFirstFrameMax);
      msg_left = outpost::wire::kFrameHeaderSize + Be32(payload, 0);
    }
    Check(len <= msg_left);
    msg_left -= len;
    joined += payload;
    at += outpost::wire::kMuxHeaderSize + len;
  }
  Check(out.size() - at < outpost::wire::kMuxHeaderSize + outpost::wire::kMuxFirstFrameMax + (4u << 20));
  Check(joined.size() <= echoed.size() && echoed.compare(0, joined.size(), joined) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static bool quiet = [] {
    outpost::log::SetLevel(outpost::log::Level::kError);
    return true;
  }();
  (void)quiet;
  const uint8_t pattern = data[0];
  outpost::wire::MuxOptions opts;
  opts.max_frame = data[1] & 1 ? 256 : opts.max_frame;
  opts.max_queued_bytes = 1 << 20;
  const uint8_t* p = data + 2;
  size_t left = size - 2;

  auto loop = outpost::Loop::Create();
  Check(loop.ok());
  int sv[2];
  Check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
  outpost::UniqueFd writer(sv[1]);
  auto trunk = outpost::wire::MuxTrunk::Create(loop->get(), outpost::UniqueFd(sv[0]), opts);
  Check(trunk.ok());
  int trunk_closes = 0;
  (*trunk)->SetCloseCallback([&](const outpost::Error&) { ++trunk_closes; });
  Receiver r1;
  Receiver r2;
  auto l1 = (*trunk)->Open(1);
  auto l2 = (*trunk)->Open(2);
  l1->SetReceiver(
      [&](std::string_view b) {
        r1.reader.Feed(b.data(), b.size());
        Drain(&r1, nullptr);
      },
      [&](const outpost::Error&) { ++r1.closes; });
  l2->SetReceiver(
      [&](std::string_view b) {
        r2.reader.Feed(b.data(), b.size());
        Drain(&r2, l2);
      },
      [&](const outpost::Error&) { ++r2.closes; });
  Check((*trunk)->Start().ok());

  std::string out;
  auto read_out = [&] {
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(writer.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0) out.append(buf, static_cast<size_t>(n));
  };
  size_t i = 0;
  while (left > 0 && !(*trunk)->closed()) {
    size_t chunk = 1 + ((pattern >> (i % 8)) & 1 ? (i * 31 + pattern) % 509 : pattern % 17);
    if (chunk > left) chunk = left;
    ssize_t n = ::send(writer.get(), p, chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
    } else {
      Check(n < 0 && (errno == EAGAIN || errno == EPIPE || errno == ECONNRESET));
      if (errno != EAGAIN) break;
    }
    Check((*loop)->RunOnce(0).ok());
    read_out();
    ++i;
  }
  ::shutdown(writer.get(), SHUT_WR);
  for (int turns = 0; trunk_closes == 0; ++turns) {
    Check(turns < 100000);
    Check((*loop)->RunOnce(0).ok());
    read_out();
  }
  Check((*loop)->RunOnce(0).ok());
  read_out();
  Check((*trunk)->closed() && trunk_closes == 1 && r1.closes == 1 && r2.closes == 1);
  Check(!l1->Send("0123456789"));
  CheckOutput(out, r2.echoed);
  return 0;
}
