// gRPC benchmark: outpost's gRPC transport (wire::GrpcServer, GrpcClient)
// against its own ttRPC transport, a raw unix socket and Python's grpcio,
// each baseline measured in the same run. A forked server process runs one
// Loop (one core) serving a GrpcServer and an RpcServer (both with an echo
// handler, /bench.v1.Bench/Echo) and a raw byte writer; the parent process
// is the client, on one Loop of its own. Figures:
//
//   grpc_roundtrip_p50/p99   unary 128-byte calls on one connection, one at
//                            a time; baseline rpc_roundtrip_p50/p99: the
//                            same over ttRPC (RpcClient on the same client
//                            loop), alternating in short rounds
//   grpc_stream_msgs_per_s   one server-streaming call of 50,000 1 KiB
//                            messages; baseline raw_unix_write_msgs_per_s:
//                            the server writing the same bytes to a plain
//                            unix socket, one write(2) per message
//   grpc_stream_mb_per_s     the same with 1,000 64 KiB messages; baseline
//                            raw_unix_write_mb_per_s
//   grpc_idle_conn_bytes     the server process's RSS growth per idle
//                            connection: 200 clients connect, make one call
//                            each and stay; baseline rpc_idle_conn_bytes,
//                            the same for ttRPC (a fresh server process each)
//   grpcio_client_to_outpost_p50  Python's grpcio client (tools/bench/
//                            grpc_bench.py, a subprocess that prints its own
//                            percentiles) calling outpost's server; baseline
//                            grpcio_client_to_grpcio_p50: the same client
//                            calling a grpcio server, alternating. Skipped
//                            with a message when /usr/bin/python3 lacks grpc.
//
// Throughputs are printed as rates here (higher is better; the ratio is
// outpost's share of the raw socket's rate), latencies and bytes as such.
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
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/fd.h"
#include "base/log.h"
#include "base/sys.h"
#include "loop/loop.h"
#include "wire/grpc_client.h"
#include "wire/grpc_server.h"
#include "wire/rpc_client.h"
#include "wire/rpc_server.h"
#include "bench_util.h"

namespace outpost {
namespace {

using bench::Die;
using bench::Info;
using bench::OrDie;
using bench::Print;

constexpr const char* kService = "bench.v1.Bench";
constexpr size_t kPayload = 128;
constexpr int64_t kLatencyNanos = 2 * kNanosPerSecond;  // gRPC and ttRPC together
constexpr int kIdleConns = 200;
constexpr int64_t kCallTimeout = 10 * kNanosPerSecond;

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);  // best effort: fewer CPUs is fine
}

// ---- server process -------------------------------------------------------------

// The stream request: "count size" as text.
std::string StreamRequest(size_t count, size_t size) { return std::to_string(count) + " " + std::to_string(size); }

// Writes `count` messages of `size` bytes on a server-streaming call, as
// fast as the stream's queue takes them, then OK.
struct StreamWriter : std::enable_shared_from_this<StreamWriter> {
  std::weak_ptr<wire::GrpcCall> call;
  std::string message;
  size_t left = 0;
  void Pump() {
    auto c = call.lock();
    if (!c) return;
    while (left > 0) {
      Status st = c->Write(message);
      if (!st.ok()) return;  // ResourceExhausted: OnWritable calls again; else the call is over
      --left;
    }
    c->Finish(OkStatus());
  }
};

// A raw connection of the writer: reads "count size\n", then writes count
// messages of size bytes, one write(2) each (partial writes completed).
struct RawConn {
  UniqueFd fd;
  std::string request;
  std::string message;
  size_t left = 0, off = 0;
  bool writing = false;
};

struct ServerSpec {
  std::string grpc_path, rpc_path, raw_path;  // "" = not served
  size_t max_connections = 64;
};

