// The fixture shared by the wire/rpc_server and wire/rpc_client tests: a
// real Loop and a unix socket in a temporary directory, and a raw peer that
// writes hand-made frames and reads the server's answers. No sleeps: the loop
// is driven until a condition holds or a deadline passes (then the test
// fails).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "wire/codec.h"
#include "wire/frame.h"
#include "wire/rpc_server.h"

namespace outpost::wire::rpctest {

inline constexpr int64_t kWait = 5 * kNanosPerSecond;

inline std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s.push_back(static_cast<char>(c));
  return s;
}

inline std::string RequestFrame(uint32_t stream, std::string_view service, std::string_view method,
                         std::string_view payload, int64_t timeout_nano = 0) {
  Request req;
  req.service = service;
  req.method = method;
  req.payload = payload;
  req.timeout_nano = timeout_nano;
  std::string out;
  EXPECT_TRUE(AppendRequestFrame(stream, req, &out).ok());
  return out;
}

struct GotFrame {
  FrameHeader header;
  std::string payload;
  Response resp() const {
    Response r;
    EXPECT_TRUE(DecodeResponse(payload, &r).ok());
    return r;
  }
};

class RpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetLevel(log::Level::kError);  // refusals are logged at WARN; keep output quiet
    auto loop = Loop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    char tmpl[] = "/tmp/outpost-rpc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/api.sock";
  }
  void TearDown() override {
    server_.reset();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
    log::SetLevel(log::Level::kInfo);
  }

  void StartServer(ServerOptions opts = {}) {
    auto lfd = sys::UnixListen(path_, 64);
    ASSERT_TRUE(lfd.ok()) << lfd.error().message();
    auto s = RpcServer::Create(loop_.get(), std::move(*lfd), std::move(opts));
    ASSERT_TRUE(s.ok());
    server_ = std::move(*s);
    server_->Register("svc", "Echo", [](const CallContext&, std::string_view p, Responder r) { r.Reply(p); });
  }

  bool RunUntil(const std::function<bool()>& pred, int64_t timeout = kWait) {
    int64_t deadline = MonotonicNanos() + timeout;
    while (!pred()) {
      if (MonotonicNanos() >= deadline) return false;
      EXPECT_TRUE(loop_->RunOnce(5 * kNanosPerMilli).ok());
    }
    return true;
  }
  void Spin(int turns) {
    for (int i = 0; i < turns; ++i) ASSERT_TRUE(loop_->RunOnce(0).ok());
  }

  UniqueFd RawConnect() {
    auto fd = sys::UnixConnect(path_, true);
    EXPECT_TRUE(fd.ok());
    return fd.ok() ? std::move(*fd) : UniqueFd();
  }
  // Writes all of data while letting the server run.
  void RawSend(int fd, const std::string& data) {
    size_t off = 0;
    int64_t deadline = MonotonicNanos() + kWait;
    while (off < data.size()) {
      ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      ASSERT_TRUE(n < 0 && errno == EAGAIN) << std::strerror(errno);
      ASSERT_LT(MonotonicNanos(), deadline);
      ASSERT_TRUE(loop_->RunOnce(1 * kNanosPerMilli).ok());
    }
  }
  // Next frame from the server on a raw fd; false on EOF or timeout.
  bool RawRead(int fd, FrameReader* reader, GotFrame* got, int64_t timeout = kWait) {
    bool eof = false;
    bool have = false;
    RunUntil(
        [&] {
          Frame f;
          for (;;) {
            FrameReader::Event ev = reader->Next(&f);
            if (ev == FrameReader::Event::kFrame) {
              got->header = f.header;
              got->payload = std::string(f.payload);
              have = true;
              return true;
            }
            size_t avail;
            char* p = reader->Prepare(&avail);
            ssize_t n = ::recv(fd, p, avail, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN)) {
              eof = true;
              return true;
            }
            if (n < 0) return false;
            reader->Commit(static_cast<size_t>(n));
          }
        },
        timeout);
    (void)eof;
    return have;
  }
  // True once the server has closed fd (read gives EOF or ECONNRESET).
  bool WaitClosed(int fd) {
    return RunUntil([&] {
      for (;;) {
        char buf[65536];
        ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) continue;  // replies sent before the close
        return n == 0 || errno != EAGAIN;
      }
    });
  }
  static bool NothingToRead(int fd) {
    char c;
    ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
    return n < 0 && errno == EAGAIN;
  }

  std::unique_ptr<Loop> loop_;
  std::unique_ptr<RpcServer> server_;
  std::string dir_;
  std::string path_;
};

}  // namespace outpost::wire::rpctest
