// ttRPC benchmark: unary round-trip latency (p50, p99) and throughput on 1
// and 16 connections, each against a raw unix-socket echo of the same
// payload size measured in the same run. A forked server process runs one
// Loop (one core) serving both an RpcServer with an echo handler and a raw
// byte echo; the parent process is the client.
//
// Output, one line per figure:
//   BENCH <name> <value> <unit> baseline=<name> <baseline value> ratio=<value/baseline>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "wire/frame.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"
#include "bench_util.h"

namespace outpost {
namespace {

using bench::Die;
using bench::OrDie;
using bench::Print;

constexpr size_t kPayload = 128;
constexpr int64_t kLatencyNanos = 1000 * kNanosPerMilli;  // echo and RPC together
constexpr int64_t kThroughputNanos = 500 * kNanosPerMilli;
constexpr int kWindowPerConn = 64;

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);  // best effort: fewer CPUs is fine
}

// ---- server process -----------------------------------------------------------

struct EchoConn {
  UniqueFd fd;
  wire::WriteQueue out;
};

void RunServer(const std::string& rpc_path, const std::string& echo_path, int ready_fd, int stop_fd) {
  auto loop = OrDie(Loop::Create(), "loop");
  auto server = OrDie(wire::RpcServer::Create(loop.get(), OrDie(sys::UnixListen(rpc_path, 128), "listen"), {}),
                      "server");
  server->Register("bench.v1.Bench", "Echo",
                   [](const wire::CallContext&, std::string_view p, wire::Responder r) { r.Reply(p); });
  UniqueFd echo_listen = OrDie(sys::UnixListen(echo_path, 128), "listen echo");
  std::vector<std::unique_ptr<EchoConn>> echo_conns;
  Loop* lp = loop.get();
  auto status = loop->AddFd(echo_listen.get(), EPOLLIN, [&, lp](uint32_t) {
    auto fd = sys::Accept(echo_listen.get());
    if (!fd.ok()) return;
    auto conn = std::make_unique<EchoConn>();
    conn->fd = std::move(*fd);
    EchoConn* c = conn.get();
    echo_conns.push_back(std::move(conn));
    (void)lp->AddFd(c->fd.get(), EPOLLIN, [c, lp](uint32_t events) {
      if (events & EPOLLOUT) (void)c->out.Flush(c->fd.get());
      if (events & (EPOLLIN | EPOLLHUP)) {
        char buf[16384];
        ssize_t n = sys::Read(c->fd.get(), buf, sizeof buf);
        if (n <= 0) {
          if (n == 0 || errno != EAGAIN) {
            lp->RemoveFd(c->fd.get());
            c->fd.Reset();
          }
          return;
        }
        c->out.buffer()->append(buf, static_cast<size_t>(n));
        (void)c->out.Flush(c->fd.get());
      }
      (void)lp->ModifyFd(c->fd.get(), EPOLLIN | (c->out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT)));
    });
  });
  if (!status.ok()) Die("echo", status.error().message());
  status = loop->AddFd(stop_fd, EPOLLIN, [lp](uint32_t) { lp->Stop(); });
  if (!status.ok()) Die("stop pipe", status.error().message());
  char one = 1;
  if (sys::Write(ready_fd, &one, 1) != 1) Die("ready pipe", std::strerror(errno));
  (void)loop->Run();
}

// ---- latency ------------------------------------------------------------------

struct Percentiles {
  double p50_us;
  double p99_us;
};

Percentiles Summarise(std::vector<int64_t>* samples) {
  return {bench::PercentileMicros(*samples, 0.50), bench::PercentileMicros(*samples, 0.99)};
}