void RunServer(const ServerSpec& spec, int ready_fd, int stop_fd) {
  auto loop = OrDie(Loop::Create(), "loop");
  Loop* lp = loop.get();
  std::unique_ptr<wire::GrpcServer> grpc;
  std::unique_ptr<wire::RpcServer> rpc;
  if (!spec.grpc_path.empty()) {
    wire::GrpcServerOptions opts;
    opts.name = "bench";
    opts.max_connections = spec.max_connections;
    grpc = OrDie(wire::GrpcServer::Create(lp, OrDie(sys::UnixListen(spec.grpc_path, 512), "listen"), opts), "grpc");
    grpc->Register(kService, "Echo", [](const wire::GrpcCallContext&, std::string_view p, wire::GrpcResponder r) {
      r.Reply(p);
    });
    grpc->RegisterStream(kService, "Stream", [](const wire::GrpcCallContext&, std::shared_ptr<wire::GrpcCall> c) {
      auto w = std::make_shared<StreamWriter>();
      w->call = c;
      c->OnMessage([w](std::string_view req) {
        size_t count = 0, size = 0;
        if (std::sscanf(std::string(req).c_str(), "%zu %zu", &count, &size) != 2) Die("stream", "bad request");
        w->left = count;
        w->message.assign(size, 'm');
      });
      c->OnHalfClose([w] { w->Pump(); });
      c->OnWritable([w] { w->Pump(); });
    });
  }
  if (!spec.rpc_path.empty()) {
    wire::ServerOptions opts;
    opts.name = "bench";
    opts.max_connections = opts.max_connections_per_uid = spec.max_connections;
    rpc = OrDie(wire::RpcServer::Create(lp, OrDie(sys::UnixListen(spec.rpc_path, 512), "listen"), opts), "rpc");
    rpc->Register(kService, "Echo",
                  [](const wire::CallContext&, std::string_view p, wire::Responder r) { r.Reply(p); });
  }
  UniqueFd raw_listen;
  std::vector<std::unique_ptr<RawConn>> raw_conns;
  if (!spec.raw_path.empty()) {
    raw_listen = OrDie(sys::UnixListen(spec.raw_path, 16), "listen raw");
    Status st = lp->AddFd(raw_listen.get(), EPOLLIN, [&, lp](uint32_t) {
      auto fd = sys::Accept(raw_listen.get());
      if (!fd.ok()) return;
      raw_conns.push_back(std::make_unique<RawConn>());
      RawConn* c = raw_conns.back().get();
      c->fd = std::move(*fd);
      (void)lp->AddFd(c->fd.get(), EPOLLIN, [c, lp](uint32_t) {
        if (!c->writing) {
          char buf[64];
          ssize_t n = sys::Read(c->fd.get(), buf, sizeof buf);
          if (n < 0 && errno == EAGAIN) return;
          if (n <= 0) return lp->RemoveFd(c->fd.get());
          c->request.append(buf, static_cast<size_t>(n));
          if (c->request.find('\n') == std::string::npos) return;
          size_t size = 0;
          if (std::sscanf(c->request.c_str(), "%zu %zu", &c->left, &size) != 2) Die("raw", "bad request");
          c->message.assign(size, 'm');
          c->writing = true;
          (void)lp->ModifyFd(c->fd.get(), EPOLLOUT);
          return;
        }
        while (c->left > 0) {
          ssize_t n = ::send(c->fd.get(), c->message.data() + c->off, c->message.size() - c->off, MSG_NOSIGNAL);
          if (n < 0) {
            if (errno != EAGAIN) lp->RemoveFd(c->fd.get());
            return;
          }
          c->off += static_cast<size_t>(n);
          if (c->off == c->message.size()) {
            c->off = 0;
            --c->left;
          }
        }
        lp->RemoveFd(c->fd.get());
        c->fd.Reset();
      });
    });
    if (!st.ok()) Die("raw", st.error().message());
  }
  Status st = lp->AddFd(stop_fd, EPOLLIN, [lp](uint32_t) { lp->Stop(); });
  if (!st.ok()) Die("stop pipe", st.error().message());
  char one = 1;
  if (sys::Write(ready_fd, &one, 1) != 1) Die("ready pipe", std::strerror(errno));
  (void)lp->Run();
}

// A forked server process; Stop() ends it (EOF on its stop pipe) and reaps it.
// fresh: the child execs this binary again (`--idle-server KIND SOCKET`,
// ready and stop pipes on fds 3 and 4), so that its heap holds nothing of
// this process's: freed memory it inherited would make the growth it is
// measured for look smaller.
class ServerProcess {
 public:
  ServerProcess(const ServerSpec& spec, bool pin, bool fresh = false) {
    int ready[2], stop[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(stop, O_CLOEXEC) != 0) Die("pipe", std::strerror(errno));
    pid_ = ::fork();
    if (pid_ < 0) Die("fork", std::strerror(errno));
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(stop[1]);
      if (pin) PinToCpu(0);
      if (fresh) {
        const bool grpc = !spec.grpc_path.empty();
        if (::dup2(ready[1], 3) < 0 || ::dup2(stop[0], 4) < 0) std::_Exit(126);
        ::execl("/proc/self/exe", "grpc_bench", "--idle-server", grpc ? "grpc" : "rpc",
                (grpc ? spec.grpc_path : spec.rpc_path).c_str(), static_cast<char*>(nullptr));
        std::_Exit(127);
      }
      RunServer(spec, ready[1], stop[0]);
      std::_Exit(0);
    }
    ::close(ready[1]);
    ::close(stop[0]);
    stop_.Reset(stop[1]);
    char one;
    if (sys::Read(ready[0], &one, 1) != 1) Die("server", "did not start");
    ::close(ready[0]);
  }
  ~ServerProcess() { Stop(); }
  void Stop() {
    if (pid_ <= 0) return;
    stop_.Reset();
    int wstatus = 0;
    (void)sys::RetryEintr([&] { return ::waitpid(pid_, &wstatus, 0); });
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  UniqueFd stop_;
};

