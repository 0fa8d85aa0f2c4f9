#include "job/check_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/strings.h"
#include "net/netns.h"

namespace outpost::job {

NetProbe::NetProbe(Loop* loop, const CheckSpec& check, const std::string& netns, Done done)
    : loop_(loop), done_(std::move(done)), http_(check.type == CheckType::kHttp), timeout_nanos_(check.timeout_nanos) {
  timer_ = loop_->AddTimer(check.timeout_nanos, [this] {
    timer_ = 0;
    Finish(false, "timed out after " + FormatDuration(timeout_nanos_));
  });
  // The outcome of a socket or connect that fails at once is told from the
  // loop too, never from inside the constructor.
  Begin(check, netns);
}

NetProbe::~NetProbe() {
  *alive_ = false;
  if (timer_) loop_->CancelTimer(timer_);
}

void NetProbe::FailLater(std::string why) {
  std::weak_ptr<bool> alive = alive_;
  loop_->Defer([this, alive, why] {
    auto a = alive.lock();
    if (a && *a) Finish(false, why);
  });
}

void NetProbe::Begin(const CheckSpec& check, const std::string& netns) {
  UniqueFd fd;
  if (netns.empty()) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) {
      std::string why = std::string("socket: ") + std::strerror(errno);
      return FailLater(why);
    }
    fd = UniqueFd(s);
  } else {
    auto s = net::SocketInNetns(netns, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (!s.ok()) {
      std::string why = s.error().message();
      return FailLater(why);
    }
    fd = std::move(*s);
  }
  sockaddr_in sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(check.port));
  ::inet_pton(AF_INET, check.address.c_str(), &sa.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno != EINPROGRESS) {
    std::string why = std::string("connect: ") + std::strerror(errno);
    return FailLater(why);
  }
  if (http_) request_ = HttpCheckRequest(check.address, check.port, check.path);
  auto w = LoopFd::Watch(loop_, std::move(fd), EPOLLOUT, [this](uint32_t ev) { OnEvents(ev); });
  if (!w.ok()) {
    std::string why = w.error().message();
    return FailLater(why);
  }
  sock_ = std::move(*w);
}

void NetProbe::OnEvents(uint32_t events) {
  if (!connected_) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(sock_.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) return Finish(false, std::string("connect: ") + std::strerror(err));
    if (!(events & EPOLLOUT)) return;
    connected_ = true;
    if (!http_) return Finish(true, "connected");
  }
  if (sent_ < request_.size()) {
    ssize_t n = ::send(sock_.get(), request_.data() + sent_, request_.size() - sent_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return Finish(false, std::string("send: ") + std::strerror(errno));
    }
    sent_ += static_cast<size_t>(n);
    if (sent_ == request_.size()) (void)sock_.Modify(EPOLLIN);
    return;
  }
  char buf[4096];
  ssize_t n = ::recv(sock_.get(), buf, sizeof buf, 0);
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR) return;
    return Finish(false, std::string("recv: ") + std::strerror(errno));
  }
  HttpResponseParser::State st =
      n == 0 ? parser_.Finish() : parser_.Feed(buf, static_cast<size_t>(n));
  if (st == HttpResponseParser::State::kNeedMore) return;
  if (st == HttpResponseParser::State::kError) return Finish(false, "bad response: " + parser_.error());
  int code = parser_.status();
  std::string out = std::to_string(code) + (parser_.reason().empty() ? "" : " " + parser_.reason());
  Finish(code >= 200 && code < 400, out);
}

void NetProbe::Finish(bool ok, std::string output) {
  if (!done_) return;
  if (timer_) loop_->CancelTimer(timer_);
  timer_ = 0;
  sock_.Reset();
  Done done = std::move(done_);
  done_ = nullptr;
  ProbeResult r;
  r.ok = ok;
  r.output = std::move(output);
  done(r);  // may destroy this
}

}  // namespace outpost::job