// Round trips on persistent connections, echo and RPC alternating in short
// rounds so that background load affects both figures alike.
void Latency(const std::string& echo_path, const std::string& rpc_path, const std::string& payload,
             Percentiles* echo, Percentiles* rpc) {
  UniqueFd efd = OrDie(sys::UnixConnect(echo_path, false), "connect echo");
  auto client = OrDie(wire::BlockingClient::Connect(rpc_path, kNanosPerSecond), "connect rpc");
  std::string buf(payload.size(), '\0');
  auto echo_once = [&] {
    Status st = sys::WriteAll(efd.get(), payload.data(), payload.size(), "echo write");
    if (!st.ok()) Die("echo", st.error().message());
    size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = sys::Read(efd.get(), &buf[got], buf.size() - got);
      if (n <= 0) Die("echo read", n == 0 ? "EOF" : std::strerror(errno));
      got += static_cast<size_t>(n);
    }
  };
  auto rpc_once = [&] {
    auto r = client.Call("bench.v1.Bench", "Echo", payload, kNanosPerSecond);
    if (!r.ok() || r->size() != payload.size()) Die("rpc call", r.ok() ? "short reply" : r.error().message());
  };
  for (int i = 0; i < 200; ++i) {  // warm-up
    echo_once();
    rpc_once();
  }
  std::vector<int64_t> echo_samples, rpc_samples;
  constexpr int kRounds = 10;
  for (int round = 0; round < kRounds; ++round) {
    for (int which = 0; which < 2; ++which) {
      int64_t end = MonotonicNanos() + kLatencyNanos / (2 * kRounds);
      for (;;) {
        int64_t t0 = MonotonicNanos();
        if (t0 >= end) break;
        if (which == 0) {
          echo_once();
          echo_samples.push_back(MonotonicNanos() - t0);
        } else {
          rpc_once();
          rpc_samples.push_back(MonotonicNanos() - t0);
        }
      }
    }
  }
  *echo = Summarise(&echo_samples);
  *rpc = Summarise(&rpc_samples);
}

// ---- throughput -----------------------------------------------------------------

// Keeps kWindowPerConn calls in flight on each of `conns` RpcClients for
// kThroughputNanos; returns completed calls per second.
double RpcThroughput(const std::string& path, const std::string& payload, int conns) {
  auto loop = OrDie(Loop::Create(), "loop");
  std::vector<std::unique_ptr<wire::RpcClient>> clients;
  for (int i = 0; i < conns; ++i) clients.push_back(OrDie(wire::RpcClient::Connect(loop.get(), path), "connect"));
  uint64_t done = 0;
  bool measuring = false;
  bool stopping = false;
  std::function<void(wire::RpcClient*)> issue = [&](wire::RpcClient* c) {
    c->Call("bench.v1.Bench", "Echo", payload, 10 * kNanosPerSecond, [&, c](Result<std::string> r) {
      if (!r.ok()) Die("rpc call", r.error().message());
      if (measuring) ++done;
      if (!stopping) issue(c);
    });
  };
  for (auto& c : clients) {
    for (int w = 0; w < kWindowPerConn; ++w) issue(c.get());
  }
  int64_t warm_end = MonotonicNanos() + 50 * kNanosPerMilli;
  while (MonotonicNanos() < warm_end) (void)loop->RunOnce(10 * kNanosPerMilli);
  measuring = true;
  int64_t start = MonotonicNanos();
  int64_t end = start + kThroughputNanos;
  while (MonotonicNanos() < end) (void)loop->RunOnce(10 * kNanosPerMilli);
  double elapsed = static_cast<double>(MonotonicNanos() - start) / 1e9;
  measuring = false;
  stopping = true;
  uint64_t counted = done;
  size_t left = 0;
  int64_t drain_end = MonotonicNanos() + kNanosPerSecond;
  do {
    (void)loop->RunOnce(10 * kNanosPerMilli);
    left = 0;
    for (auto& c : clients) left += c->pending_calls();
  } while (left > 0 && MonotonicNanos() < drain_end);
  return static_cast<double>(counted) / elapsed;
}