// ---- client side ----------------------------------------------------------------

// Runs the loop until *done; dies after `what` took over a minute.
void RunUntil(Loop* loop, const bool* done, const char* what) {
  const int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;
  while (!*done) {
    if (MonotonicNanos() > end) Die(what, "no answer within 60 s");
    (void)loop->RunOnce(100 * kNanosPerMilli);
  }
}

struct Percentiles {
  double p50_us = 0, p99_us = 0;
};
Percentiles Summarise(const std::vector<int64_t>& samples) {
  return {bench::PercentileMicros(samples, 0.50), bench::PercentileMicros(samples, 0.99)};
}

// Unary round trips on one connection each, gRPC and ttRPC alternating in
// short rounds so that background load affects both figures alike.
void Latency(const std::string& grpc_path, const std::string& rpc_path, Percentiles* grpc_out, Percentiles* rpc_out) {
  auto loop = OrDie(Loop::Create(), "loop");
  auto grpc = OrDie(wire::GrpcClient::Connect(loop.get(), grpc_path), "connect grpc");
  auto rpc = OrDie(wire::RpcClient::Connect(loop.get(), rpc_path), "connect rpc");
  const std::string payload(kPayload, 'p');
  auto check = [&](const char* what, bool* done) {
    return [what, done, &payload](Result<std::string> r) {
      if (!r.ok() || *r != payload) Die(what, r.ok() ? "reply differs" : r.error().message());
      *done = true;
    };
  };
  auto once = [&](bool use_grpc) {
    bool done = false;
    const int64_t t0 = MonotonicNanos();
    if (use_grpc) {
      grpc->Call(kService, "Echo", payload, kCallTimeout, check("grpc call", &done));
    } else {
      rpc->Call(kService, "Echo", payload, kCallTimeout, check("rpc call", &done));
    }
    RunUntil(loop.get(), &done, "round trip");
    return MonotonicNanos() - t0;
  };
  for (int i = 0; i < 200; ++i) {  // warm-up
    (void)once(true);
    (void)once(false);
  }
  std::vector<int64_t> samples[2];
  constexpr int kRounds = 10;
  for (int round = 0; round < kRounds; ++round) {
    for (int which = 0; which < 2; ++which) {
      const int64_t end = MonotonicNanos() + kLatencyNanos / (2 * kRounds);
      while (MonotonicNanos() < end) samples[which].push_back(once(which == 0));
    }
  }
  *grpc_out = Summarise(samples[0]);
  *rpc_out = Summarise(samples[1]);
}

// One server-streaming call of count messages of size bytes: seconds.
double GrpcStream(Loop* loop, wire::GrpcClient* client, size_t count, size_t size) {
  size_t got = 0, bytes = 0;
  bool done = false;
  Status status;
  const int64_t t0 = MonotonicNanos();
  auto call = client->StartCall(kService, "Stream", 60 * kNanosPerSecond);
  call->OnMessage([&](std::string_view m) {
    ++got;
    bytes += m.size();
  });
  call->OnDone([&](const Status& st) {
    status = st;
    done = true;
  });
  Status st = call->Write(StreamRequest(count, size));
  if (!st.ok()) Die("stream", st.error().message());
  call->CloseSend();
  RunUntil(loop, &done, "stream");
  const double secs = static_cast<double>(MonotonicNanos() - t0) / 1e9;
  if (!status.ok()) Die("stream", status.error().message());
  if (got != count || bytes != count * size) Die("stream", std::to_string(got) + " messages received");
  return secs;
}

// The same bytes from the raw writer: seconds.
double RawStream(const std::string& path, size_t count, size_t size) {
  const int64_t t0 = MonotonicNanos();
  UniqueFd fd = OrDie(sys::UnixConnect(path, false), "connect raw");
  const std::string req = StreamRequest(count, size) + "\n";
  Status st = sys::WriteAll(fd.get(), req.data(), req.size(), "raw request");
  if (!st.ok()) Die("raw", st.error().message());
  std::vector<char> buf(256 << 10);
  size_t total = 0;
  while (total < count * size) {
    ssize_t n = sys::Read(fd.get(), buf.data(), buf.size());
    if (n <= 0) Die("raw read", n == 0 ? "EOF" : std::strerror(errno));
    total += static_cast<size_t>(n);
  }
  return static_cast<double>(MonotonicNanos() - t0) / 1e9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of 5 runs each, the two kinds alternating.
void Streams(const std::string& grpc_path, const std::string& raw_path, size_t count, size_t size, double* grpc_secs,
             double* raw_secs) {
  auto loop = OrDie(Loop::Create(), "loop");
  auto client = OrDie(wire::GrpcClient::Connect(loop.get(), grpc_path), "connect grpc");
  (void)GrpcStream(loop.get(), client.get(), count / 10, size);  // warm-up
  std::vector<double> g, r;
  for (int i = 0; i < 5; ++i) {
    g.push_back(GrpcStream(loop.get(), client.get(), count, size));
    r.push_back(RawStream(raw_path, count, size));
  }
  *grpc_secs = Median(g);
  *raw_secs = Median(r);
}

// RSS growth of a fresh server process per connection: kIdleConns clients
// connect, make one call each and stay open while it is measured.
double IdleConnBytes(bool grpc, const std::string& dir) {
  ServerSpec spec;
  (grpc ? spec.grpc_path : spec.rpc_path) = dir + (grpc ? "/idle-grpc.sock" : "/idle-rpc.sock");
  spec.max_connections = 4 * kIdleConns;
  ServerProcess server(spec, false, true);
  const long before = bench::SettledRssKiB(server.pid());
  auto loop = OrDie(Loop::Create(), "loop");
  std::vector<std::unique_ptr<wire::GrpcClient>> grpcs;
  std::vector<std::unique_ptr<wire::RpcClient>> rpcs;
  int answered = 0;
  auto cb = [&answered](Result<std::string> r) {
    if (!r.ok()) Die("idle connection's call", r.error().message());
    ++answered;
  };
  const std::string payload(kPayload, 'p');
  for (int i = 0; i < kIdleConns; ++i) {
    if (grpc) {
      grpcs.push_back(OrDie(wire::GrpcClient::Connect(loop.get(), spec.grpc_path), "connect grpc"));
      grpcs.back()->Call(kService, "Echo", payload, kCallTimeout, cb);
    } else {
      rpcs.push_back(OrDie(wire::RpcClient::Connect(loop.get(), spec.rpc_path), "connect rpc"));
      rpcs.back()->Call(kService, "Echo", payload, kCallTimeout, cb);
    }
  }
  bool all = false;
  const int64_t end = MonotonicNanos() + 60 * kNanosPerSecond;
  while (!all && MonotonicNanos() < end) {
    (void)loop->RunOnce(100 * kNanosPerMilli);
    all = answered == kIdleConns;
  }
  if (!all) Die("idle connections", std::to_string(answered) + " calls answered");
  const long after = bench::SettledRssKiB(server.pid());
  bench::DescribeMemory(grpc ? "grpc server with idle connections" : "rpc server with idle connections",
                        server.pid());
  server.Stop();
  return static_cast<double>(after - before) * 1024.0 / kIdleConns;
}

// The repository's tools/bench/grpc_bench.py, found upwards from this
// binary (build/bench/grpc_bench); "" if not there.
std::string FindScript() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  self[n] = '\0';
  std::string dir = sys::Dirname(self);
  for (int up = 0; up < 4; ++up) {
    std::string p = dir + "/tools/bench/grpc_bench.py";
    if (::access(p.c_str(), R_OK) == 0) return p;
    dir = sys::Dirname(dir);
  }
  return "";
}