// The same shape over the raw echo: kWindowPerConn messages of the payload
// size in flight per connection; a message is complete when its bytes are back.
double EchoThroughput(const std::string& path, const std::string& payload, int conns) {
  auto loop = OrDie(Loop::Create(), "loop");
  struct Conn {
    UniqueFd fd;
    wire::WriteQueue out;
    size_t partial = 0;  // bytes of the next message already back
  };
  std::vector<std::unique_ptr<Conn>> cs;
  uint64_t done = 0;
  bool measuring = false;
  Loop* lp = loop.get();
  for (int i = 0; i < conns; ++i) {
    auto c = std::make_unique<Conn>();
    c->fd = OrDie(sys::UnixConnect(path, true), "connect echo");
    for (int w = 0; w < kWindowPerConn; ++w) c->out.buffer()->append(payload);
    (void)c->out.Flush(c->fd.get());
    Conn* raw = c.get();
    Status st = loop->AddFd(raw->fd.get(), EPOLLIN | EPOLLOUT, [&, raw, lp](uint32_t events) {
      if (events & (EPOLLIN | EPOLLHUP)) {
        char buf[16384];
        ssize_t n = sys::Read(raw->fd.get(), buf, sizeof buf);
        if (n == 0) Die("echo", "EOF");
        if (n > 0) {
          raw->partial += static_cast<size_t>(n);
          size_t completed = raw->partial / payload.size();
          raw->partial %= payload.size();
          if (measuring) done += completed;
          for (size_t k = 0; k < completed; ++k) raw->out.buffer()->append(payload);
        }
      }
      (void)raw->out.Flush(raw->fd.get());
      (void)lp->ModifyFd(raw->fd.get(), EPOLLIN | (raw->out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT)));
    });
    if (!st.ok()) Die("echo", st.error().message());
    cs.push_back(std::move(c));
  }
  int64_t warm_end = MonotonicNanos() + 50 * kNanosPerMilli;
  while (MonotonicNanos() < warm_end) (void)loop->RunOnce(10 * kNanosPerMilli);
  measuring = true;
  int64_t start = MonotonicNanos();
  int64_t end = start + kThroughputNanos;
  while (MonotonicNanos() < end) (void)loop->RunOnce(10 * kNanosPerMilli);
  double elapsed = static_cast<double>(MonotonicNanos() - start) / 1e9;
  for (auto& c : cs) loop->RemoveFd(c->fd.get());
  return static_cast<double>(done) / elapsed;
}

int Main() {
  bench::Name() = "rpc_bench";
  log::SetLevel(log::Level::kError);
  char tmpl[] = "/tmp/outpost-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) Die("mkdtemp", std::strerror(errno));
  const std::string dir = tmpl;
  const std::string rpc_path = dir + "/rpc.sock";
  const std::string echo_path = dir + "/echo.sock";
  int ready_fds[2], stop_fds[2];
  if (::pipe2(ready_fds, O_CLOEXEC) != 0) Die("pipe", std::strerror(errno));
  UniqueFd ready_r(ready_fds[0]), ready_w(ready_fds[1]);
  if (::pipe2(stop_fds, O_CLOEXEC) != 0) Die("pipe", std::strerror(errno));
  UniqueFd stop_r(stop_fds[0]), stop_w(stop_fds[1]);
  const bool two_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  pid_t pid = ::fork();
  if (pid < 0) Die("fork", std::strerror(errno));
  if (pid == 0) {
    ready_r.Reset();
    stop_w.Reset();
    if (two_cpus) PinToCpu(0);
    RunServer(rpc_path, echo_path, ready_w.get(), stop_r.get());
    std::_Exit(0);
  }
  ready_w.Reset();
  stop_r.Reset();
  char one;
  if (sys::Read(ready_r.get(), &one, 1) != 1) Die("server", "did not start");
  if (two_cpus) PinToCpu(1);

  const std::string payload(kPayload, 'p');
  Percentiles echo, rpc;
  Latency(echo_path, rpc_path, payload, &echo, &rpc);
  Print("rpc_roundtrip_p50", rpc.p50_us, "us", "echo_roundtrip_p50", echo.p50_us);
  Print("rpc_roundtrip_p99", rpc.p99_us, "us", "echo_roundtrip_p99", echo.p99_us);
  for (int conns : {1, 16}) {
    double e = EchoThroughput(echo_path, payload, conns);
    double r = RpcThroughput(rpc_path, payload, conns);
    std::string name = "rpc_throughput_" + std::to_string(conns) + "conn";
    std::string base = "echo_throughput_" + std::to_string(conns) + "conn";
    Print(name.c_str(), r, "calls/s", base.c_str(), e);
  }

  stop_w.Reset();  // the server loop stops on EOF
  int wstatus = 0;
  (void)sys::RetryEintr([&] { return ::waitpid(pid, &wstatus, 0); });
  ::unlink(rpc_path.c_str());
  ::unlink(echo_path.c_str());
  ::rmdir(dir.c_str());
  return 0;
}

}  // namespace
}  // namespace outpost

int main() { return outpost::Main(); }