// grpcio's client against outpost's server and against grpcio's own.
void GrpcioFigures(const std::string& outpost_path, const std::string& dir) {
  const std::string script = FindScript();
  if (script.empty()) return Info("grpcio figures skipped: tools/bench/grpc_bench.py not found");
  if (std::system("/usr/bin/python3 -c 'import grpc' >/dev/null 2>&1") != 0) {
    return Info("grpcio figures skipped: /usr/bin/python3 cannot import grpc (tools/deps.sh bench)");
  }
  const std::string py_path = dir + "/grpcio.sock", log = dir + "/grpcio-server.log";
  pid_t py = ::fork();
  if (py < 0) Die("fork", std::strerror(errno));
  if (py == 0) {
    PinToCpu(0);  // the core outpost's server has
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execl("/usr/bin/python3", "python3", script.c_str(), "serve", py_path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const int64_t end = MonotonicNanos() + 30 * kNanosPerSecond;
  for (;;) {
    auto text = sys::ReadFile(log, 4096);
    if (text.ok() && text->find("ready") != std::string::npos) break;
    if (MonotonicNanos() > end) Die("grpcio server", "not ready within 30 s");
    ::usleep(20000);
  }
  const std::string cmd = "/usr/bin/python3 '" + script + "' call '" + outpost_path + "' '" + py_path + "' " +
                          std::to_string(kPayload) + " 4";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) Die("popen", std::strerror(errno));
  Percentiles got[2];
  int seen = 0;
  char line[256];
  while (std::fgets(line, sizeof line, p)) {
    char which = 0;
    double p50 = 0, p99 = 0;
    if (std::sscanf(line, "latency %c %lf %lf", &which, &p50, &p99) == 3 && (which == 'a' || which == 'b')) {
      got[which - 'a'] = {p50, p99};
      ++seen;
    }
  }
  const int rc = ::pclose(p);
  ::kill(py, SIGTERM);
  bench::ReapWithin(py, 5 * kNanosPerSecond);
  if (rc != 0 || seen != 2) {
    Die("grpcio client", "exited " + std::to_string(rc) + " after " + std::to_string(seen) + " figures");
  }
  Info("grpcio client p99: %.1f us to outpost, %.1f us to grpcio", got[0].p99_us, got[1].p99_us);
  Print("grpcio_client_to_outpost_p50", got[0].p50_us, "us", "grpcio_client_to_grpcio_p50", got[1].p50_us);
}

int Main(int argc, char** argv) {
  bench::Name() = "grpc_bench";
  log::SetLevel(log::Level::kError);
  ::signal(SIGPIPE, SIG_IGN);
  if (argc == 4 && std::strcmp(argv[1], "--idle-server") == 0) {  // ServerProcess, fresh
    ServerSpec spec;
    (std::strcmp(argv[2], "grpc") == 0 ? spec.grpc_path : spec.rpc_path) = argv[3];
    spec.max_connections = 4 * kIdleConns;
    RunServer(spec, 3, 4);
    return 0;
  }
  char tmpl[] = "/tmp/outpost-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) Die("mkdtemp", std::strerror(errno));
  const std::string dir = tmpl;
  const bool two_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  ServerSpec spec{dir + "/grpc.sock", dir + "/rpc.sock", dir + "/raw.sock"};
  {
    ServerProcess server(spec, two_cpus);
    if (two_cpus) PinToCpu(1);

    Percentiles grpc, rpc;
    Latency(spec.grpc_path, spec.rpc_path, &grpc, &rpc);
    Print("grpc_roundtrip_p50", grpc.p50_us, "us", "rpc_roundtrip_p50", rpc.p50_us);
    Print("grpc_roundtrip_p99", grpc.p99_us, "us", "rpc_roundtrip_p99", rpc.p99_us);

    double g_small, r_small, g_big, r_big;
    Streams(spec.grpc_path, spec.raw_path, 50000, 1 << 10, &g_small, &r_small);
    Streams(spec.grpc_path, spec.raw_path, 1000, 64 << 10, &g_big, &r_big);
    Info("1 KiB messages: %.1f MB/s gRPC, %.1f MB/s raw; 64 KiB messages: %.0f msgs/s gRPC, %.0f msgs/s raw",
         50000 * 1024 / g_small / 1e6, 50000 * 1024 / r_small / 1e6, 1000 / g_big, 1000 / r_big);
    Print("grpc_stream_msgs_per_s", 50000 / g_small, "msgs/s", "raw_unix_write_msgs_per_s", 50000 / r_small);
    Print("grpc_stream_mb_per_s", 1000 * 65536 / g_big / 1e6, "MB/s", "raw_unix_write_mb_per_s",
          1000 * 65536 / r_big / 1e6);

    GrpcioFigures(spec.grpc_path, dir);
  }
  const double rpc_idle = IdleConnBytes(false, dir);
  const double grpc_idle = IdleConnBytes(true, dir);
  Print("grpc_idle_conn_bytes", grpc_idle, "B", "rpc_idle_conn_bytes", rpc_idle);
  bench::RemoveTree(dir);
  return 0;
}

}  // namespace
}  // namespace outpost

int main(int argc, char** argv) { return outpost::Main(argc, argv); }
